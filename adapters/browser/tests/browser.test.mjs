// stagger-web in real headless Chromium, against a real Kafka-protocol cluster (librdkafka's
// mock, in the `testbed` fixture) behind one WebSocket↔TCP bridge per broker. Everything
// listens on 127.0.0.1; every test is bounded in time.
//
//   node --test adapters/browser/tests/
//
// Needs: adapters/browser/pkg (built by adapters/browser/build.sh, run here if missing),
// the testbed example (built here with cargo), /usr/bin/chromium (or $CHROMIUM), and
// `npm ci` in adapters/browser for playwright-core.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createServer } from "node:http";
import { createConnection } from "node:net";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { freePort, realKafka, staggerBridge } from "../../../testing/js/real_kafka.mjs";
import { buildTestbed, openSockets, Testbed } from "../../../testing/js/testbed.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const browserDir = resolve(here, "..");
const pkgDir = join(browserDir, "pkg");
const root = resolve(browserDir, "../..");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const TEST_TIMEOUT = 60_000;

let server;
let origin;
let context;
let page;
let userDataDir;
let testbedBinary;

/** The testbed, allowing the test page's origin unless told another. */
const startTestbed = (args, { allowOrigin = origin } = {}) => Testbed.start(testbedBinary, args, allowOrigin);

/** Serves the built package and the test page on 127.0.0.1. */
/** The default config, asking the bridges in the order listed (the faulty ones first)
 *  instead of shuffled. */
async function listed() {
  const config = await page.evaluate(() => window.helpers().defaultConfig);
  return { ...config, shuffle_seeds: false };
}

function serve() {
  const types = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm", ".ts": "text/plain" };
  return createServer((req, res) => {
    const path = new URL(req.url, "http://127.0.0.1").pathname;
    const file = path === "/" ? join(here, "page", "index.html") : path.startsWith("/pkg/") ? join(pkgDir, normalize(path.slice(5))) : null;
    if (!file || !file.startsWith(pkgDir) && !file.startsWith(here) || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": types[extname(file)] || "application/octet-stream", "cache-control": "no-store" });
    res.end(readFileSync(file));
  });
}

/** An attempt id (`{epoch, number}`) as one comparable string, `undefined` for none. */
const key = (a) => (a == null ? undefined : `${a.epoch}.${a.number}`);
/** The core's live events named `name`, each with `id`: its attempt's key. */
const of = (events, name) => events.filter((e) => e.event === name).map((e) => ({ ...e, id: key(e.attempt) }));
/** A bridge URL's `host:port`: how the core names the broker behind it. */
const address = (url) => new URL(url).host;

before(async () => {
  if (!existsSync(join(pkgDir, "stagger_web.js"))) {
    console.log("adapters/browser/pkg missing: running build.sh");
    assert.equal(spawnSync("bash", [join(browserDir, "build.sh")], { cwd: root, stdio: "inherit" }).status, 0);
  }
  testbedBinary = buildTestbed();
  server = serve();
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  origin = `http://127.0.0.1:${server.address().port}`;
  userDataDir = mkdtempSync(join(tmpdir(), "stagger-chromium-"));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  page = await context.newPage();
  page.on("pageerror", (e) => console.log(`page error: ${e.message}`));
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => window.staggerReady === true, null, { timeout: 30_000 });
}, { timeout: 20 * 60_000 });

after(async () => {
  await context?.close();
  await new Promise((r) => (server ? server.close(r) : r()));
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
});

