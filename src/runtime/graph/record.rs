//! Recording: a queue in recording mode turns each command submitted to it
//! into a node of a graph instead of running it, with its dependencies
//! inferred as the queue would order it (an in-order queue's order, the
//! events given, conflicting accessors, barriers).

use super::{Action, Graph, Node, NodeAccess};
use crate::core::error::{Error, Result, Status};
use crate::runtime::event::Event;
use crate::runtime::queue::Queue;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// A graph being recorded from a queue.
pub struct Recording {
    pub id: u64,
    pub queue: Arc<Queue>,
    state: Mutex<State>,
}

struct State {
    nodes: Vec<Node>,
    /// The last recorded barrier: later nodes depend on it.
    barrier: Option<usize>,
    /// Set once ended: later submissions run as usual.
    ended: bool,
}

/// Queues recording now, and how many (read without the lock on every
/// submission).
static RECORDINGS: Mutex<Vec<Arc<Recording>>> = Mutex::new(Vec::new());
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// The recording `q` is in, if any.
pub fn recording_of(q: &Queue) -> Option<Arc<Recording>> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    RECORDINGS
        .lock()
        .iter()
        .find(|r| std::ptr::eq(Arc::as_ptr(&r.queue), q))
        .cloned()
}

/// The recording, if any, one of whose nodes accesses buffer storage
/// `storage` (a host accessor of it is refused until the recording ends).
pub fn recording_using(storage: u64) -> Option<u64> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    RECORDINGS.lock().iter().find_map(|r| {
        r.state
            .lock()
            .nodes
            .iter()
            .any(|n| n.accesses.iter().any(|a| a.storage == storage))
            .then_some(r.id)
    })
}

impl Recording {
    /// Puts `queue` in recording mode.
    pub fn begin(queue: Arc<Queue>) -> Result<Arc<Recording>> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let mut all = RECORDINGS.lock();
        if let Some(r) = all.iter().find(|r| Arc::ptr_eq(&r.queue, &queue)) {
            return Err(Error::invalid(format!(
                "the queue is already recording graph {}; end that recording first",
                r.id
            )));
        }
        let r = Arc::new(Recording {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            queue,
            state: Mutex::new(State {
                nodes: Vec::new(),
                barrier: None,
                ended: false,
            }),
        });
        all.push(r.clone());
        COUNT.fetch_add(1, Ordering::AcqRel);
        Ok(r)
    }

    /// Ends the recording of `queue`; its commands run again as usual.
    pub fn end(queue: &Queue) -> Result<Graph> {
        let r = {
            let mut all = RECORDINGS.lock();
            let i = all
                .iter()
                .position(|r| std::ptr::eq(Arc::as_ptr(&r.queue), queue))
                .ok_or_else(|| {
                    Error::invalid("the queue is not recording: begin a recording first")
                })?;
            COUNT.fetch_sub(1, Ordering::AcqRel);
            all.swap_remove(i)
        };
        let mut st = r.state.lock();
        st.ended = true;
        Ok(Graph {
            id: r.id,
            ctx: r.queue.ctx.clone(),
            device: r.queue.device,
            nodes: std::mem::take(&mut st.nodes),
        })
    }

    /// The refusal of something a graph cannot hold.
    pub fn refuse(&self, what: &str) -> Error {
        Error::new(
            Status::InvalidOperation,
            format!(
                "{what} cannot be recorded into a graph: the queue is recording graph {}; \
                 end the recording first",
                self.id
            ),
        )
    }

    /// Records a node doing `action` with `accesses`, after the recorded
    /// commands of `deps`; returns the event that names it to later
    /// recorded commands.
    pub fn add(
        &self,
        action: Action,
        accesses: Vec<NodeAccess>,
        deps: &[Arc<Event>],
        what: Arc<str>,
    ) -> Result<Arc<Event>> {
        let mut st = self.state.lock();
        if st.ended {
            return Err(Error::invalid(format!(
                "the recording of graph {} ended while {what} was being recorded",
                self.id
            )));
        }
        let index = st.nodes.len();
        let mut on: Vec<usize> = Vec::new();
        for (i, d) in deps.iter().enumerate() {
            match d.recorded {
                Some((g, n)) if g == self.id => on.push(n),
                Some((g, n)) => {
                    return Err(Error::invalid(format!(
                        "dependencies[{i}] is node {n} of graph recording {g}, not of graph {} \
                         being recorded on this queue",
                        self.id
                    )))
                }
                None => {
                    return Err(Error::invalid(format!(
                        "dependencies[{i}] is the event of a {} that runs outside graph {}: \
                         recorded commands depend only on commands recorded with them; pass \
                         outside events when submitting the graph",
                        d.what, self.id
                    )))
                }
            }
        }
        if matches!(action, Action::Barrier) && deps.is_empty() {
            // A barrier without a list waits for everything before it.
            on.extend(0..index);
        }
        if self.queue.in_order && index > 0 {
            on.push(index - 1);
        }
        on.extend(st.barrier);
        for (j, n) in st.nodes.iter().enumerate() {
            if n.accesses
                .iter()
                .any(|a| accesses.iter().any(|b| a.conflicts(b)))
            {
                on.push(j);
            }
        }
        on.sort_unstable();
        on.dedup();
        if matches!(action, Action::Barrier) {
            st.barrier = Some(index);
        }
        st.nodes.push(Node {
            action,
            accesses,
            deps: on,
            what: what.clone(),
        });
        Ok(Event::recorded(
            self.queue.ctx.platform.driver,
            self.queue.ctx.id,
            what,
            self.id,
            index,
        ))
    }
}
