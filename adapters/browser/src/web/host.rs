//! The session's host in the browser: carries out its actions (a WebSocket per dial, bytes
//! sent as binary messages, closes, nonces from `crypto.getRandomValues`) and reports what
//! the sockets and the clock did. It decides nothing and speaks no Kafka: the [`Session`]
//! does both.
//!
//! Time is `performance.now()`, counted in µs from the host's start; one `setTimeout` is
//! kept armed for [`Session::poll_timeout`]. The sockets' handlers are the driver's four
//! [`Hooks`], bound to each connection's id, so a socket costs no closure of its own.

use js_sys::{ArrayBuffer, Function, Uint8Array};
use stagger::session::{Action, CloseKind, ConnId, Event, Session};
use stagger::{AttemptError, ErrorKind, Instant, RefreshError};
use wasm_bindgen::prelude::*;
use web_sys::{BinaryType, CloseEvent, WebSocket};

use super::convert::message;
use crate::options::Seeds;

#[wasm_bindgen]
extern "C" {
    /// `performance.now()`: monotonic milliseconds, in windows, workers and Node alike.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
    /// The global `setTimeout` (returns a number in browsers, an object in Node).
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &Function, millis: i32) -> JsValue;
    /// The global `clearTimeout`.
    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(handle: &JsValue);
    /// `crypto.getRandomValues`: the SCRAM nonces' randomness, and a refresh's own PRNG seed.
    #[wasm_bindgen(js_namespace = crypto, js_name = getRandomValues, catch)]
    pub(crate) fn get_random_values(bytes: &mut [u8]) -> Result<JsValue, JsValue>;
}

/// The driver's entry points for what happens outside: a socket opened (`open(conn)`), a
/// message (`message(conn, event)`), a close (`close(conn, event)`), the timer (`timer()`).
pub(crate) struct Hooks {
    pub(crate) open: Function,
    pub(crate) message: Function,
    pub(crate) close: Function,
    pub(crate) timer: Function,
}

/// How the refresh ended, as the session announced it.
pub(crate) enum Done {
    Refreshed,
    Failed(RefreshError),
}

/// One connection's WebSocket, and whether it has opened.
struct Socket {
    conn: ConnId,
    ws: WebSocket,
    open: bool,
}

impl Socket {
    /// Detaches every handler (nothing more arrives for it) and closes.
    fn close(&self) {
        self.ws.set_onopen(None);
        self.ws.set_onmessage(None);
        self.ws.set_onclose(None);
        // close() without a code never throws; closing a closed socket does nothing.
        let _ = self.ws.close();
    }
}

pub(crate) struct Host {
    pub(crate) session: Session,
    seeds: Seeds,
    hooks: Hooks,
    /// `performance.now()` when the host started: instants are µs since then.
    origin_ms: f64,
    sockets: Vec<Socket>,
    /// The armed `setTimeout` and the instant it is for.
    timer: Option<(JsValue, Instant)>,
    done: Option<Done>,
}

impl Host {
    /// A host for `session`, whose clock started at `origin_ms` (`performance.now()`).
    pub(crate) fn new(session: Session, seeds: Seeds, hooks: Hooks, origin_ms: f64) -> Host {
        Host { session, seeds, hooks, origin_ms, sockets: Vec::new(), timer: None, done: None }
    }

    /// `performance.now()` at the start of a host's clock.
    pub(crate) fn origin() -> f64 {
        performance_now()
    }

    /// Now, in µs since the host started.
    pub(crate) fn now(&self) -> Instant {
        let elapsed_ms = (performance_now() - self.origin_ms).max(0.0);
        Instant::from_micros((elapsed_ms * 1000.0) as u64)
    }

    /// Asks the session for the refresh and carries out what follows.
    pub(crate) fn request(&mut self) {
        self.session.request_refresh(self.now());
        self.carry_out();
    }

    /// The bridges' URLs, by broker.
    pub(crate) fn seeds(&self) -> &Seeds {
        &self.seeds
    }

