//! The exported functions: a table of sessions by handle, the batched step, the JSON reads,
//! and the one wrapper every entry goes through so that no panic crosses the ABI.
//!
//! Every fallible call returns a status (`STAGGER_OK` or a `STAGGER_ERR_*`) and writes a
//! buffer to `*out`: the answer on success, the error JSON otherwise. An answer lives in its
//! session until the next call on that handle; an error lives in the calling thread's error
//! slot until the next error on that thread. The rule for hosts: read `out` before the next
//! call. Natively, every entry runs under `catch_unwind`: a panic (a bug) becomes
//! `STAGGER_ERR_PANIC` and poisons the session it happened in. In wasm a panic traps (the
//! module is built with `panic = "abort"`); the host then drops the instance and builds its
//! sessions again.

use std::alloc::Layout;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use stagger::session::Session;
use stagger::{BrokerIndex, Instant};

use crate::codes::*;
use crate::error::AbiError;
use crate::json::{self, Ended};
use crate::wire::{self, ActionWriter, Incoming};

/// A buffer the library owns, as `*out` receives it: `ptr` and `len` (8 bytes in wasm32,
/// two little-endian `u32`s; 16 bytes on 64-bit hosts). Read it before the next call.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StaggerBuf {
    /// The first byte (never null when `len > 0`).
    pub ptr: *const u8,
    /// How many bytes.
    pub len: usize,
}

/// One session and what the ABI keeps beside it.
struct Entry {
    session: Session,
    /// The last answer: an action batch or JSON, valid until the next call on the handle.
    out: Vec<u8>,
    /// A call panicked in this session: it takes no more calls.
    poisoned: bool,
    /// How the last refresh ended, for the report.
    ended: Option<Ended>,
}

/// The sessions by handle; handles count up from 1 and are never reused, so a stale handle
/// is an error, not another session.
struct Registry {
    next: u64,
    sessions: BTreeMap<u64, Arc<Mutex<Entry>>>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { next: 1, sessions: BTreeMap::new() });

thread_local! {
    /// The calling thread's last error: its status and JSON.
    static LAST_ERROR: RefCell<(i32, Vec<u8>)> = const { RefCell::new((STAGGER_OK, Vec::new())) };
}

/// A lock that a panic elsewhere cannot make unusable: the data it guards stays consistent
/// (a panicking session is marked poisoned by the caller, not by the mutex).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a panic said, for the error JSON.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    format!("stagger panicked (a bug; please report it): {what}")
}

/// Stores `error` as the thread's last error; returns its status and where its JSON is.
fn fail(error: &AbiError) -> (i32, StaggerBuf) {
    LAST_ERROR.with(|slot| {
        let mut slot = slot.borrow_mut();
        slot.0 = error.status;
        slot.1 = error.to_json().to_string().into_bytes();
        (error.status, StaggerBuf { ptr: slot.1.as_ptr(), len: slot.1.len() })
    })
}

/// Runs one entry: catches a panic, writes the answer or the error to `out`, returns the
/// status.
///
/// # Safety
/// `out` is null or valid for a write of a [`StaggerBuf`].
unsafe fn run(out: *mut StaggerBuf, f: impl FnOnce() -> Result<StaggerBuf, AbiError>) -> i32 {
    if out.is_null() {
        // Nowhere to say more; the error slot still has the message.
        return fail(&AbiError::new(STAGGER_ERR_ARGUMENT, "out is null")).0;
    }
    let result = catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|payload| Err(AbiError::new(STAGGER_ERR_PANIC, panic_message(&*payload))));
    let (status, buf) = match result {
        Ok(buf) => (STAGGER_OK, buf),
        Err(error) => fail(&error),
    };
    // SAFETY: the caller's contract: `out` is valid for a write.
    unsafe { out.write(buf) };
    status
}

