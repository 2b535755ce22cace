//! ApiVersions v5 (Kafka 4.4, KIP-1242): the handshake that carries the cluster id and node id
//! the client expects, so a broker that is no longer that node of that cluster says so
//! (REBOOTSTRAP_REQUIRED) instead of answering.
//!
//! `kafka-protocol` 0.18 stops at ApiVersions v4 (`ApiVersionsRequest::VERSIONS`), and its
//! field encoders are private to that crate, so the v5 request body is encoded here by hand:
//! v4's two compact strings, then the two new fields, then the empty tagged-field buffer. The
//! tests pin the bytes, and check that the shared prefix is exactly what `kafka-protocol`
//! encodes for v4. The response needs nothing new: v5's has v4's layout.

use alloc::string::String;

use bytes::{BufMut, BytesMut};

/// The version this module encodes.
pub(crate) const VERSION: i16 = 5;
/// Request header v2 (flexible, with a tagged-field buffer), as for v3 and v4.
pub(crate) const HEADER_VERSION: i16 = 2;
/// The layout of the v5 response: v4's, which `kafka-protocol` decodes.
pub(crate) const RESPONSE_LAYOUT: i16 = 4;

/// The body of an ApiVersions v5 request.
///
/// The broker refuses (INVALID_REQUEST) a request that sets only one of `cluster_id` and
/// `node_id`, so the exchange sends v5 only with both; `None` and `-1` (their defaults, "not
/// set") are still encodable, for completeness and the tests.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request<'a> {
    /// ClientSoftwareName (KIP-511).
    pub(crate) software_name: &'a str,
    /// ClientSoftwareVersion (KIP-511).
    pub(crate) software_version: &'a str,
    /// ClusterId: the cluster the client believes this broker belongs to.
    pub(crate) cluster_id: Option<&'a str>,
    /// NodeId: the node id the client believes this broker has.
    pub(crate) node_id: i32,
}

impl Request<'_> {
    /// Appends the body (no header, no length prefix) to `buf`.
    pub(crate) fn encode(&self, buf: &mut BytesMut) -> Result<(), String> {
        put_compact_string(buf, Some(self.software_name))?;
        put_compact_string(buf, Some(self.software_version))?;
        put_compact_string(buf, self.cluster_id)?;
        buf.put_i32(self.node_id);
        put_unsigned_varint(buf, 0); // no tagged fields
        Ok(())
    }
}

/// A COMPACT_(NULLABLE_)STRING: length + 1 as an unsigned varint (0 for null), then UTF-8.
fn put_compact_string(buf: &mut BytesMut, value: Option<&str>) -> Result<(), String> {
    let Some(text) = value else {
        put_unsigned_varint(buf, 0);
        return Ok(());
    };
    let len = u32::try_from(text.len())
        .ok()
        .and_then(|len| len.checked_add(1))
        .ok_or_else(|| alloc::format!("a string of {} bytes is too long for a compact string", text.len()))?;
    put_unsigned_varint(buf, len);
    buf.put_slice(text.as_bytes());
    Ok(())
}

/// Kafka's UNSIGNED_VARINT: seven bits at a time, least significant first.
fn put_unsigned_varint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;
    use bytes::Bytes;
    use kafka_protocol::messages::ApiVersionsRequest;
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    fn body(request: Request<'_>) -> Vec<u8> {
        let mut buf = BytesMut::new();
        request.encode(&mut buf).unwrap();
        buf.to_vec()
    }

    #[test]
    fn encodes_the_exact_bytes() {
        let request = Request {
            software_name: "stagger",
            software_version: "1.2.3",
            cluster_id: Some("MkU3OEVBNTcwNTJENDM2Qk"),
            node_id: 3,
        };
        let mut expected = vec![8]; // "stagger": 7 bytes, so 7 + 1
        expected.extend_from_slice(b"stagger");
        expected.push(6); // "1.2.3": 5 + 1
        expected.extend_from_slice(b"1.2.3");
        expected.push(23); // the 22-byte cluster id: 22 + 1
        expected.extend_from_slice(b"MkU3OEVBNTcwNTJENDM2Qk");
        expected.extend_from_slice(&[0, 0, 0, 3]); // node id, big-endian int32
        expected.push(0); // empty tagged-field buffer
        assert_eq!(body(request), expected);
    }

    #[test]
    fn null_cluster_id_and_unset_node_id_are_kafkas_defaults() {
        let request = Request { software_name: "", software_version: "", cluster_id: None, node_id: -1 };
        assert_eq!(body(request), [1, 1, 0, 0xff, 0xff, 0xff, 0xff, 0]);
    }

    #[test]
    fn long_strings_take_multi_byte_varints() {
        let name = "n".repeat(200); // 201 = 0b1_1001001: 0xc9 0x01
        let request = Request { software_name: &name, software_version: "v", cluster_id: Some("c"), node_id: 0 };
        let bytes = body(request);
        assert_eq!(&bytes[..2], [0xc9, 0x01]);
        assert_eq!(&bytes[202..], [2, b'v', 2, b'c', 0, 0, 0, 0, 0]);
    }

    #[test]
    fn the_v4_fields_are_what_kafka_protocol_encodes_and_decodes() {
        let request = Request {
            software_name: "stagger",
            software_version: "0.1.0",
            cluster_id: Some("kafka-cluster-1"),
            node_id: 2,
        };
        let v5 = body(request);

        // kafka-protocol's own v4 body: the same two strings, then its empty tag buffer.
        let v4_request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("stagger"))
            .with_client_software_version(StrBytes::from_static_str("0.1.0"));
        let mut v4 = BytesMut::new();
        v4_request.encode(&mut v4, 4).unwrap();
        let prefix = &v4[..v4.len() - 1];
        assert_eq!(v4.last(), Some(&0), "v4 ends with its empty tagged-field buffer");
        assert!(v5.starts_with(prefix), "v5 begins with v4's fields");

        // And the prefix, closed with an empty tag buffer, decodes as v4 with kafka-protocol.
        let mut closed = prefix.to_vec();
        closed.push(0);
        let decoded = ApiVersionsRequest::decode(&mut Bytes::from(closed), 4).unwrap();
        assert_eq!(decoded, v4_request);

        // What follows is the two new fields and the tag buffer.
        let mut rest = vec![16];
        rest.extend_from_slice(b"kafka-cluster-1");
        rest.extend_from_slice(&2i32.to_be_bytes());
        rest.push(0);
        assert_eq!(&v5[prefix.len()..], &rest[..]);
    }

    #[test]
    fn kafka_protocol_still_stops_at_v4() {
        // The reason this module exists; once a release knows v5, it should give way to it.
        use kafka_protocol::protocol::Message;
        assert_eq!(ApiVersionsRequest::VERSIONS.max, RESPONSE_LAYOUT);
        assert_eq!(VERSION, RESPONSE_LAYOUT + 1);
    }
}
