//! Choosing between staging a copy and handing it to the driver as it is.
//!
//! Staging (see `core::staging`) needs the host's threads: on an idle host
//! it moves ordinary memory four to six times faster than the driver, but
//! on a host whose cores are all busy every hand-over to a runtime thread
//! waits for the scheduler (on an H100 host with a busy loop on every core,
//! 4-16 ms, whole scheduler ticks), and a staged 4 MiB copy took 12-16 ms
//! where the driver's own path took 0.4. So each device keeps, per
//! direction and size class, what its last two staged copies achieved and
//! what one direct copy achieved: the first two copies of a class are
//! staged (the first pays for starting threads and touching memory and is
//! not counted; afterwards staging counts its better of the last two), the
//! third goes to the driver, timed, and from then on the faster route is
//! taken.
//! A staged copy's time counts from when it could have started, so that
//! the wait for a host thread to take it up counts against staging; a
//! direct copy needs no host thread. After the driver won, staging is
//! tried again once a pause that grows with what its last attempt cost
//! has passed, so retrying spends at most a small share of the time.

/// How a copy between ordinary host memory and a device goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Through the pinned ring, timed.
    Staged,
    /// Straight to the driver, timed: the copy waits for its own end so
    /// that its rate can be recorded.
    Probe,
    /// Straight to the driver, like any other command.
    Direct,
}

/// Size classes: 4 MiB and up, each twice the one before, the last open.
pub const CLASSES: usize = 8;
/// The smallest size the classes start from.
const FIRST_CLASS: usize = 4 << 20;
/// After a staged copy did worse than a direct one, staging is tried again
/// once this many times its last attempt's duration has passed: at most
/// about one part in this many of the time goes to retrying.
pub const RETRY: u64 = 20;

/// What was measured of one route in one class.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Seen {
    /// The rates of the last two attempts, the latest first, in bytes
    /// per µs (0: none).
    last: [f64; 2],
    /// Attempts so far.
    count: u32,
    /// When the last attempt ended and how long it took, in µs.
    at: u64,
    took: u64,
}

impl Seen {
    /// The better of the last two rates: one slow attempt (a cold start, a
    /// moment's noise) does not decide, two in a row do.
    fn rate(&self) -> f64 {
        self.last[0].max(self.last[1])
    }

    /// Records an attempt; the first of all, which starts cold, only
    /// counts as one when `cold` is true.
    fn add(&mut self, bytes: usize, took: u64, now: u64, cold: bool) {
        let took = took.max(1);
        self.count = self.count.saturating_add(1);
        if cold && self.count == 1 {
            return;
        }
        self.last = [bytes as f64 / took as f64, self.last[0]];
        self.at = now;
        self.took = took;
    }
}

/// The record of one device and direction.
#[derive(Clone, Debug, Default)]
pub struct Chooser {
    staged: [Seen; CLASSES],
    direct: [Seen; CLASSES],
}

/// The size class of a copy of `size` bytes.
pub fn class_of(size: usize) -> usize {
    let ratio = (size / FIRST_CLASS).max(1);
    (ratio.ilog2() as usize).min(CLASSES - 1)
}

impl Chooser {
    /// How a copy of `size` bytes goes at time `now` (µs, any clock that
    /// [`Chooser::record`] is given too).
    pub fn choose(&self, size: usize, now: u64) -> Route {
        let c = class_of(size);
        let (s, d) = (&self.staged[c], &self.direct[c]);
        if s.count < 2 {
            return Route::Staged;
        }
        if d.count == 0 {
            return Route::Probe;
        }
        if d.rate() <= s.rate() || now >= s.at.saturating_add(RETRY.saturating_mul(s.took)) {
            Route::Staged
        } else {
            Route::Direct
        }
    }

