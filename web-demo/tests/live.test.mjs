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

const adapter = existsSync(join(DIST, "browser/stagger_web.js"));
const testbedSource = existsSync(join(ROOT, "adapters/bridge/examples/testbed.rs"));
const skip = !adapter ? "no browser adapter in web-demo/dist (build adapters/browser first)"
  : !testbedSource ? "no stagger-bridge testbed in this workspace" : false;

let server, browser, testbed, cluster;

/** Starts the testbed; resolves to its JSON line (brokers with their ws:// addresses). */
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

before(async () => {
  if (skip) return;
  cluster = await startTestbed(["--hung", "1", "--down", "1"]);
  server = await serve();
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
  test(`live: the hung broker is passed over, the down one refuses, a healthy one answers (${w}×${h})`, { skip }, async () => {
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
    assert.equal(lane(0)[0].outcome, "cancelled", "the hung broker's attempt is abandoned");
    assert.equal(lane(1)[0].outcome, "failed", "the down broker refuses");
    assert.ok(all.some((s) => s.lane >= 2 && s.outcome === "won"), JSON.stringify(all));
    const ticks = await page.$$eval("#live-timeline g.tick-stagger", (g) => g.map((e) => Number(e.dataset.at)));
    assert.ok(ticks.length >= 1, "the stagger delay moved past the hung broker");
    assert.equal(lane(1)[0].start, ticks[0], "the second attempt started on the stagger tick");
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