test("metadata past a hung first broker and a refused second one; the hung attempt is overtaken", { timeout: TEST_TIMEOUT }, async () => {
  const bed = await startTestbed(["--brokers", "4", "--hung", "1", "--down", "1"]);
  try {
    const [hung, down, healthy] = bed.info.brokers;
    assert.deepEqual([hung.state, down.state, healthy.state], ["hung", "down", "healthy"]);
    const bootstrap = bed.info.brokers.map((b) => b.ws);
    const run = await page.evaluate((o) => window.run(o), { bootstrap, config: await listed() });
    assert.ok(run.ok, `refresh failed: ${JSON.stringify(run.error)}`);

    // The metadata is the fixture's cluster: every live broker (id and TCP address; the mock
    // leaves a down broker out, as a real cluster does) and every topic.
    const brokers = run.metadata.brokers.map((b) => [b.node_id, `${b.host}:${b.port}`]).sort();
    const live = bed.info.brokers.filter((b) => b.state !== "down");
    assert.deepEqual(brokers, live.map((b) => [b.id, b.tcp]).sort());
    const topics = run.metadata.topics.filter((t) => !t.is_internal).map((t) => [t.name, t.partitions.length]).sort();
    assert.deepEqual(topics, bed.info.topics.map((t) => [t.name, t.partitions]).sort());

    // The story, as onEvent told it (the core's live events): hung broker connected but
    // silent, hedged after the stagger delay; the down broker refused; the healthy one
    // answered ApiVersions, which cancelled the still-silent hung one (overtaken), then its
    // metadata won.
    const events = run.events;
    if (process.env.STAGGER_DEBUG) for (const e of events) console.log(`${e.elapsed_ms.toFixed(1)} ${e.event} ${e.broker ?? e.timer} ${JSON.stringify(e.error ?? e.reason ?? "")}`);
    const started = of(events, "started");
    assert.deepEqual(started.slice(0, 3).map((c) => c.broker), [hung, down, healthy].map((b) => address(b.ws)));
    const [first, second] = started.map((c) => c.id);
    assert.equal(started[0].attempt.number, 0, "attempt ids are {epoch, number}");
    assert.equal(typeof started[0].attempt.epoch, "number");
    assert.equal(events[0].event, "started", "the first event starts the first attempt");
    assert.ok(of(events, "connected").some((i) => i.id === first), "the hung broker's socket opened");
    // Staggered, not fanned out: the next broker starts only after the first had a stagger
    // delay to answer. (Which timer or input starts each later attempt depends on how fast
    // this machine opens sockets, which feeds the adaptive delay; the simulator's tests pin
    // that schedule in virtual time.)
    const timeline = JSON.stringify(started.map((c) => [c.id, c.elapsed_ms]));
    assert.ok(started[1].elapsed_ms > started[0].elapsed_ms, `the second attempt waits for a stagger delay: ${timeline}`);
    assert.ok(!of(events, "failed").some((i) => i.id === first), "the hung broker never fails: it is silent");
    // The down broker's bridge refusing (502) races the healthy brokers' connections and
    // first answers: its attempt fails as refused if the refusal comes first, and is otherwise
    // cancelled. (The all-down test below checks the refusal itself deterministically.)
    const refused = of(events, "failed").find((i) => i.id === second);
    const downCancel = of(events, "cancelled").find((c) => c.id === second);
    assert.ok(!(refused && downCancel), "an attempt ends once");
    if (refused) assert.equal(refused.error.kind.kind, "refused", JSON.stringify(refused));
    if (downCancel) {
      // Overtaken by that answer, or outrun by a healthy broker's socket opening while the
      // refused upgrade was still pending, or (on a slow machine) superseded by the next tick.
      const reasons = ["overtaken", "outrun", "superseded"];
      assert.ok(reasons.includes(downCancel.reason), `the down broker's attempt: ${JSON.stringify(downCancel)}`);
    } else {
      assert.ok(refused, "the down broker's attempt is refused or cancelled");
    }
    // One healthy broker wins: the first healthy one normally, the second when a loaded machine
    // keeps the first's socket from opening before the next tick supersedes it.
    const won = of(events, "won");
    assert.equal(won.length, 1);
    const winner = won[0].id;
    const healthyAddresses = bed.info.brokers.filter((b) => b.state === "healthy").map((b) => address(b.ws));
    assert.ok(healthyAddresses.includes(won[0].broker), `the winner is a healthy broker: ${JSON.stringify(won[0])}`);
    for (const c of started.filter((c) => c.id !== winner && healthyAddresses.includes(c.broker))) {
      const why = of(events, "cancelled").find((x) => x.id === c.id)?.reason;
      assert.ok(["superseded", "overtaken", "outrun"].includes(why), `a losing healthy attempt is cancelled: ${c.id} ${why}`);
    }

    // The broker's first answer (ApiVersions) is reported once per attempt: the winner's
    // comes after its socket opened and before it won, and the hung and the refused broker
    // never answer.
    const indexOf = (pred) => events.findIndex(pred);
    const answered = of(events, "answered");
    assert.equal(answered.filter((e) => e.id === winner).length, 1, "the winner answered exactly once");
    assert.ok(!answered.some((e) => [first, second].includes(e.id)), JSON.stringify(answered));
    const opened = indexOf((e) => e.event === "connected" && key(e.attempt) === winner);
    const answer = indexOf((e) => e.event === "answered" && key(e.attempt) === winner);
    const win = indexOf((e) => e.event === "won");
    assert.ok(opened >= 0 && opened < answer && answer < win, `connected (${opened}) < answered (${answer}) < won (${win})`);
    // The answer, not the win, is what cancels the silent hung attempt: its cancel comes
    // right after the winner's answer, in the same step.
    const cancel = of(events, "cancelled").find((c) => c.id === first);
    assert.equal(cancel?.reason, "overtaken", "the hung attempt is cancelled when another broker answers");
    const cancelled = indexOf((e) => e.event === "cancelled" && key(e.attempt) === first);
    assert.ok(answer < cancelled && cancelled < win, `answered (${answer}) < cancelled (${cancelled}) < won (${win})`);
    assert.equal(cancel.elapsed_ms, events[answer].elapsed_ms, "cancelled in the same step as the answer");
    for (const c of of(events, "cancelled").filter((c) => c.reason === "overtaken")) {
      assert.equal(c.elapsed_ms, events[answer].elapsed_ms, `every overtaken attempt is cancelled at the answer: ${JSON.stringify(c)}`);
    }
    assert.ok(!events.some((e) => e.event === "timer" && e.timer === "attempt_timeout"), "no attempt had to time out");
    assert.ok(events.every((e, i) => i === 0 || e.elapsed_ms >= events[i - 1].elapsed_ms), "event times never go back");
    assert.equal(events.at(-1).event, "won", "the win is the last event");

    // refreshWith(): the core's report (the CLI's `--json` `refresh`) and a trace to replay.
    assert.equal(run.refresh.winner, won[0].broker);
    assert.equal(run.refresh.elapsed_ms, won[0].elapsed_ms);
    assert.deepEqual(run.refresh.attempts.map((a) => a.broker), started.map((c) => c.broker));
    assert.equal(run.refresh.attempts.find((a) => a.outcome === "won")?.attempt, won[0].attempt.number);
    assert.match(run.trace.recorder, /^stagger-web /);
    assert.ok(run.trace.events.some((e) => e.command?.done), "the trace records the win");
    console.log(`metadata after ${won[0].elapsed_ms.toFixed(1)} ms (hedge at ${started[1].elapsed_ms.toFixed(1)} ms)`);

    // Cancel and Done closed every socket: the bridges see no connection left.
    await bed.until((s) => openSockets(s) === 0, 5_000, "all sockets closed after the refresh");
    await bed.until((s) => s[0].upgraded >= 1 && s[1].target_failures >= 1, 5_000, "the hung broker upgraded, the down one failed");
  } finally {
    await bed.stop();
  }
});

