//! The CUDA back end's contexts and streams, and which CUDA context is
//! current on each thread: a Syrah context is the primary contexts of its
//! devices, and a Syrah queue lane is a stream of one of them, with a
//! reference event that timestamps are measured from, and the commands
//! held back on the host until what they wait for has happened. Idle
//! streams of dropped queues are kept for the runtime's transfer queues,
//! in a store of kept driver handles that ended commands' events use too.
//!
//! CUDA handles are opaque identifiers that only the driver interprets,
//! so passing them on is not a dereference by this code.

#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::loader::{
    api, check, Api, CUcontext, CUevent, CUstream, CUDA_SUCCESS, CU_STREAM_NON_BLOCKING,
};
use crate::backend::QueueH;
use crate::core::error::{Error, Result, Status};
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

thread_local! {
    /// The context this thread last made current.
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// Makes `ctx` current on this thread (a CUDA call is only made when it
/// is not already).
pub fn make_current(api: &Api, ctx: CUcontext) -> Result<()> {
    if CURRENT.with(Cell::get) == ctx as usize {
        return Ok(());
    }
    // SAFETY: `ctx` is a retained primary context.
    let rc = unsafe { (api.cuCtxSetCurrent)(ctx) };
    check(api, rc, "cuCtxSetCurrent")?;
    CURRENT.with(|c| c.set(ctx as usize));
    Ok(())
}

/// The nanoseconds since the process's first use of this clock: the
/// host's reading that device timestamps are put on.
pub fn host_ns() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A device of a context: its ordinal and retained primary context.
#[derive(Clone, Copy, Debug)]
pub struct DevCtx {
    pub ordinal: i32,
    pub ctx: CUcontext,
}

/// A Syrah context on the CUDA back end.
pub struct Ctx {
    pub devices: Vec<DevCtx>,
}

// SAFETY: CUDA contexts are process-wide handles usable from any thread.
unsafe impl Send for Ctx {}
// SAFETY: as above; the list is not changed after creation.
unsafe impl Sync for Ctx {}

/// Devices whose primary context the back end keeps for the process: a
/// primary context released to no reference is destroyed with every
/// allocation made in it, and the back end's pinned blocks (user events'
/// words, copies' bounce blocks) outlive any one Syrah context.
static KEPT: parking_lot::Mutex<Vec<i32>> = parking_lot::Mutex::new(Vec::new());

/// The first primary context the back end kept, for calls that need one
/// current but serve every context (0 before any).
static ANY: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A primary context kept for the process, if any was made yet.
pub fn any_context() -> Option<CUcontext> {
    match ANY.load(Ordering::Acquire) {
        0 => None,
        c => Some(c as CUcontext),
    }
}

impl Ctx {
    /// Retains the primary context of each of `ordinals`.
    pub fn create(ordinals: &[i32]) -> Result<Ctx> {
        let api = api()?;
        let mut devices = Vec::with_capacity(ordinals.len());
        for &ordinal in ordinals {
            let mut kept = KEPT.lock();
            if !kept.contains(&ordinal) {
                let mut ctx: CUcontext = std::ptr::null_mut();
                // SAFETY: `ctx` is a valid slot; `ordinal` came from
                // discovery. This reference is never given back.
                let rc = unsafe { (api.cuDevicePrimaryCtxRetain)(&mut ctx, ordinal) };
                check(api, rc, "cuDevicePrimaryCtxRetain")?;
                kept.push(ordinal);
                let _ = ANY.compare_exchange(0, ctx as usize, Ordering::AcqRel, Ordering::Acquire);
            }
            drop(kept);
            let mut ctx: CUcontext = std::ptr::null_mut();
            // SAFETY: `ctx` is a valid slot; `ordinal` came from discovery.
            let rc = unsafe { (api.cuDevicePrimaryCtxRetain)(&mut ctx, ordinal) };
            if let Err(e) = check(api, rc, "cuDevicePrimaryCtxRetain") {
                Ctx { devices }.release(api);
                return Err(e);
            }
            devices.push(DevCtx { ordinal, ctx });
        }
        Ok(Ctx { devices })
    }

    /// The device `ordinal` of this context.
    pub fn device(&self, ordinal: i32) -> Option<DevCtx> {
        self.devices.iter().copied().find(|d| d.ordinal == ordinal)
    }

    fn release(&self, api: &Api) {
        for d in &self.devices {
            // SAFETY: retained once in `create`, released once here.
            unsafe { (api.cuDevicePrimaryCtxRelease)(d.ordinal) };
        }
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        if let Ok(api) = api() {
            self.release(api);
        }
    }
}

/// A stream, destroyed when the last of its queue and its commands'
/// events lets go of it.
pub struct Stream {
    pub raw: CUstream,
    pub dev: DevCtx,
    pub timed: bool,
    /// Recorded when the stream was made (timed streams): timestamps are
    /// `base_ns` plus the time from it.
    pub reference: CUevent,
    pub base_ns: u64,
    /// The stream's end: held while a command is enqueued, so that
    /// "nothing after this command yet" can be known and kept.
    pub tail: Mutex<Tail>,
    /// Signalled when the last held command has gone to the stream.
    drained: Condvar,
    /// The latest command (by `Tail::count`) known to have completed:
    /// the stream runs its commands in order, so all before it have too.
    done: Arc<AtomicU64>,
    /// The latest command before whose end ordinary host memory may still
    /// change: one that writes it, or one that waits for a command of
    /// another stream (which may write it, or wait for one that does).
    host_changes: AtomicU64,
    /// The failure of a held command without an event, not yet reported:
    /// its status and what failed. The stream's next event reports it;
    /// until then each wait for the stream fails.
    lost: Mutex<Option<(i32, String)>>,
    /// Whether `lost` holds a failure: each command with an event asks.
    any_lost: AtomicBool,
}

/// What has been given to a stream, and what waits on the host for it.
#[derive(Default)]
pub struct Tail {
    /// How many commands went to the stream.
    pub count: u64,
    /// Commands not yet given to the stream, in order: the first waits
    /// for something not yet on a device (a user event, or a command
    /// itself held).
    pub held: VecDeque<Box<dyn Held>>,
}

/// A command held on the host.
pub trait Held: Send {
    /// Whether everything it waits for is now on a device or done.
    fn ready(&self) -> bool;
    /// Enqueues it on `s` (current, its tail held) as command `seq`;
    /// streams that may now go on are added to `woken`.
    fn run(self: Box<Self>, api: &Api, s: &Arc<Stream>, seq: u64, woken: &mut Vec<Arc<Stream>>);
}

// SAFETY: CUDA streams and events may be used from any thread whose
// current context is theirs, which every user makes so first.
unsafe impl Send for Stream {}
// SAFETY: as above; the fields but `tail` (a lock) are not changed after
// creation.
unsafe impl Sync for Stream {}

impl Stream {
    /// The stream behind queue handle `q`, borrowed for the handle's
    /// lifetime.
    pub fn of(q: QueueH) -> &'static Stream {
        // SAFETY: made by Arc::into_raw when the queue was created; the
        // runtime's reference keeps it alive while it uses the handle.
        unsafe { &*(q.0 as *const Stream) }
    }

    /// Another reference to the stream behind `q`.
    pub fn shared(q: QueueH) -> Arc<Stream> {
        // SAFETY: as in `of`; the count is raised before a new Arc.
        unsafe {
            Arc::increment_strong_count(q.0 as *const Stream);
            Arc::from_raw(q.0 as *const Stream)
        }
    }

    /// A new non-blocking stream of `dev`; with `spare`, an idle one a
    /// dropped queue left where there is one.
    pub fn create(dev: DevCtx, timed: bool, spare: bool) -> Result<Arc<Stream>> {
        let api = api()?;
        make_current(api, dev.ctx)?;
        let kept = spare.then(|| SPARE.take(dev.ctx as usize)).flatten();
        let mut raw = kept.map_or(std::ptr::null_mut(), |h| h as CUstream);
        if raw.is_null() {
            // SAFETY: `raw` is a valid slot; the context is current.
            let rc = unsafe { (api.cuStreamCreate)(&mut raw, CU_STREAM_NON_BLOCKING) };
            check(api, rc, "cuStreamCreate")?;
        }
        let mut s = Stream {
            raw,
            dev,
            timed,
            reference: std::ptr::null_mut(),
            base_ns: 0,
            tail: Mutex::new(Tail::default()),
            drained: Condvar::new(),
            done: Arc::new(AtomicU64::new(0)),
            host_changes: AtomicU64::new(0),
            lost: Mutex::new(None),
            any_lost: AtomicBool::new(false),
        };
        if timed {
            let mut ev: CUevent = std::ptr::null_mut();
            // SAFETY: `ev` is a valid slot; default flags keep timing.
            let rc = unsafe { (api.cuEventCreate)(&mut ev, 0) };
            check(api, rc, "cuEventCreate")?;
            s.reference = ev;
            // SAFETY: a live event and stream of the current context.
            let rc = unsafe { (api.cuEventRecord)(ev, raw) };
            check(api, rc, "cuEventRecord")?;
            // SAFETY: as above.
            let rc = unsafe { (api.cuEventSynchronize)(ev) };
            check(api, rc, "cuEventSynchronize")?;
            s.base_ns = host_ns();
        }
        Ok(Arc::new(s))
    }

    /// Whether command `seq` is known to have completed.
    pub fn reached(&self, seq: u64) -> bool {
        seq <= self.done.load(Ordering::Acquire)
    }

    /// Notes that command `seq` has completed.
    pub fn passed(&self, seq: u64) {
        self.done.fetch_max(seq, Ordering::AcqRel);
    }

    /// The latest command known to have completed, shared: it may be read
    /// after the stream is gone.
    pub fn progress(&self) -> Arc<AtomicU64> {
        self.done.clone()
    }

    /// Notes that ordinary host memory may change until command `seq`
    /// has ended: it writes that memory, or waits for a command of
    /// another stream (which may write it, or wait for one that does).
    pub fn changes_host(&self, seq: u64) {
        self.host_changes.fetch_max(seq, Ordering::AcqRel);
    }

    /// Whether ordinary host memory can no longer change through the
    /// commands before the one being enqueued: those that write it, and
    /// those that wait for other streams, are known to have completed.
    pub fn host_settled(&self) -> bool {
        let last = self.host_changes.load(Ordering::Acquire);
        last == 0 || self.reached(last)
    }

    /// The stream's tail, locked. Another thread holds it only while it
    /// enqueues a few commands (microseconds of driver calls), so the
    /// caller keeps trying for a while before it sleeps: waking a sleeping
    /// thread costs more than that on many hosts.
    pub fn lock_tail(&self) -> MutexGuard<'_, Tail> {
        const TRY_FOR: std::time::Duration = std::time::Duration::from_micros(50);
        if let Some(t) = self.tail.try_lock() {
            return t;
        }
        let since = Instant::now();
        loop {
            for _ in 0..64 {
                std::hint::spin_loop();
                if let Some(t) = self.tail.try_lock() {
                    return t;
                }
            }
            if since.elapsed() > TRY_FOR {
                return self.tail.lock();
            }
        }
    }

    /// Gives held commands whose turn has come to their streams: this
    /// one's, and those of streams waiting for what they record.
    pub fn pump(self: &Arc<Self>) {
        let Ok(api) = api() else { return };
        let mut work = vec![self.clone()];
        while let Some(s) = work.pop() {
            if make_current(api, s.dev.ctx).is_err() {
                continue;
            }
            let mut t = s.lock_tail();
            while t.held.front().is_some_and(|h| h.ready()) {
                let Some(h) = t.held.pop_front() else { break };
                t.count += 1;
                let seq = t.count;
                h.run(api, &s, seq, &mut work);
            }
            if t.held.is_empty() {
                s.drained.notify_all();
            }
        }
    }

    /// Notes that a held command without an event failed (status `code`,
    /// `why` saying what): nobody can be told now. The first such failure
    /// stays until [`Stream::take_lost`].
    pub fn lose(&self, code: i32, why: String) {
        self.lost.lock().get_or_insert((code, why));
        self.any_lost.store(true, Ordering::Release);
    }

    /// The failure noted by [`Stream::lose`], taken by the event that
    /// reports it.
    pub fn take_lost(&self) -> Option<(i32, String)> {
        if !self.any_lost.load(Ordering::Acquire) {
            return None;
        }
        let mut lost = self.lost.lock();
        self.any_lost.store(false, Ordering::Release);
        lost.take()
    }

    /// Waits until no command is held for this stream, then for the
    /// stream itself. A held command that failed unreported fails the
    /// wait (and stays for the stream's next event to report).
    pub fn drain(&self) -> Result<()> {
        let upto = {
            let mut t = self.tail.lock();
            while !t.held.is_empty() {
                self.drained.wait(&mut t);
            }
            t.count
        };
        let api = api()?;
        make_current(api, self.dev.ctx)?;
        // SAFETY: a live stream of the current context.
        let rc = unsafe { (api.cuStreamSynchronize)(self.raw) };
        check(api, rc, "cuStreamSynchronize")?;
        if let Some((_, why)) = self.lost.lock().as_ref() {
            return Err(Error::new(
                Status::ExecutionFailed,
                format!("a command enqueued without an event failed: {why}"),
            ));
        }
        // What was given to the stream before the wait has completed.
        self.passed(upto);
        Ok(())
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let Ok(api) = api() else { return };
        if make_current(api, self.dev.ctx).is_err() {
            return;
        }
        // SAFETY: the stream and its reference event were made in
        // `create` and are destroyed (or the stream kept as a spare) once;
        // work still on the stream completes first.
        unsafe {
            if !self.reference.is_null() {
                (api.cuEventDestroy)(self.reference);
            }
            // An idle stream is kept for a later transfer queue: nothing
            // of this queue's can then still be on it.
            if (api.cuStreamQuery)(self.raw) == CUDA_SUCCESS
                && SPARE.keep(self.dev.ctx as usize, self.raw as usize)
            {
                return;
            }
            (api.cuStreamDestroy)(self.raw);
        }
    }
}

