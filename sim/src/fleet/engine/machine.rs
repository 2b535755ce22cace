//! The cores one machine's brokers and clients share ([`FleetConfig::shared_cores`]): work
//! runs in time slices, and a core goes to the waiting work that has had the least of it.
//!
//! Why a scheduler and not a timetable: work on shared cores cannot be given a finish time
//! when it arrives. A broker's TLS handshakes (milliseconds each) booked back to back would
//! hold a core for a whole storm, and a Metadata request or a client's answer arriving
//! meanwhile would wait for all of them; a real kernel instead gives the request's thread
//! a turn within a slice. So work here is a job: it waits for a core, runs a slice of at most
//! [`SLICE_US`], and goes back to wait if unfinished. The waiting job that has run least goes
//! first, as Linux's fair scheduler favours a thread that just woke over one that has been
//! computing: a short request passes a long handshake instead of queueing behind it.
//!
//! A broker's queue ([`Queue`]) still serves one job at a time, in arrival order: only its
//! head waits for a core.
//!
//! [`FleetConfig::shared_cores`]: crate::fleet::FleetConfig::shared_cores

use alloc::collections::{BinaryHeap, VecDeque};
use alloc::vec::Vec;
use core::cmp::Reverse;

use super::{Ev, Queue};

/// The longest a job runs before another waiting job gets the core (µs): about a slice of
/// Linux's scheduler on a machine with a few busy threads.
pub(super) const SLICE_US: u32 = 1_000;

/// What to do when a job is done: push `ev` (marked `paid`) `delay` µs later.
#[derive(Clone, Copy, Debug)]
pub(super) struct Then {
    pub ev: Ev,
    pub delay: u64,
    pub paid: bool,
}

#[derive(Clone, Copy, Debug)]
struct Job {
    /// Work left (µs).
    left: u32,
    /// Work done so far (µs): who has had least goes first.
    done: u32,
    then: Option<Then>,
    /// The broker queue it belongs to, which moves on when it is done.
    queue: Option<(u16, Queue)>,
}

/// The shared cores, and the jobs running on and waiting for them.
#[derive(Clone, Debug)]
pub(super) struct Machine {
    jobs: Vec<Job>,
    /// Slots of `jobs` free for reuse.
    free: Vec<u32>,
    /// Jobs waiting for a core: least work done first, then first come.
    ready: BinaryHeap<Reverse<(u32, u64, u32)>>,
    /// The job each core runs.
    running: Vec<Option<u32>>,
    /// Per broker, per queue ([`lane`]): jobs behind the one at its head.
    queues: Vec<[VecDeque<u32>; LANES]>,
    /// Per broker, per queue: whether its head job is waiting for or running on a core.
    busy: Vec<[bool; LANES]>,
    seq: u64,
    /// Events to push, for the engine to take: `(at, event, paid)`.
    pub out: Vec<(u64, Ev, bool)>,
}

/// Queues per broker: its request queue, then its network threads'.
const LANES: usize = 1 + super::NETWORK_THREADS;

fn lane(queue: Queue) -> usize {
    match queue {
        Queue::Requests => 0,
        Queue::Network(k) => 1 + (k as usize).min(LANES - 2),
    }
}

impl Machine {
    pub(super) fn new(cores: usize, brokers: usize) -> Machine {
        Machine {
            jobs: Vec::new(),
            free: Vec::new(),
            ready: BinaryHeap::new(),
            running: alloc::vec![None; cores],
            queues: (0..brokers).map(|_| core::array::from_fn(|_| VecDeque::new())).collect(),
            busy: alloc::vec![[false; LANES]; brokers],
            seq: 0,
            out: Vec::new(),
        }
    }

