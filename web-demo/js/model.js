// The page's model: simulated brokers, the policy knobs, and how both travel in the URL.
//
// The core speaks serde JSON (`RefreshConfig`, `Scenario`); people speak milliseconds.
// This module converts between the two and nothing else, so every other module can work in
// plain numbers. Presets come from the core itself (see engine.js), never from a copy here.

import * as engine from "./engine.js";

export const U32_MAX = 4294967295;

/** The behaviours a click on a broker cycles through, in order. */
export const KINDS = ["healthy", "slow", "hung", "refused", "flaky"];

export const KIND_HELP = {
  healthy: "answers after its RTT",
  slow: "answers after a random time in [min, max]",
  hung: "accepts the connection, never answers",
  refused: "refuses the connection",
  flaky: "closes the connection with probability p, otherwise answers",
};

/** A new healthy broker: 5 ms to answer, 1 ms handshake (a LAN). */
export function newBroker(kind = "healthy") {
  return { kind, rtt: 5, min: 200, max: 800, p: 0.5, hs: 1 };
}

/** `stagger demo`'s cluster: six brokers, the first two hung and the next one down. */
export function defaultBrokers() {
  return ["hung", "hung", "refused", "healthy", "healthy", "healthy"].map((k) => newBroker(k));
}

export function nextKind(kind) {
  return KINDS[(KINDS.indexOf(kind) + 1) % KINDS.length];
}

// ---- durations -------------------------------------------------------------------------

/** Milliseconds (µs precision) → serde `Duration`. */
export function dur(ms) {
  const us = Math.max(0, Math.round(Number(ms) * 1000));
  return { secs: Math.floor(us / 1e6), nanos: (us % 1e6) * 1000 };
}

/** serde `Duration` → milliseconds. */
export function ms(d) {
  return d.secs * 1000 + Math.round(d.nanos / 1000) / 1000;
}

/** A time in µs as people read it: `0.25 ms`, `15.2 ms`, `3.47 s`, `1 min 2 s`. */
export function fmtUs(us) {
  if (us == null || !isFinite(us)) return "—";
  const msv = us / 1000;
  if (msv < 1) return `${trim(msv, 3)} ms`;
  if (msv < 10) return `${trim(msv, 2)} ms`;
  if (msv < 1000) return `${trim(msv, 1)} ms`;
  const s = msv / 1000;
  if (s < 60) return `${trim(s, s < 10 ? 2 : 1)} s`;
  const rest = Math.round(s % 60);
  return rest ? `${Math.floor(s / 60)} min ${rest} s` : `${Math.round(s / 60)} min`;
}

function trim(x, digits) {
  return String(Number(x.toFixed(digits)));
}

// ---- brokers ---------------------------------------------------------------------------

/** One broker → the simulator's `SimBroker`. */
export function simBroker(b) {
  const behavior = (() => {
    switch (b.kind) {
      case "slow":
        return { kind: "slow", min: dur(Math.min(b.min, b.max)), max: dur(Math.max(b.min, b.max)) };
      case "hung":
        return { kind: "hung" };
      case "refused":
        return { kind: "refused" };
      case "flaky":
        return { kind: "flaky", p: Math.min(1, Math.max(0, b.p)), rtt: dur(b.rtt) };
      default:
        return { kind: "healthy", rtt: dur(b.rtt) };
    }
  })();
  return { behavior, handshake: dur(b.hs) };
}

export function scenario(brokers, seed) {
  return { brokers: brokers.map(simBroker), seed };
}

/** A short label: `healthy 5 ms`, `slow 200–800 ms`, `flaky 50% 5 ms`. */
export function brokerLabel(b) {
  switch (b.kind) {
    case "healthy":
      return `healthy ${b.rtt} ms`;
    case "slow":
      return `slow ${b.min}–${b.max} ms`;
    case "flaky":
      return `flaky ${Math.round(b.p * 100)}% ${b.rtt} ms`;
    default:
      return b.kind;
  }
}

