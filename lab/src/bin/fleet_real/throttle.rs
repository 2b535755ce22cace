//! KIP-612's connection creation rate, set on every broker at once through the cluster's own
//! admin request (`IncrementalAlterConfigs` on the brokers' default resource), and removed the
//! same way: `--storm-connection-rate` throttles the brokers only while a storm runs, so the
//! warm-up's bootstrap burst of 300 clients is not throttled too.
//!
//! Why dynamic: a broker measures its connection rate over `quota.window.num` (11) samples of
//! a second, so a rate set in `server.properties` low enough to throttle a storm's 50
//! reconnections per broker throttles every warm-up long before the storm.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::{
    ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::Res;

/// The broker setting KIP-612 added: new connections accepted per second, per broker.
pub const RATE: &str = "max.connection.creation.rate";

/// `ConfigResource.Type.BROKER`; with an empty name, the default of every broker.
const BROKER_RESOURCE: i8 = 4;
/// `AlterConfigOp.OpType`: SET and DELETE.
const SET: i8 = 0;
const DELETE: i8 = 1;
const VERSION: i16 = 0;

/// Sets every broker's `max.connection.creation.rate` to `rate` (`None`: back to the
/// default, unlimited), through the broker at `plaintext` (`host:port` of its PLAINTEXT
/// listener).
pub fn set_rate(plaintext: &str, rate: Option<f64>) -> Res<()> {
    let op = AlterableConfig::default()
        .with_name(StrBytes::from_static_str(RATE))
        .with_config_operation(if rate.is_some() { SET } else { DELETE })
        .with_value(rate.map(|r| StrBytes::from_string(r.to_string())));
    let resource = AlterConfigsResource::default()
        .with_resource_type(BROKER_RESOURCE)
        .with_resource_name(StrBytes::from_static_str(""))
        .with_configs(vec![op]);
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![resource]);
    let key = ApiKey::IncrementalAlterConfigs;
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(VERSION)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("fleet-real-admin")));
    let mut frame = BytesMut::new();
    header.encode(&mut frame, key.request_header_version(VERSION))?;
    request.encode(&mut frame, VERSION)?;

    let mut tcp = TcpStream::connect(plaintext)?;
    tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
    tcp.write_all(&(frame.len() as u32).to_be_bytes())?;
    tcp.write_all(&frame)?;
    let mut len = [0u8; 4];
    tcp.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > 1 << 20 {
        return Err(format!("{RATE}: a {len}-byte answer to IncrementalAlterConfigs").into());
    }
    let mut body = vec![0; len];
    tcp.read_exact(&mut body)?;
    let mut body = Bytes::from(body);
    ResponseHeader::decode(&mut body, key.response_header_version(VERSION))?;
    let response = IncrementalAlterConfigsResponse::decode(&mut body, VERSION)?;
    match response.responses.iter().find(|r| r.error_code != 0) {
        Some(r) => Err(format!("{RATE}: the broker answered error {} ({:?})", r.error_code, r.error_message).into()),
        None if response.responses.is_empty() => Err(format!("{RATE}: the broker answered for no resource").into()),
        None => Ok(()),
    }
}
