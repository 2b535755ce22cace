//! What the mock cannot do, through a fault proxy in front of a real mock broker: each
//! fault fails its attempt with the right `ErrorKind` and the refresh still succeeds from a
//! healthy broker; with only faulty brokers it gives up listing every broker's error.

use std::time::Duration;

use stagger::{ErrorKind, GiveUpReason, RefreshConfig, Stagger};
use stagger_test_faults::bounded;
use stagger_test_faults::mock::Mock;
use stagger_test_faults::proxy::{Fault, Proxy};
use stagger_tokio::{refresh_with, AttemptOutcome, Error, RefreshOptions};

/// One attempt at a time (so each fault is seen in full), a short attempt timeout (so the
/// slow drip times out quickly), no retry pass.
fn options() -> RefreshOptions {
    let mut config = RefreshConfig::sequential();
    config.shuffle_seeds = false;
    config.attempt_timeout = Duration::from_millis(300);
    config.fanout.stagger = Stagger::Fixed(Duration::from_millis(300));
    config.retry.retries = 0;
    RefreshOptions { config, ..RefreshOptions::default() }
}

fn faults() -> Vec<(Fault, ErrorKind)> {
    vec![
        (Fault::Garbage, ErrorKind::Protocol),
        (Fault::CloseOnAccept, ErrorKind::Closed),
        (Fault::CloseMidFrame, ErrorKind::Closed),
        (Fault::OversizeLength, ErrorKind::FrameTooLarge),
        (Fault::SlowDrip(Duration::from_millis(100)), ErrorKind::ResponseTimeout),
    ]
}

async fn faulty_then_healthy(fault: Fault, expected: ErrorKind) {
    let mock = Mock::start(1, &[("alpha", 2)]);
    let healthy = mock.address(1);
    let proxy = Proxy::start(&healthy, fault.clone()).await;
    let seeds = [proxy.address.clone(), healthy.clone()];
    let outcome = refresh_with(&options(), &seeds, |_| {}).await.expect("refresh succeeds from the healthy broker");
    assert_eq!(outcome.winner, healthy);
    let faulty = &outcome.attempts[0];
    assert_eq!(faulty.broker, proxy.address);
    match &faulty.outcome {
        AttemptOutcome::Failed(e) => assert_eq!(e.kind, expected, "{}: {e}", fault.name()),
        other => panic!("{}: expected a failure, got {other:?}", fault.name()),
    }
    assert_eq!(outcome.attempts[1].outcome, AttemptOutcome::Won);
    assert_eq!(proxy.accepted(), 1);
}

#[tokio::test]
async fn garbage_is_a_protocol_error() {
    bounded(faulty_then_healthy(Fault::Garbage, ErrorKind::Protocol)).await;
}

#[tokio::test]
async fn close_right_after_accept_is_closed() {
    bounded(faulty_then_healthy(Fault::CloseOnAccept, ErrorKind::Closed)).await;
}

#[tokio::test]
async fn close_mid_frame_is_closed() {
    bounded(faulty_then_healthy(Fault::CloseMidFrame, ErrorKind::Closed)).await;
}

#[tokio::test]
async fn oversize_length_prefix_is_refused_without_allocating() {
    bounded(faulty_then_healthy(Fault::OversizeLength, ErrorKind::FrameTooLarge)).await;
}

#[tokio::test]
async fn slow_drip_hits_the_cores_attempt_timeout() {
    bounded(faulty_then_healthy(Fault::SlowDrip(Duration::from_millis(100)), ErrorKind::ResponseTimeout)).await;
}

#[tokio::test]
async fn only_faulty_brokers_give_up_with_every_brokers_error() {
    bounded(async {
        let mock = Mock::start(1, &[("alpha", 2)]);
        let mut proxies = Vec::new();
        for (fault, kind) in faults() {
            proxies.push((Proxy::start(&mock.address(1), fault).await, kind));
        }
        let seeds: Vec<String> = proxies.iter().map(|(p, _)| p.address.clone()).collect();
        let error = refresh_with(&options(), &seeds, |_| {}).await.expect_err("every broker is faulty");
        let Error::Refresh { error, attempts, .. } = &error else { panic!("expected a refresh error: {error}") };
        assert_eq!(error.reason, GiveUpReason::AllFailed { passes: 1 });
        assert_eq!(error.brokers.len(), proxies.len());
        let text = error.to_string();
        for (proxy, kind) in &proxies {
            let broker = error.brokers.iter().find(|b| *b.address == proxy.address).expect("broker listed");
            assert_eq!(broker.attempts, 1);
            assert_eq!(broker.last_error.as_ref().map(|e| e.kind), Some(*kind), "{}", proxy.address);
            assert!(text.contains(&proxy.address), "{text}");
        }
        assert_eq!(attempts.len(), proxies.len());
        for (report, (proxy, kind)) in attempts.iter().zip(&proxies) {
            assert_eq!(report.broker, proxy.address);
            assert!(matches!(&report.outcome, AttemptOutcome::Failed(e) if e.kind == *kind), "{report:?}");
        }
        // The last error is the slow drip's timeout: it was tried last.
        assert_eq!(error.last_error.as_ref().map(|(_, _, e)| e.kind), Some(ErrorKind::ResponseTimeout));
    })
    .await;
}
