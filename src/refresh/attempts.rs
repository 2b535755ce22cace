//! The attempt table: every attempt of a refresh by number, and the ones still in flight in
//! start order. Sized once at construction; nothing here allocates afterwards.
//!
//! Every attempt has the same timeout, so the oldest attempt in flight is the next to time
//! out: the in-flight list doubles as the timeout queue, and removing an attempt from
//! anywhere in it is O(1), so no input's cost depends on how many attempts have finished.

use alloc::vec::Vec;
use core::time::Duration;

use crate::config::RefreshConfig;
use crate::error::ConfigError;
use crate::time::Instant;

use super::contract::{AttemptInfo, AttemptState};
use super::in_flight::InFlightList;

/// The most attempts one refresh can hold. A pass starts at most two attempts per broker
/// (once, and once more if it was overtaken by a broker that then failed), so a refresh
/// over `b` brokers with `r` retries needs at most `b × (r + 1) × 2`; configurations that
/// could need more are refused when the refresh is built, and the table never grows.
pub const MAX_ATTEMPTS: usize = 1 << 16;

/// One attempt's record: what the public [`AttemptInfo`] says, plus what the policy needs.
#[derive(Clone, Copy, Debug)]
pub(super) struct AttemptSlot {
    /// Its position in the refresh's candidate list.
    pub(super) candidate: u32,
    pub(super) info: AttemptInfo,
    pub(super) timeout_at: Instant,
    /// Scales this attempt's stagger delay: the jitter drawn at launch, in `[1 - jitter, 1]`.
    pub(super) jitter: f64,
    /// Silent attempts superseded before this one started (see
    /// `Refresh::supersede_newest_silent`): what stretches its silent-phase delay.
    pub(super) superseded_before: u32,
    /// Attempt timeouts this attempt has outlived, its connection kept open
    /// (`Refresh::on_attempt_timeout`: a gentle refresh's patience with a connected broker).
    pub(super) outlived: u32,
    /// Where its broker is in checking its credentials.
    pub(super) auth: Auth,
}

/// Where an attempt's broker is in checking its credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Auth {
    /// Not started (no SASL, or not yet).
    NotYet,
    /// [`super::Input::Authenticating`]: the verdict is pending.
    Checking,
    /// [`super::Input::Authenticated`]: accepted.
    Accepted,
}

/// Every attempt so far, and which are in flight.
#[derive(Clone, Debug)]
pub(super) struct AttemptTable {
    slots: Vec<AttemptSlot>,
    /// How many attempts the table was sized for (a clone's `Vec` may hold less spare room).
    pub(super) capacity: usize,
    /// The attempts in flight, oldest (next to time out) first.
    in_flight: InFlightList,
    live: u32,
    /// In-flight attempts whose broker has answered something.
    answering: u32,
    /// In-flight attempts whose broker is checking their credentials.
    authenticating: u32,
}

