//! The CUDA back end's events: a command's end (a CUDA event recorded on
//! its stream, with one recorded before it on timed streams), or a user
//! event (a word of mapped host memory that streams wait on with
//! `cuStreamWaitValue32` and the host sets). Callbacks at an event's end
//! run on the back end's own thread: a stream only tells that thread, as
//! a host function may not call CUDA.
//!
//! CUDA handles are opaque identifiers that only the driver interprets,
//! so passing them on is not a dereference by this code.

#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::loader::{
    api, check, Api, CUdeviceptr, CUevent, CUstream, CUDA_ERROR_NOT_READY, CUDA_SUCCESS,
    CU_EVENT_DISABLE_TIMING, CU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTALLOC_PORTABLE,
    CU_STREAM_WAIT_VALUE_GEQ,
};
use super::state::{host_ns, make_current, Stream};
use crate::backend::{EndCallback, EventH, Stamp, COMPLETE, SUBMITTED};
use crate::core::error::{Error, Result, Status};
use parking_lot::{Condvar, Mutex};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{channel, Sender};
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

/// A word of mapped, pinned host memory, as the host and a device see it.
#[derive(Clone, Copy)]
struct Slot {
    host: *const AtomicU32,
    dev: CUdeviceptr,
}

// SAFETY: the word is pinned host memory that lives for the process; it
// is only reached atomically.
unsafe impl Send for Slot {}

/// Free words for user events (pages of them are never given back).
static SLOTS: Mutex<Vec<Slot>> = Mutex::new(Vec::new());

fn take_slot(api: &Api) -> Result<Slot> {
    if let Some(s) = SLOTS.lock().pop() {
        return Ok(s);
    }
    const WORDS: usize = 1024;
    let mut host: *mut c_void = std::ptr::null_mut();
    let flags = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP;
    // SAFETY: `host` is a valid slot; a context is current.
    let rc = unsafe { (api.cuMemHostAlloc)(&mut host, WORDS * 4, flags) };
    check(api, rc, "cuMemHostAlloc")?;
    let mut dev: CUdeviceptr = 0;
    // SAFETY: `host` is mapped pinned memory just allocated.
    let rc = unsafe { (api.cuMemHostGetDevicePointer)(&mut dev, host, 0) };
    check(api, rc, "cuMemHostGetDevicePointer")?;
    let mut free = SLOTS.lock();
    for i in 1..WORDS {
        free.push(Slot {
            host: (host as *const AtomicU32).wrapping_add(i),
            dev: dev + 4 * i as u64,
        });
    }
    Ok(Slot {
        host: host as *const AtomicU32,
        dev,
    })
}

enum Kind {
    /// The end of a command: `end` recorded after it on `stream`, `start`
    /// before it (timed streams), and the host's clock when it was
    /// enqueued.
    Recorded {
        end: CUevent,
        start: CUevent,
        stream: Arc<Stream>,
        queued_ns: u64,
    },
    /// A user event.
    User {
        slot: Slot,
        done: AtomicBool,
        callbacks: Mutex<Vec<(EndCallback, usize)>>,
    },
}

/// An event, shared by the runtime's handle and pending callbacks.
pub struct Ev {
    kind: Kind,
}

// SAFETY: CUDA events are usable from any thread whose current context is
// theirs (each use makes it so); the rest is atomics and locks.
unsafe impl Send for Ev {}
// SAFETY: as above.
unsafe impl Sync for Ev {}

/// Signals user events' waiters.
static USER_DONE: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());

impl Ev {
    /// The event of a command just enqueued on `stream` (after `start`,
    /// when timed): records its end.
    pub fn record(
        api: &Api,
        stream: &Arc<Stream>,
        start: CUevent,
        queued_ns: u64,
    ) -> Result<EventH> {
        let mut end: CUevent = std::ptr::null_mut();
        let flags = if stream.timed {
            0
        } else {
            CU_EVENT_DISABLE_TIMING
        };
        // SAFETY: `end` is a valid slot; the stream's context is current.
        let rc = unsafe { (api.cuEventCreate)(&mut end, flags) };
        check(api, rc, "cuEventCreate")?;
        // SAFETY: a live event and stream of the current context.
        let rc = unsafe { (api.cuEventRecord)(end, stream.raw) };
        if let Err(e) = check(api, rc, "cuEventRecord") {
            // SAFETY: made above and not used elsewhere.
            unsafe { (api.cuEventDestroy)(end) };
            return Err(e);
        }
        let ev = Ev {
            kind: Kind::Recorded {
                end,
                start,
                stream: stream.clone(),
                queued_ns,
            },
        };
        Ok(EventH(Arc::into_raw(Arc::new(ev)) as usize))
    }

