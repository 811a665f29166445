//! The queue's state: the queue itself, its in-order lanes, the commands in
//! flight, and the records a submitted command leaves (its event or its
//! place on a lane, and what it keeps alive).

use crate::backend::{Driver, QueueH};
use crate::core::error::Error;
use crate::runtime::context::Context;
use crate::runtime::event::Event;
use crate::runtime::platform::Device;
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::any::Any;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::Arc;

/// Called once per asynchronous error: the queue, the status, the message
/// and the user data given at creation.
pub type AsyncHandler =
    unsafe extern "C" fn(*const Queue, i32, *const std::ffi::c_char, *mut c_void);

/// What a command keeps alive until it completes.
pub enum Held {
    /// Anything (e.g. a fill's seed bytes).
    Any(Box<dyn Any + Send>),
    /// Shared objects it keeps alive (the storages of the buffers it
    /// accesses, a graph it replays; inline while few), held as opaque
    /// objects: the queue only keeps them alive.
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

/// Places on lanes of one queue that a command must follow.
pub type LanePositions = SmallVec<[LanePos; 2]>;

/// What submitting a command left: its event, or its place on a lane.
#[derive(Clone)]
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

pub(crate) struct Entry {
    pub(crate) event: Arc<Event>,
    /// Kept alive until the command completes.
    pub(crate) keep: Keep,
    /// The device whose profiling timestamps go into the trace, if any.
    pub(crate) timed: Option<&'static Device>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        if let (Some(dev), Some(t)) = (self.timed, crate::runtime::trace::tracer()) {
            if self.event.is_settled() {
                t.command_done(&self.event, dev);
            }
        }
    }
}

#[derive(Default)]
pub(crate) struct Inflight {
    pub(crate) entries: VecDeque<Entry>,
    /// Length at which the next full scan happens.
    pub(crate) scan_at: usize,
    /// Submissions since the oldest entries were last looked at.
    pub(crate) since_front: usize,
}

pub(crate) struct Lane {
    /// Process-unique id of the lane.
    pub(crate) id: u64,
    /// The back end's in-order queue.
    pub(crate) handle: QueueH,
    pub(crate) tail: Option<Arc<Event>>,
    /// The tail waits on something that may not finish soon.
    pub(crate) gated: bool,
    /// Commands enqueued on the lane so far; the tail is command
    /// `tail_seq`, and those after it went without events (see
    /// `submit_quiet`): a marker stands for them when one is needed.
    pub(crate) seq: u64,
    pub(crate) tail_seq: u64,
    /// For the commands without events since the tail: what they keep
    /// alive and the unfinished commands they waited for (whose failure
    /// becomes theirs); the next tracked command takes these over.
    pub(crate) quiet_keep: Vec<Held>,
    pub(crate) quiet_deps: SmallVec<[Arc<Event>; 4]>,
    /// Commands up to this place are known to have finished: a queue wait
    /// finished the lane as a whole (see `finish_plain_lanes`).
    pub(crate) done_through: u64,
    /// The last few tracked commands of the lane that wait for nothing
    /// indefinite, with their places, oldest first: each stands for the
    /// commands before it. A lane is sealed before a gated command joins
    /// it, so the first of these at or after a command's place never waits
    /// for a gate the command itself does not wait for.
    pub(crate) points: VecDeque<(u64, Arc<Event>)>,
}

/// Points a lane remembers.
pub(crate) const POINTS: usize = 16;

/// Commands without events after which a lane gets a marker anyway, so
/// that what they keep alive is let go soon after they finish.
pub(crate) const QUIET_RUN: u64 = 64;

pub(crate) struct Lanes {
    pub(crate) list: Vec<Lane>,
    pub(crate) next: usize,
    /// The last barrier: later commands wait for it.
    pub(crate) barrier: Option<Arc<Event>>,
    /// On an out-of-order queue, the lanes (by id) already ordered after
    /// the barrier: the first command of each lane waits for it, and those
    /// after it on the lane follow that command.
    pub(crate) barrier_on: SmallVec<[u64; 4]>,
}

pub(crate) const GROUP_NONE: usize = 0;
pub(crate) const GROUP_OPEN: usize = 1;
pub(crate) const GROUP_LANE: usize = 2;

