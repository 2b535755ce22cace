//! The fault matrix on real loopback sockets, through the tokio adapter (`docs/faults.md`
//! lists it). For every fault a broker or the network can commit:
//! * its attempt fails with the expected [`ErrorKind`] (and its socket is closed when the
//!   refresh returns), and is reported `answered` exactly when the broker sent a complete
//!   frame before failing;
//! * a refresh with a healthy broker after it still succeeds — except for the fatal
//!   credential errors, which end the refresh at once by design (every broker would refuse
//!   the same credentials), without asking the healthy one;
//! * with only faulty brokers the refresh gives up, listing every broker's error.
//!
//! The rows, and the lab that makes each fault, are shared with the blocking adapter's
//! matrix (`stagger_test_faults::matrix`).

use std::time::Duration;

use stagger::{Adaptive, CancelReason, ErrorKind, GiveUpReason, Growth, RefreshConfig, Stagger, TimerKind};
use stagger_test_faults::bounded;
use stagger_test_faults::matrix::{self, port, Fault, Lab, SASL_AUTHENTICATION_FAILED};
use stagger_test_faults::sockets::sockets_to;
use stagger_tokio::{refresh_with, AttemptOutcome, Error, EventKind, RefreshOptions, RefreshOutcome};

/// One attempt at a time (each fault is seen whole), 300 ms per attempt (the silent, drip
/// and unanswered faults end there), no retry pass.
fn options() -> RefreshOptions {
    RefreshOptions { config: matrix::config(), ..RefreshOptions::default() }
}

fn failure(outcome: &AttemptOutcome) -> Option<&stagger::AttemptError> {
    match outcome {
        AttemptOutcome::Failed(e) => Some(e),
        _ => None,
    }
}

/// The whole row for `fault`: faulty then healthy, then the faulty broker alone.
async fn row(fault: Fault) {
    let lab = Lab::start();
    let faulty = lab.faulty(fault).await;
    let expected = fault.expected();
    let seeds = [faulty.address.clone(), lab.healthy()];
    let result = refresh_with(&options(), &seeds, |_| {}).await;
    if fault.fatal() {
        // Credentials every broker would refuse: the refresh ends at once, the healthy
        // broker is never asked (asking it would only add load).
        let error = result.expect_err("a fatal error ends the refresh");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{fault:?}: {error}") };
        assert_eq!(core.reason, GiveUpReason::Fatal, "{fault:?}: {error}");
        assert_eq!(attempts.len(), 1, "{fault:?}: only the faulty broker was asked: {attempts:?}");
        assert_eq!(failure(&attempts[0].outcome).map(|e| e.kind), Some(expected), "{fault:?}");
        assert_eq!(attempts[0].answered.is_some(), fault.answers(), "{fault:?}: {:?}", attempts[0]);
        let healthy = core.brokers.iter().find(|b| *b.address == lab.healthy()).expect("healthy broker listed");
        assert_eq!(healthy.attempts, 0, "{fault:?}: {error}");
        assert!(error.to_string().contains(fault.says()), "{fault:?}: {error}");
    } else {
        let outcome: RefreshOutcome = result.unwrap_or_else(|e| panic!("{fault:?}: the healthy broker answers: {e}"));
        assert_eq!(outcome.winner, lab.healthy(), "{fault:?}");
        let first = &outcome.attempts[0];
        assert_eq!(first.broker, faulty.address);
        let error = failure(&first.outcome).unwrap_or_else(|| panic!("{fault:?}: {first:?}"));
        assert_eq!(error.kind, expected, "{fault:?}: {error}");
        assert!(error.to_string().contains(fault.says()), "{fault:?}: {error}");
        assert_eq!(first.answered.is_some(), fault.answers(), "{fault:?}: {first:?}");
        assert_eq!(outcome.attempts[1].outcome, AttemptOutcome::Won, "{fault:?}");
        assert!(outcome.attempts[1].answered.is_some(), "{fault:?}: the healthy broker answered");
    }
    assert_eq!(
        sockets_to(&[port(&faulty.address)]),
        faulty.baseline,
        "{fault:?}: the faulty attempt's socket is closed"
    );

    // Only the faulty broker: the refresh gives up with its error.
    let error = refresh_with(&options(), std::slice::from_ref(&faulty.address), |_| {}).await.expect_err("gives up");
    let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{fault:?}: {error}") };
    let reason = if fault.fatal() { GiveUpReason::Fatal } else { GiveUpReason::AllFailed { passes: 1 } };
    assert_eq!(core.reason, reason, "{fault:?}: {error}");
    assert_eq!(core.brokers.len(), 1);
    assert_eq!(core.brokers[0].last_error.as_ref().map(|e| e.kind), Some(expected), "{fault:?}: {error}");
    assert_eq!(core.last_error.as_ref().map(|(_, _, e)| e.kind), Some(expected), "{fault:?}");
    assert_eq!(attempts.len(), 1);
    assert_eq!(failure(&attempts[0].outcome).map(|e| e.kind), Some(expected), "{fault:?}");
    assert_eq!(attempts[0].answered.is_some(), fault.answers(), "{fault:?}: {:?}", attempts[0]);
    assert!(error.to_string().contains(&faulty.address), "{error}");
    assert_eq!(sockets_to(&[port(&faulty.address)]), faulty.baseline, "{fault:?}");
}

