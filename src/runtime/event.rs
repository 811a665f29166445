//! Events: completion, failure reported once, profiling timestamps.

use super::context::Context;
use crate::backend::{self, Driver, EventH, Stamp};
use crate::core::error::{Error, Result, Status};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Execution state as the C API reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventState {
    Queued,
    Submitted,
    Running,
    Complete,
    Failed,
}

pub struct Event {
    /// The back end's event (none for a recorded command).
    pub handle: EventH,
    /// The back end it belongs to.
    pub driver: &'static dyn Driver,
    pub ctx_id: u64,
    /// What the command was, for error messages.
    pub what: Arc<str>,
    /// Set once the failure of this command has been delivered.
    pub reported: AtomicBool,
    pub profiling: bool,
    pub user: bool,
    /// Commands this one waited for, kept until its outcome is known so a
    /// failed dependency marks it failed on every driver alike.
    deps: Mutex<SmallVec<[Arc<Event>; 8]>>,
    /// 0 while unknown, then OUTCOME_OK or OUTCOME_FAILED.
    outcome: AtomicU8,
    failure: Mutex<Option<Error>>,
    /// For user events: set once completed by hand.
    user_done: AtomicBool,
    /// For a user event: OpenCL has been told it is complete.
    user_settled: AtomicBool,
    /// For commands: what is known of their end, so that nobody asks the
    /// driver again (drivers charge microseconds per query): 0 nothing,
    /// [`ENDED`] (perhaps failed), or [`COMPLETED`] without error (said of
    /// the command or of a later one of its lane). Only ever rises.
    ended: AtomicU8,
    /// Enqueued behind something that may not finish soon (an unfinished
    /// user event, or a command itself gated).
    gated: AtomicBool,
    /// The in-order lane the command ran on (0: none) and its place there:
    /// commands of one lane finish in the order of their places.
    pub lane: AtomicU64,
    pub lane_seq: AtomicU64,
    /// A transfer Syrah made for a command: its failure reaches the user
    /// through that command, not as an error of its own.
    pub internal: AtomicBool,
    /// Process-unique command id (names the command in traces and graphs).
    pub id: u64,
    /// Bytes the command moves (copies and fills; 0 otherwise).
    pub bytes: AtomicU64,
    /// Host time of submission while tracing, in trace nanoseconds.
    pub submit_ns: AtomicU64,
    /// The queue the command was submitted to (none for user events),
    /// known here only as a shared object (see `Queue::of_event`).
    pub owner: Owner,
    /// For user events: whether completion has been carried out, and what
    /// runs then (host-side continuations, without a driver callback).
    then: Mutex<(bool, Vec<Continuation>)>,
    /// For the event of a command recorded into a graph (not run): the
    /// recording's id and the node's index. Such an event has no OpenCL
    /// event: it only names the node to later recorded commands.
    pub recorded: Option<(u64, usize)>,
}

/// The queue of a command, as an event holds it.
pub type Owner = std::sync::Weak<dyn std::any::Any + Send + Sync>;

/// Work run once a user event is complete.
pub type Continuation = Box<dyn FnOnce() + Send>;

fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

const OUTCOME_OK: u8 = 1;
const OUTCOME_FAILED: u8 = 2;

/// See `Event::ended`.
const ENDED: u8 = 1;
const COMPLETED: u8 = 2;

/// A back end's failure code for a wait whose event waited for one that
/// failed (OpenCL's numbering, as the seam's).
const DEPENDENCY_FAILED: i32 = -14;

impl Drop for Event {
    fn drop(&mut self) {
        // This Event owns one reference to its handle.
        self.driver.release_event(self.handle);
    }
}

impl Event {
    pub fn new(
        handle: EventH,
        driver: &'static dyn Driver,
        ctx_id: u64,
        what: Arc<str>,
        profiling: bool,
        deps: SmallVec<[Arc<Event>; 8]>,
        owner: Owner,
    ) -> Arc<Event> {
        Arc::new(Event::build(
            handle, driver, ctx_id, what, profiling, deps, owner,
        ))
    }

