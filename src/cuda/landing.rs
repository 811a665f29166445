//! Copies from a device into ordinary (pageable) host memory behind
//! running work, landed by a thread of their own. The device copies into
//! a pinned bounce block chunk by chunk and, after each chunk, writes a
//! word of pinned host memory mapped into it; the landing thread copies
//! each chunk on as its word says it arrived (a large chunk with several
//! threads), then writes a second word, which the stream waits for before
//! anything enqueued after the copy. The stream stays in order as a host
//! function on it would keep it, but the host's part starts at once (the
//! thread looks without sleeping while copies are pending), overlaps the
//! device's copy of the later chunks, and never calls CUDA: the stream
//! needs nothing from the driver's host side to go on. A copy between two
//! ranges of host memory in stream order (ordinary memory read behind
//! work that may write it) is done the same way, in one step.

use super::bounce::{give, release_after, take, Block};
use super::loader::{
    check, is_lost, lost_count, Api, CUresult, StreamOps, CUDA_ERROR_NOT_SUPPORTED, CUDA_SUCCESS,
    CU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTALLOC_PORTABLE, CU_STREAM_WAIT_VALUE_GEQ,
    CU_STREAM_WRITE_VALUE_DEFAULT,
};
use super::state::Stream;
use crate::core::error::Result;
use parking_lot::{Condvar, Mutex};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Bytes of one slot: two words, on a cache line of their own.
const SLOT: usize = 64;
/// Bytes of pinned memory allocated at a time for slots.
const PAGE: usize = 4096;

/// Two words of mapped pinned memory: `arrived` (offset 0), written by
/// the device after each chunk, and `landed` (offset 4), written by the
/// landing thread. Both only grow (cyclically): each use of a slot goes on
/// from the values the last one left, so a late read of an old value
/// never satisfies a newer wait.
struct Slot {
    host: usize,
    dev: u64,
    /// The last value the device was told to write to `arrived`.
    arrived: u32,
    /// The last value the landing thread was asked to write to `landed`.
    landed: u32,
}

impl Slot {
    fn word(&self, at: usize) -> &AtomicU32 {
        // SAFETY: the slot lies in a pinned page that is never freed, is
        // aligned to `SLOT`, and its words are only accessed atomically by
        // the host.
        unsafe { &*((self.host + at) as *const AtomicU32) }
    }
}

/// Slots not in use.
static SLOTS: Mutex<Vec<Slot>> = Mutex::new(Vec::new());

/// Set once the driver refused a stream memory operation as unsupported:
/// copies go through host functions from then on.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// Whether `word` has reached `value`, compared cyclically.
fn reached(word: u32, value: u32) -> bool {
    word.wrapping_sub(value) as i32 >= 0
}

/// A slot, from those not in use or from a new pinned page (a context is
/// current).
fn take_slot(api: &Api, ops: &StreamOps) -> Result<Slot> {
    if let Some(s) = SLOTS.lock().pop() {
        return Ok(s);
    }
    let mut p: *mut c_void = std::ptr::null_mut();
    let flags = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP;
    // SAFETY: `p` is a valid slot; a context is current.
    let rc = unsafe { (api.cuMemHostAlloc)(&mut p, PAGE, flags) };
    check(api, rc, "cuMemHostAlloc")?;
    let mut dev = 0u64;
    // SAFETY: `p` was allocated mapped just now; `dev` is a valid slot.
    let rc = unsafe { (ops.device_pointer)(&mut dev, p, 0) };
    if rc != CUDA_SUCCESS {
        // SAFETY: allocated above, used by nothing yet.
        unsafe { (api.cuMemFreeHost)(p) };
        check(api, rc, "cuMemHostGetDevicePointer")?;
    }
    // SAFETY: `PAGE` bytes were just allocated at `p`.
    unsafe { std::ptr::write_bytes(p as *mut u8, 0, PAGE) };
    let mut slots = SLOTS.lock();
    for k in 1..PAGE / SLOT {
        slots.push(Slot {
            host: p as usize + k * SLOT,
            dev: dev + (k * SLOT) as u64,
            arrived: 0,
            landed: 0,
        });
    }
    Ok(Slot {
        host: p as usize,
        dev,
        arrived: 0,
        landed: 0,
    })
}

