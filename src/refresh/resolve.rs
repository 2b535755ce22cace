//! Resolution as part of the contract: a seed given by name ([`crate::BrokerEntry::resolve`])
//! is an attempt that asks the adapter to resolve it ([`Command::Resolve`]); its answer
//! ([`Input::Resolved`]) makes every address a candidate of its own, next in the pass, the
//! first started at once and the rest staggered like any broker. So one bootstrap name whose
//! first address is dead no longer waits out an attempt timeout with nothing to stagger to
//! (RFC 8305, "Happy Eyeballs v2"; mxinden/happy-eyeballs makes DNS queries outputs and
//! answers inputs the same way).
//!
//! * The resolving attempt is an attempt like any other: it holds a throttle slot, has the
//!   attempt timeout (a resolver that never answers fails it with kind `Dns`) and can be
//!   cancelled; it ends [`AttemptState::Resolved`], neither won nor failed, and the first
//!   address takes its slot (a replacement, not a hedge).
//! * Addresses are ordered by RFC 8305 §4: the families interleaved, the resolver's first
//!   family first ([`FIRST_ADDRESS_FAMILY_COUNT`]); then addresses that failed recently (the
//!   book's health memory, as in [`crate::BrokerBook`]'s attempt order) after the others.
//! * Each address is an entry `ip:port` remembering its name: an entry of the book with the
//!   same address is reused, a new one is learnt ([`crate::Refresh::learned`], taken into the
//!   adapter's book by [`crate::BrokerBook::absorb`]). An address already walked by the pass
//!   (an IP seed) is left to the walk; one queued earlier in the pass (by another name) is
//!   not queued twice.
//! * A refresh takes at most [`MAX_RESOLVED_ADDRESSES`] addresses per answer and learns at
//!   most that many per name, so its tables are sized at construction; a repeated
//!   resolution to known addresses allocates nothing, and each answer costs
//!   O(addresses × log brokers).
//! * **The one exception to "no allocation per input":** a name's *first* answer allocates
//!   for the addresses it teaches the refresh (each new address's text and its entry in the
//!   learnt map: 7 allocations and 832 B were measured for one name's first answer;
//!   `tests/alloc.rs` checks that every later answer allocates nothing). Sizing that up
//!   front would reserve text for addresses no one knows yet; it happens once per name per
//!   refresh, never per attempt input.

use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::net::SocketAddr;
use smallvec::SmallVec;

use crate::brokers::{BrokerBook, BrokerEntry, BrokerIndex};
use crate::error::{AttemptError, BrokerFailure, ErrorKind};
use crate::time::Instant;

use super::contract::{AttemptId, AttemptState, Command, Input, InputOutcome, MAX_RESOLVED_ADDRESSES};
use super::Refresh;

/// RFC 8305 §4: "the First Address Family Count ... SHOULD default to 1": after the first
/// address of the resolver's preferred family, the families alternate.
pub const FIRST_ADDRESS_FAMILY_COUNT: usize = 1;

/// Error detail of a name that resolved to no address.
const NO_ADDRESSES: &str = "the name resolved to no address";

/// Addresses of one answer, on the stack.
type Answer = SmallVec<[SocketAddr; MAX_RESOLVED_ADDRESSES]>;

/// An address the refresh knows: an IP-literal entry of the book, or one it learnt.
#[derive(Clone, Debug)]
struct Known {
    broker: BrokerIndex,
    address: Arc<str>,
    /// Its candidate position, once it is a candidate.
    position: Option<u32>,
    /// Whether the book says it failed recently (it then goes after the others).
    failed: bool,
    /// Whether the adapter holds a connection to it (kept from an earlier refresh).
    connected: bool,
}

/// What a refresh with names to resolve keeps; `None` on a refresh without (so nothing
/// changes, and nothing is allocated, for books without names to resolve).
#[derive(Clone, Debug)]
pub(super) struct Resolution {
    /// The book's length at construction: learnt entries are numbered from here.
    base: u32,
    /// Candidate positions the pass walks (the construction list); resolved addresses are
    /// appended after them and reached only through their name's answer.
    pub(super) walk: usize,
    /// Per walked position: whether it is a name to resolve.
    names: Vec<bool>,
    known: BTreeMap<SocketAddr, Known>,
    learned: Vec<BrokerEntry>,
    /// Per position past `walk`: 1 + the pass in which it was last queued (0: never).
    queued_in: Vec<u32>,
    /// Positions that may still be added.
    room: usize,
}

