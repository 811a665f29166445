//! The CUDA back end's callback thread: it calls the runtime's callbacks
//! at events' ends, as a stream's host function may not call CUDA. A host
//! function on the stream tells it that a command has ended; an event
//! with later commands on its stream is watched instead (asked about
//! until it has ended), since a host function behind those commands would
//! wait for them too.

use super::loader::{Api, CUDA_SUCCESS};
use super::state::Stream;
use crate::backend::{EndCallback, SUBMITTED};
use crate::core::error::{Error, Result, Status};
use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// An event the callback thread can ask about.
pub trait Watched: Send + Sync {
    /// Its status as the seam gives it (`backend::COMPLETE`, `SUBMITTED`
    /// or a failure).
    fn status(&self) -> i32;

    /// Told by a host function placed right after it: its stream has run
    /// it, successfully (CUDA runs no host function after a failure).
    fn reached(&self) {}
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

/// The callback thread: calls what it is given, and watches events.
fn callback_loop(rx: Receiver<Msg>) {
    let mut watched: Vec<Pending> = Vec::new();
    let mut nap = NAP.0;
    loop {
        let msg = if watched.is_empty() {
            rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            rx.recv_timeout(nap)
        };
        match msg {
            Ok(Msg::Call(p)) => p.call(),
            Ok(Msg::Watch(p)) => {
                watched.push(p);
                nap = NAP.0;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let (done, left): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut watched)
            .into_iter()
            .partition(Pending::ended);
        watched = left;
        nap = if done.is_empty() {
            (nap * 2).min(NAP.1)
        } else {
            NAP.0
        };
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

unsafe extern "C" fn stream_reached(user: *mut c_void) {
    // SAFETY: `user` is the Box made in `at_tail`, given to exactly one
    // host function.
    let p = unsafe { Box::from_raw(user as *mut Pending) };
    // No CUDA call here: the event learns that it has ended (so nobody
    // asks the driver again), and the callback thread takes it from now on.
    p.ev.reached();
    send(Msg::Call(*p));
}

/// Puts `p` on `s` (current, its tail held, the event's command its
/// last) as a host function; gives `p` back where CUDA refused.
pub fn at_tail(api: &Api, s: &Stream, p: Pending) -> std::result::Result<(), Pending> {
    let p = Box::into_raw(Box::new(p));
    // SAFETY: a live stream; the host function owns `p` once it runs,
    // right after the command.
    let rc = unsafe { (api.cuLaunchHostFunc)(s.raw, stream_reached, p as *mut c_void) };
    if rc == CUDA_SUCCESS {
        Ok(())
    } else {
        // SAFETY: the launch failed, so `p` is still ours.
        Err(*unsafe { Box::from_raw(p) })
    }
}
