//! Unified shared memory operations on a queue: memcpy, memset and fill,
//! prefetch and advice, checked against the context's allocations.

use super::event::Event;
use super::queue::{HostRead, Queue, Submitted};
use crate::backend::{EventH, HostEnd, QueueH};
use crate::core::aspects::UsmStrategy;
use crate::core::error::{Error, Result, Status};
use crate::core::fill::{self, FillPlan};
use crate::core::registry::AllocKind;
use crate::core::route::Route;
use crate::runtime::staging_pipe::Way;
use std::ffi::c_void;
use std::sync::Arc;

/// Largest seed block staged on the host for fills of odd pattern sizes.
pub(crate) const FILL_SEED_CAP: usize = 64 * 1024;

impl Queue {
    fn require_usm(&self, op: &str) -> Result<()> {
        if self.ctx.strategy == UsmStrategy::None {
            return Err(Error::new(
                Status::FeatureNotSupported,
                format!(
                    "{op} needs USM, which device {} does not have (no cl_intel_unified_shared_memory, no SVM)",
                    self.device.label()
                ),
            ));
        }
        Ok(())
    }

    /// Checks a USM destination range belongs to this context.
    fn check_usm_range(&self, ptr: *const c_void, len: usize, what: &str) -> Result<()> {
        let addr = ptr as usize;
        let r = self
            .ctx
            .registry
            .lock()
            .check_range(addr, len, what)
            .map(|_| ());
        match r {
            Err(e) if e.status == Status::InvalidPointer => {
                Err(self.foreign(addr, what).unwrap_or(e))
            }
            other => other,
        }
    }

    /// The error for an address that belongs to another live context.
    fn foreign(&self, addr: usize, what: &str) -> Option<Error> {
        self.ctx.foreign_owner(addr).map(|other| {
            Error::new(
                Status::WrongContext,
                format!(
                    "{what} {addr:#x} belongs to context {other}, not to the queue's context {}",
                    self.ctx.id
                ),
            )
        })
    }

    /// Checks a memcpy operand: USM of this context (bounded) or host memory.
    fn check_copy_operand(&self, ptr: *const c_void, len: usize, what: &str) -> Result<()> {
        let addr = ptr as usize;
        let inside = self.ctx.registry.lock().find(addr).is_some();
        if inside {
            return self.check_usm_range(ptr, len, what);
        }
        self.foreign(addr, what).map_or(Ok(()), Err)
    }

    /// What is known of a copy's ends for the back end: both device
    /// allocations of this context, asked only where it hands its
    /// commands off (see [`HostEnd::Device`]).
    pub(crate) fn ends_of(&self, dst: *const c_void, src: *const c_void) -> HostEnd {
        let device = |p| matches!(self.ctx.pointer_kind(p), Some((AllocKind::Device, _)));
        if self.driver().hands_off() && device(dst) && device(src) {
            HostEnd::Device
        } else {
            HostEnd::Unknown
        }
    }

