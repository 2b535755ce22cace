//! The session against fake brokers whose answers `kafka-protocol` encodes (the exchange's
//! own test helpers): each test is a table of host events and the actions they must cause.

use super::*;
use crate::config::{Adaptive, ClusterConfig, RefreshConfig, Stagger};
use crate::error::{AttemptError, ErrorKind};
use crate::kafka::exchange::tests::sasl::{sasl_api_versions, ScramServer, PASSWORD};
use crate::kafka::exchange::tests::{cluster, response};
use crate::kafka::sasl::{Sasl, ScramHash, Secret};
use crate::kafka::ExchangeConfig;
use alloc::string::String;
use alloc::vec;
use bytes::Bytes;
use core::time::Duration;
use kafka_protocol::messages::{
    ApiKey, RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

mod keeping;
mod props;
mod sasl;

fn ms(millis: u64) -> Instant {
    Instant::from_millis(millis)
}

/// A fixed 500 ms stagger without jitter, one pass, the seeds in the order listed: the
/// timings and brokers below are exact.
fn config() -> SessionConfig {
    let mut refresh = RefreshConfig::staggered();
    refresh.shuffle_seeds = false;
    refresh.fanout.jitter = 0.0;
    refresh.fanout.stagger = Stagger::Fixed(Duration::from_millis(500));
    refresh.retry.retries = 0;
    SessionConfig { cluster: ClusterConfig { refresh, ..ClusterConfig::default() }, ..SessionConfig::default() }
}

fn session(config: SessionConfig) -> Session {
    Session::new(config, BrokerBook::new(["b1:9092", "b2:9093"]).unwrap(), ms(0)).unwrap()
}

fn actions(s: &mut Session) -> Vec<Action> {
    core::iter::from_fn(|| s.poll_action()).collect()
}

/// The one fake broker: answers each request frame as a healthy Kafka with SASL would.
#[derive(Default)]
struct Broker {
    scram: Option<ScramServer>,
    /// What OAUTHBEARER payloads it received.
    bearer: Vec<Vec<u8>>,
    /// Requests seen, by API key.
    seen: Vec<ApiKey>,
}

impl Broker {
    fn answer(&mut self, frame: &Bytes) -> Vec<u8> {
        let mut body = frame.slice(4..);
        let key = ApiKey::try_from(i16::from_be_bytes([body[0], body[1]])).unwrap();
        let version = i16::from_be_bytes([body[2], body[3]]);
        let header = RequestHeader::decode(&mut body, key.request_header_version(version)).unwrap();
        let id = header.correlation_id;
        self.seen.push(key);
        match key {
            // v5 (a known broker's identity check) answers in v4's layout.
            ApiKey::ApiVersions => response(id, version.min(4), &sasl_api_versions()),
            ApiKey::SaslHandshake => {
                let mechanisms = ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"].map(StrBytes::from_static_str).to_vec();
                response(id, version, &SaslHandshakeResponse::default().with_mechanisms(mechanisms))
            }
            ApiKey::SaslAuthenticate => {
                let auth = SaslAuthenticateRequest::decode(&mut body, version).unwrap().auth_bytes.to_vec();
                let reply = if auth.starts_with(b"n,,n=") {
                    let server = self.scram.get_or_insert_with(|| ScramServer::new::<sha2::Sha256>(PASSWORD));
                    server.first(&auth).into_bytes()
                } else if auth.starts_with(b"c=") {
                    let server = self.scram.as_mut().expect("client-first came first");
                    server.last::<sha2::Sha256>(&auth).expect("the proof holds").into_bytes()
                } else {
                    if auth.starts_with(b"n,,\x01") {
                        self.bearer.push(auth);
                    }
                    Vec::new()
                };
                let ok = SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(reply));
                response(id, version, &ok)
            }
            _ => response(id, version, &cluster()),
        }
    }
}

/// The `Dial`s among `actions`: (conn, address).
fn dials(actions: &[Action]) -> Vec<(ConnId, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Dial { conn, address, .. } => Some((*conn, String::from(&**address))),
            _ => None,
        })
        .collect()
}

/// Answers every `Send` on `conn` in `actions` through `broker`, and every later one, until
/// no request is left; returns every action seen on the way.
fn serve(s: &mut Session, now: Instant, conn: ConnId, broker: &mut Broker, mut pending: Vec<Action>) -> Vec<Action> {
    let mut seen = Vec::new();
    while !pending.is_empty() {
        let mut next = Vec::new();
        for action in pending {
            if let Action::Send { conn: c, bytes } = &action {
                if *c == conn {
                    s.handle_event(now, Event::Received { conn, bytes: &broker.answer(bytes) });
                    next.extend(actions(s));
                }
            }
            seen.push(action);
        }
        pending = next;
    }
    seen
}

