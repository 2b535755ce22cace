//! One refresh in the browser: the core's contract, carried out with WebSockets and timers.
//!
//! Everything happens on the page's event loop. Each JS callback (socket opened, message,
//! socket closed, timer, abort) enters through [`step`], which borrows the driver, feeds the
//! core, drains its commands and carries them out (open or close sockets, settle the
//! promise), re-arms the one `setTimeout` to the core's `poll_timeout()`, and only then —
//! with the borrow released — calls the user's `onEvent` and settles the promise. So user
//! code never runs while the driver is borrowed, and may call anything (even abort) from
//! `onEvent`.
//!
//! Nothing here decides anything: the stagger, timeouts, retries and the deadline are the
//! core's timers, and the Kafka conversation — its bytes and what the core hears of it — is
//! the core's `KafkaAttempt`.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::{Rc, Weak};

use js_sys::{ArrayBuffer, Function, Uint8Array};
use stagger::kafka::{ExchangeConfig, KafkaAttempt};
use stagger::{AttemptError, AttemptId, BrokerIndex, Command, ErrorKind, Input, Instant, Refresh, RefreshConfig};
use wasm_bindgen::closure::{Closure, WasmClosure};
use wasm_bindgen::prelude::*;
use web_sys::{AbortSignal, BinaryType, CloseEvent, MessageEvent, WebSocket};

use super::convert::{abort_error, message, refresh_error, to_js};
use crate::events::{millis, BrokerLane, WebEvent};
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
}

thread_local! {
    /// Refreshes in progress. The driver's callbacks only hold weak references, so this is
    /// what keeps a running refresh alive; it lets go when the refresh settles.
    static RUNNING: RefCell<Vec<Rc<RefCell<Driver>>>> = const { RefCell::new(Vec::new()) };
}

/// Everything `refresh()` was asked for, already checked.
pub(crate) struct Plan {
    pub config: RefreshConfig,
    pub seeds: Seeds,
    pub exchange: ExchangeConfig,
    pub on_event: Option<Function>,
    pub signal: Option<AbortSignal>,
}

/// Starts a refresh that settles `resolve`/`reject`. Events start flowing synchronously.
pub(crate) fn start(plan: Plan, resolve: Function, reject: Function) -> Result<(), JsValue> {
    if let Some(signal) = plan.signal.as_ref().filter(|s| s.aborted()) {
        return Err(abort_error(signal));
    }
    let core =
        Refresh::new(&plan.config, &plan.seeds.book, Instant::ZERO).map_err(|e| super::convert::config_error(&e))?;
    let origin_ms = performance_now();
    let driver = Rc::new_cyclic(|me: &Weak<RefCell<Driver>>| {
        let weak = me.clone();
        let on_timer = callback(Closure::<dyn FnMut()>::new(move || step(&weak, Driver::on_timer)));
        let abort_listener = plan.signal.map(|signal| {
            let weak = me.clone();
            let listener = callback(Closure::<dyn FnMut()>::new(move || step(&weak, Driver::on_abort)));
            let _ = signal.add_event_listener_with_callback("abort", &listener);
            (signal, listener)
        });
        RefCell::new(Driver {
            core,
            seeds: plan.seeds,
            exchange: plan.exchange,
            origin_ms,
            at: Instant::ZERO,
            sockets: Vec::new(),
            pending: VecDeque::new(),
            timer: None,
            on_timer,
            on_event: plan.on_event,
            abort_listener,
            outbox: Vec::new(),
            settle: None,
            resolve,
            reject,
            finished: false,
            me: me.clone(),
        })
    });
    RUNNING.with(|running| running.borrow_mut().push(driver.clone()));
    let weak = Rc::downgrade(&driver);
    step(&weak, |d| {
        if d.on_event.is_some() {
            let brokers = d
                .seeds
                .book
                .iter()
                .map(|(index, entry)| BrokerLane { index, address: &entry.address, url: d.seeds.url(index) })
                .collect();
            let config = *d.core.config();
            let start =
                WebEvent::Start { at: Instant::ZERO, at_ms: 0.0, config: &config, book: &d.seeds.book, brokers };
            d.outbox.push(to_js(&start));
        }
    });
    Ok(())
}

