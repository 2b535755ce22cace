// Live: real brokers, refreshed from this page through the browser adapter (`stagger-web`)
// and a WebSocket↔TCP bridge, drawn as the adapter reports each step (`onEvent`).
//
// The adapter's `command`/`input`/`timeout` events have the shape of the core's trace
// events, and its `start` event carries the config and broker book. So the page assembles
// them into a trace as they arrive and draws it through the same replay as the Replay tab:
// the lanes are what the core decided, live, and at the end the page can say whether the
// live run replays to the very same commands.

import * as engine from "./engine.js";
import { drawTimeline, domainFor } from "./timeline.js";
import { runFromReport } from "./run.js";
import { progressText, renderLog, renderSummary, updateLog } from "./panels.js";
import { describeConfig } from "./replay.js";

const ADAPTER = "../browser/stagger_web.js";

function esc(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

/** `ws://a:1, ws://b:2` or one per line → a list of URLs. */
export function parseAddresses(text) {
  return text.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);
}

let adapter = null;

/** Loads the browser adapter once; null when this build has none. */
async function loadAdapter() {
  if (adapter) return adapter;
  try {
    const mod = await import(ADAPTER);
    await mod.default();
    adapter = mod;
    return mod;
  } catch (e) {
    console.warn("browser adapter not available:", e);
    return null;
  }
}

