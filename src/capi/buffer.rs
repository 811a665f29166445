//! Buffers, accessors and host accessors.

use super::types::*;
use super::{borrow, guard, into_handle, null, out, release, retain, slice};
use crate::core::error::{Error, Result};
use crate::runtime::buffer::{Allocator, Buffer, BufferDesc, HostAccessor, Mode, Ownership};
use crate::runtime::event::Event;
use crate::runtime::queue::Queue;
use std::ffi::c_void;
use std::sync::Arc;

/// One buffer requirement of a command group: which buffer, how it is
/// accessed, and the element range (offset and extent per dimension, as in
/// the buffer's `range`; `range` all zero means the whole buffer). A kernel
/// argument `SYRAH_ARG_ACCESSOR` receives a pointer to the element at
/// `offset`; rows are `range[last] * element_size` bytes apart in the
/// buffer, slices `range[1] * range[2] * element_size` (the buffer's own
/// pitches, see `syrah_buffer_get_info`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct syrah_accessor {
    pub buffer: *const Buffer,
    pub mode: syrah_access_mode,
    pub offset: [usize; 3],
    pub range: [usize; 3],
}

/// Shape of a buffer as seen through a handle.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct syrah_buffer_info {
    pub element_size: usize,
    pub dimensions: u32,
    pub range: [usize; 3],
    pub page_size: [usize; 3],
    /// Bytes between consecutive rows (the last dimension is contiguous).
    pub row_pitch: usize,
    /// Bytes between consecutive slices of a 3D buffer.
    pub slice_pitch: usize,
    pub size_bytes: usize,
}

pub(crate) fn mode_from(m: syrah_access_mode) -> Result<Mode> {
    Ok(match m {
        SYRAH_ACCESS_READ => Mode::Read,
        SYRAH_ACCESS_WRITE => Mode::Write,
        SYRAH_ACCESS_READ_WRITE => Mode::ReadWrite,
        SYRAH_ACCESS_DISCARD_WRITE => Mode::DiscardWrite,
        SYRAH_ACCESS_DISCARD_READ_WRITE => Mode::DiscardReadWrite,
        other => return Err(Error::invalid(format!("the unknown access mode {other}"))),
    })
}

/// Converts a user extent (dims entries) to 3D, the unused leading
/// dimensions being `fill`.
fn to3(dims: u32, v: [usize; 3], fill: usize) -> Result<[usize; 3]> {
    crate::core::pages::normalize(dims, &v, fill)
}

/// Element box of an accessor in the view's 3D terms.
pub(crate) fn accessor_box(
    b: &Buffer,
    offset: [usize; 3],
    range: [usize; 3],
) -> Result<([usize; 3], [usize; 3])> {
    let off = to3(b.dims, offset, 0)?;
    let whole = range[..b.dims as usize].iter().all(|&r| r == 0);
    let rng = if whole {
        if off != [0; 3] {
            return Err(Error::invalid(format!(
                "an accessor with offset {:?} needs a range (all-zero range means the whole buffer)",
                &offset[..b.dims as usize]
            )));
        }
        b.view.range
    } else {
        to3(b.dims, range, 1)?
    };
    Ok((off, rng))
}

