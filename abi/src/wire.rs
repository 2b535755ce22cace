//! The binary encoding of the hot messages: a batch of events in (what the host saw), a batch
//! of actions out (what the session asks), both little-endian, versioned by the ABI version.
//! `docs/abi.md` is the byte-exact description hosts implement against; this module is the
//! session's side (decode events, encode actions), [`crate::host`] the host's side of the
//! same layouts, so the doc, the ABI and the tests cannot drift apart.
//!
//! A batch is an 8-byte header (version, flags, count) and `count` records; a record is a
//! kind byte, a `u32` body length and the body. Kafka bytes travel raw in a body (never
//! base64); the only JSON on this path is a failed refresh's error, which is rare and rich.
//! Decoding never trusts a length: every read is checked against what is there, nothing is
//! reserved from a count the input claims, and a malformed batch is refused whole, with
//! where and why, before any of its events is applied.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use stagger::kafka::sasl::{Nonce, Secret};
use stagger::session::{Action, CloseKind, ConnId, Event};
use stagger::{AttemptError, AttemptId, ErrorKind, RefreshCause};

use crate::codes::*;
use crate::json;

/// The version field of a batch header: the ABI version.
pub(crate) const VERSION: u16 = STAGGER_ABI_VERSION as u16;

/// The size of a batch header: version `u16`, flags `u16`, record count `u32`.
pub const BATCH_HEADER: usize = 8;
/// The size of an action batch's header: the batch header and the next wake-up (`u64` ns).
pub const ACTIONS_HEADER: usize = BATCH_HEADER + 8;
/// The size of a record header: kind `u8`, body length `u32`.
pub const RECORD_HEADER: usize = 5;
/// The most bytes of a host's error text (`IO_ERROR`, `RESOLVE_FAILED`, `TOKEN_FAILED`) an
/// attempt's error keeps: enough to say what the OS said, and no error grows with a hostile
/// host's input.
pub const MAX_DETAIL: usize = 1024;

/// Why a batch was refused: where and what, in words a host developer can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError {
    /// The problem, naming the record (index and kind) and the byte offset.
    pub message: String,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for WireError {}

/// One decoded event record: a session event, or a request for a refresh (which the session
/// takes through its own call, not as an [`Event`]).
#[derive(Debug)]
pub enum Incoming<'a> {
    /// What happened on a connection or a lookup, or a nonce or token.
    Event(Event<'a>),
    /// Ask for fresh metadata, saying why and, optionally, which broker was in trouble.
    RequestRefresh {
        /// Why (the policy reads it: a failover's causes make the refresh gentle).
        cause: RefreshCause,
        /// The troubled broker's `host:port`, as the session's actions named it.
        broker: Option<&'a str>,
    },
}

/// `ErrorKind` ↔ its byte in `IO_ERROR` and `RESOLVE_FAILED` (0 is no kind, so a zeroed
/// buffer is refused rather than read as a DNS failure); `BrokerError` is
/// [`STAGGER_ERROR_BROKER`], its code beside it.
pub(crate) const ERROR_KINDS: [(u8, ErrorKind); 12] = [
    (STAGGER_ERROR_DNS, ErrorKind::Dns),
    (STAGGER_ERROR_REFUSED, ErrorKind::Refused),
    (STAGGER_ERROR_CONNECT_TIMEOUT, ErrorKind::ConnectTimeout),
    (STAGGER_ERROR_RESPONSE_TIMEOUT, ErrorKind::ResponseTimeout),
    (STAGGER_ERROR_CLOSED, ErrorKind::Closed),
    (STAGGER_ERROR_PROTOCOL, ErrorKind::Protocol),
    (STAGGER_ERROR_FRAME_TOO_LARGE, ErrorKind::FrameTooLarge),
    (STAGGER_ERROR_NO_BROKERS, ErrorKind::NoBrokers),
    (STAGGER_ERROR_TLS, ErrorKind::Tls),
    (STAGGER_ERROR_AUTHENTICATION, ErrorKind::Authentication),
    (STAGGER_ERROR_AUTHORIZATION, ErrorKind::Authorization),
    (STAGGER_ERROR_IO, ErrorKind::Io),
];

