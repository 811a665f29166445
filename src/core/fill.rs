//! Planning fills with patterns of any size.
//!
//! OpenCL fills take patterns of 1 to 128 bytes, powers of two. Any other
//! pattern is written once into a host seed block, copied to the start of the
//! destination, and then doubled by device-to-device copies of what is
//! already filled: `log2(total / seed)` copies in all.

use super::error::{Error, Result};

/// One device-to-device copy inside the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub src: usize,
    pub dst: usize,
    pub len: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FillPlan {
    /// Nothing to do.
    Empty,
    /// The backend fills with the pattern directly.
    Native,
    /// Copy `seed` to offset 0, then perform `copies` in order.
    Staged { seed: Vec<u8>, copies: Vec<Span> },
}

/// True when the backend's fill takes this pattern size.
pub fn native_pattern_size(n: usize) -> bool {
    n.is_power_of_two() && n <= 128
}

/// Plans a fill of `total` bytes with `pattern`, using a seed block of at
/// most `seed_cap` bytes (rounded down to whole patterns, at least one).
pub fn plan(pattern: &[u8], total: usize, seed_cap: usize) -> Result<FillPlan> {
    let p = pattern.len();
    if p == 0 {
        return Err(Error::invalid("fill pattern size is 0"));
    }
    if total % p != 0 {
        return Err(Error::invalid(format!(
            "fill size {total} bytes is not a whole number of {p}-byte patterns"
        )));
    }
    if total == 0 {
        return Ok(FillPlan::Empty);
    }
    if native_pattern_size(p) {
        return Ok(FillPlan::Native);
    }
    Ok(staged(pattern, total, seed_cap))
}

/// The staged plan for a non-empty fill whose size is a whole number of
/// patterns, whatever the pattern size.
pub fn staged(pattern: &[u8], total: usize, seed_cap: usize) -> FillPlan {
    let p = pattern.len().max(1);
    let k = (total / p).min((seed_cap / p).max(1));
    let seed: Vec<u8> = pattern.iter().copied().cycle().take(k * p).collect();
    let mut filled = seed.len();
    let mut copies = Vec::new();
    while filled < total {
        let len = filled.min(total - filled);
        copies.push(Span {
            src: 0,
            dst: filled,
            len,
        });
        filled += len;
    }
    FillPlan::Staged { seed, copies }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simulate(pattern: &[u8], total: usize, cap: usize) -> Vec<u8> {
        let mut out = vec![0u8; total];
        match plan(pattern, total, cap).expect("plan") {
            FillPlan::Empty => {}
            FillPlan::Native => {
                for (i, b) in out.iter_mut().enumerate() {
                    *b = pattern[i % pattern.len()];
                }
            }
            FillPlan::Staged { seed, copies } => {
                out[..seed.len()].copy_from_slice(&seed);
                for c in copies {
                    assert!(c.src + c.len <= c.dst, "source and destination overlap");
                    let (a, b) = out.split_at_mut(c.dst);
                    b[..c.len].copy_from_slice(&a[c.src..c.src + c.len]);
                }
            }
        }
        out
    }

    #[test]
    fn odd_patterns_fill_exactly() {
        for (p, n, cap) in [
            (3, 3 * 1000, 12),
            (5, 5, 64),
            (7, 7 * 33, 7),
            (12, 12 * 1025, 4096),
        ] {
            let pattern: Vec<u8> = (1..=p as u8).collect();
            let out = simulate(&pattern, n, cap);
            for (i, b) in out.iter().enumerate() {
                assert_eq!(*b, pattern[i % p], "pattern {p} byte {i}");
            }
        }
    }

    #[test]
    fn staged_plans_serve_native_sizes_too() {
        // Used when the destination is not aligned to the pattern.
        let pattern = [9u8, 8, 7, 6];
        match staged(&pattern, 4 * 1000, 64) {
            FillPlan::Staged { seed, copies } => {
                assert_eq!(seed.len(), 64);
                let mut out = vec![0u8; 4000];
                out[..64].copy_from_slice(&seed);
                for c in &copies {
                    let (a, b) = out.split_at_mut(c.dst);
                    b[..c.len].copy_from_slice(&a[c.src..c.src + c.len]);
                }
                assert!(out.chunks(4).all(|c| c == pattern));
                assert_eq!(copies.len(), 6);
            }
            other => panic!("unexpected plan {other:?}"),
        }
    }

    #[test]
    fn copies_grow_logarithmically() {
        match plan(&[1, 2, 3], 3 << 20, 3 * 1024) {
            Ok(FillPlan::Staged { seed, copies }) => {
                assert_eq!(seed.len(), 3 * 1024);
                assert_eq!(copies.len(), 10);
            }
            other => panic!("unexpected plan {other:?}"),
        }
    }

    #[test]
    fn native_and_errors() {
        assert_eq!(plan(&[0; 4], 64, 16), Ok(FillPlan::Native));
        assert_eq!(plan(&[0; 128], 256, 16), Ok(FillPlan::Native));
        assert_eq!(plan(&[0; 3], 0, 16), Ok(FillPlan::Empty));
        assert!(matches!(
            plan(&[0; 256], 512, 16),
            Ok(FillPlan::Staged { .. })
        ));
        let e = plan(&[], 4, 16).expect_err("empty pattern");
        assert!(e.message.contains("size is 0"));
        let e = plan(&[0; 3], 10, 16).expect_err("ragged");
        assert!(e.message.contains("10 bytes") && e.message.contains("3-byte"));
    }
}
