//! The broker book: which brokers a client knows, where it learned of them, and how they
//! behaved recently.
//!
//! Seed brokers (given by the user) are kept apart from brokers discovered through metadata,
//! as Sarama keeps `seedBrokers` apart from `brokers`: discovered brokers change with every
//! metadata response, seeds never do, and they are the way back in when every discovered
//! broker is gone (rebootstrap).

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::net::SocketAddr;
use core::time::Duration;
use serde::{Deserialize, Serialize};
use smallvec::{Array, SmallVec};

use crate::error::ConfigError;
use crate::metadata::Metadata;
use crate::rng::Rng;
use crate::time::{duration_micros, Instant};

/// Index of a broker in a [`BrokerBook`]; stable for the life of the book (entries are
/// never removed, only marked as no longer discovered), so commands stay cheap to copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BrokerIndex(pub u32);

/// Which cluster, and which node of it, a discovered broker's address belonged to when
/// metadata last listed it: what Kafka 4.4's cluster check (KIP-1242, ApiVersions v5) asks
/// the broker to confirm.
///
/// Addresses outlive clusters: after a migration, a failover to another cluster or a
/// re-provisioned host, the address a client kept may answer for another cluster, or as
/// another node. Sent along, the expectation makes such a broker answer REBOOTSTRAP_REQUIRED
/// instead of metadata the client would wrongly trust.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BrokerIdentity {
    /// The cluster id of the metadata that listed the broker.
    pub cluster_id: String,
    /// The node id that metadata listed at the broker's address.
    pub node_id: i32,
}

impl BrokerIdentity {
    /// Whether both halves are known (a non-empty cluster id, a node id of 0 or more): a
    /// broker refuses a check that sets only one (INVALID_REQUEST), and an empty cluster id
    /// matches no cluster, so an incomplete identity is not sent at all.
    pub fn is_complete(&self) -> bool {
        !self.cluster_id.is_empty() && self.node_id >= 0
    }
}

/// One known broker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BrokerEntry {
    /// `host:port` to connect to.
    pub address: Arc<str>,
    /// Whether the user listed it as a seed (bootstrap) broker.
    pub is_seed: bool,
    /// Node id from the latest metadata that listed it; `None` if not listed (any more).
    pub node_id: Option<i32>,
    /// Whether an adapter holds an open, healthy connection to it.
    pub connected: bool,
    /// Failure score in 1/256ths of a failure, halved every `health_half_life`.
    failure_score: u32,
    /// When `failure_score` was last brought up to date.
    scored_at: Instant,
    /// Whether a refresh resolves this entry's host name through the core's contract
    /// ([`crate::Command::Resolve`]) instead of connecting to it, so that every address of
    /// the name is a candidate of its own. Only names are marked ([`BrokerBook::resolving`]);
    /// an IP literal is connected to as it is.
    #[serde(default, skip_serializing_if = "is_false")]
    pub resolve: bool,
    /// For an entry a refresh learnt by resolving a name (`ip:port`): the entry of that
    /// name. TLS verifies the broker's certificate against the name, not the address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_from: Option<BrokerIndex>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl BrokerEntry {
    /// Whether metadata currently lists this broker.
    pub fn is_discovered(&self) -> bool {
        self.node_id.is_some()
    }

    /// The entry's socket address, when its host is an IP literal (`10.0.0.1:9092`,
    /// `[::1]:9092`) rather than a name.
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        self.address.parse().ok()
    }

    fn new(address: Arc<str>, is_seed: bool, node_id: Option<i32>) -> Self {
        BrokerEntry {
            address,
            is_seed,
            node_id,
            connected: false,
            failure_score: 0,
            scored_at: Instant::ZERO,
            resolve: false,
            resolved_from: None,
        }
    }

    /// An entry for `address`, learnt by resolving the name of entry `from`.
    pub(crate) fn resolved(address: SocketAddr, from: BrokerIndex) -> Self {
        let address: Arc<str> = Arc::from(alloc::format!("{address}").as_str());
        BrokerEntry { resolved_from: Some(from), ..BrokerEntry::new(address, false, None) }
    }
}