/// `RefreshCause` ↔ its byte in `REQUEST_REFRESH`.
pub(crate) const CAUSES: [(u8, RefreshCause); 6] = [
    (STAGGER_CAUSE_REQUESTED, RefreshCause::Requested),
    (STAGGER_CAUSE_BOOTSTRAP, RefreshCause::Bootstrap),
    (STAGGER_CAUSE_PERIODIC, RefreshCause::Periodic),
    (STAGGER_CAUSE_STALE_METADATA, RefreshCause::StaleMetadata),
    (STAGGER_CAUSE_CONNECTION_LOST, RefreshCause::ConnectionLost),
    (STAGGER_CAUSE_REQUEST_TIMED_OUT, RefreshCause::RequestTimedOut),
];

fn event_name(kind: u8) -> &'static str {
    match kind {
        STAGGER_EVENT_CONNECTED => "CONNECTED",
        STAGGER_EVENT_SECURED => "SECURED",
        STAGGER_EVENT_RECEIVED => "RECEIVED",
        STAGGER_EVENT_CLOSED => "CLOSED",
        STAGGER_EVENT_IO_ERROR => "IO_ERROR",
        STAGGER_EVENT_RESOLVED => "RESOLVED",
        STAGGER_EVENT_RESOLVE_FAILED => "RESOLVE_FAILED",
        STAGGER_EVENT_NONCE => "NONCE",
        STAGGER_EVENT_TOKEN => "TOKEN",
        STAGGER_EVENT_TOKEN_FAILED => "TOKEN_FAILED",
        STAGGER_EVENT_REQUEST_REFRESH => "REQUEST_REFRESH",
        _ => "unknown",
    }
}

/// Bounds-checked little-endian reads over one slice; every failure says what was wanted.
pub(crate) struct Reader<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let left = self.bytes.len() - self.at;
        if left < n {
            return Err(format!("{what} needs {n} bytes, {left} left"));
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &str) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    fn i16(&mut self, what: &str) -> Result<i16, String> {
        Ok(i16::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let out = &self.bytes[self.at..];
        self.at = self.bytes.len();
        out
    }

    pub(crate) fn text(&mut self, what: &str) -> Result<&'a str, String> {
        let at = self.at;
        std::str::from_utf8(self.rest())
            .map_err(|e| format!("{what} is not UTF-8 (byte {} of it)", e.valid_up_to() + at))
    }

    pub(crate) fn is_done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

/// Reads the header of a batch: checks the version and flags, returns the record count.
pub(crate) fn header(r: &mut Reader<'_>, what: &str) -> Result<u32, WireError> {
    let fail = |message: String| WireError { message: format!("{what} header: {message}") };
    let version = r.u16("the version").map_err(fail)?;
    if version != VERSION {
        return Err(fail(format!(
            "version {version}, but this module speaks version {} (see stagger_abi_version)",
            STAGGER_ABI_VERSION
        )));
    }
    let flags = r.u16("the flags").map_err(fail)?;
    if flags != 0 {
        return Err(fail(format!("flags {flags:#06x}, but no flag is defined: they must be 0")));
    }
    r.u32("the record count").map_err(fail)
}

