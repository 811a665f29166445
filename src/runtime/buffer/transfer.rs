//! Moving a buffer's pages: which pages are outdated where, the copies that
//! bring them (merged into as few as possible, on the right queue), and
//! the record of the commands that use them.

use super::alloc::ensure_host;
use super::storage::{State, Storage, Token};
use crate::backend::{self, HostEnd, MemH, Side};
use crate::core::deps::Access;
use crate::core::error::Result;
use crate::core::pages::{self, Box3, PageBits};
use crate::runtime::context::Context;
use crate::runtime::event::Event;
use crate::runtime::queue::Queue;
use crate::runtime::staging_pipe::Way;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub(crate) fn transfer_queue(st: &mut State, dev_index: usize) -> Result<Arc<Queue>> {
    let d = &mut st.devs[dev_index - 1];
    if let Some(q) = &d.queue {
        return Ok(q.clone());
    }
    let q = Queue::create_transfer(d.ctx.clone(), d.device)?;
    d.queue = Some(q.clone());
    Ok(q)
}

/// Events (in `ctx`) for the given tokens.
pub(crate) fn token_events(
    tokens: &[Token],
    ctx: &Context,
    loose: &mut bool,
) -> Result<Vec<Arc<Event>>> {
    let mut out = Vec::with_capacity(tokens.len());
    for t in tokens {
        out.extend(t.event(ctx, loose)?);
    }
    Ok(out)
}

/// Records an access at allocation `place`. Covered earlier commands are
/// forgotten when this one writes, or (for `lane` != 0) when they are reads
/// that ran earlier on the same in-order lane; held host accessors are
/// never forgotten this way.
pub(crate) fn record(
    st: &mut State,
    pages: Box3,
    write: bool,
    token: Token,
    lane: u64,
    place: usize,
) {
    record_dropping(st, pages, write, token, lane, place, None, |_| true);
}

/// [`record`] for an access at `place` (a copy from `from`), dropping
/// covered earlier accesses only where `waited` says this one waited for
/// them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn record_dropping(
    st: &mut State,
    pages: Box3,
    write: bool,
    token: Token,
    lane: u64,
    place: usize,
    from: Option<usize>,
    waited: impl Fn(&Access<Token>) -> bool,
) {
    st.tracker.record_at(
        pages,
        write,
        token,
        place,
        from,
        |t| match t {
            Token::Cmd(e) => lane != 0 && e.lane.load(Ordering::Acquire) == lane,
            Token::Lane(p) => lane != 0 && p.lane == lane,
            Token::Host(_) => false,
        },
        // A read stands in for earlier reads of its lane only: a copy into
        // another place waits for writes, not reads, so a write must stay.
        |a| !matches!(a.token, Token::Host(_)) && (write || !a.write) && waited(a),
    );
}

/// Forgets finished accesses. Asking a driver about events costs time, so
/// this only looks once the list has doubled since it last looked (or
/// always, with `force`); finished entries left in between only add event
/// waits that are already satisfied.
pub(crate) fn prune_if(st: &mut State, force: bool) {
    if !force && st.tracker.len() < st.prune_at {
        return;
    }
    st.tracker.retain(|t| match t {
        Token::Cmd(e) => !e.is_done(),
        Token::Lane(p) => !p.is_done(),
        Token::Host(h) => !h.released.load(Ordering::Acquire),
    });
    st.prune_at = (st.tracker.len() * 2).max(PRUNE_MIN);
}

pub(crate) const PRUNE_MIN: usize = 16;

pub(crate) fn prune(st: &mut State) {
    prune_if(st, true);
}

/// Copies the pages of `want` that are outdated on allocation `target`
/// (0 = host) from wherever they are current. Copies into a device are
/// enqueued on `q` (the target's queue); copies to the host go through the
/// source's transfer queue. Returns the copy events; marks the target's
/// bits up to date.
pub(crate) fn fetch(
    s: &Arc<Storage>,
    st: &mut State,
    target: usize,
    want: &Box3,
    q: Option<&Queue>,
) -> Result<Vec<Arc<Event>>> {
    fetch_into(s, st, target, want, q, false)
}

