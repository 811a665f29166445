//! Pinned (page-locked) host memory for fast copies. Where every device of
//! a context has host USM, pinned memory is host USM. Elsewhere (coarse-grain
//! SVM only, or no USM) it is the host mapping of a buffer the driver
//! allocates in host memory (`CL_MEM_ALLOC_HOST_PTR`), kept mapped until
//! freed: the host may use it and copies between it and the devices move
//! at the bus's speed without staging, but kernels cannot take it.

use super::context::Context;
use crate::core::error::{Error, Result, Status};
use crate::core::registry::AllocKind;
use crate::opencl::ffi::*;
use crate::opencl::loader::{api, check};
use std::collections::BTreeMap;
use std::ffi::c_void;

/// The mapped blocks of a context (by host address) and the queue that
/// maps and unmaps them, made at first use.
#[derive(Default)]
pub(crate) struct PinnedBlocks {
    queue: Option<usize>,
    blocks: BTreeMap<usize, (usize, usize)>,
}

impl PinnedBlocks {
    /// The block holding `[addr, addr + len)`, as (base, size, memory object).
    fn find(&self, addr: usize, len: usize) -> Option<(usize, usize, usize)> {
        let (&base, &(size, mem)) = self.blocks.range(..=addr).next_back()?;
        (addr.checked_add(len)? <= base + size).then_some((base, size, mem))
    }
}

/// A new buffer of `size` bytes in host memory the driver allocates
/// (`CL_MEM_ALLOC_HOST_PTR`), mapped for reading and writing on `queue`
/// (blocking): the memory object and its host address.
pub(crate) fn map_pinned(
    ctx: &Context,
    queue: cl_command_queue,
    size: usize,
    what: &str,
) -> Result<(cl_mem, *mut c_void)> {
    let api = api()?;
    let mut err = CL_SUCCESS;
    // SAFETY: live context; the runtime allocates the host memory.
    let mem = unsafe {
        (api.clCreateBuffer)(
            ctx.cl,
            CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
            size,
            std::ptr::null_mut(),
            &mut err,
        )
    };
    if mem.is_null() || err != CL_SUCCESS {
        let mut e = Error::opencl(err, &format!("clCreateBuffer of {size} bytes of {what}"));
        if err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY {
            e.status = Status::OutOfHostMemory;
        }
        return Err(e);
    }
    // SAFETY: a blocking map of the whole new buffer on a live queue of its
    // context.
    let host = unsafe {
        (api.clEnqueueMapBuffer)(
            queue,
            mem,
            CL_TRUE,
            CL_MAP_READ | CL_MAP_WRITE,
            0,
            size,
            0,
            std::ptr::null(),
            std::ptr::null_mut(),
            &mut err,
        )
    };
    if host.is_null() || err != CL_SUCCESS {
        // SAFETY: created above, not mapped, released once.
        unsafe { (api.clReleaseMemObject)(mem) };
        return Err(Error::opencl(
            err,
            &format!("clEnqueueMapBuffer of {size} bytes of {what}"),
        ));
    }
    Ok((mem, host))
}

impl Context {
    /// Allocates `size` bytes of pinned host memory (see the module's doc).
    pub fn pinned_alloc(&self, size: usize) -> Result<*mut c_void> {
        if size == 0 {
            return Err(Error::invalid("pinned host allocation of size 0 requested"));
        }
        if self.devices.iter().all(|d| self.support(d).host) {
            return self.usm_alloc(AllocKind::Host, None, size, 0);
        }
        let max = self
            .devices
            .iter()
            .map(|d| d.max_mem_alloc_size)
            .min()
            .unwrap_or(0);
        if size as u64 > max {
            return Err(Error::invalid(format!(
                "pinned host allocation of {size} bytes exceeds the maximum single allocation of \
                 {max} bytes"
            )));
        }
        let api = api()?;
        let mut pinned = self.pinned.lock();
        let queue = match pinned.queue {
            Some(q) => q as cl_command_queue,
            None => {
                let mut err = CL_SUCCESS;
                // SAFETY: live context and its first device; an in-order queue.
                let q =
                    unsafe { (api.clCreateCommandQueue)(self.cl, self.devices[0].id, 0, &mut err) };
                if q.is_null() || err != CL_SUCCESS {
                    return Err(Error::opencl(
                        err,
                        "clCreateCommandQueue for mapping pinned memory",
                    ));
                }
                pinned.queue = Some(q as usize);
                q
            }
        };
        let (mem, host) = map_pinned(self, queue, size, "pinned host memory")?;
        pinned.blocks.insert(host as usize, (size, mem as usize));
        Ok(host)
    }

    /// Frees pinned memory at `ptr` made by [`Context::pinned_alloc`] as a
    /// mapped buffer, after the work that may use it; false when `ptr` is
    /// no such block's base.
    pub(crate) fn pinned_free(&self, ptr: usize) -> Result<bool> {
        if !self.pinned.lock().blocks.contains_key(&ptr) {
            return Ok(false);
        }
        self.finish_queues();
        let mut pinned = self.pinned.lock();
        let Some((_, mem)) = pinned.blocks.remove(&ptr) else {
            return Ok(false);
        };
        let api = api()?;
        if let Some(q) = pinned.queue {
            // SAFETY: the block was mapped once on this queue; nothing uses
            // it after the queues finished; unmapped and released once.
            unsafe {
                let rc = (api.clEnqueueUnmapMemObject)(
                    q as cl_command_queue,
                    mem as cl_mem,
                    ptr as *mut c_void,
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                );
                (api.clFinish)(q as cl_command_queue);
                (api.clReleaseMemObject)(mem as cl_mem);
                check(rc, "clEnqueueUnmapMemObject of pinned host memory")?;
            }
        }
        Ok(true)
    }

    /// Whether `[ptr, ptr + len)` lies in pinned memory of this context
    /// that is not host USM.
    pub(crate) fn is_pinned(&self, ptr: *const c_void, len: usize) -> bool {
        let p = self.pinned.lock();
        !p.blocks.is_empty() && p.find(ptr as usize, len).is_some()
    }

    /// Unmaps and releases every pinned block (the context is going).
    pub(crate) fn drop_pinned(&mut self) {
        let Ok(api) = api() else { return };
        let pinned = std::mem::take(self.pinned.get_mut());
        let Some(q) = pinned.queue else { return };
        let q = q as cl_command_queue;
        for (&ptr, &(_, mem)) in &pinned.blocks {
            // SAFETY: mapped once on `q`, unmapped once; the context's
            // queues are gone (they hold the context alive).
            unsafe {
                (api.clEnqueueUnmapMemObject)(
                    q,
                    mem as cl_mem,
                    ptr as *mut c_void,
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                );
            }
        }
        // SAFETY: the unmaps finish before the buffers and the mapping
        // queue are released, each once.
        unsafe {
            (api.clFinish)(q);
            for &(_, mem) in pinned.blocks.values() {
                (api.clReleaseMemObject)(mem as cl_mem);
            }
            (api.clReleaseCommandQueue)(q);
        }
    }
}