#[tokio::test]
async fn refused() {
    bounded(row(Fault::Refused)).await;
}

#[tokio::test]
async fn connect_never_answered() {
    bounded(row(Fault::ConnectNeverAnswered)).await;
}

#[tokio::test]
async fn accepted_but_silent() {
    bounded(row(Fault::AcceptedButSilent)).await;
}

#[tokio::test]
async fn api_versions_answered_then_silent() {
    bounded(row(Fault::ApiVersionsThenSilent)).await;
}

#[tokio::test]
async fn closes_at_once() {
    bounded(row(Fault::ClosesAtOnce)).await;
}

#[tokio::test]
async fn closes_mid_frame() {
    bounded(row(Fault::ClosesMidFrame)).await;
}

#[tokio::test]
async fn garbage() {
    bounded(row(Fault::Garbage)).await;
}

#[tokio::test]
async fn oversize_length_prefix() {
    bounded(row(Fault::OversizeLength)).await;
}

#[tokio::test]
async fn slow_drip() {
    bounded(row(Fault::SlowDrip)).await;
}

#[tokio::test]
async fn wrong_correlation_id() {
    bounded(row(Fault::WrongCorrelationId)).await;
}

#[tokio::test]
async fn api_versions_error() {
    bounded(row(Fault::ApiVersionsError)).await;
}

#[tokio::test]
async fn metadata_with_no_brokers() {
    bounded(row(Fault::NoBrokers)).await;
}

#[tokio::test]
async fn metadata_with_a_top_level_error() {
    bounded(row(Fault::MetadataTopLevelError)).await;
}

#[tokio::test]
async fn authentication_failure_is_fatal() {
    bounded(row(Fault::AuthenticationFailure)).await;
}

#[tokio::test]
async fn authorization_failure_is_fatal() {
    bounded(row(Fault::AuthorizationFailure)).await;
}

/// Every non-fatal fault in one seed list: the refresh gives up after one pass, and its
/// error lists every broker with that broker's own error, in attempt order.
#[tokio::test]
async fn only_faulty_brokers_give_up_with_every_brokers_error() {
    bounded(async {
        let lab = Lab::start();
        let mut brokers = Vec::new();
        for fault in Fault::ALL.into_iter().filter(|f| !f.fatal()) {
            brokers.push((fault, lab.faulty(fault).await));
        }
        let seeds: Vec<String> = brokers.iter().map(|(_, b)| b.address.clone()).collect();
        let error = refresh_with(&options(), &seeds, |_| {}).await.expect_err("every broker is faulty");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(core.reason, GiveUpReason::AllFailed { passes: 1 }, "{error}");
        assert_eq!(core.brokers.len(), brokers.len());
        assert_eq!(attempts.len(), brokers.len());
        let text = error.to_string();
        for ((fault, broker), report) in brokers.iter().zip(attempts) {
            let listed = core.brokers.iter().find(|b| *b.address == broker.address).expect("listed");
            assert_eq!(listed.attempts, 1, "{fault:?}");
            assert_eq!(listed.last_error.as_ref().map(|e| e.kind), Some(fault.expected()), "{fault:?}: {text}");
            assert_eq!(report.broker, broker.address);
            assert_eq!(failure(&report.outcome).map(|e| e.kind), Some(fault.expected()), "{fault:?}");
            assert_eq!(report.answered.is_some(), fault.answers(), "{fault:?}: {report:?}");
            assert!(text.contains(&broker.address), "{text}");
            assert_eq!(sockets_to(&[port(&broker.address)]), broker.baseline, "{fault:?}");
        }
        let (last_fault, _) = brokers.last().unwrap();
        assert_eq!(core.last_error.as_ref().map(|(_, _, e)| e.kind), Some(last_fault.expected()));
    })
    .await;
}

