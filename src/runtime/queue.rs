//! Queues: submission, dependencies, and asynchronous error delivery.
//!
//! A queue runs its commands on one or more in-order OpenCL queues
//! ("lanes") of its device. An in-order Syrah queue has one lane. An
//! out-of-order one spreads independent commands over up to [`LANES`]
//! lanes (one per core, up to 16, on CPUs), so they can overlap on any
//! driver, puts a command behind a running dependency on that
//! dependency's lane (no event wait needed), and keeps commands held back by an unfinished user event
//! (a host accessor's gate) away from lanes that independent work uses:
//! some drivers stall every later command of a queue behind such a wait.

use super::context::Context;
use super::event::Event;
use super::platform::Device;
use crate::core::error::{Error, Result, Status};
use crate::opencl::ffi::*;
use crate::opencl::loader::{api, check};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::any::Any;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::{Arc, Weak};

/// Called once per asynchronous error: the queue, the status, the message
/// and the user data given at creation.
pub type AsyncHandler =
    unsafe extern "C" fn(*const Queue, i32, *const std::ffi::c_char, *mut c_void);

/// What a command keeps alive until it completes.
pub enum Held {
    /// Anything (e.g. a fill's seed bytes).
    Any(Box<dyn Any + Send>),
    /// The storages of the buffers it accesses (inline while few), held as
    /// opaque shared objects: the queue only keeps them alive.
    Storages(SmallVec<[Arc<dyn Any + Send + Sync>; 2]>),
    /// What several commands keep (those a marker stands for).
    List(Vec<Held>),
}

/// Where a command enqueued without an event stands: its in-order lane and
/// its place there. An event standing for it (and everything before it on
/// the lane) is made only when something off the lane must wait for it.
#[derive(Clone)]
pub struct LanePos {
    pub queue: std::sync::Weak<Queue>,
    pub lane: u64,
    pub seq: u64,
}

impl LanePos {
    /// An event that completes once the command has: the lane's tail when
    /// it covers the command, else a marker enqueued now. None when the
    /// queue is gone (its release finished everything).
    pub fn event(&self) -> Result<Option<Arc<Event>>> {
        self.event_exact().map(|(e, _)| e)
    }

    /// [`LanePos::event`], and whether the event stands for little more
    /// than this command: false when it also waits for commands enqueued
    /// on the lane after this one (at most one more is let pass).
    pub fn event_exact(&self) -> Result<(Option<Arc<Event>>, bool)> {
        match self.queue.upgrade() {
            Some(q) => q.event_at(self.lane, self.seq),
            None => Ok((None, true)),
        }
    }

    /// True once the command is known to have finished (false while it is
    /// not known, asking the driver at most about the lane's tail).
    pub fn is_done(&self) -> bool {
        self.queue
            .upgrade()
            .is_none_or(|q| q.lane_done(self.lane, self.seq))
    }

    /// True when commands of `q` are ordered after this one by `q` itself:
    /// `q` is this in-order queue.
    pub fn orders(&self, q: &Queue) -> bool {
        q.in_order && self.is_of(q)
    }

    /// True when the command was submitted to `q`.
    pub fn is_of(&self, q: &Queue) -> bool {
        std::ptr::eq(self.queue.as_ptr(), q)
    }
}

/// Places on lanes of one queue that a command must follow.
pub type LanePositions = SmallVec<[LanePos; 2]>;

/// What submitting a command left: its event, or its place on a lane.
pub enum Submitted {
    Event(Arc<Event>),
    Quiet(LanePos),
}

impl Submitted {
    /// Records the bytes the command moves on its event, if it has one
    /// (for the trace; a command without an event is not traced).
    pub fn with_bytes(self, n: usize) -> Submitted {
        match self {
            Submitted::Event(e) => Submitted::Event(e.with_bytes(n)),
            quiet => quiet,
        }
    }
}

/// Optional [`Held`].
pub type Keep = Option<Held>;

struct Entry {
    event: Arc<Event>,
    /// Kept alive until the command completes.
    keep: Keep,
    /// The device whose profiling timestamps go into the trace, if any.
    timed: Option<&'static Device>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        if let (Some(dev), Some(t)) = (self.timed, super::trace::tracer()) {
            if self.event.is_settled() {
                t.command_done(&self.event, dev);
            }
        }
    }
}

#[derive(Default)]
struct Inflight {
    entries: VecDeque<Entry>,
    /// Length at which the next full scan happens.
    scan_at: usize,
    /// Submissions since the oldest entries were last looked at.
    since_front: usize,
}

struct Lane {
    /// Process-unique id of the lane.
    id: u64,
    cl: cl_command_queue,
    tail: Option<Arc<Event>>,
    /// The tail waits on something that may not finish soon.
    gated: bool,
    /// Commands enqueued on the lane so far; the tail is command
    /// `tail_seq`, and those after it went without events (see
    /// `submit_quiet`): a marker stands for them when one is needed.
    seq: u64,
    tail_seq: u64,
    /// For the commands without events since the tail: what they keep
    /// alive and the unfinished commands they waited for (whose failure
    /// becomes theirs); the next tracked command takes these over.
    quiet_keep: Vec<Held>,
    quiet_deps: SmallVec<[Arc<Event>; 4]>,
    /// Commands up to this place are known to have finished: a queue wait
    /// finished the lane as a whole (see `finish_plain_lanes`).
    done_through: u64,
    /// The last few tracked commands of the lane that wait for nothing
    /// indefinite, with their places, oldest first: each stands for the
    /// commands before it. A lane is sealed before a gated command joins
    /// it, so the first of these at or after a command's place never waits
    /// for a gate the command itself does not wait for.
    points: VecDeque<(u64, Arc<Event>)>,
}

