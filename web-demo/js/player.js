// Play / pause / step / speed / scrub over a run's virtual time.
//
// Virtual time is the simulator's (or the trace's) microseconds; the player maps real time
// onto it at a chosen speed and calls `onFrame(t)` whenever the cursor moves. "auto" plays
// any run, 10 ms or 60 s long, in about five seconds.

import { fmtUs } from "./model.js";
import { icon } from "./icons.js";
import { stops } from "./run.js";

const SPEEDS = [
  ["auto", "auto (5 s)"],
  ["0.01", "0.01×"],
  ["0.1", "0.1×"],
  ["1", "1× real time"],
  ["10", "10×"],
  ["100", "100×"],
];

export class Player {
  /** `root`: element to build the controls in; `onFrame(t, playing)`: redraw at cursor t. */
  constructor(root, onFrame, { onSettle } = {}) {
    this.root = root;
    this.onFrame = onFrame;
    this.onSettle = onSettle || (() => {});
    this.run = null;
    this.t = 0;
    this.playing = false;
    this.speed = "auto";
    this.raf = 0;
    root.classList.add("player");
    root.innerHTML = `
      <div class="player-buttons">
        <button type="button" data-act="restart" title="Back to the start (Home)" aria-label="back to the start">${icon("restart")}</button>
        <button type="button" data-act="back" title="Previous event (←)" aria-label="previous event">${icon("back")}</button>
        <button type="button" data-act="play" class="primary play" title="Play / pause (space)" aria-label="play">${icon("play")}<span>Play</span></button>
        <button type="button" data-act="fwd" title="Next event (→)" aria-label="next event">${icon("fwd")}</button>
        <button type="button" data-act="end" title="To the end (End)" aria-label="to the end">${icon("end")}</button>
        <label class="speed">speed <select data-act="speed" aria-label="playback speed">
          ${SPEEDS.map(([v, l]) => `<option value="${v}">${l}</option>`).join("")}</select></label>
      </div>
      <div class="player-scrub">
        <input type="range" class="scrub" min="0" max="1000" step="any" value="0" aria-label="time (scrub)">
        <output class="clock" aria-live="off">t = 0</output>
      </div>`;
    this.$play = root.querySelector('[data-act="play"]');
    this.$range = root.querySelector(".scrub");
    this.$clock = root.querySelector(".clock");
    root.addEventListener("click", (ev) => {
      const act = ev.target.closest("button")?.dataset.act;
      if (act === "play") this.toggle();
      else if (act === "back") this.step(-1);
      else if (act === "fwd") this.step(1);
      else if (act === "restart") this.seek(0, true);
      else if (act === "end") this.seek(this.end(), true);
    });
    root.querySelector("select").addEventListener("change", (ev) => {
      this.speed = ev.target.value;
      this.anchor();
    });
    this.$range.addEventListener("input", () => {
      this.pause();
      this.seek(Number(this.$range.value));
    });
    this.$range.addEventListener("change", () => this.onSettle(this.t));
    this.$range.addEventListener("keydown", (ev) => {
      // Arrow keys step from event to event, as everywhere else on the page.
      if (ev.key === "ArrowLeft" || ev.key === "ArrowRight") {
        ev.preventDefault();
        ev.stopPropagation();
        this.step(ev.key === "ArrowLeft" ? -1 : 1);
      }
    });
  }

  end() {
    return this.run ? this.run.endedAt : 0;
  }

  /** Shows a new run with the cursor at `t` (default: the end, i.e. the whole result). */
  setRun(run, t = null) {
    this.pause();
    this.run = run;
    this.stopsCache = stops(run);
    this.$range.max = String(Math.max(1, run.endedAt));
    this.seek(t == null ? run.endedAt : Math.min(t, run.endedAt));
  }

  seek(t, settle = false) {
    this.t = Math.max(0, Math.min(t, this.end()));
    this.$range.value = String(this.t);
    this.$clock.textContent = `t = ${fmtUs(this.t)} / ${fmtUs(this.end())}`;
    if (!this.playing) this.root.dataset.state = this.t >= this.end() ? "ended" : "paused";
    this.onFrame(this.t, this.playing);
    if (settle) this.onSettle(this.t);
  }

  step(dir) {
    this.pause();
    const list = this.stopsCache || [0];
    const next = dir > 0 ? list.find((s) => s > this.t + 0.5) : [...list].reverse().find((s) => s < this.t - 0.5);
    this.seek(next ?? (dir > 0 ? this.end() : 0), true);
  }

  toggle() {
    this.playing ? this.pause() : this.play();
  }

  rate() {
    // Virtual µs per real ms.
    if (this.speed === "auto") return Math.max(1, this.end()) / 5000;
    return Number(this.speed) * 1000;
  }

  anchor() {
    this.wallStart = performance.now();
    this.tStart = this.t;
  }

  play() {
    if (!this.run || this.playing) return;
    if (this.t >= this.end()) this.seek(0);
    this.playing = true;
    this.$play.innerHTML = `${icon("pause")}<span>Pause</span>`;
    this.$play.setAttribute("aria-label", "pause");
    this.root.dataset.state = "playing";
    this.anchor();
    const frame = () => {
      if (!this.playing) return;
      const t = this.tStart + (performance.now() - this.wallStart) * this.rate();
      if (t >= this.end()) {
        this.seek(this.end());
        this.pause();
        this.onSettle(this.t);
        return;
      }
      this.seek(t);
      this.raf = requestAnimationFrame(frame);
    };
    this.raf = requestAnimationFrame(frame);
  }

  pause() {
    const was = this.playing;
    this.playing = false;
    cancelAnimationFrame(this.raf);
    this.$play.innerHTML = `${icon("play")}<span>Play</span>`;
    this.$play.setAttribute("aria-label", "play");
    this.root.dataset.state = this.t >= this.end() ? "ended" : "paused";
    if (was) this.onFrame(this.t, false);
  }
}
