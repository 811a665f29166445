//! Events.

use super::types::*;
use super::{borrow, clone_arc, clone_arc_with, guard, into_handle, out, release, retain, slice};
use crate::backend::Stamp;
use crate::core::error::{Error, Result};
use crate::runtime::context::Context;
use crate::runtime::event::{wait_all, Event, EventState};
use crate::runtime::queue::Submitted;
use std::sync::Arc;

pub(crate) unsafe fn deps_from(
    list: *const *const Event,
    count: usize,
) -> Result<crate::runtime::buffer::Deps> {
    if count == 0 {
        // The usual case, without building a list through the iterator.
        return Ok(crate::runtime::buffer::Deps::new());
    }
    // SAFETY: forwarded contract.
    let raw = unsafe { slice(list, count, "dependencies") }?;
    raw.iter()
        .enumerate()
        .map(|(i, &p)| {
            // SAFETY: each entry is an event handle per the contract.
            let e = unsafe { clone_arc_with(p, || format!("dependencies[{i}]")) }?;
            e.check_runs(&format!("depend on dependencies[{i}], which is"))?;
            Ok(e)
        })
        .collect()
}

/// Hands an event to the caller if they asked for it.
pub(crate) unsafe fn give_event(ev: Arc<Event>, out_event: *mut *mut Event) {
    if !out_event.is_null() {
        // SAFETY: writable per the contract.
        unsafe { *out_event = into_handle(ev) };
    }
}

/// Hands a submitted command's event to the caller if they asked for it
/// (a command goes without one only when none was asked for).
pub(crate) unsafe fn give_submitted(done: Submitted, out_event: *mut *mut Event) {
    if let Submitted::Event(ev) = done {
        // SAFETY: forwarded contract.
        unsafe { give_event(ev, out_event) };
    }
}

/// Blocks until the event's command completes. Returns
/// `SYRAH_ERROR_EXECUTION_FAILED` if it failed and this failure was not yet
/// reported (by an earlier wait or `syrah_queue_wait`); each failure is
/// reported once.
#[no_mangle]
pub unsafe extern "C" fn syrah_event_wait(event: *const Event) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let e = unsafe { borrow(event, "event") }?;
        e.wait()
    })
}

/// Waits for every event in the list; returns the first unreported failure.
#[no_mangle]
pub unsafe extern "C" fn syrah_event_wait_list(
    events: *const *const Event,
    count: usize,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let raw = unsafe { slice(events, count, "events") }?;
        let arcs = raw
            .iter()
            .enumerate()
            // SAFETY: each entry is an event handle per the contract.
            .map(|(i, &p)| unsafe { clone_arc(p, &format!("events[{i}]")) })
            .collect::<Result<Vec<_>>>()?;
        wait_all(&arcs)
    })
}

/// The event's execution state (`SYRAH_EVENT_*`), without waiting.
#[no_mangle]
pub unsafe extern "C" fn syrah_event_get_status(
    event: *const Event,
    out_status: *mut syrah_event_status,
) -> syrah_status {
    guard(|| {
        super::need(out_status, "out_status")?;
        // SAFETY: forwarded contract.
        let e = unsafe { borrow(event, "event") }?;
        let s = match e.state()? {
            EventState::Queued => SYRAH_EVENT_QUEUED,
            EventState::Submitted => SYRAH_EVENT_SUBMITTED,
            EventState::Running => SYRAH_EVENT_RUNNING,
            EventState::Complete => SYRAH_EVENT_COMPLETE,
            EventState::Failed => SYRAH_EVENT_FAILED,
        };
        // SAFETY: forwarded contract.
        unsafe { out(out_status, s, "out_status") }
    })
}

/// A profiling timestamp (ns) of a completed command submitted to a queue
/// created with `SYRAH_QUEUE_PROFILING`.
#[no_mangle]
pub unsafe extern "C" fn syrah_event_get_profiling(
    event: *const Event,
    info: syrah_profiling_info,
    out_nanoseconds: *mut u64,
) -> syrah_status {
    guard(|| {
        super::need(out_nanoseconds, "out_nanoseconds")?;
        // SAFETY: forwarded contract.
        let e = unsafe { borrow(event, "event") }?;
        let which = match info {
            SYRAH_PROFILING_QUEUED => Stamp::Queued,
            SYRAH_PROFILING_SUBMIT => Stamp::Submitted,
            SYRAH_PROFILING_START => Stamp::Started,
            SYRAH_PROFILING_END => Stamp::Ended,
            other => return Err(Error::invalid(format!("unknown profiling info {other}"))),
        };
        let v = e.profiling_info(which)?;
        // SAFETY: forwarded contract.
        unsafe { out(out_nanoseconds, v, "out_nanoseconds") }
    })
}

/// Creates a user event in `context`, completed by
/// `syrah_user_event_complete`. Commands may depend on it.
#[no_mangle]
pub unsafe extern "C" fn syrah_user_event_create(
    context: *const Context,
    out_event: *mut *mut Event,
) -> syrah_status {
    guard(|| {
        if out_event.is_null() {
            return Err(super::null("out_event"));
        }
        // SAFETY: forwarded contract.
        let c = unsafe { borrow(context, "context") }?;
        let e = Event::create_user(c)?;
        // SAFETY: checked non-null.
        unsafe { out(out_event, into_handle(e), "out_event") }
    })
}

/// Completes a user event: successfully when `failed` is false; otherwise
/// as failed, so that commands waiting on it fail too.
#[no_mangle]
pub unsafe extern "C" fn syrah_user_event_complete(
    event: *const Event,
    failed: bool,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let e = unsafe { borrow(event, "event") }?;
        e.complete_user(failed)
    })
}

/// Completes a user event as failed with `message`: commands waiting on it
/// fail, and the failure they report quotes the message.
#[no_mangle]
pub unsafe extern "C" fn syrah_user_event_fail(
    event: *const Event,
    message: *const std::ffi::c_char,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let e = unsafe { borrow(event, "event") }?;
        // SAFETY: forwarded contract (a NUL-terminated string or NULL).
        let m = unsafe { super::cstr(message, "message") }?;
        e.complete_user_with(Some(Error::new(
            crate::core::error::Status::ExecutionFailed,
            m.to_string(),
        )))
    })
}

/// Adds a reference to an event.
#[no_mangle]
pub unsafe extern "C" fn syrah_event_retain(event: *const Event) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { retain(event, "event") })
}

/// Drops a reference to an event. The command itself is unaffected.
#[no_mangle]
pub unsafe extern "C" fn syrah_event_release(event: *const Event) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { release(event, "event") })
}