/// Points a lane remembers.
const POINTS: usize = 16;

impl Lane {
    fn new(cl: cl_command_queue) -> Lane {
        Lane {
            id: next_lane_id(),
            cl,
            tail: None,
            gated: false,
            seq: 0,
            tail_seq: 0,
            quiet_keep: Vec::new(),
            quiet_deps: SmallVec::new(),
            done_through: 0,
            points: VecDeque::new(),
        }
    }

    /// Commands that went on the lane without events after its tail and
    /// are not known to have finished.
    fn quiet_run(&self) -> u64 {
        self.seq
            .saturating_sub(self.tail_seq.max(self.done_through))
    }

    /// Whether there are any.
    fn quiet(&self) -> bool {
        self.quiet_run() > 0
    }

    /// Whether a command put on the lane waits behind nothing indefinite.
    fn usable(&self) -> bool {
        !self.gated || self.tail.as_ref().is_none_or(|t| t.is_done())
    }

    /// The first tracked command at or after place `seq` that waits for
    /// nothing indefinite (see `points`); None when there is none yet.
    fn covering(&self, seq: u64) -> Option<(u64, Arc<Event>)> {
        self.points
            .iter()
            .find(|(at, _)| *at >= seq)
            .map(|(at, ev)| (*at, ev.clone()))
    }

    /// Makes `ev`, just enqueued, the tail; hands back what the commands
    /// without events before it kept and waited for.
    fn set_tail(&mut self, ev: &Arc<Event>, gated: bool) -> (Keep, SmallVec<[Arc<Event>; 4]>) {
        self.seq += 1;
        ev.lane_seq
            .store(self.seq, std::sync::atomic::Ordering::Release);
        ev.lane.store(self.id, std::sync::atomic::Ordering::Release);
        self.tail_seq = self.seq;
        self.tail = Some(ev.clone());
        self.gated = gated;
        if !gated {
            if self.points.len() == POINTS {
                self.points.pop_front();
            }
            self.points.push_back((self.seq, ev.clone()));
        }
        let kept = std::mem::take(&mut self.quiet_keep);
        let keep = (!kept.is_empty()).then_some(Held::List(kept));
        (keep, std::mem::take(&mut self.quiet_deps))
    }
}

/// Commands without events after which a lane gets a marker anyway, so
/// that what they keep alive is let go soon after they finish.
const QUIET_RUN: u64 = 64;

struct Lanes {
    list: Vec<Lane>,
    next: usize,
    /// The last barrier: later commands wait for it.
    barrier: Option<Arc<Event>>,
    /// While a command group is being submitted (`Some`): the lane its
    /// first command went to, which the rest follow.
    group: Option<Option<usize>>,
}

/// Keeps the commands of one command group (its transfers and itself) on
/// one lane until dropped: some drivers run a command that waits for
/// another queue's work slower (Intel's CPU runtime ran a kernel behind
/// copies on other lanes at half speed).
pub struct GroupLane<'a>(Option<&'a Queue>);

impl Drop for GroupLane<'_> {
    fn drop(&mut self) {
        if let Some(q) = self.0 {
            q.lanes.lock().group = None;
        }
    }
}

/// Lanes an out-of-order queue spreads independent work over.
pub(crate) const LANES: usize = 4;
/// Lanes opened beyond those to keep gated work apart.
const GATED_LANES: usize = 12;

/// Lanes for independent work on `device`: four, or one per compute unit
/// up to sixteen on a CPU, whose driver runs each queue's commands one at
/// a time on its cores.
fn lanes_for(device: &Device) -> usize {
    if device.kind == crate::core::selector::DeviceKind::Cpu {
        (device.compute_units as usize).clamp(LANES, 16)
    } else {
        LANES
    }
}

pub struct Queue {
    pub ctx: Arc<Context>,
    pub device: &'static Device,
    lanes: Mutex<Lanes>,
    props: cl_command_queue_properties,
    pub in_order: bool,
    pub profiling: bool,
    /// Lanes for independent work.
    width: usize,
    /// Lanes record timestamps for the trace.
    timed: bool,
    handler: Option<(AsyncHandler, usize)>,
    pub(crate) me: std::sync::Weak<Queue>,
    inflight: Mutex<Inflight>,
    errors: Mutex<Vec<Error>>,
}

// SAFETY: cl_command_queue is thread-safe per the OpenCL specification; the
// handler's user data is only passed back to the user's callback, which the
// header documents may run on any thread.
unsafe impl Send for Queue {}
// SAFETY: as above; mutable state is behind mutexes.
unsafe impl Sync for Queue {}

const SCAN_MIN: usize = 64;
const FRONT_EVERY: usize = 32;
/// Entries at the front of the list whose lanes are looked at together.
const INFER_WINDOW: usize = 128;

/// True when `ev` is on a lane that `running` (from [`infer_completed`])
/// says had not completed commands from `ev`'s place on.
fn on_running_lane(ev: &Event, running: &[(u64, u64)]) -> bool {
    ev.lane_place()
        .is_some_and(|(lane, seq)| running.iter().any(|&(l, from)| l == lane && seq >= from))
}

