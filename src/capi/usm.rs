//! Unified shared memory.

use super::device::device_ref;
use super::event::{deps_from, give_submitted};
use super::types::*;
use super::{borrow, guard, out};
use crate::core::error::{Error, Result};
use crate::core::registry::AllocKind;
use crate::runtime::context::Context;
use crate::runtime::event::Event;
use crate::runtime::graph::Action;
use crate::runtime::platform::Device;
use crate::runtime::queue::{Queue, Submitted};
use std::ffi::c_void;
use std::sync::Arc;

unsafe fn alloc(
    ctx: *const Context,
    device: *const Device,
    kind: AllocKind,
    align: usize,
    size: usize,
    out_ptr: *mut *mut c_void,
) -> Result<()> {
    if out_ptr.is_null() {
        return Err(super::null("out_pointer"));
    }
    // SAFETY: forwarded contract.
    let c = unsafe { borrow(ctx, "context") }?;
    let d = match kind {
        AllocKind::Host => None,
        _ => Some(device_ref(device, "device")?),
    };
    let p = c.usm_malloc(kind, d, size, align)?;
    // SAFETY: checked non-null.
    unsafe { out(out_ptr, p, "out_pointer") }
}

/// Allocates `size` bytes of device USM on `device` of `context`: usable by
/// kernels and USM operations, not by the host.
#[no_mangle]
pub unsafe extern "C" fn syrah_malloc_device(
    context: *const Context,
    device: *const Device,
    size: usize,
    out_pointer: *mut *mut c_void,
) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { alloc(context, device, AllocKind::Device, 0, size, out_pointer) })
}

/// Allocates `size` bytes of host USM: host memory the context's devices
/// can read and write.
#[no_mangle]
pub unsafe extern "C" fn syrah_malloc_host(
    context: *const Context,
    size: usize,
    out_pointer: *mut *mut c_void,
) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe {
        alloc(
            context,
            std::ptr::null(),
            AllocKind::Host,
            0,
            size,
            out_pointer,
        )
    })
}

/// Allocates `size` bytes of pinned (page-locked) host memory for fast
/// copies between the host and the context's devices: as the host side of
/// USM copies and as a buffer's host memory, it moves without being staged
/// through the runtime's own pinned memory. Where every device of the
/// context has host USM it is a host USM allocation (kernels may use it
/// too); elsewhere (NVIDIA's OpenCL, devices without USM) it is host memory
/// the driver pinned, which kernels cannot take and which
/// `syrah_get_pointer_type` reports as `SYRAH_USM_ALLOC_UNKNOWN`. Free it
/// with `syrah_free`.
#[no_mangle]
pub unsafe extern "C" fn syrah_malloc_pinned(
    context: *const Context,
    size: usize,
    out_pointer: *mut *mut c_void,
) -> syrah_status {
    guard(|| {
        if out_pointer.is_null() {
            return Err(super::null("out_pointer"));
        }
        // SAFETY: forwarded contract.
        let c = unsafe { borrow(context, "context") }?;
        let p = c.pinned_alloc(size)?;
        // SAFETY: checked non-null.
        unsafe { out(out_pointer, p, "out_pointer") }
    })
}

/// Allocates `size` bytes of shared USM associated with `device`,
/// accessible from the host and the device.
#[no_mangle]
pub unsafe extern "C" fn syrah_malloc_shared(
    context: *const Context,
    device: *const Device,
    size: usize,
    out_pointer: *mut *mut c_void,
) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { alloc(context, device, AllocKind::Shared, 0, size, out_pointer) })
}

/// `syrah_malloc_device` with an alignment (a power of two; 0 = default).
#[no_mangle]
pub unsafe extern "C" fn syrah_aligned_alloc_device(
    context: *const Context,
    device: *const Device,
    alignment: usize,
    size: usize,
    out_pointer: *mut *mut c_void,
) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe {
        alloc(
            context,
            device,
            AllocKind::Device,
            alignment,
            size,
            out_pointer,
        )
    })
}

/// `syrah_malloc_host` with an alignment (a power of two; 0 = default).
#[no_mangle]
pub unsafe extern "C" fn syrah_aligned_alloc_host(
    context: *const Context,
    alignment: usize,
    size: usize,
    out_pointer: *mut *mut c_void,
) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe {
        alloc(
            context,
            std::ptr::null(),
            AllocKind::Host,
            alignment,
            size,
            out_pointer,
        )
    })
}

/// `syrah_malloc_shared` with an alignment (a power of two; 0 = default).
#[no_mangle]
pub unsafe extern "C" fn syrah_aligned_alloc_shared(
    context: *const Context,
    device: *const Device,
    alignment: usize,
    size: usize,
    out_pointer: *mut *mut c_void,
) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe {
        alloc(
            context,
            device,
            AllocKind::Shared,
            alignment,
            size,
            out_pointer,
        )
    })
}

