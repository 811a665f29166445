//! The CUDA back end's callback thread: it calls the runtime's callbacks
//! at events' ends. It asks the driver about the events it watches: right
//! after it was given one or saw one end it keeps asking without sleeping
//! for a while, then between naps. A host function on the stream could
//! tell it without asking, but on an H100 a chain of short commands that
//! goes through the host each step took half as long again that way: a
//! host function costs microseconds to enqueue, runs well after the
//! command, and the thread it wakes takes more to run.

use crate::backend::{EndCallback, SUBMITTED};
use crate::core::error::{Error, Result, Status};
use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// An event the callback thread can ask about.
pub trait Watched: Send + Sync {
    /// Its status as the seam gives it (`backend::COMPLETE`, `SUBMITTED`
    /// or a failure).
    fn status(&self) -> i32;

    /// Its place in an order of events that end in that order (a stream,
    /// and the command's place there); `None` where it has none.
    fn order(&self) -> Option<(usize, u64)>;
}

/// A callback waiting to be called on the callback thread.
pub struct Pending {
    ev: Arc<dyn Watched>,
    f: EndCallback,
    user: usize,
}

impl Pending {
    /// Callback `f` with `user` for `ev`.
    pub fn new(ev: Arc<dyn Watched>, f: EndCallback, user: usize) -> Pending {
        Pending { ev, f, user }
    }

    /// Calls the callback with the event's status.
    fn call(self) {
        let st = self.ev.status();
        // The runtime's handle to the event is the address it is shared at.
        let handle = Arc::as_ptr(&self.ev) as *const () as *mut c_void;
        // SAFETY: the runtime registered `f` with `user` for this event,
        // which `self.ev` keeps alive.
        unsafe { (self.f)(handle, st, self.user as *mut c_void) };
    }

    /// Whether the event has ended (or can no longer be asked).
    fn ended(&self) -> bool {
        self.ev.status() != SUBMITTED
    }
}

/// Splits `watched` into the events that have ended and the rest. The
/// driver is not asked about an event that comes after one of its stream
/// found still running: it cannot have ended either.
fn sweep(watched: Vec<Pending>) -> (Vec<Pending>, Vec<Pending>) {
    // Per stream, the earliest place found still running.
    let mut running: smallvec::SmallVec<[(usize, u64); 8]> = smallvec::SmallVec::new();
    let (mut done, mut left) = (Vec::new(), Vec::with_capacity(watched.len()));
    for p in watched {
        let order = p.ev.order();
        let behind = order
            .is_some_and(|(key, at)| running.iter().any(|&(k, first)| k == key && first <= at));
        if behind {
            left.push(p);
        } else if p.ended() {
            done.push(p);
        } else {
            if let Some((key, at)) = order {
                match running.iter_mut().find(|(k, _)| *k == key) {
                    Some(r) => r.1 = r.1.min(at),
                    None => running.push((key, at)),
                }
            }
            left.push(p);
        }
    }
    (done, left)
}

/// What the callback thread is told.
pub enum Msg {
    /// The event has ended: call now.
    Call(Pending),
    /// Call once the event has ended, asking the driver until it has.
    Watch(Pending),
}

/// How long the callback thread sleeps between looks at watched events:
/// from the first, doubling while none ends, up to the second (the
/// runtime leaves these events to it, so it looks as often as the
/// runtime's own watcher would).
const NAP: (Duration, Duration) = (Duration::from_micros(10), Duration::from_micros(20));

/// How long the callback thread keeps looking at watched events without
/// sleeping after it was given one or saw one end: a command's end comes
/// that soon in a chain of short commands, and a sleep would add the
/// time the thread takes to wake up.
const SPIN: Duration = Duration::from_micros(100);

/// The pause between looks while the callback thread does not sleep.
const LOOK_PAUSE: Duration = Duration::from_micros(2);

/// The callback thread: calls what it is given, and watches events.
fn callback_loop(rx: Receiver<Msg>) {
    let mut watched: Vec<Pending> = Vec::new();
    let mut nap = NAP.0;
    let mut busy = Instant::now();
    loop {
        let spinning = busy.elapsed() < SPIN;
        let msg = if watched.is_empty() {
            rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else if spinning {
            rx.try_recv().map_err(|e| match e {
                TryRecvError::Empty => RecvTimeoutError::Timeout,
                TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
            })
        } else {
            rx.recv_timeout(nap)
        };
        match msg {
            Ok(Msg::Call(p)) => p.call(),
            Ok(Msg::Watch(p)) => {
                watched.push(p);
                nap = NAP.0;
                busy = Instant::now();
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let (done, left) = sweep(std::mem::take(&mut watched));
        watched = left;
        if done.is_empty() {
            nap = (nap * 2).min(NAP.1);
            if spinning {
                // A short pause between looks: while the thread asks, the
                // driver holds locks that threads enqueueing work need.
                let t = Instant::now();
                while t.elapsed() < LOOK_PAUSE {
                    std::hint::spin_loop();
                }
            }
        } else {
            nap = NAP.0;
            busy = Instant::now();
        }
        for p in done {
            p.call();
        }
    }
}

/// The channel to the callback thread, started on first use; `None` if
/// the thread could not be started.
fn callbacks() -> Option<&'static Mutex<Sender<Msg>>> {
    static TX: OnceLock<Option<Mutex<Sender<Msg>>>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = channel::<Msg>();
        let spawned = std::thread::Builder::new()
            .name("syrah-cuda-callbacks".into())
            .spawn(move || callback_loop(rx));
        spawned.ok().map(|_| Mutex::new(tx))
    })
    .as_ref()
}

/// Starts the callback thread if it is not running; an error where it
/// cannot be started.
pub fn started() -> Result<()> {
    callbacks().map(|_| ()).ok_or_else(|| {
        Error::new(
            Status::OutOfHostMemory,
            "the CUDA back end could not start its callback thread",
        )
    })
}

/// Hands `m` to the callback thread (which exists: `started` was asked
/// before anything was registered).
pub fn send(m: Msg) {
    if let Some(tx) = callbacks() {
        let _ = tx.lock().send(m);
    }
}
