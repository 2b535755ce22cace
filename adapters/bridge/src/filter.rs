//! Which Kafka requests go through: the client's bytes parsed as Kafka request frames (a
//! 4-byte big-endian size, then the request header: `api_key` i16, `api_version` i16, …),
//! however the WebSocket messages split or combine them.

use std::fmt;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{ApiKey, MetadataRequest, RequestHeader};
use kafka_protocol::protocol::Decodable;

/// The requests a metadata refresh needs, in the order the exchange sends them.
pub const METADATA_REFRESH_APIS: [ApiKey; 4] =
    [ApiKey::ApiVersions, ApiKey::SaslHandshake, ApiKey::SaslAuthenticate, ApiKey::Metadata];

/// The smallest request frame: `api_key`, `api_version` and `correlation_id` (header v0).
const MIN_REQUEST: i32 = 8;

/// Which Kafka requests a bridge forwards to its target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApiPolicy {
    /// Only what a metadata refresh needs ([`METADATA_REFRESH_APIS`]: ApiVersions (18),
    /// SaslHandshake (17), SaslAuthenticate (36), Metadata (3)); any other request closes the
    /// connection before a byte of it reaches the target, and so does a frame over the
    /// maximum size or too short to hold a request header. Metadata requests are read whole
    /// and refused when they may create topics (`allow_auto_topic_creation`, or, before v4,
    /// which has no such field, naming topics: the broker's `auto.create.topics.enable`
    /// decides), so metadata stays read-only. The default.
    #[default]
    MetadataRefresh,
    /// Every byte, unparsed: a plain tunnel, like websockify.
    All,
}

impl ApiPolicy {
    /// Whether requests of `api_key` go through.
    pub fn allows(&self, api_key: i16) -> bool {
        match self {
            ApiPolicy::MetadataRefresh => METADATA_REFRESH_APIS.iter().any(|k| *k as i16 == api_key),
            ApiPolicy::All => true,
        }
    }
}

/// `Produce (0)`, `Metadata (3)`, `unknown API (999)`: an API key as a refusal names it.
pub fn api_name(api_key: i16) -> String {
    match ApiKey::try_from(api_key) {
        Ok(key) => format!("{key:?} ({api_key})"),
        Err(()) => format!("unknown API ({api_key})"),
    }
}

/// Why the bridge closed a connection over what the client sent.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// A request this bridge does not forward (WebSocket close 1008, policy violation).
    Api {
        /// The request's API key.
        api_key: i16,
        /// The request's API version.
        api_version: i16,
    },
    /// A frame larger than the bridge accepts (WebSocket close 1009, message too big).
    TooLarge {
        /// The frame's size prefix.
        size: i32,
        /// The largest size the bridge accepts.
        max: usize,
    },
    /// A size prefix too small (or negative) for a request header (close 1008): not Kafka.
    NotKafka {
        /// The frame's size prefix.
        size: i32,
    },
    /// A Metadata request that may create topics (close 1008).
    MayCreateTopics {
        /// The request's API version.
        api_version: i16,
    },
    /// A request the bridge had to read (Metadata) that does not decode (close 1008).
    Unreadable {
        /// The request's API key.
        api_key: i16,
        /// The request's API version.
        api_version: i16,
        /// What the decoder said.
        why: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Api { api_key, api_version } => {
                let allowed: Vec<String> = METADATA_REFRESH_APIS.iter().map(|k| api_name(*k as i16)).collect();
                write!(
                    f,
                    "Kafka request {} v{api_version} is not forwarded: this bridge forwards only {}",
                    api_name(*api_key),
                    allowed.join(", ")
                )
            }
            Violation::TooLarge { size, max } => {
                write!(f, "a Kafka request of {size} bytes is over this bridge's limit of {max} bytes")
            }
            Violation::NotKafka { size } => {
                write!(f, "a frame size of {size} bytes cannot hold a Kafka request header: not Kafka")
            }
            Violation::MayCreateTopics { api_version } if *api_version >= 4 => write!(
                f,
                "a Metadata v{api_version} request with allow_auto_topic_creation is not forwarded: listing metadata must not create topics"
            ),
            Violation::MayCreateTopics { api_version } => write!(
                f,
                "a Metadata v{api_version} request naming topics is not forwarded: before v4 the broker may create them (auto.create.topics.enable)"
            ),
            Violation::Unreadable { api_key, api_version, why } => {
                write!(f, "Kafka request {} v{api_version} does not decode: {why}", api_name(*api_key))
            }
        }
    }
}