/// Driver handles kept for reuse, each with the key that tells which
/// later use it suits (its context, and whatever else sets it apart), at
/// most `max` of them. Primary contexts are never given back, so a kept
/// handle stays valid.
pub struct Spares<K: Copy + PartialEq> {
    kept: Mutex<Vec<(K, usize)>>,
    max: usize,
}

impl<K: Copy + PartialEq> Spares<K> {
    pub const fn new(max: usize) -> Spares<K> {
        Spares {
            kept: Mutex::new(Vec::new()),
            max,
        }
    }

    /// A kept handle for `key`, the one kept last.
    pub fn take(&self, key: K) -> Option<usize> {
        let mut kept = self.kept.lock();
        let i = kept.iter().rposition(|&(k, _)| k == key)?;
        Some(kept.swap_remove(i).1)
    }

    /// Keeps `handle` for `key`; false where enough are kept already.
    pub fn keep(&self, key: K, handle: usize) -> bool {
        let mut kept = self.kept.lock();
        if kept.len() >= self.max {
            return false;
        }
        kept.push((key, handle));
        true
    }
}

/// Idle streams of dropped queues, by context, for the runtime's transfer
/// queues: those come and go with buffers, and a new stream costs the
/// driver microseconds each time.
static SPARE: Spares<usize> = Spares::new(32);

#[cfg(test)]
mod tests {
    use super::Spares;

    #[test]
    fn spares_give_back_what_was_kept_for_the_key_and_hold_at_most_max() {
        let s: Spares<(usize, bool)> = Spares::new(3);
        assert!(s.keep((1, true), 10));
        assert!(s.keep((2, true), 20));
        assert!(s.keep((1, false), 30));
        assert!(!s.keep((1, true), 40), "a fourth is refused");
        assert_eq!(s.take((1, false)), Some(30));
        assert_eq!(s.take((1, false)), None);
        assert_eq!(s.take((3, true)), None);
        assert!(s.keep((1, true), 50));
        assert_eq!(s.take((1, true)), Some(50), "the one kept last first");
        assert_eq!(s.take((1, true)), Some(10));
        assert_eq!(s.take((2, true)), Some(20));
        assert_eq!(s.take((2, true)), None);
    }
}
