//! Copies between ordinary host memory and device memory through pinned
//! chunks (see `core::staging`). One `Stager` per device of a context owns
//! the pinned ring and an in-order OpenCL queue of its own, so its copies
//! wait for nothing but each other. A staged copy runs as an internal host
//! job once its dependencies are met: host threads copy between the user's
//! memory and a chunk while the device copies the previous chunks.

use super::context::Context;
use super::event::Event;
use super::platform::Device;
use super::queue::{Keep, Queue};
use super::staging_pipe::{
    copiers, finished, linger_for_next, DeviceCopy, Pipe, Way, COPIES, ENDED_AT,
};
use crate::backend::HostEnd;
use crate::core::error::{Error, Result, Status};
use crate::core::route::Route;
use crate::core::staging::{Plan, Staging, RING};
use crate::opencl::ffi::*;
use crate::opencl::loader::{api, check};
use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// The pinned ring and queue of one device of a context.
pub struct Stager {
    queue: cl_command_queue,
    ring: cl_mem,
    host: *mut u8,
    device: &'static Device,
    /// The queue's timeline in a trace (see `trace::Tracer::staging_done`).
    lane: u64,
}

// SAFETY: OpenCL objects are thread-safe; the pinned host memory is only
// used by a copy holding the stager's lock (and the device).
unsafe impl Send for Stager {}

impl Stager {
    fn create(ctx: &Context, device: &'static Device) -> Result<Stager> {
        let api = api()?;
        let mut err = CL_SUCCESS;
        // With a trace, the device's copies are on it too.
        let props = if super::trace::timing() && device.profiling {
            CL_QUEUE_PROFILING_ENABLE
        } else {
            0
        };
        // SAFETY: live context and one of its devices; an in-order queue.
        let queue = unsafe {
            (api.clCreateCommandQueue)(
                crate::opencl::handles::cl_context_of(ctx.raw),
                crate::opencl::handles::cl_device_of(device.id),
                props,
                &mut err,
            )
        };
        if queue.is_null() || err != CL_SUCCESS {
            return Err(Error::opencl(err, "clCreateCommandQueue for staging"));
        }
        match super::pinned_blocks::map_pinned(
            crate::opencl::handles::cl_context_of(ctx.raw),
            queue,
            RING,
            "the pinned staging ring",
        ) {
            Ok((ring, host)) => Ok(Stager {
                queue,
                ring,
                host: host.cast(),
                device,
                lane: super::queue::next_lane_id(),
            }),
            Err(e) => {
                // SAFETY: the queue made above, released once.
                unsafe { (api.clReleaseCommandQueue)(queue) };
                Err(e)
            }
        }
    }