/// Asks the driver about as few commands as it can to learn which of
/// `entries` completed. A lane finishes its commands in order, so per lane
/// the latest command that completed (found by galloping from the first,
/// then halving) vouches for those before it, and the earliest that had
/// not tells that none after it had: about 2 + 2 log2(k) questions for k
/// finished commands of a lane instead of k (drivers charge microseconds
/// per question; see [`crate::core::order::done_prefix`]). Commands not
/// on a lane, and those already known to have finished, are left out.
/// Returns, per lane, the place from which commands had not completed
/// (`u64::MAX` when all had).
///
/// A command vouched for this way counts as completed without error; a
/// failure it inherits from a command it waited for is still found (its
/// outcome looks at those), but one of its own while a later command of
/// the lane completed would not be: OpenCL leaves the state of a queue
/// after a failed command to the driver, as for launches without events.
fn infer_completed<'a>(entries: impl Iterator<Item = &'a Entry>) -> SmallVec<[(u64, u64); 8]> {
    let mut on: Vec<(u64, u64, &Arc<Event>)> = entries
        .map(|e| &e.event)
        .filter(|ev| !ev.known_done())
        .filter_map(|ev| ev.lane_place().map(|(lane, seq)| (lane, seq, ev)))
        .collect();
    on.sort_unstable_by_key(|&(lane, seq, _)| (lane, seq));
    let mut from = SmallVec::new();
    for same in on.chunk_by(|x, y| x.0 == y.0) {
        let (done, not) = crate::core::order::done_prefix(same.len(), |i| same[i].2.completed_ok());
        for (_, _, ev) in &same[..done] {
            ev.mark_completed();
        }
        from.push((same[0].0, not.map_or(u64::MAX, |i| same[i].1)));
    }
    from
}

impl Queue {
    pub fn create(
        ctx: Arc<Context>,
        device: &'static Device,
        in_order: bool,
        profiling: bool,
        handler: Option<(AsyncHandler, usize)>,
    ) -> Result<Arc<Queue>> {
        ctx.require_device(device)?;
        if profiling && !device.profiling {
            return Err(Error::new(
                Status::FeatureNotSupported,
                format!("device {} does not support profiling", device.label()),
            ));
        }
        let mut props: cl_command_queue_properties = 0;
        let timed = super::trace::timing() && device.profiling;
        if profiling || timed {
            props |= CL_QUEUE_PROFILING_ENABLE;
        }
        let first = open_lane(&ctx, device, props)?;
        let q = Arc::new_cyclic(|me| Queue {
            ctx: ctx.clone(),
            device,
            lanes: Mutex::new(Lanes {
                list: vec![Lane::new(first)],
                next: 0,
                barrier: None,
                group: None,
            }),
            props,
            in_order,
            profiling,
            width: lanes_for(device),
            timed,
            handler,
            me: me.clone(),
            inflight: Mutex::new(Inflight {
                entries: VecDeque::new(),
                scan_at: SCAN_MIN,
                since_front: 0,
            }),
            errors: Mutex::new(Vec::new()),
        });
        let mut qs = ctx.queues.lock();
        qs.retain(|w| w.strong_count() > 0);
        qs.push(Arc::downgrade(&q) as Weak<dyn super::context::QueueWork>);
        Ok(q)
    }

    /// A strong reference to this queue, while one exists.
    pub fn self_arc(&self) -> Option<Arc<Queue>> {
        self.me.upgrade()
    }

    /// OpenCL wait list for `deps`. Events of another context cannot be
    /// waited on by OpenCL; those are waited for on the host here.
    pub fn wait_list(&self, deps: &[Arc<Event>]) -> Result<Vec<cl_event>> {
        let mut out = Vec::with_capacity(deps.len());
        for d in deps {
            if d.ctx_id == self.ctx.id {
                out.push(d.cl);
            } else {
                d.wait()?;
            }
        }
        Ok(out)
    }

    /// What a command submitted now must follow on an in-order queue: the
    /// last command of every lane and the last host-side work (a host task
    /// is on no lane).
    pub(crate) fn tails(&self) -> Result<Vec<Arc<Event>>> {
        self.seal()?;
        let lanes = self.lanes.lock();
        Ok(lanes
            .list
            .iter()
            .filter_map(|l| l.tail.clone())
            .chain(lanes.barrier.clone())
            .collect())
    }

    /// Gives every lane that ran commands without events a marker as its
    /// tail, standing for them (an in-order lane's marker completes after
    /// everything before it).
    fn seal(&self) -> Result<()> {
        let mut made = Vec::new();
        let sealed = {
            let mut lanes = self.lanes.lock();
            let mut sealed = Ok(());
            for lane in lanes.list.iter_mut().filter(|l| l.quiet()) {
                match self.seal_lane(lane) {
                    Ok(m) => made.push(m),
                    Err(e) => {
                        sealed = Err(e);
                        break;
                    }
                }
            }
            sealed
        };
        for (ev, keep) in made {
            self.track(ev, keep);
        }
        sealed
    }

    /// Enqueues a marker standing for the commands without events of
    /// `lane`; returns it, to be tracked, with what they keep.
    fn seal_lane(&self, lane: &mut Lane) -> Result<(Arc<Event>, Keep)> {
        let api = api()?;
        let mut cl: cl_event = std::ptr::null_mut();
        // SAFETY: a live queue; no wait list; `cl` receives the event.
        let rc =
            unsafe { (api.clEnqueueMarkerWithWaitList)(lane.cl, 0, std::ptr::null(), &mut cl) };
        check(rc, "clEnqueueMarkerWithWaitList")?;
        let ev = Event::new(
            cl,
            self.ctx.id,
            "commands enqueued without an event".into(),
            self.profiling,
            SmallVec::new(),
            self.me.clone(),
        );
        let (keep, deps) = lane.set_tail(&ev, false);
        ev.add_deps(deps);
        Ok((ev, keep))
    }

