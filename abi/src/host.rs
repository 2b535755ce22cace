//! The host's side of the batch encoding (`docs/abi.md`): events as a host writes them and
//! actions as a host reads them. The tests drive the ABI with it exactly as a Go or Python
//! host does, the conformance suite can generate its scripts with it, and a Rust host could
//! use it as is. Its `Debug` output never prints a token, a nonce or the bytes of a `SEND`.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use stagger::kafka::sasl::Nonce;
use stagger::ErrorKind;

use crate::codes::*;
use crate::wire::{header, Reader, WireError, ERROR_KINDS, RECORD_HEADER, VERSION};

/// One event as a host writes it (owned, so a host can build a batch before encoding it).
#[derive(Clone, PartialEq, Eq)]
pub enum HostEvent {
    /// `CONNECTED`.
    Connected(u64),
    /// `SECURED`.
    Secured(u64),
    /// `RECEIVED`: conn and bytes.
    Received(u64, Vec<u8>),
    /// `CLOSED`: conn and whether it was reset.
    Closed(u64, bool),
    /// `IO_ERROR`: conn, kind byte, code, detail.
    IoError(u64, u8, i16, String),
    /// `RESOLVED`: lookup and addresses (with the port the name was looked up with).
    Resolved(u64, Vec<SocketAddr>),
    /// `RESOLVE_FAILED`: lookup, kind byte, code, detail.
    ResolveFailed(u64, u8, i16, String),
    /// `NONCE`: conn and the 18 bytes.
    Nonce(u64, Nonce),
    /// `TOKEN`: conn and the token.
    Token(u64, String),
    /// `TOKEN_FAILED`: conn and why.
    TokenFailed(u64, String),
    /// `REQUEST_REFRESH`: cause byte and the broker's `host:port` (empty for none).
    RequestRefresh(u8, String),
    /// Any record, raw (tests of malformed input).
    Raw(u8, Vec<u8>),
}

/// Tokens are secrets: a host's `Debug` of its events must not print them.
impl fmt::Debug for HostEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostEvent::Token(conn, _) => write!(f, "Token({conn}, <redacted>)"),
            HostEvent::Nonce(conn, _) => write!(f, "Nonce({conn}, <redacted>)"),
            HostEvent::Received(conn, bytes) => write!(f, "Received({conn}, {} bytes)", bytes.len()),
            HostEvent::Connected(c) => write!(f, "Connected({c})"),
            HostEvent::Secured(c) => write!(f, "Secured({c})"),
            HostEvent::Closed(c, reset) => write!(f, "Closed({c}, reset: {reset})"),
            HostEvent::IoError(c, k, code, d) => write!(f, "IoError({c}, {k}, {code}, {d:?})"),
            HostEvent::Resolved(l, a) => write!(f, "Resolved({l}, {a:?})"),
            HostEvent::ResolveFailed(l, k, code, d) => write!(f, "ResolveFailed({l}, {k}, {code}, {d:?})"),
            HostEvent::TokenFailed(c, why) => write!(f, "TokenFailed({c}, {why:?})"),
            HostEvent::RequestRefresh(cause, b) => write!(f, "RequestRefresh({cause}, {b:?})"),
            HostEvent::Raw(kind, body) => write!(f, "Raw({kind}, {} bytes)", body.len()),
        }
    }
}

/// The error kind bytes by name, for hosts that map their OS errors (`refused` → 2).
pub fn error_kind_byte(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::BrokerError(_) => STAGGER_ERROR_BROKER,
        kind => ERROR_KINDS.iter().find(|(_, k)| *k == kind).map_or(13, |(b, _)| *b),
    }
}

