// The page: tabs, the shared state (cluster, policy, seed), the URL, the keyboard.

import * as engine from "./engine.js";
import { configFromKnobs, decodeHash, defaultBrokers, encodeHash, knobsFromConfig, loadKnobs } from "./model.js";
import { initSimulate } from "./simulate.js";
import { initCompare } from "./compare.js";
import { initReplay } from "./replay.js";
import { initLive } from "./live.js";
import { decorate } from "./icons.js";

const VIEWS = ["simulate", "compare", "replay", "live"];

async function boot() {
  const boot = document.getElementById("boot");
  try {
    await engine.load();
  } catch (e) {
    boot.textContent = `Could not load the WebAssembly core: ${e.message}. Build the page with web-demo/build.sh and serve web-demo/dist over HTTP.`;
    boot.classList.add("error");
    return;
  }
  loadKnobs();
  // The page asks the brokers in the order it lists them (where you put a broker is where
  // it is asked), over the core's presets, which shuffle; the shuffle_seeds knob turns it back on.
  const presetList = engine.presets().map((p) => ({ ...p, config: { ...p.config, shuffle_seeds: false } }));
  const presetConfigs = Object.fromEntries(presetList.map((p) => [p.name, p.config]));
  const base = {
    view: "simulate",
    preset: "adaptive",
    seed: 0,
    brokers: defaultBrokers(),
    knobs: knobsFromConfig(presetConfigs.adaptive),
    axis: "fit",
    t: null,
  };

  let hashTimer = 0;
  const app = {
    state: base,
    presetList,
    presetConfigs,
    views: {},
    /** Writes the state into the URL (no history entry: the back button leaves the page). */
    saveHash(now = false) {
      clearTimeout(hashTimer);
      const write = () => {
        const hash = encodeHash(app.state);
        if (location.hash !== hash) history.replaceState(null, "", hash);
      };
      // Debounced: dragging the scrubber must not flood the history API.
      if (now) write();
      else hashTimer = setTimeout(write, 120);
    },
    show(view) {
      if (!VIEWS.includes(view)) view = "simulate";
      app.state.view = view;
      for (const v of VIEWS) {
        document.getElementById(`view-${v}`).hidden = v !== view;
        const tab = document.getElementById(`tab-${v}`);
        tab.setAttribute("aria-selected", String(v === view));
        tab.tabIndex = v === view ? 0 : -1;
      }
      document.body.dataset.view = view;
      app.views[view]?.activate?.();
      app.saveHash();
    },
    /** The policy the knobs describe, over the selected preset (see configFromKnobs). */
    config(seed = app.state.seed) {
      return configFromKnobs(app.state.knobs, seed, presetConfigs[app.state.preset] ?? presetConfigs.adaptive);
    },
    activePlayer() {
      return app.views[app.state.view]?.player ?? null;
    },
  };

  const load = (hash) => {
    const { state, errors } = decodeHash(hash, base, presetConfigs);
    app.state = state;
    if (errors.length) console.warn("permalink:", errors.join("; "));
    return errors;
  };
  const errors = location.hash ? load(location.hash) : [];

  app.views.simulate = initSimulate(app);
  app.views.compare = initCompare(app);
  app.views.replay = initReplay(app);
  app.views.live = initLive(app);
  if (errors.length) app.views.simulate.warn(`Some of the link could not be read: ${errors.join("; ")}`);

  document.querySelector(".tabs").addEventListener("click", (ev) => {
    const b = ev.target.closest("[data-view]");
    if (b) app.show(b.dataset.view);
  });
  document.querySelector(".tabs").addEventListener("keydown", (ev) => {
    if (ev.key !== "ArrowLeft" && ev.key !== "ArrowRight") return;
    ev.preventDefault();
    ev.stopPropagation();
    const i = VIEWS.indexOf(app.state.view) + (ev.key === "ArrowRight" ? 1 : -1);
    const v = VIEWS[(i + VIEWS.length) % VIEWS.length];
    app.show(v);
    document.getElementById(`tab-${v}`).focus();
  });
  window.addEventListener("hashchange", () => {
    if (location.hash === encodeHash(app.state)) return;
    load(location.hash);
    app.views.simulate.reload();
    app.show(app.state.view);
  });

  // Keyboard: space plays or pauses, arrows step between events, Home/End jump.
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const el = ev.target;
    const tag = el.tagName;
    const typing = (tag === "INPUT" && !["checkbox", "radio", "range", "button"].includes(el.type))
      || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
    if (typing) return;
    const player = app.activePlayer();
    if (!player) return;
    if (ev.key === " " || ev.code === "Space") {
      ev.preventDefault();
      player.toggle();
    } else if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") {
      ev.preventDefault();
      player.step(ev.key === "ArrowRight" ? 1 : -1);
    } else if (ev.key === "Home") {
      ev.preventDefault();
      player.seek(0, true);
    } else if (ev.key === "End") {
      ev.preventDefault();
      player.seek(player.end(), true);
    }
  });
  // A space released on a focused button must not also click it (space is play/pause here).
  document.addEventListener("keyup", (ev) => {
    const t = ev.target;
    const clickable = t.tagName === "BUTTON" || (t.tagName === "INPUT" && t.type === "checkbox");
    if ((ev.key === " " || ev.code === "Space") && clickable) ev.preventDefault();
  });

  decorate();
  boot.remove();
  document.body.classList.add("ready");
  app.show(app.state.view);
}

boot();
