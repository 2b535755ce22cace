//! A long-lived client's view of the cluster: cached metadata, single-flight refresh,
//! periodic refresh, rebootstrap and the hedge budget.
//!
//! [`Cluster`] owns a [`BrokerBook`] and runs one [`Refresh`] at a time. Concurrent refresh
//! requests join the running one (single-flight), so a burst of "leader not available"
//! errors in an application costs one refresh, not one per caller. It follows the same
//! sans-IO contract as `Refresh`: `handle_*` in, [`ClusterEvent`]s out, `poll_timeout`.

use alloc::collections::VecDeque;
use core::time::Duration;
use serde::{Deserialize, Serialize};

use crate::brokers::{BrokerBook, BrokerIdentity, BrokerIndex};
use crate::config::RefreshConfig;
use crate::config::Stagger;
use crate::error::{ConfigError, ErrorKind, RefreshError};
use crate::estimator::Estimator;
use crate::metadata::Metadata;
use crate::refresh::{AttemptId, AttemptState, CancelReason, Command, Input, Refresh, RefreshContext, RefreshStats};
use crate::time::Instant;

/// Settings of a long-lived cluster view.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterConfig {
    /// The policy each refresh runs with.
    pub refresh: RefreshConfig,
    /// Refresh this often even if nobody asks (default 5 min, Kafka's `metadata.max.age.ms`).
    pub refresh_interval: Duration,
    /// Forget discovered brokers and start again from the seeds when a refresh fails and
    /// every discovered broker it tried failed (KIP-899), or when a broker answered
    /// REBOOTSTRAP_REQUIRED (KIP-1102, and Kafka 4.4's cluster check, KIP-1242). Default
    /// true; see [`ClusterEvent::Rebootstrapped`] for the rule.
    pub rebootstrap: bool,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            refresh: RefreshConfig::default(),
            refresh_interval: Duration::from_secs(300),
            rebootstrap: true,
        }
    }
}

/// What the cluster view asks of the adapter or tells the application.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterEvent {
    /// Start an attempt (as [`Command::Connect`]).
    Connect {
        /// Attempt id to report progress with.
        attempt: AttemptId,
        /// Broker to connect to.
        broker: BrokerIndex,
    },
    /// Abandon an attempt and close its connection (as [`Command::Cancel`]).
    Cancel {
        /// Which attempt.
        attempt: AttemptId,
        /// Why.
        reason: CancelReason,
    },
    /// A refresh succeeded; [`Cluster::metadata`] holds the new metadata. The winning
    /// attempt's connection may be kept: the book now prefers that broker.
    Refreshed {
        /// Refresh epoch (what [`Cluster::request_refresh`] returned).
        epoch: u32,
        /// The winning attempt.
        attempt: AttemptId,
        /// The broker that answered.
        broker: BrokerIndex,
        /// Counters of the refresh.
        stats: RefreshStats,
    },
    /// A refresh gave up; the cached metadata (if any) is kept.
    RefreshFailed {
        /// Refresh epoch.
        epoch: u32,
        /// Why, with every broker's error.
        error: RefreshError,
    },
    /// The view went back to the seeds (`ClusterConfig::rebootstrap`). Emitted
    ///
    /// * right after the `RefreshFailed` of a refresh in which every discovered broker it
    ///   tried failed (KIP-899), or a broker answered REBOOTSTRAP_REQUIRED: discovered
    ///   brokers are forgotten, and the next refresh asks the seeds;
    /// * right after the `Refreshed` of a refresh in which a broker answered
    ///   REBOOTSTRAP_REQUIRED and the winner was a broker asked without a cluster check (a
    ///   seed): the view was rebuilt from the seeds, within the refresh.
    ///
    /// REBOOTSTRAP_REQUIRED is error 129: the broker refused the ApiVersions v5 cluster
    /// check (KIP-1242), the client's own check found another cluster's id in the answer, or
    /// a Metadata answer carried it at the top (KIP-1102). That address no longer belongs to
    /// the cluster, so the rest of the book is suspect too; the refresh goes on to its other
    /// candidates — the seeds come last in every refresh — and every attempt to a discovered
    /// broker, retries included, keeps its check. A refresh won by another discovered broker
    /// (which passed the same check) has rebuilt the book from the cluster itself, and emits
    /// nothing.
    Rebootstrapped,
}

