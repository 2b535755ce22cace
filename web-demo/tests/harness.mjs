// Shared by the end-to-end tests: a static file server for web-demo/dist (the page has no
// server-side logic, so any static server will do) and Debian's Chromium driven by
// playwright-core. Never downloads a browser.

import { before, after } from "node:test";
import { createServer } from "node:http";
import { readFile, mkdir } from "node:fs/promises";
import { existsSync } from "node:fs";
import { extname, join, normalize, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { tmpdir } from "node:os";
import { mkdtempSync, rmSync } from "node:fs";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
export const DIST = resolve(here, "../dist");
export const FIXTURES = resolve(here, "../fixtures");
export const ROOT = resolve(here, "../..");
export const SHOTS = resolve(ROOT, "target/web-demo-screenshots");
export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".wasm": "application/wasm",
  ".svg": "image/svg+xml",
};

/** Serves `dir` on 127.0.0.1 at a free port; resolves to `{url, close}`. */
export async function serve(dir = DIST) {
  if (!existsSync(join(dir, "index.html"))) {
    throw new Error(`${dir}/index.html is missing: run web-demo/build.sh first`);
  }
  const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
    const file = normalize(join(dir, path.endsWith("/") ? path + "index.html" : path));
    if (!file.startsWith(dir)) {
      res.writeHead(403).end();
      return;
    }
    try {
      const body = await readFile(file);
      res.writeHead(200, { "content-type": TYPES[extname(file)] || "application/octet-stream", "cache-control": "no-store" });
      res.end(body);
    } catch {
      res.writeHead(404).end("not found");
    }
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address();
  return { url: `http://127.0.0.1:${port}/`, close: () => new Promise((ok) => server.close(ok)) };
}

/**
 * Serves the built site and launches Chromium once for a test file (registers its
 * `before`/`after` hooks); the returned object's `server` and `browser` are set once up.
 */
export function demoSession() {
  const session = {};
  before(async () => {
    session.server = await serve();
    session.browser = await launch();
  });
  after(async () => {
    await session.browser?.close();
    await session.server?.close();
  });
  return session;
}

/** Debian's Chromium, headless, with a fresh profile; resolves to `{browser, close}`. */
export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), "stagger-web-demo-"));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
    viewport: { width: 1280, height: 800 },
  });
  return {
    context: browser,
    close: async () => {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** A new page at `url` with the engine loaded; page errors fail the test. */
export async function open(context, url, viewport = { width: 1280, height: 800 }) {
  const page = await context.newPage();
  await page.setViewportSize(viewport);
  const errors = [];
  page.on("pageerror", (e) => errors.push(e));
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(new Error(m.text()));
  });
  page.errors = errors;
  await page.goto(url);
  await page.waitForSelector("body.ready");
  return page;
}

export async function screenshot(page, name) {
  await mkdir(SHOTS, { recursive: true });
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: false });
  return path;
}

export async function screenshotFull(page, name) {
  await mkdir(SHOTS, { recursive: true });
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** The spans on a timeline, as the page's data attributes describe them. */
export async function spans(page, root = "#sim-timeline") {
  return page.$$eval(`${root} g.span`, (els) =>
    els.map((g) => ({
      lane: Number(g.dataset.lane),
      attempt: Number(g.dataset.attempt),
      start: Number(g.dataset.start),
      end: g.dataset.end === "" ? null : Number(g.dataset.end),
      outcome: g.dataset.outcome,
      // When the broker first answered (the answering phase), and why a cancelled one was.
      answered: g.dataset.answered === "" ? null : Number(g.dataset.answered),
      reason: g.dataset.reason || null,
    })));
}
