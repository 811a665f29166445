//! Copies on a stream, kept in stream order also where they touch ordinary
//! (pageable) host memory. CUDA reads pageable memory when such a copy is
//! enqueued and writes it while the caller waits, not when the stream
//! reaches the copy, so a command the copy waits for (a host task, another
//! device's copy into that memory) would be overtaken. Here such a copy
//! goes through a pinned bounce block (`bounce`), and its host side is
//! done in stream order by a thread of its own (`landing`), or, where the
//! driver lacks stream memory operations and for rectangles, by a host
//! function that the stream runs (plain memory copies, no CUDA call).
//! Where nothing on the stream is pending, CUDA's own copy is in order
//! and is used. A copy from ordinary memory that nothing pending can
//! write (what it waits for has completed, and so has every earlier
//! command of its stream that writes ordinary memory or waits for another
//! stream, whose commands may) reads it at once
//! into a bounce block, which goes back once an event after the copy has
//! passed: nothing holds up the stream.

use super::bounce::{give, release_after, take, Block};
use super::hold::Enq;
use super::landing;
use super::loader::{
    check, Api, CUdeviceptr, Memcpy2D, CUDA_SUCCESS, CU_MEMORYTYPE_UNIFIED,
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
};
use super::state::Stream;
use crate::backend::HostEnd;
use crate::core::error::Result;
use std::ffi::c_void;

/// One side of a rectangle copy: its base address, the rectangle's
/// origin there (bytes, rows, slices) and the pitches in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub base: u64,
    pub origin: [usize; 3],
    pub row: usize,
    pub slice: usize,
}

impl Rect {
    /// The address of row `y` of slice `z` of the rectangle.
    fn row_at(&self, y: usize, z: usize) -> u64 {
        self.base
            + ((self.origin[2] + z) * self.slice + (self.origin[1] + y) * self.row + self.origin[0])
                as u64
    }

    /// A rectangle of `region` packed densely at `base`.
    fn dense(base: u64, region: [usize; 3]) -> Rect {
        Rect {
            base,
            origin: [0; 3],
            row: region[0],
            slice: region[0] * region[1],
        }
    }
}

/// Whether `addr` is host memory CUDA does not know (neither its
/// allocation nor registered with it). The driver is asked only about
/// memory this back end did not allocate or register.
pub fn is_pageable(api: &Api, addr: u64) -> bool {
    is_pageable_as(api, addr, false)
}

/// [`is_pageable`], for memory the caller knows to be host memory where
/// `host` is set: then it is taken as pageable without asking the driver
/// (about 2 µs) unless this back end knows it. Memory pinned by others
/// is then copied as ordinary memory is: in order, a little slower.
fn is_pageable_as(api: &Api, addr: u64, host: bool) -> bool {
    if super::memory::is_known(addr as usize) {
        return false;
    }
    if host {
        return true;
    }
    let mut kind: u32 = 0;
    // SAFETY: `kind` is a valid slot for the memory-type attribute.
    let rc = unsafe {
        (api.cuPointerGetAttribute)(
            (&mut kind as *mut u32).cast(),
            CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            addr,
        )
    };
    rc != CUDA_SUCCESS
}

/// What a host function does when the stream reaches it.
enum Step {
    Linear {
        dst: u64,
        src: u64,
        len: usize,
    },
    Rect {
        dst: Rect,
        src: Rect,
        region: [usize; 3],
    },
}

struct HostStep {
    step: Step,
    /// A bounce block to give back afterwards.
    back: Option<Block>,
}

/// Copies `region` between two rectangles of host memory.
///
/// # Safety
/// Both rectangles must lie in host memory valid for these bytes.
unsafe fn copy_rect_host(dst: &Rect, src: &Rect, region: [usize; 3]) {
    for z in 0..region[2] {
        for y in 0..region[1] {
            // SAFETY: the caller's contract; rows do not overlap between
            // distinct sides of a copy.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.row_at(y, z) as *const u8,
                    dst.row_at(y, z) as *mut u8,
                    region[0],
                )
            };
        }
    }
}

unsafe extern "C" fn run_step(user: *mut c_void) {
    // SAFETY: the Box made in `host_step`, given to exactly one host
    // function.
    let s = unsafe { Box::from_raw(user as *mut HostStep) };
    match s.step {
        // SAFETY: the enqueuing command's contract: these bytes are host
        // memory (pageable or a bounce block) valid until the copy ends.
        Step::Linear { dst, src, len } => unsafe {
            std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, len)
        },
        // SAFETY: as above.
        Step::Rect { dst, src, region } => unsafe { copy_rect_host(&dst, &src, region) },
    }
    if let Some(b) = s.back {
        give(b);
    }
}

