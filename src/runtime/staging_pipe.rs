//! The pipeline of a staged copy: the pool of copy threads, and the pieces
//! and chunks they fill or drain in order while the device copies the
//! previous chunks.

use crate::core::error::{Error, Result, Status};
use crate::core::staging::Plan;
use crate::opencl::ffi::*;
use crate::opencl::loader::{api, check};
use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Which way a staged copy goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    ToDevice,
    ToHost,
}

/// Enqueues a copy of `len` bytes from the third argument to the second on
/// the queue given, setting the event.
pub(crate) type DeviceCopy = dyn Fn(cl_command_queue, *mut c_void, *const c_void, usize, &mut cl_event) -> Result<()>
    + Send
    + Sync;

/// Staged copies started so far.
pub(crate) static COPIES: AtomicUsize = AtomicUsize::new(0);

/// When the last copy ended (`linger::now_us`); 0 while one runs.
pub(crate) static ENDED_AT: AtomicU64 = AtomicU64::new(0);

/// Another copy often follows soon. Once this copy's threads have no
/// pieces left, they keep asking whether one has started: while the device
/// finishes this copy's last chunks (hundreds of µs), then for the linger
/// time. The pool's own threads would sleep after a few yields, and waking
/// them costs the next copy tens of µs (on an H100 host, 4 MiB copies
/// towards the device went from 23-24 to 29-30 GB/s). At most
/// `DRAIN_LIMIT` beyond the linger time in all, should the device stall,
/// and not once the host is found crowded (see `linger::Spin`).
pub(crate) fn linger_for_next(pool: &'static rayon::ThreadPool) {
    const DRAIN_LIMIT: u64 = 5_000;
    let limit = super::linger::linger().as_micros() as u64;
    if limit == 0 {
        return;
    }
    let seen = COPIES.load(Ordering::Acquire);
    pool.spawn_broadcast(move |_| {
        let mut spin =
            super::linger::Spin::new(std::time::Duration::from_micros(limit + DRAIN_LIMIT));
        loop {
            if COPIES.load(Ordering::Acquire) != seen {
                return;
            }
            let ended = ENDED_AT.load(Ordering::Acquire);
            if ended != 0 && super::linger::now_us() >= ended + limit {
                return;
            }
            if !spin.again() {
                return;
            }
        }
    });
}

/// The threads that copy pieces, besides the one running the copy: three
/// quarters of the host's cores (at least one). The rest stay free for the
/// threads that hand chunks to the driver, the driver's own and the
/// application's: a copying thread descheduled in the middle of a piece
/// holds up its chunk, and every chunk after it once the ring is full.
pub(crate) fn copiers() -> Result<&'static rayon::ThreadPool> {
    static POOL: OnceLock<std::result::Result<rayon::ThreadPool, String>> = OnceLock::new();
    POOL.get_or_init(|| crate::core::staging::copy_pool("syrah-copy").map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|why| {
            Error::new(
                Status::OutOfHostMemory,
                format!("no thread for staged copies could be started: {why}"),
            )
        })
}

/// The status of a command, asked of the driver.
pub(crate) fn event_status(ev: cl_event) -> Result<cl_int> {
    crate::opencl::info::event_scalar(api()?, ev, CL_EVENT_COMMAND_EXECUTION_STATUS)
}

/// Asks about a command until it has ended; its final status (waiting
/// for it instead where the driver cannot be asked).
pub(crate) fn finished(ev: cl_event) -> Result<cl_int> {
    loop {
        match event_status(ev) {
            Ok(s) if s <= CL_COMPLETE => return Ok(s),
            Ok(_) => std::thread::yield_now(),
            Err(_) => {
                // SAFETY: a live event owned by the caller.
                let rc = unsafe { (api()?.clWaitForEvents)(1, &ev) };
                check(rc, "clWaitForEvents on a staged chunk")?;
                return event_status(ev);
            }
        }
    }
}

/// One staged copy in progress, shared by the threads doing it.
pub(crate) struct Pipe {
    pub(crate) way: Way,
    pub(crate) dst: usize,
    pub(crate) src: usize,
    pub(crate) plan: Plan,
    /// The next piece to take.
    pub(crate) next: AtomicUsize,
    /// Per chunk: pieces still to copy, earlier chunks still to leave its
    /// ring space (towards the host), its device copy's event (null until
    /// issued), whether that copy is known to have finished, and whether a
    /// thread is asking the driver about it.
    pub(crate) left: Vec<AtomicUsize>,
    pub(crate) blocked: Vec<AtomicUsize>,
    pub(crate) events: Vec<AtomicPtr<_cl_event>>,
    pub(crate) done: Vec<AtomicBool>,
    /// Per chunk, when its device copy was enqueued, for a trace.
    pub(crate) issued_ns: Vec<AtomicU64>,
    pub(crate) asking: Vec<AtomicBool>,
    pub(crate) failed: AtomicBool,
    pub(crate) error: Mutex<Option<Error>>,
    /// The ring's host address.
    pub(crate) ring: usize,
    pub(crate) queue: cl_command_queue,
    pub(crate) device: Arc<DeviceCopy>,
    /// Threads between asking for a piece and being done with it, and
    /// where the copy's own thread waits for there to be none.
    pub(crate) active: AtomicUsize,
    pub(crate) idle: (Mutex<()>, parking_lot::Condvar),
}

// SAFETY: the queue is thread-safe; each chunk's part of the pinned ring
// is written by one thread per piece, and handed between the host and the
// device through the chunk counters and events; the rest is atomic or
// locked.
unsafe impl Sync for Pipe {}