/// Creates a buffer. The caller owns it and releases it with
/// `syrah_buffer_release`; what happens to `host_pointer` then is set by
/// `ownership` (see `syrah_host_ownership`), `syrah_buffer_set_final_data`
/// and `syrah_buffer_set_write_back`. No device memory is allocated until a
/// device first uses the buffer.
#[no_mangle]
pub unsafe extern "C" fn syrah_buffer_create(
    desc: *const syrah_buffer_desc,
    out_buffer: *mut *mut Buffer,
) -> syrah_status {
    guard(|| {
        if desc.is_null() {
            return Err(null("desc"));
        }
        if out_buffer.is_null() {
            return Err(null("out_buffer"));
        }
        // SAFETY: checked non-null; readable per the contract.
        let d = unsafe { *desc };
        let ownership = match d.ownership {
            SYRAH_HOST_NONE => Ownership::None,
            SYRAH_HOST_WRITE_BACK => Ownership::WriteBack,
            SYRAH_HOST_COPY_IN => Ownership::CopyIn,
            SYRAH_HOST_READ_ONLY => Ownership::ReadOnly,
            SYRAH_HOST_SHARED => Ownership::Shared,
            other => return Err(Error::invalid(format!("unknown host ownership {other}"))),
        };
        let allocator = if d.allocator.is_null() {
            None
        } else {
            // SAFETY: non-null; readable per the contract.
            let a = unsafe { *d.allocator };
            Some(Allocator {
                allocate: a.allocate.ok_or_else(|| null("allocator->allocate"))?,
                deallocate: a.deallocate,
                release: a.release,
                user_data: a.user_data as usize,
            })
        };
        let b = Buffer::create(BufferDesc {
            elem: d.element_size,
            dims: d.dimensions,
            range: d.range,
            page: d.page_size,
            host_ptr: d.host_pointer as usize,
            ownership,
            still_shared: d.still_shared.map(|f| (f, d.shared_user_data as usize)),
            allocator,
        })?;
        // SAFETY: checked non-null.
        unsafe { out(out_buffer, into_handle(Arc::new(b)), "out_buffer") }
    })
}

/// A new handle viewing the same storage with another element size and
/// range (same total bytes). Accesses through either handle are tracked
/// together; the view may assume larger page ranges than the original.
#[no_mangle]
pub unsafe extern "C" fn syrah_buffer_reinterpret(
    buffer: *const Buffer,
    element_size: usize,
    dimensions: u32,
    range: *const usize,
    out_buffer: *mut *mut Buffer,
) -> syrah_status {
    guard(|| {
        if out_buffer.is_null() {
            return Err(null("out_buffer"));
        }
        // SAFETY: forwarded contract.
        let b = unsafe { borrow(buffer, "buffer") }?;
        // SAFETY: `dimensions` entries per the contract (at most 3 read).
        let r = unsafe { slice(range, (dimensions as usize).min(3), "range") }?;
        let mut r3 = [0usize; 3];
        r3[..r.len()].copy_from_slice(r);
        let v = b.reinterpret(element_size, dimensions, r3)?;
        // SAFETY: checked non-null.
        unsafe { out(out_buffer, into_handle(Arc::new(v)), "out_buffer") }
    })
}

/// Adds a reference to a buffer handle.
#[no_mangle]
pub unsafe extern "C" fn syrah_buffer_retain(buffer: *const Buffer) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { retain(buffer, "buffer") })
}

/// Drops a reference. When the last handle of a buffer (and its views) is
/// released, the final data is written back if the buffer was told to
/// (this call then waits for it); otherwise it returns at once and the
/// memory is freed once pending commands complete.
#[no_mangle]
pub unsafe extern "C" fn syrah_buffer_release(buffer: *const Buffer) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { release(buffer, "buffer") })
}

/// The buffer's shape as seen through this handle.
#[no_mangle]
pub unsafe extern "C" fn syrah_buffer_get_info(
    buffer: *const Buffer,
    out_info: *mut syrah_buffer_info,
) -> syrah_status {
    guard(|| {
        super::need(out_info, "out_info")?;
        // SAFETY: forwarded contract.
        let b = unsafe { borrow(buffer, "buffer") }?;
        let d = b.dims as usize;
        let g = b.view;
        let sg = b.storage.geom;
        let mut info = syrah_buffer_info {
            element_size: g.elem,
            dimensions: b.dims,
            row_pitch: g.range[2] * g.elem,
            slice_pitch: g.range[1] * g.range[2] * g.elem,
            size_bytes: g.bytes(),
            ..Default::default()
        };
        info.range[..d].copy_from_slice(&g.range[3 - d..]);
        if g == sg {
            info.page_size[..d].copy_from_slice(&sg.page[3 - d..]);
        }
        // SAFETY: forwarded contract.
        unsafe { out(out_info, info, "out_info") }
    })
}

