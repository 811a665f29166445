//! Commands held on the host while they wait for a user event.
//!
//! A command that waits for a user event not yet completed (a host task's,
//! or one the program made) is not given to OpenCL at once: some drivers
//! start such a command long after the event completes (NVIDIA's, 13–19
//! µs). It waits here instead, in its queue's list of held commands, with
//! every later command of that queue, and the thread that completes the
//! event enqueues them, in order. A held command's event is a stand-in
//! (a [`Proxy`], its handle tagged in the lowest bit) that answers for
//! OpenCL's event once the command is enqueued. `SYRAH_HOLD=0` turns
//! holding off: the driver then waits for the user events itself.

use super::ffi::*;
use super::loader::{api, check};
use crate::backend::{EndCallback, EventH, QueueH};
use crate::core::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use smallvec::SmallVec;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::c_void;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Arc;

/// What a held command does once its turn comes: enqueue itself after the
/// wait list given, its event to the slot when one is asked for.
pub type Body = Box<dyn FnOnce(&[EventH], Option<&mut EventH>) -> Result<()> + Send>;

/// A held command's event until OpenCL's exists.
pub struct Proxy {
    /// OpenCL's event once the command is enqueued (0 before); owned.
    real: AtomicUsize,
    /// The enqueue's failure, as an OpenCL error code (0: none).
    failed: AtomicI32,
    /// End callbacks asked for before the command was enqueued.
    callbacks: Mutex<Vec<(EndCallback, usize)>>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let real = *self.real.get_mut();
        if real != 0 {
            if let Ok(api) = api() {
                // SAFETY: the reference this stand-in took over.
                unsafe { (api.clReleaseEvent)(real as cl_event) };
            }
        }
    }
}

/// What a proxy's command has become.
pub enum Now {
    /// OpenCL's event.
    Real(cl_event),
    /// Its enqueue failed with this code.
    Failed(i32),
    /// Still held.
    Held,
}

impl Proxy {
    pub fn now(&self) -> Now {
        let real = self.real.load(Ordering::Acquire);
        if real != 0 {
            return Now::Real(real as cl_event);
        }
        match self.failed.load(Ordering::Acquire) {
            0 => Now::Held,
            code => Now::Failed(code),
        }
    }
}

/// Whether `e` is a held command's stand-in.
pub fn is_proxy(e: EventH) -> bool {
    e.0 & 1 == 1
}

/// The stand-in behind handle `e` (see [`is_proxy`]), borrowed.
///
/// # Safety
/// `e` is a live proxy handle: the caller owns a reference to it.
pub unsafe fn proxy<'a>(e: EventH) -> &'a Proxy {
    // SAFETY: the caller's promise; the handle is `Arc::into_raw` + 1.
    unsafe { &*((e.0 & !1) as *const Proxy) }
}

/// Takes back the reference that handle `e` stood for.
///
/// # Safety
/// `e` is a proxy handle whose reference the caller gives up.
pub unsafe fn release(e: EventH) {
    // SAFETY: the caller's promise.
    drop(unsafe { Arc::from_raw((e.0 & !1) as *const Proxy) });
}

fn handle_of(p: Arc<Proxy>) -> EventH {
    EventH(Arc::into_raw(p) as usize | 1)
}

/// One wait of a held command, with a reference of its own.
enum Wait {
    /// A user event not completed when the command was held.
    User(cl_event),
    /// Any other OpenCL event.
    Event(cl_event),
    /// Another held command.
    Proxy(Arc<Proxy>),
}

struct Job {
    queue: cl_command_queue,
    waits: SmallVec<[Wait; 4]>,
    out: Option<Arc<Proxy>>,
    body: Body,
}

// SAFETY: OpenCL handles may be used from any thread; the body is Send.
unsafe impl Send for Job {}

#[derive(Default)]
struct State {
    /// User events made here and not yet completed.
    pending: BTreeSet<usize>,
    /// Held commands per queue, in submission order.
    held: BTreeMap<usize, VecDeque<Job>>,
}

