//! Copies from ordinary host memory on devices whose driver reads that
//! memory when such a copy is enqueued, not when the queue reaches it
//! (NVIDIA's OpenCL does for small copies: a copy from memory that an
//! earlier command of the same in-order queue writes would send what was
//! there before). What such a copy must wait for on the host before the
//! driver sees it: commands of its queue that write ordinary memory
//! (copies into it, host jobs and tasks) and, on an in-order queue, the
//! dependencies its commands were given that had not finished then.

use super::state::Queue;
use crate::runtime::event::Event;
use std::sync::Arc;

/// How a copy from ordinary host memory goes to a driver that reads it
/// early.
pub(crate) enum HostRead {
    /// As any other copy: nothing unfinished may write the memory.
    Now,
    /// After these commands, all on a device and waiting for nothing of
    /// the host's, have finished: the caller waits for them.
    AfterWaiting(Vec<Arc<Event>>),
    /// From a host job once what it follows has finished: some of that is
    /// host work, or waits for the host.
    HostJob,
}

/// Entries from which the list is checked with the driver, not only
/// against what is already known.
const ASK_FROM: usize = 32;

impl Queue {
    /// Notes, for a command about to be submitted to a device that reads
    /// ordinary memory early, its dependencies not known to be done (an
    /// in-order queue's later commands come after them), and `writer`,
    /// the command itself where it writes ordinary host memory.
    pub(crate) fn note_host_hazards(&self, deps: &[Arc<Event>], writer: Option<&Arc<Event>>) {
        if !self.device.reads_host_early {
            return;
        }
        let pending = self.in_order && deps.iter().any(|d| !d.known_done());
        if !pending && writer.is_none() {
            return;
        }
        let mut h = self.host_hazards.lock();
        h.retain(|e| !e.known_done());
        if h.len() >= ASK_FROM {
            // Nothing may have asked about these: ask the driver, so that
            // the list holds only what is still running.
            h.retain(|e| !e.is_done());
        }
        if pending {
            h.extend(deps.iter().filter(|d| !d.known_done()).cloned());
        }
        h.extend(writer.cloned());
    }

    /// What a copy from ordinary host memory after `deps` must wait for on
    /// the host (them, and what this queue noted: see above) before the
    /// driver sees it.
    pub(crate) fn host_read_plan(&self, deps: &[Arc<Event>]) -> HostRead {
        if !self.device.reads_host_early {
            return HostRead::Now;
        }
        let mut pending: Vec<Arc<Event>> = deps.iter().filter(|d| !d.is_done()).cloned().collect();
        {
            let mut h = self.host_hazards.lock();
            h.retain(|e| !e.is_done());
            pending.extend(h.iter().cloned());
        }
        if pending.is_empty() {
            HostRead::Now
        } else if pending.iter().any(|e| e.user || e.blocks()) {
            // Host work, or work that waits for the host: the caller may
            // be the one to let it finish.
            HostRead::HostJob
        } else {
            HostRead::AfterWaiting(pending)
        }
    }
}
