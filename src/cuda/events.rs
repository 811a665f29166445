//! The CUDA back end's events: a command's end (a CUDA event recorded on
//! its stream after it, with one recorded before it on timed streams),
//! or a user event, which is the host's alone. A command that waits for
//! something not yet on a device (a user event, or a command still held)
//! is held on the host until it is (`hold`): a stream never waits for the
//! host, since a stream stopped that way fills the device's launch queue
//! and then blocks CUDA calls the host needs to go on.
//!
//! Callbacks at an event's end run on the back end's callback thread
//! (`callbacks`).
//!
//! CUDA handles are opaque identifiers that only the driver interprets,
//! so passing them on is not a dereference by this code.

#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::callbacks::{send, started, Msg, Pending, Watched};
use super::loader::{
    api, check, is_sticky, note_lost, take_last_failure, Api, CUcontext, CUevent, CUresult,
    CUDA_ERROR_NOT_READY, CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_UNKNOWN, CUDA_SUCCESS,
    CU_EVENT_DISABLE_TIMING,
};
use super::state::{host_ns, make_current, Spares, Stream};
use crate::backend::{EndCallback, EventH, Stamp, COMPLETE, SUBMITTED};
use crate::core::error::{Error, Result, Status};
use parking_lot::{Condvar, Mutex};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

/// The failure status of a command that ended in CUDA error `code`
/// (negative, as the seam's statuses are).
pub fn failure(code: i32) -> i32 {
    -10_000 - code
}

/// The CUDA error behind failure status `status` (see [`failure`]), or
/// `None` where it is not one.
pub fn cuda_code(status: i32) -> Option<i32> {
    (status <= -10_000).then_some(-10_000 - status)
}

/// The failure status for a held command that could not be enqueued:
/// the CUDA error of the call that failed on this thread (see
/// `loader::take_last_failure`), or CUDA's "unknown error".
pub fn failure_of(e: &Error) -> i32 {
    failure(match take_last_failure() {
        CUDA_SUCCESS if e.status == Status::OutOfDeviceMemory => CUDA_ERROR_OUT_OF_MEMORY,
        CUDA_SUCCESS => CUDA_ERROR_UNKNOWN,
        code => code,
    })
}

/// A command's event: held (its command not yet on the stream).
const HELD: u8 = 0;
/// A command's event: recorded after its command.
const RECORDED: u8 = 1;
/// A command's event: its command could not be enqueued.
const FAILED: u8 = 2;
/// A command's event: recorded, and known to have completed.
const DONE: u8 = 3;

/// Who waits for an event that has not happened on a device yet.
#[derive(Default)]
struct Later {
    /// Callbacks to call once it has ended.
    callbacks: Vec<(EndCallback, usize)>,
    /// Streams whose held commands wait for it.
    waiters: Vec<Arc<Stream>>,
}

enum Kind {
    /// The end of a command: `end` recorded after it on `stream`, `start`
    /// before it (timed streams), the host's clock when it was enqueued,
    /// its place in the stream's order, and whether it is there yet.
    Command {
        end: CUevent,
        start: CUevent,
        stream: Arc<Stream>,
        queued_ns: u64,
        seq: AtomicU64,
        state: AtomicU8,
        code: AtomicI32,
        /// What failed, where the command could not be enqueued.
        why: OnceLock<String>,
    },
    /// A user event.
    User { done: AtomicBool },
}

/// An event, shared by the runtime's handle and pending callbacks.
pub struct Ev {
    kind: Kind,
    later: Mutex<Later>,
}

// SAFETY: CUDA events are usable from any thread whose current context is
// theirs (each use makes it so); the rest is atomics and locks.
unsafe impl Send for Ev {}
// SAFETY: as above.
unsafe impl Sync for Ev {}

/// Signals waiters of events that were not yet on a device.
static SETTLED: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());

/// Events of ended commands kept for later ones, by context and whether
/// they time: making and destroying one costs two driver calls per
/// command, each slow under NVIDIA's multi-process service. A kept event
/// is recorded again; nothing asks about its earlier record any more.
static SPARE: Spares<(usize, bool)> = Spares::new(256);