/// One copy the landing thread does: from `src` to `dst`, chunk by chunk
/// as the stream marks each arrived.
struct Landing {
    /// The context of the stream that copies the chunks.
    ctx: usize,
    slot: Slot,
    /// The bounce block the chunks arrive in, given back afterwards.
    block: Option<Block>,
    dst: usize,
    src: usize,
    len: usize,
    chunk: usize,
    /// `arrived` before the first chunk, and the chunks copied on so far.
    first: u32,
    copied: u32,
    chunks: u32,
}

impl Landing {
    /// Copies on the chunks that have arrived; whether any did.
    fn advance(&mut self) -> bool {
        let arrived = self.slot.word(0).load(Ordering::Acquire);
        let mut moved = false;
        while self.copied < self.chunks
            && reached(arrived, self.first.wrapping_add(self.copied + 1))
        {
            let at = self.copied as usize * self.chunk;
            copy_on(self.dst + at, self.src + at, self.chunk.min(self.len - at));
            self.copied += 1;
            moved = true;
        }
        moved
    }

    /// Lets the stream go on, and gives back the block and the slot (also
    /// for a landing whose context was lost: its device writes neither
    /// again).
    fn finish(self) {
        self.slot.word(4).store(self.slot.landed, Ordering::Release);
        if let Some(b) = self.block {
            give(b);
        }
        SLOTS.lock().push(self.slot);
    }
}

/// Bytes of one piece of a chunk copied by one thread.
const PIECE: usize = 256 << 10;

/// Copies `len` bytes of host memory from `src` to `dst`: several
/// threads for more than a piece (one thread copies ordinary memory at a
/// fraction of what the host's memory can take).
fn copy_on(dst: usize, src: usize, len: usize) {
    let one = move |at: usize, n: usize| {
        // SAFETY: the command's contract: `src` and `dst` are host memory
        // valid for the copy's bytes until it ends.
        unsafe { std::ptr::copy_nonoverlapping((src + at) as *const u8, (dst + at) as *mut u8, n) }
    };
    match copiers() {
        Some(pool) if len > PIECE => {
            AWAKE.fetch_add(1, Ordering::AcqRel);
            use rayon::prelude::*;
            pool.install(|| {
                (0..len.div_ceil(PIECE))
                    .into_par_iter()
                    .for_each(|i| one(i * PIECE, PIECE.min(len - i * PIECE)))
            });
        }
        _ => one(0, len),
    }
}

/// The threads that copy pieces; `None` where none could be started.
fn copiers() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| crate::core::staging::copy_pool("syrah-cuda-land").ok())
        .as_ref()
}

/// Changed when a copy is handed to the copying threads: those kept
/// awake for it stop spinning and take it.
static AWAKE: AtomicU64 = AtomicU64::new(0);

/// How long the copying threads are kept awake at most.
const KEEP: Duration = Duration::from_micros(500);

/// Keeps the copying threads awake, spinning until `AWAKE` changes from
/// `seen` or for [`KEEP`] at most: a thread woken from sleep takes tens of
/// µs to start, which every chunk would pay.
fn keep_awake(pool: &'static rayon::ThreadPool, seen: u64) {
    pool.spawn_broadcast(move |_| {
        let t = Instant::now();
        while AWAKE.load(Ordering::Acquire) == seen && t.elapsed() < KEEP {
            std::hint::spin_loop();
        }
    });
}

/// Landings handed to the thread, and what wakes it.
static NEW: (Mutex<Vec<Landing>>, Condvar) = (Mutex::new(Vec::new()), Condvar::new());

/// How long the thread keeps looking without sleeping after a landing
/// came or a chunk arrived: a short copy's chunk arrives that soon, and
/// waking from a sleep would add to every one.
const SPIN: Duration = Duration::from_micros(200);
/// The longest sleep between looks while landings are pending.
const NAP: Duration = Duration::from_micros(50);

