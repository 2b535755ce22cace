//! The seeded chaos loop: one action per step, at most one broker out of reach at a time
//! (so a healthy client always has somewhere to go), slow or lossy paths anywhere.

use std::time::{Duration, Instant};

use stagger_kafka_fixture::netns::{Fault, NetCluster};
use stagger_kafka_fixture::Paused;

/// One thing the chaos loop did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action {
    /// `SIGSTOP`: the broker's kernel accepts, nobody answers.
    Pause(u32),
    /// `SIGCONT` after a pause.
    Continue(u32),
    /// `SIGKILL`: refused until restarted.
    Kill(u32),
    /// Started again after a kill (returns once it serves metadata).
    Restart(u32),
    /// The node's host path gets this fault (`Fault::Clear` heals it).
    Net(u32, Fault),
}

/// The broker currently out of reach, and how to bring it back.
enum Down<'a> {
    Paused(u32, Paused<'a>),
    Killed(u32),
    Cut(u32),
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        // splitmix64: enough spread for picking actions.
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

/// Acts every `step` until `duration` has passed since `start`, then brings everything back.
pub(crate) fn run(
    cluster: &NetCluster,
    seed: u64,
    step: Duration,
    duration: Duration,
    start: Instant,
) -> Vec<(Duration, Action)> {
    let kafka = cluster.kafka();
    let nodes = kafka.brokers();
    let mut rng = Rng(seed);
    let mut down: Option<Down<'_>> = None;
    let mut actions = Vec::new();
    let mut log = |action: Action| actions.push((start.elapsed(), action));
    while start.elapsed() + step < duration {
        std::thread::sleep(step);
        if let Some(d) = down.take() {
            if rng.below(10) < 6 {
                log(restore(cluster, d));
                continue;
            }
            down = Some(d);
        }
        let out = down.as_ref().map(Down::node);
        let mut node = 1 + rng.below(u64::from(nodes)) as u32;
        if Some(node) == out {
            node = node % nodes + 1;
        }
        match rng.below(if down.is_some() { 2 } else { 6 }) {
            0 => {
                let loss_percent = [0, 2, 5][rng.below(3) as usize];
                let delay = Duration::from_millis(5 + rng.below(40));
                let fault = Fault::Path { delay, jitter: delay / 3, loss_percent };
                cluster.set(node, fault);
                log(Action::Net(node, fault));
            }
            1 => {
                // Heals every path but the one cut off (that one comes back by `restore`).
                for n in (1..=nodes).filter(|n| Some(*n) != out || !matches!(down, Some(Down::Cut(_)))) {
                    cluster.set(n, Fault::Clear);
                }
                log(Action::Net(0, Fault::Clear));
            }
            2 => {
                down = Some(Down::Paused(node, kafka.pause(node)));
                log(Action::Pause(node));
            }
            3 => {
                kafka.kill(node);
                down = Some(Down::Killed(node));
                log(Action::Kill(node));
            }
            pick => {
                let fault = if pick == 4 { Fault::Blackhole } else { Fault::Reject };
                cluster.set(node, fault);
                down = Some(Down::Cut(node));
                log(Action::Net(node, fault));
            }
        }
    }
    if let Some(d) = down {
        log(restore(cluster, d));
    }
    cluster.heal();
    log(Action::Net(0, Fault::Clear));
    actions
}

impl Down<'_> {
    fn node(&self) -> u32 {
        match self {
            Down::Paused(node, _) | Down::Killed(node) | Down::Cut(node) => *node,
        }
    }
}

fn restore(cluster: &NetCluster, down: Down<'_>) -> Action {
    match down {
        Down::Paused(node, guard) => {
            drop(guard);
            Action::Continue(node)
        }
        Down::Killed(node) => {
            cluster.kafka().restart(node);
            Action::Restart(node)
        }
        Down::Cut(node) => {
            cluster.set(node, Fault::Clear);
            Action::Net(node, Fault::Clear)
        }
    }
}
