//! The adapter's error: a configuration the core refused, a refresh that gave up (with every
//! attempt's report), or the operating system refusing the poll loop itself.

use std::fmt;
use std::sync::Arc;

use stagger::{ConfigError, RefreshError};

use stagger::report::AttemptReport;

/// Why a refresh (or a [`crate::Client`] call) produced no metadata.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Error {
    /// Refused before any broker was contacted: bad seeds (empty, not `host:port`, a host no
    /// resolver could look up), bad policy, unusable exchange settings.
    Config(ConfigError),
    /// The core gave up: every broker failed in every pass, the deadline passed, or a broker
    /// refused our credentials. `error` carries the last error and every broker's.
    Refresh {
        /// The core's verdict (its `Display` lists every broker's last error).
        error: RefreshError,
        /// Every attempt, in start order (from a [`crate::Client`], read from the core's
        /// record of the finished refresh).
        attempts: Vec<AttemptReport>,
    },
    /// The poll loop could not be set up or polled (out of file descriptors, say): nothing
    /// the brokers did. Shared, so the error can be cloned to every waiting caller.
    Io(Arc<std::io::Error>),
    /// The [`crate::Client`] was closed (or its thread is gone).
    Closed,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(e) => e.fmt(f),
            Error::Refresh { error, .. } => error.fmt(f),
            Error::Io(e) => write!(f, "the poll loop failed: {e}"),
            Error::Closed => f.write_str("the stagger client is closed"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Config(e) => Some(e),
            Error::Refresh { error, .. } => Some(error),
            Error::Io(e) => Some(e.as_ref()),
            Error::Closed => None,
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(Arc::new(e))
    }
}
