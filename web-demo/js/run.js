// Builds the timeline's "run" (lanes of spans + events, µs) from the engine's reports.

import { ms } from "./model.js";

/** Display names: host alone when every broker shares a port, else host:port (as the engine does). */
export function laneNames(addresses) {
  const port = (a) => (a.includes(":") ? a.slice(a.lastIndexOf(":") + 1) : null);
  const first = addresses.length ? port(addresses[0]) : null;
  const same = first != null && addresses.every((a) => port(a) === first);
  return addresses.map((a) => (same ? a.slice(0, a.lastIndexOf(":")) : a));
}

/**
 * A `Report` (from simulate or replay) → a run. `subs[i]`/`kinds[i]` label lane i (the
 * broker's behaviour in Simulate; its address in Replay).
 */
export function runFromReport(report, config, { subs = [], kinds = [], eventText = [] } = {}) {
  const names = laneNames(report.lanes.map((l) => l.address));
  return {
    lanes: report.lanes.map((l, i) => ({
      name: names[i],
      address: l.address,
      sub: subs[i] ?? "",
      kind: kinds[i],
      spans: l.spans.map((s) => ({
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
      })),
    })),
    events: report.events,
    eventText,
    endedAt: report.ended_at,
    attemptTimeout: config ? ms(config.attempt_timeout) * 1000 : null,
    deadline: config ? ms(config.deadline) * 1000 : null,
    report,
  };
}

/** Distinct event times (plus 0 and the end), ascending: where the step buttons stop. */
export function stops(run) {
  const set = new Set([0, run.endedAt, ...run.events.map((e) => e.at)]);
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
 * The core's live events (`stagger::report::Event`, what the browser adapter's `onEvent`
 * receives: `{elapsed_ms, event, attempt?, broker?, error?, reason?, timer?}`) → a run, drawn
 * as they arrive. `addresses` are the lanes known before any attempt (the bootstrap's); a
 * broker not among them gets a lane of its own. `errorText` words an `AttemptError`.
 */
export function runFromEvents(events, addresses, config, { subs = [], errorText = (e) => e.detail ?? "" } = {}) {
  const lanes = addresses.map((address) => ({ address, spans: [] }));
  const laneOf = (broker) => {
    const key = String(broker).toLowerCase();
    let i = lanes.findIndex((l) => l.address.toLowerCase() === key);
    if (i < 0) i = lanes.push({ address: broker, spans: [] }) - 1;
    return i;
  };
  const spans = new Map();
  const timeline = [];
  const eventText = [];
  let endedAt = 0;
  const names = () => laneNames(lanes.map((l) => l.address));
  for (const e of events) {
    const at = Math.round(e.elapsed_ms * 1000);
    endedAt = Math.max(endedAt, at);
    if (e.event === "timer") {
      timeline.push({ type: "timer", kind: e.timer, at });
      eventText.push(`${e.timer.replaceAll("_", " ")} timer`);
      continue;
    }
    const lane = laneOf(e.broker);
    const id = `${e.attempt.epoch}.${e.attempt.number}`;
    let span = spans.get(id);
    if (e.event === "started" || !span) {
      const inFlight = [...spans.values()].some((s) => s.end == null);
      span = { number: e.attempt.number, start: at, connected: null, answered: null, end: null, outcome: { type: "in_flight" }, pass: 0, hedge: inFlight, partner: false };
      spans.set(id, span);
      lanes[lane].spans.push(span);
    }
    const end = (outcome) => Object.assign(span, { end: at, outcome });
    let word = e.event;
    if (e.event === "connected") span.connected = at;
    else if (e.event === "answered") span.answered = at;
    else if (e.event === "won") end({ type: "won" });
    else if (e.event === "failed") {
      end({ type: "failed", kind: e.error.kind, reason: errorText(e.error) });
      word = `failed: ${errorText(e.error)}`;
    } else if (e.event === "cancelled") {
      end({ type: "cancelled", reason: e.reason });
      word = `cancelled (${e.reason})`;
    } else if (e.event === "resolved") end({ type: "resolved" });
    timeline.push({ type: e.event === "won" ? "done" : e.event, at });
    eventText.push(`#${e.attempt.number} → ${names()[lane]}: ${word}`);
  }
  const display = names();
  return {
    lanes: lanes.map((l, i) => ({ name: display[i], address: l.address, sub: subs[i] ?? "", spans: l.spans })),
    events: timeline,
    eventText,
    endedAt,
    attemptTimeout: config ? ms(config.attempt_timeout) * 1000 : null,
    deadline: config ? ms(config.deadline) * 1000 : null,
    report: null,
  };
}
