//! Enqueueing single commands on an OpenCL queue after a wait list of
//! OpenCL's own events: markers, kernels and USM commands (copies, fills,
//! prefetches, advice), through Intel's extension or SVM.
//!
//! OpenCL handles are opaque identifiers that only the driver interprets,
//! so passing them on is not a dereference by this code.

#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::ffi::*;
use super::handles::*;
use super::intel::IntelUsm;
use super::loader::{api, check};
use crate::backend::{EventH, KernelH, QueueH};
use crate::core::error::{Error, Result, Status};
use crate::core::launch::NdRange;
use std::ffi::c_void;

/// A marker after `waits`.
pub fn marker(q: QueueH, waits: &[EventH], ev: Option<&mut EventH>) -> Result<()> {
    let api = api()?;
    let wl = cl_events(waits);
    // SAFETY: a live queue; the wait list holds events of its context;
    // `ev` is null or receives the marker's event.
    let rc = unsafe {
        (api.clEnqueueMarkerWithWaitList)(
            cl_queue_of(q),
            wl.len() as cl_uint,
            ptr_or_null(wl),
            out_ptr(ev),
        )
    };
    check(rc, "clEnqueueMarkerWithWaitList")
}

/// Kernel `k` (its arguments set) over `range`; `local_args`: it takes
/// group-local memory arguments (for the status of a failure).
#[allow(clippy::too_many_arguments)]
pub fn kernel(
    q: QueueH,
    k: KernelH,
    name: &str,
    local_args: bool,
    range: &NdRange,
    waits: &[EventH],
    ev: Option<&mut EventH>,
) -> Result<()> {
    let api = api()?;
    let wl = cl_events(waits);
    // SAFETY: a live queue and kernel whose arguments are set; the size
    // arrays have three entries; the wait list holds events of the
    // queue's context.
    let rc = unsafe {
        (api.clEnqueueNDRangeKernel)(
            cl_queue_of(q),
            k.0 as cl_kernel,
            range.dims,
            range.offset_or_null(),
            range.global.as_ptr(),
            range.local_or_null(),
            wl.len() as cl_uint,
            ptr_or_null(wl),
            out_ptr(ev),
        )
    };
    if rc == CL_SUCCESS {
        return Ok(());
    }
    let mut e = Error::opencl(rc, &format!("clEnqueueNDRangeKernel of kernel '{name}'"));
    if rc == CL_INVALID_KERNEL_ARGS {
        e.status = Status::KernelArguments;
    }
    if rc == CL_OUT_OF_RESOURCES && local_args {
        e.status = Status::OutOfLocalMemory;
    }
    Err(e)
}

/// A copy of kernel `k` with the arguments set on it now, for a launch
/// enqueued later (the caller releases it).
pub fn clone_kernel(k: KernelH, name: &str) -> Result<KernelH> {
    let api = api()?;
    let f = api.clCloneKernel.ok_or_else(|| {
        Error::new(
            Status::FeatureNotSupported,
            format!("kernel '{name}' waits for a user event, and the platform cannot copy kernels (clCloneKernel) to hold it"),
        )
    })?;
    let mut err = CL_SUCCESS;
    // SAFETY: a live kernel.
    let c = unsafe { f(k.0 as cl_kernel, &mut err) };
    if c.is_null() || err != CL_SUCCESS {
        return Err(Error::opencl(
            err,
            &format!("clCloneKernel of kernel '{name}'"),
        ));
    }
    Ok(KernelH(c as usize))
}

/// Releases a kernel made by [`clone_kernel`].
pub fn release_kernel(k: KernelH) {
    if let Ok(api) = api() {
        // SAFETY: the caller owns the reference.
        unsafe { (api.clReleaseKernel)(k.0 as cl_kernel) };
    }
}

/// A USM copy of `size` bytes (validated by the caller).
#[allow(clippy::too_many_arguments)]
pub fn memcpy(
    intel: Option<IntelUsm>,
    q: QueueH,
    dst: usize,
    src: usize,
    size: usize,
    waits: &[EventH],
    ev: Option<&mut EventH>,
) -> Result<()> {
    // The extension's copy and the SVM copy take the same arguments.
    let (f, name) = match intel {
        Some(i) => (i.clEnqueueMemcpyINTEL, "clEnqueueMemcpyINTEL (USM memcpy)"),
        None => (
            api()?.clEnqueueSVMMemcpy.ok_or_else(|| {
                Error::new(Status::Internal, "SVM strategy without clEnqueueSVMMemcpy")
            })?,
            "clEnqueueSVMMemcpy (USM memcpy)",
        ),
    };
    let wl = cl_events(waits);
    // SAFETY: the caller validated both ranges; the wait list holds
    // events of the queue's context.
    let rc = unsafe {
        f(
            cl_queue_of(q),
            CL_FALSE,
            dst as *mut c_void,
            src as *const c_void,
            size,
            wl.len() as cl_uint,
            ptr_or_null(wl),
            out_ptr(ev),
        )
    };
    check(rc, name)
}