fn landing_loop() {
    let mut mine: Vec<Landing> = Vec::new();
    let mut busy = Instant::now();
    let mut kept = None;
    let mut lost_seen = 0;
    loop {
        let mut came = false;
        {
            let mut new = NEW.0.lock();
            if mine.is_empty() && new.is_empty() {
                NEW.1.wait(&mut new);
            } else if new.is_empty() && busy.elapsed() >= SPIN {
                NEW.1.wait_for(&mut new, NAP);
            }
            if !new.is_empty() {
                mine.append(&mut new);
                busy = Instant::now();
                came = true;
            }
        }
        // A lost context's device marks no more chunks: its landings end
        // as they are, and the thread does not look for them forever.
        let lost = lost_count();
        if lost > 0 && (came || lost != lost_seen) {
            lost_seen = lost;
            let mut i = 0;
            while i < mine.len() {
                if is_lost(mine[i].ctx) {
                    mine.swap_remove(i).finish();
                } else {
                    i += 1;
                }
            }
        }
        if let Some(pool) = copiers() {
            let seen = AWAKE.load(Ordering::Acquire);
            if kept != Some(seen) && mine.iter().any(|l| l.len > PIECE) {
                keep_awake(pool, seen);
                kept = Some(seen);
            }
        }
        let mut i = 0;
        while i < mine.len() {
            if mine[i].advance() {
                busy = Instant::now();
            }
            if mine[i].copied == mine[i].chunks {
                mine.swap_remove(i).finish();
            } else {
                i += 1;
            }
        }
        if !mine.is_empty() {
            std::hint::spin_loop();
        }
    }
}

/// Whether the landing thread runs (started on first use).
fn started() -> bool {
    static STARTED: OnceLock<bool> = OnceLock::new();
    *STARTED.get_or_init(|| {
        std::thread::Builder::new()
            .name("syrah-landing".into())
            .spawn(landing_loop)
            .is_ok()
    })
}

/// The chunk a copy of `len` bytes is cut into: whole up to 1 MiB, else
/// at most 16 chunks of at least 1 MiB.
fn chunk_for(len: usize) -> usize {
    const MIN: usize = 1 << 20;
    if len <= MIN {
        return len.max(1);
    }
    len.div_ceil(16).next_multiple_of(64 << 10).max(MIN)
}

/// Has `s` write `value` to `slot`'s `arrived` word once it gets there.
fn mark(ops: &StreamOps, s: &Stream, slot: &Slot, value: u32) -> CUresult {
    // SAFETY: a live stream; the slot's word is mapped pinned memory the
    // device may write.
    unsafe { (ops.write)(s.raw, slot.dev, value, CU_STREAM_WRITE_VALUE_DEFAULT) }
}

/// The stream memory operations and a slot, where this way is available:
/// the driver has them, the landing thread runs and a slot is at hand.
fn ready(api: &Api) -> Option<(StreamOps, Slot)> {
    let ops = api.stream_ops?;
    if UNSUPPORTED.load(Ordering::Relaxed) || !started() {
        return None;
    }
    let slot = take_slot(api, &ops).ok()?;
    Some((ops, slot))
}

/// Enqueues on `s` (current, its tail held) a copy of `len` bytes from
/// device-visible `src` to ordinary memory at `dst`, landed by the landing
/// thread; `false` where this way is not available and nothing was
/// enqueued.
pub fn land(api: &Api, s: &Stream, dst: u64, src: u64, len: usize) -> Result<bool> {
    let Some((ops, mut slot)) = ready(api) else {
        return Ok(false);
    };
    let block = match take(api, s, len) {
        Ok(b) => b,
        Err(e) => {
            SLOTS.lock().push(slot);
            return Err(e);
        }
    };
    let chunk = chunk_for(len);
    let chunks = len.div_ceil(chunk) as u32;
    let first = slot.arrived;
    for i in 0..chunks {
        let at = i as usize * chunk;
        let n = chunk.min(len - at);
        // SAFETY: `src` holds `len` bytes the device can read (the
        // caller's checks) and the block at least `len`.
        let copied =
            unsafe { (api.cuMemcpyAsync)(block.ptr as u64 + at as u64, src + at as u64, n, s.raw) };
        let (rc, what) = match copied {
            CUDA_SUCCESS => (
                mark(&ops, s, &slot, first.wrapping_add(i + 1)),
                "cuStreamWriteValue32",
            ),
            rc => (rc, "cuMemcpyAsync"),
        };
        if rc != CUDA_SUCCESS {
            // Copies already enqueued still write the block; the device
            // may still write the slot, which is not used again (dropped
            // here, its memory stays allocated).
            release_after(api, s, 0, block)?;
            if rc == CUDA_ERROR_NOT_SUPPORTED && i == 0 && copied == CUDA_SUCCESS {
                UNSUPPORTED.store(true, Ordering::Relaxed);
                return Ok(false);
            }
            return check(api, rc, what).map(|_| false);
        }
        slot.arrived = first.wrapping_add(i + 1);
    }
    let landing = Landing {
        ctx: s.dev.ctx as usize,
        slot,
        dst: dst as usize,
        src: block.ptr,
        block: Some(block),
        len,
        chunk,
        first,
        copied: 0,
        chunks,
    };
    hand_over(api, &ops, s, landing)
}