/// Hands a Rust closure to JS for good: it is freed when JS no longer references it, so a
/// callback may safely outlive (or end) the refresh it belongs to.
fn callback<T: ?Sized + WasmClosure>(closure: Closure<T>) -> Function {
    closure.into_js_value().unchecked_into()
}

/// Runs one callback's work on the driver, then — borrow released — delivers the events
/// and settles the promise if the refresh just ended.
fn step(weak: &Weak<RefCell<Driver>>, work: impl FnOnce(&mut Driver)) {
    let Some(driver) = weak.upgrade() else { return };
    let (events, on_event, settle) = {
        // Never fails: no JS that could call back into the driver runs while it is borrowed.
        let Ok(mut d) = driver.try_borrow_mut() else { return };
        if d.finished {
            return;
        }
        work(&mut d);
        d.pump();
        (std::mem::take(&mut d.outbox), d.on_event.clone(), d.settle.take())
    };
    if let Some(on_event) = on_event {
        for event in events {
            // A throwing listener must not break the refresh.
            let _ = on_event.call1(&JsValue::UNDEFINED, &event);
        }
    }
    if let Some((function, value)) = settle {
        let _ = function.call1(&JsValue::UNDEFINED, &value);
    }
}

/// One attempt's WebSocket.
struct Socket {
    attempt: AttemptId,
    broker: BrokerIndex,
    ws: WebSocket,
    /// The Kafka conversation, from `open` on.
    kafka: Option<KafkaAttempt>,
}

impl Socket {
    /// Detaches every handler (nothing more arrives for this attempt) and closes.
    fn close(&self) {
        self.ws.set_onopen(None);
        self.ws.set_onmessage(None);
        self.ws.set_onerror(None);
        self.ws.set_onclose(None);
        // close() without a code never throws; closing a closed socket does nothing.
        let _ = self.ws.close();
    }
}

/// The state of one refresh in the browser.
struct Driver {
    core: Refresh,
    seeds: Seeds,
    exchange: ExchangeConfig,
    /// `performance.now()` when the refresh started: instants are µs since then.
    origin_ms: f64,
    /// The time of the call being handled (stamps the commands it produces).
    at: Instant,
    sockets: Vec<Socket>,
    /// Inputs produced while carrying out commands (a WebSocket that could not even be
    /// created), fed once the current commands are drained.
    pending: VecDeque<Input>,
    /// The armed `setTimeout` and the core's instant it is for.
    timer: Option<(JsValue, Instant)>,
    on_timer: Function,
    on_event: Option<Function>,
    abort_listener: Option<(AbortSignal, Function)>,
    /// Events to deliver once the borrow is released.
    outbox: Vec<JsValue>,
    /// `resolve` or `reject`, and its value, once the refresh ended.
    settle: Option<(Function, JsValue)>,
    resolve: Function,
    reject: Function,
    finished: bool,
    me: Weak<RefCell<Driver>>,
}

impl Driver {
    /// Now, in µs since the refresh started.
    fn clock(&self) -> Instant {
        let elapsed_ms = (performance_now() - self.origin_ms).max(0.0);
        Instant::from_micros((elapsed_ms * 1000.0) as u64)
    }

    // ---- inputs ---------------------------------------------------------------------

    fn on_timer(&mut self) {
        self.timer = None;
        let now = self.clock();
        self.at = now;
        if self.on_event.is_some() {
            let timer = self.core.next_timer().filter(|(due, _)| *due <= now).map(|(_, kind)| kind);
            self.emit(&WebEvent::Timeout { at: now, at_ms: millis(now), timer });
        }
        self.core.handle_timeout(now);
    }

    fn on_open(&mut self, attempt: AttemptId) {
        let Some(i) = self.socket(attempt) else { return };
        // The bridge carries the broker's own bytes: a TLS broker behind it is worth naming.
        let mut kafka = KafkaAttempt::new(attempt, &self.exchange, None, true);
        let mut nonce = [0; 18];
        if getrandom::getrandom(&mut nonce).is_ok() {
            // The browser's `crypto.getRandomValues`; else the core's attempt-seeded nonce.
            kafka = kafka.with_sasl_nonce(&nonce);
        }
        kafka.handle_connected();
        send(&self.sockets[i].ws, &mut kafka);
        self.sockets[i].kafka = Some(kafka);
        self.drain(attempt);
    }

