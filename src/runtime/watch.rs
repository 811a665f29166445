//! Running host-side work once a command completes, soon after it does.
//!
//! OpenCL drivers call completion callbacks late: NVIDIA's come 1-2 ms
//! after the command finished. So besides registering the callback (where
//! the back end does not call it soon itself), a watcher thread
//! looks at the status of the oldest commands being watched every 20 µs
//! while there are any (and sleeps otherwise); whichever sees the
//! completion first runs the work, exactly once. While watched commands
//! keep ending (one did in the last [`BUSY`]), short work follows short
//! work, as in a loop through the host: between those looks the watcher
//! then asks about the oldest command alone every [`QUICK`] (a sleep that
//! short takes about 10 µs on some hosts, still half the time between
//! full looks).

use super::context::Context;
use super::event::{Continuation, Event};
use crate::core::error::Result;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Work to run once.
struct Once(Mutex<Option<Continuation>>);

impl Once {
    fn run(&self) {
        let work = self.0.lock().take();
        if let Some(w) = work {
            w();
        }
    }

    fn taken(&self) -> bool {
        self.0.lock().is_none()
    }
}

struct Watched {
    /// Oldest first.
    pending: Mutex<VecDeque<(Arc<Event>, Arc<Once>)>>,
    wake: Condvar,
}

static WATCHED: Watched = Watched {
    pending: Mutex::new(VecDeque::new()),
    wake: Condvar::new(),
};

/// How often the watcher looks while commands are watched.
const POLL: Duration = Duration::from_micros(20);
/// How often it asks about the oldest command alone while commands keep
/// ending.
const QUICK: Duration = Duration::from_micros(3);
/// How recently a watched command must have ended for the quick looks.
const BUSY: Duration = Duration::from_micros(300);
/// Commands asked about per look, oldest first (work on many commands
/// in flight must not keep a core busy with status queries; the rest
/// still have their driver callbacks).
const PER_LOOK: usize = 64;

fn watcher_started() -> bool {
    static STARTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *STARTED.get_or_init(|| {
        std::thread::Builder::new()
            .name("syrah-watch".into())
            .spawn(watch_loop)
            .is_ok()
    })
}

fn watch_loop() {
    // Linux lets a sleep overrun by the thread's timer slack, 50 µs by
    // default, which would more than double the time between looks.
    #[cfg(target_os = "linux")]
    // SAFETY: sets this thread's timer slack (in nanoseconds); no memory
    // is passed. A failure leaves the default, which only costs latency.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0);
    }
    let mut ready: Vec<Arc<Once>> = Vec::new();
    let mut looked: Vec<(Arc<Event>, Arc<Once>)> = Vec::with_capacity(PER_LOOK);
    let mut waiting: Vec<(Arc<Event>, Arc<Once>)> = Vec::with_capacity(PER_LOOK);
    // When a watched command was last seen ended.
    let mut last_end: Option<Instant> = None;
    loop {
        {
            let mut pending = WATCHED.pending.lock();
            while pending.is_empty() {
                WATCHED.wake.wait(&mut pending);
            }
            let n = pending.len().min(PER_LOOK);
            looked.extend(pending.drain(..n));
        }
        // Asked without the lock: a status query can take microseconds,
        // and submitting threads take the lock to add what they watch.
        for (ev, once) in looked.drain(..) {
            if once.taken() {
                continue;
            }
            if ev.is_done() {
                ready.push(once);
            } else {
                waiting.push((ev, once));
            }
        }
        if !waiting.is_empty() {
            // Back in front, oldest first, of what was added meanwhile.
            let mut pending = WATCHED.pending.lock();
            for w in waiting.drain(..).rev() {
                pending.push_front(w);
            }
        }
        if !ready.is_empty() {
            last_end = Some(Instant::now());
        }
        for once in ready.drain(..) {
            once.run();
        }
        let looked_at = Instant::now();
        while looked_at.elapsed() < POLL {
            if last_end.is_none_or(|t| t.elapsed() >= BUSY) {
                std::thread::sleep(POLL.saturating_sub(looked_at.elapsed()));
                break;
            }
            std::thread::sleep(QUICK);
            if look_at_oldest() {
                last_end = Some(Instant::now());
            }
        }
    }
}

