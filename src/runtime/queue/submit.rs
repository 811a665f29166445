//! Submitting: creating a queue, choosing a lane for a command, enqueueing
//! it with or without an event, and the events that stand for commands
//! enqueued without one.

use super::lanes::{lanes_for, open_lane};
use super::state::{
    AsyncHandler, GroupLane, Held, Inflight, Keep, Lane, LanePos, Lanes, Queue, Submitted,
    GATED_LANES, GROUP_NONE, GROUP_OPEN, QUIET_RUN, SCAN_MIN,
};
use crate::backend::{EventH, QueueH};
use crate::core::error::{Error, Result, Status};
use crate::runtime::context::Context;
use crate::runtime::event::Event;
use crate::runtime::platform::Device;
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};

impl Queue {
    pub fn create(
        ctx: Arc<Context>,
        device: &'static Device,
        in_order: bool,
        profiling: bool,
        handler: Option<(AsyncHandler, usize)>,
    ) -> Result<Arc<Queue>> {
        Self::make(ctx, device, in_order, profiling, handler, false)
    }

    /// An out-of-order queue for the runtime's own copies of a buffer's
    /// data on `device`: its lanes may be idle ones the back end kept.
    pub(crate) fn create_transfer(
        ctx: Arc<Context>,
        device: &'static Device,
    ) -> Result<Arc<Queue>> {
        Self::make(ctx, device, false, false, None, true)
    }

    fn make(
        ctx: Arc<Context>,
        device: &'static Device,
        in_order: bool,
        profiling: bool,
        handler: Option<(AsyncHandler, usize)>,
        transfer: bool,
    ) -> Result<Arc<Queue>> {
        ctx.require_device(device)?;
        if profiling && !device.profiling {
            return Err(Error::new(
                Status::FeatureNotSupported,
                format!("device {} does not support profiling", device.label()),
            ));
        }
        let timed = crate::runtime::trace::timing() && device.profiling;
        let timed_lanes = profiling || timed;
        let transfer = transfer && !timed_lanes;
        let first = Lane::new(open_lane(&ctx, device, timed_lanes, transfer)?);
        let first_lane = first.id;
        let q = Arc::new_cyclic(|me| Queue {
            ctx: ctx.clone(),
            device,
            lanes: Mutex::new(Lanes {
                list: vec![first],
                next: 0,
                barrier: None,
                barrier_on: SmallVec::new(),
            }),
            timed_lanes,
            transfer,
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
            group: std::sync::atomic::AtomicUsize::new(GROUP_NONE),
            callbacks: (Mutex::new(0), parking_lot::Condvar::new()),
            host_hazards: Mutex::new(Vec::new()),
            first_lane,
            since_asked: Default::default(),
            kept_up: Default::default(),
        });
        let mut qs = ctx.queues.lock();
        qs.retain(|w| w.strong_count() > 0);
        qs.push(Arc::downgrade(&q) as Weak<dyn crate::runtime::context::QueueWork>);
        Ok(q)
    }

    /// A strong reference to this queue, while one exists.
    pub fn self_arc(&self) -> Option<Arc<Queue>> {
        self.me.upgrade()
    }