fn refreshed(actions: &[Action]) -> Option<u32> {
    actions.iter().find_map(|a| match a {
        Action::Refreshed { epoch, .. } => Some(*epoch),
        _ => None,
    })
}

fn closes(actions: &[Action]) -> Vec<ConnId> {
    actions.iter().filter_map(|a| if let Action::Close { conn } = a { Some(*conn) } else { None }).collect()
}

/// Runs a whole fresh refresh on the first broker; returns its conn and every action.
fn healthy_refresh(s: &mut Session, broker: &mut Broker) -> (ConnId, Vec<Action>) {
    let epoch = s.request_refresh(ms(0));
    let first = actions(s);
    let [(conn, ref address)] = dials(&first)[..] else { panic!("one dial: {first:?}") };
    assert_eq!(address, "b1:9092");
    s.handle_event(ms(1), Event::Connected { conn });
    let sends = actions(s);
    assert!(matches!(&sends[..], [Action::Send { .. }]), "ApiVersions once connected: {sends:?}");
    let all = serve(s, ms(2), conn, broker, sends);
    assert_eq!(refreshed(&all), Some(epoch), "{all:?}");
    (conn, all)
}

#[test]
fn a_healthy_one_shot_refresh_is_one_dial_two_requests_and_refreshed() {
    let mut s = session(SessionConfig { one_shot: true, ..config() });
    let mut broker = Broker::default();
    let (conn, all) = healthy_refresh(&mut s, &mut broker);
    assert_eq!(broker.seen, [ApiKey::ApiVersions, ApiKey::Metadata]);
    assert_eq!(closes(&all), [conn], "one shot: the winner's connection closes, before Refreshed");
    let close_at = all.iter().position(|a| matches!(a, Action::Close { .. })).unwrap();
    assert!(close_at < all.iter().position(|a| matches!(a, Action::Refreshed { .. })).unwrap());
    assert_eq!(s.metadata().unwrap().cluster_id.as_deref(), Some("kafka-cluster-1"));
    assert_eq!((s.poll_timeout(), s.open_connections().count()), (None, 0));
    assert_eq!(s.last_refresh().unwrap().attempts().count(), 1, "the attempt's record is readable");
    s.handle_event(ms(3), Event::Received { conn, bytes: b"late" });
    assert_eq!((actions(&mut s), s.ignored_events()), (vec![], 1), "a closed conn's bytes are ignored");
}

/// Overtaken, a hung first broker is closed at once in a one-shot session; a long-lived
/// session at a cold start lets it finish (its handshake may only be queued) until
/// `attempt_timeout`, then closes it.
#[test]
fn a_hung_first_broker_is_overtaken_by_the_second_and_closed() {
    let (one_shot, all) = hung_first_overtaken(SessionConfig { one_shot: true, ..config() });
    assert!(closes(&all).contains(&one_shot), "the hung one closes: {all:?}");
    let (_, all) = hung_first_overtaken(config());
    assert_eq!(closes(&all), [], "a cold start's first choice drains");
}

/// A refresh whose first broker connects and stays silent, overtaken by the second; returns
/// the silent one's conn and the actions of the win.
fn hung_first_overtaken(config: SessionConfig) -> (ConnId, Vec<Action>) {
    let mut s = session(config);
    s.request_refresh(ms(0));
    let [(hung, _)] = dials(&actions(&mut s))[..] else { panic!() };
    s.handle_event(ms(1), Event::Connected { conn: hung });
    let _api_versions_unanswered = actions(&mut s);
    s.handle_timeout(ms(499));
    assert!(dials(&actions(&mut s)).is_empty(), "not before the stagger");
    assert_eq!(s.poll_timeout(), Some(ms(500)));
    s.handle_timeout(ms(500));
    let [(second, ref address)] = dials(&actions(&mut s))[..] else { panic!() };
    assert_eq!(address, "b2:9093");
    s.handle_event(ms(501), Event::Connected { conn: second });
    let sends = actions(&mut s);
    let all = serve(&mut s, ms(502), second, &mut Broker::default(), sends);
    assert_eq!(refreshed(&all), Some(1));
    assert_eq!(s.kept_connection().is_some(), !s.config.one_shot, "the winner is kept");
    if !s.config.one_shot {
        assert_eq!(s.kept_connection(), Some(second));
        // Its drain ends `attempt_timeout` after it was overtaken (when the second answered).
        s.handle_timeout(ms(10_501));
        assert_eq!(actions(&mut s), []);
        s.handle_timeout(ms(10_502));
        assert_eq!(actions(&mut s), [Action::Close { conn: hung }]);
    }
    (hung, all)
}