/** URL form of one broker: `hung`, `healthy:5`, `slow:200-800`, `flaky:50:5`, `…@2` for a 2 ms handshake. */
export function encodeBroker(b) {
  let s = b.kind;
  if (b.kind === "healthy") s += `:${b.rtt}`;
  if (b.kind === "slow") s += `:${b.min}-${b.max}`;
  if (b.kind === "flaky") s += `:${round(b.p * 100, 4)}:${b.rtt}`;
  if (b.hs !== 1) s += `@${b.hs}`;
  return s;
}

export function decodeBroker(text) {
  const b = newBroker();
  const [main, hs] = text.split("@");
  const [kind, a, c] = main.split(":");
  if (!KINDS.includes(kind)) throw new Error(`unknown broker behaviour "${kind}"`);
  b.kind = kind;
  if (kind === "healthy" && a != null) b.rtt = num(a);
  if (kind === "slow" && a != null) [b.min, b.max] = a.split("-").map(num);
  if (kind === "flaky") {
    if (a != null) b.p = num(a) / 100;
    if (c != null) b.rtt = num(c);
  }
  if (hs != null) b.hs = num(hs);
  return b;
}

function num(s) {
  const x = Number(s);
  if (!isFinite(x) || x < 0) throw new Error(`not a number: "${s}"`);
  return x;
}

function round(x, digits) {
  return Number(x.toFixed(digits));
}

// ---- policy knobs ----------------------------------------------------------------------

/**
 * Every knob of `RefreshConfig`, from the core's own schema (`stagger::config::knobs`, via
 * the engine): nothing here lists them, so a knob added in the core appears on the page.
 * Each: `key` (the dotted path: URL parameter and `data-knob`), `id` (the input's id),
 * `label`, `group`, `kind` (duration, u32, u64, f64, bool, choice), `choices` (text forms
 * for a choice), `help` (the core's one-line doc), `when` (for a choice's variant's own
 * knobs: shown only while that variant is chosen). Values are the core's text (`1.5s`,
 * `linear:2`, `adaptive`, `true`); the engine turns them into a config. The seed travels
 * separately (its own control and URL parameter), so it is not a knob here.
 */
export let KNOBS = [];

/** Builds `KNOBS` from the engine's schema; call once the engine is loaded. */
export function loadKnobs(schema = engine.knobs()) {
  const refresh = schema.filter((k) => k.scope === "refresh" && k.path !== "seed");
  const choices = refresh.filter((k) => k.kind.kind === "choice");
  KNOBS = refresh.map((k) => {
    const parts = k.path.split(".");
    // A choice's variant's knob (`fanout.stagger.adaptive.cold`) belongs with the choice.
    const owner = choices.find((c) => k.path.startsWith(`${c.path}.`));
    const variant = owner ? k.path.slice(owner.path.length + 1).split(".")[0] : null;
    const groupPath = (owner ? owner.path : k.path).split(".").slice(0, -1).join(".");
    return {
      key: k.path,
      id: `knob-${k.path.replaceAll(".", "-")}`,
      label: parts[parts.length - 1].replaceAll("_", " "),
      group: groupPath || "limits",
      kind: k.kind.kind,
      // The variants to offer: the default itself where it is that variant, else `name:`.
      choices: k.kind.kind === "choice"
        ? k.kind.choices.map((c) => (!c.param ? c.name : k.default?.startsWith(`${c.name}:`) ? k.default : `${c.name}:`))
        : null,
      help: `${k.doc} (${k.path})`,
      default: k.default,
      when: owner ? (values) => String(values[owner.path] ?? "").split(":")[0] === variant : null,
    };
  });
  return KNOBS;
}

/** The groups of `KNOBS`, in schema order. */
export function knobGroups() {
  return [...new Set(KNOBS.map((k) => k.group))];
}

/**
 * `RefreshConfig` → knob values (text, by path). Knobs that do not apply to `c` (an adaptive
 * parameter under a fixed stagger) keep their value in `fallback`, so switching back to
 * adaptive restores them.
 */
export function knobsFromConfig(c, fallback = null) {
  const values = engine.knobValues(c);
  const k = {};
  for (const knob of KNOBS) k[knob.key] = values[knob.key] ?? fallback?.[knob.key] ?? knob.default;
  return k;
}

