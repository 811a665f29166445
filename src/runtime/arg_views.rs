//! Memory objects viewing USM memory, passed to kernels in place of
//! pointers where a driver launches faster that way: NVIDIA's OpenCL takes
//! about 0.3 µs less per launch with a memory object argument than with
//! an SVM pointer. A view is made at the first launch given the first
//! byte of a device allocation (a buffer's or the user's), covers the
//! memory as the context keeps it (a slot of a shared block, a pooled
//! block, the allocation), and is released when that memory goes back to
//! the driver. `SYRAH_ARG_VIEWS=on|off` forces the choice.

use super::buffer::views_work;
use super::context::{release_arg_mem, Context};
use crate::backend::MemH;
use crate::core::aspects::UsmStrategy;
use crate::core::registry::AllocKind;
use std::sync::Arc;

/// What `SYRAH_ARG_VIEWS` asks: Some(true) on, Some(false) off, None the
/// default.
fn forced() -> Option<bool> {
    static F: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    *F.get_or_init(|| match std::env::var("SYRAH_ARG_VIEWS").as_deref() {
        Ok("on") => Some(true),
        Ok("off") => Some(false),
        _ => None,
    })
}

impl Context {
    /// Whether kernels of this context get views for USM arguments: on
    /// OpenCL's SVM, where views see the same bytes as the pointers on
    /// every device, on NVIDIA's OpenCL unless `SYRAH_ARG_VIEWS` says
    /// otherwise.
    pub(crate) fn arg_views_on(self: &Arc<Self>) -> bool {
        *self.arg_views_on.get_or_init(|| {
            let wanted = forced().unwrap_or_else(|| self.platform.name.contains("NVIDIA"));
            // A back end taking arguments with each launch sets none on
            // kernels.
            wanted
                && self.strategy == UsmStrategy::Svm
                && !self.platform.driver.launch_takes_args()
                && self.devices.iter().all(|d| views_work(self, d))
        })
    }

    /// The view to pass for the USM pointer `p`: made now when `p` is the
    /// first byte of a device allocation of this context that has none;
    /// None where `p` is not (an address inside an allocation, one Syrah
    /// aligned inside a larger block) or the driver makes no view.
    pub(crate) fn arg_view(&self, p: usize) -> Option<MemH> {
        let mut views = self.arg_views.lock();
        if let Some(&m) = views.get(&p) {
            return Some(MemH(m));
        }
        let found = self.registry.lock().find(p)?;
        let rec = found.record;
        if found.base != p || rec.raw != p || rec.kind != AllocKind::Device {
            return None;
        }
        // The memory as it stays after a free: a pooled block or a slot
        // keeps its size for the next allocation made there.
        let bytes = if rec.pooled != 0 {
            rec.pooled
        } else {
            self.slabs.lock().slot_class(p).unwrap_or(rec.size)
        };
        let m = self.platform.driver.create_view(self.handle(), p, bytes)?;
        views.insert(p, m.0);
        Some(m)
    }

    /// Releases the views starting in `[lo, hi)`: the memory there goes
    /// back to the driver. Kernels still naming one as an argument are
    /// given their views again at their next launch (see
    /// `context::release_arg_mem`).
    pub(crate) fn forget_views(&self, lo: usize, hi: usize) {
        let gone: Vec<usize> = {
            let mut views = self.arg_views.lock();
            if views.is_empty() {
                return;
            }
            let keys: Vec<usize> = views.range(lo..hi).map(|(&k, _)| k).collect();
            keys.iter().filter_map(|k| views.remove(k)).collect()
        };
        for m in gone {
            release_arg_mem(self.platform.driver, MemH(m));
        }
    }

    /// Releases every view (the context is going, before its memory).
    pub(crate) fn forget_all_views(&mut self) {
        let views = std::mem::take(self.arg_views.get_mut());
        for (_, m) in views {
            release_arg_mem(self.platform.driver, MemH(m));
        }
    }
}
