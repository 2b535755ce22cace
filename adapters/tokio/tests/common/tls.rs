//! A throw-away PKI made with rcgen: a CA and a server certificate for `localhost` and
//! `127.0.0.1`, with the CA written to a PEM file for `TlsOptions::ca_file`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// The test CA (as a file) and a server configuration whose certificate it signed.
pub struct TestPki {
    /// PEM file of the CA certificate; removed on drop.
    pub ca_file: PathBuf,
    /// rustls server configuration presenting the CA-signed certificate.
    pub server: Arc<rustls::ServerConfig>,
}

impl TestPki {
    pub fn new() -> TestPki {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "stagger test CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);

        let server_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, "stagger test broker");
        let server_cert = params.signed_by(&server_key, &issuer).unwrap();

        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let ca_file = std::env::temp_dir().join(format!("stagger-test-ca-{}-{n}.pem", std::process::id()));
        std::fs::write(&ca_file, ca_cert.pem()).unwrap();

        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
        let server = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![server_cert.der().clone()], key)
            .unwrap();
        TestPki { ca_file, server: Arc::new(server) }
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.ca_file);
    }
}
