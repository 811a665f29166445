//! A buffer's memory: its allocation on each device (made lazily, reused
//! from released buffers, with sub-buffers and views where the device has
//! no USM) and its host storage.

use super::storage::{DevAlloc, FirstDev, HostMem, State, Storage, RELEASED_ALIVE};
use crate::backend::{HostEnd, MemH, RectSide, Side};
use crate::core::error::{Error, Result, Status};
use crate::core::pages::{Box3, Geometry, PageBits};
use crate::core::registry::AllocKind;
use crate::runtime::context::Context;
use crate::runtime::platform::Device;
use crate::runtime::queue::Queue;
use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A released buffer's allocation of `bytes` on `device`, if one is kept
/// or is freed by dropping finished commands.
pub(crate) fn reuse(
    ctx: &Context,
    device: &'static Device,
    bytes: usize,
) -> Option<(usize, Option<usize>)> {
    reused(|| ctx.reuse_device_alloc(device, bytes))
}

/// What `take` finds among released buffers' memory, asking again after
/// dropping finished commands where released buffers are still held.
fn reused<T>(take: impl Fn() -> Option<T>) -> Option<T> {
    take().or_else(|| {
        if RELEASED_ALIVE.load(Ordering::Acquire) == 0 {
            return None;
        }
        // Every context: a released buffer used on several devices is held
        // by finished commands of each.
        Context::reclaim_all();
        take()
    })
}

/// A memory object of `bytes` for a buffer on `device`: a released
/// buffer's, or a new one (after giving back the kept ones where memory
/// runs short).
fn device_mem(ctx: &Context, device: &'static Device, bytes: usize) -> Result<usize> {
    if let Some(m) = reused(|| ctx.reuse_device_mem(device, bytes)) {
        return Ok(m);
    }
    let driver = ctx.platform.driver;
    match driver.create_mem(ctx.handle(), bytes) {
        Err(e) if e.status == Status::OutOfDeviceMemory => {
            ctx.drop_device_cache();
            Ok(driver.create_mem(ctx.handle(), bytes)?.0)
        }
        r => Ok(r?.0),
    }
}

/// Index (into bits) of the allocation on `device` through `ctx`.
pub(crate) fn ensure_dev(
    s: &Storage,
    st: &mut State,
    ctx: &Arc<Context>,
    device: &'static Device,
) -> Result<usize> {
    if let Some(i) = st.dev_index(ctx, device) {
        return Ok(i);
    }
    let (p, mem) = if ctx.buffers_on_mem {
        // A plain memory object is the allocation.
        let m = device_mem(ctx, device, s.geom.bytes())?;
        (std::ptr::null_mut(), Some(m))
    } else if let Some((p, mem)) = reuse(ctx, device, s.geom.bytes()) {
        (p as *mut c_void, mem)
    } else {
        let p = match ctx.usm_alloc(AllocKind::Device, Some(device), s.geom.bytes(), 0) {
            Err(e) if e.status == Status::OutOfDeviceMemory => {
                // Released buffers' memory kept for reuse goes back first.
                ctx.drop_device_cache();
                ctx.usm_alloc(AllocKind::Device, Some(device), s.geom.bytes(), 0)?
            }
            r => r?,
        };
        let mem = if views_work(ctx, device) {
            make_view(ctx, p, s.geom.bytes())
        } else {
            None
        };
        (p, mem)
    };
    // A buffer lives on one device as a rule: no room for more yet.
    st.devs.reserve_exact(1);
    st.devs.push(DevAlloc {
        ctx: ctx.clone(),
        device,
        ptr: p as usize,
        mem,
        subs: Vec::new(),
        queue: None,
    });
    st.bits.push(&s.geom);
    if st.devs.len() == 1 {
        st.first = Some(FirstDev {
            ctx_id: ctx.id,
            device,
            ptr: p as usize,
            mem: mem.unwrap_or(0),
        });
    }
    Ok(st.devs.len())
}

/// The memory object of a no-USM allocation seen from byte `off` on.
pub(crate) fn sub_buffer(s: &Storage, d: &mut DevAlloc, off: usize) -> Result<usize> {
    let base = d
        .mem
        .ok_or_else(|| Error::new(Status::Internal, "allocation without memory object"))?;
    if off == 0 {
        return Ok(base);
    }
    if let Some(&(_, m)) = d.subs.iter().find(|(o, _)| *o == off) {
        return Ok(m);
    }
    if d.device.base_align == 0 || off % d.device.base_align != 0 {
        return Err(Error::new(
            Status::FeatureNotSupported,
            format!(
                "an accessor starting {off} bytes into the buffer needs a sub-buffer on device {}, \
                 which has no USM, and {}",
                d.device.label(),
                match d.device.base_align {
                    0 => "Syrah makes no sub-buffers on its driver".to_string(),
                    a => format!(
                        "sub-buffers must start at multiples of its base address alignment of \
                         {a} bytes"
                    ),
                }
            ),
        ));
    }
    // The region lies inside `base` and its origin is aligned as the
    // device requires.
    let m = d
        .ctx
        .platform
        .driver
        .create_sub_mem(MemH(base), off, s.geom.bytes() - off)?;
    d.subs.push((off, m.0));
    Ok(m.0)
}

/// A memory object using the USM memory at `p` as its storage.
pub(crate) fn make_view(ctx: &Context, p: *mut c_void, bytes: usize) -> Option<usize> {
    ctx.platform
        .driver
        .create_view(ctx.handle(), p as usize, bytes)
        .map(|m| m.0)
}

