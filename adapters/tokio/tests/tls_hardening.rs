//! TLS hardening, through TLS-terminating proxies (tokio-rustls, rcgen-made certificates) in
//! front of a real mock broker:
//! * hostname verification is on by default — the seed's own host is checked against the
//!   certificate, with no option to set;
//! * an expired certificate, one for another host and one from an unknown CA each fail
//!   *their* attempt with `ErrorKind::Tls` and a distinct detail saying which, while the
//!   refresh goes on to the next broker (a bad-TLS broker then a good one: success, with the
//!   bad one's error in the report);
//! * mismatches between the two ends (TLS to a plaintext broker, a broker demanding a client
//!   certificate) fail their attempt too, and a client certificate makes mutual TLS work;
//! * a pass in which every broker's certificate was refused ends the refresh, where a
//!   broker hanging up during the handshake is retried.

use std::time::Duration;

use stagger::{ErrorKind, GiveUpReason, RefreshConfig};
use stagger_test_faults::bounded;
use stagger_test_faults::mock::Mock;
use stagger_test_faults::proxy::{Fault, Proxy};
use stagger_test_faults::sockets::sockets_to;
use stagger_test_faults::tls::{Leaf, TestPki};
use stagger_tokio::{refresh_with, AttemptOutcome, ClientCert, Error, RefreshOptions, TlsOptions};

/// One attempt at a time, no retry: each broker is seen exactly once, in seed order.
fn options(tls: TlsOptions) -> RefreshOptions {
    let mut config = RefreshConfig::sequential();
    config.shuffle_seeds = false;
    config.attempt_timeout = Duration::from_secs(5);
    config.retry.retries = 0;
    RefreshOptions { config, tls: Some(tls), ..RefreshOptions::default() }
}

/// Trust the test CA, verify names as by default.
fn trusting(pki: &TestPki) -> TlsOptions {
    TlsOptions { ca_file: Some(pki.ca_file.clone()), ..TlsOptions::default() }
}

fn tls_detail(outcome: &AttemptOutcome) -> String {
    match outcome {
        AttemptOutcome::Failed(e) if e.kind == ErrorKind::Tls => e.detail.to_string(),
        other => panic!("expected a TLS failure, got {other:?}"),
    }
}

fn port(address: &str) -> u16 {
    address.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// The detail each bad certificate must produce (rustls's own words).
fn says(leaf: Leaf) -> &'static str {
    match leaf {
        Leaf::Expired => "certificate expired",
        Leaf::WrongHost => "certificate not valid for name \"127.0.0.1\"",
        Leaf::UnknownCa => "UnknownIssuer (the certificate is not signed by a trusted CA",
        Leaf::LocalhostOnly => "not valid for name \"127.0.0.1\"",
        Leaf::Good => unreachable!(),
    }
}

/// A bad-TLS broker, then a good one: the refresh succeeds from the good one, and the
/// report shows the bad one's TLS error.
async fn bad_then_good(leaf: Leaf) {
    let pki = TestPki::new();
    let mock = Mock::start(1, &[("alpha", 1)]);
    let bad = Proxy::start(&mock.address(1), Fault::Tls(pki.server_with(leaf))).await;
    let good = Proxy::start(&mock.address(1), Fault::Tls(pki.server.clone())).await;
    let seeds = [bad.address.clone(), good.address.clone()];
    let outcome = refresh_with(&options(trusting(&pki)), &seeds, |_| {}).await.expect("the good broker answers");
    assert_eq!(outcome.winner, good.address);
    let first = &outcome.attempts[0];
    assert_eq!(first.broker, bad.address);
    assert!(first.connected.is_some(), "TCP was up; TLS failed");
    let detail = tls_detail(&first.outcome);
    assert!(detail.contains(says(leaf)), "{leaf:?}: {detail}");
    assert_eq!(outcome.attempts[1].outcome, AttemptOutcome::Won);
    assert_eq!(sockets_to(&[port(&bad.address)]), 0, "the failed handshake's socket is closed");
}

#[tokio::test]
async fn an_expired_certificate_fails_its_attempt_and_the_next_broker_answers() {
    bounded(bad_then_good(Leaf::Expired)).await;
}

#[tokio::test]
async fn a_certificate_for_another_host_fails_its_attempt_and_the_next_broker_answers() {
    bounded(bad_then_good(Leaf::WrongHost)).await;
}

#[tokio::test]
async fn a_certificate_from_an_unknown_ca_fails_its_attempt_and_the_next_broker_answers() {
    bounded(bad_then_good(Leaf::UnknownCa)).await;
}

