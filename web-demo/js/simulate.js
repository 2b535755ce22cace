// Simulate: the core against a simulated cluster, in virtual time, drawn as a timeline.

import * as engine from "./engine.js";
import {
  KIND_HELP, KNOBS, brokerLabel, knobGroups, samePolicy, knobText, knobsFromConfig, newBroker, nextKind, parseKnob,
  scenario,
} from "./model.js";
import { drawTimeline, domainFor } from "./timeline.js";
import { runFromReport } from "./run.js";
import { Player } from "./player.js";
import { progressText, renderLog, renderSummary, updateLog } from "./panels.js";

/** A knob's text as a blurb reads it: `40ms` → `40 ms`, `fixed:500ms` → `500 ms`, `0.2` → `20 %`. */
const spaced = (text) => String(text).replace(/^fixed:/, "").replace(/^(\d+(?:\.\d+)?)([a-zµ]+)$/, "$1 $2");
const percent = (text) => `${Math.round(Number(text) * 100)} %`;
/** `linear:2` → `2 more`, `exponential:2` → `×2 as many`: what each tick adds. */
const perTick = (growth) => {
  const [kind, n] = String(growth).split(":");
  return kind === "linear" ? `${n} more` : `×${n} as many`;
};

/**
 * What each preset does, in words, given its knob values (`engine.knobValues` of the preset's
 * config: the core's text, by path). Every number comes from there, none is written here: a
 * blurb that quoted its numbers said "250 ms while nothing is known" long after the cold
 * delay had become 40 ms.
 */
const PRESET_HELP = {
  adaptive: (v) => {
    const a = (k) => v[`fanout.stagger.adaptive.${k}`];
    const growth = v["fanout.growth"];
    const spread = String(growth).startsWith("linear:") ? `delay/${growth.split(":")[1]}` : "a share of the delay";
    return `The default: ${v["fanout.initial"]} attempt${v["fanout.initial"] === "1" ? "" : "s"} at first; `
      + `${perTick(growth)} at each adaptive stagger tick — ${spaced(a("cold"))} while nothing is known, `
      + `${a("multiple")}× the broker pace (${spaced(a("silent"))}, ${spaced(a("silent_tls"))} over TLS, until first answers are seen) `
      + "once a broker accepted but stays silent, "
      + `${a("patience")}× an answer's time once it answers (TLS or Kafka). `
      + `On a fast network the tick's attempts start ${spread} apart (at least ${spaced(a("floor"))}) and the rest are dropped if one answers. `
      + "The first broker to answer cancels the silent ones (overtaken); each replaced silent attempt doubles the next delay, "
      + `up to ${spaced(a("pace"))}. At most ${v["fanout.max_in_flight"]} in flight, ${percent(v["fanout.jitter"])} jitter.`;
  },
  sequential: () => "Sarama today: one broker at a time; the next only after the previous one failed or timed out.",
  "all-at-once": () => "Ask every broker at once: fast, but every client hits every broker at every failover.",
  staggered: (v) => `The seed discussion's proposal: another broker every ${spaced(v["fanout.stagger"])} (fixed), `
    + `${percent(v["fanout.jitter"])} jitter.`,
  custom: () => "A policy from a link that names no preset.",
};

