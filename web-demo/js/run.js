// Builds the timeline's "run" (lanes of spans, µs, and the core's events) from the engine's
// reports (Simulate, Replay) or the browser adapter's live events (Live).

import { describe, describeEvents } from "./engine.js";
import { ms } from "./model.js";

/** Display names: host alone when every broker shares a port, else host:port (as the engine does). */
export function laneNames(addresses) {
  const port = (a) => (a.includes(":") ? a.slice(a.lastIndexOf(":") + 1) : null);
  const first = addresses.length ? port(addresses[0]) : null;
  const same = first != null && addresses.every((a) => port(a) === first);
  return addresses.map((a) => (same ? a.slice(0, a.lastIndexOf(":")) : a));
}

/** When a core event happened: µs since the refresh started (the events carry `elapsed_ms`). */
export function eventAt(e) {
  return Math.round(e.elapsed_ms * 1000);
}

/**
 * A `Report` (from simulate or replay) → a run: its events read as `runFromEvents` reads
 * live ones, its spans its own (they say more than the events: the pass, a hedge, a spread
 * tick's partner). `subs[i]`/`kinds[i]` label lane i (the broker's behaviour in Simulate; its
 * address in Replay).
 */
export function runFromReport(report, config, { subs = [], kinds = [] } = {}) {
  const run = runFromEvents(report.events, report.lanes.map((l) => l.address), config, { subs, kinds });
  report.lanes.forEach((l, i) => {
    run.lanes[i].spans = l.spans.map((s) => ({
      // The attempt id is `{epoch, number}`; a lane shows one refresh, so the number names it.
      number: s.attempt.number,
      start: s.start,
      connected: s.connected_at,
      answered: s.first_frame_at ?? null,
      end: s.end,
      outcome: s.outcome,
      pass: s.pass,
      hedge: s.hedge,
      // A spread tick's later attempt (`fanout.tuning.spread_ticks`).
      partner: s.partner ?? false,
    }));
  });
  run.endedAt = report.ended_at;
  run.report = report;
  return run;
}

/** Distinct event times (plus 0 and the end), ascending: where the step buttons stop. */
export function stops(run) {
  const set = new Set([0, run.endedAt, ...run.events.map(eventAt)]);
  return [...set].sort((a, b) => a - b);
}

/** Counters of a run as it stood at time t. */
export function countsAt(run, t) {
  let started = 0, inflight = 0, won = 0, failed = 0, cancelled = 0, reached = 0, answering = 0;
  for (const lane of run.lanes) {
    for (const s of lane.spans) {
      if (s.start > t) continue;
      started++;
      if (s.connected != null && s.connected <= t) reached++;
      if (s.end == null || s.end > t) {
        inflight++;
        if (s.answered != null && s.answered <= t) answering++;
      }
      else if (s.outcome.type === "won") won++;
      else if (s.outcome.type === "failed") failed++;
      else if (s.outcome.type === "cancelled") cancelled++;
    }
  }
  return { started, inflight, answering, won, failed, cancelled, reached };
}

/** A bridge URL's `host:port`, as the browser adapter names its broker (default ports 80/443). */
export function bridgeAddress(url) {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || (u.protocol === "wss:" ? 443 : 80)}`;
  } catch {
    return url;
  }
}

/**
 * The core's events (`stagger::report::Event`: `{elapsed_ms, event, attempt?, broker?, error?,
 * reason?, timer?, …}`, as a simulation's or a replay's report carries them and the browser
 * adapter's `onEvent` receives them) → a run, its spans drawn from the events; the one reader
 * of events for every mode. `addresses` are the lanes known before any attempt (the
 * scenario's, the trace's, the bootstrap's); a broker not among them gets a lane of its own.
 * The log's words come from the core (`describeEvents`).
 */
export function runFromEvents(events, addresses, config, { subs = [], kinds = [] } = {}) {
  const lanes = addresses.map((address) => ({ address, spans: [] }));
  const laneOf = (broker) => {
    const key = String(broker).toLowerCase();
    let i = lanes.findIndex((l) => l.address.toLowerCase() === key);
    if (i < 0) i = lanes.push({ address: broker, spans: [] }) - 1;
    return i;
  };
  const spans = new Map();
  let endedAt = 0;
  for (const e of events) {
    const at = eventAt(e);
    endedAt = Math.max(endedAt, at);
    // The refresh's own events (timers, the give-up, a cluster's requests) have no attempt.
    if (!e.attempt) continue;
    const id = `${e.attempt.epoch}.${e.attempt.number}`;
    let span = spans.get(id);
    if (e.event === "started" || !span) {
      const inFlight = [...spans.values()].some((s) => s.end == null);
      span = { number: e.attempt.number, start: at, connected: null, answered: null, end: null, outcome: { type: "in_flight" }, pass: 0, hedge: inFlight, partner: false };
      spans.set(id, span);
      lanes[laneOf(e.broker)].spans.push(span);
    }
    const end = (outcome) => Object.assign(span, { end: at, outcome });
    if (e.event === "connected") span.connected = at;
    else if (e.event === "answered") span.answered = at;
    else if (e.event === "won") end({ type: "won" });
    else if (e.event === "failed") end({ type: "failed", kind: e.error.kind, reason: describe("attempt_error", e.error) });
    else if (e.event === "cancelled") end({ type: "cancelled", reason: e.reason });
    else if (e.event === "resolved") end({ type: "resolved", addresses: e.addresses.length });
  }
  const display = laneNames(lanes.map((l) => l.address));
  return {
    lanes: lanes.map((l, i) => ({ name: display[i], address: l.address, sub: subs[i] ?? "", kind: kinds[i], spans: l.spans })),
    events,
    eventText: describeEvents(events, lanes.map((l) => l.address)),
    endedAt,
    attemptTimeout: config ? ms(config.attempt_timeout) * 1000 : null,
    deadline: config ? ms(config.deadline) * 1000 : null,
    report: null,
  };
}
