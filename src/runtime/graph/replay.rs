//! Submitting a finalized graph to a queue: the checks (device, context,
//! buffers still alive), what the submission waits for, the replay of its
//! nodes by the plan or as one command-buffer, and the end event the queue
//! tracks like any command's.

use super::exec::{args_of, Backend, ExecGraph, Last};
use super::{Action, Node};
use crate::backend::{EventH, QueueH, RecNode};
use crate::core::error::{Error, Result, Status};
use crate::core::graph::resolve_empty;
use crate::core::graph::{NodeKind, PlanNode};
use crate::runtime::buffer::{accessor_args, held_storages, AccessReq, AccessReqs, Buffer, Deps};
use crate::runtime::event::Event;
use crate::runtime::host_task::Task;
use crate::runtime::queue::{LanePositions, Queue, Submitted};
use smallvec::SmallVec;
use std::sync::{Arc, Weak};

/// The event of a command submitted with an event asked for.
fn into_event(q: &Queue, s: Submitted) -> Result<Arc<Event>> {
    match s {
        Submitted::Event(e) => Ok(e),
        Submitted::Quiet(p) => match p.event()? {
            Some(e) => Ok(e),
            // Already known to be done.
            None => q.marker(&[], "finished command"),
        },
    }
}

/// An event for a command enqueued on one of the graph's lanes.
fn lane_event(
    handle: EventH,
    ctx: &crate::runtime::context::Context,
    what: Arc<str>,
) -> Arc<Event> {
    Event::new(
        handle,
        ctx.platform.driver,
        ctx.id,
        what,
        false,
        SmallVec::new(),
        Weak::<()>::new(),
    )
}

impl ExecGraph {
    /// Submits the graph to `q` after `deps` (and, on an in-order queue,
    /// after the queue's earlier commands; in any case after the previous
    /// submission of this graph). Returns its end: its event, or (when no
    /// event is wanted and the graph went onto a lane of the queue as one
    /// command) its place there.
    pub fn submit(
        self: &Arc<Self>,
        q: &Arc<Queue>,
        deps: &[Arc<Event>],
        want_event: bool,
    ) -> Result<Submitted> {
        let done = self.submit_checked(q, deps, want_event)?;
        self.submitted
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(done)
    }

    fn submit_checked(
        self: &Arc<Self>,
        q: &Arc<Queue>,
        deps: &[Arc<Event>],
        want_event: bool,
    ) -> Result<Submitted> {
        let g = &self.graph;
        if q.ctx.id != g.ctx.id || !std::ptr::eq(q.device, g.device) {
            return Err(Error::new(
                Status::WrongContext,
                format!(
                    "graph {} was recorded for device {} in context {}; the queue is on device {} \
                     in context {}",
                    g.id,
                    g.device.label(),
                    g.ctx.id,
                    q.device.label(),
                    q.ctx.id
                ),
            ));
        }
        if let Some((i, what)) = self.released_buffer() {
            return Err(Error::new(
                Status::InvalidOperation,
                format!(
                    "graph {} cannot be replayed: node {i} ({what}) accesses a buffer that was \
                     released",
                    g.id
                ),
            ));
        }
        self.check_pointers()?;
        let use_buffer = self.current_backend() == Backend::CommandBuffer;
        if self.one_lane && !use_buffer {
            return self.submit_on_lane(q, deps, want_event);
        }
        if use_buffer && self.recording_goes_anywhere() {
            if let Some(done) = self.submit_recorded_on_lane(q, deps, want_event)? {
                return Ok(done);
            }
        }
        let mut turn = self.turn.lock();
        let mut ext: SmallVec<[Arc<Event>; 8]> = deps.iter().cloned().collect();
        // The managed buffers' one access each: what conflicts with it
        // outside the graph, and the transfers of outdated pages.
        let mut waits = Deps::new();
        let buffers = self.prepare_buffers(q, &mut waits, None)?;
        ext.extend(waits);
        if q.in_order {
            ext.extend(q.tails()?);
        } else if let Some(b) = q.lanes.lock().barrier.clone() {
            ext.push(b);
        }
        // A previous submission that ended on lane 0: what goes there
        // follows it in order; only other lanes and the queue's path wait
        // for it. One that went through the queue is waited for by all.
        let prev = match turn.clone() {
            Some(Last::Own(e)) => Some(e).filter(|e| !e.known_done()),
            Some(Last::Queue(Submitted::Event(e))) => {
                ext.push(e);
                None
            }
            Some(Last::Queue(Submitted::Quiet(p))) => {
                ext.extend(p.event()?);
                None
            }
            None => None,
        };
        ext.retain(|e| !e.known_done() && !prev.as_ref().is_some_and(|p| Arc::ptr_eq(p, e)));
        let ext_cl = q.wait_list(&ext)?;
        // The clock is read only while the chooser still compares.
        let started = self.choosing().then(std::time::Instant::now);
        let buffered = if use_buffer {
            self.replay_command_buffer(&ext_cl)?
        } else {
            None
        };
        let (handle, mut failures) = match buffered {
            Some(h) => (h, SmallVec::new()),
            None => match self.replay_nodes(q, &ext, &ext_cl, prev.as_ref()) {
                Ok(r) => r,
                Err(e) => {
                    self.finish_lanes();
                    return Err(e);
                }
            },
        };
        if let Some(t) = started.filter(|_| use_buffer == buffered.is_some()) {
            let ns = t.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
            self.timed(use_buffer, ns);
        }
        failures.extend(ext.into_iter().filter(|e| e.passes_failure_on()));
        let end = Event::new(
            handle,
            g.ctx.platform.driver,
            g.ctx.id,
            self.what.clone(),
            false,
            failures,
            Weak::<()>::new(),
        );
        if buffered.is_some() {
            self.pool.lock().ran_last(Submitted::Event(end.clone()));
        }
        let keep = self.kept(buffers.storages());
        self.unchanged
            .commit(q, buffers, &Submitted::Event(end.clone()));
        q.track(end.clone(), Some(keep));
        if q.in_order {
            q.order_after(&end);
        }
        *turn = Some(Last::Own(end.clone()));
        Ok(Submitted::Event(end))
    }

