//! One refresh in the browser: a one-shot [`Session`] and its [`Host`], from `refresh()`
//! until the session says the refresh is done, and the promise it settles.
//!
//! Everything happens on the page's event loop. Each JS callback (socket opened, message,
//! socket closed, timer, abort) enters through [`step`], which borrows the driver, lets the
//! host feed the session and carry out its actions, and only then — with the borrow
//! released — hands the session's live events to `onEvent` and settles the promise. So user
//! code never runs while the driver is borrowed, and may call anything (even abort) from
//! `onEvent`.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use js_sys::{Function, Object};
use stagger::report::{AttemptOutcome, RefreshReport};
use stagger::session::{ConnId, Session};
use stagger::Instant;
use wasm_bindgen::closure::{Closure, WasmClosure};
use wasm_bindgen::prelude::*;
use web_sys::{AbortSignal, CloseEvent, MessageEvent};

use super::convert::{abort_error, config_error, refresh_error, set};
use super::host::{get_random_values, Done, Hooks, Host};
use super::to_js::to_js;
use crate::options::{session_config, Seeds};

thread_local! {
    /// Refreshes in progress. The callbacks only hold weak references, so this is what
    /// keeps a running refresh alive; it lets go when the refresh settles.
    static RUNNING: RefCell<Vec<Rc<RefCell<Driver>>>> = const { RefCell::new(Vec::new()) };
}

/// Everything `refresh()` was asked for, already checked.
pub(crate) struct Plan {
    pub config: stagger::RefreshConfig,
    pub seeds: Seeds,
    pub exchange: stagger::kafka::ExchangeConfig,
    pub on_event: Option<Function>,
    pub signal: Option<AbortSignal>,
    /// Resolve with `{ metadata, refresh, trace }` (`refreshWith`) rather than the metadata.
    pub report: bool,
}

/// The state of one refresh.
struct Driver {
    host: Host,
    on_event: Option<Function>,
    abort_listener: Option<(AbortSignal, Function)>,
    report: bool,
    /// Events to deliver once the borrow is released.
    outbox: Vec<JsValue>,
    /// `resolve` or `reject`, and its value, once the refresh ended.
    settle: Option<(Function, JsValue)>,
    resolve: Function,
    reject: Function,
    finished: bool,
    me: Weak<RefCell<Driver>>,
}

/// Starts a refresh that settles `resolve`/`reject`. Events start flowing synchronously.
pub(crate) fn start(plan: Plan, resolve: Function, reject: Function) -> Result<(), JsValue> {
    if let Some(signal) = plan.signal.as_ref().filter(|s| s.aborted()) {
        return Err(abort_error(signal));
    }
    let origin = Host::origin();
    let mut config = session_config(plan.config, plan.exchange);
    // Pages opened together shuffle their seeds each in their own way (0 is "not set"). 53
    // bits, so the seed in the report's trace is a number JavaScript holds exactly.
    config.seed_unless_set(|| {
        let mut bytes = [0u8; 8];
        get_random_values(&mut bytes).map_or(1, |_| u64::from_le_bytes(bytes) >> 11)
    });
    let session = Session::new(config, plan.seeds.book.clone(), Instant::ZERO).map_err(|e| config_error(&e))?;
    let driver = Rc::new_cyclic(|me: &Weak<RefCell<Driver>>| {
        let weak = me.clone();
        let open = callback(Closure::<dyn FnMut(f64)>::new(move |conn: f64| {
            step(&weak, &|d| d.host.opened(ConnId(conn as u64)))
        }));
        let weak = me.clone();
        let message = callback(Closure::<dyn FnMut(f64, MessageEvent)>::new(move |conn: f64, e: MessageEvent| {
            step(&weak, &|d| d.host.message(ConnId(conn as u64), e.data()))
        }));
        let weak = me.clone();
        let close = callback(Closure::<dyn FnMut(f64, CloseEvent)>::new(move |conn: f64, e: CloseEvent| {
            step(&weak, &|d| d.host.closed(ConnId(conn as u64), &e))
        }));
        let weak = me.clone();
        let timer = callback(Closure::<dyn FnMut()>::new(move || step(&weak, &|d| d.host.timer())));
        let abort_listener = plan.signal.map(|signal| {
            let weak = me.clone();
            let listener = callback(Closure::<dyn FnMut()>::new(move || step(&weak, &Driver::abort)));
            let _ = signal.add_event_listener_with_callback("abort", &listener);
            (signal, listener)
        });
        RefCell::new(Driver {
            host: Host::new(session, plan.seeds, Hooks { open, message, close, timer }, origin),
            on_event: plan.on_event,
            abort_listener,
            report: plan.report,
            outbox: Vec::new(),
            settle: None,
            resolve,
            reject,
            finished: false,
            me: me.clone(),
        })
    });
    RUNNING.with(|running| running.borrow_mut().push(driver.clone()));
    step(&Rc::downgrade(&driver), &|d| d.host.request());
    Ok(())
}