// SAFETY: as above; a thread holding the pipe after the copy ended only
// asks for a piece and finds none.
unsafe impl Send for Pipe {}

impl Pipe {
    pub(crate) fn fail(&self, e: Error) {
        let mut first = self.error.lock();
        if first.is_none() {
            *first = Some(e);
        }
        self.failed.store(true, Ordering::Release);
    }

    /// Enqueues the device copy of chunk `k` (towards the device: from its
    /// ring space, just filled; towards the host: into its ring space,
    /// free).
    pub(crate) fn issue(&self, k: usize) {
        if let Some(t) = super::trace::tracer() {
            self.issued_ns[k].store(t.now_ns(), Ordering::Relaxed);
        }
        let (off, len) = self.plan.chunks[k];
        let host = (self.ring + self.plan.ring_at(k)) as *mut u8;
        let mut ev: cl_event = std::ptr::null_mut();
        let r = match self.way {
            Way::ToDevice => (self.device)(
                self.queue,
                (self.dst + off) as *mut c_void,
                host.cast(),
                len,
                &mut ev,
            ),
            Way::ToHost => (self.device)(
                self.queue,
                host.cast(),
                (self.src + off) as *const c_void,
                len,
                &mut ev,
            ),
        }
        .and_then(|()| {
            // SAFETY: the stager's live queue.
            check(unsafe { (api()?.clFlush)(self.queue) }, "clFlush")
        });
        if !ev.is_null() {
            self.events[k].store(ev, Ordering::Release);
        }
        if let Err(e) = r {
            self.fail(e);
        }
    }

    /// Waits until chunk `k`'s device copy has finished; false if the copy
    /// as a whole failed meanwhile. One thread at a time asks the driver.
    pub(crate) fn wait(&self, k: usize) -> bool {
        loop {
            if self.done[k].load(Ordering::Acquire) {
                return true;
            }
            if self.failed.load(Ordering::Acquire) {
                return false;
            }
            let ev = self.events[k].load(Ordering::Acquire);
            if !ev.is_null()
                && self.asking[k]
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                match event_status(ev) {
                    Ok(s) if s < 0 => self.fail(Error::opencl(s, "a staged chunk copy")),
                    Ok(CL_COMPLETE) => self.done[k].store(true, Ordering::Release),
                    Ok(_) => {}
                    Err(e) => self.fail(e),
                }
                self.asking[k].store(false, Ordering::Release);
            }
            std::thread::yield_now();
        }
    }

    /// One thread's share: pieces, taken in order until none is left.
    pub(crate) fn work(&self) {
        while !self.failed.load(Ordering::Acquire) {
            // Counted before asking, so that once the copy's own thread
            // has seen no piece left and no thread active, none can still
            // be copying one (see `settle`).
            self.active.fetch_add(1, Ordering::SeqCst);
            let p = self.next.fetch_add(1, Ordering::SeqCst);
            let go_on = p < self.plan.pieces() && self.piece(p);
            if self.active.fetch_sub(1, Ordering::SeqCst) == 1 {
                let _held = self.idle.0.lock();
                self.idle.1.notify_all();
            }
            if !go_on {
                return;
            }
        }
    }

    /// Waits, on the copy's own thread, until no other thread holds a
    /// piece or can take one: afterwards nothing touches the caller's
    /// memory or the ring, and every chunk that was handed to the device
    /// has its event.
    pub(crate) fn settle(&self) {
        self.next.fetch_max(self.plan.pieces(), Ordering::SeqCst);
        if super::linger::spin_until(|| self.active.load(Ordering::SeqCst) == 0) {
            return;
        }
        let mut held = self.idle.0.lock();
        while self.active.load(Ordering::SeqCst) != 0 {
            self.idle.1.wait(&mut held);
        }
    }

    /// Copies piece `p` and hands its chunk on if it was the chunk's
    /// last; false if the copy as a whole failed meanwhile.
    pub(crate) fn piece(&self, p: usize) -> bool {
        let (k, off, len) = self.plan.piece(p);
        let ring = self.ring + self.plan.ring_at(k) + off;
        let at = self.plan.chunks[k].0 + off;
        match self.way {
            Way::ToDevice => {
                // The earlier chunks in this ring space must have left
                // it. Each is asked about: chunks are handed to the
                // device as they fill, not necessarily in order.
                if !self.plan.before(k).all(|j| self.wait(j)) {
                    return false;
                }
                let (from, to) = ((self.src + at) as *const u8, ring as *mut u8);
                // SAFETY: the piece lies inside the source (caller's
                // guarantee) and inside the ring (the plan), where no
                // device copy reads now; no other thread has this piece.
                unsafe {
                    if self.plan.near_end(at) {
                        crate::core::stream::copy_streaming(to, from, len)
                    } else {
                        std::ptr::copy_nonoverlapping(from, to, len)
                    }
                };
            }
            Way::ToHost => {
                if !self.wait(k) {
                    return false;
                }
                // SAFETY: as above; the chunk's device copy into the
                // ring has finished.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        ring as *const u8,
                        (self.dst + at) as *mut u8,
                        len,
                    )
                };
            }
        }
        if self.left[k].fetch_sub(1, Ordering::AcqRel) == 1 {
            match self.way {
                Way::ToDevice => self.issue(k),
                Way::ToHost => {
                    for j in self.plan.reused_by(k) {
                        if self.blocked[j].fetch_sub(1, Ordering::AcqRel) == 1 {
                            self.issue(j);
                        }
                    }
                }
            }
        }
        true
    }
}
