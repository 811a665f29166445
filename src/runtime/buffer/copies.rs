//! Explicit copies and fills of accessors: between an accessor and host
//! memory, between two accessors, and fills with a pattern.

use super::access::{held_storages, AccessReq, Prepared};
use super::storage::Deps;
use super::transfer::RectSide;
use crate::backend::{HostEnd, MemH};
use crate::core::error::{Error, Result, Status};
use crate::core::pages::Geometry;
use crate::runtime::event::Event;
use crate::runtime::queue::{LanePositions, Queue, Submitted};
use smallvec::SmallVec;
use std::ffi::c_void;
use std::sync::Arc;

/// Which side of an explicit copy a window is on.
#[derive(Clone, Copy)]
pub(crate) enum Side {
    /// Packed host memory.
    Host(usize),
    /// A buffer's allocation on the queue's device: pointer (0 without USM),
    /// memory object if any, and the window's element box in the view.
    Dev {
        ptr: usize,
        mem: Option<usize>,
        view: Geometry,
        lo: [usize; 3],
    },
}

impl Side {
    /// Byte offset of row (z, y) of the window and the row pitch / slice
    /// pitch used by rectangular copies.
    pub(crate) fn row(&self, ext: [usize; 3], elem: usize, z: usize, y: usize) -> usize {
        match *self {
            Side::Host(_) => (z * ext[1] + y) * ext[2] * elem,
            Side::Dev { view, lo, .. } => view.byte_offset([lo[0] + z, lo[1] + y, lo[2]]),
        }
    }

    pub(crate) fn pitches(&self, ext: [usize; 3], elem: usize) -> (usize, usize) {
        match *self {
            Side::Host(_) => (ext[2] * elem, ext[1] * ext[2] * elem),
            Side::Dev { view, .. } => (
                view.range[2] * view.elem,
                view.range[1] * view.range[2] * view.elem,
            ),
        }
    }

    pub(crate) fn origin(&self, elem: usize) -> [usize; 3] {
        match *self {
            Side::Host(_) => [0; 3],
            Side::Dev { lo, .. } => [lo[2] * elem, lo[1], lo[0]],
        }
    }

    pub(crate) fn base(&self) -> usize {
        match *self {
            Side::Host(p) => p,
            Side::Dev { ptr, .. } => ptr,
        }
    }

    pub(crate) fn mem(&self) -> Option<usize> {
        match *self {
            Side::Host(_) => None,
            Side::Dev { mem, .. } => mem,
        }
    }

    pub(crate) fn has_ptr(&self) -> bool {
        self.base() != 0
    }

    pub(crate) fn contiguous(&self, ext: [usize; 3]) -> bool {
        match *self {
            Side::Host(_) => true,
            Side::Dev { view, .. } => {
                ext[0] == 1 && ext[1] == 1
                    || (ext[2] == view.range[2] && (ext[0] == 1 || ext[1] == view.range[1]))
            }
        }
    }
}

impl Queue {
    /// Copies a window of `ext` elements of `elem` bytes between two sides,
    /// after `deps`; one command when the backend allows, else one per row.
    pub(crate) fn copy_window(
        &self,
        dst: Side,
        src: Side,
        ext: [usize; 3],
        elem: usize,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        let bytes = ext.iter().product::<usize>() * elem;
        let first = |s: &Side| s.row(ext, elem, 0, 0);
        if dst.contiguous(ext) && src.contiguous(ext) {
            let (d0, s0) = (first(&dst), first(&src));
            return if dst.has_ptr() && src.has_ptr() {
                // SAFETY: both windows lie inside live allocations of at
                // least `bytes` bytes from their first element.
                unsafe {
                    self.copy_raw(
                        (dst.base() + d0) as *mut c_void,
                        (src.base() + s0) as *const c_void,
                        bytes,
                        deps,
                        "buffer copy",
                        None,
                        HostEnd::Unknown,
                    )
                }
            } else {
                self.copy_mem_at(dst, src, d0, s0, bytes, deps)
            };
        }
        let dev_ok = |s: &Side| matches!(s, Side::Host(_)) || s.mem().is_some();
        if dev_ok(&dst) && dev_ok(&src) {
            return self.copy_rect_between(dst, src, ext, elem, deps);
        }
        // Row by row, through pointers (USM without views).
        let mut evs: Deps = SmallVec::new();
        for z in 0..ext[0] {
            for y in 0..ext[1] {
                let (d, s) = (dst.row(ext, elem, z, y), src.row(ext, elem, z, y));
                // SAFETY: each row lies inside its allocation.
                evs.push(unsafe {
                    self.copy_raw(
                        (dst.base() + d) as *mut c_void,
                        (src.base() + s) as *const c_void,
                        ext[2] * elem,
                        deps,
                        "buffer copy (row)",
                        None,
                        HostEnd::Unknown,
                    )
                }?);
            }
        }
        self.marker(&evs, "buffer copy")
    }

