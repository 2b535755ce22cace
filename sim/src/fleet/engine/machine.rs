//! The cores one machine's brokers and clients share ([`FleetConfig::shared_cores`]): its
//! threads take turns on them in time slices, the runnable thread that has run least first.
//!
//! Why a scheduler and not a timetable: work on shared cores cannot be given a finish time
//! when it arrives. A broker's TLS handshakes (milliseconds each) booked back to back would
//! hold a core for a whole storm, and a Metadata request or a client's answer arriving
//! meanwhile would wait for all of them; a real kernel instead gives each runnable thread a
//! fair share. So the machine runs threads, as Linux's fair scheduler does:
//!
//! * Each thread serves its own queue of work, one piece at a time, in arrival order: a
//!   broker's request threads, each of its network threads
//!   ([`FleetConfig::network_threads`]), and the clients' threads
//!   ([`ClientWork::threads`]; work goes to the one with least waiting), and the
//!   forwarders' one ([`ClientWork::relay`]).
//! * A free core takes the runnable thread that has run least (its virtual runtime) for a
//!   slice of at most [`SLICE_US`], and puts it back if its work is unfinished.
//! * A thread that wakes from waiting starts at no less than the least virtual runtime of
//!   the others less one slice, so sleeping earns it no more than one slice of credit.
//! * A broker's network thread works in poll iterations, as Kafka's selector loop does: an
//!   iteration serves every piece of work waiting when it began (work arriving meanwhile
//!   waits for the next), and hands the requests it read to the request threads only when
//!   it ends. So a request on a kept connection, read beside a storm's TLS handshakes, waits
//!   for all of that iteration's handshakes, whichever came first.
//!
//! [`FleetConfig::shared_cores`]: crate::fleet::FleetConfig::shared_cores
//! [`FleetConfig::network_threads`]: crate::fleet::FleetConfig::network_threads
//! [`ClientWork::threads`]: crate::fleet::ClientWork::threads
//! [`ClientWork::relay`]: crate::fleet::ClientWork::relay

use alloc::collections::{BinaryHeap, VecDeque};
use alloc::vec::Vec;
use core::cmp::Reverse;

use super::{Ev, Queue};

/// The longest a thread runs before another runnable thread gets the core (µs): about a
/// slice of Linux's scheduler on a machine with a few busy threads.
pub(super) const SLICE_US: u32 = 1_000;

/// Threads per broker: its request queue, its network threads', then its background work's.
const LANES: usize = 2 + super::NETWORK_THREADS;

/// What to do when a piece of work is done: push `ev` (marked `paid`) `delay` µs later.
#[derive(Clone, Copy, Debug)]
pub(super) struct Then {
    pub ev: Ev,
    pub delay: u64,
    pub paid: bool,
}

/// Whose thread a piece of work runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Owner {
    /// Broker `b`'s thread for `queue`.
    Broker(u16, Queue),
    /// The clients' process, for client `i`.
    Client(u32),
    /// The forwarders between the clients and the brokers, on one thread.
    Forwarder,
}

#[derive(Clone, Copy, Debug)]
struct Job {
    /// Work left (µs).
    left: u32,
    then: Option<Then>,
}

#[derive(Clone, Debug, Default)]
struct Thread {
    /// Work waiting, the first being served.
    work: VecDeque<Job>,
    /// Whether the thread works in poll iterations (a broker's network thread).
    polls: bool,
    /// Pieces of work left in the current poll iteration (0: none running).
    iteration_left: usize,
    /// Requests read in the current poll iteration, handed on when it ends.
    read: Vec<Then>,
    /// Time run so far, as the scheduler counts it (µs).
    vruntime: u64,
    /// Waiting for or running on a core.
    runnable: bool,
}

/// The shared cores and the threads taking turns on them.
#[derive(Clone, Debug)]
pub(super) struct Machine {
    threads: Vec<Thread>,
    /// Runnable threads not running: least virtual runtime first, then first come.
    ready: BinaryHeap<Reverse<(u64, u64, u32)>>,
    /// The thread each core runs, and the slice it was given.
    running: Vec<Option<(u32, u32)>>,
    /// Threads of the clients' process.
    client_threads: u32,
    /// The least virtual runtime a runnable thread has had: where a waking thread starts.
    floor: u64,
    seq: u64,
    /// Events to push, for the engine to take: `(at, event, paid)`.
    pub out: Vec<(u64, Ev, bool)>,
}