/// Enqueues on `s` (current, its tail held) a copy of `len` bytes between
/// two ranges of host memory that the landing thread does when the stream
/// reaches it, the stream waiting for it before what is enqueued next;
/// `false` where this way is not available and nothing was enqueued.
pub fn host_copy(api: &Api, s: &Stream, dst: u64, src: u64, len: usize) -> Result<bool> {
    let Some((ops, mut slot)) = ready(api) else {
        return Ok(false);
    };
    let first = slot.arrived;
    let rc = mark(&ops, s, &slot, first.wrapping_add(1));
    if rc != CUDA_SUCCESS {
        // Nothing was enqueued: the slot is as it was.
        SLOTS.lock().push(slot);
        if rc == CUDA_ERROR_NOT_SUPPORTED {
            UNSUPPORTED.store(true, Ordering::Relaxed);
            return Ok(false);
        }
        return check(api, rc, "cuStreamWriteValue32").map(|_| false);
    }
    slot.arrived = first.wrapping_add(1);
    let landing = Landing {
        ctx: s.dev.ctx as usize,
        slot,
        block: None,
        dst: dst as usize,
        src: src as usize,
        len,
        chunk: len.max(1),
        first,
        copied: 0,
        chunks: 1,
    };
    hand_over(api, &ops, s, landing)
}

/// Makes `s` wait for `l` to be done, and hands it to the landing thread.
fn hand_over(api: &Api, ops: &StreamOps, s: &Stream, mut l: Landing) -> Result<bool> {
    l.slot.landed = l.slot.landed.wrapping_add(1);
    let (landed, want) = (l.slot.dev + 4, l.slot.landed);
    let word = l.slot.word(4) as *const AtomicU32 as usize;
    // SAFETY: a live stream; the word is mapped pinned memory.
    let rc = unsafe { (ops.wait)(s.raw, landed, want, CU_STREAM_WAIT_VALUE_GEQ) };
    NEW.0.lock().push(l);
    NEW.1.notify_one();
    if rc != CUDA_SUCCESS {
        // The stream does not wait for the landing: the data lands before
        // the command is said to have ended (here, with its failure). A
        // stream that cannot finish what it was given never marks it, and
        // then nothing lands: its own failure is the one reported.
        // SAFETY: a live stream.
        let synced = unsafe { (api.cuStreamSynchronize)(s.raw) };
        check(api, synced, "cuStreamSynchronize")?;
        // SAFETY: the slot's word lies in a page that is never freed.
        let w = unsafe { &*(word as *const AtomicU32) };
        while !reached(w.load(Ordering::Acquire), want) {
            std::thread::yield_now();
        }
        return check(api, rc, "cuStreamWaitValue32").map(|_| true);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_compare_cyclically() {
        assert!(reached(5, 5));
        assert!(reached(6, 5));
        assert!(!reached(4, 5));
        assert!(reached(2, u32::MAX - 1));
        assert!(!reached(u32::MAX - 1, 2));
    }

    #[test]
    fn chunks_cover_copies_in_at_most_sixteen_pieces() {
        assert_eq!(chunk_for(1), 1);
        assert_eq!(chunk_for(64 << 10), 64 << 10);
        assert_eq!(chunk_for(1 << 20), 1 << 20);
        assert_eq!(chunk_for((1 << 20) + 1), 1 << 20);
        assert_eq!(chunk_for(64 << 20), 4 << 20);
        for len in [(1usize << 20) + 1, 3 << 20, (16 << 20) + 5, 1 << 30] {
            let c = chunk_for(len);
            assert!(c >= 1 << 20);
            assert!(len.div_ceil(c) <= 16, "{len}");
        }
    }
}