    /// Copies `size` bytes from `src` to `dst` through the ring; `device`
    /// copies `len` bytes between a chunk and device memory on a queue.
    /// The calling thread and every thread of the copy pool take pieces in
    /// order (see [`Plan`]); the thread that completes a chunk hands it to
    /// the device (towards the device) or lets the device reuse its ring
    /// space (towards the host). Returns once every device copy has
    /// finished. With a trace, each device copy is recorded as part of the
    /// command `of`.
    ///
    /// # Safety
    /// The host side must be valid for `size` bytes and not change while
    /// the copy runs; the device side must be a device allocation that
    /// `device` accepts for `size` bytes.
    unsafe fn copy(
        &mut self,
        way: Way,
        dst: usize,
        src: usize,
        size: usize,
        device: Arc<DeviceCopy>,
        of: u64,
    ) -> Result<()> {
        let api = api()?;
        // Towards the host the copy ends small (see `Plan`).
        let plan = Plan::new(size, way == Way::ToHost);
        let n = plan.chunks.len();
        let pipe = Arc::new(Pipe {
            way,
            dst,
            src,
            left: (0..n)
                .map(|k| AtomicUsize::new(plan.pieces_of(k)))
                .collect(),
            blocked: (0..n)
                .map(|k| AtomicUsize::new(plan.before(k).len()))
                .collect(),
            plan,
            next: AtomicUsize::new(0),
            events: (0..n)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            done: (0..n).map(|_| AtomicBool::new(false)).collect(),
            issued_ns: (0..n).map(|_| AtomicU64::new(0)).collect(),
            asking: (0..n).map(|_| AtomicBool::new(false)).collect(),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            ring: self.host as usize,
            queue: self.queue,
            device,
            active: AtomicUsize::new(0),
            idle: (Mutex::new(()), parking_lot::Condvar::new()),
        });
        // One task per pool thread, taken by whichever threads are free,
        // and not waited for: the copy ends once its pieces are done, not
        // once every task has run, so a thread held off its core holds
        // nothing up unless it holds a piece (in a build with time stamps
        // on an H100 host, a copy whose threads all had to arrive waited
        // 1.2 ms for one that came after the last chunk had gone to the
        // device; with every core busy with other processes, 4 MiB copies
        // took 12 ms). A task that starts after the copy took the last
        // piece touches nothing but the shared counters it holds a
        // reference to. Threads asleep are woken, a system call each (see
        // `linger_for_next`). Towards the device this thread hands the
        // tasks out itself, which brings the threads in soonest, then
        // copies pieces too. Towards the host it first hands the device
        // every chunk that finds its ring space free, a driver call each,
        // so a pool thread hands the tasks out meanwhile (on an H100 host:
        // 47-49 GB/s at 64 MiB against 46-48 with this thread doing it;
        // towards the device the relay cost 2-3 GB/s).
        let pool = copiers()?;
        let helpers = pool.current_num_threads();
        // Copy threads lingering after the last copy come back.
        COPIES.fetch_add(1, Ordering::AcqRel);
        ENDED_AT.store(0, Ordering::Release);
        match way {
            Way::ToDevice => {
                for _ in 0..helpers {
                    let p = pipe.clone();
                    pool.spawn(move || p.work());
                }
            }
            Way::ToHost => {
                let p = pipe.clone();
                pool.spawn(move || {
                    for _ in 1..helpers {
                        let p = p.clone();
                        pool.spawn(move || p.work());
                    }
                    p.work();
                });
                for k in (0..n).take_while(|&k| pipe.plan.before(k).is_empty()) {
                    pipe.issue(k);
                }
            }
        }
        pipe.work();
        pipe.settle();
        linger_for_next(pool);
        // Whatever happened, no device copy may outlive the call: the ring
        // is reused by the next copy. Asked about, as during the copy.
        for (k, ev) in pipe.events.iter().enumerate() {
            let ev = ev.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if ev.is_null() {
                continue;
            }
            let status = if pipe.done[k].load(Ordering::Acquire) {
                Ok(CL_COMPLETE)
            } else {
                finished(ev)
            };
            if let Some(t) = super::trace::tracer() {
                t.staging_done(
                    ev,
                    pipe.issued_ns[k].load(Ordering::Relaxed),
                    self.device,
                    self.lane,
                    of,
                    "chunk copy",
                    pipe.plan.chunks[k].1,
                    !matches!(status, Ok(CL_COMPLETE)),
                );
            }
            // SAFETY: releasing the copy's own reference once.
            unsafe { (api.clReleaseEvent)(ev) };
            match status {
                Ok(s) if s < 0 => pipe.fail(Error::opencl(s, "a staged chunk copy")),
                Ok(_) => {}
                Err(e) => pipe.fail(e),
            }
        }
        // The copy threads linger from here (see `linger_for_next`).
        ENDED_AT.store(super::linger::now_us().max(1), Ordering::Release);
        let error = pipe.error.lock().take();
        match error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Copies `size` bytes from `src` to `dst` as the driver does without
    /// staging, on the stager's queue, and returns once the copy has
    /// finished: the copy is timed (see `core::route`).
    ///
    /// # Safety
    /// As for [`Stager::copy`].
    unsafe fn copy_direct(
        &mut self,
        dst: usize,
        src: usize,
        size: usize,
        device: &DeviceCopy,
        of: u64,
    ) -> Result<()> {
        let api = api()?;
        let issued_ns = super::trace::tracer().map_or(0, |t| t.now_ns());
        let mut ev: cl_event = std::ptr::null_mut();
        let sent = device(
            self.queue,
            dst as *mut c_void,
            src as *const c_void,
            size,
            &mut ev,
        )
        .and_then(|()| {
            // SAFETY: the stager's live queue.
            check(unsafe { (api.clFlush)(self.queue) }, "clFlush")
        });
        if ev.is_null() {
            return sent.and(Err(Error::new(
                Status::Internal,
                "a direct copy was enqueued without an event",
            )));
        }
        // Asked about until it ends, as the staged chunks are: a thread
        // asleep in the driver's wait would wake late on a busy host, and
        // this copy is measured (see `core::route`).
        let status = finished(ev);
        if let Some(t) = super::trace::tracer() {
            t.staging_done(
                ev,
                issued_ns,
                self.device,
                self.lane,
                of,
                "direct copy",
                size,
                !matches!(status, Ok(CL_COMPLETE)),
            );
        }
        // SAFETY: the event just made, released once.
        unsafe { (api.clReleaseEvent)(ev) };
        sent?;
        match status? {
            s if s < 0 => Err(Error::opencl(s, "a direct copy instead of a staged one")),
            _ => Ok(()),
        }
    }
}

impl Drop for Stager {
    fn drop(&mut self) {
        let Ok(api) = api() else { return };
        // SAFETY: the ring was mapped once on this queue and is unmapped
        // and released once, after the unmap has finished; no copy uses it
        // any more (a copy returns only after its device copies have
        // finished). Then the stager's own queue is released.
        unsafe {
            (api.clEnqueueUnmapMemObject)(
                self.queue,
                self.ring,
                self.host.cast(),
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            );
            (api.clFinish)(self.queue);
            (api.clReleaseMemObject)(self.ring);
            (api.clReleaseCommandQueue)(self.queue);
        }
    }
}

impl Device {
    /// How a copy of `size` bytes between ordinary host memory and this
    /// device goes `way`.
    fn route(&self, way: Way, size: usize) -> Route {
        match self.staging {
            Staging::Off => Route::Direct,
            Staging::On => Route::Staged,
            Staging::Probe => Route::Probe,
            Staging::Auto => self.routes.lock()[way as usize].choose(size, super::linger::now_us()),
        }
    }

