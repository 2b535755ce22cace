// The bridge testbed (`cargo run -p stagger-bridge --example testbed`) for the JavaScript
// tests: librdkafka's mock cluster with hung and down brokers, a WebSocket bridge in front of
// each, and their counters on request. Shared by the browser adapter's tests and the npm
// package's.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { dirname, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** Builds the testbed example (a no-op when up to date) and returns its path
 *  ($STAGGER_TESTBED instead, when set). */
export function buildTestbed() {
  if (process.env.STAGGER_TESTBED) return process.env.STAGGER_TESTBED;
  const out = spawnSync(
    "cargo",
    ["build", "-q", "-p", "stagger-bridge", "--example", "testbed", "--message-format=json-render-diagnostics"],
    { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 64 << 20 },
  );
  assert.equal(out.status, 0, "cargo build of the testbed example failed");
  const artifact = out.stdout
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line))
    .find((m) => m.reason === "compiler-artifact" && m.target?.name === "testbed" && m.executable);
  assert.ok(artifact, "cargo reported no testbed executable");
  return artifact.executable;
}

/** Resolves within `ms` or rejects saying `what`. */
export function within(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** One running testbed: `info` is what it printed first (brokers, their ws:// and TCP
 *  addresses, topics); its bridges allow the pages of `allowOrigin` only. */
export class Testbed {
  static async start(binary, args, allowOrigin) {
    const bed = new Testbed();
    bed.child = spawn(binary, [...args, "--allow-origin", allowOrigin], { cwd: ROOT, stdio: ["pipe", "pipe", "inherit"] });
    bed.exited = new Promise((r) => bed.child.once("exit", r));
    bed.lines = createInterface({ input: bed.child.stdout })[Symbol.asyncIterator]();
    try {
      bed.info = await bed.nextLine(30_000);
    } catch (e) {
      await bed.stop();
      throw e;
    }
    return bed;
  }

  async nextLine(ms = 10_000) {
    const { value, done } = await within(this.lines.next(), ms, "testbed output");
    assert.ok(!done, "testbed exited early");
    return JSON.parse(value);
  }

  /** Every bridge's counters, in broker order. */
  async stats() {
    this.child.stdin.write("stats\n");
    return (await this.nextLine()).stats;
  }

  /** Polls the counters until `check` holds, for at most `ms`. */
  async until(check, ms, what) {
    const deadline = Date.now() + ms;
    let stats;
    while (Date.now() < deadline) {
      stats = await this.stats();
      if (check(stats)) return stats;
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.fail(`${what} within ${ms} ms; last bridge stats: ${JSON.stringify(stats)}`);
  }

  /** Ends stdin (the testbed's signal to stop); SIGKILL by pid after 5 s. */
  async stop() {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.stdin.end();
    const killer = setTimeout(() => this.child.kill("SIGKILL"), 5_000);
    await this.exited;
    clearTimeout(killer);
  }
}

/** Connections the bridges hold open now. */
export const openSockets = (stats) => stats.reduce((n, s) => n + s.open, 0);
