//! What the bridge's test binaries share: the WebSocket client type and reading its bytes.

use futures_util::StreamExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A test's WebSocket connection to a bridge.
pub type Client = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Reads binary messages until `n` bytes arrived (message boundaries carry no meaning).
pub async fn read_bytes(ws: &mut Client, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < n {
        match ws.next().await.expect("stream ended").expect("ws error") {
            Message::Binary(data) => out.extend_from_slice(&data),
            other => panic!("unexpected message {other:?}"),
        }
    }
    out
}
