//! Freed device USM allocations kept for reuse, per context and device, by
//! size class: on SVM, where the driver takes about 0.5 ms per MiB to
//! allocate and 0.2 ms per MiB to free, a program that frees and allocates
//! the same sizes again (every iteration of a loop) pays that once. The
//! blocks go back to the driver when memory runs short, when the context
//! goes and on `syrah_context_trim`. `SYRAH_USM_POOL=off` turns it off.

use super::context::Context;
use super::platform::Device;
use crate::core::error::{Result, Status};
use crate::core::pool::pool_class;
use crate::core::registry::{AllocKind, AllocRecord};
use std::ffi::c_void;

/// Whether freed device allocations are pooled (`SYRAH_USM_POOL` unset or
/// not `off`).
fn pooling() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("SYRAH_USM_POOL").map_or(true, |v| v != "off"))
}

impl Context {
    /// The block size a device allocation of `size` bytes aligned to
    /// `align` on `device` is pooled as, if it is: SVM device memory (or
    /// any where the back end asks for it) above the sizes carved from
    /// shared blocks, where the block fits the device.
    fn pool_class_for(&self, device: &Device, size: usize, align: usize) -> Option<usize> {
        if !self.keeps_freed() || !pooling() || crate::core::slab::class_of(size, align).is_some() {
            return None;
        }
        let class = pool_class(size);
        (class as u64 <= device.max_mem_alloc_size).then_some(class)
    }

    /// A USM allocation the user asked for: [`Context::usm_alloc`], with
    /// device allocations taken from the pool where they can be.
    pub fn usm_malloc(
        &self,
        kind: AllocKind,
        device: Option<&'static Device>,
        size: usize,
        align: usize,
    ) -> Result<*mut c_void> {
        let class = match (kind, device) {
            (AllocKind::Device, Some(d)) if size > 0 => self.pool_class_for(d, size, align),
            _ => None,
        };
        let (Some(class), Some(d)) = (class, device) else {
            return self.usm_alloc(kind, device, size, align);
        };
        let dev = self.require_device(d)?;
        let kept = self.usm_pool.lock().take(dev, class);
        if let Some(raw) = kept {
            if raw % align.max(1) == 0 {
                let rec = AllocRecord {
                    size,
                    kind,
                    device: Some(dev),
                    raw,
                    pooled: class,
                };
                match self.registry.lock().insert(raw, rec) {
                    Ok(()) => return Ok(raw as *mut c_void),
                    Err(_) => self.free_pooled(raw),
                }
            } else {
                // Not aligned as asked: back for another allocation.
                self.keep_pooled(dev, class, raw);
            }
        }
        let p = match self.usm_alloc(kind, device, class, align) {
            Err(e) if e.status == Status::OutOfDeviceMemory => {
                // What is kept for reuse goes back first.
                self.trim();
                self.usm_alloc(kind, device, class, align)?
            }
            r => r?,
        };
        // The record names the size asked for; a block Syrah aligned itself
        // goes back to the driver when freed, not to the pool.
        let mut reg = self.registry.lock();
        if let Ok(rec) = reg.remove(p as usize) {
            let pooled = if rec.raw == p as usize { class } else { 0 };
            reg.insert(
                p as usize,
                AllocRecord {
                    size,
                    pooled,
                    ..rec
                },
            )?;
        }
        Ok(p)
    }

    /// Keeps the block of a freed pooled allocation (its record already
    /// out of the registry, the queues that could use it finished).
    pub(crate) fn pool_freed(&self, rec: &AllocRecord) {
        self.keep_pooled(rec.device.unwrap_or(usize::MAX), rec.pooled, rec.raw);
    }

    fn keep_pooled(&self, dev: usize, class: usize, raw: usize) {
        let out = self.usm_pool.lock().put(dev, class, raw);
        for raw in out {
            self.free_pooled(raw);
        }
    }

    fn free_pooled(&self, raw: usize) {
        self.free_raw(raw);
    }

    /// Gives the device memory kept for reuse back to the driver: freed USM
    /// allocations and released buffers' allocations.
    pub fn trim(&self) {
        let blocks = self.usm_pool.lock().drain();
        for raw in blocks {
            self.free_pooled(raw);
        }
        self.drop_device_cache();
    }

    /// Bytes of freed USM allocations kept for reuse.
    pub fn pooled_bytes(&self) -> usize {
        self.usm_pool.lock().bytes()
    }
}
