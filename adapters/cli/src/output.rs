//! How metadata is printed: a `kcat -L`-like listing, or one stable JSON object.
//!
//! The JSON shape is documented in the README and is a contract: `cluster_id`,
//! `controller_id`, `brokers[] {id, host, port, rack}`, `topics[] {name, error, partitions[]
//! {id, leader, replicas, isr, error}}` and `refresh {elapsed_ms, winner, attempts[]}`.

use std::fmt::Write as _;

use serde::Serialize;
use stagger::kafka_error_name;
use stagger::Metadata;
use stagger_tokio::{RefreshOutcome, RefreshReport};

/// The `--json` document.
#[derive(Serialize)]
pub struct JsonMetadata<'a> {
    cluster_id: Option<&'a str>,
    controller_id: i32,
    brokers: Vec<JsonBroker<'a>>,
    topics: Vec<JsonTopic<'a>>,
    refresh: RefreshReport<'a>,
}

#[derive(Serialize)]
struct JsonBroker<'a> {
    id: i32,
    host: &'a str,
    port: u16,
    rack: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonTopic<'a> {
    name: &'a str,
    error: Option<&'static str>,
    partitions: Vec<JsonPartition<'a>>,
}

#[derive(Serialize)]
struct JsonPartition<'a> {
    id: i32,
    leader: i32,
    replicas: &'a [i32],
    isr: &'a [i32],
    error: Option<&'static str>,
}

fn error_name(code: i16) -> Option<&'static str> {
    (code != 0).then(|| kafka_error_name(code))
}

/// Builds the `--json` document for a successful refresh.
pub fn json(outcome: &RefreshOutcome) -> JsonMetadata<'_> {
    let m = &outcome.metadata;
    let mut brokers: Vec<JsonBroker<'_>> = m
        .brokers
        .iter()
        .map(|b| JsonBroker { id: b.node_id, host: &b.host, port: b.port, rack: b.rack.as_deref() })
        .collect();
    brokers.sort_by_key(|b| b.id);
    let mut topics: Vec<JsonTopic<'_>> = m
        .topics
        .iter()
        .map(|t| {
            let mut partitions: Vec<JsonPartition<'_>> = t
                .partitions
                .iter()
                .map(|p| JsonPartition {
                    id: p.id,
                    leader: p.leader,
                    replicas: &p.replicas,
                    isr: &p.isr,
                    error: error_name(p.error_code),
                })
                .collect();
            partitions.sort_by_key(|p| p.id);
            JsonTopic { name: &t.name, error: error_name(t.error_code), partitions }
        })
        .collect();
    topics.sort_by(|a, b| a.name.cmp(b.name));
    JsonMetadata {
        cluster_id: m.cluster_id.as_deref(),
        controller_id: m.controller_id,
        brokers,
        topics,
        refresh: outcome.report(),
    }
}

