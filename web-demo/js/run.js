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