/// Decodes a whole event batch, or says where it is malformed. Nothing is applied from a
/// batch that fails: a host gets either every event taken or none.
pub fn decode_events(bytes: &[u8]) -> Result<Vec<Incoming<'_>>, WireError> {
    let mut r = Reader { bytes, at: 0 };
    let count = header(&mut r, "event batch")?;
    // Never reserve from a claimed count: at most what the bytes could hold.
    let mut out = Vec::with_capacity((count as usize).min(bytes.len() / RECORD_HEADER));
    for index in 0..count {
        let at = r.at;
        let fail = |kind: Option<u8>, message: String| {
            let name = kind.map_or(String::new(), |k| format!(" ({})", event_name(k)));
            WireError { message: format!("event {index}{name} at byte {at}: {message}") }
        };
        let kind = r.u8("the record kind").map_err(|m| fail(None, m))?;
        let len = r.u32("the body length").map_err(|m| fail(Some(kind), m))?;
        let body = r.take(len as usize, "the body").map_err(|m| fail(Some(kind), m))?;
        out.push(decode_event(kind, body).map_err(|m| fail(Some(kind), m))?);
    }
    if !r.is_done() {
        let extra = bytes.len() - r.at;
        return Err(WireError {
            message: format!("event batch: {extra} bytes after the {count} records its header counts"),
        });
    }
    Ok(out)
}

fn decode_event(kind: u8, body: &[u8]) -> Result<Incoming<'_>, String> {
    let mut r = Reader { bytes: body, at: 0 };
    let event = match kind {
        STAGGER_EVENT_CONNECTED => Event::Connected { conn: conn(&mut r)? },
        STAGGER_EVENT_SECURED => Event::Secured { conn: conn(&mut r)? },
        STAGGER_EVENT_RECEIVED => Event::Received { conn: conn(&mut r)?, bytes: r.rest() },
        STAGGER_EVENT_CLOSED => {
            let conn = conn(&mut r)?;
            let how = match r.u8("how")? {
                0 => CloseKind::Clean,
                1 => CloseKind::Reset,
                other => return Err(format!("how {other}: 0 (clean) or 1 (reset)")),
            };
            Event::Closed { conn, how }
        }
        STAGGER_EVENT_IO_ERROR => Event::IoError { conn: conn(&mut r)?, error: attempt_error(&mut r)? },
        STAGGER_EVENT_RESOLVED => {
            let lookup = AttemptId(r.u64("the lookup")?);
            let mut addresses = Vec::new();
            while !r.is_done() {
                let ip = match r.u8("an address family")? {
                    4 => IpAddr::V4(Ipv4Addr::from(r.array::<4>("an IPv4 address")?)),
                    6 => IpAddr::V6(Ipv6Addr::from(r.array::<16>("an IPv6 address")?)),
                    other => return Err(format!("address family {other}: 4 or 6")),
                };
                addresses.push(SocketAddr::new(ip, r.u16("a port")?));
            }
            Event::Resolved { lookup, result: Ok(addresses) }
        }
        STAGGER_EVENT_RESOLVE_FAILED => {
            let lookup = AttemptId(r.u64("the lookup")?);
            Event::Resolved { lookup, result: Err(attempt_error(&mut r)?) }
        }
        STAGGER_EVENT_NONCE => {
            let conn = conn(&mut r)?;
            let bytes: Nonce = r.array("the nonce (18 bytes)")?;
            Event::Nonce { conn, bytes }
        }
        STAGGER_EVENT_TOKEN => {
            let conn = conn(&mut r)?;
            Event::Token { conn, token: Ok(Secret::new(r.text("the token")?)) }
        }
        STAGGER_EVENT_TOKEN_FAILED => {
            let conn = conn(&mut r)?;
            Event::Token { conn, token: Err(truncated(r.text("the reason")?)) }
        }
        STAGGER_EVENT_REQUEST_REFRESH => {
            let cause = r.u8("the cause")?;
            let Some(&(_, cause)) = CAUSES.iter().find(|(b, _)| *b == cause) else {
                return Err(format!("cause {cause}: 0 to {}", CAUSES.len() - 1));
            };
            let broker = r.text("the broker")?;
            return Ok(Incoming::RequestRefresh { cause, broker: (!broker.is_empty()).then_some(broker) });
        }
        other => return Err(format!("unknown event kind {other} (1 to {})", STAGGER_EVENT_REQUEST_REFRESH)),
    };
    if !r.is_done() {
        return Err(format!("{} bytes after the body's last field", body.len() - r.at));
    }
    Ok(Incoming::Event(event))
}

fn conn(r: &mut Reader<'_>) -> Result<ConnId, String> {
    r.u64("the conn").map(ConnId)
}