/// Long-lived cluster metadata state. See the module documentation.
#[derive(Clone, Debug)]
pub struct Cluster {
    config: ClusterConfig,
    book: BrokerBook,
    metadata: Option<Metadata>,
    fetched_at: Option<Instant>,
    current: Option<Refresh>,
    epoch: u32,
    now: Instant,
    next_periodic: Instant,
    /// Hedge budget in thousandths of a token.
    hedge_millitokens: u64,
    events: VecDeque<ClusterEvent>,
    /// Recent winning response times, for the adaptive stagger of later refreshes.
    estimator: Estimator,
    /// Recent handshake times of fresh connections: stand in for a kept connection's.
    handshakes: Estimator,
    /// Whether an attempt of the running refresh failed with REBOOTSTRAP_REQUIRED.
    rebootstrap_required: bool,
}

impl Cluster {
    /// Creates a cluster view over `book`; no refresh runs until requested or due.
    pub fn new(config: ClusterConfig, book: BrokerBook, now: Instant) -> Result<Self, ConfigError> {
        config.refresh.validate()?;
        if config.refresh_interval.is_zero() {
            return Err(ConfigError::new("refresh_interval", "must be positive"));
        }
        Ok(Cluster {
            config,
            book,
            metadata: None,
            fetched_at: None,
            current: None,
            epoch: 0,
            now,
            next_periodic: now.saturating_add(config.refresh_interval),
            hedge_millitokens: config.refresh.hedge_budget.burst as u64 * 1000,
            events: VecDeque::with_capacity(16),
            estimator: Estimator::new(),
            handshakes: Estimator::new(),
            rebootstrap_required: false,
        })
    }

    /// Asks for fresh metadata. If a refresh is running, the request joins it
    /// (single-flight); otherwise one starts now. Returns the epoch of the refresh that will
    /// answer: wait for `Refreshed` or `RefreshFailed` with that epoch.
    pub fn request_refresh(&mut self, now: Instant) -> u32 {
        // Settle whatever is due first: a refresh whose deadline has passed must not be joined.
        self.handle_timeout(now);
        if let Some(r) = &self.current {
            return r.epoch();
        }
        self.start(self.now)
    }

    /// Feeds an I/O result for an attempt; inputs from finished refreshes are ignored.
    pub fn handle_input(&mut self, now: Instant, input: Input) {
        self.advance(now);
        if let Some(r) = &mut self.current {
            let attempt = input.attempt();
            if attempt.epoch() == r.epoch() {
                // Only an attempt issued before this call can have a result (a timer due now
                // may issue the one the input names). What is due fires first, as
                // `Refresh::handle_input` would do anyway, so the attempt's state before and
                // after shows what this input did to it.
                let issued = r.attempt(attempt).is_some();
                r.handle_timeout(self.now);
                let in_flight = |r: &Refresh| r.attempt(attempt).is_some_and(|a| a.state == AttemptState::InFlight);
                let rebootstrap = issued && in_flight(r) && asks_to_rebootstrap(&input);
                if issued {
                    r.handle_input(self.now, input);
                }
                // The rule this feeds is documented on `ClusterEvent::Rebootstrapped`.
                if rebootstrap && r.attempt(attempt).is_some_and(|a| a.state == AttemptState::Failed) {
                    self.rebootstrap_required = true;
                }
                self.pump();
            }
        }
        self.handle_timeout(self.now);
    }

