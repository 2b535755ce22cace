//! What the ABI tests share: a host that speaks only through the exported functions (it
//! encodes events and decodes actions with `stagger_abi::host`, as a Go or Python host does
//! from docs/abi.md), and fake brokers whose answers `kafka-protocol` encodes.
#![allow(dead_code)]

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use hmac::digest::core_api::BlockSizeUser;
use hmac::digest::{Digest, FixedOutput, KeyInit, Update};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use serde_json::Value;
use stagger_abi::host::{decode_actions, encode_events, HostAction, HostActions, HostEvent};
use stagger_abi::*;

pub const SECOND: u64 = 1_000_000_000;
pub const MS: u64 = 1_000_000;
pub const PASSWORD: &str = "correct horse";

/// A session seen only through the ABI.
pub struct Abi {
    pub handle: u64,
}

/// What a failed call returned: its status and its error JSON.
#[derive(Debug)]
pub struct Failure {
    pub status: i32,
    pub json: Value,
}

/// A copy of a buffer the library returned (it is valid only until the next call).
fn copy(out: &StaggerBuf) -> Vec<u8> {
    if out.len == 0 {
        return Vec::new();
    }
    // SAFETY: the library's buffer, read before any other call.
    unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec()
}

fn empty() -> StaggerBuf {
    StaggerBuf { ptr: std::ptr::null(), len: 0 }
}

/// The thread's last error.
pub fn last_error() -> Failure {
    let mut out = empty();
    // SAFETY: `out` is a valid place.
    let status = unsafe { stagger_last_error(&mut out) };
    Failure { status, json: serde_json::from_slice(&copy(&out)).expect("error JSON") }
}

/// Runs a call that writes `out`; the answer's bytes, or the failure.
pub fn call(f: impl FnOnce(&mut StaggerBuf) -> i32) -> Result<Vec<u8>, Failure> {
    let mut out = empty();
    let status = f(&mut out);
    let bytes = copy(&out);
    if status == STAGGER_OK {
        Ok(bytes)
    } else {
        Err(Failure { status, json: serde_json::from_slice(&bytes).expect("error JSON") })
    }
}

/// The step's answer, owned.
pub struct Step {
    pub bytes: Vec<u8>,
}

impl Step {
    pub fn actions(&self) -> HostActions<'_> {
        decode_actions(&self.bytes).expect("the library's action batch decodes")
    }
}

impl Abi {
    pub fn new(config: &str, now_ns: u64, seed: u64) -> Result<Abi, Failure> {
        // SAFETY: a valid slice.
        let handle = unsafe { stagger_session_new(config.as_ptr(), config.len(), now_ns, seed) };
        if handle == 0 {
            return Err(last_error());
        }
        Ok(Abi { handle })
    }

    pub fn step_raw(&self, now_ns: u64, batch: &[u8]) -> Result<Step, Failure> {
        // SAFETY: a valid slice and place.
        call(|out| unsafe { stagger_step(self.handle, now_ns, batch.as_ptr(), batch.len(), out) })
            .map(|bytes| Step { bytes })
    }

    pub fn step(&self, now_ns: u64, events: &[HostEvent]) -> Step {
        self.step_raw(now_ns, &encode_events(events)).expect("the step succeeds")
    }

    pub fn metadata(&self) -> Value {
        // SAFETY: a valid place.
        let bytes = call(|out| unsafe { stagger_metadata(self.handle, out) }).expect("metadata");
        serde_json::from_slice(&bytes).unwrap()
    }

    pub fn report(&self) -> Value {
        // SAFETY: a valid place.
        let bytes = call(|out| unsafe { stagger_report(self.handle, out) }).expect("report");
        serde_json::from_slice(&bytes).unwrap()
    }
}

impl Drop for Abi {
    fn drop(&mut self) {
        stagger_session_free(self.handle);
    }
}

/// Owned copies of actions, for tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Act {
    Dial(u64, String, Option<String>),
    Send(u64, Vec<u8>),
    Close(u64),
    Resolve(u64, String),
    NeedNonce(u64),
    NeedToken(u64),
    Refreshed(u32, String),
    RefreshFailed(u32, Value),
    Rebootstrapped,
    RefreshRequested(u32),
}

pub fn owned(actions: &HostActions<'_>) -> Vec<Act> {
    actions
        .actions
        .iter()
        .map(|a| match *a {
            HostAction::Dial { conn, address, tls } => Act::Dial(conn, address.into(), tls.map(String::from)),
            HostAction::Send { conn, bytes } => Act::Send(conn, bytes.to_vec()),
            HostAction::Close { conn } => Act::Close(conn),
            HostAction::Resolve { lookup, name } => Act::Resolve(lookup, name.into()),
            HostAction::NeedNonce { conn } => Act::NeedNonce(conn),
            HostAction::NeedToken { conn } => Act::NeedToken(conn),
            HostAction::Refreshed { epoch, address, .. } => Act::Refreshed(epoch, address.into()),
            HostAction::RefreshFailed { epoch, error } => {
                Act::RefreshFailed(epoch, serde_json::from_str(error).unwrap())
            }
            HostAction::Rebootstrapped => Act::Rebootstrapped,
            HostAction::RefreshRequested { epoch } => Act::RefreshRequested(epoch),
        })
        .collect()
}

