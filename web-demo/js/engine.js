// The wasm engine (crate `stagger-demo`): the core and its simulator, JSON in, JSON out.

import init, * as wasm from "../pkg/stagger_demo.js";

let ready = null;

/** Loads the wasm module once; every other call awaits this first. */
export function load() {
  ready ??= init();
  return ready;
}

/** `[{name, config}]` — the core's presets. */
export function presets() {
  return JSON.parse(wasm.presets());
}

/** Runs one refresh in virtual time; `{report, summary, timeline, give_up}` or `{error}`. */
export function simulate(scenario, config) {
  return JSON.parse(wasm.simulate(JSON.stringify(scenario), JSON.stringify(config)));
}

/** `seeds` refreshes per series; `{series: [{name, ttm_us, started, reached, error?}]}` or `{error}`. */
export function compare(scenario, series, seeds, baseSeed) {
  return JSON.parse(wasm.compare(JSON.stringify(scenario), JSON.stringify(series), seeds, baseSeed));
}

/** Replays a trace's JSON text through the core; `{verdict, divergence?, report, …}`. */
export function replay(traceText) {
  return JSON.parse(wasm.replay(traceText));
}

/** `{ok: true}` or `{error, field}`. */
export function validate(config) {
  return JSON.parse(wasm.validate(JSON.stringify(config)));
}

/** The core's knob schema: `[{path, scope, kind, doc, default}]`. */
export function knobs() {
  return JSON.parse(wasm.knobs());
}

/** Every refresh knob of `config` as the core's text, by path (`null` where one does not apply). */
export function knobValues(config) {
  return JSON.parse(wasm.knob_values(JSON.stringify(config)));
}

/** Sets knobs (text, by path) over `base`; `{config}` or `{error, field}`. */
export function setKnobs(base, values) {
  return JSON.parse(wasm.set_knobs(JSON.stringify(base), JSON.stringify(values)));
}

let words = null;

/** The core's words, by serde name: `{cancel_reasons: {name: {text, help}}, timers: {name: text}}`. */
export function vocabulary() {
  words ??= JSON.parse(wasm.vocabulary());
  return words;
}

/** An `AttemptError` (`what = "attempt_error"`), a `GiveUpReason` (`"give_up_reason"`) or a
 *  `BrokerFailure` (`"broker_failure"`: one broker's story in a give-up) in the core's own words
 *  (its `Display`); the value's JSON if the core cannot read it. */
export function describe(what, value) {
  const answer = JSON.parse(wasm.describe(what, JSON.stringify(value)));
  return typeof answer === "string" ? answer : JSON.stringify(value);
}

/** The core's events (`stagger::report::Event`, any mode's) in words, one line each; `addresses`
 *  are the lanes', which name the brokers. */
export function describeEvents(events, addresses) {
  const answer = JSON.parse(wasm.describe_events(JSON.stringify(events), JSON.stringify(addresses)));
  return Array.isArray(answer) ? answer : events.map((e) => e.event);
}

let defaultConfig = null;

/** The core's complaint about `text` for the knob at `path`, or `null` if it takes it. */
export function checkKnob(path, text) {
  defaultConfig ??= presets()[0].config;
  const answer = setKnobs(defaultConfig, { [path]: text });
  return answer.error ?? null;
}