/// Hands a Rust closure to JS for good: it is freed when JS no longer references it, so a
/// callback may safely outlive (or end) the refresh it belongs to.
fn callback<T: ?Sized + WasmClosure>(closure: Closure<T>) -> Function {
    closure.into_js_value().unchecked_into()
}

/// Runs one callback's work on the driver, then — borrow released — delivers the events
/// and settles the promise if the refresh just ended. (`work` is `dyn`: one copy of this in
/// the wasm, not one per callback.)
fn step(weak: &Weak<RefCell<Driver>>, work: &dyn Fn(&mut Driver)) {
    let Some(driver) = weak.upgrade() else { return };
    let (events, on_event, settle) = {
        // Never fails: no JS that could call back into the driver runs while it is borrowed.
        let Ok(mut d) = driver.try_borrow_mut() else { return };
        if d.finished {
            return;
        }
        work(&mut d);
        d.collect();
        (std::mem::take(&mut d.outbox), d.on_event.clone(), d.settle.take())
    };
    if let Some(on_event) = on_event {
        for event in events {
            // A throwing listener must not break the refresh.
            let _ = on_event.call1(&JsValue::UNDEFINED, &event);
            // The listener may have aborted the refresh: nothing follows that.
            if settle.is_none() && driver.try_borrow().is_ok_and(|d| d.finished) {
                break;
            }
        }
    }
    if let Some((function, value)) = settle {
        let _ = function.call1(&JsValue::UNDEFINED, &value);
    }
}

impl Driver {
    /// Takes the session's live events for `onEvent`, and its end if it ended.
    fn collect(&mut self) {
        while let Some(event) = self.host.session.poll_event() {
            if self.on_event.is_some() {
                // The core's `Event`, `{ elapsed_ms, …kind }`, with the time set by hand
                // (serde's `flatten` costs the wasm a map serializer).
                let js = to_js(&event.kind);
                set(&js, "elapsed_ms", &JsValue::from(event.elapsed.as_micros() as f64 / 1000.0));
                self.outbox.push(js);
            }
        }
        match self.host.take_done() {
            Some(Done::Refreshed) => {
                let value = self.outcome();
                self.finish(true, value);
            }
            Some(Done::Failed(error)) => {
                let session = &self.host.session;
                let (attempts, trace) = (session.reports(), session.last_trace());
                let report = RefreshReport { elapsed: None, winner: None, attempts: &attempts };
                let value = refresh_error(&error, self.host.seeds(), &report, trace);
                self.finish(false, value);
            }
            None => {}
        }
    }

    /// What the promise resolves with: the metadata, or (`refreshWith`) the metadata with
    /// the refresh's report and trace.
    fn outcome(&self) -> JsValue {
        let session = &self.host.session;
        let metadata = session.metadata().map_or(JsValue::NULL, to_js);
        if !self.report {
            return metadata;
        }
        // `Session::outcome`'s report, by reference: the metadata and trace are not copied.
        let attempts = session.reports();
        let won = attempts.iter().find(|a| a.outcome == AttemptOutcome::Won);
        let report = RefreshReport {
            elapsed: won.and_then(|a| a.ended),
            winner: won.map(|a| a.broker.as_str()),
            attempts: &attempts,
        };
        let result = Object::new();
        set(&result, "metadata", &metadata);
        set(&result, "refresh", &to_js(&report));
        set(&result, "trace", &session.last_trace().map_or(JsValue::NULL, to_js));
        result.into()
    }

    /// The caller's `AbortSignal` fired: every socket closes, the promise rejects with the
    /// signal's reason.
    fn abort(&mut self) {
        let reason = match &self.abort_listener {
            Some((signal, _)) => abort_error(signal),
            None => JsValue::UNDEFINED,
        };
        self.finish(false, reason);
    }

    /// Ends the refresh: no socket, no timer, no listener, no longer kept alive; settles
    /// after `step`.
    fn finish(&mut self, ok: bool, value: JsValue) {
        self.finished = true;
        self.host.close_all();
        if let Some((signal, listener)) = self.abort_listener.take() {
            let _ = signal.remove_event_listener_with_callback("abort", &listener);
        }
        let function = if ok { self.resolve.clone() } else { self.reject.clone() };
        self.settle = Some((function, value));
        let me = self.me.clone();
        RUNNING.with(|running| running.borrow_mut().retain(|d| !std::ptr::eq(Rc::as_ptr(d), me.as_ptr())));
    }
}