    /// How the refresh ended, once it has.
    pub(crate) fn take_done(&mut self) -> Option<Done> {
        self.done.take()
    }

    // ---- what happened --------------------------------------------------------------

    /// `conn`'s WebSocket opened: the bridge reached the broker.
    pub(crate) fn opened(&mut self, conn: ConnId) {
        if let Some(socket) = self.sockets.iter_mut().find(|s| s.conn == conn) {
            socket.open = true;
            self.feed(Event::Connected { conn });
        }
    }

    /// A message on `conn`: Kafka bytes, which bridges send as binary messages.
    pub(crate) fn message(&mut self, conn: ConnId, data: JsValue) {
        match data.dyn_ref::<ArrayBuffer>() {
            Some(buffer) => {
                let bytes = Uint8Array::new(buffer).to_vec();
                self.session.handle_event(self.now(), Event::Received { conn, bytes: &bytes });
                self.carry_out();
            }
            None => {
                let detail = "the bridge sent a text message; Kafka bytes must come as binary messages";
                self.fail(conn, AttemptError::with_detail(ErrorKind::Protocol, detail));
            }
        }
    }

    /// `conn`'s WebSocket closed: refused before it opened (the bridge, or whatever listens
    /// there, said no), or ended by the bridge afterwards (cleanly, or with a code saying why).
    pub(crate) fn closed(&mut self, conn: ConnId, event: &CloseEvent) {
        let Some(socket) = self.sockets.iter().find(|s| s.conn == conn) else { return };
        let how = match (event.code(), event.reason()) {
            (code, reason) if reason.is_empty() => format!("WebSocket close code {code}"),
            (code, reason) => format!("WebSocket close code {code}: {reason}"),
        };
        if !socket.open {
            let url = socket.ws.url();
            let detail = format!("{url} failed before opening ({how})");
            return self.fail(conn, AttemptError::with_detail(ErrorKind::Refused, detail));
        }
        if event.code() == 1000 {
            self.forget(conn);
            return self.feed(Event::Closed { conn, how: CloseKind::Clean });
        }
        let detail = format!("the bridge closed the connection ({how})");
        self.fail(conn, AttemptError::with_detail(ErrorKind::Closed, detail));
    }

    /// The timer fired: the session fires what is due.
    pub(crate) fn timer(&mut self) {
        self.timer = None;
        self.session.handle_timeout(self.now());
        self.carry_out();
    }

    /// Closes every socket and the timer (the refresh ended, or was aborted).
    pub(crate) fn close_all(&mut self) {
        for socket in self.sockets.drain(..) {
            socket.close();
        }
        if let Some((handle, _)) = self.timer.take() {
            clear_timeout(&handle);
        }
    }

    /// `conn` failed on the host's side: its socket goes, and the session hears why.
    fn fail(&mut self, conn: ConnId, error: AttemptError) {
        self.forget(conn);
        self.feed(Event::IoError { conn, error });
    }

    fn feed(&mut self, event: Event<'_>) {
        self.session.handle_event(self.now(), event);
        self.carry_out();
    }

    fn forget(&mut self, conn: ConnId) {
        if let Some(i) = self.sockets.iter().position(|s| s.conn == conn) {
            self.sockets.swap_remove(i).close();
        }
    }

    // ---- what the session asks ------------------------------------------------------

    /// Carries out the session's actions, feeds what that produces at once (a nonce, a
    /// socket that could not even be created), and re-arms the timer.
    fn carry_out(&mut self) {
        let mut immediate = Vec::new();
        loop {
            while let Some(action) = self.session.poll_action() {
                self.act(action, &mut immediate);
            }
            if immediate.is_empty() {
                break;
            }
            let now = self.now();
            for event in immediate.drain(..) {
                self.session.handle_event(now, event);
            }
        }
        self.arm_timer();
    }