/// Runs the work of the oldest watched command if it has ended (taking
/// it off the list); whether it had.
fn look_at_oldest() -> bool {
    let Some((ev, once)) = WATCHED.pending.lock().front().cloned() else {
        return false;
    };
    if !once.taken() && !ev.is_done() {
        return false;
    }
    {
        let mut pending = WATCHED.pending.lock();
        if pending.front().is_some_and(|(_, o)| Arc::ptr_eq(o, &once)) {
            pending.pop_front();
        }
    }
    once.run();
    true
}

unsafe extern "C" fn completed(_ev: *mut c_void, _status: i32, user: *mut c_void) {
    // SAFETY: `user` is the reference given when the callback was
    // registered, taken back exactly once here.
    let once = unsafe { Arc::from_raw(user as *const Once) };
    once.run();
}

/// Runs `work` once `ev` has completed or failed: on the driver's
/// callback thread or on the watcher thread, whichever notices first; for
/// a user event, on the thread that completes it; on this thread at once
/// if it already has.
pub fn when_done(ev: &Arc<Event>, work: Continuation) -> Result<()> {
    if !ev.user && ev.is_done() {
        work();
        return Ok(());
    }
    when_done_new(ev, work)
}

/// [`when_done`] for a command just enqueued: the driver is not asked
/// whether it has ended (it has not, as a rule, and asking costs
/// microseconds on some drivers); its end callback runs anyway.
pub fn when_done_new(ev: &Arc<Event>, work: Continuation) -> Result<()> {
    if ev.user {
        ev.then_user(work);
        return Ok(());
    }
    if ev.known_done() {
        work();
        return Ok(());
    }
    let once = Arc::new(Once(Mutex::new(Some(work))));
    let raw = Arc::into_raw(once.clone()) as *mut c_void;
    // The callback takes back the reference passed as user data exactly
    // once.
    let registered = ev.driver.on_end(ev.handle, completed, raw).is_ok();
    if !registered {
        // SAFETY: the callback was not registered: the reference is taken
        // back here instead.
        drop(unsafe { Arc::from_raw(raw as *const Once) });
    }
    if registered && ev.driver.ends_called_soon() {
        return Ok(());
    }
    if watcher_started() {
        WATCHED.pending.lock().push_back((ev.clone(), once));
        WATCHED.wake.notify_one();
    } else if !registered {
        // Neither a callback nor the watcher: wait here (the outcome is
        // left for whoever reports it).
        let _ = ev.driver.wait_event(ev.handle);
        once.run();
    }
    Ok(())
}

/// Runs `work` on the watcher thread once `ev` has completed or failed
/// (on this thread at once if it already has): for work that must not run
/// inside a driver's callback, such as freeing memory.
/// Without a watcher thread, the driver's callback runs it.
pub fn on_watcher(ev: &Arc<Event>, work: Continuation) -> Result<()> {
    if ev.is_done() {
        work();
        return Ok(());
    }
    if !watcher_started() {
        return when_done(ev, work);
    }
    let once = Arc::new(Once(Mutex::new(Some(work))));
    WATCHED.pending.lock().push_back((ev.clone(), once));
    WATCHED.wake.notify_one();
    Ok(())
}

/// A user event of `ctx` that completes when `foreign`, an event of
/// another context, does: commands of `ctx` can wait for it without
/// blocking the submitting thread. Its own outcome is always success;
/// a failure of `foreign` reaches dependents through their own
/// dependency on it.
pub fn bridge(ctx: &Context, foreign: &Arc<Event>) -> Result<Arc<Event>> {
    let what = format!("wait for a {} of another context", foreign.what);
    let b = Event::create_user_named(ctx, &what)?;
    let done = b.clone();
    when_done(
        foreign,
        Box::new(move || {
            let _ = done.complete_user_with(None);
        }),
    )?;
    Ok(b)
}
