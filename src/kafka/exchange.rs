//! The per-connection state machine: ApiVersions first, then Metadata at the best version.
//!
//! With an expected [`BrokerIdentity`] (a broker the client discovered), ApiVersions goes out
//! as v5 carrying it, Kafka 4.4's cluster check (KIP-1242); a broker that predates v5 answers
//! UNSUPPORTED_VERSION and the exchange goes on with v3, then checks the cluster id of the
//! Metadata answer itself.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse, RequestHeader, ResponseHeader,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, StrBytes, VersionRange};

use super::frame::{encode_frame, FrameDecoder};
use super::{api_versions_v5, convert, guard, ExchangeConfig};
use crate::brokers::BrokerIdentity;
use crate::error::{AttemptError, ErrorKind};
use crate::metadata::Metadata;

/// ApiVersions v3 is the first flexible version and tells the broker who we are (KIP-511).
const API_VERSIONS_PREFERRED: i16 = 3;
/// What we retry with when a broker does not know v3: every broker answers v0.
const API_VERSIONS_FALLBACK: i16 = 0;
/// Kafka's UNSUPPORTED_VERSION error code.
const UNSUPPORTED_VERSION: i16 = 35;
/// Kafka's REBOOTSTRAP_REQUIRED error code (KIP-1102): what a Kafka 4.4 broker answers to
/// ApiVersions v5 when it is not the node of the cluster the client expected (KIP-1242).
const REBOOTSTRAP_REQUIRED: i16 = 129;
/// Reported in ApiVersions v3 so broker operators can see who is asking.
const SOFTWARE_NAME: &str = "stagger";
/// Reported alongside [`SOFTWARE_NAME`].
const SOFTWARE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// One connection's conversation with one broker, from connect to `Metadata` or an error.
///
/// Sans-IO like the rest of the core: the caller writes what [`poll_transmit`] yields, feeds
/// what it reads to [`handle_bytes`] (split anyhow), reports EOF with [`handle_eof`], and
/// collects the result with [`poll_outcome`]. Timeouts are the caller's business (the refresh
/// core owns the attempt timeout), so nothing here ever waits.
///
/// [`poll_transmit`]: Exchange::poll_transmit
/// [`handle_bytes`]: Exchange::handle_bytes
/// [`handle_eof`]: Exchange::handle_eof
/// [`poll_outcome`]: Exchange::poll_outcome
#[derive(Debug)]
pub struct Exchange {
    /// `client.id` for every request header.
    client_id: StrBytes,
    /// Topics to ask for; `None` for all.
    topics: Option<Vec<String>>,
    /// Reassembles response frames from the received bytes.
    frames: FrameDecoder,
    /// Also bounds what decoding a frame may reserve in memory (see `guard`).
    max_frame_size: usize,
    /// The request whose response we wait for; `None` once finished.
    in_flight: Option<InFlight>,
    /// Correlation id of the next request.
    next_correlation_id: i32,
    /// An encoded request not yet taken by the caller.
    transmit: Option<Bytes>,
    /// Metadata version agreed with the broker, once known.
    metadata_version: Option<i16>,
    /// Which cluster and node the caller expects this broker to be, if it knows (a complete
    /// identity only: an incomplete one is never sent, see [`BrokerIdentity::is_complete`]).
    expected: Option<BrokerIdentity>,
    /// Whether the broker accepted ApiVersions v5, i.e. checked `expected` itself.
    checked_by_broker: bool,
    /// Whether the outcome has been produced (it may already have been taken).
    finished: bool,
    /// Whether a complete response frame has arrived (the broker is alive).
    answered: bool,
    /// The outcome, until taken.
    outcome: Option<Result<Metadata, AttemptError>>,
}

/// A request sent (or ready to send) whose response has not arrived yet.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    correlation_id: i32,
    awaiting: Awaiting,
}

/// Which response comes next, and in which version it is encoded.
#[derive(Clone, Copy, Debug)]
enum Awaiting {
    ApiVersions { version: i16 },
    Metadata { version: i16 },
}

impl Exchange {
    /// Create right after the transport connected, for a broker whose identity is not known
    /// (a seed, a one-shot refresh): [`Exchange::with_identity`] without one.
    pub fn new(config: &ExchangeConfig) -> Exchange {
        Exchange::with_identity(config, None)
    }

    /// Create right after the transport connected, expecting the broker to be `expected`
    /// (the node and cluster metadata last listed at this address, if known). The ApiVersions
    /// request is ready at once.
    ///
    /// With a complete identity, ApiVersions goes out as v5 with it (KIP-1242), and a broker
    /// that is no longer that node of that cluster fails the attempt with
    /// `BrokerError(129)` (REBOOTSTRAP_REQUIRED), as does one predating v5 whose Metadata
    /// answer names another cluster. Without one, ApiVersions v3 as always.
    ///
    /// Never fails: should the request not encode (a client id over 32 KiB), the exchange is
    /// born finished with a `Protocol` error, which the caller handles like any other.
    pub fn with_identity(config: &ExchangeConfig, expected: Option<&BrokerIdentity>) -> Exchange {
        let expected = expected.filter(|identity| identity.is_complete()).cloned();
        let first = if expected.is_some() { api_versions_v5::VERSION } else { API_VERSIONS_PREFERRED };
        let mut exchange = Exchange {
            client_id: StrBytes::from_string(config.client_id.clone()),
            topics: config.topics.clone(),
            frames: FrameDecoder::new(config.max_frame_size),
            max_frame_size: config.max_frame_size,
            in_flight: None,
            next_correlation_id: 1,
            transmit: None,
            metadata_version: None,
            expected,
            checked_by_broker: false,
            finished: false,
            answered: false,
            outcome: None,
        };
        exchange.send_api_versions(first);
        exchange
    }

