//! Submission on a thread of Syrah's own: the queue of driver calls that
//! one thread per wrapped back end makes in the order they were asked
//! for, and the events standing for commands not yet given to the driver.
//! `handoff_driver.rs` wraps a back end with it (`SYRAH_SUBMIT=thread`),
//! so that the caller's bookkeeping for one command runs while the driver
//! takes its microseconds enqueueing the one before.

use super::{ArgSet, Driver, EndCallback, EventH, KernelH, MemH, QueueH};
use crate::core::aspects::UsmStrategy;
use crate::core::error::{Error, Result, Status};
use crate::core::launch::NdRange;
use parking_lot::{Condvar, Mutex, RwLock};
use smallvec::SmallVec;
use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A driver call made on the submission thread.
pub type Job = Box<dyn FnOnce(&'static dyn Driver) + Send>;

/// How long the thread looks for work before it sleeps, and a caller
/// for the thread before it sleeps: waking a thread costs microseconds.
const SPIN_FOR: Duration = Duration::from_micros(100);

/// Jobs the thread may be behind before a caller waits for it.
const BACKLOG: u64 = 1024;

/// The failure status an event reports for a command that could not be
/// enqueued (its message comes through `Driver::failure_detail`).
pub const NOT_ENQUEUED: i32 = -59;

/// Whether `SYRAH_SUBMIT=thread` asks for submission on Syrah's thread
/// (`caller`, empty or unset: on the caller's; another value is named on
/// standard error once and ignored).
pub fn wanted() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| match std::env::var("SYRAH_SUBMIT").as_deref() {
        Ok("thread") => true,
        Ok("caller") | Ok("") | Err(_) => false,
        Ok(v) => {
            eprintln!("syrah: SYRAH_SUBMIT='{v}' is not 'thread' or 'caller'; it is ignored");
            false
        }
    })
}

/// An event handed out for a command: made when the command is asked
/// for, given the driver's event once the thread has enqueued it (or the
/// reason it could not).
pub struct Proxy {
    /// The job that enqueues the command (0: made on the caller's thread).
    pub seq: u64,
    /// The driver's event (0 until the job has run, or where it failed).
    pub real: AtomicUsize,
    /// Why the command could not be enqueued, or the failure of one
    /// before it on its queue that it reports.
    pub failure: OnceLock<Error>,
}

impl Proxy {
    /// A new event for job `seq`, as a handle.
    pub fn handle(seq: u64, real: EventH) -> EventH {
        let mut p = Proxy::boxed(real);
        p.seq = seq;
        Proxy::into_handle(p)
    }

    /// A new event standing for `real`, its job's number still to set.
    fn boxed(real: EventH) -> Box<Proxy> {
        Box::new(Proxy {
            seq: 0,
            real: AtomicUsize::new(real.0),
            failure: OnceLock::new(),
        })
    }

    /// The handle of event `p`, which lives until [`Proxy::free`].
    fn into_handle(p: Box<Proxy>) -> EventH {
        EventH(Box::into_raw(p) as usize)
    }

    /// The event behind handle `e` (no event: one that never had a
    /// command).
    pub fn of(e: EventH) -> &'static Proxy {
        static NONE: Proxy = Proxy {
            seq: 0,
            real: AtomicUsize::new(0),
            failure: OnceLock::new(),
        };
        if e.is_none() {
            return &NONE;
        }
        // SAFETY: every other event handle of a wrapped back end was made
        // by `Proxy::into_handle` and lives until `Proxy::free`, after the last
        // use the runtime makes of it.
        unsafe { &*(e.0 as *const Proxy) }
    }

    /// Frees the event behind `e` (its driver event is released apart).
    pub fn free(e: EventH) {
        // SAFETY: made by `Proxy::into_handle`, freed once, when the runtime
        // has given the handle back.
        drop(unsafe { Box::from_raw(e.0 as *mut Proxy) });
    }

    /// The driver's event, where the job has run and enqueued it.
    pub fn real(&self) -> Option<EventH> {
        Some(self.real.load(Ordering::Acquire))
            .filter(|&r| r != 0)
            .map(EventH)
    }
}

