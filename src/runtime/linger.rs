//! Brief spinning before a thread sleeps or waits on a driver. A thread
//! woken from sleep starts tens of microseconds late on some hosts (on a
//! virtual machine, a wake crosses the hypervisor); one that keeps asking
//! for a moment picks up the next job, or sees the end of the one it waits
//! for, at once. Threads ask between yields, so they give their core to
//! any thread that needs it.

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

/// Asks `ready` until it answers true or the linger time has passed;
/// whether it did.
pub(crate) fn spin_until(mut ready: impl FnMut() -> bool) -> bool {
    let limit = linger();
    if limit.is_zero() {
        return ready();
    }
    let start = Instant::now();
    loop {
        if ready() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::yield_now();
    }
}

/// Microseconds since the first call: a clock threads can share as a
/// number.
pub(crate) fn now_us() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64
}
