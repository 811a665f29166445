//! Buffers, accessors and host accessors.

use super::types::*;
use super::{borrow, clone_arc_with, guard, into_handle, null, out, release, retain, slice};
use crate::core::error::{Error, Result, Status};
use crate::runtime::buffer::{
    AccessReq, Allocator, Buffer, BufferDesc, HostAccessor, Mode, Ownership,
};
use crate::runtime::event::Event;
use crate::runtime::queue::Queue;
use smallvec::SmallVec;
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
        let sg = b.owner.storage.geom;
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
        let m = mode_from(mode).map_err(|mut e| {
            e.message = format!("the host accessor has {}", e.message);
            e
        })?;
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
        let (o3, r3) = accessor_box(b, o, r)?;
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

/// Ends a host access: commands waiting for it may start.
#[no_mangle]
pub unsafe extern "C" fn syrah_host_accessor_release(
    accessor: *const HostAccessor,
) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { release(accessor, "host accessor") })
}

/// Requests of a command group from the C descriptions.
pub(crate) unsafe fn requests<'a>(
    accessors: *const syrah_accessor,
    count: usize,
    keep: &'a mut SmallVec<[Arc<Buffer>; 4]>,
) -> Result<SmallVec<[AccessReq<'a>; 4]>> {
    // SAFETY: forwarded contract.
    let raw = unsafe { slice(accessors, count, "accessors") }?;
    for (i, a) in raw.iter().enumerate() {
        // SAFETY: each entry names a buffer handle per the contract.
        keep.push(unsafe { clone_arc_with(a.buffer, || format!("accessors[{i}].buffer")) }?);
    }
    let keep: &'a SmallVec<[Arc<Buffer>; 4]> = keep;
    let mut out = SmallVec::with_capacity(raw.len());
    for (i, a) in raw.iter().enumerate() {
        let b: &'a Buffer = &keep[i];
        let mode = mode_from(a.mode).map_err(|mut e| {
            e.message = format!("accessors[{i}] has {}", e.message);
            e
        })?;
        let (offset, range) = accessor_box(b, a.offset, a.range).map_err(|mut e| {
            e.message = format!("accessors[{i}]: {}", e.message);
            e
        })?;
        b.view.check_elements(offset, range).map_err(|mut e| {
            e.message = format!("accessors[{i}]: {}", e.message);
            e
        })?;
        out.push(AccessReq {
            buffer: b,
            mode,
            offset,
            range,
        });
    }
    if out.is_empty() && count > 0 {
        return Err(Error::new(Status::Internal, "accessor list lost"));
    }
    Ok(out)
}

/// Called once an explicit copy no longer needs its host memory, with the
/// host pointer and the user data (on a runtime or driver thread).
pub type syrah_host_release_fn = Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>;

fn reads_device(m: Mode, what: &str) -> Result<()> {
    if matches!(m, Mode::Read | Mode::ReadWrite | Mode::DiscardReadWrite) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} is read by the copy, but its mode is '{}': reading needs read, read_write or discard_read_write",
            m.name()
        )))
    }
}

fn writes_device(m: Mode, what: &str) -> Result<()> {
    if m != Mode::Read {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} is written, but its mode is 'read': writing needs write, read_write, discard_write or discard_read_write"
        )))
    }
}

struct Release {
    f: unsafe extern "C" fn(*mut c_void, *mut c_void),
    ptr: usize,
    user: usize,
}

unsafe extern "C" fn run_release(
    _ev: crate::opencl::ffi::cl_event,
    _status: crate::opencl::ffi::cl_int,
    user: *mut c_void,
) {
    // SAFETY: `user` is the Box registered with this callback, taken back
    // exactly once.
    let r = unsafe { Box::from_raw(user as *mut Release) };
    // SAFETY: the user's callback with the pointer and data they gave.
    unsafe { (r.f)(r.ptr as *mut c_void, r.user as *mut c_void) };
}