/// The buffer's allocation on the queue's device, made now if the device
/// has not used the buffer yet. It stays valid, at the same address, until
/// the buffer is destroyed, and is a device USM pointer of the queue's
/// context. Synchronising its use with the buffer's commands is the
/// caller's task.
#[no_mangle]
pub unsafe extern "C" fn syrah_buffer_get_device_pointer(
    buffer: *const Buffer,
    queue: *const Queue,
    out_pointer: *mut *mut c_void,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { borrow(buffer, "buffer") }?;
        // SAFETY: forwarded contract.
        let q = unsafe { borrow(queue, "queue") }?;
        if out_pointer.is_null() {
            return Err(null("out_pointer"));
        }
        let p = b.device_pointer(q)?;
        // SAFETY: checked non-null.
        unsafe { out(out_pointer, p, "out_pointer") }
    })
}

/// Bytes and copy commands the buffer's transfers have used so far.
#[no_mangle]
pub unsafe extern "C" fn syrah_buffer_get_stats(
    buffer: *const Buffer,
    out_stats: *mut syrah_buffer_stats,
) -> syrah_status {
    guard(|| {
        super::need(out_stats, "out_stats")?;
        // SAFETY: forwarded contract.
        let b = unsafe { borrow(buffer, "buffer") }?;
        let s = b.stats();
        let v = syrah_buffer_stats {
            host_to_device_bytes: s.h2d_bytes,
            device_to_host_bytes: s.d2h_bytes,
            device_to_device_bytes: s.d2d_bytes,
            host_to_device_copies: s.h2d_copies,
            device_to_host_copies: s.d2h_copies,
            device_to_device_copies: s.d2d_copies,
        };
        // SAFETY: forwarded contract.
        unsafe { out(out_stats, v, "out_stats") }
    })
}

/// Where the final data goes when the buffer is released: `pointer`
/// (which must hold the buffer's bytes), or nowhere when it is NULL.
/// Overrides what the ownership mode would do.
#[no_mangle]
pub unsafe extern "C" fn syrah_buffer_set_final_data(
    buffer: *const Buffer,
    pointer: *mut c_void,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { borrow(buffer, "buffer") }?;
        b.set_final_data(pointer as usize);
        Ok(())
    })
}

/// Turns the final write-back on or off (it is on by default wherever the
/// ownership mode or `syrah_buffer_set_final_data` names a destination).
#[no_mangle]
pub unsafe extern "C" fn syrah_buffer_set_write_back(
    buffer: *const Buffer,
    write_back: bool,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { borrow(buffer, "buffer") }?;
        b.set_write_back(write_back);
        Ok(())
    })
}

/// Starts copying every page that is outdated on the host home, after the
/// commands writing them. `*out_event` (may be NULL) receives the event of
/// the last copy, or NULL when the host was already current; the host
/// storage is the buffer's (a host accessor then finds it current).
#[no_mangle]
pub unsafe extern "C" fn syrah_buffer_update_host(
    buffer: *const Buffer,
    out_event: *mut *mut Event,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { borrow(buffer, "buffer") }?;
        let mut evs = b.update_host()?;
        let last = evs.pop();
        for e in &evs {
            e.wait()?;
        }
        if !out_event.is_null() {
            // SAFETY: writable per the contract.
            unsafe { *out_event = last.map_or(std::ptr::null_mut(), into_handle) };
        }
        Ok(())
    })
}

