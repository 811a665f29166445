//! The CUDA back end's memory objects (an allocation, a part of one, or
//! a view over unified shared memory; counted references) and its fills
//! of device memory with a repeated pattern.

use super::loader::{api, check, Api, CUdeviceptr, CUDA_SUCCESS, CU_MEMHOSTREGISTER_PORTABLE};
use super::state::{any_context, make_current, Stream};
use crate::backend::{MemH, Side};
use crate::core::error::{Error, Result};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A memory object: `size` bytes at `ptr`, owned (freed when the last
/// reference goes) or a view over memory someone else owns.
pub struct Mem {
    pub ptr: CUdeviceptr,
    pub refs: AtomicUsize,
    /// The context that allocated it, when owned.
    pub owner: Option<usize>,
    /// The object it is a part of, which it holds a reference to.
    pub parent: Option<MemH>,
}

/// The memory object behind `m`.
pub fn mem_of(m: MemH) -> &'static Mem {
    // SAFETY: made by Box::into_raw here; alive while referenced.
    unsafe { &*(m.0 as *const Mem) }
}

/// A handle for a new memory object.
pub fn new_mem(m: Mem) -> MemH {
    MemH(Box::into_raw(Box::new(m)) as usize)
}

/// The address of one side of a copy.
pub fn addr(s: &Side) -> u64 {
    match s.mem {
        Some(m) => mem_of(m).ptr + s.at as u64,
        None => s.at as u64,
    }
}

/// Gives back a reference to `m`; the last one frees what it owns and
/// lets go of its parent.
pub fn release(m: MemH) {
    if mem_of(m).refs.fetch_sub(1, Ordering::AcqRel) != 1 {
        return;
    }
    // SAFETY: the last reference: made by Box::into_raw in `new_mem`.
    let mem = unsafe { Box::from_raw(m.0 as *mut Mem) };
    if let Some(p) = mem.parent {
        release(p);
    }
    if let (Some(ctx), Ok(api)) = (mem.owner, api()) {
        if make_current(api, ctx as super::loader::CUcontext).is_ok() {
            // SAFETY: allocated by the back end, freed once; CUDA's free
            // waits for the device's work that may use it.
            unsafe { (api.cuMemFree)(mem.ptr) };
        }
    }
}

/// Fills `size` bytes at `dst` on `s` with `pattern`, repeated.
pub fn fill(api: &Api, s: &Stream, dst: u64, pattern: &[u8], size: usize) -> Result<()> {
    let n = pattern.len();
    if n == 0 || size % n != 0 {
        return Err(Error::invalid(format!(
            "a fill of {size} bytes with a pattern of {n} bytes"
        )));
    }
    let rc = match n {
        // SAFETY: `dst` holds `size` bytes on the stream's device (this
        // and the next two).
        1 => unsafe { (api.cuMemsetD8Async)(dst, pattern[0], size, s.raw) },
        // SAFETY: as above.
        2 => unsafe {
            (api.cuMemsetD16Async)(
                dst,
                u16::from_ne_bytes([pattern[0], pattern[1]]),
                size / 2,
                s.raw,
            )
        },
        // SAFETY: as above.
        4 => unsafe {
            (api.cuMemsetD32Async)(
                dst,
                u32::from_ne_bytes([pattern[0], pattern[1], pattern[2], pattern[3]]),
                size / 4,
                s.raw,
            )
        },
        _ => {
            if size == 0 {
                return Ok(());
            }
            // The pattern once, then doubling copies of what is filled.
            // SAFETY: pageable source memory is staged before the call
            // returns.
            let rc = unsafe { (api.cuMemcpyAsync)(dst, pattern.as_ptr() as u64, n, s.raw) };
            check(api, rc, "cuMemcpyAsync")?;
            let mut done = n;
            while done < size {
                let k = done.min(size - done);
                // SAFETY: both ranges lie in the `size` bytes at `dst`.
                let rc = unsafe { (api.cuMemcpyAsync)(dst + done as u64, dst, k, s.raw) };
                check(api, rc, "cuMemcpyAsync")?;
                done += k;
            }
            CUDA_SUCCESS
        }
    };
    check(api, rc, "cuMemset")
}

/// Page-locks `len` bytes of ordinary host memory at `ptr` for every
/// context, so that copies to and from it go straight between it and the
/// devices; false where that cannot be done (no context made yet, or the
/// driver refuses).
pub fn pin_host(ptr: usize, len: usize) -> bool {
    let (Ok(api), Some(ctx)) = (api(), any_context()) else {
        return false;
    };
    if make_current(api, ctx).is_err() {
        return false;
    }
    // SAFETY: the caller owns `len` bytes of host memory at `ptr`, not
    // registered yet; the flag makes them pinned for every context.
    unsafe {
        (api.cuMemHostRegister)(
            ptr as *mut std::ffi::c_void,
            len,
            CU_MEMHOSTREGISTER_PORTABLE,
        ) == CUDA_SUCCESS
    }
}

/// Undoes [`pin_host`] for the memory at `ptr`.
pub fn unpin_host(ptr: usize) {
    let (Ok(api), Some(ctx)) = (api(), any_context()) else {
        return;
    };
    if make_current(api, ctx).is_ok() {
        // SAFETY: `ptr` was registered by `pin_host`, once.
        unsafe { (api.cuMemHostUnregister)(ptr as *mut std::ffi::c_void) };
    }
}
