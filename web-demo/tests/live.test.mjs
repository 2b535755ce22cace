// Live mode: real Kafka-protocol brokers (librdkafka's mock cluster) behind WebSocket
// bridges (the `stagger-bridge` testbed), refreshed from the page through the browser
// adapter, drawn as the attempts happen.
//
// Skipped when this build has no browser adapter (web-demo/dist/browser) or the workspace
// has no testbed; both are built by the other crates' scripts.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { serve, launch, open, screenshot, spans, DIST, ROOT } from "./harness.mjs";
import { realKafka, staggerBridge } from "../../testing/js/real_kafka.mjs";

const adapter = existsSync(join(DIST, "browser/stagger_web.js"));
const testbedSource = existsSync(join(ROOT, "adapters/bridge/examples/testbed.rs"));
const skip = !adapter ? "no browser adapter in web-demo/dist (build adapters/browser first)"
  : !testbedSource ? "no stagger-bridge testbed in this workspace" : false;

let server, browser, testbed, cluster;

/** Starts the testbed; resolves to its JSON line (brokers with their ws:// addresses). Its
 *  bridges refuse pages of any origin they are not told, so pass the page's (`--allow-origin`). */
function startTestbed(args) {
  return new Promise((resolve, reject) => {
    const child = spawn("cargo", ["run", "-q", "-p", "stagger-bridge", "--example", "testbed", "--", ...args], {
      cwd: ROOT,
      stdio: ["pipe", "pipe", "inherit"],
    });
    testbed = child;
    const lines = createInterface({ input: child.stdout });
    lines.once("line", (line) => {
      try {
        resolve(JSON.parse(line));
      } catch (e) {
        reject(new Error(`testbed printed ${line}: ${e.message}`));
      }
    });
    child.once("exit", (code) => reject(new Error(`testbed exited with ${code} before printing its brokers`)));
  });
}

/** The origin the pages come from (the harness's static server), which the bridges allow. */
const pageOrigin = () => new URL(server.url).origin;

before(async () => {
  if (skip) return;
  server = await serve();
  cluster = await startTestbed(["--hung", "1", "--down", "1", "--allow-origin", pageOrigin()]);
  browser = await launch();
}, { timeout: 1_200_000 });

after(async () => {
  if (testbed && testbed.exitCode == null) {
    testbed.stdin.end("quit\n");
    await new Promise((ok) => {
      const timer = setTimeout(() => {
        testbed.kill("SIGTERM");
        ok();
      }, 5000);
      testbed.once("exit", () => {
        clearTimeout(timer);
        ok();
      });
    });
  }
  await browser?.close();
  await server?.close();
});

