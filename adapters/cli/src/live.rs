//! The live per-broker view drawn on a terminal while a refresh runs.
//!
//! One line per broker (connecting / waiting for its first answer / answering / failed (why)
//! / cancelled (why) / won, with the elapsed time of its latest change) and a line of timer
//! ticks as they fire. "answering" is the phase the adaptive stagger treats differently: the
//! broker is alive and working, so it is given time rather than hedged against. Redrawn in
//! place with ANSI cursor movement on every event; only used when stderr is a terminal.

use std::io::Write;
use std::time::{Duration, Instant};

use stagger_tokio::{Event, EventKind};

/// State of the view: one lane per broker, in first-seen order.
pub struct LiveView {
    /// (broker, state text, when the state began if it is still running).
    lanes: Vec<(String, String, Option<Instant>)>,
    ticks: Vec<String>,
    drawn_lines: usize,
    enabled: bool,
}

impl LiveView {
    /// A view with the seed brokers as lanes; `enabled` false makes every call a no-op.
    pub fn new(seeds: &[String], enabled: bool) -> Self {
        let lanes = seeds.iter().map(|s| (s.clone(), "· not tried".to_string(), None)).collect();
        LiveView { lanes, ticks: Vec::new(), drawn_lines: 0, enabled }
    }

    /// Applies one event and redraws.
    pub fn on_event(&mut self, event: &Event) {
        if !self.enabled {
            return;
        }
        self.apply(event);
        self.draw();
    }

    /// Updates the lanes and ticks for one event (no drawing).
    fn apply(&mut self, event: &Event) {
        let t = fmt_ms(event.elapsed);
        let now = Some(Instant::now());
        match &event.kind {
            EventKind::Started { broker, .. } => self.set(broker, format!("connecting…         since {t}"), now),
            EventKind::Connected { broker, .. } => self.set(broker, format!("waiting for answer  since {t}"), now),
            EventKind::Answered { broker, .. } => self.set(broker, format!("answering           since {t}"), now),
            EventKind::Failed { broker, error, .. } => {
                self.set(broker, format!("\x1b[31mfailed\x1b[0m at {t}: {error}"), None)
            }
            EventKind::Cancelled { broker, reason, .. } => {
                self.set(broker, format!("\x1b[33mcancelled\x1b[0m at {t} ({})", reason.name()), None)
            }
            EventKind::Won { broker, .. } => self.set(broker, format!("\x1b[32mwon\x1b[0m at {t}"), None),
            EventKind::Resolved { broker, addresses, .. } => {
                self.set(broker, format!("resolved at {t} to {} addresses", addresses.len()), None)
            }
            EventKind::Timer { timer } => self.ticks.push(format!("{}@{t}", timer.name())),
            // The give-up's error is printed once the view is done; the others are a
            // long-lived cluster's (the CLI's refresh is one-shot), or newer than this view.
            _ => {}
        }
    }

    /// Redraws with fresh "for …" counters on running lanes (called on a ticker).
    pub fn tick(&mut self) {
        if self.enabled && self.drawn_lines > 0 {
            self.draw();
        }
    }

    fn set(&mut self, broker: &str, state: String, running_since: Option<Instant>) {
        match self.lanes.iter_mut().find(|(b, _, _)| b == broker) {
            Some(lane) => (lane.1, lane.2) = (state, running_since),
            None => self.lanes.push((broker.to_string(), state, running_since)),
        }
    }

    fn draw(&mut self) {
        let mut err = std::io::stderr().lock();
        if self.drawn_lines > 0 {
            let _ = write!(err, "\x1b[{}A", self.drawn_lines);
        }
        for (broker, state, since) in &self.lanes {
            let running = since.map(|s| format!(" (for {})", fmt_ms(s.elapsed()))).unwrap_or_default();
            let _ = writeln!(err, "\x1b[2K  {broker:<24} {state}{running}");
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

#[cfg(test)]
mod tests {
    use super::*;
    use stagger::{AttemptId, CancelReason};

    fn event(ms: u64, kind: EventKind) -> Event {
        Event { elapsed: Duration::from_millis(ms), kind }
    }

    fn state<'a>(view: &'a LiveView, broker: &str) -> &'a str {
        &view.lanes.iter().find(|(b, _, _)| b == broker).expect("lane").1
    }

    #[test]
    fn a_lane_goes_through_connecting_waiting_answering_and_won() {
        let (a, b) = ("a:1".to_string(), "b:1".to_string());
        let mut view = LiveView::new(&[a.clone(), b.clone()], true);
        let (one, two) = (AttemptId(0), AttemptId(1));
        view.apply(&event(0, EventKind::Started { attempt: one, broker: a.clone() }));
        assert!(state(&view, &a).starts_with("connecting"), "{}", state(&view, &a));
        view.apply(&event(1, EventKind::Connected { attempt: one, broker: a.clone() }));
        assert!(state(&view, &a).starts_with("waiting for answer  since 1.0 ms"), "{}", state(&view, &a));
        view.apply(&event(2, EventKind::Started { attempt: two, broker: b.clone() }));
        view.apply(&event(3, EventKind::Connected { attempt: two, broker: b.clone() }));
        view.apply(&event(4, EventKind::Answered { attempt: two, broker: b.clone() }));
        assert!(state(&view, &b).starts_with("answering           since 4.0 ms"), "{}", state(&view, &b));
        assert!(view.lanes.iter().all(|lane| lane.2.is_some()), "both lanes are still running");
        let overtaken = EventKind::Cancelled { attempt: one, broker: a.clone(), reason: CancelReason::Overtaken };
        view.apply(&event(4, overtaken));
        assert!(state(&view, &a).contains("cancelled") && state(&view, &a).contains("(overtaken)"));
        view.apply(&event(6, EventKind::Won { attempt: two, broker: b.clone() }));
        assert!(state(&view, &b).contains("won") && state(&view, &b).contains("at 6.0 ms"));
        assert!(view.lanes.iter().all(|lane| lane.2.is_none()), "no lane is running any more");
    }
}