pub fn dials(acts: &[Act]) -> Vec<(u64, String)> {
    acts.iter().filter_map(|a| if let Act::Dial(c, addr, _) = a { Some((*c, addr.clone())) } else { None }).collect()
}

pub fn kinds(acts: &[Act]) -> Vec<&'static str> {
    acts.iter()
        .map(|a| match a {
            Act::Dial(..) => "dial",
            Act::Send(..) => "send",
            Act::Close(..) => "close",
            Act::Resolve(..) => "resolve",
            Act::NeedNonce(..) => "need_nonce",
            Act::NeedToken(..) => "need_token",
            Act::Refreshed(..) => "refreshed",
            Act::RefreshFailed(..) => "refresh_failed",
            Act::Rebootstrapped => "rebootstrapped",
            Act::RefreshRequested(..) => "refresh_requested",
        })
        .collect()
}

// ---- the fake broker ----

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// A response frame: header (in the version `T` calls for) and body, length-prefixed.
pub fn response<T: Encodable + HeaderVersion>(correlation_id: i32, version: i16, body: &T) -> Vec<u8> {
    let mut buf = BytesMut::new();
    ResponseHeader::default().with_correlation_id(correlation_id).encode(&mut buf, T::header_version(version)).unwrap();
    body.encode(&mut buf, version).unwrap();
    let mut framed = (buf.len() as u32).to_be_bytes().to_vec();
    framed.extend_from_slice(&buf);
    framed
}

/// The test cluster: two brokers, `topics` topics of `partitions` partitions each.
pub fn cluster(topics: usize, partitions: i32) -> MetadataResponse {
    let topic = |t: usize| {
        MetadataResponseTopic::default().with_name(Some(TopicName(s(&format!("topic-{t:06}"))))).with_partitions(
            (0..partitions)
                .map(|p| {
                    MetadataResponsePartition::default()
                        .with_partition_index(p)
                        .with_leader_id(BrokerId(1 + p % 2))
                        .with_replica_nodes(vec![BrokerId(1), BrokerId(2), BrokerId(3)])
                        .with_isr_nodes(vec![BrokerId(1), BrokerId(2), BrokerId(3)])
                })
                .collect(),
        )
    };
    MetadataResponse::default()
        .with_cluster_id(Some(s("kafka-cluster-1")))
        .with_controller_id(BrokerId(2))
        .with_brokers(vec![
            MetadataResponseBroker::default().with_node_id(BrokerId(1)).with_host(s("b1")).with_port(9092),
            MetadataResponseBroker::default().with_node_id(BrokerId(2)).with_host(s("b2")).with_port(9093),
        ])
        .with_topics((0..topics).map(topic).collect())
}

/// One fake broker: answers each request frame as a healthy Kafka with SASL would.
pub struct Broker {
    pub metadata: MetadataResponse,
    /// The mechanism the last SaslHandshake asked for.
    mechanism: String,
    scram: Option<ScramServer>,
    /// Requests seen, by API key.
    pub seen: Vec<ApiKey>,
    /// OAUTHBEARER payloads received.
    pub bearer: Vec<Vec<u8>>,
}

impl Default for Broker {
    fn default() -> Self {
        Broker { metadata: cluster(2, 2), mechanism: String::new(), scram: None, seen: Vec::new(), bearer: Vec::new() }
    }
}

impl Broker {
    /// A broker answering Metadata with `metadata`.
    pub fn with(metadata: MetadataResponse) -> Broker {
        Broker { metadata, ..Broker::default() }
    }

