// The page's model: simulated brokers, the policy knobs, and how both travel in the URL.
//
// The core speaks serde JSON (`RefreshConfig`, `Scenario`); people speak milliseconds.
// This module converts between the two and nothing else, so every other module can work in
// plain numbers. Presets come from the core itself (see engine.js), never from a copy here.

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
 * Every knob of `RefreshConfig`, flat, durations in ms. `key` is the URL parameter;
 * `kind` drives the input: int (with "all" = u32::MAX where `all` is set), float, ms, bool.
 */
export const KNOBS = [
  { key: "initial", label: "initial attempts", kind: "int", all: true, group: "fan-out",
    help: "attempts started at once (fanout.initial)" },
  { key: "stagger", label: "stagger", kind: "choice", choices: ["adaptive", "fixed"], group: "fan-out",
    help: "delay before the next attempt: adaptive (learns from the handshake) or fixed" },
  { key: "fixed", label: "fixed delay", kind: "ms", group: "fan-out", when: (k) => k.stagger === "fixed",
    help: "Stagger::Fixed(d)" },
  { key: "cold", label: "cold delay", kind: "ms", group: "fan-out", when: (k) => k.stagger === "adaptive",
    help: "wait while nothing is known (RFC 8305: 250 ms)" },
  { key: "mult", label: "× handshake", kind: "int", group: "fan-out", when: (k) => k.stagger === "adaptive",
    help: "suspect a connected, silent broker this multiple of its handshake after the handshake" },
  { key: "floor", label: "floor", kind: "ms", group: "fan-out", when: (k) => k.stagger === "adaptive",
    help: "lower clamp of the adaptive delay" },
  { key: "ceil", label: "ceiling", kind: "ms", group: "fan-out", when: (k) => k.stagger === "adaptive",
    help: "upper clamp of the adaptive delay" },
  { key: "q", label: "quantile", kind: "float", group: "fan-out", when: (k) => k.stagger === "adaptive",
    help: "quantile of recent response times a warm client waits for (Cluster only)" },
  { key: "patience", label: "patience ×", kind: "int", group: "fan-out", when: (k) => k.stagger === "adaptive",
    help: "once a broker is answering, hedge only after this multiple of what an answer takes, from the attempt's start" },
  { key: "growth", label: "growth", kind: "choice", choices: ["linear", "exponential"], group: "fan-out",
    help: "how many attempts start at each stagger tick" },
  { key: "gn", label: "per tick", kind: "int", group: "fan-out", when: (k) => k.growth === "linear",
    help: "Linear(n): n more attempts per tick" },
  { key: "gx", label: "factor", kind: "float", group: "fan-out", when: (k) => k.growth === "exponential",
    help: "Exponential(x): tick k starts initial·x^k attempts" },
  { key: "inflight", label: "max in flight", kind: "int", all: true, group: "fan-out",
    help: "throttle on concurrent attempts" },
  { key: "jitter", label: "jitter", kind: "float", group: "fan-out",
    help: "fraction of each stagger delay that is randomised, 0–1" },
  { key: "nof", label: "next on failure", kind: "bool", group: "fan-out",
    help: "a fast failure (refused) starts the next attempt at once" },
  { key: "rwf", label: "replace when full", kind: "bool", group: "fan-out",
    help: "at a stagger tick with the throttle full, cancel the newest silent attempt for the next broker" },
  { key: "cso", label: "cancel silent on answer", kind: "bool", group: "fan-out",
    help: "when one broker starts answering, cancel every attempt whose broker has said nothing (overtaken)" },
  { key: "spread", label: "spread ticks", kind: "bool", group: "fan-out",
    help: "start a tick's n attempts one by one, delay / n apart, dropping the rest once a broker answers (if the leader can answer within its share)" },
  { key: "timeout", label: "attempt timeout", kind: "ms", group: "limits",
    help: "one attempt: connect + ApiVersions + Metadata" },
  { key: "deadline", label: "deadline", kind: "ms", group: "limits",
    help: "the whole refresh, enforced on attempts in flight" },
  { key: "retries", label: "retries", kind: "int", group: "retry",
    help: "extra passes over the brokers when every broker failed" },
  { key: "backoff", label: "backoff", kind: "ms", group: "retry", help: "backoff before the first retry" },
  { key: "bmult", label: "backoff ×", kind: "float", group: "retry", help: "backoff growth per retry" },
  { key: "bcap", label: "backoff cap", kind: "ms", group: "retry", help: "upper bound of the backoff" },
  { key: "hratio", label: "hedge ratio", kind: "float", group: "hedge budget",
    help: "tokens earned per refresh (a long-lived Cluster only; a lone refresh is unbudgeted)" },
  { key: "hburst", label: "hedge burst", kind: "int", group: "hedge budget", help: "bucket size (Cluster only)" },
];

