//! Lanes: opening the in-order OpenCL queues a queue spreads its commands
//! over, what a lane knows of the commands on it, and whether the device
//! keeps up with them.

use super::state::{GroupLane, Held, Keep, Lane, LanePos, Lanes, Queue, LANES, POINTS};
use crate::backend::QueueH;
use crate::core::error::Result;
use crate::runtime::context::Context;
use crate::runtime::event::Event;
use crate::runtime::platform::Device;
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

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

impl Lane {
    pub(crate) fn new(handle: QueueH) -> Lane {
        Lane {
            id: next_lane_id(),
            handle,
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
    pub(crate) fn quiet_run(&self) -> u64 {
        self.seq
            .saturating_sub(self.tail_seq.max(self.done_through))
    }

    /// Whether there are any.
    pub(crate) fn quiet(&self) -> bool {
        self.quiet_run() > 0
    }

    /// Whether a command put on the lane waits behind nothing indefinite.
    pub(crate) fn usable(&self) -> bool {
        !self.gated || self.tail.as_ref().is_none_or(|t| t.is_done())
    }

    /// The first tracked command at or after place `seq` that waits for
    /// nothing indefinite (see `points`); None when there is none yet.
    pub(crate) fn covering(&self, seq: u64) -> Option<(u64, Arc<Event>)> {
        self.points
            .iter()
            .find(|(at, _)| *at >= seq)
            .map(|(at, ev)| (*at, ev.clone()))
    }

    /// Makes `ev`, just enqueued, the tail; hands back what the commands
    /// without events before it kept and waited for.
    pub(crate) fn set_tail(
        &mut self,
        ev: &Arc<Event>,
        gated: bool,
    ) -> (Keep, SmallVec<[Arc<Event>; 4]>) {
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

/// Commands without events between two looks at whether the device keeps
/// up (see [`Queue::first_lane_takes`]).
const LOOK_EVERY: u32 = 64;

impl Queue {
    /// Whether a command without an event that follows the places `last`
    /// (lane id, place) goes on the first lane: on a device that spreads
    /// commands only while busy (`Device::spread_always` off), while the
    /// device kept up when last looked at, and when every place on another
    /// lane is known to have finished. Those places are then taken out of
    /// `last`. Spreading work over lanes buys no overlap while the device
    /// finishes each command before the next comes, and some drivers
    /// charge for every change of queue (NVIDIA's OpenCL). The lanes' lock
    /// is taken only to look (every [`LOOK_EVERY`] calls) and where a place
    /// is on another lane.
    pub(crate) fn first_lane_takes(&self, last: &mut SmallVec<[(u64, u64); 4]>) -> bool {
        if self.in_order || self.device.spread_always {
            return false;
        }
        if self.since_asked.fetch_add(1, Ordering::Relaxed) + 1 >= LOOK_EVERY {
            self.since_asked.store(0, Ordering::Relaxed);
            let all = keeping_up(&mut self.lanes.lock());
            self.kept_up.store(all, Ordering::Relaxed);
        }
        if !self.kept_up.load(Ordering::Relaxed) {
            return false;
        }
        let first = self.first_lane;
        if last.iter().all(|p| p.0 == first) {
            return true;
        }
        let lanes = self.lanes.lock();
        let done = |&(lane, seq): &(u64, u64)| {
            lanes
                .list
                .iter()
                .any(|l| l.id == lane && seq <= l.done_through)
        };
        if !last.iter().all(|p| p.0 == first || done(p)) {
            return false;
        }
        drop(lanes);
        last.retain(|p| p.0 == first);
        true
    }
}

/// Whether every lane's newest marker has finished: each lane with
/// commands after its known end has that marker asked about (one driver
/// question per such lane), and a marker found finished without error
/// marks its lane finished up to it.
fn keeping_up(lanes: &mut Lanes) -> bool {
    let mut all = true;
    for l in lanes.list.iter_mut() {
        if let Some((seq, ev)) = l.points.back() {
            if *seq > l.done_through {
                if ev.completed_ok() {
                    l.done_through = *seq;
                } else {
                    all = false;
                }
            }
        }
    }
    all
}

impl Drop for GroupLane<'_> {
    fn drop(&mut self) {
        if let Some(q) = self.0 {
            q.group.store(
                super::state::GROUP_NONE,
                std::sync::atomic::Ordering::Release,
            );
        }
    }
}

/// Lanes for independent work on `device`: four, or one per compute unit
/// up to sixteen on a CPU, whose driver runs each queue's commands one at
/// a time on its cores.
pub(crate) fn lanes_for(device: &Device) -> usize {
    if device.kind == crate::core::selector::DeviceKind::Cpu {
        (device.compute_units as usize).clamp(LANES, 16)
    } else {
        LANES
    }
}

pub(crate) fn next_lane_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// An in-order queue of the back end on `device`, recording timestamps
/// when `timed`; for a queue that moves buffers' data (`transfer`, never
/// timed), the back end may give one it kept.
pub(crate) fn open_lane(
    ctx: &Context,
    device: &Device,
    timed: bool,
    transfer: bool,
) -> Result<QueueH> {
    let driver = ctx.platform.driver;
    if transfer {
        driver.create_transfer_queue(ctx.handle(), device.handle())
    } else {
        driver.create_queue(ctx.handle(), device.handle(), timed)
    }
}
