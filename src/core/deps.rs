//! Dependency tracking between accesses to one buffer.
//!
//! Two accesses conflict when their page boxes overlap and at least one of
//! them writes. The tracker keeps the accesses that a later one could still
//! conflict with; an access is forgotten once its command has completed
//! (`retain`) or once a later write covers its pages, since anything that
//! would conflict with it then conflicts with that write too, which is
//! ordered after it. So the work per submission is bounded by the accesses
//! still in flight, not by the buffer's history.

use super::pages::Box3;

#[derive(Clone, Debug)]
pub struct Access<T> {
    pub pages: Box3,
    pub write: bool,
    pub token: T,
    /// Where the access happened (for a buffer: which of its copies).
    pub place: usize,
    /// For a copy of the pages from one place into another (`place`): the
    /// place it reads.
    pub from: Option<usize>,
}

impl<T> Access<T> {
    /// Whether an access at `place` (writing if `write`) must wait for this
    /// one, their pages overlapping: when either writes, except that a
    /// read need not wait for a copy into another place, which writes only
    /// there.
    pub fn holds_up(&self, write: bool, place: usize) -> bool {
        (write || self.write) && (write || self.from.is_none() || self.place == place)
    }

    /// Whether a copy from `src` into `target` must wait for this access,
    /// their pages overlapping: every write and every access at `target`,
    /// except a copy from `src` into another place (neither changes what
    /// the other reads nor reads what the other writes).
    pub fn holds_up_copy(&self, target: usize, src: usize) -> bool {
        self.place == target || (self.write && self.from != Some(src))
    }

    /// Whether a copy from `src` into `target` whose pages cover this
    /// access may stand in for it in the tracker: only an access at
    /// `target`. A later read elsewhere does not wait for that copy, so a
    /// write elsewhere (the one that made the copy's source current, say)
    /// must stay to order it.
    pub fn replaced_by_copy(&self, target: usize, src: usize) -> bool {
        self.place == target && self.holds_up_copy(target, src)
    }
}

#[derive(Clone, Debug)]
pub struct Tracker<T> {
    entries: Vec<Access<T>>,
}

impl<T> Default for Tracker<T> {
    fn default() -> Self {
        Tracker {
            entries: Vec::new(),
        }
    }
}

