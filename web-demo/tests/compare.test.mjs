// Compare mode: many seeds per preset, CDFs beside load, in under two seconds.

import { test } from "node:test";
import assert from "node:assert/strict";
import { demoSession, open, screenshot } from "./harness.mjs";

const session = demoSession();

for (const [w, h] of [[1280, 800], [390, 844]]) {
  test(`the compare panel draws 500 seeds per preset in under two seconds (${w}×${h})`, async () => {
    // `stagger demo`'s cluster (two hung, one down, three healthy) with a jittery slow one.
    const page = await open(session.browser.context, `${session.server.url}#b=hung,hung,refused,healthy:5,slow:20-60,healthy:5&view=compare`, { width: w, height: h });
    await page.waitForSelector("#cmp-status[data-elapsed-ms]", { timeout: 30_000 });
    const elapsed = Number(await page.getAttribute("#cmp-status", "data-elapsed-ms"));
    assert.ok(elapsed < 2000, `took ${elapsed} ms`);
    const curves = await page.$$eval("#cmp-cdf path.cdf", (ps) => ps.map((p) => [p.dataset.series, p.getAttribute("d").length]));
    assert.deepEqual(curves.map((c) => c[0]), ["adaptive", "sequential", "all-at-once", "staggered"]);
    assert.ok(curves.every(([, len]) => len > 100), "every curve has points");
    const bars = await page.$$eval("#cmp-load rect.bar.started", (rs) => rs.map((r) => [r.dataset.series, Number(r.getAttribute("width"))]));
    assert.equal(bars.length, 4);
    const width = Object.fromEntries(bars);
    assert.ok(width["all-at-once"] > width.adaptive, "asking everyone costs more requests than staggering");
    const rows = await page.$$eval("#cmp-table tbody tr", (trs) => trs.map((tr) => tr.innerText));
    assert.equal(rows.length, 4);
    const seq = rows.find((r) => r.startsWith("sequential"));
    assert.match(seq, /\b20 s\b/, "sequential waits out two 10 s attempt timeouts");
    await screenshot(page, `compare-${w}x${h}`);
    assert.deepEqual(page.errors, []);
    await page.close();
  });
}

test("a modified policy is compared too", async () => {
  const page = await open(session.browser.context, `${session.server.url}#b=hung,healthy:5&fanout.jitter=0.5`);
  await page.click("#tab-compare");
  await page.waitForSelector("#cmp-status[data-elapsed-ms]");
  const series = await page.$$eval("#cmp-cdf path.cdf", (ps) => ps.map((p) => p.dataset.series));
  assert.ok(series.includes("your policy"), series.join());
  await page.close();
});