/// A USM fill of `size` bytes with `pattern` (validated by the caller).
pub fn fill(
    intel: Option<IntelUsm>,
    q: QueueH,
    dst: usize,
    pattern: &[u8],
    size: usize,
    waits: &[EventH],
    ev: Option<&mut EventH>,
) -> Result<()> {
    // The extension's fill and the SVM fill take the same arguments.
    let (f, name) = match intel {
        Some(i) => (i.clEnqueueMemFillINTEL, "clEnqueueMemFillINTEL (USM fill)"),
        None => (
            api()?.clEnqueueSVMMemFill.ok_or_else(|| {
                Error::new(Status::Internal, "SVM strategy without clEnqueueSVMMemFill")
            })?,
            "clEnqueueSVMMemFill (USM fill)",
        ),
    };
    let wl = cl_events(waits);
    // SAFETY: a validated range; OpenCL copies the pattern; the wait list
    // holds events of the queue's context.
    let rc = unsafe {
        f(
            cl_queue_of(q),
            dst as *mut c_void,
            pattern.as_ptr().cast(),
            pattern.len(),
            size,
            wl.len() as cl_uint,
            ptr_or_null(wl),
            out_ptr(ev),
        )
    };
    check(rc, name)
}

/// A prefetch of a USM range to the queue's device; `false` where the
/// platform cannot (nothing enqueued).
pub fn migrate(
    intel: Option<IntelUsm>,
    q: QueueH,
    ptr: usize,
    size: usize,
    waits: &[EventH],
    ev: Option<&mut EventH>,
) -> Result<bool> {
    let api = api()?;
    let (q, wl, out) = (cl_queue_of(q), cl_events(waits), out_ptr(ev));
    let p = ptr as *const c_void;
    let (rc, name) = match (intel, api.clEnqueueSVMMigrateMem) {
        (Some(i), _) => match i.clEnqueueMigrateMemINTEL {
            // SAFETY: a validated range; flags 0 move it to the device.
            Some(m) => (
                unsafe { m(q, p, size, 0, wl.len() as cl_uint, ptr_or_null(wl), out) },
                "clEnqueueMigrateMemINTEL (USM prefetch)",
            ),
            None => (
                CL_INVALID_OPERATION,
                "clEnqueueMigrateMemINTEL (USM prefetch)",
            ),
        },
        // SAFETY: one validated SVM range, moved to the device.
        (None, Some(m)) => (
            unsafe {
                m(
                    q,
                    1,
                    &p,
                    &size,
                    0,
                    wl.len() as cl_uint,
                    ptr_or_null(wl),
                    out,
                )
            },
            "clEnqueueSVMMigrateMem (USM prefetch)",
        ),
        (None, None) => (
            CL_INVALID_OPERATION,
            "clEnqueueSVMMigrateMem (USM prefetch)",
        ),
    };
    if rc == CL_INVALID_VALUE || rc == CL_INVALID_OPERATION {
        return Ok(false);
    }
    check(rc, name).map(|()| true)
}

/// Advice on a USM range through Intel's extension; `false` where the
/// platform does not take it (nothing enqueued).
#[allow(clippy::too_many_arguments)]
pub fn advise(
    intel: Option<IntelUsm>,
    q: QueueH,
    ptr: usize,
    size: usize,
    advice: u32,
    waits: &[EventH],
    ev: Option<&mut EventH>,
) -> Result<bool> {
    let Some(a) = intel.and_then(|i| i.clEnqueueMemAdviseINTEL) else {
        return Ok(false);
    };
    let wl = cl_events(waits);
    // SAFETY: a validated range; the driver checks the advice value.
    let rc = unsafe {
        a(
            cl_queue_of(q),
            ptr as *const c_void,
            size,
            advice,
            wl.len() as cl_uint,
            ptr_or_null(wl),
            out_ptr(ev),
        )
    };
    if rc == CL_INVALID_VALUE {
        return Ok(false);
    }
    check(rc, "clEnqueueMemAdviseINTEL (USM mem_advise)").map(|()| true)
}
