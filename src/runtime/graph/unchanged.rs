//! Knowing that a graph's buffers are as its last submission left them:
//! each submission that prepared the buffers the graph manages notes, per
//! buffer, its access and the count of changes of its state after the
//! access was recorded. A later submission to the same queue that finds
//! every count the same (nothing recorded, moved, allocated or freed
//! since: see `Counted`) skips the preparation. Its accesses would find
//! the same allocations, no page to move, and no conflict but records the
//! last submission's own access already ordered, so it only orders after
//! the last submission (as every submission does) and records itself
//! again.

use super::managed::PreparedBuffers;
use crate::core::pages::Box3;
use crate::runtime::buffer::{record_access, take_turns, Prepared, PreparedList, Storage, Turn};
use crate::runtime::queue::{Queue, Submitted};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// One access of the graph's, as noted.
struct Noted {
    storage: Weak<Storage>,
    pages: Box3,
    write: bool,
    alloc: usize,
    changes: u64,
}

/// What the last submission that prepared the graph's buffers left.
pub(crate) struct Unchanged {
    queue: Weak<Queue>,
    /// Some access asked for the command's event (see `State::eventful`).
    pub(crate) eventful: bool,
    /// In storage id order (the order turns are taken in).
    noted: SmallVec<[Noted; 2]>,
}

/// The storages of a submission found unchanged, their turns held until
/// it is dropped.
pub(crate) struct Ready {
    pub(crate) storages: SmallVec<[Arc<Storage>; 2]>,
    _turns: SmallVec<[Turn; 4]>,
}

impl Unchanged {
    /// Notes a submission to `q` whose accesses were `prepared` and left
    /// their storages with `changes` (as `commit_submitted` returns).
    /// None when there is nothing to note.
    pub(crate) fn note(q: &Queue, prepared: &PreparedList, changes: &[u64]) -> Option<Unchanged> {
        if prepared.is_empty() || prepared.len() != changes.len() {
            return None;
        }
        // In storage id order, one access per storage (a graph manages
        // each buffer once).
        let mut order: SmallVec<[(&Prepared, u64); 2]> =
            prepared.iter().zip(changes.iter().copied()).collect();
        order.sort_by_key(|(p, _)| p.storage.id);
        if order
            .windows(2)
            .any(|w| w[0].0.storage.id == w[1].0.storage.id)
        {
            return None;
        }
        let noted = order
            .iter()
            .map(|&(p, changes)| Noted {
                storage: Arc::downgrade(&p.storage),
                pages: p.pages,
                write: p.write,
                alloc: p.alloc,
                changes,
            })
            .collect();
        Some(Unchanged {
            queue: q.me.clone(),
            eventful: prepared.iter().any(|p| p.eventful),
            noted,
        })
    }

    /// The storages with their turns taken, when the submission goes to
    /// the queue noted and every storage is still alive and unchanged.
    pub(crate) fn check(&self, q: &Queue) -> Option<Ready> {
        if !std::ptr::eq(self.queue.as_ptr(), q) {
            return None;
        }
        let storages: SmallVec<[Arc<Storage>; 2]> = self
            .noted
            .iter()
            .map(|n| n.storage.upgrade())
            .collect::<Option<_>>()?;
        // Held while looking and until the submission is recorded: no
        // other command can come between.
        let turns = take_turns(&storages.iter().collect::<SmallVec<[&Arc<Storage>; 2]>>());
        if storages
            .iter()
            .zip(&self.noted)
            .any(|(s, n)| s.changes() != n.changes)
        {
            return None;
        }
        Some(Ready {
            storages,
            _turns: turns,
        })
    }

    /// Records submission `done` of the storages found `ready`, noting
    /// their counts of changes after. Their page bits already say what
    /// the access leaves: the last submission's same access set them.
    pub(crate) fn record(&mut self, ready: &Ready, done: &Submitted) {
        for (s, n) in ready.storages.iter().zip(self.noted.iter_mut()) {
            n.changes = record_access(s, n.pages, n.write, n.alloc, done, false);
        }
    }
}

/// The managed buffers of one submission: found unchanged (with what
/// was noted, taken out until the submission is recorded: a submission
/// that fails leaves nothing noted), or prepared now.
pub(crate) enum Prep {
    Same(Ready, Unchanged),
    New(PreparedBuffers),
}

impl Prep {
    /// Some access asks for the command's event (see `State::eventful`).
    pub(crate) fn eventful(&self) -> bool {
        match self {
            Prep::Same(_, u) => u.eventful,
            Prep::New(b) => b.prepared.iter().any(|p| p.eventful),
        }
    }

    /// The storages the submission accesses (one of the two sources is
    /// empty: nothing is allocated on the submission path).
    pub(crate) fn storages(&self) -> impl Iterator<Item = &Arc<Storage>> + '_ {
        let (same, new) = match self {
            Prep::Same(r, _) => (Some(r.storages.iter()), None),
            Prep::New(b) => (None, Some(b.prepared.iter().map(|p| &p.storage))),
        };
        same.into_iter().flatten().chain(new.into_iter().flatten())
    }
}

/// What the last submission of a graph that prepared its managed
/// buffers left (used under the graph's turn), and the submissions that
/// found it unchanged.
#[derive(Default)]
pub(crate) struct Memo {
    last: Mutex<Option<Unchanged>>,
    found: AtomicU64,
}

impl Memo {
    /// The buffers of a submission to `q`, when they are as the last
    /// submission left them.
    pub(crate) fn same(&self, q: &Queue) -> Option<Prep> {
        let u = self.last.lock().take()?;
        let r = u.check(q)?;
        Some(Prep::Same(r, u))
    }

    /// Records submission `done` of the buffers `prep` gave, and notes
    /// what it left for the next submission.
    pub(crate) fn commit(&self, q: &Queue, prep: Prep, done: &Submitted) {
        let noted = match prep {
            Prep::Same(r, mut u) => {
                u.record(&r, done);
                self.found.fetch_add(1, Ordering::Relaxed);
                Some(u)
            }
            Prep::New(b) => {
                let changes = q.commit_submitted(&b.prepared, done);
                Unchanged::note(q, &b.prepared, &changes)
            }
        };
        *self.last.lock() = noted;
    }

    /// Submissions that found the buffers unchanged.
    pub(crate) fn found(&self) -> u64 {
        self.found.load(Ordering::Relaxed)
    }
}
