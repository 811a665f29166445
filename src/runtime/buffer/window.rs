//! Accessor windows that a kernel on a device without USM cannot be
//! pointed at (they start where no sub-buffer may): the window's bytes are
//! copied into scratch memory before the kernel, the kernel gets the
//! scratch memory, and what it may have written is copied back as a
//! rectangle after it (see `core::window`).

use super::access::{AccessReq, Prepared};
use super::storage::{Deps, Token};
use super::transfer::record;
use crate::backend::{self, ArgSet, Driver, MemH, Side};
use crate::core::error::{Error, Result, Status};
use crate::core::window::{self, Window};
use crate::runtime::queue::{LanePos, Queue, Submitted};

/// Scratch memory for one window, released when dropped (the back end
/// keeps it until the commands using it are done).
struct Scratch(MemH, &'static dyn Driver);

impl Drop for Scratch {
    fn drop(&mut self) {
        // A memory object made for this window, released once.
        crate::runtime::context::release_arg_mem(self.1, self.0);
    }
}

/// A staged window: which prepared accessor, its scratch memory and the
/// buffer allocation it came from.
pub struct Staged {
    index: usize,
    scratch: Scratch,
    base: MemH,
    window: Window,
}

/// The windows of a command group staged for its kernel.
#[derive(Default)]
pub struct StagedWindows(Vec<Staged>);

impl StagedWindows {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The memory object the kernel gets for accessor `index`, if staged.
    pub fn mem_for(&self, index: usize) -> Option<usize> {
        self.0
            .iter()
            .find(|s| s.index == index)
            .map(|s| s.scratch.0 .0)
    }
}

impl Queue {
    /// Copies the windows of `prepared` (the accessors `reqs`) that need
    /// staging into scratch memory, after what the command waits for
    /// (`deps`, and the commands of this queue at `on_lanes`); the copies
    /// join `deps`, so the kernel runs after them. A window needs staging
    /// where the accessor's allocation is a memory object that the device
    /// cannot view from the accessor's first element, unless the kernel
    /// takes hidden offsets (`offsets`).
    pub fn stage_windows(
        &self,
        reqs: &[AccessReq<'_>],
        prepared: &[Prepared],
        deps: &mut Deps,
        on_lanes: &[LanePos],
        offsets: bool,
    ) -> Result<StagedWindows> {
        let mut out = StagedWindows::default();
        let align = self.device.base_align;
        let needs = |p: &Prepared| p.ptr == 0 && window::needs_staging(p.offset, align);
        if offsets || !prepared.iter().any(needs) {
            return Ok(out);
        }
        let driver = self.driver();
        let mut waits: Deps = deps.iter().cloned().collect();
        for p in on_lanes {
            waits.extend(p.event()?);
        }
        for (index, (p, r)) in prepared.iter().zip(reqs).enumerate() {
            let window = needs(p)
                .then(|| Window::of(&r.buffer.view, r.offset, r.range))
                .flatten();
            let Some(window) = window else {
                continue;
            };
            if p.mem == 0 {
                return Err(Error::new(
                    Status::Internal,
                    "allocation without memory object",
                ));
            }
            let base = MemH(p.mem);
            let m = driver
                .create_mem(self.ctx.handle(), window.scratch_bytes())
                .map_err(|mut e| {
                    e.message.push_str(" (scratch for an accessor window)");
                    e
                })?;
            let scratch = Scratch(m, driver);
            if p.needs_data {
                let what = format!(
                    "copy of an accessor window of {} bytes into scratch memory",
                    window.span
                );
                // Both memory objects hold the span.
                let (to, from) = (
                    Side {
                        mem: Some(m),
                        at: 0,
                    },
                    Side {
                        mem: Some(base),
                        at: window.offset,
                    },
                );
                let ev = self.submit(&waits, what, None, |q, wl, ev| {
                    driver.enqueue_copy(q, to, from, window.span, false, wl, Some(ev))
                })?;
                deps.push(ev);
            }
            out.0.push(Staged {
                index,
                scratch,
                base,
                window,
            });
        }
        Ok(out)
    }

    /// Copies back what the kernel (`done`, which has its event) may have
    /// written into staged windows, and records those copies as the
    /// accesses later commands wait for.
    pub fn unstage_windows(
        &self,
        prepared: &[Prepared],
        staged: StagedWindows,
        done: &Submitted,
    ) -> Result<()> {
        if staged.is_empty() {
            return Ok(());
        }
        let kernel = match done {
            Submitted::Event(e) => e.clone(),
            Submitted::Quiet(p) => p
                .event()?
                .ok_or_else(|| Error::new(Status::Internal, "a staged kernel's queue went away"))?,
        };
        for s in staged.0 {
            let p = &prepared[s.index];
            if !p.write {
                continue;
            }
            let w = s.window;
            let what = format!(
                "copy of an accessor window of {} bytes back from scratch memory",
                w.span
            );
            // The scratch memory holds the window's slices whole from its
            // first element, with the buffer's row pitch, and the
            // rectangle lies inside both.
            let (scratch, base) = (s.scratch.0, s.base);
            let ev = self.submit(std::slice::from_ref(&kernel), what, None, |q, wl, ev| {
                if w.contiguous() {
                    let to = Side {
                        mem: Some(base),
                        at: w.offset,
                    };
                    let from = Side {
                        mem: Some(scratch),
                        at: 0,
                    };
                    return self
                        .driver()
                        .enqueue_copy(q, to, from, w.span, false, wl, Some(ev));
                }
                let to = backend::RectSide {
                    side: Side {
                        mem: Some(base),
                        at: 0,
                    },
                    origin: w.origin,
                    row_pitch: w.row_pitch,
                    slice_pitch: w.slice_pitch,
                };
                let from = backend::RectSide {
                    side: Side {
                        mem: Some(scratch),
                        at: 0,
                    },
                    origin: [0; 3],
                    row_pitch: w.row_pitch,
                    slice_pitch: w.scratch_slice_pitch(),
                };
                self.driver()
                    .enqueue_copy_rect(q, &to, &from, w.region, false, wl, Some(ev))
            })?;
            let lane = ev.lane.load(std::sync::atomic::Ordering::Acquire);
            let mut st = p.storage.state.lock();
            record(&mut st, p.pages, true, Token::Cmd(ev), lane, p.alloc);
        }
        Ok(())
    }
}

/// Per accessor, the kernel argument it becomes: a device pointer, a
/// memory object, or a memory object and the offset of the accessor's
/// first element in it.
pub type AccessorArgs = smallvec::SmallVec<[ArgSet<'static>; 4]>;

/// The kernel arguments of `prepared`: a staged window's scratch memory,
/// else what the accessor itself passes; with `offsets` (the kernel takes
/// hidden offsets), an accessor in a memory object passes the whole
/// object and its offset.
pub fn accessor_args(
    prepared: &[Prepared],
    staged: &StagedWindows,
    offsets: bool,
) -> Result<AccessorArgs> {
    // A plain loop: collecting results into a list costs several times
    // more than the one or two accessors of a launch.
    let mut out = AccessorArgs::new();
    for (i, p) in prepared.iter().enumerate() {
        out.push(match staged.mem_for(i) {
            Some(m) => ArgSet::Mem(MemH(m)),
            None if p.ptr != 0 => ArgSet::Usm(p.ptr),
            None if offsets && p.mem != 0 => ArgSet::MemAt(MemH(p.mem), p.offset),
            None => match p.arg_mem()? {
                Some(m) => ArgSet::Mem(MemH(m)),
                None => ArgSet::Usm(p.ptr),
            },
        });
    }
    Ok(out)
}