/// Renders metadata like `kcat -L`: brokers, then topics with their partitions. `topics`
/// are the topics asked for (`-t`), none for all: the header says which, so a listing of
/// one topic does not claim to be the whole cluster's.
pub fn table(metadata: &Metadata, winner: &str, topics: &[String]) -> String {
    let mut out = String::new();
    let cluster = metadata.cluster_id.as_deref().unwrap_or("(none)");
    let _ = writeln!(out, "Metadata for {} (from broker {winner}):", which_topics(topics));
    let _ = writeln!(out, " cluster id: {cluster}, controller: {}", metadata.controller_id);
    let _ = writeln!(out, " {} brokers:", metadata.brokers.len());
    let mut brokers: Vec<_> = metadata.brokers.iter().collect();
    brokers.sort_by_key(|b| b.node_id);
    for b in brokers {
        let rack = b.rack.as_deref().map(|r| format!(" rack {r}")).unwrap_or_default();
        let controller = if b.node_id == metadata.controller_id { " (controller)" } else { "" };
        let _ = writeln!(out, "  broker {} at {}{rack}{controller}", b.node_id, b.address());
    }
    let mut topics: Vec<_> = metadata.topics.iter().collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    let _ = writeln!(out, " {} topics:", topics.len());
    for t in topics {
        let err = error_name(t.error_code).map(|e| format!(", error {e}")).unwrap_or_default();
        let _ = writeln!(out, "  topic \"{}\" with {} partitions{err}:", t.name, t.partitions.len());
        let mut partitions: Vec<_> = t.partitions.iter().collect();
        partitions.sort_by_key(|p| p.id);
        for p in partitions {
            let err = error_name(p.error_code).map(|e| format!(", error {e}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "    partition {}, leader {}, replicas: {}, isrs: {}{err}",
                p.id,
                p.leader,
                join(&p.replicas),
                join(&p.isr)
            );
        }
    }
    out
}

/// `all topics`, `topic "orders"` or `topics "orders", "payments"` (each once, in the
/// order asked), quoted as the listing quotes topic names.
fn which_topics(topics: &[String]) -> String {
    let mut asked: Vec<&str> = Vec::with_capacity(topics.len());
    for t in topics {
        if !asked.contains(&t.as_str()) {
            asked.push(t);
        }
    }
    let quoted: Vec<String> = asked.iter().map(|t| format!("\"{t}\"")).collect();
    match quoted.len() {
        0 => "all topics".to_owned(),
        1 => format!("topic {}", quoted[0]),
        _ => format!("topics {}", quoted.join(", ")),
    }
}

fn join(ids: &[i32]) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

/// One line per attempt: who, when it started, when its broker first answered (`—` if it
/// never did: refused, hung, or cancelled before it said anything), when and how it ended.
pub fn attempts(outcome_attempts: &[stagger_tokio::AttemptReport]) -> String {
    let mut out = String::new();
    let at = |d: Option<std::time::Duration>| {
        d.map(|d| format!("{:>9.1} ms", ms(d))).unwrap_or_else(|| "        —   ".into())
    };
    for a in outcome_attempts {
        let (answered, end) = (at(a.answered), at(a.ended));
        let _ = writeln!(
            out,
            "  {:<24} start {:>9.1} ms  answered {answered}  end {end}  {}",
            a.broker,
            ms(a.started),
            a.outcome
        );
    }
    out
}

/// Milliseconds with a fraction, for display.
pub fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use stagger::{AttemptId, CancelReason};
    use stagger_tokio::{AttemptOutcome, AttemptReport, RefreshReport};

    use super::*;

    fn report(n: u64, answered: Option<u64>, outcome: AttemptOutcome) -> AttemptReport {
        AttemptReport {
            attempt: AttemptId(n),
            broker: format!("b{n}:9092"),
            started: Duration::from_millis(n),
            connected: Some(Duration::from_millis(n + 1)),
            answered: answered.map(Duration::from_millis),
            ended: Some(Duration::from_millis(9)),
            outcome,
            reused_connection: false,
            metadata_version: None,
        }
    }

    #[test]
    fn the_header_names_the_topics_asked_for_or_all_topics() {
        let m = Metadata { cluster_id: Some("c".into()), ..Metadata::default() };
        let header = |topics: &[&str]| {
            let topics: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
            table(&m, "k1:9092", &topics).lines().next().unwrap().to_owned()
        };
        assert_eq!(header(&[]), "Metadata for all topics (from broker k1:9092):");
        assert_eq!(header(&["orders"]), "Metadata for topic \"orders\" (from broker k1:9092):");
        assert_eq!(
            header(&["orders", "payments", "orders"]),
            "Metadata for topics \"orders\", \"payments\" (from broker k1:9092):"
        );
    }

    #[test]
    fn plain_and_json_attempts_show_answers_and_overtaken_attempts() {
        let rows = [
            report(0, None, AttemptOutcome::Cancelled(CancelReason::Overtaken)),
            report(1, Some(3), AttemptOutcome::Won),
        ];
        let text = attempts(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("answered         —") && lines[0].ends_with("cancelled (overtaken)"), "{text}");
        assert!(lines[1].contains("answered       3.0 ms") && lines[1].ends_with("won"), "{text}");
        let json = serde_json::to_value(RefreshReport { elapsed: None, winner: None, attempts: &rows }).unwrap();
        let attempts = json["attempts"].as_array().unwrap();
        assert_eq!(attempts[0]["reason"], "overtaken");
        assert!(attempts[0]["answered_ms"].is_null());
        assert_eq!(attempts[1]["answered_ms"], 3.0);
        assert_eq!(attempts[1]["connected_ms"], 2.0);
    }
}