static STATE: Mutex<State> = Mutex::new(State {
    pending: BTreeSet::new(),
    held: BTreeMap::new(),
});
/// Notified whenever held commands have been enqueued.
static RAN: Condvar = Condvar::new();
/// Pending user events plus held commands: 0 lets every enqueue go
/// straight to OpenCL without the lock.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Whether commands are held (`SYRAH_HOLD=0` says no).
pub fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| match std::env::var("SYRAH_HOLD") {
        Ok(v) if v == "0" => false,
        Ok(v) if v == "1" || v.is_empty() => true,
        Ok(v) => {
            eprintln!("syrah: SYRAH_HOLD={v:?} is not 0 or 1; commands are held");
            true
        }
        Err(_) => true,
    })
}

/// Notes user event `e`, just made, as pending.
pub fn user_made(e: EventH) {
    if !enabled() {
        return;
    }
    let mut st = STATE.lock();
    if st.pending.insert(e.0) {
        ACTIVE.fetch_add(1, Ordering::AcqRel);
    }
}

/// Notes that user event `e` has completed, and enqueues what was held
/// for it (on this thread).
pub fn user_completed(e: EventH) {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return;
    }
    let later = {
        let mut st = STATE.lock();
        if !st.pending.remove(&e.0) {
            return;
        }
        ACTIVE.fetch_sub(1, Ordering::AcqRel);
        pump(&mut st)
    };
    RAN.notify_all();
    later.run();
}

