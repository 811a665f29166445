//! Brief spinning before a thread sleeps or waits on a driver. A thread
//! woken from sleep starts tens of microseconds late on some hosts (on a
//! virtual machine, a wake crosses the hypervisor); one that keeps asking
//! for a moment picks up the next job, or sees the end of the one it waits
//! for, at once. Threads ask between yields, so they give their core to
//! any thread that needs it, and stop asking once a yield kept them off
//! their core for long: the host's cores are then all busy, and spinning
//! threads only delay the ones with work (on an H100 host with a busy
//! loop on every core, staged 4 MiB copies took 8-16 ms where the
//! driver's path took 0.4).

use std::time::{Duration, Instant};

/// How long a thread keeps asking (`SYRAH_LINGER_US`, read once).
pub(crate) fn linger() -> Duration {
    static US: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    Duration::from_micros(*US.get_or_init(|| {
        let setting = std::env::var("SYRAH_LINGER_US").ok();
        let (us, bad) = crate::core::linger::from_setting(setting.as_deref());
        if let Some(msg) = bad {
            eprintln!("syrah: {msg}");
        }
        us
    }))
}

/// A yield that kept a thread off its core this long means that other
/// threads are waiting for cores: lingering stops.
const CROWDED: Duration = Duration::from_micros(500);

/// Tells a lingering thread when to stop: after `limit`, or once a yield
/// kept it off its core for [`CROWDED`] or more.
pub(crate) struct Spin {
    start: Instant,
    last: Instant,
    limit: Duration,
}

impl Spin {
    pub(crate) fn new(limit: Duration) -> Spin {
        let now = Instant::now();
        Spin {
            start: now,
            last: now,
            limit,
        }
    }

    /// Yields, then whether to go on asking.
    pub(crate) fn again(&mut self) -> bool {
        std::thread::yield_now();
        let now = Instant::now();
        let go_on = now - self.start < self.limit && now - self.last < CROWDED;
        self.last = now;
        go_on
    }
}

/// Asks `ready` until it answers true, the linger time has passed or the
/// host is found crowded (see [`Spin`]); whether it answered true.
pub(crate) fn spin_until(mut ready: impl FnMut() -> bool) -> bool {
    let limit = linger();
    if limit.is_zero() {
        return ready();
    }
    let mut spin = Spin::new(limit);
    loop {
        if ready() {
            return true;
        }
        if !spin.again() {
            return false;
        }
    }
}

/// Microseconds since the first call: a clock threads can share as a
/// number.
pub(crate) fn now_us() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64
}