    /// OpenCL wait list for `deps`. Events of another context cannot be
    /// waited on by OpenCL; those are waited for on the host here.
    pub fn wait_list(&self, deps: &[Arc<Event>]) -> Result<Vec<EventH>> {
        let mut out = Vec::with_capacity(deps.len());
        for d in deps {
            if d.ctx_id == self.ctx.id {
                out.push(d.handle);
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
    pub(crate) fn seal(&self) -> Result<()> {
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

    /// Makes the commands enqueued on `lane` start: a flush, where the
    /// device needs one (see `Device::flush_each`).
    pub(crate) fn start(&self, lane: QueueH) {
        if self.device.flush_each {
            self.driver().flush(lane);
        }
    }

    /// [`Queue::seal`] for lane `id` alone (nothing if it has no commands
    /// without events): where one lane's commands need an event, the
    /// other lanes need no marker.
    fn seal_one(&self, id: u64) -> Result<()> {
        let made = {
            let mut lanes = self.lanes.lock();
            match lanes.list.iter_mut().find(|l| l.id == id && l.quiet()) {
                Some(lane) => Some(self.seal_lane(lane)?),
                None => None,
            }
        };
        if let Some((ev, keep)) = made {
            self.track(ev, keep);
        }
        Ok(())
    }

    /// Enqueues a marker standing for the commands without events of
    /// `lane`; returns it, to be tracked, with what they keep.
    pub(crate) fn seal_lane(&self, lane: &mut Lane) -> Result<(Arc<Event>, Keep)> {
        let handle = self.driver().enqueue_marker(lane.handle, &[])?;
        let ev = Event::new(
            handle,
            self.driver(),
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
        self.seal_one(lane)?;
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
    /// waits behind a gate. `what` names the command; it is made only
    /// where the command is tracked.
    pub(crate) fn submit_quiet<W: Into<Arc<str>>>(
        &self,
        deps: &[Arc<Event>],
        on_lanes: &[LanePos],
        what: impl FnOnce() -> W,
        keep: Keep,
        want_event: bool,
        enqueue: impl FnOnce(QueueH, &[EventH], Option<&mut EventH>) -> Result<()>,
    ) -> Result<Submitted> {
        // An in-order queue's one lane orders the command after commands of
        // `on_lanes` anyway. On an out-of-order queue it follows those of
        // the first lane named there; the others get events to wait on.
        // Only the last place named on each lane matters: the lane's
        // order covers the places before it.
        let mut last: SmallVec<[(u64, u64); 4]> = SmallVec::new();
        if !self.in_order {
            for p in on_lanes {
                match last.iter_mut().find(|(l, _)| *l == p.lane) {
                    Some(at) => at.1 = at.1.max(p.seq),
                    None => last.push((p.lane, p.seq)),
                }
            }
        }
        // A command that must be tracked goes where `submit` puts it: the
        // look at whether the device keeps up (driver questions) is only
        // for commands that may go without an event.
        let quiet = !want_event && !self.timed && crate::runtime::trace::tracer().is_none();
        let to_first = quiet && self.first_lane_takes(&mut last);
        let mut others: SmallVec<[Arc<Event>; 8]> = SmallVec::new();
        for &(lane, seq) in last.iter().skip(1) {
            others.extend(self.event_at(lane, seq)?.0);
        }
        let follow = last.first().map(|&(lane, _)| lane);
        if quiet {
            let mut lanes = self.lanes.lock();
            let barrier = lanes.barrier_dep(self.in_order);
            let all: SmallVec<[Arc<Event>; 8]> =
                if deps.is_empty() && others.is_empty() && barrier.is_none() {
                    SmallVec::new()
                } else {
                    deps.iter()
                        .chain(&others)
                        .chain(&barrier)
                        .cloned()
                        .collect()
                };
            let simple = all.iter().all(|d| d.ctx_id == self.ctx.id && !d.blocks());
            let at = |lanes: &Lanes, id: u64| lanes.list.iter().position(|l| l.id == id);
            let group = self.group();
            let chosen = match (simple, self.in_order, group, follow) {
                (false, ..) => None,
                (true, true, ..) => Some(0),
                (true, false, Some(Some(g)), None) => Some(g),
                (true, false, Some(Some(g)), Some(f)) => (lanes.list[g].id == f).then_some(g),
                // Not behind a gated command: the tracked path waits for
                // the commands followed through the marker before it.
                (true, false, _, Some(f)) => at(&lanes, f).filter(|&i| lanes.list[i].usable()),
                (true, false, _, None) if to_first && lanes.list[0].usable() => Some(0),
                (true, false, _, None) => Some(self.pick_lane(&mut lanes, &all, false)?),
            };
            if let Some(i) = chosen {
                if group == Some(None) {
                    self.group_on(i);
                }
                let (id, handle) = (lanes.list[i].id, lanes.list[i].handle);
                let mut all = all;
                if barrier.is_none() {
                    all.extend(lanes.barrier_for(id));
                }
                let wl: SmallVec<[EventH; 8]> = all
                    .iter()
                    .filter(|d| d.waited_for_on(id))
                    .map(|d| d.handle)
                    .collect();
                enqueue(handle, &wl, None)?;
                lanes.barrier_passed(id, self.in_order);
                let lane = &mut lanes.list[i];
                lane.seq += 1;
                if let Some(k) = keep {
                    keep_once(&mut lane.quiet_keep, k);
                }
                for d in all.into_iter().filter(|d| d.passes_failure_on()) {
                    if !lane.quiet_deps.iter().any(|q| Arc::ptr_eq(q, &d)) {
                        lane.quiet_deps.push(d);
                    }
                }
                self.start(lane.handle);
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
                // Noted here for a command without an event; one with an
                // event is noted in `submit`.
                self.note_host_hazards(deps, None);
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
        if !others.is_empty() {
            all.extend(others);
        }
        if let Some(&(lane, seq)) = last.first() {
            if let Some(e) = self.event_at(lane, seq)?.0 {
                all.push(e);
            }
        }
        self.submit_owned(all, what(), keep, |q, wl, ev| enqueue(q, wl, Some(ev)))
            .map(Submitted::Event)
    }

    /// A back-end queue of this queue's device for blocking helper calls.
    pub fn sync_queue(&self) -> QueueH {
        self.lanes.lock().list[0].handle
    }

    /// Starts a command group: its commands share one lane until the
    /// returned guard is dropped. An in-order queue has one lane anyway.
    pub fn group_lane(&self) -> GroupLane<'_> {
        if self.in_order {
            return GroupLane(None);
        }
        self.group
            .store(GROUP_OPEN, std::sync::atomic::Ordering::Release);
        GroupLane(Some(self))
    }

    /// Picks the lane for a command with dependencies `deps`.
    pub(crate) fn pick_lane(
        &self,
        lanes: &mut Lanes,
        deps: &[Arc<Event>],
        blocking: bool,
    ) -> Result<usize> {
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
        // learned as finished commands are let go.) Idle lanes are looked
        // for in turn too: always taking the first would put every command
        // that finds it idle there, and commands that follow those on
        // their buffers would stay there, however many lanes there are.
        let start = lanes.next;
        if let Some(i) = (0..n).map(|k| (start + k) % n).find(|&i| {
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
            let cl = open_lane(&self.ctx, self.device, self.timed_lanes, self.transfer)?;
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
        enqueue: impl FnOnce(QueueH, &[EventH], &mut EventH) -> Result<()>,
    ) -> Result<Arc<Event>> {
        self.submit_owned(deps.iter().cloned().collect(), what, keep, enqueue)
    }

    /// [`Queue::submit`], given its dependencies as a list of its own.
    pub(crate) fn submit_owned(
        &self,
        mut all: SmallVec<[Arc<Event>; 8]>,
        what: impl Into<Arc<str>>,
        keep: Keep,
        enqueue: impl FnOnce(QueueH, &[EventH], &mut EventH) -> Result<()>,
    ) -> Result<Arc<Event>> {
        self.note_host_hazards(&all, None);
        let mut lanes = self.lanes.lock();
        let barrier = lanes.barrier_dep(self.in_order);
        let by_lane = barrier.is_none();
        all.extend(barrier);
        // Commands of other contexts are waited for through user events of
        // this one, completed from their callbacks: never on this thread.
        let mut bridges: SmallVec<[Arc<Event>; 2]> = SmallVec::new();
        for d in &all {
            if d.ctx_id != self.ctx.id && !d.is_done() {
                bridges.push(crate::runtime::watch::bridge(&self.ctx, d)?);
            }
        }
        let blocking = all.iter().chain(&bridges).any(|d| d.blocks());
        let group = self.group();
        let i = match group {
            Some(Some(g)) if !blocking => g,
            _ => self.pick_lane(&mut lanes, &all, blocking)?,
        };
        if group == Some(None) {
            self.group_on(i);
        }
        // Commands without events before a gated one get a marker of their
        // own first: what waits for them must not wait for the gate.
        let sealed_first = if blocking && lanes.list[i].quiet() {
            Some(self.seal_lane(&mut lanes.list[i])?)
        } else {
            None
        };
        let mut wl: SmallVec<[EventH; 8]> = SmallVec::new();
        let lane_id = lanes.list[i].id;
        if by_lane {
            all.extend(lanes.barrier_for(lane_id));
        }
        for d in &all {
            // Another context's command is waited for through its bridge.
            if d.ctx_id == self.ctx.id && d.waited_for_on(lane_id) {
                wl.push(d.handle);
            }
        }
        if !bridges.is_empty() {
            wl.extend(bridges.iter().map(|b| b.handle));
        }
        let tracer = crate::runtime::trace::tracer();
        let submitted = tracer.map_or(0, |t| t.now_ns());
        let mut handle = EventH::NONE;
        let enqueued = enqueue(lanes.list[i].handle, &wl, &mut handle).and_then(|()| {
            if handle.is_none() {
                // A command that reports success must have given its event.
                Err(Error::new(
                    Status::Internal,
                    "a command was enqueued without giving its event",
                ))
            } else {
                Ok(())
            }
        });
        if let Err(e) = enqueued {
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
        if !bridges.is_empty() {
            all.extend(bridges);
        }
        let ev = Event::new(
            handle,
            self.driver(),
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
        lanes.barrier_passed(lane_id, self.in_order);
        let lane = &mut lanes.list[i];
        // On an in-order lane the new command follows the quiet ones and
        // stands for them from now on.
        let (quiet_keep, quiet_deps) = lane.set_tail(&ev, blocking);
        ev.add_deps(quiet_deps);
        // The command starts even if nobody waits on it.
        self.start(lane.handle);
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
}

/// Adds what a command without an event keeps to what its lane keeps,
/// unless the command before kept the very same shared objects: one
/// reference keeps them alive until the marker that stands for both (a
/// chain of commands on one buffer, or of one graph's submissions, keeps
/// one entry, not one per command).
fn keep_once(list: &mut Vec<Held>, k: Held) {
    if let (Some(Held::Storages(last)), Held::Storages(new)) = (list.last(), &k) {
        let same = last.len() == new.len()
            && last
                .iter()
                .zip(new.iter())
                .all(|(a, b)| std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b)));
        if same {
            return;
        }
    }
    // Kept in chunks that stay small allocations: growing one list to a
    // run's length would ask the C allocator for a large chunk every few
    // commands, which first merges every small chunk freed since.
    if list.len() >= KEEP_CHUNK {
        let full = std::mem::replace(list, Vec::with_capacity(KEEP_CHUNK));
        list.push(Held::List(full));
    } else if list.capacity() == 0 {
        list.reserve_exact(KEEP_CHUNK);
    }
    list.push(k);
}

/// Entries of one chunk of what a lane's commands without events keep.
const KEEP_CHUNK: usize = 16;
const _: () = assert!(std::mem::size_of::<Held>() * KEEP_CHUNK < 1024);

#[cfg(test)]
mod tests {
    use super::*;
    use std::any::Any;

    fn storages(of: &[&Arc<u32>]) -> Held {
        Held::Storages(
            of.iter()
                .map(|a| (*a).clone() as Arc<dyn Any + Send + Sync>)
                .collect(),
        )
    }

    #[test]
    fn a_chain_on_the_same_storages_keeps_one_entry() {
        let (a, b) = (Arc::new(1u32), Arc::new(2u32));
        let mut list = Vec::new();
        keep_once(&mut list, storages(&[&a]));
        keep_once(&mut list, storages(&[&a]));
        assert_eq!(list.len(), 1);
        // One reference for the list, one here.
        assert_eq!(Arc::strong_count(&a), 2);
        keep_once(&mut list, storages(&[&a, &b]));
        keep_once(&mut list, storages(&[&b, &a]));
        keep_once(&mut list, storages(&[&b]));
        keep_once(&mut list, Held::Any(Box::new(7u8)));
        keep_once(&mut list, storages(&[&b]));
        assert_eq!(list.len(), 6);
        assert_eq!(Arc::strong_count(&a), 4);
        assert_eq!(Arc::strong_count(&b), 5);
        drop(list);
        assert_eq!((Arc::strong_count(&a), Arc::strong_count(&b)), (1, 1));
    }

    /// Counts the storages kept, chunks included.
    fn kept(list: &[Held]) -> usize {
        list.iter()
            .map(|h| match h {
                Held::List(l) => kept(l),
                Held::Storages(s) => s.len(),
                Held::Any(_) => 0,
            })
            .sum()
    }

    #[test]
    fn a_long_run_is_kept_in_small_chunks() {
        let all: Vec<Arc<u32>> = (0..100).map(Arc::new).collect();
        let mut list = Vec::new();
        for a in &all {
            keep_once(&mut list, storages(&[a]));
            assert!(list.len() <= KEEP_CHUNK && list.capacity() <= KEEP_CHUNK);
        }
        assert_eq!(kept(&list), 100);
        assert!(all.iter().all(|a| Arc::strong_count(a) == 2));
        drop(list);
        assert!(all.iter().all(|a| Arc::strong_count(a) == 1));
    }
}
