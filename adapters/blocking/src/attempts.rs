//! The attempts of one loop and the poll they share: start, reuse, cancel, and wait for
//! whichever comes first — a socket ready, a lookup answered, another thread's wake-up, or
//! the core's next timer.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use mio::{Events, Interest, Poll, Token, Waker};
use stagger::{AttemptError, AttemptId, BrokerIdentity, ErrorKind, Input};

use crate::attempt::{Attempt, Context, Step};
use crate::resolve::{self, Resolved};
use crate::transport::Transport;

/// Bytes read from a socket at a time; the exchange reassembles frames of any size.
const READ_BUFFER: usize = 64 * 1024;
/// Wakes the loop: a lookup answered, or (for a client) a caller asked something.
const WAKE: Token = Token(0);
/// The connection kept between a client's refreshes.
const KEPT: Token = Token(1);
/// Attempts' tokens start here.
const FIRST: usize = 2;

/// The attempts in flight, each cancellable on its own, and their inputs for the core.
#[derive(Debug)]
pub(crate) struct Attempts {
    ctx: Context,
    poll: Poll,
    events: Events,
    waker: Arc<Waker>,
    lookups: (Sender<Resolved>, Receiver<Resolved>),
    live: HashMap<AttemptId, Attempt>,
    /// Attempts that only resolve a name (`Command::Resolve`), until their lookup answers.
    resolving: HashSet<AttemptId>,
    tokens: HashMap<Token, AttemptId>,
    next_token: usize,
    inputs: VecDeque<Input>,
    /// Connections that answered, until their owner says whether to keep them.
    answers: HashMap<AttemptId, (Transport, Option<i16>)>,
    /// The connection kept between refreshes, watched for the broker closing it.
    kept: Option<Transport>,
    kept_stirred: bool,
    woken: bool,
    buf: Vec<u8>,
}