test("rejects with every broker's error when all are down", { timeout: TEST_TIMEOUT }, async () => {
  const bed = await startTestbed(["--brokers", "3", "--down", "3"]);
  try {
    const bootstrap = bed.info.brokers.map((b) => b.ws);
    const config = await listed();
    config.retry.retries = 1;
    config.retry.initial = { secs: 0, nanos: 50_000_000 };
    const run = await page.evaluate((o) => window.run(o), { bootstrap, config });
    assert.ok(!run.ok, "must reject");
    const { error } = run;
    assert.equal(error.name, "RefreshError");
    assert.match(error.message, /every broker failed in 2 passes/);
    assert.deepEqual(error.refreshError.reason, { all_failed: { passes: 2 } });
    assert.equal(error.refreshError.brokers.length, 3);
    for (const broker of error.refreshError.brokers) {
      assert.equal(broker.attempts, 2);
      assert.equal(broker.last_error.kind.kind, "refused", JSON.stringify(broker));
    }
    assert.deepEqual(error.brokers.map((b) => b.url).sort(), [...bootstrap].sort());
    for (const broker of error.brokers) {
      assert.equal(broker.kind, "refused");
      assert.ok(error.message.includes(broker.address), `the message names ${broker.address}`);
    }
    assert.equal(of(run.events, "started").length, 6, "two passes over three brokers");
    assert.equal(of(run.events, "failed").length, 6, "every attempt failed");
    assert.equal(run.events.at(-2).event, "failed", "the last failure comes just before the give-up");
    assert.deepEqual(run.events.at(-1), { elapsed_ms: run.events.at(-1).elapsed_ms, event: "gave_up", reason: { all_failed: { passes: 2 } } }, "the give-up is the last event");
    assert.ok(run.events.some((e) => e.event === "timer" && e.timer === "backoff"), "backed off between passes");
    // The rejection carries every attempt's report and the trace.
    assert.deepEqual(error.refresh.attempts.map((a) => a.outcome), Array(6).fill("failed"));
    assert.equal(error.refresh.winner, null);
    assert.ok(error.trace.events.some((e) => e.command?.give_up), "the trace records the give-up");
    await bed.until((s) => openSockets(s) === 0, 5_000, "no socket left open");
  } finally {
    await bed.stop();
  }
});

