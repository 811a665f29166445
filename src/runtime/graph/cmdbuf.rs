//! A finalized graph's command-buffers: its kernel nodes recorded once
//! into a `cl_khr_command_buffer` with their dependencies as sync points,
//! and a few copies of it, so that a replay need not wait for the previous
//! enqueue of one copy to finish (some drivers refuse to enqueue a
//! command-buffer still pending; with those, a replay finding every copy
//! pending enqueues the nodes one by one instead). Argument updates make
//! the copies stale: they are recorded again at the next replay.

use crate::core::error::{Error, Result};
use crate::core::graph::resolve_empty;
use crate::opencl::cmdbuf::{
    cl_command_buffer_khr, cl_sync_point_khr, CommandBuffers, CL_COMMAND_BUFFER_FLAGS_KHR,
    CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR,
};
use crate::opencl::ffi::*;
use crate::opencl::loader::check;
use crate::runtime::event::Event;
use std::sync::Arc;

/// Copies recorded at most.
const COPIES: usize = 8;

/// The recorded copies, each with the end event of its last enqueue.
#[derive(Default)]
pub(crate) struct Pool {
    copies: Vec<(cl_command_buffer_khr, Option<Arc<Event>>)>,
    fns: Option<&'static CommandBuffers>,
    /// Copies recorded before the last argument update.
    stale: Vec<cl_command_buffer_khr>,
    next: usize,
    last: Option<usize>,
    /// The driver refuses to enqueue a command-buffer still pending.
    no_reuse: bool,
}

impl Pool {
    /// Marks every copy as recorded with old arguments.
    pub(crate) fn stale(&mut self) {
        for (cb, _) in self.copies.drain(..) {
            self.stale.push(cb);
        }
    }

    /// Releases every copy (OpenCL keeps a pending one until it ends).
    pub(crate) fn release(&mut self) {
        self.stale();
        if let Some(f) = self.fns {
            for cb in self.stale.drain(..) {
                // SAFETY: a command-buffer this pool created and owns.
                unsafe { (f.clReleaseCommandBufferKHR)(cb) };
            }
        }
    }

    /// A copy to enqueue now: one whose last enqueue has finished, a new
    /// one while fewer than `COPIES` exist, else the oldest pending one
    /// (returned with `true`), which only drivers that allow enqueueing a
    /// pending command-buffer take. `None` once the driver refused that:
    /// the caller then replays the nodes one by one instead of waiting.
    pub(crate) fn take(
        &mut self,
        fns: &'static CommandBuffers,
        simultaneous: bool,
        record: impl Fn() -> Result<cl_command_buffer_khr>,
    ) -> Result<Option<(usize, bool)>> {
        self.fns = Some(fns);
        for cb in self.stale.drain(..) {
            // SAFETY: an owned command-buffer no longer used; OpenCL keeps
            // it until a pending enqueue ends.
            unsafe { (fns.clReleaseCommandBufferKHR)(cb) };
        }
        let n = self.copies.len();
        if simultaneous && n > 0 {
            // Made for simultaneous use: one copy serves every replay.
            return Ok(Some((0, false)));
        }
        let oldest = self.next % n.max(1);
        let free = |c: &(cl_command_buffer_khr, Option<Arc<Event>>), ask: bool| {
            c.1.as_ref()
                .is_none_or(|e| e.known_done() || (ask && e.is_done()))
        };
        if let Some(i) = (0..n).find(|&i| free(&self.copies[i], i == oldest)) {
            return Ok(Some((i, false)));
        }
        if n < COPIES {
            let cb = record()?;
            self.copies.push((cb, None));
            return Ok(Some((n, false)));
        }
        if self.no_reuse {
            return Ok(None);
        }
        Ok(Some((oldest, true)))
    }

    /// The driver refused to enqueue a pending command-buffer.
    pub(crate) fn refused_pending(&mut self) {
        self.no_reuse = true;
    }

    pub(crate) fn get(&self, i: usize) -> cl_command_buffer_khr {
        self.copies[i].0
    }

    /// Notes that copy `i` was just enqueued.
    pub(crate) fn set_last(&mut self, i: usize) {
        self.last = Some(i);
        self.next = i + 1;
    }

    /// Gives the copy enqueued last the end event of that enqueue.
    pub(crate) fn ran_last(&mut self, end: Arc<Event>) {
        if let Some(c) = self.last.take().and_then(|i| self.copies.get_mut(i)) {
            c.1 = Some(end);
        }
    }
}

/// Records `kernels` (node `i` enqueues `kernels[i]` over `ranges[i]`, or
/// nothing when `None`) with dependencies `deps` into a new
/// command-buffer on `queue`, and finalizes it.
pub(crate) fn record(
    fns: &CommandBuffers,
    simultaneous: bool,
    queue: cl_command_queue,
    nodes: &[crate::core::graph::PlanNode],
    launches: &[Option<(cl_kernel, &crate::core::launch::NdRange)>],
) -> Result<cl_command_buffer_khr> {
    let deps = resolve_empty(nodes).map_err(Error::invalid)?;
    let mut err = CL_SUCCESS;
    let q = [queue];
    let props: [cl_ulong; 3] = [
        CL_COMMAND_BUFFER_FLAGS_KHR,
        CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR,
        0,
    ];
    let mut cb: cl_command_buffer_khr = std::ptr::null_mut();
    if simultaneous {
        // SAFETY: one live queue; a zero-terminated property list.
        cb = unsafe { (fns.clCreateCommandBufferKHR)(1, q.as_ptr(), props.as_ptr(), &mut err) };
    }
    if cb.is_null() {
        // SAFETY: one live queue; no properties.
        cb = unsafe { (fns.clCreateCommandBufferKHR)(1, q.as_ptr(), std::ptr::null(), &mut err) };
    }
    if cb.is_null() || err != CL_SUCCESS {
        return Err(Error::opencl(err, "clCreateCommandBufferKHR"));
    }
    let fail = |e: Error| {
        // SAFETY: the command-buffer created above, not yet handed out.
        unsafe { (fns.clReleaseCommandBufferKHR)(cb) };
        Err(e)
    };
    let mut points: Vec<cl_sync_point_khr> = vec![0; launches.len()];
    for (i, l) in launches.iter().enumerate() {
        let Some((kernel, range)) = l else { continue };
        let waits: Vec<cl_sync_point_khr> = deps[i]
            .iter()
            .filter(|&&d| launches[d].is_some())
            .map(|&d| points[d])
            .collect();
        // SAFETY: a live command-buffer and kernel with its arguments set;
        // the size arrays have three entries; the sync points came from
        // this command-buffer.
        let rc = unsafe {
            (fns.clCommandNDRangeKernelKHR)(
                cb,
                std::ptr::null_mut(),
                std::ptr::null(),
                *kernel,
                range.dims,
                range.offset_or_null(),
                range.global.as_ptr(),
                range.local_or_null(),
                waits.len() as cl_uint,
                if waits.is_empty() {
                    std::ptr::null()
                } else {
                    waits.as_ptr()
                },
                &mut points[i],
                std::ptr::null_mut(),
            )
        };
        if let Err(e) = check(rc, "clCommandNDRangeKernelKHR") {
            return fail(e);
        }
    }
    // SAFETY: the command-buffer recorded above.
    let rc = unsafe { (fns.clFinalizeCommandBufferKHR)(cb) };
    if let Err(e) = check(rc, "clFinalizeCommandBufferKHR") {
        return fail(e);
    }
    Ok(cb)
}