/// Notes that user event `e` is released: no longer pending unless a held
/// command still waits for it (which keeps it alive, and waits on).
pub fn user_released(e: EventH) {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut st = STATE.lock();
    if !st.pending.contains(&e.0) {
        return;
    }
    let waited = st.held.values().flatten().any(|j| {
        j.waits
            .iter()
            .any(|w| matches!(w, Wait::User(u) if *u as usize == e.0))
    });
    if !waited {
        st.pending.remove(&e.0);
        ACTIVE.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Enqueues a command on `q` after `waits`: at once through `direct`
/// (the wait list with stand-ins replaced by OpenCL's events) where
/// nothing it waits for is held or pending and nothing is held on `q`;
/// otherwise holds the body `held` makes, its event a stand-in.
pub fn enqueue(
    q: QueueH,
    waits: &[EventH],
    ev: Option<&mut EventH>,
    direct: impl FnOnce(&[EventH], Option<&mut EventH>) -> Result<()>,
    held: impl FnOnce() -> Result<Body>,
) -> Result<()> {
    let any_proxy = waits.iter().any(|w| is_proxy(*w));
    if !any_proxy && ACTIVE.load(Ordering::Acquire) == 0 {
        return direct(waits, ev);
    }
    let mut st = STATE.lock();
    let mut mapped: SmallVec<[EventH; 8]> = SmallVec::new();
    let mut blocked = st.held.get(&q.0).is_some_and(|j| !j.is_empty());
    for &w in waits {
        if is_proxy(w) {
            // SAFETY: a wait list names live events.
            match unsafe { proxy(w) }.now() {
                Now::Real(r) => mapped.push(EventH(r as usize)),
                // A failed command has ended; its failure reaches the
                // dependent through the runtime's own events.
                Now::Failed(_) => {}
                Now::Held => blocked = true,
            }
        } else {
            blocked |= st.pending.contains(&w.0);
            mapped.push(w);
        }
    }
    if !blocked {
        // Under the lock, so that it cannot pass a held command of `q`
        // being enqueued by another thread.
        return direct(&mapped, ev);
    }
    let body = held()?;
    let api = api()?;
    let mut job = Job {
        queue: q.0 as cl_command_queue,
        waits: SmallVec::new(),
        out: None,
        body,
    };
    for &w in waits {
        if is_proxy(w) {
            let p = (w.0 & !1) as *const Proxy;
            // SAFETY: a live proxy: one more reference for the job.
            let p = unsafe {
                Arc::increment_strong_count(p);
                Arc::from_raw(p)
            };
            job.waits.push(Wait::Proxy(p));
        } else {
            let e = w.0 as cl_event;
            // SAFETY: a live event of the wait list; released when the job
            // has run.
            unsafe { (api.clRetainEvent)(e) };
            job.waits.push(if st.pending.contains(&w.0) {
                Wait::User(e)
            } else {
                Wait::Event(e)
            });
        }
    }
    // SAFETY: a live queue, kept until the job has run.
    unsafe { (api.clRetainCommandQueue)(job.queue) };
    if let Some(slot) = ev {
        let p = Arc::new(Proxy {
            real: AtomicUsize::new(0),
            failed: AtomicI32::new(0),
            callbacks: Mutex::new(Vec::new()),
        });
        *slot = handle_of(p.clone());
        job.out = Some(p);
    }
    st.held.entry(q.0).or_default().push_back(job);
    ACTIVE.fetch_add(1, Ordering::AcqRel);
    Ok(())
}

/// What a pump leaves for after the lock: end callbacks to register, or
/// to call for commands whose enqueue failed.
#[derive(Default)]
struct Later {
    /// With the stand-in, which keeps OpenCL's event alive meanwhile.
    register: Vec<(Arc<Proxy>, EndCallback, usize)>,
    fail: Vec<(EventH, EndCallback, usize, i32)>,
}

impl Later {
    fn run(self) {
        let Ok(api) = api() else { return };
        for (p, f, user) in self.register {
            let e = p.real.load(Ordering::Acquire) as cl_event;
            if register(api, e, f, user as *mut c_void).is_err() {
                // The event is gone or refuses callbacks: it has ended.
                // SAFETY: the runtime's end callback, called once.
                unsafe { f(e as *mut c_void, CL_COMPLETE, user as *mut c_void) };
            }
        }
        for (e, f, user, code) in self.fail {
            // SAFETY: as above, with the failure.
            unsafe { f(e.0 as *mut c_void, code, user as *mut c_void) };
        }
    }
}

fn register(
    api: &super::loader::Api,
    e: cl_event,
    f: EndCallback,
    user: *mut c_void,
) -> Result<()> {
    // SAFETY: OpenCL's callback takes the event, its status and the user
    // data: pointer arguments of the same layout as the seam's.
    let cb = unsafe {
        std::mem::transmute::<EndCallback, unsafe extern "C" fn(cl_event, cl_int, *mut c_void)>(f)
    };
    // SAFETY: a live event; the callback is called at most once.
    let rc = unsafe { (api.clSetEventCallback)(e, CL_COMPLETE, Some(cb), user) };
    super::loader::check(rc, "clSetEventCallback")
}

/// Enqueues every held command whose waits have all been resolved, queue
/// by queue in order, until none is left that can go.
fn pump(st: &mut State) -> Later {
    let mut later = Later::default();
    let Ok(api) = api() else { return later };
    loop {
        let mut progress = false;
        let queues: SmallVec<[usize; 8]> = st.held.keys().copied().collect();
        for q in queues {
            let mut ran = false;
            loop {
                let ready = st
                    .held
                    .get(&q)
                    .and_then(|jobs| jobs.front())
                    .is_some_and(|j| j.waits.iter().all(|w| resolved(&st.pending, w)));
                if !ready {
                    break;
                }
                let Some(job) = st.held.get_mut(&q).and_then(|jobs| jobs.pop_front()) else {
                    break;
                };
                run(api, job, &mut later);
                // Only now: an enqueue that finds nothing active goes
                // straight to OpenCL, and must come after this one.
                ACTIVE.fetch_sub(1, Ordering::AcqRel);
                ran = true;
                progress = true;
            }
            if ran {
                // SAFETY: a live queue (its job kept a reference).
                unsafe { (api.clFlush)(q as cl_command_queue) };
            }
            if st.held.get(&q).is_some_and(|j| j.is_empty()) {
                st.held.remove(&q);
            }
        }
        if !progress {
            return later;
        }
    }
}

fn resolved(pending: &BTreeSet<usize>, w: &Wait) -> bool {
    match w {
        Wait::User(e) => !pending.contains(&(*e as usize)),
        Wait::Event(_) => true,
        Wait::Proxy(p) => !matches!(p.now(), Now::Held),
    }
}

/// Enqueues one held command, all its waits resolved.
fn run(api: &super::loader::Api, job: Job, later: &mut Later) {
    let Job {
        queue,
        waits,
        out,
        body,
    } = job;
    let mut wl: SmallVec<[EventH; 8]> = SmallVec::new();
    for w in &waits {
        match w {
            // Completed: nothing left to wait for.
            Wait::User(_) => {}
            Wait::Event(e) => wl.push(EventH(*e as usize)),
            Wait::Proxy(p) => {
                if let Now::Real(r) = p.now() {
                    wl.push(EventH(r as usize));
                }
            }
        }
    }
    let mut real = EventH::NONE;
    let done = body(&wl, out.as_ref().map(|_| &mut real));
    for w in waits {
        if let Wait::User(e) | Wait::Event(e) = w {
            // SAFETY: the reference taken when the job was held.
            unsafe { (api.clReleaseEvent)(e) };
        }
    }
    // SAFETY: the reference taken when the job was held.
    unsafe { (api.clReleaseCommandQueue)(queue) };
    let Some(p) = out else { return };
    let mut cbs = p.callbacks.lock();
    match done {
        Ok(()) if !real.is_none() => {
            p.real.store(real.0, Ordering::Release);
            for (f, user) in cbs.drain(..) {
                later.register.push((p.clone(), f, user));
            }
        }
        Ok(()) | Err(_) => {
            let code = CL_OUT_OF_RESOURCES;
            if let Err(e) = &done {
                eprintln!("syrah: a command held for a user event failed when enqueued: {e}");
            }
            p.failed.store(code, Ordering::Release);
            let h = EventH(Arc::as_ptr(&p) as usize | 1);
            for (f, user) in cbs.drain(..) {
                later.fail.push((h, f, user, code));
            }
        }
    }
}

/// Registers `f` to run once stand-in `e`'s command ends: on OpenCL's
/// event once there is one.
///
/// # Safety
/// `e` is a live proxy handle.
pub unsafe fn on_end(e: EventH, f: EndCallback, user: *mut c_void) -> Result<()> {
    // SAFETY: the caller's promise.
    let p = unsafe { proxy(e) };
    let mut cbs = p.callbacks.lock();
    match p.now() {
        Now::Held => {
            cbs.push((f, user as usize));
            Ok(())
        }
        Now::Real(r) => {
            drop(cbs);
            register(api()?, r, f, user)
        }
        Now::Failed(code) => {
            drop(cbs);
            // SAFETY: the runtime's end callback, called once.
            unsafe { f(e.0 as *mut c_void, code, user) };
            Ok(())
        }
    }
}

/// Waits until stand-in `e`'s command has been enqueued (or failed to be).
///
/// # Safety
/// `e` is a live proxy handle.
pub unsafe fn wait_enqueued(e: EventH) -> Now {
    // SAFETY: the caller's promise.
    let p = unsafe { proxy(e) };
    let mut st = STATE.lock();
    loop {
        match p.now() {
            Now::Held => RAN.wait(&mut st),
            now => return now,
        }
    }
}

/// Waits until nothing is held on `q` (before OpenCL's own finish).
pub fn drain(q: QueueH) {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut st = STATE.lock();
    while st.held.get(&q.0).is_some_and(|j| !j.is_empty()) {
        RAN.wait(&mut st);
    }
}

/// An error for a stand-in whose command cannot be asked about yet.
pub fn not_enqueued(what: &str) -> Error {
    Error::new(
        crate::core::error::Status::InvalidOperation,
        format!("{what}: the command still waits for a user event and is not enqueued yet"),
    )
}

/// A copy through [`enqueue`]; a blocking one that must be held
/// returns once it has run (the held body itself never blocks).
pub fn copy(
    q: QueueH,
    waits: &[EventH],
    ev: Option<&mut EventH>,
    blocking: bool,
    mems: [usize; 2],
    copy: impl Fn(&[EventH], Option<&mut EventH>, bool) -> Result<()> + Send + Copy + 'static,
) -> Result<()> {
    let mut own = EventH::NONE;
    let asked = ev.is_some();
    let slot = match ev {
        Some(e) => Some(e),
        None if blocking => Some(&mut own),
        None => None,
    };
    let mut out = EventH::NONE;
    let got = enqueue(
        q,
        waits,
        slot.is_some().then_some(&mut out),
        |wl, ev| copy(wl, ev, blocking),
        || {
            let mems = Mems::retain(mems);
            Ok(Box::new(move |wl, ev| {
                let done = copy(wl, ev, false);
                drop(mems);
                done
            }))
        },
    );
    got?;
    if blocking && is_proxy(out) {
        // SAFETY: the stand-in just made, still owned here.
        let ended = match unsafe { wait_enqueued(out) } {
            Now::Real(r) => {
                let api = api()?;
                // SAFETY: waiting on one live event.
                unsafe { (api.clWaitForEvents)(1, &r) }
            }
            _ => CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST,
        };
        if !asked {
            release_any(out);
        }
        check(ended, "waiting for a blocking copy held for a user event")?;
    } else if !asked {
        release_any(out);
    }
    if let Some(e) = slot.filter(|_| asked) {
        *e = out;
    }
    Ok(())
}

/// Gives up a reference to `e`, a stand-in or OpenCL's event (none: 0).
pub fn release_any(e: EventH) {
    if e.is_none() {
        return;
    }
    if is_proxy(e) {
        // SAFETY: the caller's reference.
        unsafe { release(e) };
    } else if let Ok(api) = api() {
        // SAFETY: the caller's reference.
        unsafe { (api.clReleaseEvent)(e.0 as cl_event) };
    }
}

/// Memory objects a held command uses, retained until it is dropped (run
/// or not): their owners may let go of them once the enqueue returns.
pub struct Mems(SmallVec<[usize; 4]>);

// SAFETY: OpenCL handles may be used from any thread.
unsafe impl Send for Mems {}

impl Mems {
    pub fn retain(list: impl IntoIterator<Item = usize>) -> Mems {
        let list: SmallVec<[usize; 4]> = list.into_iter().filter(|&m| m != 0).collect();
        if let Ok(api) = api() {
            for &m in &list {
                // SAFETY: a live memory object of the command.
                unsafe { (api.clRetainMemObject)(m as cl_mem) };
            }
        }
        Mems(list)
    }
}

impl Drop for Mems {
    fn drop(&mut self) {
        if let Ok(api) = api() {
            for &m in &self.0 {
                // SAFETY: the reference taken in `retain`.
                unsafe { (api.clReleaseMemObject)(m as cl_mem) };
            }
        }
    }
}

/// Memory objects set as kernels' arguments, by kernel and index: what a
/// held launch must keep alive.
static MEM_ARGS: Mutex<BTreeMap<(usize, u32), usize>> = Mutex::new(BTreeMap::new());
static MEM_ARG_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Notes argument `index` of kernel `k`: memory object `mem`, or (0)
/// anything else.
pub fn note_arg(k: usize, index: u32, mem: usize) {
    if mem == 0 && MEM_ARG_COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut args = MEM_ARGS.lock();
    let had = if mem == 0 {
        args.remove(&(k, index)).is_some()
    } else {
        args.insert((k, index), mem).is_some()
    };
    match (had, mem != 0) {
        (false, true) => {
            MEM_ARG_COUNT.fetch_add(1, Ordering::AcqRel);
        }
        (true, false) => {
            MEM_ARG_COUNT.fetch_sub(1, Ordering::AcqRel);
        }
        _ => {}
    }
}

/// Forgets kernel `k`'s arguments (it is released).
pub fn forget_kernel(k: usize) {
    if MEM_ARG_COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut args = MEM_ARGS.lock();
    let keys: SmallVec<[(usize, u32); 8]> = args
        .range((k, 0)..=(k, u32::MAX))
        .map(|(key, _)| *key)
        .collect();
    for key in keys {
        args.remove(&key);
        MEM_ARG_COUNT.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The memory objects set as kernel `k`'s arguments now.
pub fn mem_args(k: usize) -> SmallVec<[usize; 4]> {
    if MEM_ARG_COUNT.load(Ordering::Acquire) == 0 {
        return SmallVec::new();
    }
    MEM_ARGS
        .lock()
        .range((k, 0)..=(k, u32::MAX))
        .map(|(_, &m)| m)
        .collect()
}
