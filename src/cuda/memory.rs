//! The CUDA back end's memory: its USM allocations, and what it allocated
//! or registered, looked up by address; its memory objects (an
//! allocation, a part of one, or a view over unified shared memory;
//! counted references); its fills of device memory with a repeated
//! pattern.

use super::loader::{
    api, check, Api, CUcontext, CUdeviceptr, CUDA_SUCCESS, CU_MEMHOSTALLOC_DEVICEMAP,
    CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTREGISTER_PORTABLE, CU_MEM_ATTACH_GLOBAL,
};
use super::state::{any_context, make_current, Stream};
use crate::backend::{MemH, Side};
use crate::core::error::{Error, Result};
use crate::core::registry::{AllocKind, AllocRecord, Registry};
use parking_lot::RwLock;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::LazyLock;

/// This back end's USM allocations, at the address the runtime was given:
/// their kind, and where CUDA's allocation starts (before it, for an
/// alignment CUDA does not give), for freeing them.
static ALLOCS: LazyLock<RwLock<Registry>> = LazyLock::new(|| RwLock::new(Registry::new()));

/// Other memory CUDA knows: memory objects' allocations, and host memory
/// registered with it.
static OTHER: LazyLock<RwLock<Registry>> = LazyLock::new(|| RwLock::new(Registry::new()));

fn record(size: usize, kind: AllocKind, raw: usize) -> AllocRecord {
    AllocRecord {
        size: size.max(1),
        kind,
        device: None,
        raw,
        pooled: 0,
    }
}

/// Notes a USM allocation of `size` bytes at `ptr` (CUDA's at `raw`).
pub fn remember(ptr: usize, size: usize, kind: AllocKind, raw: usize) {
    // An overlap would mean the driver gave out memory twice; the address
    // is then only unknown here, which costs a question to the driver.
    let _ = ALLOCS.write().insert(ptr, record(size, kind, raw));
}

/// Takes back the USM allocation at `ptr`: its kind and CUDA's address.
pub fn forget(ptr: usize) -> Option<(AllocKind, usize)> {
    let r = ALLOCS.write().remove(ptr).ok()?;
    Some((r.kind, r.raw))
}

/// The kind of the USM allocation holding `addr`.
pub fn kind_at(addr: usize) -> Option<AllocKind> {
    ALLOCS.read().find(addr).map(|f| f.record.kind)
}

/// Whether `addr` lies in memory this back end allocated or registered:
/// memory CUDA knows, which copies need not ask the driver about.
pub fn is_known(addr: usize) -> bool {
    ALLOCS.read().find(addr).is_some() || OTHER.read().find(addr).is_some()
}

/// A USM allocation of `size` bytes of `kind` aligned to `align` (0: the
/// native alignment) in context `ctx`, noted for later lookups.
pub fn alloc(
    api: &Api,
    ctx: CUcontext,
    kind: AllocKind,
    size: usize,
    align: usize,
) -> Result<usize> {
    // CUDA aligns device and managed memory to 256 bytes and host
    // memory to pages; more is had by allocating more.
    let native = if kind == AllocKind::Host { 4096 } else { 256 };
    if align != 0 && !align.is_power_of_two() {
        return Err(Error::invalid(format!(
            "USM alignment {align} is not a power of two"
        )));
    }
    let extra = if align > native { align } else { 0 };
    let total = size.checked_add(extra).ok_or_else(|| {
        Error::invalid(format!("USM allocation of {size} bytes aligned to {align}"))
    })?;
    make_current(api, ctx)?;
    let base = match kind {
        AllocKind::Device | AllocKind::Shared => {
            let mut p: CUdeviceptr = 0;
            // SAFETY: `p` is a valid slot; the device's context is current.
            let rc = unsafe {
                if kind == AllocKind::Device {
                    (api.cuMemAlloc)(&mut p, total)
                } else {
                    (api.cuMemAllocManaged)(&mut p, total, CU_MEM_ATTACH_GLOBAL)
                }
            };
            check(api, rc, "cuMemAlloc")?;
            p as usize
        }
        AllocKind::Host => {
            let mut p: *mut c_void = std::ptr::null_mut();
            let flags = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP;
            // SAFETY: `p` is a valid slot; a context is current.
            let rc = unsafe { (api.cuMemHostAlloc)(&mut p, total, flags) };
            check(api, rc, "cuMemHostAlloc")?;
            p as usize
        }
    };
    let ptr = if extra > 0 {
        base.next_multiple_of(align)
    } else {
        base
    };
    remember(ptr, size, kind, base);
    Ok(ptr)
}

/// Notes a memory object's allocation, or registered host memory, of
/// `size` bytes at `ptr`.
pub fn remember_other(ptr: usize, size: usize, kind: AllocKind) {
    let _ = OTHER.write().insert(ptr, record(size, kind, ptr));
}

/// Forgets what [`remember_other`] noted at `ptr`; false where it noted
/// nothing there.
fn forget_other(ptr: usize) -> bool {
    OTHER.write().remove(ptr).is_ok()
}

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
    let Some(ctx) = mem.owner else { return };
    let _ = forget_other(mem.ptr as usize);
    if let Ok(api) = api() {
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
    let pinned = unsafe {
        (api.cuMemHostRegister)(
            ptr as *mut std::ffi::c_void,
            len,
            CU_MEMHOSTREGISTER_PORTABLE,
        ) == CUDA_SUCCESS
    };
    if pinned {
        remember_other(ptr, len, AllocKind::Host);
    }
    pinned
}

/// Undoes [`pin_host`] for the memory at `ptr`.
pub fn unpin_host(ptr: usize) {
    let _ = forget_other(ptr);
    let (Ok(api), Some(ctx)) = (api(), any_context()) else {
        return;
    };
    if make_current(api, ctx).is_ok() {
        // SAFETY: `ptr` was registered by `pin_host`, once.
        unsafe { (api.cuMemHostUnregister)(ptr as *mut std::ffi::c_void) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_memory_is_found_anywhere_inside_until_forgotten() {
        // Addresses no allocator gives out in a test process.
        let (a, b) = (0x7ff0_0000_1000usize, 0x7ff0_0000_9000usize);
        remember(a, 4096, AllocKind::Shared, a - 256);
        remember_other(b, 100, AllocKind::Host);
        assert!(is_known(a) && is_known(a + 4095) && !is_known(a + 4096));
        assert!(is_known(b + 99) && !is_known(b + 100) && !is_known(a - 1));
        assert_eq!(kind_at(a + 10), Some(AllocKind::Shared));
        assert_eq!(
            kind_at(b),
            None,
            "registered memory is not a USM allocation"
        );
        assert_eq!(forget(a + 1), None, "only the start frees an allocation");
        assert_eq!(forget(a), Some((AllocKind::Shared, a - 256)));
        assert!(!is_known(a) && forget(a).is_none());
        assert!(forget_other(b));
        assert!(!is_known(b) && !is_known(b + 99) && !forget_other(b));
    }
}
