//! A finalized graph's command-buffers: its kernel nodes recorded once
//! into a `cl_khr_command_buffer` with their dependencies as sync points,
//! and a few copies of it, so that a replay need not wait for the previous
//! enqueue of the same copy to finish (drivers before the extension's 1.0
//! refuse to enqueue a command-buffer still pending). Argument updates make
//! the copies stale: they are recorded again at the next replay.

use crate::core::error::{Error, Result};
use crate::core::graph::resolve_empty;
use crate::opencl::cmdbuf::{cl_command_buffer_khr, cl_sync_point_khr, CommandBuffers};
use crate::opencl::ffi::*;
use crate::opencl::loader::check;
use crate::runtime::event::Event;
use std::sync::Arc;

/// Copies kept before a replay waits for the oldest one.
const COPIES: usize = 4;

/// The recorded copies, each with the end event of its last enqueue.
#[derive(Default)]
pub(crate) struct Pool {
    copies: Vec<(cl_command_buffer_khr, Option<Arc<Event>>)>,
    fns: Option<&'static CommandBuffers>,
    /// Copies recorded before the last argument update.
    stale: Vec<cl_command_buffer_khr>,
    next: usize,
    last: Option<usize>,
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

    /// A copy free to enqueue now, recording one when none is, and
    /// waiting for the oldest when `COPIES` are pending. Returns its slot.
    pub(crate) fn take(
        &mut self,
        fns: &'static CommandBuffers,
        record: impl Fn() -> Result<cl_command_buffer_khr>,
    ) -> Result<usize> {
        self.fns = Some(fns);
        for cb in self.stale.drain(..) {
            // SAFETY: an owned command-buffer no longer used; OpenCL keeps
            // it until a pending enqueue ends.
            unsafe { (fns.clReleaseCommandBufferKHR)(cb) };
        }
        if let Some(i) = (0..self.copies.len()).find(|&i| {
            self.copies[i]
                .1
                .as_ref()
                .is_none_or(|e| e.known_done() || e.is_done())
        }) {
            return Ok(i);
        }
        if self.copies.len() < COPIES {
            let cb = record()?;
            self.copies.push((cb, None));
            return Ok(self.copies.len() - 1);
        }
        let i = self.next % self.copies.len();
        self.next += 1;
        if let Some(e) = &self.copies[i].1 {
            // Its failure, if any, is the submission's to report.
            let _ = e.wait_cl();
        }
        Ok(i)
    }

    pub(crate) fn get(&self, i: usize) -> cl_command_buffer_khr {
        self.copies[i].0
    }

    /// Notes that copy `i` was just enqueued.
    pub(crate) fn set_last(&mut self, i: usize) {
        self.last = Some(i);
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
    queue: cl_command_queue,
    nodes: &[crate::core::graph::PlanNode],
    launches: &[Option<(cl_kernel, &crate::core::launch::NdRange)>],
) -> Result<cl_command_buffer_khr> {
    let deps = resolve_empty(nodes).map_err(Error::invalid)?;
    let mut err = CL_SUCCESS;
    let q = [queue];
    // SAFETY: one live queue; no properties.
    let cb = unsafe { (fns.clCreateCommandBufferKHR)(1, q.as_ptr(), std::ptr::null(), &mut err) };
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
                if range.offset.iter().all(|&o| o == 0) {
                    std::ptr::null()
                } else {
                    range.offset.as_ptr()
                },
                range.global.as_ptr(),
                range
                    .local
                    .as_ref()
                    .map_or(std::ptr::null(), |l| l.as_ptr()),
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
