// Simulate mode in real headless Chromium: a hung first broker, the stagger at work,
// playback, the keyboard, and a permalink that restores the same run.

import { test } from "node:test";
import assert from "node:assert/strict";
import { demoSession, open, screenshot, spans } from "./harness.mjs";

const session = demoSession();

/** Clicks the lane label of broker `i` until its behaviour is `kind`. */
async function makeBroker(page, i, kind) {
  for (let n = 0; n < 5; n++) {
    const current = await page.$eval(`#sim-brokers .broker[data-i="${i}"] .kind`, (b) => b.textContent.trim());
    if (current === kind) return;
    await page.click(`#sim-timeline .lane-label[data-lane="${i}"]`);
  }
  throw new Error(`broker-${i} never became ${kind}`);
}

async function setKnob(page, key, value) {
  await page.fill(`#knob-${key.replaceAll(".", "-")}`, String(value));
  await page.waitForFunction(([k, v]) => new URLSearchParams(location.hash.slice(1)).get(k) === v, [key, String(value)]);
}

/** Clicks the permalink and opens it in a second page; returns the link and that page. */
async function openPermalink(page) {
  await page.click("#sim-permalink");
  const link = await page.evaluate(() => location.href);
  return { link, again: await open(session.browser.context, link) };
}

/** The reopened page, stepped to its end, shows `expected`'s spans and neither page logged
 *  an error; closes both. */
async function expectSameRunAndClose(page, again, expected) {
  await again.keyboard.press("End");
  assert.deepEqual(await spans(again), expected, "the same run from the link");
  assert.deepEqual(page.errors, []);
  assert.deepEqual(again.errors, []);
  await page.close();
  await again.close();
}

/** Plays the run to its end at 100× real time. */
async function playToEnd(page) {
  await page.selectOption("#sim-player select", "100");
  await page.click('#sim-player [data-act="play"]');
  await page.waitForSelector('#sim-player[data-state="ended"]', { timeout: 20_000 });
}

