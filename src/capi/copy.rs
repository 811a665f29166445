//! Accessors in command groups, and the explicit copies and fills of
//! accessors (between an accessor and host memory, between two accessors,
//! and fills with a pattern).

use super::buffer::{accessor_box, mode_from, syrah_accessor};
use super::types::*;
use super::{borrow, borrow_with, guard, null, slice};
use crate::core::error::{Error, Result, Status};
use crate::runtime::buffer::{AccessReq, AccessReqs, Buffer, Mode};
use crate::runtime::event::Event;
use crate::runtime::queue::Queue;
use std::ffi::c_void;
use std::sync::Arc;

/// Requests of a command group from the C descriptions.
pub(crate) unsafe fn requests<'a>(
    accessors: *const syrah_accessor,
    count: usize,
) -> Result<AccessReqs<'a>> {
    // SAFETY: forwarded contract.
    let raw = unsafe { slice(accessors, count, "accessors") }?;
    // The buffers' lines asked for together (a hint: bad handles are
    // refused below, before anything reads them).
    for a in raw {
        crate::core::prefetch::object(a.buffer);
    }
    let mut out = AccessReqs::with_capacity(raw.len());
    for (i, a) in raw.iter().enumerate() {
        // SAFETY: each entry names a live buffer handle per the contract,
        // which the caller keeps for the call (as every handle it passes).
        let b: &'a Buffer = unsafe { borrow_with(a.buffer, || format!("accessors[{i}].buffer")) }?;
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
    // Their storages, read once the launch is checked.
    for r in &out {
        crate::core::prefetch::arc(&r.buffer.storage);
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

/// Calls `release(ptr, user)` once `ev`, a command of `q`, has completed
/// or failed: soon after, through the runtime's watcher (drivers' own
/// completion callbacks can come milliseconds late), and before a wait on
/// `q` returns.
fn on_complete(
    q: &Queue,
    ev: &Arc<Event>,
    release: syrah_host_release_fn,
    ptr: usize,
    user: *mut c_void,
) -> Result<()> {
    let Some(f) = release else { return Ok(()) };
    let user = user as usize;
    let q = q
        .self_arc()
        .ok_or_else(|| Error::new(Status::Internal, "a copy on a queue being dropped"))?;
    q.after_command(
        ev,
        Box::new(move || {
            // SAFETY: the user's callback with the pointer and data they
            // gave, called once.
            unsafe { f(ptr as *mut c_void, user as *mut c_void) }
        }),
    )
}

unsafe fn one_request<'a>(a: *const syrah_accessor, what: &str) -> Result<AccessReq<'a>> {
    if a.is_null() {
        return Err(null(&format!("{what} (an accessor)")));
    }
    // SAFETY: forwarded contract.
    let mut reqs = unsafe { requests(a, 1) }?;
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
    super::graph::refuse_while_recording(q, "an explicit accessor copy or fill")?;
    if host.is_null() {
        return Err(null(if to_host { "destination" } else { "source" }));
    }
    let what = if to_host { "source" } else { "destination" };
    // SAFETY: forwarded contract.
    let r = unsafe { one_request(acc, what) }?;
    if to_host {
        reads_device(r.mode, "the source accessor")?;
    } else {
        writes_device(r.mode, "the destination accessor")?;
    }
    // SAFETY: forwarded contract.
    let deps = unsafe { super::event::deps_from(dependencies, dependency_count) }?;
    // SAFETY: the caller keeps the host memory valid per the contract.
    let ev = unsafe { q.copy_host_accessor(&r, host as usize, to_host, &deps) }?;
    on_complete(q, &ev, release, host as usize, user_data)?;
    // SAFETY: forwarded contract.
    unsafe { super::event::give_event(ev, out_event) };
    Ok(())
}

/// Copies the accessor's elements from the buffer into `destination`,
/// packed contiguously (row after row), after `dependencies` and earlier
/// conflicting commands. The accessor's mode must read: read, read_write or
/// discard_read_write. `destination` must hold the accessor's bytes until
/// the copy completes; then `release(destination, user_data)` is called if
/// given, on a runtime thread, before `syrah_queue_wait` on the queue
/// returns.
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
/// then `release(source, user_data)` is called if given, on a runtime
/// thread, before `syrah_queue_wait` on the queue returns.
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
        super::graph::refuse_while_recording(q, "an explicit accessor copy or fill")?;
        // SAFETY: forwarded contract.
        let s = unsafe { one_request(source, "source") }?;
        // SAFETY: forwarded contract.
        let d = unsafe { one_request(destination, "destination") }?;
        reads_device(s.mode, "the source accessor")?;
        writes_device(d.mode, "the destination accessor")?;
        if s.buffer.view.elem != d.buffer.view.elem || s.range != d.range {
            return Err(Error::invalid(format!(
                "the accessors do not match: source {:?} elements of {} bytes, destination {:?} elements of {} bytes",
                s.range, s.buffer.view.elem, d.range, d.buffer.view.elem
            )));
        }
        if Arc::ptr_eq(&s.buffer.storage, &d.buffer.storage) {
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
        super::graph::refuse_while_recording(q, "an explicit accessor copy or fill")?;
        if !(pattern_size.is_power_of_two() && pattern_size <= 128) {
            return Err(Error::invalid(format!(
                "fill pattern size {pattern_size} is not one of 1, 2, 4, 8, 16, 32, 64 or 128 bytes"
            )));
        }
        // SAFETY: forwarded contract.
        let pat = unsafe { slice(pattern.cast::<u8>(), pattern_size, "pattern") }?;
        // SAFETY: forwarded contract.
        let r = unsafe { one_request(destination, "destination") }?;
        writes_device(r.mode, "the filled accessor")?;
        if r.buffer.view.elem % pattern_size != 0 {
            return Err(Error::invalid(format!(
                "fill pattern size {pattern_size} does not divide the element size {}",
                r.buffer.view.elem
            )));
        }
        // SAFETY: forwarded contract.
        let deps = unsafe { super::event::deps_from(dependencies, dependency_count) }?;
        let done = q.fill_accessor(&r, pat, &deps, !out_event.is_null())?;
        // SAFETY: forwarded contract.
        unsafe { super::event::give_submitted(done, out_event) };
        Ok(())
    })
}