fn on_complete(
    ev: &Event,
    release: syrah_host_release_fn,
    ptr: usize,
    user: *mut c_void,
) -> Result<()> {
    let Some(f) = release else { return Ok(()) };
    let api = crate::opencl::loader::api()?;
    let raw = Box::into_raw(Box::new(Release {
        f,
        ptr,
        user: user as usize,
    })) as *mut c_void;
    // SAFETY: a live event; the callback takes the box back once.
    let rc = unsafe {
        (api.clSetEventCallback)(
            ev.cl,
            crate::opencl::ffi::CL_COMPLETE,
            Some(run_release),
            raw,
        )
    };
    if rc != crate::opencl::ffi::CL_SUCCESS {
        // Not registered: run it here once the copy is done.
        let _ = ev.wait();
        // SAFETY: `raw` is the box made above, handed over exactly once.
        unsafe { run_release(ev.cl, 0, raw) };
    }
    Ok(())
}

unsafe fn one_request<'a>(
    a: *const syrah_accessor,
    what: &str,
    keep: &'a mut smallvec::SmallVec<[Arc<Buffer>; 4]>,
) -> Result<AccessReq<'a>> {
    if a.is_null() {
        return Err(null(&format!("{what} (an accessor)")));
    }
    // SAFETY: forwarded contract.
    let mut reqs = unsafe { requests(a, 1, keep) }?;
    reqs.pop()
        .ok_or_else(|| Error::new(Status::Internal, "accessor lost"))
}

/// The shared body of the two host-memory copies.
#[allow(clippy::too_many_arguments)]
unsafe fn copy_host(
    queue: *const Queue,
    acc: *const syrah_accessor,
    host: *mut c_void,
    to_host: bool,
    release: syrah_host_release_fn,
    user_data: *mut c_void,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> Result<()> {
    // SAFETY: forwarded contract.
    let q = unsafe { borrow(queue, "queue") }?;
    if host.is_null() {
        return Err(null(if to_host { "destination" } else { "source" }));
    }
    let mut keep = smallvec::SmallVec::new();
    let what = if to_host { "source" } else { "destination" };
    // SAFETY: forwarded contract.
    let r = unsafe { one_request(acc, what, &mut keep) }?;
    if to_host {
        reads_device(r.mode, "the source accessor")?;
    } else {
        writes_device(r.mode, "the destination accessor")?;
    }
    // SAFETY: forwarded contract.
    let deps = unsafe { super::event::deps_from(dependencies, dependency_count) }?;
    // SAFETY: the caller keeps the host memory valid per the contract.
    let ev = unsafe { q.copy_host_accessor(&r, host as usize, to_host, &deps) }?;
    on_complete(&ev, release, host as usize, user_data)?;
    // SAFETY: forwarded contract.
    unsafe { super::event::give_event(ev, out_event) };
    Ok(())
}

/// Copies the accessor's elements from the buffer into `destination`,
/// packed contiguously (row after row), after `dependencies` and earlier
/// conflicting commands. The accessor's mode must read: read, read_write or
/// discard_read_write. `destination` must hold the accessor's bytes until
/// the copy completes; then `release(destination, user_data)` is called if
/// given.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_copy_from_accessor(
    queue: *const Queue,
    source: *const syrah_accessor,
    destination: *mut c_void,
    release: syrah_host_release_fn,
    user_data: *mut c_void,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe {
        copy_host(
            queue,
            source,
            destination,
            true,
            release,
            user_data,
            dependencies,
            dependency_count,
            out_event,
        )
    })
}

/// Copies packed elements from `source` into the accessor's elements of the
/// buffer. The accessor's mode must write: write, read_write, discard_write
/// or discard_read_write. `source` must stay valid until the copy completes;
/// then `release(source, user_data)` is called if given.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_copy_to_accessor(
    queue: *const Queue,
    source: *const c_void,
    destination: *const syrah_accessor,
    release: syrah_host_release_fn,
    user_data: *mut c_void,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe {
        copy_host(
            queue,
            destination,
            source as *mut c_void,
            false,
            release,
            user_data,
            dependencies,
            dependency_count,
            out_event,
        )
    })
}