    /// An event that completes once command `seq` of lane `lane` has (see
    /// [`LanePos::event`]).
    pub(crate) fn event_at(&self, lane: u64, seq: u64) -> Result<(Option<Arc<Event>>, bool)> {
        let find = |lanes: &Lanes| match lanes.list.iter().find(|l| l.id == lane) {
            None => Some((None, true)),
            Some(l) if seq <= l.done_through => Some((None, true)),
            Some(l) => l.covering(seq).map(|(at, ev)| (Some(ev), at <= seq + 1)),
        };
        if let Some(found) = find(&self.lanes.lock()) {
            return Ok(found);
        }
        self.seal()?;
        let lanes = self.lanes.lock();
        Ok(find(&lanes).unwrap_or_else(|| {
            let tail = lanes
                .list
                .iter()
                .find(|l| l.id == lane)
                .and_then(|l| l.tail.clone());
            (tail, false)
        }))
    }

    /// Whether command `seq` of lane `lane` is known to have finished.
    pub(crate) fn lane_done(&self, lane: u64, seq: u64) -> bool {
        let ev = {
            let lanes = self.lanes.lock();
            match lanes.list.iter().find(|l| l.id == lane) {
                None => return true,
                Some(l) if seq <= l.done_through => return true,
                Some(l) => match l.covering(seq) {
                    Some((_, ev)) => ev,
                    None => return false,
                },
            }
        };
        ev.is_done()
    }

    /// Enqueues a command nobody asked an event for without asking OpenCL
    /// for one: drivers charge microseconds per event and per status query.
    /// It goes on the lane of the commands at `on_lanes` it follows (an
    /// in-order queue has one lane), or on a lane picked as for any command.
    /// The lane keeps `keep` until a marker or a later tracked command
    /// stands for the command, which happens when something off the lane
    /// must wait for it (see [`LanePos::event`]), at a queue wait, or every
    /// [`QUIET_RUN`] such commands that keep something (on an out-of-order
    /// queue, every [`QUIET_RUN`] in any case). Falls back to `submit` (returning its
    /// event) when the command must be tracked: tracing, a dependency that
    /// may block or belongs to another context, or a lane to follow that
    /// waits behind a gate.
    pub(crate) fn submit_quiet(
        &self,
        deps: &[Arc<Event>],
        on_lanes: &[LanePos],
        what: impl Into<Arc<str>>,
        keep: Keep,
        want_event: bool,
        enqueue: impl FnOnce(cl_command_queue, &[cl_event], *mut cl_event) -> Result<()>,
    ) -> Result<Submitted> {
        // An in-order queue's one lane orders the command after commands of
        // `on_lanes` anyway. On an out-of-order queue it follows those of
        // the first lane named there; the others get events to wait on.
        let mut others: SmallVec<[Arc<Event>; 8]> = SmallVec::new();
        let mut follow = None;
        if !self.in_order {
            for p in on_lanes {
                match follow {
                    None => follow = Some(p.lane),
                    Some(l) if l == p.lane => {}
                    Some(_) => others.extend(self.event_at(p.lane, p.seq)?.0),
                }
            }
        }
        if !want_event && !self.timed && super::trace::tracer().is_none() {
            let api = api()?;
            let mut lanes = self.lanes.lock();
            if lanes.barrier.as_ref().is_some_and(|b| b.is_done()) {
                lanes.barrier = None;
            }
            let all: SmallVec<[Arc<Event>; 8]> = deps
                .iter()
                .chain(&others)
                .chain(lanes.barrier.iter())
                .cloned()
                .collect();
            let simple = all.iter().all(|d| d.ctx_id == self.ctx.id && !d.blocks());
            let at = |lanes: &Lanes, id: u64| lanes.list.iter().position(|l| l.id == id);
            let chosen = match (simple, self.in_order, lanes.group, follow) {
                (false, ..) => None,
                (true, true, ..) => Some(0),
                (true, false, Some(Some(g)), None) => Some(g),
                (true, false, Some(Some(g)), Some(f)) => (lanes.list[g].id == f).then_some(g),
                // Not behind a gated command: the tracked path waits for
                // the commands followed through the marker before it.
                (true, false, _, Some(f)) => at(&lanes, f).filter(|&i| lanes.list[i].usable()),
                (true, false, _, None) => Some(self.pick_lane(&mut lanes, &all, false)?),
            };
            if let Some(i) = chosen {
                if let Some(g) = lanes.group.as_mut() {
                    g.get_or_insert(i);
                }
                let lane = &mut lanes.list[i];
                let wl: SmallVec<[cl_event; 8]> = all
                    .iter()
                    .filter(|d| d.waited_for_on(lane.id))
                    .map(|d| d.cl)
                    .collect();
                enqueue(lane.cl, &wl, std::ptr::null_mut())?;
                lane.seq += 1;
                lane.quiet_keep.extend(keep);
                for d in all.into_iter().filter(|d| d.passes_failure_on()) {
                    if !lane.quiet_deps.iter().any(|q| Arc::ptr_eq(q, &d)) {
                        lane.quiet_deps.push(d);
                    }
                }
                // SAFETY: flushing a live queue so the command starts.
                unsafe { (api.clFlush)(lane.cl) };
                let pos = LanePos {
                    queue: self.me.clone(),
                    lane: lane.id,
                    seq: lane.seq,
                };
                // Sealed every QUIET_RUN commands to let go of what they
                // keep and, on an out-of-order queue, to show when the lane
                // is idle again; an in-order queue's lane holding nothing
                // needs no marker until something asks for one.
                let full = lane.quiet_run() >= QUIET_RUN
                    && !(self.in_order && lane.quiet_keep.is_empty() && lane.quiet_deps.is_empty());
                drop(lanes);
                if full {
                    // The command is enqueued whatever happens here: a
                    // marker that cannot be made now is made (or its error
                    // reported) when one is needed.
                    let _ = self.seal();
                }
                return Ok(Submitted::Quiet(pos));
            }
        }
        // Tracked: what the command follows on a lane gets an event too.
        let mut all: SmallVec<[Arc<Event>; 8]> = deps.iter().cloned().collect();
        all.extend(others);
        if let Some(p) = on_lanes.iter().rev().find(|p| Some(p.lane) == follow) {
            all.extend(self.event_at(p.lane, p.seq)?.0);
        }
        self.submit(&all, what, keep, |q, wl, ev| enqueue(q, wl, ev))
            .map(Submitted::Event)
    }