impl Queue {
    /// The command group being submitted, if any: `Some(None)` before its
    /// first command, then `Some(Some(lane index))`. (The caller holds the
    /// lanes' lock.)
    pub(crate) fn group(&self) -> Option<Option<usize>> {
        match self.group.load(std::sync::atomic::Ordering::Acquire) {
            GROUP_NONE => None,
            GROUP_OPEN => Some(None),
            g => Some(Some(g - GROUP_LANE)),
        }
    }

    /// Puts the command group being submitted, which [`Queue::group`]
    /// found without a lane, on lane `i`. (The caller holds the lanes'
    /// lock; the group may have closed meanwhile, and stays closed.)
    pub(crate) fn group_on(&self, i: usize) {
        let _ = self.group.compare_exchange(
            GROUP_OPEN,
            GROUP_LANE + i,
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
        );
    }
}

/// Keeps the commands of one command group (its transfers and itself) on
/// one lane until dropped: some drivers run a command that waits for
/// another queue's work slower (Intel's CPU runtime ran a kernel behind
/// copies on other lanes at half speed).
pub struct GroupLane<'a>(pub(crate) Option<&'a Queue>);

/// Lanes an out-of-order queue spreads independent work over.
pub(crate) const LANES: usize = 4;

/// Lanes opened beyond those to keep gated work apart.
pub(crate) const GATED_LANES: usize = 12;

pub struct Queue {
    pub ctx: Arc<Context>,
    pub device: &'static Device,
    pub(crate) lanes: Mutex<Lanes>,
    /// Lanes record timestamps.
    pub(crate) timed_lanes: bool,
    /// The runtime's own queue for a buffer's copies: its lanes may be
    /// idle ones the back end kept.
    pub(crate) transfer: bool,
    pub in_order: bool,
    pub profiling: bool,
    /// Lanes for independent work.
    pub(crate) width: usize,
    /// Lanes record timestamps for the trace.
    pub(crate) timed: bool,
    pub(crate) handler: Option<(AsyncHandler, usize)>,
    pub(crate) me: std::sync::Weak<Queue>,
    pub(crate) inflight: Mutex<Inflight>,
    pub(crate) errors: Mutex<Vec<Error>>,
    /// While a command group is being submitted: [`GROUP_OPEN`], then
    /// [`GROUP_LANE`] plus the index of the lane its first command went
    /// to, which the rest follow; [`GROUP_NONE`] otherwise. Read and moved
    /// on under the lanes' lock; opened and closed without it (a plain
    /// store each, where a launch through a buffer would otherwise lock
    /// the lanes twice more).
    pub(crate) group: std::sync::atomic::AtomicUsize,
    /// Host callbacks of this queue's commands (the release of a copy's
    /// host memory) not yet run: a queue wait waits for them too.
    pub(crate) callbacks: (Mutex<usize>, parking_lot::Condvar),
    /// What a copy from ordinary host memory waits for on the host, on a
    /// device that reads such memory early (see `hazards`).
    pub(crate) host_hazards: Mutex<Vec<Arc<Event>>>,
    /// The id of the first lane (made with the queue, never removed).
    pub(crate) first_lane: u64,
    /// Commands without events since the lanes' newest markers were last
    /// asked about, and whether the device had finished every one then
    /// (see `Queue::first_lane_takes`): read without the lanes' lock.
    pub(crate) since_asked: std::sync::atomic::AtomicU32,
    pub(crate) kept_up: std::sync::atomic::AtomicBool,
}

impl Queue {
    /// The back end of the queue's device.
    pub(crate) fn driver(&self) -> &'static dyn Driver {
        self.ctx.platform.driver
    }
}

// SAFETY: a back end's queues are thread-safe (as OpenCL's are); the
// handler's user data is only passed back to the user's callback, which the
// header documents may run on any thread.
unsafe impl Send for Queue {}

// SAFETY: as above; mutable state is behind mutexes.
unsafe impl Sync for Queue {}

pub(crate) const SCAN_MIN: usize = 64;

/// Tracked commands between two looks at the oldest ones: each look asks
/// the driver about a few commands of every lane at the front (1.3–4 µs
/// per question on NVIDIA's OpenCL), so looking less often asks less per
/// command, and finished commands wait that much longer to be let go.
pub(crate) const FRONT_EVERY: usize = 64;

/// The newest tracked commands a periodic look leaves out: most have not
/// finished, and each would cost questions at every look until it has.
pub(crate) const RECENT: usize = 16;

/// Entries at the front of the list whose lanes are looked at together.
pub(crate) const INFER_WINDOW: usize = 128;
