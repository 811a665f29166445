//! Host memory the driver pins: a buffer allocated in host memory
//! (`CL_MEM_ALLOC_HOST_PTR`) and kept mapped, and the record of a
//! context's such blocks.

use crate::core::error::{Error, Result, Status};
use crate::opencl::ffi::*;
use crate::opencl::loader::api;
use std::collections::BTreeMap;
use std::ffi::c_void;

/// The mapped blocks of a context (by host address) and the queue that
/// maps and unmaps them, made at first use.
#[derive(Default)]
pub(crate) struct PinnedBlocks {
    pub queue: Option<usize>,
    pub blocks: BTreeMap<usize, (usize, usize)>,
}

impl PinnedBlocks {
    /// The block holding `[addr, addr + len)`, as (base, size, memory object).
    pub fn find(&self, addr: usize, len: usize) -> Option<(usize, usize, usize)> {
        let (&base, &(size, mem)) = self.blocks.range(..=addr).next_back()?;
        (addr.checked_add(len)? <= base + size).then_some((base, size, mem))
    }
}

/// A new buffer of `size` bytes in host memory the driver allocates
/// (`CL_MEM_ALLOC_HOST_PTR`), mapped for reading and writing on `queue`
/// (blocking): the memory object and its host address.
pub(crate) fn map_pinned(
    ctx: cl_context,
    queue: cl_command_queue,
    size: usize,
    what: &str,
) -> Result<(cl_mem, *mut c_void)> {
    let api = api()?;
    let mut err = CL_SUCCESS;
    // SAFETY: live context; the runtime allocates the host memory.
    let mem = unsafe {
        (api.clCreateBuffer)(
            ctx,
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