impl Machine {
    /// `cores` shared by `brokers` brokers' threads and `client_threads` threads of the
    /// clients' process.
    pub(super) fn new(cores: usize, brokers: usize, client_threads: u32) -> Machine {
        let client_threads = client_threads.max(1);
        // The brokers', the clients', and the forwarder's.
        let mut threads = alloc::vec![Thread::default(); brokers * LANES + client_threads as usize + 1];
        for (t, thread) in threads.iter_mut().enumerate().take(brokers * LANES) {
            thread.polls = (1..LANES - 1).contains(&(t % LANES));
        }
        Machine {
            threads,
            ready: BinaryHeap::new(),
            running: alloc::vec![None; cores],
            client_threads,
            floor: 0,
            seq: 0,
            out: Vec::new(),
        }
    }

    fn thread_of(&self, owner: Owner) -> usize {
        let brokers = (self.threads.len() - 1 - self.client_threads as usize) / LANES;
        match owner {
            Owner::Broker(b, queue) => {
                let lane = match queue {
                    Queue::Requests => 0,
                    Queue::Network(k) => 1 + (k as usize).min(LANES - 3),
                    Queue::Background => LANES - 1,
                };
                (b as usize).min(brokers.saturating_sub(1)) * LANES + lane
            }
            // Tokio's workers steal each other's tasks: the work goes to the client thread
            // with the least work waiting (the first such, counting from client `i`'s own).
            Owner::Client(i) => {
                let first = brokers * LANES;
                let n = self.client_threads as usize;
                (0..n)
                    .map(|k| first + (i as usize + k) % n)
                    .min_by_key(|&t| self.threads[t].work.len())
                    .unwrap_or(first)
            }
            Owner::Forwarder => self.threads.len() - 1,
        }
    }

    /// Work of `work` µs arrives now for `owner`'s thread (behind that thread's earlier
    /// work), with `then` to follow once it is done.
    pub(super) fn submit(&mut self, now: u64, work: u32, owner: Owner, then: Option<Then>) {
        let t = self.thread_of(owner);
        let thread = &mut self.threads[t];
        thread.work.push_back(Job { left: work, then });
        if thread.polls && thread.iteration_left == 0 {
            // An idle selector wakes for this work: an iteration of it alone.
            thread.iteration_left = thread.work.len();
        }
        if !self.threads[t].runnable {
            // It wakes: at most one slice of credit for the time it slept.
            let thread = &mut self.threads[t];
            thread.runnable = true;
            thread.vruntime = thread.vruntime.max(self.floor.saturating_sub(u64::from(SLICE_US)));
            self.wait(t);
        }
        self.dispatch(now);
    }

    /// Core `core`'s slice ended now: its thread's work is done or goes on, and the
    /// thread waits for its next turn or sleeps.
    pub(super) fn slice_done(&mut self, now: u64, core: u16) {
        let Some((t, slice)) = self.running.get_mut(core as usize).and_then(Option::take) else { return };
        let Machine { threads, out, .. } = self;
        let thread = &mut threads[t as usize];
        thread.vruntime += u64::from(slice);
        let mut finished = None;
        if let Some(job) = thread.work.front_mut() {
            job.left -= slice.min(job.left);
            if job.left == 0 {
                finished = Some(job.then);
                thread.work.pop_front();
            }
        }
        let emit = |out: &mut Vec<(u64, Ev, bool)>, then: Then| out.push((now + then.delay, then.ev, then.paid));
        match finished {
            // A poll iteration hands what it read on when it ends.
            Some(Some(then)) if thread.polls && matches!(then.ev, Ev::Read { .. }) => thread.read.push(then),
            Some(Some(then)) => emit(out, then),
            _ => {}
        }
        if thread.polls && finished.is_some() {
            thread.iteration_left = thread.iteration_left.saturating_sub(1);
            if thread.iteration_left == 0 {
                for then in thread.read.drain(..) {
                    emit(out, then);
                }
                // The next iteration serves everything that waits now.
                thread.iteration_left = thread.work.len();
            }
        }
        let more = !thread.work.is_empty();
        thread.runnable = more;
        if more {
            self.wait(t as usize);
        }
        self.dispatch(now);
    }

    fn wait(&mut self, t: usize) {
        self.ready.push(Reverse((self.threads[t].vruntime, self.seq, t as u32)));
        self.seq += 1;
    }

