// Runs inside the scratch project that installed the packed tarball, as a Node user's code
// would: `stagger-web` is a bare specifier, resolved through node_modules and the package's
// `exports`. Prints one JSON line for package.test.mjs.
//
//   node node-consumer.mjs refresh '["ws://127.0.0.1:…", …]'   # init() from disk, one refresh
//   node node-consumer.mjs no-websocket                          # initSync() from disk, no WebSocket
import init, { defaultConfig, initSync, presets, refresh, refreshWith, validateConfig } from "stagger-web";

const [mode, arg] = process.argv.slice(2);
const out = { resolved: import.meta.resolve("stagger-web"), node: process.version };
const plainError = (e) => ({ name: e?.name, message: e?.message, field: e?.field, brokers: e?.brokers, isDomException: e instanceof DOMException });

if (mode === "refresh") {
  out.hasWebSocket = typeof globalThis.WebSocket === "function";
  await init();
  out.presets = presets();
  const events = [];
  const started = performance.now();
  try {
    // The seeds in the order listed: the hung and the down broker first.
    const config = { ...defaultConfig(), shuffle_seeds: false };
    Object.assign(out, await refreshWith({ bootstrap: JSON.parse(arg), config, clientId: "stagger-web-npm-test", onEvent: (e) => events.push(e) }));
    out.ok = true;
  } catch (e) {
    out.ok = false;
    out.error = plainError(e);
  }
  out.elapsedMs = performance.now() - started;
  out.events = events;
} else if (mode === "no-websocket") {
  // Node 22+ has a global WebSocket: take it away to see what a Node without one gets.
  try {
    delete globalThis.WebSocket;
  } catch {
    globalThis.WebSocket = undefined;
  }
  out.hasWebSocket = typeof globalThis.WebSocket === "function";
  initSync();
  out.presets = presets();
  out.validated = validateConfig("staggered").fanout.stagger;
  out.defaultRetries = defaultConfig().retry.retries;
  const started = performance.now();
  try {
    await refresh({ bootstrap: ["ws://127.0.0.1:9"] });
    out.ok = true;
  } catch (e) {
    out.ok = false;
    out.error = plainError(e);
  }
  try {
    await refreshWith({ bootstrap: ["ws://127.0.0.1:9"] });
    out.withOk = true;
  } catch (e) {
    out.withOk = false;
    out.withError = plainError(e);
  }
  out.elapsedMs = performance.now() - started;
} else {
  throw new Error(`unknown mode ${mode}`);
}
console.log(JSON.stringify(out));
