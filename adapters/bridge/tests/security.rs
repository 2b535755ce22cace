//! The bridge is not an open tunnel: the `Origin` allow-list, the URL token and the Kafka
//! request filter, with a real WebSocket client (tokio-tungstenite) on one side and a fake
//! broker on the other that records every byte it receives (and echoes it back, so a client
//! can tell its request got through). Requests are encoded by the `kafka-protocol` crate.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use futures_util::{SinkExt, StreamExt};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, MetadataRequest, ProduceRequest, RequestHeader, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use stagger_bridge::{
    ApiPolicy, Bridge, BridgeEvent, BridgeOptions, EventSink, OriginPolicy, Refusal, RunningBridge, Token, Violation,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::connect_async;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

mod common;
use common::{read_bytes, Client};

const PAGE: &str = "http://127.0.0.1:8080";

/// Every test body runs under this bound, so a regression fails instead of hanging.
async fn bounded<F: Future>(body: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(20), body).await.expect("test exceeded its 20 s bound")
}

/// A Kafka request frame (size prefix included), encoded by `kafka-protocol`.
fn request<R: Encodable>(key: ApiKey, version: i16, body: &R) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("bridge-test")));
    let mut buf = BytesMut::new();
    header.encode(&mut buf, key.request_header_version(version)).unwrap();
    body.encode(&mut buf, version).unwrap();
    let mut frame = (buf.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&buf);
    frame
}

fn api_versions() -> Vec<u8> {
    let body = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("stagger"))
        .with_client_software_version(StrBytes::from_static_str("0.1.0"));
    request(ApiKey::ApiVersions, 3, &body)
}

/// What the core sends: every topic, never creating one.
fn metadata() -> Vec<u8> {
    request(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None).with_allow_auto_topic_creation(false))
}

fn produce() -> Vec<u8> {
    request(ApiKey::Produce, 9, &ProduceRequest::default().with_acks(1).with_timeout_ms(1000))
}

/// What the fake broker saw on one connection.
enum Seen {
    Bytes(Vec<u8>),
    Eof,
}

/// A fake broker: counts connections, reports each one's bytes (and its EOF) and echoes them.
struct Broker {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    seen: mpsc::UnboundedReceiver<Seen>,
}

async fn broker() -> Broker {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let (tx, seen) = mpsc::unbounded_channel();
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = stream.read(&mut buf).await {
                    let _ = tx.send(Seen::Bytes(buf[..n].to_vec()));
                    let _ = stream.write_all(&buf[..n]).await;
                }
                let _ = tx.send(Seen::Eof);
            });
        }
    });
    Broker { addr, accepted, seen }
}