    /// True when a command submitted now would run right behind `ev` on
    /// its lane, waiting for nothing else the queue imposes.
    pub(crate) fn follows_directly(&self, ev: &Arc<Event>) -> bool {
        let lanes = self.lanes.lock();
        lanes
            .barrier
            .as_ref()
            .is_none_or(|b| Arc::ptr_eq(b, ev) || b.is_done())
            && lanes
                .list
                .iter()
                .any(|l| !l.quiet() && l.tail.as_ref().is_some_and(|t| Arc::ptr_eq(t, ev)))
    }

    /// Makes every later command of the queue wait for `ev` (how host-side
    /// work keeps an in-order queue's order).
    pub(crate) fn order_after(&self, ev: &Arc<Event>) {
        self.lanes.lock().barrier = Some(ev.clone());
    }

    /// An OpenCL queue of this queue's device for blocking helper calls.
    pub fn sync_cl(&self) -> cl_command_queue {
        self.lanes.lock().list[0].cl
    }

    /// Starts a command group: its commands share one lane until the
    /// returned guard is dropped. An in-order queue has one lane anyway.
    pub fn group_lane(&self) -> GroupLane<'_> {
        if self.in_order {
            return GroupLane(None);
        }
        self.lanes.lock().group = Some(None);
        GroupLane(Some(self))
    }

    /// Picks the lane for a command with dependencies `deps`.
    fn pick_lane(&self, lanes: &mut Lanes, deps: &[Arc<Event>], blocking: bool) -> Result<usize> {
        if self.in_order {
            return Ok(0);
        }
        // Behind a dependency that is the last command of a lane.
        if let Some(i) = lanes.list.iter().position(|l| {
            l.tail
                .as_ref()
                .is_some_and(|t| deps.iter().any(|d| Arc::ptr_eq(d, t)))
        }) {
            return Ok(i);
        }
        let usable = Lane::usable;
        // Behind a dependency that ran on a lane of this queue, when nothing
        // gated came after it there: the lane's order then covers the wait.
        // (One known to have finished places nothing; the driver is not
        // asked, as some charge microseconds per question.)
        if let Some(i) = lanes.list.iter().position(|l| {
            usable(l)
                && deps.iter().any(|d| {
                    d.lane.load(std::sync::atomic::Ordering::Acquire) == l.id && !d.known_done()
                })
        }) {
            return Ok(i);
        }
        let n = lanes.list.len();
        // A lane known to be idle first, then the next usable one in turn.
        // A lane with commands after its tail that went without events
        // counts as busy. (The driver is not asked: what finished is
        // learned as finished commands are let go.)
        if let Some(i) = (0..n).find(|&i| {
            let l = &lanes.list[i];
            !l.quiet() && l.tail.as_ref().is_none_or(|t| t.known_done())
        }) {
            if n >= self.width || i > 0 || blocking {
                lanes.next = i + 1;
                return Ok(i);
            }
        }
        let most = self.width + GATED_LANES;
        if n < self.width
            || (blocking && n < most)
            || !(0..n).any(|i| usable(&lanes.list[i])) && n < most
        {
            let cl = open_lane(&self.ctx, self.device, self.props)?;
            lanes.list.push(Lane::new(cl));
            return Ok(n);
        }
        for k in 0..n {
            let i = (lanes.next + k) % n;
            if usable(&lanes.list[i]) {
                lanes.next = i + 1;
                return Ok(i);
            }
        }
        lanes.next += 1;
        Ok(lanes.next % n)
    }

    /// Enqueues one command: chooses a lane, builds the wait list (leaving
    /// out a dependency the lane's order already covers), lets `enqueue`
    /// issue the OpenCL call on that lane, and tracks the new event.
    pub fn submit(
        &self,
        deps: &[Arc<Event>],
        what: impl Into<Arc<str>>,
        keep: Keep,
        enqueue: impl FnOnce(cl_command_queue, &[cl_event], &mut cl_event) -> Result<()>,
    ) -> Result<Arc<Event>> {
        let api = api()?;
        let mut lanes = self.lanes.lock();
        let mut all: SmallVec<[Arc<Event>; 8]> = deps.iter().cloned().collect();
        if let Some(b) = &lanes.barrier {
            if b.is_done() {
                lanes.barrier = None;
            } else {
                all.push(b.clone());
            }
        }
        // Commands of other contexts are waited for through user events of
        // this one, completed from their callbacks: never on this thread.
        let mut bridges: SmallVec<[Arc<Event>; 2]> = SmallVec::new();
        for d in &all {
            if d.ctx_id != self.ctx.id && !d.is_done() {
                bridges.push(super::watch::bridge(&self.ctx, d)?);
            }
        }
        let blocking = all.iter().chain(&bridges).any(|d| d.blocks());
        let i = match lanes.group {
            Some(Some(g)) if !blocking => g,
            _ => self.pick_lane(&mut lanes, &all, blocking)?,
        };
        if let Some(g) = lanes.group.as_mut() {
            g.get_or_insert(i);
        }
        // Commands without events before a gated one get a marker of their
        // own first: what waits for them must not wait for the gate.
        let sealed_first = if blocking && lanes.list[i].quiet() {
            Some(self.seal_lane(&mut lanes.list[i])?)
        } else {
            None
        };
        let mut wl: SmallVec<[cl_event; 8]> = SmallVec::new();
        let lane_id = lanes.list[i].id;
        for d in &all {
            // Another context's command is waited for through its bridge.
            if d.ctx_id == self.ctx.id && d.waited_for_on(lane_id) {
                wl.push(d.cl);
            }
        }
        wl.extend(bridges.iter().map(|b| b.cl));
        let tracer = super::trace::tracer();
        let submitted = tracer.map_or(0, |t| t.now_ns());
        let mut cl: cl_event = std::ptr::null_mut();
        if let Err(e) = enqueue(lanes.list[i].cl, &wl, &mut cl) {
            drop(lanes);
            if let Some((marker, kept)) = sealed_first {
                self.track(marker, kept);
            }
            return Err(e);
        }
        let graph_deps: SmallVec<[u64; 8]> = match tracer {
            Some(t) if t.graphing() => all.iter().map(|d| d.id).collect(),
            _ => SmallVec::new(),
        };
        // Only dependencies that are still running can make this command's
        // outcome depend on theirs.
        all.retain(|d| d.passes_failure_on());
        // The bridges stay alive until the command's outcome is known.
        all.extend(bridges);
        let ev = Event::new(
            cl,
            self.ctx.id,
            what.into(),
            self.profiling,
            all,
            self.me.clone(),
        );
        if let Some(t) = tracer {
            ev.submit_ns
                .store(submitted, std::sync::atomic::Ordering::Release);
            t.submitted(&ev, self.device, &graph_deps);
        }
        ev.set_gated(blocking);
        let lane = &mut lanes.list[i];
        // On an in-order lane the new command follows the quiet ones and
        // stands for them from now on.
        let (quiet_keep, quiet_deps) = lane.set_tail(&ev, blocking);
        ev.add_deps(quiet_deps);
        // SAFETY: flushing a live queue so the command starts even if
        // nobody waits on it.
        unsafe { (api.clFlush)(lane.cl) };
        drop(lanes);
        if let Some((marker, kept)) = sealed_first {
            self.track(marker, kept);
        }
        let keep = match (keep, quiet_keep) {
            (Some(k), Some(Held::List(mut l))) => {
                l.push(k);
                Some(Held::List(l))
            }
            (k, q) => k.or(q),
        };
        self.track(ev.clone(), keep);
        Ok(ev)
    }

    /// Tracks a command this queue enqueued (it goes into the trace when
    /// tracing) until it completes, keeping `keep` alive as long.
    fn track(&self, ev: Arc<Event>, keep: Keep) {
        let timed = (self.timed && !ev.user).then_some(self.device);
        self.add_entry(ev, keep, timed);
    }

    /// Keeps `keep` alive until `ev` (a command already tracked, or a
    /// host-side event) completes. A command tracked just before, keeping
    /// nothing, keeps `keep` itself rather than being listed twice.
    pub(crate) fn hold(&self, ev: Arc<Event>, keep: Keep) {
        {
            let mut inf = self.inflight.lock();
            if let Some(e) = inf
                .entries
                .back_mut()
                .filter(|e| Arc::ptr_eq(&e.event, &ev) && e.keep.is_none())
            {
                e.keep = keep;
                return;
            }
        }
        self.add_entry(ev, keep, None);
    }

    fn add_entry(&self, ev: Arc<Event>, keep: Keep, timed: Option<&'static Device>) {
        let mut inf = self.inflight.lock();
        inf.entries.push_back(Entry {
            event: ev,
            keep,
            timed,
        });
        self.prune(&mut inf);
    }

    /// Drops completed commands from the front and, when the list has
    /// doubled since the last scan, from anywhere; collects failures.
    fn prune(&self, inf: &mut Inflight) {
        // Looking at the oldest command every few submissions keeps the list
        // as short as the work in flight without asking the driver each time.
        inf.since_front += 1;
        if inf.since_front < FRONT_EVERY && inf.entries.len() < inf.scan_at {
            return;
        }
        inf.since_front = 0;
        self.drop_finished_front(inf);
        if inf.entries.len() >= inf.scan_at {
            self.drop_finished(inf);
            inf.scan_at = (inf.entries.len() * 2).max(SCAN_MIN);
        }
    }

    /// Drops every finished entry, wherever it is in the list.
    fn drop_finished(&self, inf: &mut Inflight) {
        let running = infer_completed(inf.entries.iter());
        let mut kept = VecDeque::with_capacity(inf.entries.len());
        for e in inf.entries.drain(..) {
            if !e.event.known_done() && on_running_lane(&e.event, &running) {
                kept.push_back(e);
                continue;
            }
            match e.event.outcome() {
                Ok(Some(r)) => self.note_outcome(&e.event, r),
                _ => kept.push_back(e),
            }
        }
        inf.entries = kept;
    }

    fn note_outcome(&self, ev: &Event, outcome: std::result::Result<(), Error>) {
        if ev.internal.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        if let Err(e) = outcome {
            if ev.claim_report() {
                self.errors.lock().push(e);
            }
        }
    }

    /// Drops the finished commands at the front of the list: the oldest,
    /// which hold most of what finished work keeps alive. Stops at the
    /// first unfinished one, so the cost stays that of the work finished.
    pub(crate) fn prune_finished(&self) {
        // What commands without events keep goes to a marker's entry, to
        // be let go with it once they finish; a marker that cannot be made
        // now is made when one is needed.
        if self
            .lanes
            .lock()
            .list
            .iter()
            .any(|l| !l.quiet_keep.is_empty())
        {
            let _ = self.seal();
        }
        self.drop_finished_front(&mut self.inflight.lock());
    }

    fn drop_finished_front(&self, inf: &mut Inflight) {
        let mut running: Option<SmallVec<[(u64, u64); 8]>> = None;
        while let Some(front) = inf.entries.front() {
            if front.event.lane_place().is_some() && !front.event.known_done() {
                if running
                    .as_ref()
                    .is_some_and(|r| on_running_lane(&front.event, r))
                {
                    break;
                }
                // Past what was learned so far: learn about the next window.
                let r = infer_completed(inf.entries.iter().take(INFER_WINDOW));
                if !front.event.known_done() && on_running_lane(&front.event, &r) {
                    break;
                }
                running = Some(r);
            }
            match front.event.outcome() {
                Ok(Some(r)) => {
                    self.note_outcome(&front.event, r);
                    inf.entries.pop_front();
                }
                _ => break,
            }
        }
    }

    /// Waits for every tracked command. Waiting on the commands' own events
    /// rather than calling clFinish keeps drivers that mishandle clFinish
    /// after a failed dependency (Intel's CPU runtime) out of trouble; every
    /// command Syrah enqueues is tracked, so nothing is missed.
    fn finish(&self) -> Result<()> {
        self.finish_plain_lanes();
        self.seal()?;
        let entries: Vec<Entry> = {
            let mut inf = self.inflight.lock();
            inf.scan_at = SCAN_MIN;
            inf.entries.drain(..).collect()
        };
        for e in &entries {
            // A failed command makes this return an error code; its outcome
            // is read just below. A command already seen to end is not
            // waited for again: each wait costs a driver call. (A user event
            // seen completed may still be on its way to OpenCL: its wait
            // asks Syrah, not the driver.)
            if !e.event.known_done() || e.event.user {
                e.event.wait_cl()?;
            }
            loop {
                match e.event.outcome()? {
                    Some(r) => {
                        self.note_outcome(&e.event, r);
                        break;
                    }
                    None => std::thread::sleep(std::time::Duration::from_micros(50)),
                }
            }
        }
        drop(entries);
        if let Some(t) = super::trace::tracer() {
            t.flush();
        }
        Ok(())
    }

    /// Finishes, with `clFinish`, each lane whose commands without events
    /// waited for nothing unfinished and whose tail is known to have
    /// completed: no dependency of anything on it can fail, so no driver
    /// mishandles the call, and it spares the marker a queue wait would
    /// otherwise enqueue and wait for (on an H100 a copy of 64 KiB to
    /// 1 MiB followed by a marker waited for took 8 µs longer than one
    /// followed by `clFinish`, `bench_driver`). The lanes stay locked
    /// meanwhile, so no command joins them unseen; commands submitted
    /// from other threads wait that long. A lane whose `clFinish` fails is
    /// left to the marker, which reports what failed.
    fn finish_plain_lanes(&self) {
        let Ok(api) = api() else { return };
        let mut released = Vec::new();
        {
            let mut lanes = self.lanes.lock();
            for lane in lanes.list.iter_mut().filter(|l| {
                l.quiet() && l.quiet_deps.is_empty() && l.tail.as_ref().is_none_or(|t| t.known_ok())
            }) {
                // SAFETY: a live queue of this Queue.
                if unsafe { (api.clFinish)(lane.cl) } == CL_SUCCESS {
                    lane.done_through = lane.seq;
                    released.append(&mut lane.quiet_keep);
                }
            }
        }
        // What the finished commands kept alive goes, outside the lock.
        drop(released);
    }

    /// Finishes without reporting (used before freeing memory).
    pub fn finish_quietly(&self) {
        let sealed = self.seal();
        if let Ok(api) = api() {
            if sealed.is_err() {
                // No marker could stand for the commands without events:
                // wait for their lanes as a whole.
                let mut kept = Vec::new();
                for lane in self.lanes.lock().list.iter_mut().filter(|l| l.quiet()) {
                    // SAFETY: a live queue of this Queue.
                    unsafe { (api.clFinish)(lane.cl) };
                    kept.append(&mut lane.quiet_keep);
                }
                drop(kept);
            }
            let events: Vec<Arc<Event>> = self
                .inflight
                .lock()
                .entries
                .iter()
                .map(|e| e.event.clone())
                .collect();
            for ev in events {
                // SAFETY: waiting on one event kept alive by `ev`.
                unsafe { (api.clWaitForEvents)(1, &ev.cl) };
            }
        }
    }

    /// Waits for everything submitted so far and delivers each asynchronous
    /// error once: to the handler if there is one, else as the result.
    pub fn wait(self: &Arc<Self>) -> Result<()> {
        self.finish()?;
        self.deliver_errors()
    }

    /// Delivers collected errors without waiting.
    pub fn deliver_errors(self: &Arc<Self>) -> Result<()> {
        let errors = std::mem::take(&mut *self.errors.lock());
        if errors.is_empty() {
            return Ok(());
        }
        if let Some((h, ud)) = self.handler {
            for e in &errors {
                let msg = std::ffi::CString::new(e.message.replace('\0', " ")).unwrap_or_default();
                // SAFETY: the user registered `h` for this queue; the queue
                // pointer and message stay valid for the call.
                unsafe {
                    h(
                        Arc::as_ptr(self),
                        e.status.code(),
                        msg.as_ptr(),
                        ud as *mut c_void,
                    )
                };
            }
            return Ok(());
        }
        let n = errors.len();
        let mut first = errors
            .into_iter()
            .next()
            .unwrap_or_else(|| Error::new(Status::Internal, "error list emptied while delivering"));
        if n > 1 {
            first.message = format!(
                "{} (and {} more asynchronous error{})",
                first.message,
                n - 1,
                if n > 2 { "s" } else { "" }
            );
        }
        Err(first)
    }

    /// Enqueues a marker that completes when `deps` have completed.
    pub fn marker(&self, deps: &[Arc<Event>], what: &str) -> Result<Arc<Event>> {
        let api = api()?;
        self.submit(deps, what, None, |q, wl, ev| {
            check(
                // SAFETY: live queue; `wl` holds valid events of this context.
                unsafe {
                    (api.clEnqueueMarkerWithWaitList)(q, wl.len() as cl_uint, ptr_or_null(wl), ev)
                },
                "clEnqueueMarkerWithWaitList",
            )
        })
    }

    /// Enqueues a barrier after `deps`, or after every command so far when
    /// there are none; later commands of the queue wait for it.
    pub fn barrier(&self, deps: &[Arc<Event>]) -> Result<Arc<Event>> {
        let api = api()?;
        let mut all: Vec<Arc<Event>> = deps.to_vec();
        if all.is_empty() {
            self.seal()?;
            let lanes = self.lanes.lock();
            all.extend(lanes.list.iter().filter_map(|l| l.tail.clone()));
        }
        let ev = self.submit(&all, "barrier", None, |q, wl, ev| {
            check(
                // SAFETY: live queue; `wl` holds valid events of this context.
                unsafe {
                    (api.clEnqueueMarkerWithWaitList)(q, wl.len() as cl_uint, ptr_or_null(wl), ev)
                },
                "clEnqueueMarkerWithWaitList",
            )
        })?;
        self.lanes.lock().barrier = Some(ev.clone());
        Ok(ev)
    }
}