/// [`fetch`] into the host for a caller that waits for the copies at
/// once: where the device makes such reads blocking, they have ended when
/// this returns (see `read_now.rs`).
pub(crate) fn fetch_now(s: &Arc<Storage>, st: &mut State, want: &Box3) -> Result<Vec<Arc<Event>>> {
    fetch_into(s, st, 0, want, None, true)
}

fn fetch_into(
    s: &Arc<Storage>,
    st: &mut State,
    target: usize,
    want: &Box3,
    q: Option<&Queue>,
    now: bool,
) -> Result<Vec<Arc<Event>>> {
    let g = s.geom;
    if !st.has_data || st.bits.all_set(&g, target, want) {
        return Ok(Vec::new());
    }
    let target_ctx = if target == 0 {
        None
    } else {
        Some(st.devs[target - 1].ctx.id)
    };
    let plan = {
        let refs: Vec<Option<&PageBits>> = st.bits.all().iter().map(Some).collect();
        let devs = &st.devs;
        pages::plan(&g, target, want, &refs, |i| {
            // Same-context devices first, then the host, then the rest.
            if i == 0 {
                1
            } else if Some(devs[i - 1].ctx.id) == target_ctx {
                0
            } else {
                2
            }
        })
    };
    let mut events = Vec::new();
    for t in plan {
        let elems = g.elements_of(&t.pages);
        let runs = g.byte_runs(&elems);
        let deps = token_events_for_copy(st, &t.pages, target, t.src)?;
        let same_ctx = t.src != 0 && Some(st.devs[t.src - 1].ctx.id) == target_ctx;
        if target != 0 && t.src != 0 && !same_ctx {
            // Between contexts: through host storage first. The copy in
            // waits for the copy out through a bridge to the other context
            // (see `watch`), not on this thread.
            let via = fetch_one(s, st, 0, t.src, &t.pages, &runs, &deps, None, false)?;
            events.extend(fetch_one(
                s, st, target, 0, &t.pages, &runs, &via, q, false,
            )?);
        } else {
            events.extend(fetch_one(
                s, st, target, t.src, &t.pages, &runs, &deps, q, now,
            )?);
        }
    }
    Ok(events)
}

