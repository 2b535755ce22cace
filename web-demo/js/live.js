// Live: real brokers, refreshed from this page through the browser adapter (`stagger-web`)
// and a WebSocket↔TCP bridge, drawn as the adapter reports each step (`onEvent`).
//
// The adapter's events are the core's live events (`started`, `connected`, `answered`,
// `won`, `failed`, `cancelled`, `timer`: the ones the CLI's live view shows), drawn as they
// arrive. When the refresh ends, `refreshWith()` (or the rejection) hands over the core's
// trace of it: the page draws that through the same replay as the Replay tab, and says
// whether the live run replays to the very same commands.

import * as engine from "./engine.js";
import { drawTimeline, domainFor } from "./timeline.js";
import { bridgeAddress, runFromEvents, runFromReport } from "./run.js";
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

  /** The lane labels: the URL only when it says more than the address (a path, wss://). */
  function subs(s) {
    return s.urls.map((u) => (u.replace(/\/$/, "") === `ws://${bridgeAddress(u)}` ? "" : u));
  }

  /** The run to draw: the core's events so far, then (once it ended) the replay of its trace. */
  function draw(s) {
    if (s.dirty) {
      s.dirty = false;
      if (!s.answer) {
        s.run = runFromEvents(s.events, s.addresses, s.config, { subs: subs(s) });
        renderLog($("live-log"), s.run, null);
      }
    }
    if (!s.run) return;
    const t = s.done ? s.run.endedAt : Math.max(s.run.endedAt, (performance.now() - s.wall) * 1000);
    const run = s.done ? s.run : { ...s.run, endedAt: t };
    drawTimeline(tl, run, t, { domain: Math.max(domainFor(run, "fit"), t * 1.15) });
    $("live-progress").textContent = progressText(run, t);
    updateLog($("live-log"), t, true);
  }

  /** The refresh ended with `trace` (none when aborted): replay it, and draw that. */
  function replayTrace(s) {
    if (!s.trace) return;
    const answer = engine.replay(JSON.stringify(s.trace));
    if (answer.verdict === "invalid") {
      s.replayError = answer.error;
      return;
    }
    s.answer = answer;
    s.run = runFromReport(answer.report, answer.config, { subs: subs(s) });
    renderLog($("live-log"), s.run, null);
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
    if (!mod || typeof mod.refreshWith !== "function") {
      setStatus(`This build has no browser adapter. Build it (<code>adapters/browser/build.sh</code>), then rebuild the
        page (<code>web-demo/build.sh</code>), which copies <code>adapters/browser/pkg</code> into <code>dist/browser</code>.`, "bad");
      return;
    }
    stop();
    const config = app.config();
    const controller = new AbortController();
    const addresses = [...new Set(urls.map(bridgeAddress))];
    const s = { urls, addresses, config, events: [], wall: performance.now(), done: false, dirty: true, controller, run: null, trace: null };
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
      s.events.push(e);
      s.dirty = true;
    };
    loop(s);
    let metadata = null;
    let error = null;
    try {
      const result = await mod.refreshWith({ bootstrap: urls, config, sasl: saslOptions(), onEvent, signal: controller.signal });
      ({ metadata } = result);
      s.trace = result.trace;
    } catch (e) {
      error = e;
      s.trace = e?.trace ?? null;
      s.aborted = e?.name === "AbortError";
    }
    if (session !== s) return;
    s.done = true;
    s.dirty = true;
    cancelAnimationFrame(s.raf);
    replayTrace(s);
    draw(s);
    $("live-run").disabled = false;
    $("live-stop").disabled = true;
    finish(s, metadata, error);
  }

  function finish(s, metadata, error) {
    const answer = s.answer;
    if (s.run && answer) {
      renderSummary($("live-summary"), s.run, { giveUp: answer.give_up });
    } else if (s.run && s.events.length) {
      $("live-summary").innerHTML = `<p class="headline warn">${s.aborted ? "Stopped: every socket was closed." : "The adapter stopped before the refresh finished."}</p>`;
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
      parts.push(`<span class="error-text">The live run's trace does not replay to the same commands: ${esc(answer.divergence.message)}</span>`);
    } else if (s.replayError) {
      parts.push(`<span class="error-text">Cannot replay the live run's trace: ${esc(s.replayError)}</span>`);
    }
    if (s.trace) parts.push(`<button type="button" class="link" data-live="replay">open in Replay</button> ·
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
    if (!act || !session?.trace) return;
    const text = JSON.stringify(session.trace, null, 2);
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