test("abort closes every socket and rejects with an AbortError", { timeout: TEST_TIMEOUT }, async () => {
  const bed = await startTestbed(["--brokers", "3", "--hung", "3"]);
  try {
    const bootstrap = bed.info.brokers.map((b) => b.ws);
    await page.evaluate((o) => window.startAbortable(o), { bootstrap, config: "all-at-once" });
    // All three WebSockets are open (the bridges say so, and so does the page).
    await bed.until((s) => openSockets(s) === 3 && s.every((b) => b.upgraded === 1), 10_000, "three open sockets");
    const deadline = Date.now() + 10_000;
    while ((await page.evaluate(() => window.runEvents().filter((e) => e.event === "connected").length)) < 3) {
      assert.ok(Date.now() < deadline, "the page saw three sockets open");
      await new Promise((r) => setTimeout(r, 20));
    }
    const run = await page.evaluate(() => window.abortRun());
    assert.ok(!run.ok);
    assert.equal(run.error.name, "AbortError");
    assert.equal(run.afterAbort, 0, "nothing follows the abort");
    assert.equal(of(run.events, "cancelled").length, 0, "the core never cancelled: the abort closed them");
    assert.equal(of(run.events, "answered").length, 0, "hung brokers accept and never answer");
    // The bridges see every connection closed, and the mock's TCP connections with them.
    const stats = await bed.until((s) => openSockets(s) === 0, 5_000, "every socket closed after abort");
    assert.deepEqual(stats.map((s) => s.accepted), [1, 1, 1]);
  } finally {
    await bed.stop();
  }
});

test("presets, defaultConfig and validateConfig; bad options reject with a ConfigError", { timeout: TEST_TIMEOUT }, async () => {
  const h = await page.evaluate(() => window.helpers());
  assert.deepEqual(h.presets, ["adaptive", "sequential", "all-at-once", "staggered"]);
  assert.deepEqual(h.fromJson, h.defaultConfig);
  assert.ok(h.defaultConfig.fanout.stagger.adaptive, "adaptive is the default");
  // knobs(): the core's schema; every refresh knob is a field of defaultConfig() at its path.
  const at = (o, path) => path.split(".").reduce((v, k) => (v == null ? undefined : v[k]), o);
  const refreshKnobs = h.knobs.filter((k) => k.scope === "refresh");
  assert.ok(refreshKnobs.some((k) => k.path === "fanout.tuning.spread_ticks" && k.default === "true"));
  for (const k of refreshKnobs) assert.notEqual(at(h.defaultConfig, k.path), undefined, k.path);
  assert.ok(h.knobs.some((k) => k.path === "hedge_budget.burst" && k.scope === "cluster"));
  assert.deepEqual(h.staggered.fanout.stagger, { fixed: { secs: 0, nanos: 500_000_000 } });
  assert.equal(h.badAccepted, undefined);
  assert.equal(h.badError.name, "ConfigError");
  assert.equal(h.badError.field, "fanout.jitter");
  assert.equal(h.unknownError.field, "config");
  for (const [options, field] of [
    [{ bootstrap: ["127.0.0.1:9092"] }, "bootstrap"],
    [{ bootstrap: [] }, "bootstrap"],
    [{}, "bootstrap"],
    [{ bootstrap: ["ws://127.0.0.1:1"], config: "fastest" }, "config"],
    [{ bootstrap: ["ws://127.0.0.1:1"], topics: "orders" }, "topics"],
  ]) {
    const run = await page.evaluate((o) => window.run(o), options);
    assert.ok(!run.ok, JSON.stringify(options));
    assert.equal(run.error.name, "ConfigError", JSON.stringify(run.error));
    assert.equal(run.error.field, field, JSON.stringify(run.error));
  }
});