    /// Gives every idle core the runnable thread that has run least, for one slice.
    fn dispatch(&mut self, now: u64) {
        for core in 0..self.running.len() {
            if self.running[core].is_some() {
                continue;
            }
            let Some(Reverse((vruntime, _, t))) = self.ready.pop() else { break };
            self.floor = self.floor.max(vruntime);
            let left = self.threads[t as usize].work.front().map_or(0, |j| j.left);
            let slice = left.min(SLICE_US);
            self.running[core] = Some((t, slice));
            self.out.push((now + u64::from(slice), Ev::Slice { core: core as u16 }, true));
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

    fn then(client: u32) -> Option<Then> {
        Some(Then { ev: response(client), delay: 0, paid: false })
    }

    /// Runs `m` to the end: every slice's end is handled at its time. Returns when each
    /// client's response would be pushed.
    fn finish(m: &mut Machine) -> Vec<(u32, u64)> {
        let mut done = Vec::new();
        let mut pending: Vec<(u64, Ev)> = Vec::new();
        loop {
            pending.extend(m.out.drain(..).map(|(at, ev, _)| (at, ev)));
            pending.sort_by_key(|p| Reverse(p.0));
            let Some((at, ev)) = pending.pop() else { return done };
            match ev {
                Ev::Slice { core } => m.slice_done(at, core),
                Ev::Response { client, .. } | Ev::Read { client, .. } => done.push((client, at)),
                _ => unreachable!(),
            }
        }
    }

    #[test]
    fn a_waking_thread_passes_a_busy_one_within_a_slice() {
        let mut m = Machine::new(1, 2, 1);
        m.submit(0, 5 * SLICE_US, Owner::Broker(0, Queue::Requests), then(1));
        m.submit(10, 30, Owner::Broker(1, Queue::Requests), then(2));
        let done = finish(&mut m);
        // The busy thread yields the core after its first slice; the one that woke has run
        // less, and goes first.
        assert_eq!(done, alloc::vec![(2, SLICE_US as u64 + 30), (1, 5 * SLICE_US as u64 + 30)]);
    }

    #[test]
    fn a_thread_serves_its_work_in_order_while_others_use_the_other_core() {
        let mut m = Machine::new(2, 1, 1);
        m.submit(0, 100, Owner::Broker(0, Queue::Requests), then(1));
        m.submit(0, 10, Owner::Broker(0, Queue::Requests), then(2));
        m.submit(0, 50, Owner::Broker(0, Queue::Network(0)), then(3));
        let done = finish(&mut m);
        assert_eq!(done, alloc::vec![(3, 50), (1, 100), (2, 110)]);
    }

    #[test]
    fn a_network_thread_hands_its_reads_on_when_its_poll_iteration_ends() {
        use super::super::{Draw, Read};
        let read = |client: u32| {
            let draw = Draw { rtt: 0, service: 0, host: 0 };
            let ev = Ev::Read { client, attempt: AttemptId(0), broker: 0, draw, read: Read::Metadata };
            Some(Then { ev, delay: 0, paid: false })
        };
        let mut m = Machine::new(2, 1, 1);
        let network = Owner::Broker(0, Queue::Network(0));
        // An idle thread's first handshake is an iteration of its own.
        m.submit(0, 2_000, network, then(1));
        // A read and a handshake that arrive meanwhile wait for the next iteration; the
        // read takes no time, but is handed on when that iteration's handshake is done.
        m.submit(10, 0, network, read(2));
        m.submit(20, 2_000, network, then(3));
        let mut done = finish(&mut m);
        done.sort_unstable();
        assert_eq!(done, alloc::vec![(1, 2_000), (2, 4_000), (3, 4_000)]);
        // The request thread is no poll loop: what it finishes goes on at once.
        let mut m = Machine::new(2, 1, 1);
        m.submit(0, 0, Owner::Broker(0, Queue::Requests), read(2));
        m.submit(0, 2_000, Owner::Broker(0, Queue::Requests), then(1));
        assert_eq!(finish(&mut m), alloc::vec![(2, 0), (1, 2_000)]);
    }

    #[test]
    fn the_clients_work_runs_on_their_threads_only() {
        // Two clients on one client thread wait for each other even with two cores free.
        let mut m = Machine::new(2, 1, 1);
        m.submit(0, 40, Owner::Client(0), then(1));
        m.submit(0, 40, Owner::Client(1), then(2));
        assert_eq!(finish(&mut m), alloc::vec![(1, 40), (2, 80)]);
        // With two client threads they run at once.
        let mut m = Machine::new(2, 1, 2);
        m.submit(0, 40, Owner::Client(0), then(1));
        m.submit(0, 40, Owner::Client(1), then(2));
        let mut done = finish(&mut m);
        done.sort_unstable();
        assert_eq!(done, alloc::vec![(1, 40), (2, 40)]);
    }
}
