//! Host tasks: command groups whose work runs on the host, on a runtime
//! thread, once their requirements are met, ordered with device work.
//!
//! A host-task group is represented to OpenCL by a user event, so device
//! commands can depend on it. It becomes ready when every dependency has
//! completed (OpenCL event callbacks count them down, so no thread waits
//! idle), then a pool thread runs its tasks in order and completes the
//! event: as failed if a task reported failure or a dependency failed.

use super::buffer::{AccessReq, Deps, HostPrepared};
use super::event::Event;
use super::queue::Queue;
use crate::core::error::{Error, Result, Status};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// A C function run as a host task: returns a status, 0 for success.
pub type TaskFn = unsafe extern "C" fn(*const HostTaskContext, *mut c_void) -> i32;

/// One task of a group.
#[derive(Clone, Copy)]
pub struct Task {
    pub run: TaskFn,
    pub user_data: usize,
    /// Called with the user data once the task will not run any more.
    pub release: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// What a running task can see: its queue and its accessors' host memory.
pub struct HostTaskContext {
    pub queue: Arc<Queue>,
    pub accessors: Vec<HostPrepared>,
}

// SAFETY: the task's user data is only handed back to the user's function,
// which the header documents runs on a runtime thread; the rest is shared
// runtime state that is Send and Sync itself.
unsafe impl Send for Task {}
// SAFETY: as above.
unsafe impl Sync for Task {}

/// Internal work run as a host job (e.g. a staged copy), given when the
/// job was ready to run (`linger::now_us`) and the job's own event.
pub(crate) type JobFn = Box<dyn FnOnce(u64, &Event) -> Result<()> + Send>;

enum Work {
    /// The user's tasks, in order.
    Tasks(Vec<Task>),
    /// The runtime's own work, taken once when it runs.
    Internal(Mutex<Option<JobFn>>),
}

struct Job {
    work: Work,
    ctx: HostTaskContext,
    deps: Deps,
    done: Arc<Event>,
    remaining: AtomicUsize,
    /// When its last wait ended (`linger::now_us`).
    ready_at: AtomicU64,
}

struct Pool {
    ready: Mutex<VecDeque<Arc<Job>>>,
    wake: Condvar,
    /// Why no worker thread could be started, if none was.
    broken: OnceLock<String>,
}

const WORKERS: usize = 2;

fn pool() -> &'static Pool {
    static POOL: OnceLock<&'static Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            ready: Mutex::new(VecDeque::new()),
            wake: Condvar::new(),
            broken: OnceLock::new(),
        }));
        let mut started = 0;
        let mut why = String::new();
        for i in 0..WORKERS {
            match std::thread::Builder::new()
                .name(format!("syrah-host-{i}"))
                .spawn(move || worker(pool))
            {
                Ok(_) => started += 1,
                Err(e) => why = e.to_string(),
            }
        }
        if started == 0 {
            let _ = pool.broken.set(why);
        }
        pool
    })
}

fn worker(p: &'static Pool) {
    loop {
        let job = {
            let mut q = p.ready.lock();
            let mut lingered = false;
            loop {
                if let Some(j) = q.pop_front() {
                    break j;
                }
                if lingered {
                    p.wake.wait(&mut q);
                } else {
                    // Another job often follows soon: asked about for a
                    // moment before sleeping.
                    lingered = true;
                    drop(q);
                    super::linger::spin_until(|| p.ready.try_lock().is_some_and(|q| !q.is_empty()));
                    q = p.ready.lock();
                }
            }
        };
        run(&job);
    }
}

/// One of the job's waits is over: the last one makes it ready to run.
fn count_down(job: Arc<Job>) {
    if job.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
        make_ready(job);
    }
}

fn make_ready(job: Arc<Job>) {
    let p = pool();
    if let Some(why) = p.broken.get() {
        // Nothing could run it: it fails, with the reason.
        let e = Error::new(
            Status::OutOfHostMemory,
            format!(
                "{} did not run: no host-task thread could be started ({why})",
                job.done.what
            ),
        );
        finish(&job, Err(e));
        return;
    }
    job.ready_at
        .store(super::linger::now_us(), Ordering::Release);
    p.ready.lock().push_back(job);
    p.wake.notify_one();
}

fn run(job: &Job) {
    let failed_dep = job.deps.iter().find_map(|d| match d.outcome() {
        Ok(Some(Err(e))) => Some((d.what.clone(), e)),
        _ => None,
    });
    let result = match failed_dep {
        Some((what, e)) => Err(Error::new(
            Status::ExecutionFailed,
            format!(
                "{} did not run: it depends on a {what} that failed ({})",
                job.done.what, e.message
            ),
        )),
        None => {
            let tracer = super::trace::tracer();
            let start = tracer.map_or(0, |t| t.now_ns());
            let r = run_tasks(job);
            if let Some(t) = tracer {
                t.host_done(&job.done, start, r.is_err());
            }
            r
        }
    };
    finish(job, result);
}