/// Seeds, discovered brokers and their recent health.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BrokerBook {
    entries: Vec<BrokerEntry>,
    /// Failure memory halves every this long (default 30 s).
    pub health_half_life: Duration,
    /// The connected broker a refresh asks first, ahead of other connected ones (the
    /// [`crate::Cluster`]'s leading kept connection); without it, connected brokers go in
    /// book order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lead: Option<BrokerIndex>,
}

/// Failure score (in 1/256ths) above which a broker counts as recently failed.
const RECENTLY_FAILED: u32 = 64;
/// One failure, in 1/256ths.
const ONE_FAILURE: u32 = 256;

impl BrokerBook {
    /// Builds a book from the user's seed brokers (`host:port`).
    ///
    /// Empty lists, empty entries and entries without a port are refused here, at
    /// construction, rather than failing later. Duplicates are merged.
    pub fn new<S: AsRef<str>>(seeds: impl IntoIterator<Item = S>) -> Result<Self, ConfigError> {
        let mut book = BrokerBook { entries: Vec::new(), health_half_life: Duration::from_secs(30), lead: None };
        for seed in seeds {
            let seed = seed.as_ref().trim();
            validate_address(seed)?;
            if book.find(seed).is_none() {
                book.entries.push(BrokerEntry::new(Arc::from(seed), true, None));
            }
        }
        if book.entries.is_empty() {
            return Err(ConfigError::new("seeds", "must list at least one broker (host:port)"));
        }
        Ok(book)
    }

    /// Builds a book as [`BrokerBook::new`] does, and marks every seed whose host is a name
    /// (not an IP literal) to be resolved by the core ([`BrokerEntry::resolve`]): a refresh
    /// that reaches such a seed emits [`crate::Command::Resolve`], and each address the name
    /// resolves to becomes a candidate of its own, staggered like any other (the Java
    /// client's `client.dns.lookup=use_all_dns_ips`). A refresh resolves the name again each
    /// time it reaches it, so a client follows addresses that change.
    ///
    /// The adapter must then answer `Resolve` ([`crate::Input::Resolved`]) and take the
    /// entries the refresh learns into its book ([`BrokerBook::absorb`]; a
    /// [`crate::Cluster`] does it itself).
    pub fn resolving<S: AsRef<str>>(seeds: impl IntoIterator<Item = S>) -> Result<Self, ConfigError> {
        let mut book = Self::new(seeds)?;
        for e in &mut book.entries {
            e.resolve = e.socket_addr().is_none();
        }
        Ok(book)
    }

    /// Takes in the entries `refresh` learnt by resolving names (the `ip:port` of each
    /// address, see [`crate::Refresh::learned`]) that this book does not hold yet, at the
    /// indices the refresh gave them, so `address(broker)` answers for every broker its
    /// commands name. `refresh` must have been built from this book, and the book must not
    /// have grown otherwise since; call it after each `handle_input`. Returns how many
    /// entries it added (none, without allocating, when there is nothing new).
    pub fn absorb(&mut self, refresh: &crate::Refresh) -> usize {
        let (first, learnt) = refresh.learned();
        let Some(have) = self.entries.len().checked_sub(first.0 as usize) else { return 0 };
        let new = learnt.get(have..).unwrap_or(&[]);
        self.entries.extend_from_slice(new);
        new.len()
    }

    /// Number of entries (seeds and discovered, including no-longer-listed ones).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the book is empty (never true for a book built by [`BrokerBook::new`]).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry at `index`, if any.
    pub fn get(&self, index: BrokerIndex) -> Option<&BrokerEntry> {
        self.entries.get(index.0 as usize)
    }

    /// The address of `index`, or `"?"` for an unknown index.
    pub fn address(&self, index: BrokerIndex) -> &str {
        self.get(index).map_or("?", |e| &e.address)
    }

    /// All entries with their indices.
    pub fn iter(&self) -> impl Iterator<Item = (BrokerIndex, &BrokerEntry)> {
        self.entries.iter().enumerate().map(|(i, e)| (BrokerIndex(i as u32), e))
    }

    /// Finds a broker by address.
    pub fn find(&self, address: &str) -> Option<BrokerIndex> {
        self.entries.iter().position(|e| &*e.address == address).map(|i| BrokerIndex(i as u32))
    }