/// What a copy of `pages` from allocation `src` into allocation `target`
/// must wait for (see [`Access::holds_up_copy`]).
pub(crate) fn token_events_for_copy(
    st: &mut State,
    pages: &Box3,
    target: usize,
    src: usize,
) -> Result<Vec<Arc<Event>>> {
    let tokens = st.tracker.copy_conflicts(pages, target, src);
    let ctx_of = |i: usize| {
        if i == 0 {
            None
        } else {
            Some(st.devs[i - 1].ctx.clone())
        }
    };
    // Host-accessor gates are made in the context of the queue that runs
    // the copy: the target's, or the source's for copies to the host.
    let ctx = ctx_of(target).or_else(|| ctx_of(src));
    let mut loose = false;
    let events = match ctx {
        Some(c) => token_events(&tokens, &c, &mut loose)?,
        None => Vec::new(),
    };
    st.eventful |= loose;
    Ok(events)
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn fetch_one(
    s: &Arc<Storage>,
    st: &mut State,
    target: usize,
    src: usize,
    pages: &Box3,
    runs: &[(usize, usize)],
    deps: &[Arc<Event>],
    q: Option<&Queue>,
    now: bool,
) -> Result<Vec<Arc<Event>>> {
    let write_host = target == 0;
    let host = if src == 0 || target == 0 {
        Some(ensure_host(s, st, write_host)?)
    } else {
        None
    };
    let base = |i: usize| {
        if i == 0 {
            host.unwrap_or(0)
        } else {
            st.devs[i - 1].ptr
        }
    };
    let (dst_base, src_base) = (base(target), base(src));
    let queue = match (target, q) {
        // Behind the command that wrote the pages, on its own lane when it
        // is still the last there: no wait across queues, which some
        // drivers make slow.
        (0, _) => match writer_queue(st, src, deps) {
            Some(wq) => wq,
            None => transfer_queue(st, src)?,
        },
        (_, Some(q)) => transfer_queue_for_target(st, target, q)?,
        (_, None) => transfer_queue(st, target)?,
    };
    let mut events = Vec::with_capacity(runs.len());
    let g = s.geom;
    let elems = g.elements_of(pages);
    let (src_mem, dst_mem) = (
        if src == 0 { None } else { st.devs[src - 1].mem },
        if target == 0 {
            None
        } else {
            st.devs[target - 1].mem
        },
    );
    let rect_ok =
        runs.len() > 1 && (src == 0 || src_mem.is_some()) && (target == 0 || dst_mem.is_some());
    let count = |st: &mut State, len: usize| {
        let (b, c) = match (src, target) {
            (0, _) => (&mut st.stats.h2d_bytes, &mut st.stats.h2d_copies),
            (_, 0) => (&mut st.stats.d2h_bytes, &mut st.stats.d2h_copies),
            _ => (&mut st.stats.d2d_bytes, &mut st.stats.d2d_copies),
        };
        *b += len as u64;
        *c += 1;
    };
    if rect_ok {
        let ext = elems.extent();
        let origin = [elems.lo[2] * g.elem, elems.lo[1], elems.lo[0]];
        let region = [ext[2] * g.elem, ext[1], ext[0]];
        let row = g.range[2] * g.elem;
        let slice = row * g.range[1];
        let ev = queue.copy_rect(
            (dst_mem, dst_base),
            (src_mem, src_base),
            origin,
            region,
            row,
            slice,
            deps,
        )?;
        events.push(ev);
        count(st, region.iter().product());
    } else {
        // A side with no pointer (a device without USM) is copied through
        // its memory object.
        let pointers = (target == 0 || dst_base != 0) && (src == 0 || src_base != 0);
        let host_end = match (src, target) {
            (0, _) => HostEnd::Src,
            (_, 0) => HostEnd::Dst,
            _ => HostEnd::Unknown,
        };
        for &(off, len) in runs {
            let ev = if pointers {
                // SAFETY: both bases are allocations of the buffer's full
                // size and the runs lie inside them; the storage outlives
                // the copy (see Storage's drop).
                unsafe {
                    queue.copy_raw(
                        (dst_base + off) as *mut c_void,
                        (src_base + off) as *const c_void,
                        len,
                        deps,
                        format!("buffer copy of {len} bytes"),
                        None,
                        host_end,
                    )
                }?
            } else {
                queue.copy_mem(
                    (dst_mem, dst_base),
                    (src_mem, src_base),
                    (off, off),
                    len,
                    deps,
                    now,
                )?
            };
            events.push(ev);
            count(st, len);
        }
    }
    st.bits.set_box(&s.geom, target, pages, true);
    // The copies write the target's copy of these pages: later accesses
    // that read it (on any lane or thread) must wait for them. They stand
    // in only for earlier accesses at the target (see
    // `Access::replaced_by_copy`).
    for e in &events {
        e.internal.store(true, Ordering::Release);
        record_dropping(
            st,
            *pages,
            true,
            Token::Cmd(e.clone()),
            0,
            target,
            Some(src),
            |a| a.replaced_by_copy(target, src),
        );
    }
    Ok(events)
}

/// The queue of a command in `deps` on device `src` of the buffer that a
/// copy can follow directly on its lane.
pub(crate) fn writer_queue(st: &State, src: usize, deps: &[Arc<Event>]) -> Option<Arc<Queue>> {
    let d = st.devs.get(src.checked_sub(1)?)?;
    deps.iter().rev().find_map(|e| {
        let wq = e.owner.upgrade()?.downcast::<Queue>().ok()?;
        (wq.ctx.id == d.ctx.id && std::ptr::eq(wq.device, d.device) && wq.follows_directly(e))
            .then_some(wq)
    })
}

/// The queue to enqueue copies into `target` on: the caller's queue when it
/// runs on the target's device and context, else the target's own.
pub(crate) fn transfer_queue_for_target(
    st: &mut State,
    target: usize,
    q: &Queue,
) -> Result<Arc<Queue>> {
    let d = &st.devs[target - 1];
    if d.ctx.id == q.ctx.id && std::ptr::eq(d.device, q.device) {
        if let Some(me) = q.self_arc() {
            return Ok(me);
        }
    }
    transfer_queue(st, target)
}

/// One side of a rectangular copy: a memory object (or none for host
/// memory) with its base pointer, the window's origin (bytes, rows,
/// slices) and its row and slice pitches.
pub(crate) struct RectSide {
    pub(crate) side: (Option<usize>, usize),
    pub(crate) origin: [usize; 3],
    pub(crate) pitches: (usize, usize),
}

impl Queue {
    /// One linear copy of `len` bytes, from offset `s0` of `src` to offset
    /// `d0` of `dst`, where a device side is a memory object (`mem`) and
    /// the host side a pointer (`base`). `now`: the caller waits for it at
    /// once, so a copy into the host that is not staged may be made a
    /// blocking read ([`Queue::read_home_now`]).
    pub(crate) fn copy_mem(
        &self,
        dst: (Option<usize>, usize),
        src: (Option<usize>, usize),
        (d0, s0): (usize, usize),
        len: usize,
        deps: &[Arc<Event>],
        now: bool,
    ) -> Result<Arc<Event>> {
        let side = |(mem, base): (Option<usize>, usize), off: usize| Side {
            mem: mem.map(MemH),
            at: if mem.is_some() { off } else { base + off },
        };
        let (d, s) = (side(dst, d0), side(src, s0));
        // Ordinary host memory and a memory object: through pinned chunks
        // where the device stages such copies, as for USM.
        let staged = match (d.mem, s.mem) {
            (Some(m), None) => self
                .staged_way_mem(Way::ToDevice, s.at as *const c_void, len)
                .map(|how| (how, m)),
            (None, Some(m)) => self
                .staged_way_mem(Way::ToHost, d.at as *const c_void, len)
                .map(|how| (how, m)),
            _ => None,
        };
        if let Some((how, m)) = staged {
            let what = format!("buffer copy of {len} bytes");
            // SAFETY: the memory object and host memory cover the copied
            // bytes, and the host memory outlives the copy (see Storage's
            // drop); the device side's "address" is its offset.
            return unsafe {
                self.staged_copy(
                    how,
                    d.at as *mut c_void,
                    s.at as *const c_void,
                    len,
                    deps,
                    &what,
                    None,
                    Some(m),
                )
            };
        }
        if let (true, None, Some(m)) = (now, d.mem, s.mem) {
            // SAFETY: as for the copy below.
            if let Some(ev) = unsafe { self.read_home_now(d.at, m, s.at, len, deps) }? {
                return Ok(ev);
            }
        }
        self.submit(
            deps,
            format!("buffer copy of {len} bytes"),
            None,
            // The memory objects and host memory cover the copied bytes;
            // the host memory outlives the copy.
            |q, wl, ev| {
                self.driver()
                    .enqueue_copy(q, d, s, len, false, wl, Some(ev))
            },
        )
        .map(|e| e.with_bytes(len))
    }

    /// One rectangular copy between a buffer's allocations: device sides
    /// are `cl_mem` views, the host side is a pointer (`mem` None); both
    /// sides have the buffer's own pitches and the same origin.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn copy_rect(
        &self,
        dst: (Option<usize>, usize),
        src: (Option<usize>, usize),
        origin: [usize; 3],
        region: [usize; 3],
        row: usize,
        slice: usize,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        let pitches = (row, slice);
        self.enqueue_rect(
            RectSide {
                side: dst,
                origin,
                pitches,
            },
            RectSide {
                side: src,
                origin,
                pitches,
            },
            region,
            deps,
        )
    }

    /// One rectangular copy of `region` (bytes, rows, slices) from `src` to
    /// `dst`, each with its own origin and pitches.
    pub(crate) fn enqueue_rect(
        &self,
        dst: RectSide,
        src: RectSide,
        region: [usize; 3],
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        let what = format!("buffer copy of {region:?} bytes x rows x slices");
        let seam = |r: &RectSide| backend::RectSide {
            side: Side {
                mem: r.side.0.map(MemH),
                at: if r.side.0.is_some() { 0 } else { r.side.1 },
            },
            origin: r.origin,
            row_pitch: r.pitches.0,
            slice_pitch: r.pitches.1,
        };
        let (d, s) = (seam(&dst), seam(&src));
        // The memory objects and host storage cover the windows the
        // origins, region and pitches describe; the host storage outlives
        // the copy.
        self.submit(deps, what, None, |q, wl, ev| {
            self.driver()
                .enqueue_copy_rect(q, &d, &s, region, false, wl, Some(ev))
        })
        .map(|e| e.with_bytes(region.iter().product()))
    }
}
