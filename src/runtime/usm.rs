//! Unified shared memory: allocation through the context's strategy and
//! the queue operations on USM pointers.

use super::context::Context;
use super::event::Event;
use super::platform::Device;
use super::queue::{ptr_or_null, Queue, Submitted};
use crate::core::aspects::UsmStrategy;
use crate::core::error::{Error, Result, Status};
use crate::core::fill::{self, FillPlan};
use crate::core::registry::{AllocKind, AllocRecord};
use crate::opencl::ffi::*;
use crate::opencl::loader::{api, check};
use std::ffi::c_void;
use std::sync::Arc;

/// Largest seed block staged on the host for fills of odd pattern sizes.
const FILL_SEED_CAP: usize = 64 * 1024;

impl Context {
    fn feature_error(&self, kind: AllocKind, d: Option<&Device>, why: &str) -> Error {
        Error::new(
            Status::FeatureNotSupported,
            format!(
                "{} USM allocations are not supported{} (USM strategy '{}'): {why}",
                kind.name(),
                d.map(|d| format!(" on device {}", d.label()))
                    .unwrap_or_default(),
                self.strategy.name()
            ),
        )
    }

    /// Allocates `size` bytes of `kind` USM (`device` is required for
    /// device and shared allocations and ignored for host ones).
    pub fn usm_alloc(
        &self,
        kind: AllocKind,
        device: Option<&'static Device>,
        size: usize,
        align: usize,
    ) -> Result<*mut c_void> {
        let api = api()?;
        let dev_index = match (kind, device) {
            (AllocKind::Host, _) => None,
            (_, Some(d)) => Some(self.require_device(d)?),
            (_, None) => {
                return Err(Error::new(
                    Status::NullArgument,
                    format!("{} USM allocations need a device", kind.name()),
                ))
            }
        };
        if size == 0 {
            return Err(Error::invalid(format!(
                "{} USM allocation of size 0 requested",
                kind.name()
            )));
        }
        if align != 0 && !align.is_power_of_two() {
            return Err(Error::invalid(format!(
                "USM alignment {align} is not a power of two"
            )));
        }
        let limit_devs: Vec<&Device> = match device {
            Some(d) if kind != AllocKind::Host => vec![d],
            _ => self.devices.to_vec(),
        };
        let max = limit_devs
            .iter()
            .map(|d| d.max_mem_alloc_size)
            .max()
            .unwrap_or(0);
        if size as u64 > max {
            return Err(Error::invalid(format!(
                "{} USM allocation of {size} bytes exceeds the maximum single allocation of {max} bytes",
                kind.name()
            )));
        }
        // Support check: every device for host memory, the target otherwise.
        let ok = limit_devs.iter().all(|d| {
            let s = self.support(d);
            match kind {
                AllocKind::Host => s.host,
                AllocKind::Device => s.device,
                AllocKind::Shared => s.shared,
            }
        });
        if !ok {
            let why = match self.strategy {
                UsmStrategy::None => {
                    "the device has neither cl_intel_unified_shared_memory nor SVM"
                }
                UsmStrategy::Svm => {
                    "host and shared allocations need fine-grain buffer SVM, which the device lacks"
                }
                UsmStrategy::IntelUsm => "the device reports no access to this kind of allocation",
            };
            return Err(self.feature_error(kind, device, why));
        }
        let mut raw = self.backend_alloc(kind, device, size, align, &limit_devs)?;
        let mut ptr = raw;
        if align > 1 && (raw.is_null() || raw as usize % align != 0) {
            // Some drivers cap or ignore the requested alignment: allocate
            // a padded block and align inside it.
            if !raw.is_null() {
                self.free_raw(api, raw as usize);
            }
            let padded = size.checked_add(align - 1).ok_or_else(|| {
                Error::invalid(format!(
                    "USM allocation of {size} bytes aligned to {align} overflows"
                ))
            })?;
            raw = self.backend_alloc(kind, device, padded, 0, &limit_devs)?;
            ptr = ((raw as usize).div_ceil(align) * align) as *mut c_void;
        }
        if raw.is_null() {
            return Err(Error::new(
                Status::OutOfDeviceMemory,
                format!(
                    "{} returned no memory for a {} USM allocation of {size} bytes (USM strategy '{}')",
                    if self.strategy == UsmStrategy::Svm {
                        "clSVMAlloc"
                    } else {
                        "the driver"
                    },
                    kind.name(),
                    self.strategy.name()
                ),
            ));
        }
        let raw = raw as usize;
        let rec = AllocRecord {
            size,
            kind,
            device: dev_index,
            raw,
        };
        if let Err(e) = self.registry.lock().insert(ptr as usize, rec) {
            self.free_raw(api, raw);
            return Err(e);
        }
        Ok(ptr)
    }

