//! TLS (feature `tls`) through a TLS-terminating proxy in front of a mock broker: the
//! handshake runs on the non-blocking socket, a certificate from an unknown CA fails the
//! attempt as a TLS error (and, at every broker of a pass, ends the refresh), a broker
//! hanging up during the handshake is a close, and a plaintext client at a TLS port is told
//! what it met.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use stagger::ErrorKind;
use stagger_blocking::{refresh_with, Error, RefreshOptions, Tls};
use stagger_test_faults::mock::{Mock, View};
use stagger_test_faults::proxy::{Fault, Proxy};
use stagger_test_faults::sockets::sockets_to;
use stagger_test_faults::tls::{Leaf, TestPki};
use stagger_test_faults::{background, bounded_blocking, matrix};

/// A client configuration trusting only the test CA (ring, as the tokio adapter uses).
fn trusting(pki: &TestPki) -> Tls {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&pki.ca_file).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Tls { config: Arc::new(config), server_name: None }
}

fn options(tls: Option<Tls>) -> RefreshOptions {
    RefreshOptions { config: matrix::config(), tls, ..RefreshOptions::default() }
}

#[test]
fn metadata_over_tls_matches_what_librdkafka_sees() {
    bounded_blocking(|| {
        let fixtures = background();
        let pki = TestPki::new();
        let mock = Mock::start(1, &[("alpha", 2)]);
        let proxy = fixtures.block_on(Proxy::start(&mock.address(1), Fault::Tls(pki.server.clone())));
        let outcome =
            refresh_with(&options(Some(trusting(&pki))), std::slice::from_ref(&proxy.address)).expect("TLS refresh");
        assert_eq!(View::of(&outcome.metadata), mock.view);
        assert_eq!(outcome.winner, proxy.address);
        assert_eq!(sockets_to(&[matrix::port(&proxy.address)]), 0);
    });
}

#[test]
fn a_certificate_from_an_unknown_ca_is_a_tls_error() {
    bounded_blocking(|| {
        let fixtures = background();
        let pki = TestPki::new();
        let mock = Mock::start(1, &[("alpha", 1)]);
        let proxy = fixtures.block_on(Proxy::start(&mock.address(1), Fault::Tls(pki.server_with(Leaf::UnknownCa))));
        let error =
            refresh_with(&options(Some(trusting(&pki))), std::slice::from_ref(&proxy.address)).expect_err("untrusted");
        let Error::Refresh { attempts, .. } = &error else { panic!("{error}") };
        let failure = attempts[0].error().expect("failed");
        assert_eq!(failure.kind, ErrorKind::Tls, "{failure}");
        assert!(failure.to_string().contains("UnknownIssuer"), "{failure}");
        assert_eq!(sockets_to(&[matrix::port(&proxy.address)]), 0);
    });
}

#[test]
fn a_plaintext_client_at_a_tls_port_is_told_so() {
    bounded_blocking(|| {
        let fixtures = background();
        let pki = TestPki::new();
        let mock = Mock::start(1, &[("alpha", 1)]);
        let proxy = fixtures.block_on(Proxy::start(&mock.address(1), Fault::Tls(pki.server.clone())));
        let error = refresh_with(&options(None), std::slice::from_ref(&proxy.address)).expect_err("plaintext at TLS");
        let Error::Refresh { attempts, .. } = &error else { panic!("{error}") };
        let failure = attempts[0].error().expect("failed");
        assert_eq!(failure.kind, ErrorKind::Tls, "{failure}");
        assert!(failure.to_string().contains("configure TLS"), "{failure}");
    });
}

/// With retries left: certificates refused at every broker end the refresh after one pass;
/// a plaintext broker hanging up on the ClientHello is a close (with a hint), retried.
#[test]
fn refused_certificates_end_the_refresh_and_a_hang_up_is_retried() {
    bounded_blocking(|| {
        let fixtures = background();
        let pki = TestPki::new();
        let mock = Mock::start(1, &[("alpha", 1)]);
        let untrusted = fixtures.block_on(Proxy::start(&mock.address(1), Fault::Tls(pki.server_with(Leaf::UnknownCa))));
        let mut retrying = options(Some(trusting(&pki)));
        retrying.config.retry.retries = 2;
        retrying.config.retry.initial = std::time::Duration::from_millis(1);

        let error = refresh_with(&retrying, std::slice::from_ref(&untrusted.address)).expect_err("untrusted");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(core.reason, stagger::GiveUpReason::AllFailed { passes: 1 }, "{error}");
        assert_eq!(attempts.len(), 1, "one handshake, no retry: {attempts:?}");

        let error = refresh_with(&retrying, &[mock.address(1)]).expect_err("plaintext broker");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(core.reason, stagger::GiveUpReason::AllFailed { passes: 3 }, "{error}");
        let failure = attempts[0].error().expect("failed");
        assert_eq!(failure.kind, ErrorKind::Closed, "{failure}");
        assert!(failure.to_string().contains("does it speak TLS on this port?"), "{failure}");
    });
}