impl AttemptTable {
    /// A table for up to `capacity` attempts (at most [`MAX_ATTEMPTS`]).
    pub(super) fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.min(MAX_ATTEMPTS);
        AttemptTable {
            slots: Vec::with_capacity(capacity),
            capacity,
            in_flight: InFlightList::with_capacity(capacity),
            live: 0,
            answering: 0,
            authenticating: 0,
        }
    }

    /// Attempts started so far; also the number the next one gets.
    pub(super) fn len(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Whether another attempt would outgrow the table sized at construction.
    pub(super) fn is_full(&self) -> bool {
        self.slots.len() >= self.capacity
    }

    /// Attempts in flight.
    pub(super) fn in_flight(&self) -> u32 {
        self.live
    }

    /// In-flight attempts whose broker has answered.
    pub(super) fn answering(&self) -> u32 {
        self.answering
    }

    /// In-flight attempts whose broker is checking their credentials.
    pub(super) fn authenticating(&self) -> u32 {
        self.authenticating
    }

    pub(super) fn get(&self, n: u32) -> Option<&AttemptSlot> {
        self.slots.get(n as usize)
    }

    pub(super) fn slot(&self, n: u32) -> &AttemptSlot {
        &self.slots[n as usize]
    }

    pub(super) fn info(&self, n: u32) -> &AttemptInfo {
        &self.slots[n as usize].info
    }

    pub(super) fn info_mut(&mut self, n: u32) -> &mut AttemptInfo {
        &mut self.slots[n as usize].info
    }

    /// Every attempt, in start order.
    pub(super) fn all(&self) -> &[AttemptSlot] {
        &self.slots
    }

    /// Attempt `n`, if it is in flight.
    pub(super) fn live(&self, n: u32) -> Option<u32> {
        let slot = self.slots.get(n as usize)?;
        (slot.info.state == AttemptState::InFlight).then_some(n)
    }

    /// Records a new attempt in flight; returns its number.
    pub(super) fn start(&mut self, slot: AttemptSlot) -> u32 {
        let n = self.len();
        self.slots.push(slot);
        self.in_flight.push_back(n);
        self.live += 1;
        n
    }

    /// Notes that attempt `n`'s broker answered; returns false if it had already.
    pub(super) fn mark_answered(&mut self, n: u32, now: Instant) -> bool {
        let info = &mut self.slots[n as usize].info;
        if info.first_frame_at.is_some() {
            return false;
        }
        info.first_frame_at = Some(now);
        info.connected_at.get_or_insert(now);
        self.answering += 1;
        true
    }

    /// Moves attempt `n`'s credential check from `from` to `to`; returns false, changing
    /// nothing, if it was not at `from`.
    pub(super) fn move_auth(&mut self, n: u32, from: Auth, to: Auth) -> bool {
        let slot = &mut self.slots[n as usize];
        if slot.auth != from {
            return false;
        }
        slot.auth = to;
        match (from, to) {
            (_, Auth::Checking) => self.authenticating += 1,
            (Auth::Checking, _) => self.authenticating -= 1,
            _ => {}
        }
        true
    }

    /// Ends attempt `n` in `state` at `now`; returns whether it was in flight.
    pub(super) fn end(&mut self, n: u32, state: AttemptState, now: Instant) -> bool {
        let slot = &mut self.slots[n as usize];
        if slot.info.state != AttemptState::InFlight {
            return false;
        }
        self.in_flight.remove(n);
        slot.info.state = state;
        slot.info.ended_at = Some(now);
        self.live -= 1;
        if slot.info.first_frame_at.is_some() {
            self.answering -= 1;
        }
        if slot.auth == Auth::Checking {
            self.authenticating -= 1;
        }
        true
    }

    /// Gives in-flight attempt `n` until `timeout_at` (no earlier than any other in-flight
    /// attempt's): it moves behind them, so the oldest attempt still times out first.
    pub(super) fn outlive(&mut self, n: u32, timeout_at: Instant) {
        let slot = &mut self.slots[n as usize];
        slot.timeout_at = timeout_at;
        slot.outlived = slot.outlived.saturating_add(1);
        self.in_flight.move_to_back(n);
    }

    /// The oldest attempt in flight: the next to time out.
    pub(super) fn oldest(&self) -> Option<u32> {
        self.in_flight.front()
    }

    /// When the oldest attempt in flight times out.
    pub(super) fn next_timeout(&self) -> Option<Instant> {
        self.oldest().map(|n| self.slots[n as usize].timeout_at)
    }

    /// The attempt in flight started after `n`.
    pub(super) fn next_of(&self, n: u32) -> Option<u32> {
        self.in_flight.next_of(n)
    }

    /// The attempts in flight, oldest first (reverse it for newest first).
    pub(super) fn in_flight_iter(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.in_flight.iter()
    }

    /// Whether attempt `n`'s connection came up (what its timing out means: a connect that
    /// never completed, or a broker that never answered).
    pub(super) fn is_connected(&self, n: u32) -> bool {
        self.slots[n as usize].info.connected_at.is_some()
    }

    /// The shortest start → first answer among answering attempts: what an answer takes on
    /// this cluster when nothing better is known.
    pub(super) fn first_answer_time(&self) -> Duration {
        self.in_flight
            .iter()
            .filter_map(|n| {
                let info = &self.slots[n as usize].info;
                let answered = info.first_frame_at?;
                Some(answered.saturating_since(info.started_at))
            })
            .min()
            .unwrap_or(Duration::ZERO)
    }
}

/// Passes a refresh may make over its brokers: the first and each retry.
pub(super) fn passes(config: &RefreshConfig) -> usize {
    config.retry.retries as usize + 1
}

/// How many attempts a refresh over `brokers` brokers may need (see [`MAX_ATTEMPTS`]), or
/// the field to change when that is more than a refresh holds.
pub(crate) fn attempt_capacity(config: &RefreshConfig, brokers: usize) -> Result<usize, ConfigError> {
    let per_pass = brokers.saturating_mul(2);
    if per_pass > MAX_ATTEMPTS {
        return Err(ConfigError::new(
            "seeds",
            alloc::format!("lists {brokers} brokers; a refresh tries at most {}", MAX_ATTEMPTS / 2),
        ));
    }
    let passes = passes(config);
    if per_pass.saturating_mul(passes) > MAX_ATTEMPTS {
        let most = MAX_ATTEMPTS / per_pass.max(1) - 1;
        return Err(ConfigError::new(
            "retry.retries",
            alloc::format!(
                "must be at most {most} for {brokers} brokers: each pass may start two attempts per broker, and a refresh holds at most {MAX_ATTEMPTS}"
            ),
        ));
    }
    Ok(per_pass * passes)
}
