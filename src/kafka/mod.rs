//! The sans-IO Kafka exchange: the bytes one attempt writes and reads on its connection.
//!
//! The refresh core decides *which* broker to ask and *when*; this module knows *what to
//! say*. One [`Exchange`] per connection: right after connecting it yields an ApiVersions
//! request, then — fed the broker's bytes in whatever pieces the transport delivers — it
//! downgrades ApiVersions if the broker asks for it (v5, sent when the caller knows which
//! node of which cluster to expect, → v3 → v0), picks the highest Metadata version both
//! sides speak, yields the Metadata request, and finally produces a [`Metadata`] or an
//! [`AttemptError`]. It owns no socket, timer or thread, so the tokio, blocking and browser
//! adapters and the tests all drive the very same code. [`KafkaAttempt`] wraps it with what the
//! refresh core must hear of one attempt (connected, the broker's first frame, the end, a
//! TLS broker on a plaintext port named as such), so an adapter only moves bytes.
//!
//! ```
//! use stagger::kafka::{Exchange, ExchangeConfig};
//! let mut exchange = Exchange::new(&ExchangeConfig::default());
//! let request = exchange.poll_transmit().expect("the ApiVersions request is ready at once");
//! assert_eq!(request.len() - 4, u32::from_be_bytes([request[0], request[1], request[2], request[3]]) as usize);
//! // ... write `request`, then feed what the broker sends back:
//! exchange.handle_eof(); // here the broker hung up instead
//! assert_eq!(exchange.poll_outcome().unwrap().unwrap_err().kind, stagger::ErrorKind::Closed);
//! ```
//!
//! Wire types come from the `kafka-protocol` crate; this module only adds the length-prefix
//! framing, the version negotiation, a pre-decode guard against hostile array counts
//! (see `guard.rs`), and the ApiVersions v5 request `kafka-protocol` does not know yet
//! (see `api_versions_v5.rs`).
//!
//! [`Metadata`]: crate::Metadata
//! [`AttemptError`]: crate::AttemptError

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;

mod api_versions_v5;
mod attempt;
mod convert;
mod decode;
pub(crate) mod exchange;
mod frame;
mod guard;
pub mod sasl;
pub mod validate;

pub use attempt::KafkaAttempt;
pub use exchange::Exchange;

/// The most bytes of a broker's own text (a SCRAM attribute, an error message, a cluster id)
/// that an error quotes: enough to recognise what it said, and no more, so that no error
/// costs more memory than the frame that carried the text — quoting control characters with
/// `{:?}` takes up to 6 bytes for each, decoding bad UTF-8 lossily 3, and `format!` may
/// reserve twice what it writes.
const QUOTED: usize = 256;

/// At most [`QUOTED`] bytes of `text`, cut at a character boundary, `…` marking a cut.
pub(crate) fn excerpt(text: &str) -> Cow<'_, str> {
    if text.len() <= QUOTED {
        return Cow::Borrowed(text);
    }
    let mut end = QUOTED;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(alloc::format!("{}…", &text[..end]))
}

/// [`excerpt`] of bytes meant to be UTF-8 (what is not becomes U+FFFD).
pub(crate) fn excerpt_lossy(bytes: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(&bytes[..bytes.len().min(QUOTED)]).into_owned();
    if bytes.len() > QUOTED {
        text.push('…');
    }
    text
}

/// Largest response frame accepted by default: 100 MiB, Kafka's own `socket.request.max.bytes`.
///
/// A metadata response for a very large cluster is a few MiB; anything near this is a broken
/// or hostile peer, and refusing it up front keeps one bad broker from exhausting memory.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 100 * 1024 * 1024;

/// What an [`Exchange`] asks for and how much it is willing to read.
///
/// Shared by every attempt of a refresh, so it is cheap to clone and holds no connection state.
#[derive(Clone, Debug)]
pub struct ExchangeConfig {
    /// The `client.id` sent in every request header; brokers log it and apply quotas by it.
    pub client_id: String,
    /// Topics to describe: `None` asks for every topic, `Some(list)` only for those (an empty
    /// list asks for brokers only, except on Metadata v0, which cannot express that).
    pub topics: Option<Vec<String>>,
    /// Largest response frame accepted, in bytes; larger (or negative) length prefixes fail
    /// the attempt with `ErrorKind::FrameTooLarge` before anything is allocated for them.
    pub max_frame_size: usize,
    /// How to authenticate after ApiVersions; `None` for a listener without SASL.
    pub sasl: Option<sasl::Sasl>,
}

impl Default for ExchangeConfig {
    /// Client id `stagger`, all topics, [`DEFAULT_MAX_FRAME_SIZE`], no SASL: what a metadata
    /// lister wants.
    fn default() -> Self {
        ExchangeConfig {
            client_id: String::from("stagger"),
            topics: None,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            sasl: None,
        }
    }
}
