// The summary and the event log beside a timeline (shared by Simulate, Replay and Live).

import { describe } from "./engine.js";
import { fmtUs } from "./model.js";
import { countsAt, eventAt } from "./run.js";

function esc(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

/**
 * The result of a run: time to metadata and the winner, or the give-up error with every
 * broker's error; then the load numbers. `giveUp` is the core's `RefreshError` text.
 */
export function renderSummary(el, run, { giveUp = null, pending = false, note = "" } = {}) {
  const r = run.report;
  const o = r.outcome;
  const names = Object.fromEntries(run.lanes.map((l, i) => [r.lanes[i]?.broker ?? i, l.name]));
  let head;
  let details = "";
  if (pending) {
    head = `<p class="headline pending">… refreshing</p>`;
  } else if (o.type === "done") {
    head = `<p class="headline ok" data-outcome="done" data-winner="${esc(names[o.winner])}" data-ttm="${o.time_to_metadata ? Math.round((o.time_to_metadata.secs * 1e6) + o.time_to_metadata.nanos / 1000) : ""}">
      ✓ Metadata in <strong>${fmtUs(o.time_to_metadata.secs * 1e6 + o.time_to_metadata.nanos / 1000)}</strong>
      from <strong>${esc(names[o.winner] ?? o.winner)}</strong> <span class="muted">(attempt #${o.attempt.number})</span></p>`;
  } else if (o.type === "give_up") {
    const lines = (giveUp || "").split("\n");
    head = `<p class="headline bad" data-outcome="give_up">✗ Gave up at <strong>${fmtUs(o.at)}</strong>: ${esc(describe("give_up_reason", o.error.reason))}</p>`;
    const rows = o.error.brokers.map((b) => {
      const text = describe("broker_failure", b);
      return `<li><span class="who">${esc(names[b.broker] ?? b.address)}</span> <span class="muted">${b.attempts} attempt${b.attempts === 1 ? "" : "s"}</span> — ${esc(text)}</li>`;
    });
    const last = lines[0].includes("last error") ? lines[0].slice(lines[0].indexOf("last error")) : "";
    details = `${last ? `<p class="last-error">${esc(last)}</p>` : ""}<ul class="broker-errors" aria-label="every broker's error">${rows.join("")}</ul>`;
  } else {
    head = `<p class="headline warn" data-outcome="${esc(o.type)}">${esc(note || (o.error && o.error.kind === "invalid_config"
      ? `Invalid configuration: ${o.error.field} ${o.error.problem}` : "The run stopped before the refresh finished"))}</p>`;
  }
  const done = o.type === "done" && !pending;
  const wasted = r.attempts_started - (done ? 1 : 0);
  const stat = (label, value, title, key) =>
    `<div class="stat" title="${esc(title)}" data-stat="${key}"><dt>${label}</dt><dd>${value}</dd></div>`;
  el.innerHTML = `${head}
    <dl class="stats">
      ${stat("time to metadata", done ? fmtUs(o.time_to_metadata.secs * 1e6 + o.time_to_metadata.nanos / 1000) : "—", "from the start of the refresh to Done", "ttm")}
      ${stat("attempts started", r.attempts_started, "Connect commands: the load this refresh put on the cluster", "started")}
      ${stat("cancelled", r.attempts_cancelled, "attempts the core abandoned: lost the race, overtaken by an answering broker, superseded, deadline", "cancelled")}
      ${stat("failed", r.attempts_failed, "refused, closed, timed out or answered unusable metadata", "failed")}
      ${stat("wasted", wasted, "attempts that did not produce the answer used", "wasted")}
      ${stat("requests reached brokers", r.requests_reached, "attempts whose connection a broker accepted: the load brokers felt", "reached")}
      ${stat("hedges", r.hedges, "attempts started while another was still in flight", "hedges")}
      ${stat("passes", r.passes, "passes over the brokers (1 + retries used)", "passes")}
    </dl>${details}`;
}

/** A log of every event; `updateLog` then marks what has happened by time t. */
export function renderLog(el, run, onSeek) {
  el.innerHTML = run.events
    .map((e, i) => `<li data-at="${eventAt(e)}" class="ev ev-${esc(e.event)}${e.timer ? ` ev-${esc(e.timer)}` : ""}">
      <button type="button" tabindex="-1"><time>${fmtUs(eventAt(e))}</time> <span>${esc(run.eventText[i] ?? e.event)}</span></button></li>`)
    .join("");
  el._items = [...el.children].map((li) => [Number(li.dataset.at), li]);
  if (!el._wired) {
    el._wired = true;
    el.addEventListener("click", (ev) => {
      const li = ev.target.closest("li");
      if (li && el._onSeek) el._onSeek(Number(li.dataset.at));
    });
  }
  el._onSeek = onSeek;
}

export function updateLog(el, t, follow) {
  let current = null;
  for (const [at, li] of el._items || []) {
    const past = at <= t;
    li.classList.toggle("future", !past);
    li.classList.remove("current");
    if (past) current = li;
  }
  if (current) {
    current.classList.add("current");
    if (follow) {
      const box = el.getBoundingClientRect();
      const r = current.getBoundingClientRect();
      if (r.top < box.top || r.bottom > box.bottom) el.scrollTop += r.top - box.top - box.height / 2;
    }
  }
}

/** "so far" counters at the cursor, for the line under the timeline. */
export function progressText(run, t) {
  const c = countsAt(run, t);
  return `at ${fmtUs(t)}: ${c.started} started · ${c.inflight} in flight${c.answering ? ` (${c.answering} answering)` : ""} · ${c.reached} reached a broker · ${c.failed} failed · ${c.cancelled} cancelled${c.won ? " · 1 won" : ""}`;
}
