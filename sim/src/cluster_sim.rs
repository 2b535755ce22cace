//! A long-lived [`Cluster`] against a simulated cluster: refresh requests arrive at given
//! times, and the report shows which refresh answered each (single-flight coalescing) and
//! which brokers each refresh tried (the winner of one refresh is preferred by the next).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;
use core::time::Duration;
use serde::{Deserialize, Serialize};

use super::render::fmt_instant;
use super::world::World;
use super::{Lane, Scenario, SimError, MAX_STEPS};
use stagger::report::{Event, EventKind};
use stagger::{
    AttemptId, BrokerBook, BrokerIndex, Cluster, ClusterConfig, ClusterEvent, Instant, RefreshError, RefreshStats,
};

/// One call of [`Cluster::request_refresh`] and the refresh that answers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// When the application asked.
    pub at: Instant,
    /// The epoch returned: equal epochs mean the requests were coalesced into one refresh.
    pub epoch: u32,
}

/// How one refresh of the cluster ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RefreshOutcome {
    /// The refresh got metadata from `winner`.
    Refreshed {
        /// The broker that answered.
        winner: BrokerIndex,
        /// The winning attempt.
        attempt: AttemptId,
    },
    /// The refresh gave up.
    Failed {
        /// The core's error.
        error: RefreshError,
    },
    /// Still running when the simulation stopped (only after an error).
    Unfinished,
}

/// One refresh the cluster ran (requested or periodic).
///
/// Why per refresh: coalescing and broker preference are properties *across* refreshes —
/// how many requests one refresh answered, and where the next one started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RefreshRecord {
    /// The refresh's epoch (high half of its attempt ids).
    pub epoch: u32,
    /// When its first attempt started.
    pub start: Instant,
    /// When it ended, if it did.
    pub end: Option<Instant>,
    /// How it ended.
    pub outcome: RefreshOutcome,
    /// The core's counters (reported with success only, as `ClusterEvent::Refreshed` does).
    pub stats: Option<RefreshStats>,
    /// Brokers it connected to, in `Connect` order.
    pub brokers_tried: Vec<BrokerIndex>,
    /// How many requests it answered (0 for a periodic refresh nobody asked for).
    pub requests: u32,
}

impl RefreshRecord {
    /// The winning broker, if it got metadata.
    pub fn winner(&self) -> Option<BrokerIndex> {
        match self.outcome {
            RefreshOutcome::Refreshed { winner, .. } => Some(winner),
            _ => None,
        }
    }

    /// How long it took, if it ended.
    pub fn duration(&self) -> Option<Duration> {
        self.end.map(|end| end.saturating_since(self.start))
    }
}

/// Everything a simulated [`Cluster`] did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterReport {
    /// Every refresh, in start order.
    pub refreshes: Vec<RefreshRecord>,
    /// Every request, in time order, with the epoch that answers it.
    pub requests: Vec<RequestRecord>,
    /// How many times the cluster fell back to its seed brokers.
    pub rebootstraps: u32,
    /// Why the simulation stopped early, if it did.
    pub error: Option<SimError>,
    /// Virtual time when the simulation stopped.
    pub ended_at: Instant,
    /// One lane per broker of the cluster's book, with the spans of every refresh.
    pub lanes: Vec<Lane>,
    /// What happened, in order, in the core's vocabulary, timed from the simulation's start
    /// (the cluster's creation, [`Instant::ZERO`]): a record of many refreshes, each named by
    /// its attempts' epoch. Requests, periodic-refresh timers and rebootstraps are among
    /// them.
    pub events: Vec<Event>,
}

impl ClusterReport {
    /// The refresh with `epoch`, if it ran.
    pub fn refresh(&self, epoch: u32) -> Option<&RefreshRecord> {
        self.refreshes.iter().find(|r| r.epoch == epoch)
    }

    /// One line per refresh: when, how long, who won, which brokers were tried, and how
    /// many requests it answered. For examples and test failure messages.
    pub fn render_summary(&self) -> String {
        let mut out = String::new();
        for r in &self.refreshes {
            let _ = write!(out, "refresh {}: {}", r.epoch, fmt_instant(r.start));
            match r.end {
                Some(end) => {
                    let _ = write!(out, " -> {}", fmt_instant(end));
                }
                None => out.push_str(" -> (unfinished)"),
            }
            match &r.outcome {
                RefreshOutcome::Refreshed { winner, .. } => {
                    let _ = write!(out, ", won by broker {}", winner.0);
                }
                RefreshOutcome::Failed { error } => {
                    let _ = write!(out, ", gave up ({:?})", error.reason);
                }
                RefreshOutcome::Unfinished => {}
            }
            let tried: Vec<String> = r.brokers_tried.iter().map(|b| alloc::format!("{}", b.0)).collect();
            let _ = writeln!(out, ", tried [{}], answered {} request(s)", tried.join(", "), r.requests);
        }
        if self.rebootstraps > 0 {
            let _ = writeln!(out, "rebootstraps: {}", self.rebootstraps);
        }
        if let Some(e) = &self.error {
            let _ = writeln!(out, "simulation error: {e}");
        }
        out
    }
}

