//! Accessors: preparing a command group's accessors on a queue (their
//! allocations, dependencies and transfers), recording the command, and
//! host accessors.

use super::alloc::{ensure_dev, ensure_host, host_ptr, sub_buffer};
use super::storage::{take_turns, Buffer, Deps, HostHold, Mode, State, Storage, Token, Turn};
use super::transfer::{fetch, fetch_now, prune, prune_if, record, token_events};
use crate::core::error::{Error, Result};
use crate::core::pages::Box3;
use crate::runtime::event::Event;
use crate::runtime::queue::{Held, LanePos, LanePositions, Queue, Submitted};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One accessor of a command group.
pub struct AccessReq<'a> {
    pub buffer: &'a Buffer,
    pub mode: Mode,
    pub offset: [usize; 3],
    pub range: [usize; 3],
}

/// The prepared accessors of a command group, inline while few (moved
/// whole on every launch).
pub type PreparedList = SmallVec<[Prepared; 2]>;

/// A command group's accessors, inline while few.
pub type AccessReqs<'a> = SmallVec<[AccessReq<'a>; 2]>;

/// Prepared accessor: its pages and the allocation it uses.
pub struct Prepared {
    /// The command should keep its event (see `State::eventful`).
    pub eventful: bool,
    pub storage: Arc<Storage>,
    pub pages: Box3,
    pub write: bool,
    pub alloc: usize,
    /// Pointer to the accessor's first element on the device (0 on a
    /// device without USM).
    pub ptr: usize,
    /// Byte offset of the accessor's first element in the buffer.
    pub offset: usize,
    /// The allocation's memory object, whole (0: none).
    pub mem: usize,
    /// The accessor needs the current contents (not a discard mode).
    pub needs_data: bool,
    /// The storage's turn, held until the command is recorded and this is
    /// dropped (by the first accessor of each storage).
    _turn: Option<Turn>,
}

impl Prepared {
    /// What a kernel argument bound to this accessor receives on a device
    /// without USM: the memory object starting at its first element (None
    /// where the device has USM and `ptr` serves).
    pub fn arg_mem(&self) -> Result<Option<usize>> {
        if self.ptr != 0 {
            return Ok(None);
        }
        let mut st = self.storage.state.lock();
        let d = &mut st.devs[self.alloc - 1];
        sub_buffer(&self.storage, d, self.offset).map(Some)
    }
}

