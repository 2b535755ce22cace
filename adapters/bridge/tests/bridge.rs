//! The bridge with a real WebSocket client (tokio-tungstenite) on one side and real TCP
//! servers on loopback on the other: bytes both ways, closes both ways, refused targets,
//! text frames, the `binary` subprotocol and graceful shutdown. These are about transport,
//! so the bridges that carry arbitrary bytes here forward every byte (`ApiPolicy::All`);
//! `security.rs` tests the origin, token and request checks.

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use stagger_bridge::{ApiPolicy, Bridge, BridgeOptions, RunningBridge, Stats};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::connect_async;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

mod common;
use common::{read_bytes, Client};

const LOOPBACK: &str = "127.0.0.1:0";

/// Every test body runs under this bound, so a regression fails instead of hanging.
async fn bounded<F: Future>(body: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(20), body).await.expect("test exceeded its 20 s bound")
}

/// A TCP echo server on loopback.
async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind(LOOPBACK).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut rx, mut tx) = stream.into_split();
                let _ = tokio::io::copy(&mut rx, &mut tx).await;
            });
        }
    });
    addr
}

/// A TCP server that runs `behave` on each connection.
async fn server<F, Fut>(behave: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind(LOOPBACK).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(behave(stream));
        }
    });
    addr
}

/// A loopback port with nothing listening on it.
fn closed_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind(LOOPBACK).unwrap();
    listener.local_addr().unwrap()
}

/// A bridge with the default options (no web page, metadata requests only).
async fn start(target: SocketAddr) -> RunningBridge {
    Bridge::bind(LOOPBACK.parse().unwrap(), target.to_string()).await.unwrap().spawn()
}

/// A bridge that forwards every byte, unparsed (`--forward-all-apis`): a plain tunnel.
async fn start_tunnel(target: SocketAddr) -> RunningBridge {
    let options = BridgeOptions { apis: ApiPolicy::All, ..BridgeOptions::default() };
    Bridge::bind_with(LOOPBACK.parse().unwrap(), target.to_string(), options).await.unwrap().spawn()
}

async fn connect(bridge: &RunningBridge) -> Client {
    connect_async(bridge.url()).await.expect("upgrade").0
}

/// The close code the bridge sends next (skipping nothing else: it must be a close).
async fn close_code(ws: &mut Client) -> CloseCode {
    match ws.next().await {
        Some(Ok(Message::Close(Some(frame)))) => frame.code,
        other => panic!("expected a close frame, got {other:?}"),
    }
}

