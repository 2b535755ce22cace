// Replay: open a recorded trace, play it back through the core, say whether it diverges.

import * as engine from "./engine.js";
import { fmtUs, ms } from "./model.js";
import { drawTimeline, domainFor } from "./timeline.js";
import { runFromReport } from "./run.js";
import { Player } from "./player.js";
import { progressText, renderLog, renderSummary, updateLog } from "./panels.js";

function esc(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

/** A one-line description of a policy, for the trace's header. */
export function describeConfig(c) {
  const f = c.fanout;
  const all = (n) => (n >= 4294967295 ? "all" : n);
  const a = f.stagger.adaptive;
  const stagger = "fixed" in f.stagger ? `fixed ${ms(f.stagger.fixed)} ms`
    : `adaptive (cold ${ms(a.cold)} ms, ${a.multiple}× handshake, patience ${a.patience}×)`;
  const growth = "linear" in f.growth ? `+${f.growth.linear}` : `×${f.growth.exponential}`;
  return `stagger ${stagger}, initial ${all(f.initial)}, ${growth} per tick, max in flight ${all(f.max_in_flight)}, jitter ${f.jitter}, `
    + `${f.tuning.cancel_silent_on_answer ? "an answer cancels silent attempts" : "silent attempts kept"}, `
    + `${f.tuning.spread_ticks ? "ticks spread" : "ticks all at once"}, `
    + `attempt timeout ${fmtUs(ms(c.attempt_timeout) * 1000)}, deadline ${fmtUs(ms(c.deadline) * 1000)}, retries ${c.retry.retries}, seed ${c.seed}`;
}

export function initReplay(app) {
  const $ = (id) => document.getElementById(id);
  const tl = $("rp-timeline");
  let run = null;
  let axis = "fit";

  const player = new Player($("rp-player"), (t) => frame(t));

  function frame(t) {
    if (!run) return;
    drawTimeline(tl, run, t, {
      domain: domainFor(run, axis),
      onScrub: (x) => {
        player.pause();
        player.seek(x);
      },
    });
    $("rp-progress").textContent = progressText(run, t);
    updateLog($("rp-log"), t, true);
  }

  /** Replays `text` (a trace's JSON); `source` names where it came from. */
  function open(text, source) {
    const answer = engine.replay(text);
    const verdict = $("rp-verdict");
    verdict.hidden = false;
    verdict.dataset.verdict = answer.verdict;
    if (answer.verdict === "invalid") {
      verdict.className = "verdict bad";
      verdict.innerHTML = `<strong>Cannot replay ${esc(source)}.</strong> ${esc(answer.error)}`;
      $("rp-body").hidden = true;
      $("rp-info").textContent = "";
      run = null;
      return answer;
    }
    if (answer.verdict === "match") {
      verdict.className = "verdict ok";
      verdict.innerHTML = `<strong>✓ No divergence.</strong> Replayed through the core, ${esc(source)} produces exactly the
        ${answer.commands} recorded command${answer.commands === 1 ? "" : "s"}, in order.`;
    } else {
      const d = answer.divergence;
      verdict.className = "verdict bad";
      verdict.innerHTML = `<strong>✗ The replay DIVERGES</strong> from ${esc(source)} at recorded event ${d.event_index}
        (${d.at != null ? fmtUs(d.at) : "?"} after the start): the trace recorded <code>${esc(d.recorded ?? "nothing")}</code>,
        the core now emits <code>${esc(d.replayed ?? "nothing")}</code>. The timeline below is what today's core does with the recorded inputs.`;
    }
    $("rp-info").textContent = `Recorded by ${answer.recorder} · ${answer.report.lanes.length} brokers · `
      + `${answer.recorded_events} recorded events · ${describeConfig(answer.config)}`;
    const r = runFromReport(answer.report, answer.config);
    if (answer.divergence && answer.divergence.at != null) r.divergenceAt = answer.divergence.at;
    run = r;
    $("rp-body").hidden = false;
    renderSummary($("rp-summary"), run, {
      giveUp: answer.give_up,
      note: answer.finished ? "" : "The trace ends before the refresh finished (no Done or GiveUp was recorded).",
    });
    renderLog($("rp-log"), run, (at) => {
      player.pause();
      player.seek(at);
    });
    player.setRun(run);
    return answer;
  }

  async function openFile(file) {
    if (!file) return;
    if (file.size > 50 * 1024 * 1024) {
      open("", `${file.name} (larger than 50 MB)`);
      return;
    }
    open(await file.text(), file.name);
  }

  $("rp-file").addEventListener("change", (ev) => openFile(ev.target.files[0]));
  const drop = $("rp-drop");
  drop.addEventListener("dragover", (ev) => {
    ev.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (ev) => {
    ev.preventDefault();
    drop.classList.remove("over");
    openFile(ev.dataTransfer?.files?.[0]);
  });
  drop.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && ev.target === drop) $("rp-file").click();
  });
  // Dropping a file anywhere on the Replay tab counts, not just on the box.
  document.addEventListener("dragover", (ev) => {
    if (app.state.view === "replay") ev.preventDefault();
  });
  document.addEventListener("drop", (ev) => {
    if (app.state.view !== "replay" || drop.contains(ev.target)) return;
    ev.preventDefault();
    openFile(ev.dataTransfer?.files?.[0]);
  });
  drop.addEventListener("click", async (ev) => {
    const b = ev.target.closest("[data-fixture]");
    if (!b) return;
    const name = b.dataset.fixture;
    const res = await fetch(`fixtures/${name}`);
    open(res.ok ? await res.text() : "", `the example ${name}`);
  });
  $("rp-axis").addEventListener("change", (ev) => {
    axis = ev.target.checked ? "deadline" : "fit";
    player.seek(player.t);
  });
  window.addEventListener("resize", () => run && app.state.view === "replay" && frame(player.t));

  return {
    player,
    open,
    activate() {
      if (run) frame(player.t);
    },
  };
}