/// Drives a [`Cluster`] built from [`Scenario::seeds`] in virtual time, calling
/// [`Cluster::request_refresh`] at each of `requests` (times since the start, any order),
/// and reports every refresh it ran.
///
/// Stops once every request has been made and no refresh is running, so periodic refreshes
/// only appear if they fall due before that. Ties are broken timers first, then broker
/// events, then requests. Never panics; errors land in [`ClusterReport::error`].
pub fn run_cluster(config: &ClusterConfig, scenario: &Scenario, requests: &[Duration]) -> ClusterReport {
    let mut world = World::new(scenario);
    let mut report = ClusterReport {
        refreshes: Vec::new(),
        requests: Vec::new(),
        rebootstraps: 0,
        error: None,
        ended_at: Instant::ZERO,
        lanes: Vec::new(),
        events: Vec::new(),
    };
    let book = match BrokerBook::new(scenario.seeds()) {
        Ok(book) => book,
        Err(e) => {
            report.error = Some(e.into());
            return report;
        }
    };
    let mut cluster = match Cluster::new(*config, book.clone(), Instant::ZERO) {
        Ok(cluster) => cluster,
        Err(e) => {
            report.error = Some(e.into());
            report.lanes = world.lanes(&book);
            return report;
        }
    };
    let mut due: Vec<Instant> = requests.iter().map(|&d| Instant::ZERO.saturating_add(d)).collect();
    due.sort_unstable();
    let mut next = 0usize;
    let mut now = Instant::ZERO;
    let mut steps = 0u64;
    while next < due.len() || cluster.current().is_some() {
        if steps >= MAX_STEPS {
            report.error = Some(SimError::StepLimit { steps });
            break;
        }
        steps += 1;
        let timer = cluster.poll_timeout();
        let event = world.next_event_at();
        let request = due.get(next).copied();
        let Some(t) = [timer, event, request].into_iter().flatten().min() else {
            report.error = Some(SimError::Stalled { at: now });
            break;
        };
        now = now.max(t);
        if timer == Some(t) {
            let due = cluster.current().and_then(|r| r.next_timer()).filter(|&(at, _)| at <= t);
            // No refresh timer due: the cluster's own, the periodic refresh.
            world.record(now, due.map_or(EventKind::RefreshDue, |(_, timer)| EventKind::Timer { timer }));
            cluster.handle_timeout(now);
            drain(&mut cluster, &mut world, &mut report, now);
        } else if event == Some(t) {
            if let Some((_, input, delivery)) = world.pop_input() {
                if cluster.handle_input(now, input).is_applied() {
                    world.delivered(delivery);
                }
            }
            drain(&mut cluster, &mut world, &mut report, now);
        } else {
            next += 1;
            let epoch = cluster.request_refresh(now);
            world.record(now, EventKind::Requested { epoch });
            report.requests.push(RequestRecord { at: now, epoch });
            drain(&mut cluster, &mut world, &mut report, now);
            if let Some(r) = report.refreshes.iter_mut().find(|r| r.epoch == epoch) {
                r.requests += 1;
            }
        }
    }
    report.ended_at = now;
    report.lanes = world.lanes(cluster.book());
    report.events = core::mem::take(&mut world.events);
    report
}

/// Carries out every event the cluster has queued.
fn drain(cluster: &mut Cluster, world: &mut World<'_>, report: &mut ClusterReport, now: Instant) {
    while let Some(event) = cluster.poll_event() {
        match event {
            ClusterEvent::Connect { attempt, broker } | ClusterEvent::Reuse { attempt, broker } => {
                let reused = matches!(event, ClusterEvent::Reuse { .. });
                world.connect(now, attempt, broker, cluster.book().address(broker), reused);
                if let Some(info) = cluster.current().and_then(|r| r.attempt(attempt)) {
                    world.annotate(attempt, info);
                }
                record(report, attempt.epoch(), now).brokers_tried.push(broker);
            }
            // The simulator's brokers are addresses, never names marked to resolve
            // (`BrokerBook::resolving`): were one asked, it would go unanswered and the
            // core's attempt timeout would fail it (kind `Dns`).
            ClusterEvent::Resolve { .. } => {}
            ClusterEvent::Cancel { attempt, reason } => world.cancel(now, attempt, reason),
            // The simulated connections hold nothing to keep or close.
            ClusterEvent::Keep { .. } | ClusterEvent::Release { .. } => {}
            ClusterEvent::Refreshed { epoch, attempt, broker, stats } => {
                world.won(now, attempt);
                let r = record(report, epoch, now);
                r.end = Some(now);
                r.outcome = RefreshOutcome::Refreshed { winner: broker, attempt };
                r.stats = Some(stats);
            }
            ClusterEvent::RefreshFailed { epoch, error } => {
                world.record(now, EventKind::GaveUp { reason: error.reason });
                let r = record(report, epoch, now);
                r.end = Some(now);
                r.outcome = RefreshOutcome::Failed { error };
            }
            ClusterEvent::Rebootstrapped => {
                world.record(now, EventKind::Rebootstrapped);
                report.rebootstraps += 1;
            }
        }
    }
}

/// The record of refresh `epoch`, created (started `now`) on first sight.
fn record(report: &mut ClusterReport, epoch: u32, now: Instant) -> &mut RefreshRecord {
    let i = match report.refreshes.iter().position(|r| r.epoch == epoch) {
        Some(i) => i,
        None => {
            report.refreshes.push(RefreshRecord {
                epoch,
                start: now,
                end: None,
                outcome: RefreshOutcome::Unfinished,
                stats: None,
                brokers_tried: Vec::new(),
                requests: 0,
            });
            report.refreshes.len() - 1
        }
    };
    &mut report.refreshes[i]
}
