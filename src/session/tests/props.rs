//! Arbitrary interleavings of host events: no panic, bounded buffers, one answer per
//! requested epoch, and no connection left open but the kept one once time runs out.

use super::*;
use alloc::collections::{BTreeMap, BTreeSet};
use proptest::prelude::*;

const MAX_FRAME: usize = 4096;
const MAX_CHUNK: usize = 64;

#[derive(Clone, Debug)]
enum Op {
    Request,
    Connected(usize),
    Secured(usize),
    Received(usize, Vec<u8>),
    /// The broker's proper answer to the last request sent on a connection.
    Answer(usize),
    Closed(usize, bool),
    IoError(usize),
    Nonce(usize),
    Token(usize, bool),
    Unknown(u64),
    Time(u64),
    Backwards(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0usize..8;
    prop_oneof![
        1 => Just(Op::Request),
        3 => k.clone().prop_map(Op::Connected),
        1 => k.clone().prop_map(Op::Secured),
        1 => (k.clone(), proptest::collection::vec(any::<u8>(), 0..MAX_CHUNK)).prop_map(|(k, b)| Op::Received(k, b)),
        6 => k.clone().prop_map(Op::Answer),
        1 => (k.clone(), any::<bool>()).prop_map(|(k, r)| Op::Closed(k, r)),
        1 => k.clone().prop_map(Op::IoError),
        1 => k.clone().prop_map(Op::Nonce),
        1 => (k, any::<bool>()).prop_map(|(k, ok)| Op::Token(k, ok)),
        1 => (1000u64..2000).prop_map(Op::Unknown),
        1 => (0u64..3000).prop_map(Op::Time),
        1 => (0u64..3000).prop_map(Op::Backwards),
    ]
}

/// What the host saw of the session.
#[derive(Default)]
struct Host {
    dialled: Vec<ConnId>,
    closed: BTreeSet<ConnId>,
    terminals: BTreeMap<u32, u32>,
    /// The last request sent on each connection, not yet answered.
    last_sent: BTreeMap<ConnId, Bytes>,
    /// The broker at the other end of each connection (a SCRAM exchange is per connection).
    brokers: BTreeMap<ConnId, Broker>,
}

impl Host {
    fn take(&mut self, s: &mut Session) {
        while let Some(action) = s.poll_action() {
            match action {
                Action::Dial { conn, .. } => self.dialled.push(conn),
                Action::Close { conn } => assert!(self.closed.insert(conn), "closed twice: {conn:?}"),
                Action::Send { conn, bytes } => {
                    assert!(!self.closed.contains(&conn), "sent on a closed conn");
                    self.last_sent.insert(conn, bytes);
                }
                Action::Refreshed { epoch, .. } | Action::RefreshFailed { epoch, .. } => {
                    *self.terminals.entry(epoch).or_default() += 1
                }
                _ => {}
            }
        }
    }
}

fn run(ops: Vec<Op>, sasl: Option<Sasl>) {
    let mut config = config();
    config.cluster.refresh.retry.retries = 1;
    config.exchange = ExchangeConfig { max_frame_size: MAX_FRAME, sasl, ..ExchangeConfig::default() };
    config.tls = matches!(ops.first(), Some(Op::Secured(_)));
    config.fresh_tokens = true;
    let mut s = session(config);
    let mut host = Host::default();
    let (mut now, mut requested) = (0u64, BTreeSet::new());
    for op in ops {
        let ids: Vec<ConnId> = host.dialled.clone();
        let conn = |k: usize| ids.get(k % ids.len().max(1)).copied().unwrap_or(ConnId(0));
        let at = ms(now);
        match op {
            Op::Request => {
                requested.insert(s.request_refresh(at));
            }
            Op::Connected(k) => s.handle_event(at, Event::Connected { conn: conn(k) }),
            Op::Secured(k) => s.handle_event(at, Event::Secured { conn: conn(k) }),
            Op::Received(k, bytes) => s.handle_event(at, Event::Received { conn: conn(k), bytes: &bytes }),
            Op::Answer(k) => {
                if let Some(request) = host.last_sent.remove(&conn(k)) {
                    let answer = host.brokers.entry(conn(k)).or_default().answer(&request);
                    s.handle_event(at, Event::Received { conn: conn(k), bytes: &answer });
                }
            }
            Op::Closed(k, reset) => {
                let how = if reset { CloseKind::Reset } else { CloseKind::Clean };
                host.closed.insert(conn(k));
                s.handle_event(at, Event::Closed { conn: conn(k), how })
            }
            Op::IoError(k) => {
                host.closed.insert(conn(k));
                s.handle_event(at, Event::IoError { conn: conn(k), error: AttemptError::new(ErrorKind::Io) })
            }
            Op::Nonce(k) => s.handle_event(at, Event::Nonce { conn: conn(k), bytes: [k as u8; 18] }),
            Op::Token(k, ok) => {
                let token = if ok { Ok(Secret::new("t")) } else { Err("no".into()) };
                s.handle_event(at, Event::Token { conn: conn(k), token })
            }
            Op::Unknown(id) => s.handle_event(at, Event::Connected { conn: ConnId(id) }),
            Op::Time(d) => {
                now += d;
                s.handle_timeout(ms(now));
            }
            Op::Backwards(d) => s.handle_timeout(ms(now.saturating_sub(d))),
        }
        host.take(&mut s);
        let open = s.open_connections().count();
        prop_assert_bounded(s.buffered_bytes(), open);
    }
    // Time runs past every deadline: whatever runs ends, and a loser draining for a spare
    // is kept or closed by its own deadline.
    for _ in 0..200 {
        let kept: BTreeSet<ConnId> = s.kept_connections().collect();
        if s.cluster().current().is_none() && s.open_connections().all(|c| kept.contains(&c)) {
            break;
        }
        let Some(t) = s.poll_timeout() else { break };
        s.handle_timeout(t);
        host.take(&mut s);
    }
    assert!(s.cluster().current().is_none(), "the refresh ended");
    for epoch in &requested {
        assert_eq!(host.terminals.get(epoch), Some(&1), "one answer for epoch {epoch}");
    }
    assert!(host.terminals.values().all(|&n| n == 1), "never two answers: {:?}", host.terminals);
    let kept: BTreeSet<ConnId> = s.kept_connections().collect();
    assert!(kept.len() <= 1 + s.cluster().config().spare_connections as usize, "{kept:?}");
    for conn in &host.dialled {
        assert!(host.closed.contains(conn) || kept.contains(conn), "{conn:?} left open");
    }
    assert!(s.open_connections().all(|c| kept.contains(&c)));
}

fn prop_assert_bounded(buffered: usize, open: usize) {
    assert!(buffered <= open * (MAX_FRAME + 4 + MAX_CHUNK), "{buffered} bytes held on {open} conns");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_event_sequences_keep_every_guarantee(ops in proptest::collection::vec(op(), 0..60)) {
        run(ops, None);
    }

    #[test]
    fn arbitrary_event_sequences_over_sasl_keep_every_guarantee(ops in proptest::collection::vec(op(), 0..60)) {
        let scram = Sasl::Scram { hash: ScramHash::Sha256, username: "alice".into(), password: Secret::new(PASSWORD) };
        run(ops.clone(), Some(scram));
        run(ops, Some(Sasl::OAuthBearer { token: Secret::new("t") }));
    }
}