/** A free loopback port (bound, read and released). */
/** Starts Debian's websockify in front of `target` (host:port); resolves once it listens. */
async function websockify(target) {
  const port = await freePort();
  const child = spawn("websockify", [`127.0.0.1:${port}`, target], { stdio: ["ignore", "ignore", "pipe"] });
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const up = await new Promise((r) => {
      const s = createConnection({ host: "127.0.0.1", port }, () => { s.destroy(); r(true); });
      s.on("error", () => r(false));
    });
    if (up) return { url: `ws://127.0.0.1:${port}`, child };
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill();
  assert.fail(`websockify on ${port} did not start`);
}

test("works unchanged through websockify: hung first broker, healthy second", { timeout: TEST_TIMEOUT, skip: spawnSync("websockify", ["--help"]).error ? "websockify is not installed" : false }, async () => {
  const bed = await startTestbed(["--brokers", "3", "--hung", "1"]);
  const proxies = [];
  try {
    const [hung, healthy] = bed.info.brokers;
    for (const b of [hung, healthy]) proxies.push(await websockify(b.tcp));
    const bootstrap = proxies.map((p) => p.url);
    const run = await page.evaluate((o) => window.run(o), { bootstrap, config: await listed() });
    assert.ok(run.ok, `refresh through websockify failed: ${JSON.stringify(run.error)}`);
    assert.ok(run.metadata.brokers.length === 3, JSON.stringify(run.metadata.brokers));
    const [first, second] = of(run.events, "started").map((c) => c.id);
    assert.equal(of(run.events, "won")[0]?.id, second, "the healthy broker behind websockify won");
    assert.deepEqual(of(run.events, "answered").map((a) => a.id), [second], "only the healthy broker answered");
    assert.equal(of(run.events, "cancelled").find((c) => c.id === first)?.reason, "overtaken");
  } finally {
    for (const p of proxies) p.child.kill();
    await bed.stop();
  }
});

test("the bridges refuse a page from another origin: every attempt is refused, the brokers never contacted", { timeout: TEST_TIMEOUT }, async () => {
  // The page comes from `origin`; these bridges only allow another port of the same host.
  const bed = await startTestbed(["--brokers", "2"], { allowOrigin: "http://127.0.0.1:1" });
  try {
    const bootstrap = bed.info.brokers.map((b) => b.ws);
    const config = await page.evaluate(() => window.helpers().defaultConfig);
    config.retry.retries = 0;
    const run = await page.evaluate((o) => window.run(o), { bootstrap, config });
    assert.ok(!run.ok, "must reject");
    for (const broker of run.error.brokers) assert.equal(broker.kind, "refused", JSON.stringify(broker));
    const stats = await bed.until((s) => openSockets(s) === 0, 5_000, "no socket left open");
    for (const s of stats) {
      assert.ok(s.origin_refused >= 1, JSON.stringify(s));
      assert.deepEqual([s.upgraded, s.target_failures], [0, 0], "no upgrade, and no connection to the broker was tried");
    }
  } finally {
    await bed.stop();
  }
});

test("an allowed page still cannot send anything but metadata requests: Produce closes the socket (1008)", { timeout: TEST_TIMEOUT }, async () => {
  const bed = await startTestbed(["--brokers", "1"]);
  try {
    const closed = await page.evaluate(async (url) => {
      const ws = new WebSocket(url);
      ws.binaryType = "arraybuffer";
      await new Promise((ok, fail) => { ws.onopen = ok; ws.onerror = () => fail(new Error("did not open")); });
      let messages = 0;
      ws.onmessage = () => { messages += 1; };
      // A request header as the bridge reads it: size, api_key 0 (Produce), api_version 9,
      // correlation id, an empty client id.
      const frame = new DataView(new ArrayBuffer(14));
      frame.setInt32(0, 10);
      frame.setInt16(4, 0);
      frame.setInt16(6, 9);
      frame.setInt32(8, 1);
      frame.setInt16(12, -1);
      ws.send(frame.buffer);
      const event = await new Promise((ok) => { ws.onclose = ok; });
      return { code: event.code, reason: event.reason, messages };
    }, bed.info.brokers[0].ws);
    assert.deepEqual(closed, { code: 1008, reason: "Kafka request Produce (0) v9 is not forwarded", messages: 0 });
    const [stats] = await bed.until((s) => openSockets(s) === 0, 5_000, "the socket closed");
    assert.equal(stats.requests_refused, 1, JSON.stringify(stats));
    // A metadata refresh through the same bridge works.
    const run = await page.evaluate((o) => window.run(o), { bootstrap: bed.info.brokers.map((b) => b.ws) });
    assert.ok(run.ok, JSON.stringify(run.error));
  } finally {
    await bed.stop();
  }
});

