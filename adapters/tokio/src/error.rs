//! The adapter's error: a configuration the core (or the TLS setup) refused, or a refresh
//! that gave up — with every attempt's story, so the caller can show what each broker did.

use std::fmt;

use stagger::Trace;
use stagger::{ConfigError, RefreshError};

use stagger::report::{AttemptReport, RefreshReport};

/// Why a refresh (or a [`crate::Client`] call) produced no metadata.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Error {
    /// Refused before any broker was contacted: bad seeds (empty list, not `host:port`, a
    /// host no resolver could look up), bad policy, unusable exchange settings (client id,
    /// topic names, a frame limit below 1 KiB), unreadable TLS files.
    Config(ConfigError),
    /// The core gave up: every broker failed in every pass, the deadline passed, or a
    /// broker refused our credentials. `error` carries the last error and every broker's.
    Refresh {
        /// The core's verdict (its `Display` lists every broker's last error).
        error: RefreshError,
        /// Every attempt, in start order.
        attempts: Vec<AttemptReport>,
        /// The core's trace, when recording was asked for (boxed: traces are large and
        /// errors travel through `Result`s).
        trace: Option<Box<Trace>>,
    },
    /// The [`crate::Client`] was closed (or its background task is gone).
    Closed,
}

impl Error {
    /// The attempts of a refresh that gave up (empty for other errors).
    pub fn attempts(&self) -> &[AttemptReport] {
        match self {
            Error::Refresh { attempts, .. } => attempts,
            _ => &[],
        }
    }

    /// The core's trace of a refresh that gave up, when recording was asked for (what the
    /// CLI's `--trace FILE` writes even when the refresh fails).
    pub fn trace(&self) -> Option<&Trace> {
        match self {
            Error::Refresh { trace, .. } => trace.as_deref(),
            _ => None,
        }
    }

    /// The serialisable summary `{elapsed_ms: null, winner: null, attempts}`, for `--json`.
    pub fn report(&self) -> RefreshReport<'_> {
        RefreshReport { elapsed: None, winner: None, attempts: self.attempts() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(e) => e.fmt(f),
            Error::Refresh { error, .. } => error.fmt(f),
            Error::Closed => f.write_str("the stagger client is closed"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Config(e) => Some(e),
            Error::Refresh { error, .. } => Some(error),
            Error::Closed => None,
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e)
    }
}
