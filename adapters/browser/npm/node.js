/* @ts-self-types="./node.d.ts" */
// stagger-web's entry for Node (the "node" condition of package.json's `exports`); browsers and
// bundlers get stagger_web.js itself. That module is wasm-bindgen's `web` target: its init()
// fetches stagger_web_bg.wasm next to itself, and Node's fetch cannot read file: URLs. Here
// init() and initSync() read the .wasm from disk instead when given nothing (or a file: URL);
// anything else goes to wasm-bindgen's init unchanged. refresh() and refreshWith() need a
// global WebSocket (Node 22+, or Node 20.10+ run with --experimental-websocket): without one
// they reject at once with a NotSupportedError, rather than failing every attempt and giving
// up. Everything else is stagger_web.js's.
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import initWeb, { initSync as initSyncWeb, refresh as refreshWeb, refreshWith as refreshWithWeb } from "./stagger_web.js";

export * from "./stagger_web.js";

const WASM = new URL("./stagger_web_bg.wasm", import.meta.url);

/** `{ key: value }` (wasm-bindgen's current form) or the bare value (its deprecated one). */
function unwrap(options, key) {
  return options !== null && typeof options === "object" && Object.getPrototypeOf(options) === Object.prototype
    ? options[key]
    : options;
}

/** The file to read for `input`, or null when wasm-bindgen's init takes it as it is. */
function onDisk(input) {
  if (input === undefined) return WASM;
  if (input instanceof URL) return input.protocol === "file:" ? input : null;
  if (typeof input === "string" && input.startsWith("file:")) return new URL(input);
  return null;
}

/** Instantiates the wasm: by default the package's own stagger_web_bg.wasm, read from disk. */
export default async function init(options) {
  const input = await unwrap(options, "module_or_path");
  const file = onDisk(input);
  return initWeb({ module_or_path: file ? await readFile(file) : input });
}

/** As init(), synchronously. */
export function initSync(options) {
  const module = unwrap(options, "module");
  const file = onDisk(module);
  return initSyncWeb({ module: file ? readFileSync(file) : module });
}

/** A rejection saying what to do, for a Node without a WebSocket; null when it has one. */
function noWebSocket() {
  if (typeof globalThis.WebSocket !== "function") {
    return Promise.reject(
      new DOMException(
        "stagger-web: refresh() needs a global WebSocket, which this Node does not have " +
          `(${process.version}): use Node 22 or later, run Node 20 with --experimental-websocket, ` +
          "or set globalThis.WebSocket to a WHATWG-compatible implementation",
        "NotSupportedError",
      ),
    );
  }
  return null;
}

/** stagger_web.js's refresh(), after checking that this Node has a WebSocket to open. */
export function refresh(options) {
  return noWebSocket() ?? refreshWeb(options);
}

/** stagger_web.js's refreshWith(), after the same check. */
export function refreshWith(options) {
  return noWebSocket() ?? refreshWithWeb(options);
}
