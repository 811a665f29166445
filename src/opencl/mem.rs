//! OpenCL's side of memory objects behind the back-end seam: making
//! them (plain, sub-buffers, views over USM) and the copies and fills
//! that move a buffer's bytes between them and the host.
//!
//! OpenCL handles are opaque identifiers that only the driver interprets,
//! so passing them on is not a dereference by this code.

#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::ffi::*;
use super::handles::{cl_events, cl_queue_of, out_ptr, ptr_or_null};
use super::loader::{api, check};
use crate::backend::{ContextH, EventH, MemH, QueueH, RectSide, Side};
use crate::core::error::{Error, Result};
use std::ffi::c_void;

/// A new memory object of `size` bytes.
pub fn create(ctx: ContextH, size: usize) -> Result<MemH> {
    let api = api()?;
    let mut err = CL_SUCCESS;
    // SAFETY: a live context; no host pointer.
    let m = unsafe {
        (api.clCreateBuffer)(
            ctx.0 as cl_context,
            CL_MEM_READ_WRITE,
            size,
            std::ptr::null_mut(),
            &mut err,
        )
    };
    if m.is_null() || err != CL_SUCCESS {
        return Err(Error::opencl(
            err,
            &format!("clCreateBuffer of {size} bytes"),
        ));
    }
    Ok(MemH(m as usize))
}

/// A sub-buffer of `m` from `offset`, `size` bytes long.
pub fn sub(m: MemH, offset: usize, size: usize) -> Result<MemH> {
    let api = api()?;
    let region = [offset, size];
    let mut err = CL_SUCCESS;
    // SAFETY: `m` is a live buffer; the caller keeps the region inside it
    // and its origin aligned as the device requires.
    let s = unsafe {
        (api.clCreateSubBuffer)(
            m.0 as cl_mem,
            CL_MEM_READ_WRITE,
            0x1220,
            region.as_ptr().cast(),
            &mut err,
        )
    };
    if s.is_null() || err != CL_SUCCESS {
        return Err(Error::opencl(err, "clCreateSubBuffer"));
    }
    Ok(MemH(s as usize))
}

/// A memory object using the USM memory at `ptr` as its storage.
pub fn view(ctx: ContextH, ptr: usize, size: usize) -> Option<MemH> {
    let api = api().ok()?;
    let mut err = CL_SUCCESS;
    // SAFETY: `ptr` is a live allocation of `size` bytes in this context;
    // with CL_MEM_USE_HOST_PTR the buffer uses that memory as its storage.
    let m = unsafe {
        (api.clCreateBuffer)(
            ctx.0 as cl_context,
            CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
            size,
            ptr as *mut c_void,
            &mut err,
        )
    };
    (err == CL_SUCCESS && !m.is_null()).then_some(MemH(m as usize))
}

/// A linear copy (see `backend::Driver::enqueue_copy`).
pub fn copy(
    q: QueueH,
    dst: Side,
    src: Side,
    len: usize,
    blocking: bool,
    waits: &[EventH],
    ev: Option<&mut EventH>,
) -> Result<()> {
    let api = api()?;
    let (q, wl, ev) = (cl_queue_of(q), cl_events(waits), out_ptr(ev));
    let (n, wptr) = (wl.len() as cl_uint, ptr_or_null(wl));
    let b = if blocking { CL_TRUE } else { CL_FALSE };
    // SAFETY: the memory objects and host memory cover the copied bytes;
    // the wait list is of the queue's context; the caller keeps the host
    // memory alive until the copy completes.
    let rc = unsafe {
        match (dst.mem, src.mem) {
            (Some(d), Some(s)) => (api.clEnqueueCopyBuffer)(
                q,
                s.0 as cl_mem,
                d.0 as cl_mem,
                src.at,
                dst.at,
                len,
                n,
                wptr,
                ev,
            ),
            (Some(d), None) => (api.clEnqueueWriteBuffer)(
                q,
                d.0 as cl_mem,
                b,
                dst.at,
                len,
                src.at as *const c_void,
                n,
                wptr,
                ev,
            ),
            (None, Some(s)) => (api.clEnqueueReadBuffer)(
                q,
                s.0 as cl_mem,
                b,
                src.at,
                len,
                dst.at as *mut c_void,
                n,
                wptr,
                ev,
            ),
            (None, None) => CL_INVALID_OPERATION,
        }
    };
    check(
        rc,
        match (dst.mem, src.mem) {
            (Some(_), Some(_)) => "clEnqueueCopyBuffer (buffer copy)",
            (Some(_), None) => "clEnqueueWriteBuffer (buffer copy)",
            _ => "clEnqueueReadBuffer (buffer copy)",
        },
    )
}

