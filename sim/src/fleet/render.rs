//! The fleet report as a Markdown table and a hand-written SVG plot.
//!
//! Why hand-written: the plot is a few polylines on log axes; a plotting crate would add a
//! dependency tree to a `no_std` core for that, and its output would change with its version.
//! Both renderers are pure functions of the report, so regenerating gives identical bytes.

use alloc::string::String;
use core::fmt::Write as _;

use super::math::log10;
use super::stats::fmt_ms;
use super::{FleetReport, FleetScenario, ScenarioResult};
use stagger::duration_micros;

fn dur(d: core::time::Duration) -> String {
    fmt_ms(Some(duration_micros(d) as f64 / 1000.0))
}

/// The report as Markdown: the setup, one table per scenario, and the targets.
pub fn render_markdown(report: &FleetReport, command: &str) -> String {
    let c = &report.config;
    let mut out = String::new();
    let _ = writeln!(out, "# Fleet simulation\n");
    let _ = writeln!(
        out,
        "{} clients share {} brokers (virtual time, seed {}). Network round trip {} (±20 %); an \
         attempt on a new connection is a TCP handshake, then ApiVersions, then Metadata, one round \
         trip each (on the connection a client kept from its last refresh, Metadata alone). {} \
         a Metadata request takes an exponentially distributed {} \
         on average ({:.0} per second per broker), an ApiVersions request {}, and every accepted \
         connection {} (accept and close). Listener: {}{}{}. Hung brokers accept connections and \
         never answer; the dead broker of the storm refuses them. Each client is a core `Cluster` with \
         3 seed brokers, warmed up by calm refreshes (64 — a full response-time window — for \
         every strategy that starts one attempt at a time, so all meet the incident at the same \
         refresh and draw the same choices; 2 for `all-at-once`; about one per {}); then every client refreshes \
         once, at a random time within {} ({} in the failover storm, {}). `all-at-once` runs with its \
         hedge budget lifted (otherwise a `Cluster` would cut it down to 1 + tokens attempts); the \
         oracle knows which brokers are healthy, is connected to every one, and sends one request \
         to the one whose queue empties first. Full model: `sim/src/fleet/mod.rs`; how far it is \
         from a real cluster: [fleet-vs-real.md](fleet-vs-real.md).\n",
        c.clients,
        c.brokers,
        c.seed,
        dur(c.rtt),
        match c.network_threads {
            0 => String::from("Each broker serves one FIFO queue;"),
            n => alloc::format!(
                "Each broker serves its requests from one FIFO queue, and each connection's accept, TLS, SASL \
                 and request reads from one of {n} network-thread queues;"
            ),
        },
        dur(c.service_time),
        1e6 / (duration_micros(c.service_time).max(1) as f64),
        dur(c.api_versions_time),
        dur(c.accept_time),
        c.security.name(),
        match c.security.tls_time {
            Some(t) => alloc::format!(", a TLS handshake of one round trip and {} of broker time", dur(t)),
            None => String::new(),
        },
        if c.security.sasl_round_trips > 0 {
            alloc::format!(
                ", SASL of {} round trips and {} of broker time",
                c.security.sasl_round_trips,
                dur(c.security.sasl_time)
            )
        } else {
            String::new()
        },
        dur(c.warmup_spacing),
        dur(c.request_window),
        dur(c.storm_window),
        if c.storm_causes {
            "each saying why: `ConnectionLost` naming the dead broker if its kept connection was \
             there, `StaleMetadata` otherwise"
        } else {
            "without saying why"
        },
    );
    let _ = writeln!(out, "Regenerate with `{command}`.\n");
    let _ = writeln!(
        out,
        "What the check against a real cluster covers ([fleet-vs-real.md](fleet-vs-real.md)): the \
         healthy, one-broker-hung and failover-storm scenarios, at 300 clients on 3 brokers, over \
         PLAINTEXT and SASL_SSL, against this build's runs of each listener (the default, \
         `sequential` and `sequential-shuffled`, two turns of each when healthy and with one \
         hung, three per run in the storm, alternating, every strategy warmed alike), started \
         from the real fleet's state. There the model's attempts, new connections, ApiVersions \
         and Metadata requests per refresh are within ×1.04 of the real cluster's in every \
         scenario, and its peak within ×1.10. Its times are checked with the lab's machine \
         modelled (the brokers' and 300 clients' threads sharing 2 cores, Kafka's network \
         threads and their poll iterations, the brokers' request path apart from their JIT \
         compiler and collector, the clients' own work): typically within ×1.22 and ×1.12 on \
         p50 and p99 over PLAINTEXT and ×1.14 and ×1.31 over SASL_SSL, within ×1.5 in every \
         scenario. The fleet below models brokers with cores of their own and clients on \
         machines of their own. So the counts and peaks below are claims the check covers, at \
         its scale; their times are the model's. A third of the brokers hung, the cold start \
         and the scale of thousands of clients on tens of brokers are the model's alone. Over \
         SASL_SSL the model's cold start opens 1.23 connections per client in the machine fit \
         against 1.04 in 28 real fleets of this build (×1.19): \
         fleet-vs-real.md, \"The cold start\".\n"
    );
    let _ = writeln!(
        out,
        "Columns: time to metadata (the application's request → `Refreshed`) percentiles; \
         attempts per refresh (`Connect` and `Reuse` commands ÷ refreshes: the amplification); \
         connections and ApiVersions per refresh (new connections brokers accepted, and the \
         ApiVersions requests they read, ÷ refreshes: what hedging costs beside Metadata); requests \
         per refresh (Metadata requests brokers received ÷ refreshes — a refused attempt, or one \
         cancelled before ApiVersions was answered, sends none); peak = the most Metadata \
         requests any one broker received within any {} window (sliding); busiest = the most \
         work one broker did within such a window (accepts, handshakes, ApiVersions and Metadata \
         as priced: the peak counts a Metadata request on a kept connection as one behind a new \
         connection's handshakes, this does not); gave up = refreshes that never got metadata \
         (counted as infinitely slow).\n",
        dur(c.peak_window)
    );
    for scenario in FleetScenario::ALL {
        let _ = writeln!(out, "## {}\n", scenario.title());
        let _ = writeln!(
            out,
            "| strategy | p50 | p99 | p99.9 | attempts / refresh | connections / refresh | ApiVersions / refresh | requests / refresh | peak requests / {} | busiest {} of work | gave up |",
            dur(c.peak_window),
            dur(c.peak_window)
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in report.results.iter().filter(|r| r.scenario == scenario) {
            table_row(&mut out, r);
        }
        out.push('\n');
    }
    if !report.targets.is_empty() {
        let _ = writeln!(out, "## Targets (strategy `adaptive`)\n");
        let _ = writeln!(out, "| target | scenario | measured | limit | met | numbers |");
        let _ = writeln!(out, "|---|---|---:|---:|---|---|");
        for t in &report.targets {
            let show = |x: Option<f64>| match (t.unit.as_str(), x) {
                ("ms", x) => fmt_ms(x),
                (_, None) => "—".into(),
                ("ratio", Some(v)) if v.is_infinite() => "∞".into(),
                ("ratio", Some(v)) => alloc::format!("{v:.2}×"),
                ("per_refresh", Some(v)) => alloc::format!("{v:.3}"),
                ("attempts_per_refresh", Some(v)) => alloc::format!("{v:.3}"),
                (_, Some(v)) => alloc::format!("{v}"),
            };
            let met = if t.met { "yes" } else { "**no**" };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                t.name,
                t.scenario.title(),
                show(t.value),
                show(t.limit),
                met,
                t.detail
            );
        }
        out.push('\n');
        if report.targets.iter().any(|t| !t.met) {
            let _ = writeln!(out, "Why a target is missed, and what bounds it: [storm.md](storm.md).\n");
        }
    }
    out
}