/// An event of `ctx` (current) that times or not.
pub fn create_event(api: &Api, ctx: CUcontext, timing: bool) -> Result<CUevent> {
    if let Some(e) = SPARE.take((ctx as usize, timing)) {
        return Ok(e as CUevent);
    }
    let mut e: CUevent = std::ptr::null_mut();
    let flags = if timing { 0 } else { CU_EVENT_DISABLE_TIMING };
    // SAFETY: `e` is a valid slot; a context is current.
    let rc = unsafe { (api.cuEventCreate)(&mut e, flags) };
    check(api, rc, "cuEventCreate")?;
    Ok(e)
}

/// Keeps `e`, an event of `ctx` (current) that nothing will ask about
/// again, for a later command, or destroys it.
pub fn drop_event(api: &Api, ctx: CUcontext, timing: bool, e: CUevent) {
    if !SPARE.keep((ctx as usize, timing), e as usize) {
        // SAFETY: a live event of the current context, destroyed once.
        unsafe { (api.cuEventDestroy)(e) };
    }
}

impl Ev {
    /// The event of a command about to be enqueued on `stream` (current),
    /// held until [`Ev::recorded`] or [`Ev::fail`].
    pub fn command(api: &Api, stream: &Arc<Stream>) -> Result<Arc<Ev>> {
        let ctx = stream.dev.ctx;
        let end = create_event(api, ctx, stream.timed)?;
        let start = if stream.timed {
            match create_event(api, ctx, true) {
                Ok(s) => s,
                Err(e) => {
                    drop_event(api, ctx, true, end);
                    return Err(e);
                }
            }
        } else {
            std::ptr::null_mut()
        };
        Ok(Arc::new(Ev {
            kind: Kind::Command {
                end,
                start,
                stream: stream.clone(),
                queued_ns: host_ns(),
                seq: AtomicU64::new(0),
                state: AtomicU8::new(HELD),
                code: AtomicI32::new(0),
                why: OnceLock::new(),
            },
            later: Mutex::new(Later::default()),
        }))
    }

    /// Records the command's start on `s` (timed streams), before it.
    pub fn start(&self, api: &Api, s: &Stream) -> Result<()> {
        match &self.kind {
            Kind::Command { start, .. } if !start.is_null() => {
                // SAFETY: a live event and stream of the current context.
                let rc = unsafe { (api.cuEventRecord)(*start, s.raw) };
                check(api, rc, "cuEventRecord")
            }
            _ => Ok(()),
        }
    }

    /// Records the command's end on `s` (its stream, current, its tail
    /// held) as command `seq`; its state, for the caller to mark.
    fn record_at(&self, api: &Api, s: &Stream, seq: u64) -> Result<Option<&AtomicU8>> {
        let Kind::Command {
            end,
            seq: at,
            state,
            ..
        } = &self.kind
        else {
            return Ok(None);
        };
        // SAFETY: a live event and stream of the current context.
        let rc = unsafe { (api.cuEventRecord)(*end, s.raw) };
        check(api, rc, "cuEventRecord")?;
        at.store(seq, Ordering::Release);
        Ok(Some(state))
    }

    /// Records the end of a command just enqueued on `s` (its stream,
    /// current, its tail held) as command `seq`, before anyone else can
    /// know of the event: nothing waits for it, nobody is told.
    pub fn recorded_new(&self, api: &Api, s: &Stream, seq: u64) -> Result<()> {
        if let Some(state) = self.record_at(api, s, seq)? {
            state.store(RECORDED, Ordering::Release);
        }
        Ok(())
    }

    /// Records the command's end on `s` (its stream, current, its tail
    /// held) as command `seq`. Callbacks registered while it was held go
    /// on the stream; streams waiting for it are added to `woken`.
    pub fn recorded(
        self: &Arc<Self>,
        api: &Api,
        s: &Stream,
        seq: u64,
        woken: &mut Vec<Arc<Stream>>,
    ) -> Result<()> {
        let Some(state) = self.record_at(api, s, seq)? else {
            return Ok(());
        };
        let later = self.settle(|| state.store(RECORDED, Ordering::Release));
        for (f, user) in later.callbacks {
            send(Msg::Watch(Pending::new(self.clone(), f, user)));
        }
        woken.extend(later.waiters);
        Ok(())
    }