#[test]
fn a_refused_broker_moves_on_at_once() {
    let mut s = session(config());
    s.request_refresh(ms(0));
    let [(refused, _)] = dials(&actions(&mut s))[..] else { panic!() };
    s.handle_event(ms(1), Event::IoError { conn: refused, error: AttemptError::new(ErrorKind::Refused) });
    let next = actions(&mut s);
    assert_eq!(dials(&next).len(), 1, "the next broker at once, not after the stagger: {next:?}");
    assert!(closes(&next).is_empty(), "the host dropped the refused one itself");
    assert!(!s.open_connections().any(|c| c == refused));
}

#[test]
fn a_give_up_carries_every_brokers_error() {
    let mut s = session(config());
    let epoch = s.request_refresh(ms(0));
    let mut all = Vec::new();
    for t in 1..4 {
        all.extend(actions(&mut s));
        for (conn, _) in dials(&all) {
            s.handle_event(ms(t), Event::IoError { conn, error: AttemptError::new(ErrorKind::Refused) });
        }
    }
    all.extend(actions(&mut s));
    let failed = all.iter().find_map(|a| match a {
        Action::RefreshFailed { epoch, error } => Some((*epoch, error)),
        _ => None,
    });
    let (e, error) = failed.expect("gave up");
    assert_eq!(e, epoch);
    assert_eq!(error.brokers.len(), 2, "{error:?}");
    assert_eq!(s.open_connections().count(), 0);
}

/// An observing session's refresh that gives up says so last, after every attempt's
/// failure, timed from the refresh's start.
#[test]
fn an_observing_session_ends_a_give_up_with_its_reason() {
    use crate::report::EventKind;
    let mut s = session(SessionConfig { observe: true, ..config() });
    s.request_refresh(ms(0));
    let mut all = Vec::new();
    for t in 1..4 {
        all.extend(actions(&mut s));
        for (conn, _) in dials(&all) {
            s.handle_event(ms(t), Event::IoError { conn, error: AttemptError::new(ErrorKind::Refused) });
        }
    }
    let _ = actions(&mut s);
    let events: Vec<_> = core::iter::from_fn(|| s.poll_event()).collect();
    let failed = events.iter().filter(|e| matches!(e.kind, EventKind::Failed { .. })).count();
    assert_eq!(failed, 2, "{events:#?}");
    let last = events.last().expect("events");
    assert!(
        matches!(last.kind, EventKind::GaveUp { reason: crate::GiveUpReason::AllFailed { passes: 1 } }),
        "{events:#?}"
    );
    assert!(last.elapsed <= Duration::from_millis(3), "{last:?}");
}

#[test]
fn resolution_is_an_action_and_its_answer_an_event() {
    let book = BrokerBook::resolving(["kafka.example:9092"]).unwrap();
    let mut s = Session::new(config(), book, ms(0)).unwrap();
    s.request_refresh(ms(0));
    let [Action::Resolve { lookup, ref name }] = actions(&mut s)[..] else { panic!() };
    assert_eq!(&**name, "kafka.example:9092");
    let addresses = vec!["10.0.0.1:9092".parse().unwrap()];
    s.handle_event(ms(1), Event::Resolved { lookup, result: Ok(addresses) });
    let dialled = actions(&mut s);
    assert!(matches!(&dialled[..], [Action::Dial { address, tls: None, .. }] if &**address == "10.0.0.1:9092"));
}

#[test]
fn attempt_notes_tell_each_attempts_error_cancel_and_metadata_version() {
    let mut s = session(config());
    s.request_refresh(ms(0));
    let [(hung, _)] = dials(&actions(&mut s))[..] else { panic!() };
    s.handle_event(ms(1), Event::Connected { conn: hung });
    let _unanswered = actions(&mut s);
    assert!(s.attempt_notes().is_empty(), "nothing finished yet");
    s.handle_timeout(ms(500));
    let [(second, _)] = dials(&actions(&mut s))[..] else { panic!() };
    s.handle_event(ms(501), Event::Connected { conn: second });
    let sends = actions(&mut s);
    serve(&mut s, ms(502), second, &mut Broker::default(), sends);
    let notes = s.attempt_notes();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].cancelled.is_some() && notes[0].metadata_version.is_none(), "{notes:?}");
    assert!(notes[1].cancelled.is_none() && notes[1].error.is_none(), "{notes:?}");
    assert!(notes[1].metadata_version.is_some(), "the winner's Metadata version: {notes:?}");

    // The next refresh: its notes replace these once it ends; a failure carries its error.
    s.handle_event(ms(600), Event::Closed { conn: second, how: CloseKind::Reset });
    s.request_refresh(ms(600));
    let mut now = 600;
    let mut pending = actions(&mut s);
    while !pending.iter().any(|a| matches!(a, Action::RefreshFailed { .. })) {
        now += 100;
        for (conn, _) in dials(&pending) {
            s.handle_event(ms(now), Event::IoError { conn, error: AttemptError::new(ErrorKind::Refused) });
        }
        s.handle_timeout(ms(now));
        pending = actions(&mut s);
        assert!(now < 60_000, "the refresh gives up");
    }
    let notes = s.attempt_notes();
    assert!(!notes.is_empty() && notes.iter().all(|n| n.attempt.epoch() == 2), "{notes:?}");
    assert!(notes.iter().all(|n| n.error.as_ref().map(|e| e.kind) == Some(ErrorKind::Refused)), "{notes:?}");
}