/// Polls the counters until `check` holds (bounded by the test's own bound).
async fn eventually(bridge: &RunningBridge, check: impl Fn(Stats) -> bool) -> Stats {
    loop {
        let stats = bridge.stats().snapshot();
        if check(stats) {
            return stats;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn binary_messages_round_trip_as_bytes() {
    bounded(async {
        let bridge = start_tunnel(echo_server().await).await;
        let mut ws = connect(&bridge).await;
        ws.send(Message::binary(vec![0, 0, 0, 3, 1, 2, 3])).await.unwrap();
        assert_eq!(read_bytes(&mut ws, 7).await, [0, 0, 0, 3, 1, 2, 3]);
        // Larger than one read buffer: arrives in several messages, bytes intact and in order.
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        ws.send(Message::binary(big.clone())).await.unwrap();
        assert_eq!(read_bytes(&mut ws, big.len()).await, big);
        let stats = bridge.stats().snapshot();
        assert_eq!((stats.accepted, stats.upgraded, stats.open), (1, 1, 1));
        ws.close(None).await.unwrap();
        eventually(&bridge, |s| s.open == 0).await;
    })
    .await
}

#[tokio::test]
async fn binary_subprotocol_is_selected_when_offered_and_not_required() {
    bounded(async {
        let bridge = start_tunnel(echo_server().await).await;
        let mut request = bridge.url().into_client_request().unwrap();
        request.headers_mut().insert("Sec-WebSocket-Protocol", HeaderValue::from_static("base64, binary"));
        let (mut ws, response) = connect_async(request).await.expect("upgrade with subprotocols");
        assert_eq!(response.headers().get("Sec-WebSocket-Protocol").unwrap(), "binary");
        ws.send(Message::binary(b"kafka".to_vec())).await.unwrap();
        assert_eq!(read_bytes(&mut ws, 5).await, b"kafka");
        // Without any subprotocol the upgrade works too, and none is selected.
        let (_ws, response) = connect_async(bridge.url()).await.unwrap();
        assert!(response.headers().get("Sec-WebSocket-Protocol").is_none());
    })
    .await
}

#[tokio::test]
async fn text_messages_are_refused_and_the_target_is_closed() {
    bounded(async {
        let (eof_tx, mut eof_rx) = mpsc::unbounded_channel();
        let target = server(move |mut stream| {
            let eof_tx = eof_tx.clone();
            async move {
                let mut buf = [0u8; 64];
                while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
                let _ = eof_tx.send(());
            }
        })
        .await;
        let bridge = start(target).await;
        let mut ws = connect(&bridge).await;
        ws.send(Message::text("not kafka")).await.unwrap();
        assert_eq!(close_code(&mut ws).await, CloseCode::Unsupported);
        eof_rx.recv().await.expect("the target sees the TCP connection closed");
        let stats = eventually(&bridge, |s| s.open == 0).await;
        assert_eq!(stats.text_rejected, 1);
    })
    .await
}

#[tokio::test]
async fn target_close_closes_the_websocket_after_its_last_bytes() {
    bounded(async {
        let target = server(|mut stream| async move {
            stream.write_all(b"last words").await.unwrap();
            // Dropping the stream closes it.
        })
        .await;
        let bridge = start(target).await;
        let mut ws = connect(&bridge).await;
        assert_eq!(read_bytes(&mut ws, 10).await, b"last words");
        assert_eq!(close_code(&mut ws).await, CloseCode::Normal);
        eventually(&bridge, |s| s.open == 0).await;
    })
    .await
}

#[tokio::test]
async fn websocket_close_closes_the_target_connection_promptly() {
    bounded(async {
        let (eof_tx, mut eof_rx) = mpsc::unbounded_channel();
        let target = server(move |mut stream| {
            let eof_tx = eof_tx.clone();
            async move {
                let mut buf = [0u8; 64];
                let mut got = Vec::new();
                while let Ok(n @ 1..) = stream.read(&mut buf).await {
                    got.extend_from_slice(&buf[..n]);
                }
                let _ = eof_tx.send((got, Instant::now()));
            }
        })
        .await;
        let bridge = start_tunnel(target).await;
        let mut ws = connect(&bridge).await;
        ws.send(Message::binary(b"request".to_vec())).await.unwrap();
        let closed_at = Instant::now();
        ws.close(None).await.unwrap();
        let (got, eof_at) = eof_rx.recv().await.unwrap();
        assert_eq!(got, b"request");
        assert!(eof_at - closed_at < Duration::from_secs(1), "target closed {:?} after the client", eof_at - closed_at);
        // The bridge answers the close handshake.
        assert!(matches!(ws.next().await, Some(Ok(Message::Close(_))) | None));
        eventually(&bridge, |s| s.open == 0).await;
    })
    .await
}

#[tokio::test]
async fn refused_target_fails_the_upgrade_at_once() {
    bounded(async {
        let bridge = start(closed_port()).await;
        let started = Instant::now();
        let error = connect_async(bridge.url()).await.expect_err("upgrade must fail");
        assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
        match error {
            WsError::Http(response) => assert_eq!(response.status(), 502),
            other => panic!("expected an HTTP 502, got {other:?}"),
        }
        let stats = eventually(&bridge, |s| s.open == 0).await;
        assert_eq!((stats.accepted, stats.upgraded, stats.target_failures), (1, 0, 1));
    })
    .await
}

#[tokio::test]
async fn shutdown_closes_open_connections_with_going_away() {
    bounded(async {
        let bridge = start(echo_server().await).await;
        let mut first = connect(&bridge).await;
        let mut second = connect(&bridge).await;
        let stats = bridge.stats();
        assert_eq!(stats.snapshot().open, 2);
        let url = bridge.url();
        let shutdown = tokio::spawn(bridge.shutdown());
        assert_eq!(close_code(&mut first).await, CloseCode::Away);
        assert_eq!(close_code(&mut second).await, CloseCode::Away);
        shutdown.await.unwrap().unwrap();
        assert_eq!(stats.snapshot().open, 0);
        assert!(connect_async(url).await.is_err(), "no longer listening");
    })
    .await
}

#[tokio::test]
async fn bind_refuses_a_target_without_port() {
    let error = Bridge::bind(LOOPBACK.parse().unwrap(), "localhost").await.unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}
