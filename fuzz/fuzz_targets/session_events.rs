//! The client session (`stagger::session::Session`) driven as a host would, in any order:
//! connections coming up or failing, TLS, closes clean and reset, nonces and tokens asked for
//! or not, time jumping both ways, events about connections that do not exist, and bytes —
//! either noise, or the broker's proper answer to the last request sent on that connection
//! (ApiVersions or Metadata, encoded by `kafka-protocol`), corrupted and split anyhow, so the
//! fuzzer reaches won refreshes, kept connections and their reuse, not only garbage.
//!
//! Checks, after every step: no panic; no `Send` or second `Close` on a closed connection; the
//! bytes held for incomplete frames bounded by the frame limit per open connection. At the end,
//! once time runs past every deadline: every requested refresh answered exactly once, and
//! every dialled connection closed, reported closed, or the one kept.
#![no_main]

use std::collections::{BTreeMap, BTreeSet};

use arbitrary::Arbitrary;
use bytes::Bytes;
use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataResponse, RequestHeader};
use kafka_protocol::protocol::{Decodable, StrBytes};
use libfuzzer_sys::fuzz_target;
use stagger::kafka::sasl::{Sasl, ScramHash, Secret};
use stagger::kafka::ExchangeConfig;
use stagger::session::{Action, CloseKind, ConnId, Event, Session, SessionConfig};
use stagger::{AttemptError, BrokerBook, ErrorKind, Instant, RefreshCause};
use stagger_fuzz::{api_versions, try_response, MAX_FRAMES};

/// Pieces a received answer is cut into, at most.
const MAX_PIECE: usize = 64 * 1024;

#[derive(Arbitrary, Debug)]
enum Op {
    Request(bool),
    Connected(u8),
    Secured(u8),
    /// Noise on a connection.
    Noise(u8, Vec<u8>),
    /// The proper answer to the last request sent on the connection, with a byte overwritten
    /// (`edit`) and cut at `cut`.
    Answer { conn: u8, edit: Option<(u16, u8)>, cut: Option<u16>, metadata_version_cap: u8 },
    Closed(u8, bool),
    IoError(u8),
    Nonce(u8),
    Token(u8, bool),
    Unknown(u64),
    Time(u16),
    Backwards(u16),
}

#[derive(Arbitrary, Debug)]
struct Input {
    max_frame: u8,
    sasl: u8,
    tls: bool,
    one_shot: bool,
    ops: Vec<Op>,
}

/// What the host has seen of the session.
#[derive(Default)]
struct Host {
    dialled: Vec<ConnId>,
    closed: BTreeSet<ConnId>,
    last_sent: BTreeMap<ConnId, Bytes>,
    answers: BTreeMap<u32, u32>,
}

impl Host {
    fn take(&mut self, s: &mut Session) {
        while let Some(action) = s.poll_action() {
            match action {
                Action::Dial { conn, .. } => self.dialled.push(conn),
                Action::Close { conn } => assert!(self.closed.insert(conn), "closed twice: {conn:?}"),
                Action::Send { conn, bytes } => {
                    assert!(!self.closed.contains(&conn), "sent on closed {conn:?}");
                    self.last_sent.insert(conn, bytes);
                }
                Action::Refreshed { epoch, .. } | Action::RefreshFailed { epoch, .. } => {
                    *self.answers.entry(epoch).or_default() += 1
                }
                _ => {}
            }
        }
    }

    fn conn(&self, k: u8) -> ConnId {
        self.dialled.get(k as usize % self.dialled.len().max(1)).copied().unwrap_or(ConnId(u64::MAX))
    }
}

/// The broker's answer to `request` (a whole request frame), if it is ApiVersions or Metadata.
fn answer(request: &Bytes, cap: u8) -> Option<Vec<u8>> {
    let mut body = request.slice(4..);
    let key = ApiKey::try_from(i16::from_be_bytes([*body.first()?, *body.get(1)?])).ok()?;
    let version = i16::from_be_bytes([*body.get(2)?, *body.get(3)?]);
    let header = RequestHeader::decode(&mut body, key.request_header_version(version)).ok()?;
    match key {
        ApiKey::ApiVersions => try_response(header.correlation_id, version, &api_versions(i16::from(cap % 13))),
        ApiKey::Metadata => {
            let broker = MetadataResponseBroker::default()
                .with_node_id(BrokerId(1))
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(9092);
            try_response(header.correlation_id, version, &MetadataResponse::default().with_brokers(vec![broker]))
        }
        _ => None,
    }
}