#[test]
fn all_at_once_reserves_for_the_brokers_not_for_u32_max() {
    let config = SessionConfig {
        cluster: ClusterConfig { refresh: RefreshConfig::all_at_once(), ..ClusterConfig::default() },
        one_shot: true,
        ..SessionConfig::default()
    };
    let mut s = session(config);
    s.request_refresh(ms(0));
    assert_eq!(dials(&actions(&mut s)).len(), 2, "both brokers at once");
}

/// The live view of the hung-then-overtaken refresh above, and its reports: one vocabulary
/// from the session, in causal order, timed from the refresh's start.
#[test]
fn an_observing_session_tells_what_happened_in_order_and_reports_each_attempt() {
    use crate::report::{AttemptOutcome, EventKind};
    let mut s = session(SessionConfig { observe: true, recorder: Some("test".into()), ..config() });
    s.request_refresh(ms(0));
    let [(hung, _)] = dials(&actions(&mut s))[..] else { panic!() };
    s.handle_event(ms(1), Event::Connected { conn: hung });
    let _ = actions(&mut s);
    s.handle_timeout(ms(500));
    let [(second, _)] = dials(&actions(&mut s))[..] else { panic!() };
    s.handle_event(ms(501), Event::Connected { conn: second });
    let sends = actions(&mut s);
    serve(&mut s, ms(502), second, &mut Broker::default(), sends);
    let events: Vec<_> = core::iter::from_fn(|| s.poll_event()).collect();
    let names: Vec<_> = events
        .iter()
        .map(|e| match &e.kind {
            EventKind::Started { broker, .. } => alloc::format!("started {broker}"),
            EventKind::Connected { broker, .. } => alloc::format!("connected {broker}"),
            EventKind::Answered { broker, .. } => alloc::format!("answered {broker}"),
            EventKind::Timer { timer } => alloc::format!("timer {}", timer.name()),
            EventKind::Cancelled { broker, reason, .. } => alloc::format!("cancelled {broker} {}", reason.name()),
            EventKind::Won { broker, .. } => alloc::format!("won {broker}"),
            other => alloc::format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        names,
        [
            "started b1:9092",
            "connected b1:9092",
            "timer stagger",
            "started b2:9093",
            "connected b2:9093",
            "answered b2:9093",
            "cancelled b1:9092 overtaken",
            "won b2:9093",
        ]
    );
    assert_eq!(events[3].elapsed, Duration::from_millis(500), "timed from the refresh's start");
    let reports = s.reports();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0].outcome, AttemptOutcome::Cancelled(crate::CancelReason::Overtaken));
    assert_eq!(
        (reports[1].outcome.clone(), reports[1].connected),
        (AttemptOutcome::Won, Some(Duration::from_millis(501)))
    );
    assert!(reports[1].metadata_version.is_some());
    // The recorded trace replays to the same commands.
    let trace = s.last_trace().expect("recorded");
    assert!(trace.context.is_some_and(|c| c.epoch == 1));
    assert!(trace.replay().unwrap().is_ok(), "{:?}", trace.replay());
}

#[test]
fn a_session_that_does_not_observe_queues_no_event() {
    let mut s = session(config());
    healthy_refresh(&mut s, &mut Broker::default());
    assert_eq!(s.poll_event(), None);
    assert!(s.last_trace().is_none());
    assert_eq!(s.reports().len(), 1, "reports are there either way");
}

/// A host's draw replaces only the default seed, 0; a seed the caller set is kept and the
/// draw is not even asked for.
#[test]
fn the_hosts_draw_replaces_only_the_default_seed() {
    let mut left = SessionConfig::default();
    left.seed_unless_set(|| 42);
    assert_eq!(left.cluster.refresh.seed, 42);
    let mut set = SessionConfig::default();
    set.cluster.refresh.seed = 7;
    set.seed_unless_set(|| unreachable!("a set seed asks for no draw"));
    assert_eq!(set.cluster.refresh.seed, 7);
}