/// Frees a USM allocation of `context` (NULL is a no-op). Waits for the
/// context's queued commands first, so freeing memory a pending command
/// uses is safe.
#[no_mangle]
pub unsafe extern "C" fn syrah_free(context: *const Context, pointer: *mut c_void) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { borrow(context, "context") }?;
        if pointer.is_null() {
            return Ok(());
        }
        c.usm_free(pointer)
    })
}

/// The kind of USM allocation `pointer` points into, or
/// `SYRAH_USM_ALLOC_UNKNOWN` when it is not USM of `context`.
#[no_mangle]
pub unsafe extern "C" fn syrah_get_pointer_type(
    context: *const Context,
    pointer: *const c_void,
    out_type: *mut syrah_usm_alloc,
) -> syrah_status {
    guard(|| {
        super::need(out_type, "out_type")?;
        // SAFETY: forwarded contract.
        let c = unsafe { borrow(context, "context") }?;
        let t = match c.pointer_kind(pointer) {
            None => SYRAH_USM_ALLOC_UNKNOWN,
            Some((AllocKind::Host, _)) => SYRAH_USM_ALLOC_HOST,
            Some((AllocKind::Device, _)) => SYRAH_USM_ALLOC_DEVICE,
            Some((AllocKind::Shared, _)) => SYRAH_USM_ALLOC_SHARED,
        };
        // SAFETY: forwarded contract.
        unsafe { out(out_type, t, "out_type") }
    })
}

/// The device a device or shared allocation is bound to. Host allocations
/// give the context's first device; non-USM pointers
/// `SYRAH_ERROR_INVALID_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn syrah_get_pointer_device(
    context: *const Context,
    pointer: *const c_void,
    out_device: *mut *const Device,
) -> syrah_status {
    guard(|| {
        super::need(out_device, "out_device")?;
        // SAFETY: forwarded contract.
        let c = unsafe { borrow(context, "context") }?;
        let (_, dev) = c.pointer_kind(pointer).ok_or_else(|| {
            Error::new(
                crate::core::error::Status::InvalidPointer,
                format!(
                    "pointer {pointer:?} is not inside a USM allocation of context {}",
                    c.id
                ),
            )
        })?;
        let d = c.devices.get(dev.unwrap_or(0)).copied().ok_or_else(|| {
            Error::new(
                crate::core::error::Status::Internal,
                "allocation names a missing device",
            )
        })?;
        // SAFETY: forwarded contract.
        unsafe { out(out_device, d as *const Device, "out_device") }
    })
}

/// Runs a queue operation with the C call's queue and dependencies and
/// hands its event to the caller if they asked for it.
///
/// # Safety
/// `queue`, the `ndeps` events at `deps` and `out_event` (when not null)
/// must be valid as the calling function's contract says.
unsafe fn queue_op(
    queue: *const Queue,
    deps: *const *const Event,
    ndeps: usize,
    out_event: *mut *mut Event,
    node: impl FnOnce() -> (Action, String),
    f: impl FnOnce(&Queue, &[Arc<Event>]) -> Result<Arc<Event>>,
) -> Result<()> {
    // SAFETY: forwarded contract.
    unsafe {
        queue_op_quiet(queue, deps, ndeps, out_event, node, |q, d, _| {
            f(q, d).map(Submitted::Event)
        })
    }
}

/// As [`queue_op`], for an operation that may go without an OpenCL event
/// when the caller asks for none (told by the third argument).
///
/// # Safety
/// As for [`queue_op`].
unsafe fn queue_op_quiet(
    queue: *const Queue,
    deps: *const *const Event,
    ndeps: usize,
    out_event: *mut *mut Event,
    node: impl FnOnce() -> (Action, String),
    f: impl FnOnce(&Queue, &[Arc<Event>], bool) -> Result<Submitted>,
) -> Result<()> {
    // SAFETY: forwarded contract.
    let q = unsafe { borrow(queue, "queue") }?;
    if let Some(rec) = crate::runtime::graph::recording_of(q) {
        let (action, what) = node();
        // SAFETY: forwarded contract.
        return unsafe {
            super::graph::record(&rec, action, Vec::new(), deps, ndeps, what, out_event)
        };
    }
    // SAFETY: forwarded contract.
    let d = unsafe { deps_from(deps, ndeps) }?;
    let done = f(q, &d, !out_event.is_null())?;
    // SAFETY: forwarded contract.
    unsafe { give_submitted(done, out_event) };
    Ok(())
}