impl Resolution {
    /// What a refresh over `candidates` of `book` needs, or `None` if none is a name.
    pub(super) fn new(book: &BrokerBook, candidates: &[BrokerIndex], now: Instant) -> Option<Self> {
        let is_name = |b: BrokerIndex| book.get(b).is_some_and(|e| e.resolve && e.socket_addr().is_none());
        let count = candidates.iter().filter(|&&b| is_name(b)).count();
        if count == 0 {
            return None;
        }
        let mut known = BTreeMap::new();
        for (broker, e) in book.iter() {
            if let Some(addr) = e.socket_addr() {
                known.entry(addr).or_insert(Known {
                    broker,
                    address: e.address.clone(),
                    position: None,
                    failed: book.recently_failed(broker, now),
                    connected: e.connected,
                });
            }
        }
        for (p, &b) in candidates.iter().enumerate() {
            if let Some(k) = book.get(b).and_then(BrokerEntry::socket_addr).and_then(|a| known.get_mut(&a)) {
                if k.broker == b {
                    k.position = Some(p as u32);
                }
            }
        }
        let room = count.saturating_mul(MAX_RESOLVED_ADDRESSES);
        Some(Resolution {
            base: book.len() as u32,
            walk: candidates.len(),
            names: candidates.iter().map(|&b| is_name(b)).collect(),
            known,
            learned: Vec::with_capacity(room),
            queued_in: Vec::with_capacity(room),
            room,
        })
    }

    /// How many candidate positions resolution may add (what the tables reserve).
    pub(super) fn room(&self) -> usize {
        self.room
    }
}

/// `answer` in RFC 8305 §4's order: [`FIRST_ADDRESS_FAMILY_COUNT`] of the first address's
/// family, then the families alternately, each family in the resolver's order; then those
/// that `failed` recently moved after the rest (stable).
pub(super) fn rfc8305_order(answer: &[SocketAddr], failed: impl Fn(&SocketAddr) -> bool) -> Answer {
    let Some(first) = answer.first() else { return Answer::new() };
    let preferred = first.is_ipv6();
    let mut ours = answer.iter().filter(|a| a.is_ipv6() == preferred);
    let mut theirs = answer.iter().filter(|a| a.is_ipv6() != preferred);
    let mut out = Answer::new();
    out.extend(ours.by_ref().take(FIRST_ADDRESS_FAMILY_COUNT).copied());
    loop {
        let (a, b) = (theirs.next(), ours.next());
        if a.is_none() && b.is_none() {
            break;
        }
        out.extend(a.into_iter().chain(b).copied());
    }
    let mut ordered: Answer = out.iter().filter(|a| !failed(a)).copied().collect();
    ordered.extend(out.iter().filter(|a| failed(a)).copied());
    ordered
}

impl Command {
    /// The command that starts `attempt` on `broker`: resolve it when it is a name
    /// (`resolve`), connect to it otherwise.
    pub(super) fn start(attempt: AttemptId, broker: BrokerIndex, resolve: bool) -> Command {
        match resolve {
            true => Command::Resolve { attempt, broker },
            false => Command::Connect { attempt, broker },
        }
    }
}

impl Refresh {
    /// The entries this refresh learnt by resolving names, and the index of the first: the
    /// `ip:port` of each new address, numbered from the book's length at construction.
    /// [`crate::BrokerBook::absorb`] takes them into the adapter's book.
    pub fn learned(&self) -> (BrokerIndex, &[BrokerEntry]) {
        match &self.resolution {
            Some(r) => (BrokerIndex(r.base), &r.learned),
            None => (BrokerIndex(u32::MAX), &[]),
        }
    }

    /// Whether `attempt` (of this refresh) was started by [`Command::Resolve`]: it resolves a
    /// name, and has no connection.
    pub fn resolves(&self, attempt: AttemptId) -> bool {
        attempt.epoch() == self.epoch && self.is_resolving(attempt.number())
    }

    /// Candidate positions the pass walks.
    pub(super) fn walk_len(&self) -> usize {
        self.resolution.as_ref().map_or(self.candidates.len(), |r| r.walk)
    }

    /// Whether candidate position `candidate` is a name to resolve.
    pub(super) fn is_name(&self, candidate: usize) -> bool {
        self.resolution.as_ref().is_some_and(|r| r.names.get(candidate).copied().unwrap_or(false))
    }

    /// Whether attempt `n` resolves a name (rather than connects).
    pub(super) fn is_resolving(&self, n: u32) -> bool {
        self.resolution.is_some() && self.attempts.get(n).is_some_and(|s| self.is_name(s.candidate as usize))
    }

    /// The kind of error of attempt `n` ended by the core while it waits (timed out,
    /// cancelled with a detail): a lookup that did not finish, a connection that did not
    /// come up, or a broker that did not answer.
    pub(super) fn pending_kind(&self, n: u32) -> ErrorKind {
        self.timeout_error(n).kind
    }

    /// The error of attempt `n` timing out.
    pub(super) fn timeout_error(&self, n: u32) -> AttemptError {
        AttemptError::timed_out(self.is_resolving(n), self.attempts.is_connected(n))
    }