    fn on_message(&mut self, attempt: AttemptId, data: JsValue) {
        let Some(i) = self.socket(attempt) else { return };
        let socket = &mut self.sockets[i];
        let Some(kafka) = socket.kafka.as_mut() else { return };
        match data.dyn_ref::<ArrayBuffer>() {
            Some(buffer) => {
                kafka.handle_bytes(&Uint8Array::new(buffer).to_vec());
                send(&socket.ws, kafka);
            }
            None => kafka.handle_error(AttemptError::with_detail(
                ErrorKind::Protocol,
                "the bridge sent a text message; Kafka bytes must come as binary messages",
            )),
        }
        self.drain(attempt);
    }

    fn on_close(&mut self, attempt: AttemptId, event: CloseEvent) {
        let Some(i) = self.socket(attempt) else { return };
        let socket = self.sockets.swap_remove(i);
        socket.close();
        let url = self.seeds.url(socket.broker);
        let how = match (event.code(), event.reason()) {
            (code, reason) if reason.is_empty() => format!("WebSocket close code {code}"),
            (code, reason) => format!("WebSocket close code {code}: {reason}"),
        };
        let Some(mut kafka) = socket.kafka else {
            // Never opened: the bridge (or whatever listens there) refused us.
            let error = AttemptError::with_detail(ErrorKind::Refused, format!("{url} failed before opening ({how})"));
            self.feed(Input::Failed { attempt, error });
            return;
        };
        kafka.handle_closed();
        while let Some(input) = kafka.poll_input() {
            let input = match input {
                Input::Failed { attempt, error } => {
                    let detail = format!("{} ({how})", error.detail);
                    Input::Failed { attempt, error: AttemptError::with_detail(error.kind, detail) }
                }
                other => other,
            };
            self.feed(input);
        }
    }

    /// Feeds the core what the attempt's conversation has for it; an attempt that ended
    /// closes its socket first (the browser keeps no connection for later).
    fn drain(&mut self, attempt: AttemptId) {
        while let Some(input) =
            self.socket(attempt).and_then(|i| self.sockets[i].kafka.as_mut()).and_then(KafkaAttempt::poll_input)
        {
            if matches!(input, Input::Response { .. } | Input::Failed { .. }) {
                self.close_socket(attempt);
            }
            self.feed(input);
        }
    }

    fn on_abort(&mut self) {
        let now = self.clock();
        let closed: Vec<AttemptId> = self.sockets.iter().map(|s| s.attempt).collect();
        self.close_all();
        if self.on_event.is_some() {
            self.emit(&WebEvent::Abort { at: now, at_ms: millis(now), closed });
        }
        let reason = match &self.abort_listener {
            Some((signal, _)) => abort_error(signal),
            None => JsValue::UNDEFINED,
        };
        self.finish(false, reason);
    }

    /// Feeds one input to the core, stamped with the current time.
    fn feed(&mut self, input: Input) {
        let now = self.clock();
        self.at = now;
        if self.on_event.is_some() {
            self.emit(&WebEvent::Input { at: now, at_ms: millis(now), input: &input });
        }
        self.core.handle_input(now, input);
    }

    // ---- commands -------------------------------------------------------------------

    /// Drains the core, carries out its commands, feeds what that produced, re-arms the timer.
    fn pump(&mut self) {
        while !self.finished {
            while let Some(command) = self.core.poll_command() {
                if self.on_event.is_some() {
                    let url = match command {
                        Command::Connect { broker, .. } => Some(self.seeds.url(broker)),
                        _ => None,
                    };
                    let event = WebEvent::Command { at: self.at, at_ms: millis(self.at), command: &command, url };
                    self.outbox.push(to_js(&event));
                }
                self.execute(command);
            }
            match self.pending.pop_front() {
                Some(input) if !self.finished => self.feed(input),
                _ => break,
            }
        }
        self.arm_timer();
    }

