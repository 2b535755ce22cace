//! The error every adapter's API returns, and how an I/O error becomes an attempt's error.

use alloc::string::ToString;
use alloc::vec::Vec;
use core::net::SocketAddr;

use super::{AttemptReport, RefreshReport};
use crate::error::{AttemptError, ErrorKind};

/// Why a refresh (or a long-lived client's call) produced no metadata: the error every
/// adapter's API returns, so a caller matches one type whichever runtime runs it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// Refused before any broker was contacted: bad seeds (empty list, not `host:port`, a
    /// host no resolver could look up), bad policy, unusable exchange settings (client id,
    /// topic names, a frame limit below 1 KiB), unreadable TLS files.
    Config(crate::ConfigError),
    /// The policy gave up: every broker failed in every pass, the deadline passed, or a
    /// broker refused our credentials. `error` carries the last error and every broker's.
    Refresh {
        /// The policy's verdict (its `Display` lists every broker's last error).
        error: crate::RefreshError,
        /// Every attempt, in start order.
        attempts: Vec<AttemptReport>,
        /// The policy's trace, when recording was asked for (boxed: traces are large and
        /// errors travel through `Result`s).
        trace: Option<alloc::boxed::Box<crate::Trace>>,
    },
    /// The host's own machinery failed (a poll loop that could not be set up: out of file
    /// descriptors, say): nothing the brokers did. Shared, so it can go to every caller.
    Io(alloc::sync::Arc<std::io::Error>),
    /// The client was closed (or its background thread or task is gone).
    Closed,
}

impl ClientError {
    /// The attempts of a refresh that gave up (empty for other errors).
    pub fn attempts(&self) -> &[AttemptReport] {
        match self {
            ClientError::Refresh { attempts, .. } => attempts,
            _ => &[],
        }
    }

    /// The trace of a refresh that gave up, when recording was asked for (what the CLI's
    /// `--trace FILE` writes even when the refresh fails).
    pub fn trace(&self) -> Option<&crate::Trace> {
        match self {
            ClientError::Refresh { trace, .. } => trace.as_deref(),
            _ => None,
        }
    }

    /// The serialisable summary `{elapsed_ms: null, winner: null, attempts}`, for `--json`.
    pub fn report(&self) -> RefreshReport<'_> {
        RefreshReport { elapsed: None, winner: None, attempts: self.attempts() }
    }
}

impl core::fmt::Display for ClientError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ClientError::Config(e) => e.fmt(f),
            ClientError::Refresh { error, .. } => error.fmt(f),
            ClientError::Io(e) => write!(f, "the host's I/O loop failed: {e}"),
            ClientError::Closed => f.write_str("the stagger client is closed"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Config(e) => Some(e),
            ClientError::Refresh { error, .. } => Some(error),
            ClientError::Io(e) => Some(e.as_ref()),
            ClientError::Closed => None,
        }
    }
}

impl From<crate::ConfigError> for ClientError {
    fn from(e: crate::ConfigError) -> Self {
        ClientError::Config(e)
    }
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(alloc::sync::Arc::new(e))
    }
}

/// An attempt's error from a failed TCP connect to `addr`: refused means nothing listens
/// (a definite, fast "no", which the policy acts on at once).
pub fn connect_error(addr: SocketAddr, e: &std::io::Error) -> AttemptError {
    let kind = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => ErrorKind::Refused,
        std::io::ErrorKind::TimedOut => ErrorKind::ConnectTimeout,
        _ => ErrorKind::Io,
    };
    AttemptError::with_detail(kind, alloc::format!("{addr}: {e}"))
}

/// An attempt's error from a failed read or write on an established connection; `tls`
/// says the TLS layer refused the peer (a certificate, an alert, bytes that are not TLS).
pub fn io_error(e: &std::io::Error, tls: bool) -> AttemptError {
    AttemptError::with_detail(io_error_kind(e, tls), e.to_string())
}

/// What a broker closing the connection during the TLS handshake most often means: the
/// hint the adapters add to such a failure's detail.
pub const TLS_HUNG_UP: &str = "the broker hung up during the TLS handshake: does it speak TLS on this port?";

/// The kind [`io_error`] gives `e`: `Tls` when the TLS layer refused the peer, `Closed`
/// when the peer closed or reset the connection, `Io` otherwise.
pub fn io_error_kind(e: &std::io::Error, tls: bool) -> ErrorKind {
    use std::io::ErrorKind as Io;
    match e.kind() {
        _ if tls => ErrorKind::Tls,
        Io::ConnectionReset | Io::ConnectionAborted | Io::BrokenPipe | Io::UnexpectedEof => ErrorKind::Closed,
        _ => ErrorKind::Io,
    }
}
