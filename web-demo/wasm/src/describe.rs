//! One line of plain English per event or command, for the page's event log and the replay
//! verdict.
//!
//! Why in Rust: the wording then comes from the core's own `Display` impls (errors, give-up
//! reasons), so the page says exactly what the CLI says.

use stagger::report::{Event, EventKind};
use stagger::{AttemptId, BrokerIndex, CancelReason, Command, GiveUpReason, TimerKind};

/// Display names for broker addresses: the host alone when every broker listens on the same
/// port (`broker-0`), the whole `host:port` otherwise (`127.0.0.1:9093`).
pub fn lane_names(addresses: &[String]) -> Vec<String> {
    let port = |a: &String| a.rsplit_once(':').map(|(_, p)| p.to_string());
    let first = addresses.first().and_then(port);
    let same_port = first.is_some() && addresses.iter().all(|a| port(a) == first);
    addresses
        .iter()
        .map(|a| match (same_port, a.rsplit_once(':')) {
            (true, Some((host, _))) => host.to_string(),
            _ => a.clone(),
        })
        .collect()
}

fn name(broker: BrokerIndex, names: &[String]) -> String {
    names.get(broker.0 as usize).cloned().unwrap_or_else(|| format!("broker #{}", broker.0))
}

fn attempt(a: AttemptId) -> String {
    format!("#{}", a.number())
}

/// The short name of a timer, as drawn on the timeline.
pub fn timer_name(kind: TimerKind) -> &'static str {
    match kind {
        TimerKind::Stagger => "stagger delay elapsed",
        TimerKind::Spread => "spread: the tick's next attempt",
        TimerKind::AttemptTimeout => "attempt timeout",
        TimerKind::Backoff => "backoff over: next pass",
        TimerKind::Deadline => "deadline",
        other => other.name(),
    }
}

/// What a cancel reason means, for the timeline's tooltips; [`CancelReason`]'s `Display` is
/// its short form.
pub fn cancel_help(reason: CancelReason) -> &'static str {
    match reason {
        CancelReason::Lost => "another attempt won",
        CancelReason::TimedOut => "no answer before the attempt timeout",
        CancelReason::Deadline => "the refresh's deadline passed",
        CancelReason::Fatal => "another attempt hit a fatal error",
        CancelReason::Superseded => "the throttle was full at a stagger tick: it made room for the next broker",
        CancelReason::Rejected => "the broker answered, but with metadata that cannot win",
        CancelReason::Overtaken => "another broker started answering while this one had said nothing",
        CancelReason::Outrun => {
            "still connecting long after a broker tried later had connected: its host is unreachable"
        }
        _ => "cancelled by the core",
    }
}

fn give_up(reason: GiveUpReason) -> String {
    format!("gave up: {reason}")
}

/// The core's events in words, one line each, for the page's event log. An event names its
/// broker by address; `addresses` are the lanes' (a broker among them goes by its lane's
/// name, any other by its address).
pub fn events(events: &[Event], addresses: &[String]) -> Vec<String> {
    let names = lane_names(addresses);
    let name = |broker: &str| {
        let lane = addresses.iter().position(|a| a.eq_ignore_ascii_case(broker));
        lane.map_or_else(|| broker.to_string(), |i| names[i].clone())
    };
    events
        .iter()
        .map(|e| match &e.kind {
            EventKind::Started { attempt: a, broker } => format!("{} started → {}", attempt(*a), name(broker)),
            EventKind::Resolved { attempt: a, broker, addresses } => {
                format!("{} resolved {} to {} addresses", attempt(*a), name(broker), addresses.len())
            }
            EventKind::Connected { attempt: a, broker } => format!("{} connected to {}", attempt(*a), name(broker)),
            EventKind::Answered { attempt: a, broker } => {
                format!("{} answered ← {} (first answer: alive)", attempt(*a), name(broker))
            }
            EventKind::Failed { attempt: a, broker, error } => {
                format!("{} failed on {}: {error}", attempt(*a), name(broker))
            }
            EventKind::Cancelled { attempt: a, broker, reason } => {
                format!("{} cancelled on {} ({reason})", attempt(*a), name(broker))
            }
            EventKind::Won { attempt: a, broker } => format!("{} won: metadata from {}", attempt(*a), name(broker)),
            EventKind::Timer { timer } => format!("timer: {}", timer_name(*timer)),
            EventKind::GaveUp { reason } => give_up(*reason),
            EventKind::Requested { epoch } => format!("application asks for metadata (refresh {epoch})"),
            EventKind::RefreshDue => "timer: periodic refresh".to_string(),
            EventKind::Rebootstrapped => "rebootstrap: back to the seed brokers".to_string(),
            // A kind newer than this page: its name, as the core's JSON writes it.
            other => serde_json::to_value(other)
                .ok()
                .and_then(|v| v.get("event").and_then(|n| n.as_str()).map(str::to_owned))
                .unwrap_or_else(|| "event".to_string()),
        })
        .collect()
}

/// One command in words (for the replay verdict); metadata is summarised, not dumped.
pub fn command(c: &Command, names: &[String]) -> String {
    match c {
        Command::Connect { attempt: a, broker } => format!("Connect {} → {}", attempt(*a), name(*broker, names)),
        Command::Resolve { attempt: a, broker } => format!("Resolve {} → {}", attempt(*a), name(*broker, names)),
        Command::Cancel { attempt: a, reason } => format!("Cancel {} ({})", attempt(*a), reason.name()),
        Command::Done { attempt: a, broker, metadata } => format!(
            "Done {} from {} ({} brokers, {} topics)",
            attempt(*a),
            name(*broker, names),
            metadata.brokers.len(),
            metadata.topics.len()
        ),
        Command::GiveUp(error) => format!("GiveUp ({})", give_up(error.reason)),
    }
}