    /// `Some(Unexpected)` when `input` does not fit attempt `n`'s phase.
    pub(super) fn check_phase(&self, n: u32, input: &Input) -> Option<InputOutcome> {
        let resolving = self.is_resolving(n);
        let fits = match input {
            Input::Resolved { .. } => resolving,
            Input::Connected { .. } | Input::FirstFrame { .. } | Input::Response { .. } => !resolving,
            // A broker checks credentials only after it has answered the handshake.
            Input::Authenticating { .. } | Input::Authenticated { .. } => {
                self.attempts.info(n).first_frame_at.is_some()
            }
            Input::Failed { .. } => true,
        };
        (!fits).then_some(InputOutcome::Unexpected)
    }

    /// The name of attempt `n` resolved to `addresses`: each becomes a candidate next in the
    /// pass, the first starts at once; an empty answer fails the attempt.
    pub(super) fn on_resolved(&mut self, now: Instant, n: u32, addresses: Vec<SocketAddr>) -> InputOutcome {
        let mut answer = Answer::new();
        for a in addresses {
            if answer.len() == MAX_RESOLVED_ADDRESSES {
                break;
            }
            if !answer.contains(&a) {
                answer.push(a);
            }
        }
        if answer.is_empty() {
            self.fail(now, n, AttemptError::with_detail(ErrorKind::Dns, NO_ADDRESSES), None);
            return InputOutcome::Applied;
        }
        let name = self.attempts.info(n).broker;
        let ordered = match &self.resolution {
            Some(r) => rfc8305_order(&answer, |a| r.known.get(a).is_some_and(|k| k.failed)),
            None => answer,
        };
        let stamp = self.pass.number + 1;
        let mut queue: SmallVec<[u32; MAX_RESOLVED_ADDRESSES]> = SmallVec::new();
        for addr in ordered {
            let Some(p) = self.position_for(addr, name) else { continue };
            let Some(r) = self.resolution.as_deref_mut() else { break };
            if let Some(queued) = p.checked_sub(r.walk).and_then(|i| r.queued_in.get_mut(i)) {
                if *queued != stamp {
                    *queued = stamp;
                    queue.push(p as u32);
                }
            }
        }
        self.end_attempt(now, n, AttemptState::Resolved);
        self.stats.resolved += 1;
        self.pass.queue_next(&queue);
        // The first address takes the resolving attempt's place at once.
        self.launch(now, true);
        if self.attempts.in_flight() == 0 && !self.has_candidate() {
            self.end_pass(now);
        } else {
            self.arm_stagger();
        }
        InputOutcome::Applied
    }

    /// The candidate position of `addr` (resolved from the name at `name`): its existing
    /// one, or a new one for a known entry or a newly learnt one; `None` once the refresh
    /// has no room left for new candidates.
    fn position_for(&mut self, addr: SocketAddr, name: BrokerIndex) -> Option<usize> {
        let r = self.resolution.as_deref_mut()?;
        if let Some(p) = r.known.get(&addr).and_then(|k| k.position) {
            return Some(p as usize);
        }
        if r.room == 0 {
            return None;
        }
        if !r.known.contains_key(&addr) {
            let broker = BrokerIndex(r.base.saturating_add(r.learned.len() as u32));
            let entry = BrokerEntry::resolved(addr, name);
            let known =
                Known { broker, address: entry.address.clone(), position: None, failed: false, connected: false };
            r.learned.push(entry);
            r.known.insert(addr, known);
        }
        let k = r.known.get_mut(&addr)?;
        let p = self.candidates.len();
        r.room -= 1;
        k.position = Some(p as u32);
        r.queued_in.push(0);
        self.candidates.push(k.broker);
        self.reused.push(k.connected);
        self.outcomes.push(BrokerFailure {
            broker: k.broker,
            address: k.address.clone(),
            attempts: 0,
            last_error: None,
            cancelled: None,
        });
        self.pass.grow();
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn families_interleave_from_the_first_family_and_recent_failures_go_last() {
        let answer = addrs(&["[::1]:1", "[::2]:1", "[::3]:1", "10.0.0.1:1", "10.0.0.2:1"]);
        let order = rfc8305_order(&answer, |_| false);
        assert_eq!(&order[..], &addrs(&["[::1]:1", "10.0.0.1:1", "[::2]:1", "10.0.0.2:1", "[::3]:1"])[..]);
        let answer = addrs(&["10.0.0.1:1", "10.0.0.2:1", "[::1]:1"]);
        let order = rfc8305_order(&answer, |_| false);
        assert_eq!(&order[..], &addrs(&["10.0.0.1:1", "[::1]:1", "10.0.0.2:1"])[..]);
        let failed: SocketAddr = "10.0.0.1:1".parse().unwrap();
        let order = rfc8305_order(&answer, |a| *a == failed);
        assert_eq!(&order[..], &addrs(&["[::1]:1", "10.0.0.2:1", "10.0.0.1:1"])[..]);
        assert!(rfc8305_order(&[], |_| false).is_empty());
    }
}