const ADAPTIVE_KEYS = ["cold", "mult", "floor", "ceil", "q", "patience"];
/** The core's `Adaptive::default()`, for a fixed preset that has no adaptive values to show. */
const ADAPTIVE_FALLBACK = { cold: 250, mult: 2, floor: 2, ceil: 2000, q: 0.99, patience: 16 };

/** `RefreshConfig` → flat knobs (the seed travels separately). */
export function knobsFromConfig(c, fallback = null) {
  const f = c.fanout;
  const k = {
    initial: f.initial,
    inflight: f.max_in_flight,
    jitter: f.jitter,
    nof: f.next_on_failure,
    rwf: f.replace_when_full,
    cso: f.cancel_silent_on_answer,
    spread: f.spread_ticks,
    timeout: ms(c.attempt_timeout),
    deadline: ms(c.deadline),
    retries: c.retry.retries,
    backoff: ms(c.retry.initial),
    bmult: c.retry.multiplier,
    bcap: ms(c.retry.cap),
    hratio: c.hedge_budget.ratio,
    hburst: c.hedge_budget.burst,
    fixed: 500,
    gn: 1,
    gx: 2,
    ...ADAPTIVE_FALLBACK,
    ...(fallback ? pick(fallback, ADAPTIVE_KEYS) : {}),
  };
  if ("fixed" in f.stagger) {
    k.stagger = "fixed";
    k.fixed = ms(f.stagger.fixed);
  } else {
    const a = f.stagger.adaptive;
    Object.assign(k, { stagger: "adaptive", cold: ms(a.cold), mult: a.multiple, floor: ms(a.floor),
      ceil: ms(a.ceiling), q: a.quantile, patience: a.patience });
  }
  if ("linear" in f.growth) Object.assign(k, { growth: "linear", gn: f.growth.linear });
  else Object.assign(k, { growth: "exponential", gx: f.growth.exponential });
  return k;
}

function pick(o, keys) {
  return Object.fromEntries(keys.filter((x) => x in o).map((x) => [x, o[x]]));
}

/**
 * Flat knobs + seed → `RefreshConfig`, laid over `base` (a preset from the core): any field
 * this page does not know about keeps the preset's value, so a newer core still gets a
 * complete config.
 */
export function configFromKnobs(k, seed, base = null) {
  const b = base ? structuredClone(base) : {};
  const fanout = b.fanout || {};
  const adaptive = (fanout.stagger && fanout.stagger.adaptive) || {};
  const stagger = k.stagger === "fixed"
    ? { fixed: dur(k.fixed) }
    : { adaptive: { ...adaptive, cold: dur(k.cold), multiple: int(k.mult), floor: dur(k.floor), ceiling: dur(k.ceil),
      quantile: Number(k.q), patience: int(k.patience) } };
  const growth = k.growth === "exponential" ? { exponential: Number(k.gx) } : { linear: int(k.gn) };
  return {
    ...b,
    fanout: {
      ...fanout,
      initial: int(k.initial),
      stagger,
      growth,
      max_in_flight: int(k.inflight),
      jitter: Number(k.jitter),
      next_on_failure: !!k.nof,
      replace_when_full: !!k.rwf,
      cancel_silent_on_answer: !!k.cso,
      spread_ticks: !!k.spread,
    },
    attempt_timeout: dur(k.timeout),
    deadline: dur(k.deadline),
    retry: { ...(b.retry || {}), retries: int(k.retries), initial: dur(k.backoff), multiplier: Number(k.bmult),
      cap: dur(k.bcap) },
    hedge_budget: { ...(b.hedge_budget || {}), ratio: Number(k.hratio), burst: int(k.hburst) },
    seed: Math.max(0, Math.floor(Number(seed) || 0)),
  };
}

function int(x) {
  const n = Math.floor(Number(x));
  return isFinite(n) ? Math.min(U32_MAX, Math.max(0, n)) : 0;
}

/** A knob's value as text (for inputs and URLs): `all` for u32::MAX, `1`/`0` for booleans. */
export function knobText(knob, v) {
  if (knob.kind === "bool") return v ? "1" : "0";
  if (knob.all && v >= U32_MAX) return "all";
  return String(v);
}

/** Parses a knob's text; throws with a readable message. */
export function parseKnob(knob, text) {
  const t = String(text).trim();
  if (knob.kind === "bool") return t === "1" || t === "true" || t === "on";
  if (knob.kind === "choice") {
    if (!knob.choices.includes(t)) throw new Error(`${knob.label}: one of ${knob.choices.join(", ")}`);
    return t;
  }
  if (knob.all && /^(all|∞|inf)$/i.test(t)) return U32_MAX;
  const x = Number(t);
  if (t === "" || !isFinite(x) || x < 0) throw new Error(`${knob.label}: not a non-negative number`);
  if (knob.kind === "int" && !Number.isInteger(x)) throw new Error(`${knob.label}: a whole number`);
  return x;
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