/// A fatal answer while other attempts are in flight cancels them (reason `Fatal`) and
/// closes their sockets — connected and still-connecting ones alike.
#[tokio::test]
async fn a_fatal_answer_cancels_every_attempt_in_flight() {
    bounded(async {
        let lab = Lab::start();
        let silent = lab.faulty(Fault::AcceptedButSilent).await;
        let unanswered = lab.faulty(Fault::ConnectNeverAnswered).await;
        let auth = lab.faulty(Fault::AuthenticationFailure).await;
        let seeds = [silent.address.clone(), unanswered.address.clone(), auth.address.clone()];
        let mut config = RefreshConfig::all_at_once();
        config.attempt_timeout = Duration::from_secs(30);
        // The failing broker's ApiVersions answer is an answer: by default it would cancel
        // the silent attempts as `overtaken` before its fatal error arrives. Without that,
        // the fatal error itself must cancel them.
        config.fanout.tuning.cancel_silent_on_answer = false;
        let options = RefreshOptions { config, ..RefreshOptions::default() };
        let error = refresh_with(&options, &seeds, |_| {}).await.expect_err("fatal");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(core.reason, GiveUpReason::Fatal, "{error}");
        let by_broker = |address: &str| attempts.iter().find(|a| a.broker == address).expect("attempted");
        assert_eq!(
            failure(&by_broker(&auth.address).outcome).map(|e| e.kind),
            Some(ErrorKind::BrokerError(SASL_AUTHENTICATION_FAILED))
        );
        for faulty in [&silent, &unanswered] {
            assert_eq!(by_broker(&faulty.address).outcome, AttemptOutcome::Cancelled(CancelReason::Fatal));
            assert_eq!(sockets_to(&[port(&faulty.address)]), faulty.baseline);
        }
    })
    .await;
}

