//! Peak memory of one Kafka exchange fed hostile answers, measured by a global allocator
//! that counts this thread's live heap bytes: not only no single allocation past the frame
//! limit (`tests/exchange_fuzz.rs` checks that for every generated input), but no moment
//! at which the exchange holds more than a small multiple of it.
//!
//! What an exchange may hold at once is bounded by what it was sent, whatever the bytes
//! claim: the receive buffer (the frame being reassembled; grown by doubling, as `BytesMut`
//! grows, so up to twice the bytes received), what `kafka-protocol` decodes of one frame
//! (its arrays are charged against the limit by the guard, `src/kafka/guard.rs`; strings
//! share the frame's buffer), and the core's own `Metadata` made of it — each at most about
//! the limit, never what a length prefix or an array count announces. So the bound asserted
//! is [`PEAK_FACTOR`] × the limit plus [`SLACK`], and the hostile inputs below all sit at
//! exactly the limit, where they could hurt most. Failures that the guard or the framing
//! refuse cost the frame and an error of at most a few hundred bytes; a 2 GiB length prefix
//! costs nothing at all.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, MetadataResponse, ResponseHeader, SaslAuthenticateResponse,
    SaslHandshakeResponse, TopicName,
};
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
use stagger::kafka::sasl::{Sasl, Secret};
use stagger::kafka::{Exchange, ExchangeConfig};
use stagger::BrokerIdentity;

// ---- live bytes of this thread, and their peak -----------------------------------------------------

struct Live;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    // `try_with`: the allocator also runs while thread-locals are torn down.
    let _ = LIVE.try_with(|live| {
        live.set(live.get() + delta);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
    });
}

unsafe impl GlobalAlloc for Live {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Live = Live;

/// Runs `f` and returns its result with the most bytes it had live at once (above what was
/// live when it started; what it returns is counted, it was live at its end).
fn peak_of<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let result = f();
    (result, (PEAK.with(Cell::get) - start).max(0) as usize)
}

/// What an exchange may hold at once, in multiples of the maximum frame size: the receive
/// buffer (up to 2×, `BytesMut`'s doubling), the decoded response and the `Metadata` made of
/// it (each up to about 1×, see the module documentation).
const PEAK_FACTOR: usize = 4;

/// The fixed part: the exchange itself, its requests, an error's wording.
const SLACK: usize = 8 * 1024;

/// Bytes per `handle_bytes` call, as a transport's reads deliver them.
const CHUNK: usize = 512;

#[test]
fn the_counter_counts_live_bytes_and_their_peak() {
    let ((), peak) = peak_of(|| {
        let a = vec![0u8; 10_000];
        drop(a);
        let b = vec![0u8; 3_000];
        drop(b);
    });
    assert!((10_000..11_000).contains(&peak), "{peak}");
    let (kept, peak) = peak_of(|| vec![0u8; 5_000]);
    assert!((5_000..6_000).contains(&peak), "{peak}");
    drop(kept);
}

// ---- frames, encoded by kafka-protocol ----------------------------------------------------------

