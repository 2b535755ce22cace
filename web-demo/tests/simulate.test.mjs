// Simulate mode in real headless Chromium: a hung first broker, the stagger at work,
// playback, the keyboard, and a permalink that restores the same run.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { serve, launch, open, screenshot, spans } from "./harness.mjs";

let server, browser;
before(async () => {
  server = await serve();
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await server?.close();
});

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
  await page.fill(`#knob-${key}`, String(value));
  await page.waitForFunction(([k, v]) => new URLSearchParams(location.hash.slice(1)).get(k) === v, [key, String(value)]);
}

/** Plays the run to its end at 100× real time. */
async function playToEnd(page) {
  await page.selectOption("#sim-player select", "100");
  await page.click('#sim-player [data-act="play"]');
  await page.waitForSelector('#sim-player[data-state="ended"]', { timeout: 20_000 });
}

test("a hung first broker: the second attempt starts at the stagger delay and broker 2 answers", async () => {
  // Three healthy brokers to start from (the default cluster is `stagger demo`'s six).
  const page = await open(browser.context, `${server.url}#b=healthy:5,healthy:5,healthy:5`);
  // "Broker 1" is the first broker, broker-0; "broker 2" is the second, broker-1.
  await makeBroker(page, 0, "hung");
  assert.equal(await page.$eval("#sim-timeline .lane-label[data-lane='0'] .lane-sub", (t) => t.textContent), "hung");

  // A fixed 500 ms stagger without jitter: the second attempt must start at exactly 500 ms.
  await page.click('#sim-presets [data-preset="staggered"]');
  await setKnob(page, "jitter", 0);
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
  assert.equal(first.outcome, "cancelled", "the hung attempt loses and is cancelled");
  assert.equal(all.filter((s) => s.lane === 2).length, 0, "broker-2 is never bothered");
  const headline = page.locator("#sim-summary .headline");
  assert.equal(await headline.getAttribute("data-winner"), "broker-1");
  assert.match(await headline.innerText(), /Metadata in 506 ms from broker-1/);
  assert.equal(await page.$eval('#sim-summary [data-stat="started"] dd', (d) => d.textContent), "2");
  await screenshot(page, "simulate-hung-first-staggered-1280x800");

  // The default (adaptive) policy: broker-0 accepted in 1 ms and stays silent, so it is
  // suspected after clamp(8 × 1 ms, 10 ms, 2 s) = 10 ms, minus up to 20 % jitter.
  await page.click('#sim-presets [data-preset="adaptive"]');
  await playToEnd(page);
  all = await spans(page);
  const tick = await page.$$eval("#sim-timeline g.tick-stagger", (g) => g.map((e) => Number(e.dataset.at)));
  const hedge = all.find((s) => s.lane === 1);
  assert.equal(tick.length, 1);
  assert.equal(hedge.start, tick[0], "the second attempt starts on the stagger tick");
  assert.ok(hedge.start >= 8_000 && hedge.start <= 10_000, `stagger delay ${hedge.start} µs within 10 ms − 20 %`);
  assert.equal(hedge.outcome, "won");
  assert.equal(await headline.getAttribute("data-winner"), "broker-1");
  await screenshot(page, "simulate-hung-first-adaptive-1280x800");
  assert.deepEqual(page.errors, []);
  await page.close();
});

test("keyboard: space plays and pauses, arrows step from event to event", async () => {
  const page = await open(browser.context, `${server.url}#b=hung,refused,healthy:5`);
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
  const page = await open(browser.context, server.url);
  // Something other than the defaults everywhere.
  await page.click("#sim-more");
  await makeBroker(page, 6, "slow");
  await makeBroker(page, 3, "flaky");
  await page.click('#sim-presets [data-preset="staggered"]');
  await setKnob(page, "inflight", 2);
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

  const again = await open(browser.context, link);
  const after = {
    spans: await spans(again),
    summary: await again.innerText("#sim-summary"),
    clock: await again.textContent("#sim-player .clock"),
    log: await again.innerText("#sim-log"),
  };
  assert.deepEqual(after, before);
  assert.equal(await again.inputValue("#sim-seed"), "42");
  assert.equal(await again.inputValue("#knob-inflight"), "2");
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

test("readable at phone width", async () => {
  const page = await open(browser.context, `${server.url}#b=hung,healthy:5,healthy:5`, { width: 390, height: 844 });
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