export function initSimulate(app) {
  const $ = (id) => document.getElementById(id);
  const tl = $("sim-timeline");
  let run = null;
  let result = null;
  let redrawTimer = 0;

  const player = new Player($("sim-player"), (t, playing) => frame(t, playing), {
    onSettle: (t) => {
      app.state.t = run && t < run.endedAt ? Math.round(t) : null;
      app.saveHash();
    },
  });

  function frame(t) {
    if (!run) return;
    drawTimeline(tl, run, t, {
      domain: domainFor(run, app.state.axis),
      onLane: (i) => cycle(i, true),
      onScrub: (x) => {
        player.pause();
        player.seek(x, true);
      },
      laneTitle: "Click (or Enter) to change its behaviour.",
    });
    $("sim-progress").textContent = progressText(run, t);
    updateLog($("sim-log"), t, true);
  }

  // ---- cluster -------------------------------------------------------------------------

  function renderBrokers() {
    const box = $("sim-brokers");
    const focused = document.activeElement && box.contains(document.activeElement)
      ? [document.activeElement.closest(".broker")?.dataset.i, document.activeElement.dataset.f || document.activeElement.dataset.act]
      : null;
    box.innerHTML = app.state.brokers.map((b, i) => {
      const num = (f, unit, title) =>
        `<label class="f" title="${title}"><input type="number" min="0" step="any" data-f="${f}" value="${f === "p" ? +(b.p * 100).toFixed(4) : b[f]}" aria-label="broker-${i} ${title}">${unit}</label>`;
      const params = {
        healthy: num("rtt", "ms", "answer time (RTT), ms"),
        slow: num("min", "–", "fastest answer, ms") + num("max", "ms", "slowest answer, ms"),
        hung: `<span class="muted small">never</span>`,
        refused: `<span class="muted small">refuses</span>`,
        flaky: num("p", "%", "probability of closing the connection") + num("rtt", "ms", "time to answer or close, ms"),
      }[b.kind];
      return `<div class="broker" data-i="${i}">
        <span class="bname">broker-${i}</span>
        <button type="button" class="kind kind-${b.kind}" data-act="cycle" title="${b.kind}: ${KIND_HELP[b.kind]}. Click for the next behaviour."
          aria-label="broker-${i} is ${b.kind}; click to change">${b.kind}</button>
        <span class="params">${params}</span>
        <label class="f hs" title="handshake: time from connect to connected (or to the refusal)"><input type="number" min="0" step="any" data-f="hs" value="${b.hs}" aria-label="broker-${i} handshake ms">ms</label>
      </div>`;
    }).join("");
    box.insertAdjacentHTML("afterbegin", `<div class="broker head" aria-hidden="true"><span>broker</span><span>behaviour</span><span>answers after</span><span>handshake</span></div>`);
    $("sim-count").value = String(app.state.brokers.length);
    if (focused && focused[0] != null) {
      const row = box.querySelector(`.broker[data-i="${focused[0]}"]`);
      const el = row && (row.querySelector(`[data-f="${focused[1]}"]`) || row.querySelector(`[data-act="${focused[1]}"]`));
      el?.focus();
    }
  }

  function cycle(i, fromLane = false) {
    const b = app.state.brokers[i];
    if (!b) return;
    b.kind = nextKind(b.kind);
    renderBrokers();
    update();
    if (fromLane) tl.querySelector(`.lane-label[data-lane="${i}"]`)?.focus();
  }

  function setCount(n) {
    n = Math.max(1, Math.min(32, Math.floor(n) || 1));
    const list = app.state.brokers;
    while (list.length < n) list.push(newBroker());
    list.length = n;
    renderBrokers();
    update();
  }

  $("sim-brokers").addEventListener("click", (ev) => {
    const btn = ev.target.closest('[data-act="cycle"]');
    if (btn) cycle(Number(btn.closest(".broker").dataset.i));
  });
  $("sim-brokers").addEventListener("input", (ev) => {
    const f = ev.target.dataset.f;
    if (!f) return;
    const i = Number(ev.target.closest(".broker").dataset.i);
    const v = Number(ev.target.value);
    const ok = ev.target.value !== "" && isFinite(v) && v >= 0 && (f !== "p" || v <= 100) && v <= 3.6e6;
    ev.target.setAttribute("aria-invalid", String(!ok));
    if (!ok) return;
    app.state.brokers[i][f] = f === "p" ? v / 100 : v;
    update();
  });
  $("sim-count").addEventListener("change", (ev) => setCount(Number(ev.target.value)));
  $("sim-fewer").addEventListener("click", () => setCount(app.state.brokers.length - 1));
  $("sim-more").addEventListener("click", () => setCount(app.state.brokers.length + 1));
  $("sim-seed").addEventListener("input", (ev) => {
    const v = Number(ev.target.value);
    const ok = Number.isInteger(v) && v >= 0 && v <= Number.MAX_SAFE_INTEGER;
    ev.target.setAttribute("aria-invalid", String(!ok));
    if (!ok) return;
    app.state.seed = v;
    update();
  });
  $("sim-reseed").addEventListener("click", () => {
    app.state.seed = Math.floor(Math.random() * 100000);
    $("sim-seed").value = String(app.state.seed);
    update();
  });

  // ---- policy --------------------------------------------------------------------------

  function renderPresets() {
    const names = app.presetList.map((p) => p.name);
    $("sim-presets").innerHTML = names
      .map((n) => `<button type="button" data-preset="${n}" aria-pressed="false">${n}</button>`)
      .join("");
  }

  function renderKnobs() {
    $("sim-knobs").innerHTML = knobGroups().map((g) => `
      <details class="knob-group" data-group="${g}" open>
        <summary>${g}</summary>
        <div class="knob-grid">${KNOBS.filter((k) => k.group === g).map(knobHtml).join("")}</div>
      </details>`).join("");
    syncKnobs();
  }

  function knobHtml(k) {
    const id = k.id;
    let input;
    if (k.kind === "bool") input = `<input type="checkbox" id="${id}" data-knob="${k.key}">`;
    else {
      // A choice is its core text (`linear:2`, `fixed:500ms`), with the variants offered.
      const list = k.choices ? `<datalist id="${id}-choices">${k.choices.map((c) => `<option value="${c}">`).join("")}</datalist>` : "";
      const mode = ["u32", "u64", "f64"].includes(k.kind) ? "decimal" : "text";
      input = `<input type="text" inputmode="${mode}" id="${id}" data-knob="${k.key}" ${list ? `list="${id}-choices"` : ""} autocomplete="off" spellcheck="false">${list}`;
    }
    return `<div class="knob" data-key="${k.key}" title="${k.help}"><label for="${id}">${k.label}</label><span class="in">${input}</span></div>`;
  }

  /** Puts the state's knob values into the inputs and hides knobs that do not apply. */
  function syncKnobs() {
    for (const k of KNOBS) {
      const el = document.getElementById(k.id);
      if (!el) continue;
      const v = app.state.knobs[k.key];
      if (k.kind === "bool") el.checked = String(v) === "true";
      else if (document.activeElement !== el) el.value = knobText(k, v);
      el.removeAttribute("aria-invalid");
      el.closest(".knob").hidden = k.when ? !k.when(app.state.knobs) : false;
    }
    const preset = app.state.preset;
    for (const b of $("sim-presets").querySelectorAll("button")) b.setAttribute("aria-pressed", String(b.dataset.preset === preset));
    const base = app.presetConfigs[preset];
    const modified = !base || !samePolicy(app.config(0), base);
    $("sim-preset-state").textContent = base ? `${preset}${modified ? " (modified)" : ""}` : "custom";
    const help = PRESET_HELP[base ? preset : "custom"];
    $("sim-preset-help").textContent = help ? help(base ? engine.knobValues(base) : {}) : "";
  }

  $("sim-presets").addEventListener("click", (ev) => {
    const b = ev.target.closest("[data-preset]");
    if (!b) return;
    app.state.preset = b.dataset.preset;
    app.state.knobs = knobsFromConfig(app.presetConfigs[b.dataset.preset], app.state.knobs);
    syncKnobs();
    update();
  });
  const onKnob = (ev) => {
    const key = ev.target.dataset.knob;
    if (!key) return;
    const k = KNOBS.find((x) => x.key === key);
    try {
      app.state.knobs[key] = parseKnob(k, k.kind === "bool" ? (ev.target.checked ? "1" : "0") : ev.target.value);
      ev.target.removeAttribute("aria-invalid");
    } catch (e) {
      ev.target.setAttribute("aria-invalid", "true");
      ev.target.title = e.message;
      return;
    }
    syncKnobs();
    update();
  };
  $("sim-knobs").addEventListener("input", onKnob);
  $("sim-knobs").addEventListener("change", onKnob);

  // ---- running -------------------------------------------------------------------------

  function config() {
    return app.config();
  }

  /** Re-runs the simulation for the current state; the cursor goes to `t` or the end. */
  function update(t = null) {
    const cfg = config();
    const check = engine.validate(cfg);
    const err = $("sim-config-error");
    document.querySelectorAll("#sim-knobs [data-knob]").forEach((el) => el.classList.remove("invalid"));
    if (check.error) {
      err.hidden = false;
      err.textContent = check.error;
      // The core names the field by its knob's path.
      const knob = KNOBS.find((k) => k.key === check.field);
      if (knob) document.getElementById(knob.id)?.classList.add("invalid");
    } else {
      err.hidden = true;
    }
    result = engine.simulate(scenario(app.state.brokers, app.state.seed), cfg);
    if (result.error) {
      err.hidden = false;
      err.textContent = result.error;
      return;
    }
    run = runFromReport(result.report, cfg, {
      subs: app.state.brokers.map(brokerLabel),
      kinds: app.state.brokers.map((b) => b.kind),
    });
    $("sim-caption").textContent = `· ${app.state.brokers.length} brokers · ${$("sim-preset-state").textContent} · seed ${app.state.seed}`;
    renderSummary($("sim-summary"), run, { giveUp: result.give_up });
    renderLog($("sim-log"), run, (at) => {
      player.pause();
      player.seek(at, true);
    });
    app.state.t = t;
    player.setRun(run, t);
    app.saveHash();
    document.body.dataset.simVersion = String((Number(document.body.dataset.simVersion) || 0) + 1);
  }

  $("sim-axis").addEventListener("change", (ev) => {
    app.state.axis = ev.target.checked ? "deadline" : "fit";
    player.seek(player.t);
    app.saveHash();
  });

  $("sim-permalink").addEventListener("click", async (ev) => {
    app.saveHash(true);
    const btn = ev.currentTarget;
    try {
      await navigator.clipboard.writeText(location.href);
      btn.querySelector("span").textContent = "Link copied";
    } catch {
      btn.querySelector("span").textContent = "Link in the address bar";
    }
    setTimeout(() => (btn.querySelector("span").textContent = "Permalink"), 1800);
  });

  $("sim-download").addEventListener("click", () => {
    const trace = result?.report?.trace;
    if (!trace) return;
    const blob = new Blob([JSON.stringify(trace, null, 2) + "\n"], { type: "application/json" });
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = `stagger-sim-seed${app.state.seed}.trace.json`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  });

  $("sim-to-replay").addEventListener("click", () => {
    const trace = result?.report?.trace;
    if (!trace) return;
    app.views.replay.open(JSON.stringify(trace), "this simulated run");
    app.show("replay");
  });

  window.addEventListener("resize", () => {
    clearTimeout(redrawTimer);
    redrawTimer = setTimeout(() => run && frame(player.t), 80);
  });

  /** Loads the state (e.g. from a changed URL) into every control and re-runs. */
  function reload() {
    renderBrokers();
    syncKnobs();
    $("sim-seed").value = String(app.state.seed);
    $("sim-axis").checked = app.state.axis === "deadline";
    update(app.state.t);
  }

  renderPresets();
  renderKnobs();
  reload();

  return {
    player,
    reload,
    config,
    activate() {
      if (run) frame(player.t);
    },
    warn(message) {
      const err = $("sim-config-error");
      err.hidden = false;
      err.textContent = message;
    },
  };
}
