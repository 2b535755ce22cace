//! Delay with jitter without `tc netem`: the packets are queued to this process (NFQUEUE)
//! and each is released after its own delay, drawn uniformly from `delay ± jitter`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The thread that holds queued packets; stopping it unbinds the queue, and the rule's
/// `--queue-bypass` then lets packets through undelayed.
#[derive(Debug)]
pub(crate) struct Delayer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

struct Held {
    due: Instant,
    order: u64,
    message: nfq::Message,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.order) == (other.due, other.order)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.order).cmp(&(other.due, other.order))
    }
}

impl Delayer {
    /// Binds NFQUEUE `queue` and starts releasing its packets after `delay ± jitter`.
    pub(crate) fn start(queue: u16, delay: Duration, jitter: Duration, seed: u64) -> Result<Delayer, String> {
        let mut q = nfq::Queue::open().map_err(|e| format!("NFQUEUE: {e}"))?;
        q.bind(queue).map_err(|e| format!("NFQUEUE {queue}: {e}"))?;
        let _ = q.set_queue_max_len(queue, 16_384);
        q.set_nonblocking(true);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(format!("delay-{queue}"))
            .spawn(move || hold(q, queue, delay, jitter, seed, &flag))
            .map_err(|e| format!("delay thread: {e}"))?;
        Ok(Delayer { stop, thread: Some(thread) })
    }
}

fn hold(mut q: nfq::Queue, queue: u16, delay: Duration, jitter: Duration, seed: u64, stop: &AtomicBool) {
    let mut held = BinaryHeap::new();
    let mut rng = seed | 1;
    let mut order = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut idle = true;
        while let Ok(message) = q.recv() {
            idle = false;
            // xorshift64: the jitter needs spread, not quality.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let span = jitter.as_micros() as u64 * 2;
            let offset = if span == 0 { 0 } else { rng % (span + 1) };
            let wait = (delay + Duration::from_micros(offset)).saturating_sub(jitter);
            order += 1;
            held.push(Reverse(Held { due: Instant::now() + wait, order, message }));
        }
        let now = Instant::now();
        while held.peek().is_some_and(|Reverse(h)| h.due <= now) {
            let Reverse(mut h) = held.pop().expect("peeked");
            h.message.set_verdict(nfq::Verdict::Accept);
            let _ = q.verdict(h.message);
            idle = false;
        }
        if idle {
            let next = held.peek().map_or(Duration::from_millis(1), |Reverse(h)| h.due.saturating_duration_since(now));
            std::thread::sleep(next.min(Duration::from_micros(500)));
        }
    }
    // Whatever is still held goes through now rather than being lost with the queue.
    while let Some(Reverse(mut h)) = held.pop() {
        h.message.set_verdict(nfq::Verdict::Accept);
        let _ = q.verdict(h.message);
    }
    let _ = q.unbind(queue);
}

impl Drop for Delayer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