    fn execute(&mut self, command: Command) {
        match command {
            Command::Connect { attempt, broker } => self.connect(attempt, broker),
            // The browser's seeds are bridge URLs, never names marked to resolve (the bridge
            // resolves the broker's name): should one be asked, it fails as a lookup.
            Command::Resolve { attempt, .. } => {
                let error = AttemptError::with_detail(ErrorKind::Dns, "the browser adapter resolves no names");
                self.pending.push_back(Input::Failed { attempt, error });
            }
            Command::Cancel { attempt, .. } => self.close_socket(attempt),
            Command::Done { metadata, .. } => {
                self.close_all();
                let value = to_js(&metadata);
                self.finish(true, value);
            }
            Command::GiveUp(error) => {
                self.close_all();
                let value = refresh_error(&error, &self.seeds);
                self.finish(false, value);
            }
        }
    }

    fn connect(&mut self, attempt: AttemptId, broker: BrokerIndex) {
        let url = self.seeds.url(broker);
        let ws = match WebSocket::new(url) {
            Ok(ws) => ws,
            Err(thrown) => {
                // Mixed content, a blocked port, no WebSocket at all: fails before any I/O.
                let detail = format!("cannot open a WebSocket to {url}: {}", message(&thrown));
                self.pending
                    .push_back(Input::Failed { attempt, error: AttemptError::with_detail(ErrorKind::Io, detail) });
                return;
            }
        };
        ws.set_binary_type(BinaryType::Arraybuffer);
        let me = &self.me;
        let weak = me.clone();
        ws.set_onopen(Some(&callback(Closure::<dyn FnMut()>::new(move || step(&weak, |d| d.on_open(attempt))))));
        let weak = me.clone();
        ws.set_onmessage(Some(&callback(Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            step(&weak, |d| d.on_message(attempt, event.data()))
        }))));
        let weak = me.clone();
        ws.set_onclose(Some(&callback(Closure::<dyn FnMut(CloseEvent)>::new(move |event: CloseEvent| {
            step(&weak, |d| d.on_close(attempt, event))
        }))));
        // `error` is always followed by `close`, which carries the code: handled there.
        self.sockets.push(Socket { attempt, broker, ws, kafka: None });
    }

    fn socket(&self, attempt: AttemptId) -> Option<usize> {
        self.sockets.iter().position(|s| s.attempt == attempt)
    }

    fn close_socket(&mut self, attempt: AttemptId) {
        if let Some(i) = self.socket(attempt) {
            self.sockets.swap_remove(i).close();
        }
    }

    fn close_all(&mut self) {
        for socket in self.sockets.drain(..) {
            socket.close();
        }
    }

    /// Ends the refresh: no timer, no listener, no longer kept alive; settles after `step`.
    fn finish(&mut self, ok: bool, value: JsValue) {
        self.finished = true;
        self.pending.clear();
        if let Some((handle, _)) = self.timer.take() {
            clear_timeout(&handle);
        }
        if let Some((signal, listener)) = self.abort_listener.take() {
            let _ = signal.remove_event_listener_with_callback("abort", &listener);
        }
        let function = if ok { self.resolve.clone() } else { self.reject.clone() };
        self.settle = Some((function, value));
        let me = self.me.clone();
        RUNNING.with(|running| running.borrow_mut().retain(|d| !std::ptr::eq(Rc::as_ptr(d), me.as_ptr())));
    }

    /// Keeps exactly one `setTimeout` armed for the core's next timer.
    fn arm_timer(&mut self) {
        let due = if self.finished { None } else { self.core.poll_timeout() };
        if matches!((&self.timer, due), (Some((_, armed)), Some(due)) if *armed == due) {
            return;
        }
        if let Some((handle, _)) = self.timer.take() {
            clear_timeout(&handle);
        }
        if let Some(due) = due {
            let wait_us = due.as_micros().saturating_sub(self.clock().as_micros());
            let wait_ms = wait_us.div_ceil(1000).min(i32::MAX as u64) as i32;
            self.timer = Some((set_timeout(&self.on_timer, wait_ms), due));
        }
    }

    fn emit(&mut self, event: &WebEvent<'_>) {
        self.outbox.push(to_js(event));
    }
}

/// Sends every frame the conversation has ready; a socket that refuses to send fails the
/// attempt.
fn send(ws: &WebSocket, kafka: &mut KafkaAttempt) {
    while let Some(frame) = kafka.poll_transmit() {
        if let Err(thrown) = ws.send_with_u8_array(&frame) {
            let detail = format!("WebSocket send failed: {}", message(&thrown));
            kafka.handle_error(AttemptError::with_detail(ErrorKind::Io, detail));
            return;
        }
    }
}