/**
 * Knob values + seed → `RefreshConfig`, laid over `base` (a preset from the core): any field
 * the panel has no knob for keeps the preset's value. A value the core refuses leaves that
 * field at the preset's (the inputs never hold one: parseKnob checks them first).
 */
export function configFromKnobs(k, seed, base) {
  const answer = engine.setKnobs(base, k);
  const config = answer.config ?? structuredClone(base);
  return { ...config, seed: Math.max(0, Math.floor(Number(seed) || 0)) };
}

/** A knob's value as text (for inputs and URLs): the core's own text; `1`/`0` for switches. */
export function knobText(knob, v) {
  if (knob.kind === "bool") return String(v) === "true" ? "1" : "0";
  return String(v);
}

/** Parses a knob's text as the core would; throws with the core's message. */
export function parseKnob(knob, text) {
  let t = String(text).trim();
  if (knob.kind === "bool") t = ["1", "true", "on", "yes"].includes(t) ? "true" : "false";
  const error = engine.checkKnob(knob.key, t);
  if (error) throw new Error(`${knob.label}: ${error}`);
  return t;
}

/** Structural equality of JSON values, ignoring key order. */
export function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || !a || !b) return false;
  const ka = Object.keys(a), kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => deepEqual(a[k], b[k]));
}

/** Whether two configs are the same policy (seeds aside). */
export function samePolicy(a, b) {
  return deepEqual({ ...a, seed: 0 }, { ...b, seed: 0 });
}

// ---- the URL ---------------------------------------------------------------------------

/**
 * The whole simulation state as hash parameters: `view`, `preset`, `seed`, `b` (brokers),
 * every knob, and the cursor `t` (µs). Every knob is written, not just those that differ
 * from the preset, so a link keeps meaning the same run if a preset's defaults change.
 */
export function encodeHash(s) {
  const p = new URLSearchParams();
  p.set("view", s.view);
  p.set("preset", s.preset);
  p.set("seed", String(s.seed));
  p.set("b", s.brokers.map(encodeBroker).join(","));
  for (const knob of KNOBS) p.set(knob.key, knobText(knob, s.knobs[knob.key]));
  if (s.axis && s.axis !== "fit") p.set("axis", s.axis);
  if (s.t != null) p.set("t", String(Math.round(s.t)));
  return "#" + p.toString().replace(/%2C/g, ",").replace(/%3A/g, ":").replace(/%40/g, "@");
}

/**
 * Reads hash parameters over `base` (the defaults); unknown keys are ignored, bad values
 * are reported in `errors` and left at their default.
 */
export function decodeHash(hash, base, presetConfigs) {
  const p = new URLSearchParams(hash.replace(/^#/, ""));
  const s = structuredClone(base);
  const errors = [];
  if (p.has("view")) s.view = p.get("view");
  if (p.has("preset") && presetConfigs[p.get("preset")]) {
    s.preset = p.get("preset");
    s.knobs = knobsFromConfig(presetConfigs[s.preset], s.knobs);
  } else if (p.has("preset")) {
    s.preset = "custom";
  }
  if (p.has("seed")) {
    const x = Number(p.get("seed"));
    if (Number.isInteger(x) && x >= 0) s.seed = x;
    else errors.push(`seed: not a whole number`);
  }
  if (p.has("b")) {
    try {
      const list = p.get("b").split(",").filter(Boolean).map(decodeBroker);
      if (list.length) s.brokers = list.slice(0, 32);
    } catch (e) {
      errors.push(`brokers: ${e.message}`);
    }
  }
  for (const knob of KNOBS) {
    if (!p.has(knob.key)) continue;
    try {
      s.knobs[knob.key] = parseKnob(knob, p.get(knob.key));
    } catch (e) {
      errors.push(e.message);
    }
  }
  if (p.has("axis")) s.axis = p.get("axis");
  if (p.has("t")) {
    const t = Number(p.get("t"));
    if (isFinite(t) && t >= 0) s.t = t;
  }
  return { state: s, errors };
}