/// A broker that answers ApiVersions and then never answers Metadata (alive, then stuck),
/// after a hung one and before a healthy one, under the adaptive stagger:
/// * the adapter reports its first answer (`answered`, an `Answered` event);
/// * that answer overtakes the hung attempt started before it: with
///   `fanout.tuning.cancel_silent_on_answer` it is cancelled as `overtaken`, in that very call;
/// * the answering broker gets patience, not the few-handshakes delay of a silent one: the
///   next broker starts only `while_answering(its time to answer)` after its start;
/// * the healthy broker then wins, and the stuck attempt is cancelled as `lost`;
/// * without `cancel_silent_on_answer`, the hung attempt stays in flight until the win.
#[tokio::test]
async fn a_broker_stuck_after_api_versions_overtakes_silent_ones_and_the_next_wins_after_patience() {
    bounded(async {
        let lab = Lab::start();
        let hung = lab.mock.address(1);
        let stuck = lab.faulty(Fault::ApiVersionsThenSilent).await;
        let seeds = [hung.clone(), stuck.address.clone(), lab.healthy()];
        // Explicit knobs: a connected silent broker is suspected 300 ms after its handshake
        // (a margin for the answers on a busy machine), an answering one after 4 × its time
        // to answer (clamped to the same floor), no jitter, one broker per tick.
        let adaptive = Adaptive {
            cold: Duration::from_secs(5),
            multiple: 2,
            floor: Duration::from_millis(300),
            ceiling: Duration::from_secs(2),
            patience: 4,
            ..Adaptive::default()
        };
        for cancel_silent in [true, false] {
            let mut config = RefreshConfig::adaptive();
            config.shuffle_seeds = false;
            config.fanout.stagger = Stagger::Adaptive(adaptive);
            config.fanout.growth = Growth::Linear(1);
            config.fanout.max_in_flight = 3;
            config.fanout.jitter = 0.0;
            config.fanout.tuning.cancel_silent_on_answer = cancel_silent;
            config.attempt_timeout = Duration::from_secs(30);
            config.retry.retries = 0;
            let options = RefreshOptions { config, ..RefreshOptions::default() };
            let mut events = Vec::new();
            let outcome = refresh_with(&options, &seeds, |e| events.push(e.clone())).await.expect("refresh");
            let a = &outcome.attempts;
            let case = format!("cancel_silent_on_answer = {cancel_silent}: {a:#?}");
            assert_eq!(outcome.winner, lab.healthy(), "{case}");
            assert_eq!(a.iter().map(|a| a.broker.as_str()).collect::<Vec<_>>(), seeds, "{case}");

            // The hung broker: connected, never answered.
            assert!(a[0].connected.is_some() && a[0].answered.is_none(), "{case}");
            // The stuck broker answered (ApiVersions), reported between Connected and its end.
            let answered = a[1].answered.expect("the stuck broker answered ApiVersions");
            assert!(a[1].connected.is_some_and(|c| c <= answered), "{case}");
            let position = |f: &dyn Fn(&EventKind) -> bool| {
                events.iter().position(|e| f(&e.kind)).unwrap_or_else(|| panic!("missing event: {events:#?}"))
            };
            let is = |n: u32| move |attempt: &stagger::AttemptId| attempt.number() == n;
            let connected1 = position(&|k| matches!(k, EventKind::Connected { attempt, .. } if is(1)(attempt)));
            let answered1 = position(&|k| matches!(k, EventKind::Answered { attempt, .. } if is(1)(attempt)));
            let started2 = position(&|k| matches!(k, EventKind::Started { attempt, .. } if is(2)(attempt)));
            assert!(connected1 < answered1 && answered1 < started2, "{events:#?}");
            let answers = events.iter().filter(|e| matches!(&e.kind, EventKind::Answered { attempt, .. } if is(1)(attempt)));
            assert_eq!(answers.count(), 1, "reported once: {events:#?}");
            // Patience: the healthy broker was started by the stagger timer, no sooner than
            // the answering wait of the stuck attempt (same clock readings as the core).
            let typical = answered - a[1].started;
            assert!(a[2].started >= a[1].started + adaptive.while_answering(typical), "{case}");
            let before_start2 = &events[..started2];
            assert!(
                matches!(before_start2.last().map(|e| &e.kind), Some(EventKind::Timer { timer: TimerKind::Stagger })),
                "{events:#?}"
            );
            assert!(
                !events.iter().any(|e| matches!(e.kind, EventKind::Timer { timer: TimerKind::AttemptTimeout })),
                "{events:#?}"
            );
            // The healthy broker won; the stuck attempt lost to it.
            assert_eq!(a[2].outcome, AttemptOutcome::Won, "{case}");
            assert_eq!(a[1].outcome, AttemptOutcome::Cancelled(CancelReason::Lost), "{case}");
            assert_eq!(a[1].ended, a[2].ended, "{case}");
            if cancel_silent {
                assert_eq!(a[0].outcome, AttemptOutcome::Cancelled(CancelReason::Overtaken), "{case}");
                assert_eq!(a[0].ended, Some(answered), "overtaken in the call that saw the answer: {case}");
                let overtaken = position(&|k| {
                    matches!(k, EventKind::Cancelled { attempt, reason: CancelReason::Overtaken, .. } if is(0)(attempt))
                });
                assert_eq!(overtaken, answered1 + 1, "{events:#?}");
            } else {
                assert_eq!(a[0].outcome, AttemptOutcome::Cancelled(CancelReason::Lost), "{case}");
                assert_eq!(a[0].ended, a[2].ended, "{case}");
            }
        }
        assert_eq!(sockets_to(&[port(&stuck.address)]), stuck.baseline, "the stuck attempt's socket is closed");
    })
    .await;
}