    /// One allocation through the strategy's entry point; null when the
    /// driver returned no memory without an error code.
    fn backend_alloc(
        &self,
        kind: AllocKind,
        device: Option<&'static Device>,
        size: usize,
        align: usize,
        limit_devs: &[&Device],
    ) -> Result<*mut c_void> {
        let api = api()?;
        match self.strategy {
            UsmStrategy::IntelUsm => {
                let f = self.platform.intel_usm.as_ref().ok_or_else(|| {
                    Error::new(
                        Status::Internal,
                        "Intel USM strategy without its entry points",
                    )
                })?;
                let a = cl_uint::try_from(align)
                    .map_err(|_| Error::invalid(format!("USM alignment {align} is too large")))?;
                let mut err = CL_SUCCESS;
                // SAFETY: live context (and one of its devices); null
                // properties; the size and alignment were checked.
                let p = unsafe {
                    match (kind, device) {
                        (AllocKind::Host, _) => {
                            (f.clHostMemAllocINTEL)(self.cl, std::ptr::null(), size, a, &mut err)
                        }
                        (AllocKind::Device, Some(d)) => (f.clDeviceMemAllocINTEL)(
                            self.cl,
                            d.id,
                            std::ptr::null(),
                            size,
                            a,
                            &mut err,
                        ),
                        (AllocKind::Shared, Some(d)) => (f.clSharedMemAllocINTEL)(
                            self.cl,
                            d.id,
                            std::ptr::null(),
                            size,
                            a,
                            &mut err,
                        ),
                        _ => std::ptr::null_mut(),
                    }
                };
                if err != CL_SUCCESS {
                    return Err(Error::opencl(
                        err,
                        &format!(
                            "{} ({} USM allocation of {size} bytes)",
                            match kind {
                                AllocKind::Host => "clHostMemAllocINTEL",
                                AllocKind::Shared => "clSharedMemAllocINTEL",
                                _ => "clDeviceMemAllocINTEL",
                            },
                            kind.name()
                        ),
                    ));
                }
                Ok(p)
            }
            UsmStrategy::Svm => {
                let f = api.clSVMAlloc.ok_or_else(|| {
                    Error::new(Status::Internal, "SVM strategy without clSVMAlloc")
                })?;
                let a = cl_uint::try_from(align).map_err(|_| {
                    Error::invalid(format!("USM alignment {align} is too large for SVM"))
                })?;
                if kind == AllocKind::Device {
                    if let Some(class) = crate::core::slab::class_of(size, align) {
                        if let Some(p) = self.slab_alloc(f, class) {
                            return Ok(p);
                        }
                    }
                }
                let mut flags = CL_MEM_READ_WRITE;
                if kind != AllocKind::Device {
                    flags |= CL_MEM_SVM_FINE_GRAIN_BUFFER;
                    if limit_devs.iter().all(|d| self.support(d).atomic_shared) {
                        flags |= CL_MEM_SVM_ATOMICS;
                    }
                }
                // SAFETY: live context; flags and alignment were checked.
                Ok(unsafe { f(self.cl, flags, size, a) })
            }
            UsmStrategy::None => Err(self.feature_error(kind, device, "no USM")),
        }
    }