    /// Records what a copy by `route` achieved (see `core::route`).
    fn record_route(&self, way: Way, size: usize, route: Route, took: u64) {
        if self.staging == Staging::Auto {
            let now = super::linger::now_us();
            self.routes.lock()[way as usize].record(size, route, took, now);
        }
    }
}

impl Context {
    /// The stager of `device`, created at first use.
    fn stager(&self, device: &'static Device) -> Result<Arc<Mutex<Stager>>> {
        let mut all = self.stagers.lock();
        let kept = all
            .iter()
            .find(|(d, _)| std::ptr::eq(*d, device))
            .and_then(|(_, s)| s.clone().downcast::<Mutex<Stager>>().ok());
        if let Some(s) = kept {
            return Ok(s);
        }
        let s = Arc::new(Mutex::new(Stager::create(self, device)?));
        all.push((device, s.clone()));
        Ok(s)
    }
}

impl Queue {
    /// Which way a copy of `size` bytes from `src` to `dst` is staged, if
    /// it is, and whether it is staged or timed going straight to the
    /// driver: one side ordinary host memory, the other device memory of
    /// this context, on a device that stages, where the device's record
    /// does not show the driver doing better (see `core::route`).
    pub(crate) fn staged_way(
        &self,
        dst: *const c_void,
        src: *const c_void,
        size: usize,
    ) -> Option<(Way, Route)> {
        use crate::core::registry::AllocKind;
        if !crate::core::staging::worth_it(self.device.staging, size) {
            return None;
        }
        let kind = |p| self.ctx.pointer_kind(p).map(|k| k.0);
        match (kind(dst), kind(src)) {
            (Some(AllocKind::Device), None) => self.host_route(Way::ToDevice, src, size),
            (None, Some(AllocKind::Device)) => self.host_route(Way::ToHost, dst, size),
            _ => None,
        }
    }