/// Maps `range` elements at `offset` (NULL `range` or all zero: the whole
/// buffer; NULL `offset`: the origin) on the host with `mode`, returning
/// once the data is current there. `*out_pointer` points at the element at
/// `offset`, with the buffer's pitches. Commands submitted later that
/// conflict wait until `syrah_host_accessor_release`; others run.
/// Conflicting host accessors held at the same time are refused.
#[no_mangle]
pub unsafe extern "C" fn syrah_buffer_host_access(
    buffer: *const Buffer,
    mode: syrah_access_mode,
    offset: *const usize,
    range: *const usize,
    out_accessor: *mut *mut HostAccessor,
    out_pointer: *mut *mut c_void,
) -> syrah_status {
    guard(|| {
        if out_accessor.is_null() || out_pointer.is_null() {
            return Err(null(if out_accessor.is_null() {
                "out_accessor"
            } else {
                "out_pointer"
            }));
        }
        // SAFETY: forwarded contract.
        let b = unsafe { borrow(buffer, "buffer") }?;
        if let Some(g) = crate::runtime::graph::recording_using(b.storage.id) {
            return Err(Error::new(
                crate::core::error::Status::InvalidOperation,
                format!(
                    "a host accessor cannot be taken on a buffer that graph {g}, being recorded, \
                     uses: end the recording first"
                ),
            ));
        }
        let m = mode_from(mode).map_err(|mut e| {
            e.message = format!("the host accessor has {}", e.message);
            e
        })?;
        // SAFETY: forwarded contract.
        let (o3, r3) = unsafe { host_box(b, offset, range) }?;
        let acc = b.host_access(m, o3, r3)?;
        let p = acc.ptr as *mut c_void;
        // SAFETY: checked non-null.
        unsafe {
            *out_pointer = p;
            *out_accessor = into_handle(Arc::new(acc));
        }
        Ok(())
    })
}

/// The element box a host-side call names: `offset` (NULL: the origin)
/// and `range` (NULL or all zero: the whole buffer), `dimensions` entries
/// each, in three dimensions.
unsafe fn host_box(
    b: &Buffer,
    offset: *const usize,
    range: *const usize,
) -> Result<([usize; 3], [usize; 3])> {
    let d = b.dims as usize;
    let mut o = [0usize; 3];
    let mut r = [0usize; 3];
    if !offset.is_null() {
        // SAFETY: `dimensions` readable entries per the contract.
        o[..d].copy_from_slice(unsafe { std::slice::from_raw_parts(offset, d) });
    }
    if !range.is_null() {
        // SAFETY: as above.
        r[..d].copy_from_slice(unsafe { std::slice::from_raw_parts(range, d) });
    }
    accessor_box(b, o, r)
}

/// Copies `range` elements at `offset` (NULL `range` or all zero: the whole
/// buffer; NULL `offset`: the origin) into `destination`, packed in row
/// order, once the commands writing them have completed: a small read in
/// one call, such as a convergence value in the middle of a loop. Only
/// those bytes move, from wherever they are current (a host accessor would
/// bring whole pages home); nothing else changes. `destination` must hold
/// the range's bytes. Blocks until the bytes are there.
#[no_mangle]
pub unsafe extern "C" fn syrah_buffer_read(
    buffer: *const Buffer,
    offset: *const usize,
    range: *const usize,
    destination: *mut c_void,
) -> syrah_status {
    guard(|| {
        if destination.is_null() {
            return Err(null("destination"));
        }
        // SAFETY: forwarded contract.
        let b = unsafe { borrow(buffer, "buffer") }?;
        // SAFETY: forwarded contract.
        let (o3, r3) = unsafe { host_box(b, offset, range) }?;
        // SAFETY: `destination` holds the range's bytes per the contract.
        unsafe { b.read(o3, r3, destination.cast()) }?;
        Ok(())
    })
}

/// Ends a host access: commands waiting for it may start.
#[no_mangle]
pub unsafe extern "C" fn syrah_host_accessor_release(
    accessor: *const HostAccessor,
) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { release(accessor, "host accessor") })
}