/// A rectangle copy (see `backend::Driver::enqueue_copy_rect`).
pub fn copy_rect(
    q: QueueH,
    dst: &RectSide,
    src: &RectSide,
    region: [usize; 3],
    blocking: bool,
    waits: &[EventH],
    ev: Option<&mut EventH>,
) -> Result<()> {
    let api = api()?;
    let (q, wl, ev) = (cl_queue_of(q), cl_events(waits), out_ptr(ev));
    let (n, wptr) = (wl.len() as cl_uint, ptr_or_null(wl));
    let b = if blocking { CL_TRUE } else { CL_FALSE };
    let r = region.as_ptr();
    let (dor, sor) = (dst.origin.as_ptr(), src.origin.as_ptr());
    let (dr, ds, sr, ss) = (
        dst.row_pitch,
        dst.slice_pitch,
        src.row_pitch,
        src.slice_pitch,
    );
    // SAFETY: the memory objects and host memory cover the windows the
    // origins, region and pitches describe; the wait list is of the
    // queue's context; the caller keeps the host memory alive until the
    // copy completes.
    let rc = unsafe {
        match (dst.side.mem, src.side.mem) {
            (Some(d), Some(s)) => (api.clEnqueueCopyBufferRect)(
                q,
                s.0 as cl_mem,
                d.0 as cl_mem,
                sor,
                dor,
                r,
                sr,
                ss,
                dr,
                ds,
                n,
                wptr,
                ev,
            ),
            (Some(d), None) => (api.clEnqueueWriteBufferRect)(
                q,
                d.0 as cl_mem,
                b,
                dor,
                sor,
                r,
                dr,
                ds,
                sr,
                ss,
                src.side.at as *const c_void,
                n,
                wptr,
                ev,
            ),
            (None, Some(s)) => (api.clEnqueueReadBufferRect)(
                q,
                s.0 as cl_mem,
                b,
                sor,
                dor,
                r,
                sr,
                ss,
                dr,
                ds,
                dst.side.at as *mut c_void,
                n,
                wptr,
                ev,
            ),
            (None, None) => CL_INVALID_OPERATION,
        }
    };
    check(
        rc,
        match (dst.side.mem, src.side.mem) {
            (Some(_), Some(_)) => "clEnqueueCopyBufferRect (rectangular buffer copy)",
            (Some(_), None) => "clEnqueueWriteBufferRect (rectangular buffer copy)",
            _ => "clEnqueueReadBufferRect (rectangular buffer copy)",
        },
    )
}

/// A fill of part of a memory object.
pub fn fill(
    q: QueueH,
    m: MemH,
    offset: usize,
    pattern: &[u8],
    len: usize,
    waits: &[EventH],
    ev: Option<&mut EventH>,
) -> Result<()> {
    let api = api()?;
    let wl = cl_events(waits);
    // SAFETY: the run lies inside the memory object; OpenCL copies the
    // pattern before returning; the wait list is of the queue's context.
    let rc = unsafe {
        (api.clEnqueueFillBuffer)(
            cl_queue_of(q),
            m.0 as cl_mem,
            pattern.as_ptr().cast(),
            pattern.len(),
            offset,
            len,
            wl.len() as cl_uint,
            ptr_or_null(wl),
            out_ptr(ev),
        )
    };
    check(rc, "clEnqueueFillBuffer")
}
