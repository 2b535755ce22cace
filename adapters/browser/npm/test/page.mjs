// The test page's module: `stagger-web` is a bare specifier, mapped by the page's import map
// to the scratch project's node_modules/stagger-web (the `default` entry of its `exports`).
import init, { defaultConfig, presets, refreshWith } from "stagger-web";

window.run = async (bootstrap) => {
  const events = [];
  const started = performance.now();
  try {
    // The seeds in the order listed: the hung and the down broker first.
    const config = { ...defaultConfig(), shuffle_seeds: false };
    const result = await refreshWith({ bootstrap, config, clientId: "stagger-web-npm-test", onEvent: (e) => events.push(e) });
    return { ok: true, ...result, events, elapsedMs: performance.now() - started };
  } catch (e) {
    return { ok: false, error: { name: e?.name, message: e?.message, brokers: e?.brokers }, events };
  }
};

await init(); // the web glue's default: fetch stagger_web_bg.wasm next to the module
window.presetNames = presets();
window.staggerReady = true;