    /// Which node of which cluster `broker` should be, as far as this view knows: the cached
    /// metadata's cluster id and the node id it listed at that address. `None` unless the
    /// broker is currently discovered and both are known (a seed, or metadata without a
    /// cluster id, has none), since a check of one half only is refused by the broker.
    ///
    /// Adapters hand it to each attempt (`kafka::Exchange::with_identity`), so a discovered
    /// broker is asked to confirm it with ApiVersions v5 (Kafka 4.4, KIP-1242).
    pub fn identity(&self, broker: BrokerIndex) -> Option<BrokerIdentity> {
        let node_id = self.book.get(broker)?.node_id?;
        let cluster_id = self.metadata.as_ref()?.cluster_id.clone()?;
        Some(BrokerIdentity { cluster_id, node_id }).filter(BrokerIdentity::is_complete)
    }

    /// Advances time: fires refresh timers and starts a periodic refresh when due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        if let Some(r) = &mut self.current {
            r.handle_timeout(self.now);
            self.pump();
        }
        if self.current.is_none() && self.now >= self.next_periodic {
            self.start(self.now);
        }
    }

    /// The adapter closed the (kept) connection to `broker`: it is no longer preferred.
    pub fn connection_closed(&mut self, broker: BrokerIndex) {
        self.book.set_connected(broker, false);
    }

    /// The next event, if any. Drain after every `handle_*` and `request_refresh`.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<ClusterEvent> {
        self.events.pop_front()
    }

    /// When to call [`Cluster::handle_timeout`] next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.current {
            Some(r) => r.poll_timeout(),
            None => Some(self.next_periodic),
        }
    }

    /// The latest good metadata, if any refresh has succeeded.
    pub fn metadata(&self) -> Option<&Metadata> {
        self.metadata.as_ref()
    }

    /// How old the cached metadata is at `now`.
    pub fn metadata_age(&self, now: Instant) -> Option<Duration> {
        self.fetched_at.map(|at| now.saturating_since(at))
    }

    /// The broker book (seeds, discovered brokers, health).
    pub fn book(&self) -> &BrokerBook {
        &self.book
    }

    /// The running refresh, if any (for visualisers).
    pub fn current(&self) -> Option<&Refresh> {
        self.current.as_ref()
    }

    /// Whole hedge tokens available to the next refresh.
    pub fn hedge_tokens(&self) -> u32 {
        (self.hedge_millitokens / 1000).min(u32::MAX as u64) as u32
    }

    /// Recent response times (what the adaptive stagger of the next refresh learns from).
    pub fn estimator(&self) -> &Estimator {
        &self.estimator
    }

    /// The settings this view runs with.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    fn advance(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
    }

    fn start(&mut self, now: Instant) -> u32 {
        self.epoch = self.epoch.wrapping_add(1);
        self.rebootstrap_required = false;
        let mut config = self.config.refresh;
        // Each refresh draws from its own stream: same cluster seed ⇒ same sequence of refreshes.
        config.seed = config.seed.wrapping_add(self.epoch as u64);
        let (warm_stagger, handshake_hint) = match config.fanout.stagger {
            Stagger::Adaptive(a) => (self.estimator.quantile(a.quantile), self.handshakes.quantile(a.quantile)),
            Stagger::Fixed(_) => (None, None),
        };
        let ctx = RefreshContext { epoch: self.epoch, hedge_tokens: self.hedge_tokens(), warm_stagger, handshake_hint };
        // The config was validated in `new` and the book is never empty, so this succeeds;
        // should it not, report a failed refresh rather than panic.
        match Refresh::with_context(&config, &self.book, now, ctx) {
            Ok(r) => {
                self.current = Some(r);
                self.pump();
            }
            Err(_) => self.next_periodic = now.saturating_add(self.config.refresh_interval),
        }
        self.epoch
    }

    /// Moves the running refresh's commands into events and settles a finished refresh.
    fn pump(&mut self) {
        let Some(r) = &mut self.current else { return };
        let epoch = r.epoch();
        while let Some(cmd) = r.poll_command() {
            match cmd {
                Command::Connect { attempt, broker } => {
                    self.events.push_back(ClusterEvent::Connect { attempt, broker })
                }
                Command::Cancel { attempt, reason } => self.events.push_back(ClusterEvent::Cancel { attempt, reason }),
                Command::Done { attempt, broker, metadata } => {
                    let stats = r.stats();
                    // Whether the winner was asked to confirm the cluster (see `identity`).
                    let checked = self.book.get(broker).is_some_and(|e| e.node_id.is_some())
                        && self.metadata.as_ref().is_some_and(|m| m.cluster_id.is_some());
                    self.book.update_from_metadata(&metadata);
                    self.book.record_success(broker, self.now);
                    self.book.set_connected(broker, true);
                    self.metadata = Some(metadata);
                    self.fetched_at = Some(self.now);
                    self.events.push_back(ClusterEvent::Refreshed { epoch, attempt, broker, stats });
                    if self.rebootstrap_required && !checked && self.config.rebootstrap {
                        self.events.push_back(ClusterEvent::Rebootstrapped);
                    }
                }
                Command::GiveUp(error) => {
                    self.events.push_back(ClusterEvent::RefreshFailed { epoch, error });
                }
            }
        }
        if !r.is_finished() {
            return;
        }
        let Some(done) = self.current.take() else { return };
        self.settle(&done);
    }

    /// Learns from a finished refresh: broker health, hedge budget, rebootstrap.
    fn settle(&mut self, done: &Refresh) {
        let now = self.now;
        let winner_start = done.attempts().find(|(_, a)| a.state == AttemptState::Won).map(|(_, a)| a.started_at);
        let mut discovered_tried = 0u32;
        let mut discovered_failed = 0u32;
        for (_, a) in done.attempts() {
            if let (AttemptState::Won, Some(end)) = (a.state, a.ended_at) {
                self.estimator.observe(end.saturating_since(a.started_at));
            }
            if let (false, Some(up)) = (a.kept, a.connected_at) {
                self.handshakes.observe(up.saturating_since(a.started_at));
            }
            let discovered = self.book.get(a.broker).is_some_and(|e| e.is_discovered());
            discovered_tried += discovered as u32;
            let slow_loser = a.state == AttemptState::Cancelled && winner_start.is_some_and(|w| a.started_at < w);
            if a.state == AttemptState::Failed || slow_loser {
                self.book.record_failure(a.broker, now);
                discovered_failed += discovered as u32;
            }
        }
        let stats = done.stats();
        let budget = &self.config.refresh.hedge_budget;
        let cap = budget.burst as u64 * 1000;
        let earned = (budget.ratio * 1000.0) as u64;
        self.hedge_millitokens = (self.hedge_millitokens.saturating_sub(stats.hedges as u64 * 1000) + earned).min(cap);
        // The rule is documented on `ClusterEvent::Rebootstrapped`.
        let succeeded = winner_start.is_some();
        let every_discovered_failed = discovered_tried > 0 && discovered_failed == discovered_tried;
        let required = core::mem::take(&mut self.rebootstrap_required);
        if !succeeded && (every_discovered_failed || required) && self.config.rebootstrap && self.book.has_discovered()
        {
            self.book.rebootstrap();
            self.events.push_back(ClusterEvent::Rebootstrapped);
        }
        self.next_periodic = now.saturating_add(self.config.refresh_interval);
    }
}

