//! A throw-away PKI made with rcgen: a CA and a server certificate for `localhost` and
//! `127.0.0.1`, with the CA written to a PEM file for `TlsOptions::ca_file` — plus the bad
//! certificates TLS hardening is tested with (expired, for another host, from an unknown CA)
//! and a client certificate for mutual TLS.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// What a server certificate is like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaf {
    /// Signed by the test CA, for `localhost` and `127.0.0.1`, valid now.
    Good,
    /// As `Good`, but its validity ended in 2001.
    Expired,
    /// Signed by the test CA and valid now, but only for `kafka.example.com`.
    WrongHost,
    /// For `localhost` and `127.0.0.1`, valid now, but signed by a CA nobody trusts.
    UnknownCa,
    /// Only for `localhost` (no IP address): good by name, wrong by IP.
    LocalhostOnly,
}

/// The test CA (as a file) and a server configuration whose certificate it signed.
pub struct TestPki {
    /// PEM file of the CA certificate; removed on drop.
    pub ca_file: PathBuf,
    /// rustls server configuration presenting the CA-signed certificate.
    pub server: Arc<rustls::ServerConfig>,
    issuer: Issuer<'static, KeyPair>,
    ca_der: CertificateDer<'static>,
    files: Vec<PathBuf>,
}

impl TestPki {
    /// A fresh CA and every certificate the tests use, written to a temporary directory.
    pub fn new() -> TestPki {
        let (issuer, ca_cert) = new_ca("stagger test CA");
        let ca_file = temp_file("ca", &ca_cert.pem());
        let server = server_config(&issuer, Leaf::Good, None);
        TestPki { ca_file, server, issuer, ca_der: ca_cert.der().clone(), files: Vec::new() }
    }

    /// A server configuration presenting a certificate of kind `leaf`.
    pub fn server_with(&self, leaf: Leaf) -> Arc<rustls::ServerConfig> {
        if leaf == Leaf::UnknownCa {
            let (stranger, _) = new_ca("a CA nobody trusts");
            return server_config(&stranger, Leaf::Good, None);
        }
        server_config(&self.issuer, leaf, None)
    }

    /// A server configuration presenting the good certificate and *requiring* a client
    /// certificate signed by the test CA (mutual TLS).
    pub fn server_requiring_client_certs(&self) -> Arc<rustls::ServerConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider()).build().unwrap();
        server_config(&self.issuer, Leaf::Good, Some(verifier))
    }

    /// A client certificate signed by the test CA, as PEM files (certificate, key).
    pub fn client_cert(&mut self) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["stagger-client".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, "stagger test client");
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let cert_file = temp_file("client-cert", &cert.pem());
        let key_file = temp_file("client-key", &key.serialize_pem());
        self.files.extend([cert_file.clone(), key_file.clone()]);
        (cert_file, key_file)
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.ca_file);
        for file in &self.files {
            let _ = std::fs::remove_file(file);
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn new_ca(name: &str) -> (Issuer<'static, KeyPair>, rcgen::Certificate) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, name);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    (Issuer::new(ca_params, ca_key), ca_cert)
}

fn server_config(
    issuer: &Issuer<'static, KeyPair>,
    leaf: Leaf,
    client_verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
) -> Arc<rustls::ServerConfig> {
    let names: Vec<String> = match leaf {
        Leaf::WrongHost => vec!["kafka.example.com".into()],
        Leaf::LocalhostOnly => vec!["localhost".into()],
        _ => vec!["localhost".into(), "127.0.0.1".into()],
    };
    let server_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(names).unwrap();
    params.distinguished_name.push(DnType::CommonName, "stagger test broker");
    if leaf == Leaf::Expired {
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
    }
    let server_cert = params.signed_by(&server_key, issuer).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let builder =
        rustls::ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions().unwrap();
    let builder = match client_verifier {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    Arc::new(builder.with_single_cert(vec![server_cert.der().clone()], key).unwrap())
}

fn temp_file(what: &str, contents: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let path = std::env::temp_dir().join(format!("stagger-test-{what}-{}-{n}.pem", std::process::id()));
    std::fs::write(&path, contents).unwrap();
    path
}
