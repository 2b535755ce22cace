//! One refresh against a real Kafka-protocol cluster (librdkafka's mock): healthy, hung and
//! refused brokers first, a host name looked up off the loop, the deadline with every
//! broker's error — and every socket closed when the refresh returns.

use std::time::Duration;

use stagger::{CancelReason, ErrorKind, GiveUpReason, RefreshConfig};
use stagger_blocking::{refresh, refresh_with, Error, RefreshOptions};
use stagger_test_faults::bounded_blocking;
use stagger_test_faults::mock::{Mock, View};
use stagger_test_faults::sockets::sockets_to;

#[test]
fn healthy_cluster_metadata_matches_what_librdkafka_sees() {
    bounded_blocking(|| {
        let mock = Mock::start(5, &[("alpha", 3), ("beta", 5)]);
        let outcome = refresh_with(&RefreshOptions::default(), &mock.seeds(&[1, 2, 3, 4, 5])).expect("refresh");
        assert_eq!(View::of(&outcome.metadata), mock.view);
        assert!(outcome.metadata_version.is_some());
        let won: Vec<_> =
            outcome.attempts.iter().filter(|a| a.outcome == stagger::report::AttemptOutcome::Won).collect();
        assert_eq!(won.len(), 1, "{:#?}", outcome.attempts);
        assert_eq!(won[0].broker, outcome.winner);
        assert_eq!(won[0].phase(), stagger::AttemptPhase::Answering);
        assert!(outcome.attempts.iter().all(|a| a.error().is_none()), "{:#?}", outcome.attempts);
        assert_eq!(sockets_to(&mock.ports()), 0, "every socket is closed when the refresh returns");
    });
}

/// The default options, the seeds asked in the order listed (the faulty ones first) instead
/// of shuffled.
fn listed() -> RefreshOptions {
    let mut options = RefreshOptions::default();
    options.config.shuffle_seeds = false;
    options
}

#[test]
fn hung_brokers_first_are_hedged_past_and_closed() {
    bounded_blocking(|| {
        let mock = Mock::start(4, &[("alpha", 1)]);
        for id in 1..=3 {
            mock.hang(id);
        }
        let started = std::time::Instant::now();
        let outcome = refresh_with(&listed(), &mock.seeds(&[1, 2, 3, 4])).expect("refresh");
        // Far below one attempt timeout (10 s): the stagger, not a timeout, moved on.
        assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
        assert_eq!(outcome.winner, mock.address(4));
        for hung in &outcome.attempts[..3] {
            assert_eq!(hung.phase(), stagger::AttemptPhase::Silent, "{hung:?}");
            assert!(hung.cancelled().is_some(), "{hung:?}");
        }
        assert_eq!(sockets_to(&mock.ports()), 0);
    });
}

#[test]
fn refused_brokers_first_fail_at_once_and_the_next_answers() {
    bounded_blocking(|| {
        let mock = Mock::start(3, &[("alpha", 1)]);
        mock.down(1);
        mock.down(2);
        let metadata = refresh(&RefreshConfig::sequential(), &mock.seeds(&[1, 2, 3])).expect("refresh");
        assert!(metadata.topics.iter().any(|t| t.name == "alpha"));
        let outcome = refresh_with(&listed(), &mock.seeds(&[1, 2, 3])).expect("refresh");
        for refused in &outcome.attempts[..2] {
            assert_eq!(refused.error().map(|e| e.kind), Some(ErrorKind::Refused), "{refused:?}");
        }
        assert_eq!(outcome.winner, mock.address(3));
    });
}

#[test]
fn a_host_name_is_looked_up_off_the_loop() {
    bounded_blocking(|| {
        let mock = Mock::start(1, &[("alpha", 1)]);
        let port = mock.ports()[0];
        let outcome = refresh_with(&RefreshOptions::default(), &[format!("localhost:{port}")]).expect("refresh");
        assert_eq!(outcome.winner, format!("localhost:{port}"));
        assert_eq!(outcome.metadata.brokers.len(), 1);
    });
}

/// With `resolve_names`, the name is resolved through the core: the lookup is an attempt
/// of its own, and each address of `localhost` a candidate (the winner is an address).
#[test]
fn a_host_name_resolved_through_the_core_makes_each_address_a_candidate() {
    bounded_blocking(|| {
        let mock = Mock::start(1, &[("alpha", 1)]);
        let port = mock.ports()[0];
        let options = RefreshOptions { resolve_names: true, ..RefreshOptions::default() };
        let outcome = refresh_with(&options, &[format!("localhost:{port}")]).expect("refresh");
        assert_eq!(outcome.attempts[0].outcome.name(), "resolved", "{:?}", outcome.attempts);
        assert_eq!(outcome.attempts[0].broker, format!("localhost:{port}"));
        assert!(outcome.winner.ends_with(&format!(":{port}")) && !outcome.winner.starts_with("localhost"));
        let nowhere = refresh_with(&options, &["nowhere.invalid:9092"]).expect_err("no such name");
        let Error::Refresh { error, .. } = nowhere else { panic!("{nowhere}") };
        assert_eq!(error.last_error.map(|(_, _, e)| e.kind), Some(stagger::ErrorKind::Dns));
    });
}

#[test]
fn misuse_is_refused_before_any_broker_is_contacted() {
    let error = refresh(&RefreshConfig::default(), &["kafka 1:9092"]).expect_err("no such host name");
    assert!(matches!(&error, Error::Config(e) if e.field == "seeds"), "{error}");
    let options = RefreshOptions {
        exchange: stagger_blocking::ExchangeConfig { max_frame_size: 10, ..Default::default() },
        ..Default::default()
    };
    let error = refresh_with(&options, &["127.0.0.1:9092"]).expect_err("frame limit");
    assert!(matches!(&error, Error::Config(e) if e.field == "exchange.max_frame_size"), "{error}");
}

#[test]
fn the_deadline_gives_up_with_every_brokers_error_and_closes_every_socket() {
    bounded_blocking(|| {
        let mock = Mock::start(3, &[("alpha", 1)]);
        for id in 1..=3 {
            mock.hang(id);
        }
        let mut config = RefreshConfig::all_at_once();
        config.deadline = Duration::from_millis(300);
        let started = std::time::Instant::now();
        let error = refresh_with(&RefreshOptions { config, ..Default::default() }, &mock.seeds(&[1, 2, 3]))
            .expect_err("every broker is hung");
        assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
        let Error::Refresh { error, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(error.reason, GiveUpReason::DeadlineExceeded, "{error}");
        assert_eq!(error.brokers.len(), 3);
        assert_eq!(attempts.len(), 3);
        for a in attempts {
            assert_eq!(a.cancelled(), Some(CancelReason::Deadline), "{a:?}");
            assert!(error.to_string().contains(&a.broker), "{error}");
        }
        assert_eq!(sockets_to(&mock.ports()), 0, "the deadline closed every attempt's socket");
    });
}