fuzz_target!(|input: Input| {
    let max_frame = MAX_FRAMES[input.max_frame as usize % MAX_FRAMES.len()];
    let sasl = match input.sasl % 3 {
        0 => None,
        1 => Some(Sasl::Scram { hash: ScramHash::Sha512, username: "u".into(), password: Secret::new("p") }),
        _ => Some(Sasl::OAuthBearer { token: Secret::new("t") }),
    };
    let config = SessionConfig {
        exchange: ExchangeConfig { max_frame_size: max_frame, sasl, ..ExchangeConfig::default() },
        tls: input.tls,
        fresh_tokens: true,
        one_shot: input.one_shot,
        ..SessionConfig::default()
    };
    let book = BrokerBook::new(["127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"]).expect("valid seeds");
    let Ok(mut s) = Session::new(config, book, Instant::ZERO) else { return };
    let mut host = Host::default();
    let (mut now, mut requested) = (0u64, BTreeSet::new());
    for op in input.ops {
        let at = Instant::from_micros(now);
        match op {
            Op::Request(gentle) => {
                let cause = if gentle { RefreshCause::StaleMetadata } else { RefreshCause::Requested };
                requested.insert(s.request_refresh_because(at, cause, None));
            }
            Op::Connected(k) => s.handle_event(at, Event::Connected { conn: host.conn(k) }),
            Op::Secured(k) => s.handle_event(at, Event::Secured { conn: host.conn(k) }),
            Op::Noise(k, bytes) => s.handle_event(at, Event::Received { conn: host.conn(k), bytes: &bytes }),
            Op::Answer { conn, edit, cut, metadata_version_cap } => {
                let conn = host.conn(conn);
                let Some(mut bytes) = host.last_sent.get(&conn).and_then(|r| answer(r, metadata_version_cap)) else {
                    continue;
                };
                if let Some((at, byte)) = edit {
                    let i = at as usize % bytes.len().max(1);
                    if let Some(b) = bytes.get_mut(i) {
                        *b = byte;
                    }
                }
                let cut = cut.map_or(bytes.len(), |c| c as usize % (bytes.len() + 1)).min(MAX_PIECE);
                let (first, rest) = bytes.split_at(cut);
                s.handle_event(at, Event::Received { conn, bytes: first });
                host.take(&mut s);
                s.handle_event(at, Event::Received { conn, bytes: rest });
            }
            Op::Closed(k, reset) => {
                let conn = host.conn(k);
                host.closed.insert(conn);
                let how = if reset { CloseKind::Reset } else { CloseKind::Clean };
                s.handle_event(at, Event::Closed { conn, how });
            }
            Op::IoError(k) => {
                let conn = host.conn(k);
                host.closed.insert(conn);
                s.handle_event(at, Event::IoError { conn, error: AttemptError::new(ErrorKind::Refused) });
            }
            Op::Nonce(k) => s.handle_event(at, Event::Nonce { conn: host.conn(k), bytes: [k; 18] }),
            Op::Token(k, ok) => {
                let token = if ok { Ok(Secret::new("t")) } else { Err("no token".into()) };
                s.handle_event(at, Event::Token { conn: host.conn(k), token });
            }
            Op::Unknown(id) => s.handle_event(at, Event::Connected { conn: ConnId(id) }),
            Op::Time(d) => {
                now += u64::from(d) * 100;
                s.handle_timeout(Instant::from_micros(now));
            }
            Op::Backwards(d) => s.handle_timeout(Instant::from_micros(now.saturating_sub(u64::from(d) * 100))),
        }
        host.take(&mut s);
        let open = s.open_connections().count();
        assert!(s.buffered_bytes() <= open * (max_frame + 4 + MAX_PIECE), "{} bytes held", s.buffered_bytes());
    }
    // Time runs past every deadline: whatever runs ends.
    for _ in 0..1000 {
        if s.cluster().current().is_none() {
            break;
        }
        let Some(t) = s.poll_timeout() else { break };
        s.handle_timeout(t);
        host.take(&mut s);
    }
    assert!(s.cluster().current().is_none(), "the refresh ended");
    for epoch in &requested {
        assert_eq!(host.answers.get(epoch), Some(&1), "one answer for epoch {epoch}");
    }
    assert!(host.answers.values().all(|&n| n == 1), "never two answers: {:?}", host.answers);
    let kept = s.kept_connection();
    for conn in &host.dialled {
        assert!(host.closed.contains(conn) || Some(*conn) == kept, "{conn:?} left open");
    }
});
