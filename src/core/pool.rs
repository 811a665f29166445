//! A cache of released device allocations, for reuse by later buffers of
//! the same size on the same device (and by later USM allocations of the
//! same size class, see `pool_class`). Fresh allocations can be slow to
//! create and slower still to use for the first time (NVIDIA's SVM), and
//! freeing SVM may wait for queues; programs that create and release
//! buffers of the same sizes over and over (one set per iteration) then pay
//! that cost once. The cache holds at most `budget` bytes; the oldest
//! entries leave first.

use std::collections::VecDeque;

/// Released allocations by device and size, oldest first.
#[derive(Debug)]
pub struct AllocCache<T> {
    entries: VecDeque<(usize, usize, T)>,
    bytes: usize,
    budget: usize,
}

impl<T> AllocCache<T> {
    pub const fn new(budget: usize) -> Self {
        AllocCache {
            entries: VecDeque::new(),
            bytes: 0,
            budget,
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Keeps `item` (`size` bytes on device `dev`); returns what no longer
    /// fits, oldest first, for the caller to free. An item larger than the
    /// whole budget is returned at once.
    pub fn put(&mut self, dev: usize, size: usize, item: T) -> Vec<T> {
        if size > self.budget {
            return vec![item];
        }
        self.entries.push_back((dev, size, item));
        self.bytes += size;
        let mut out = Vec::new();
        while self.bytes > self.budget {
            match self.entries.pop_front() {
                Some((_, s, t)) => {
                    self.bytes -= s;
                    out.push(t);
                }
                None => break,
            }
        }
        out
    }

    /// The most recently kept allocation of exactly `size` bytes on `dev`.
    pub fn take(&mut self, dev: usize, size: usize) -> Option<T> {
        let i = self
            .entries
            .iter()
            .rposition(|(d, s, _)| *d == dev && *s == size)?;
        let (_, s, t) = self.entries.remove(i)?;
        self.bytes -= s;
        Some(t)
    }

    /// Everything held, to free.
    pub fn drain(&mut self) -> Vec<T> {
        self.bytes = 0;
        self.entries.drain(..).map(|(_, _, t)| t).collect()
    }
}

/// The size of the block a freed USM device allocation of `size` bytes is
/// kept as, so that a later allocation of a nearby size reuses it: `size`
/// rounded up to an eighth of the power of two at or above it (at most a
/// quarter more), and to 64 KiB.
pub fn pool_class(size: usize) -> usize {
    const GRAIN: usize = 64 << 10;
    let pow = size.max(1).next_power_of_two();
    let step = (pow / 8).max(GRAIN);
    size.div_ceil(step).saturating_mul(step)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_classes_round_up_by_at_most_a_quarter() {
        assert_eq!(pool_class(1), 64 << 10);
        assert_eq!(pool_class(64 << 10), 64 << 10);
        assert_eq!(pool_class(1 << 20), 1 << 20);
        assert_eq!(pool_class((1 << 20) + 1), (1 << 20) + (256 << 10));
        assert_eq!(pool_class(3 << 20), 3 << 20);
        assert_eq!(pool_class(64 << 20), 64 << 20);
        for size in (1..4000).map(|i| i * 40_961) {
            let c = pool_class(size);
            assert!(
                c >= size && c - size <= size / 4 + (64 << 10),
                "{size} -> {c}"
            );
            // Every size of one class gets the same block size.
            assert_eq!(pool_class(c), c);
        }
    }

    #[test]
    fn exact_size_and_device_match_most_recent_first() {
        let mut c = AllocCache::new(1000);
        assert!(c.put(0, 100, "a").is_empty());
        assert!(c.put(0, 100, "b").is_empty());
        assert!(c.put(1, 100, "c").is_empty());
        assert!(c.put(0, 200, "d").is_empty());
        assert_eq!(c.bytes(), 500);
        assert_eq!(c.take(0, 100), Some("b"));
        assert_eq!(c.take(0, 100), Some("a"));
        assert_eq!(c.take(0, 100), None);
        assert_eq!(c.take(0, 150), None);
        assert_eq!(c.take(1, 100), Some("c"));
        assert_eq!(c.bytes(), 200);
    }

    #[test]
    fn the_oldest_leave_when_over_budget() {
        let mut c = AllocCache::new(250);
        assert!(c.put(0, 100, 1).is_empty());
        assert!(c.put(0, 100, 2).is_empty());
        assert_eq!(c.put(0, 100, 3), vec![1]);
        assert_eq!(c.bytes(), 200);
        assert_eq!(c.put(0, 251, 4), vec![4]);
        assert_eq!(c.put(0, 250, 5), vec![2, 3]);
        assert_eq!(c.bytes(), 250);
        assert_eq!(c.drain(), vec![5]);
        assert_eq!(c.bytes(), 0);
        assert_eq!(c.take(0, 250), None);
    }
}
