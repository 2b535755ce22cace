//! A counting allocator proves the core's steady state is allocation-free: after
//! `Refresh::new` (which sizes every buffer), driving a refresh over up to 32 brokers to
//! completion performs zero heap allocations. The only copy the core ever makes is the last
//! error inside `GiveUp`, once, at the end (tested below with an error that has no detail,
//! so it, too, is free; with a detail string it costs one allocation per refresh).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use stagger::{
    AttemptError, BrokerBook, BrokerMetadata, Command, ErrorKind, Input, Instant, Metadata, Refresh, RefreshConfig,
    Stagger,
};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Drives a refresh where every broker but the last hangs or fails, then the last answers.
/// Returns allocations counted after construction.
fn drive(config: RefreshConfig, brokers: usize, succeed: bool) -> (u64, usize) {
    let book = BrokerBook::new(stagger::test_util::numbered_seeds(brokers)).unwrap();
    let mut metadata = Some(Metadata {
        brokers: vec![BrokerMetadata { node_id: 0, host: "broker-0".into(), port: 9092, rack: None }],
        ..Metadata::default()
    });
    let mut refresh = Refresh::new(&config, &book, Instant::ZERO).unwrap();
    let mut commands = Vec::with_capacity(4096);
    let before = allocations();
    let mut now = Instant::ZERO;
    let mut step = 0u32;
    loop {
        while let Some(c) = refresh.poll_command() {
            if let Command::Connect { attempt, .. } = &c {
                step += 1;
                let attempt = *attempt;
                let now = now.saturating_add(Duration::from_micros(200));
                refresh.handle_input(now, Input::Connected { attempt, tls: false });
                match step % 3 {
                    0 => {
                        refresh
                            .handle_input(now, Input::Failed { attempt, error: AttemptError::new(ErrorKind::Refused) });
                    }
                    1 if succeed && step as usize >= brokers => {
                        let metadata = metadata.take().unwrap_or_default();
                        refresh.handle_input(now, Input::Response { attempt, metadata });
                    }
                    _ => {} // hung: left to the stagger and the attempt timeout
                }
            }
            if commands.len() < commands.capacity() {
                commands.push(c);
            }
        }
        match refresh.poll_timeout() {
            Some(at) => {
                now = at;
                refresh.handle_timeout(at);
            }
            None => break,
        }
    }
    let counted = allocations() - before;
    (counted, commands.len())
}

#[test]
fn no_allocation_per_input_after_construction() {
    for brokers in [1, 3, 8, 32] {
        for (name, mut config) in [
            ("adaptive", RefreshConfig::adaptive()),
            ("staggered", RefreshConfig::staggered()),
            ("sequential", RefreshConfig::sequential()),
            ("all-at-once", RefreshConfig::all_at_once()),
        ] {
            config.fanout.stagger = match config.fanout.stagger {
                Stagger::Fixed(d) => Stagger::Fixed(d.min(Duration::from_secs(5))),
                s => s,
            };
            for succeed in [true, false] {
                let (allocs, commands) = drive(config, brokers, succeed);
                assert!(commands > 1, "{name}/{brokers}: the refresh did something");
                assert_eq!(allocs, 0, "{name} over {brokers} brokers (succeed={succeed}) allocated {allocs} times");
            }
        }
    }
}

#[test]
fn the_counter_counts() {
    let before = allocations();
    let v: Vec<u8> = Vec::with_capacity(10);
    assert!(allocations() > before);
    drop(v);
}

/// A name resolved again (each pass, here) to addresses the refresh knows allocates nothing:
/// only an address seen for the first time makes a new entry (a book growth, like a
/// discovered broker). The answers are built before the counted calls, as an adapter builds
/// them.
#[test]
fn resolving_known_addresses_again_does_not_allocate() {
    let book = BrokerBook::resolving(["kafka.test:9092", "10.0.0.9:9092"]).unwrap();
    let mut config = RefreshConfig::default();
    config.retry.retries = 3;
    config.fanout.jitter = 0.0;
    let answer: Vec<std::net::SocketAddr> =
        ["[fd00::1]:9092", "10.0.0.1:9092", "10.0.0.9:9092"].iter().map(|a| a.parse().unwrap()).collect();
    let mut answers: Vec<Vec<std::net::SocketAddr>> = (0..8).map(|_| answer.clone()).collect();
    let mut refresh = Refresh::new(&config, &book, Instant::ZERO).unwrap();
    let mut now = Instant::ZERO;
    let (mut resolutions, mut counted) = (0, 0);
    let mut pending = Vec::with_capacity(64);
    loop {
        let before = allocations();
        while let Some(c) = refresh.poll_command() {
            pending.push(c);
        }
        for c in pending.drain(..) {
            now = now.saturating_add(Duration::from_micros(100));
            match c {
                Command::Resolve { attempt, .. } => {
                    let addresses = answers.pop().unwrap_or_default();
                    resolutions += 1;
                    refresh.handle_input(now, Input::Resolved { attempt, addresses });
                }
                Command::Connect { attempt, .. } => {
                    refresh.handle_input(now, Input::Failed { attempt, error: AttemptError::new(ErrorKind::Refused) });
                }
                _ => {}
            }
        }
        // The first pass learns the addresses; from the second on, nothing may allocate.
        if resolutions > 1 {
            counted += allocations() - before;
        }
        match refresh.poll_timeout() {
            Some(at) => {
                now = at;
                let before = allocations();
                refresh.handle_timeout(at);
                if resolutions > 1 {
                    counted += allocations() - before;
                }
            }
            None => break,
        }
    }
    assert_eq!(resolutions, 4, "one resolution per pass");
    assert_eq!(refresh.learned().1.len(), 2, "10.0.0.9 is a seed; the others were learnt once");
    assert_eq!(counted, 0, "resolving known addresses again allocated {counted} times");
}