/// The three bad certificates side by side: three distinct, recognisable details, all in
/// the refresh's final error when no broker is good.
#[tokio::test]
async fn bad_certificates_give_distinct_clear_errors() {
    bounded(async {
        let pki = TestPki::new();
        let mock = Mock::start(1, &[("alpha", 1)]);
        let leaves = [Leaf::Expired, Leaf::WrongHost, Leaf::UnknownCa];
        let mut proxies = Vec::new();
        for leaf in leaves {
            proxies.push(Proxy::start(&mock.address(1), Fault::Tls(pki.server_with(leaf))).await);
        }
        let seeds: Vec<String> = proxies.iter().map(|p| p.address.clone()).collect();
        let error = refresh_with(&options(trusting(&pki)), &seeds, |_| {}).await.expect_err("no good broker");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(core.reason, GiveUpReason::AllFailed { passes: 1 });
        let details: Vec<String> = attempts.iter().map(|a| tls_detail(&a.outcome)).collect();
        for (leaf, detail) in leaves.iter().zip(&details) {
            assert!(detail.contains(says(*leaf)), "{leaf:?}: {detail}");
            for (other, _) in leaves.iter().zip(&details).filter(|(l, _)| *l != leaf) {
                assert!(!detail.contains(says(*other)), "{leaf:?} is told apart from {other:?}: {detail}");
            }
        }
        let text = error.to_string();
        for (proxy, leaf) in proxies.iter().zip(leaves) {
            let line = text.lines().find(|l| l.contains(&proxy.address)).expect("every broker listed");
            assert!(line.contains("TLS failure") && line.contains(says(leaf)), "{line}");
        }
    })
    .await;
}

/// No option turns it on: with only a trusted CA configured, the host part of each seed is
/// verified against the certificate. `localhost:port` matches a certificate for
/// `localhost`; `127.0.0.1:port` — the same broker — does not.
#[tokio::test]
async fn hostname_verification_is_on_by_default() {
    bounded(async {
        let pki = TestPki::new();
        let mock = Mock::start(1, &[("alpha", 1)]);
        let proxy = Proxy::start(&mock.address(1), Fault::Tls(pki.server_with(Leaf::LocalhostOnly))).await;
        let by_name = format!("localhost:{}", port(&proxy.address));
        assert_eq!(TlsOptions::default().server_name, None, "the default names nothing: the seed's host is verified");

        // The name is resolved through the core (its lookup is attempt 0); the connection
        // to its address is still verified against the name.
        let outcome =
            refresh_with(&options(trusting(&pki)), std::slice::from_ref(&by_name), |_| {}).await.expect("by name");
        assert!(matches!(outcome.attempts[0].outcome, AttemptOutcome::Resolved(_)), "{:?}", outcome.attempts);
        assert_eq!(outcome.attempts.last().map(|a| &a.outcome), Some(&AttemptOutcome::Won));

        let error = refresh_with(&options(trusting(&pki)), std::slice::from_ref(&proxy.address), |_| {})
            .await
            .expect_err("by IP, the name does not match");
        let detail = tls_detail(&error.attempts()[0].outcome);
        assert!(detail.contains(says(Leaf::LocalhostOnly)), "{detail}");

        // `server_name` overrides the seed's host (for brokers reached through an IP or a
        // tunnel) — and is verified just the same.
        let tls = TlsOptions { server_name: Some("localhost".into()), ..trusting(&pki) };
        refresh_with(&options(tls), std::slice::from_ref(&proxy.address), |_| {}).await.expect("override");
        let tls = TlsOptions { server_name: Some("kafka.example.com".into()), ..trusting(&pki) };
        let error = refresh_with(&options(tls), std::slice::from_ref(&by_name), |_| {}).await.expect_err("verified");
        // Attempt 0 resolved the name; its address's attempt failed verification.
        assert!(tls_detail(&error.attempts()[1].outcome).contains("not valid for name"));
    })
    .await;
}

