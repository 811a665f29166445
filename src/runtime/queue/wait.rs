//! Waiting: finishing a queue's commands, delivering asynchronous errors
//! once, markers and barriers, and what releasing a queue does.

use super::state::{Entry, Lanes, Queue, SCAN_MIN};
use crate::core::error::{Error, Result, Status};
use crate::runtime::event::Event;
use smallvec::SmallVec;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Drop for Queue {
    fn drop(&mut self) {
        // Commands must end before the memory they hold alive is dropped.
        let entries: Vec<Entry> = self.inflight.get_mut().entries.drain(..).collect();
        for e in &entries {
            let _ = e.event.driver.wait_event(e.event.handle);
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
        // The back end's queues go before the memory their commands used:
        // some drivers look at a command's memory objects until its queue
        // is released. This Queue owns one reference to each lane;
        // commands enqueued without events finish before it goes.
        let driver = self.driver();
        let defer = self.ctx.defers_queue_release();
        for lane in self.lanes.get_mut().list.drain(..) {
            if lane.quiet() {
                let _ = driver.finish(lane.handle);
            }
            if defer {
                self.ctx.retired_queues.lock().push(lane.handle.0);
            } else {
                driver.release_queue(lane.handle);
            }
        }
        drop(entries);
        if let Some(t) = crate::runtime::trace::tracer() {
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

impl crate::runtime::context::QueueWork for Queue {
    fn finish_quietly(&self) {
        Queue::finish_quietly(self)
    }

    fn prune_finished(&self) {
        Queue::prune_finished(self)
    }
}

thread_local! {
    /// How many queue callbacks this thread is running.
    static IN_CALLBACK: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Queue {
    /// Waits for every tracked command. Waiting on the commands' own events
    /// rather than calling clFinish keeps drivers that mishandle clFinish
    /// after a failed dependency (Intel's CPU runtime) out of trouble; every
    /// command Syrah enqueues is tracked, so nothing is missed.
    pub(crate) fn finish(&self) -> Result<()> {
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
        if let Some(t) = crate::runtime::trace::tracer() {
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
    pub(crate) fn finish_plain_lanes(&self) {
        let mut released = Vec::new();
        {
            let mut lanes = self.lanes.lock();
            for lane in lanes.list.iter_mut().filter(|l| {
                l.quiet() && l.quiet_deps.is_empty() && l.tail.as_ref().is_none_or(|t| t.known_ok())
            }) {
                if self.driver().finish(lane.handle).is_ok() {
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
        {
            if sealed.is_err() {
                // No marker could stand for the commands without events:
                // wait for their lanes as a whole.
                let mut kept = Vec::new();
                for lane in self.lanes.lock().list.iter_mut().filter(|l| l.quiet()) {
                    let _ = self.driver().finish(lane.handle);
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
                let _ = ev.driver.wait_event(ev.handle);
            }
        }
    }

    /// Waits for everything submitted so far and delivers each asynchronous
    /// error once: to the handler if there is one, else as the result.
    pub fn wait(self: &Arc<Self>) -> Result<()> {
        self.finish()?;
        self.wait_callbacks();
        self.deliver_errors()
    }

    /// Runs `f`, a host callback of a command of this queue that a queue
    /// wait is to wait for, once the command has ended (see
    /// `watch::when_done_new`).
    pub fn after_command(
        self: &Arc<Self>,
        ev: &Arc<Event>,
        f: Box<dyn FnOnce() + Send>,
    ) -> Result<()> {
        *self.callbacks.0.lock() += 1;
        let q = self.clone();
        let counted = Box::new(move || {
            IN_CALLBACK.with(|c| c.set(c.get() + 1));
            f();
            IN_CALLBACK.with(|c| c.set(c.get() - 1));
            q.callback_ran();
        });
        crate::runtime::watch::when_done_new(ev, counted).inspect_err(|_| self.callback_ran())
    }

    fn callback_ran(&self) {
        let mut n = self.callbacks.0.lock();
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.callbacks.1.notify_all();
        }
    }

    /// Waits until the host callbacks of this queue's ended commands have
    /// run; not inside one of them, which would wait for itself.
    fn wait_callbacks(&self) {
        if IN_CALLBACK.with(|c| c.get()) > 0 {
            return;
        }
        let mut n = self.callbacks.0.lock();
        while *n > 0 {
            self.callbacks.1.wait(&mut n);
        }
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
        self.submit(deps, what, None, |q, wl, ev| {
            *ev = self.driver().enqueue_marker(q, wl)?;
            Ok(())
        })
    }

    /// Enqueues a barrier after `deps`, or after every command so far when
    /// there are none; later commands of the queue wait for it.
    pub fn barrier(&self, deps: &[Arc<Event>]) -> Result<Arc<Event>> {
        let mut all: Vec<Arc<Event>> = deps.to_vec();
        if all.is_empty() {
            self.seal()?;
            let ids: SmallVec<[u64; 8]> = {
                let lanes = self.lanes.lock();
                all.extend(lanes.list.iter().filter_map(|l| l.tail.clone()));
                lanes.list.iter().map(|l| l.id).collect()
            };
            // Work on no lane of this queue (host tasks and jobs, graph
            // replays on lanes of their own) that has not finished: no
            // lane's tail stands for it.
            let inf = self.inflight.lock();
            all.extend(
                inf.entries
                    .iter()
                    .map(|e| &e.event)
                    .filter(|e| !e.known_done() && !ids.contains(&e.lane.load(Ordering::Acquire)))
                    .cloned(),
            );
        }
        let ev = self.submit(&all, "barrier", None, |q, wl, ev| {
            *ev = self.driver().enqueue_marker(q, wl)?;
            Ok(())
        })?;
        self.lanes.lock().set_barrier(Some(ev.clone()));
        Ok(ev)
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
        self.lanes.lock().set_barrier(Some(ev.clone()));
    }
}

impl Lanes {
    /// Makes `b` the queue's barrier (or none), on the lane it runs on.
    pub(crate) fn set_barrier(&mut self, b: Option<Arc<Event>>) {
        self.barrier_on.clear();
        if let Some(e) = &b {
            self.barrier_on.push(e.lane.load(Ordering::Acquire));
        }
        self.barrier = b;
    }

    /// Before a command picks its lane: lets go of a barrier known to have
    /// finished (the driver is not asked: the barrier costs at most one
    /// wait per lane after it did) and gives it where the command takes it
    /// among its dependencies: on an in-order queue, and where it waits for
    /// a user event. Otherwise an out-of-order queue's commands wait for it
    /// lane by lane ([`Lanes::barrier_for`]), so none is sent to the
    /// barrier's own lane to be ordered.
    pub(crate) fn barrier_dep(&mut self, in_order: bool) -> Option<Arc<Event>> {
        if self.barrier.as_ref().is_some_and(|b| b.known_done()) {
            self.set_barrier(None);
        }
        self.barrier
            .as_ref()
            .filter(|b| in_order || b.blocks())
            .cloned()
    }

    /// The barrier, where a command going on lane `id` must still wait for
    /// it: the first command of each lane does, and the lane's order makes
    /// the later ones follow.
    pub(crate) fn barrier_for(&self, id: u64) -> Option<Arc<Event>> {
        self.barrier
            .as_ref()
            .filter(|_| !self.barrier_on.contains(&id))
            .cloned()
    }

    /// Once a command that waited for the barrier (or whose lane already
    /// followed it) is enqueued on lane `id`: the lane follows it from now
    /// on, and so does an in-order queue's one lane, which needs it no more.
    pub(crate) fn barrier_passed(&mut self, id: u64, in_order: bool) {
        if in_order {
            self.set_barrier(None);
        } else if self.barrier.is_some() && !self.barrier_on.contains(&id) {
            self.barrier_on.push(id);
        }
    }
}
