//! Accessor windows that a kernel on a device without USM cannot be
//! pointed at (they start where no sub-buffer may): the window's bytes are
//! copied into scratch memory before the kernel, the kernel gets the
//! scratch memory, and what it may have written is copied back as a
//! rectangle after it (see `core::window`).

use super::access::Prepared;
use super::storage::{Deps, Token};
use super::transfer::record;
use crate::core::error::{Error, Result, Status};
use crate::core::window::Window;
use crate::opencl::ffi::*;
use crate::opencl::loader::{api, check};
use crate::runtime::queue::{LanePos, Queue, Submitted};

/// Scratch memory for one window, released when dropped (OpenCL keeps it
/// until the commands using it are done).
struct Scratch(cl_mem);

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Ok(api) = api() {
            // SAFETY: a memory object made by clCreateBuffer, released once.
            unsafe { (api.clReleaseMemObject)(self.0) };
        }
    }
}

/// A staged window: which prepared accessor, its scratch memory and the
/// buffer allocation it came from.
pub struct Staged {
    index: usize,
    scratch: Scratch,
    base: cl_mem,
    window: Window,
}

/// The windows of a command group staged for its kernel.
#[derive(Default)]
pub struct StagedWindows(Vec<Staged>);

impl StagedWindows {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The memory object the kernel gets for accessor `index`, if staged.
    pub fn mem_for(&self, index: usize) -> Option<usize> {
        self.0
            .iter()
            .find(|s| s.index == index)
            .map(|s| s.scratch.0 as usize)
    }
}

impl Queue {
    /// Copies the windows of `prepared` that need staging into scratch
    /// memory, after what the command waits for (`deps`, and the commands
    /// of this queue at `on_lanes`); the copies join `deps`, so the kernel
    /// runs after them.
    pub fn stage_windows(
        &self,
        prepared: &[Prepared],
        deps: &mut Deps,
        on_lanes: &[LanePos],
    ) -> Result<StagedWindows> {
        let mut out = StagedWindows::default();
        if prepared.iter().all(|p| p.window.is_none()) {
            return Ok(out);
        }
        let api = api()?;
        let mut waits: Deps = deps.iter().cloned().collect();
        for p in on_lanes {
            waits.extend(p.event()?);
        }
        for (index, p) in prepared.iter().enumerate() {
            let Some(window) = p.window.as_deref().copied() else {
                continue;
            };
            let base = {
                let st = p.storage.state.lock();
                st.devs[p.alloc - 1].mem.ok_or_else(|| {
                    Error::new(Status::Internal, "allocation without memory object")
                })? as cl_mem
            };
            let mut err = CL_SUCCESS;
            let bytes = window.scratch_bytes();
            // SAFETY: a live context; no host pointer.
            let m = unsafe {
                (api.clCreateBuffer)(
                    self.ctx.cl,
                    CL_MEM_READ_WRITE,
                    bytes,
                    std::ptr::null_mut(),
                    &mut err,
                )
            };
            if m.is_null() || err != CL_SUCCESS {
                return Err(Error::opencl(
                    err,
                    &format!("clCreateBuffer of {bytes} bytes (scratch for an accessor window)"),
                ));
            }
            let scratch = Scratch(m);
            if p.needs_data {
                let what = format!(
                    "copy of an accessor window of {} bytes into scratch memory",
                    window.span
                );
                let ev = self.submit(&waits, what, None, |q, wl, ev| {
                    let (q, wl, ev) = crate::opencl::driver::cl_args(q, wl, Some(ev));
                    // SAFETY: both memory objects hold the span; the wait
                    // list holds events of this context.
                    let rc = unsafe {
                        (api.clEnqueueCopyBuffer)(
                            q,
                            base,
                            scratch.0,
                            window.offset,
                            0,
                            window.span,
                            wl.len() as cl_uint,
                            crate::opencl::driver::ptr_or_null(wl),
                            ev,
                        )
                    };
                    check(rc, "clEnqueueCopyBuffer (accessor window into scratch)")
                })?;
                deps.push(ev);
            }
            out.0.push(Staged {
                index,
                scratch,
                base,
                window,
            });
        }
        Ok(out)
    }

    /// Copies back what the kernel (`done`, which has its event) may have
    /// written into staged windows, and records those copies as the
    /// accesses later commands wait for.
    pub fn unstage_windows(
        &self,
        prepared: &[Prepared],
        staged: StagedWindows,
        done: &Submitted,
    ) -> Result<()> {
        if staged.is_empty() {
            return Ok(());
        }
        let kernel = match done {
            Submitted::Event(e) => e.clone(),
            Submitted::Quiet(p) => p
                .event()?
                .ok_or_else(|| Error::new(Status::Internal, "a staged kernel's queue went away"))?,
        };
        let api = api()?;
        for s in staged.0 {
            let p = &prepared[s.index];
            if !p.write {
                continue;
            }
            let w = s.window;
            let what = format!(
                "copy of an accessor window of {} bytes back from scratch memory",
                w.span
            );
            let ev = self.submit(std::slice::from_ref(&kernel), what, None, |q, wl, ev| {
                let (q, wl, ev) = crate::opencl::driver::cl_args(q, wl, Some(ev));
                let (n, list) = (wl.len() as cl_uint, crate::opencl::driver::ptr_or_null(wl));
                // SAFETY: the scratch memory holds the window's slices
                // whole from its first element, with the buffer's row
                // pitch, and the rectangle lies inside both; the wait list
                // holds events of this context.
                let rc = unsafe {
                    if w.contiguous() {
                        (api.clEnqueueCopyBuffer)(
                            q,
                            s.scratch.0,
                            s.base,
                            0,
                            w.offset,
                            w.span,
                            n,
                            list,
                            ev,
                        )
                    } else {
                        let zero = [0usize; 3];
                        (api.clEnqueueCopyBufferRect)(
                            q,
                            s.scratch.0,
                            s.base,
                            zero.as_ptr(),
                            w.origin.as_ptr(),
                            w.region.as_ptr(),
                            w.row_pitch,
                            w.scratch_slice_pitch(),
                            w.row_pitch,
                            w.slice_pitch,
                            n,
                            list,
                            ev,
                        )
                    }
                };
                check(
                    rc,
                    "clEnqueueCopyBufferRect (accessor window back from scratch)",
                )
            })?;
            let lane = ev.lane.load(std::sync::atomic::Ordering::Acquire);
            let mut st = p.storage.state.lock();
            record(&mut st, p.pages, true, Token::Cmd(ev), lane, p.alloc);
        }
        Ok(())
    }
}

/// Per accessor: its device pointer (0 without USM) and the memory object a
/// kernel argument gets, if any.
pub type AccessorArgs = smallvec::SmallVec<[(usize, Option<usize>); 8]>;

/// The kernel argument memory objects of `prepared`: a staged window's
/// scratch memory, else what the accessor itself passes.
pub fn accessor_args(prepared: &[Prepared], staged: &StagedWindows) -> Result<AccessorArgs> {
    prepared
        .iter()
        .enumerate()
        .map(|(i, p)| match staged.mem_for(i) {
            Some(m) => Ok((0, Some(m))),
            None => Ok((p.ptr, p.arg_mem()?)),
        })
        .collect()
}
