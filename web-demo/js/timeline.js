// The timeline: one lane per broker on a shared time axis, drawn as SVG up to a cursor.
//
// Input is a "run": lanes of spans (attempts) plus the core's events in order, all times in
// µs from the start of the refresh. Simulate, Replay and Live all build one (see run.js), so
// the three modes look and read the same. Everything after the cursor is hidden, which is
// what makes play, step and scrub work: the picture at time t is the run as it stood at t.

import { vocabulary } from "./engine.js";
import { fmtUs } from "./model.js";
import { eventAt } from "./run.js";

const NS = "http://www.w3.org/2000/svg";

/** Short words for how an attempt ended, as written after its bar. */
export function outcomeWord(o) {
  if (!o) return "";
  switch (o.type) {
    case "won":
      return "won";
    case "failed":
      return kindWord(o.kind);
    case "cancelled":
      return `cancelled: ${vocabulary().cancel_reasons[o.reason]?.text ?? o.reason}`;
    default:
      return "in flight";
  }
}

/** An error kind's serde name as a short word after a bar (`response timeout`, `broker error 3`). */
function kindWord(kind) {
  if (!kind || !kind.kind) return "failed";
  const word = kind.kind.replaceAll("_", " ");
  return kind.code != null ? `${word} ${kind.code}` : word;
}