fn table_row(out: &mut String, r: &ScenarioResult) {
    let p = &r.time_to_metadata;
    let per = |x: u64| x as f64 / r.refreshes.max(1) as f64;
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} | {} |",
        r.strategy,
        fmt_ms(p.p50_ms),
        fmt_ms(p.p99_ms),
        fmt_ms(p.p999_ms),
        r.attempts_per_refresh,
        per(r.connections),
        per(r.api_versions),
        r.requests_per_refresh,
        r.peak_requests,
        fmt_ms(Some(r.peak_busy_us as f64 / 1e3)),
        r.failed
    );
}

/// Colours for strategies, in order of first appearance (the oracle is always black).
const PALETTE: [&str; 8] = ["#d62728", "#9467bd", "#ff7f0e", "#1f77b4", "#17becf", "#8c564b", "#e377c2", "#bcbd22"];

const PANEL_W: f64 = 300.0;
const PANEL_H: f64 = 210.0;
const MARGIN_L: f64 = 52.0;
const MARGIN_T: f64 = 30.0;
const GAP_X: f64 = 50.0;
const GAP_Y: f64 = 62.0;
/// Time axis: 10^-1 ms … 10^5 ms (0.1 ms … 100 s).
const X_MIN: f64 = -1.0;
const X_MAX: f64 = 5.0;
/// Tail axis: fraction still waiting, 1 … 10^-4.
const TAIL_MIN: f64 = -4.0;

