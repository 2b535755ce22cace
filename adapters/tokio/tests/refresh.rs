//! One refresh against a real Kafka-protocol cluster (librdkafka's mock): healthy, hung
//! brokers first, refused brokers first. Assertions use the core's reports and events.

use std::time::Duration;

use stagger::{Adaptive, CancelReason, ErrorKind, Growth, RefreshConfig, Stagger, TimerKind};
use stagger_test_faults::bounded;
use stagger_test_faults::mock::{Mock, View};
use stagger_tokio::{refresh, refresh_with, AttemptOutcome, Event, EventKind, RefreshOptions};

/// The default options, the seeds asked in the order listed (the faulty ones first) instead
/// of shuffled.
fn listed() -> RefreshOptions {
    let mut options = RefreshOptions::default();
    options.config.shuffle_seeds = false;
    options
}

fn failed_kind(outcome: &AttemptOutcome) -> Option<ErrorKind> {
    match outcome {
        AttemptOutcome::Failed(e) => Some(e.kind),
        _ => None,
    }
}

#[tokio::test]
async fn healthy_cluster_metadata_matches_what_librdkafka_sees() {
    bounded(async {
        let mock = Mock::start(5, &[("alpha", 3), ("beta", 5)]);
        let seeds = mock.seeds(&[1, 2, 3, 4, 5]);
        let options = RefreshOptions { record_trace: true, ..RefreshOptions::default() };
        let outcome = refresh_with(&options, &seeds, |_| {}).await.expect("refresh");

        let metadata = &outcome.metadata;
        let ours = View::of(metadata);
        assert_eq!(ours.brokers, mock.view.brokers, "brokers as librdkafka sees them");
        assert_eq!(ours.topics, mock.view.topics, "topics, partitions and leaders as librdkafka sees them");
        for (name, count) in [("alpha", 3), ("beta", 5)] {
            let topic = metadata.topics.iter().find(|t| t.name == name).expect("topic listed");
            assert_eq!(topic.error_code, 0);
            assert_eq!(topic.partitions.len(), count);
            for p in &topic.partitions {
                assert!((1..=5).contains(&p.leader), "{name}/{}: leader {} is a broker", p.id, p.leader);
                assert_eq!(p.replicas.len(), 3);
                assert!(p.isr.contains(&p.leader));
            }
        }

        assert!(outcome.metadata_version.is_some());
        // Usually the first seed answers alone. On a busy machine its first answer can come
        // later than the 2 ms floor, and then the stagger hedges: the first answer wins and
        // every other attempt is cancelled — never failed, since every broker is healthy.
        let won: Vec<usize> =
            (0..outcome.attempts.len()).filter(|&i| outcome.attempts[i].outcome == AttemptOutcome::Won).collect();
        assert_eq!(won.len(), 1, "{:?}", outcome.attempts);
        let w = won[0];
        assert!(outcome.attempts[w].connected.is_some());
        for (i, a) in outcome.attempts.iter().enumerate().filter(|&(i, _)| i != w) {
            let cancelled =
                matches!(a.outcome, AttemptOutcome::Cancelled(CancelReason::Overtaken | CancelReason::Lost));
            assert!(cancelled, "attempt {i}: {:?}", a.outcome);
        }
        assert_eq!(outcome.winner, outcome.attempts[w].broker);
        if outcome.attempts.len() == 1 {
            assert_eq!(outcome.winner, outcome.attempts[0].broker, "alone, the first seed asked wins");
        }
        // The JSON report has the CLI's shape.
        let json = serde_json::to_value(outcome.report()).unwrap();
        assert_eq!(json["winner"], outcome.winner);
        assert_eq!(json["attempts"][w]["outcome"], "won");
        assert!(json["attempts"][w]["ended_ms"].as_f64().is_some());
        // The recorded trace replays through the core to exactly the same commands.
        let trace = outcome.trace.expect("trace recorded");
        trace.replay().expect("valid config").expect("replay matches");

        // The one-call API gives the same view.
        let plain = refresh(&RefreshConfig::default(), &seeds).await.expect("refresh");
        assert_eq!(plain.brokers.len(), 5);
    })
    .await;
}