fn attempt_error(r: &mut Reader<'_>) -> Result<AttemptError, String> {
    let kind = r.u8("the error kind")?;
    let code = r.i16("the error code")?;
    let kind = match kind {
        STAGGER_ERROR_BROKER => ErrorKind::BrokerError(code),
        k => match ERROR_KINDS.iter().find(|(b, _)| *b == k) {
            Some(&(_, kind)) => kind,
            None => return Err(format!("error kind {k}: 1 to 13")),
        },
    };
    let detail = truncated(r.text("the detail")?);
    Ok(AttemptError::with_detail(kind, detail))
}

/// At most [`MAX_DETAIL`] bytes of `text`, cut at a character boundary.
fn truncated(text: &str) -> String {
    let mut end = text.len().min(MAX_DETAIL);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Writes an action batch into `out` (cleared first): the header is written by
/// [`ActionWriter::finish`], once the count and the wake-up are known.
pub struct ActionWriter<'a> {
    out: &'a mut Vec<u8>,
    count: u32,
}

impl<'a> ActionWriter<'a> {
    /// Starts a batch in `out`, replacing what it held.
    pub fn new(out: &'a mut Vec<u8>) -> ActionWriter<'a> {
        out.clear();
        out.extend_from_slice(&[0; ACTIONS_HEADER]);
        ActionWriter { out, count: 0 }
    }

    fn record(&mut self, kind: u8, body: impl FnOnce(&mut Vec<u8>)) {
        self.out.push(kind);
        let len_at = self.out.len();
        self.out.extend_from_slice(&[0; 4]);
        body(self.out);
        let len = (self.out.len() - len_at - 4) as u32;
        self.out[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
        self.count += 1;
    }

    /// Appends one of the session's actions; `book_address` names a broker index.
    pub fn action(&mut self, action: &Action, book_address: impl Fn(u32) -> String) {
        match action {
            Action::Dial { conn, address, tls } => self.record(STAGGER_ACTION_DIAL, |o| {
                o.extend_from_slice(&conn.0.to_le_bytes());
                o.push(u8::from(tls.is_some()));
                // A book address is `host:port` of a valid host name: far below 64 KiB.
                let address = &address.as_bytes()[..address.len().min(usize::from(u16::MAX))];
                o.extend_from_slice(&(address.len() as u16).to_le_bytes());
                o.extend_from_slice(address);
                o.extend_from_slice(tls.as_deref().unwrap_or("").as_bytes());
            }),
            Action::Send { conn, bytes } => self.record(STAGGER_ACTION_SEND, |o| {
                o.extend_from_slice(&conn.0.to_le_bytes());
                o.extend_from_slice(bytes);
            }),
            Action::Close { conn } => self.conn(STAGGER_ACTION_CLOSE, *conn),
            Action::Resolve { lookup, name } => self.record(STAGGER_ACTION_RESOLVE, |o| {
                o.extend_from_slice(&lookup.0.to_le_bytes());
                o.extend_from_slice(name.as_bytes());
            }),
            Action::NeedNonce { conn } => self.conn(STAGGER_ACTION_NEED_NONCE, *conn),
            Action::NeedToken { conn } => self.conn(STAGGER_ACTION_NEED_TOKEN, *conn),
            Action::Refreshed { epoch, broker, .. } => self.record(STAGGER_ACTION_REFRESHED, |o| {
                o.extend_from_slice(&epoch.to_le_bytes());
                o.extend_from_slice(&broker.0.to_le_bytes());
                o.extend_from_slice(book_address(broker.0).as_bytes());
            }),
            Action::RefreshFailed { epoch, error } => self.record(STAGGER_ACTION_REFRESH_FAILED, |o| {
                o.extend_from_slice(&epoch.to_le_bytes());
                o.extend_from_slice(json::refresh_error(error).to_string().as_bytes());
            }),
            Action::Rebootstrapped => self.record(STAGGER_ACTION_REBOOTSTRAPPED, |_| {}),
        }
    }

    /// Appends the epoch a `REQUEST_REFRESH` event was given.
    pub fn refresh_requested(&mut self, epoch: u32) {
        self.record(STAGGER_ACTION_REFRESH_REQUESTED, |o| o.extend_from_slice(&epoch.to_le_bytes()));
    }

    fn conn(&mut self, kind: u8, conn: ConnId) {
        self.record(kind, |o| o.extend_from_slice(&conn.0.to_le_bytes()));
    }

    /// Writes the header: the count and the next wake-up in ns ([`STAGGER_NO_WAKEUP`] for none).
    pub fn finish(self, next_wakeup_ns: u64) {
        let header = &mut self.out[..ACTIONS_HEADER];
        header[0..2].copy_from_slice(&VERSION.to_le_bytes());
        header[2..4].copy_from_slice(&0u16.to_le_bytes());
        header[4..8].copy_from_slice(&self.count.to_le_bytes());
        header[8..16].copy_from_slice(&next_wakeup_ns.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{encode_events, error_kind_byte, HostEvent};

    #[test]
    fn every_event_kind_round_trips_through_the_decoder() {
        let events = vec![
            HostEvent::Connected(1),
            HostEvent::Secured(1),
            HostEvent::Received(1, vec![0, 0, 0, 1, 9]),
            HostEvent::Closed(1, true),
            HostEvent::IoError(2, 2, 0, "refused".into()),
            HostEvent::Resolved(7, vec!["10.0.0.1:9092".parse().unwrap(), "[::1]:9093".parse().unwrap()]),
            HostEvent::ResolveFailed(7, 1, 0, "nxdomain".into()),
            HostEvent::Nonce(3, [5; 18]),
            HostEvent::Token(3, "jwt".into()),
            HostEvent::TokenFailed(3, "idp down".into()),
            HostEvent::RequestRefresh(4, "b1:9092".into()),
            HostEvent::IoError(2, STAGGER_ERROR_BROKER, 58, String::new()),
        ];
        let bytes = encode_events(&events);
        let decoded = decode_events(&bytes).unwrap();
        assert_eq!(decoded.len(), events.len());
        assert!(matches!(decoded[2], Incoming::Event(Event::Received { conn: ConnId(1), bytes: [0, 0, 0, 1, 9] })));
        assert!(matches!(decoded[3], Incoming::Event(Event::Closed { how: CloseKind::Reset, .. })));
        let Incoming::Event(Event::Resolved { result: Ok(ref a), .. }) = decoded[5] else { panic!() };
        assert_eq!(a, &["10.0.0.1:9092".parse().unwrap(), "[::1]:9093".parse().unwrap()]);
        assert!(matches!(
            decoded[10],
            Incoming::RequestRefresh { cause: RefreshCause::ConnectionLost, broker: Some("b1:9092") }
        ));
        let Incoming::Event(Event::IoError { ref error, .. }) = decoded[11] else { panic!() };
        assert_eq!(error.kind, ErrorKind::BrokerError(58));
    }

    #[test]
    fn a_short_body_names_the_event_and_its_offset() {
        let mut bytes = encode_events(&[HostEvent::Connected(1)]);
        bytes.extend_from_slice(&[STAGGER_EVENT_RECEIVED, 3, 0, 0, 0, 1, 2, 3]);
        bytes[4] = 2;
        let e = decode_events(&bytes).unwrap_err();
        assert_eq!(e.message, "event 1 (RECEIVED) at byte 21: the conn needs 8 bytes, 3 left");
    }

    #[test]
    fn error_kinds_have_distinct_bytes() {
        let mut seen: Vec<u8> = ERROR_KINDS.iter().map(|(b, _)| *b).collect();
        seen.push(STAGGER_ERROR_BROKER);
        seen.sort();
        assert_eq!(seen, (1..=13).collect::<Vec<u8>>());
        for (b, k) in ERROR_KINDS {
            assert_eq!(error_kind_byte(k), b);
        }
    }
}