export function initLive(app) {
  const $ = (id) => document.getElementById(id);
  const tl = $("live-timeline");
  const status = $("live-status");
  let session = null;

  function setStatus(html, cls = "") {
    status.className = `status ${cls}`;
    status.innerHTML = html;
  }

  function trace(s) {
    return {
      version: 1,
      recorder: "stagger-web (live, web demo)",
      config: s.start.config,
      book: s.start.book,
      started_at: 0,
      recent_response_time: null,
      events: s.events,
    };
  }

  /** Rebuilds the picture from the events so far and draws it at the current time. */
  function draw(s) {
    if (!s.start) return;
    if (s.dirty) {
      s.dirty = false;
      const answer = engine.replay(JSON.stringify(trace(s)));
      if (answer.verdict === "invalid") {
        setStatus(`Cannot draw the adapter's events: ${esc(answer.error)}`, "bad");
        return;
      }
      s.answer = answer;
      s.run = runFromReport(answer.report, answer.config, {
        eventText: answer.event_text,
        // The URL only when it says more than the address (a path, wss://).
        subs: s.start.brokers.map((b) => (b.url.replace(/\/$/, "") === `ws://${b.address}` ? "" : b.url)),
      });
      renderLog($("live-log"), s.run, null);
    }
    if (!s.run) return;
    const t = s.done ? s.run.endedAt : Math.max(s.run.endedAt, (performance.now() - s.wall) * 1000);
    const run = s.done ? s.run : { ...s.run, endedAt: t };
    drawTimeline(tl, run, t, { domain: Math.max(domainFor(run, "fit"), t * 1.15) });
    $("live-progress").textContent = progressText(run, t);
    updateLog($("live-log"), t, true);
  }

  function loop(s) {
    if (session !== s) return;
    draw(s);
    if (!s.done) s.raf = requestAnimationFrame(() => loop(s));
  }

  /** The form's credentials as the adapter's `sasl` option; never stored or put in the URL. */
  function saslOptions() {
    const mechanism = $("live-sasl-mechanism").value;
    if (!mechanism) return undefined;
    const secret = $("live-sasl-secret").value;
    return mechanism === "OAUTHBEARER"
      ? { mechanism, token: secret }
      : { mechanism, username: $("live-sasl-username").value, password: secret };
  }

  async function start(ev) {
    ev?.preventDefault();
    const urls = parseAddresses($("live-addrs").value);
    if (!urls.length) {
      setStatus("Enter at least one <code>ws://</code> address.", "bad");
      return;
    }
    const mod = await loadAdapter();
    if (!mod || typeof mod.refresh !== "function") {
      setStatus(`This build has no browser adapter. Build it (<code>adapters/browser/build.sh</code>), then rebuild the
        page (<code>web-demo/build.sh</code>), which copies <code>adapters/browser/pkg</code> into <code>dist/browser</code>.`, "bad");
      return;
    }
    stop();
    const config = app.config();
    const controller = new AbortController();
    const s = { start: null, events: [], wall: performance.now(), done: false, dirty: false, controller, run: null };
    session = s;
    $("live-body").hidden = false;
    $("live-summary").innerHTML = `<p class="headline pending">… refreshing ${urls.length} broker${urls.length === 1 ? "" : "s"}</p>`;
    $("live-log").innerHTML = "";
    tl.innerHTML = "";
    $("live-run").disabled = true;
    $("live-stop").disabled = false;
    setStatus(`Refreshing through the browser adapter… <span class="muted">${esc(describeConfig(config))}</span>`);
    const onEvent = (e) => {
      if (session !== s) return;
      const event = typeof e === "string" ? JSON.parse(e) : e;
      if (event.type === "start") {
        s.start = event;
        s.wall = performance.now() - (event.at_ms || 0);
      } else if (event.type === "command" || event.type === "input" || event.type === "timeout") {
        const { at_ms, url, ...rest } = event;
        s.events.push(rest);
      } else if (event.type === "abort") {
        s.aborted = event;
      }
      s.dirty = true;
    };
    loop(s);
    let metadata = null;
    let error = null;
    try {
      metadata = await mod.refresh({ bootstrap: urls, config, sasl: saslOptions(), onEvent, signal: controller.signal });
    } catch (e) {
      error = e;
    }
    if (session !== s) return;
    s.done = true;
    s.dirty = true;
    cancelAnimationFrame(s.raf);
    draw(s);
    $("live-run").disabled = false;
    $("live-stop").disabled = true;
    finish(s, metadata, error);
  }

  function finish(s, metadata, error) {
    const answer = s.answer;
    if (s.run && answer) {
      renderSummary($("live-summary"), s.run, {
        giveUp: answer.give_up,
        note: s.aborted ? "Stopped: every socket was closed." : "The adapter stopped before the refresh finished.",
      });
    }
    const parts = [];
    if (metadata) {
      const brokers = metadata.brokers?.length ?? 0;
      const topics = (metadata.topics ?? []).map((t) => t.name);
      parts.push(`<strong>✓ Metadata</strong> from the cluster${metadata.cluster_id ? ` <code>${esc(metadata.cluster_id)}</code>` : ""}:
        ${brokers} broker${brokers === 1 ? "" : "s"}, ${topics.length} topic${topics.length === 1 ? "" : "s"}${topics.length ? ` (${esc(topics.slice(0, 8).join(", "))}${topics.length > 8 ? ", …" : ""})` : ""}.`);
    } else if (error) {
      const message = error.message ?? String(error);
      parts.push(`<strong>✗ ${s.aborted ? "Stopped" : "The refresh failed"}:</strong> ${esc(message)}`);
    }
    if (answer && answer.verdict === "match" && answer.finished) {
      parts.push(`<span class="ok-text">This live run replays through the core without divergence (${answer.commands} commands).</span>`);
    } else if (answer && answer.verdict === "diverges") {
      parts.push(`<span class="error-text">The live events do not replay to the same commands: ${esc(answer.divergence.message)}</span>`);
    }
    if (s.start) parts.push(`<button type="button" class="link" data-live="replay">open in Replay</button> ·
      <button type="button" class="link" data-live="download">download the trace</button>`);
    setStatus(parts.join(" "), metadata ? "ok" : "bad");
    status.dataset.outcome = metadata ? "done" : "failed";
  }

  function stop() {
    if (session && !session.done) session.controller.abort();
  }

  $("live-form").addEventListener("submit", start);
  $("live-stop").addEventListener("click", stop);
  status.addEventListener("click", (ev) => {
    const act = ev.target.closest("[data-live]")?.dataset.live;
    if (!act || !session?.start) return;
    const text = JSON.stringify(trace(session), null, 2);
    if (act === "replay") {
      app.views.replay.open(text, "the live run");
      app.show("replay");
    } else {
      const a = document.createElement("a");
      a.href = URL.createObjectURL(new Blob([text + "\n"], { type: "application/json" }));
      a.download = "stagger-live.trace.json";
      a.click();
    }
  });
  window.addEventListener("resize", () => session && app.state.view === "live" && draw(session));

  return {
    player: null,
    activate() {
      const c = app.config();
      $("live-policy").textContent = `policy: ${app.state.preset} · ${describeConfig(c)}`;
      if (session) draw(session);
      // Pre-fill from ?live=ws://…,ws://… (what `stagger demo --web` can put in the link).
      const fromUrl = new URLSearchParams(location.search).get("live");
      if (fromUrl && !$("live-addrs").value) $("live-addrs").value = parseAddresses(fromUrl).join("\n");
    },
  };
}