    fn build(
        handle: EventH,
        driver: &'static dyn Driver,
        ctx_id: u64,
        what: Arc<str>,
        profiling: bool,
        deps: SmallVec<[Arc<Event>; 8]>,
        owner: Owner,
    ) -> Event {
        Event {
            handle,
            driver,
            ctx_id,
            what,
            reported: AtomicBool::new(false),
            profiling,
            user: false,
            deps: Mutex::new(deps),
            outcome: AtomicU8::new(0),
            failure: Mutex::new(None),
            user_done: AtomicBool::new(false),
            user_settled: AtomicBool::new(false),
            ended: AtomicU8::new(0),
            gated: AtomicBool::new(false),
            lane: AtomicU64::new(0),
            lane_seq: AtomicU64::new(0),
            internal: AtomicBool::new(false),
            id: next_id(),
            bytes: AtomicU64::new(0),
            submit_ns: AtomicU64::new(0),
            owner,
            then: Mutex::new((false, Vec::new())),
            recorded: None,
        }
    }

    /// The event of node `node` of recording `graph`: it names the node to
    /// commands recorded after it and is never run.
    pub fn recorded(
        driver: &'static dyn Driver,
        ctx_id: u64,
        what: Arc<str>,
        graph: u64,
        node: usize,
    ) -> Arc<Event> {
        let mut ev = Event::build(
            EventH::NONE,
            driver,
            ctx_id,
            what,
            false,
            SmallVec::new(),
            std::sync::Weak::<()>::new(),
        );
        ev.recorded = Some((graph, node));
        Arc::new(ev)
    }

    /// Refuses to `doing` (wait for, query, depend on) the event of a
    /// recorded command, which never runs.
    pub fn check_runs(&self, doing: &str) -> Result<()> {
        match self.recorded {
            Some((g, n)) => Err(Error::new(
                Status::InvalidOperation,
                format!(
                    "cannot {doing} the event of node {n} of graph recording {g} ({}): a recorded \
                 command does not run; submit the finalized graph and use the event of that \
                 submission",
                    self.what
                ),
            )),
            None => Ok(()),
        }
    }

    /// The command's outcome once it is known: done, or failed (by itself
    /// or because a command it waited for failed). `None` while pending.
    pub fn outcome(&self) -> Result<Option<std::result::Result<(), Error>>> {
        match self.outcome.load(Ordering::Acquire) {
            OUTCOME_OK => return Ok(Some(Ok(()))),
            OUTCOME_FAILED => {
                let e = self
                    .failure
                    .lock()
                    .clone()
                    .unwrap_or_else(|| self.failure(-1));
                return Ok(Some(Err(e)));
            }
            _ => {}
        }
        let status = if self.ended.load(Ordering::Acquire) == COMPLETED {
            backend::COMPLETE
        } else {
            self.raw_status()?
        };
        if status > backend::COMPLETE {
            return Ok(None);
        }
        let mut failure = (status < 0).then(|| self.failure(status));
        if failure.is_none() {
            let deps = {
                let d = self.deps.lock();
                if d.is_empty() {
                    SmallVec::new()
                } else {
                    d.clone()
                }
            };
            for d in deps {
                if let Some(Err(e)) = d.outcome()? {
                    failure = Some(Error::new(
                        Status::ExecutionFailed,
                        format!(
                            "{} failed: it depends on a {} that failed ({})",
                            self.what, d.what, e.message
                        ),
                    ));
                    break;
                }
            }
        }
        self.deps.lock().clear();
        match failure {
            Some(e) => {
                *self.failure.lock() = Some(e.clone());
                self.outcome.store(OUTCOME_FAILED, Ordering::Release);
                Ok(Some(Err(e)))
            }
            None => {
                self.outcome.store(OUTCOME_OK, Ordering::Release);
                Ok(Some(Ok(())))
            }
        }
    }