test("a hung first broker: the second attempt starts at the stagger delay and broker 2 answers", async () => {
  // Three healthy brokers to start from (the default cluster is `stagger demo`'s six).
  const page = await open(session.browser.context, `${session.server.url}#b=healthy:5,healthy:5,healthy:5`);
  // "Broker 1" is the first broker, broker-0; "broker 2" is the second, broker-1.
  await makeBroker(page, 0, "hung");
  assert.equal(await page.$eval("#sim-timeline .lane-label[data-lane='0'] .lane-sub", (t) => t.textContent), "hung");

  // A fixed 500 ms stagger without jitter: the second attempt must start at exactly 500 ms.
  await page.click('#sim-presets [data-preset="staggered"]');
  await setKnob(page, "fanout.jitter", 0);
  await playToEnd(page);
  let all = await spans(page);
  const first = all.find((s) => s.lane === 0);
  const second = all.find((s) => s.lane === 1);
  assert.equal(first.start, 0, "broker-0 is tried first, at once");
  assert.equal(second.start, 500_000, "the second attempt starts 500 ms in");
  const ticks = await page.$$eval("#sim-timeline g.tick-stagger", (g) => g.map((e) => Number(e.dataset.at)));
  assert.deepEqual(ticks, [500_000], "one stagger tick, at 500 ms");
  assert.equal(second.outcome, "won");
  assert.equal(second.end, 500_000 + 1_000 + 5_000, "connected after 1 ms, answered 5 ms later");
  // Its first answer (ApiVersions) comes one handshake after it connected, and cancels the
  // hung attempt, still silent, there and then.
  assert.equal(second.answered, 500_000 + 1_000 + 1_000, "first answer one round trip after connecting");
  assert.equal(first.outcome, "cancelled", "the hung attempt is cancelled");
  assert.equal(first.reason, "overtaken", "by broker-1's first answer, not by its win");
  assert.equal(first.end, second.answered);
  assert.equal(first.answered, null, "a hung broker never answers");
  assert.equal(all.filter((s) => s.lane === 2).length, 0, "broker-2 is never bothered");
  const headline = page.locator("#sim-summary .headline");
  assert.equal(await headline.getAttribute("data-winner"), "broker-1");
  assert.match(await headline.innerText(), /Metadata in 506 ms from broker-1/);
  assert.equal(await page.$eval('#sim-summary [data-stat="started"] dd', (d) => d.textContent), "2");
  await screenshot(page, "simulate-hung-first-staggered-1280x800");

  // The default (adaptive) policy: broker-0 accepted in 1 ms and stays silent, so it is
  // suspected 2 × the 12 ms silent pace = 24 ms after its handshake, minus up to 20 %
  // jitter: the tick comes 1 ms + [19.2, 24] ms in. It starts broker-1 now and would start
  // its partner (Linear(2)) half the delay later, since two 1 ms handshakes fit in that.
  await page.click('#sim-presets [data-preset="adaptive"]');
  await playToEnd(page);
  all = await spans(page);
  const tick = await page.$$eval("#sim-timeline g.tick-stagger", (g) => g.map((e) => Number(e.dataset.at)));
  const hedge = all.find((s) => s.lane === 1);
  assert.equal(tick.length, 1);
  assert.equal(hedge.start, tick[0], "the second attempt starts on the stagger tick");
  assert.ok(hedge.start >= 20_200 && hedge.start <= 25_000, `stagger tick at ${hedge.start} µs: 1 ms + 24 ms − up to 20 %`);
  // It connects 1 ms after the tick and answers 1 ms later, before its partner is due: the
  // answer cancels broker-0, still silent, the partner never starts, and the metadata wins
  // 5 ms after it connected.
  assert.equal(hedge.outcome, "won");
  assert.equal(hedge.answered, tick[0] + 2_000);
  assert.equal(hedge.end, tick[0] + 1_000 + 5_000);
  const silent = all.find((s) => s.lane === 0);
  assert.deepEqual([silent.outcome, silent.reason, silent.end], ["cancelled", "overtaken", hedge.answered], JSON.stringify(silent));
  assert.equal(all.filter((s) => s.lane === 2).length, 0, "the tick's partner was dropped");
  assert.equal(await headline.getAttribute("data-winner"), "broker-1");
  await screenshot(page, "simulate-hung-first-adaptive-1280x800");
  assert.deepEqual(page.errors, []);
  await page.close();
});

test("keyboard: space plays and pauses, arrows step from event to event", async () => {
  const page = await open(session.browser.context, `${session.server.url}#b=hung,refused,healthy:5`);
  await page.locator("body").focus();
  await page.keyboard.press("Home");
  assert.match(await page.textContent("#sim-player .clock"), /^t = 0 ms/);
  await page.keyboard.press("ArrowRight");
  const stepped = await page.$eval("#sim-timeline svg", (s) => Number(s.dataset.t));
  const firstEvent = await page.$eval("#sim-log li:not(.future):last-child, #sim-log li.current", (li) => Number(li.dataset.at));
  assert.ok(stepped > 0, "→ moved the cursor");
  assert.equal(stepped, firstEvent, "→ stops on the next event");
  await page.keyboard.press("ArrowLeft");
  assert.equal(await page.$eval("#sim-timeline svg", (s) => Number(s.dataset.t)), 0, "← goes back");
  // Enter on a focused lane label cycles that broker's behaviour (a click, by keyboard).
  await page.focus('#sim-timeline .lane-label[data-lane="2"]');
  await page.keyboard.press("Enter");
  assert.equal(await page.textContent('#sim-brokers .broker[data-i="2"] .kind'), "slow");
  // Clicking in the plot scrubs: the cursor jumps to the time under the pointer.
  const svg = await page.locator("#sim-timeline svg").boundingBox();
  await page.mouse.click(svg.x + svg.width * 0.6, svg.y + svg.height / 2);
  const scrubbed = await page.$eval("#sim-timeline svg", (s) => Number(s.dataset.t));
  const domain = await page.$eval("#sim-timeline svg", (s) => Number(s.dataset.domain));
  assert.ok(scrubbed > 0.3 * domain && scrubbed < 0.75 * domain, `scrubbed to ${scrubbed} of ${domain}`);
  await page.locator("body").focus();
  await page.keyboard.press("Space");
  assert.equal(await page.getAttribute("#sim-player", "data-state"), "playing");
  await page.keyboard.press("Space");
  assert.equal(await page.getAttribute("#sim-player", "data-state"), "paused");
  assert.deepEqual(page.errors, []);
  await page.close();
});

