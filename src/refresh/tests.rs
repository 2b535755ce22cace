//! Unit tests of the refresh's own bookkeeping limits; the policy is tested through the
//! public contract in `tests/`.

use super::*;
use crate::brokers::numbered_seeds;
use crate::error::AttemptError;

fn book(n: usize) -> BrokerBook {
    BrokerBook::new(numbered_seeds(n)).unwrap()
}

#[test]
fn a_refresh_that_could_outgrow_its_attempt_table_is_refused_naming_the_field() {
    let mut config = RefreshConfig::default();
    config.retry.retries = 10;
    // 3,000 brokers × 11 passes × 2 = 66,000 > 65,536.
    let error = Refresh::new(&config, &book(3000), Instant::ZERO).unwrap_err();
    assert_eq!(error.field, "retry.retries");
    assert!(error.problem.contains("at most 9 for 3000 brokers"), "{error}");
    config.retry.retries = 9;
    let refresh = Refresh::new(&config, &book(3000), Instant::ZERO).unwrap();
    assert_eq!(refresh.attempts.capacity, 3000 * 10 * 2);

    config.retry.retries = 0;
    let error = Refresh::new(&config, &book(MAX_ATTEMPTS / 2 + 1), Instant::ZERO).unwrap_err();
    assert_eq!(error.field, "seeds");
    assert!(Refresh::new(&config, &book(MAX_ATTEMPTS / 2), Instant::ZERO).is_ok());
}

/// Every way `handle_input` can treat an input, each in one row: (input, expected outcome).
#[test]
fn handle_input_says_what_became_of_each_input() {
    let mut config = RefreshConfig::default();
    config.fanout.stagger = crate::config::Stagger::Fixed(Duration::from_millis(100));
    config.fanout.jitter = 0.0;
    config.attempt_timeout = Duration::from_millis(150);
    let mut r = Refresh::new(&config, &book(3), Instant::ZERO).unwrap();
    let id = |n| AttemptId::new(0, n);
    let at = Instant::from_millis;
    let refused = |n| Input::Failed { attempt: id(n), error: AttemptError::new(crate::error::ErrorKind::Refused) };
    let rows = [
        (at(1), Input::Connected { attempt: id(0), tls: false }, InputOutcome::Applied),
        (at(2), Input::Connected { attempt: id(0), tls: false }, InputOutcome::Repeated),
        // A broker checks credentials only after its first answer, and accepts checked ones.
        (at(2), Input::Authenticating { attempt: id(0) }, InputOutcome::Unexpected),
        (at(3), Input::FirstFrame { attempt: id(0) }, InputOutcome::Applied),
        (at(3), Input::Authenticated { attempt: id(0) }, InputOutcome::Unexpected),
        (at(3), Input::Authenticating { attempt: id(0) }, InputOutcome::Applied),
        (at(3), Input::Authenticating { attempt: id(0) }, InputOutcome::Repeated),
        (at(4), Input::Authenticated { attempt: id(0) }, InputOutcome::Applied),
        (at(4), Input::Authenticated { attempt: id(0) }, InputOutcome::Repeated),
        (at(4), Input::Authenticating { attempt: id(0) }, InputOutcome::Repeated),
        (at(4), Input::FirstFrame { attempt: id(0) }, InputOutcome::Repeated),
        (at(5), Input::Connected { attempt: AttemptId::new(7, 0), tls: false }, InputOutcome::OtherRefresh),
        // #0.1 is issued by the stagger tick due at 100 ms, in this very call.
        (at(100), Input::Connected { attempt: id(1), tls: false }, InputOutcome::NotIssued),
        (at(101), refused(1), InputOutcome::Applied),
        (at(102), refused(1), InputOutcome::AttemptEnded),
        // #0.0 times out at 150 ms, in the call that reports it.
        (at(150), refused(0), InputOutcome::AttemptEnded),
    ];
    for (i, (now, input, want)) in rows.into_iter().enumerate() {
        assert_eq!(r.handle_input(now, input.clone()), want, "row {i}: {input:?}");
        while r.poll_command().is_some() {}
    }
    r.handle_timeout(at(3_600_000));
    while r.poll_command().is_some() {}
    assert!(r.is_finished());
    assert_eq!(r.handle_input(at(152), refused(0)), InputOutcome::RefreshFinished);
}

