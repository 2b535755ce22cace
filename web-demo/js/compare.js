// Compare: every preset (and your policy) over many seeds on the current cluster —
// time-to-metadata distributions beside the load each refresh puts on the brokers.

import * as engine from "./engine.js";
import { brokerLabel, fmtUs, samePolicy, scenario } from "./model.js";

const COLORS = {
  adaptive: "var(--c-adaptive)",
  sequential: "var(--c-sequential)",
  "all-at-once": "var(--c-all)",
  staggered: "var(--c-staggered)",
  "your policy": "var(--c-yours)",
};

function esc(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

function quantile(sorted, q) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function mean(xs) {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}

export function initCompare(app) {
  const $ = (id) => document.getElementById(id);
  let lastKey = null;
  let stats = null;

  function series() {
    const mine = app.config(0);
    const list = app.presetList.map((p) => ({ name: p.name, config: p.config }));
    if (!list.some((p) => samePolicy(p.config, mine))) list.push({ name: "your policy", config: mine });
    return list;
  }

  function run() {
    const seeds = Number($("cmp-seeds").value);
    const sc = scenario(app.state.brokers, app.state.seed);
    const list = series();
    $("cmp-cluster").innerHTML = `Cluster from Simulate: ${app.state.brokers.map((b, i) => `<b>broker-${i}</b> ${esc(brokerLabel(b))}`).join(" · ")}.
      Seeds ${app.state.seed}…${app.state.seed + seeds - 1}; each seed varies jitter, slow answer times and flaky failures.`;
    const t0 = performance.now();
    const answer = engine.compare(sc, list, seeds, app.state.seed);
    const elapsed = performance.now() - t0;
    if (answer.error) {
      $("cmp-status").textContent = answer.error;
      return;
    }
    stats = answer.series.map((s, i) => {
      const ok = s.ttm_us.filter((v) => v != null).sort((a, b) => a - b);
      return {
        name: s.name,
        error: s.error,
        color: COLORS[s.name] || "var(--c-yours)",
        sorted: ok,
        n: s.ttm_us.length,
        gaveUp: s.ttm_us.length - ok.length,
        started: mean(s.started),
        reached: mean(s.reached),
        startedMax: Math.max(0, ...s.started),
        config: list[i].config,
      };
    });
    drawCdf();
    drawLoad();
    drawTable();
    const total = seeds * list.length;
    const status = $("cmp-status");
    status.dataset.elapsedMs = String(Math.round(elapsed));
    status.textContent = `${total.toLocaleString("en")} refreshes simulated in ${(elapsed / 1000).toFixed(2)} s (in this browser, in WebAssembly).`;
  }

  function drawCdf() {
    const box = $("cmp-cdf");
    const W = Math.max(280, box.clientWidth || 520);
    const H = Math.round(Math.min(300, Math.max(210, W * 0.55)));
    const L = 44, R = 12, T = 10, B = 34;
    const all = stats.flatMap((s) => s.sorted).filter((v) => v > 0);
    const lo = Math.pow(10, Math.floor(Math.log10(Math.max(1, Math.min(...all, 1e3)))));
    const hi = Math.max(lo * 10, ...all) * 1.6;
    const x = (v) => L + ((Math.log10(Math.max(lo, v)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * (W - L - R);
    const y = (p) => T + (1 - p) * (H - T - B);
    const out = [`<svg width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="time to metadata, cumulative distribution per preset">`];
    for (let d = lo; d <= hi * 1.0001; d *= 10) {
      out.push(`<line x1="${x(d)}" y1="${T}" x2="${x(d)}" y2="${H - B}" class="grid"/>`);
      const anchor = x(d) > W - R - 24 ? "end" : "middle";
      out.push(`<text x="${x(d)}" y="${H - B + 14}" class="tick" text-anchor="${anchor}">${fmtUs(d)}</text>`);
      for (const m of [2, 5]) if (d * m < hi) out.push(`<line x1="${x(d * m)}" y1="${T}" x2="${x(d * m)}" y2="${H - B}" class="grid minor"/>`);
    }
    for (const p of [0, 0.25, 0.5, 0.75, 1]) {
      out.push(`<line x1="${L}" y1="${y(p)}" x2="${W - R}" y2="${y(p)}" class="grid"/>`);
      out.push(`<text x="${L - 5}" y="${y(p) + 4}" class="tick" text-anchor="end">${p * 100}%</text>`);
    }
    out.push(`<text x="${(L + W - R) / 2}" y="${H - 4}" class="axis-label" text-anchor="middle">time to metadata (log scale)</text>`);
    for (const s of stats) {
      if (s.error || !s.sorted.length) continue;
      let d = `M${x(s.sorted[0])},${y(0)}`;
      s.sorted.forEach((v, i) => {
        d += ` L${x(v).toFixed(1)},${y(i / s.n).toFixed(1)} L${x(v).toFixed(1)},${y((i + 1) / s.n).toFixed(1)}`;
      });
      d += ` L${W - R},${y(s.sorted.length / s.n).toFixed(1)}`;
      out.push(`<path d="${d}" class="cdf" data-series="${esc(s.name)}" style="stroke:${s.color}"><title>${esc(s.name)}</title></path>`);
    }
    out.push(`</svg>`);
    out.push(`<ul class="chart-legend">${stats.map((s) => `<li><i style="background:${s.color}"></i>${esc(s.name)}${s.error ? ` <span class="error-text">${esc(s.error)}</span>` : s.gaveUp ? ` <span class="muted">(${Math.round((100 * s.gaveUp) / s.n)}% gave up)</span>` : ""}</li>`).join("")}</ul>`);
    box.innerHTML = out.join("");
  }

  function drawLoad() {
    const box = $("cmp-load");
    const W = Math.max(280, box.clientWidth || 420);
    const rows = stats.filter((s) => !s.error);
    const row = 38;
    const L = 96, R = 44, T = 8, B = 30;
    const H = T + rows.length * row + B;
    const max = Math.max(1, app.state.brokers.length, ...rows.map((s) => s.startedMax));
    const x = (v) => L + (v / max) * (W - L - R);
    const out = [`<svg width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="attempts per refresh per preset">`];
    const step = max <= 10 ? 1 : max <= 40 ? 5 : 10;
    for (let v = 0; v <= max; v += step) {
      out.push(`<line x1="${x(v)}" y1="${T}" x2="${x(v)}" y2="${H - B}" class="grid"/>`);
      out.push(`<text x="${x(v)}" y="${H - B + 14}" class="tick" text-anchor="middle">${v}</text>`);
    }
    out.push(`<text x="${(L + W - R) / 2}" y="${H - 3}" class="axis-label" text-anchor="middle">per refresh (mean of ${stats[0]?.n ?? 0} seeds)</text>`);
    rows.forEach((s, i) => {
      const y0 = T + i * row + 6;
      out.push(`<text x="${L - 6}" y="${y0 + 15}" class="tick name" text-anchor="end">${esc(s.name)}</text>`);
      out.push(`<rect x="${L}" y="${y0}" width="${Math.max(1, x(s.started) - L)}" height="11" class="bar started" style="fill:${s.color}" data-series="${esc(s.name)}"><title>${esc(s.name)}: ${s.started.toFixed(2)} attempts started per refresh</title></rect>`);
      out.push(`<rect x="${L}" y="${y0 + 13}" width="${Math.max(1, x(s.reached) - L)}" height="11" class="bar reached" style="fill:${s.color}"><title>${esc(s.name)}: ${s.reached.toFixed(2)} requests reached a broker per refresh</title></rect>`);
      out.push(`<text x="${x(s.started) + 4}" y="${y0 + 10}" class="tick">${s.started.toFixed(2)}</text>`);
      out.push(`<text x="${x(s.reached) + 4}" y="${y0 + 23}" class="tick muted">${s.reached.toFixed(2)}</text>`);
    });
    out.push(`</svg><ul class="chart-legend"><li><i class="solid"></i>attempts started</li><li><i class="faint"></i>requests that reached a broker</li></ul>`);
    box.innerHTML = out.join("");
  }

  function drawTable() {
    const head = `<thead><tr><th>policy</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>gave up</th><th title="Connect commands per refresh">attempts</th><th title="attempts a broker accepted, per refresh">reached</th></tr></thead>`;
    const body = stats.map((s) => s.error
      ? `<tr><th><i style="background:${s.color}"></i>${esc(s.name)}</th><td colspan="7" class="error-text">${esc(s.error)}</td></tr>`
      : `<tr data-series="${esc(s.name)}"><th><i style="background:${s.color}"></i>${esc(s.name)}</th>
        <td>${fmtUs(quantile(s.sorted, 0.5))}</td><td>${fmtUs(quantile(s.sorted, 0.9))}</td><td>${fmtUs(quantile(s.sorted, 0.99))}</td>
        <td>${fmtUs(s.sorted[s.sorted.length - 1])}</td><td>${s.gaveUp ? `${((100 * s.gaveUp) / s.n).toFixed(1)}%` : "0"}</td>
        <td>${s.started.toFixed(2)}</td><td>${s.reached.toFixed(2)}</td></tr>`).join("");
    $("cmp-table").innerHTML = head + `<tbody>${body}</tbody>`;
  }

  $("cmp-run").addEventListener("click", run);
  $("cmp-seeds").addEventListener("change", run);
  let resizeTimer = 0;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      if (stats && app.state.view === "compare") {
        drawCdf();
        drawLoad();
      }
    }, 100);
  });

  return {
    player: null,
    activate() {
      const key = JSON.stringify([app.state.brokers, app.state.knobs, app.state.seed, $("cmp-seeds").value]);
      if (key !== lastKey) {
        lastKey = key;
        // Let the tab paint first, then compute.
        $("cmp-status").textContent = "simulating…";
        setTimeout(run, 20);
      } else if (stats) {
        drawCdf();
        drawLoad();
      }
    },
  };
}
