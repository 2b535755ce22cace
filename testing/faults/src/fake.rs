//! A scripted fake Kafka broker on 127.0.0.1, for the protocol-level faults neither the mock
//! nor the fault proxy can produce: a wrong correlation id, an ApiVersions error, metadata
//! with no brokers or with a top-level error, a broker that refuses our credentials, and
//! brokers that answer ApiVersions at once but Metadata late or never (alive, then stuck).
//!
//! It speaks just enough Kafka — it reads request frames, decodes their headers, and answers
//! ApiVersions and Metadata — and every answer is encoded by the `kafka-protocol` crate, so
//! nothing here hand-writes the wire format.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, MetadataResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// How the fake broker answers.
#[derive(Clone, Copy, Debug)]
pub enum Script {
    /// A well-behaved broker: Metadata v0..=13, answering with itself as the only broker.
    Healthy,
    /// Answers ApiVersions with a correlation id that is not the request's.
    WrongCorrelationId,
    /// Answers ApiVersions (every version asked) with this error code.
    ApiVersionsError(i16),
    /// Answers Metadata listing no brokers at all.
    NoBrokers,
    /// Answers Metadata (v13) with this top-level error code.
    MetadataError(i16),
    /// Accepts and reads requests, never answers: a hung broker (like the mock's with an
    /// hour's round-trip time, but with the OS's default accept backlog rather than the
    /// mock's 5, so hundreds of clients can connect at once).
    Silent,
    /// Answers ApiVersions at once, then never answers Metadata: a broker that is alive
    /// (its network thread reads and answers) but stuck behind a lock or a full request
    /// queue. The mock cannot do this: its round-trip time delays every answer alike.
    ApiVersionsThenSilent,
    /// Answers ApiVersions at once and Metadata (like `Healthy`) only after this delay: a
    /// busy broker, alive and working.
    SlowMetadata(std::time::Duration),
}

/// A running fake broker; dropping it stops the listener and every connection it serves.
pub struct FakeBroker {
    /// `127.0.0.1:port`, to use as a seed.
    pub address: String,
    accepted: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl FakeBroker {
    /// Starts a fake broker following `script`.
    pub async fn start(script: Script) -> FakeBroker {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake broker");
        let address = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { return };
                        counter.fetch_add(1, Ordering::SeqCst);
                        connections.spawn(serve(stream, script, address.port()));
                    }
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        });
        FakeBroker { address: address.to_string(), accepted, task }
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// The port (for socket accounting).
    pub fn port(&self) -> u16 {
        self.address.rsplit_once(':').unwrap().1.parse().unwrap()
    }
}

impl Drop for FakeBroker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut stream: TcpStream, script: Script, port: u16) -> io::Result<()> {
    loop {
        let Some(mut request) = read_frame(&mut stream).await? else { return Ok(()) };
        if request.len() < 4 {
            return Ok(());
        }
        let key = i16::from_be_bytes([request[0], request[1]]);
        let version = i16::from_be_bytes([request[2], request[3]]);
        let Ok(api) = ApiKey::try_from(key) else { return Ok(()) };
        let header = RequestHeader::decode(&mut request, api.request_header_version(version))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let id = header.correlation_id;
        let answer = match (api, script) {
            (_, Script::Silent) => continue,
            // Like every Kafka before 4.4: a version above ours is answered UNSUPPORTED_VERSION
            // in a v0 body (the client then asks again at v3).
            (ApiKey::ApiVersions, _) if version > 3 => encode(id, 0, &api_versions(UNSUPPORTED_VERSION)),
            (ApiKey::ApiVersions, Script::WrongCorrelationId) => {
                encode(id.wrapping_add(1000), version, &api_versions(0))
            }
            (ApiKey::ApiVersions, Script::ApiVersionsError(code)) => {
                encode(id, version, &api_versions(0).with_error_code(code))
            }
            (ApiKey::ApiVersions, _) => encode(id, version, &api_versions(0)),
            (ApiKey::Metadata, Script::NoBrokers) => encode(id, version, &MetadataResponse::default()),
            (ApiKey::Metadata, Script::MetadataError(code)) => {
                encode(id, version, &cluster(port).with_error_code(code))
            }
            (ApiKey::Metadata, Script::ApiVersionsThenSilent) => continue,
            (ApiKey::Metadata, Script::SlowMetadata(delay)) => {
                tokio::time::sleep(delay).await;
                encode(id, version, &cluster(port))
            }
            (ApiKey::Metadata, _) => encode(id, version, &cluster(port)),
            _ => return Ok(()),
        };
        stream.write_all(&answer).await?;
    }
}

/// Kafka's error code for a request version the broker does not speak.
const UNSUPPORTED_VERSION: i16 = 35;

/// An ApiVersions answer offering ApiVersions v0..=3 and Metadata v0..=13.
fn api_versions(error_code: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_error_code(error_code).with_api_keys(vec![
        ApiVersion::default().with_api_key(ApiKey::ApiVersions as i16).with_max_version(3),
        ApiVersion::default().with_api_key(ApiKey::Metadata as i16).with_max_version(13),
    ])
}

/// This broker as the only one of its cluster, with one topic of one partition.
fn cluster(port: u16) -> MetadataResponse {
    MetadataResponse::default()
        .with_cluster_id(Some(StrBytes::from_static_str("fake-cluster")))
        .with_controller_id(BrokerId(1))
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(1))
            .with_host(StrBytes::from_static_str("127.0.0.1"))
            .with_port(i32::from(port))])
        .with_topics(vec![MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("alpha"))))
            .with_partitions(vec![MetadataResponsePartition::default()
                .with_leader_id(BrokerId(1))
                .with_replica_nodes(vec![BrokerId(1)])
                .with_isr_nodes(vec![BrokerId(1)])])])
}

/// A response frame: length prefix, header (in the version `T` calls for), body.
fn encode<T: Encodable + HeaderVersion>(correlation_id: i32, version: i16, body: &T) -> Bytes {
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&[0; 4]);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, T::header_version(version))
        .expect("encode response header");
    body.encode(&mut buf, version).expect("encode response body");
    let len = (buf.len() - 4) as u32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    buf.freeze()
}

/// Reads one length-prefixed frame (without its prefix); `None` at a clean end of stream.
async fn read_frame(stream: &mut TcpStream) -> io::Result<Option<Bytes>> {
    let mut prefix = [0u8; 4];
    match stream.read_exact(&mut prefix).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(prefix) as usize;
    if len > 1 << 20 {
        return Ok(None);
    }
    let mut frame = vec![0u8; len];
    stream.read_exact(&mut frame).await?;
    Ok(Some(Bytes::from(frame)))
}