impl<T: Clone> Tracker<T> {
    pub fn new() -> Tracker<T> {
        Tracker::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Asks for the cache lines of the recorded accesses ahead of a look.
    pub fn prefetch(&self) {
        crate::core::prefetch::lines(
            self.entries.as_ptr(),
            std::mem::size_of_val(&self.entries[..]),
        );
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Tokens of the recorded accesses an access at `place` must wait for
    /// (see [`Access::holds_up`]).
    pub fn conflicts(&self, pages: &Box3, write: bool, place: usize) -> Vec<T> {
        let mut v = Vec::new();
        self.for_each_conflict(pages, write, place, |t| v.push(t.clone()));
        v
    }

    /// Calls `f` with each recorded access an access at `place` must wait
    /// for.
    pub fn for_each_conflict(
        &self,
        pages: &Box3,
        write: bool,
        place: usize,
        mut f: impl FnMut(&T),
    ) {
        for a in &self.entries {
            if a.pages.overlaps(pages) && a.holds_up(write, place) {
                f(&a.token);
            }
        }
    }

    /// Tokens of the recorded accesses a copy of `pages` from `src` into
    /// `target` must wait for (see [`Access::holds_up_copy`]).
    pub fn copy_conflicts(&self, pages: &Box3, target: usize, src: usize) -> Vec<T> {
        self.entries
            .iter()
            .filter(|a| a.pages.overlaps(pages) && a.holds_up_copy(target, src))
            .map(|a| a.token.clone())
            .collect()
    }

    /// Records an access at place 0, dropping those a write makes
    /// redundant.
    pub fn record(&mut self, pages: Box3, write: bool, token: T) {
        self.record_at(pages, write, token, 0, None, |_| false, |_| true);
    }

    /// Records an access at `place` (for a buffer: which of its copies;
    /// `from`: the place a copy reads). Earlier accesses whose pages it
    /// covers are dropped when it writes or when `ordered_before` holds
    /// for them (ones certain to finish before it, on the same in-order
    /// lane, so that waiting for it waits for them), but only where
    /// `droppable` holds: not for an access that nothing enqueued can
    /// stand in for (a held host accessor), nor for one this access did
    /// not wait for.
    #[allow(clippy::too_many_arguments)]
    pub fn record_at(
        &mut self,
        pages: Box3,
        write: bool,
        token: T,
        place: usize,
        from: Option<usize>,
        ordered_before: impl Fn(&T) -> bool,
        droppable: impl Fn(&Access<T>) -> bool,
    ) {
        self.entries.retain(|a| {
            !(pages.contains(&a.pages) && (write || ordered_before(&a.token)) && droppable(a))
        });
        // Most buffers keep one or two records: room for four from the
        // start would be most of a small buffer's bookkeeping.
        if self.entries.capacity() == 0 {
            self.entries.reserve_exact(1);
        }
        self.entries.push(Access {
            pages,
            write,
            token,
            place,
            from,
        });
    }

    /// Keeps only the accesses for which `keep` holds (e.g. unfinished).
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.entries.retain(|a| keep(&a.token));
    }

    pub fn tokens(&self) -> Vec<T> {
        self.entries.iter().map(|a| a.token.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(lo: usize, hi: usize) -> Box3 {
        Box3::new([0, 0, lo], [1, 1, hi])
    }

    #[test]
    fn reads_do_not_conflict_with_reads() {
        let mut t = Tracker::new();
        t.record(b(0, 4), false, 1);
        assert!(t.conflicts(&b(0, 4), false, 0).is_empty());
        assert_eq!(t.conflicts(&b(3, 5), true, 0), vec![1]);
        assert!(t.conflicts(&b(4, 8), true, 0).is_empty());
        assert_eq!(t.copy_conflicts(&b(2, 3), 0, 1), vec![1]);
    }

    #[test]
    fn writes_conflict_with_everything_overlapping() {
        let mut t = Tracker::new();
        t.record(b(0, 4), true, 1);
        t.record(b(4, 8), true, 2);
        assert_eq!(t.conflicts(&b(2, 6), false, 0), vec![1, 2]);
        assert_eq!(t.conflicts(&b(6, 7), false, 0), vec![2]);
        assert!(t.conflicts(&b(8, 9), true, 0).is_empty());
    }

    #[test]
    fn covering_writes_supersede_and_history_stays_bounded() {
        let mut t = Tracker::new();
        for i in 0..10_000 {
            t.record(b(0, 4), i % 3 == 0, i);
        }
        // Everything before the last write is covered by it.
        assert!(t.len() <= 3, "{} entries", t.len());
        let mut t = Tracker::new();
        t.record(b(0, 2), false, 1);
        t.record(b(2, 4), false, 2);
        t.record(b(1, 3), true, 3); // covers neither read
        assert_eq!(t.len(), 3);
        t.record(b(0, 4), true, 4);
        assert_eq!(t.tokens(), vec![4]);
    }

    #[test]
    fn reads_in_order_collapse() {
        // Tokens (lane, seq): reads on one lane imply the earlier ones.
        let mut t = Tracker::new();
        for i in 0..1000 {
            let lane = i % 2;
            t.record_at(
                b(0, 4),
                false,
                (lane, i),
                0,
                None,
                |&(l, _)| l == lane,
                |_| true,
            );
        }
        assert_eq!(t.len(), 2);
        assert_eq!(t.conflicts(&b(0, 1), true, 0), vec![(0, 998), (1, 999)]);
        // A read of fewer pages does not replace a wider one.
        t.record_at(
            b(0, 1),
            false,
            (0, 1000),
            0,
            None,
            |&(l, _)| l == 0,
            |_| true,
        );
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn undroppable_entries_survive_covering_writes() {
        let mut t = Tracker::new();
        t.record(b(0, 4), false, 1);
        t.record(b(0, 2), false, 2);
        t.record_at(b(0, 4), true, 3, 0, None, |_| false, |a| a.token != 2);
        assert_eq!(t.tokens(), vec![2, 3]);
    }

    #[test]
    fn copies_wait_for_writes_and_their_own_place() {
        let mut t = Tracker::new();
        let any = |_: &Access<i32>| true;
        t.record_at(b(0, 4), false, 1, 1, None, |_| false, any);
        t.record_at(b(0, 4), false, 2, 2, None, |_| false, any);
        t.record_at(b(2, 6), true, 3, 2, None, |_| false, any);
        let into = |t: &Tracker<i32>, place: usize| t.copy_conflicts(&b(0, 4), place, 9);
        assert_eq!(into(&t, 1), vec![1, 3]);
        assert_eq!(into(&t, 2), vec![2, 3]);
        assert_eq!(into(&t, 0), vec![3]);
        assert_eq!(t.conflicts(&b(0, 1), true, 0), vec![1, 2]);
        // A copy into place 2 covering everything waited only for writes
        // and for place 2: the read at place 1 stays for later copies
        // into place 1.
        t.record_at(
            b(0, 8),
            true,
            4,
            2,
            Some(0),
            |_| false,
            |a| a.holds_up_copy(2, 0),
        );
        assert_eq!(t.tokens(), vec![1, 4]);
        assert_eq!(into(&t, 1), vec![1, 4]);
    }

    #[test]
    fn copies_between_places_hold_up_only_what_they_touch() {
        let mut t = Tracker::new();
        let any = |_: &Access<i32>| true;
        // Token 1 copies the pages from place 0 into place 1, token 2 from
        // place 0 into place 2.
        t.record_at(b(0, 4), true, 1, 1, Some(0), |_| false, any);
        t.record_at(
            b(0, 4),
            true,
            2,
            2,
            Some(0),
            |_| false,
            |a| a.holds_up_copy(2, 0),
        );
        // The second did not wait for the first, so it did not drop it.
        assert_eq!(t.tokens(), vec![1, 2]);
        assert_eq!(t.copy_conflicts(&b(1, 2), 2, 0), vec![2]);
        assert_eq!(t.copy_conflicts(&b(1, 2), 3, 0), Vec::<i32>::new());
        // A copy into place 0 overwrites what both read; one from place 1
        // reads what the first writes.
        assert_eq!(t.copy_conflicts(&b(1, 2), 0, 1), vec![1, 2]);
        assert_eq!(t.copy_conflicts(&b(1, 2), 3, 1), vec![1, 2]);
        // A read waits only for the copy into its own place; a write, for
        // both.
        assert_eq!(t.conflicts(&b(1, 2), false, 1), vec![1]);
        assert_eq!(t.conflicts(&b(1, 2), false, 3), Vec::<i32>::new());
        assert_eq!(t.conflicts(&b(1, 2), true, 3), vec![1, 2]);
        // A write elsewhere is waited for by every read.
        t.record_at(b(0, 4), true, 3, 3, None, |_| false, |_| false);
        assert_eq!(t.conflicts(&b(1, 2), false, 1), vec![1, 3]);
    }

    #[test]
    fn a_copy_out_of_a_written_place_leaves_the_write_for_its_readers() {
        let mut t = Tracker::new();
        // Token 1 writes the pages at place 1; token 2 copies them from
        // place 1 into place 2, after the write.
        t.record_at(b(0, 2), true, 1, 1, None, |_| false, |_| true);
        assert_eq!(t.copy_conflicts(&b(0, 4), 2, 1), vec![1]);
        t.record_at(
            b(0, 4),
            true,
            2,
            2,
            Some(1),
            |_| false,
            |a| a.replaced_by_copy(2, 1),
        );
        // A read at place 1 still waits for the write, not for the copy.
        assert_eq!(t.conflicts(&b(1, 2), false, 1), vec![1]);
        // A read at place 2 waits for the copy; a write, for both.
        assert_eq!(t.conflicts(&b(1, 2), false, 2), vec![1, 2]);
        assert_eq!(t.conflicts(&b(1, 2), true, 3), vec![1, 2]);
        // A copy into place 2 again replaces both entries there.
        t.record_at(
            b(0, 4),
            true,
            3,
            2,
            Some(1),
            |_| false,
            |a| a.replaced_by_copy(2, 1),
        );
        assert_eq!(t.tokens(), vec![1, 3]);
    }

    #[test]
    fn retain_prunes_finished_work() {
        let mut t = Tracker::new();
        for i in 0..100 {
            t.record(b(i, i + 1), true, i);
        }
        t.retain(|&tok| tok >= 90);
        assert_eq!(t.len(), 10);
        assert_eq!(t.conflicts(&b(0, 100), false, 0).len(), 10);
    }
}