    /// A user event, completed by [`Event::complete_user`].
    pub fn create_user(ctx: &Context) -> Result<Arc<Event>> {
        Event::create_user_named(ctx, "user event")
    }

    /// A user event standing for host-side work described by `what`.
    pub fn create_user_named(ctx: &Context, what: &str) -> Result<Arc<Event>> {
        let driver = ctx.platform.driver;
        let handle = driver.create_user_event(ctx.handle())?;
        let mut ev = Event::build(
            handle,
            driver,
            ctx.id,
            Arc::from(what),
            false,
            SmallVec::new(),
            std::sync::Weak::<()>::new(),
        );
        ev.user = true;
        Ok(Arc::new(ev))
    }

    pub fn complete_user(&self, failed: bool) -> Result<()> {
        self.complete_user_with(failed.then(|| {
            Error::new(
                Status::ExecutionFailed,
                "the user event was completed as failed",
            )
        }))
    }

    /// Completes a user event, as failed with `failure` when given.
    pub fn complete_user_with(&self, failure: Option<Error>) -> Result<()> {
        if !self.user {
            return Err(Error::invalid(format!(
                "only user events can be completed by hand; this event is a {}",
                self.what
            )));
        }
        if self.user_done.swap(true, Ordering::AcqRel) {
            return Err(Error::invalid("the user event was already completed"));
        }
        if let Some(e) = failure {
            // The failure is Syrah's to track: OpenCL sees a completed event,
            // since drivers disagree on (and some crash over) failed user
            // events. Commands that depend on it are reported as failed.
            *self.failure.lock() = Some(e);
            self.outcome.store(OUTCOME_FAILED, Ordering::Release);
        }
        let done = self.driver.complete_user_event(self.handle);
        if done.is_ok() {
            // Known from here without asking the driver, by a waiter too.
            let _ =
                self.outcome
                    .compare_exchange(0, OUTCOME_OK, Ordering::AcqRel, Ordering::Acquire);
            self.user_settled.store(true, Ordering::Release);
        }
        // Continuations run once the outcome is visible, whatever the driver
        // said: nothing waiting on this event may be left behind.
        let continuations = {
            let mut t = self.then.lock();
            t.0 = true;
            std::mem::take(&mut t.1)
        };
        for c in continuations {
            c();
        }
        done
    }

    /// Runs `c` once this user event is complete: later, on the thread
    /// that completes it, or now when it already is.
    pub fn then_user(&self, c: Continuation) {
        let now = {
            let mut t = self.then.lock();
            if t.0 {
                Some(c)
            } else {
                t.1.push(c);
                None
            }
        };
        if let Some(c) = now {
            c();
        }
    }

    /// Adds commands whose failure this one inherits (see `deps`).
    pub fn add_deps(&self, more: impl IntoIterator<Item = Arc<Event>>) {
        let mut more = more.into_iter().peekable();
        if more.peek().is_some() {
            self.deps.lock().extend(more);
        }
    }

    /// Notes the bytes the command moves (for traces).
    pub fn with_bytes(self: Arc<Self>, n: usize) -> Arc<Self> {
        self.bytes.store(n as u64, Ordering::Relaxed);
        self
    }

    /// True when the outcome is known (no query).
    pub fn is_settled(&self) -> bool {
        self.outcome.load(Ordering::Acquire) != 0
    }

    /// True when the outcome is already known to be success (no query).
    pub fn is_settled_ok(&self) -> bool {
        self.outcome.load(Ordering::Acquire) == OUTCOME_OK
    }

    /// Whether a command submitted now after this one inherits its outcome:
    /// not once it is known to have succeeded, nor once its failure has been
    /// reported (later work then starts afresh; an unreported failure, or one
    /// still to come, makes the dependent fail too).
    pub fn passes_failure_on(&self) -> bool {
        match self.outcome.load(Ordering::Acquire) {
            OUTCOME_OK => false,
            OUTCOME_FAILED => !self.reported.load(Ordering::Acquire),
            _ => true,
        }
    }