impl Queue {
    /// Prepares the accessors of a command group on this queue's device:
    /// allocations, dependencies and transfers. Returns what the command
    /// must wait for and the per-accessor results; `commit` records it.
    pub fn prepare_accesses(
        &self,
        reqs: &[AccessReq<'_>],
        waits: &mut Deps,
    ) -> Result<PreparedList> {
        self.prepare_accesses_at(reqs, waits, None)
    }

    /// [`Queue::prepare_accesses`]; with `on_lanes`, conflicting commands
    /// of this queue that went without events are put there (for the
    /// command to follow them on their lane) instead of getting an event.
    pub fn prepare_accesses_at(
        &self,
        reqs: &[AccessReq<'_>],
        waits: &mut Deps,
        mut on_lanes: Option<&mut LanePositions>,
    ) -> Result<PreparedList> {
        let mut done = PreparedList::with_capacity(reqs.len());
        // One accessor (most launches): its storage's turn alone.
        if let [r] = reqs {
            let turn = r.buffer.storage.take_turn();
            done.push(self.prepare_one(r, Some(turn), waits, on_lanes)?);
            return Ok(done);
        }
        // Storages are locked one at a time in id order; each accessor's
        // work is done under its storage's lock.
        let mut order: SmallVec<[usize; 8]> = SmallVec::new();
        for i in 0..reqs.len() {
            order.push(i);
        }
        order.sort_by_key(|&i| reqs[i].buffer.storage.id);
        // Already in storage order: prepared in place; otherwise in slots,
        // put back in the accessors' order at the end.
        let in_order = order.iter().enumerate().all(|(k, &i)| k == i);
        let mut slots: SmallVec<[Option<Prepared>; 4]> = if in_order {
            SmallVec::new()
        } else {
            (0..reqs.len()).map(|_| None).collect()
        };
        let storages = distinct(reqs, &order);
        let mut turns = take_turns(&storages).into_iter();
        // The states' lines asked for together: each one's misses overlap
        // the others' instead of following them.
        for s in &storages {
            s.state.lock().prefetch();
        }
        let mut last_id = 0;
        for i in order {
            let r = &reqs[i];
            let id = r.buffer.storage.id;
            let turn = if id != last_id { turns.next() } else { None };
            last_id = id;
            let p = self.prepare_one(r, turn, waits, on_lanes.as_deref_mut())?;
            if in_order {
                done.push(p);
            } else {
                slots[i] = Some(p);
            }
        }
        if !in_order {
            done.extend(slots.into_iter().flatten());
        }
        Ok(done)
    }

    /// Prepares one accessor (see [`Queue::prepare_accesses_at`]), its
    /// storage's turn taken (`turn`: by the first accessor of the storage).
    fn prepare_one(
        &self,
        r: &AccessReq<'_>,
        turn: Option<Turn>,
        waits: &mut Deps,
        mut on_lanes: Option<&mut LanePositions>,
    ) -> Result<Prepared> {
        let s = r.buffer.storage.clone();
        let pages = r.buffer.pages_of(r.offset, r.range)?;
        let mut st = s.state.lock();
        st.prefetch();
        prune_if(&mut st, false);
        let alloc = ensure_dev(&s, &mut st, &self.ctx, self.device)?;
        let mut gate_err = None;
        let mut loose = false;
        st.tracker
            .for_each_conflict(&pages, r.mode.writes(), alloc, |t| match t {
                Token::Cmd(e) => waits.push(e.clone()),
                // This in-order queue runs the command after it anyway.
                Token::Lane(p) if p.orders(self) => {}
                Token::Lane(p) if p.is_of(self) && on_lanes.is_some() => {
                    if let Some(l) = on_lanes.as_deref_mut() {
                        l.push(p.clone());
                    }
                }
                _ => match t.event(&self.ctx, &mut loose) {
                    Ok(e) => waits.extend(e),
                    Err(e) => gate_err = Some(e),
                },
            });
        st.eventful |= loose;
        if let Some(e) = gate_err {
            return Err(e);
        }
        if st.has_data && !st.bits.all_set(&s.geom, alloc, &pages) {
            for part in r.buffer.fetch_boxes(r.mode, r.offset, r.range, &pages) {
                waits.extend(fetch(&s, &mut st, alloc, &part, Some(self))?);
            }
        }
        let off = r.buffer.view.byte_offset(r.offset);
        let (base, mem) = st.dev_addresses(alloc);
        let eventful = st.eventful;
        drop(st);
        Ok(Prepared {
            eventful,
            storage: s,
            pages,
            write: r.mode.writes(),
            alloc,
            ptr: if base != 0 { base + off } else { 0 },
            offset: off,
            mem,
            needs_data: r.mode.needs_data(),
            _turn: turn,
        })
    }

    /// Records a command that used prepared accessors.
    pub fn commit_accesses(&self, prepared: &[Prepared], ev: &Arc<Event>) {
        self.commit_submitted(prepared, &Submitted::Event(ev.clone()));
    }

    /// Records a command that used prepared accessors, with or without its
    /// event; returns each accessor's storage's count of changes after
    /// (see [`record_access`]).
    pub fn commit_submitted(&self, prepared: &[Prepared], done: &Submitted) -> SmallVec<[u64; 2]> {
        prepared
            .iter()
            .map(|p| record_access(&p.storage, p.pages, p.write, p.alloc, done, true))
            .collect()
    }
}

/// Records that command `done` accessed `pages` of `s` through allocation
/// `alloc`, writing or not, and (with `bits`) marks the pages it writes
/// current there alone; returns the count of changes of the storage's
/// state after (see `Counted`). Without `bits` the caller knows the page
/// bits already say so (the same access recorded with nothing between).
pub fn record_access(
    s: &Storage,
    pages: Box3,
    write: bool,
    alloc: usize,
    done: &Submitted,
    bits: bool,
) -> u64 {
    let (token, lane) = match done {
        Submitted::Event(e) => (Token::Cmd(e.clone()), e.lane.load(Ordering::Acquire)),
        Submitted::Quiet(p) => (Token::Lane(p.clone()), p.lane),
    };
    let mut st = s.state.lock();
    record(&mut st, pages, write, token, lane, alloc);
    if write && bits {
        st.bits.write_box(&s.geom, alloc, &pages);
        st.has_data = true;
    }
    st.changes()
}

/// What a command over these storages keeps alive until it completes.
pub fn held_storages<'a>(storages: impl IntoIterator<Item = &'a Arc<Storage>>) -> Held {
    let mut all = SmallVec::new();
    for s in storages {
        all.push(s.clone() as Arc<dyn std::any::Any + Send + Sync>);
    }
    Held::Storages(all)
}

/// An accessor of a host-task group, prepared on the host.
pub struct HostPrepared {
    /// The data; not the user's buffer, whose release (and write-back)
    /// waits for the task through the buffer's tracker, and must not wait
    /// for the runtime thread to let go of the finished task.
    pub storage: Arc<Storage>,
    /// Host pointer to the accessor's first element.
    pub ptr: usize,
    /// Byte offset of the accessor's first element in the buffer.
    pub offset: usize,
}

impl Queue {
    /// Prepares host-task accessors: waits for conflicting work, brings the
    /// pages home (copies the group then waits for) and records `done` as
    /// the group's access.
    pub fn prepare_host_accesses(
        &self,
        reqs: &[AccessReq<'_>],
        waits: &mut Deps,
        done: &Arc<Event>,
    ) -> Result<Vec<HostPrepared>> {
        let mut order: SmallVec<[usize; 8]> = (0..reqs.len()).collect();
        order.sort_by_key(|&i| reqs[i].buffer.storage.id);
        let mut pending: Vec<(Arc<Storage>, Box3, bool)> = Vec::new();
        let mut slots: Vec<Option<HostPrepared>> = (0..reqs.len()).map(|_| None).collect();
        // Held until every access is recorded.
        let _turns = take_turns(&distinct(reqs, &order));
        for i in order {
            let r = &reqs[i];
            let s = r.buffer.storage.clone();
            let pages = r.buffer.pages_of(r.offset, r.range)?;
            let mut st = s.state.lock();
            prune_if(&mut st, false);
            let conflicts = st.tracker.conflicts(&pages, r.mode.writes(), 0);
            let mut loose = false;
            waits.extend(token_events(&conflicts, &self.ctx, &mut loose)?);
            st.eventful |= loose;
            let mut host = ensure_host(&s, &mut st, r.mode.writes())?;
            for part in r.buffer.fetch_boxes(r.mode, r.offset, r.range, &pages) {
                waits.extend(fetch(&s, &mut st, 0, &part, None)?);
            }
            // Data fetched into read-only user memory goes to a private
            // copy instead, which the task must see.
            host = host_ptr(&st).unwrap_or(host);
            let off = r.buffer.view.byte_offset(r.offset);
            drop(st);
            pending.push((s.clone(), pages, r.mode.writes()));
            slots[i] = Some(HostPrepared {
                storage: s,
                ptr: host + off,
                offset: off,
            });
        }
        for (s, pages, write) in pending {
            let mut st = s.state.lock();
            record(&mut st, pages, write, Token::Cmd(done.clone()), 0, 0);
            if write {
                st.bits.write_box(&s.geom, 0, &pages);
                st.has_data = true;
            }
        }
        Ok(slots.into_iter().flatten().collect())
    }
}

/// An active host accessor.
pub struct HostAccessor {
    storage: Arc<Storage>,
    hold: Arc<HostHold>,
    pub ptr: usize,
}

impl Drop for HostAccessor {
    fn drop(&mut self) {
        self.hold.release();
        prune(&mut self.storage.state.lock());
        // The buffer was released while this accessor was held.
        if self.storage.is_orphaned() {
            self.storage.free_when_idle();
        }
    }
}

impl Buffer {
    /// Maps a range of the buffer on the host; returns once the data is
    /// current there. Conflicting commands submitted later wait until the
    /// accessor is released.
    pub fn host_access(
        &self,
        mode: Mode,
        offset: [usize; 3],
        range: [usize; 3],
    ) -> Result<HostAccessor> {
        let s = self.storage.clone();
        let pages = self.pages_of(offset, range)?;
        let _turn = s.take_turn();
        let mut st = s.state.lock();
        prune(&mut st);
        let what = format!("a {} host accessor", mode.name());
        refuse_held(&st, &pages, mode.writes(), &what)?;
        let mut host = ensure_host(&s, &mut st, mode.writes())?;
        // The copies home go behind the commands that write the pages (they
        // wait for them themselves), so that they start as those end; then
        // everything the accessor conflicts with is waited for at once.
        let mut fetched = Vec::new();
        for part in self.fetch_boxes(mode, offset, range, &pages) {
            fetched.extend(fetch_now(&s, &mut st, &part)?);
        }
        wait_on_host(&mut st, &pages, mode.writes(), fetched)?;
        // Data fetched into read-only user memory goes to a private copy
        // instead, which the accessor must see.
        host = host_ptr(&st).unwrap_or(host);
        let hold = Arc::new(HostHold {
            released: AtomicBool::new(false),
            gates: Mutex::new(Vec::new()),
        });
        record(
            &mut st,
            pages,
            mode.writes(),
            Token::Host(hold.clone()),
            0,
            0,
        );
        if mode.writes() {
            st.bits.write_box(&s.geom, 0, &pages);
            st.has_data = true;
        }
        let ptr = host + self.view.byte_offset(offset);
        drop(st);
        Ok(HostAccessor {
            storage: s,
            hold,
            ptr,
        })
    }