/// Whether `cl_mem` views over USM device memory of `device` see the same
/// bytes as the USM pointer (the specification promises it for SVM; some
/// drivers copy instead). Checked once per device with a small round trip.
pub fn views_work(ctx: &Arc<Context>, device: &'static Device) -> bool {
    static CHECKED: Mutex<Vec<(usize, bool)>> = Mutex::new(Vec::new());
    let key = device as *const Device as usize;
    if let Some(&(_, ok)) = CHECKED.lock().iter().find(|(k, _)| *k == key) {
        return ok;
    }
    let ok = probe_views(ctx, device).unwrap_or(false);
    CHECKED.lock().push((key, ok));
    ok
}

pub(crate) fn probe_views(ctx: &Arc<Context>, device: &'static Device) -> Result<bool> {
    const BYTES: usize = 256;
    let p = ctx.usm_alloc(AllocKind::Device, Some(device), BYTES, 0)?;
    let result = (|| -> Result<bool> {
        let Some(m) = make_view(ctx, p, BYTES) else {
            return Ok(false);
        };
        let q = Queue::create(ctx.clone(), device, true, false, None)?;
        let pattern: Vec<u8> = (0..BYTES).map(|i| (i * 7 + 3) as u8).collect();
        let mut back = vec![0u8; BYTES];
        // A copy of BYTES bytes through the pointers, waited for.
        let copy = |dst: *mut c_void, src: *const c_void| -> Result<()> {
            // SAFETY: both sides hold BYTES bytes (the allocation `p` and
            // this function's vectors) and outlive the wait.
            let ev =
                unsafe { q.copy_raw(dst, src, BYTES, &[], "view check", None, HostEnd::Unknown) }?;
            ev.wait()
        };
        // Written through the pointer, read through the view.
        copy(p, pattern.as_ptr().cast())?;
        let driver = ctx.platform.driver;
        let view = Side {
            mem: Some(MemH(m)),
            at: 0,
        };
        let host = |p: *const u8| Side {
            mem: None,
            at: p as usize,
        };
        // A blocking read of BYTES bytes into `back`.
        let read = driver.enqueue_copy(
            q.sync_queue(),
            host(back.as_mut_ptr()),
            view,
            BYTES,
            true,
            &[],
            None,
        );
        let mut ok = read.is_ok() && back == pattern;
        if ok {
            // Written through the view, read through the pointer.
            let rev: Vec<u8> = pattern.iter().rev().copied().collect();
            let side = |s: Side| RectSide {
                side: s,
                origin: [0; 3],
                row_pitch: BYTES,
                slice_pitch: BYTES,
            };
            // A blocking rectangular write of BYTES bytes from `rev`.
            let wrote = driver.enqueue_copy_rect(
                q.sync_queue(),
                &side(view),
                &side(host(rev.as_ptr())),
                [BYTES, 1, 1],
                true,
                &[],
                None,
            );
            back.fill(0);
            copy(back.as_mut_ptr().cast(), p)?;
            ok = wrote.is_ok() && back == rev;
        }
        drop(q);
        // The view made above, released once.
        driver.release_mem(MemH(m));
        Ok(ok)
    })();
    let _ = ctx.usm_free(p);
    result
}

pub(crate) fn host_ptr(st: &State) -> Option<usize> {
    match st.host {
        HostMem::None => None,
        HostMem::User { ptr, .. } | HostMem::Owned { ptr } => Some(ptr),
    }
}

/// Makes sure host storage exists and, if `write`, may be written.
pub(crate) fn ensure_host(s: &Storage, st: &mut State, write: bool) -> Result<usize> {
    match st.host {
        HostMem::Owned { ptr } => Ok(ptr),
        HostMem::User { ptr, writable } if writable || !write => Ok(ptr),
        HostMem::User { ptr, .. } => {
            // Read-only user data: take a private copy before writing. Only
            // the pages current on the host carry data worth copying; the
            // others are outdated there and are fetched before any read.
            let p = s.alloc_host(s.geom.bytes())?;
            // SAFETY: both hold the buffer's bytes.
            unsafe { copy_host_pages(&s.geom, st.bits.map(0), ptr, p) };
            st.host = HostMem::Owned { ptr: p };
            Ok(p)
        }
        HostMem::None => {
            let p = s.alloc_host(s.geom.bytes())?;
            st.host = HostMem::Owned { ptr: p };
            Ok(p)
        }
    }
}

/// Copies the pages marked in `host_bits` from `from` to `to`.
///
/// # Safety
/// Both must hold the buffer's bytes and not overlap.
pub(crate) unsafe fn copy_host_pages(g: &Geometry, host_bits: &PageBits, from: usize, to: usize) {
    let n = g.pages();
    for z in 0..n[0] {
        for y in 0..n[1] {
            for x in 0..n[2] {
                if !host_bits[g.linear([z, y, x])] {
                    continue;
                }
                let pb = Box3::new([z, y, x], [z + 1, y + 1, x + 1]);
                for (off, len) in g.byte_runs(&g.elements_of(&pb)) {
                    // SAFETY: the caller's guarantee; the runs lie inside
                    // the buffer.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            (from + off) as *const u8,
                            (to + off) as *mut u8,
                            len,
                        )
                    };
                }
            }
        }
    }
}
