//! Contexts: a set of devices of one platform, their USM allocations and
//! their built programs.

use super::build_cache::{ProgramInner, ProgramKey};
use super::platform::{Device, Platform};
use crate::core::aspects::{usm_support, UsmStrategy, UsmSupport};
use crate::core::error::{Error, Result, Status};
use crate::core::pool::AllocCache;
use crate::core::registry::{AllocRecord, Registry};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static LIVE: Mutex<Vec<Weak<Context>>> = Mutex::new(Vec::new());

/// What a context asks of its queues, which it knows only through this.
pub trait QueueWork: Send + Sync {
    /// Waits for every command the queue was given, reporting nothing.
    fn finish_quietly(&self);
    /// Drops the records of finished commands, and what they held.
    fn prune_finished(&self);
}

pub struct Context {
    pub id: u64,
    /// The back end's context.
    pub raw: crate::backend::ContextH,
    pub platform: &'static Platform,
    pub devices: Vec<&'static Device>,
    /// The USM strategy every device of the context shares.
    pub strategy: UsmStrategy,
    /// Whether buffers' device storage is a memory object rather than USM:
    /// without USM, and where every device's kernels take hidden offsets
    /// (see `Device::kernel_offsets`).
    pub buffers_on_mem: bool,
    pub registry: Mutex<Registry>,
    pub(crate) programs: Mutex<HashMap<ProgramKey, Arc<ProgramInner>>>,
    pub(crate) queues: Mutex<Vec<Weak<dyn QueueWork>>>,
    /// Pinned staging rings, per device, made at first use: the staging
    /// module's `Stager`s, which the context only keeps.
    pub(crate) stagers: Mutex<Vec<(&'static Device, Arc<dyn std::any::Any + Send + Sync>)>>,
    /// Released buffers' device allocations, for reuse.
    pub(crate) dev_cache: Mutex<AllocCache<CachedAlloc>>,
    /// Released buffers' memory objects, where buffers live in memory
    /// objects, for reuse: a fresh one costs NVIDIA's driver tens of
    /// microseconds at its first use.
    pub(crate) mem_cache: Mutex<AllocCache<usize>>,
    /// Freed USM device allocations kept for reuse (see `usm_pool.rs`):
    /// the blocks' addresses by device and size class.
    pub(crate) usm_pool: Mutex<AllocCache<usize>>,
    /// Pinned host memory that is not host USM.
    pub(crate) pinned: Mutex<super::pinned_blocks::PinnedBlocks>,
    /// Blocks that small coarse-grain SVM allocations are carved from.
    pub(crate) slabs: Mutex<crate::core::slab::Slabs>,
    /// OpenCL queues of released Syrah queues, released with the context
    /// (see `defers_queue_release`).
    pub(crate) retired_queues: Mutex<Vec<usize>>,
    /// Memory objects viewing USM memory for kernel arguments, by the
    /// address they start at (see `arg_views.rs`).
    pub(crate) arg_views: Mutex<std::collections::BTreeMap<usize, usize>>,
    /// Whether kernels get those views (decided at the first launch).
    pub(crate) arg_views_on: std::sync::OnceLock<bool>,
    /// Queues of the back end for blocking reads into the host, one per
    /// device, made at first use (see `read_now.rs`).
    pub(crate) readers: Mutex<Vec<(&'static Device, crate::backend::QueueH)>>,
}

/// Counts Syrah's releases of memory objects that a kernel may name as an
/// argument (buffers' allocations, their sub-buffers, staging scratch,
/// views): a kernel trusts its record of which object an argument was set
/// to only while this stays, since a released object's handle may come
/// back for another. Kernels take no reference of their own on their
/// arguments (OpenCL lets an object go while a kernel names it, as long as
/// no launch uses it), which would cost two driver calls per change.
static MEM_GENERATION: AtomicU64 = AtomicU64::new(0);

/// The current count of [`release_arg_mem`] calls.
pub(crate) fn mem_generation() -> u64 {
    MEM_GENERATION.load(Ordering::Acquire)
}

/// Releases Syrah's reference to memory object `m`, which a kernel may
/// still name as an argument: kernels set their memory arguments again at
/// their next launch.
pub(crate) fn release_arg_mem(driver: &dyn crate::backend::Driver, m: crate::backend::MemH) {
    MEM_GENERATION.fetch_add(1, Ordering::AcqRel);
    driver.release_mem(m);
}

/// A released buffer's device allocation kept for reuse: its base, its
/// registry record (taken out of the registry while cached) and its view.
pub(crate) struct CachedAlloc {
    pub ptr: usize,
    pub record: AllocRecord,
    pub view: Option<usize>,
}

/// Bytes of released device allocations a context keeps at most: an
/// eighth of its devices' memory, up to 2 GiB.
fn cache_budget(devices: &[&'static Device]) -> usize {
    let total: u64 = devices.iter().map(|d| d.global_mem_size).sum();
    usize::try_from(total / 8)
        .unwrap_or(usize::MAX)
        .min(2 << 30)
}

impl Context {
    /// Creates a context over `devices`, which must share one platform.
    pub fn create(devices: &[&'static Device]) -> Result<Arc<Context>> {
        let first = devices
            .first()
            .ok_or_else(|| Error::invalid("a context needs at least one device (0 given)"))?;
        for (i, d) in devices.iter().enumerate() {
            if d.platform_index != first.platform_index {
                return Err(Error::invalid(format!(
                    "devices of a context must share a platform: device {} is on platform {} \
                     but device {} is on platform {}",
                    first.label(),
                    first.platform_index,
                    d.label(),
                    d.platform_index
                )));
            }
            if devices[..i].iter().any(|o| std::ptr::eq(*o, *d)) {
                return Err(Error::invalid(format!(
                    "device {} is listed twice for one context",
                    d.label()
                )));
            }
        }
        let platform = first.platform()?;
        let ids: Vec<crate::backend::DeviceH> = devices.iter().map(|d| d.handle()).collect();
        let raw = platform.driver.create_context(&ids)?;
        let strategy = if devices.iter().all(|d| d.strategy == UsmStrategy::IntelUsm) {
            UsmStrategy::IntelUsm
        } else if devices.iter().all(|d| d.strategy != UsmStrategy::None) {
            UsmStrategy::Svm
        } else {
            UsmStrategy::None
        };
        let ctx = Arc::new(Context {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            raw,
            platform,
            devices: devices.to_vec(),
            strategy,
            buffers_on_mem: strategy == UsmStrategy::None
                || devices.iter().all(|d| d.buffers_in_mem()),
            registry: Mutex::new(Registry::new()),
            programs: Mutex::new(HashMap::new()),
            queues: Mutex::new(Vec::new()),
            stagers: Mutex::new(Vec::new()),
            dev_cache: Mutex::new(AllocCache::new(cache_budget(devices))),
            mem_cache: Mutex::new(AllocCache::new(cache_budget(devices))),
            usm_pool: Mutex::new(AllocCache::new(cache_budget(devices))),
            pinned: Mutex::new(Default::default()),
            slabs: Mutex::new(Default::default()),
            retired_queues: Mutex::new(Vec::new()),
            arg_views: Mutex::new(Default::default()),
            arg_views_on: std::sync::OnceLock::new(),
            readers: Mutex::new(Vec::new()),
        });
        let mut live = LIVE.lock();
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&ctx));
        Ok(ctx)
    }

    /// Position of `d` among this context's devices.
    pub fn device_index(&self, d: &Device) -> Option<usize> {
        self.devices.iter().position(|o| std::ptr::eq(*o, d))
    }

    /// What USM `d` supports within this context.
    pub fn support(&self, d: &Device) -> UsmSupport {
        if self.strategy == d.strategy {
            d.usm
        } else {
            usm_support(self.strategy, &d.caps)
        }
    }

    pub fn require_device(&self, d: &Device) -> Result<usize> {
        self.device_index(d).ok_or_else(|| {
            Error::new(
                Status::WrongContext,
                format!(
                    "device {} is not part of context {} (its devices: {})",
                    d.label(),
                    self.id,
                    self.devices
                        .iter()
                        .map(|x| x.label())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })
    }

    /// Finishes every live queue of this context.
    pub fn finish_queues(&self) {
        let queues: Vec<Arc<dyn QueueWork>> = {
            let mut qs = self.queues.lock();
            qs.retain(|w| w.strong_count() > 0);
            qs.iter().filter_map(Weak::upgrade).collect()
        };
        for q in queues {
            q.finish_quietly();
        }
    }

    /// When `addr` belongs to another live context's USM, names that context.
    pub fn foreign_owner(&self, addr: usize) -> Option<u64> {
        let others: Vec<Arc<Context>> = LIVE.lock().iter().filter_map(Weak::upgrade).collect();
        others
            .iter()
            .filter(|c| c.id != self.id)
            .find(|c| c.registry.lock().find(addr).is_some())
            .map(|c| c.id)
    }

    /// Keeps a released buffer's device allocation (already out of the
    /// registry) for a later buffer of the same size on the same device;
    /// frees what no longer fits.
    pub(crate) fn keep_device_alloc(&self, c: CachedAlloc) {
        let (dev, size) = (c.record.device.unwrap_or(usize::MAX), c.record.size);
        let out = self.dev_cache.lock().put(dev, size, c);
        for c in out {
            self.free_cached(c);
        }
    }

    /// A kept allocation of exactly `size` bytes on `device`, back in the
    /// registry, with its view.
    pub(crate) fn reuse_device_alloc(
        &self,
        device: &Device,
        size: usize,
    ) -> Option<(usize, Option<usize>)> {
        let dev = self.devices.iter().position(|d| std::ptr::eq(*d, device))?;
        let c = self.dev_cache.lock().take(dev, size)?;
        if self.registry.lock().insert(c.ptr, c.record).is_err() {
            self.free_cached(c);
            return None;
        }
        Some((c.ptr, c.view))
    }

    /// Keeps a released buffer's memory object of `size` bytes, made for
    /// `device`, for a later buffer of that size there; releases what no
    /// longer fits.
    pub(crate) fn keep_device_mem(&self, device: &Device, size: usize, mem: usize) {
        let out = match self.device_index(device) {
            Some(dev) => self.mem_cache.lock().put(dev, size, mem),
            None => vec![mem],
        };
        self.release_mems(out);
    }

    /// Gives memory objects of released buffers back to the driver.
    fn release_mems(&self, mems: Vec<usize>) {
        for m in mems {
            release_arg_mem(self.platform.driver, crate::backend::MemH(m));
        }
    }

    /// A kept memory object of exactly `size` bytes made for `device`.
    pub(crate) fn reuse_device_mem(&self, device: &Device, size: usize) -> Option<usize> {
        let dev = self.device_index(device)?;
        self.mem_cache.lock().take(dev, size)
    }

    /// Frees every kept allocation and memory object (when memory runs
    /// short).
    pub(crate) fn drop_device_cache(&self) {
        let all = self.dev_cache.lock().drain();
        for c in all {
            self.free_cached(c);
        }
        let mems = self.mem_cache.lock().drain();
        self.release_mems(mems);
    }

    /// Lets every queue drop the finished commands at the front of its list,
    /// and with them the buffers only those commands still held.
    /// [`Context::reclaim`] on every live context.
    pub(crate) fn reclaim_all() {
        let live: Vec<Arc<Context>> = LIVE.lock().iter().filter_map(Weak::upgrade).collect();
        for c in live {
            c.reclaim();
        }
    }

    pub(crate) fn reclaim(&self) {
        let queues: Vec<Arc<dyn QueueWork>> = self
            .queues
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for q in queues {
            q.prune_finished();
        }
    }

    fn free_cached(&self, c: CachedAlloc) {
        if let Some(m) = c.view {
            // The view was made over this allocation and is released once,
            // before the memory under it.
            release_arg_mem(self.platform.driver, crate::backend::MemH(m));
        }
        self.free_raw(c.record.raw);
    }

    /// Whether freed device USM is kept for reuse and small device
    /// allocations are carved from shared blocks: on SVM, and where the
    /// back end asks for it (its allocations cost far more than reuse).
    pub(crate) fn keeps_freed(&self) -> bool {
        self.strategy == UsmStrategy::Svm || self.platform.driver.pools_device_allocations()
    }

    /// Gives back a USM allocation's memory (a slot of a shared block goes
    /// back to its block, which goes once empty).
    pub(crate) fn free_raw(&self, ptr: usize) {
        if self.keeps_freed() {
            let given = self.slabs.lock().give(ptr);
            match given {
                // The slot stays, with its view, for the next allocation.
                Some(None) => return,
                Some(Some(block)) => return self.free_block(block),
                None => {}
            }
        }
        self.forget_views(ptr, ptr + 1);
        self.platform
            .driver
            .usm_free(self.handle(), self.strategy, ptr);
    }

    /// Gives back a block of small device allocations, after the queues
    /// that could use it finished.
    pub(crate) fn free_block(&self, block: usize) {
        self.forget_views(block, block + crate::core::slab::BLOCK);
        self.platform
            .driver
            .usm_free(self.handle(), self.strategy, block);
    }
}

impl Context {
    /// The context as the back-end seam names it.
    pub fn handle(&self) -> crate::backend::ContextH {
        self.raw
    }

    /// Whether OpenCL queues are kept until the context goes. PoCL's
    /// clMemBlockingFreeINTEL walks the context's queues and aborts on one
    /// whose last reference is going at that moment, which happens on
    /// whichever thread releases a queue or the last event of a released
    /// queue; queues kept to the end are never in that state.
    pub(crate) fn defers_queue_release(&self) -> bool {
        self.strategy == UsmStrategy::IntelUsm
            && self.platform.name.contains("Portable Computing Language")
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // The readers' queues before the memory their reads used (their
        // reads were blocking: none is still running).
        for (_, q) in self.readers.get_mut().drain(..) {
            self.platform.driver.release_queue(q);
        }
        // Views first, before any memory under them.
        self.forget_all_views();
        let left = self.registry.get_mut().drain();
        for (_, rec) in left {
            self.free_raw(rec.raw);
        }
        self.programs.get_mut().clear();
        self.stagers.get_mut().clear();
        self.drop_pinned();
        for c in self.dev_cache.get_mut().drain() {
            self.free_cached(c);
        }
        let mems = self.mem_cache.get_mut().drain();
        self.release_mems(mems);
        for raw in self.usm_pool.get_mut().drain() {
            self.free_raw(raw);
        }
        for block in self.slabs.get_mut().drain() {
            self.free_block(block);
        }
        let driver = self.platform.driver;
        for q in self.retired_queues.get_mut().drain(..) {
            // A queue of this context whose Syrah queue is gone, kept with
            // its one reference for this moment.
            driver.release_queue(crate::backend::QueueH(q));
        }
        driver.release_context(self.raw);
    }
}
