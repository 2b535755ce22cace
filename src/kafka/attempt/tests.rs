//! `KafkaAttempt`'s tests: which inputs it reports, in which order, from which bytes.

use super::*;
use alloc::vec::Vec;

fn attempt() -> KafkaAttempt {
    KafkaAttempt::new(AttemptId(7), &ExchangeConfig::default(), None, true)
}

fn inputs(a: &mut KafkaAttempt) -> Vec<Input> {
    core::iter::from_fn(|| a.poll_input()).collect()
}

/// The correlation id of a request frame the attempt wrote.
fn correlation_id(frame: Bytes) -> i32 {
    use kafka_protocol::messages::{ApiKey, RequestHeader};
    use kafka_protocol::protocol::Decodable;

    let mut body = frame.slice(4..);
    let version = i16::from_be_bytes([body[2], body[3]]);
    let key = ApiKey::try_from(i16::from_be_bytes([body[0], body[1]])).unwrap();
    RequestHeader::decode(&mut body, key.request_header_version(version)).unwrap().correlation_id
}

#[test]
fn tls_records_are_recognised_only_by_their_header() {
    assert!(looks_like_tls(&[21, 3, 3]) && looks_like_tls(&[22, 3, 1]));
    assert!(!looks_like_tls(&[0, 0, 1]) && !looks_like_tls(&[21, 3]) && !looks_like_tls(&[23, 3, 3]));
}

#[test]
fn connected_comes_first_and_the_request_is_ready() {
    let mut a = attempt();
    assert!(a.poll_transmit().is_some(), "ready before the transport is");
    assert!(inputs(&mut a).is_empty());
    a.handle_connected();
    assert_eq!(inputs(&mut a), [Input::Connected { attempt: AttemptId(7), tls: false }]);
    assert!(!a.is_finished());
}

#[test]
fn answered_comes_before_the_end_even_when_one_read_brings_both() {
    use crate::kafka::exchange::tests::{api_versions, cluster, response};

    let mut a = attempt();
    a.handle_connected();
    let api = correlation_id(a.poll_transmit().unwrap());
    let mut both = response(api, 3, &api_versions((0, 13)));
    // The Metadata request follows the ApiVersions answer; answer it in the same read.
    a.handle_bytes(&both);
    let metadata = correlation_id(a.poll_transmit().unwrap());
    both = response(metadata, 13, &cluster());
    a.handle_bytes(&both);
    let got = inputs(&mut a);
    assert!(
        matches!(
            &got[..],
            [Input::Connected { .. }, Input::FirstFrame { .. }, Input::Response { metadata, .. }]
                if metadata.cluster_id.as_deref() == Some("kafka-cluster-1")
        ),
        "{got:?}"
    );
    assert_eq!(a.metadata_version(), Some(13));
}

#[test]
fn over_sasl_the_credential_check_comes_between_the_first_answer_and_the_end() {
    use crate::kafka::exchange::tests::sasl::sasl_api_versions;
    use crate::kafka::exchange::tests::{cluster, response};
    use crate::kafka::sasl::{Sasl, Secret};
    use kafka_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};

    let plain = Sasl::Plain { username: "alice".into(), password: Secret::new("pw") };
    let config = ExchangeConfig { sasl: Some(plain), ..ExchangeConfig::default() };
    let id = AttemptId(9);
    for accepted in [true, false] {
        let mut a = KafkaAttempt::new(id, &config, None, true);
        a.handle_connected();
        let api = correlation_id(a.poll_transmit().unwrap());
        a.handle_bytes(&response(api, 3, &sasl_api_versions()));
        assert_eq!(inputs(&mut a), [Input::Connected { attempt: id, tls: false }, Input::FirstFrame { attempt: id }]);
        let handshake = correlation_id(a.poll_transmit().unwrap());
        a.handle_bytes(&response(handshake, 1, &SaslHandshakeResponse::default()));
        assert_eq!(inputs(&mut a), [Input::Authenticating { attempt: id }], "the credentials went out");
        let authenticate = correlation_id(a.poll_transmit().unwrap());
        let verdict = SaslAuthenticateResponse::default().with_error_code(if accepted { 0 } else { 58 });
        a.handle_bytes(&response(authenticate, 2, &verdict));
        if !accepted {
            let [Input::Failed { error, .. }] = &inputs(&mut a)[..] else { panic!() };
            assert_eq!(error.kind, ErrorKind::BrokerError(58));
            continue;
        }
        assert_eq!(inputs(&mut a), [Input::Authenticated { attempt: id }]);
        let metadata = correlation_id(a.poll_transmit().unwrap());
        a.handle_bytes(&response(metadata, 13, &cluster()));
        assert!(matches!(&inputs(&mut a)[..], [Input::Response { .. }]), "each once, then the end");
    }
}

#[test]
fn a_kept_tls_connection_is_already_secured_so_no_handshake_follows_its_connect() {
    let mut a = KafkaAttempt::resumed(AttemptId(4), &ExchangeConfig::default(), false);
    a.handle_connected();
    assert_eq!(inputs(&mut a), [Input::Connected { attempt: AttemptId(4), tls: false }]);
}

#[test]
fn a_completed_tls_handshake_is_the_brokers_first_answer_and_is_reported_once() {
    let mut a = KafkaAttempt::new(AttemptId(3), &ExchangeConfig::default(), None, false);
    a.handle_connected();
    assert_eq!(inputs(&mut a), [Input::Connected { attempt: AttemptId(3), tls: true }], "a TLS handshake follows");
    a.handle_secured();
    assert_eq!(inputs(&mut a), [Input::FirstFrame { attempt: AttemptId(3) }], "the broker process runs");
    a.handle_secured();
    assert!(inputs(&mut a).is_empty(), "once, however often the host says so");
    a.handle_closed();
    let [Input::Failed { error, .. }] = &inputs(&mut a)[..] else { panic!() };
    assert_eq!(error.kind, ErrorKind::Closed, "an answer still follows; only the first frame moved");
    a.handle_secured();
    assert!(inputs(&mut a).is_empty(), "nothing after the end");
}

#[test]
fn a_close_before_any_answer_is_one_failed_input_then_nothing() {
    let mut a = attempt();
    let _ = inputs(&mut a);
    a.handle_closed();
    let [Input::Failed { error, .. }] = &inputs(&mut a)[..] else { panic!() };
    assert_eq!(error.kind, ErrorKind::Closed);
    a.handle_bytes(&[0, 0, 0, 1, 0]);
    a.handle_closed();
    a.handle_error(AttemptError::new(ErrorKind::Io));
    assert!(inputs(&mut a).is_empty() && a.is_finished());
}

#[test]
fn a_tls_alert_on_a_plaintext_connection_is_named_a_tls_error() {
    for plaintext in [true, false] {
        let mut a = KafkaAttempt::new(AttemptId(1), &ExchangeConfig::default(), None, plaintext);
        let _ = inputs(&mut a);
        // A TLS alert record: content type 21, version 3.3, length 2, alert bytes.
        a.handle_bytes(&[21, 3, 3, 0, 2, 2, 40]);
        let [Input::Failed { error, .. }] = &inputs(&mut a)[..] else { panic!() };
        let expected = if plaintext { ErrorKind::Tls } else { ErrorKind::FrameTooLarge };
        assert_eq!(error.kind, expected, "{error}");
    }
}