    /// Ends a command that could not be enqueued (or that reports such a
    /// command before it on its stream) with failure status `code`, `why`
    /// saying what failed; streams waiting for it are added to `woken`.
    pub fn fail(self: &Arc<Self>, code: i32, why: String, woken: &mut Vec<Arc<Stream>>) {
        let Kind::Command {
            state,
            code: c,
            why: w,
            ..
        } = &self.kind
        else {
            return;
        };
        let _ = w.set(why);
        let later = self.settle(|| {
            c.store(code, Ordering::Release);
            state.store(FAILED, Ordering::Release);
        });
        for (f, user) in later.callbacks {
            send(Msg::Call(Pending::new(self.clone(), f, user)));
        }
        woken.extend(later.waiters);
    }

    /// A new user event, not complete.
    pub fn user() -> EventH {
        handle(Arc::new(Ev {
            kind: Kind::User {
                done: AtomicBool::new(false),
            },
            later: Mutex::new(Later::default()),
        }))
    }

    /// Whether it has happened on a device, or needs none (so that a
    /// command may wait for it there).
    pub fn resolved(&self) -> bool {
        match &self.kind {
            Kind::Command { state, .. } => state.load(Ordering::Acquire) != HELD,
            Kind::User { done } => done.load(Ordering::Acquire),
        }
    }

    /// What failed, where the command could not be enqueued.
    pub fn why(&self) -> Option<&str> {
        match &self.kind {
            Kind::Command { why, .. } => why.get().map(String::as_str),
            Kind::User { .. } => None,
        }
    }

    /// Registers `s` to be pumped once this is resolved; `false` (and
    /// nothing registered) if it already is.
    pub fn add_waiter(&self, s: &Arc<Stream>) -> bool {
        let mut l = self.later.lock();
        if self.resolved() {
            return false;
        }
        if !l.waiters.iter().any(|w| Arc::ptr_eq(w, s)) {
            l.waiters.push(s.clone());
        }
        true
    }

    /// Makes `stream` (current) wait for this, resolved, before what is
    /// enqueued next; whether that is a wait for a command of another
    /// stream still running (see [`Stream::changes_host`]).
    pub fn wait_on(&self, api: &Api, stream: &Stream) -> Result<bool> {
        match &self.kind {
            Kind::Command {
                end,
                state,
                stream: from,
                seq,
                ..
            } if state.load(Ordering::Acquire) == RECORDED
                && !from.reached(seq.load(Ordering::Acquire)) =>
            {
                // SAFETY: a live event and stream; events of other devices
                // are waited on across them.
                let rc = unsafe { (api.cuStreamWaitEvent)(stream.raw, *end, 0) };
                check(api, rc, "cuStreamWaitEvent")?;
                Ok(!std::ptr::eq(Arc::as_ptr(from), stream))
            }
            // Done already; a failed command's dependents still run (the
            // runtime reports the failure through them); a user event is
            // already done.
            _ => Ok(false),
        }
    }

    /// Runs `change` (which resolves it) and takes who was waiting.
    fn settle(&self, change: impl FnOnce()) -> Later {
        let later = {
            let mut l = self.later.lock();
            change();
            std::mem::take(&mut *l)
        };
        let _g = SETTLED.0.lock();
        SETTLED.1.notify_all();
        later
    }
}

impl Drop for Ev {
    fn drop(&mut self) {
        let Kind::Command {
            end, start, stream, ..
        } = &self.kind
        else {
            return;
        };
        let Ok(api) = api() else { return };
        if make_current(api, stream.dev.ctx).is_err() {
            return;
        }
        // Made for this command alone, and nobody asks about them now.
        drop_event(api, stream.dev.ctx, stream.timed, *end);
        if !start.is_null() {
            drop_event(api, stream.dev.ctx, true, *start);
        }
    }
}

impl Watched for Ev {
    fn status(&self) -> i32 {
        match &self.kind {
            Kind::Command { .. } => status_of(self).unwrap_or(COMPLETE),
            Kind::User { .. } => COMPLETE,
        }
    }