    /// The answer to one request frame.
    pub fn answer(&mut self, frame: &[u8]) -> Vec<u8> {
        let mut body = Bytes::copy_from_slice(&frame[4..]);
        let key = ApiKey::try_from(i16::from_be_bytes([body[0], body[1]])).unwrap();
        let version = i16::from_be_bytes([body[2], body[3]]);
        let header = RequestHeader::decode(&mut body, key.request_header_version(version)).unwrap();
        let id = header.correlation_id;
        self.seen.push(key);
        match key {
            ApiKey::ApiVersions if version > 3 => {
                // A broker before Kafka 4.4 (this one knows ApiVersions up to v3) answers a
                // version it does not know, such as the v5 of the cluster check, with
                // UNSUPPORTED_VERSION in a v0 body that lists the versions it knows.
                let known = ApiVersion::default().with_api_key(ApiKey::ApiVersions as i16).with_max_version(3);
                response(id, 0, &ApiVersionsResponse::default().with_error_code(35).with_api_keys(vec![known]))
            }
            ApiKey::ApiVersions => {
                let mut keys = vec![
                    ApiVersion::default().with_api_key(ApiKey::Metadata as i16).with_max_version(12),
                    ApiVersion::default().with_api_key(ApiKey::ApiVersions as i16).with_max_version(3),
                ];
                for (key, max) in [(ApiKey::SaslHandshake, 1), (ApiKey::SaslAuthenticate, 2)] {
                    keys.push(ApiVersion::default().with_api_key(key as i16).with_max_version(max));
                }
                response(id, version, &ApiVersionsResponse::default().with_api_keys(keys))
            }
            ApiKey::SaslHandshake => {
                self.mechanism = SaslHandshakeRequest::decode(&mut body, version).unwrap().mechanism.to_string();
                let mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"].map(s).to_vec();
                response(id, version, &SaslHandshakeResponse::default().with_mechanisms(mechanisms))
            }
            ApiKey::SaslAuthenticate => {
                let auth = SaslAuthenticateRequest::decode(&mut body, version).unwrap().auth_bytes.to_vec();
                let reply = if auth.starts_with(b"n,,n=") {
                    let sha512 = self.mechanism == "SCRAM-SHA-512";
                    self.scram.insert(ScramServer::new(PASSWORD, sha512)).first(&auth).into_bytes()
                } else if auth.starts_with(b"c=") {
                    let server = self.scram.as_mut().expect("client-first came first");
                    server.last(&auth).expect("the proof holds").into_bytes()
                } else {
                    if auth.starts_with(b"n,,\x01") {
                        self.bearer.push(auth);
                    }
                    Vec::new()
                };
                response(id, version, &SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(reply)))
            }
            ApiKey::Metadata => response(id, version, &self.metadata),
            other => panic!("the fake broker does not answer {other:?}"),
        }
    }
}

/// The broker's side of SCRAM-SHA-256 or SCRAM-SHA-512 (RFC 5802) for user `alice`.
struct ScramServer {
    sha512: bool,
    salted: Vec<u8>,
    auth_message: String,
}

fn mac<D: Digest + BlockSizeUser + Clone>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = <hmac::SimpleHmac<D> as KeyInit>::new_from_slice(key).unwrap();
    Update::update(&mut mac, data);
    mac.finalize_fixed().to_vec()
}

impl ScramServer {
    fn new(password: &str, sha512: bool) -> Self {
        let mut salted = vec![0; if sha512 { 64 } else { 32 }];
        let password = password.as_bytes();
        if sha512 {
            pbkdf2::pbkdf2::<hmac::SimpleHmac<sha2::Sha512>>(password, b"pepper", 4096, &mut salted).unwrap();
        } else {
            pbkdf2::pbkdf2::<hmac::SimpleHmac<sha2::Sha256>>(password, b"pepper", 4096, &mut salted).unwrap();
        }
        ScramServer { sha512, salted, auth_message: String::new() }
    }

    fn h_mac(&self, key: &[u8], data: &[u8]) -> Vec<u8> {
        if self.sha512 {
            mac::<sha2::Sha512>(key, data)
        } else {
            mac::<sha2::Sha256>(key, data)
        }
    }

    fn h(&self, data: &[u8]) -> Vec<u8> {
        if self.sha512 {
            sha2::Sha512::digest(data).to_vec()
        } else {
            sha2::Sha256::digest(data).to_vec()
        }
    }

    fn first(&mut self, client_first: &[u8]) -> String {
        let bare = std::str::from_utf8(client_first).unwrap().strip_prefix("n,,").unwrap();
        let nonce = bare.strip_prefix("n=alice,r=").expect("user alice");
        let server_first = format!("r={nonce}SRV,s={},i=4096", BASE64.encode(b"pepper"));
        self.auth_message = format!("{bare},{server_first}");
        server_first
    }

    fn last(&mut self, client_final: &[u8]) -> Option<String> {
        let text = std::str::from_utf8(client_final).unwrap();
        let (without_proof, proof) = text.rsplit_once(",p=").unwrap();
        self.auth_message = format!("{},{without_proof}", self.auth_message);
        let stored_key = self.h(&self.h_mac(&self.salted, b"Client Key"));
        let signature = self.h_mac(&stored_key, self.auth_message.as_bytes());
        let client_key: Vec<u8> = BASE64.decode(proof).unwrap().iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        (self.h(&client_key) == stored_key).then(|| {
            let server_key = self.h_mac(&self.salted, b"Server Key");
            format!("v={}", BASE64.encode(self.h_mac(&server_key, self.auth_message.as_bytes())))
        })
    }
}

/// Answers every `SEND` on `conn` through `broker` (each answer in one `RECEIVED`), and the
/// ones that follow, until the session sends nothing more; returns every action seen.
pub fn serve(abi: &Abi, now_ns: u64, conn: u64, broker: &mut Broker, first: Vec<Act>) -> Vec<Act> {
    let mut seen = Vec::new();
    let mut pending = first;
    while !pending.is_empty() {
        let events: Vec<HostEvent> = pending
            .iter()
            .filter_map(|a| match a {
                Act::Send(c, bytes) if *c == conn => Some(HostEvent::Received(conn, broker.answer(bytes))),
                _ => None,
            })
            .collect();
        seen.append(&mut pending);
        if !events.is_empty() {
            pending = owned(&abi.step(now_ns, &events).actions());
        }
    }
    seen
}
