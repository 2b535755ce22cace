//! Shared by `tests/exchange_fuzz.rs` (CI's proptest) and `fuzz/` (cargo-fuzz targets), so
//! both judge the exchange with the same allocator probe and the same well-formed frames:
//! a global allocator that records the largest single allocation (a length prefix or an
//! array count read off the wire must never size one), and responses encoded by
//! `kafka-protocol` itself.
#![allow(dead_code)] // each includer uses a part

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::BytesMut;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, ResponseHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion};

/// Forwards to the system allocator, remembering the largest single allocation (or
/// reallocation target) this thread asked for since the last [`largest_allocation`] reset.
struct Largest;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: the allocator also runs while thread-locals are torn down.
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

/// Runs `f` and returns its result with the largest single allocation it made.
pub fn largest_allocation<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LARGEST.with(|l| l.set(0));
    let result = f();
    (result, LARGEST.with(Cell::get))
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

/// A broker's ApiVersions v3 answer offering Metadata `v0..=max`.
pub fn api_versions(max: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(vec![
        ApiVersion::default().with_api_key(ApiKey::Metadata as i16).with_max_version(max),
        ApiVersion::default().with_api_key(ApiKey::ApiVersions as i16).with_max_version(3),
    ])
}

/// Reads an unsigned varint off `b` (Kafka's flexible versions), advancing it.
pub fn read_uvarint(b: &mut &[u8]) -> Option<u32> {
    let mut value = 0u32;
    for i in 0..5 {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

/// Reads a compact nullable string off `b` (length + 1 as a varint, 0 for null), advancing
/// it: the hand-encoded ApiVersions v5 fields read back independently of the encoder.
pub fn read_compact_string<'a>(b: &mut &'a [u8]) -> Option<Option<&'a [u8]>> {
    match read_uvarint(b)? {
        0 => Some(None),
        n => {
            let text = b.get(..n as usize - 1)?;
            *b = &b[text.len()..];
            Some(Some(text))
        }
    }
}