/// An attempt id reaches JSON (and JavaScript) as `{epoch, number}`, and is read from that
/// form only: the plain 64-bit integer of traces before version 4 is refused.
#[test]
fn attempt_ids_serialise_as_epoch_and_number_and_read_only_that() {
    let id = AttemptId::new(3, 7);
    let json = serde_json::to_value(id).unwrap();
    assert_eq!(json, serde_json::json!({ "epoch": 3, "number": 7 }));
    assert_eq!(serde_json::from_value::<AttemptId>(json).unwrap(), id);
    assert_eq!(serde_json::from_str::<AttemptId>(r#"{"number": 7, "epoch": 3}"#).unwrap(), id);
    let old = ((3u64 << 32) | 7).to_string();
    let error = serde_json::from_str::<AttemptId>(&old).unwrap_err().to_string();
    assert!(error.starts_with("invalid type: integer `12884901895`, expected an attempt id"), "{error}");
    assert!(serde_json::from_str::<Input>(r#"{"connected": {"attempt": 5}}"#).is_err());
    for bad in ["-1", "0", r#"{"epoch": 1}"#, r#"{"epoch": 1, "number": 2, "x": 3}"#, "\"7\""] {
        assert!(serde_json::from_str::<AttemptId>(bad).is_err(), "{bad}");
    }
}

/// The names older traces were read with are gone: `answered` is no input (it is
/// `first_frame`), and an attempt's `answered_at` and `kept` are unknown fields, ignored as
/// every unknown field is, so the attempt reads as if it had neither.
#[test]
fn inputs_and_attempts_are_read_by_their_current_names_only() {
    let id = r#"{"epoch": 0, "number": 1}"#;
    let input: Input = serde_json::from_str(&format!(r#"{{"first_frame": {{"attempt": {id}}}}}"#)).unwrap();
    assert_eq!(input, Input::FirstFrame { attempt: AttemptId::new(0, 1) });
    let error = serde_json::from_str::<Input>(&format!(r#"{{"answered": {{"attempt": {id}}}}}"#)).unwrap_err();
    assert!(error.to_string().starts_with("unknown variant `answered`, expected one of"), "{error}");

    let attempt = |extra: &str| {
        let json = format!(
            r#"{{"broker": 0, "pass": 0, "started_at": 0, "connected_at": 1, {extra}
                "ended_at": null, "state": "in_flight", "hedge": false}}"#
        );
        serde_json::from_str::<AttemptInfo>(&json).unwrap()
    };
    let current = attempt(r#""first_frame_at": 2, "reused_connection": true,"#);
    assert_eq!((current.first_frame_at, current.reused_connection), (Some(Instant::from_micros(2)), true));
    assert_eq!(serde_json::from_value::<AttemptInfo>(serde_json::to_value(current).unwrap()).unwrap(), current);
    let old = attempt(r#""answered_at": 2, "kept": true,"#);
    assert_eq!((old.first_frame_at, old.reused_connection), (None, false));
}

/// `ALL` lists every variant once: the match below stops compiling when a variant is added,
/// and the assertions fail until `ALL` has it too.
#[test]
fn all_lists_every_cancel_reason_and_timer_once() {
    let index = |r: CancelReason| match r {
        CancelReason::Lost => 0,
        CancelReason::TimedOut => 1,
        CancelReason::Deadline => 2,
        CancelReason::Fatal => 3,
        CancelReason::Superseded => 4,
        CancelReason::Rejected => 5,
        CancelReason::Overtaken => 6,
        CancelReason::Outrun => 7,
    };
    assert_eq!(CancelReason::ALL.map(index), [0, 1, 2, 3, 4, 5, 6, 7]);
    let index = |t: TimerKind| match t {
        TimerKind::Deadline => 0,
        TimerKind::AttemptTimeout => 1,
        TimerKind::Stagger => 2,
        TimerKind::Spread => 3,
        TimerKind::Backoff => 4,
    };
    assert_eq!(TimerKind::ALL.map(index), [0, 1, 2, 3, 4]);
    assert_eq!(TimerKind::ALL.map(|t| t as usize), [0, 1, 2, 3, 4], "the slot order is the declaration order");
    for r in CancelReason::ALL {
        assert_eq!(serde_json::to_value(r).unwrap(), serde_json::json!(r.name()));
    }
    for t in TimerKind::ALL {
        assert_eq!(serde_json::to_value(t).unwrap(), serde_json::json!(t.name()));
    }
}

/// `shuffle_seeds` tries the seeds in an order the seed decides (the same for the same seed,
/// a permutation of the list); without it, as listed.
#[test]
fn seeds_are_tried_as_listed_or_shuffled_by_the_seed() {
    let order = |shuffle: bool, seed: u64| {
        let mut config = RefreshConfig::all_at_once();
        config.shuffle_seeds = shuffle;
        config.seed = seed;
        let mut r = Refresh::new(&config, &book(8), Instant::ZERO).unwrap();
        let mut brokers = Vec::new();
        while let Some(c) = r.poll_command() {
            if let Command::Connect { broker, .. } = c {
                brokers.push(broker.0);
            }
        }
        brokers
    };
    let listed: Vec<u32> = (0..8).collect();
    for seed in 0..4 {
        assert_eq!(order(false, seed), listed, "as listed whatever the seed");
    }
    let shuffled: Vec<Vec<u32>> = (0..4).map(|seed| order(true, seed)).collect();
    for (seed, o) in shuffled.iter().enumerate() {
        let mut sorted = o.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, listed, "a permutation");
        assert_eq!(*o, order(true, seed as u64), "the same for the same seed");
    }
    assert!(shuffled.iter().any(|o| *o != listed), "some seed reorders: {shuffled:?}");
    assert!(shuffled.windows(2).any(|w| w[0] != w[1]), "seeds differ: {shuffled:?}");
}

#[test]
fn a_lookup_outrun_by_a_connected_seed_says_the_lookup_was_outrun_not_a_connect() {
    let mut config = RefreshConfig::default();
    config.fanout.jitter = 0.0;
    let book = BrokerBook::resolving(["kafka.test:9092", "10.0.0.5:9092"]).unwrap();
    let mut r = Refresh::new(&config, &book, Instant::ZERO).unwrap();
    let first = r.poll_command();
    assert!(matches!(first, Some(Command::Resolve { .. })), "{first:?}");
    // The lookup hangs; the cold 40 ms tick starts the IP seed, which connects at once.
    r.handle_timeout(Instant::from_millis(40));
    let Some(Command::Connect { attempt, .. }) = r.poll_command() else { panic!("the IP seed starts") };
    r.handle_input(Instant::from_micros(40_100), Input::Connected { attempt, tls: false });
    let cancel = r.poll_command();
    assert!(matches!(cancel, Some(Command::Cancel { reason: CancelReason::Outrun, .. })), "{cancel:?}");
    let error = r.outcomes[0].last_error.as_ref().expect("the lookup's error");
    let text = alloc::format!("{error}");
    assert_eq!(error.kind, crate::error::ErrorKind::Dns);
    assert!(text.contains("the lookup was still under way"), "{text}");
    assert!(!text.contains("still connecting"), "{text}");
}

/// A gentle refresh (a failover) keeps waiting on a broker that accepted the connection and
/// has not answered, for as many more attempt timeouts as it has retries, instead of closing
/// it and dialling it again in the next pass; a refresh with no storm-likely cause fails it
/// at its attempt timeout and redials it after the backoff.
#[test]
fn a_gentle_refresh_outlives_attempt_timeouts_on_a_connected_broker_instead_of_redialling() {
    let mut config = RefreshConfig { shuffle_seeds: false, ..RefreshConfig::default() };
    config.fanout.stagger = crate::config::Stagger::Fixed(Duration::from_millis(100));
    config.fanout.jitter = 0.0;
    config.attempt_timeout = Duration::from_millis(150);
    config.retry.retries = 2;
    let at = Instant::from_millis;
    let id = |n| AttemptId::new(0, n);
    // Broker 0 accepts and never answers; brokers 1 and 2 refuse. Every command until `end`,
    // with its time.
    let run = |cause: RefreshCause, end: u64| -> Vec<(u64, Command)> {
        let ctx = RefreshContext { cause, ..RefreshContext::default() };
        let mut r = Refresh::with_context(&config, &book(3), at(0), ctx).unwrap();
        let mut seen = Vec::new();
        let mut now = 0;
        while now <= end && !r.is_finished() {
            while let Some(command) = r.poll_command() {
                if let Command::Connect { attempt, broker, .. } = &command {
                    let input = if broker.0 == 0 {
                        Input::Connected { attempt: *attempt, tls: false }
                    } else {
                        Input::Failed { attempt: *attempt, error: AttemptError::new(crate::error::ErrorKind::Refused) }
                    };
                    let _ = r.handle_input(at(now), input);
                }
                seen.push((now, command));
            }
            now += 1;
            r.handle_timeout(at(now));
        }
        seen
    };
    let dials_of_0 = |seen: &[(u64, Command)]| {
        seen.iter().filter(|(_, c)| matches!(c, Command::Connect { broker, .. } if broker.0 == 0)).count()
    };
    let cancel_of = |seen: &[(u64, Command)], n: u32| {
        seen.iter().find_map(|(t, c)| match c {
            Command::Cancel { attempt, reason } if *attempt == id(n) => Some((*t, *reason)),
            _ => None,
        })
    };

    let gentle = run(RefreshCause::StaleMetadata, 1_000);
    // Its attempt outlives two timeouts (150 and 300 ms) and fails at the third (450 ms).
    assert_eq!(cancel_of(&gentle, 0), Some((450, CancelReason::TimedOut)), "{gentle:?}");
    let before = gentle.iter().take_while(|(t, _)| *t < 450).cloned().collect::<Vec<_>>();
    assert_eq!(dials_of_0(&before), 1, "no redial of the connected broker while it is waited on: {before:?}");

    let plain = run(RefreshCause::Requested, 1_000);
    assert_eq!(cancel_of(&plain, 0), Some((150, CancelReason::TimedOut)), "{plain:?}");
    let before = plain.iter().take_while(|(t, _)| *t < 450).cloned().collect::<Vec<_>>();
    assert!(dials_of_0(&before) >= 2, "redialled after its timeout and the backoff: {before:?}");
}