/// Runs `f` on the session `handle` and answers with the buffer it filled (`entry.out`). A
/// panic in `f` poisons the session.
fn with_session(handle: u64, f: impl FnOnce(&mut Entry) -> Result<(), AbiError>) -> Result<StaggerBuf, AbiError> {
    let entry = lock(&REGISTRY).sessions.get(&handle).cloned().ok_or_else(|| {
        AbiError::new(STAGGER_ERR_UNKNOWN_HANDLE, format!("no session has handle {handle} (never created, or freed)"))
    })?;
    let mut entry = lock(&entry);
    if entry.poisoned {
        return Err(AbiError::new(
            STAGGER_ERR_POISONED,
            format!("session {handle} panicked in an earlier call and takes no more calls: free it and build another"),
        ));
    }
    match catch_unwind(AssertUnwindSafe(|| f(&mut entry))) {
        Ok(Ok(())) => Ok(StaggerBuf { ptr: entry.out.as_ptr(), len: entry.out.len() }),
        Ok(Err(e)) => Err(e),
        Err(payload) => {
            entry.poisoned = true;
            entry.out = Vec::new();
            Err(AbiError::new(STAGGER_ERR_PANIC, panic_message(&*payload)))
        }
    }
}

/// The input slice of a pointer and a length from the host.
///
/// # Safety
/// `ptr` is null with `len == 0`, or valid for reads of `len` bytes for the call.
unsafe fn input<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a [u8], AbiError> {
    match (ptr.is_null(), len) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(AbiError::new(STAGGER_ERR_ARGUMENT, format!("{what} is null but its length is {len}"))),
        // SAFETY: the caller's contract.
        (false, _) => Ok(unsafe { std::slice::from_raw_parts(ptr, len) }),
    }
}

/// The session's instant for the host's clock (ns in, µs inside: a wake-up the session
/// names at µs `t` is reported as `t × 1000` ns, which reads back as `t`).
fn instant(now_ns: u64) -> Instant {
    Instant::from_micros(now_ns / 1000)
}

/// The ABI version (see [`STAGGER_ABI_VERSION`]): a host checks it before anything else.
#[no_mangle]
pub extern "C" fn stagger_abi_version() -> u32 {
    STAGGER_ABI_VERSION
}

/// Allocates `len` bytes the host fills (a wasm host's inputs live in the module's memory);
/// free them with [`stagger_free`] and the same `len`. Null if the memory is not there.
#[no_mangle]
pub extern "C" fn stagger_alloc(len: usize) -> *mut u8 {
    match Layout::array::<u8>(len.max(1)) {
        // SAFETY: the layout has a non-zero size.
        Ok(layout) => unsafe { std::alloc::alloc(layout) },
        Err(_) => std::ptr::null_mut(),
    }
}

/// Frees what [`stagger_alloc`] returned (null is ignored).
///
/// # Safety
/// `ptr` is null, or came from `stagger_alloc(len)` with this `len` and was not freed.
#[no_mangle]
pub unsafe extern "C" fn stagger_free(ptr: *mut u8, len: usize) {
    if ptr.is_null() {
        return;
    }
    if let Ok(layout) = Layout::array::<u8>(len.max(1)) {
        // SAFETY: the caller's contract: allocated by `stagger_alloc` with this layout.
        unsafe { std::alloc::dealloc(ptr, layout) };
    }
}

/// Builds a session from the config JSON (`docs/abi.md`), its clock starting at `now_ns`
/// (the host's monotonic clock) and its randomness from `seed`. Returns its handle, or 0
/// when the config is refused: [`stagger_last_error`] then says why, naming the field.
///
/// # Safety
/// `config` is valid for reads of `config_len` bytes (or null with 0).
#[no_mangle]
pub unsafe extern "C" fn stagger_session_new(config: *const u8, config_len: usize, now_ns: u64, seed: u64) -> u64 {
    let made = catch_unwind(AssertUnwindSafe(|| -> Result<u64, AbiError> {
        // SAFETY: the caller's contract.
        let bytes = unsafe { input(config, config_len, "config") }?;
        let config = crate::config::parse(bytes, seed)?;
        let session =
            Session::new(config.session, config.book, instant(now_ns)).map_err(|e| crate::config::from_core(&e))?;
        let entry = Entry { session, out: Vec::new(), poisoned: false, ended: None };
        let mut registry = lock(&REGISTRY);
        let handle = registry.next;
        registry.next += 1;
        registry.sessions.insert(handle, Arc::new(Mutex::new(entry)));
        Ok(handle)
    }));
    match made {
        Ok(Ok(handle)) => handle,
        Ok(Err(e)) => {
            fail(&e);
            0
        }
        Err(payload) => {
            fail(&AbiError::new(STAGGER_ERR_PANIC, panic_message(&*payload)));
            0
        }
    }
}