    fn order(&self) -> Option<(usize, u64)> {
        match &self.kind {
            Kind::Command { stream, seq, .. } => {
                Some((Arc::as_ptr(stream) as usize, seq.load(Ordering::Acquire)))
            }
            Kind::User { .. } => None,
        }
    }
}

/// The runtime's handle to `ev`.
pub fn handle(ev: Arc<Ev>) -> EventH {
    EventH(Arc::into_raw(ev) as usize)
}

/// The event behind `e`, borrowed for the handle's lifetime.
///
/// The runtime keeps its reference until it calls `release`, so the
/// event outlives every use through the handle.
pub fn of(e: EventH) -> &'static Ev {
    // SAFETY: `e` came from Arc::into_raw in this file and the runtime's
    // reference keeps it alive while it uses the handle.
    unsafe { &*(e.0 as *const Ev) }
}

/// Another reference to the event behind `e`.
pub fn share(e: EventH) -> Arc<Ev> {
    // SAFETY: as in `of`; the count is raised before a new Arc is made.
    unsafe {
        Arc::increment_strong_count(e.0 as *const Ev);
        Arc::from_raw(e.0 as *const Ev)
    }
}

/// Gives back the runtime's reference.
pub fn release(e: EventH) {
    if !e.is_none() {
        // SAFETY: the runtime's one reference, given back once.
        drop(unsafe { Arc::from_raw(e.0 as *const Ev) });
    }
}

impl Ev {
    /// What is known of a command's end without asking the driver: held,
    /// failed, or complete (itself, or a later command of its stream).
    fn known_end(&self) -> Option<i32> {
        let Kind::Command {
            stream,
            state,
            code,
            seq,
            ..
        } = &self.kind
        else {
            return None;
        };
        match state.load(Ordering::Acquire) {
            HELD => Some(SUBMITTED),
            FAILED => Some(code.load(Ordering::Acquire)),
            DONE => Some(COMPLETE),
            _ if stream.reached(seq.load(Ordering::Acquire)) => {
                state.store(DONE, Ordering::Release);
                Some(COMPLETE)
            }
            _ => None,
        }
    }

    /// Whether it has ended, completed or failed (asking the driver when
    /// that is not known yet).
    pub fn ended(&self) -> bool {
        status_of(self).is_ok_and(|st| st <= COMPLETE)
    }

    /// Notes that the driver saw the command end: so did every earlier
    /// command of its stream.
    fn ended_now(&self) {
        if let Kind::Command {
            stream, state, seq, ..
        } = &self.kind
        {
            state.store(DONE, Ordering::Release);
            stream.passed(seq.load(Ordering::Acquire));
        }
    }
}

/// `code`, the result of a wait on `stream`'s work that did not go
/// through `check`: a context an error lost is remembered there too.
fn noted(stream: &Stream, code: CUresult) -> CUresult {
    if is_sticky(code) {
        note_lost(stream.dev.ctx as usize);
    }
    code
}

/// The status of `ev` (see `backend::COMPLETE`).
fn status_of(ev: &Ev) -> Result<i32> {
    if let Some(st) = ev.known_end() {
        return Ok(st);
    }
    match &ev.kind {
        Kind::Command { end, stream, .. } => {
            let api = api()?;
            make_current(api, stream.dev.ctx)?;
            // SAFETY: a live, recorded event.
            Ok(match unsafe { (api.cuEventQuery)(*end) } {
                CUDA_SUCCESS => {
                    ev.ended_now();
                    COMPLETE
                }
                CUDA_ERROR_NOT_READY => SUBMITTED,
                code => failure(noted(stream, code)),
            })
        }
        Kind::User { done } => Ok(if done.load(Ordering::Acquire) {
            COMPLETE
        } else {
            SUBMITTED
        }),
    }
}

/// The status of `e` (see `backend::COMPLETE`).
pub fn status(e: EventH) -> Result<i32> {
    status_of(of(e))
}