    pub fn set_gated(&self, on: bool) {
        self.gated.store(on, Ordering::Release);
    }

    /// True once the command finished (or failed), without blocking.
    pub fn is_done(&self) -> bool {
        if self.outcome.load(Ordering::Acquire) != 0 {
            return true;
        }
        if self.user {
            return self.user_done.load(Ordering::Acquire);
        }
        if self.ended.load(Ordering::Acquire) != 0 {
            return true;
        }
        match self.raw_status() {
            Ok(s) if s > backend::COMPLETE => false,
            Ok(s) => {
                self.note_end(s);
                true
            }
            Err(_) => true,
        }
    }

    /// Remembers that the command ended with status `s` (complete or a
    /// failure).
    fn note_end(&self, s: i32) {
        let level = if s == backend::COMPLETE {
            COMPLETED
        } else {
            ENDED
        };
        self.ended.fetch_max(level, Ordering::AcqRel);
    }

    /// Waits for the command with the back end's wait and returns its code.
    /// Success (0) means the command completed without error, which is
    /// remembered: its status need not be asked (drivers charge
    /// microseconds per question).
    pub fn wait_cl(&self) -> Result<i32> {
        // A host job often ends within moments; the driver's wait may
        // sleep. Once OpenCL has been told, it has nothing to wait for (a
        // user event completed as failed is complete to OpenCL too).
        if self.user && super::linger::spin_until(|| self.user_settled.load(Ordering::Acquire)) {
            return Ok(0);
        }
        // Known to have completed without error: nothing to wait for.
        if !self.user && self.known_ok() {
            return Ok(0);
        }
        let rc = self.driver.wait_event(self.handle)?;
        // Not for a user event: one completed as failed is complete to
        // OpenCL, its failure being Syrah's to track.
        if rc == 0 && !self.user {
            self.mark_completed();
        }
        Ok(rc)
    }

    /// True when the command completed without error: known
    /// already, or asked of the driver now.
    pub fn completed_ok(&self) -> bool {
        match self.outcome.load(Ordering::Acquire) {
            OUTCOME_OK => return true,
            OUTCOME_FAILED => return false,
            _ => {}
        }
        match self.ended.load(Ordering::Acquire) {
            COMPLETED => return true,
            ENDED => return false,
            _ if self.user => return false,
            _ => {}
        }
        match self.raw_status() {
            Ok(s) if s <= backend::COMPLETE => {
                self.note_end(s);
                s == backend::COMPLETE
            }
            _ => false,
        }
    }

    /// Records that the command completed without error: a later command
    /// of its in-order lane did.
    pub fn mark_completed(&self) {
        self.note_end(backend::COMPLETE);
    }

    /// Whether a command enqueued on lane `lane` must name this one in its
    /// wait list: not when this one ran on that lane (the lane orders
    /// them), nor when it is known to have completed without error
    /// (waiting across queues costs some drivers microseconds). A failed
    /// one stays: the driver may then hold the command back.
    pub fn waited_for_on(&self, lane: u64) -> bool {
        self.lane.load(Ordering::Acquire) != lane && !self.known_ok()
    }

    /// The in-order lane the command ran on and its place there, if it ran
    /// on one.
    pub fn lane_place(&self) -> Option<(u64, u64)> {
        let lane = self.lane.load(Ordering::Acquire);
        (lane != 0 && !self.user).then(|| (lane, self.lane_seq.load(Ordering::Acquire)))
    }

    /// True when the command is already known to have completed without
    /// error, without asking the driver.
    pub fn known_ok(&self) -> bool {
        self.outcome.load(Ordering::Acquire) == OUTCOME_OK
            || self.ended.load(Ordering::Acquire) == COMPLETED
    }

