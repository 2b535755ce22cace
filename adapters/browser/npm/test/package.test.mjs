// The packed npm package, as its users get it: installed from the tarball into a scratch
// project (by test.sh, which passes STAGGER_NPM_SCRATCH and STAGGER_NPM_TARBALL), then used
// from Node and from headless Chromium, each running a real refresh against librdkafka's mock
// cluster behind stagger-bridge WebSocket bridges (the `testbed` example). Everything listens on
// 127.0.0.1; every process started here is stopped here, by pid; every test is bounded in time.
//
//   bash adapters/browser/npm/test.sh      # packs, installs, then: node --test this file

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createServer } from "node:http";
import { copyFileSync, existsSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, extname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { chromium } from "playwright-core";
import { buildTestbed, openSockets, Testbed, within } from "../../../../testing/js/testbed.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../../../..");
const scratch = process.env.STAGGER_NPM_SCRATCH;
const tarball = process.env.STAGGER_NPM_TARBALL;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const NAME = "stagger-web";
const TEST_TIMEOUT = 60_000;

assert.ok(scratch && existsSync(join(scratch, "node_modules", NAME)), "run through adapters/browser/npm/test.sh (STAGGER_NPM_SCRATCH)");
const installed = join(scratch, "node_modules", NAME);

let testbedBinary;
/** The node flag that gives this Node a global WebSocket, if it needs one (Node 20). */
let websocketFlags = [];


/** Runs the scratch project's node-consumer.mjs; resolves to its JSON and exit status. The
 *  process must exit by itself (no socket or timer left behind) within `ms`, else it is killed. */