fn host_step(api: &Api, s: &Stream, step: Step, back: Option<Block>) -> Result<()> {
    let p = Box::into_raw(Box::new(HostStep { step, back }));
    // SAFETY: a live stream; the host function owns `p` once it runs.
    let rc = unsafe { (api.cuLaunchHostFunc)(s.raw, run_step, p as *mut c_void) };
    if rc != CUDA_SUCCESS {
        // SAFETY: not launched, so still ours.
        let h = unsafe { Box::from_raw(p) };
        if let Some(b) = h.back {
            // A copy enqueued before may still use it.
            let _ = release_after(api, s, 0, b);
        }
    }
    check(api, rc, "cuLaunchHostFunc")
}

fn device_copy(api: &Api, s: &Stream, dst: u64, src: u64, len: usize) -> Result<()> {
    // SAFETY: both sides are memory CUDA knows, `len` bytes each (the
    // caller's checks).
    let rc = unsafe { (api.cuMemcpyAsync)(dst, src, len, s.raw) };
    check(api, rc, "cuMemcpyAsync")
}

/// Whether everything enqueued on `s` so far (its waits included) has
/// ended: then CUDA's own handling of pageable memory is in order.
fn settled(api: &Api, s: &Stream) -> bool {
    // SAFETY: a live stream of the current context.
    unsafe { (api.cuStreamQuery)(s.raw) == CUDA_SUCCESS }
}

/// Copies `len` bytes of ordinary memory at `src` into a bounce block
/// now, and from there to `dst` on `s`.
fn read_now(api: &Api, s: &Stream, seq: u64, dst: u64, src: u64, len: usize) -> Result<()> {
    let b = take(api, s, len)?;
    // SAFETY: `src` holds `len` bytes of host memory that nothing pending
    // writes (the caller's contract); the block holds at least `len`.
    unsafe { std::ptr::copy_nonoverlapping(src as *const u8, b.ptr as *mut u8, len) };
    let r = device_copy(api, s, dst, b.ptr as u64, len);
    release_after(api, s, seq, b)?;
    r
}

/// Enqueues a copy of `len` bytes from `src` to `dst` on `s`, as the
/// command `enq` tells of.
pub fn copy(
    api: &Api,
    s: &Stream,
    dst: u64,
    src: u64,
    len: usize,
    host: HostEnd,
    enq: &Enq,
) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    // Up to this size, a copy from ordinary memory is read at once into a
    // bounce block even where CUDA's own copy would be in order: the host
    // goes on while the device copies, instead of waiting for CUDA's
    // staging (measured on an H100: 256 KiB inputs of a matrix multiply).
    const READ_NOW_UP_TO: usize = 256 * 1024;
    // A larger copy asks even about known host memory: where others
    // pinned it, CUDA's own copy is the fastest.
    let small = len <= READ_NOW_UP_TO;
    let (hd, hs) = (
        is_pageable_as(api, dst, small && host == HostEnd::Dst),
        is_pageable_as(api, src, small && host == HostEnd::Src),
    );
    if hd {
        s.changes_host(enq.seq);
    }
    let may_read_now = !hd && hs && s.host_settled() && enq.waits_ended();
    if may_read_now && small {
        return read_now(api, s, enq.seq, dst, src, len);
    }
    // Asked of the driver only where the answer is used.
    let settled = hd != hs && settled(api, s);
    if may_read_now && !settled {
        return read_now(api, s, enq.seq, dst, src, len);
    }
    if settled {
        // Nothing to wait for: CUDA reads the source now, or writes the
        // destination before returning, which is in order (and overlaps
        // its own staging of a large copy with the transfer).
        return device_copy(api, s, dst, src, len);
    }
    match (hd, hs) {
        (false, false) => device_copy(api, s, dst, src, len),
        (true, true) => {
            if landing::host_copy(api, s, dst, src, len)? {
                return Ok(());
            }
            host_step(api, s, Step::Linear { dst, src, len }, None)
        }
        (false, true) => {
            let b = take(api, s, len)?;
            let at = b.ptr as u64;
            let lifted = match landing::host_copy(api, s, at, src, len) {
                Ok(done) => done,
                Err(e) => {
                    release_after(api, s, enq.seq, b)?;
                    return Err(e);
                }
            };
            if !lifted {
                host_step(api, s, Step::Linear { dst: at, src, len }, None)?;
            }
            let r = device_copy(api, s, dst, at, len);
            release_after(api, s, enq.seq, b)?;
            r
        }
        (true, false) => {
            if landing::land(api, s, dst, src, len)? {
                return Ok(());
            }
            let b = take(api, s, len)?;
            let at = b.ptr as u64;
            if let Err(e) = device_copy(api, s, at, src, len) {
                give(b);
                return Err(e);
            }
            host_step(api, s, Step::Linear { dst, src: at, len }, Some(b))
        }
    }
}

