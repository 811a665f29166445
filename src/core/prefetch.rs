//! Cache hints: asking for the lines of an object ahead of its use, so that
//! the misses on cold objects overlap instead of coming one after another.

/// Asks for the cache lines holding `bytes` bytes from `p`. Only a hint:
/// nothing is read, and any address (even a dangling one) is harmless.
#[inline(always)]
pub fn lines<T: ?Sized>(p: *const T, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let start = p as *const u8 as usize;
        let mut a = start & !63;
        while a < start.wrapping_add(bytes) {
            // SAFETY: every x86-64 processor has SSE, and a prefetch never
            // faults nor reads into the program, whatever the address.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    a as *const i8,
                )
            };
            a += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (p, bytes);
    }
}

/// [`lines`] for the whole of `*p`.
#[inline(always)]
pub fn object<T>(p: *const T) {
    lines(p, std::mem::size_of::<T>());
}

/// [`object`] for what an `Arc` holds, with its reference counts (the
/// line a clone writes).
#[inline(always)]
pub fn arc<T>(a: &std::sync::Arc<T>) {
    let counts = 2 * std::mem::size_of::<usize>();
    lines(
        (std::sync::Arc::as_ptr(a) as *const u8).wrapping_sub(counts),
        std::mem::size_of::<T>() + counts,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_touch_nothing() {
        let v = [7u64; 64];
        lines(v.as_ptr(), std::mem::size_of_val(&v));
        object(&v);
        // A dangling address is only a hint too.
        lines(16usize as *const u8, 256);
        arc(&std::sync::Arc::new(v));
        assert_eq!(v[63], 7);
    }
}