impl Attempts {
    /// An empty set with a poll of its own.
    pub(crate) fn new(ctx: Context) -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
        Ok(Attempts {
            ctx,
            poll,
            events: Events::with_capacity(64),
            waker,
            lookups: mpsc::channel(),
            live: HashMap::new(),
            resolving: HashSet::new(),
            tokens: HashMap::new(),
            next_token: FIRST,
            inputs: VecDeque::new(),
            answers: HashMap::new(),
            kept: None,
            kept_stirred: false,
            woken: false,
            buf: vec![0; READ_BUFFER],
        })
    }

    /// Wakes the loop from another thread.
    pub(crate) fn waker(&self) -> Arc<Waker> {
        self.waker.clone()
    }

    /// Starts `attempt`: look `address` up (on a helper thread unless it is an IP literal),
    /// then connect. With `expected` (a discovered broker's identity) the exchange asks the
    /// broker to confirm it (ApiVersions v5, KIP-1242).
    /// `tls_name` is the `host:port` of the name `address` was resolved from, if it was: TLS
    /// verifies the broker against that name.
    pub(crate) fn connect(
        &mut self,
        attempt: AttemptId,
        address: Arc<str>,
        tls_name: Option<Arc<str>>,
        expected: Option<BrokerIdentity>,
    ) {
        let token = self.token(attempt);
        let mut entry = Attempt::new(attempt, token, address.clone(), expected).with_tls_name(tls_name);
        match resolve::literal(&address) {
            Some(addrs) => {
                let mut step = Step::default();
                entry.resolved(Ok(addrs), self.poll.registry(), &mut step);
                self.settle(attempt, entry, step);
            }
            None => {
                resolve::spawn(attempt, address, self.lookups.0.clone(), self.waker.clone());
                self.live.insert(attempt, entry);
            }
        }
    }

    /// Starts `attempt` as a lookup of `name` only (`Command::Resolve`): on a helper thread
    /// with `std`'s resolver (`getaddrinfo`), whose server and timeouts are the system's;
    /// the answer becomes `Input::Resolved`, or `Input::Failed` with kind `Dns`. A lookup
    /// cannot be interrupted: a cancelled one finishes on its own and its answer is dropped,
    /// and one that never ends is bounded by the core's attempt timeout.
    pub(crate) fn resolve(&mut self, attempt: AttemptId, name: Arc<str>) {
        self.resolving.insert(attempt);
        resolve::spawn(attempt, name, self.lookups.0.clone(), self.waker.clone());
    }

    /// Starts `attempt` on a connection kept from an earlier refresh.
    pub(crate) fn reuse(&mut self, attempt: AttemptId, address: Arc<str>, transport: Transport) {
        let token = self.token(attempt);
        let mut entry = Attempt::new(attempt, token, address, None);
        let step = entry.reuse(&self.ctx, transport, self.poll.registry(), &mut self.buf);
        self.settle(attempt, entry, step);
    }

    /// Ends `attempt` at once as failed (kind `Io`, with `detail`): for a command this
    /// adapter cannot carry out, reported like any failure.
    pub(crate) fn fail(&mut self, attempt: AttemptId, detail: &'static str) {
        let error = AttemptError::with_detail(ErrorKind::Io, detail);
        self.inputs.push_back(Input::Failed { attempt, error });
    }

    /// Abandons `attempt` and closes its connection now.
    pub(crate) fn cancel(&mut self, attempt: AttemptId) {
        self.resolving.remove(&attempt);
        if let Some(entry) = self.live.remove(&attempt) {
            self.tokens.remove(&entry.token());
            entry.close(self.poll.registry());
        }
        self.answers.remove(&attempt);
        self.inputs.retain(|input| input.attempt() != attempt);
    }

    /// Abandons every attempt and closes every connection now (a kept one stays).
    pub(crate) fn clear(&mut self) {
        for (_, entry) in self.live.drain() {
            entry.close(self.poll.registry());
        }
        self.tokens.clear();
        self.resolving.clear();
        self.answers.clear();
        self.inputs.clear();
    }

    /// The connection `attempt` answered on, and the Metadata version it used.
    pub(crate) fn take_answer(&mut self, attempt: AttemptId) -> Option<(Transport, Option<i16>)> {
        self.answers.remove(&attempt)
    }

    /// Closes the connection `attempt` answered on, unless it was taken.
    pub(crate) fn drop_answer(&mut self, attempt: AttemptId) {
        self.answers.remove(&attempt);
    }

    /// Keeps `transport` between refreshes, watched: [`Attempts::kept_stirred`] tells when
    /// the broker closes it (or writes to it unasked). Replaces (closes) any kept before.
    pub(crate) fn keep(&mut self, mut transport: Transport) {
        self.unkeep();
        self.kept_stirred = self.poll.registry().register(transport.socket(), KEPT, Interest::READABLE).is_err();
        self.kept = Some(transport);
    }

    /// Takes the kept connection back (for an attempt, or to close it).
    pub(crate) fn unkeep(&mut self) -> Option<Transport> {
        let mut transport = self.kept.take()?;
        let _ = self.poll.registry().deregister(transport.socket());
        self.kept_stirred = false;
        Some(transport)
    }

    /// Whether the kept connection has stirred since it was kept: an idle broker connection
    /// that becomes readable was closed or misbehaves, either way it is no longer fit.
    pub(crate) fn kept_stirred(&self) -> bool {
        self.kept.is_some() && self.kept_stirred
    }

    /// Whether another thread woke the loop since the last call (then clears it).
    pub(crate) fn take_woken(&mut self) -> bool {
        std::mem::take(&mut self.woken)
    }

    /// The next input for the core, if any. Call [`Attempts::wait`] when there is none.
    pub(crate) fn poll_input(&mut self) -> Option<Input> {
        self.inputs.pop_front()
    }

    /// Waits until something happens or `until` passes (forever for `None`); at once if
    /// inputs are already waiting. Interrupted waits return early, which only costs a loop.
    pub(crate) fn wait(&mut self, until: Option<std::time::Instant>) -> io::Result<()> {
        let timeout = match until {
            _ if !self.inputs.is_empty() => Some(Duration::ZERO),
            Some(at) => Some(at.saturating_duration_since(std::time::Instant::now())),
            None => None,
        };
        match self.poll.poll(&mut self.events, timeout) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            other => other?,
        }
        let ready: Vec<Token> = self.events.iter().map(|e| e.token()).collect();
        for token in ready {
            match token {
                WAKE => self.woken = true,
                KEPT => self.kept_stirred = true,
                token => {
                    let Some(&attempt) = self.tokens.get(&token) else { continue };
                    let Some(mut entry) = self.live.remove(&attempt) else { continue };
                    let step = entry.ready(&self.ctx, self.poll.registry(), &mut self.buf);
                    self.settle(attempt, entry, step);
                }
            }
        }
        while let Ok((attempt, result)) = self.lookups.1.try_recv() {
            if self.resolving.remove(&attempt) {
                self.inputs.push_back(match result {
                    Ok(addresses) => Input::Resolved { attempt, addresses },
                    Err(e) => {
                        Input::Failed { attempt, error: AttemptError::with_detail(ErrorKind::Dns, e.to_string()) }
                    }
                });
                continue;
            }
            // A cancelled attempt's lookup: nobody waits for it.
            let Some(mut entry) = self.live.remove(&attempt) else { continue };
            let mut step = Step::default();
            entry.resolved(result, self.poll.registry(), &mut step);
            self.settle(attempt, entry, step);
        }
        Ok(())
    }

    /// Files what a step produced and puts the attempt back, unless it is over.
    fn settle(&mut self, attempt: AttemptId, entry: Attempt, step: Step) {
        self.inputs.extend(step.inputs);
        if let Some(answer) = step.answer {
            self.answers.insert(attempt, answer);
        }
        if entry.is_over() {
            self.tokens.remove(&entry.token());
        } else {
            self.live.insert(attempt, entry);
        }
    }

    fn token(&mut self, attempt: AttemptId) -> Token {
        let token = Token(self.next_token);
        self.next_token += 1;
        self.tokens.insert(token, attempt);
        token
    }
}

impl Drop for Attempts {
    fn drop(&mut self) {
        self.clear();
    }
}
