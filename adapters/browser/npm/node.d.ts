// Types of stagger-web's Node entry (node.js): stagger_web.d.ts, except that init() and
// initSync() may be called without an argument (they then read the package's .wasm from disk),
// and also take a file: URL.
export * from "./stagger_web.js";
import type { InitInput, InitOutput, SyncInitInput } from "./stagger_web.js";

/**
 * Instantiates the wasm. Without an argument, or given a `file:` URL, reads the .wasm from disk
 * (by default the package's own `stagger_web_bg.wasm`); anything else is as in browsers.
 */
export default function init(
  module_or_path?: { module_or_path: InitInput | Promise<InitInput> } | InitInput | Promise<InitInput>,
): Promise<InitOutput>;

/** As `init()`, synchronously: bytes, a `WebAssembly.Module`, a `file:` URL, or nothing. */
export function initSync(module?: { module: SyncInitInput | URL } | SyncInitInput | URL): InitOutput;