/// Whether `input` reports REBOOTSTRAP_REQUIRED: a failed attempt with error 129 (the
/// exchange's ApiVersions v5 check, or its own cluster-id check), or a Metadata answer
/// carrying it at the top level (which the refresh rejects).
fn asks_to_rebootstrap(input: &Input) -> bool {
    const REBOOTSTRAP_REQUIRED: ErrorKind = ErrorKind::BrokerError(129);
    match input {
        Input::Failed { error, .. } => error.kind == REBOOTSTRAP_REQUIRED,
        Input::Response { metadata, .. } => metadata.rejection().is_some_and(|e| e.kind == REBOOTSTRAP_REQUIRED),
        Input::Connected { .. } | Input::Answered { .. } => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{AttemptError, GiveUpReason};
    use crate::metadata::BrokerMetadata;
    use crate::refresh::AttemptId;
    use alloc::string::String;
    use alloc::vec::Vec;

    const REBOOTSTRAP_REQUIRED: ErrorKind = ErrorKind::BrokerError(129);

    fn ms(millis: u64) -> Instant {
        Instant::from_millis(millis)
    }

    /// One attempt at a time, the next at once after a failure, one pass; an attempt outlives
    /// the 25 s deadline, and the stagger tick (20 s) cannot add one to the full throttle.
    fn config() -> ClusterConfig {
        let mut refresh = RefreshConfig::sequential();
        refresh.retry.retries = 0;
        refresh.attempt_timeout = Duration::from_secs(30);
        refresh.deadline = Duration::from_secs(25);
        refresh.fanout.stagger = Stagger::Fixed(Duration::from_secs(20));
        ClusterConfig { refresh, ..ClusterConfig::default() }
    }

    fn metadata(cluster_id: Option<&str>, brokers: &[(i32, &str)]) -> Metadata {
        Metadata {
            cluster_id: cluster_id.map(String::from),
            brokers: brokers
                .iter()
                .map(|&(node_id, host)| BrokerMetadata { node_id, host: host.into(), port: 9092, rack: None })
                .collect(),
            ..Metadata::default()
        }
    }

    fn events(cluster: &mut Cluster) -> Vec<ClusterEvent> {
        core::iter::from_fn(|| cluster.poll_event()).collect()
    }

    fn connects(events: &[ClusterEvent]) -> Vec<(AttemptId, BrokerIndex)> {
        events
            .iter()
            .filter_map(|e| match *e {
                ClusterEvent::Connect { attempt, broker } => Some((attempt, broker)),
                _ => None,
            })
            .collect()
    }

    fn failed(attempt: AttemptId, kind: ErrorKind) -> Input {
        Input::Failed { attempt, error: AttemptError::new(kind) }
    }

    /// A cluster view over `seed:9092` whose first refresh discovered `a` (node 1) and `b`
    /// (node 2) of cluster `c1`; returns it and the first refresh's attempt.
    fn discovered(config: ClusterConfig) -> (Cluster, AttemptId) {
        let mut cluster = Cluster::new(config, BrokerBook::new(["seed:9092"]).unwrap(), ms(0)).unwrap();
        cluster.request_refresh(ms(0));
        let [(attempt, seed)] = connects(&events(&mut cluster))[..] else { panic!("one attempt, to the seed") };
        assert_eq!(cluster.identity(seed), None, "nothing is known of a seed");
        let metadata = metadata(Some("c1"), &[(1, "a"), (2, "b")]);
        cluster.handle_input(ms(1), Input::Response { attempt, metadata });
        assert!(matches!(events(&mut cluster)[..], [ClusterEvent::Refreshed { .. }]));
        (cluster, attempt)
    }

    fn broker(cluster: &Cluster, address: &str) -> BrokerIndex {
        cluster.book().find(address).unwrap()
    }

    #[test]
    fn an_input_for_an_attempt_issued_in_the_same_call_is_ignored() {
        let mut refresh = RefreshConfig::default();
        refresh.fanout.jitter = 0.0;
        let book = BrokerBook::new(["b0:9092", "b1:9092", "b2:9092"]).unwrap();
        let mut cluster = Cluster::new(ClusterConfig { refresh, ..ClusterConfig::default() }, book, ms(0)).unwrap();
        cluster.request_refresh(ms(0));
        let [(first, _)] = connects(&events(&mut cluster))[..] else { panic!("one attempt") };
        // The cold stagger's tick at 250 ms issues the attempt this input names.
        let premature = AttemptId(first.0 + 1);
        cluster
            .handle_input(ms(250), Input::Response { attempt: premature, metadata: metadata(Some("c1"), &[(1, "a")]) });
        let ev = events(&mut cluster);
        assert!(ev.iter().all(|e| matches!(e, ClusterEvent::Connect { .. })), "{ev:?}");
        assert!(connects(&ev).iter().any(|&(a, _)| a == premature), "{ev:?}");
        assert!(cluster.metadata().is_none());
    }

    #[test]
    fn identity_is_known_for_discovered_brokers_only() {
        let (mut cluster, _) = discovered(config());
        let (seed, a, b) = (broker(&cluster, "seed:9092"), broker(&cluster, "a:9092"), broker(&cluster, "b:9092"));
        assert_eq!(cluster.identity(a), Some(BrokerIdentity { cluster_id: "c1".into(), node_id: 1 }));
        assert_eq!(cluster.identity(b), Some(BrokerIdentity { cluster_id: "c1".into(), node_id: 2 }));
        assert_eq!(cluster.identity(seed), None, "a seed the metadata does not list");
        assert_eq!(cluster.identity(BrokerIndex(99)), None);

        // Metadata without a cluster id (before Metadata v2): half an identity is none.
        cluster.request_refresh(ms(10));
        let (attempt, _) = connects(&events(&mut cluster))[0];
        let anonymous = metadata(None, &[(1, "a"), (3, "seed")]);
        cluster.handle_input(ms(11), Input::Response { attempt, metadata: anonymous });
        events(&mut cluster);
        assert!(cluster.book().get(seed).unwrap().is_discovered());
        assert_eq!(cluster.identity(a), None);
        assert_eq!(cluster.identity(seed), None);

        // A seed the metadata lists is a discovered broker like any other.
        cluster.request_refresh(ms(20));
        let (attempt, _) = connects(&events(&mut cluster))[0];
        cluster.handle_input(ms(21), Input::Response { attempt, metadata: metadata(Some("c1"), &[(3, "seed")]) });
        events(&mut cluster);
        assert_eq!(cluster.identity(seed), Some(BrokerIdentity { cluster_id: "c1".into(), node_id: 3 }));
        assert_eq!(cluster.identity(a), None, "no longer listed");
    }

    #[test]
    fn rebootstrap_required_from_a_discovered_broker_sends_the_next_refresh_to_the_seeds() {
        // `b` stays silent until the deadline, so not every discovered broker failed: only the
        // REBOOTSTRAP_REQUIRED can make the refresh rebootstrap.
        for (kind, rebootstrap, expected) in [
            (REBOOTSTRAP_REQUIRED, true, true),
            (ErrorKind::Refused, true, false),
            (REBOOTSTRAP_REQUIRED, false, false),
        ] {
            let (mut cluster, stale) = discovered(ClusterConfig { rebootstrap, ..config() });
            let epoch = cluster.request_refresh(ms(10));
            let ev = events(&mut cluster);
            let [(first, _)] = connects(&ev)[..] else { panic!("{ev:?}") };
            // A 129 from an attempt of an earlier refresh changes nothing.
            cluster.handle_input(ms(11), failed(stale, REBOOTSTRAP_REQUIRED));
            assert!(events(&mut cluster).is_empty());
            cluster.handle_input(ms(12), failed(first, kind));
            let ev = events(&mut cluster);
            let [(_, second)] = connects(&ev)[..] else { panic!("the next broker at once: {ev:?}") };
            assert!(cluster.identity(second).is_some(), "the rest of the refresh keeps its checks");
            cluster.handle_timeout(ms(10 + 25_000));
            let ev = events(&mut cluster);
            let Some(ClusterEvent::RefreshFailed { epoch: e, error }) =
                ev.iter().find(|e| !matches!(e, ClusterEvent::Cancel { .. }))
            else {
                panic!("{ev:?}")
            };
            assert_eq!((*e, error.reason), (epoch, GiveUpReason::DeadlineExceeded));
            assert_eq!(ev.last() == Some(&ClusterEvent::Rebootstrapped), expected, "{kind:?}, {rebootstrap}: {ev:?}");
            assert_eq!(!cluster.book().has_discovered(), expected);

            cluster.request_refresh(ms(30_000));
            let ev = events(&mut cluster);
            let [(_, next)] = connects(&ev)[..] else { panic!("{ev:?}") };
            if expected {
                assert_eq!(cluster.current().unwrap().candidates(), [broker(&cluster, "seed:9092")]);
                assert_eq!(cluster.book().address(next), "seed:9092");
                assert_eq!(cluster.identity(next), None, "the seeds are asked without a cluster check");
            } else {
                assert_eq!(cluster.current().unwrap().candidates().len(), 3);
            }
        }
    }

    #[test]
    fn every_discovered_broker_answering_rebootstrap_required_still_reaches_the_seed() {
        let (mut cluster, _) = discovered(config());
        cluster.request_refresh(ms(10));
        let (first, _) = connects(&events(&mut cluster))[0];
        // One refuses the ApiVersions v5 check, the other answers Metadata with error 129.
        cluster.handle_input(ms(11), failed(first, REBOOTSTRAP_REQUIRED));
        let (second, _) = connects(&events(&mut cluster))[0];
        let mut refusal = metadata(Some("c1"), &[(1, "a")]);
        refusal.error_code = 129;
        cluster.handle_input(ms(12), Input::Response { attempt: second, metadata: refusal });
        let ev = events(&mut cluster);
        let [(last, seed)] = connects(&ev)[..] else { panic!("the seed, in the same refresh: {ev:?}") };
        assert_eq!(cluster.book().address(seed), "seed:9092");
        assert_eq!(cluster.identity(seed), None);

        // The seed now fronts another cluster: its answer wins and rebuilds the view.
        cluster.handle_input(ms(13), Input::Response { attempt: last, metadata: metadata(Some("c2"), &[(7, "x")]) });
        let ev = events(&mut cluster);
        assert!(matches!(ev[..], [ClusterEvent::Refreshed { .. }, ClusterEvent::Rebootstrapped]), "{ev:?}");
        let x = broker(&cluster, "x:9092");
        assert_eq!(cluster.identity(x), Some(BrokerIdentity { cluster_id: "c2".into(), node_id: 7 }));
        assert_eq!(cluster.identity(broker(&cluster, "a:9092")), None);

        // A refresh whose every broker, seed included, met the same fails, then rebootstraps.
        let (mut cluster, _) = discovered(config());
        cluster.request_refresh(ms(10));
        let mut t = 10;
        let mut ev = events(&mut cluster);
        while let Some(&(attempt, _)) = connects(&ev).first() {
            t += 1;
            cluster.handle_input(ms(t), failed(attempt, REBOOTSTRAP_REQUIRED));
            ev = events(&mut cluster);
        }
        let [ClusterEvent::RefreshFailed { error, .. }, ClusterEvent::Rebootstrapped] = &ev[..] else {
            panic!("{ev:?}")
        };
        assert_eq!(error.brokers.len(), 3, "both discovered brokers and the seed were tried");
        assert!(error.brokers.iter().all(|b| b.last_error.as_ref().map(|e| e.kind) == Some(REBOOTSTRAP_REQUIRED)));
    }

    #[test]
    fn a_discovered_winner_after_rebootstrap_required_needs_no_rebootstrap() {
        let (mut cluster, _) = discovered(config());
        cluster.request_refresh(ms(10));
        let (first, _) = connects(&events(&mut cluster))[0];
        cluster.handle_input(ms(11), failed(first, REBOOTSTRAP_REQUIRED));
        let [(second, other)] = connects(&events(&mut cluster))[..] else { panic!() };
        assert!(cluster.identity(other).is_some(), "asked with the cluster check");
        let answer = metadata(Some("c1"), &[(1, "a"), (2, "b")]);
        cluster.handle_input(ms(12), Input::Response { attempt: second, metadata: answer });
        let ev = events(&mut cluster);
        assert!(matches!(ev[..], [ClusterEvent::Refreshed { .. }]), "{ev:?}");
        assert!(cluster.book().has_discovered());
    }
}