    /// Issues one USM copy on lane `q`; `ev` receives its event when
    /// given. `host`: the side known to be host memory, if any.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn copy_cmd(
        &self,
        q: QueueH,
        dst: *mut c_void,
        src: *const c_void,
        size: usize,
        host: HostEnd,
        wl: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        self.driver().enqueue_memcpy(
            q,
            self.ctx.strategy,
            dst as usize,
            src as usize,
            size,
            host,
            wl,
            ev,
        )
    }

    /// Issues one USM fill of `size` bytes at `dst` (aligned to the
    /// pattern, whose size the backend takes) on lane `q`; `ev` receives
    /// its event when given.
    pub(crate) fn fill_cmd(
        &self,
        q: QueueH,
        dst: *mut c_void,
        pattern: &[u8],
        size: usize,
        wl: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        self.driver()
            .enqueue_fill(q, self.ctx.strategy, dst as usize, pattern, size, wl, ev)
    }

    /// Copies `size` bytes; either side may be USM of this context or host
    /// memory. The host side must stay valid until the copy completes.
    /// With no event wanted, a copy the device does goes without an OpenCL
    /// event where it can (see `submit_quiet`): a queue wait, a barrier or
    /// a later command of an in-order queue still follows it.
    /// # Safety
    /// Host pointers passed here must stay valid for the command's
    /// duration; USM pointers are checked against the registry.
    pub unsafe fn memcpy(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        size: usize,
        deps: &[Arc<Event>],
        want_event: bool,
    ) -> Result<Submitted> {
        if size == 0 {
            return self.marker(deps, "memcpy of 0 bytes").map(Submitted::Event);
        }
        let (d, s) = (dst as usize, src as usize);
        if d.checked_add(size).is_none() || s.checked_add(size).is_none() {
            return Err(Error::invalid(format!(
                "memcpy of {size} bytes wraps the address space"
            )));
        }
        if d < s + size && s < d + size {
            return Err(Error::invalid(format!(
                "memcpy source {s:#x} and destination {d:#x} overlap over {size} bytes"
            )));
        }
        if self.ctx.strategy == UsmStrategy::None {
            // Without USM both sides are host memory: the copy needs no
            // device, and runs on a host thread in the queue's order.
            // SAFETY: forwarded from the caller; no overlap (checked above).
            return unsafe { self.host_memcpy(dst, src, size, deps) }.map(Submitted::Event);
        }
        self.check_copy_operand(dst, size, "memcpy destination")?;
        self.check_copy_operand(src, size, "memcpy source")?;
        if let Some(how) = self.staged_way(dst, src, size) {
            // SAFETY: forwarded from the caller.
            return unsafe {
                self.staged_copy(
                    how,
                    dst,
                    src,
                    size,
                    deps,
                    &format!("memcpy of {size} bytes"),
                    None,
                    None,
                )
            }
            .map(Submitted::Event);
        }
        // Where the driver reads ordinary memory early (see
        // `queue::hazards`), a copy from it behind unfinished work goes to
        // the driver once that work is done: after the caller waited for
        // it where it is all device work that waits for nothing of the
        // host's, else from a host job. A copy into it is noted for later
        // ones.
        let ordinary = |p: *const c_void| {
            self.device.reads_host_early
                && self.ctx.pointer_kind(p).is_none()
                && !self.ctx.is_pinned(p, size)
        };
        if ordinary(src) {
            match self.host_read_plan(deps) {
                HostRead::Now => {}
                HostRead::AfterWaiting(pending) => {
                    for e in pending {
                        // A failure reaches this copy through its
                        // dependencies, as for any command.
                        let _ = e.wait();
                    }
                }
                HostRead::HostJob if ordinary(dst) => {
                    // SAFETY: forwarded from the caller.
                    return unsafe { self.host_memcpy(dst, src, size, deps) }.map(Submitted::Event);
                }
                HostRead::HostJob => {
                    let how = (Way::ToDevice, Route::Direct);
                    let what = format!("memcpy of {size} bytes");
                    // SAFETY: forwarded from the caller.
                    return unsafe {
                        self.staged_copy(how, dst, src, size, deps, &what, None, None)
                    }
                    .map(Submitted::Event);
                }
            }
        }
        let writes_host = ordinary(dst);
        let done = self.submit_quiet(
            deps,
            &[],
            || format!("memcpy of {size} bytes"),
            None,
            want_event || writes_host,
            |q, wl, ev| self.copy_cmd(q, dst, src, size, self.ends_of(dst, src), wl, ev),
        )?;
        if let (true, Submitted::Event(e)) = (writes_host, &done) {
            self.note_host_hazards(&[], Some(e));
        }
        Ok(done.with_bytes(size))
    }

    /// A copy between two ranges of host memory on a host thread, in the
    /// queue's order after `deps`.
    ///
    /// # Safety
    /// Both ranges must stay valid until the copy's event completes, and
    /// must not overlap.
    unsafe fn host_memcpy(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        size: usize,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        let me = self
            .self_arc()
            .ok_or_else(|| Error::new(Status::Internal, "a memcpy on a queue being dropped"))?;
        let (d, s) = (dst as usize, src as usize);
        let job = move |_: u64, _: &Event| -> Result<()> {
            // SAFETY: the caller keeps both host ranges valid until the
            // copy's event completes, after this returns; they do not
            // overlap.
            unsafe { std::ptr::copy_nonoverlapping(s as *const u8, d as *mut u8, size) };
            Ok(())
        };
        let what = format!("memcpy of {size} bytes between host memory");
        me.submit_host_job(deps, &what, size, None, Box::new(job))
    }

    /// A copy between trusted pointers (buffer allocations and their host
    /// storage), kept alive by `keep` until it completes; `host` is the
    /// side that is a buffer's host storage, if either is.
    ///
    /// # Safety
    /// Both ranges must be valid for `size` bytes until the copy completes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn copy_raw(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        size: usize,
        deps: &[Arc<Event>],
        what: impl Into<Arc<str>>,
        keep: super::queue::Keep,
        host: HostEnd,
    ) -> Result<Arc<Event>> {
        let what: Arc<str> = what.into();
        if let Some(how) = self.staged_way(dst, src, size) {
            // SAFETY: forwarded from the caller.
            return unsafe { self.staged_copy(how, dst, src, size, deps, &what, keep, None) };
        }
        self.submit(deps, what, keep, |q, wl, ev| {
            self.copy_cmd(q, dst, src, size, host, wl, Some(ev))
        })
        .map(|e| e.with_bytes(size))
    }

    /// Fills `size` bytes at `dst` with `pattern` repeated.
    /// # Safety
    /// Host pointers passed here must stay valid for the command's
    /// duration; USM pointers are checked against the registry.
    pub unsafe fn fill(
        &self,
        dst: *mut c_void,
        pattern: &[u8],
        size: usize,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        // SAFETY: forwarded from the caller.
        match unsafe { self.fill_submitted(dst, pattern, size, deps, true) }? {
            Submitted::Event(e) => Ok(e),
            Submitted::Quiet(_) => Err(Error::new(
                Status::Internal,
                "a fill asked for its event went without one",
            )),
        }
    }

    /// [`Queue::fill`]; with no event wanted, a fill the backend does in
    /// one command goes without an OpenCL event where it can (as
    /// [`Queue::memcpy`]).
    /// # Safety
    /// As for [`Queue::fill`].
    pub unsafe fn fill_submitted(
        &self,
        dst: *mut c_void,
        pattern: &[u8],
        size: usize,
        deps: &[Arc<Event>],
        want_event: bool,
    ) -> Result<Submitted> {
        self.require_usm("fill")?;
        let what = format!("fill of {size} bytes with a {}-byte pattern", pattern.len());
        let mut plan = fill::plan(pattern, size, FILL_SEED_CAP)?;
        if plan == FillPlan::Native && (dst as usize) % pattern.len() != 0 {
            // Backend fills need the destination aligned to the pattern.
            plan = fill::staged(pattern, size, FILL_SEED_CAP);
        }
        if plan == FillPlan::Empty {
            return self.marker(deps, &what).map(Submitted::Event);
        }
        self.check_usm_range(dst, size, "fill destination")?;
        match plan {
            FillPlan::Empty => self.marker(deps, &what).map(Submitted::Event),
            FillPlan::Native => self
                .submit_quiet(
                    deps,
                    &[],
                    || what,
                    None,
                    want_event,
                    |q, wl, ev| self.fill_cmd(q, dst, pattern, size, wl, ev),
                )
                .map(|done| done.with_bytes(size)),
            FillPlan::Staged { seed, copies } => {
                let seed = seed.into_boxed_slice();
                let base = dst as usize;
                let (sp, sl) = (seed.as_ptr(), seed.len());
                // The seed stays alive with the first copy's tracking entry.
                let mut prev = self
                    .submit(
                        deps,
                        format!("{what} (seed)"),
                        Some(super::queue::Held::Any(Box::new(seed))),
                        |q, wl, ev| {
                            self.copy_cmd(q, dst, sp.cast(), sl, HostEnd::Src, wl, Some(ev))
                        },
                    )?
                    .with_bytes(sl);
                for c in copies {
                    let d = std::slice::from_ref(&prev);
                    prev = self
                        .submit(d, what.as_str(), None, |q, wl, ev| {
                            self.copy_cmd(
                                q,
                                (base + c.dst) as *mut c_void,
                                (base + c.src) as *const c_void,
                                c.len,
                                HostEnd::Unknown,
                                wl,
                                Some(ev),
                            )
                        })?
                        .with_bytes(c.len);
                }
                Ok(Submitted::Event(prev))
            }
        }
    }

    /// Hints that `[ptr, ptr + size)` will be used on this queue's device.
    /// # Safety
    /// Host pointers passed here must stay valid for the command's
    /// duration; USM pointers are checked against the registry.
    pub unsafe fn prefetch(
        &self,
        ptr: *const c_void,
        size: usize,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        self.require_usm("prefetch")?;
        if size == 0 {
            return self.marker(deps, "prefetch of 0 bytes");
        }
        self.check_usm_range(ptr, size, "prefetch address")?;
        let shared = matches!(self.ctx.pointer_kind(ptr), Some((AllocKind::Shared, _)));
        if !shared {
            // Device memory already lives on its device and host memory
            // does not migrate: nothing to move.
            return self.marker(deps, "prefetch (nothing to migrate)");
        }
        if !self.driver().can_migrate(self.ctx.strategy) {
            return self.marker(deps, "prefetch (no migration entry point)");
        }
        let mut declined = false;
        let r = self.submit(
            deps,
            format!("prefetch of {size} bytes"),
            None,
            |q, wl, ev| {
                let moved = self.driver().enqueue_migrate(
                    q,
                    self.ctx.strategy,
                    ptr as usize,
                    size,
                    wl,
                    ev,
                )?;
                declined = !moved;
                // A declined move enqueued nothing: the submission fails
                // and a marker stands in (below).
                if declined {
                    return Err(Error::new(
                        Status::FeatureNotSupported,
                        "the back end keeps this memory in place",
                    ));
                }
                Ok(())
            },
        );
        if declined {
            // Migration is a hint; a driver that cannot migrate this memory
            // (shared memory on a CPU device already lives on the host)
            // leaves it where it is.
            return self.marker(deps, "prefetch (driver keeps the memory in place)");
        }
        r
    }

    /// Passes device-specific `advice` for a USM range to the driver.
    /// # Safety
    /// Host pointers passed here must stay valid for the command's
    /// duration; USM pointers are checked against the registry.
    pub unsafe fn mem_advise(
        &self,
        ptr: *const c_void,
        size: usize,
        advice: u32,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        self.require_usm("mem_advise")?;
        self.check_usm_range(ptr, size.max(1), "mem_advise address")?;
        if advice == 0 {
            return self.marker(deps, "mem_advise (default advice)");
        }
        match self.driver().can_advise(self.ctx.strategy) {
            true => self.submit(deps, format!("mem_advise {advice}"), None, |q, wl, ev| {
                if self
                    .driver()
                    .enqueue_advise(q, self.ctx.strategy, ptr as usize, size, advice, wl, ev)?
                {
                    return Ok(());
                }
                Err(Error::invalid(format!(
                    "mem_advise: the driver of device {} does not accept advice {advice}",
                    self.device.label()
                )))
            }),
            false => Err(Error::new(
                Status::FeatureNotSupported,
                format!(
                    "mem_advise {advice}: device {} (USM strategy '{}') defines no advice values; only 0 is accepted",
                    self.device.label(),
                    self.ctx.strategy.name()
                ),
            )),
        }
    }
}