/// Copies `size` bytes from `source` to `destination` after `dependencies`.
/// Either side may be USM of the queue's context or ordinary host memory,
/// which must stay valid until the returned event completes; a copy
/// between two host arrays works on every device, with or without USM.
/// Where the driver reads ordinary host memory when a copy from it is
/// enqueued (NVIDIA's OpenCL), such a copy behind unfinished device work
/// returns once that work has finished.
/// Ranges may not overlap. `out_event` may be NULL.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_memcpy(
    queue: *const Queue,
    destination: *mut c_void,
    source: *const c_void,
    size: usize,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    guard(|| {
        if size > 0 && (destination.is_null() || source.is_null()) {
            return Err(super::null(if destination.is_null() {
                "destination"
            } else {
                "source"
            }));
        }
        // SAFETY: forwarded contract.
        unsafe {
            queue_op_quiet(
                queue,
                dependencies,
                dependency_count,
                out_event,
                || {
                    let (dst, src) = (destination as usize, source as usize);
                    (
                        Action::Memcpy { dst, src, size },
                        format!("memcpy of {size} bytes"),
                    )
                },
                |q, d, want| q.memcpy(destination, source, size, d, want),
            )
        }
    })
}

/// Sets `size` bytes of USM at `pointer` to the byte `value`.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_memset(
    queue: *const Queue,
    pointer: *mut c_void,
    value: i32,
    size: usize,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    guard(|| {
        if pointer.is_null() {
            return Err(super::null("pointer"));
        }
        let byte = [value as u8];
        // SAFETY: forwarded contract.
        unsafe {
            queue_op_quiet(
                queue,
                dependencies,
                dependency_count,
                out_event,
                || {
                    let (ptr, pattern) = (pointer as usize, byte.to_vec());
                    (
                        Action::Fill { ptr, pattern, size },
                        format!("memset of {size} bytes"),
                    )
                },
                |q, d, want| q.fill_submitted(pointer, &byte, size, d, want),
            )
        }
    })
}

/// Fills `size` bytes of USM at `pointer` with a pattern of
/// `pattern_size` bytes (any size; `size` must be a multiple of it). The
/// pattern is copied before the call returns.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_fill(
    queue: *const Queue,
    pointer: *mut c_void,
    pattern: *const c_void,
    pattern_size: usize,
    size: usize,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    guard(|| {
        if pointer.is_null() {
            return Err(super::null("pointer"));
        }
        if pattern_size == 0 {
            return Err(Error::invalid("fill pattern_size is 0"));
        }
        // SAFETY: forwarded contract.
        let pat = unsafe { super::slice(pattern.cast::<u8>(), pattern_size, "pattern") }?;
        // SAFETY: forwarded contract.
        unsafe {
            queue_op_quiet(
                queue,
                dependencies,
                dependency_count,
                out_event,
                || {
                    let (ptr, pattern) = (pointer as usize, pat.to_vec());
                    (
                        Action::Fill { ptr, pattern, size },
                        format!("fill of {size} bytes"),
                    )
                },
                |q, d, want| q.fill_submitted(pointer, pat, size, d, want),
            )
        }
    })
}

/// Hints that `size` bytes at `pointer` will be used on the queue's device
/// soon; migrates shared memory where the backend can.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_prefetch(
    queue: *const Queue,
    pointer: *const c_void,
    size: usize,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    guard(|| {
        if pointer.is_null() {
            return Err(super::null("pointer"));
        }
        // SAFETY: forwarded contract.
        unsafe {
            queue_op(
                queue,
                dependencies,
                dependency_count,
                out_event,
                || {
                    let ptr = pointer as usize;
                    (
                        Action::Prefetch { ptr, size },
                        format!("prefetch of {size} bytes"),
                    )
                },
                |q, d| q.prefetch(pointer, size, d),
            )
        }
    })
}

/// Gives the driver device-specific `advice` about a USM range. 0 is the
/// default advice and accepted everywhere; other values only where the
/// backend defines them (`cl_intel_unified_shared_memory`).
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_mem_advise(
    queue: *const Queue,
    pointer: *const c_void,
    size: usize,
    advice: u32,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    guard(|| {
        if pointer.is_null() {
            return Err(super::null("pointer"));
        }
        // SAFETY: forwarded contract.
        unsafe {
            queue_op(
                queue,
                dependencies,
                dependency_count,
                out_event,
                || {
                    let ptr = pointer as usize;
                    let what = format!("mem_advise of {size} bytes");
                    (Action::Advise { ptr, size, advice }, what)
                },
                |q, d| q.mem_advise(pointer, size, advice, d),
            )
        }
    })
}
