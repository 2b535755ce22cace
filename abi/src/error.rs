//! The ABI's own errors: a status a host can switch on, and JSON with a message a person can
//! act on (and the config field at fault). A failed refresh is not one of them: it is an
//! action (`REFRESH_FAILED`), because the session goes on after it.

use serde_json::{json, Value};

use crate::codes::{
    STAGGER_ERR_ARGUMENT, STAGGER_ERR_CONFIG, STAGGER_ERR_MALFORMED, STAGGER_ERR_PANIC, STAGGER_ERR_POISONED,
    STAGGER_ERR_UNKNOWN_HANDLE,
};

/// An error of an ABI call: what a host reads as JSON
/// (`{"status", "error", "field", "message"}`) beside the status the call returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbiError {
    /// The status the call returns (`STAGGER_ERR_*`).
    pub status: i32,
    /// The config field at fault, as a dotted path (`settings.fanout.jitter`), if any.
    pub field: Option<String>,
    /// What went wrong, in words.
    pub message: String,
}

impl AbiError {
    /// A bad session config: `field` is its dotted path in the config JSON.
    pub fn config(field: impl Into<String>, message: impl Into<String>) -> AbiError {
        AbiError { status: STAGGER_ERR_CONFIG, field: Some(field.into()), message: message.into() }
    }

    /// An error of `status` without a field.
    pub fn new(status: i32, message: impl Into<String>) -> AbiError {
        AbiError { status, field: None, message: message.into() }
    }

    /// The status's name in JSON (`config`, `malformed_batch`, …).
    pub fn name(&self) -> &'static str {
        match self.status {
            STAGGER_ERR_CONFIG => "config",
            STAGGER_ERR_MALFORMED => "malformed_batch",
            STAGGER_ERR_UNKNOWN_HANDLE => "unknown_handle",
            STAGGER_ERR_POISONED => "poisoned",
            STAGGER_ERR_PANIC => "panic",
            STAGGER_ERR_ARGUMENT => "argument",
            _ => "error",
        }
    }

    /// The error as the JSON a host reads.
    pub fn to_json(&self) -> Value {
        json!({ "status": self.status, "error": self.name(), "field": self.field, "message": self.message })
    }
}

impl std::fmt::Display for AbiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{} ({field}): {}", self.name(), self.message),
            None => write!(f, "{}: {}", self.name(), self.message),
        }
    }
}

impl std::error::Error for AbiError {}
