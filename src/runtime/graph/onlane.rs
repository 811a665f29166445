//! Submitting a graph as one command of the queue's own: a graph whose
//! nodes are all ones the graph enqueues itself (kernels, USM copies and
//! fills), on one lane of its plan (a chain), goes onto a lane of the
//! queue one node after another, the first waiting for what the
//! submission waits for and the last giving the event if one is wanted;
//! a graph recorded by a back end whose recordings run on any of its
//! queues goes there as its recording. Either way the queue's order, its
//! accounting of commands without events and the buffers' trackers treat
//! the whole graph as one launch, and a submission makes no event of its
//! own.

use super::exec::{ExecGraph, Last};
use crate::backend::{EventH, QueueH};
use crate::core::error::{Error, Result, Status};
use crate::core::graph::NodeKind;
use crate::runtime::buffer::Deps;
use crate::runtime::event::Event;
use crate::runtime::queue::{LanePositions, Queue, Submitted};
use std::sync::Arc;

impl ExecGraph {
    /// Submits a one-lane graph as one command of `q` (see the module).
    pub(crate) fn submit_on_lane(
        self: &Arc<Self>,
        q: &Arc<Queue>,
        deps: &[Arc<Event>],
        want_event: bool,
    ) -> Result<Submitted> {
        let g = &self.graph;
        let mut turn = self.turn.lock();
        self.submit_as_command(&mut turn, q, deps, want_event, false, |lane, wl, mut ev| {
            let kernels = self.kernels.lock();
            let locals = self.locals.lock();
            // The first kernel waits for what the submission waits for; the
            // last (the graph's one end) gives the event.
            let mut w = wl;
            for i in 0..g.nodes.len() {
                if self.kinds[i] != NodeKind::Direct {
                    continue;
                }
                let e = if self.single_end == Some(i) {
                    ev.take()
                } else {
                    None
                };
                let k = kernels[i].as_deref().map(|k| (k, locals[i]));
                super::direct::enqueue(g, q, i, lane, w, e, k)?;
                w = &[];
            }
            Ok(())
        })
    }

    /// Whether the graph's recording may go onto a lane of any queue of
    /// its device, again while pending.
    pub(crate) fn recording_goes_anywhere(&self) -> bool {
        self.graph.device.command_buffer_simultaneous
            && self.graph.ctx.platform.driver.recordings_run_anywhere()
    }

    /// Submits the graph's recording as one command of `q` (see the
    /// module); `None` (nothing submitted) when no copy of the recording
    /// is current, for the caller to replay the nodes instead.
    pub(crate) fn submit_recorded_on_lane(
        self: &Arc<Self>,
        q: &Arc<Queue>,
        deps: &[Arc<Event>],
        want_event: bool,
    ) -> Result<Option<Submitted>> {
        // Arguments change only under `turn`, and with them the copies.
        let mut turn = self.turn.lock();
        if !self.pool.lock().gives_copy() {
            return Ok(None);
        }
        let done =
            self.submit_as_command(&mut turn, q, deps, want_event, true, |lane, wl, ev| {
                if self.enqueue_recording(lane, wl, ev)? {
                    return Ok(());
                }
                Err(Error::new(
                    Status::Internal,
                    format!("{}: the back end refused its recording", self.what),
                ))
            })?;
        self.pool.lock().ran_last(done.clone());
        Ok(Some(done))
    }

    /// Submits the graph as one command of `q` through the queue's path
    /// for commands without events: after `deps` and the graph's previous
    /// submission (`turn`, held), its managed buffers prepared, `enqueue`
    /// putting it onto the lane given. `recorded` tells the back-end
    /// chooser which of the two ran.
    fn submit_as_command(
        self: &Arc<Self>,
        turn: &mut Option<Last>,
        q: &Arc<Queue>,
        deps: &[Arc<Event>],
        want_event: bool,
        recorded: bool,
        enqueue: impl FnOnce(QueueH, &[EventH], Option<&mut EventH>) -> Result<()>,
    ) -> Result<Submitted> {
        let mut waits: Deps = deps.iter().cloned().collect();
        let mut on_lanes = LanePositions::new();
        match turn.as_ref() {
            Some(Last::Own(e)) if !e.known_done() => waits.push(e.clone()),
            Some(Last::Queue(Submitted::Event(e))) if !e.known_done() => waits.push(e.clone()),
            Some(Last::Queue(Submitted::Quiet(p))) => on_lanes.push(p.clone()),
            _ => {}
        }
        let buffers = self.prepare_buffers(q, &mut waits, Some(&mut on_lanes))?;
        let want = want_event || buffers.eventful();
        let keep = self.kept(buffers.storages());
        let done = self.enqueue_command(q, &waits, &on_lanes, keep, want, recorded, enqueue)?;
        self.unchanged.commit(q, buffers, &done);
        *turn = Some(Last::Queue(done.clone()));
        Ok(done)
    }

    /// Puts the graph onto a lane of `q` through the queue's path for
    /// commands without events, timing it while the back-end chooser
    /// compares (`recorded`: the command-buffer ran).
    #[allow(clippy::too_many_arguments)]
    fn enqueue_command(
        self: &Arc<Self>,
        q: &Arc<Queue>,
        waits: &Deps,
        on_lanes: &LanePositions,
        keep: crate::runtime::queue::Held,
        want: bool,
        recorded: bool,
        enqueue: impl FnOnce(QueueH, &[EventH], Option<&mut EventH>) -> Result<()>,
    ) -> Result<Submitted> {
        // The clock is read only while the chooser still compares.
        let started = self.choosing().then(std::time::Instant::now);
        let done = q.submit_quiet(
            waits,
            on_lanes,
            || self.what.clone(),
            Some(keep),
            want,
            enqueue,
        )?;
        if let Some(t) = started {
            let ns = t.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
            self.timed(recorded, ns);
        }
        Ok(done)
    }
}
