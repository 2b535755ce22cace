// The real Kafka cluster of a test run, for the JavaScript tests (the browser adapter's and
// the web demo's): its addresses from scripts/kafka.sh's `cluster.env`, and `stagger bridge`
// processes in front of its listeners.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** `cluster.env`'s assignments (KAFKA_SASL_PLAINTEXT, KAFKA_SASL_USERNAME, …) of the cluster
 *  scripts/test.sh started (STAGGER_KAFKA_DIR); `null` when there is none and the run does
 *  not require one (STAGGER_REQUIRE_KAFKA). */
export function realKafka() {
  const dir = process.env.STAGGER_KAFKA_DIR;
  if (!dir || !existsSync(join(dir, "cluster.env"))) {
    assert.ok(!process.env.STAGGER_REQUIRE_KAFKA, "STAGGER_REQUIRE_KAFKA is set but no cluster runs (STAGGER_KAFKA_DIR)");
    return null;
  }
  const lines = readFileSync(join(dir, "cluster.env"), "utf8").split("\n").filter((l) => l.includes("="));
  return Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
}

/** A free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

/** `stagger bridge` (the CLI, built here) from a free port to `target` (host:port); resolves
 *  to `{url, child}` once it listens. The caller kills `child`.
 *
 *  The bridge refuses web pages of any origin it is not told (HTTP 403), so a test that opens
 *  it from a page passes that page's origin: `{ allowOrigins: ["http://127.0.0.1:PORT"] }`.
 *  `args` are more flags for `stagger bridge` (`--forward-all-apis`, `--token-file …`). */
export async function staggerBridge(target, { allowOrigins = [], args = [] } = {}) {
  const out = spawnSync("cargo", ["build", "-q", "-p", "stagger-cli", "--message-format=json-render-diagnostics"],
    { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 64 << 20 });
  assert.equal(out.status, 0, "cargo build of the stagger CLI failed");
  const binary = out.stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l))
    .find((m) => m.reason === "compiler-artifact" && m.target?.name === "stagger" && m.executable)?.executable;
  assert.ok(binary, "cargo reported no stagger executable");
  const port = await freePort();
  const origins = allowOrigins.flatMap((o) => ["--allow-origin", o]);
  const child = spawn(binary, ["bridge", "--listen", `127.0.0.1:${port}`, "--to", target, ...origins, ...args],
    { stdio: ["ignore", "pipe", "inherit"] });
  const line = await new Promise((ok, fail) => {
    createInterface({ input: child.stdout }).once("line", ok);
    child.once("exit", (code) => fail(new Error(`stagger bridge exited with ${code}`)));
  });
  assert.match(line, /^bridging ws:\/\/127\.0\.0\.1:\d+ -> /);
  return { url: `ws://127.0.0.1:${port}`, child };
}