    /// A slot of `class` bytes from a block of small device allocations,
    /// making a block if none has room; None if the driver gives no block.
    fn slab_alloc(
        &self,
        alloc: unsafe extern "C" fn(cl_context, cl_svm_mem_flags, usize, cl_uint) -> *mut c_void,
        class: usize,
    ) -> Option<*mut c_void> {
        use crate::core::slab::{BLOCK, MIN_CLASS};
        let mut slabs = self.slabs.lock();
        if let Some(p) = slabs.take(class) {
            return Some(p as *mut c_void);
        }
        // SAFETY: live context; a read-write block with the driver's
        // alignment, checked below.
        let block = unsafe { alloc(self.cl, CL_MEM_READ_WRITE, BLOCK, 0) };
        if block.is_null() || block as usize % MIN_CLASS != 0 {
            if !block.is_null() {
                if let Ok(api) = api() {
                    self.free_svm(api, block as usize);
                }
            }
            return None;
        }
        Some(slabs.add_block(block as usize, class) as *mut c_void)
    }

    /// Frees a USM allocation, first waiting for work that may use it.
    pub fn usm_free(&self, ptr: *mut c_void) -> Result<()> {
        let api = api()?;
        let addr = ptr as usize;
        let removed = self.registry.lock().remove(addr);
        match removed {
            Ok(rec) => {
                if self.strategy == UsmStrategy::Svm {
                    self.finish_queues();
                }
                self.free_raw(api, rec.raw);
                Ok(())
            }
            Err(_) if self.pinned_free(addr)? => Ok(()),
            Err(mut e) => {
                if let Some(other) = self.foreign_owner(addr) {
                    e = Error::new(
                        Status::WrongContext,
                        format!(
                            "pointer {addr:#x} belongs to context {other}, not to context {}",
                            self.id
                        ),
                    );
                }
                Err(e)
            }
        }
    }

