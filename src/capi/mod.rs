//! The exported C ABI.
//!
//! Contract for every function here (the header's preamble repeats it):
//! handle arguments are NULL or values this library returned and the caller
//! has not released; pointer-and-length pairs describe readable (or, for
//! outputs, writable) memory of that length. NULL handles are rejected with
//! `SYRAH_ERROR_NULL_ARGUMENT`; with `SYRAH_VALIDATE=1`, released handles
//! are rejected with `SYRAH_ERROR_INVALID_HANDLE`. Every entry point catches
//! panics and returns `SYRAH_ERROR_INTERNAL`.

#![allow(non_camel_case_types, clippy::missing_safety_doc)]

pub mod args;
pub mod buffer;
pub mod context;
pub mod copy;
pub mod device;
pub mod event;
pub mod graph;
pub mod host_task;
pub mod program;
pub mod queue;
pub mod types;
pub mod usm;

use crate::core::error::{Error, Result, Status};
use crate::core::last_error;
use crate::runtime::launch::validating;
use std::collections::HashSet;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use types::syrah_status;

fn set_last_error(msg: &str) {
    last_error::set(msg);
}

/// Runs `f`, turning its error or panic into a status and a message.
pub(crate) fn guard<F: FnOnce() -> Result<()>>(f: F) -> syrah_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => Status::Success.code(),
        Ok(Err(e)) => {
            set_last_error(&e.message);
            e.status.code()
        }
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(&format!("internal error in Syrah: {what}"));
            Status::Internal.code()
        }
    }
}

pub(crate) fn null(what: &str) -> Error {
    Error::new(Status::NullArgument, format!("{what} is NULL"))
}

/// Refuses a NULL output before any work is done, so that a call with
/// nowhere to put its result has no effect.
pub(crate) fn need<T>(p: *mut T, what: &str) -> Result<()> {
    if p.is_null() {
        return Err(null(what));
    }
    Ok(())
}

/// Writes an output only on success.
pub(crate) unsafe fn out<T>(p: *mut T, v: T, what: &str) -> Result<()> {
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: the caller passed a writable `T` per the API contract.
    unsafe { p.write(v) };
    Ok(())
}

pub(crate) unsafe fn cstr<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: the caller passed a NUL-terminated string per the contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Error::invalid(format!("{what} is not valid UTF-8")))
}

pub(crate) unsafe fn slice<'a, T>(p: *const T, n: usize, what: &str) -> Result<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::new(
            Status::NullArgument,
            format!("{what} is NULL but its count is {n}"),
        ));
    }
    // SAFETY: the caller passed `n` readable elements per the contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Copies `s` plus a NUL into `buf`; `buf` may be NULL with capacity 0 to
/// ask only for the length (which includes the NUL).
pub(crate) unsafe fn write_string(
    s: &str,
    buf: *mut c_char,
    cap: usize,
    out_len: *mut usize,
) -> Result<()> {
    // SAFETY: forwarded contract.
    unsafe { write_bytes(s.as_bytes(), true, buf.cast(), cap, out_len) }
}

pub(crate) unsafe fn write_bytes(
    data: &[u8],
    nul: bool,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> Result<()> {
    let need = data.len() + usize::from(nul);
    if buf.is_null() {
        if cap != 0 {
            return Err(Error::new(
                Status::NullArgument,
                format!("output buffer is NULL but its capacity is {cap}"),
            ));
        }
        if out_len.is_null() {
            return Err(null("both the output buffer and the length output are"));
        }
    } else {
        if cap < need {
            return Err(Error::new(
                Status::BufferTooSmall,
                format!("output needs {need} bytes, the buffer holds {cap}"),
            ));
        }
        // SAFETY: `buf` has `cap >= need` writable bytes per the contract.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), buf, data.len());
            if nul {
                *buf.add(data.len()) = 0;
            }
        }
    }
    if !out_len.is_null() {
        // SAFETY: writable per the contract.
        unsafe { *out_len = need };
    }
    Ok(())
}

// ---- reference-counted handles ------------------------------------------

static LIVE: parking_lot::Mutex<Option<HashSet<usize>>> = parking_lot::Mutex::new(None);

/// Hands an object to C as a handle holding one reference.
pub(crate) fn into_handle<T>(a: Arc<T>) -> *mut T {
    let p = Arc::into_raw(a) as *mut T;
    if validating() {
        LIVE.lock()
            .get_or_insert_with(HashSet::new)
            .insert(p as usize);
    }
    p
}

fn check_live(p: usize, what: &str) -> Result<()> {
    if validating() && !LIVE.lock().as_ref().is_some_and(|s| s.contains(&p)) {
        return Err(Error::new(
            Status::InvalidHandle,
            format!("{what} {p:#x} is not a live handle (released, or never created by Syrah)"),
        ));
    }
    Ok(())
}

