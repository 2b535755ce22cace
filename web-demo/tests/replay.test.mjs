// Replay mode: open recorded traces (file picker, drag-and-drop) and check the verdict.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { demoSession, open, screenshot, spans, FIXTURES } from "./harness.mjs";

const session = demoSession();

/** Drops `text` as a file named `name` on the drop zone, as a person dragging a file would. */
async function drop(page, name, text) {
  await page.evaluate(([name, text]) => {
    const dt = new DataTransfer();
    dt.items.add(new File([text], name, { type: "application/json" }));
    const zone = document.getElementById("rp-drop");
    zone.dispatchEvent(new DragEvent("dragover", { dataTransfer: dt, bubbles: true, cancelable: true }));
    zone.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, [name, text]);
}

async function verdict(page, previous = null) {
  await page.waitForFunction((prev) => {
    const v = document.getElementById("rp-verdict");
    return !v.hidden && v.dataset.verdict && v.textContent !== prev;
  }, previous);
  return { kind: await page.getAttribute("#rp-verdict", "data-verdict"), text: await page.innerText("#rp-verdict") };
}

test("the fixture trace, opened with the file picker, replays without divergence", async () => {
  const page = await open(session.browser.context, `${session.server.url}#view=replay`);
  await page.setInputFiles("#rp-file", join(FIXTURES, "hung-refused-healthy.trace.json"));
  const v = await verdict(page);
  assert.equal(v.kind, "match", v.text);
  assert.match(v.text, /No divergence/);
  // The simulator's story (make_fixtures.rs, adaptive default): the tick after broker-0's
  // silence starts broker-1, which refuses; the refusal starts broker-2 at once; broker-2's
  // first answer overtakes the silent broker-0; broker-2 wins and broker-3 is never asked.
  const all = await spans(page, "#rp-timeline");
  assert.deepEqual(all.map((s) => [s.lane, s.outcome, s.reason]),
    [[0, "cancelled", "overtaken"], [1, "failed", null], [2, "won", null]]);
  const winner = all[2];
  assert.equal(winner.start, all[1].end, "the refusal starts the next broker at once");
  assert.ok(winner.answered > winner.start && winner.answered < winner.end, "the winner's answering phase is drawn");
  assert.equal(all[0].end, winner.answered, "overtaken at the winner's first answer");
  assert.match(await page.innerText("#rp-summary .headline"), /Metadata in .* from broker-2/);
  await page.keyboard.press("Home");
  await page.keyboard.press("ArrowRight");
  assert.ok(Number(await page.$eval("#rp-timeline svg", (s) => s.dataset.t)) > 0, "the replay steps");
  await page.keyboard.press("End");
  await screenshot(page, "replay-match-1280x800");
  assert.deepEqual(page.errors, []);
  await page.close();
});

test("drag and drop: a give-up trace replays, and a tampered one is called out", async () => {
  const page = await open(session.browser.context, `${session.server.url}#view=replay`, { width: 390, height: 844 });
  const text = readFileSync(join(FIXTURES, "all-down-gives-up.trace.json"), "utf8");
  await drop(page, "all-down-gives-up.trace.json", text);
  let v = await verdict(page);
  assert.equal(v.kind, "match", v.text);
  // The headline and every broker's error are the core's Display words (through the engine).
  assert.match(await page.innerText("#rp-summary .headline"), /Gave up at .*: every broker failed in \d+ passes/);
  const brokerErrors = await page.$$eval("#rp-summary .broker-errors li", (li) => li.map((l) => l.textContent));
  assert.equal(brokerErrors.length, 3, "every broker's error");
  assert.ok(brokerErrors.every((t) => /connection refused|no response before the attempt timeout/.test(t)), JSON.stringify(brokerErrors));
  assert.ok(await page.$$eval("#rp-timeline g.backoff", (g) => g.length) >= 2, "backoff windows are drawn");
  // The core's give-up event ends the log and the timeline.
  const log = await page.$$eval("#rp-log li", (li) => li.map((l) => [l.className, l.querySelector("span").textContent]));
  assert.match(log.at(-1)[0], /\bev-gave_up\b/);
  assert.match(log.at(-1)[1], /^gave up: every broker failed in \d+ passes$/);
  assert.equal(await page.$$eval("#rp-timeline g.outcome.gave-up", (g) => g.length), 1, "the give-up is marked");
  await screenshot(page, "replay-give-up-390x844");

  // Remove the first recorded Connect: the core still emits it, so the replay diverges.
  const trace = JSON.parse(text);
  const i = trace.events.findIndex((e) => e.type === "command");
  trace.events.splice(i, 1);
  await drop(page, "tampered.trace.json", JSON.stringify(trace));
  v = await verdict(page, v.text);
  assert.equal(v.kind, "diverges", v.text);
  assert.match(v.text, /DIVERGES/);
  assert.match(v.text, /recorded event \d+/);
  assert.equal(await page.$$eval("#rp-timeline g.divergence", (g) => g.length), 1, "the divergence is marked on the timeline");
  await page.setViewportSize({ width: 1280, height: 800 });
  await screenshot(page, "replay-diverges-1280x800");

  await drop(page, "notes.txt", "hello");
  v = await verdict(page, v.text);
  assert.equal(v.kind, "invalid");
  assert.match(v.text, /not a stagger trace/);

  // A trace of another format version is refused, saying which version it is.
  await drop(page, "old.trace.json", JSON.stringify({ ...JSON.parse(text), version: 3 }));
  v = await verdict(page, v.text);
  assert.equal(v.kind, "invalid");
  assert.match(v.text, /trace format version 3, but this core reads version 4 only/);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test("a simulated run opens in Replay and matches", async () => {
  const page = await open(session.browser.context, `${session.server.url}#b=hung,flaky:50:5,slow:10-90,healthy:3&seed=9`);
  const simulated = await spans(page);
  const words = (root) => page.$$eval(`${root} li`, (li) => li.map((l) => [l.dataset.at, [...l.classList].filter((c) => c.startsWith("ev")).join(" "), l.querySelector("span").textContent]));
  const simulatedLog = await words("#sim-log");
  await page.click("#sim-to-replay");
  const v = await verdict(page);
  assert.equal(v.kind, "match", v.text);
  await page.keyboard.press("End");
  const replayed = await spans(page, "#rp-timeline");
  assert.deepEqual(replayed, simulated, "the replay draws the very same attempts");
  assert.deepEqual(await words("#rp-log"), simulatedLog, "and logs the very same events in the same words");
  await page.close();
});

test("a trace recorded by `stagger metadata --trace` (the example button) replays without divergence", async () => {
  const page = await open(session.browser.context, `${session.server.url}#view=replay`);
  await page.click('[data-fixture="cli-hung-down-healthy.trace.json"]');
  const v = await verdict(page);
  assert.equal(v.kind, "match", v.text);
  assert.match(await page.innerText("#rp-info"), /Recorded by stagger-tokio/);
  const all = await spans(page, "#rp-timeline");
  assert.deepEqual(all.map((s) => [s.lane, s.outcome]), [[0, "cancelled"], [1, "failed"], [2, "won"]]);
  assert.equal(all[0].start, 0, "times count from the recorded refresh's start");
  await screenshot(page, "replay-cli-trace-1280x800");
  assert.deepEqual(page.errors, []);
  await page.close();
});
