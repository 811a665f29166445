//! Pinned bounce blocks for copies between a device and ordinary
//! (pageable) host memory: taken for a copy, and given back once what
//! reads or writes them has ended, to be reused by later copies.

use super::events::{create_event, drop_event};
use super::loader::{check, Api, CUevent, CUDA_SUCCESS, CU_MEMHOSTALLOC_PORTABLE};
use super::state::Stream;
use crate::core::error::Result;
use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A pinned bounce block.
pub struct Block {
    pub ptr: usize,
    pub size: usize,
}

/// Bounce blocks not in use (kept for the process: copies reuse them).
static FREE: Mutex<Vec<Block>> = Mutex::new(Vec::new());

/// A bounce block still read by a copy: free once `done` (an event of
/// context `ctx`, recorded on `stream` after the copy) has passed, or
/// once the stream is known to have completed command `seq` (0: not
/// known), which its `progress` tells without asking the driver.
struct InUse {
    block: Block,
    done: CUevent,
    ctx: usize,
    stream: usize,
    seq: u64,
    progress: Arc<AtomicU64>,
}

// SAFETY: the event is an opaque CUDA handle, used only with its context
// current.
unsafe impl Send for InUse {}

static IN_USE: Mutex<Vec<InUse>> = Mutex::new(Vec::new());

/// Gives `b` back at once: nothing reads or writes it any more.
pub fn give(b: Block) {
    FREE.lock().push(b);
}

/// Moves the blocks of `s`'s context whose copies have ended to `FREE`.
/// The list is in enqueue order per stream, and a stream runs in order:
/// once one of a stream's events has not passed, its later ones are not
/// asked about (the driver is asked about as many blocks as come free,
/// plus one per busy stream).
fn reclaim(api: &Api, s: &Stream) {
    let ctx = s.dev.ctx as usize;
    let mut in_use = IN_USE.lock();
    let mut busy: smallvec::SmallVec<[usize; 4]> = smallvec::SmallVec::new();
    let mut i = 0;
    while i < in_use.len() {
        let p = &in_use[i];
        if p.ctx != ctx || busy.contains(&p.stream) {
            i += 1;
            continue;
        }
        let known = p.seq != 0 && p.progress.load(Ordering::Acquire) >= p.seq;
        // SAFETY: a live event of the current context.
        if !known && unsafe { (api.cuEventQuery)(p.done) } != CUDA_SUCCESS {
            busy.push(p.stream);
            i += 1;
            continue;
        }
        let p = in_use.remove(i);
        // Asked about no more: kept for a later command.
        drop_event(api, s.dev.ctx, false, p.done);
        give(p.block);
    }
}

unsafe extern "C" fn give_later(user: *mut c_void) {
    // SAFETY: the Box made in `release_after`, given to exactly one host
    // function.
    give(*unsafe { Box::from_raw(user as *mut Block) });
}

/// Gives `b` back once what is enqueued on `s` (current) so far has run:
/// at the latest when command `seq` of `s` has (0 where the caller does
/// not know which command that is).
pub fn release_after(api: &Api, s: &Stream, seq: u64, b: Block) -> Result<()> {
    let done = match create_event(api, s.dev.ctx, false) {
        Ok(done) => done,
        Err(_) => return give_by_host_function(api, s, b),
    };
    // SAFETY: a live event and stream of the current context.
    if unsafe { (api.cuEventRecord)(done, s.raw) } != CUDA_SUCCESS {
        drop_event(api, s.dev.ctx, false, done);
        return give_by_host_function(api, s, b);
    }
    IN_USE.lock().push(InUse {
        block: b,
        done,
        ctx: s.dev.ctx as usize,
        stream: s.raw as usize,
        seq,
        progress: s.progress(),
    });
    Ok(())
}

/// Gives `b` back from a host function on `s`, once the stream reaches
/// it; where even that cannot be enqueued, the block is not reused.
fn give_by_host_function(api: &Api, s: &Stream, b: Block) -> Result<()> {
    let p = Box::into_raw(Box::new(b));
    // SAFETY: a live stream; the host function owns `p` once it runs.
    let rc = unsafe { (api.cuLaunchHostFunc)(s.raw, give_later, p as *mut c_void) };
    if rc != CUDA_SUCCESS {
        // SAFETY: not launched, so still ours. A copy may still use the
        // block: it is left allocated, and not reused.
        std::mem::forget(unsafe { Box::from_raw(p) });
    }
    check(api, rc, "cuLaunchHostFunc")
}

/// The smallest free block of at least `len` bytes.
fn take_free(len: usize) -> Option<Block> {
    let mut free = FREE.lock();
    let best = free
        .iter()
        .enumerate()
        .filter(|(_, b)| b.size >= len)
        .min_by_key(|(_, b)| b.size)
        .map(|(i, _)| i)?;
    Some(free.swap_remove(best))
}

/// A block of at least `len` bytes for a copy on `s` (current). Blocks
/// in use are asked about only when no free one fits: the one the last
/// copy took is most often still being read.
pub fn take(api: &Api, s: &Stream, len: usize) -> Result<Block> {
    if let Some(b) = take_free(len) {
        return Ok(b);
    }
    if !IN_USE.lock().is_empty() {
        reclaim(api, s);
        if let Some(b) = take_free(len) {
            return Ok(b);
        }
    }
    let size = len.max(64 * 1024).next_power_of_two();
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: `p` is a valid slot; a context is current.
    let rc = unsafe { (api.cuMemHostAlloc)(&mut p, size, CU_MEMHOSTALLOC_PORTABLE) };
    check(api, rc, "cuMemHostAlloc")?;
    Ok(Block {
        ptr: p as usize,
        size,
    })
}
