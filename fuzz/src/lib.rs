//! Shared by the fuzz targets: the calls an [`Exchange`] is driven with, the checks that must
//! hold after any sequence of them, and a global allocator that records the largest single
//! allocation (so a length prefix or an array count read off the wire can be caught sizing
//! one).

use arbitrary::Arbitrary;
use stagger::kafka::{Exchange, ExchangeConfig};

// The allocator probe and the well-formed frames, shared with the workspace's CI proptest.
#[path = "../../tests/support/wire.rs"]
mod wire;
pub use wire::{api_versions, framed, read_compact_string, read_uvarint, response, try_response};

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
    drive_exchange(Exchange::new(config), ops)
}

/// [`drive`] for an exchange the caller made (with an identity, a SCRAM nonce). Every
/// failure must say what went wrong (a non-empty detail).
pub fn drive_exchange(mut exchange: Exchange, ops: &[Op]) -> usize {
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
                if let Some(outcome) = exchange.poll_outcome() {
                    assert!(finished, "no outcome before the exchange is finished");
                    outcomes += 1;
                    if let Err(e) = outcome {
                        assert!(!e.detail.is_empty(), "an error that does not say why: {e:?}");
                    }
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
    drive_exchange_and_check(|| Exchange::new(config), config.max_frame_size, ops);
}

/// [`drive_and_check`] for an exchange `make` builds, whose maximum frame size is `max_frame`.
pub fn drive_exchange_and_check(make: impl FnOnce() -> Exchange, max_frame: usize, ops: &[Op]) {
    let (fed, largest) = wire::largest_allocation(|| drive_exchange(make(), ops));
    let amplification = if std::env::var_os("STAGGER_FUZZ_STRICT").is_some() { 2 } else { 16 };
    let budget = max_frame.max(amplification * fed) + 4096;
    assert!(largest <= budget, "one allocation of {largest} B; budget {budget} B ({fed} B fed, max frame {max_frame})");
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