/// The driver's events for `waits`, each enqueued already (the caller
/// is the thread, or has waited for it); a command waiting for one that
/// could not be enqueued cannot be either.
pub fn reals(waits: &[EventH]) -> Result<SmallVec<[EventH; 8]>> {
    waits
        .iter()
        .map(|&w| {
            let p = Proxy::of(w);
            p.real().ok_or_else(|| {
                let why = p.failure.get().map_or("", |e| e.message.as_str());
                Error::new(
                    Status::ExecutionFailed,
                    format!("it waits for a command that could not be enqueued: {why}"),
                )
            })
        })
        .collect()
}

thread_local! {
    /// Set on submission threads.
    static ON_LINE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` on this thread, or, on a submission thread, on a thread kept
/// for such calls: what a callback runs may queue more for the submission
/// thread or wait for a caller that waits for it.
pub fn off_line(f: impl FnOnce() + Send + 'static) {
    type Call = Box<dyn FnOnce() + Send>;
    static CALLS: OnceLock<Option<std::sync::mpsc::Sender<Call>>> = OnceLock::new();
    if !ON_LINE.with(|c| c.get()) {
        return f();
    }
    let tx = CALLS.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Call>();
        std::thread::Builder::new()
            .name("syrah-submit-calls".into())
            .spawn(move || rx.into_iter().for_each(|c| c()))
            .ok()
            .map(|_| tx)
    });
    match tx {
        Some(tx) => {
            if let Err(back) = tx.send(Box::new(f)) {
                // The thread is gone: called here, late rather than never.
                (back.0)();
            }
        }
        None => f(),
    }
}

/// A callback registered from the submission thread, and what it is for.
pub struct Relay {
    pub f: EndCallback,
    pub user: usize,
    pub e: EventH,
}

/// Calls a relayed callback off the submission thread (the driver may
/// call it at once, on the thread registering it).
///
/// # Safety
/// `user` is a `Relay` made by `Box::into_raw`, registered with this
/// callback for one event; the driver calls it once.
pub unsafe extern "C" fn relayed(_ev: *mut c_void, status: i32, user: *mut c_void) {
    // SAFETY: `user` is the relay registered with this callback, called
    // once.
    let r = unsafe { Box::from_raw(user as *mut Relay) };
    off_line(move || {
        // SAFETY: the runtime registered `f` with `user` for `e`, to be
        // called once it has ended; it has.
        unsafe { (r.f)(r.e.0 as *mut c_void, status, r.user as *mut c_void) }
    });
}

/// An argument copied for the thread.
pub enum OwnedArg {
    Bytes(SmallVec<[u8; 16]>),
    Other(ArgSet<'static>),
}

impl OwnedArg {
    pub fn of(arg: ArgSet<'_>) -> OwnedArg {
        match arg {
            ArgSet::Bytes(b) => OwnedArg::Bytes(b.into()),
            ArgSet::Local(n) => OwnedArg::Other(ArgSet::Local(n)),
            ArgSet::Mem(m) => OwnedArg::Other(ArgSet::Mem(m)),
            ArgSet::Usm(p) => OwnedArg::Other(ArgSet::Usm(p)),
            ArgSet::MemAt(m, o) => OwnedArg::Other(ArgSet::MemAt(m, o)),
        }
    }

    fn get(&self) -> ArgSet<'_> {
        match self {
            OwnedArg::Bytes(b) => ArgSet::Bytes(b),
            OwnedArg::Other(a) => *a,
        }
    }
}

/// A call that answers nothing and costs the driver little, queued
/// without a job of its own, in order with the jobs.
pub enum Small {
    SetArg(KernelH, UsmStrategy, u32, OwnedArg),
    Retain(MemH),
    Release(MemH),
}

/// A kernel launch queued as it is, without a job of its own: nothing is
/// allocated for it, and nothing freed on the thread.
pub struct Launch {
    pub q: QueueH,
    pub k: KernelH,
    pub name: std::sync::Arc<str>,
    pub local_args: bool,
    pub range: NdRange,
    pub waits: SmallVec<[EventH; 8]>,
    /// Its event (none where none was asked for).
    pub ev: EventH,
}

/// What the thread runs: a small call, a launch or a job.
enum Item {
    Small(Small),
    Launch(Launch),
    Job(Job),
}

/// The submission thread's queue and what it has done.
pub struct Line {
    /// Items not yet taken by the thread, each with its number.
    items: Mutex<VecDeque<(u64, Item)>>,
    wake: Condvar,
    asleep: AtomicBool,
    /// Items queued so far (the last one's number).
    pushed: AtomicU64,
    /// Items run so far (the last one's number).
    done: AtomicU64,
    idle: Mutex<()>,
    ran: Condvar,
    /// The first item a caller sleeps until (u64::MAX: none sleeps).
    awaited: AtomicU64,
    /// Per queue: the failure of a command without an event, not yet
    /// reported by an event of that queue.
    lost: Mutex<HashMap<usize, Error>>,
    /// Whether `lost` has anything: most jobs then need not lock it.
    any_lost: AtomicBool,
    /// Per kernel and argument: the failure of the thread's last setting
    /// of it (a launch of the kernel fails until it is set again).
    pub poisoned: Mutex<HashMap<(usize, u32), Error>>,
    /// Kernel, argument and shape of value (see [`shape`]) of each
    /// setting the driver has taken once.
    checked: RwLock<HashSet<(usize, u32, u8, usize)>>,
    /// Each launched kernel's name, shared by its launches.
    names: RwLock<HashMap<usize, std::sync::Arc<str>>>,
}

/// What the driver checks of an argument's value when it is set: its
/// kind, and its size where it is passed by value.
fn shape(arg: &ArgSet<'_>) -> (u8, usize) {
    match arg {
        ArgSet::Bytes(b) => (0, b.len()),
        ArgSet::Local(_) => (1, 0),
        ArgSet::Mem(_) => (2, 0),
        ArgSet::Usm(_) => (3, 0),
        ArgSet::MemAt(..) => (4, 0),
    }
}

impl Line {
    /// A line whose thread makes its calls on `inner`; None where the
    /// thread cannot be started.
    pub fn start(inner: &'static dyn Driver) -> Option<&'static Line> {
        let line: &'static Line = Box::leak(Box::new(Line {
            items: Mutex::new(VecDeque::new()),
            wake: Condvar::new(),
            asleep: AtomicBool::new(false),
            pushed: AtomicU64::new(0),
            done: AtomicU64::new(0),
            idle: Mutex::new(()),
            ran: Condvar::new(),
            awaited: AtomicU64::new(u64::MAX),
            lost: Mutex::new(HashMap::new()),
            any_lost: AtomicBool::new(false),
            poisoned: Mutex::new(HashMap::new()),
            checked: RwLock::new(HashSet::new()),
            names: RwLock::new(HashMap::new()),
        }));
        std::thread::Builder::new()
            .name("syrah-submit".into())
            .spawn(move || line.run(inner))
            .ok()
            .map(|_| line)
    }

    /// Queues the item `make` returns given its number. A caller
    /// [`BACKLOG`] items ahead of the thread first waits until it is half
    /// as far ahead (the thread's own calls never wait: it would wait for
    /// itself).
    fn enqueue(&self, make: impl FnOnce(u64) -> Item) {
        let ahead = self.pushed.load(Ordering::Acquire);
        if ahead >= self.done.load(Ordering::Acquire) + BACKLOG && !ON_LINE.with(|c| c.get()) {
            self.reach(ahead - BACKLOG / 2);
        }
        let mut items = self.items.lock();
        let seq = self.pushed.load(Ordering::Relaxed) + 1;
        items.push_back((seq, make(seq)));
        self.pushed.store(seq, Ordering::Release);
        if self.asleep.load(Ordering::Acquire) {
            self.wake.notify_one();
        }
    }

    /// Queues `job`, a call that answers nothing.
    pub fn push(&self, job: Job) {
        self.enqueue(|_| Item::Job(job));
    }

    /// Queues the item `make` returns given the command's event, made here
    /// where `want` asks for one (none otherwise); returns that event. The
    /// event is allocated before the queue's lock is taken.
    fn enqueue_with_event(&self, want: bool, make: impl FnOnce(EventH) -> Item) -> EventH {
        let mut proxy = want.then(|| Proxy::boxed(EventH::NONE));
        let mut ev = EventH::NONE;
        self.enqueue(|seq| {
            if let Some(mut p) = proxy.take() {
                p.seq = seq;
                ev = Proxy::into_handle(p);
            }
            make(ev)
        });
        ev
    }

    /// Queues the command job `make` returns given its event (see
    /// [`Line::enqueue_with_event`]); returns the event.
    pub fn push_command(&self, want: bool, make: impl FnOnce(EventH) -> Job) -> EventH {
        self.enqueue_with_event(want, |ev| Item::Job(make(ev)))
    }

    /// Queues a small call (see [`Small`]).
    pub fn push_small(&self, call: Small) {
        self.enqueue(|_| Item::Small(call));
    }

    /// Queues the launch `make` returns given its event (see
    /// [`Line::enqueue_with_event`]); returns the event.
    pub fn push_launch(&self, want: bool, make: impl FnOnce(EventH) -> Launch) -> EventH {
        self.enqueue_with_event(want, |ev| Item::Launch(make(ev)))
    }

    /// Kernel `k`'s name `name`, shared.
    pub fn name_of(&self, k: KernelH, name: &str) -> std::sync::Arc<str> {
        if let Some(n) = self.names.read().get(&k.0).filter(|n| &***n == name) {
            return n.clone();
        }
        let n: std::sync::Arc<str> = name.into();
        self.names.write().insert(k.0, n.clone());
        n
    }

    /// Records how a command on queue `q` went (`done`, the driver's event
    /// `real` where it made one): its event `ev`, where one was asked for,
    /// stands for the driver's or reports the failure; without one, a
    /// failure waits for the queue's next event or wait.
    pub fn settle(&self, q: QueueH, ev: EventH, done: Result<()>, real: EventH) {
        match (ev.is_none(), done) {
            (false, Ok(())) => {
                let p = Proxy::of(ev);
                p.real.store(real.0, Ordering::Release);
                if let Some(e) = self.take_lost(q.0) {
                    let _ = p.failure.set(Line::before(&e));
                }
            }
            (false, Err(e)) => {
                let _ = Proxy::of(ev).failure.set(e);
            }
            (true, Ok(())) => {}
            (true, Err(e)) => self.lose(q.0, e),
        }
    }

    /// Makes launch `l` on the thread, unless setting one of its kernel's
    /// arguments failed there.
    fn launch(&self, inner: &'static dyn Driver, l: Launch) {
        let mut real = EventH::NONE;
        let done = reals(&l.waits).and_then(|w| {
            let poisoned = self.poisoned.lock();
            if let Some(((_, i), err)) = poisoned.iter().find(|((kk, _), _)| *kk == l.k.0) {
                return Err(Error::new(
                    err.status,
                    format!(
                        "kernel '{}' was not launched: setting its argument {i} failed: {}",
                        l.name, err.message
                    ),
                ));
            }
            drop(poisoned);
            let slot = (!l.ev.is_none()).then_some(&mut real);
            inner.enqueue_kernel(l.q, l.k, &l.name, l.local_args, &l.range, &w, slot)
        });
        self.settle(l.q, l.ev, done, real);
    }

    /// Sets argument `index` of kernel `k`: on the thread, in order with
    /// the launches, where the driver has taken a value of this shape for
    /// it before; otherwise here, once the thread has caught up, so that
    /// a value the driver refuses (one of the wrong size) fails this call
    /// as it would without the thread. The caller holds the kernel's
    /// lock: no launch of it is queued meanwhile.
    pub fn set_arg(
        &self,
        inner: &'static dyn Driver,
        k: KernelH,
        usm: UsmStrategy,
        index: u32,
        arg: ArgSet<'_>,
    ) -> Result<()> {
        let (kind, size) = shape(&arg);
        let key = (k.0, index, kind, size);
        if self.checked.read().contains(&key) {
            self.push_small(Small::SetArg(k, usm, index, OwnedArg::of(arg)));
            return Ok(());
        }
        self.drain();
        inner.set_kernel_arg(k, usm, index, arg)?;
        self.poisoned.lock().remove(&(k.0, index));
        self.checked.write().insert(key);
        Ok(())
    }

    /// Forgets what the driver took for kernel `k`, being released (its
    /// handle may name another kernel afterwards).
    pub fn forget_kernel(&self, k: KernelH) {
        self.checked.write().retain(|c| c.0 != k.0);
        self.names.write().remove(&k.0);
    }

    /// Makes one small call on the thread.
    fn small(&self, inner: &'static dyn Driver, call: Small) {
        match call {
            Small::SetArg(k, usm, index, arg) => {
                let mut poisoned = self.poisoned.lock();
                match inner.set_kernel_arg(k, usm, index, arg.get()) {
                    Err(e) => {
                        poisoned.insert((k.0, index), e);
                    }
                    Ok(()) if !poisoned.is_empty() => {
                        poisoned.remove(&(k.0, index));
                    }
                    Ok(()) => {}
                }
            }
            Small::Retain(m) => inner.retain_mem(m),
            Small::Release(m) => inner.release_mem(m),
        }
    }

    /// Waits until item `seq` has run.
    pub fn reach(&self, seq: u64) {
        if self.done.load(Ordering::Acquire) >= seq {
            return;
        }
        let since = Instant::now();
        while since.elapsed() < SPIN_FOR {
            std::hint::spin_loop();
            if self.done.load(Ordering::Acquire) >= seq {
                return;
            }
        }
        let mut g = self.idle.lock();
        while self.done.load(Ordering::Acquire) < seq {
            self.awaited.fetch_min(seq, Ordering::AcqRel);
            if self.done.load(Ordering::Acquire) >= seq {
                break;
            }
            self.ran.wait_for(&mut g, Duration::from_millis(2));
        }
    }

    /// Waits until every item queued so far has run.
    pub fn drain(&self) {
        self.reach(self.pushed.load(Ordering::Acquire));
    }

    /// The thread: takes every item queued at once and runs them in
    /// order; while it has none it watches the count of items queued,
    /// without the lock the callers queue under, and sleeps after a
    /// while.
    fn run(&self, inner: &'static dyn Driver) {
        ON_LINE.with(|c| c.set(true));
        // Swapped with the queue: each keeps the other's room.
        let mut batch: VecDeque<(u64, Item)> = VecDeque::new();
        let mut taken = 0u64;
        let mut idle_since = Instant::now();
        loop {
            if self.pushed.load(Ordering::Acquire) == taken {
                if idle_since.elapsed() < SPIN_FOR {
                    std::hint::spin_loop();
                    continue;
                }
                let mut items = self.items.lock();
                self.asleep.store(true, Ordering::Release);
                while items.is_empty() {
                    self.wake.wait(&mut items);
                }
                self.asleep.store(false, Ordering::Release);
                continue;
            }
            std::mem::swap(&mut *self.items.lock(), &mut batch);
            for (seq, item) in batch.drain(..) {
                match item {
                    Item::Small(call) => self.small(inner, call),
                    Item::Launch(l) => self.launch(inner, l),
                    Item::Job(job) => job(inner),
                }
                self.done.store(seq, Ordering::Release);
                taken = seq;
                if self.awaited.load(Ordering::Acquire) <= seq {
                    let _g = self.idle.lock();
                    self.awaited.store(u64::MAX, Ordering::Release);
                    self.ran.notify_all();
                }
            }
            idle_since = Instant::now();
        }
    }

    /// Notes the failure of a command without an event on queue `q`: the
    /// first stays until an event of `q` reports it.
    pub fn lose(&self, q: usize, e: Error) {
        self.lost.lock().entry(q).or_insert(e);
        self.any_lost.store(true, Ordering::Release);
    }

    /// The failure noted for queue `q`, taken (by the event reporting it,
    /// or because `q` is gone).
    pub fn take_lost(&self, q: usize) -> Option<Error> {
        if !self.any_lost.load(Ordering::Acquire) {
            return None;
        }
        let mut lost = self.lost.lock();
        let e = lost.remove(&q);
        self.any_lost.store(!lost.is_empty(), Ordering::Release);
        e
    }

    /// The failure noted for queue `q`, left for its next event.
    pub fn lost_on(&self, q: usize) -> Option<Error> {
        if !self.any_lost.load(Ordering::Acquire) {
            return None;
        }
        self.lost.lock().get(&q).cloned()
    }

    /// The failure an event reports for a command without an event before
    /// it on its queue.
    pub fn before(e: &Error) -> Error {
        Error::new(
            Status::ExecutionFailed,
            format!("a command before it without an event failed: {}", e.message),
        )
    }
}
