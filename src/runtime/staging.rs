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
use crate::core::error::{Error, Result, Status};
use crate::core::staging::{chunk_for, runs, CHUNK, SLOTS};
use crate::opencl::ffi::*;
use crate::opencl::loader::{api, check};
use parking_lot::Mutex;
use rayon::prelude::*;
use std::ffi::c_void;
use std::sync::Arc;

/// Which way a staged copy goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    ToDevice,
    ToHost,
}

/// Enqueues a copy of `len` bytes from the third argument to the second on
/// the queue given, setting the event.
type DeviceCopy<'a> =
    dyn Fn(cl_command_queue, *mut c_void, *const c_void, usize, &mut cl_event) -> Result<()> + 'a;

/// The stagers of a context, per device.
pub(crate) type Stagers = Vec<(&'static Device, Arc<Mutex<Stager>>)>;

struct Slot {
    mem: cl_mem,
    host: *mut u8,
    /// The device copy using this chunk, if one may still be running.
    pending: cl_event,
}

/// The pinned ring and queue of one device of a context.
pub struct Stager {
    queue: cl_command_queue,
    slots: Vec<Slot>,
}

// SAFETY: OpenCL objects are thread-safe; the pinned host pointers are only
// used by the thread holding the stager's lock (and the device).
unsafe impl Send for Stager {}

impl Stager {
    fn create(ctx: &Context, device: &Device) -> Result<Stager> {
        let api = api()?;
        let mut err = CL_SUCCESS;
        // SAFETY: live context and one of its devices; an in-order queue.
        let queue = unsafe { (api.clCreateCommandQueue)(ctx.cl, device.id, 0, &mut err) };
        if queue.is_null() || err != CL_SUCCESS {
            return Err(Error::opencl(err, "clCreateCommandQueue for staging"));
        }
        let mut st = Stager {
            queue,
            slots: Vec::with_capacity(SLOTS),
        };
        for _ in 0..SLOTS {
            // On failure the chunks made so far go with `st`.
            let (mem, host) =
                super::pinned::map_pinned(ctx, queue, CHUNK, "a pinned staging chunk")?;
            st.slots.push(Slot {
                mem,
                host: host.cast(),
                pending: std::ptr::null_mut(),
            });
        }
        Ok(st)
    }

    /// Waits for the copy using slot `i`, if any, and reports its failure.
    fn settle(&mut self, i: usize) -> Result<()> {
        let ev = std::mem::replace(&mut self.slots[i].pending, std::ptr::null_mut());
        if ev.is_null() {
            return Ok(());
        }
        let api = api()?;
        // SAFETY: an event this stager created and still owns.
        let rc = unsafe { (api.clWaitForEvents)(1, &ev) };
        let mut status: cl_int = CL_COMPLETE;
        // SAFETY: as above; the status is a cl_int.
        let rc2 = unsafe {
            (api.clGetEventInfo)(
                ev,
                CL_EVENT_COMMAND_EXECUTION_STATUS,
                std::mem::size_of::<cl_int>(),
                (&mut status as *mut cl_int).cast(),
                std::ptr::null_mut(),
            )
        };
        // SAFETY: releasing the stager's own reference once.
        unsafe { (api.clReleaseEvent)(ev) };
        check(rc, "clWaitForEvents on a staged chunk")?;
        check(rc2, "clGetEventInfo on a staged chunk")?;
        if status < 0 {
            return Err(Error::opencl(status, "a staged chunk copy"));
        }
        Ok(())
    }

    /// Waits for every chunk in flight; the first failure is returned.
    fn drain(&mut self) -> Result<()> {
        let mut first = Ok(());
        for i in 0..self.slots.len() {
            let r = self.settle(i);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    fn flush(&self) -> Result<()> {
        // SAFETY: the stager's live queue.
        check(unsafe { (api()?.clFlush)(self.queue) }, "clFlush")
    }

    /// Copies `size` bytes from `src` to `dst` through the ring; `device`
    /// copies `len` bytes between a chunk and device memory on a queue.
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
        device: &DeviceCopy<'_>,
    ) -> Result<()> {
        let chunks: Vec<(usize, usize)> = runs(size, chunk_for(size)).collect();
        let r = match way {
            // SAFETY: forwarded from the caller.
            Way::ToDevice => unsafe { self.fill_device(&chunks, dst, src, device) },
            // SAFETY: forwarded from the caller.
            Way::ToHost => unsafe { self.fill_host(&chunks, dst, src, device) },
        };
        let drained = self.drain();
        r.and(drained)
    }

    /// # Safety
    /// As for `copy`.
    unsafe fn fill_device(
        &mut self,
        chunks: &[(usize, usize)],
        dst: usize,
        src: usize,
        device: &DeviceCopy<'_>,
    ) -> Result<()> {
        for (k, &(off, len)) in chunks.iter().enumerate() {
            let i = k % SLOTS;
            self.settle(i)?;
            let host = self.slots[i].host;
            // SAFETY: the chunk holds CHUNK >= len bytes and no device copy
            // uses it any more; the source range is valid (caller).
            unsafe { host_copy(host, (src + off) as *const u8, len) };
            let mut ev: cl_event = std::ptr::null_mut();
            device(
                self.queue,
                (dst + off) as *mut c_void,
                host.cast(),
                len,
                &mut ev,
            )?;
            self.slots[i].pending = ev;
            self.flush()?;
        }
        Ok(())
    }

    /// # Safety
    /// As for `copy`.
    unsafe fn fill_host(
        &mut self,
        chunks: &[(usize, usize)],
        dst: usize,
        src: usize,
        device: &DeviceCopy<'_>,
    ) -> Result<()> {
        let issue = |st: &mut Stager, k: usize| -> Result<()> {
            let (off, len) = chunks[k];
            let i = k % SLOTS;
            let mut ev: cl_event = std::ptr::null_mut();
            device(
                st.queue,
                st.slots[i].host.cast(),
                (src + off) as *const c_void,
                len,
                &mut ev,
            )?;
            st.slots[i].pending = ev;
            Ok(())
        };
        for k in 0..chunks.len().min(SLOTS) {
            issue(self, k)?;
        }
        self.flush()?;
        for (k, &(off, len)) in chunks.iter().enumerate() {
            let i = k % SLOTS;
            self.settle(i)?;
            // SAFETY: the chunk's device copy is complete; the destination
            // range is valid (caller).
            unsafe { host_copy((dst + off) as *mut u8, self.slots[i].host, len) };
            if k + SLOTS < chunks.len() {
                issue(self, k + SLOTS)?;
                self.flush()?;
            }
        }
        Ok(())
    }
}

impl Drop for Stager {
    fn drop(&mut self) {
        let Ok(api) = api() else { return };
        let _ = self.drain();
        for s in &self.slots {
            // SAFETY: each chunk was mapped once on this queue and is
            // unmapped and released once; nothing uses it any more.
            unsafe {
                (api.clEnqueueUnmapMemObject)(
                    self.queue,
                    s.mem,
                    s.host.cast(),
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                );
            }
        }
        // SAFETY: the stager's own queue and buffers, released once after
        // the unmaps have finished.
        unsafe {
            (api.clFinish)(self.queue);
            for s in &self.slots {
                (api.clReleaseMemObject)(s.mem);
            }
            (api.clReleaseCommandQueue)(self.queue);
        }
    }
}

/// Copies `len` bytes with all host threads: one thread reaches a fraction
/// of the memory system's bandwidth.
///
/// # Safety
/// Both ranges are valid for `len` bytes and do not overlap.
unsafe fn host_copy(dst: *mut u8, src: *const u8, len: usize) {
    const PIECE: usize = 256 << 10;
    // SAFETY: the caller's guarantee; nothing else writes these ranges now.
    let (d, s) = unsafe {
        (
            std::slice::from_raw_parts_mut(dst, len),
            std::slice::from_raw_parts(src, len),
        )
    };
    d.par_chunks_mut(PIECE)
        .zip(s.par_chunks(PIECE))
        .for_each(|(a, b)| a.copy_from_slice(b));
}

impl Context {
    /// The stager of `device`, created at first use.
    fn stager(&self, device: &'static Device) -> Result<Arc<Mutex<Stager>>> {
        let mut all = self.stagers.lock();
        if let Some((_, s)) = all.iter().find(|(d, _)| std::ptr::eq(*d, device)) {
            return Ok(s.clone());
        }
        let s = Arc::new(Mutex::new(Stager::create(self, device)?));
        all.push((device, s.clone()));
        Ok(s)
    }
}

impl Queue {
    /// Which way a copy of `size` bytes from `src` to `dst` is staged, if
    /// it is: one side ordinary host memory, the other device memory of
    /// this context, on a device that stages.
    pub(crate) fn staged_way(
        &self,
        dst: *const c_void,
        src: *const c_void,
        size: usize,
    ) -> Option<Way> {
        use crate::core::registry::AllocKind;
        if !crate::core::staging::worth_it(self.device.stages, size) {
            return None;
        }
        let kind = |p| self.ctx.pointer_kind(p).map(|k| k.0);
        // Pinned host memory moves at full speed as it is.
        let ordinary = |p| !self.ctx.is_pinned(p, size);
        match (kind(dst), kind(src)) {
            (Some(AllocKind::Device), None) if ordinary(src) => Some(Way::ToDevice),
            (None, Some(AllocKind::Device)) if ordinary(dst) => Some(Way::ToHost),
            _ => None,
        }
    }

    /// A copy between host memory and device memory through pinned chunks,
    /// after `deps`, as a host job; `keep` lives until it is done.
    ///
    /// # Safety
    /// Both ranges must be valid for `size` bytes until the copy completes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn staged_copy(
        &self,
        way: Way,
        dst: *mut c_void,
        src: *const c_void,
        size: usize,
        deps: &[Arc<Event>],
        what: &str,
        keep: Keep,
    ) -> Result<Arc<Event>> {
        let me = self.me.upgrade().ok_or_else(|| {
            Error::new(Status::Internal, "a staged copy on a queue being dropped")
        })?;
        let stager = self.ctx.stager(self.device)?;
        let (d, s) = (dst as usize, src as usize);
        let q = me.clone();
        let job = move || -> Result<()> {
            let mut st = stager.lock();
            let device =
                |cq: cl_command_queue,
                 to: *mut c_void,
                 from: *const c_void,
                 len: usize,
                 ev: &mut cl_event| { q.copy_cmd(cq, to, from, len, &[], ev) };
            // SAFETY: the submitter guarantees both ranges until the job's
            // event completes, which happens after this returns.
            unsafe { st.copy(way, d, s, size, &device) }
        };
        me.submit_host_job(deps, &format!("{what} (staged)"), keep, Box::new(job))
            .map(|e| e.with_bytes(size))
    }
}
