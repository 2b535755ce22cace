//! The fault matrix (`docs/faults.md`) through the blocking adapter: the same rows, made by
//! the same lab, as the tokio adapter's matrix (`stagger_test_faults::matrix`). For every
//! fault a broker or the network can commit:
//! * its attempt fails with the expected [`ErrorKind`], saying what happened, and is
//!   reported `answered` exactly when the broker sent a complete frame before failing;
//! * a refresh with a healthy broker after it still succeeds — except for the fatal
//!   credential errors, which end the refresh at once without asking the healthy one;
//! * with only faulty brokers the refresh gives up, listing every broker's error;
//! * every socket the refresh opened is closed when it returns.

use stagger::{CancelReason, ErrorKind, GiveUpReason, RefreshConfig};
use stagger_blocking::{refresh_with, AttemptReport, Error, RefreshOptions};
use stagger_test_faults::matrix::{self, port, Fault, Lab, SASL_AUTHENTICATION_FAILED};
use stagger_test_faults::sockets::sockets_to;
use stagger_test_faults::{background, bounded_blocking};

fn options() -> RefreshOptions {
    RefreshOptions { config: matrix::config(), ..RefreshOptions::default() }
}

fn kind(report: &AttemptReport) -> Option<ErrorKind> {
    report.error().map(|e| e.kind)
}

/// The whole row for `fault`: faulty then healthy, then the faulty broker alone.
fn row(fault: Fault) {
    bounded_blocking(move || {
        let fixtures = background();
        let lab = Lab::start();
        let faulty = fixtures.block_on(lab.faulty(fault));
        let expected = fault.expected();
        let result = refresh_with(&options(), &[faulty.address.clone(), lab.healthy()]);
        if fault.fatal() {
            let error = result.expect_err("a fatal error ends the refresh");
            let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{fault:?}: {error}") };
            assert_eq!(core.reason, GiveUpReason::Fatal, "{fault:?}: {error}");
            assert_eq!(attempts.len(), 1, "{fault:?}: only the faulty broker was asked: {attempts:?}");
            assert_eq!(kind(&attempts[0]), Some(expected), "{fault:?}");
            assert_eq!(attempts[0].answered.is_some(), fault.answers(), "{fault:?}: {:?}", attempts[0]);
            let healthy = core.brokers.iter().find(|b| *b.address == lab.healthy()).expect("healthy broker listed");
            assert_eq!(healthy.attempts, 0, "{fault:?}: {error}");
            assert!(error.to_string().contains(fault.says()), "{fault:?}: {error}");
        } else {
            let outcome = result.unwrap_or_else(|e| panic!("{fault:?}: the healthy broker answers: {e}"));
            assert_eq!(outcome.winner, lab.healthy(), "{fault:?}");
            let first = &outcome.attempts[0];
            assert_eq!(first.broker, faulty.address);
            let error = first.error().unwrap_or_else(|| panic!("{fault:?}: {first:?}"));
            assert_eq!(error.kind, expected, "{fault:?}: {error}");
            assert!(error.to_string().contains(fault.says()), "{fault:?}: {error}");
            assert_eq!(first.answered.is_some(), fault.answers(), "{fault:?}: {first:?}");
            assert_eq!(outcome.attempts[1].outcome, stagger::report::AttemptOutcome::Won, "{fault:?}");
        }
        assert_eq!(sockets_to(&[port(&faulty.address)]), faulty.baseline, "{fault:?}: its socket is closed");

        // Only the faulty broker: the refresh gives up with its error.
        let error = refresh_with(&options(), std::slice::from_ref(&faulty.address)).expect_err("gives up");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{fault:?}: {error}") };
        let reason = if fault.fatal() { GiveUpReason::Fatal } else { GiveUpReason::AllFailed { passes: 1 } };
        assert_eq!(core.reason, reason, "{fault:?}: {error}");
        assert_eq!(core.brokers[0].last_error.as_ref().map(|e| e.kind), Some(expected), "{fault:?}: {error}");
        assert_eq!(attempts.len(), 1);
        assert_eq!(kind(&attempts[0]), Some(expected), "{fault:?}");
        assert!(error.to_string().contains(&faulty.address), "{error}");
        assert_eq!(sockets_to(&[port(&faulty.address)]), faulty.baseline, "{fault:?}");
    });
}