    fn act(&mut self, action: Action, immediate: &mut Vec<Event<'static>>) {
        match action {
            Action::Dial { conn, address, .. } => {
                if let Err(error) = self.dial(conn, &address) {
                    immediate.push(Event::IoError { conn, error });
                }
            }
            Action::Send { conn, bytes } => {
                let Some(socket) = self.sockets.iter().find(|s| s.conn == conn) else { return };
                if let Err(thrown) = socket.ws.send_with_u8_array(&bytes) {
                    let detail = format!("WebSocket send failed: {}", message(&thrown));
                    self.forget(conn);
                    immediate.push(Event::IoError { conn, error: AttemptError::with_detail(ErrorKind::Io, detail) });
                }
            }
            Action::Close { conn } => self.forget(conn),
            Action::NeedNonce { conn } => {
                let mut bytes = stagger::kafka::sasl::Nonce::default();
                immediate.push(match get_random_values(&mut bytes) {
                    Ok(_) => Event::Nonce { conn, bytes },
                    Err(thrown) => {
                        self.forget(conn);
                        let detail = format!("no SCRAM nonce: crypto.getRandomValues failed: {}", message(&thrown));
                        Event::IoError { conn, error: AttemptError::with_detail(ErrorKind::Io, detail) }
                    }
                });
            }
            // The token (a string, or what the `token` function returned as the refresh
            // started) is in the session's exchange settings: it never asks for one.
            Action::NeedToken { conn } => immediate.push(Event::Token { conn, token: Err("no token source".into()) }),
            // The seeds are bridge URLs, never names to resolve (the bridge resolves the
            // broker's name): should a lookup be asked for, it fails.
            Action::Resolve { lookup, .. } => {
                let error = AttemptError::with_detail(ErrorKind::Dns, "the browser adapter resolves no names");
                immediate.push(Event::Resolved { lookup, result: Err(error) });
            }
            Action::Refreshed { .. } => self.done = Some(Done::Refreshed),
            Action::RefreshFailed { error, .. } => self.done = Some(Done::Failed(error)),
            Action::Rebootstrapped => {}
        }
    }

    /// Opens a WebSocket to the bridge at `address`, its handlers bound to `conn`.
    fn dial(&mut self, conn: ConnId, address: &str) -> Result<(), AttemptError> {
        let url = self.seeds.url_of(address).unwrap_or(address);
        let ws = WebSocket::new(url).map_err(|thrown| {
            // Mixed content, a blocked port, no WebSocket at all: fails before any I/O.
            let detail = format!("cannot open a WebSocket to {url}: {}", message(&thrown));
            AttemptError::with_detail(ErrorKind::Io, detail)
        })?;
        ws.set_binary_type(BinaryType::Arraybuffer);
        let id = JsValue::from(conn.0 as f64);
        let bound = |hook: &Function| -> Function { hook.bind1(&JsValue::NULL, &id).unchecked_into() };
        ws.set_onopen(Some(&bound(&self.hooks.open)));
        ws.set_onmessage(Some(&bound(&self.hooks.message)));
        // `error` is always followed by `close`, which carries the code: handled there.
        ws.set_onclose(Some(&bound(&self.hooks.close)));
        self.sockets.push(Socket { conn, ws, open: false });
        Ok(())
    }

    /// Keeps exactly one `setTimeout` armed for the session's next timer.
    fn arm_timer(&mut self) {
        let due = self.session.poll_timeout();
        if matches!((&self.timer, due), (Some((_, armed)), Some(due)) if *armed == due) {
            return;
        }
        if let Some((handle, _)) = self.timer.take() {
            clear_timeout(&handle);
        }
        if let Some(due) = due {
            let wait_us = due.as_micros().saturating_sub(self.now().as_micros());
            let wait_ms = wait_us.div_ceil(1000).min(i32::MAX as u64) as i32;
            self.timer = Some((set_timeout(&self.hooks.timer, wait_ms), due));
        }
    }
}