/// TLS configured, but the broker speaks plaintext: it hangs up on the ClientHello, which
/// fails that attempt as a close (a broker restarting does the same, and may answer the
/// next pass) with a hint, and the next (TLS) broker answers.
#[tokio::test]
async fn tls_to_a_plaintext_broker_fails_its_attempt() {
    bounded(async {
        let pki = TestPki::new();
        let mock = Mock::start(1, &[("alpha", 1)]);
        let good = Proxy::start(&mock.address(1), Fault::Tls(pki.server.clone())).await;
        let seeds = [mock.address(1), good.address.clone()];
        let outcome = refresh_with(&options(trusting(&pki)), &seeds, |_| {}).await.expect("the TLS broker answers");
        assert_eq!(outcome.winner, good.address);
        let AttemptOutcome::Failed(error) = &outcome.attempts[0].outcome else { panic!("{:?}", outcome.attempts) };
        assert_eq!(error.kind, ErrorKind::Closed, "{error}");
        assert!(error.detail.contains("does it speak TLS on this port?"), "{error}");
    })
    .await;
}

/// With retries left, a pass in which every broker's certificate was refused ends the
/// refresh: the next pass would cost every broker a TLS handshake to be refused again. A
/// broker that hangs up during the handshake is retried.
#[tokio::test]
async fn refused_certificates_everywhere_end_the_refresh_after_one_pass() {
    bounded(async {
        let pki = TestPki::new();
        let mock = Mock::start(1, &[("alpha", 1)]);
        let mut retrying = options(trusting(&pki));
        retrying.config.retry.retries = 2;
        retrying.config.retry.initial = Duration::from_millis(1);
        let leaves = [Leaf::Expired, Leaf::WrongHost, Leaf::UnknownCa];
        let mut proxies = Vec::new();
        for leaf in leaves {
            proxies.push(Proxy::start(&mock.address(1), Fault::Tls(pki.server_with(leaf))).await);
        }
        let seeds: Vec<String> = proxies.iter().map(|p| p.address.clone()).collect();
        let error = refresh_with(&retrying, &seeds, |_| {}).await.expect_err("no good broker");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(core.reason, GiveUpReason::AllFailed { passes: 1 }, "{error}");
        assert_eq!(attempts.len(), 3, "one handshake per broker: {attempts:?}");

        // Beside a plaintext broker that hangs up, every pass runs.
        let seeds = [seeds[0].clone(), mock.address(1)];
        let error = refresh_with(&retrying, &seeds, |_| {}).await.expect_err("no TLS broker answers");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(core.reason, GiveUpReason::AllFailed { passes: 3 }, "{error}");
        assert_eq!(attempts.len(), 6, "{attempts:?}");
    })
    .await;
}

/// A broker that demands a client certificate: without one the attempt fails with a TLS
/// error (in TLS 1.3 the refusal arrives after the client's side of the handshake, on the
/// first read — still classified as TLS); with one signed by its CA, it answers.
#[tokio::test]
async fn mutual_tls_needs_the_client_certificate() {
    bounded(async {
        let mut pki = TestPki::new();
        let mock = Mock::start(1, &[("alpha", 1)]);
        let proxy = Proxy::start(&mock.address(1), Fault::Tls(pki.server_requiring_client_certs())).await;
        let seeds = std::slice::from_ref(&proxy.address);

        let error = refresh_with(&options(trusting(&pki)), seeds, |_| {}).await.expect_err("no client cert");
        let detail = tls_detail(&error.attempts()[0].outcome);
        assert!(detail.to_lowercase().contains("certificate"), "{detail}");

        let (cert_file, key_file) = pki.client_cert();
        let tls = TlsOptions { client_cert: Some(ClientCert { cert_file, key_file }), ..trusting(&pki) };
        let outcome = refresh_with(&options(tls), seeds, |_| {}).await.expect("mutual TLS");
        assert_eq!(outcome.attempts[0].outcome, AttemptOutcome::Won);
    })
    .await;
}

/// Plaintext configured, but the broker speaks TLS: it answers our request with a TLS alert,
/// whose header read as a Kafka length prefix is ~352 MB. The adapter recognises the record
/// and says so (a `Tls` error), rather than reporting an oversize frame.
#[tokio::test]
async fn plaintext_to_a_tls_broker_says_the_broker_expects_tls() {
    bounded(async {
        let pki = TestPki::new();
        let mock = Mock::start(1, &[("alpha", 1)]);
        let tls = Proxy::start(&mock.address(1), Fault::Tls(pki.server.clone())).await;
        let seeds = [tls.address.clone(), mock.address(1)];
        let options = RefreshOptions { tls: None, ..options(TlsOptions::default()) };
        let outcome = refresh_with(&options, &seeds, |_| {}).await.expect("the plaintext broker answers");
        assert_eq!(outcome.winner, mock.address(1));
        let detail = tls_detail(&outcome.attempts[0].outcome);
        assert!(detail.contains("it expects TLS on this port"), "{detail}");
    })
    .await;
}
