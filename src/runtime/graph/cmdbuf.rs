//! A finalized graph's recordings: its kernel nodes recorded once by the
//! back end (a command-buffer on OpenCL, a CUDA graph on CUDA) with their
//! dependencies, and a few copies of it, so that a replay need not wait for the previous
//! enqueue of one copy to finish (some drivers refuse to enqueue a
//! command-buffer still pending; with those, a replay finding every copy
//! pending enqueues the nodes one by one instead). An argument update is
//! applied in place to the copies not pending where the device has
//! mutable dispatch; other copies become stale, and once none is current
//! the next replay enqueues the nodes one by one, the one after records a
//! copy again.

use crate::backend::{CommandH, Driver, RecordH};
use crate::core::error::Result;
use crate::runtime::launch::Arg;
use crate::runtime::queue::Submitted;

/// Copies recorded at most.
const COPIES: usize = 8;

/// One recorded command-buffer.
struct Copy {
    cb: RecordH,
    /// The end of its last enqueue: its event, or its place on a lane of
    /// the queue.
    end: Option<Submitted>,
    /// Node `i`'s command for updates (none where it has none); empty
    /// when the recording takes no updates.
    handles: Vec<CommandH>,
}

impl Copy {
    /// Whether its last enqueue is known to have ended (asking the event
    /// when `ask`).
    fn free(&self, ask: bool) -> bool {
        match &self.end {
            None => true,
            Some(Submitted::Event(e)) => e.known_done() || (ask && e.is_done()),
            Some(Submitted::Quiet(p)) => ask && p.is_done(),
        }
    }
}

/// A recording and its nodes' commands for updates.
pub(crate) type Recorded = (RecordH, Vec<CommandH>);

/// The recorded copies.
#[derive(Default)]
pub(crate) struct Pool {
    copies: Vec<Copy>,
    driver: Option<&'static dyn Driver>,
    /// Copies recorded before the last argument update.
    stale: Vec<RecordH>,
    next: usize,
    last: Option<usize>,
    /// The driver refuses to enqueue a command-buffer still pending.
    no_reuse: bool,
    /// An argument update left no copy current: the next submission
    /// replays the nodes instead of recording a copy (an application that
    /// updates before every submission never pays for recordings); the
    /// one after it records.
    replay_next: bool,
    /// Copies recorded so far, and updates applied in place.
    pub recorded: u64,
    pub updated: u64,
}

impl Pool {
    /// Marks every copy as recorded with old arguments.
    pub(crate) fn stale(&mut self) {
        for c in self.copies.drain(..) {
            self.stale.push(c.cb);
        }
    }

    /// Sets argument `index` of node `node` to `arg` in every copy that
    /// can take the update in place (mutable, not pending); the others
    /// become stale. Submissions already made keep the old value.
    pub(crate) fn update(&mut self, node: usize, index: usize, arg: &Arg<'_>) {
        let mut kept = Vec::with_capacity(self.copies.len());
        for c in self.copies.drain(..) {
            let handle = c.handles.get(node).copied().unwrap_or(CommandH(0));
            let done = match self.driver {
                Some(d) if handle.0 != 0 && c.free(true) => {
                    d.update_recorded(c.cb, handle, index as u32, *arg)
                }
                _ => false,
            };
            if done {
                self.updated += 1;
                kept.push(c);
            } else {
                self.stale.push(c.cb);
            }
        }
        self.replay_next = kept.is_empty();
        self.copies = kept;
    }

    /// Releases every copy (the back end keeps a pending one until it
    /// ends).
    pub(crate) fn release(&mut self) {
        self.stale();
        if let Some(d) = self.driver {
            for cb in self.stale.drain(..) {
                d.release_recorded(cb);
            }
        }
    }

    /// A copy to enqueue now: one whose last enqueue has finished, a new
    /// one while fewer than `COPIES` exist, else the oldest pending one
    /// (returned with `true`), which only drivers that allow enqueueing a
    /// pending command-buffer take. `None` once the driver refused that,
    /// and right after an update left no copy current: the caller then
    /// replays the nodes one by one.
    pub(crate) fn take(
        &mut self,
        driver: &'static dyn Driver,
        simultaneous: bool,
        record: impl Fn() -> Result<Recorded>,
    ) -> Result<Option<(usize, bool)>> {
        self.driver = Some(driver);
        for cb in self.stale.drain(..) {
            // No longer used; the back end keeps it until a pending
            // enqueue ends.
            driver.release_recorded(cb);
        }
        let n = self.copies.len();
        if n == 0 && std::mem::take(&mut self.replay_next) {
            return Ok(None);
        }
        if simultaneous && n > 0 {
            // Made for simultaneous use: one copy serves every replay.
            return Ok(Some((0, false)));
        }
        let oldest = self.next % n.max(1);
        if let Some(i) = (0..n).find(|&i| self.copies[i].free(i == oldest)) {
            return Ok(Some((i, false)));
        }
        if n < COPIES {
            let (cb, handles) = record()?;
            self.recorded += 1;
            self.copies.push(Copy {
                cb,
                end: None,
                handles,
            });
            return Ok(Some((n, false)));
        }
        if self.no_reuse {
            return Ok(None);
        }
        Ok(Some((oldest, true)))
    }

    /// Whether [`Pool::take`] would give a copy of a recording made for
    /// simultaneous use, rather than leave this submission to a replay of
    /// the nodes.
    pub(crate) fn gives_copy(&self) -> bool {
        !(self.copies.is_empty() && self.replay_next)
    }

    /// The driver refused to enqueue a pending command-buffer.
    pub(crate) fn refused_pending(&mut self) {
        self.no_reuse = true;
    }

    pub(crate) fn get(&self, i: usize) -> RecordH {
        self.copies[i].cb
    }

    /// Notes that copy `i` was just enqueued.
    pub(crate) fn set_last(&mut self, i: usize) {
        self.last = Some(i);
        self.next = i + 1;
    }

    /// Gives the copy enqueued last the end of that enqueue.
    pub(crate) fn ran_last(&mut self, end: Submitted) {
        if let Some(c) = self.last.take().and_then(|i| self.copies.get_mut(i)) {
            c.end = Some(end);
        }
    }
}