    /// True when the command is already known to have finished (or
    /// failed), without asking the driver.
    pub fn known_done(&self) -> bool {
        self.outcome.load(Ordering::Acquire) != 0
            || self.ended.load(Ordering::Acquire) != 0
            || (self.user && self.user_done.load(Ordering::Acquire))
    }

    /// Whether waiting on this event may take indefinitely long: an
    /// unfinished user event, or an unfinished command that waits on one.
    pub fn blocks(&self) -> bool {
        (self.user || self.gated.load(Ordering::Acquire)) && !self.is_done()
    }

    /// The raw OpenCL execution status.
    pub fn raw_status(&self) -> Result<i32> {
        self.driver.event_status(self.handle)
    }

    pub fn state(&self) -> Result<EventState> {
        self.check_runs("ask the status of")?;
        match self.outcome()? {
            Some(Ok(())) => return Ok(EventState::Complete),
            Some(Err(_)) => return Ok(EventState::Failed),
            None => {}
        }
        Ok(match self.raw_status()? {
            backend::COMPLETE => EventState::Complete,
            backend::RUNNING => EventState::Running,
            backend::SUBMITTED => EventState::Submitted,
            backend::QUEUED => EventState::Queued,
            _ => EventState::Failed,
        })
    }

    /// The failure this event carries, built whether or not it was reported.
    pub fn failure(&self, code: i32) -> Error {
        let detail = (!self.handle.is_none())
            .then(|| self.driver.failure_detail(self.handle))
            .flatten();
        if let Some(why) = detail {
            return Error::new(
                Status::ExecutionFailed,
                format!("{} failed: {why}", self.what),
            );
        }
        Error::new(
            Status::ExecutionFailed,
            format!(
                "{} failed on the device: {} ({code})",
                self.what,
                self.driver.failure_name(code)
            ),
        )
    }

    /// Claims the right to report this event's failure; true exactly once.
    pub fn claim_report(&self) -> bool {
        !self.reported.swap(true, Ordering::AcqRel)
    }

    /// Blocks until the command completes. A failure is returned by the
    /// first wait (or queue wait) that sees it, and by no later one.
    pub fn wait(&self) -> Result<()> {
        self.check_runs("wait for")?;
        let rc = self.wait_cl()?;
        if rc != 0 && rc != DEPENDENCY_FAILED {
            return Err(Error::opencl(
                rc,
                &format!("waiting with {}", self.driver.name()),
            ));
        }
        // Some drivers return early when a dependency failed; the command
        // itself may still be running, so poll until it is settled.
        loop {
            match self.outcome()? {
                Some(Ok(())) => return Ok(()),
                Some(Err(e)) => return if self.claim_report() { Err(e) } else { Ok(()) },
                None => std::thread::sleep(std::time::Duration::from_micros(50)),
            }
        }
    }

    /// A profiling timestamp in nanoseconds.
    pub fn profiling_info(&self, which: Stamp) -> Result<u64> {
        self.check_runs("ask profiling information of")?;
        if !self.profiling {
            return Err(Error::new(
                Status::ProfilingUnavailable,
                format!(
                    "no profiling information for this {}: it was not submitted to a queue \
                     created with SYRAH_QUEUE_PROFILING",
                    self.what
                ),
            ));
        }
        // Known to have completed (waited for, or vouched for by a later
        // command of its lane): the status need not be asked.
        if !self.known_ok() && self.raw_status()? != backend::COMPLETE {
            return Err(Error::new(
                Status::ProfilingUnavailable,
                format!(
                    "profiling information for this {} is available once it has completed; \
                     wait on the event first",
                    self.what
                ),
            ));
        }
        self.driver.timestamp(self.handle, which)
    }
}

/// Waits on several events; returns the first unreported failure.
pub fn wait_all(events: &[Arc<Event>]) -> Result<()> {
    let mut first: Option<Error> = None;
    for e in events {
        if let Err(err) = e.wait() {
            first.get_or_insert(err);
        }
    }
    first.map_or(Ok(()), Err)
}