    /// Next complete length-prefixed request frame to write, if any.
    ///
    /// At most one request is outstanding at a time, so this yields one frame after `new`
    /// and one after each response that calls for another request; nothing once finished.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        self.transmit.take()
    }

    /// Feed received bytes; any split (one byte at a time, many frames at once) works.
    ///
    /// A bad length prefix fails the exchange as soon as its four bytes are here; a complete
    /// frame is decoded at once. Bytes arriving after the outcome are ignored.
    pub fn handle_bytes(&mut self, data: &[u8]) {
        if self.finished {
            return;
        }
        self.frames.push(data);
        while !self.finished {
            match self.frames.next_frame() {
                Ok(Some(frame)) => self.handle_frame(frame),
                Ok(None) => break,
                Err(error) => self.finish(Err(error)),
            }
        }
    }

    /// The peer closed the connection (EOF). Unless finished, the outcome becomes
    /// `ErrorKind::Closed`, saying "mid-frame" when part of a frame was buffered — the
    /// difference between a broker that hung up and one that died while answering.
    pub fn handle_eof(&mut self) {
        if self.finished {
            return;
        }
        let waiting_for = match self.in_flight.map(|f| f.awaiting) {
            Some(Awaiting::ApiVersions { .. }) => "the ApiVersions response",
            Some(Awaiting::Metadata { .. }) => "the Metadata response",
            None => "a response",
        };
        let detail = match self.frames.partial() {
            Some(partial) => format!("closed mid-frame while waiting for {waiting_for} ({partial})"),
            None => format!("closed while waiting for {waiting_for}"),
        };
        self.finish(Err(AttemptError::with_detail(ErrorKind::Closed, detail)));
    }

    /// Takes the outcome once finished: `Ok(Metadata)` or `Err(AttemptError)`; `None` before
    /// that and after taking. A metadata answer carrying a top-level error is still `Ok`: the
    /// refresh core decides (with `Metadata::rejection`) whether it can win.
    #[must_use]
    pub fn poll_outcome(&mut self) -> Option<Result<Metadata, AttemptError>> {
        self.outcome.take()
    }

    /// Whether an outcome has been produced (taken or not): the connection can be closed.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Whether the broker has sent a complete response frame yet (for Kafka: the ApiVersions
    /// answer). Report [`crate::Input::Answered`] when this turns true: it tells the adaptive
    /// stagger that the broker is alive and merely busy, not hung.
    pub fn has_answered(&self) -> bool {
        self.answered
    }

    /// Metadata API version negotiated (`None` until ApiVersions answered) — for logs/traces.
    pub fn metadata_version(&self) -> Option<i16> {
        self.metadata_version
    }

    fn finish(&mut self, outcome: Result<Metadata, AttemptError>) {
        self.finished = true;
        self.outcome = Some(outcome);
        self.in_flight = None;
        self.transmit = None;
        self.frames.clear();
    }

    fn handle_frame(&mut self, frame: Bytes) {
        self.answered = true;
        let Some(InFlight { correlation_id, awaiting }) = self.in_flight.take() else { return };
        let result = match awaiting {
            Awaiting::ApiVersions { version } => read_api_versions(frame, correlation_id, version, self.max_frame_size)
                .and_then(|response| self.on_api_versions(&response, version)),
            Awaiting::Metadata { version } => read_metadata(frame, correlation_id, version, self.max_frame_size)
                .and_then(|metadata| self.check_cluster(metadata))
                .map(|metadata| self.finish(Ok(metadata))),
        };
        if let Err(error) = result {
            self.finish(Err(error));
        }
    }

    fn on_api_versions(&mut self, response: &ApiVersionsResponse, version: i16) -> Result<(), AttemptError> {
        match response.error_code {
            0 => {
                let metadata_version = negotiate_metadata_version(response)?;
                self.metadata_version = Some(metadata_version);
                self.checked_by_broker = version == api_versions_v5::VERSION;
                self.send_metadata(metadata_version);
                Ok(())
            }
            UNSUPPORTED_VERSION if version != API_VERSIONS_FALLBACK => {
                // v5 → v3 (a broker before Kafka 4.4), v3 → v0 (before Kafka 2.4).
                let lower =
                    if version > API_VERSIONS_PREFERRED { API_VERSIONS_PREFERRED } else { API_VERSIONS_FALLBACK };
                self.send_api_versions(lower);
                Ok(())
            }
            REBOOTSTRAP_REQUIRED => {
                let detail = match &self.expected {
                    Some(expected) => format!(
                        "this address no longer belongs to cluster {} as node {}: the broker answered \
                         REBOOTSTRAP_REQUIRED to ApiVersions v{version} (KIP-1242); rebootstrap from the seeds",
                        expected.cluster_id, expected.node_id
                    ),
                    None => format!(
                        "the broker answered REBOOTSTRAP_REQUIRED to ApiVersions v{version}: this address no \
                         longer belongs to the cluster; rebootstrap from the seeds"
                    ),
                };
                Err(AttemptError::with_detail(ErrorKind::BrokerError(REBOOTSTRAP_REQUIRED), detail))
            }
            code => {
                let detail = format!("ApiVersions v{version} answered with error {code}");
                Err(AttemptError::with_detail(ErrorKind::BrokerError(code), detail))
            }
        }
    }

    /// The broker said nothing against `expected` (it may predate the check): a Metadata
    /// answer naming another cluster still must not win. Only the cluster can be checked
    /// here — Metadata does not say which node answered.
    fn check_cluster(&self, metadata: Metadata) -> Result<Metadata, AttemptError> {
        let (Some(expected), Some(answered)) = (&self.expected, &metadata.cluster_id) else { return Ok(metadata) };
        if *answered == expected.cluster_id {
            return Ok(metadata);
        }
        let checked = if self.checked_by_broker {
            "checked by the client, although the broker accepted the ApiVersions v5 check"
        } else {
            "checked by the client because the broker predates KIP-1242"
        };
        let detail = format!(
            "this address no longer belongs to cluster {} as node {}: the broker answered Metadata for cluster \
             {answered} while cluster {} was expected ({checked}); rebootstrap from the seeds",
            expected.cluster_id, expected.node_id, expected.cluster_id
        );
        Err(AttemptError::with_detail(ErrorKind::BrokerError(REBOOTSTRAP_REQUIRED), detail))
    }

    fn send_api_versions(&mut self, version: i16) {
        if version == api_versions_v5::VERSION {
            if let Some(expected) = self.expected.take() {
                let request = api_versions_v5::Request {
                    software_name: SOFTWARE_NAME,
                    software_version: SOFTWARE_VERSION,
                    cluster_id: Some(&expected.cluster_id),
                    node_id: expected.node_id,
                };
                let awaiting = Awaiting::ApiVersions { version };
                let header_version = api_versions_v5::HEADER_VERSION;
                self.send_with(ApiKey::ApiVersions, version, header_version, awaiting, |buf| request.encode(buf));
                // Taken only so that the request could borrow it while `self` was borrowed.
                self.expected = Some(expected);
                return;
            }
        }
        let request = if version >= 3 {
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str(SOFTWARE_NAME))
                .with_client_software_version(StrBytes::from_static_str(SOFTWARE_VERSION))
        } else {
            ApiVersionsRequest::default()
        };
        self.send(ApiKey::ApiVersions, version, &request, Awaiting::ApiVersions { version });
    }

    fn send_metadata(&mut self, version: i16) {
        let topics = match &self.topics {
            // v0 has no null: an empty list is how it says "all topics".
            None if version == 0 => Some(Vec::new()),
            None => None,
            Some(names) => Some(
                names
                    .iter()
                    .map(|name| {
                        let name = TopicName(StrBytes::from_string(name.clone()));
                        MetadataRequestTopic::default().with_name(Some(name))
                    })
                    .collect(),
            ),
        };
        let request = MetadataRequest::default()
            .with_topics(topics)
            // Listing metadata must not create topics; before v4 the field does not exist and
            // the broker's `auto.create.topics.enable` decides.
            .with_allow_auto_topic_creation(version < 4);
        self.send(ApiKey::Metadata, version, &request, Awaiting::Metadata { version });
    }

    /// Encodes `body` behind the request header its version calls for and queues the frame.
    fn send<R: Encodable + HeaderVersion>(&mut self, key: ApiKey, version: i16, body: &R, awaiting: Awaiting) {
        self.send_with(key, version, R::header_version(version), awaiting, |buf| {
            body.encode(buf, version).map_err(|e| format!("{e:#}"))
        });
    }

    /// Encodes the request header (of `header_version`), then what `body` appends, and queues
    /// the frame; an encoding failure finishes the exchange with a `Protocol` error.
    fn send_with(
        &mut self,
        key: ApiKey,
        version: i16,
        header_version: i16,
        awaiting: Awaiting,
        body: impl FnOnce(&mut BytesMut) -> Result<(), String>,
    ) {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let frame = encode_frame(|buf| {
            header.encode(buf, header_version).map_err(|e| format!("{e:#}"))?;
            body(buf)
        });
        match frame {
            Ok(frame) => {
                self.transmit = Some(frame);
                self.in_flight = Some(InFlight { correlation_id, awaiting });
            }
            Err(e) => self.finish(Err(protocol_error(format!("cannot encode the {key:?} v{version} request: {e}")))),
        }
    }
}