    /// Work of `work` µs arrives now, for broker `queue` if any (behind that queue's
    /// earlier work), with `then` to follow once it is done.
    pub(super) fn submit(&mut self, now: u64, work: u32, queue: Option<(u16, Queue)>, then: Option<Then>) {
        let job = Job { left: work, done: 0, then, queue };
        let id = match self.free.pop() {
            Some(id) => {
                self.jobs[id as usize] = job;
                id
            }
            None => {
                self.jobs.push(job);
                (self.jobs.len() - 1) as u32
            }
        };
        match queue {
            Some((b, q)) if self.busy[b as usize][lane(q)] => self.queues[b as usize][lane(q)].push_back(id),
            Some((b, q)) => {
                self.busy[b as usize][lane(q)] = true;
                self.wait(id);
            }
            None => self.wait(id),
        }
        self.dispatch(now);
    }

    /// Core `core`'s slice ended now: its job goes back to wait, or is done.
    pub(super) fn slice_done(&mut self, now: u64, core: u16) {
        let Some(id) = self.running.get_mut(core as usize).and_then(Option::take) else { return };
        let job = self.jobs[id as usize];
        if job.left > 0 {
            self.wait(id);
        } else {
            self.free.push(id);
            if let Some(then) = job.then {
                self.out.push((now + then.delay, then.ev, then.paid));
            }
            if let Some((b, q)) = job.queue {
                match self.queues[b as usize][lane(q)].pop_front() {
                    Some(next) => self.wait(next),
                    None => self.busy[b as usize][lane(q)] = false,
                }
            }
        }
        self.dispatch(now);
    }

    fn wait(&mut self, id: u32) {
        self.ready.push(Reverse((self.jobs[id as usize].done, self.seq, id)));
        self.seq += 1;
    }

    /// Gives every idle core a waiting job, for one slice.
    fn dispatch(&mut self, now: u64) {
        for core in 0..self.running.len() {
            if self.running[core].is_some() {
                continue;
            }
            let Some(Reverse((_, _, id))) = self.ready.pop() else { return };
            let job = &mut self.jobs[id as usize];
            let slice = job.left.min(SLICE_US);
            job.left -= slice;
            job.done = job.done.saturating_add(slice);
            self.running[core] = Some(id);
            self.out.push((now + slice as u64, Ev::Slice { core: core as u16 }, true));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stagger::AttemptId;

    fn response(client: u32) -> Ev {
        Ev::Response { client, attempt: AttemptId(0) }
    }

    /// Runs `m` to the end: every slice's end is handled at its time. Returns when each
    /// client's response would be pushed.
    fn finish(m: &mut Machine) -> Vec<(u32, u64)> {
        let mut done = Vec::new();
        let mut pending: Vec<(u64, Ev)> = Vec::new();
        loop {
            pending.extend(m.out.drain(..).map(|(at, ev, _)| (at, ev)));
            pending.sort_by_key(|p| core::cmp::Reverse(p.0));
            let Some((at, ev)) = pending.pop() else { return done };
            match ev {
                Ev::Slice { core } => m.slice_done(at, core),
                Ev::Response { client, .. } => done.push((client, at)),
                _ => unreachable!(),
            }
        }
    }

    #[test]
    fn a_short_job_passes_a_long_one_within_a_slice() {
        let mut m = Machine::new(1, 1);
        let then = |c| Some(Then { ev: response(c), delay: 0, paid: false });
        m.submit(0, 5 * SLICE_US, None, then(1));
        m.submit(10, 30, None, then(2));
        let done = finish(&mut m);
        // The long job yields the core after its first slice; the short one has had none.
        assert_eq!(done, alloc::vec![(2, SLICE_US as u64 + 30), (1, 5 * SLICE_US as u64 + 30)]);
    }

    #[test]
    fn a_brokers_queue_serves_one_job_at_a_time_in_arrival_order() {
        let mut m = Machine::new(2, 1);
        let then = |c| Some(Then { ev: response(c), delay: 7, paid: false });
        let q = Some((0, Queue::Requests));
        m.submit(0, 100, q, then(1));
        m.submit(0, 10, q, then(2));
        // Another queue's work takes the second core meanwhile.
        m.submit(0, 50, Some((0, Queue::Network(0))), then(3));
        let done = finish(&mut m);
        assert_eq!(done, alloc::vec![(3, 57), (1, 107), (2, 117)]);
    }
}