test("a permalink restores the same run: cluster, policy, seed and cursor", async () => {
  const page = await open(session.browser.context, session.server.url);
  // Something other than the defaults everywhere.
  await page.click("#sim-more");
  await makeBroker(page, 6, "slow");
  await makeBroker(page, 3, "flaky");
  await page.click('#sim-presets [data-preset="staggered"]');
  await setKnob(page, "fanout.max_in_flight", 2);
  await page.fill("#sim-seed", "42");
  await page.waitForFunction(() => location.hash.includes("seed=42"));
  await page.keyboard.press("Escape");
  await page.locator("body").focus();
  await page.keyboard.press("Home");
  for (let i = 0; i < 4; i++) await page.keyboard.press("ArrowRight");
  await page.click("#sim-permalink");
  const link = await page.evaluate(() => location.href);
  assert.match(link, /#.*b=hung,hung,refused,flaky:50:5,healthy:5,healthy:5,slow:200-800/);
  const before = {
    spans: await spans(page),
    summary: await page.innerText("#sim-summary"),
    clock: await page.textContent("#sim-player .clock"),
    log: await page.innerText("#sim-log"),
  };

  const again = await open(session.browser.context, link);
  const after = {
    spans: await spans(again),
    summary: await again.innerText("#sim-summary"),
    clock: await again.textContent("#sim-player .clock"),
    log: await again.innerText("#sim-log"),
  };
  assert.deepEqual(after, before);
  assert.equal(await again.inputValue("#sim-seed"), "42");
  assert.equal(await again.inputValue("#knob-fanout-max_in_flight"), "2");
  assert.equal(await again.getAttribute('#sim-presets [data-preset="staggered"]', "aria-pressed"), "true");
  // Played to the end, the restored run is the same run too.
  await again.keyboard.press("End");
  await page.keyboard.press("End");
  assert.deepEqual(await spans(again), await spans(page));
  assert.deepEqual(page.errors, []);
  assert.deepEqual(again.errors, []);
  await page.close();
  await again.close();
});

test("the timeline draws the answering phase and the attempts it overtakes", async () => {
  // Adaptive, no jitter, a tick's attempts started together: broker-0 hung (1 ms handshake),
  // brokers 1 and 2 healthy. From the model: broker-0 connects at 1 ms and is suspected
  // 2 × the 12 ms silent pace later; the tick at 25 ms starts broker-1 and broker-2, both
  // connect at 26 ms; broker-1 answers first at 27 ms (one more round trip), which cancels
  // broker-0 and broker-2 (still silent) as overtaken; broker-1's metadata comes 5 ms after
  // it connected, at 31 ms. The cursor sits at 29 ms, mid-answer.
  const hash = "#b=hung,healthy:5,healthy:5&preset=adaptive&fanout.jitter=0&fanout.tuning.spread_ticks=0";
  const page = await open(session.browser.context, `${session.server.url}${hash}&t=29000`);
  const mid = await spans(page);
  const answering = mid.find((s) => s.lane === 1);
  assert.deepEqual([answering.start, answering.answered, answering.end, answering.outcome], [25_000, 27_000, null, "inflight"]);
  const g = '#sim-timeline g.span[data-lane="1"]';
  assert.equal(await page.$$eval(`${g} rect.seg.answering`, (r) => r.length), 1, "the answering phase is drawn");
  assert.equal(await page.$$eval(`${g} line.answer-mark`, (l) => l.length), 1, "with a mark at the first answer");
  assert.match(await page.textContent(`${g} .span-text`), /#1 answering/);
  // The answering segment runs from the first answer to the cursor, after the silent one.
  const geometry = await page.$eval(g, (el) => {
    const box = (sel) => { const r = el.querySelector(sel); return [Number(r.getAttribute("x")), Number(r.getAttribute("width"))]; };
    return { awaiting: box("rect.seg.awaiting"), answering: box("rect.seg.answering"),
      mark: Number(el.querySelector("line.answer-mark").getAttribute("x1")) };
  });
  assert.ok(Math.abs(geometry.awaiting[0] + geometry.awaiting[1] - geometry.answering[0]) < 0.01, JSON.stringify(geometry));
  assert.equal(geometry.mark, geometry.answering[0]);
  for (const lane of [0, 2]) {
    const s = mid.find((x) => x.lane === lane);
    assert.deepEqual([s.outcome, s.reason, s.end, s.answered], ["cancelled", "overtaken", 27_000, null], `lane ${lane}`);
    assert.equal(await page.$$eval(`#sim-timeline g.span[data-lane="${lane}"] rect.seg.answering`, (r) => r.length), 0);
    assert.match(await page.textContent(`#sim-timeline g.span[data-lane="${lane}"] .span-text`), /cancelled: overtaken/);
    // The tooltip explains the reason in the engine's words.
    assert.match(await page.textContent(`#sim-timeline g.span[data-lane="${lane}"] > title`), /overtaken at .* — another broker started answering/);
  }
  assert.match(await page.textContent("#sim-progress"), /1 in flight \(1 answering\)/);
  // Before the answer (26.5 ms) broker-1 is connected and silent: no answering phase yet.
  await page.locator("body").focus();
  await page.evaluate((h) => { location.hash = `${h}&t=26500`; }, hash);
  await page.waitForFunction(() => document.querySelector("#sim-timeline svg")?.dataset.t === "26500");
  assert.equal(await page.$$eval(`${g} rect.seg.answering`, (r) => r.length), 0);
  assert.match(await page.textContent(`${g} .span-text`), /#1 awaiting answer/);
  // The log says it in words, answer first, then the cancellations it caused.
  const log = await page.$$eval("#sim-log li span", (s) => s.map((e) => e.textContent));
  const i = log.indexOf("#1 answered ← broker-1 (first answer: alive)");
  assert.ok(i > 0, log.join("\n"));
  assert.deepEqual(log.slice(i + 1, i + 3), ["#0 cancelled on broker-0 (overtaken)", "#2 cancelled on broker-2 (overtaken)"]);
  assert.equal(log.at(-1), "#1 won: metadata from broker-1", log.join("\n"));
  // The log's entries are the core's events, classed by their names.
  assert.equal(await page.$$eval("#sim-log li.ev-won", (l) => l.length), 1);
  assert.ok(await page.$$eval("#sim-log li.ev-timer.ev-stagger", (l) => l.length) >= 1, "a stagger tick in the log");
  assert.equal(await page.$$eval(".legend .lg.answering", (l) => l.length), 1, "the legend names the phase");
  await page.keyboard.press("End");
  await screenshot(page, "simulate-answering-overtaken-1280x800");
  assert.deepEqual(page.errors, []);
  await page.close();
});

test("patience, cancel-silent-on-answer and spread ticks are knobs, and travel in the permalink", async () => {
  // broker-0 is slow (metadata 100 ms after connecting) but answers ApiVersions at 2 ms (its
  // connect at 1 ms plus one round trip): it is answering, so the next attempt waits
  // patience × that 2 ms from its start. Patience 16: a tick at 32 ms, broker-1 (healthy,
  // 5 ms) connects at 33 ms and wins at 38 ms. Patience 64 (128 ms): no tick before
  // broker-0's metadata at 101 ms, one attempt in all.
  const page = await open(session.browser.context, `${session.server.url}#b=slow:100-100,healthy:5&preset=adaptive&fanout.jitter=0`);
  assert.equal(await page.inputValue("#knob-fanout-stagger-adaptive-patience"), "16", "the core's default");
  assert.equal(await page.isChecked("#knob-fanout-tuning-cancel_silent_on_answer"), true, "the core's default");
  assert.equal(await page.isChecked("#knob-fanout-tuning-spread_ticks"), true, "the core's default");
  await page.keyboard.press("End");
  let all = await spans(page);
  assert.deepEqual(await page.$$eval("#sim-timeline g.tick-stagger", (g) => g.map((e) => Number(e.dataset.at))), [32_000]);
  assert.deepEqual(all.map((s) => [s.lane, s.start, s.answered, s.end, s.outcome]),
    [[0, 0, 2_000, 38_000, "cancelled"], [1, 32_000, 34_000, 38_000, "won"]]);
  await setKnob(page, "fanout.stagger.adaptive.patience", 64);
  await page.keyboard.press("End");
  all = await spans(page);
  assert.deepEqual(all.map((s) => [s.lane, s.start, s.end, s.outcome]), [[0, 0, 101_000, "won"]]);
  assert.equal(await page.$$eval("#sim-timeline g.tick-stagger", (g) => g.length), 0);

  // Without cancelling silent attempts (hung first, no jitter): broker-1's first answer at
  // 27 ms leaves broker-0 and broker-2 running; they are cancelled as lost when it wins at 31 ms.
  await page.$eval("#knob-fanout-stagger-adaptive-patience", (el) => el.blur()); // a focused input keeps what is typed in it
  await page.evaluate(() => { location.hash = "#b=hung,healthy:5,healthy:5&preset=adaptive&fanout.jitter=0"; });
  await page.waitForFunction(() => document.querySelector("#knob-fanout-stagger-adaptive-patience")?.value === "16");
  await page.uncheck("#knob-fanout-tuning-cancel_silent_on_answer");
  await page.waitForFunction(() => new URLSearchParams(location.hash.slice(1)).get("fanout.tuning.cancel_silent_on_answer") === "0");
  // Unspread, the tick at 25 ms (2 × the 12 ms silent pace after broker-0's 1 ms handshake)
  // starts broker-1 and broker-2 at once.
  await page.uncheck("#knob-fanout-tuning-spread_ticks");
  await page.waitForFunction(() => new URLSearchParams(location.hash.slice(1)).get("fanout.tuning.spread_ticks") === "0");
  await page.keyboard.press("End");
  all = await spans(page);
  assert.deepEqual(all.map((s) => [s.lane, s.end, s.outcome, s.reason]),
    [[0, 31_000, "cancelled", "lost"], [1, 31_000, "won", null], [2, 31_000, "cancelled", "lost"]]);
  await setKnob(page, "fanout.stagger.adaptive.patience", 40);
  const { link, again } = await openPermalink(page);
  assert.match(link, /[#&]fanout\.stagger\.adaptive\.patience=40(&|$)/);
  assert.match(link, /[#&]fanout\.tuning\.cancel_silent_on_answer=0(&|$)/);
  assert.match(link, /[#&]fanout\.tuning\.spread_ticks=0(&|$)/);
  assert.equal(await again.inputValue("#knob-fanout-stagger-adaptive-patience"), "40");
  assert.equal(await again.isChecked("#knob-fanout-tuning-cancel_silent_on_answer"), false);
  assert.equal(await again.isChecked("#knob-fanout-tuning-spread_ticks"), false);
  await expectSameRunAndClose(page, again, all);
});

test("spread ticks: a tick's second attempt goes out a share of the delay later, and with the first when off", async () => {
  // A fixed 500 ms stagger without jitter, two attempts per tick; brokers 0 and 1 hung, 2
  // healthy (1 ms handshakes). Spread (the default): broker-0's handshake is well within
  // half the 500 ms delay, so the tick at 500 ms starts broker-1 alone and its partner,
  // broker-2, 500 ms / 2 later at 750 ms; broker-2 connects at 751 ms, answers at 752 ms
  // (overtaking both hung attempts) and wins at 756 ms.
  const page = await open(session.browser.context, `${session.server.url}#b=hung,hung,healthy:5&preset=staggered&fanout.jitter=0&fanout.growth=linear:2`);
  assert.equal(await page.isChecked("#knob-fanout-tuning-spread_ticks"), true, "the core's default");
  await page.keyboard.press("End");
  let all = await spans(page);
  assert.deepEqual(all.map((s) => [s.lane, s.start, s.end, s.outcome, s.reason]),
    [[0, 0, 752_000, "cancelled", "overtaken"], [1, 500_000, 752_000, "cancelled", "overtaken"],
      [2, 750_000, 756_000, "won", null]]);
  // All at once: the tick starts broker-1 and broker-2 together, and broker-2 answers at 502 ms.
  await page.uncheck("#knob-fanout-tuning-spread_ticks");
  await page.waitForFunction(() => new URLSearchParams(location.hash.slice(1)).get("fanout.tuning.spread_ticks") === "0");
  await page.keyboard.press("End");
  all = await spans(page);
  assert.deepEqual(all.map((s) => [s.lane, s.start, s.end, s.outcome, s.reason]),
    [[0, 0, 502_000, "cancelled", "overtaken"], [1, 500_000, 502_000, "cancelled", "overtaken"],
      [2, 500_000, 506_000, "won", null]]);
  // The link keeps the switch, and so the run.
  const { link, again } = await openPermalink(page);
  assert.match(link, /[#&]fanout\.tuning\.spread_ticks=0(&|$)/);
  assert.equal(await again.isChecked("#knob-fanout-tuning-spread_ticks"), false);
  await expectSameRunAndClose(page, again, all);
});

test("readable at phone width", async () => {
  const page = await open(session.browser.context, `${session.server.url}#b=hung,healthy:5,healthy:5`, { width: 390, height: 844 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `no horizontal scrolling (overflow ${overflow}px)`);
  const box = await page.locator("#sim-timeline svg").boundingBox();
  assert.ok(box.width <= 390 && box.width > 300, `timeline fits the screen (${box.width}px)`);
  assert.equal((await spans(page)).find((s) => s.lane === 1).outcome, "won");
  await screenshot(page, "simulate-390x844");
  await page.evaluate(() => document.querySelector("#sim-brokers").scrollIntoView());
  await screenshot(page, "simulate-controls-390x844");
  assert.deepEqual(page.errors, []);
  await page.close();
});

test("the preset blurbs quote the core's own values: the schema's defaults, the staggered preset's stagger", async () => {
  const page = await open(session.browser.context, `${session.server.url}#b=healthy:5`);
  // The core's knob schema and the staggered preset's values, from the page's own engine.
  const { schema, staggered } = await page.evaluate(async () => {
    const engine = await import("./js/engine.js");
    const preset = engine.presets().find((p) => p.name === "staggered");
    return { schema: engine.knobs(), staggered: engine.knobValues(preset.config) };
  });
  const def = (path) => schema.find((k) => k.path === path).default;
  const spaced = (text) => text.replace(/^fixed:/, "").replace(/^(\d+(?:\.\d+)?)([a-zµ]+)$/, "$1 $2");
  const adaptive = (k) => def(`fanout.stagger.adaptive.${k}`);
  const help = () => page.$eval("#sim-preset-help", (p) => p.textContent);
  const text = await help();
  for (const phrase of [
    `${spaced(adaptive("cold"))} while nothing is known`,
    `${adaptive("multiple")}× the broker pace (${spaced(adaptive("silent"))}, ${spaced(adaptive("silent_tls"))} over TLS`,
    `${adaptive("patience")}× an answer's time`,
    `(at least ${spaced(adaptive("floor"))})`,
    `up to ${spaced(adaptive("pace"))}.`,
    `At most ${def("fanout.max_in_flight")} in flight, ${Math.round(Number(def("fanout.jitter")) * 100)} % jitter.`,
  ]) assert.ok(text.includes(phrase), `"${phrase}" in: ${text}`);
  await page.click('#sim-presets [data-preset="staggered"]');
  const fixed = await help();
  assert.ok(fixed.includes(`another broker every ${spaced(staggered["fanout.stagger"])} (fixed)`), fixed);
  assert.deepEqual(page.errors, []);
  await page.close();
});