    /// Learns the broker list of a winning metadata response: listed brokers become
    /// discovered (added if new), brokers no longer listed stop being discovered.
    pub(crate) fn update_from_metadata(&mut self, metadata: &Metadata) {
        for e in &mut self.entries {
            e.node_id = None;
        }
        // Entries sorted by address, and one reused buffer for each listed broker's address:
        // O(B log B) per winning answer with two allocations, not O(B²) with one per broker.
        let mut sorted: Vec<u32> = (0..self.entries.len() as u32).collect();
        sorted.sort_by(|&a, &b| self.entries[a as usize].address.cmp(&self.entries[b as usize].address));
        let mut address = String::new();
        for b in &metadata.brokers {
            address.clear();
            b.write_address(&mut address);
            match sorted.binary_search_by(|&i| (*self.entries[i as usize].address).cmp(address.as_str())) {
                Ok(pos) => self.entries[sorted[pos] as usize].node_id = Some(b.node_id),
                Err(pos) => {
                    // Kept in the index, so an address listed twice stays one entry.
                    sorted.insert(pos, self.entries.len() as u32);
                    self.entries.push(BrokerEntry::new(Arc::from(address.as_str()), false, Some(b.node_id)));
                }
            }
        }
    }

    /// Forgets every discovered broker, so the next refresh starts from the seeds
    /// (KIP-899's and KIP-1102's rebootstrap). Entries stay (indices are stable) but are no
    /// longer tried.
    pub(crate) fn rebootstrap(&mut self) {
        for e in &mut self.entries {
            e.node_id = None;
        }
    }

    /// Whether any broker is currently discovered.
    pub fn has_discovered(&self) -> bool {
        self.entries.iter().any(BrokerEntry::is_discovered)
    }

    /// Records that an attempt against `index` failed at `now`.
    pub(crate) fn record_failure(&mut self, index: BrokerIndex, now: Instant) {
        let half_life = self.health_half_life;
        if let Some(e) = self.entries.get_mut(index.0 as usize) {
            decay(e, now, half_life);
            e.failure_score = e.failure_score.saturating_add(ONE_FAILURE);
            e.connected = false;
        }
    }

    /// Records that `index` answered: its failure memory is cleared.
    pub(crate) fn record_success(&mut self, index: BrokerIndex, now: Instant) {
        if let Some(e) = self.entries.get_mut(index.0 as usize) {
            e.failure_score = 0;
            e.scored_at = now;
        }
    }

    /// Marks whether an adapter holds an open connection to `index`.
    pub(crate) fn set_connected(&mut self, index: BrokerIndex, connected: bool) {
        if let Some(e) = self.entries.get_mut(index.0 as usize) {
            e.connected = connected;
        }
    }

    /// Names the connected broker refreshes ask first ([`BrokerBook::attempt_order`]).
    pub(crate) fn set_lead(&mut self, lead: Option<BrokerIndex>) {
        self.lead = lead;
    }

    /// Whether `index` failed recently (its decayed failure score is still high).
    pub fn recently_failed(&self, index: BrokerIndex, now: Instant) -> bool {
        self.get(index).is_some_and(|e| decayed_score(e, now, self.health_half_life) >= RECENTLY_FAILED)
    }

