//! Decoding the broker's response frames: headers checked against the request, bodies past
//! the allocation guard, the ApiVersions error codes that decide on their own, and the
//! Metadata version both sides speak.

use alloc::format;
use alloc::string::String;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, MetadataRequest, MetadataResponse, ResponseHeader, SaslAuthenticateResponse,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, HeaderVersion, Message, VersionRange};

use super::{api_versions_v5, convert, guard};
use crate::error::{AttemptError, ErrorKind};
use crate::metadata::Metadata;

/// Kafka's UNSUPPORTED_VERSION error code.
pub(super) const UNSUPPORTED_VERSION: i16 = 35;
/// Kafka's REBOOTSTRAP_REQUIRED error code (KIP-1102): what a Kafka 4.4 broker answers to
/// ApiVersions v5 when it is not the node of the cluster the client expected (KIP-1242).
pub(super) const REBOOTSTRAP_REQUIRED: i16 = 129;

/// Decodes an ApiVersions response frame.
///
/// Kafka's rule: the ApiVersions response header is always v0, whatever the request version
/// (the broker may not understand that version's header). And a broker that does not know
/// the version we asked for answers UNSUPPORTED_VERSION with a *v0-shaped* body, so that
/// error code — the first field in every version — is read before choosing how to decode
/// (as is REBOOTSTRAP_REQUIRED, which needs no more of the body either).
pub(super) fn read_api_versions(
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
pub(super) fn read_metadata(
    frame: Bytes,
    correlation_id: i32,
    version: i16,
    budget: usize,
) -> Result<Metadata, AttemptError> {
    let response: MetadataResponse =
        read_response(frame, correlation_id, version, budget, "Metadata", guard::check_metadata)?;
    convert::metadata_from_response(response)
}

/// Decodes a SaslHandshake response frame.
pub(super) fn read_sasl_handshake(
    frame: Bytes,
    correlation_id: i32,
    version: i16,
    budget: usize,
) -> Result<SaslHandshakeResponse, AttemptError> {
    read_response(frame, correlation_id, version, budget, "SaslHandshake", guard::check_sasl_handshake)
}

/// Decodes a SaslAuthenticate response frame.
pub(super) fn read_sasl_authenticate(
    frame: Bytes,
    correlation_id: i32,
    version: i16,
    budget: usize,
) -> Result<SaslAuthenticateResponse, AttemptError> {
    read_response(frame, correlation_id, version, budget, "SaslAuthenticate", guard::check_sasl_authenticate)
}

/// A whole response frame: its header (in the version the response type calls for), checked
/// against the request, then its body past `guard`.
fn read_response<T: Decodable + HeaderVersion>(
    mut frame: Bytes,
    correlation_id: i32,
    version: i16,
    budget: usize,
    what: &str,
    guard: fn(&[u8], i16, usize) -> Result<(), String>,
) -> Result<T, AttemptError> {
    read_header(&mut frame, T::header_version(version), correlation_id, what)?;
    read_body(frame, version, budget, what, guard)
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
pub(super) fn negotiate_metadata_version(response: &ApiVersionsResponse) -> Result<i16, AttemptError> {
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

pub(super) fn protocol_error(detail: String) -> AttemptError {
    AttemptError::with_detail(ErrorKind::Protocol, detail)
}