pub(crate) fn next_lane_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// An in-order OpenCL queue on `device`.
fn open_lane(
    ctx: &Context,
    device: &Device,
    props: cl_command_queue_properties,
) -> Result<cl_command_queue> {
    let api = api()?;
    let mut err = CL_SUCCESS;
    let cl = match api.clCreateCommandQueueWithProperties {
        Some(f) => {
            let list: [cl_queue_properties; 3] = [CL_QUEUE_PROPERTIES, props, 0];
            // SAFETY: live context and one of its devices; the property
            // list is zero-terminated.
            unsafe { f(ctx.cl, device.id, list.as_ptr(), &mut err) }
        }
        // SAFETY: as above, through the OpenCL 1.x entry point.
        None => unsafe { (api.clCreateCommandQueue)(ctx.cl, device.id, props, &mut err) },
    };
    if cl.is_null() || err != CL_SUCCESS {
        return Err(Error::opencl(err, "clCreateCommandQueueWithProperties"));
    }
    Ok(cl)
}

impl Drop for Queue {
    fn drop(&mut self) {
        let Ok(api) = api() else { return };
        // Commands must end before the memory they hold alive is dropped.
        let entries: Vec<Entry> = self.inflight.get_mut().entries.drain(..).collect();
        for e in &entries {
            // SAFETY: waiting on one live event.
            unsafe { (api.clWaitForEvents)(1, &e.event.cl) };
            let mut spins = 0;
            while let Ok(None) = e.event.outcome() {
                spins += 1;
                if spins > 20_000 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            if let Ok(Some(r)) = e.event.outcome() {
                self.note_outcome(&e.event, r);
            }
        }
        // The OpenCL queues go before the memory their commands used: some
        // drivers look at a command's memory objects until its queue is
        // released.
        for lane in self.lanes.get_mut().list.drain(..) {
            // SAFETY: this Queue owns one reference to each lane; commands
            // enqueued without events finish before it goes.
            unsafe {
                if lane.quiet() {
                    (api.clFinish)(lane.cl);
                }
                if self.ctx.defers_queue_release() {
                    self.ctx.retired_queues.lock().push(lane.cl as usize);
                } else {
                    (api.clReleaseCommandQueue)(lane.cl);
                }
            };
        }
        drop(entries);
        if let Some(t) = super::trace::tracer() {
            t.flush();
        }
        // Errors nobody collected are not dropped silently: the handler gets
        // them, or, without one, standard error does.
        let errors = std::mem::take(self.errors.get_mut());
        for e in errors {
            match self.handler {
                Some((h, ud)) => {
                    let msg =
                        std::ffi::CString::new(e.message.replace('\0', " ")).unwrap_or_default();
                    // SAFETY: the queue is still valid during drop; the
                    // message outlives the call.
                    unsafe {
                        h(
                            self as *const Queue,
                            e.status.code(),
                            msg.as_ptr(),
                            ud as *mut c_void,
                        )
                    };
                }
                None => eprintln!(
                    "syrah: asynchronous error of a released queue that nobody waited for: {}: {}",
                    e.status.name(),
                    e.message
                ),
            }
        }
    }
}

/// Pointer to a wait list's first element, or null when it is empty.
pub fn ptr_or_null(v: &[cl_event]) -> *const cl_event {
    if v.is_empty() {
        std::ptr::null()
    } else {
        v.as_ptr()
    }
}

impl super::context::QueueWork for Queue {
    fn finish_quietly(&self) {
        Queue::finish_quietly(self)
    }

    fn prune_finished(&self) {
        Queue::prune_finished(self)
    }
}
