//! TLS to the brokers (feature `tls`): rustls with the ring provider, through tokio-rustls.
//!
//! The settings are turned into a [`Connector`] once per refresh or client, so unreadable
//! files fail fast as configuration errors, and each attempt only pays for its handshake.
//! Handshake failures that rustls makes become `ErrorKind::Tls` carrying rustls's own text
//! (for example "invalid peer certificate: UnknownIssuer"), which is what a person needs to
//! fix it; a connection closed or reset under the handshake is `Closed`.

pub(crate) use imp::Connector;

#[cfg(feature = "tls")]
mod imp {
    use std::sync::Arc;

    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use stagger::{AttemptError, ConfigError, ErrorKind};
    use tokio::net::TcpStream;

    use crate::options::TlsOptions;
    use crate::transport::Transport;

    /// A ready-to-use TLS client configuration (cheap to clone).
    #[derive(Clone)]
    pub(crate) struct Connector {
        inner: tokio_rustls::TlsConnector,
        server_name: Option<String>,
    }

    impl std::fmt::Debug for Connector {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Connector").field("server_name", &self.server_name).finish_non_exhaustive()
        }
    }

    fn config_error(field: &'static str, problem: impl std::fmt::Display) -> ConfigError {
        ConfigError { field, problem: problem.to_string() }
    }

    impl Connector {
        pub(crate) fn new(options: &TlsOptions) -> Result<Self, ConfigError> {
            let mut roots = rustls::RootCertStore::empty();
            match &options.ca_file {
                Some(path) => {
                    let certs = CertificateDer::pem_file_iter(path)
                        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                        .map_err(|e| config_error("tls.ca_file", format_args!("{}: {e}", path.display())))?;
                    if certs.is_empty() {
                        return Err(config_error(
                            "tls.ca_file",
                            format_args!("{}: no PEM certificate in it", path.display()),
                        ));
                    }
                    for cert in certs {
                        roots
                            .add(cert)
                            .map_err(|e| config_error("tls.ca_file", format_args!("{}: {e}", path.display())))?;
                    }
                }
                None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let builder = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| config_error("tls", e))?
                .with_root_certificates(roots);
            let config = match &options.client_cert {
                None => builder.with_no_client_auth(),
                Some(cert) => {
                    let chain = CertificateDer::pem_file_iter(&cert.cert_file)
                        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                        .map_err(|e| {
                            config_error("tls.client_cert.cert_file", format_args!("{}: {e}", cert.cert_file.display()))
                        })?;
                    let key = PrivateKeyDer::from_pem_file(&cert.key_file).map_err(|e| {
                        config_error("tls.client_cert.key_file", format_args!("{}: {e}", cert.key_file.display()))
                    })?;
                    builder.with_client_auth_cert(chain, key).map_err(|e| config_error("tls.client_cert", e))?
                }
            };
            if let Some(name) = &options.server_name {
                ServerName::try_from(name.as_str()).map_err(|e| config_error("tls.server_name", e))?;
            }
            Ok(Connector {
                inner: tokio_rustls::TlsConnector::from(Arc::new(config)),
                server_name: options.server_name.clone(),
            })
        }

        /// Runs the TLS handshake on a connected socket to `address` (`host:port`).
        /// Secures `tcp`, verifying the broker's certificate against `host` (the session's
        /// server name: a host, no port), or the configured `server_name` instead.
        pub(crate) async fn handshake(&self, tcp: TcpStream, host: &str) -> Result<Transport, AttemptError> {
            let host = self.server_name.as_deref().unwrap_or(host);
            let name = ServerName::try_from(host.to_owned()).map_err(|e| {
                AttemptError::with_detail(ErrorKind::Tls, format!("{host:?} is not a valid TLS server name: {e}"))
            })?;
            match self.inner.connect(name, tcp).await {
                Ok(stream) => Ok(Transport::Tls(Box::new(stream))),
                Err(e) => Err(AttemptError::with_detail(handshake_kind(&e), handshake_detail(&e))),
            }
        }
    }

    /// `Tls` when rustls refused the peer (its certificate, an alert, bytes that are not
    /// TLS): the next pass would meet the same. A connection that closed or reset under the
    /// handshake is the connection's failure (`Closed`, `Io`), which a next pass may not see.
    fn handshake_kind(e: &std::io::Error) -> ErrorKind {
        let refused = e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>());
        stagger::report::io_error_kind(e, refused)
    }

    /// rustls's own text, plus what to do about the failures people meet most.
    fn handshake_detail(e: &std::io::Error) -> String {
        use rustls::CertificateError as Cert;
        use std::io::ErrorKind as Io;
        let hint = match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
            Some(rustls::Error::InvalidCertificate(Cert::UnknownIssuer)) => {
                Some("the certificate is not signed by a trusted CA: set the brokers' CA as tls.ca_file")
            }
            Some(rustls::Error::InvalidCertificate(Cert::NotValidForName | Cert::NotValidForNameContext { .. })) => {
                Some("hostname verification: use a seed name the certificate lists, or set tls.server_name")
            }
            Some(_) => None,
            None if matches!(e.kind(), Io::UnexpectedEof | Io::ConnectionReset | Io::ConnectionAborted) => {
                Some(stagger::report::TLS_HUNG_UP)
            }
            None => None,
        };
        match hint {
            Some(hint) => format!("{e} ({hint})"),
            None => e.to_string(),
        }
    }
}

#[cfg(not(feature = "tls"))]
mod imp {
    use stagger::{AttemptError, ConfigError};
    use tokio::net::TcpStream;

    use crate::options::TlsOptions;
    use crate::transport::Transport;

    /// Without the `tls` feature no connector can exist.
    #[derive(Clone, Debug)]
    pub(crate) enum Connector {}

    impl Connector {
        pub(crate) fn new(_options: &TlsOptions) -> Result<Self, ConfigError> {
            Err(ConfigError { field: "tls", problem: "stagger-tokio was built without its `tls` feature".into() })
        }

        pub(crate) async fn handshake(&self, _tcp: TcpStream, _host: &str) -> Result<Transport, AttemptError> {
            match *self {}
        }
    }
}