#[test]
fn refused() {
    row(Fault::Refused);
}

#[test]
fn connect_never_answered() {
    row(Fault::ConnectNeverAnswered);
}

#[test]
fn accepted_but_silent() {
    row(Fault::AcceptedButSilent);
}

#[test]
fn api_versions_answered_then_silent() {
    row(Fault::ApiVersionsThenSilent);
}

#[test]
fn closes_at_once() {
    row(Fault::ClosesAtOnce);
}

#[test]
fn closes_mid_frame() {
    row(Fault::ClosesMidFrame);
}

#[test]
fn garbage() {
    row(Fault::Garbage);
}

#[test]
fn oversize_length_prefix() {
    row(Fault::OversizeLength);
}

#[test]
fn slow_drip() {
    row(Fault::SlowDrip);
}

#[test]
fn wrong_correlation_id() {
    row(Fault::WrongCorrelationId);
}

#[test]
fn api_versions_error() {
    row(Fault::ApiVersionsError);
}

#[test]
fn metadata_with_no_brokers() {
    row(Fault::NoBrokers);
}

#[test]
fn metadata_with_a_top_level_error() {
    row(Fault::MetadataTopLevelError);
}

#[test]
fn authentication_failure_is_fatal() {
    row(Fault::AuthenticationFailure);
}

#[test]
fn authorization_failure_is_fatal() {
    row(Fault::AuthorizationFailure);
}

/// Every non-fatal fault in one seed list: one pass, every broker with its own error.
#[test]
fn only_faulty_brokers_give_up_with_every_brokers_error() {
    bounded_blocking(|| {
        let fixtures = background();
        let lab = Lab::start();
        let brokers: Vec<_> =
            Fault::ALL.into_iter().filter(|f| !f.fatal()).map(|f| (f, fixtures.block_on(lab.faulty(f)))).collect();
        let seeds: Vec<String> = brokers.iter().map(|(_, b)| b.address.clone()).collect();
        let error = refresh_with(&options(), &seeds).expect_err("every broker is faulty");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(core.reason, GiveUpReason::AllFailed { passes: 1 }, "{error}");
        assert_eq!(attempts.len(), brokers.len());
        for ((fault, broker), report) in brokers.iter().zip(attempts) {
            let listed = core.brokers.iter().find(|b| *b.address == broker.address).expect("listed");
            assert_eq!(listed.last_error.as_ref().map(|e| e.kind), Some(fault.expected()), "{fault:?}: {error}");
            assert_eq!(kind(report), Some(fault.expected()), "{fault:?}");
            assert_eq!(report.answered.is_some(), fault.answers(), "{fault:?}: {report:?}");
            assert_eq!(sockets_to(&[port(&broker.address)]), broker.baseline, "{fault:?}");
        }
    });
}

/// A fatal answer while other attempts are in flight cancels them and closes their sockets —
/// connected and still-connecting ones alike.
#[test]
fn a_fatal_answer_cancels_every_attempt_in_flight() {
    bounded_blocking(|| {
        let fixtures = background();
        let lab = Lab::start();
        let silent = fixtures.block_on(lab.faulty(Fault::AcceptedButSilent));
        let unanswered = fixtures.block_on(lab.faulty(Fault::ConnectNeverAnswered));
        let auth = fixtures.block_on(lab.faulty(Fault::AuthenticationFailure));
        let mut config = RefreshConfig::all_at_once();
        config.attempt_timeout = std::time::Duration::from_secs(30);
        config.fanout.tuning.cancel_silent_on_answer = false;
        let seeds = [silent.address.clone(), unanswered.address.clone(), auth.address.clone()];
        let error = refresh_with(&RefreshOptions { config, ..Default::default() }, &seeds).expect_err("fatal");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(core.reason, GiveUpReason::Fatal, "{error}");
        let by_broker = |address: &str| attempts.iter().find(|a| a.broker == address).expect("attempted");
        assert_eq!(kind(by_broker(&auth.address)), Some(ErrorKind::BrokerError(SASL_AUTHENTICATION_FAILED)));
        for faulty in [&silent, &unanswered] {
            assert_eq!(by_broker(&faulty.address).cancelled(), Some(CancelReason::Fatal));
            assert_eq!(sockets_to(&[port(&faulty.address)]), faulty.baseline);
        }
    });
}
