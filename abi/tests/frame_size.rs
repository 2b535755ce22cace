//! The default maximum frame size against a big cluster: a multi-megabyte Metadata answer,
//! delivered as many small `RECEIVED` events over several steps, is taken whole; the same
//! answer above a session's `max_frame_size` fails that attempt before anything is
//! buffered for it. The heap is counted on the way, for docs/abi.md's memory figures.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use kafka_protocol::messages::ApiKey;
use stagger_abi::host::HostEvent;
use stagger_abi::*;

/// Counts the heap in use and its peak (this test binary has one test, so nothing else
/// allocates meanwhile).
struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to `System` unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let now = IN_USE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

const MIB: usize = 1024 * 1024;
/// Pieces of the answer as a socket might deliver them, and how many per wake-up.
const PIECE: usize = 64 * 1024;
const PIECES_PER_STEP: usize = 8;

/// Refreshes `abi` against a broker whose Metadata answer (v12) is `frame`, prepared before
/// the heap is measured (its correlation id is patched in place); returns every action of
/// the steps that delivered the answers. Meanwhile the host itself holds only the pieces of
/// one step (512 KiB, and their batch).
fn refresh_in_pieces(abi: &Abi, frame: &mut [u8]) -> Vec<Act> {
    let mut broker = Broker::default();
    let first = owned(&abi.step(0, &[HostEvent::RequestRefresh(STAGGER_CAUSE_BOOTSTRAP, String::new())]).actions());
    let [(conn, _)] = dials(&first)[..] else { panic!("{first:?}") };
    let mut acts = owned(&abi.step(MS, &[HostEvent::Connected(conn)]).actions());
    let mut now = 2 * MS;
    let mut all = Vec::new();
    loop {
        let Some(request) =
            acts.iter().find_map(|a| if let Act::Send(c, b) = a { (*c == conn).then(|| b.clone()) } else { None })
        else {
            return all;
        };
        let answer = if request[4..6] == (ApiKey::Metadata as i16).to_be_bytes() {
            assert_eq!(request[6..8], 12i16.to_be_bytes(), "the frame was prepared for v12");
            frame[4..8].copy_from_slice(&request[8..12]);
            &*frame
        } else {
            &broker.answer(&request)[..]
        };
        for chunk in answer.chunks(PIECE * PIECES_PER_STEP) {
            let events: Vec<HostEvent> = chunk.chunks(PIECE).map(|p| HostEvent::Received(conn, p.to_vec())).collect();
            let step = owned(&abi.step(now, &events).actions());
            all.extend(step.iter().cloned());
            acts = step;
            now += MS;
        }
    }
}

#[test]
fn a_multi_megabyte_metadata_answer_in_many_pieces_is_taken_and_one_above_the_limit_is_refused() {
    // 20 000 topics of 6 partitions, 3 replicas each: 5.5 MiB at Metadata v12.
    let mut frame = response(0, 12, &cluster(20_000, 6));
    let abi = Abi::new(r#"{"seeds": ["b1:9092"], "one_shot": true}"#, 0, 1).unwrap();
    let before = IN_USE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let last = refresh_in_pieces(&abi, &mut frame);
    let peak = PEAK.load(Ordering::Relaxed) - before;
    assert!(last.iter().any(|a| matches!(a, Act::Refreshed(1, _))), "{last:?} {}", abi.report());
    let frame_len = frame.len();
    assert!(frame_len > 5 * MIB && frame_len < STAGGER_DEFAULT_MAX_FRAME_SIZE as usize, "{frame_len} bytes");
    let pieces = frame_len.div_ceil(PIECE);
    assert!(pieces > 80, "{pieces} RECEIVED events");
    let metadata = abi.metadata();
    assert_eq!(metadata["topics"].as_array().unwrap().len(), 20_000);
    assert_eq!(metadata["topics"][19_999]["partitions"][5]["isr"], serde_json::json!([1, 2, 3]));
    eprintln!(
        "a {:.1} MiB Metadata answer in {pieces} pieces: peak heap {:.1} MiB during the refresh ({:.1}x the frame)",
        frame_len as f64 / MIB as f64,
        peak as f64 / MIB as f64,
        peak as f64 / frame_len as f64
    );
    assert!(peak < 8 * frame_len, "the refresh's heap stays within a few frames: {peak} bytes");

    // The same answer to a session whose limit is 1 MiB: refused from its length prefix.
    let config =
        r#"{"seeds": ["b1:9092"], "one_shot": true, "max_frame_size": 1048576, "settings": {"retry.retries": 0}}"#;
    let abi = Abi::new(config, 0, 1).unwrap();
    let last = refresh_in_pieces(&abi, &mut frame);
    let error = last.iter().find_map(|a| if let Act::RefreshFailed(_, e) = a { Some(e.clone()) } else { None });
    let error = error.unwrap_or_else(|| panic!("{last:?}"));
    assert_eq!(error["last_error"]["kind"], "frame_too_large", "{error}");
}