/// The calling thread's last error: returns its status (`STAGGER_OK` if none yet) and
/// points `*out` at its JSON (`null` if none).
///
/// # Safety
/// `out` is valid for a write of a [`StaggerBuf`].
#[no_mangle]
pub unsafe extern "C" fn stagger_last_error(out: *mut StaggerBuf) -> i32 {
    if out.is_null() {
        return STAGGER_ERR_ARGUMENT;
    }
    let (status, buf) = LAST_ERROR.with(|slot| {
        let slot = slot.borrow();
        let json: &[u8] = if slot.1.is_empty() { b"null" } else { &slot.1 };
        (slot.0, StaggerBuf { ptr: json.as_ptr(), len: json.len() })
    });
    // SAFETY: the caller's contract. (The JSON outlives the borrow: it is the thread's slot
    // or a static.)
    unsafe { out.write(buf) };
    status
}

/// One wake-up of the host: feeds the time `now_ns` and a batch of events (`docs/abi.md`;
/// an empty length for none), and answers with every action that results and the next
/// wake-up, as one action batch. A malformed batch is refused whole
/// (`STAGGER_ERR_MALFORMED`, nothing applied). Time that goes backwards is clamped.
///
/// # Safety
/// `events` is valid for reads of `events_len` bytes (or null with 0); `out` is valid for a
/// write of a [`StaggerBuf`].
#[no_mangle]
pub unsafe extern "C" fn stagger_step(
    handle: u64,
    now_ns: u64,
    events: *const u8,
    events_len: usize,
    out: *mut StaggerBuf,
) -> i32 {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        run(out, || {
            let events = input(events, events_len, "events")?;
            with_session(handle, |entry| step(entry, instant(now_ns), events))
        })
    }
}

/// The step itself: decode everything first, then apply in order, draining after each
/// event so that a `REFRESH_REQUESTED` comes before the actions its request caused.
fn step(entry: &mut Entry, now: Instant, events: &[u8]) -> Result<(), AbiError> {
    // No bytes at all is no events (a timer's wake-up); anything else is a whole batch.
    let incoming = match events {
        [] => Vec::new(),
        bytes => wire::decode_events(bytes).map_err(|e| AbiError::new(STAGGER_ERR_MALFORMED, e.message))?,
    };
    let Entry { session, out, ended, .. } = entry;
    let mut writer = ActionWriter::new(out);
    for item in incoming {
        match item {
            Incoming::Event(event) => session.handle_event(now, event),
            Incoming::RequestRefresh { cause, broker } => {
                let broker = broker.and_then(|b| session.cluster().book().find(b));
                let epoch = session.request_refresh_because(now, cause, broker);
                writer.refresh_requested(epoch);
            }
        }
        drain(session, &mut writer, ended);
    }
    session.handle_timeout(now);
    drain(session, &mut writer, ended);
    writer.finish(session.poll_timeout().map_or(STAGGER_NO_WAKEUP, json::ns));
    Ok(())
}

/// Writes every pending action, remembering how a refresh ended.
fn drain(session: &mut Session, writer: &mut ActionWriter<'_>, ended: &mut Option<Ended>) {
    while let Some(action) = session.poll_action() {
        match &action {
            stagger::session::Action::Refreshed { epoch, broker, .. } => {
                *ended = Some(Ended::Refreshed { epoch: *epoch, broker: broker.0 });
            }
            stagger::session::Action::RefreshFailed { epoch, error } => {
                *ended = Some(Ended::Failed { epoch: *epoch, error: error.clone() });
            }
            _ => {}
        }
        let book = session.cluster().book();
        writer.action(&action, |i| book.address(BrokerIndex(i)).to_owned());
    }
}