#[tokio::test]
async fn hung_brokers_first_lose_to_a_healthy_one_and_are_cancelled_not_timed_out() {
    bounded(async {
        let mock = Mock::start(5, &[("alpha", 3)]);
        mock.hang(1);
        mock.hang(2);
        let seeds = mock.seeds(&[1, 2, 3, 4, 5]);
        // The default policy, with room for every broker in flight: on a busy machine the
        // healthy broker may take longer than its stagger delay to answer, and a full
        // throttle would then *supersede* a hung attempt instead of letting it be overtaken.
        let mut options = listed();
        options.config.fanout.max_in_flight = 5;
        let mut events: Vec<Event> = Vec::new();
        let outcome = refresh_with(&options, &seeds, |e| events.push(e.clone())).await.expect("refresh");

        let attempts = &outcome.attempts;
        assert_eq!(attempts[0].broker, mock.address(1));
        assert!(attempts[0].connected.is_some(), "the hung broker accepted the connection");
        // When a healthy broker first answered, the hung broker 1 had said nothing and had
        // started before it: it was cancelled as overtaken (`fanout.tuning.cancel_silent_on_answer`),
        // in that very call.
        let first_answer = attempts.iter().filter_map(|a| a.answered).min().expect("a broker answered");
        assert_eq!(attempts[0].answered, None, "a hung broker never answers: {attempts:#?}");
        assert_eq!(attempts[0].outcome, AttemptOutcome::Cancelled(CancelReason::Overtaken), "{attempts:#?}");
        assert_eq!(attempts[0].ended, Some(first_answer), "cancelled in the call that saw the first answer");
        assert_eq!(attempts[1].broker, mock.address(2));
        assert_eq!(attempts[1].answered, None, "a hung broker never answers: {attempts:#?}");
        // One healthy broker won (normally broker 3; a later hedge may beat it on a slow
        // machine). Every other attempt — hung broker 2 included, whatever the timing — was
        // cancelled, never timed out: overtaken when a broker answered while it was silent
        // and a suspect (started before the answering one, or past its own stagger delay;
        // broker 2 starts in the same tick as broker 3, so it may be either), or lost when
        // the winner's metadata came.
        let won: Vec<_> = attempts.iter().filter(|a| a.outcome == AttemptOutcome::Won).collect();
        assert_eq!(won.len(), 1, "{attempts:#?}");
        assert_eq!(outcome.winner, won[0].broker);
        assert!(mock.seeds(&[3, 4, 5]).contains(&outcome.winner));
        let answers: Vec<_> = attempts.iter().filter_map(|a| a.answered).collect();
        for a in attempts.iter().filter(|a| a.outcome != AttemptOutcome::Won) {
            match a.outcome {
                AttemptOutcome::Cancelled(CancelReason::Overtaken) => {
                    assert!(a.answered.is_none(), "only silent attempts are overtaken: {a:?}");
                    assert!(answers.contains(&a.ended.unwrap()), "overtaken in the call of an answer: {a:?}");
                }
                AttemptOutcome::Cancelled(CancelReason::Lost) => {
                    assert_eq!(a.ended, won[0].ended, "cancelled in the call that saw the winner")
                }
                _ => panic!("neither overtaken nor lost: {a:?}"),
            }
        }
        // The hedges were started by the stagger timer (a tick's second attempt by the spread
        // timer, when the network is fast enough to spread it); no attempt timeout ever fired.
        let timers: Vec<TimerKind> = events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Timer { timer } => Some(timer),
                _ => None,
            })
            .collect();
        assert!(timers.contains(&TimerKind::Stagger), "{events:#?}");
        assert!(timers.iter().all(|t| matches!(t, TimerKind::Stagger | TimerKind::Spread)), "{events:#?}");
        // Events serialise flat, for a line-per-event JSON log.
        let first = serde_json::to_value(&events[0]).unwrap();
        assert_eq!(first["event"], "started");
        assert_eq!(first["broker"], mock.address(1));
        assert_eq!(first["elapsed_ms"], 0.0);
        let answered = events.iter().find(|e| matches!(e.kind, EventKind::Answered { .. })).expect("an answer");
        assert_eq!(serde_json::to_value(answered).unwrap()["event"], "answered");
        assert!(outcome.elapsed < RefreshConfig::default().attempt_timeout);
    })
    .await;
}

