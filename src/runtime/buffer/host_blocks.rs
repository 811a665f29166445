//! Page-locked host storage of the default allocator, where a back end
//! page-locks host memory (CUDA): large blocks locked one by one, small
//! ones cut out of locked slabs. Copies between such storage and a device
//! go straight and in stream order, instead of through the driver's
//! staging of ordinary memory.

use crate::backend::Driver;
use crate::core::slab::{class_of, Slabs, BLOCK, MAX_CLASS, MIN_CLASS};
use parking_lot::Mutex;
use std::sync::LazyLock;

/// Blocks from this size (above the largest slab slot) up to
/// [`PIN_UP_TO`] are page-locked one by one when made; they are kept for
/// reuse, so the cost of locking them is paid once.
pub(crate) const PIN_FROM: usize = MAX_CLASS + 1;

/// Up to this size a new large block is page-locked.
const PIN_UP_TO: usize = 64 << 20;

/// Host memory locked at most, all blocks and slabs together.
const PINNED_AT_MOST: usize = 1 << 30;

/// Host blocks a back end page-locked: address, bytes and that back end.
static PINNED: Mutex<Vec<(usize, usize, &'static dyn Driver)>> = Mutex::new(Vec::new());

/// The slabs small host blocks are cut from, all page-locked.
static SMALL: LazyLock<Mutex<Slabs>> = LazyLock::new(|| Mutex::new(Slabs::default()));

/// Locks `bytes` at `p` through the first back end that does it, within
/// [`PINNED_AT_MOST`]; true when locked.
fn lock_memory(p: usize, bytes: usize) -> bool {
    let Ok(rt) = crate::runtime::platform::runtime() else {
        return false;
    };
    let mut pinned = PINNED.lock();
    if pinned.iter().map(|b| b.1).sum::<usize>() + bytes > PINNED_AT_MOST {
        return false;
    }
    match rt.platforms.iter().find(|pl| pl.driver.pin_host(p, bytes)) {
        Some(pl) => {
            pinned.push((p, bytes, pl.driver));
            true
        }
        None => false,
    }
}

/// Page-locks a new large host block of `bytes` bytes at `p` (see
/// [`PIN_FROM`]).
pub(crate) fn pin_block(p: usize, bytes: usize) {
    if (PIN_FROM..=PIN_UP_TO).contains(&bytes) {
        lock_memory(p, bytes);
    }
}

/// Undoes [`pin_block`] for the block at `p`, if it was page-locked.
pub(crate) fn unpin_block(p: usize) {
    let by = {
        let mut pinned = PINNED.lock();
        pinned
            .iter()
            .position(|b| b.0 == p)
            .map(|i| pinned.swap_remove(i).2)
    };
    if let Some(d) = by {
        d.unpin_host(p);
    }
}

/// A page-locked host block of `bytes` bytes, aligned to a page, cut out
/// of a slab; None where the block is too large for one or no back end
/// locks memory now.
pub(crate) fn take_small(bytes: usize) -> Option<usize> {
    let class = class_of(bytes, MIN_CLASS)?;
    let mut slabs = SMALL.lock();
    if let Some(p) = slabs.take(class) {
        return Some(p);
    }
    let rt = crate::runtime::platform::runtime().ok()?;
    if !rt.platforms.iter().any(|pl| pl.driver.can_pin_host()) {
        return None;
    }
    let layout = std::alloc::Layout::from_size_align(BLOCK, MIN_CLASS).ok()?;
    // SAFETY: a valid layout of non-zero size.
    let base = unsafe { std::alloc::alloc(layout) } as usize;
    if base == 0 {
        return None;
    }
    if !lock_memory(base, BLOCK) {
        // SAFETY: allocated just above with this layout.
        unsafe { std::alloc::dealloc(base as *mut u8, layout) };
        return None;
    }
    Some(slabs.add_block(base, class))
}

/// Gives back `p` if [`take_small`] made it (true), freeing its slab when
/// that is left empty while another of its size has room.
pub(crate) fn give_small(p: usize) -> bool {
    let freed = match SMALL.lock().give(p) {
        None => return false,
        Some(f) => f,
    };
    if let Some(base) = freed {
        unpin_block(base);
        if let Ok(layout) = std::alloc::Layout::from_size_align(BLOCK, MIN_CLASS) {
            // SAFETY: a slab allocated in `take_small` with this layout,
            // no longer in the books.
            unsafe { std::alloc::dealloc(base as *mut u8, layout) };
        }
    }
    true
}
