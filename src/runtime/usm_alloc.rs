//! USM allocation: allocating and freeing host, device and shared memory
//! through the context's strategy (Intel's extension, SVM with small
//! device allocations carved from shared blocks), and pointer queries.

use super::context::Context;
use super::platform::Device;
use crate::core::aspects::UsmStrategy;
use crate::core::error::{Error, Result, Status};
use crate::core::registry::{AllocKind, AllocRecord};
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
                self.free_raw(raw as usize);
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
            self.free_raw(raw);
            return Err(e);
        }
        Ok(ptr)
    }

    /// One allocation through the back end; null when it returned no
    /// memory without an error code.
    fn backend_alloc(
        &self,
        kind: AllocKind,
        device: Option<&'static Device>,
        size: usize,
        align: usize,
        limit_devs: &[&Device],
    ) -> Result<*mut c_void> {
        if self.strategy == UsmStrategy::None {
            return Err(self.feature_error(kind, device, "no USM"));
        }
        if self.keeps_freed() && kind == AllocKind::Device {
            if let Some(class) = crate::core::slab::class_of(size, align) {
                if let Some(p) = self.slab_alloc(class) {
                    return Ok(p);
                }
            }
        }
        let atomics = limit_devs.iter().all(|d| self.support(d).atomic_shared);
        let p = self.platform.driver.usm_alloc(
            self.handle(),
            self.strategy,
            kind,
            device.map(|d| d.handle()),
            size,
            align,
            atomics,
        )?;
        Ok(p as *mut c_void)
    }

    /// A slot of `class` bytes from a block of small device allocations,
    /// making a block if none has room; None if the back end gives no
    /// block.
    fn slab_alloc(&self, class: usize) -> Option<*mut c_void> {
        use crate::core::slab::{BLOCK, MIN_CLASS};
        let mut slabs = self.slabs.lock();
        if let Some(p) = slabs.take(class) {
            return Some(p as *mut c_void);
        }
        // A read-write block with the back end's alignment, checked below.
        let block = self
            .platform
            .driver
            .usm_alloc(
                self.handle(),
                self.strategy,
                AllocKind::Device,
                None,
                BLOCK,
                0,
                false,
            )
            .ok()?;
        if block == 0 || block % MIN_CLASS != 0 {
            if block != 0 {
                self.free_block(block);
            }
            return None;
        }
        Some(slabs.add_block(block, class) as *mut c_void)
    }

    /// Frees a USM allocation, first waiting for work that may use it.
    pub fn usm_free(&self, ptr: *mut c_void) -> Result<()> {
        let addr = ptr as usize;
        let removed = self.registry.lock().remove(addr);
        match removed {
            Ok(rec) => {
                // Every free waits for the context's queues: a kept block
                // is handed out again at once, and drivers do not wait for
                // every command using what they free (Intel's blocking free
                // let a queued copy read freed memory on its CPU runtime).
                self.finish_queues();
                if rec.pooled != 0 {
                    self.pool_freed(&rec);
                } else {
                    self.free_raw(rec.raw);
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