/// Releases the job's tasks and completes its event with `result`.
fn finish(job: &Job, result: Result<()>) {
    if let Work::Tasks(tasks) = &job.work {
        for t in tasks {
            if let Some(r) = t.release {
                // SAFETY: the user's release callback, once, with its data.
                unsafe { r(t.user_data as *mut c_void) };
            }
        }
    }
    let _ = job.done.complete_user_with(result.err());
}

fn run_tasks(job: &Job) -> Result<()> {
    let tasks = match &job.work {
        Work::Tasks(t) => t,
        Work::Internal(f) => {
            let ready_at = job.ready_at.load(Ordering::Acquire);
            return f.lock().take().map_or(Ok(()), |f| f(ready_at, &job.done));
        }
    };
    for (i, t) in tasks.iter().enumerate() {
        crate::core::last_error::clear();
        // SAFETY: the user's function with its user data and a context
        // that stays valid for the call.
        let rc = unsafe { (t.run)(&job.ctx, t.user_data as *mut c_void) };
        if rc != 0 {
            let name = Status::from_code(rc).map_or("an unknown status", |s| s.name());
            return Err(Error::new(
                Status::ExecutionFailed,
                format!(
                    "host task {i} of the group reported failure: {name} ({rc}){}",
                    crate::core::last_error::suffix()
                ),
            ));
        }
    }
    Ok(())
}

impl Queue {
    /// Submits a group of host tasks with buffer requirements after `deps`.
    pub fn submit_host_tasks(
        self: &Arc<Self>,
        reqs: &[AccessReq<'_>],
        tasks: &[Task],
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        if tasks.is_empty() {
            return Err(Error::invalid(
                "a host-task group needs at least one task (0 given)",
            ));
        }
        let mut waits: Deps = deps.iter().cloned().collect();
        self.host_work_follows(&mut waits)?;
        let done = Event::create_user_named(&self.ctx, "host task")?;
        let prepared = self.prepare_host_accesses(reqs, &mut waits, &done)?;
        let keep = super::buffer::held_storages(prepared.iter().map(|p| &p.storage));
        self.start_job(
            waits,
            done,
            Some(keep),
            Work::Tasks(tasks.to_vec()),
            prepared,
        )
    }

    /// Runs the runtime's own `work` on a host thread after `deps` (and,
    /// on an in-order queue, after earlier commands), as a command named
    /// `what`; `keep` lives until it is done.
    pub(crate) fn submit_host_job(
        self: &Arc<Self>,
        deps: &[Arc<Event>],
        what: &str,
        bytes: usize,
        keep: super::queue::Keep,
        work: JobFn,
    ) -> Result<Arc<Event>> {
        let mut waits: Deps = deps.iter().cloned().collect();
        self.host_work_follows(&mut waits)?;
        // Set before the job can run, so that its trace record has them.
        let done = Event::create_user_named(&self.ctx, what)?.with_bytes(bytes);
        self.start_job(
            waits,
            done,
            keep,
            Work::Internal(Mutex::new(Some(work))),
            Vec::new(),
        )
    }

    /// What host work submitted now waits for besides its own
    /// dependencies: on an in-order queue every earlier command, on an
    /// out-of-order one the last barrier (a host job is on no lane, so no
    /// lane's order puts it after the barrier).
    fn host_work_follows(&self, waits: &mut Deps) -> Result<()> {
        if self.in_order {
            waits.extend(self.tails()?);
        } else if let Some(b) = self.lanes.lock().barrier.clone() {
            if !b.known_done() {
                waits.push(b);
            }
        }
        Ok(())
    }

    /// Records a host job's event and starts it once `waits` complete.
    fn start_job(
        self: &Arc<Self>,
        mut waits: Deps,
        done: Arc<Event>,
        keep: super::queue::Keep,
        work: Work,
        accessors: Vec<HostPrepared>,
    ) -> Result<Arc<Event>> {
        if let Some(t) = super::trace::tracer() {
            let ids: Vec<u64> = waits.iter().map(|d| d.id).collect();
            t.graph_node(&done, "host", &ids);
        }
        // Host code may write ordinary memory that a later copy reads.
        self.note_host_hazards(&waits, Some(&done));
        waits.retain(|d| d.passes_failure_on());
        self.hold(done.clone(), keep);
        if self.in_order {
            self.order_after(&done);
        }
        let job = Arc::new(Job {
            work,
            ctx: HostTaskContext {
                queue: self.clone(),
                accessors,
            },
            remaining: AtomicUsize::new(waits.len() + 1),
            ready_at: AtomicU64::new(0),
            deps: waits,
            done: done.clone(),
        });
        for d in &job.deps {
            // Syrah's own user events continue directly on completion; a
            // command through its driver's callback or the watcher thread,
            // whichever is first (some drivers call back milliseconds late).
            let j = job.clone();
            super::watch::when_done(d, Box::new(move || count_down(j)))?;
        }
        // The submission's own count: released now that all callbacks are set.
        count_down(job);
        Ok(done)
    }
}