    pub(crate) fn copy_mem_at(
        &self,
        dst: Side,
        src: Side,
        d0: usize,
        s0: usize,
        len: usize,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        self.copy_mem(
            (dst.mem(), dst.base()),
            (src.mem(), src.base()),
            (d0, s0),
            len,
            deps,
            false,
        )
    }

    pub(crate) fn copy_rect_between(
        &self,
        dst: Side,
        src: Side,
        ext: [usize; 3],
        elem: usize,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        let rect = |s: &Side| RectSide {
            side: (s.mem(), s.base()),
            origin: s.origin(elem),
            pitches: s.pitches(ext, elem),
        };
        self.enqueue_rect(
            rect(&dst),
            rect(&src),
            [ext[2] * elem, ext[1], ext[0]],
            deps,
        )
    }

    pub(crate) fn dev_side(&self, p: &Prepared, r: &AccessReq<'_>) -> Result<Side> {
        let st = p.storage.state.lock();
        let d = &st.devs[p.alloc - 1];
        Ok(Side::Dev {
            ptr: d.ptr,
            mem: d.mem,
            view: r.buffer.view,
            lo: r.offset,
        })
    }

    /// Explicit copy between an accessor and packed host memory (`to_host`:
    /// from the accessor into `host`, else from `host` into it).
    ///
    /// # Safety
    /// `host` must hold the accessor's bytes and stay valid until the
    /// returned event completes.
    pub unsafe fn copy_host_accessor(
        &self,
        r: &AccessReq<'_>,
        host: usize,
        to_host: bool,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        let mut waits: Deps = deps.iter().cloned().collect();
        let prepared = self.prepare_accesses(std::slice::from_ref(r), &mut waits)?;
        let p = &prepared[0];
        let dev = self.dev_side(p, r)?;
        let ext = r.range;
        let elem = r.buffer.view.elem;
        let ev = if to_host {
            self.copy_window(Side::Host(host), dev, ext, elem, &waits)?
        } else {
            self.copy_window(dev, Side::Host(host), ext, elem, &waits)?
        };
        self.commit_accesses(&prepared, &ev);
        self.hold(ev.clone(), Some(held_storages([&p.storage])));
        Ok(ev)
    }

    /// Explicit copy from one accessor to another of the same shape.
    ///
    /// With no event wanted, a copy of one contiguous run between device
    /// allocations goes without an OpenCL event where it can, as kernel
    /// launches with accessors do: later accesses find it by its place on
    /// its lane.
    pub fn copy_accessors(
        &self,
        src: &AccessReq<'_>,
        dst: &AccessReq<'_>,
        deps: &[Arc<Event>],
        want_event: bool,
    ) -> Result<Submitted> {
        let mut waits: Deps = deps.iter().cloned().collect();
        let reqs = [
            AccessReq {
                buffer: src.buffer,
                mode: src.mode,
                offset: src.offset,
                range: src.range,
            },
            AccessReq {
                buffer: dst.buffer,
                mode: dst.mode,
                offset: dst.offset,
                range: dst.range,
            },
        ];
        // Transfers for the accessors and the copy share one lane.
        let _group = self.group_lane();
        let mut on_lanes = LanePositions::new();
        let prepared = self.prepare_accesses_at(&reqs, &mut waits, Some(&mut on_lanes))?;
        let s = self.dev_side(&prepared[0], src)?;
        let d = self.dev_side(&prepared[1], dst)?;
        let keep = Some(held_storages(prepared.iter().map(|p| &p.storage)));
        let (ext, elem) = (src.range, src.buffer.view.elem);
        let bytes = ext.iter().product::<usize>() * elem;
        let run =
            (d.contiguous(ext) && s.contiguous(ext) && d.has_ptr() && s.has_ptr()).then(|| {
                (
                    (d.base() + d.row(ext, elem, 0, 0)) as *mut c_void,
                    (s.base() + s.row(ext, elem, 0, 0)) as *const c_void,
                )
            });
        // Both sides are device allocations: never staged.
        let done = match run {
            Some((to, from)) => {
                let want = want_event || prepared.iter().any(|p| p.eventful);
                self.submit_quiet(
                    &waits,
                    &on_lanes,
                    || "buffer copy",
                    keep,
                    want,
                    |q, wl, ev| self.copy_cmd(q, to, from, bytes, HostEnd::Unknown, wl, ev),
                )?
                .with_bytes(bytes)
            }
            None => {
                for p in &on_lanes {
                    waits.extend(p.event()?);
                }
                let ev = self.copy_window(d, s, ext, elem, &waits)?;
                self.hold(ev.clone(), keep);
                Submitted::Event(ev)
            }
        };
        self.commit_submitted(&prepared, &done);
        Ok(done)
    }