/// Decodes an ApiVersions response frame.
///
/// Kafka's rule: the ApiVersions response header is always v0, whatever the request version
/// (the broker may not understand that version's header). And a broker that does not know
/// the version we asked for answers UNSUPPORTED_VERSION with a *v0-shaped* body, so that
/// error code — the first field in every version — is read before choosing how to decode
/// (as is REBOOTSTRAP_REQUIRED, which needs no more of the body either).
fn read_api_versions(
    mut frame: Bytes,
    correlation_id: i32,
    version: i16,
    budget: usize,
) -> Result<ApiVersionsResponse, AttemptError> {
    read_header(&mut frame, ApiVersionsResponse::header_version(version), correlation_id, "ApiVersions")?;
    let error_code = match frame.get(..2) {
        Some(&[a, b]) => i16::from_be_bytes([a, b]),
        _ => 0, // too short: let the decoder say so
    };
    if error_code == UNSUPPORTED_VERSION || error_code == REBOOTSTRAP_REQUIRED {
        // The downgrade (or the refusal of the cluster check) is decided from the error code
        // alone: the rest of such a body is not needed, and not every broker shapes it as
        // Kafka specifies (librdkafka's mock writes a one-byte count and a throttle time).
        return Ok(ApiVersionsResponse::default().with_error_code(error_code));
    }
    // The v5 response has v4's layout; `kafka-protocol` knows it under that number.
    let layout = if version == api_versions_v5::VERSION { api_versions_v5::RESPONSE_LAYOUT } else { version };
    read_body(frame, layout, budget, "ApiVersions", guard::check_api_versions)
}

/// Decodes a Metadata response frame of the negotiated version into the core's model.
fn read_metadata(mut frame: Bytes, correlation_id: i32, version: i16, budget: usize) -> Result<Metadata, AttemptError> {
    read_header(&mut frame, MetadataResponse::header_version(version), correlation_id, "Metadata")?;
    let response: MetadataResponse = read_body(frame, version, budget, "Metadata", guard::check_metadata)?;
    convert::metadata_from_response(response)
}

/// Decodes the response header and checks it answers the request we sent.
fn read_header(frame: &mut Bytes, header_version: i16, correlation_id: i32, what: &str) -> Result<(), AttemptError> {
    let header = ResponseHeader::decode(frame, header_version)
        .map_err(|e| protocol_error(format!("{what} response header: {e:#}")))?;
    if header.correlation_id != correlation_id {
        return Err(protocol_error(format!(
            "correlation id mismatch: the {what} request carried {correlation_id}, the response {}",
            header.correlation_id
        )));
    }
    Ok(())
}

/// Decodes a response body after the allocation guard.
///
/// Bytes left after a complete body are tolerated, as Kafka's own clients tolerate them:
/// a newer broker may append fields, and librdkafka's mock appends a tag buffer to Metadata
/// v12. Everything the body declares must still be there and decode.
fn read_body<T: Decodable>(
    mut body: Bytes,
    version: i16,
    budget: usize,
    what: &str,
    guard: fn(&[u8], i16, usize) -> Result<(), String>,
) -> Result<T, AttemptError> {
    let malformed = |problem: String| protocol_error(format!("{what} v{version} response: {problem}"));
    guard(&body, version, budget).map_err(malformed)?;
    T::decode(&mut body, version).map_err(|e| malformed(format!("{e:#}")))
}

/// The highest Metadata version both the broker and `kafka-protocol` speak.
fn negotiate_metadata_version(response: &ApiVersionsResponse) -> Result<i16, AttemptError> {
    let unsupported = |detail: String| AttemptError::with_detail(ErrorKind::BrokerError(UNSUPPORTED_VERSION), detail);
    let ours = MetadataRequest::VERSIONS;
    let theirs = response
        .api_keys
        .iter()
        .find(|api| api.api_key == ApiKey::Metadata as i16)
        .map(|api| VersionRange { min: api.min_version, max: api.max_version })
        .ok_or_else(|| unsupported(String::from("the broker does not list the Metadata API")))?;
    let common = theirs.intersect(&ours);
    if common.is_empty() {
        return Err(unsupported(format!(
            "no common Metadata version: the broker speaks v{}..=v{}, this client v{}..=v{}",
            theirs.min, theirs.max, ours.min, ours.max
        )));
    }
    Ok(common.max)
}

