//! Pinned (page-locked) host memory for fast copies. Where every device of
//! a context has host USM, pinned memory is host USM. Elsewhere (coarse-grain
//! SVM only, or no USM) it is the host mapping of a buffer the driver
//! allocates in host memory (`CL_MEM_ALLOC_HOST_PTR`), kept mapped until
//! freed: the host may use it and copies between it and the devices move
//! at the bus's speed without staging, but kernels cannot take it.

use super::context::Context;
use super::pinned_blocks::map_pinned;
use crate::core::error::{Error, Result};
use crate::core::registry::AllocKind;
use crate::opencl::ffi::*;
use crate::opencl::loader::{api, check};
use std::ffi::c_void;

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
                let q = unsafe {
                    (api.clCreateCommandQueue)(
                        crate::opencl::handles::cl_context_of(self.raw),
                        crate::opencl::handles::cl_device_of(self.devices[0].id),
                        0,
                        &mut err,
                    )
                };
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
        let (mem, host) = map_pinned(
            crate::opencl::handles::cl_context_of(self.raw),
            queue,
            size,
            "pinned host memory",
        )?;
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