fn framed(message: &[u8]) -> Vec<u8> {
    let mut frame = (message.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(message);
    frame
}

fn response<T: Encodable + HeaderVersion>(correlation_id: i32, version: i16, body: &T) -> Vec<u8> {
    let mut buf = BytesMut::new();
    ResponseHeader::default().with_correlation_id(correlation_id).encode(&mut buf, T::header_version(version)).unwrap();
    body.encode(&mut buf, version).unwrap();
    framed(&buf)
}

/// ApiVersions offering Metadata up to `metadata` and the SASL APIs.
fn api_versions(metadata: i16) -> ApiVersionsResponse {
    let key = |key: ApiKey, max| ApiVersion::default().with_api_key(key as i16).with_max_version(max);
    ApiVersionsResponse::default().with_api_keys(vec![
        key(ApiKey::Metadata, metadata),
        key(ApiKey::ApiVersions, 3),
        key(ApiKey::SaslHandshake, 1),
        key(ApiKey::SaslAuthenticate, 2),
    ])
}

/// One scenario: how to make the exchange, and the broker's frames.
struct Case {
    what: String,
    config: ExchangeConfig,
    identity: Option<BrokerIdentity>,
    frames: Vec<Vec<u8>>,
}

impl Case {
    /// The frames' largest body: the tightest maximum frame size that accepts them all.
    fn tight(mut self) -> Case {
        self.config.max_frame_size = self.frames.iter().map(|f| f.len() - 4).max().unwrap_or(0);
        self
    }

    /// Feeds every frame in [`CHUNK`]-byte pieces, then EOF; the outcome (as text) and the peak.
    fn run(&self) -> (String, usize) {
        let stream = self.frames.concat();
        peak_of(|| {
            let mut exchange = Exchange::with_identity(&self.config, self.identity.as_ref());
            exchange.set_sasl_nonce(b"hostile-memory-non");
            for chunk in stream.chunks(CHUNK) {
                exchange.handle_bytes(chunk);
                let _ = exchange.poll_transmit();
            }
            exchange.handle_eof();
            match exchange.poll_outcome().expect("an outcome") {
                Ok(metadata) => format!("ok: {} brokers, {} topics", metadata.brokers.len(), metadata.topics.len()),
                Err(e) => e.to_string().chars().take(160).collect(),
            }
        })
    }
}

/// A Metadata response packed with `n` of the smallest `what` there are.
fn packed_metadata(what: &str, n: usize) -> MetadataResponse {
    let broker = MetadataResponseBroker::default().with_node_id(BrokerId(1)).with_port(1);
    let mut body = MetadataResponse::default().with_brokers(vec![broker.clone()]);
    match what {
        "brokers" => body.brokers = vec![broker; n],
        "topics" => body.topics = vec![MetadataResponseTopic::default().with_name(None); n],
        "partitions" => {
            body.topics = vec![MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                .with_partitions(vec![MetadataResponsePartition::default(); n])]
        }
        "replicas" => {
            let partition = MetadataResponsePartition::default().with_replica_nodes(vec![BrokerId(1); n]);
            body.topics = vec![MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                .with_partitions(vec![partition])]
        }
        other => unreachable!("{other}"),
    }
    body
}

fn sasl(mechanism: &str) -> ExchangeConfig {
    let sasl = Sasl::from_parts(mechanism, "user", Secret::new("password")).unwrap();
    ExchangeConfig { sasl: Some(sasl), ..ExchangeConfig::default() }
}

/// ApiVersions, an accepting handshake, then these SaslAuthenticate answers (v2).
fn sasl_frames(answers: &[(i16, Option<String>, Vec<u8>)]) -> Vec<Vec<u8>> {
    let mut frames = vec![response(1, 3, &api_versions(13)), response(2, 1, &SaslHandshakeResponse::default())];
    for (i, (code, message, payload)) in answers.iter().enumerate() {
        let body = SaslAuthenticateResponse::default()
            .with_error_code(*code)
            .with_error_message(message.clone().map(StrBytes::from_string))
            .with_auth_bytes(Bytes::copy_from_slice(payload));
        frames.push(response(3 + i as i32, 2, &body));
    }
    frames
}

/// Every hostile answer at the limit, for a body of about `size` bytes.
fn cases(size: usize) -> Vec<Case> {
    let mut cases = Vec::new();
    let plain = |what: String, frames| Case { what, config: ExchangeConfig::default(), identity: None, frames };
    for version in [0, 9, 13] {
        for (what, per) in [("brokers", 12), ("topics", 8), ("partitions", 30), ("replicas", 4)] {
            let frames =
                vec![response(1, 3, &api_versions(version)), response(2, version, &packed_metadata(what, size / per))];
            cases.push(plain(format!("Metadata v{version} packed with {what}"), frames).tight());
        }
    }
    // Frames at the limit that decode: long names, so that the arrays fit the limit too.
    let host = ["h".repeat(49), "h".repeat(49), "h".repeat(49), "h".repeat(49)].join(".");
    for version in [0, 9, 13] {
        let topic = |t: usize| {
            let name = format!("{t:05}-{}", "t".repeat(200));
            let partition = MetadataResponsePartition::default().with_replica_nodes(vec![BrokerId(1)]);
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(name))))
                .with_partitions(vec![partition])
        };
        let broker = |b: usize| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b as i32))
                .with_host(StrBytes::from_string(host.clone()))
                .with_port(9092)
        };
        let n = size / 240;
        let body = MetadataResponse::default()
            .with_brokers((0..n).map(broker).collect())
            .with_topics((0..n).map(topic).collect());
        let frames = vec![response(1, 3, &api_versions(version)), response(2, version, &body)];
        cases.push(plain(format!("Metadata v{version} of long names, accepted"), frames).tight());
    }
    // The guard's budget filled with partitions, the rest of the frame one long cluster id:
    // what is decoded, converted and still buffered is as large as it gets.
    for version in [2, 13] {
        let partitions = vec![MetadataResponsePartition::default(); size / 160];
        let topic = MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
            .with_partitions(partitions);
        let body = packed_metadata("brokers", 1)
            // Before v9 a string's length is an INT16.
            .with_cluster_id(Some(StrBytes::from_string("c".repeat((size / 2).min(30_000)))))
            .with_topics(vec![topic]);
        let frames = vec![response(1, 3, &api_versions(version)), response(2, version, &body)];
        let mut case =
            plain(format!("Metadata v{version} full of partitions and cluster id, accepted"), frames).tight();
        // As little room as the guard needs: what it charges for the arrays (112 bytes per
        // partition, 96 for the broker, 104 for the topic), if the frame is smaller.
        case.config.max_frame_size = case.config.max_frame_size.max(size / 160 * 112 + 200);
        cases.push(case);
    }
    // A frame at the limit whose array counts then claim more than it holds: refused by the guard.
    let mut lying = response(2, 0, &packed_metadata("topics", size / 8));
    // Length, correlation id, one broker (count, node id, empty host, port), then the topics' count.
    lying[22..26].copy_from_slice(&i32::MAX.to_be_bytes());
    cases.push(plain("Metadata whose counts lie".into(), vec![response(1, 3, &api_versions(0)), lying]).tight());
    // Length prefixes of 2 GiB and of just over the limit: refused after four bytes.
    for prefix in [i32::MAX as u32, 4097] {
        let mut frames = vec![response(1, 3, &api_versions(13))];
        frames.push([&prefix.to_be_bytes()[..], &vec![0u8; size]].concat());
        let case = Case {
            config: ExchangeConfig { max_frame_size: 4096, ..ExchangeConfig::default() },
            ..plain(format!("a length prefix of {prefix}"), frames)
        };
        cases.push(case);
    }
    // SASL: text of the broker's that ends up in errors.
    let controls = "\u{1}".repeat(size);
    let nonce = "aG9zdGlsZS1tZW1vcnktbm9u"; // base64 of the nonce set in `run`
    let sasl_case = |what: &str, mechanism: &str, frames| {
        Case { what: what.into(), config: sasl(mechanism), identity: None, frames }.tight()
    };
    cases.push(sasl_case(
        "an OAUTHBEARER error JSON of invalid UTF-8",
        "OAUTHBEARER",
        sasl_frames(&[(0, None, vec![0xff; size]), (58, Some("no".into()), vec![])]),
    ));
    cases.push(sasl_case(
        "a SCRAM attribute of control characters",
        "SCRAM-SHA-256",
        sasl_frames(&[(0, None, controls.clone().into_bytes())]),
    ));
    cases.push(sasl_case(
        "a SCRAM iteration count of control characters",
        "SCRAM-SHA-512",
        sasl_frames(&[(0, None, format!("r={nonce}x,s=c2FsdA==,i={controls}").into_bytes())]),
    ));
    cases.push(sasl_case(
        "a SCRAM nonce filling the frame",
        "SCRAM-SHA-256",
        sasl_frames(&[
            (0, None, format!("r={nonce}{},s=c2FsdA==,i=1", "x".repeat(size)).into_bytes()),
            (0, None, b"v=AAAA".to_vec()),
        ]),
    ));
    cases.push(sasl_case(
        "a SCRAM salt filling the frame",
        "SCRAM-SHA-256",
        sasl_frames(&[(0, None, format!("r={nonce}x,s={},i=1", "QUFB".repeat(size / 4)).into_bytes())]),
    ));
    cases.push(sasl_case(
        "a refusal message of control characters",
        "PLAIN",
        sasl_frames(&[(58, Some(controls.clone()), vec![])]),
    ));
    let mechanisms = SaslHandshakeResponse::default()
        .with_error_code(33)
        .with_mechanisms(vec![StrBytes::from_static_str("M"); size / 4]);
    cases.push(sasl_case(
        "a handshake listing thousands of mechanisms",
        "PLAIN",
        vec![response(1, 3, &api_versions(13)), response(2, 1, &mechanisms)],
    ));
    // ApiVersions v5: another cluster's id filling the frame.
    let other = MetadataResponse::default()
        .with_cluster_id(Some(StrBytes::from_string("\u{1}".repeat(size))))
        .with_brokers(vec![MetadataResponseBroker::default().with_node_id(BrokerId(1)).with_port(1)]);
    let identity = Some(BrokerIdentity { cluster_id: "expected".into(), node_id: 1 });
    let frames = vec![response(1, 4, &api_versions(13)), response(2, 13, &other)];
    cases.push(
        Case {
            what: "another cluster's id filling the frame".into(),
            config: ExchangeConfig::default(),
            identity,
            frames,
        }
        .tight(),
    );
    cases
}

/// Every hostile answer, at the limit, at three limits: the peak stays within
/// `PEAK_FACTOR × limit + SLACK`.
#[test]
fn hostile_answers_at_the_limit_hold_a_bounded_peak() {
    let mut failures = Vec::new();
    for size in [2 * 1024, 16 * 1024, 128 * 1024] {
        for case in cases(size) {
            let limit = case.config.max_frame_size;
            let (outcome, peak) = case.run();
            eprintln!(
                "{:>7} B limit, peak {:>7} B ({:.2}x): {}: {outcome}",
                limit,
                peak,
                peak as f64 / limit as f64,
                case.what
            );
            if case.what.ends_with("accepted") && !outcome.starts_with("ok") {
                failures.push(format!("{}: not accepted: {outcome}", case.what));
            }
            if peak > PEAK_FACTOR * limit + SLACK {
                failures.push(format!("{}: peak {peak} B for a limit of {limit} B: {outcome}", case.what));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