/// The close reason sent to the client: the violation in at most 123 bytes (the WebSocket
/// limit), cut at a character boundary.
pub(crate) fn close_reason(violation: &Violation) -> String {
    let text = match violation {
        Violation::Api { api_key, api_version } => {
            format!("Kafka request {} v{api_version} is not forwarded", api_name(*api_key))
        }
        Violation::MayCreateTopics { api_version } => {
            format!("Metadata v{api_version} that may create topics is not forwarded")
        }
        Violation::Unreadable { api_key, api_version, .. } => {
            format!("Kafka request {} v{api_version} does not decode", api_name(*api_key))
        }
        other => other.to_string(),
    };
    let mut end = text.len().min(123);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Parses the client's byte stream into request frames and lets through whole allowed ones.
///
/// Sans-IO: [`RequestFilter::feed`] takes each WebSocket message's bytes and says which to
/// forward. A frame's bytes are held back until its size and `api_key`/`api_version` are
/// known (8 bytes); from then on they are forwarded as they come — except a Metadata
/// request's, which are held until the whole frame is there and its body is checked.
#[derive(Clone, Debug)]
pub(crate) struct RequestFilter {
    policy: ApiPolicy,
    max_frame: usize,
    /// The current frame's first bytes, until there are 8.
    head: [u8; 8],
    have: usize,
    /// Bytes of the current (allowed) frame still to forward.
    remaining: usize,
    /// A Metadata frame being read whole (with its size prefix), and the bytes it still lacks.
    held: Vec<u8>,
    held_missing: usize,
}

impl RequestFilter {
    pub(crate) fn new(policy: ApiPolicy, max_frame: usize) -> Self {
        RequestFilter { policy, max_frame, head: [0; 8], have: 0, remaining: 0, held: Vec::new(), held_missing: 0 }
    }

    /// Appends to `out` (cleared first) the bytes of `data` to forward. On a violation the
    /// connection must be closed and nothing of `out` forwarded.
    pub(crate) fn feed(&mut self, mut data: &[u8], out: &mut Vec<u8>) -> Result<(), Violation> {
        out.clear();
        while !data.is_empty() {
            if self.remaining > 0 {
                let n = self.remaining.min(data.len());
                out.extend_from_slice(&data[..n]);
                self.remaining -= n;
                data = &data[n..];
                continue;
            }
            if self.held_missing > 0 {
                let n = self.held_missing.min(data.len());
                self.held.extend_from_slice(&data[..n]);
                self.held_missing -= n;
                data = &data[n..];
                if self.held_missing == 0 {
                    check_metadata(&self.held)?;
                    out.append(&mut self.held);
                }
                continue;
            }
            let n = (self.head.len() - self.have).min(data.len());
            self.head[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have >= 4 {
                let size = i32::from_be_bytes([self.head[0], self.head[1], self.head[2], self.head[3]]);
                if size < MIN_REQUEST {
                    return Err(Violation::NotKafka { size });
                }
                if size as usize > self.max_frame {
                    return Err(Violation::TooLarge { size, max: self.max_frame });
                }
                if self.have == self.head.len() {
                    let api_key = i16::from_be_bytes([self.head[4], self.head[5]]);
                    if !self.policy.allows(api_key) {
                        let api_version = i16::from_be_bytes([self.head[6], self.head[7]]);
                        return Err(Violation::Api { api_key, api_version });
                    }
                    let rest = size as usize - (self.head.len() - 4);
                    if self.policy == ApiPolicy::MetadataRefresh && api_key == ApiKey::Metadata as i16 {
                        self.held = Vec::with_capacity(size as usize + 4);
                        self.held.extend_from_slice(&self.head);
                        // A request is at least 8 bytes: there is always a rest to wait for.
                        self.held_missing = rest;
                    } else {
                        out.extend_from_slice(&self.head);
                        self.remaining = rest;
                    }
                    self.have = 0;
                }
            }
        }
        Ok(())
    }
}

/// Refuses a whole Metadata request frame (size prefix included) that may create topics, or
/// that does not decode as the version it claims.
fn check_metadata(frame: &[u8]) -> Result<(), Violation> {
    let api_version = i16::from_be_bytes([frame[6], frame[7]]);
    let unreadable = |why: String| Violation::Unreadable { api_key: ApiKey::Metadata as i16, api_version, why };
    let mut body = Bytes::copy_from_slice(&frame[4..]);
    let header_version = ApiKey::Metadata.request_header_version(api_version);
    RequestHeader::decode(&mut body, header_version).map_err(|e| unreadable(format!("{e:#}")))?;
    let request = MetadataRequest::decode(&mut body, api_version).map_err(|e| unreadable(format!("{e:#}")))?;
    if body.has_remaining() {
        return Err(unreadable(format!("{} bytes after the request", body.remaining())));
    }
    let creates = match api_version {
        4.. => request.allow_auto_topic_creation,
        // v0: an empty list means every topic; v1-v3: null means every topic.
        _ => request.topics.is_some_and(|topics| !topics.is_empty()),
    };
    if creates {
        return Err(Violation::MayCreateTopics { api_version });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    /// A frame of `api_key` with `body` bytes after its 8 header bytes (for the keys the
    /// filter forwards without reading).
    fn frame(api_key: ApiKey, body: usize) -> Vec<u8> {
        let size = 4 + body as i32 + 4;
        let mut out = size.to_be_bytes().to_vec();
        out.extend_from_slice(&(api_key as i16).to_be_bytes());
        out.extend_from_slice(&3i16.to_be_bytes());
        out.extend((0..4 + body).map(|i| i as u8));
        out
    }

    /// A Metadata request frame, encoded by `kafka-protocol`.
    fn metadata(version: i16, request: &MetadataRequest) -> Vec<u8> {
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Metadata as i16)
            .with_request_api_version(version)
            .with_client_id(Some(StrBytes::from_static_str("t")));
        let mut buf = BytesMut::new();
        header.encode(&mut buf, ApiKey::Metadata.request_header_version(version)).unwrap();
        request.encode(&mut buf, version).unwrap();
        let mut out = (buf.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&buf);
        out
    }

    /// What the core sends at `version`: every topic, never creating one (before v4 the field
    /// does not exist and must keep its default).
    fn listing_at(version: i16) -> MetadataRequest {
        MetadataRequest::default().with_topics(None).with_allow_auto_topic_creation(version < 4)
    }

    fn listing() -> MetadataRequest {
        listing_at(12)
    }

    fn named(name: &'static str) -> Option<Vec<MetadataRequestTopic>> {
        let name = TopicName(StrBytes::from_static_str(name));
        Some(vec![MetadataRequestTopic::default().with_name(Some(name))])
    }

    fn filter() -> RequestFilter {
        RequestFilter::new(ApiPolicy::MetadataRefresh, 1 << 20)
    }

    fn feed_all(f: &mut RequestFilter, data: &[u8]) -> Result<Vec<u8>, Violation> {
        let mut out = Vec::new();
        f.feed(data, &mut out).map(|()| out)
    }

    #[test]
    fn allowed_frames_pass_whole_however_split() {
        let stream: Vec<u8> = [
            frame(ApiKey::ApiVersions, 10),
            metadata(12, &listing()),
            frame(ApiKey::SaslHandshake, 300),
            metadata(12, &listing().with_topics(named("orders"))),
        ]
        .concat();
        for chunk in [1, 2, 3, 5, 7, 8, 9, 64, stream.len()] {
            let mut f = filter();
            let (mut out, mut all) = (Vec::new(), Vec::new());
            for piece in stream.chunks(chunk) {
                f.feed(piece, &mut out).unwrap();
                all.extend_from_slice(&out);
            }
            assert_eq!(all, stream, "chunks of {chunk}");
        }
    }

    #[test]
    fn a_metadata_request_is_held_until_whole() {
        let mut f = filter();
        let request = metadata(12, &listing());
        assert_eq!(feed_all(&mut f, &request[..request.len() - 1]).unwrap(), b"");
        assert_eq!(feed_all(&mut f, &request[request.len() - 1..]).unwrap(), request);
    }

    #[test]
    fn metadata_that_may_create_topics_is_refused() {
        let creating = listing().with_topics(named("orders")).with_allow_auto_topic_creation(true);
        for version in [4, 8, 9, 12, 13] {
            assert_eq!(
                feed_all(&mut filter(), &metadata(version, &creating)),
                Err(Violation::MayCreateTopics { api_version: version })
            );
            let fine = metadata(version, &listing().with_topics(named("orders")));
            assert_eq!(feed_all(&mut filter(), &fine).unwrap(), fine, "v{version}");
        }
        // Before v4 the broker decides: naming topics may create them; listing all cannot.
        let named_v1 = metadata(1, &listing_at(1).with_topics(named("orders")));
        assert_eq!(feed_all(&mut filter(), &named_v1), Err(Violation::MayCreateTopics { api_version: 1 }));
        for (version, all) in [(0, Some(vec![])), (1, None), (3, None)] {
            let frame = metadata(version, &listing_at(version).with_topics(all));
            assert_eq!(feed_all(&mut filter(), &frame).unwrap(), frame, "v{version}");
        }
        let text = Violation::MayCreateTopics { api_version: 12 }.to_string();
        assert!(text.contains("allow_auto_topic_creation"), "{text}");
        // Forwarding everything reads nothing.
        let mut all = RequestFilter::new(ApiPolicy::All, 1 << 20);
        assert!(feed_all(&mut all, &metadata(12, &creating)).is_ok());
    }

    #[test]
    fn metadata_that_does_not_decode_is_refused() {
        let mut garbage = frame(ApiKey::Metadata, 10);
        garbage[6..8].copy_from_slice(&12i16.to_be_bytes());
        assert!(matches!(
            feed_all(&mut filter(), &garbage),
            Err(Violation::Unreadable { api_key: 3, api_version: 12, .. })
        ));
        let mut trailing = metadata(12, &listing());
        trailing.push(0);
        let size = (trailing.len() - 4) as i32;
        trailing[..4].copy_from_slice(&size.to_be_bytes());
        let Err(Violation::Unreadable { why, .. }) = feed_all(&mut filter(), &trailing) else { panic!("refused") };
        assert_eq!(why, "1 bytes after the request");
        let mut future = metadata(12, &listing());
        future[6..8].copy_from_slice(&99i16.to_be_bytes());
        assert!(matches!(feed_all(&mut filter(), &future), Err(Violation::Unreadable { api_version: 99, .. })));
    }

    #[test]
    fn a_refused_api_stops_before_any_of_its_bytes() {
        let mut f = filter();
        let mut out = Vec::new();
        let good = frame(ApiKey::ApiVersions, 20);
        let produce = frame(ApiKey::Produce, 50);
        f.feed(&good[..good.len() - 1], &mut out).unwrap();
        assert_eq!(out, good[..good.len() - 1]);
        // The rest of the ApiVersions frame and the first 7 bytes of Produce: held back.
        let mut next = vec![*good.last().unwrap()];
        next.extend_from_slice(&produce[..7]);
        f.feed(&next, &mut out).unwrap();
        assert_eq!(out, [*good.last().unwrap()]);
        assert_eq!(f.feed(&produce[7..], &mut out), Err(Violation::Api { api_key: 0, api_version: 3 }));
        let text = Violation::Api { api_key: 0, api_version: 9 }.to_string();
        assert!(text.contains("Produce (0) v9 is not forwarded"), "{text}");
        assert!(text.contains("ApiVersions (18), SaslHandshake (17), SaslAuthenticate (36), Metadata (3)"), "{text}");
        assert_eq!(api_name(999), "unknown API (999)");
    }

    #[test]
    fn sizes_are_bounded_both_ways() {
        let mut out = Vec::new();
        let mut f = RequestFilter::new(ApiPolicy::MetadataRefresh, 1000);
        assert_eq!(f.feed(&1001i32.to_be_bytes(), &mut out), Err(Violation::TooLarge { size: 1001, max: 1000 }));
        for size in [-1i32, 0, 7] {
            let mut f = filter();
            assert_eq!(f.feed(&size.to_be_bytes(), &mut out), Err(Violation::NotKafka { size }));
        }
        let mut f = RequestFilter::new(ApiPolicy::MetadataRefresh, 1000);
        let exactly = frame(ApiKey::ApiVersions, 1000 - 8);
        f.feed(&exactly, &mut out).unwrap();
        assert_eq!(out, exactly);
    }

    #[test]
    fn close_reasons_fit_a_close_frame() {
        let reason = close_reason(&Violation::Api { api_key: 0, api_version: 11 });
        assert_eq!(reason, "Kafka request Produce (0) v11 is not forwarded");
        assert!(close_reason(&Violation::TooLarge { size: i32::MAX, max: usize::MAX }).len() <= 123);
        let long = Violation::Unreadable { api_key: 3, api_version: 12, why: "x".repeat(500) };
        assert_eq!(close_reason(&long), "Kafka request Metadata (3) v12 does not decode");
        assert_eq!(
            close_reason(&Violation::MayCreateTopics { api_version: 12 }),
            "Metadata v12 that may create topics is not forwarded"
        );
    }

    #[test]
    fn all_forwards_every_key() {
        assert!(ApiPolicy::All.allows(0));
        assert!(!ApiPolicy::MetadataRefresh.allows(0));
        assert!(ApiPolicy::MetadataRefresh.allows(36));
    }
}
