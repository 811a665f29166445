//! Copies that write around the processor's caches. Data a device is about
//! to read from pinned host memory is best left in memory rather than in
//! the caches of the cores that wrote it: the device's reads of lines still
//! held modified by a core are far slower (on an H100 host, the last chunk
//! of a staged copy, written just before the device read it, moved at
//! 15-35 GB/s against 54 for the chunks before it).

/// Copies `len` bytes from `src` to `dst` like `copy_nonoverlapping`, with
/// non-temporal stores where the processor has them (x86-64), ending with
/// a store fence so the data is in memory before anything the caller does
/// next (such as handing it to a device).
///
/// # Safety
/// As for `std::ptr::copy_nonoverlapping`: both ranges valid for `len`
/// bytes and not overlapping.
pub unsafe fn copy_streaming(dst: *mut u8, src: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        // Plain stores up to the first 16-byte boundary of `dst`.
        let head = dst.align_offset(16).min(len);
        // SAFETY: the first `head` bytes of both ranges (caller's guarantee).
        unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
        let mut at = head;
        while at + 64 <= len {
            // SAFETY: 64 bytes at `at` lie in both ranges; `dst + at` is
            // 16-byte aligned; unaligned loads are allowed; SSE2 is part of
            // x86-64.
            unsafe {
                let s = src.add(at) as *const __m128i;
                let d = dst.add(at) as *mut __m128i;
                let (a, b, c, e) = (
                    _mm_loadu_si128(s),
                    _mm_loadu_si128(s.add(1)),
                    _mm_loadu_si128(s.add(2)),
                    _mm_loadu_si128(s.add(3)),
                );
                _mm_stream_si128(d, a);
                _mm_stream_si128(d.add(1), b);
                _mm_stream_si128(d.add(2), c);
                _mm_stream_si128(d.add(3), e);
            }
            at += 64;
        }
        // SAFETY: the rest of both ranges; then a fence orders the
        // non-temporal stores before later stores and atomics.
        unsafe {
            std::ptr::copy_nonoverlapping(src.add(at), dst.add(at), len - at);
            _mm_sfence();
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's guarantee.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, len)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_byte_whatever_the_alignment_and_length() {
        let src: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        for (so, dso, len) in [
            (0usize, 0usize, 4000usize),
            (1, 0, 4000),
            (0, 3, 3000),
            (5, 9, 63),
            (7, 1, 64),
            (0, 0, 0),
            (2, 15, 1),
            (3, 4, 129),
        ] {
            let mut dst = vec![0xeeu8; 4096 + 32];
            // SAFETY: both ranges lie inside their vectors and differ.
            unsafe { copy_streaming(dst.as_mut_ptr().add(dso), src.as_ptr().add(so), len) };
            assert_eq!(&dst[dso..dso + len], &src[so..so + len], "{so} {dso} {len}");
            assert!(dst[..dso].iter().all(|&b| b == 0xee));
            assert!(dst[dso + len..].iter().all(|&b| b == 0xee));
        }
    }
}
