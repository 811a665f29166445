//! Tracking the commands in flight: recording them, learning which have
//! finished (asking the driver as little as possible) and dropping what
//! they held.

use super::state::{Entry, Inflight, Keep, Queue, FRONT_EVERY, INFER_WINDOW, RECENT, SCAN_MIN};
use crate::core::error::Error;
use crate::runtime::event::Event;
use crate::runtime::platform::Device;
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::sync::Arc;

/// True when `ev` is on a lane that `running` (from [`infer_completed`])
/// says had not completed commands from `ev`'s place on.
pub(crate) fn on_running_lane(ev: &Event, running: &[(u64, u64)]) -> bool {
    ev.lane_place()
        .is_some_and(|(lane, seq)| running.iter().any(|&(l, from)| l == lane && seq >= from))
}

/// Asks the driver about as few commands as it can to learn which of
/// `entries` completed. A lane finishes its commands in order, so per lane
/// the latest command that completed vouches for those before it, and the
/// earliest that had not tells that none after it had: one question when
/// a lane's last command listed completed, about 3 + 2 log2(r) for r
/// commands still running, instead of one per command (drivers charge
/// microseconds per question; see [`crate::core::order::done_prefix`]).
/// Commands not on a lane, and those already known to have finished, are
/// left out.
/// Returns, per lane, the place from which commands had not completed
/// (`u64::MAX` when all had).
///
/// A command vouched for this way counts as completed without error; a
/// failure it inherits from a command it waited for is still found (its
/// outcome looks at those), but one of its own while a later command of
/// the lane completed would not be: OpenCL leaves the state of a queue
/// after a failed command to the driver, as for launches without events.
pub(crate) fn infer_completed<'a>(
    entries: impl Iterator<Item = &'a Entry>,
) -> SmallVec<[(u64, u64); 8]> {
    // On the stack for the front window: a list this long on the heap
    // would be a large chunk of the C allocator, costly to ask for.
    let on: SmallVec<[(u64, u64, &Arc<Event>); INFER_WINDOW]> = entries
        .map(|e| &e.event)
        .filter(|ev| !ev.known_done())
        .filter_map(|ev| ev.lane_place().map(|(lane, seq)| (lane, seq, ev)))
        .collect();
    let mut from = SmallVec::new();
    crate::core::order::for_each_lane(
        &on,
        |x| x.0,
        |x| x.1,
        |lane, same| {
            let (done, not) =
                crate::core::order::done_prefix(same.len(), |i| same[i].2.completed_ok());
            for (_, _, ev) in &same[..done] {
                ev.mark_completed();
            }
            from.push((lane, not.map_or(u64::MAX, |i| same[i].1)));
        },
    );
    from
}

impl Queue {
    /// Tracks a command this queue enqueued (it goes into the trace when
    /// tracing) until it completes, keeping `keep` alive as long.
    pub(crate) fn track(&self, ev: Arc<Event>, keep: Keep) {
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

    pub(crate) fn add_entry(&self, ev: Arc<Event>, keep: Keep, timed: Option<&'static Device>) {
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
    pub(crate) fn prune(&self, inf: &mut Inflight) {
        // Looking at the oldest command every few submissions keeps the list
        // as short as the work in flight without asking the driver each time.
        inf.since_front += 1;
        if inf.since_front < FRONT_EVERY && inf.entries.len() < inf.scan_at {
            return;
        }
        inf.since_front = 0;
        self.drop_finished_front(inf, RECENT);
        if inf.entries.len() >= inf.scan_at {
            self.drop_finished(inf);
            inf.scan_at = (inf.entries.len() * 2).max(SCAN_MIN);
        }
    }

    /// Drops every finished entry, wherever it is in the list.
    pub(crate) fn drop_finished(&self, inf: &mut Inflight) {
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

    pub(crate) fn note_outcome(&self, ev: &Event, outcome: std::result::Result<(), Error>) {
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
        self.drop_finished_front(&mut self.inflight.lock(), 0);
    }

    /// Drops the finished commands at the front of the list, asking the
    /// driver about none of the newest `spare` (which have likely not
    /// finished yet: asked about, each would cost a question per look).
    pub(crate) fn drop_finished_front(&self, inf: &mut Inflight, spare: usize) {
        // Per lane asked about, the place from which its commands had not
        // completed. Only the front's lane is asked about: while the
        // oldest command runs, one question settles it, whatever the
        // other lanes hold.
        let mut running: SmallVec<[(u64, u64); 8]> = SmallVec::new();
        while let Some(front) = inf.entries.front() {
            let unknown = front
                .event
                .lane_place()
                .filter(|_| !front.event.known_done());
            if let Some((lane, _)) = unknown {
                if on_running_lane(&front.event, &running) {
                    break;
                }
                let window = INFER_WINDOW.min(inf.entries.len().saturating_sub(spare));
                if window == 0 {
                    break;
                }
                // Past what was learned about its lane, or nothing learned
                // yet: learn about its commands in the next window.
                running.retain(|&mut (l, _)| l != lane);
                running.extend(infer_completed(
                    inf.entries
                        .iter()
                        .take(window)
                        .filter(|e| e.event.lane_place().is_some_and(|(l, _)| l == lane)),
                ));
                if !front.event.known_done() && on_running_lane(&front.event, &running) {
                    break;
                }
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
}