impl Broker {
    /// Every byte of the (one) connection until its EOF.
    async fn bytes_until_eof(&mut self) -> Vec<u8> {
        let mut all = Vec::new();
        loop {
            match self.seen.recv().await.expect("broker task alive") {
                Seen::Bytes(b) => all.extend_from_slice(&b),
                Seen::Eof => return all,
            }
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// A bridge to `broker` with `options`, recording its events.
async fn start(broker: &Broker, options: BridgeOptions) -> (RunningBridge, Arc<Mutex<Vec<BridgeEvent>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let options =
        BridgeOptions { events: Some(EventSink::new(move |e| sink.lock().unwrap().push(e.clone()))), ..options };
    let bridge = Bridge::bind_with("127.0.0.1:0".parse().unwrap(), broker.addr.to_string(), options).await.unwrap();
    (bridge.spawn(), events)
}

fn allowing(origin: &str) -> BridgeOptions {
    BridgeOptions { origins: OriginPolicy::new().allow(origin).unwrap(), ..BridgeOptions::default() }
}

/// Opens `url`, sending `origin` as a browser would.
async fn open(url: &str, origin: Option<&str>) -> Result<Client, WsError> {
    let mut request = url.into_client_request().unwrap();
    if let Some(origin) = origin {
        request.headers_mut().insert("Origin", HeaderValue::from_str(origin).unwrap());
    }
    connect_async(request).await.map(|(ws, _)| ws)
}

/// The HTTP status and body of a refused upgrade.
fn refused(result: Result<Client, WsError>) -> (u16, String) {
    match result {
        Err(WsError::Http(response)) => {
            let body = response.body().clone().map(|b| String::from_utf8(b).unwrap()).unwrap_or_default();
            (response.status().as_u16(), body)
        }
        Err(other) => panic!("expected an HTTP refusal, got {other:?}"),
        Ok(_) => panic!("expected an HTTP refusal, the upgrade succeeded"),
    }
}

/// The close frame the bridge sends next, skipping echoed bytes.
async fn close_frame(ws: &mut Client) -> CloseFrame {
    loop {
        match ws.next().await {
            Some(Ok(Message::Binary(_))) => {}
            Some(Ok(Message::Close(Some(frame)))) => return frame,
            other => panic!("expected a close frame, got {other:?}"),
        }
    }
}

/// Sends `frame` and reads it back from the echoing broker: it went through.
async fn round_trip(ws: &mut Client, frame: &[u8]) {
    ws.send(Message::binary(frame.to_vec())).await.unwrap();
    assert_eq!(read_bytes(ws, frame.len()).await, frame);
}

#[tokio::test]
async fn a_page_from_another_origin_is_refused_with_403_before_the_broker_is_contacted() {
    bounded(async {
        let broker = broker().await;
        let (bridge, events) = start(&broker, allowing(PAGE)).await;
        for origin in ["https://evil.example", "http://127.0.0.1:8081", "http://localhost:8080", "null"] {
            let (status, body) = refused(open(&bridge.url(), Some(origin)).await);
            assert_eq!(status, 403, "{origin}");
            assert!(body.contains(&format!("origin \"{origin}\" is not allowed by this bridge")), "{body}");
        }
        // The default allows no page at all.
        let (default_bridge, _) = start(&broker, BridgeOptions::default()).await;
        assert_eq!(refused(open(&default_bridge.url(), Some(PAGE)).await).0, 403);
        assert_eq!(broker.accepted(), 0, "a refused page never reaches the broker");
        let stats = bridge.stats().snapshot();
        assert_eq!((stats.origin_refused, stats.upgraded, stats.target_failures), (4, 0, 0));
        let events = events.lock().unwrap();
        assert_eq!(events.len(), 4);
        assert!(matches!(&events[0], BridgeEvent::UpgradeRefused { refusal: Refusal::Origin { .. }, .. }));
        assert!(events[0].to_string().contains("(HTTP 403): origin \"https://evil.example\""), "{}", events[0]);
    })
    .await
}

#[tokio::test]
async fn an_allowed_origin_and_a_client_without_origin_get_through() {
    bounded(async {
        let mut broker = broker().await;
        // Any spelling of the same origin: the scheme's default port, case.
        let (bridge, events) = start(&broker, allowing("HTTP://127.0.0.1:8080/index.html")).await;
        let mut page = open(&bridge.url(), Some(PAGE)).await.expect("the allowed page connects");
        round_trip(&mut page, &api_versions()).await;
        page.close(None).await.unwrap();
        assert_eq!(broker.bytes_until_eof().await, api_versions());
        // Browsers always send Origin; a client that sends none is not a web page.
        let mut tool = open(&bridge.url(), None).await.expect("a non-browser client connects");
        round_trip(&mut tool, &metadata()).await;
        tool.close(None).await.unwrap();
        assert_eq!(broker.bytes_until_eof().await, metadata());
        assert!(events.lock().unwrap().is_empty());
        // ...unless the bridge requires an Origin.
        let strict = BridgeOptions { origins: OriginPolicy::new().require_origin(true), ..BridgeOptions::default() };
        let (strict, _) = start(&broker, strict).await;
        let (status, body) = refused(open(&strict.url(), None).await);
        assert_eq!(status, 403);
        assert!(body.contains("had none"), "{body}");
        // And any origin, when told so.
        let any = BridgeOptions { origins: OriginPolicy::any(), ..BridgeOptions::default() };
        let (any, _) = start(&broker, any).await;
        let mut evil = open(&any.url(), Some("https://evil.example")).await.expect("any origin");
        round_trip(&mut evil, &api_versions()).await;
    })
    .await
}

#[tokio::test]
async fn a_token_is_required_and_never_shown() {
    bounded(async {
        let mut broker = broker().await;
        let secret = "s3cret-token-0123456789";
        let options = BridgeOptions { token: Some(Token::new(secret).unwrap()), ..allowing(PAGE) };
        assert!(!format!("{options:?}").contains(secret), "Debug of the options shows no token");
        let (bridge, events) = start(&broker, options).await;
        assert!(!format!("{bridge:?}").contains(secret));
        assert_eq!(bridge.url_with_token(), format!("{}/?token={secret}", bridge.url()));
        for (url, what) in [
            (bridge.url(), "none in its URL"),
            (format!("{}/?token=s3cret-token-012345678", bridge.url()), "wrong"),
            (format!("{}/?token={secret}x", bridge.url()), "wrong"),
            (format!("{}/?other=1", bridge.url()), "none in its URL"),
        ] {
            let (status, body) = refused(open(&url, Some(PAGE)).await);
            assert_eq!(status, 401, "{url}");
            assert!(body.contains(what.split(' ').next().unwrap()), "{body}");
            assert!(!body.contains(secret), "{body}");
        }
        // The origin is checked first: a refused page learns nothing about the token.
        let (status, _) = refused(open(bridge.url_with_token(), Some("https://evil.example")).await);
        assert_eq!(status, 403);
        assert_eq!(broker.accepted(), 0, "no refused request reached the broker");
        let mut ws = open(bridge.url_with_token(), Some(PAGE)).await.expect("the right token");
        round_trip(&mut ws, &api_versions()).await;
        ws.close(None).await.unwrap();
        assert_eq!(broker.bytes_until_eof().await, api_versions());
        let stats = bridge.stats().snapshot();
        assert_eq!((stats.token_refused, stats.origin_refused, stats.upgraded), (4, 1, 1));
        for event in events.lock().unwrap().iter() {
            assert!(!event.to_string().contains(secret) && !format!("{event:?}").contains(secret), "{event}");
        }
    })
    .await
}

#[tokio::test]
async fn a_produce_request_closes_the_connection_and_never_reaches_the_broker() {
    bounded(async {
        let mut broker = broker().await;
        let (bridge, events) = start(&broker, BridgeOptions::default()).await;
        let mut ws = open(&bridge.url(), None).await.unwrap();
        round_trip(&mut ws, &api_versions()).await;
        ws.send(Message::binary(produce())).await.unwrap();
        let frame = close_frame(&mut ws).await;
        assert_eq!(frame.code, CloseCode::Policy);
        assert_eq!(frame.reason.as_str(), "Kafka request Produce (0) v9 is not forwarded");
        // The broker saw the ApiVersions request, then the connection closed: no Produce byte.
        assert_eq!(broker.bytes_until_eof().await, api_versions());
        let stats = bridge.stats().snapshot();
        assert_eq!(stats.requests_refused, 1);
        let events = events.lock().unwrap();
        let [BridgeEvent::RequestRefused { violation, .. }] = events.as_slice() else { panic!("{events:?}") };
        assert_eq!(*violation, Violation::Api { api_key: 0, api_version: 9 });
        assert!(events[0].to_string().contains("Produce (0) v9 is not forwarded"), "{}", events[0]);
    })
    .await
}

#[tokio::test]
async fn a_produce_request_behind_an_allowed_one_in_the_same_message_sends_neither() {
    bounded(async {
        let mut broker = broker().await;
        let (bridge, _) = start(&broker, BridgeOptions::default()).await;
        let mut ws = open(&bridge.url(), None).await.unwrap();
        ws.send(Message::binary([metadata(), produce()].concat())).await.unwrap();
        assert_eq!(close_frame(&mut ws).await.code, CloseCode::Policy);
        assert_eq!(broker.bytes_until_eof().await, b"");
        assert_eq!(broker.accepted(), 1);
    })
    .await
}

#[tokio::test]
async fn a_metadata_request_that_may_create_topics_never_reaches_the_broker() {
    bounded(async {
        let mut broker = broker().await;
        let (bridge, events) = start(&broker, BridgeOptions::default()).await;
        let mut ws = open(&bridge.url(), None).await.unwrap();
        round_trip(&mut ws, &metadata()).await;
        let creating = MetadataRequest::default().with_topics(None).with_allow_auto_topic_creation(true);
        ws.send(Message::binary(request(ApiKey::Metadata, 12, &creating))).await.unwrap();
        let frame = close_frame(&mut ws).await;
        assert_eq!(frame.code, CloseCode::Policy);
        assert_eq!(frame.reason.as_str(), "Metadata v12 that may create topics is not forwarded");
        assert_eq!(broker.bytes_until_eof().await, metadata());
        let events = events.lock().unwrap();
        assert!(matches!(
            &events[..],
            [BridgeEvent::RequestRefused { violation: Violation::MayCreateTopics { api_version: 12 }, .. }]
        ));
    })
    .await
}

#[tokio::test]
async fn every_api_is_forwarded_when_told_so() {
    bounded(async {
        let mut broker = broker().await;
        let options = BridgeOptions { apis: ApiPolicy::All, ..BridgeOptions::default() };
        let (bridge, events) = start(&broker, options).await;
        let mut ws = open(&bridge.url(), None).await.unwrap();
        round_trip(&mut ws, &api_versions()).await;
        round_trip(&mut ws, &produce()).await;
        ws.close(None).await.unwrap();
        assert_eq!(broker.bytes_until_eof().await, [api_versions(), produce()].concat());
        assert!(events.lock().unwrap().is_empty());
    })
    .await
}

#[tokio::test]
async fn frames_split_across_and_combined_in_messages_go_through_intact() {
    bounded(async {
        let mut broker = broker().await;
        let (bridge, _) = start(&broker, BridgeOptions::default()).await;
        let mut ws = open(&bridge.url(), None).await.unwrap();
        let handshake = request(ApiKey::SaslHandshake, 1, &SaslHandshakeRequest::default());
        let stream = [api_versions(), handshake, metadata(), metadata()].concat();
        // Cut in the size prefix, in the header, in the body, and across frame boundaries.
        let mut cuts = vec![0, 1, 3, 6, 9, 30, stream.len() - 5, stream.len()];
        cuts.dedup();
        for pair in cuts.windows(2) {
            ws.send(Message::binary(stream[pair[0]..pair[1]].to_vec())).await.unwrap();
        }
        assert_eq!(read_bytes(&mut ws, stream.len()).await, stream);
        ws.close(None).await.unwrap();
        assert_eq!(broker.bytes_until_eof().await, stream);
        // A refused request split mid-header is still refused before any of its bytes.
        let mut ws = open(&bridge.url(), None).await.unwrap();
        let produce = produce();
        ws.send(Message::binary(produce[..5].to_vec())).await.unwrap();
        ws.send(Message::binary(produce[5..].to_vec())).await.unwrap();
        assert_eq!(close_frame(&mut ws).await.code, CloseCode::Policy);
        assert_eq!(broker.bytes_until_eof().await, b"");
    })
    .await
}

#[tokio::test]
async fn frames_over_the_size_limit_or_not_kafka_are_refused() {
    bounded(async {
        let mut broker = broker().await;
        let options = BridgeOptions { max_frame_size: 1024, ..BridgeOptions::default() };
        let (bridge, events) = start(&broker, options).await;
        let mut ws = open(&bridge.url(), None).await.unwrap();
        ws.send(Message::binary(1025i32.to_be_bytes().to_vec())).await.unwrap();
        let frame = close_frame(&mut ws).await;
        assert_eq!(frame.code, CloseCode::Size);
        assert!(frame.reason.as_str().contains("1025 bytes is over this bridge's limit of 1024"), "{}", frame.reason);
        assert_eq!(broker.bytes_until_eof().await, b"");
        // Websockify-style raw bytes are not Kafka: refused, not forwarded.
        let mut ws = open(&bridge.url(), None).await.unwrap();
        ws.send(Message::binary(b"GET / HTTP/1.1\r\n\r\n".to_vec())).await.unwrap();
        assert_eq!(close_frame(&mut ws).await.code, CloseCode::Size);
        assert_eq!(broker.bytes_until_eof().await, b"");
        let mut ws = open(&bridge.url(), None).await.unwrap();
        ws.send(Message::binary((-1i32).to_be_bytes().to_vec())).await.unwrap();
        assert_eq!(close_frame(&mut ws).await.code, CloseCode::Policy);
        assert_eq!(broker.bytes_until_eof().await, b"");
        assert_eq!(bridge.stats().snapshot().requests_refused, 3);
        assert_eq!(events.lock().unwrap().len(), 3);
    })
    .await
}

#[tokio::test]
async fn bind_refuses_a_frame_limit_below_a_request_header() {
    let options = BridgeOptions { max_frame_size: 7, ..BridgeOptions::default() };
    let error = Bridge::bind_with("127.0.0.1:0".parse().unwrap(), "127.0.0.1:9092", options).await.unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}
