//! Searching commands of an in-order lane, which finish in the order of
//! their places: if one has finished, so have all before it.

/// For `n` items whose property `done` holds for a prefix (possibly
/// empty) and for none after it, the number of items in that prefix,
/// asking `done` as few times as it can (drivers charge microseconds per
/// question): the last first (one question when all are done: the usual
/// case once the device keeps up and the newest commands are left out),
/// then the first (two when none is), then galloping back from the last
/// and halving, about 3 + 2 log2(n - k) questions for a prefix of k: the
/// items not done are usually the few newest. Also returns the index of
/// an item known not to be done when there is one (the first after the
/// prefix).
pub fn done_prefix(n: usize, mut done: impl FnMut(usize) -> bool) -> (usize, Option<usize>) {
    let Some(last) = n.checked_sub(1) else {
        return (0, None);
    };
    if done(last) {
        return (n, None);
    }
    if last == 0 || !done(0) {
        return (0, Some(0));
    }
    // done(lo) held and done(hi) did not.
    let (mut lo, mut hi, mut step) = (0, last, 1);
    while hi - lo > step {
        let probe = hi - step;
        if done(probe) {
            lo = probe;
            break;
        }
        hi = probe;
        step *= 2;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if done(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + 1, Some(hi))
}

/// Hands `each` the items of `items` that share a lane, lane by lane in
/// the order the lanes first appear: the lane and its items in place order
/// (`place` of an item). Commands are listed as they were submitted, so a
/// lane's places nearly always ascend already: they are sorted only where
/// they do not, and the list is walked once per lane instead of sorted
/// whole.
pub fn for_each_lane<T: Copy>(
    items: &[T],
    lane: impl Fn(&T) -> u64,
    place: impl Fn(&T) -> u64,
    mut each: impl FnMut(u64, &[T]),
) {
    let mut lanes: smallvec::SmallVec<[u64; 8]> = smallvec::SmallVec::new();
    for it in items {
        let l = lane(it);
        if !lanes.contains(&l) {
            lanes.push(l);
        }
    }
    let mut same: smallvec::SmallVec<[T; 64]> = smallvec::SmallVec::new();
    for l in lanes {
        same.clear();
        same.extend(items.iter().copied().filter(|it| lane(it) == l));
        if !same.is_sorted_by_key(&place) {
            same.sort_unstable_by_key(&place);
        }
        each(l, &same);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(items: &[(u64, u64)]) -> Vec<(u64, Vec<(u64, u64)>)> {
        let mut out = Vec::new();
        for_each_lane(items, |x| x.0, |x| x.1, |l, g| out.push((l, g.to_vec())));
        out
    }

    #[test]
    fn groups_lanes_in_order_of_first_appearance() {
        let items = [(7, 1), (3, 1), (7, 2), (9, 5), (3, 2), (7, 3)];
        assert_eq!(
            groups(&items),
            vec![
                (7, vec![(7, 1), (7, 2), (7, 3)]),
                (3, vec![(3, 1), (3, 2)]),
                (9, vec![(9, 5)]),
            ]
        );
        assert!(groups(&[]).is_empty());
    }

    #[test]
    fn sorts_a_lane_listed_out_of_place_order() {
        // Two threads may record a lane's commands the other way round.
        let items = [(1, 5), (2, 1), (1, 4), (1, 6), (2, 0)];
        assert_eq!(
            groups(&items),
            vec![(1, vec![(1, 4), (1, 5), (1, 6)]), (2, vec![(2, 0), (2, 1)])]
        );
    }

    #[test]
    fn matches_a_full_sort_on_random_lists() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for round in 0..500 {
            let len = next(300) as usize;
            let lanes = 1 + next(12);
            let mut items: Vec<(u64, u64)> = Vec::new();
            let mut seq = vec![0u64; lanes as usize];
            for _ in 0..len {
                let l = next(lanes);
                seq[l as usize] += 1 + next(3);
                items.push((l, seq[l as usize]));
            }
            // Now and then two neighbours recorded the other way round.
            if round % 3 == 0 && items.len() > 1 {
                let i = next(items.len() as u64 - 1) as usize;
                items.swap(i, i + 1);
            }
            let mut sorted = items.clone();
            sorted.sort_unstable();
            let mut flat: Vec<(u64, u64)> =
                groups(&items).into_iter().flat_map(|(_, g)| g).collect();
            flat.sort_by_key(|x| x.0);
            assert_eq!(flat, sorted, "round {round}");
            for (l, g) in groups(&items) {
                assert!(g.iter().all(|x| x.0 == l));
                assert!(g.windows(2).all(|w| w[0].1 <= w[1].1), "round {round}");
            }
        }
    }

    #[test]
    fn finds_every_prefix_with_few_questions() {
        for n in 0..200usize {
            for k in 0..=n {
                let mut asked = 0;
                let (len, not) = done_prefix(n, |i| {
                    asked += 1;
                    assert!(i < n, "asked about item {i} of {n}");
                    i < k
                });
                assert_eq!(len, k, "n {n}, prefix {k}");
                match not {
                    Some(i) => {
                        assert_eq!(i, k, "the first item not done");
                    }
                    None => assert_eq!(k, n, "every item done"),
                }
                // The last, the first, the gallop back and the halving;
                // one when every item is done.
                let bound = if k == n {
                    1
                } else {
                    3 + 2 * (usize::BITS - (n - k).leading_zeros()) as usize
                };
                assert!(
                    asked <= bound,
                    "n {n}, prefix {k}: {asked} questions, bound {bound}"
                );
            }
        }
    }

    #[test]
    fn asks_twice_when_nothing_is_done() {
        let mut asked = Vec::new();
        assert_eq!(
            done_prefix(1000, |i| {
                asked.push(i);
                false
            }),
            (0, Some(0))
        );
        assert_eq!(asked, vec![999, 0]);
    }

    #[test]
    fn a_finished_run_costs_one_question() {
        let mut asked = Vec::new();
        assert_eq!(
            done_prefix(1024, |i| {
                asked.push(i);
                true
            }),
            (1024, None)
        );
        assert_eq!(asked, vec![1023]);
    }

    #[test]
    fn a_run_finished_but_for_its_last_costs_three_questions() {
        let mut asked = Vec::new();
        assert_eq!(
            done_prefix(1024, |i| {
                asked.push(i);
                i < 1023
            }),
            (1023, Some(1023))
        );
        assert_eq!(asked, vec![1023, 0, 1022]);
    }

    #[test]
    fn a_run_with_one_done_gallops_back_to_it() {
        let mut asked = Vec::new();
        assert_eq!(
            done_prefix(1024, |i| {
                asked.push(i);
                i < 1
            }),
            (1, Some(1))
        );
        // 1023 and 0, then 1022, 1020, 1016, ..., 512, then halving down.
        assert!(asked.len() <= 3 + 2 * 10, "{} questions", asked.len());
    }
}