/// CDF plot: for each scenario a panel of the time-to-metadata CDF (top row, linear) and of
/// its tail (bottom row: fraction still waiting, log scale, where p99 and p99.9 live), one
/// line per strategy, time on a log axis.
pub fn render_svg(report: &FleetReport) -> String {
    let mut names: alloc::vec::Vec<&str> = alloc::vec::Vec::new();
    for r in &report.results {
        if !names.contains(&r.strategy.as_str()) {
            names.push(&r.strategy);
        }
    }
    let colour = |name: &str| -> &'static str {
        if name == "oracle" {
            return "#000000";
        }
        let i = names.iter().filter(|n| **n != "oracle").position(|n| *n == name).unwrap_or(0);
        PALETTE[i % PALETTE.len()]
    };
    let cols = FleetScenario::ALL.len() as f64;
    let width = MARGIN_L + cols * (PANEL_W + GAP_X) + 10.0;
    let height = MARGIN_T + 2.0 * (PANEL_H + GAP_Y) + 40.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{MARGIN_L}" y="16" font-size="13" font-weight="bold">Time to metadata, {} clients on {} brokers (top: CDF; bottom: fraction still waiting, log scale)</text>"#,
        report.config.clients, report.config.brokers
    );
    for (col, scenario) in FleetScenario::ALL.iter().enumerate() {
        let x0 = MARGIN_L + col as f64 * (PANEL_W + GAP_X);
        for row in 0..2 {
            let y0 = MARGIN_T + 14.0 + row as f64 * (PANEL_H + GAP_Y);
            panel(&mut s, report, *scenario, x0, y0, row == 1, &colour);
        }
    }
    // Legend.
    let ly = height - 18.0;
    let mut lx = MARGIN_L;
    for name in &names {
        let c = colour(name);
        let dash = if *name == "oracle" { r#" stroke-dasharray="4 3""# } else { "" };
        let _ = writeln!(
            s,
            r#"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{c}" stroke-width="2.5"{dash}/><text x="{:.1}" y="{ly:.1}">{}</text>"#,
            ly - 4.0,
            lx + 22.0,
            ly - 4.0,
            lx + 26.0,
            escape(name)
        );
        lx += 34.0 + 7.0 * name.len() as f64;
    }
    s.push_str("</svg>\n");
    s
}

fn panel(
    s: &mut String,
    report: &FleetReport,
    scenario: FleetScenario,
    x0: f64,
    y0: f64,
    tail: bool,
    colour: &dyn Fn(&str) -> &'static str,
) {
    let px = |ms: f64| x0 + (log10(ms) - X_MIN) / (X_MAX - X_MIN) * PANEL_W;
    let py = |f: f64| {
        if tail {
            let waiting = (1.0 - f).max(1e-4);
            y0 + (0.0 - log10(waiting)) / (0.0 - TAIL_MIN) * PANEL_H
        } else {
            y0 + (1.0 - f) * PANEL_H
        }
    };
    let title = if tail { alloc::format!("{} — tail", scenario.title()) } else { scenario.title().into() };
    let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}" font-weight="bold">{}</text>"#, x0, y0 - 6.0, escape(&title));
    let _ = writeln!(
        s,
        r##"<rect x="{x0:.1}" y="{y0:.1}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#888"/>"##
    );
    // Time grid: one line per decade.
    let labels = ["0.1 ms", "1 ms", "10 ms", "100 ms", "1 s", "10 s", "100 s"];
    for (k, label) in labels.iter().enumerate() {
        let x = x0 + k as f64 / (X_MAX - X_MIN) * PANEL_W;
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{y0:.1}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#444">{label}</text>"##,
            y0 + PANEL_H,
            y0 + PANEL_H + 13.0
        );
    }
    // Fraction grid.
    let ticks: &[(f64, &str)] = if tail {
        &[(0.0, "1"), (0.9, "0.1"), (0.99, "0.01"), (0.999, "0.001"), (0.9999, "0.0001")]
    } else {
        &[(0.0, "0"), (0.25, "0.25"), (0.5, "0.5"), (0.75, "0.75"), (1.0, "1")]
    };
    for (f, label) in ticks {
        let y = py(*f);
        let _ = writeln!(
            s,
            r##"<line x1="{x0:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#444">{label}</text>"##,
            x0 + PANEL_W,
            x0 - 4.0,
            y + 4.0
        );
    }
    for r in report.results.iter().filter(|r| r.scenario == scenario) {
        let mut points = String::new();
        let mut last_y = None;
        for &(ms, f) in &r.cdf {
            let x = px(ms);
            if x < x0 || x > x0 + PANEL_W {
                continue;
            }
            let y = py(f);
            // Draw as steps: hold the previous fraction until this time.
            if let Some(ly) = last_y {
                let _ = write!(points, "{x:.1},{ly:.1} ");
            }
            let _ = write!(points, "{x:.1},{y:.1} ");
            last_y = Some(y);
        }
        let dash = if r.strategy == "oracle" { r#" stroke-dasharray="4 3""# } else { "" };
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.8"{dash} points="{}"><title>{}</title></polyline>"#,
            colour(&r.strategy),
            points.trim_end(),
            escape(&r.strategy)
        );
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
