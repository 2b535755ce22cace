//! The live per-broker view drawn on a terminal while a refresh runs.
//!
//! One line per broker (connecting / waiting / failed (why) / cancelled / won, with the
//! elapsed time of its latest change) and a line of timer ticks as they fire. Redrawn in
//! place with ANSI cursor movement on every event; only used when stderr is a terminal.

use std::io::Write;
use std::time::Duration;

use stagger_tokio::{Event, EventKind};

/// State of the view: one lane per broker, in first-seen order.
pub struct LiveView {
    lanes: Vec<(String, String)>,
    ticks: Vec<String>,
    drawn_lines: usize,
    enabled: bool,
}

impl LiveView {
    /// A view with the seed brokers as lanes; `enabled` false makes every call a no-op.
    pub fn new(seeds: &[String], enabled: bool) -> Self {
        let lanes = seeds.iter().map(|s| (s.clone(), "·".to_string())).collect();
        LiveView { lanes, ticks: Vec::new(), drawn_lines: 0, enabled }
    }

    /// Applies one event and redraws.
    pub fn on_event(&mut self, event: &Event) {
        if !self.enabled {
            return;
        }
        let t = fmt_ms(event.elapsed);
        match &event.kind {
            EventKind::Started { broker, .. } => self.set(broker, format!("connecting…        since {t}")),
            EventKind::Connected { broker, .. } => self.set(broker, format!("waiting for answer  since {t}")),
            EventKind::Failed { broker, error, .. } => {
                self.set(broker, format!("\x1b[31mfailed\x1b[0m at {t}: {error}"))
            }
            EventKind::Cancelled { broker, reason, .. } => {
                self.set(broker, format!("\x1b[33mcancelled\x1b[0m at {t} ({reason:?})"))
            }
            EventKind::Won { broker, .. } => self.set(broker, format!("\x1b[32mwon\x1b[0m at {t}")),
            EventKind::Timer { timer } => self.ticks.push(format!("{timer:?}@{t}").to_lowercase()),
        }
        self.draw();
    }

    fn set(&mut self, broker: &str, state: String) {
        match self.lanes.iter_mut().find(|(b, _)| b == broker) {
            Some(lane) => lane.1 = state,
            None => self.lanes.push((broker.to_string(), state)),
        }
    }

    fn draw(&mut self) {
        let mut err = std::io::stderr().lock();
        if self.drawn_lines > 0 {
            let _ = write!(err, "\x1b[{}A", self.drawn_lines);
        }
        for (broker, state) in &self.lanes {
            let _ = writeln!(err, "\x1b[2K  {broker:<24} {state}");
        }
        let ticks = if self.ticks.is_empty() { "—".to_string() } else { self.ticks.join("  ") };
        let _ = writeln!(err, "\x1b[2K  timers: {ticks}");
        self.drawn_lines = self.lanes.len() + 1;
        let _ = err.flush();
    }
}

fn fmt_ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}
