//! Shared by the fuzz targets: the calls an [`Exchange`] is driven with, the checks that must
//! hold after any sequence of them, and a global allocator that records the largest single
//! allocation (so a length prefix or an array count read off the wire can be caught sizing
//! one).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use arbitrary::Arbitrary;
use bytes::BytesMut;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, ResponseHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion};
use stagger::kafka::{Exchange, ExchangeConfig};

/// One call on the exchange.
#[derive(Arbitrary, Clone, Debug)]
pub enum Op {
    /// `handle_bytes`
    Bytes(Vec<u8>),
    /// `handle_eof`
    Eof,
    /// `poll_transmit`
    Transmit,
    /// `poll_outcome`
    Outcome,
}

/// Maximum frame sizes the targets choose from: tiny ones make the length check bite,
/// 64 KiB is far above any input (so an allocation near it can only come from the wire).
pub const MAX_FRAMES: [usize; 4] = [16, 256, 4096, 64 * 1024];

/// An exchange configuration with the `selector`-th maximum frame size.
pub fn config(selector: u8) -> ExchangeConfig {
    ExchangeConfig { max_frame_size: MAX_FRAMES[selector as usize % MAX_FRAMES.len()], ..ExchangeConfig::default() }
}

/// Applies `ops` to a fresh exchange, then hangs up; panics (a fuzz finding) if the call
/// protocol is broken. Returns the number of bytes fed.
pub fn drive(config: &ExchangeConfig, ops: &[Op]) -> usize {
    let mut exchange = Exchange::new(config);
    let mut outcomes = 0;
    let mut fed = 0;
    for op in ops {
        match op {
            Op::Bytes(bytes) => {
                fed += bytes.len();
                exchange.handle_bytes(bytes);
            }
            Op::Eof => {
                exchange.handle_eof();
                assert!(exchange.is_finished(), "EOF always finishes the exchange");
            }
            Op::Transmit => {
                if let Some(frame) = exchange.poll_transmit() {
                    assert!(!exchange.is_finished(), "nothing to transmit once finished");
                    let len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
                    assert_eq!(len, frame.len() - 4, "a well-formed request frame");
                    assert!(exchange.poll_transmit().is_none(), "one request at a time");
                }
            }
            Op::Outcome => {
                let finished = exchange.is_finished();
                if exchange.poll_outcome().is_some() {
                    assert!(finished, "no outcome before the exchange is finished");
                    outcomes += 1;
                }
            }
        }
    }
    exchange.handle_eof();
    assert!(exchange.is_finished());
    outcomes += usize::from(exchange.poll_outcome().is_some());
    assert_eq!(outcomes, 1, "exactly one outcome per exchange");
    assert!(exchange.poll_outcome().is_none() && exchange.poll_transmit().is_none());
    fed
}

/// Runs [`drive`] and checks the largest single allocation it made against the budget:
/// the maximum frame size, or what the bytes fed can explain — `AMPLIFICATION ×` the bytes
/// (known: `kafka-protocol` pre-sizes arrays by `count × element size`, ≤ 13× the wire size;
/// set `STAGGER_FUZZ_STRICT=1` to allow only 2×, the receive buffer's growth) — plus a fixed
/// allowance for the requests and error texts every exchange makes.
pub fn drive_and_check(config: &ExchangeConfig, ops: &[Op]) {
    LARGEST.with(|l| l.set(0));
    let fed = drive(config, ops);
    let largest = LARGEST.with(Cell::get);
    let amplification = if std::env::var_os("STAGGER_FUZZ_STRICT").is_some() { 2 } else { 16 };
    let budget = config.max_frame_size.max(amplification * fed) + 4096;
    assert!(
        largest <= budget,
        "one allocation of {largest} B; budget {budget} B ({fed} B fed, max frame {})",
        config.max_frame_size
    );
}

/// Splits `stream` at `cuts` (modulo its length) into byte ops.
pub fn split(stream: &[u8], cuts: &[u16]) -> Vec<Op> {
    let mut cuts: Vec<usize> = cuts.iter().map(|&c| c as usize % (stream.len() + 1)).collect();
    cuts.sort_unstable();
    let mut ops = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().chain([stream.len()]) {
        ops.push(Op::Bytes(stream[start..cut].to_vec()));
        start = cut;
    }
    ops
}

/// Inserts polls (`true` = transmit) and maybe an EOF into `ops` at the given positions.
pub fn interleave(mut ops: Vec<Op>, polls: &[(u16, bool)], eof_at: Option<u16>) -> Vec<Op> {
    for &(at, transmit) in polls {
        let at = at as usize % (ops.len() + 1);
        ops.insert(at, if transmit { Op::Transmit } else { Op::Outcome });
    }
    if let Some(at) = eof_at {
        let at = at as usize % (ops.len() + 1);
        ops.insert(at, Op::Eof);
    }
    ops
}

/// `message` behind its length prefix.
pub fn framed(message: &[u8]) -> Vec<u8> {
    let mut frame = (message.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(message);
    frame
}

/// A response frame encoded by `kafka-protocol`: header (as `T` calls for) and body.
pub fn response<T: Encodable + HeaderVersion>(correlation_id: i32, version: i16, body: &T) -> Vec<u8> {
    try_response(correlation_id, version, body).expect("an encodable response")
}

/// [`response`], or `None` when `body` does not encode (a fuzzer-made string too long).
pub fn try_response<T: Encodable + HeaderVersion>(correlation_id: i32, version: i16, body: &T) -> Option<Vec<u8>> {
    let mut buf = BytesMut::new();
    ResponseHeader::default().with_correlation_id(correlation_id).encode(&mut buf, T::header_version(version)).ok()?;
    body.encode(&mut buf, version).ok()?;
    Some(framed(&buf))
}

/// A broker's ApiVersions answer offering Metadata `v0..=max`.
pub fn api_versions(max: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(vec![
        ApiVersion::default().with_api_key(ApiKey::Metadata as i16).with_max_version(max),
        ApiVersion::default().with_api_key(ApiKey::ApiVersions as i16).with_max_version(3),
    ])
}

struct Largest;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Largest = Largest;