/// Borrows the object behind a handle.
pub(crate) unsafe fn borrow<'a, T>(p: *const T, what: &str) -> Result<&'a T> {
    if p.is_null() {
        return Err(null(what));
    }
    check_live(p as usize, what)?;
    // SAFETY: `p` came from `into_handle` and still holds a reference.
    Ok(unsafe { &*p })
}

/// Like [`borrow`], naming the argument only when it is bad.
pub(crate) unsafe fn borrow_with<'a, T>(
    p: *const T,
    what: impl FnOnce() -> String,
) -> Result<&'a T> {
    if p.is_null() || validating() {
        // SAFETY: forwarded contract.
        return unsafe { borrow(p, &what()) };
    }
    // SAFETY: `p` came from `into_handle` and still holds a reference.
    Ok(unsafe { &*p })
}

/// Like [`clone_arc`], naming the argument only when it is bad.
pub(crate) unsafe fn clone_arc_with<T>(
    p: *const T,
    what: impl FnOnce() -> String,
) -> Result<Arc<T>> {
    if p.is_null() || validating() {
        // SAFETY: forwarded contract.
        return unsafe { clone_arc(p, &what()) };
    }
    // SAFETY: `p` came from `Arc::into_raw` and holds a reference.
    unsafe {
        Arc::increment_strong_count(p);
        Ok(Arc::from_raw(p))
    }
}

/// A new strong reference to the object behind a handle.
pub(crate) unsafe fn clone_arc<T>(p: *const T, what: &str) -> Result<Arc<T>> {
    // SAFETY: forwarded contract.
    unsafe { borrow(p, what) }?;
    // SAFETY: `p` came from `Arc::into_raw` and holds a reference, so the
    // count can be raised and a second Arc made from it.
    unsafe {
        Arc::increment_strong_count(p);
        Ok(Arc::from_raw(p))
    }
}

pub(crate) unsafe fn retain<T>(p: *const T, what: &str) -> Result<()> {
    // SAFETY: forwarded contract.
    unsafe { borrow(p, what) }?;
    // SAFETY: `p` holds a reference, so it is a live Arc allocation.
    unsafe { Arc::increment_strong_count(p) };
    Ok(())
}

pub(crate) unsafe fn release<T>(p: *const T, what: &str) -> Result<()> {
    if p.is_null() {
        return Err(null(what));
    }
    if validating() {
        let mut live = LIVE.lock();
        if !live.as_ref().is_some_and(|s| s.contains(&(p as usize))) {
            return Err(Error::new(
                Status::InvalidHandle,
                format!(
                    "{what} {:#x} is not a live handle (released twice?)",
                    p as usize
                ),
            ));
        }
        // SAFETY: live handle holding a reference; the count is read under
        // the registry lock so concurrent releases cannot both miss zero.
        let last = unsafe {
            let a = std::mem::ManuallyDrop::new(Arc::from_raw(p));
            Arc::strong_count(&a) == 1
        };
        if last {
            if let Some(s) = live.as_mut() {
                s.remove(&(p as usize));
            }
        }
    }
    // SAFETY: gives back the reference the handle held.
    unsafe { Arc::decrement_strong_count(p) };
    Ok(())
}

// ---- library-wide entry points -------------------------------------------

/// The message of the most recent failed call on this thread ("" if none).
/// Valid until the next failing call on this thread.
#[no_mangle]
pub extern "C" fn syrah_last_error_message() -> *const c_char {
    last_error::as_ptr()
}

/// Sets this thread's last error message (what `syrah_last_error_message`
/// returns next), for libraries built on Syrah that report their errors
/// the same way, and for host tasks: a task that returns a failure status
/// carries this message in its asynchronous error. The text is copied.
#[no_mangle]
pub unsafe extern "C" fn syrah_set_error_message(message: *const c_char) -> syrah_status {
    // SAFETY: forwarded contract (a NUL-terminated string or NULL).
    match unsafe { cstr(message, "message") } {
        Ok(m) => {
            last_error::set(m);
            Status::Success.code()
        }
        Err(e) => {
            last_error::set(&e.message);
            e.status.code()
        }
    }
}

/// The name of a status constant, e.g. "SYRAH_ERROR_NULL_ARGUMENT";
/// "SYRAH_STATUS_UNKNOWN" for a value that is not a status.
#[no_mangle]
pub extern "C" fn syrah_status_name(status: syrah_status) -> *const c_char {
    static NAMES: std::sync::OnceLock<Vec<(i32, CString)>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        Status::ALL
            .iter()
            .map(|s| (s.code(), CString::new(s.name()).unwrap_or_default()))
            .collect()
    });
    names
        .iter()
        .find(|(c, _)| *c == status)
        .map(|(_, n)| n.as_ptr())
        .unwrap_or(c"SYRAH_STATUS_UNKNOWN".as_ptr())
}

/// The library's version as MAJOR * 10000 + MINOR * 100 + PATCH; compare
/// with `SYRAH_VERSION` from the header the program was compiled against.
#[no_mangle]
pub extern "C" fn syrah_api_version() -> u32 {
    types::SYRAH_VERSION
}