    /// Whether a copy of `size` bytes `way` between the ordinary host
    /// memory at `host` and a memory object of this queue's device is
    /// staged or timed (as [`Queue::staged_way`] says for USM).
    pub(crate) fn staged_way_mem(
        &self,
        way: Way,
        host: *const c_void,
        size: usize,
    ) -> Option<(Way, Route)> {
        if !crate::core::staging::worth_it(self.device.staging, size) {
            return None;
        }
        self.host_route(way, host, size)
    }

    /// The route of a copy `way` of `size` bytes to or from `host` where it
    /// is not the driver's alone: none for pinned host memory, which moves
    /// at full speed as it is.
    fn host_route(&self, way: Way, host: *const c_void, size: usize) -> Option<(Way, Route)> {
        if self.ctx.is_pinned(host, size) {
            return None;
        }
        match self.device.route(way, size) {
            Route::Direct => None,
            route => Some((way, route)),
        }
    }

    /// A copy between host memory and device memory through pinned chunks
    /// (or straight to the driver, timed or not: `how.1`), after `deps`,
    /// as a host job; `keep` lives until it is done. With `mem`, the device
    /// side is that memory object, and its "address" (`dst` or `src`) is
    /// the byte offset in it.
    ///
    /// # Safety
    /// Both ranges must be valid for `size` bytes until the copy completes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn staged_copy(
        &self,
        (way, route): (Way, Route),
        dst: *mut c_void,
        src: *const c_void,
        size: usize,
        deps: &[Arc<Event>],
        what: &str,
        keep: Keep,
        mem: Option<crate::backend::MemH>,
    ) -> Result<Arc<Event>> {
        let me = self.me.upgrade().ok_or_else(|| {
            Error::new(Status::Internal, "a staged copy on a queue being dropped")
        })?;
        let stager = self.ctx.stager(self.device)?;
        let (d, s) = (dst as usize, src as usize);
        let q = me.clone();
        let job = move |ready_at: u64, done: &Event| -> Result<()> {
            let began = super::linger::now_us();
            let mut st = stager.lock();
            let on = q.clone();
            let device: Arc<DeviceCopy> = Arc::new(
                move |cq: cl_command_queue,
                      to: *mut c_void,
                      from: *const c_void,
                      len: usize,
                      ev: &mut cl_event| {
                    // SAFETY: `ev` is a live slot for the copy's event.
                    let slot = unsafe { crate::opencl::driver::event_slot(ev) };
                    let cq = crate::opencl::driver::queue_h(cq);
                    let Some(m) = mem else {
                        return on.copy_cmd(cq, to, from, len, HostEnd::Unknown, &[], slot);
                    };
                    // The device side is the memory object, at a byte offset.
                    let side = |p: usize, device: bool| crate::backend::Side {
                        mem: device.then_some(m),
                        at: p,
                    };
                    let to_device = way == Way::ToDevice;
                    on.driver().enqueue_copy(
                        cq,
                        side(to as usize, to_device),
                        side(from as usize, !to_device),
                        len,
                        false,
                        &[],
                        slot,
                    )
                },
            );
            let start = super::linger::now_us();
            // SAFETY: the submitter guarantees both ranges until the job's
            // event completes, which happens after this returns.
            unsafe {
                if route != Route::Staged {
                    st.copy_direct(d, s, size, &*device, done.id)?
                } else {
                    st.copy(way, d, s, size, device, done.id)?
                }
            };
            // A staged copy counts the wait for a host thread to take it
            // up, a cost a direct copy does not have (see `core::route`),
            // but not the wait for another copy through the ring.
            let end = super::linger::now_us();
            let mut took = end.saturating_sub(start);
            if route == Route::Staged && ready_at != 0 {
                took += began.saturating_sub(ready_at);
            }
            if route != Route::Direct {
                q.device.record_route(way, size, route, took);
            }
            Ok(())
        };
        let how = match route {
            Route::Probe => "direct, timed",
            Route::Direct => "direct, after its dependencies",
            Route::Staged => "staged",
        };
        me.submit_host_job(deps, &format!("{what} ({how})"), size, keep, Box::new(job))
    }
}