/// The latest metadata as JSON (`null` before the first successful refresh).
///
/// # Safety
/// `out` is valid for a write of a [`StaggerBuf`].
#[no_mangle]
pub unsafe extern "C" fn stagger_metadata(handle: u64, out: *mut StaggerBuf) -> i32 {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        run(out, || {
            with_session(handle, |entry| {
                entry.out = json::metadata(&entry.session);
                Ok(())
            })
        })
    }
}

/// The report as JSON: the session's counters, the refresh running, and the last finished
/// refresh with every attempt (when each started, connected, answered, ended, and how).
///
/// # Safety
/// `out` is valid for a write of a [`StaggerBuf`].
#[no_mangle]
pub unsafe extern "C" fn stagger_report(handle: u64, out: *mut StaggerBuf) -> i32 {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        run(out, || {
            with_session(handle, |entry| {
                entry.out = json::report(&entry.session, entry.ended.as_ref());
                Ok(())
            })
        })
    }
}

/// Frees the session `handle` (poisoned ones too). Its connections are the host's to close:
/// the session only ever named them. Returns `STAGGER_ERR_UNKNOWN_HANDLE` for a handle that
/// is not (or no longer) a session.
#[no_mangle]
pub extern "C" fn stagger_session_free(handle: u64) -> i32 {
    let removed = catch_unwind(|| lock(&REGISTRY).sessions.remove(&handle));
    match removed {
        Ok(Some(entry)) => {
            // Dropping a session runs no code of the host's; a panic in it is still caught.
            match catch_unwind(AssertUnwindSafe(move || drop(entry))) {
                Ok(()) => STAGGER_OK,
                Err(payload) => fail(&AbiError::new(STAGGER_ERR_PANIC, panic_message(&*payload))).0,
            }
        }
        Ok(None) => {
            fail(&AbiError::new(
                STAGGER_ERR_UNKNOWN_HANDLE,
                format!("no session has handle {handle} (never created, or freed)"),
            ))
            .0
        }
        Err(payload) => fail(&AbiError::new(STAGGER_ERR_PANIC, panic_message(&*payload))).0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> u64 {
        let config = br#"{"seeds": ["b1:9092"], "one_shot": true}"#;
        // SAFETY: a valid slice.
        let handle = unsafe { stagger_session_new(config.as_ptr(), config.len(), 0, 1) };
        assert_ne!(handle, 0);
        handle
    }

    #[test]
    fn a_panic_inside_a_session_is_an_error_and_poisons_only_that_session() {
        let (sick, healthy) = (session(), session());
        let mut out = StaggerBuf { ptr: std::ptr::null(), len: 0 };
        // SAFETY: `out` is a valid place.
        let status = unsafe { run(&mut out, || with_session(sick, |_| panic!("the test's own panic"))) };
        assert_eq!(status, STAGGER_ERR_PANIC);
        // SAFETY: the buffer the call just returned.
        let json = unsafe { std::slice::from_raw_parts(out.ptr, out.len) };
        let json: serde_json::Value = serde_json::from_slice(json).unwrap();
        assert_eq!(json["error"], "panic");
        assert!(json["message"].as_str().unwrap().contains("the test's own panic"), "{json}");

        // SAFETY: valid arguments.
        let status = unsafe { stagger_step(sick, 0, std::ptr::null(), 0, &mut out) };
        assert_eq!(status, STAGGER_ERR_POISONED);
        // SAFETY: valid arguments.
        assert_eq!(unsafe { stagger_step(healthy, 0, std::ptr::null(), 0, &mut out) }, STAGGER_OK);
        assert_eq!(stagger_session_free(sick), STAGGER_OK, "a poisoned session can be freed");
        assert_eq!(stagger_session_free(healthy), STAGGER_OK);
    }

    #[test]
    fn a_panic_outside_any_session_is_an_error_too() {
        let mut out = StaggerBuf { ptr: std::ptr::null(), len: 0 };
        // SAFETY: `out` is a valid place.
        let status = unsafe { run(&mut out, || panic!("before any session")) };
        assert_eq!(status, STAGGER_ERR_PANIC);
        // SAFETY: valid arguments.
        assert_eq!(unsafe { stagger_last_error(&mut out) }, STAGGER_ERR_PANIC);
    }
}