/// The adapter reports a broker's first answer (ApiVersions) to the core and in its events:
/// on the winning attempt it comes after `Connected` and before `Won`, exactly once, and the
/// report's times agree with the events. The recorded trace, which now carries the
/// `Answered` input, replays through the core to the same commands.
#[tokio::test]
async fn the_winning_attempt_reports_its_first_answer_between_connected_and_the_win() {
    bounded(async {
        let mock = Mock::start(3, &[("alpha", 3)]);
        mock.hang(1);
        let seeds = mock.seeds(&[1, 2, 3]);
        // A hung broker first, then healthy ones, one at a time; a generous floor so the
        // healthy broker surely answers before it would be suspected.
        let mut options = RefreshOptions { record_trace: true, ..listed() };
        let adaptive = Adaptive { floor: Duration::from_millis(100), ..Adaptive::default() };
        options.config.fanout.stagger = Stagger::Adaptive(adaptive);
        options.config.fanout.growth = Growth::Linear(1);
        let mut events: Vec<Event> = Vec::new();
        let outcome = refresh_with(&options, &seeds, |e| events.push(e.clone())).await.expect("refresh");

        assert_eq!(outcome.winner, mock.address(2));
        let winner = outcome.attempts.iter().find(|a| a.outcome == AttemptOutcome::Won).expect("a winner");
        let of_winner: Vec<&Event> = events
            .iter()
            .filter(|e| match &e.kind {
                EventKind::Started { attempt, .. }
                | EventKind::Connected { attempt, .. }
                | EventKind::Answered { attempt, .. }
                | EventKind::Failed { attempt, .. }
                | EventKind::Cancelled { attempt, .. }
                | EventKind::Resolved { attempt, .. }
                | EventKind::Won { attempt, .. } => *attempt == winner.attempt,
                _ => false,
            })
            .collect();
        let kinds: Vec<&str> = of_winner
            .iter()
            .map(|e| match e.kind {
                EventKind::Started { .. } => "started",
                EventKind::Connected { .. } => "connected",
                EventKind::Answered { .. } => "answered",
                EventKind::Won { .. } => "won",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["started", "connected", "answered", "won"], "{events:#?}");
        let at = |i: usize| Some(of_winner[i].elapsed);
        assert_eq!((winner.connected, winner.answered, winner.ended), (at(1), at(2), at(3)));
        assert!(winner.connected <= winner.answered && winner.answered <= winner.ended, "{winner:?}");
        // The hung broker was connected and never answered; the answer overtook it.
        let hung = &outcome.attempts[0];
        assert!(hung.connected.is_some() && hung.answered.is_none(), "{hung:?}");
        assert_eq!(hung.outcome, AttemptOutcome::Cancelled(CancelReason::Overtaken));
        assert_eq!(hung.ended, winner.answered);
        // The report serialises the answer time next to the others.
        let json = serde_json::to_value(outcome.report()).unwrap();
        let row = &json["attempts"][winner.attempt.number() as usize];
        assert_eq!(row["answered_ms"].as_f64(), winner.answered.map(|d| d.as_micros() as f64 / 1000.0));
        assert!(json["attempts"][0]["answered_ms"].is_null());
        assert_eq!(json["attempts"][0]["reason"], "overtaken");
        // The trace holds the Answered inputs and replays to exactly the same commands.
        let trace = outcome.trace.expect("trace recorded");
        trace.replay().expect("valid config").expect("replay matches");
    })
    .await;
}

#[tokio::test]
async fn refused_brokers_first_start_the_next_attempt_at_once() {
    bounded(async {
        let mock = Mock::start(5, &[("alpha", 3)]);
        mock.down(1);
        mock.down(2);
        let seeds = mock.seeds(&[1, 2, 3, 4, 5]);
        // A long cold stagger: any second attempt before 5 s can only come from a failure
        // (and a 1 s floor, so the healthy broker surely answers before any hedge).
        let mut options = listed();
        let slow = Adaptive { cold: Duration::from_secs(5), floor: Duration::from_secs(1), ..Adaptive::default() };
        options.config.fanout.stagger = Stagger::Adaptive(slow);
        let mut events: Vec<Event> = Vec::new();
        let outcome = refresh_with(&options, &seeds, |e| events.push(e.clone())).await.expect("refresh");

        assert_eq!(outcome.winner, mock.address(3));
        let a = &outcome.attempts;
        assert_eq!(failed_kind(&a[0].outcome), Some(ErrorKind::Refused), "{:?}", a[0]);
        assert_eq!(failed_kind(&a[1].outcome), Some(ErrorKind::Refused), "{:?}", a[1]);
        assert_eq!(a[2].outcome, AttemptOutcome::Won);
        assert!(a[0].connected.is_none() && a[1].connected.is_none());
        // Causality, on the core's own clock: each next attempt started in the very call
        // that reported the previous failure.
        assert_eq!(Some(a[1].started), a[0].ended);
        assert_eq!(Some(a[2].started), a[1].ended);
        // ... and in the event stream: failure, then the next start, with no timer before.
        let position = |f: &dyn Fn(&EventKind) -> bool| events.iter().position(|e| f(&e.kind)).unwrap();
        let failed0 = position(&|k| matches!(k, EventKind::Failed { attempt, .. } if attempt.number() == 0));
        let started1 = position(&|k| matches!(k, EventKind::Started { attempt, .. } if attempt.number() == 1));
        let failed1 = position(&|k| matches!(k, EventKind::Failed { attempt, .. } if attempt.number() == 1));
        let started2 = position(&|k| matches!(k, EventKind::Started { attempt, .. } if attempt.number() == 2));
        assert!(failed0 < started1 && started1 < failed1 && failed1 < started2, "{events:#?}");
        assert!(
            !events[..started2].iter().any(|e| matches!(e.kind, EventKind::Timer { .. })),
            "no timer fired before the third attempt: {events:#?}"
        );
        let refused = &a[0].outcome;
        assert!(refused.to_string().contains("refused"), "{refused}");
    })
    .await;
}

/// A refresh left at the default seed (0) draws its own, so programs started together
/// shuffle their seeds and jitter each in their own way; a seed the caller sets is kept. The
/// trace records the seed each refresh ran with.
#[tokio::test]
async fn a_default_seed_is_drawn_per_refresh_and_a_set_one_is_kept() {
    bounded(async {
        let mock = Mock::start(3, &[("alpha", 1)]);
        let seeds = mock.seeds(&[1, 2, 3]);
        let traced_seed = |options: RefreshOptions| {
            let seeds = seeds.clone();
            async move {
                let options = RefreshOptions { record_trace: true, ..options };
                let outcome = refresh_with(&options, &seeds, |_| {}).await.expect("refresh");
                outcome.trace.expect("trace recorded").config.seed
            }
        };
        let drawn = [traced_seed(RefreshOptions::default()).await, traced_seed(RefreshOptions::default()).await];
        assert_ne!(drawn[0], drawn[1], "each refresh draws its own seed");
        let set = RefreshOptions { config: RefreshConfig::default().with_seed(7), ..RefreshOptions::default() };
        let kept = [traced_seed(set.clone()).await, traced_seed(set).await];
        assert_eq!(kept[0], kept[1], "a set seed is kept: {kept:?}");
        assert!(!kept.contains(&drawn[0]) && !kept.contains(&drawn[1]));
    })
    .await;
}