/// Copies one accessor's elements into another's (same buffers or not):
/// both must have the same element size and extents. The source's mode
/// must read, the destination's must write.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_copy_accessor(
    queue: *const Queue,
    source: *const syrah_accessor,
    destination: *const syrah_accessor,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let q = unsafe { borrow(queue, "queue") }?;
        let mut k1 = smallvec::SmallVec::new();
        let mut k2 = smallvec::SmallVec::new();
        // SAFETY: forwarded contract.
        let s = unsafe { one_request(source, "source", &mut k1) }?;
        // SAFETY: forwarded contract.
        let d = unsafe { one_request(destination, "destination", &mut k2) }?;
        reads_device(s.mode, "the source accessor")?;
        writes_device(d.mode, "the destination accessor")?;
        if s.buffer.view.elem != d.buffer.view.elem || s.range != d.range {
            return Err(Error::invalid(format!(
                "the accessors do not match: source {:?} elements of {} bytes, destination {:?} elements of {} bytes",
                s.range, s.buffer.view.elem, d.range, d.buffer.view.elem
            )));
        }
        if Arc::ptr_eq(&s.buffer.owner.storage, &d.buffer.owner.storage) {
            let (a, b) = (
                s.buffer.pages_of(s.offset, s.range)?,
                d.buffer.pages_of(d.offset, d.range)?,
            );
            let (sa, sb) = (
                s.buffer.view.byte_offset(s.offset),
                d.buffer.view.byte_offset(d.offset),
            );
            let n = s.range.iter().product::<usize>() * s.buffer.view.elem;
            if a.overlaps(&b) && sa < sb + n && sb < sa + n {
                return Err(Error::invalid(
                    "the source and destination windows of one buffer overlap",
                ));
            }
        }
        // SAFETY: forwarded contract.
        let deps = unsafe { super::event::deps_from(dependencies, dependency_count) }?;
        // With no event asked for, the copy may go without one.
        let done = q.copy_accessors(&s, &d, &deps, !out_event.is_null())?;
        // SAFETY: forwarded contract.
        unsafe { super::event::give_submitted(done, out_event) };
        Ok(())
    })
}

/// Fills the accessor's elements with `pattern` repeated; `pattern_size` is
/// 1, 2, 4, 8, 16, 32, 64 or 128 bytes and divides the element size. The
/// accessor's mode must write.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_fill_accessor(
    queue: *const Queue,
    destination: *const syrah_accessor,
    pattern: *const c_void,
    pattern_size: usize,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let q = unsafe { borrow(queue, "queue") }?;
        if !(pattern_size.is_power_of_two() && pattern_size <= 128) {
            return Err(Error::invalid(format!(
                "fill pattern size {pattern_size} is not one of 1, 2, 4, 8, 16, 32, 64 or 128 bytes"
            )));
        }
        // SAFETY: forwarded contract.
        let pat = unsafe { slice(pattern.cast::<u8>(), pattern_size, "pattern") }?;
        let mut keep = smallvec::SmallVec::new();
        // SAFETY: forwarded contract.
        let r = unsafe { one_request(destination, "destination", &mut keep) }?;
        writes_device(r.mode, "the filled accessor")?;
        if r.buffer.view.elem % pattern_size != 0 {
            return Err(Error::invalid(format!(
                "fill pattern size {pattern_size} does not divide the element size {}",
                r.buffer.view.elem
            )));
        }
        // SAFETY: forwarded contract.
        let deps = unsafe { super::event::deps_from(dependencies, dependency_count) }?;
        let ev = q.fill_accessor(&r, pat, &deps)?;
        // SAFETY: forwarded contract.
        unsafe { super::event::give_event(ev, out_event) };
        Ok(())
    })
}