/** Nice axis step (1, 2, 5 × 10^k µs) for about `n` ticks over `span` µs. */
function niceStep(span, n) {
  const raw = Math.max(1, span / Math.max(1, n));
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function esc(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

/**
 * The time span the axis shows: the whole run (plus a margin), or out to the deadline.
 * `axis` is "fit" or "deadline".
 */
export function domainFor(run, axis) {
  const last = Math.max(run.endedAt || 0, ...run.events.map(eventAt), 1);
  if (axis === "deadline" && run.deadline) return Math.max(run.deadline * 1.03, last * 1.05);
  return last * 1.1 + 50;
}

/**
 * Draws `run` into `el` as it stood at time `t` (µs). Options: `domain` (µs shown),
 * `onLane(i)` (a lane label was clicked; makes labels buttons), `onScrub(t)` (the plot was
 * clicked or dragged), `laneTitle` (tooltip for clickable labels).
 */
export function drawTimeline(el, run, t, opts = {}) {
  const W = Math.max(300, el.clientWidth || 800);
  const narrow = W < 600;
  const labelW = narrow ? 76 : 168;
  const X0 = labelW + 6;
  const X1 = W - (narrow ? 8 : 16);
  const AXIS = 24;
  const TOP = 34; // the "refresh" lane (timers, outcome)
  const LANE = narrow ? 34 : 38;
  const domain = Math.max(1, opts.domain || domainFor(run, "fit"));
  const offAxis = run.deadline && run.deadline > domain;
  const BOTTOM = AXIS + TOP + run.lanes.length * LANE;
  const H = BOTTOM + (offAxis ? 20 : 8);
  const x = (us) => X0 + (Math.min(Math.max(us, 0), domain) / domain) * (X1 - X0);
  const laneY = (i) => AXIS + TOP + i * LANE;
  const id = el.id || "tl";
  const out = [];
  const push = (s) => out.push(s);

  push(`<svg xmlns="${NS}" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img"
    aria-label="timeline: one lane per broker" data-domain="${domain}" data-t="${Math.round(t)}">`);
  push(`<defs>
    <pattern id="${id}-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
      <rect width="6" height="6" class="hatch-bg"/><line x1="0" y1="0" x2="0" y2="6" class="hatch-line"/></pattern>
    <pattern id="${id}-backoff" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(-45)">
      <line x1="0" y1="0" x2="0" y2="8" class="backoff-line"/></pattern>
  </defs>`);

  // Lanes: background and label (a button when behaviours can be edited).
  push(`<rect x="0" y="${AXIS}" width="${W}" height="${TOP}" class="lane-bg refresh-bg"/>`);
  push(`<text x="8" y="${AXIS + (narrow ? 21 : 14)}" class="lane-name">refresh</text>`);
  if (!narrow) push(`<text x="8" y="${AXIS + 27}" class="lane-sub">timers &amp; outcome</text>`);
  run.lanes.forEach((lane, i) => {
    const y = laneY(i);
    push(`<rect x="0" y="${y}" width="${W}" height="${LANE}" class="lane-bg ${i % 2 ? "odd" : "even"}"/>`);
    const clickable = !!opts.onLane;
    push(`<g class="lane-label${clickable ? " clickable" : ""}" data-lane="${i}" ${clickable
      ? `tabindex="0" role="button" aria-label="${esc(lane.name)}: ${esc(lane.sub || "")}. ${esc(opts.laneTitle || "")}"`
      : ""}>`);
    push(`<rect x="2" y="${y + 3}" width="${labelW - 4}" height="${LANE - 6}" rx="5" class="label-box kind-${esc(lane.kind || "none")}"/>`);
    const sub = narrow ? String(lane.sub || "").replace(/ ms\b/g, "ms") : lane.sub;
    push(`<text x="10" y="${y + (sub ? (narrow ? 15 : 16) : LANE / 2 + 4)}" class="lane-name">${esc(clipName(lane.name, narrow ? 10 : 22))}</text>`);
    if (sub) push(`<text x="10" y="${y + (narrow ? 28 : 30)}" class="lane-sub">${esc(clip(sub, narrow ? 11 : 26))}</text>`);
    if (clickable) push(`<title>${esc(lane.name)} — ${esc(lane.sub || "")}\n${esc(opts.laneTitle || "")}</title>`);
    push(`</g>`);
  });

  // Axis with nice ticks.
  const step = niceStep(domain, (X1 - X0) / (narrow ? 58 : 90));
  push(`<line x1="${X0}" y1="${AXIS - 1}" x2="${X1}" y2="${AXIS - 1}" class="axis"/>`);
  for (let v = 0; v <= domain; v += step) {
    const xv = x(v);
    push(`<line x1="${xv}" y1="${AXIS - 5}" x2="${xv}" y2="${BOTTOM}" class="grid"/>`);
    push(`<text x="${xv}" y="${AXIS - 9}" class="tick" text-anchor="${v === 0 ? "start" : "middle"}">${fmtUs(v)}</text>`);
  }

  // Backoff windows: from the end of a pass to the backoff timer, across every lane.
  const events = run.events;
  events.forEach((e, j) => {
    if (e.event !== "timer" || e.timer !== "backoff") return;
    const at = eventAt(e);
    let start = at;
    for (let k = j - 1; k >= 0; k--) {
      if (events[k].event !== "timer" || events[k].timer === "attempt_timeout") {
        start = eventAt(events[k]);
        break;
      }
    }
    if (start > t) return;
    const end = Math.min(at, t);
    push(`<g class="backoff" data-start="${start}" data-end="${at}"><rect x="${x(start)}" y="${AXIS}" width="${Math.max(1, x(end) - x(start))}" height="${BOTTOM - AXIS}" fill="url(#${id}-backoff)" class="backoff-band"/>`);
    if (x(at) - x(start) >= 46) push(`<text x="${x(start) + 3}" y="${AXIS + 29}" class="marker-text backoff-text">backoff</text>`);
    push(`<title>backoff between passes: ${fmtUs(start)} → ${fmtUs(at)}</title></g>`);
  });

  // Deadline: a line if it is on the axis, a note at the edge otherwise.
  if (run.deadline) {
    if (run.deadline <= domain) {
      push(`<g class="deadline" data-at="${run.deadline}"><line x1="${x(run.deadline)}" y1="${AXIS}" x2="${x(run.deadline)}" y2="${BOTTOM}" class="deadline-line"/>`);
      push(`<text x="${x(run.deadline) - 3}" y="${AXIS + 12}" text-anchor="end" class="marker-text deadline-text">deadline</text><title>deadline ${fmtUs(run.deadline)}</title></g>`);
    } else {
      push(`<text x="${X1}" y="${H - 5}" text-anchor="end" class="deadline-note" data-deadline="${run.deadline}">deadline at ${fmtUs(run.deadline)}, off the axis →</text>`);
    }
  }

  // Timers that fired: stagger ticks (with a guide through the lanes) and attempt timeouts.
  for (const e of events) {
    const at = eventAt(e);
    if (e.event !== "timer" || at > t) continue;
    const xv = x(at);
    if (e.timer === "stagger") {
      push(`<g class="tick-stagger" data-at="${at}"><line x1="${xv}" y1="${AXIS + 12}" x2="${xv}" y2="${BOTTOM}" class="stagger-guide"/>`);
      push(`<path d="M${xv - 5},${AXIS + 3} L${xv + 5},${AXIS + 3} L${xv},${AXIS + 12} Z" class="stagger-mark"/>`);
      push(`<title>stagger delay elapsed at ${fmtUs(at)}: start the next attempt</title></g>`);
    } else if (e.timer === "attempt_timeout") {
      push(`<g class="tick-timeout" data-at="${at}"><circle cx="${xv}" cy="${AXIS + 8}" r="4.5" class="timeout-mark"/>`);
      push(`<line x1="${xv}" y1="${AXIS + 8}" x2="${xv}" y2="${AXIS + 5}" class="timeout-hand"/><title>attempt timeout at ${fmtUs(at)}</title></g>`);
    }
  }

  // Attempts.
  run.lanes.forEach((lane, i) => {
    const y = laneY(i) + (narrow ? 9 : 10);
    const h = LANE - (narrow ? 18 : 20);
    const spans = lane.spans;
    spans.forEach((s, k) => {
      if (s.start > t) return;
      const ended = s.end != null && s.end <= t;
      const end = ended ? s.end : t;
      // Three phases: connecting, connected but silent, answering (the broker's first answer
      // came: it is alive). An attempt reported answered without connected counts as both.
      const answered = s.answered != null && s.answered <= end ? s.answered : null;
      const connected = s.connected != null && s.connected <= end ? s.connected : answered;
      const state = ended ? s.outcome.type : "inflight";
      const word = ended ? outcomeWord(s.outcome) : answered != null ? "answering" : connected != null ? "awaiting answer" : "connecting";
      const reason = ended && s.outcome.type === "cancelled" ? s.outcome.reason : "";
      const tip = [`attempt #${s.number} → ${lane.name}${s.hedge ? " (hedge)" : ""}${s.partner ? " (spread-tick partner)" : ""}${s.pass ? `, pass ${s.pass + 1}` : ""}`,
        `started ${fmtUs(s.start)}`, connected != null ? `connected ${fmtUs(connected)}` : null,
        answered != null ? `first answer ${fmtUs(answered)} (alive)` : connected != null ? "its broker said nothing" : null,
        ended ? `${outcomeWord(s.outcome)} at ${fmtUs(s.end)}${s.outcome.reason && s.outcome.type === "failed" ? ` — ${s.outcome.reason}` : ""}${reason ? ` — ${vocabulary().cancel_reasons[reason]?.help ?? reason}` : ""}` : "in flight"]
        .filter(Boolean).join("\n");
      push(`<g class="span ${state}${answered != null ? " has-answer" : ""}" data-lane="${i}" data-attempt="${s.number}" data-start="${s.start}" data-end="${ended ? s.end : ""}" data-connected="${connected ?? ""}" data-answered="${answered ?? ""}" data-outcome="${state}" data-reason="${esc(reason)}">`);
      const xs = x(s.start);
      const xc = connected != null ? x(connected) : x(end);
      const xa = answered != null ? x(answered) : x(end);
      const xe = x(end);
      push(`<rect x="${xs}" y="${y}" width="${Math.max(1.5, xc - xs)}" height="${h}" class="seg connecting" fill="url(#${id}-hatch)"/>`);
      if (connected != null && (answered == null || answered > connected)) {
        push(`<rect x="${xc}" y="${y}" width="${Math.max(1.5, xa - xc)}" height="${h}" class="seg awaiting"/>`);
      }
      if (answered != null) {
        // The answering phase: a deeper shade from the first answer on, and a mark where it came.
        push(`<rect x="${xa}" y="${y}" width="${Math.max(1.5, xe - xa)}" height="${h}" class="seg answering"/>`);
        push(`<line x1="${xa}" y1="${y - 3}" x2="${xa}" y2="${y + h + 3}" class="answer-mark"/>`);
      }
      if (ended) {
        const glyph = { won: "✓", failed: "✗", cancelled: "⊘" }[state] || "";
        push(`<rect x="${xe - 1.5}" y="${y - 3}" width="3" height="${h + 6}" class="end-cap"/>`);
        if (glyph) push(`<text x="${xe}" y="${y - 5}" class="glyph" text-anchor="middle">${glyph}</text>`);
      } else if (run.attemptTimeout && s.start + run.attemptTimeout <= domain) {
        // Where this attempt will time out if nothing else happens first.
        const xt = x(s.start + run.attemptTimeout);
        push(`<line x1="${xe}" y1="${y + h / 2}" x2="${xt}" y2="${y + h / 2}" class="timeout-projection"/>`);
        push(`<line x1="${xt}" y1="${y - 2}" x2="${xt}" y2="${y + h + 2}" class="timeout-projection-end"/>`);
      }
      // Label after the bar, if there is room before the lane's next attempt.
      // Label: after the bar if there is room before the lane's next attempt, else inside
      // it, else before it, else just the attempt number.
      const next = spans[k + 1] && spans[k + 1].start <= t ? x(spans[k + 1].start) : W - 2;
      const prev = k > 0 && spans[k - 1].end != null ? x(Math.min(spans[k - 1].end, t)) : X0;
      const label = `#${s.number} ${word}`;
      const width = label.length * 6.1;
      const ty = y + h / 2 + 4;
      if (width <= next - xe - 6) push(`<text x="${xe + 5}" y="${ty}" class="span-text">${esc(label)}</text>`);
      else if (xe - xs > width + 8) push(`<text x="${xs + 4}" y="${ty}" class="span-text inside">${esc(label)}</text>`);
      else if (width <= xs - prev - 8) push(`<text x="${xs - 4}" y="${ty}" text-anchor="end" class="span-text">${esc(label)}</text>`);
      else if (next - xe > 22) push(`<text x="${xe + 4}" y="${ty}" class="span-text">#${s.number}</text>`);
      push(`<title>${esc(tip)}</title></g>`);
    });
  });

  // The outcome, once reached.
  const terminal = events.find((e) => e.event === "won" || e.event === "gave_up");
  if (terminal && eventAt(terminal) <= t) {
    const at = eventAt(terminal);
    const xv = x(at);
    const won = terminal.event === "won";
    const text = won ? `✓ metadata ${fmtUs(at)}` : `✗ gave up ${fmtUs(at)}`;
    const anchor = xv > X1 - 130 ? "end" : "start";
    push(`<g class="outcome ${won ? "won" : "gave-up"}" data-at="${at}"><line x1="${xv}" y1="${AXIS + 2}" x2="${xv}" y2="${BOTTOM}" class="outcome-line"/>`);
    push(`<text x="${xv + (anchor === "end" ? -5 : 5)}" y="${AXIS + 29}" text-anchor="${anchor}" class="outcome-text">${text}</text></g>`);
  }

  if (run.divergenceAt != null && run.divergenceAt <= domain) {
    const xv = x(run.divergenceAt);
    push(`<g class="divergence" data-at="${run.divergenceAt}"><line x1="${xv}" y1="${AXIS}" x2="${xv}" y2="${BOTTOM}" class="divergence-line"/>`);
    push(`<text x="${xv + 4}" y="${BOTTOM - 4}" class="marker-text divergence-text">replay diverges here</text></g>`);
  }

  // The cursor.
  if (t < domain) {
    const xv = x(t);
    push(`<g class="cursor"><line x1="${xv}" y1="${AXIS - 4}" x2="${xv}" y2="${BOTTOM + 2}" class="cursor-line"/>`);
    push(`<path d="M${xv - 5},${AXIS - 8} L${xv + 5},${AXIS - 8} L${xv},${AXIS - 1} Z" class="cursor-head"/></g>`);
  }
  push(`<rect x="${X0}" y="0" width="${X1 - X0}" height="${AXIS}" class="scrub-zone"><title>click or drag to move through time</title></rect>`);
  push(`</svg>`);
  el.innerHTML = out.join("");
  el._tl = { X0, X1, domain, opts };
  wire(el);
}

/** Long names keep their end (`…:9093`): the port is what tells bridges on one host apart. */
function clipName(s, n) {
  if (s.length <= n) return s;
  const port = s.lastIndexOf(":");
  if (port > 0 && s.length - port < n) return "…" + s.slice(port);
  return "…" + s.slice(s.length - n + 1);
}

function clip(s, n) {
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

/** Pointer and keyboard handling, attached once per container. */
function wire(el) {
  if (el._wired) return;
  el._wired = true;
  const timeAt = (ev) => {
    const { X0, X1, domain } = el._tl;
    const rect = el.querySelector("svg").getBoundingClientRect();
    const px = ev.clientX - rect.left;
    return Math.min(domain, Math.max(0, ((px - X0) / (X1 - X0)) * domain));
  };
  let dragging = false;
  el.addEventListener("pointerdown", (ev) => {
    const label = ev.target.closest(".lane-label");
    if (label && el._tl.opts.onLane) {
      el._tl.opts.onLane(Number(label.dataset.lane));
      return;
    }
    if (!el._tl.opts.onScrub) return;
    const { X0 } = el._tl;
    const rect = el.querySelector("svg").getBoundingClientRect();
    if (ev.clientX - rect.left < X0 - 4) return;
    dragging = true;
    el.setPointerCapture(ev.pointerId);
    el._tl.opts.onScrub(timeAt(ev));
  });
  el.addEventListener("pointermove", (ev) => {
    if (dragging && el._tl.opts.onScrub) el._tl.opts.onScrub(timeAt(ev));
  });
  const stop = () => (dragging = false);
  el.addEventListener("pointerup", stop);
  el.addEventListener("pointercancel", stop);
  el.addEventListener("keydown", (ev) => {
    const label = ev.target.closest && ev.target.closest(".lane-label");
    if (label && (ev.key === "Enter" || ev.key === " ") && el._tl.opts.onLane) {
      ev.preventDefault();
      ev.stopPropagation();
      el._tl.opts.onLane(Number(label.dataset.lane));
    }
  });
}
