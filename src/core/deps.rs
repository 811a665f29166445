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

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Tokens of the recorded accesses a new access must wait for.
    pub fn conflicts(&self, pages: &Box3, write: bool) -> Vec<T> {
        self.entries
            .iter()
            .filter(|a| (write || a.write) && a.pages.overlaps(pages))
            .map(|a| a.token.clone())
            .collect()
    }

    /// Calls `f` with each recorded access a new access must wait for and
    /// for which `pick(token, place)` holds (a read at one place need not
    /// wait for a copy into another).
    pub fn for_each_conflict(
        &self,
        pages: &Box3,
        write: bool,
        pick: impl Fn(&T, usize) -> bool,
        mut f: impl FnMut(&T),
    ) {
        for a in &self.entries {
            if (write || a.write) && a.pages.overlaps(pages) && pick(&a.token, a.place) {
                f(&a.token);
            }
        }
    }

    /// Tokens of the recorded accesses overlapping `pages` for which
    /// `pick(token, write, place)` holds (a copy into one place waits for
    /// every write and for any access at that place, not for reads
    /// elsewhere).
    pub fn overlapping_where(
        &self,
        pages: &Box3,
        pick: impl Fn(&T, bool, usize) -> bool,
    ) -> Vec<T> {
        self.entries
            .iter()
            .filter(|a| a.pages.overlaps(pages) && pick(&a.token, a.write, a.place))
            .map(|a| a.token.clone())
            .collect()
    }

    /// Records an access, dropping those a write makes redundant.
    pub fn record(&mut self, pages: Box3, write: bool, token: T) {
        self.record_at(pages, write, token, 0, |_| false, |_, _, _| true);
    }

    /// Records an access at `place` (for a buffer: which of its copies).
    /// Earlier accesses whose pages it covers are dropped when it writes or
    /// when `ordered_before` holds for them (ones certain to finish before
    /// it, on the same in-order lane, so that waiting for it waits for
    /// them), but only where `droppable(token, write, place)` holds: not
    /// for an access that nothing enqueued can stand in for (a held host
    /// accessor), nor for one this access did not wait for.
    pub fn record_at(
        &mut self,
        pages: Box3,
        write: bool,
        token: T,
        place: usize,
        ordered_before: impl Fn(&T) -> bool,
        droppable: impl Fn(&T, bool, usize) -> bool,
    ) {
        self.entries.retain(|a| {
            !(pages.contains(&a.pages)
                && (write || ordered_before(&a.token))
                && droppable(&a.token, a.write, a.place))
        });
        self.entries.push(Access {
            pages,
            write,
            token,
            place,
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
        assert!(t.conflicts(&b(0, 4), false).is_empty());
        assert_eq!(t.conflicts(&b(3, 5), true), vec![1]);
        assert!(t.conflicts(&b(4, 8), true).is_empty());
        assert_eq!(t.overlapping_where(&b(2, 3), |_, _, _| true), vec![1]);
    }

    #[test]
    fn writes_conflict_with_everything_overlapping() {
        let mut t = Tracker::new();
        t.record(b(0, 4), true, 1);
        t.record(b(4, 8), true, 2);
        assert_eq!(t.conflicts(&b(2, 6), false), vec![1, 2]);
        assert_eq!(t.conflicts(&b(6, 7), false), vec![2]);
        assert!(t.conflicts(&b(8, 9), true).is_empty());
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
                |&(l, _)| l == lane,
                |_, _, _| true,
            );
        }
        assert_eq!(t.len(), 2);
        assert_eq!(t.conflicts(&b(0, 1), true), vec![(0, 998), (1, 999)]);
        // A read of fewer pages does not replace a wider one.
        t.record_at(
            b(0, 1),
            false,
            (0, 1000),
            0,
            |&(l, _)| l == 0,
            |_, _, _| true,
        );
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn undroppable_entries_survive_covering_writes() {
        let mut t = Tracker::new();
        t.record(b(0, 4), false, 1);
        t.record(b(0, 2), false, 2);
        t.record_at(b(0, 4), true, 3, 0, |_| false, |&x, _, _| x != 2);
        assert_eq!(t.tokens(), vec![2, 3]);
    }

    #[test]
    fn copies_wait_for_writes_and_their_own_place() {
        let mut t = Tracker::new();
        let any = |_: &i32, _: bool, _: usize| true;
        t.record_at(b(0, 4), false, 1, 1, |_| false, any);
        t.record_at(b(0, 4), false, 2, 2, |_| false, any);
        t.record_at(b(2, 6), true, 3, 2, |_| false, any);
        let into = |t: &Tracker<i32>, place: usize| {
            t.overlapping_where(&b(0, 4), |_, w, p| w || p == place)
        };
        assert_eq!(into(&t, 1), vec![1, 3]);
        assert_eq!(into(&t, 2), vec![2, 3]);
        assert_eq!(into(&t, 0), vec![3]);
        assert_eq!(t.overlapping_where(&b(0, 1), |_, _, _| true), vec![1, 2]);
        // A copy into place 2 covering everything waited only for writes
        // and for place 2: the read at place 1 stays for later copies
        // into place 1.
        t.record_at(b(0, 8), true, 4, 2, |_| false, |_, w, p| w || p == 2);
        assert_eq!(t.tokens(), vec![1, 4]);
        assert_eq!(into(&t, 1), vec![1, 4]);
    }

    #[test]
    fn conflicts_can_leave_out_chosen_accesses() {
        let mut t = Tracker::new();
        let any = |_: &i32, _: bool, _: usize| true;
        // Token 1 writes at place 1, token 2 at place 2, token 3 reads at 1.
        t.record_at(b(0, 4), true, 1, 1, |_| false, |_, _, _| false);
        t.record_at(b(0, 4), true, 2, 2, |_| false, |_, _, _| false);
        t.record_at(b(0, 4), false, 3, 1, |_| false, any);
        let seen = |write: bool, pick: &dyn Fn(&i32, usize) -> bool| {
            let mut v = Vec::new();
            t.for_each_conflict(&b(1, 2), write, pick, |x| v.push(*x));
            v
        };
        assert_eq!(seen(false, &|_, _| true), vec![1, 2]);
        assert_eq!(seen(true, &|_, _| true), vec![1, 2, 3]);
        // A read at place 1 leaving out what was recorded elsewhere.
        assert_eq!(seen(false, &|_, at| at == 1), vec![1]);
        assert_eq!(seen(true, &|x, _| *x != 2), vec![1, 3]);
    }

    #[test]
    fn retain_prunes_finished_work() {
        let mut t = Tracker::new();
        for i in 0..100 {
            t.record(b(i, i + 1), true, i);
        }
        t.retain(|&tok| tok >= 90);
        assert_eq!(t.len(), 10);
        assert_eq!(t.conflicts(&b(0, 100), false).len(), 10);
    }
}