    /// A new user event, not complete.
    pub fn user(api: &Api) -> Result<EventH> {
        let slot = take_slot(api)?;
        // SAFETY: the slot's word is live pinned memory.
        unsafe { &*slot.host }.store(0, Ordering::SeqCst);
        let ev = Ev {
            kind: Kind::User {
                slot,
                done: AtomicBool::new(false),
                callbacks: Mutex::new(Vec::new()),
            },
        };
        Ok(EventH(Arc::into_raw(Arc::new(ev)) as usize))
    }
}

impl Drop for Ev {
    fn drop(&mut self) {
        match &self.kind {
            Kind::Recorded {
                end, start, stream, ..
            } => {
                let Ok(api) = api() else { return };
                if make_current(api, stream.dev.ctx).is_err() {
                    return;
                }
                // SAFETY: the events were made for this one and are
                // destroyed once.
                unsafe {
                    (api.cuEventDestroy)(*end);
                    if !start.is_null() {
                        (api.cuEventDestroy)(*start);
                    }
                }
            }
            Kind::User { slot, .. } => SLOTS.lock().push(*slot),
        }
    }
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
fn share(e: EventH) -> Arc<Ev> {
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

/// The status of `e` (see `backend::COMPLETE`).
pub fn status(e: EventH) -> Result<i32> {
    match &of(e).kind {
        Kind::Recorded { end, stream, .. } => {
            let api = api()?;
            make_current(api, stream.dev.ctx)?;
            // SAFETY: a live event.
            Ok(match unsafe { (api.cuEventQuery)(*end) } {
                CUDA_SUCCESS => COMPLETE,
                CUDA_ERROR_NOT_READY => SUBMITTED,
                code => failure(code),
            })
        }
        Kind::User { done, .. } => Ok(if done.load(Ordering::Acquire) {
            COMPLETE
        } else {
            SUBMITTED
        }),
    }
}

/// Waits for `e`: 0, or its failure status.
pub fn wait(e: EventH) -> Result<i32> {
    match &of(e).kind {
        Kind::Recorded { end, stream, .. } => {
            let api = api()?;
            make_current(api, stream.dev.ctx)?;
            // SAFETY: a live event.
            Ok(match unsafe { (api.cuEventSynchronize)(*end) } {
                CUDA_SUCCESS => 0,
                code => failure(code),
            })
        }
        Kind::User { done, .. } => {
            let mut g = USER_DONE.0.lock();
            while !done.load(Ordering::Acquire) {
                USER_DONE.1.wait(&mut g);
            }
            Ok(0)
        }
    }
}

/// Completes user event `e`: streams waiting for it go on, and its
/// callbacks run on this thread.
pub fn complete(e: EventH) -> Result<()> {
    let Kind::User {
        slot,
        done,
        callbacks,
    } = &of(e).kind
    else {
        return Err(Error::invalid(
            "only a user event can be completed by the host",
        ));
    };
    if done.swap(true, Ordering::AcqRel) {
        return Err(Error::new(
            Status::InvalidOperation,
            "the user event was already completed",
        ));
    }
    // SAFETY: the slot's word is live pinned memory.
    unsafe { &*slot.host }.store(1, Ordering::SeqCst);
    {
        let _g = USER_DONE.0.lock();
        USER_DONE.1.notify_all();
    }
    let list = std::mem::take(&mut *callbacks.lock());
    for (f, user) in list {
        // SAFETY: the runtime registered `f` with `user` for this event.
        unsafe { f(e.0 as *mut c_void, COMPLETE, user as *mut c_void) };
    }
    Ok(())
}

/// Makes `stream` wait for `e` before what is enqueued next.
pub fn wait_on(api: &Api, stream: CUstream, e: EventH) -> Result<()> {
    match &of(e).kind {
        Kind::Recorded { end, .. } => {
            // SAFETY: a live event and stream; the stream's context is
            // current (events of other devices are waited on across them).
            let rc = unsafe { (api.cuStreamWaitEvent)(stream, *end, 0) };
            check(api, rc, "cuStreamWaitEvent")
        }
        Kind::User { slot, done, .. } => {
            if done.load(Ordering::Acquire) {
                return Ok(());
            }
            // SAFETY: the slot is mapped host memory reachable by every
            // device; the stream waits until the host writes 1.
            let rc =
                unsafe { (api.cuStreamWaitValue32)(stream, slot.dev, 1, CU_STREAM_WAIT_VALUE_GEQ) };
            check(api, rc, "cuStreamWaitValue32")
        }
    }
}

/// A callback waiting to be called on the back end's thread.
struct Pending {
    ev: Arc<Ev>,
    handle: usize,
    f: EndCallback,
    user: usize,
}

/// The channel to the callback thread, started on first use; `None` if
/// the thread could not be started.
fn callbacks() -> Option<&'static Mutex<Sender<Pending>>> {
    static TX: OnceLock<Option<Mutex<Sender<Pending>>>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = channel::<Pending>();
        let spawned = std::thread::Builder::new()
            .name("syrah-cuda-callbacks".into())
            .spawn(move || {
                for p in rx {
                    let st = match &p.ev.kind {
                        Kind::Recorded { .. } => status(EventH(p.handle)).unwrap_or(COMPLETE),
                        Kind::User { .. } => COMPLETE,
                    };
                    // SAFETY: the runtime registered `f` with `user` for
                    // this event, which `p.ev` keeps alive.
                    unsafe { (p.f)(p.handle as *mut c_void, st, p.user as *mut c_void) };
                }
            });
        spawned.ok().map(|_| Mutex::new(tx))
    })
    .as_ref()
}