/// Copies `region` between rectangles that CUDA knows, slice by slice.
fn device_rect(api: &Api, s: &Stream, dst: &Rect, src: &Rect, region: [usize; 3]) -> Result<()> {
    for z in 0..region[2] {
        let c = Memcpy2D {
            src_x: src.origin[0],
            src_y: src.origin[1],
            src_type: CU_MEMORYTYPE_UNIFIED,
            src_device: src.base + ((src.origin[2] + z) * src.slice) as CUdeviceptr,
            src_pitch: src.row,
            dst_x: dst.origin[0],
            dst_y: dst.origin[1],
            dst_type: CU_MEMORYTYPE_UNIFIED,
            dst_device: dst.base + ((dst.origin[2] + z) * dst.slice) as CUdeviceptr,
            dst_pitch: dst.row,
            width: region[0],
            height: region[1],
            ..Memcpy2D::default()
        };
        // SAFETY: `c` describes rows inside both sides (the caller's
        // checks) and is read before the call returns.
        let rc = unsafe { (api.cuMemcpy2DAsync)(&c, s.raw) };
        check(api, rc, "cuMemcpy2DAsync")?;
    }
    Ok(())
}

/// Enqueues a copy of `region` (bytes, rows, slices) from `src` to `dst`
/// on `s`, as command `seq` of it.
pub fn copy_rect(
    api: &Api,
    s: &Stream,
    dst: Rect,
    src: Rect,
    region: [usize; 3],
    seq: u64,
) -> Result<()> {
    let total = region[0] * region[1] * region[2];
    if total == 0 {
        return Ok(());
    }
    let (hd, hs) = (is_pageable(api, dst.base), is_pageable(api, src.base));
    if hd {
        s.changes_host(seq);
    }
    match (hd, hs) {
        (false, false) => device_rect(api, s, &dst, &src, region),
        (true, true) => host_step(api, s, Step::Rect { dst, src, region }, None),
        (false, true) => {
            let b = take(api, s, total)?;
            let packed = Rect::dense(b.ptr as u64, region);
            host_step(
                api,
                s,
                Step::Rect {
                    dst: packed,
                    src,
                    region,
                },
                None,
            )?;
            let r = device_rect(api, s, &dst, &packed, region);
            release_after(api, s, seq, b)?;
            r
        }
        (true, false) => {
            let b = take(api, s, total)?;
            let packed = Rect::dense(b.ptr as u64, region);
            if let Err(e) = device_rect(api, s, &packed, &src, region) {
                give(b);
                return Err(e);
            }
            host_step(
                api,
                s,
                Step::Rect {
                    dst,
                    src: packed,
                    region,
                },
                Some(b),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_rectangles_copy_exact_rows() {
        // A 3x2x2 region from a 5-wide, 3-row source at (1, 1, 0) into a
        // dense destination, then back into a zeroed copy of the source.
        let src: Vec<u8> = (0..30).collect();
        let mut packed = vec![0u8; 12];
        let s = Rect {
            base: src.as_ptr() as u64,
            origin: [1, 1, 0],
            row: 5,
            slice: 15,
        };
        let d = Rect::dense(packed.as_mut_ptr() as u64, [3, 2, 2]);
        // SAFETY: both rectangles lie inside the vectors.
        unsafe { copy_rect_host(&d, &s, [3, 2, 2]) };
        assert_eq!(packed, vec![6, 7, 8, 11, 12, 13, 21, 22, 23, 26, 27, 28]);
        let mut back = vec![0u8; 30];
        let b = Rect {
            base: back.as_mut_ptr() as u64,
            ..s
        };
        let p = Rect::dense(packed.as_ptr() as u64, [3, 2, 2]);
        // SAFETY: as above.
        unsafe { copy_rect_host(&b, &p, [3, 2, 2]) };
        let want: Vec<u8> = (0..30)
            .map(|i: u8| {
                let (x, y) = (i % 5, (i % 15) / 5);
                if (1..4).contains(&x) && (1..3).contains(&y) {
                    i
                } else {
                    0
                }
            })
            .collect();
        assert_eq!(back, want);
    }
}