    /// Fills an accessor's window with a pattern of 1–128 bytes (a power
    /// of two).
    ///
    /// With no event wanted, a fill of one contiguous run of a memory
    /// object goes without an OpenCL event where it can, as kernel
    /// launches with accessors do: the buffer's record of it is then its
    /// place on its lane, not an event kept until the buffer's next use
    /// (a driver's event can cost kilobytes).
    pub fn fill_accessor(
        &self,
        r: &AccessReq<'_>,
        pattern: &[u8],
        deps: &[Arc<Event>],
        want_event: bool,
    ) -> Result<Submitted> {
        let mut waits: Deps = deps.iter().cloned().collect();
        // Transfers for the accessor and the fill share one lane.
        let _group = self.group_lane();
        let mut on_lanes = LanePositions::new();
        let prepared =
            self.prepare_accesses_at(std::slice::from_ref(r), &mut waits, Some(&mut on_lanes))?;
        let p = &prepared[0];
        let side = self.dev_side(p, r)?;
        let elem = r.buffer.view.elem;
        let ext = r.range;
        let row_bytes = ext[2] * elem;
        let keep = Some(held_storages([&p.storage]));
        if let (Some(m), false, true) = (side.mem(), side.has_ptr(), side.contiguous(ext)) {
            let (off, len) = (
                side.row(ext, elem, 0, 0),
                ext.iter().product::<usize>() * elem,
            );
            let want = want_event || p.eventful;
            // The run lies inside the memory object.
            let done = self
                .submit_quiet(
                    &waits,
                    &on_lanes,
                    || format!("buffer fill of {len} bytes"),
                    keep,
                    want,
                    |q, wl, ev| {
                        self.driver()
                            .enqueue_fill_mem(q, MemH(m), off, pattern, len, wl, ev)
                    },
                )?
                .with_bytes(len);
            self.commit_submitted(&prepared, &done);
            return Ok(done);
        }
        for l in &on_lanes {
            waits.extend(l.event()?);
        }
        let rows: Vec<(usize, usize)> = if side.contiguous(ext) {
            vec![(
                side.row(ext, elem, 0, 0),
                ext.iter().product::<usize>() * elem,
            )]
        } else {
            (0..ext[0])
                .flat_map(|z| (0..ext[1]).map(move |y| (z, y)))
                .map(|(z, y)| (side.row(ext, elem, z, y), row_bytes))
                .collect()
        };
        let mut evs: Deps = SmallVec::new();
        for (off, len) in rows {
            let ev = if side.has_ptr() {
                // SAFETY: the run lies inside the buffer's USM allocation.
                unsafe { self.fill((side.base() + off) as *mut c_void, pattern, len, &waits) }?
            } else {
                let m = side
                    .mem()
                    .ok_or_else(|| Error::new(Status::Internal, "allocation without memory"))?;
                // The run lies inside the memory object.
                self.submit(
                    &waits,
                    format!("buffer fill of {len} bytes"),
                    None,
                    |q, wl, ev| {
                        self.driver()
                            .enqueue_fill_mem(q, MemH(m), off, pattern, len, wl, Some(ev))
                    },
                )?
                .with_bytes(len)
            };
            evs.push(ev);
        }
        let ev = if evs.len() == 1 {
            evs.remove(0)
        } else {
            self.marker(&evs, "buffer fill")?
        };
        self.commit_accesses(&prepared, &ev);
        self.hold(ev.clone(), keep);
        Ok(Submitted::Event(ev))
    }
}