    fn finish_lanes(&self) {
        for &l in &self.lanes {
            let _ = self.graph.ctx.platform.driver.finish(l);
        }
    }

    /// Enqueues the graph's recording after `wl`; returns its event, or
    /// `None` when every copy is pending and the back end cannot take a
    /// pending one again.
    fn replay_command_buffer(&self, wl: &[EventH]) -> Result<Option<EventH>> {
        let mut ev = EventH::NONE;
        let done = self.enqueue_recording(self.lanes[0], wl, Some(&mut ev))?;
        Ok(done.then_some(ev))
    }

    /// Enqueues the graph's recording on `lane` after `wl`, its event to
    /// `ev` when one is asked for; `false` (nothing enqueued) when every
    /// copy is pending and the back end cannot take a pending one again.
    pub(crate) fn enqueue_recording(
        &self,
        lane: QueueH,
        wl: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<bool> {
        let driver = self.graph.ctx.platform.driver;
        let sim = self.graph.device.command_buffer_simultaneous;
        // What a new copy records: built only when one is recorded.
        let record = || {
            let kernels = self.kernels.lock();
            let nodes: Vec<PlanNode> = self
                .graph
                .nodes
                .iter()
                .zip(&self.kinds)
                .map(|(n, &kind)| PlanNode {
                    kind,
                    deps: n.deps.clone(),
                })
                .collect();
            let deps = resolve_empty(&nodes).map_err(Error::invalid)?;
            let recorded: Vec<RecNode> = self
                .graph
                .nodes
                .iter()
                .zip(kernels.iter())
                .map(|(n, k)| n.action.recorded(k.as_ref()))
                .collect();
            let mutable = self.graph.device.command_buffer_mutable;
            driver.record(self.lanes[0], (sim, mutable), &deps, &recorded)
        };
        let mut pool = self.pool.lock();
        let Some((i, pending)) = pool.take(driver, sim, record)? else {
            return Ok(false);
        };
        if !driver.enqueue_recorded(pool.get(i), lane, wl, ev)? {
            if pending {
                pool.refused_pending();
                return Ok(false);
            }
            return Err(Error::new(
                Status::Opencl,
                "the back end refused to enqueue a graph's recording that was not pending",
            ));
        }
        pool.set_last(i);
        Ok(true)
    }

    /// Replays the nodes by the plan; returns the end marker's event and
    /// the nodes' events (whose failures become the graph's).
    fn replay_nodes(
        &self,
        q: &Arc<Queue>,
        ext: &[Arc<Event>],
        ext_cl: &[EventH],
        prev: Option<&Arc<Event>>,
    ) -> Result<(EventH, SmallVec<[Arc<Event>; 8]>)> {
        let ctx = &self.graph.ctx;
        let driver = ctx.platform.driver;
        let kernels = self.kernels.lock();
        let locals = self.locals.lock();
        let mut events: Vec<Option<Arc<Event>>> = vec![None; self.graph.nodes.len()];
        // The event of the graph's one last node, when it stands for all.
        let mut end = EventH::NONE;
        for (i, node) in self.graph.nodes.iter().enumerate() {
            let step = &self.plan.steps[i];
            match self.kinds[i] {
                NodeKind::Empty => {}
                NodeKind::Direct => {
                    let mut wl: SmallVec<[EventH; 8]> = SmallVec::new();
                    if step.external {
                        wl.extend(ext_cl.iter().copied());
                        if step.lane != 0 {
                            wl.extend(prev.map(|p| p.handle));
                        }
                    }
                    wl.extend(
                        step.waits
                            .iter()
                            .filter_map(|&w| events[w].as_ref().map(|e| e.handle)),
                    );
                    let mut cl = EventH::NONE;
                    let last = self.single_end == Some(i);
                    super::direct::enqueue(
                        &self.graph,
                        q,
                        i,
                        self.lanes[step.lane],
                        &wl,
                        (step.event || last).then_some(&mut cl),
                        kernels[i].as_deref().map(|k| (k, locals[i])),
                    )?;
                    if last {
                        end = cl;
                    } else if step.event {
                        events[i] = Some(lane_event(cl, ctx, node.what.clone()));
                    }
                }
                NodeKind::Eager => {
                    let mut d: SmallVec<[Arc<Event>; 8]> = SmallVec::new();
                    if step.external {
                        d.extend(ext.iter().cloned());
                        d.extend(prev.cloned());
                    }
                    d.extend(step.waits.iter().filter_map(|&w| events[w].clone()));
                    events[i] = Some(self.run_eager(q, i, node, &d)?);
                }
            }
        }
        if !end.is_none() {
            // The graph's one lane starts.
            q.start(self.lanes[0]);
            return Ok((end, events.into_iter().flatten().collect()));
        }
        let mut wl: SmallVec<[EventH; 8]> = self
            .plan
            .ends
            .iter()
            .filter_map(|&e| events[e].as_ref().map(|e| e.handle))
            .collect();
        if self.plan.ends.is_empty() {
            wl.extend(ext_cl.iter().copied());
        }
        let marker = driver.enqueue_marker(self.lanes[0], &wl)?;
        for &l in &self.lanes {
            // Every lane of the graph starts.
            q.start(l);
        }
        Ok((marker, events.into_iter().flatten().collect()))
    }

    /// Submits node `i` through the queue's ordinary path after `deps`.
    fn run_eager(
        &self,
        q: &Arc<Queue>,
        i: usize,
        node: &Node,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        let buffers = node
            .accesses
            .iter()
            .map(|a| {
                a.buffer().ok_or_else(|| {
                    Error::new(
                        Status::InvalidOperation,
                        format!(
                            "node {i} of graph {} ({}) accesses a buffer that was released",
                            self.graph.id, node.what
                        ),
                    )
                })
            })
            .collect::<Result<Vec<Buffer>>>()?;
        let reqs: AccessReqs<'_> = node
            .accesses
            .iter()
            .zip(&buffers)
            .map(|(a, b)| AccessReq {
                buffer: b,
                mode: a.mode,
                offset: a.offset,
                range: a.range,
            })
            .collect();
        let p = |ptr: usize| ptr as *mut std::ffi::c_void;
        match &node.action {
            Action::Kernel {
                kernel,
                range,
                args,
            } => {
                let args = args.lock().clone();
                let kinfo = q.precheck(kernel, range, args.len())?;
                let mut deps: Deps = deps.iter().cloned().collect();
                let _group = (!reqs.is_empty()).then(|| q.group_lane());
                let mut on_lanes = LanePositions::new();
                let prepared = q.prepare_accesses_at(&reqs, &mut deps, Some(&mut on_lanes))?;
                // Windows a device without USM cannot point into go
                // through scratch memory, as in an eager launch.
                let offsets = kernel.takes_offsets();
                let staged = q.stage_windows(&reqs, &prepared, &mut deps, &on_lanes, offsets)?;
                let ptrs = accessor_args(&prepared, &staged, offsets)?;
                let a = args_of(&args, &ptrs);
                let keep = (!prepared.is_empty())
                    .then(|| held_storages(prepared.iter().map(|p| &p.storage)));
                let done = q.launch(kernel, &kinfo, range, &a, &deps, &on_lanes, keep, true)?;
                q.commit_submitted(&prepared, &done);
                q.unstage_windows(&prepared, staged, &done)?;
                into_event(q, done)
            }
            Action::HostTasks(tasks) => {
                // The graph lets the user data go once, when it is dropped.
                let list: Vec<Task> = tasks
                    .iter()
                    .map(|t| Task {
                        run: t.run,
                        user_data: t.user_data,
                        release: None,
                    })
                    .collect();
                q.submit_host_tasks(&reqs, &list, deps)
            }
            Action::Memcpy { dst, src, size } => {
                // SAFETY: the pointers were checked when the command was
                // recorded; the user keeps them valid while the graph is
                // replayed, as documented (the same for the three below).
                let done = unsafe { q.memcpy(p(*dst), p(*src), *size, deps, true) }?;
                into_event(q, done)
            }
            Action::Fill { ptr, pattern, size } => {
                // SAFETY: as for the copy.
                let done = unsafe { q.fill_submitted(p(*ptr), pattern, *size, deps, true) }?;
                into_event(q, done)
            }
            // SAFETY: as for the copy.
            Action::Prefetch { ptr, size } => unsafe { q.prefetch(p(*ptr), *size, deps) },
            // SAFETY: as for the copy.
            Action::Advise { ptr, size, advice } => unsafe {
                q.mem_advise(p(*ptr), *size, *advice, deps)
            },
            Action::Barrier => q.marker(deps, "barrier"),
        }
    }
}