    /// Kind of the allocation containing `ptr`, if any.
    pub fn pointer_kind(&self, ptr: *const c_void) -> Option<(AllocKind, Option<usize>)> {
        self.registry
            .lock()
            .find(ptr as usize)
            .map(|f| (f.record.kind, f.record.device))
    }
}

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

    /// Issues one USM copy on lane `q`; `ev` receives its event unless
    /// null.
    pub(crate) fn copy_cmd(
        &self,
        q: cl_command_queue,
        dst: *mut c_void,
        src: *const c_void,
        size: usize,
        wl: &[cl_event],
        ev: *mut cl_event,
    ) -> Result<()> {
        let api = api()?;
        let rc = match self.intel() {
            // SAFETY: validated pointers and size; wait list of this context.
            Some(f) => unsafe {
                (f.clEnqueueMemcpyINTEL)(
                    q,
                    CL_FALSE,
                    dst,
                    src,
                    size,
                    wl.len() as cl_uint,
                    ptr_or_null(wl),
                    ev,
                )
            },
            None => {
                let f = api.clEnqueueSVMMemcpy.ok_or_else(|| {
                    Error::new(Status::Internal, "SVM strategy without clEnqueueSVMMemcpy")
                })?;
                // SAFETY: as above.
                unsafe {
                    f(
                        q,
                        CL_FALSE,
                        dst,
                        src,
                        size,
                        wl.len() as cl_uint,
                        ptr_or_null(wl),
                        ev,
                    )
                }
            }
        };
        check(
            rc,
            if self.intel().is_some() {
                "clEnqueueMemcpyINTEL (USM memcpy)"
            } else {
                "clEnqueueSVMMemcpy (USM memcpy)"
            },
        )
    }

    fn intel(&self) -> Option<&'static crate::opencl::intel::IntelUsm> {
        self.ctx
            .platform
            .intel_usm
            .as_ref()
            .filter(|_| self.ctx.strategy == UsmStrategy::IntelUsm)
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
        self.require_usm("memcpy")?;
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
                )
            }
            .map(Submitted::Event);
        }
        self.submit_quiet(
            deps,
            &[],
            format!("memcpy of {size} bytes"),
            None,
            want_event,
            |q, wl, ev| self.copy_cmd(q, dst, src, size, wl, ev),
        )
        .map(|done| done.with_bytes(size))
    }

    /// A copy between trusted pointers (buffer allocations and their host
    /// storage), kept alive by `keep` until it completes.
    ///
    /// # Safety
    /// Both ranges must be valid for `size` bytes until the copy completes.
    pub(crate) unsafe fn copy_raw(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        size: usize,
        deps: &[Arc<Event>],
        what: impl Into<Arc<str>>,
        keep: super::queue::Keep,
    ) -> Result<Arc<Event>> {
        let what: Arc<str> = what.into();
        if let Some(how) = self.staged_way(dst, src, size) {
            // SAFETY: forwarded from the caller.
            return unsafe { self.staged_copy(how, dst, src, size, deps, &what, keep) };
        }
        self.submit(deps, what, keep, |q, wl, ev| {
            self.copy_cmd(q, dst, src, size, wl, ev)
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
        let api = api()?;
        match plan {
            FillPlan::Empty => self.marker(deps, &what).map(Submitted::Event),
            FillPlan::Native => self
                .submit_quiet(deps, &[], what, None, want_event, |q, wl, ev| {
                    // The extension's fill and the SVM fill take the same
                    // arguments.
                    let f = match self.intel() {
                        Some(f) => f.clEnqueueMemFillINTEL,
                        None => api.clEnqueueSVMMemFill.ok_or_else(|| {
                            Error::new(Status::Internal, "SVM strategy without clEnqueueSVMMemFill")
                        })?,
                    };
                    // SAFETY: validated range; OpenCL copies the pattern.
                    let rc = unsafe {
                        f(
                            q,
                            dst,
                            pattern.as_ptr().cast(),
                            pattern.len(),
                            size,
                            wl.len() as cl_uint,
                            ptr_or_null(wl),
                            ev,
                        )
                    };
                    check(
                        rc,
                        if self.intel().is_some() {
                            "clEnqueueMemFillINTEL (USM fill)"
                        } else {
                            "clEnqueueSVMMemFill (USM fill)"
                        },
                    )
                })
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
                        |q, wl, ev| self.copy_cmd(q, dst, sp.cast(), sl, wl, ev),
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
                                wl,
                                ev,
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
        let api = api()?;
        let intel_migrate = self.intel().map(|f| f.clEnqueueMigrateMemINTEL);
        if intel_migrate == Some(None)
            || (intel_migrate.is_none() && api.clEnqueueSVMMigrateMem.is_none())
        {
            return self.marker(deps, "prefetch (no migration entry point)");
        }
        let mut declined = false;
        let r = self.submit(
            deps,
            format!("prefetch of {size} bytes"),
            None,
            |q, wl, ev| {
                let rc = match (intel_migrate.flatten(), api.clEnqueueSVMMigrateMem) {
                    // SAFETY: validated range; flags 0 migrate to the device.
                    (Some(m), _) => unsafe {
                        m(q, ptr, size, 0, wl.len() as cl_uint, ptr_or_null(wl), ev)
                    },
                    // SAFETY: one validated SVM range, migrated to the device.
                    (None, Some(m)) => unsafe {
                        m(
                            q,
                            1,
                            &ptr,
                            &size,
                            0,
                            wl.len() as cl_uint,
                            ptr_or_null(wl),
                            ev,
                        )
                    },
                    (None, None) => CL_INVALID_OPERATION,
                };
                declined = rc == CL_INVALID_VALUE || rc == CL_INVALID_OPERATION;
                check(
                    rc,
                    if self.intel().is_some() {
                        "clEnqueueMigrateMemINTEL (USM prefetch)"
                    } else {
                        "clEnqueueSVMMigrateMem (USM prefetch)"
                    },
                )
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
        match self.intel().and_then(|f| f.clEnqueueMemAdviseINTEL) {
            Some(a) => self.submit(deps, format!("mem_advise {advice}"), None, |q, wl, ev| {
                // SAFETY: validated range; the driver checks the advice value.
                let rc = unsafe { a(q, ptr, size, advice, wl.len() as cl_uint, ptr_or_null(wl), ev) };
                if rc == CL_INVALID_VALUE {
                    return Err(Error::invalid(format!(
                        "mem_advise: the driver of device {} does not accept advice {advice}",
                        self.device.label()
                    )));
                }
                check(rc, "clEnqueueMemAdviseINTEL (USM mem_advise)")
            }),
            None => Err(Error::new(
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
