//! The exchange's requests: each encoded behind its header and queued as the one frame in
//! flight (ApiVersions, with the cluster check of v5 when an identity is expected, and
//! Metadata; the SASL requests are `authenticate.rs`'s).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use bytes::BytesMut;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, MetadataRequest, RequestHeader, TopicName};
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};

use super::{Awaiting, Exchange, InFlight, Outgoing, SOFTWARE_NAME, SOFTWARE_VERSION};
use crate::kafka::api_versions_v5;
use crate::kafka::decode::protocol_error;
use crate::kafka::frame::encode_frame;

impl Exchange {
    pub(super) fn send_api_versions(&mut self, version: i16) {
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

    pub(super) fn send_metadata(&mut self, version: i16) {
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
    pub(super) fn send<R: Encodable + HeaderVersion>(
        &mut self,
        key: ApiKey,
        version: i16,
        body: &R,
        awaiting: Awaiting,
    ) {
        self.send_with(key, version, R::header_version(version), awaiting, |buf| {
            // Room for the body at once: grown as it is written, the buffer could end up twice
            // the size of a body that carries a broker's text back (SCRAM's nonce).
            buf.reserve(body.compute_size(version).unwrap_or(0));
            body.encode(buf, version).map_err(|e| format!("{e:#}"))
        });
    }

    /// Encodes the request header (of `header_version`), then what `body` appends, and queues
    /// the frame; an encoding failure finishes the exchange with a `Protocol` error.
    pub(super) fn send_with(
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
                self.transmit = Some(Outgoing(frame));
                self.in_flight = Some(InFlight { correlation_id, awaiting });
            }
            Err(e) => self.finish(Err(protocol_error(format!("cannot encode the {key:?} v{version} request: {e}")))),
        }
    }
}