/// Waits for `e`: 0, or its failure status.
pub fn wait(e: EventH) -> Result<i32> {
    let ev = of(e);
    if !ev.resolved() {
        let mut g = SETTLED.0.lock();
        while !ev.resolved() {
            SETTLED.1.wait(&mut g);
        }
    }
    if let Some(st) = ev.known_end() {
        // Resolved, so not held: complete, or its failure.
        return Ok(st.min(0));
    }
    match &ev.kind {
        Kind::Command { end, stream, .. } => {
            let api = api()?;
            make_current(api, stream.dev.ctx)?;
            // SAFETY: a live, recorded event.
            Ok(match unsafe { (api.cuEventSynchronize)(*end) } {
                CUDA_SUCCESS => {
                    ev.ended_now();
                    0
                }
                code => failure(noted(stream, code)),
            })
        }
        Kind::User { .. } => Ok(0),
    }
}

/// Completes user event `e`: its callbacks run on this thread, and held
/// commands waiting for it go to their streams.
pub fn complete(e: EventH) -> Result<()> {
    let ev = of(e);
    let Kind::User { done } = &ev.kind else {
        return Err(Error::invalid(
            "only a user event can be completed by the host",
        ));
    };
    let mut already = false;
    let later = ev.settle(|| already = done.swap(true, Ordering::AcqRel));
    if already {
        return Err(Error::new(
            Status::InvalidOperation,
            "the user event was already completed",
        ));
    }
    for (f, user) in later.callbacks {
        // SAFETY: the runtime registered `f` with `user` for this event.
        unsafe { f(e.0 as *mut c_void, COMPLETE, user as *mut c_void) };
    }
    for s in later.waiters {
        s.pump();
    }
    Ok(())
}

/// Calls `f(e, status, user)` once `e` has ended.
pub fn on_end(e: EventH, f: EndCallback, user: *mut c_void) -> Result<()> {
    started()?;
    let ev = of(e);
    {
        let mut l = ev.later.lock();
        if !ev.resolved() {
            l.callbacks.push((f, user as usize));
            return Ok(());
        }
    }
    let p = Pending::new(share(e), f, user as usize);
    match &ev.kind {
        Kind::Command {
            stream, seq, state, ..
        } if state.load(Ordering::Acquire) == RECORDED
            && !stream.reached(seq.load(Ordering::Acquire)) =>
        {
            send(Msg::Watch(p))
        }
        _ => send(Msg::Call(p)),
    }
    Ok(())
}

/// Timestamp `which` of `e`, a command of a timed stream.
pub fn timestamp(e: EventH, which: Stamp) -> Result<u64> {
    let Kind::Command {
        end,
        start,
        stream,
        queued_ns,
        state,
        ..
    } = &of(e).kind
    else {
        return Err(Error::new(
            Status::ProfilingUnavailable,
            "a user event has no timestamps",
        ));
    };
    if !stream.timed {
        return Err(Error::new(
            Status::ProfilingUnavailable,
            "the command's queue does not record timestamps",
        ));
    }
    if !matches!(state.load(Ordering::Acquire), RECORDED | DONE) {
        return Err(Error::new(
            Status::ProfilingUnavailable,
            "the command has not run",
        ));
    }
    let at = |ev: CUevent| -> Result<u64> {
        let api = api()?;
        make_current(api, stream.dev.ctx)?;
        let mut ms = 0f32;
        // SAFETY: both events were recorded with timing on this stream.
        let rc = unsafe { (api.cuEventElapsedTime)(&mut ms, stream.reference, ev) };
        check(api, rc, "cuEventElapsedTime")?;
        Ok(stream.base_ns + (f64::from(ms) * 1e6) as u64)
    };
    match which {
        Stamp::Queued | Stamp::Submitted => Ok(*queued_ns),
        Stamp::Started => at(*start),
        Stamp::Ended => at(*end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_statuses_carry_the_cuda_error() {
        assert_eq!(failure(700), -10_700);
        assert_eq!(cuda_code(failure(700)), Some(700));
        assert_eq!(cuda_code(failure(1)), Some(1));
        // OpenCL's codes and the seam's statuses are not CUDA errors.
        assert_eq!(cuda_code(-5), None);
        assert_eq!(cuda_code(COMPLETE), None);
    }
}