for (const [w, h] of [[1280, 800], [390, 844]]) {
  test(`live: the hung broker is passed over and overtaken, the down one refuses, a healthy one answers (${w}×${h})`, { skip }, async () => {
    const urls = cluster.brokers.map((b) => b.ws);
    // The addresses come in the link (`?live=…`, what `stagger demo --web` can open).
    const page = await open(browser.context, `${server.url}?live=${urls.join(",")}#view=live`, { width: w, height: h });
    assert.equal(await page.inputValue("#live-addrs"), urls.join("\n"));
    await page.click("#live-run");
    await page.waitForSelector("#live-status[data-outcome]", { timeout: 60_000 });
    const status = await page.innerText("#live-status");
    assert.equal(await page.getAttribute("#live-status", "data-outcome"), "done", status);
    assert.match(status, /Metadata/);
    assert.match(status, /orders/);
    assert.match(status, /replays through the core without divergence/);
    const all = await spans(page, "#live-timeline");
    const lane = (i) => all.filter((s) => s.lane === i);
    // The log words the core's events as Simulate and Replay do; the win ends it.
    const log = await page.$$eval("#live-log li span", (s) => s.map((e) => e.textContent));
    assert.match(log.at(-1), /^#\d+ won: metadata from 127\.0\.0\.1:\d+$/, log.join("\n"));
    const won = all.find((s) => s.lane >= 2 && s.outcome === "won");
    assert.ok(won, JSON.stringify(all));
    // The adapter reported the winner's first answer (ApiVersions): its answering phase is
    // drawn, and that answer cancelled the hung broker's silent attempt (overtaken).
    assert.ok(won.answered > won.start && won.answered <= won.end, `answering phase drawn: ${JSON.stringify(won)}`);
    assert.deepEqual([lane(0)[0].outcome, lane(0)[0].reason], ["cancelled", "overtaken"], "the hung broker's attempt is abandoned");
    assert.equal(lane(0)[0].end, won.answered, "at the winner's first answer");
    // The down broker's refusal races the healthy brokers' first answers, so its attempt fails
    // as refused or, if an answer came first, is overtaken too (the adapter's own Chromium
    // tests check the refusal itself). On a slow machine the refusal (a 502 from the bridge)
    // can even arrive after the next tick, which then supersedes the attempt, or after a
    // later attempt's handshake, which outruns it (`fanout.tuning.cancel_outrun`).
    const down = lane(1)[0];
    const cancelled = down.outcome === "cancelled" && ["overtaken", "superseded", "outrun"].includes(down.reason);
    assert.ok(down.outcome === "failed" || cancelled, JSON.stringify(down));
    // Staggered past the silent hung broker: the second attempt waits a stagger delay after
    // the first and starts before anybody answered. Which timer or input starts it depends on
    // how fast this machine opens sockets (a tick overdue when an input arrives fires inside
    // that input's step, without a tick of its own), so tick marks are only checked to come
    // after the first start.
    assert.ok(lane(1)[0].start > lane(0)[0].start && lane(1)[0].start < won.answered, `staggered: ${JSON.stringify([lane(0)[0], lane(1)[0]])}`);
    const ticks = await page.$$eval("#live-timeline g.tick-stagger", (g) => g.map((e) => Number(e.dataset.at)));
    assert.ok(ticks.every((at) => at > lane(0)[0].start), `every stagger tick comes after the first start: ${ticks}`);
    assert.ok(lane(2)[0].start >= lane(1)[0].start, `the third on the second's tick or after it: ${JSON.stringify(lane(2)[0])}`);
    assert.match(await page.innerText("#live-summary .headline"), /Metadata in/);
    await screenshot(page, `live-${w}x${h}`);
    // Chromium logs the down broker's refused WebSocket upgrade (502) on the console: expected.
    assert.deepEqual(page.errors.filter((e) => !/WebSocket connection to .* failed/.test(e.message)), []);
    await page.close();
  });
}

test("live: a bad address is refused with a readable message", { skip }, async () => {
  const page = await open(browser.context, `${server.url}#view=live`);
  await page.fill("#live-addrs", "127.0.0.1:9092");
  await page.click("#live-run");
  await page.waitForSelector("#live-status[data-outcome]");
  assert.match(await page.innerText("#live-status"), /ws:\/\//);
  await page.close();
});

const kafka = realKafka();

test("live: credentials from the form authenticate to real Kafka's SASL listener, and a wrong password says so", { skip: skip || (kafka ? false : "no real Kafka cluster in this run") }, async () => {
  const bridge = await staggerBridge(kafka.KAFKA_SASL_PLAINTEXT.split(",")[0], { allowOrigins: [pageOrigin()] });
  try {
    const page = await open(browser.context, `${server.url}#view=live`);
    await page.fill("#live-addrs", bridge.url);
    await page.selectOption("#live-sasl-mechanism", "SCRAM-SHA-256");
    await page.fill("#live-sasl-username", kafka.KAFKA_SASL_USERNAME);
    await page.fill("#live-sasl-secret", kafka.KAFKA_SASL_PASSWORD);
    await page.click("#live-run");
    await page.waitForSelector("#live-status[data-outcome]", { timeout: 60_000 });
    assert.equal(await page.getAttribute("#live-status", "data-outcome"), "done", await page.innerText("#live-status"));
    assert.ok(!page.url().includes(kafka.KAFKA_SASL_PASSWORD), "the password stays out of the URL");

    await page.fill("#live-sasl-secret", "not-the-stagger-secret");
    await page.click("#live-run");
    await page.waitForFunction(() => document.querySelector("#live-status")?.dataset.outcome === "failed", null, { timeout: 60_000 });
    const text = await page.innerText("#live-body");
    assert.match(text, /SASL_AUTHENTICATION_FAILED/);
    assert.ok(!text.includes("not-the-stagger-secret"), "the wrong password is not shown");
    await page.close();
  } finally {
    bridge.child.kill();
  }
});
