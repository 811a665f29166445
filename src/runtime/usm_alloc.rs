//! USM allocation: allocating and freeing host, device and shared memory
//! through the context's strategy (Intel's extension, SVM with small
//! device allocations carved from shared blocks), and pointer queries.

use super::context::Context;
use super::platform::Device;
use crate::core::aspects::UsmStrategy;
use crate::core::error::{Error, Result, Status};
use crate::core::registry::{AllocKind, AllocRecord};
use crate::opencl::ffi::*;
use crate::opencl::loader::api;
use std::ffi::c_void;

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
            pooled: 0,
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
                if rec.pooled != 0 {
                    self.pool_freed(&rec);
                } else {
                    self.free_raw(api, rec.raw);
                }
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
