//! Scenario tables: `(time, call, expected commands)` rows run against one [`Refresh`], after
//! the input/output tables of the happy-eyeballs crate's integration tests. Each row is one
//! thing the adapter does at a time and the exact commands that must come out of it, so a
//! short scenario reads top to bottom as a timeline:
//!
//! ```ignore
//! let rows = [
//!     (ms(0), Start, vec![Connect(0, 0)]),
//!     (ms(1), Failed(0, ErrorKind::Refused), vec![Connect(1, 1)]),
//!     (ms(3), Response(1, metadata()), vec![Done(1, 1)]),
//! ];
//! table::run(&mut refresh, &rows);
//! ```
//!
//! Attempts and brokers are written by number: a refresh numbers its attempts 0, 1, 2, … in
//! the order it issues them, and brokers are their `BrokerIndex`.
#![allow(dead_code)] // an includer need not use every kind of row

use std::fmt;

use stagger::{
    AttemptError, AttemptId, CancelReason, Command, ErrorKind, GiveUpReason, Input, Instant, Metadata, Refresh,
};

/// What a row does at its time.
#[derive(Clone, Debug)]
pub enum Call {
    /// Nothing: the commands `Refresh::new` queued, at the refresh's start (the first row).
    Start,
    /// Time passes up to the row's time, every timer due by then firing at its own time
    /// (`handle_timeout(poll_timeout())`, as an adapter whose timers are punctual). A command
    /// a timer emits earlier than the row's time shows up with its own time and fails the row.
    Timeout,
    /// `Input::Connected` for attempt `n`.
    Connected(u32),
    /// `Input::FirstFrame` for attempt `n`.
    Answered(u32),
    /// `Input::Response` for attempt `n`, with this answer.
    Response(u32, Metadata),
    /// `Input::Failed` for attempt `n`, with this error (no detail).
    Failed(u32, ErrorKind),
    /// Any other input, built by the test.
    Raw(Input),
}

/// A command as a row expects it: attempt and broker numbers; `Done` is compared without its
/// metadata and `GiveUp` by its reason alone (check the rest after the table if it matters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmd {
    /// `Command::Connect { attempt, broker }`.
    Connect(u32, u32),
    /// `Command::Resolve { attempt, broker }`.
    Resolve(u32, u32),
    /// `Command::Cancel { attempt, reason }`.
    Cancel(u32, CancelReason),
    /// `Command::Done { attempt, broker, .. }`.
    Done(u32, u32),
    /// `Command::GiveUp(error)` with this `error.reason`.
    GiveUp(GiveUpReason),
}

impl Cmd {
    fn of(c: &Command) -> Cmd {
        match c {
            Command::Connect { attempt, broker } => Cmd::Connect(attempt.number(), broker.0),
            Command::Resolve { attempt, broker } => Cmd::Resolve(attempt.number(), broker.0),
            Command::Cancel { attempt, reason } => Cmd::Cancel(attempt.number(), *reason),
            Command::Done { attempt, broker, .. } => Cmd::Done(attempt.number(), broker.0),
            Command::GiveUp(error) => Cmd::GiveUp(error.reason),
        }
    }
}

/// Attempt `n` of `refresh`.
pub fn attempt(refresh: &Refresh, n: u32) -> AttemptId {
    AttemptId(((refresh.epoch() as u64) << 32) | n as u64)
}

/// One row.
pub type Row = (Instant, Call, Vec<Cmd>);

/// Runs `rows` in order against `refresh`; panics at the first row whose commands (or their
/// times) differ from the expected ones, naming the row, the expected and the actual
/// commands. Can be called again on the same refresh to go on after checks of its own.
#[track_caller]
pub fn run(refresh: &mut Refresh, rows: &[Row]) {
    for (i, (t, call, want)) in rows.iter().enumerate() {
        let got = call_at(refresh, *t, call);
        let actual: Vec<(Instant, Cmd)> = got.iter().map(|(at, c)| (*at, Cmd::of(c))).collect();
        let expected: Vec<(Instant, Cmd)> = want.iter().map(|c| (*t, *c)).collect();
        if actual != expected {
            let full: Vec<String> = got.iter().map(|(at, c)| format!("{}: {c:?}", show(*at))).collect();
            panic!(
                "table row {} of {}: at {}, {call}\n  expected: {}\n  actual:   {}\n  commands: [{}]",
                i + 1,
                rows.len(),
                show(*t),
                list(&expected, *t),
                list(&actual, *t),
                full.join(", "),
            );
        }
    }
}

/// Does `call` at `t`; returns every command it produced with the time it came out at.
fn call_at(refresh: &mut Refresh, t: Instant, call: &Call) -> Vec<(Instant, Command)> {
    let input = match call {
        Call::Start => {
            let start = refresh.started_at();
            return drain(refresh, start);
        }
        Call::Timeout => {
            let mut out = Vec::new();
            for _ in 0..10_000 {
                let Some(at) = refresh.poll_timeout().filter(|&at| at <= t) else { return out };
                refresh.handle_timeout(at);
                out.extend(drain(refresh, at));
            }
            panic!("timers still due by {} after 10 000 calls: {out:?}", show(t));
        }
        Call::Connected(n) => Input::Connected { attempt: attempt(refresh, *n), tls: false },
        Call::Answered(n) => Input::FirstFrame { attempt: attempt(refresh, *n) },
        Call::Response(n, metadata) => Input::Response { attempt: attempt(refresh, *n), metadata: metadata.clone() },
        Call::Failed(n, kind) => Input::Failed { attempt: attempt(refresh, *n), error: AttemptError::new(*kind) },
        Call::Raw(input) => input.clone(),
    };
    refresh.handle_input(t, input);
    drain(refresh, t)
}

fn drain(refresh: &mut Refresh, at: Instant) -> Vec<(Instant, Command)> {
    std::iter::from_fn(|| refresh.poll_command()).map(|c| (at, c)).collect()
}

/// `[Connect(1, 1), …]`, with a time only where it is not the row's.
fn list(commands: &[(Instant, Cmd)], row: Instant) -> String {
    let shown: Vec<String> = commands
        .iter()
        .map(|(at, c)| if *at == row { format!("{c:?}") } else { format!("{c:?} at {}", show(*at)) })
        .collect();
    format!("[{}]", shown.join(", "))
}

/// Whole milliseconds as `500 ms`, anything else as `2100 µs`.
fn show(t: Instant) -> String {
    let us = t.as_micros();
    if us.is_multiple_of(1000) {
        format!("{} ms", us / 1000)
    } else {
        format!("{us} µs")
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Call::Start => write!(f, "Start"),
            Call::Timeout => write!(f, "Timeout"),
            Call::Connected(n) => write!(f, "Connected(#{n})"),
            Call::Answered(n) => write!(f, "Answered(#{n})"),
            Call::Response(n, m) => {
                write!(f, "Response(#{n}, {} brokers, error code {})", m.brokers.len(), m.error_code)
            }
            Call::Failed(n, kind) => write!(f, "Failed(#{n}, {kind:?})"),
            Call::Raw(input) => write!(f, "{input:?}"),
        }
    }
}