async function consumer(args, { flags = [], ms = 30_000 } = {}) {
  const child = spawn(process.execPath, [...flags, "node-consumer.mjs", ...args], { cwd: scratch, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise((r) => child.once("exit", (code, signal) => r({ code, signal })));
  const killer = setTimeout(() => child.kill("SIGKILL"), ms);
  const { code, signal } = await exited;
  clearTimeout(killer);
  assert.equal(signal, null, `node-consumer.mjs ${args[0]} did not exit by itself within ${ms} ms; stderr: ${stderr}`);
  assert.equal(code, 0, `node-consumer.mjs ${args[0]} failed; stderr: ${stderr}`);
  return { out: JSON.parse(stdout.trim().split("\n").at(-1)), stderr };
}

const key = (a) => (a == null ? undefined : `${a.epoch}.${a.number}`);

/** What the fixture's cluster must look like in `metadata`, and the story of a refresh past a
 *  hung first and a down second broker: the healthy third one wins, the hung one is cancelled. */
function assertRefresh(run, info) {
  assert.ok(run.ok, `refresh failed: ${JSON.stringify(run.error)}`);
  const live = info.brokers.filter((b) => b.state !== "down");
  const brokers = run.metadata.brokers.map((b) => [b.node_id, `${b.host}:${b.port}`]).sort();
  assert.deepEqual(brokers, live.map((b) => [b.id, b.tcp]).sort());
  const topics = run.metadata.topics.filter((t) => !t.is_internal).map((t) => [t.name, t.partitions.length]).sort();
  assert.deepEqual(topics, info.topics.map((t) => [t.name, t.partitions]).sort());
  const [hung, , healthy] = info.brokers;
  // The core's live events: the first attempt goes to the first bootstrap URL's bridge, the
  // healthy one wins, the hung one is cancelled; refreshWith()'s report agrees.
  const address = (url) => new URL(url).host;
  const started = run.events.filter((e) => e.event === "started");
  assert.equal(started[0].broker, address(hung.ws), "the first attempt is the first bootstrap URL");
  const won = run.events.filter((e) => e.event === "won");
  assert.equal(won.length, 1);
  assert.equal(won[0].broker, address(healthy.ws), "the healthy broker won");
  assert.ok(run.events.some((e) => e.event === "cancelled" && key(e.attempt) === key(started[0].attempt)), "the hung broker's attempt was cancelled");
  assert.equal(run.events.at(-1).event, "won", "the win is the last event");
  assert.equal(run.refresh.winner, address(healthy.ws));
  assert.equal(run.refresh.attempts.length, started.length);
  assert.match(run.trace.recorder, /^stagger-web /);
}

before(async () => {
  assert.ok(tarball && existsSync(tarball), "STAGGER_NPM_TARBALL names the packed tarball");
  testbedBinary = buildTestbed();
  // Node 22+ has a global WebSocket; Node 20.10+ has it behind a flag.
  if (typeof globalThis.WebSocket !== "function") {
    const probe = spawnSync(process.execPath, ["--experimental-websocket", "-e", "process.exit(typeof WebSocket === 'function' ? 0 : 1)"]);
    if (probe.status === 0) websocketFlags = ["--experimental-websocket"];
  }
  for (const f of ["node-consumer.mjs", "page.mjs"]) copyFileSync(join(here, f), join(scratch, f));
}, { timeout: 20 * 60_000 });

test("the installed package holds what a user needs, and its exports and types resolve", { timeout: TEST_TIMEOUT }, () => {
  const files = readdirSync(installed, { recursive: true }).filter((f) => statSync(join(installed, f)).isFile()).sort();
  assert.deepEqual(files, [
    "LICENSE-APACHE", "LICENSE-MIT", "README.md", "node.d.ts", "node.js", "package.json",
    "stagger_web.d.ts", "stagger_web.js", "stagger_web_bg.wasm",
  ]);
  for (const licence of ["LICENSE-MIT", "LICENSE-APACHE"]) {
    assert.equal(readFileSync(join(installed, licence), "utf8"), readFileSync(join(root, licence), "utf8"), licence);
  }
  const pkg = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"));
  assert.equal(pkg.name, NAME);
  assert.equal(pkg.type, "module");
  assert.equal(pkg.license, "MIT OR Apache-2.0");
  assert.equal(pkg.private, undefined, "the package is publishable");
  const cargo = spawnSync("cargo", ["metadata", "--no-deps", "--format-version", "1"], { cwd: root, encoding: "utf8", maxBuffer: 64 << 20 });
  assert.equal(cargo.status, 0);
  const crate = JSON.parse(cargo.stdout).packages.find((p) => p.name === "stagger-web");
  assert.equal(pkg.version, crate.version, "the package's version is the crate's");
  // Every path named by exports, types and main exists; browsers get the web glue, Node its entry.
  const dot = pkg.exports["."];
  for (const path of [pkg.main, pkg.types, dot.types, dot.default, dot.node.types, dot.node.default, pkg.exports["./stagger_web_bg.wasm"]]) {
    assert.ok(existsSync(join(installed, path)), `${path} exists`);
  }
  assert.equal(dot.default, "./stagger_web.js");
  assert.equal(dot.node.default, "./node.js");
  // The definitions type refresh() and its options (the crate's typescript_custom_section).
  const dts = readFileSync(join(installed, "stagger_web.d.ts"), "utf8");
  for (const decl of [
    "export function refresh(options: RefreshOptions): Promise<Metadata>;",
    "export function refreshWith(options: RefreshOptions): Promise<RefreshResult>;",
    "export interface RefreshResult {", "export type RefreshEvent =",
    "export interface RefreshOptions {", "bootstrap: string[];", "config?: RefreshConfig | PresetName | string;",
    "onEvent?: (event: RefreshEvent) => void;", "signal?: AbortSignal;", "sasl?: SaslOptions;",
    "export interface Metadata {", "export interface RefreshFailure extends Error", "export interface ConfigFailure extends Error",
    "export function defaultConfig(): RefreshConfig;", "export function presets(): PresetName[];",
    "export function validateConfig(config: RefreshConfig | PresetName | string): RefreshConfig;",
    "export default function __wbg_init",
  ]) assert.ok(dts.includes(decl), `stagger_web.d.ts declares ${decl}`);
  const nodeDts = readFileSync(join(installed, "node.d.ts"), "utf8");
  assert.match(nodeDts, /export \* from "\.\/stagger_web\.js";/);
  assert.match(nodeDts, /export default function init\(\s*module_or_path\?:/);
  assert.match(nodeDts, /export function initSync\(module\?:/);
});

test("Node: `import … from \"stagger-web\"`, init() reads the .wasm from disk, a refresh past a hung and a down broker", { timeout: TEST_TIMEOUT }, async (t) => {
  if (typeof globalThis.WebSocket !== "function" && websocketFlags.length === 0) {
    t.skip(`Node ${process.version} has no WebSocket, not even with --experimental-websocket (the next test covers that case)`);
    return;
  }
  // Node's WebSocket sends no Origin header, which the bridge lets through; the allowed origin
  // is one no page here has.
  const bed = await Testbed.start(testbedBinary, ["--brokers", "3", "--hung", "1", "--down", "1"], "http://127.0.0.1:1");
  try {
    assert.deepEqual(bed.info.brokers.map((b) => b.state), ["hung", "down", "healthy"]);
    const { out } = await consumer(["refresh", JSON.stringify(bed.info.brokers.map((b) => b.ws))], { flags: websocketFlags });
    assert.equal(out.resolved, pathToFileURL(join(installed, "node.js")).href, "Node resolves the package to its Node entry");
    assert.equal(out.hasWebSocket, true);
    assert.deepEqual(out.presets, ["adaptive", "sequential", "all-at-once", "staggered"]);
    assertRefresh(out, bed.info);
    console.log(`Node ${out.node}${websocketFlags.length ? ` (${websocketFlags.join(" ")})` : ""}: metadata in ${out.elapsedMs.toFixed(1)} ms`);
    // The consumer exited by itself (consumer() checks), and the bridges saw every socket closed.
    const stats = await bed.until((s) => openSockets(s) === 0, 5_000, "every socket closed after the refresh");
    assert.equal(stats.reduce((n, s) => n + s.origin_refused, 0), 0, "no upgrade was refused over its origin");
    assert.ok(stats[2].upgraded >= 1, "the healthy broker's bridge carried the winning attempt");
  } finally {
    await bed.stop();
  }
});

test("Node without a WebSocket: initSync() from disk and the config helpers work; refresh() rejects at once, saying what to do", { timeout: TEST_TIMEOUT }, async () => {
  const { out } = await consumer(["no-websocket"]);
  assert.equal(out.resolved, pathToFileURL(join(installed, "node.js")).href);
  assert.equal(out.hasWebSocket, false);
  assert.deepEqual(out.presets, ["adaptive", "sequential", "all-at-once", "staggered"]);
  assert.deepEqual(out.validated, { fixed: { secs: 0, nanos: 500_000_000 } });
  assert.equal(typeof out.defaultRetries, "number");
  assert.equal(out.ok, false);
  assert.equal(out.error.name, "NotSupportedError");
  assert.equal(out.error.isDomException, true);
  assert.match(out.error.message, /needs a global WebSocket/);
  assert.match(out.error.message, /--experimental-websocket/);
  assert.equal(out.withOk, false);
  assert.equal(out.withError.name, "NotSupportedError", "refreshWith() too");
  assert.ok(out.elapsedMs < 1_000, `rejected at once, not after retries (${out.elapsedMs} ms)`);
});

test("Chromium: the page imports stagger-web from node_modules through an import map and refreshes past a hung and a down broker", { timeout: 2 * TEST_TIMEOUT }, async () => {
  const pkg = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"));
  const entry = `./node_modules/${NAME}/${pkg.exports["."].default.replace(/^\.\//, "")}`;
  writeFileSync(join(scratch, "index.html"), `<!doctype html>
<meta charset="utf-8">
<title>stagger-web from node_modules</title>
<script type="importmap">${JSON.stringify({ imports: { [NAME]: entry } })}</script>
<script type="module" src="./page.mjs"></script>
`);
  // Serves the scratch project (and nothing outside it) on 127.0.0.1, logging each request.
  const requests = [];
  const types = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".json": "application/json" };
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, "http://127.0.0.1").pathname);
    const file = resolve(scratch, "." + (path === "/" ? "/index.html" : path));
    const inside = file.startsWith(scratch + sep) && !relative(scratch, file).split(sep).includes("..");
    if (!inside || !existsSync(file) || !statSync(file).isFile()) {
      requests.push({ path, status: 404 });
      res.writeHead(404).end();
      return;
    }
    const type = types[extname(file)] || "application/octet-stream";
    requests.push({ path, status: 200, type });
    res.writeHead(200, { "content-type": type, "cache-control": "no-store" }).end(readFileSync(file));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const origin = `http://127.0.0.1:${server.address().port}`;
  let bed;
  let browserServer;
  let browser;
  try {
    bed = await Testbed.start(testbedBinary, ["--brokers", "3", "--hung", "1", "--down", "1"], origin);
    browserServer = await chromium.launchServer({
      executablePath: CHROMIUM,
      headless: true,
      host: "127.0.0.1",
      args: [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
      ],
    });
    browser = await chromium.connect(browserServer.wsEndpoint());
    const page = await browser.newPage();
    const pageErrors = [];
    page.on("pageerror", (e) => pageErrors.push(e.message));
    await page.goto(`${origin}/`);
    await page.waitForFunction(() => window.staggerReady === true, null, { timeout: 30_000 }).catch((e) => {
      throw new Error(`the page never loaded stagger-web: ${pageErrors.join("; ") || e.message}; requests: ${JSON.stringify(requests)}`);
    });
    assert.deepEqual(await page.evaluate(() => window.presetNames), ["adaptive", "sequential", "all-at-once", "staggered"]);
    // The module and its .wasm came from the installed package, the .wasm as application/wasm;
    // the browser never asked for Node's entry.
    const served = (p) => requests.find((r) => r.path === p && r.status === 200);
    assert.ok(served(`/node_modules/${NAME}/stagger_web.js`), JSON.stringify(requests));
    assert.equal(served(`/node_modules/${NAME}/stagger_web_bg.wasm`)?.type, "application/wasm", JSON.stringify(requests));
    assert.ok(!requests.some((r) => r.path.endsWith("/node.js")), "the browser does not load node.js");

    const run = await page.evaluate((bootstrap) => window.run(bootstrap), bed.info.brokers.map((b) => b.ws));
    assertRefresh(run, bed.info);
    console.log(`Chromium: metadata in ${run.elapsedMs.toFixed(1)} ms`);
    const stats = await bed.until((s) => openSockets(s) === 0, 5_000, "every socket closed after the refresh");
    assert.equal(stats.reduce((n, s) => n + s.origin_refused, 0), 0, `the bridges allowed the page's origin ${origin}`);
    assert.deepEqual(pageErrors, []);
  } finally {
    await browser?.close().catch(() => {});
    if (browserServer) {
      const pid = browserServer.process().pid;
      await within(browserServer.close(), 10_000, "closing Chromium").catch(() => {});
      try {
        process.kill(pid, 0); // still there: kill it by pid
        process.kill(pid, "SIGKILL");
      } catch {
        // gone, as it should be
      }
    }
    await bed?.stop();
    server.closeAllConnections?.();
    await new Promise((r) => server.close(r));
  }
});
