//! TLS through a TLS-terminating proxy (tokio-rustls, rcgen-made CA) in front of a mock
//! broker: success with the CA, a clear certificate error without it or for the wrong name.

use stagger::{ErrorKind, RefreshConfig};
use stagger_test_faults::bounded;
use stagger_test_faults::mock::Mock;
use stagger_test_faults::proxy::{Fault, Proxy};
use stagger_test_faults::tls::TestPki;
use stagger_tokio::{refresh_with, AttemptOutcome, Error, RefreshOptions, TlsOptions};

async fn refresh_through_tls(tls: TlsOptions) -> Result<stagger_tokio::RefreshOutcome, Error> {
    let pki = TestPki::new();
    let mock = Mock::start(1, &[("alpha", 2)]);
    let proxy = Proxy::start(&mock.address(1), Fault::Tls(pki.server.clone())).await;
    let mut config = RefreshConfig::default();
    config.retry.retries = 0;
    let tls = TlsOptions { ca_file: tls.ca_file.map(|_| pki.ca_file.clone()), ..tls };
    let options = RefreshOptions { config, tls: Some(tls), ..RefreshOptions::default() };
    refresh_with(&options, std::slice::from_ref(&proxy.address), |_| {}).await
}

fn tls_error(result: Result<stagger_tokio::RefreshOutcome, Error>) -> String {
    let error = result.expect_err("the handshake must fail");
    let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
    let last = core.brokers[0].last_error.clone().expect("an error");
    assert_eq!(last.kind, ErrorKind::Tls, "{last}");
    assert!(matches!(&attempts[0].outcome, AttemptOutcome::Failed(e) if e.kind == ErrorKind::Tls));
    assert!(attempts[0].connected.is_some(), "TCP was up; TLS failed");
    assert!(attempts[0].answered.is_none(), "no Kafka answer without a TLS session");
    last.detail.into_owned()
}

#[tokio::test]
async fn tls_with_the_ca_succeeds() {
    bounded(async {
        // `ca_file: Some(_)` is replaced by the test PKI's CA file.
        let tls = TlsOptions { ca_file: Some("ca.pem".into()), ..TlsOptions::default() };
        let outcome = refresh_through_tls(tls).await.expect("refresh over TLS");
        assert_eq!(outcome.attempts[0].outcome, AttemptOutcome::Won);
        assert!(outcome.attempts[0].answered.is_some(), "the first answer over TLS is reported too");
        assert_eq!(outcome.metadata.brokers.len(), 1);
    })
    .await;
}

#[tokio::test]
async fn tls_without_the_ca_fails_with_a_certificate_error() {
    bounded(async {
        let detail = tls_error(refresh_through_tls(TlsOptions::default()).await);
        assert!(detail.contains("invalid peer certificate") && detail.contains("UnknownIssuer"), "{detail}");
    })
    .await;
}

#[tokio::test]
async fn tls_verifies_the_host_name() {
    bounded(async {
        let tls = TlsOptions {
            ca_file: Some("ca.pem".into()),
            server_name: Some("kafka.example.com".into()),
            ..TlsOptions::default()
        };
        let detail = tls_error(refresh_through_tls(tls).await);
        assert!(detail.contains("not valid for name"), "{detail}");
    })
    .await;
}

#[tokio::test]
async fn an_unreadable_ca_file_is_a_configuration_error() {
    let tls = TlsOptions { ca_file: Some("/nonexistent/ca.pem".into()), ..TlsOptions::default() };
    let options = RefreshOptions { tls: Some(tls), ..RefreshOptions::default() };
    let error = refresh_with(&options, &["127.0.0.1:9"], |_| {}).await.unwrap_err();
    assert!(matches!(&error, Error::Config(e) if e.field == "tls.ca_file"), "{error}");
}