fn protocol_error(detail: String) -> AttemptError {
    AttemptError::with_detail(ErrorKind::Protocol, detail)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::metadata::{BrokerMetadata, PartitionMetadata, TopicMetadata};
    use alloc::string::ToString;
    use alloc::vec;
    use bytes::BytesMut;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::BrokerId;
    use proptest::prelude::*;

    // ---- a fake broker, built from kafka-protocol itself ----

    /// Takes the next request and decodes its header; returns the header and the body bytes.
    fn take_request(exchange: &mut Exchange) -> (RequestHeader, Bytes) {
        let frame = exchange.poll_transmit().expect("a request to send");
        let mut body = frame.slice(4..);
        assert_eq!(u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize, body.len());
        let key = ApiKey::try_from(i16::from_be_bytes([body[0], body[1]])).unwrap();
        let version = i16::from_be_bytes([body[2], body[3]]);
        let header = RequestHeader::decode(&mut body, key.request_header_version(version)).unwrap();
        (header, body)
    }

    fn framed(message: &[u8]) -> Vec<u8> {
        let mut frame = (message.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(message);
        frame
    }

    /// A response frame: header (in the version `T` calls for) and body.
    pub(crate) fn response<T: Encodable + HeaderVersion>(correlation_id: i32, version: i16, body: &T) -> Vec<u8> {
        response_with_header_version(correlation_id, T::header_version(version), version, body)
    }

    fn response_with_header_version<T: Encodable>(correlation_id: i32, hv: i16, version: i16, body: &T) -> Vec<u8> {
        let mut buf = BytesMut::new();
        ResponseHeader::default().with_correlation_id(correlation_id).encode(&mut buf, hv).unwrap();
        body.encode(&mut buf, version).unwrap();
        framed(&buf)
    }

    pub(crate) fn api_versions(metadata: (i16, i16)) -> ApiVersionsResponse {
        ApiVersionsResponse::default().with_api_keys(vec![
            ApiVersion::default()
                .with_api_key(ApiKey::Metadata as i16)
                .with_min_version(metadata.0)
                .with_max_version(metadata.1),
            ApiVersion::default().with_api_key(ApiKey::ApiVersions as i16).with_max_version(4),
        ])
    }

    fn s(text: &'static str) -> StrBytes {
        StrBytes::from_static_str(text)
    }

    pub(crate) fn cluster() -> MetadataResponse {
        let partition = |id, leader, replicas: &[i32]| {
            MetadataResponsePartition::default()
                .with_partition_index(id)
                .with_leader_id(BrokerId(leader))
                .with_replica_nodes(replicas.iter().copied().map(BrokerId).collect())
                .with_isr_nodes(replicas[..1].iter().copied().map(BrokerId).collect())
        };
        MetadataResponse::default()
            .with_cluster_id(Some(s("kafka-cluster-1")))
            .with_controller_id(BrokerId(2))
            .with_brokers(vec![
                MetadataResponseBroker::default().with_node_id(BrokerId(1)).with_host(s("b1")).with_port(9092),
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(2))
                    .with_host(s("b2"))
                    .with_port(9093)
                    .with_rack(Some(s("eu-1a"))),
            ])
            .with_topics(vec![
                MetadataResponseTopic::default()
                    .with_name(Some(TopicName(s("orders"))))
                    .with_partitions(vec![partition(0, 1, &[1, 2]), partition(1, -1, &[2, 1])]),
                MetadataResponseTopic::default()
                    .with_name(Some(TopicName(s("__consumer_offsets"))))
                    .with_is_internal(true)
                    .with_error_code(5),
            ])
    }

    /// `cluster()` as the core should see it at Metadata `version`.
    fn cluster_metadata(version: i16) -> Metadata {
        let partition = |id, leader, replicas: Vec<i32>| PartitionMetadata {
            id,
            error_code: 0,
            leader,
            isr: replicas[..1].to_vec(),
            replicas,
        };
        let broker = |node_id, host: &str, port, rack: Option<&str>| BrokerMetadata {
            node_id,
            host: host.to_string(),
            port,
            rack: rack.filter(|_| version >= 1).map(String::from),
        };
        Metadata {
            cluster_id: (version >= 2).then(|| "kafka-cluster-1".to_string()),
            controller_id: if version >= 1 { 2 } else { -1 },
            error_code: 0,
            brokers: vec![broker(1, "b1", 9092, None), broker(2, "b2", 9093, Some("eu-1a"))],
            topics: vec![
                TopicMetadata {
                    name: "orders".into(),
                    error_code: 0,
                    is_internal: false,
                    partitions: vec![partition(0, 1, vec![1, 2]), partition(1, -1, vec![2, 1])],
                },
                TopicMetadata {
                    name: "__consumer_offsets".into(),
                    error_code: 5,
                    is_internal: version >= 1,
                    partitions: vec![],
                },
            ],
        }
    }

    /// Runs the ApiVersions step against a broker speaking Metadata `range`; returns the
    /// Metadata request's header and body.
    fn through_api_versions(exchange: &mut Exchange, range: (i16, i16)) -> (RequestHeader, Bytes) {
        let (header, _) = take_request(exchange);
        exchange.handle_bytes(&response(header.correlation_id, 3, &api_versions(range)));
        take_request(exchange)
    }

    fn outcome(exchange: &mut Exchange) -> Result<Metadata, AttemptError> {
        assert!(exchange.is_finished());
        let outcome = exchange.poll_outcome().expect("an outcome");
        assert_eq!(exchange.poll_outcome(), None, "the outcome is taken once");
        assert!(exchange.poll_transmit().is_none(), "nothing to send once finished");
        outcome
    }

    fn error(exchange: &mut Exchange) -> AttemptError {
        outcome(exchange).expect_err("an error")
    }

    // ---- the conversation ----

    #[test]
    fn happy_path_negotiates_v13_and_maps_every_field() {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        assert_eq!(exchange.metadata_version(), None);

        let (header, mut body) = take_request(&mut exchange);
        assert_eq!((header.request_api_key, header.request_api_version), (ApiKey::ApiVersions as i16, 3));
        assert_eq!(header.client_id.as_deref(), Some("stagger"));
        let request = ApiVersionsRequest::decode(&mut body, 3).unwrap();
        assert_eq!(&*request.client_software_name, "stagger");
        assert_eq!(&*request.client_software_version, env!("CARGO_PKG_VERSION"));
        assert!(exchange.poll_transmit().is_none(), "one request at a time");
        assert!(!exchange.has_answered(), "nothing arrived yet");

        let answer = response(header.correlation_id, 3, &api_versions((0, 13)));
        exchange.handle_bytes(&answer[..answer.len() - 1]);
        assert!(!exchange.has_answered(), "a partial frame is not an answer");
        exchange.handle_bytes(&answer[answer.len() - 1..]);
        assert!(exchange.has_answered(), "the ApiVersions answer proves the broker alive");
        assert_eq!(exchange.metadata_version(), Some(13));
        let (header, mut body) = take_request(&mut exchange);
        assert_eq!((header.request_api_key, header.request_api_version), (ApiKey::Metadata as i16, 13));
        let request = MetadataRequest::decode(&mut body, 13).unwrap();
        assert_eq!(request.topics, None, "all topics");
        assert!(!request.allow_auto_topic_creation);
        assert!(!request.include_topic_authorized_operations && !request.include_cluster_authorized_operations);
        assert!(!exchange.is_finished());

        exchange.handle_bytes(&response(header.correlation_id, 13, &cluster()));
        assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(13)));
        assert_eq!(exchange.metadata_version(), Some(13));
    }

    #[test]
    fn picks_the_highest_common_version_with_the_right_headers() {
        for (broker, expected) in [((0, 20), 13), ((1, 12), 12), ((0, 9), 9), ((1, 8), 8), ((0, 4), 4), ((0, 0), 0)] {
            let config = ExchangeConfig { topics: Some(vec!["orders".into()]), ..ExchangeConfig::default() };
            let mut exchange = Exchange::new(&config);
            let (header, mut body) = through_api_versions(&mut exchange, broker);
            assert_eq!(header.request_api_version, expected, "broker speaks {broker:?}");
            assert_eq!(exchange.metadata_version(), Some(expected));
            let request = MetadataRequest::decode(&mut body, expected).unwrap();
            let names: Vec<_> = request.topics.unwrap().into_iter().map(|t| t.name.unwrap().0.to_string()).collect();
            assert_eq!(names, ["orders"]);
            assert_eq!(request.allow_auto_topic_creation, expected < 4);
            exchange.handle_bytes(&response(header.correlation_id, expected, &cluster()));
            assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(expected)), "v{expected}");
        }
    }

    #[test]
    fn metadata_v0_asks_for_all_topics_with_an_empty_list() {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (_, mut body) = through_api_versions(&mut exchange, (0, 0));
        assert_eq!(MetadataRequest::decode(&mut body, 0).unwrap().topics, Some(vec![]));
    }

    #[test]
    fn unsupported_api_versions_downgrades_to_v0_once() {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (first, _) = take_request(&mut exchange);
        // What real brokers send: header v0, v0-shaped body, error 35, their ApiVersions range.
        let refusal = ApiVersionsResponse::default()
            .with_error_code(35)
            .with_api_keys(vec![ApiVersion::default().with_api_key(ApiKey::ApiVersions as i16).with_max_version(2)]);
        exchange.handle_bytes(&response(first.correlation_id, 0, &refusal));

        let (retry, body) = take_request(&mut exchange);
        assert_eq!((retry.request_api_key, retry.request_api_version), (ApiKey::ApiVersions as i16, 0));
        assert_ne!(retry.correlation_id, first.correlation_id);
        assert!(body.is_empty(), "ApiVersions v0 has an empty body");
        assert_eq!(exchange.metadata_version(), None);

        exchange.handle_bytes(&response(retry.correlation_id, 0, &api_versions((0, 7))));
        let (header, _) = take_request(&mut exchange);
        assert_eq!(header.request_api_version, 7);
        exchange.handle_bytes(&response(header.correlation_id, 7, &cluster()));
        assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(7)));

        // A broker refusing v0 too is out of options.
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (first, _) = take_request(&mut exchange);
        exchange.handle_bytes(&response(first.correlation_id, 0, &refusal));
        let (retry, _) = take_request(&mut exchange);
        exchange.handle_bytes(&response(retry.correlation_id, 0, &refusal));
        assert_eq!(error(&mut exchange).kind, ErrorKind::BrokerError(35));
    }

    #[test]
    fn api_versions_errors_are_broker_errors() {
        for code in [-1, 58] {
            let mut exchange = Exchange::new(&ExchangeConfig::default());
            let (header, _) = take_request(&mut exchange);
            let refusal = ApiVersionsResponse::default().with_error_code(code);
            exchange.handle_bytes(&response(header.correlation_id, 3, &refusal));
            let err = error(&mut exchange);
            assert_eq!(err.kind, ErrorKind::BrokerError(code));
            assert_eq!(err.kind.is_fatal(), code == 58);
        }
    }

    #[test]
    fn no_common_metadata_version_is_unsupported_version() {
        for keys in [api_versions((14, 20)), ApiVersionsResponse::default()] {
            let mut exchange = Exchange::new(&ExchangeConfig::default());
            let (header, _) = take_request(&mut exchange);
            exchange.handle_bytes(&response(header.correlation_id, 3, &keys));
            let err = error(&mut exchange);
            assert_eq!(err.kind, ErrorKind::BrokerError(35));
            assert!(err.detail.contains("Metadata"), "{err}");
        }
    }

    #[test]
    fn top_level_metadata_error_is_reported_not_hidden() {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (header, _) = through_api_versions(&mut exchange, (0, 13));
        exchange.handle_bytes(&response(header.correlation_id, 13, &cluster().with_error_code(129)));
        let metadata = outcome(&mut exchange).unwrap();
        assert_eq!(metadata.error_code, 129);
        let rejection = metadata.rejection().expect("a top-level error cannot win");
        assert_eq!(rejection.kind, ErrorKind::BrokerError(129));
        assert!(rejection.detail.contains("no longer belongs to the cluster"), "{rejection}");
        assert!(rejection.to_string().contains("REBOOTSTRAP_REQUIRED"), "{rejection}");
    }

    // ---- Kafka 4.4's cluster check (KIP-1242) ----

    /// The identity `cluster()` describes its node 2 with.
    fn node_2() -> BrokerIdentity {
        BrokerIdentity { cluster_id: "kafka-cluster-1".into(), node_id: 2 }
    }

    /// ApiVersions v5 answers have v4's layout, the newest `kafka-protocol` encodes.
    fn api_versions_response(correlation_id: i32, request_version: i16, body: &ApiVersionsResponse) -> Vec<u8> {
        response(correlation_id, request_version.min(4), body)
    }

    /// What a broker that predates v5 (or v3) answers: UNSUPPORTED_VERSION, v0-shaped.
    fn unsupported(correlation_id: i32) -> Vec<u8> {
        let refusal = ApiVersionsResponse::default()
            .with_error_code(35)
            .with_api_keys(vec![ApiVersion::default().with_api_key(ApiKey::ApiVersions as i16).with_max_version(3)]);
        response(correlation_id, 0, &refusal)
    }

    #[test]
    fn an_identity_sends_api_versions_v5_with_both_fields() {
        let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), Some(&node_2()));
        let (header, body) = take_request(&mut exchange);
        assert_eq!((header.request_api_key, header.request_api_version), (ApiKey::ApiVersions as i16, 5));
        assert_eq!(header.client_id.as_deref(), Some("stagger"), "request header v2, as for v3");
        let mut expected = BytesMut::new();
        api_versions_v5::Request {
            software_name: "stagger",
            software_version: env!("CARGO_PKG_VERSION"),
            cluster_id: Some("kafka-cluster-1"),
            node_id: 2,
        }
        .encode(&mut expected)
        .unwrap();
        assert_eq!(body, expected, "software name and version, cluster id, node id, no tags");
        assert!(body.ends_with(b"\x10kafka-cluster-1\0\0\0\x02\0"));

        // The broker checked and agrees: the conversation goes on as with v3.
        exchange.handle_bytes(&api_versions_response(header.correlation_id, 5, &api_versions((0, 13))));
        assert!(exchange.has_answered());
        let (header, _) = take_request(&mut exchange);
        assert_eq!((header.request_api_key, header.request_api_version), (ApiKey::Metadata as i16, 13));
        exchange.handle_bytes(&response(header.correlation_id, 13, &cluster()));
        assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(13)));
    }

    #[test]
    fn an_incomplete_identity_is_not_sent() {
        let incomplete = [
            BrokerIdentity { cluster_id: String::new(), node_id: 2 },
            BrokerIdentity { cluster_id: "kafka-cluster-1".into(), node_id: -1 },
        ];
        for identity in incomplete {
            let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), Some(&identity));
            let (header, mut body) = take_request(&mut exchange);
            assert_eq!(header.request_api_version, 3, "{identity:?}");
            ApiVersionsRequest::decode(&mut body, 3).unwrap();
        }
        let (header, _) = take_request(&mut Exchange::with_identity(&ExchangeConfig::default(), None));
        assert_eq!(header.request_api_version, 3);
    }

    #[test]
    fn rebootstrap_required_to_v5_fails_the_attempt_naming_the_expectation() {
        let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), Some(&node_2()));
        let (header, _) = take_request(&mut exchange);
        let refusal = ApiVersionsResponse::default().with_error_code(129);
        exchange.handle_bytes(&api_versions_response(header.correlation_id, 5, &refusal));
        assert!(exchange.has_answered(), "a refusal is an answer: the broker is alive");
        let err = error(&mut exchange);
        assert_eq!(err.kind, ErrorKind::BrokerError(129));
        assert!(!err.kind.is_fatal(), "another broker, or a seed, may still answer");
        assert!(err.detail.contains("no longer belongs to cluster kafka-cluster-1 as node 2"), "{err}");
        assert!(err.detail.contains("REBOOTSTRAP_REQUIRED to ApiVersions v5 (KIP-1242)"), "{err}");
        assert!(err.detail.contains("rebootstrap from the seeds"), "{err}");

        // Decided from the error code alone, however the rest of the body is shaped.
        let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), Some(&node_2()));
        let (header, _) = take_request(&mut exchange);
        exchange.handle_bytes(&response(header.correlation_id, 0, &refusal));
        assert_eq!(error(&mut exchange).kind, ErrorKind::BrokerError(129));
    }

    #[test]
    fn a_broker_predating_v5_is_asked_v3_then_v0() {
        let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), Some(&node_2()));
        let (first, _) = take_request(&mut exchange);
        exchange.handle_bytes(&unsupported(first.correlation_id));
        let (second, mut body) = take_request(&mut exchange);
        assert_eq!((second.request_api_key, second.request_api_version), (ApiKey::ApiVersions as i16, 3));
        assert_eq!(&*ApiVersionsRequest::decode(&mut body, 3).unwrap().client_software_name, "stagger");
        exchange.handle_bytes(&unsupported(second.correlation_id));
        let (third, body) = take_request(&mut exchange);
        assert_eq!(third.request_api_version, 0);
        assert!(body.is_empty());
        exchange.handle_bytes(&unsupported(third.correlation_id));
        assert_eq!(error(&mut exchange).kind, ErrorKind::BrokerError(35), "v0 refused too: out of options");
    }

    /// A broker that predates v5, speaking Metadata v13 and answering with `metadata`.
    fn predating_v5(expected: Option<&BrokerIdentity>, metadata: &MetadataResponse) -> Result<Metadata, AttemptError> {
        let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), expected);
        let (first, _) = take_request(&mut exchange);
        if expected.is_some() {
            assert_eq!(first.request_api_version, 5);
            exchange.handle_bytes(&unsupported(first.correlation_id));
            let (second, _) = take_request(&mut exchange);
            assert_eq!(second.request_api_version, 3);
            exchange.handle_bytes(&response(second.correlation_id, 3, &api_versions((0, 13))));
        } else {
            exchange.handle_bytes(&response(first.correlation_id, 3, &api_versions((0, 13))));
        }
        let (header, _) = take_request(&mut exchange);
        exchange.handle_bytes(&response(header.correlation_id, 13, metadata));
        outcome(&mut exchange)
    }

    #[test]
    fn a_broker_predating_v5_is_checked_by_its_metadata_cluster_id() {
        // The right cluster: the answer stands.
        assert_eq!(predating_v5(Some(&node_2()), &cluster()), Ok(cluster_metadata(13)));

        // Another cluster: refused as the broker would have, had it known v5.
        let other = cluster().with_cluster_id(Some(s("another-cluster")));
        let err = predating_v5(Some(&node_2()), &other).unwrap_err();
        assert_eq!(err.kind, ErrorKind::BrokerError(129));
        assert!(err.detail.contains("no longer belongs to cluster kafka-cluster-1 as node 2"), "{err}");
        assert!(
            err.detail
                .contains("answered Metadata for cluster another-cluster while cluster kafka-cluster-1 was expected"),
            "{err}"
        );
        assert!(err.detail.contains("checked by the client because the broker predates KIP-1242"), "{err}");

        // No cluster id to compare (a broker that sends none): nothing to refuse it on.
        let anonymous = cluster().with_cluster_id(None);
        assert_eq!(predating_v5(Some(&node_2()), &anonymous).unwrap().cluster_id, None);

        // Without an expectation, any cluster's answer is taken, as before.
        assert_eq!(predating_v5(None, &other).unwrap().cluster_id.as_deref(), Some("another-cluster"));
    }

    #[test]
    fn a_v5_broker_that_then_names_another_cluster_is_still_refused() {
        let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), Some(&node_2()));
        let (header, _) = take_request(&mut exchange);
        exchange.handle_bytes(&api_versions_response(header.correlation_id, 5, &api_versions((0, 13))));
        let (header, _) = take_request(&mut exchange);
        let other = cluster().with_cluster_id(Some(s("another-cluster")));
        exchange.handle_bytes(&response(header.correlation_id, 13, &other));
        let err = error(&mut exchange);
        assert_eq!(err.kind, ErrorKind::BrokerError(129));
        assert!(err.detail.contains("although the broker accepted the ApiVersions v5 check"), "{err}");
    }

    #[test]
    fn topic_ids_stand_in_for_null_names() {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (header, _) = through_api_versions(&mut exchange, (0, 12));
        let mut topic = MetadataResponseTopic::default().with_name(None);
        topic.topic_id = "00000000-0000-0000-0000-00000000002a".parse().unwrap();
        let response_body = cluster().with_topics(vec![topic]);
        exchange.handle_bytes(&response(header.correlation_id, 12, &response_body));
        assert_eq!(outcome(&mut exchange).unwrap().topics[0].name, "00000000-0000-0000-0000-00000000002a");
    }

    // ---- framing and splitting ----

    /// The whole broker side of a v13 conversation, as one byte stream, given the ids used.
    fn whole_conversation(first_correlation_id: i32) -> Vec<u8> {
        let mut stream = response(first_correlation_id, 3, &api_versions((0, 13)));
        stream.extend(response(first_correlation_id + 1, 13, &cluster()));
        stream
    }

    #[test]
    fn one_byte_at_a_time() {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (first, _) = take_request(&mut exchange);
        let stream = whole_conversation(first.correlation_id);
        let api_versions_len = response(first.correlation_id, 3, &api_versions((0, 13))).len();
        for (i, byte) in stream.iter().enumerate() {
            assert!(!exchange.is_finished(), "finished early at byte {i}");
            exchange.handle_bytes(&[*byte]);
            if i + 1 == api_versions_len {
                assert_eq!(take_request(&mut exchange).0.correlation_id, first.correlation_id + 1);
            }
        }
        assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(13)));
    }

    #[test]
    fn two_frames_in_one_chunk() {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (first, _) = take_request(&mut exchange);
        exchange.handle_bytes(&whole_conversation(first.correlation_id));
        assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(13)));
    }

    #[test]
    fn a_frame_and_a_half() {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (first, _) = take_request(&mut exchange);
        let stream = whole_conversation(first.correlation_id);
        let cut = response(first.correlation_id, 3, &api_versions((0, 13))).len() + 7;
        exchange.handle_bytes(&stream[..cut]);
        assert!(exchange.poll_transmit().is_some() && !exchange.is_finished());
        exchange.handle_bytes(&stream[cut..]);
        assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(13)));
    }

    #[test]
    fn correlation_id_mismatch_is_a_protocol_error() {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (header, _) = take_request(&mut exchange);
        exchange.handle_bytes(&response(header.correlation_id + 100, 3, &api_versions((0, 13))));
        let err = error(&mut exchange);
        assert_eq!(err.kind, ErrorKind::Protocol);
        assert!(err.detail.contains("correlation id mismatch"), "{err}");

        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (header, _) = through_api_versions(&mut exchange, (0, 13));
        exchange.handle_bytes(&response(header.correlation_id - 1, 13, &cluster()));
        assert!(error(&mut exchange).detail.contains("the Metadata request carried"));
    }

    #[test]
    fn a_v1_header_on_api_versions_is_misread_as_a_body() {
        // The ApiVersions response header is v0 even for v3; a (wrong) tagged-field byte
        // after the correlation id must not go unnoticed.
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (header, _) = take_request(&mut exchange);
        exchange.handle_bytes(&response_with_header_version(header.correlation_id, 1, 3, &api_versions((0, 13))));
        assert_eq!(error(&mut exchange).kind, ErrorKind::Protocol);
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (header, _) = take_request(&mut exchange);
        let mut junk = header.correlation_id.to_be_bytes().to_vec();
        junk.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef, 0xff, 0xff, 0xff]);
        exchange.handle_bytes(&framed(&junk));
        let err = error(&mut exchange);
        assert_eq!(err.kind, ErrorKind::Protocol);
        assert!(err.detail.starts_with("ApiVersions v3 response: "), "{err}");

        // An empty frame has not even a header.
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        exchange.handle_bytes(&[0, 0, 0, 0]);
        assert!(error(&mut exchange).detail.contains("header"));
    }

    #[test]
    fn something_that_is_not_kafka_is_refused_by_its_length() {
        // An HTTP server on the port: "HTTP" read as a length is 1.2 GB.
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        exchange.handle_bytes(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        assert_eq!(error(&mut exchange).kind, ErrorKind::FrameTooLarge);
    }

    #[test]
    fn trailing_bytes_after_a_complete_body_are_tolerated() {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (header, _) = through_api_versions(&mut exchange, (0, 13));
        let mut frame = response(header.correlation_id, 13, &cluster());
        frame.extend_from_slice(b"xyz");
        let len = (frame.len() - 4) as u32;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        exchange.handle_bytes(&frame);
        let metadata = exchange.poll_outcome().expect("finished").expect("tolerated");
        assert!(!metadata.brokers.is_empty());
    }

    #[test]
    fn truncated_frame_then_eof_is_closed_mid_frame() {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (header, _) = through_api_versions(&mut exchange, (0, 13));
        let frame = response(header.correlation_id, 13, &cluster());
        exchange.handle_bytes(&frame[..frame.len() / 2]);
        exchange.handle_eof();
        let err = error(&mut exchange);
        assert_eq!(err.kind, ErrorKind::Closed);
        assert!(err.detail.contains("mid-frame") && err.detail.contains("Metadata"), "{err}");
    }

    #[test]
    fn eof_between_frames_is_closed() {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        exchange.handle_eof();
        let err = error(&mut exchange);
        assert_eq!(err.kind, ErrorKind::Closed);
        assert!(!err.detail.contains("mid-frame") && err.detail.contains("ApiVersions"), "{err}");
    }

    #[test]
    fn oversize_and_negative_length_prefixes() {
        for (prefix, needle) in [(0x7fff_ffffu32, "exceeds"), (0x8000_0000, "negative"), (u32::MAX, "negative")] {
            let mut exchange = Exchange::new(&ExchangeConfig::default());
            exchange.handle_bytes(&prefix.to_be_bytes());
            let err = error(&mut exchange);
            assert_eq!(err.kind, ErrorKind::FrameTooLarge);
            assert!(err.detail.contains(needle), "{err}");
        }
    }

    #[test]
    fn max_frame_size_is_configurable() {
        let config = ExchangeConfig { max_frame_size: 64, ..ExchangeConfig::default() };
        let mut exchange = Exchange::new(&config);
        let (header, _) = through_api_versions(&mut exchange, (0, 13));
        exchange.handle_bytes(&response(header.correlation_id, 13, &cluster())[..4]);
        assert_eq!(error(&mut exchange).kind, ErrorKind::FrameTooLarge);
    }

    #[test]
    fn hostile_array_counts_fail_without_allocating() {
        // Metadata v4: throttle, brokers = [], cluster_id = null, controller, topics = 2^31 - 1.
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (header, _) = through_api_versions(&mut exchange, (0, 4));
        let mut body = header.correlation_id.to_be_bytes().to_vec();
        body.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff]);
        exchange.handle_bytes(&framed(&body));
        let err = error(&mut exchange);
        assert_eq!(err.kind, ErrorKind::Protocol);
        assert!(err.detail.contains("topics: array claims 2147483647 elements"), "{err}");
    }

    #[test]
    fn bytes_after_the_outcome_are_ignored() {
        let mut exchange = Exchange::new(&ExchangeConfig::default());
        let (first, _) = take_request(&mut exchange);
        let mut stream = whole_conversation(first.correlation_id);
        stream.extend_from_slice(&[0xff; 16]);
        exchange.handle_bytes(&stream);
        exchange.handle_bytes(b"more junk");
        exchange.handle_eof();
        assert_eq!(outcome(&mut exchange), Ok(cluster_metadata(13)));
        exchange.handle_bytes(&whole_conversation(first.correlation_id));
        assert!(exchange.is_finished() && exchange.poll_outcome().is_none());
    }

    #[test]
    fn an_unencodable_request_finishes_at_once() {
        let config = ExchangeConfig { client_id: "x".repeat(40_000), ..ExchangeConfig::default() };
        let mut exchange = Exchange::new(&config);
        assert!(exchange.poll_transmit().is_none());
        let err = error(&mut exchange);
        assert_eq!(err.kind, ErrorKind::Protocol);
        assert!(err.detail.contains("cannot encode the ApiVersions v3 request"), "{err}");
    }

    #[test]
    fn exchange_can_move_between_threads() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<Exchange>();
    }

    // ---- no input makes it panic ----

    /// Feeds `chunks`, then checks the exchange is either finished with one outcome or still
    /// waiting with none, and that EOF always finishes it.
    fn feed_and_check(mut exchange: Exchange, chunks: &[Vec<u8>]) -> Result<(), TestCaseError> {
        for chunk in chunks {
            exchange.handle_bytes(chunk);
        }
        if exchange.is_finished() {
            prop_assert!(exchange.poll_outcome().is_some());
        } else {
            prop_assert!(exchange.poll_outcome().is_none());
            exchange.handle_eof();
            prop_assert!(exchange.is_finished());
            prop_assert_eq!(exchange.poll_outcome().map(|o| o.unwrap_err().kind), Some(ErrorKind::Closed));
        }
        prop_assert!(exchange.poll_outcome().is_none());
        Ok(())
    }

    /// Splits `stream` at the given (unsorted, possibly out-of-range) points.
    fn split(stream: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
        cuts.sort_unstable();
        let mut chunks = Vec::new();
        let mut start = 0;
        for cut in cuts.into_iter().chain([stream.len()]) {
            chunks.push(stream[start..cut].to_vec());
            start = cut;
        }
        chunks
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..8),
            identity: bool,
        ) {
            let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), identity.then(node_2).as_ref());
            let _request = exchange.poll_transmit();
            feed_and_check(exchange, &chunks)?;
        }

        /// Plausible frames (right length, right correlation id, random body) reach the decoders.
        #[test]
        fn arbitrary_frames_never_panic(
            metadata_stage: bool,
            identity: bool,
            version in 0i16..=13,
            body in prop::collection::vec(any::<u8>(), 0..128),
            cuts in prop::collection::vec(any::<usize>(), 0..4),
        ) {
            let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), identity.then(node_2).as_ref());
            let (mut header, _) = take_request(&mut exchange);
            if metadata_stage {
                let answer = api_versions_response(header.correlation_id, header.request_api_version, &api_versions((0, version)));
                exchange.handle_bytes(&answer);
                header = take_request(&mut exchange).0;
            }
            let mut message = header.correlation_id.to_be_bytes().to_vec();
            message.extend_from_slice(&body);
            feed_and_check(exchange, &split(&framed(&message), &cuts))?;
        }

        /// A real conversation with a few bytes overwritten, split anywhere.
        #[test]
        fn corrupted_conversations_never_panic(
            edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
            cuts in prop::collection::vec(any::<usize>(), 0..6),
            identity: bool,
        ) {
            // With an identity the first request is v5, whose answer has the v3/v4 layout
            // `whole_conversation` encodes; corrupted cluster ids reach the client's check.
            let mut exchange = Exchange::with_identity(&ExchangeConfig::default(), identity.then(node_2).as_ref());
            let (first, _) = take_request(&mut exchange);
            let mut stream = whole_conversation(first.correlation_id);
            let len = stream.len();
            for (at, byte) in edits {
                stream[at % len] = byte;
            }
            feed_and_check(exchange, &split(&stream, &cuts))?;
        }

        /// Any split of a good conversation gives the same answer.
        #[test]
        fn any_split_gives_the_same_metadata(cuts in prop::collection::vec(any::<usize>(), 0..10)) {
            let mut exchange = Exchange::new(&ExchangeConfig::default());
            let (first, _) = take_request(&mut exchange);
            for chunk in split(&whole_conversation(first.correlation_id), &cuts) {
                exchange.handle_bytes(&chunk);
            }
            prop_assert_eq!(exchange.poll_outcome(), Some(Ok(cluster_metadata(13))));
        }
    }
}