fn no_thread() -> Error {
    Error::new(
        Status::OutOfHostMemory,
        "the CUDA back end could not start its callback thread",
    )
}

unsafe extern "C" fn stream_reached(user: *mut c_void) {
    // SAFETY: `user` is the Box made in `on_end`, given to exactly one
    // host function.
    let p = unsafe { Box::from_raw(user as *mut Pending) };
    // No CUDA call here: the callback thread takes it from now on (it
    // exists, or `on_end` would not have launched this).
    if let Some(tx) = callbacks() {
        let _ = tx.lock().send(*p);
    }
}

/// Calls `f(e, status, user)` once `e` has ended.
pub fn on_end(e: EventH, f: EndCallback, user: *mut c_void) -> Result<()> {
    let tx = callbacks().ok_or_else(no_thread)?;
    match &of(e).kind {
        Kind::Recorded { stream, .. } => {
            let api = api()?;
            make_current(api, stream.dev.ctx)?;
            let p = Box::into_raw(Box::new(Pending {
                ev: share(e),
                handle: e.0,
                f,
                user: user as usize,
            }));
            // SAFETY: a live stream; the host function owns `p` once it
            // runs, after everything before it on the stream.
            let rc =
                unsafe { (api.cuLaunchHostFunc)(stream.raw, stream_reached, p as *mut c_void) };
            if rc != CUDA_SUCCESS {
                // SAFETY: the launch failed, so `p` is still ours.
                drop(unsafe { Box::from_raw(p) });
            }
            check(api, rc, "cuLaunchHostFunc")
        }
        Kind::User {
            done,
            callbacks: list,
            ..
        } => {
            let mut l = list.lock();
            if done.load(Ordering::Acquire) {
                drop(l);
                let _ = tx.lock().send(Pending {
                    ev: share(e),
                    handle: e.0,
                    f,
                    user: user as usize,
                });
            } else {
                l.push((f, user as usize));
            }
            Ok(())
        }
    }
}

/// Timestamp `which` of `e`, a command of a timed stream.
pub fn timestamp(e: EventH, which: Stamp) -> Result<u64> {
    let Kind::Recorded {
        end,
        start,
        stream,
        queued_ns,
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

/// The start event of a command about to be enqueued on a timed stream
/// (null on others), and the host's clock.
pub fn begin(api: &Api, stream: &Stream) -> Result<(CUevent, u64)> {
    let now = host_ns();
    if !stream.timed {
        return Ok((std::ptr::null_mut(), now));
    }
    let mut start: CUevent = std::ptr::null_mut();
    // SAFETY: `start` is a valid slot; the stream's context is current.
    let rc = unsafe { (api.cuEventCreate)(&mut start, 0) };
    check(api, rc, "cuEventCreate")?;
    // SAFETY: a live event and stream.
    let rc = unsafe { (api.cuEventRecord)(start, stream.raw) };
    if let Err(e) = check(api, rc, "cuEventRecord") {
        // SAFETY: made above, used nowhere else.
        unsafe { (api.cuEventDestroy)(start) };
        return Err(e);
    }
    Ok((start, now))
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
