//! Contexts.

use super::device::device_ref;
use super::types::*;
use super::{borrow, guard, into_handle, out, release, retain, slice};
use crate::core::error::{Error, Result, Status};
use crate::runtime::context::Context;
use crate::runtime::platform::Device;

pub(crate) unsafe fn devices_from(
    list: *const *const Device,
    count: usize,
) -> Result<Vec<&'static Device>> {
    // SAFETY: forwarded contract.
    let raw = unsafe { slice(list, count, "devices") }?;
    raw.iter()
        .enumerate()
        .map(|(i, &p)| device_ref(p, &format!("devices[{i}]")))
        .collect()
}

/// Creates a context over `count` devices of one platform. The caller owns
/// the new context and releases it with `syrah_context_release`.
#[no_mangle]
pub unsafe extern "C" fn syrah_context_create(
    devices: *const *const Device,
    count: usize,
    out_context: *mut *mut Context,
) -> syrah_status {
    guard(|| {
        if out_context.is_null() {
            return Err(super::null("out_context"));
        }
        // SAFETY: forwarded contract.
        let devs = unsafe { devices_from(devices, count) }?;
        if devs.is_empty() {
            return Err(Error::invalid(
                "a context needs at least one device (count is 0)",
            ));
        }
        let ctx = Context::create(&devs)?;
        // SAFETY: checked non-null above.
        unsafe { out(out_context, into_handle(ctx), "out_context") }
    })
}

/// Adds a reference to a context.
#[no_mangle]
pub unsafe extern "C" fn syrah_context_retain(context: *const Context) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { retain(context, "context") })
}

/// Drops a reference; the last one frees the context's remaining USM
/// allocations and cached programs.
#[no_mangle]
pub unsafe extern "C" fn syrah_context_release(context: *const Context) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { release(context, "context") })
}

/// Lists a context's devices, like `syrah_get_devices`.
#[no_mangle]
pub unsafe extern "C" fn syrah_context_get_devices(
    context: *const Context,
    devices: *mut *const Device,
    capacity: usize,
    out_count: *mut usize,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { borrow(context, "context") }?;
        if devices.is_null() && capacity != 0 {
            return Err(Error::new(
                Status::NullArgument,
                format!("output array is NULL but its capacity is {capacity}"),
            ));
        }
        if out_count.is_null() {
            return Err(super::null("out_count"));
        }
        for (i, d) in c.devices.iter().take(capacity).enumerate() {
            // SAFETY: `capacity` writable slots per the contract.
            unsafe { *devices.add(i) = *d as *const Device };
        }
        // SAFETY: checked non-null.
        unsafe { out(out_count, c.devices.len(), "out_count") }
    })
}

/// The number of distinct program builds cached in the context (one per
/// source or binary, options and device set).
#[no_mangle]
pub unsafe extern "C" fn syrah_context_get_program_count(
    context: *const Context,
    out_count: *mut usize,
) -> syrah_status {
    guard(|| {
        super::need(out_count, "out_count")?;
        // SAFETY: forwarded contract.
        let c = unsafe { borrow(context, "context") }?;
        let n = c.programs.lock().len();
        // SAFETY: forwarded contract.
        unsafe { out(out_count, n, "out_count") }
    })
}

/// Gives back to the driver the device memory the context keeps for reuse:
/// freed USM device allocations (kept, on devices whose driver allocates
/// slowly, for later allocations of a similar size) and released buffers'
/// allocations. `out_bytes` (may be NULL) receives how many bytes of freed
/// USM allocations were kept before the call. Allocations still in use are
/// not touched; the context keeps working as before.
#[no_mangle]
pub unsafe extern "C" fn syrah_context_trim(
    context: *const Context,
    out_bytes: *mut usize,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { borrow(context, "context") }?;
        let kept = c.pooled_bytes();
        c.trim();
        if !out_bytes.is_null() {
            // SAFETY: checked non-null; writable per the contract.
            unsafe { out(out_bytes, kept, "out_bytes") }?;
        }
        Ok(())
    })
}
