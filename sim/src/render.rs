//! Plain-text rendering of a [`Report`]: one line per broker lane and a summary, for
//! examples, terminals and readable test failures.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;
use core::time::Duration;

use super::refresh_sim::{Lane, Outcome, Report, Span, SpanOutcome};
use stagger::duration_micros;
use stagger::{ErrorKind, Instant};

/// Dots drawn across the whole run; each span segment gets its share (at least one).
const DOTS: u64 = 24;

/// `1ms`, `1.5ms`, `0.25ms` below ten seconds, `12.5s` above: short and exact to the µs.
pub(super) fn fmt_duration(d: Duration) -> String {
    fmt_micros(duration_micros(d))
}

/// An instant as time since the simulation start (see [`fmt_duration`]).
pub(super) fn fmt_instant(at: Instant) -> String {
    fmt_micros(at.as_micros())
}

fn fmt_micros(us: u64) -> String {
    let (whole, frac, unit) =
        if us < 10_000_000 { (us / 1000, us % 1000, "ms") } else { (us / 1_000_000, (us % 1_000_000) / 1000, "s") };
    if frac == 0 {
        return alloc::format!("{whole}{unit}");
    }
    let mut digits = alloc::format!("{frac:03}");
    while digits.ends_with('0') {
        digits.pop();
    }
    alloc::format!("{whole}.{digits}{unit}")
}

/// A short name for an error kind, to fit on a lane: its name in words, with a broker
/// error's code.
fn kind_name(kind: ErrorKind) -> String {
    match kind {
        ErrorKind::BrokerError(code) => alloc::format!("broker error {code}"),
        kind => kind.name().replace('_', " "),
    }
}

/// The lane's display name: the host of `host:port` (the port is the same everywhere).
fn lane_name(lane: &Lane) -> &str {
    lane.address.rsplit_once(':').map_or(&lane.address, |(host, _)| host)
}

impl Report {
    /// Renders the run as text: one line per broker lane with its attempts, e.g.
    /// `broker-0  hung  #0[0ms .. connected 1ms ........ cancelled(lost) 23ms]`, then the
    /// summary line ([`Report::summary`]).
    ///
    /// Why text: the example and the CLI print it, and a failing test shows it, so a person
    /// can see the stagger at work without opening the web demo.
    pub fn render_timeline(&self) -> String {
        let total = self.ended_at.as_micros().max(1);
        let name_width = self.lanes.iter().map(|l| lane_name(l).len()).max().unwrap_or(0);
        let labels: Vec<String> =
            self.lanes.iter().map(|l| l.behavior.as_ref().map_or(String::from("?"), |b| b.behavior.label())).collect();
        let label_width = labels.iter().map(String::len).max().unwrap_or(0);
        let mut out = String::new();
        for (lane, label) in self.lanes.iter().zip(&labels) {
            let _ = write!(out, "{:name_width$}  {:label_width$} ", lane_name(lane), label);
            if lane.spans.is_empty() {
                out.push_str(" (not tried)");
            }
            for span in &lane.spans {
                out.push(' ');
                render_span(&mut out, span, total);
            }
            out.push('\n');
        }
        out.push_str(&self.summary());
        out.push('\n');
        out
    }

    /// One line: time to metadata (or why it gave up), then attempts started, cancelled and
    /// failed, requests that reached a broker, hedges and passes — the numbers that compare
    /// presets on latency against load.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        match &self.outcome {
            Outcome::Done { winner, attempt, time_to_metadata } => {
                let name = self.lanes.iter().find(|l| l.broker == *winner).map_or("?", lane_name);
                let _ = write!(out, "metadata in {} from {name} (attempt {attempt})", fmt_duration(*time_to_metadata));
            }
            Outcome::GiveUp { error, at } => {
                let _ = write!(out, "gave up at {}: {}", fmt_instant(*at), error.reason);
                if let Some((_, _, last)) = &error.last_error {
                    let from = error.last_broker_address().unwrap_or("?");
                    let _ = write!(out, " (last error from {from}: {last})");
                }
            }
            Outcome::Aborted { error, at } => {
                let _ = write!(out, "simulation aborted at {}: {error}", fmt_instant(*at));
            }
        }
        let _ = write!(
            out,
            "; attempts started {}, cancelled {}, failed {}; requests reached {}; hedges {}; passes {}",
            self.attempts_started,
            self.attempts_cancelled,
            self.attempts_failed,
            self.requests_reached,
            self.hedges,
            self.passes
        );
        out
    }
}

/// Dots for a segment of `d` µs out of `total`: proportional, at least one.
fn dots(out: &mut String, d: u64, total: u64) {
    let n = ((d as u128 * DOTS as u128 + total as u128 / 2) / total as u128).clamp(1, DOTS as u128);
    for _ in 0..n {
        out.push('.');
    }
}

fn render_span(out: &mut String, span: &Span, total: u64) {
    let _ = write!(out, "#{}[{}", span.attempt.number(), fmt_instant(span.start));
    if span.hedge {
        out.push_str(" hedge");
    }
    if span.partner {
        out.push_str(" partner");
    }
    let mut mark = span.start;
    if let Some(c) = span.connected_at {
        out.push(' ');
        dots(out, duration_micros(c.saturating_since(mark)), total);
        let _ = write!(out, " connected {}", fmt_instant(c));
        mark = c;
    }
    out.push(' ');
    match span.end {
        Some(end) => dots(out, duration_micros(end.saturating_since(mark)), total),
        None => out.push_str("..."),
    }
    let ending = match &span.outcome {
        SpanOutcome::Won => String::from("won"),
        SpanOutcome::Failed { kind, .. } => alloc::format!("failed({})", kind_name(*kind)),
        SpanOutcome::Cancelled { reason } => alloc::format!("cancelled({reason})"),
        SpanOutcome::InFlight => String::from("in flight"),
        SpanOutcome::Resolved { addresses } => alloc::format!("resolved({addresses})"),
    };
    let _ = write!(out, " {ending}");
    if let Some(end) = span.end {
        let _ = write!(out, " {}", fmt_instant(end));
    }
    out.push(']');
}