    /// The order in which a refresh should try brokers, written into `out`.
    ///
    /// Discovered brokers an adapter holds a connection to first (no handshake to pay), the
    /// lead ([`BrokerBook::set_lead`]) before the others, then
    /// the other discovered brokers shuffled by `rng` (spreads clients over the cluster),
    /// then the seeds in the user's order; brokers that failed recently, seeds or not, go
    /// after every healthy one, least-failed first. The seeds come after the healthy
    /// discovered brokers, but they are always in the order, so a refresh whose discovered
    /// brokers all fail (or all answer REBOOTSTRAP_REQUIRED, their address now belonging to
    /// another cluster) still reaches the seeds in the same pass.
    /// With `shuffle_seeds`, the seeds too are shuffled by `rng` (after the discovered tier).
    pub(crate) fn attempt_order<A: Array<Item = BrokerIndex>>(
        &self,
        now: Instant,
        rng: &mut Rng,
        shuffle_seeds: bool,
        out: &mut SmallVec<A>,
    ) {
        out.clear();
        let lead = self.lead;
        let tier = |i: BrokerIndex| -> u8 {
            let e = &self.entries[i.0 as usize];
            if e.connected && e.is_discovered() {
                u8::from(lead != Some(i))
            } else if e.is_discovered() {
                2
            } else {
                3
            }
        };
        let any_discovered = self.has_discovered();
        for (i, e) in self.iter() {
            if e.is_discovered() || e.is_seed || (!any_discovered && e.connected) {
                out.push(i);
            }
        }
        // Shuffle the discovered tier; the seeds only when asked (else the user's order).
        let shuffle_tier = |out: &mut SmallVec<A>, rng: &mut Rng, which: u8| {
            let mut members: SmallVec<A> = out.iter().copied().filter(|&i| tier(i) == which).collect();
            rng.shuffle(&mut members);
            let mut shuffled = members.into_iter();
            for slot in out.iter_mut() {
                if tier(*slot) == which {
                    if let Some(next) = shuffled.next() {
                        *slot = next;
                    }
                }
            }
        };
        shuffle_tier(out, rng, 2);
        if shuffle_seeds {
            shuffle_tier(out, rng, 3);
        }
        let half_life = self.health_half_life;
        // Stable sort: healthy before recently failed, then by tier, then less-failed first.
        out.sort_by_key(|&i| {
            let score = decayed_score(&self.entries[i.0 as usize], now, half_life);
            let failed = score >= RECENTLY_FAILED;
            (failed, if failed { score } else { 0 }, tier(i))
        });
    }

    /// Candidates for a refresh, in attempt order (allocates; use at refresh start only).
    pub fn candidates(&self, now: Instant, seed: u64) -> Vec<BrokerIndex> {
        let mut out = SmallVec::<[BrokerIndex; 0]>::with_capacity(self.entries.len());
        self.attempt_order(now, &mut Rng::new(seed), false, &mut out);
        out.into_vec()
    }
}

fn decayed_score(e: &BrokerEntry, now: Instant, half_life: Duration) -> u32 {
    let hl = duration_micros(half_life).max(1);
    let halvings = now.as_micros().saturating_sub(e.scored_at.as_micros()) / hl;
    if halvings >= 32 {
        0
    } else {
        e.failure_score >> halvings
    }
}

fn decay(e: &mut BrokerEntry, now: Instant, half_life: Duration) {
    e.failure_score = decayed_score(e, now, half_life);
    if now > e.scored_at {
        e.scored_at = now;
    }
}

/// Checks that `address` looks like `host:port` with a non-zero numeric port.
pub fn validate_address(address: &str) -> Result<(), ConfigError> {
    let bad = |why: &str| ConfigError::new("seeds", alloc::format!("entry {address:?} {why}"));
    if address.is_empty() {
        return Err(bad("is empty"));
    }
    let (host, port) = address.rsplit_once(':').ok_or_else(|| bad("has no port (expected host:port)"))?;
    if host.is_empty() || host == "[]" {
        return Err(bad("has no host (expected host:port)"));
    }
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(bad("is an IPv6 address without brackets (expected [addr]:port)"));
    }
    match port.parse::<u16>() {
        Ok(p) if p != 0 => Ok(()),
        _ => Err(bad("has an invalid port (expected 1-65535)")),
    }
}

/// Convenience for tests and the simulator: `n` seed addresses `broker-0:9092`, ….
#[cfg(any(test, feature = "test-util"))]
pub fn numbered_seeds(n: usize) -> Vec<String> {
    (0..n).map(|i| alloc::format!("broker-{i}:9092")).collect()
}

#[cfg(feature = "test-util")]
impl BrokerBook {
    /// Learns the brokers `metadata` lists, as a [`crate::Cluster`] does after a refresh: lets
    /// tests and simulators build a book with discovered brokers without running one.
    pub fn learn_from(&mut self, metadata: &Metadata) {
        self.update_from_metadata(metadata);
    }
}

#[cfg(test)]
mod tests;