/// Encodes `events` as one batch.
pub fn encode_events(events: &[HostEvent]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(events.len() as u32).to_le_bytes());
    for e in events {
        let mut body = Vec::new();
        let kind = match e {
            HostEvent::Connected(c) => {
                body.extend_from_slice(&c.to_le_bytes());
                STAGGER_EVENT_CONNECTED
            }
            HostEvent::Secured(c) => {
                body.extend_from_slice(&c.to_le_bytes());
                STAGGER_EVENT_SECURED
            }
            HostEvent::Received(c, bytes) => {
                body.extend_from_slice(&c.to_le_bytes());
                body.extend_from_slice(bytes);
                STAGGER_EVENT_RECEIVED
            }
            HostEvent::Closed(c, reset) => {
                body.extend_from_slice(&c.to_le_bytes());
                body.push(u8::from(*reset));
                STAGGER_EVENT_CLOSED
            }
            HostEvent::IoError(c, kind, code, detail) => {
                body.extend_from_slice(&c.to_le_bytes());
                body.push(*kind);
                body.extend_from_slice(&code.to_le_bytes());
                body.extend_from_slice(detail.as_bytes());
                STAGGER_EVENT_IO_ERROR
            }
            HostEvent::Resolved(lookup, addresses) => {
                body.extend_from_slice(&lookup.to_le_bytes());
                for a in addresses {
                    match a.ip() {
                        IpAddr::V4(v4) => {
                            body.push(4);
                            body.extend_from_slice(&v4.octets());
                        }
                        IpAddr::V6(v6) => {
                            body.push(6);
                            body.extend_from_slice(&v6.octets());
                        }
                    }
                    body.extend_from_slice(&a.port().to_le_bytes());
                }
                STAGGER_EVENT_RESOLVED
            }
            HostEvent::ResolveFailed(lookup, kind, code, detail) => {
                body.extend_from_slice(&lookup.to_le_bytes());
                body.push(*kind);
                body.extend_from_slice(&code.to_le_bytes());
                body.extend_from_slice(detail.as_bytes());
                STAGGER_EVENT_RESOLVE_FAILED
            }
            HostEvent::Nonce(c, nonce) => {
                body.extend_from_slice(&c.to_le_bytes());
                body.extend_from_slice(nonce);
                STAGGER_EVENT_NONCE
            }
            HostEvent::Token(c, text) | HostEvent::TokenFailed(c, text) => {
                body.extend_from_slice(&c.to_le_bytes());
                body.extend_from_slice(text.as_bytes());
                if matches!(e, HostEvent::Token(..)) {
                    STAGGER_EVENT_TOKEN
                } else {
                    STAGGER_EVENT_TOKEN_FAILED
                }
            }
            HostEvent::RequestRefresh(cause, broker) => {
                body.push(*cause);
                body.extend_from_slice(broker.as_bytes());
                STAGGER_EVENT_REQUEST_REFRESH
            }
            HostEvent::Raw(kind, raw) => {
                body.extend_from_slice(raw);
                *kind
            }
        };
        out.push(kind);
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&body);
    }
    out
}

/// One action as a host reads it, borrowing the batch.
#[derive(Clone, PartialEq, Eq)]
pub enum HostAction<'a> {
    /// `DIAL`: conn, `host:port`, and the TLS server name if TLS.
    Dial {
        /// The session's name for the connection.
        conn: u64,
        /// `host:port`.
        address: &'a str,
        /// The name TLS verifies, when the session speaks TLS.
        tls: Option<&'a str>,
    },
    /// `SEND`: conn and the bytes to write.
    Send {
        /// Which connection.
        conn: u64,
        /// One request frame (SASL ones carry credentials).
        bytes: &'a [u8],
    },
    /// `CLOSE`.
    Close {
        /// Which connection.
        conn: u64,
    },
    /// `RESOLVE`.
    Resolve {
        /// The lookup's id, for the answer.
        lookup: u64,
        /// `host:port`.
        name: &'a str,
    },
    /// `NEED_NONCE`.
    NeedNonce {
        /// Which connection.
        conn: u64,
    },
    /// `NEED_TOKEN`.
    NeedToken {
        /// Which connection.
        conn: u64,
    },
    /// `REFRESHED`.
    Refreshed {
        /// The refresh's epoch.
        epoch: u32,
        /// The broker's index in the session's book.
        broker: u32,
        /// Its `host:port`.
        address: &'a str,
    },
    /// `REFRESH_FAILED`.
    RefreshFailed {
        /// The refresh's epoch.
        epoch: u32,
        /// The error, JSON.
        error: &'a str,
    },
    /// `REBOOTSTRAPPED`.
    Rebootstrapped,
    /// `REFRESH_REQUESTED`.
    RefreshRequested {
        /// The epoch the request joined or started.
        epoch: u32,
    },
}