    /// Starts bringing every page home to the host; returns when the copies
    /// are enqueued, with the events to wait for.
    pub fn update_host(&self) -> Result<Vec<Arc<Event>>> {
        let s = self.storage.clone();
        let _turn = s.take_turn();
        let mut st = s.state.lock();
        prune(&mut st);
        ensure_host(&s, &mut st, true)?;
        let all = s.geom.all_pages();
        let evs = fetch(&s, &mut st, 0, &all, None)?;
        for e in &evs {
            record(&mut st, all, false, Token::Cmd(e.clone()), 0, 0);
        }
        Ok(evs)
    }
}

/// Refuses a host access that conflicts with another host accessor of the
/// buffer that is still held.
pub(crate) fn refuse_held(st: &State, pages: &Box3, write: bool, what: &str) -> Result<()> {
    let mut held = false;
    st.tracker.for_each_conflict(pages, write, 0, |t| {
        held |= matches!(t, Token::Host(h) if !h.released.load(Ordering::Acquire));
    });
    if held {
        return Err(Error::invalid(format!(
            "{what} conflicts with another host accessor of this buffer that is still held; \
             release it first"
        )));
    }
    Ok(())
}

/// Waits on this thread for the recorded commands that an access of
/// `pages` on the host (writing if `write`) conflicts with, then for
/// `fetched`, the copies bringing those pages home (enqueued behind the
/// commands, so that they start as those end). Conflicting host accessors
/// still held were refused before ([`refuse_held`], under the same lock).
///
/// The copies are waited for first: each one that completes vouches for
/// the commands before it on its in-order lane, which then need no wait of
/// their own (a wait costs the driver's wake-up, and a command without an
/// event a marker to wait on). Failures are reported as before: a copy
/// that did not complete vouches for nothing, and each command is still
/// waited for in turn.
pub(crate) fn wait_on_host(
    st: &mut State,
    pages: &Box3,
    write: bool,
    fetched: Vec<Arc<Event>>,
) -> Result<()> {
    let mut through: SmallVec<[(u64, u64); 2]> = SmallVec::new();
    for e in &fetched {
        if e.wait_cl().is_ok_and(|rc| rc == 0) {
            through.extend(e.lane_place());
        }
    }
    let vouched = |p: &LanePos| {
        through
            .iter()
            .any(|&(lane, seq)| lane == p.lane && seq > p.seq)
    };
    for t in st.tracker.conflicts(pages, write, 0) {
        match t {
            Token::Cmd(e) => e.wait()?,
            Token::Lane(p) if vouched(&p) => {}
            Token::Lane(p) => {
                let (e, exact) = p.event_exact()?;
                st.eventful |= !exact;
                if let Some(e) = e {
                    e.wait()?
                }
            }
            Token::Host(_) => {}
        }
    }
    for e in fetched {
        e.wait()?;
    }
    Ok(())
}

/// The distinct storages of `reqs`, in the id order `order` gives.
fn distinct<'a>(reqs: &'a [AccessReq<'_>], order: &[usize]) -> SmallVec<[&'a Arc<Storage>; 4]> {
    let mut out: SmallVec<[&Arc<Storage>; 4]> = SmallVec::new();
    for &i in order {
        let s = &reqs[i].buffer.storage;
        if out.last().is_none_or(|l| l.id != s.id) {
            out.push(s);
        }
    }
    out
}
