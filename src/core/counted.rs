//! A lock that counts the times its value was opened for change: whoever
//! finds the count as it left it knows that nothing changed since (a
//! buffer's state: its commands' records, page bits, allocations).

use parking_lot::{Mutex, MutexGuard};
use std::ops::{Deref, DerefMut};

/// A value behind a lock, with a count of the times it was reached for
/// change (every mutable access through a guard adds one; reading adds
/// nothing). The count says "maybe changed", never less: code that takes
/// the value mutably without changing it counts too.
pub struct Counted<T> {
    inner: Mutex<(T, u64)>,
}

/// The locked value (see [`Counted`]).
pub struct CountedGuard<'a, T>(MutexGuard<'a, (T, u64)>);

impl<T> Counted<T> {
    pub fn new(value: T) -> Counted<T> {
        Counted {
            inner: Mutex::new((value, 0)),
        }
    }

    pub fn lock(&self) -> CountedGuard<'_, T> {
        CountedGuard(self.inner.lock())
    }

    /// The value, with no one else able to hold it.
    pub fn get_mut(&mut self) -> &mut T {
        let inner = self.inner.get_mut();
        inner.1 = inner.1.wrapping_add(1);
        &mut inner.0
    }
}

impl<T> CountedGuard<'_, T> {
    /// Times the value was reached for change so far.
    pub fn changes(&self) -> u64 {
        self.0 .1
    }
}

impl<T> Deref for CountedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0 .0
    }
}

impl<T> DerefMut for CountedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        let inner = &mut *self.0;
        inner.1 = inner.1.wrapping_add(1);
        &mut inner.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_changes_not_reads() {
        let c = Counted::new(vec![1u32]);
        let start = c.lock().changes();
        {
            let g = c.lock();
            assert_eq!(g.len(), 1);
            assert_eq!(g[0], 1);
        }
        assert_eq!(c.lock().changes(), start);
        c.lock().push(2);
        assert_eq!(c.lock().changes(), start + 1);
        {
            let mut g = c.lock();
            g[0] = 5;
            g[1] = 6;
        }
        assert_eq!(c.lock().changes(), start + 3);
        // Taken mutably without a change still counts.
        c.lock().deref_mut();
        assert_eq!(c.lock().changes(), start + 4);
        assert_eq!(*c.lock(), vec![5, 6]);
    }

    #[test]
    fn a_mutable_reference_passed_on_counts_once() {
        fn grow(v: &mut Vec<u32>) {
            v.push(1);
            v.push(2);
        }
        let mut c = Counted::new(Vec::new());
        grow(&mut c.lock());
        assert_eq!(c.lock().changes(), 1);
        c.get_mut().push(3);
        assert_eq!(c.lock().changes(), 2);
        assert_eq!(c.lock().len(), 3);
    }
}