/// SEND bytes may carry credentials (SASL frames): a host's `Debug` prints only their length.
impl fmt::Debug for HostAction<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostAction::Dial { conn, address, tls } => write!(f, "Dial({conn}, {address:?}, tls: {tls:?})"),
            HostAction::Send { conn, bytes } => write!(f, "Send({conn}, {} bytes)", bytes.len()),
            HostAction::Close { conn } => write!(f, "Close({conn})"),
            HostAction::Resolve { lookup, name } => write!(f, "Resolve({lookup}, {name:?})"),
            HostAction::NeedNonce { conn } => write!(f, "NeedNonce({conn})"),
            HostAction::NeedToken { conn } => write!(f, "NeedToken({conn})"),
            HostAction::Refreshed { epoch, broker, address } => write!(f, "Refreshed({epoch}, {broker}, {address:?})"),
            HostAction::RefreshFailed { epoch, error } => write!(f, "RefreshFailed({epoch}, {error})"),
            HostAction::Rebootstrapped => f.write_str("Rebootstrapped"),
            HostAction::RefreshRequested { epoch } => write!(f, "RefreshRequested({epoch})"),
        }
    }
}

/// A decoded action batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostActions<'a> {
    /// When to step next (host ns), if ever.
    pub next_wakeup_ns: Option<u64>,
    /// The actions, in order.
    pub actions: Vec<HostAction<'a>>,
}

/// Decodes an action batch as a host does.
pub fn decode_actions(bytes: &[u8]) -> Result<HostActions<'_>, WireError> {
    let mut r = Reader { bytes, at: 0 };
    let count = header(&mut r, "action batch")?;
    let fail = |m: String| WireError { message: format!("action batch: {m}") };
    let wakeup = r.u64("the next wake-up").map_err(fail)?;
    let mut actions = Vec::with_capacity((count as usize).min(bytes.len() / RECORD_HEADER));
    for index in 0..count {
        let fail = |m: String| WireError { message: format!("action {index}: {m}") };
        let kind = r.u8("the kind").map_err(fail)?;
        let len = r.u32("the body length").map_err(fail)?;
        let body = r.take(len as usize, "the body").map_err(fail)?;
        let mut b = Reader { bytes: body, at: 0 };
        let action = (|| {
            Ok(match kind {
                STAGGER_ACTION_DIAL => {
                    let conn = b.u64("conn")?;
                    let tls = b.u8("tls")?;
                    let n = b.u16("address length")?;
                    let address =
                        std::str::from_utf8(b.take(n.into(), "address")?).map_err(|_| "address is not UTF-8")?;
                    let name = b.text("server name")?;
                    HostAction::Dial { conn, address, tls: (tls == 1).then_some(name) }
                }
                STAGGER_ACTION_SEND => HostAction::Send { conn: b.u64("conn")?, bytes: b.rest() },
                STAGGER_ACTION_CLOSE => HostAction::Close { conn: b.u64("conn")? },
                STAGGER_ACTION_RESOLVE => HostAction::Resolve { lookup: b.u64("lookup")?, name: b.text("name")? },
                STAGGER_ACTION_NEED_NONCE => HostAction::NeedNonce { conn: b.u64("conn")? },
                STAGGER_ACTION_NEED_TOKEN => HostAction::NeedToken { conn: b.u64("conn")? },
                STAGGER_ACTION_REFRESHED => HostAction::Refreshed {
                    epoch: b.u32("epoch")?,
                    broker: b.u32("broker")?,
                    address: b.text("address")?,
                },
                STAGGER_ACTION_REFRESH_FAILED => {
                    HostAction::RefreshFailed { epoch: b.u32("epoch")?, error: b.text("error")? }
                }
                STAGGER_ACTION_REBOOTSTRAPPED => HostAction::Rebootstrapped,
                STAGGER_ACTION_REFRESH_REQUESTED => HostAction::RefreshRequested { epoch: b.u32("epoch")? },
                other => return Err(format!("unknown action kind {other}")),
            })
        })()
        .map_err(fail)?;
        if !b.is_done() {
            return Err(fail("bytes after the body's last field".into()));
        }
        actions.push(action);
    }
    if !r.is_done() {
        return Err(fail("bytes after the last action".into()));
    }
    Ok(HostActions { next_wakeup_ns: (wakeup != STAGGER_NO_WAKEUP).then_some(wakeup), actions })
}
