//! Framing: answers split at every byte, several frames in one chunk, hostile sizes.

use super::*;

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
pub(super) fn feed_and_check(mut exchange: Exchange, chunks: &[Vec<u8>]) -> Result<(), TestCaseError> {
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
pub(super) fn split(stream: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
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