    /// Records a copy of `size` bytes by `route` that took `took` µs and
    /// ended at `now`. Copies by [`Route::Direct`] are not timed and teach
    /// nothing.
    pub fn record(&mut self, size: usize, route: Route, took: u64, now: u64) {
        let c = class_of(size);
        match route {
            Route::Staged => self.staged[c].add(size, took, now, true),
            Route::Probe => self.direct[c].add(size, took, now, false),
            Route::Direct => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    /// A chooser that has seen, for copies of `size`, two staged copies
    /// (the first cold) and one timed direct copy, each `(took, ended)`.
    fn learned(size: usize, staged: [(u64, u64); 2], direct: (u64, u64)) -> Chooser {
        let mut c = Chooser::default();
        for (took, at) in staged {
            c.record(size, Route::Staged, took, at);
        }
        c.record(size, Route::Probe, direct.0, direct.1);
        c
    }

    #[test]
    fn classes_double_from_four_mebibytes() {
        assert_eq!(class_of(4 * MIB), 0);
        assert_eq!(class_of(8 * MIB - 1), 0);
        assert_eq!(class_of(8 * MIB), 1);
        assert_eq!(class_of(64 * MIB), 4);
        assert_eq!(class_of(512 * MIB), 7);
        assert_eq!(class_of(usize::MAX), 7);
        // Below the first class (staging forced on small copies).
        assert_eq!(class_of(12), 0);
    }

    #[test]
    fn a_class_is_staged_twice_then_measured_directly_once() {
        let mut c = Chooser::default();
        assert_eq!(c.choose(4 * MIB, 0), Route::Staged);
        // A cold first copy: 5 ms, not counted.
        c.record(4 * MIB, Route::Staged, 5_000, 5_000);
        assert_eq!(c.staged[0].rate(), 0.0);
        assert_eq!(c.choose(4 * MIB, 5_100), Route::Staged);
        c.record(4 * MIB, Route::Staged, 150, 5_300);
        assert_eq!(c.choose(4 * MIB, 5_400), Route::Probe);
        assert_eq!(c.choose(7 * MIB, 5_400), Route::Probe);
        // Another class knows nothing of this one.
        assert_eq!(c.choose(64 * MIB, 5_400), Route::Staged);
        c.record(4 * MIB, Route::Probe, 400, 5_800);
        // 4 MiB in 150 µs beats 400.
        assert_eq!(c.choose(4 * MIB, 5_900), Route::Staged);
        // One slow copy does not decide; two in a row do.
        c.record(4 * MIB, Route::Staged, 2_000, 8_000);
        assert_eq!(c.choose(4 * MIB, 8_100), Route::Staged);
        c.record(4 * MIB, Route::Staged, 390, 8_500);
        assert_eq!(c.choose(4 * MIB, 8_600), Route::Staged);
        c.record(4 * MIB, Route::Staged, 600, 9_200);
        assert_eq!(c.choose(4 * MIB, 9_300), Route::Staged);
        c.record(4 * MIB, Route::Staged, 410, 9_700);
        assert_eq!(c.choose(4 * MIB, 9_800), Route::Direct);
        assert_eq!(c.choose(64 * MIB, 9_300), Route::Staged);
    }

    #[test]
    fn the_faster_route_wins_and_staging_is_retried_after_a_pause() {
        // A busy host: every staged copy waits for the scheduler.
        let mut c = learned(4 * MIB, [(12_000, 12_000), (16_000, 28_000)], (400, 28_500));
        // Until 20 times the last staged attempt (16 ms) has passed since it
        // ended, the driver's path is taken.
        assert_eq!(c.choose(4 * MIB, 28_600), Route::Direct);
        assert_eq!(c.choose(4 * MIB, 28_000 + 319_999), Route::Direct);
        assert_eq!(c.choose(4 * MIB, 28_000 + 320_000), Route::Staged);
        // Direct copies teach nothing.
        c.record(4 * MIB, Route::Direct, 1, 30_000);
        assert_eq!(c.choose(4 * MIB, 30_000), Route::Direct);
        // The retry is fast again: staging wins at once.
        c.record(4 * MIB, Route::Staged, 150, 348_200);
        assert_eq!(c.choose(4 * MIB, 348_300), Route::Staged);
    }

    #[test]
    fn a_slow_retry_waits_as_long_as_it_took_times_the_factor() {
        let mut c = learned(8 * MIB, [(4_000, 2_000), (4_000, 4_000)], (800, 5_000));
        assert_eq!(c.choose(8 * MIB, 83_999), Route::Direct);
        assert_eq!(c.choose(8 * MIB, 84_000), Route::Staged);
        // That retry is twice as fast, still slower than the driver: the
        // next one waits 40 ms from its end.
        c.record(8 * MIB, Route::Staged, 2_000, 45_000);
        assert_eq!(c.choose(8 * MIB, 45_000 + 39_999), Route::Direct);
        assert_eq!(c.choose(8 * MIB, 45_000 + 40_000), Route::Staged);
    }

    #[test]
    fn a_zero_duration_counts_as_one_microsecond() {
        let c = learned(4 * MIB, [(0, 10), (0, 11)], (0, 12));
        assert_eq!(c.staged[0].count, 2);
        assert_eq!(c.staged[0].took, 1);
        assert_eq!(c.staged[0].rate(), (4 * MIB) as f64);
        assert_eq!(c.direct[0].took, 1);
        assert_eq!(c.choose(4 * MIB, 13), Route::Staged);
    }
}
