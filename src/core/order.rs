//! Searching commands of an in-order lane, which finish in the order of
//! their places: if one has finished, so have all before it.

/// For `n` items whose property `done` holds for a prefix (possibly
/// empty) and for none after it, the number of items in that prefix,
/// asking `done` as few times as it can (drivers charge microseconds per
/// question): the first (one question when it is not done), then the
/// last (two when all are: the usual case once the device keeps up),
/// then galloping from the first and halving, about 3 + 2 log2(k)
/// questions for a prefix of k. Also returns the index of an item known
/// not to be done when there is one (the first after the prefix).
pub fn done_prefix(n: usize, mut done: impl FnMut(usize) -> bool) -> (usize, Option<usize>) {
    if n == 0 || !done(0) {
        return (0, (n > 0).then_some(0));
    }
    let last = n - 1;
    if last == 0 || done(last) {
        return (n, None);
    }
    // done(lo) held; done(hi), once set, did not (done(last) did not).
    let (mut lo, mut hi, mut step) = (0, None, 1);
    while lo < last {
        let probe = (lo + step).min(last);
        if probe == last {
            hi = Some(last);
            break;
        }
        if done(probe) {
            lo = probe;
            step *= 2;
        } else {
            hi = Some(probe);
            break;
        }
    }
    if let Some(h) = hi.as_mut() {
        while *h - lo > 1 {
            let mid = (lo + *h) / 2;
            if done(mid) {
                lo = mid;
            } else {
                *h = mid;
            }
        }
    }
    (lo + 1, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

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
                // The first, the last, the gallop and the halving; two
                // when every item is done.
                let bound = if k == n {
                    2
                } else {
                    3 + 2 * (usize::BITS - k.max(1).leading_zeros()) as usize
                };
                assert!(
                    asked <= bound,
                    "n {n}, prefix {k}: {asked} questions, bound {bound}"
                );
            }
        }
    }

    #[test]
    fn asks_once_when_the_first_is_not_done() {
        let mut asked = Vec::new();
        assert_eq!(
            done_prefix(1000, |i| {
                asked.push(i);
                false
            }),
            (0, Some(0))
        );
        assert_eq!(asked, vec![0]);
    }

    #[test]
    fn a_finished_run_costs_two_questions() {
        let mut asked = Vec::new();
        assert_eq!(
            done_prefix(1024, |i| {
                asked.push(i);
                true
            }),
            (1024, None)
        );
        assert_eq!(asked, vec![0, 1023]);
    }

    #[test]
    fn a_run_finished_but_for_its_last_costs_a_logarithm() {
        let mut asked = 0;
        assert_eq!(
            done_prefix(1024, |i| {
                asked += 1;
                i < 1023
            }),
            (1023, Some(1023))
        );
        // 0 and 1023, then 1, 3, 7, ..., 511, then halving from 511 to 1023.
        assert!(asked <= 3 + 2 * 10, "{asked} questions");
    }
}