test("`stagger bridge --token` refuses a page without the token and serves it with the token in the URL", { timeout: TEST_TIMEOUT }, async () => {
  const bed = await startTestbed(["--brokers", "1"]);
  const token = "browser-test-token-0123456789";
  const bridge = await staggerBridge(bed.info.brokers[0].tcp, { allowOrigins: [origin], args: ["--token", token] });
  try {
    const config = await page.evaluate(() => window.helpers().defaultConfig);
    config.retry.retries = 0;
    const without = await page.evaluate((o) => window.run(o), { bootstrap: [bridge.url], config });
    assert.ok(!without.ok, "refused without the token");
    assert.equal(without.error.brokers[0].kind, "refused", JSON.stringify(without.error));
    // refresh() (not refreshWith()) resolves with the metadata alone.
    const run = await page.evaluate((o) => window.run(o, true), { bootstrap: [`${bridge.url}/?token=${token}`] });
    assert.equal(run.refresh, undefined);
    assert.ok(run.ok, `refresh with the token failed: ${JSON.stringify(run.error)}`);
    assert.deepEqual(run.metadata.brokers.map((b) => `${b.host}:${b.port}`), [bed.info.brokers[0].tcp]);
  } finally {
    bridge.child.kill();
    await bed.stop();
  }
});

const kafka = realKafka();

test("authenticates with SCRAM-SHA-512 through the bridge to real Kafka's SASL_PLAINTEXT listener", { timeout: TEST_TIMEOUT, skip: kafka ? false : "no real Kafka cluster in this run (scripts/test.sh starts one)" }, async () => {
  const target = kafka.KAFKA_SASL_PLAINTEXT.split(",")[0];
  const bridge = await staggerBridge(target, { allowOrigins: [origin] });
  try {
    const sasl = { mechanism: "SCRAM-SHA-512", username: kafka.KAFKA_SASL_USERNAME, password: kafka.KAFKA_SASL_PASSWORD };
    const run = await page.evaluate((o) => window.run(o), { bootstrap: [bridge.url], sasl });
    assert.ok(run.ok, `SCRAM through the bridge failed: ${JSON.stringify(run.error)}`);
    assert.equal(run.metadata.cluster_id, kafka.KAFKA_CLUSTER_ID);
    assert.deepEqual(run.metadata.brokers.map((b) => `${b.host}:${b.port}`).sort(), kafka.KAFKA_SASL_PLAINTEXT.split(",").sort(),
      "the SASL listener advertises itself");
    assert.ok(!JSON.stringify(run).includes(kafka.KAFKA_SASL_PASSWORD), "the password is in no event");

    const wrong = "not-the-stagger-secret";
    const refused = await page.evaluate((o) => window.run(o), { bootstrap: [bridge.url], sasl: { ...sasl, password: wrong } });
    assert.ok(!refused.ok, "a wrong password is refused");
    assert.match(refused.error.message, /SASL_AUTHENTICATION_FAILED/);
    assert.match(refused.error.message, /SCRAM-SHA-512/);
    assert.ok(!JSON.stringify(refused).includes(wrong), "the wrong password is in no event or error");

    const bad = await page.evaluate((o) => window.run(o), { bootstrap: [bridge.url], sasl: { mechanism: "GSSAPI", username: "u", password: "p" } });
    assert.equal(bad.error.name, "ConfigError");
    assert.equal(bad.error.field, "sasl.mechanism");
  } finally {
    bridge.child.kill();
  }
});
