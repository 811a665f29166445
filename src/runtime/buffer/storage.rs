//! A buffer's storage and its state: the host memory and its allocator,
//! one allocation per device, the page bits saying where each page is
//! current, the tracker of the commands using it, and the owner and views
//! the user's handles stand for.

use super::host_blocks;
use crate::backend::MemH;
use crate::core::counted::Counted;
use crate::core::deps::Tracker;
use crate::core::error::{Error, Result, Status};
use crate::core::page_maps::PageMaps;
use crate::core::pages::Geometry;
use crate::core::pool::AllocCache;
use crate::runtime::context::{release_arg_mem, CachedAlloc, Context};
use crate::runtime::event::Event;
use crate::runtime::platform::Device;
use crate::runtime::queue::{LanePos, Queue};
use parking_lot::lock_api::RawMutex as _;
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Dependencies of one command, kept inline while few.
pub type Deps = SmallVec<[Arc<Event>; 8]>;

/// Access modes of accessors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
    ReadWrite,
    DiscardWrite,
    DiscardReadWrite,
}

impl Mode {
    pub fn writes(self) -> bool {
        self != Mode::Read
    }
    /// Whether the accessor needs the current contents.
    pub fn needs_data(self) -> bool {
        matches!(self, Mode::Read | Mode::Write | Mode::ReadWrite)
    }
    pub fn name(self) -> &'static str {
        match self {
            Mode::Read => "read",
            Mode::Write => "write",
            Mode::ReadWrite => "read_write",
            Mode::DiscardWrite => "discard_write",
            Mode::DiscardReadWrite => "discard_read_write",
        }
    }
}

/// What happens to the user's host memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// No host memory: the buffer starts uninitialised.
    None,
    /// The runtime uses the memory until release and writes back then.
    WriteBack,
    /// The data is copied in at creation; nothing is written back.
    CopyIn,
    /// Read-only data, never written, used until release; no write-back.
    ReadOnly,
    /// Shared: at release `still_shared` decides whether to write back.
    Shared,
}

/// User callbacks for the runtime's host memory.
pub struct Allocator {
    pub allocate: unsafe extern "C" fn(usize, usize, *mut c_void) -> *mut c_void,
    pub deallocate: Option<unsafe extern "C" fn(*mut c_void, usize, *mut c_void)>,
    pub release: Option<unsafe extern "C" fn(*mut c_void)>,
    pub user_data: usize,
}

impl Drop for Allocator {
    fn drop(&mut self) {
        if let Some(r) = self.release {
            // SAFETY: the user's release callback, called once when the
            // runtime's last use of the allocator is over.
            unsafe { r(self.user_data as *mut c_void) };
        }
    }
}

/// Callback deciding write-back of shared memory at release.
pub type StillShared = unsafe extern "C" fn(*mut c_void) -> bool;

pub(crate) const HOST_ALIGN: usize = 4096;

pub(crate) enum HostMem {
    None,
    User { ptr: usize, writable: bool },
    Owned { ptr: usize },
}

pub(crate) struct DevAlloc {
    pub(crate) ctx: Arc<Context>,
    pub(crate) device: &'static Device,
    pub(crate) ptr: usize,
    /// A `cl_mem` over the same memory, for rectangular copies, where the
    /// device honours it (see `views_work`).
    pub(crate) mem: Option<usize>,
    /// Sub-buffers of `mem` by origin, for accessors at an offset on a
    /// device without USM.
    pub(crate) subs: Vec<(usize, usize)>,
    /// Queue for copies out of this allocation, made on first need.
    pub(crate) queue: Option<Arc<Queue>>,
}

/// A copy of the first device allocation's identity and addresses.
#[derive(Clone, Copy)]
pub(crate) struct FirstDev {
    pub(crate) ctx_id: u64,
    pub(crate) device: &'static Device,
    pub(crate) ptr: usize,
    pub(crate) mem: usize,
}

impl State {
    /// The index (from 1) of the allocation of `ctx` on `device`, if any.
    pub(crate) fn dev_index(&self, ctx: &Context, device: &'static Device) -> Option<usize> {
        if let Some(f) = &self.first {
            if f.ctx_id == ctx.id && std::ptr::eq(f.device, device) {
                return Some(1);
            }
        }
        self.devs
            .iter()
            .position(|d| d.ctx.id == ctx.id && std::ptr::eq(d.device, device))
            .map(|i| i + 1)
    }

    /// The device address (0: none) and whole memory object (0: none) of
    /// allocation `alloc` (from 1).
    pub(crate) fn dev_addresses(&self, alloc: usize) -> (usize, usize) {
        match &self.first {
            Some(f) if alloc == 1 => (f.ptr, f.mem),
            _ => {
                let d = &self.devs[alloc - 1];
                (d.ptr, d.mem.unwrap_or(0))
            }
        }
    }
}

/// State of an active host accessor that commands may have to wait for.
pub struct HostHold {
    pub(crate) released: AtomicBool,
    /// One user event per context that a conflicting command waited on.
    pub(crate) gates: Mutex<Vec<Arc<Event>>>,
}

impl HostHold {
    pub(crate) fn gate(&self, ctx: &Context) -> Result<Arc<Event>> {
        let mut g = self.gates.lock();
        if let Some(e) = g.iter().find(|e| e.ctx_id == ctx.id) {
            return Ok(e.clone());
        }
        let e = Event::create_user(ctx)?;
        if self.released.load(Ordering::Acquire) {
            e.complete_user(false)?;
        }
        g.push(e.clone());
        Ok(e)
    }

    pub(crate) fn release(&self) {
        self.released.store(true, Ordering::Release);
        for e in self.gates.lock().iter() {
            let _ = e.complete_user(false);
        }
    }
}

#[derive(Clone)]
pub(crate) enum Token {
    Cmd(Arc<Event>),
    /// A command enqueued without an event on an in-order lane.
    Lane(LanePos),
    Host(Arc<HostHold>),
}

impl Token {
    /// An event to wait on for this access (None: nothing to wait for).
    /// Sets `loose` when the event also waits for later commands (see
    /// `State::eventful`).
    pub(crate) fn event(&self, ctx: &Context, loose: &mut bool) -> Result<Option<Arc<Event>>> {
        match self {
            Token::Cmd(e) => Ok(Some(e.clone())),
            Token::Lane(p) => {
                let (e, exact) = p.event_exact()?;
                *loose |= !exact;
                Ok(e)
            }
            Token::Host(h) => h.gate(ctx).map(Some),
        }
    }
}

/// Bytes moved and copy commands issued, per direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub h2d_bytes: u64,
    pub d2h_bytes: u64,
    pub d2d_bytes: u64,
    pub h2d_copies: u64,
    pub d2h_copies: u64,
    pub d2d_copies: u64,
}

#[repr(C)]
pub(crate) struct State {
    // What every command reads first, together at the start (`repr(C)`
    // keeps this order): the records, the page maps and their summaries,
    // the first allocation, then what is read less often.
    pub(crate) tracker: Tracker<Token>,
    /// bits[0] is the host; bits[i] is devs[i - 1].
    pub(crate) bits: PageMaps,
    /// What most commands need of `devs[0]`, kept in the state itself: the
    /// allocation they use, found without a step into `devs`.
    pub(crate) first: Option<FirstDev>,
    /// Tracker length at which finished accesses are next looked for.
    pub(crate) prune_at: usize,
    /// Some page has been current somewhere: without that, nothing moves.
    pub(crate) has_data: bool,
    /// Commands using the buffer keep their events: another queue, device
    /// or the host once waited for one that went without, and the marker
    /// standing for it also waited for the commands after it (which, for a
    /// buffer whose pages move between devices, serialises the devices).
    pub(crate) eventful: bool,
    pub(crate) devs: Vec<DevAlloc>,
    pub(crate) host: HostMem,
    pub(crate) stats: Stats,
}

impl State {
    /// Asks for the cache lines a command's look at the state reads next
    /// (its records; the rest is in the state itself).
    pub(crate) fn prefetch(&self) {
        self.tracker.prefetch();
    }
}

/// The storage shared by a buffer and its reinterpreted views.
#[repr(C)]
pub struct Storage {
    // What every command touches first, together (`repr(C)` keeps this
    // order, right after the reference counts): id, turn, state.
    pub id: u64,
    /// Held from looking for a command's conflicts until the command is
    /// recorded, so that commands submitted at once from several threads
    /// see each other (the state lock itself is let go in between, while
    /// the command is enqueued). Taken before `state`, in storage id order.
    /// Inline, so that it shares the storage's cache lines.
    pub(crate) turn: parking_lot::RawMutex,
    pub(crate) state: Counted<State>,
    pub geom: Geometry,
    /// Taken (and its release called) once the memory is freed.
    pub(crate) allocator: Mutex<Option<Arc<Allocator>>>,
    /// The buffer's last handle has gone (see `free_when_idle`).
    pub(crate) orphaned: AtomicBool,
}

/// A storage's turn (see `Storage::turn`), given back when dropped.
pub struct Turn(Arc<Storage>);

impl Drop for Turn {
    fn drop(&mut self) {
        // SAFETY: this value stands for the lock taken when it was made,
        // and it is dropped once.
        unsafe { self.0.turn.unlock() };
    }
}

impl Storage {
    /// Waits for the storage's turn to track a command.
    pub(crate) fn take_turn(self: &Arc<Self>) -> Turn {
        self.turn.lock();
        Turn(self.clone())
    }

    /// How many times the state was opened for change (see `Counted`).
    pub(crate) fn changes(&self) -> u64 {
        self.state.lock().changes()
    }

    /// The storage's turn, if no one holds it.
    fn try_take_turn(self: &Arc<Self>) -> Option<Turn> {
        self.turn.try_lock().then(|| Turn(self.clone()))
    }
}

/// The turns of several storages (distinct, in id order), taken all at
/// once: a thread waits for a turn only while it holds none, so two
/// threads can never each hold a turn the other waits for, even when a
/// host task of one submits to the other's buffers.
pub(crate) fn take_turns(storages: &[&Arc<Storage>]) -> SmallVec<[Turn; 4]> {
    if storages.is_empty() {
        return SmallVec::new();
    }
    let mut first = 0;
    loop {
        let mut held: SmallVec<[Turn; 4]> = SmallVec::new();
        let waited = storages[first].take_turn();
        let mut busy = None;
        for (i, s) in storages.iter().enumerate() {
            if i == first {
                continue;
            }
            match s.try_take_turn() {
                Some(t) => held.push(t),
                None => {
                    busy = Some(i);
                    break;
                }
            }
        }
        match busy {
            None => {
                held.insert(first, waited);
                return held;
            }
            // Give every turn back and wait for the busy one first.
            Some(i) => first = i,
        }
    }
}

// SAFETY: raw addresses are stored as integers; the allocator's user data
// is only handed back to the user's callbacks, which the header documents
// may run on any thread; everything mutable is behind the mutex.
unsafe impl Send for Storage {}
// SAFETY: as above.
unsafe impl Sync for Storage {}
// SAFETY: the allocator holds plain function pointers and user data that is
// only passed back to them.
unsafe impl Send for Allocator {}
// SAFETY: as above.
unsafe impl Sync for Allocator {}

pub(crate) static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Storage {
    pub(crate) fn alloc_host(&self, bytes: usize) -> Result<usize> {
        let allocator = self.allocator.lock().clone();
        let p = match &allocator {
            Some(a) => {
                // SAFETY: the user's allocation callback.
                unsafe { (a.allocate)(bytes, HOST_ALIGN, a.user_data as *mut c_void) }
            }
            None => match take_host_block(bytes).or_else(|| host_blocks::take_small(bytes)) {
                Some(p) => p as *mut c_void,
                None => match std::alloc::Layout::from_size_align(bytes, HOST_ALIGN) {
                    Ok(l) => {
                        // SAFETY: non-zero size (buffers are never empty),
                        // valid layout.
                        let p = unsafe { std::alloc::alloc(l) };
                        if !p.is_null() {
                            host_blocks::pin_block(p as usize, bytes);
                        }
                        p.cast()
                    }
                    Err(_) => std::ptr::null_mut(),
                },
            },
        };
        if p.is_null() {
            return Err(Error::new(
                Status::OutOfHostMemory,
                format!(
                    "the {} allocator returned no memory for {bytes} bytes of the buffer's host storage",
                    if allocator.is_some() { "user's" } else { "default" }
                ),
            ));
        }
        Ok(p as usize)
    }

    pub(crate) fn free_host(&self, ptr: usize) {
        let bytes = self.geom.bytes();
        let allocator = self.allocator.lock().clone();
        match &allocator {
            Some(a) => {
                if let Some(d) = a.deallocate {
                    // SAFETY: `ptr` came from this allocator with this size.
                    unsafe { d(ptr as *mut c_void, bytes, a.user_data as *mut c_void) };
                }
            }
            None if host_blocks::give_small(ptr) => {}
            None => {
                // Large blocks are kept for the next buffer of their size:
                // fresh ones cost a page fault per page at first touch.
                let out = if bytes >= HOST_CACHE_MIN {
                    HOST_CACHE.lock().put(0, bytes, (ptr, bytes))
                } else {
                    vec![(ptr, bytes)]
                };
                for (p, n) in out {
                    host_blocks::unpin_block(p);
                    if let Ok(l) = std::alloc::Layout::from_size_align(n, HOST_ALIGN) {
                        // SAFETY: allocated above with this size and
                        // alignment.
                        unsafe { std::alloc::dealloc(p as *mut u8, l) };
                    }
                }
            }
        }
    }
}

/// A kept host block of `bytes` bytes. Released buffers whose finished
/// commands still hold them alive are let go first when none is kept: a
/// fresh block costs a page fault per page at first touch.
pub(crate) fn take_host_block(bytes: usize) -> Option<usize> {
    if bytes < HOST_CACHE_MIN {
        return None;
    }
    if let Some((p, _)) = HOST_CACHE.lock().take(0, bytes) {
        return Some(p);
    }
    if RELEASED_ALIVE.load(Ordering::Acquire) == 0 {
        return None;
    }
    Context::reclaim_all();
    HOST_CACHE.lock().take(0, bytes).map(|(p, _)| p)
}

/// Host storage blocks (address, size) of the default allocator kept for
/// reuse, up to 512 MiB; only blocks of at least `HOST_CACHE_MIN` bytes.
pub(crate) static HOST_CACHE: Mutex<AllocCache<(usize, usize)>> =
    Mutex::new(AllocCache::new(512 << 20));
pub(crate) const HOST_CACHE_MIN: usize = host_blocks::PIN_FROM;

impl Drop for Storage {
    fn drop(&mut self) {
        // Kernels using the storage held a reference to it (with or without
        // events of their own), so they are done; copies it tracks (an
        // asynchronous update of the host) may not be.
        for t in self.state.get_mut().tracker.tokens() {
            if let Token::Cmd(e) = t {
                let _ = e.wait();
            }
        }
        self.free_memory();
        let _ =
            RELEASED_ALIVE.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }
}

impl Storage {
    /// Gives back the device allocations and the host storage and lets go
    /// of the user's allocator; a second call finds nothing left. Only once
    /// nothing can use the memory any more.
    fn free_memory(&self) {
        let (devs, host) = {
            let mut st = self.state.lock();
            (
                {
                    st.first = None;
                    std::mem::take(&mut st.devs)
                },
                std::mem::replace(&mut st.host, HostMem::None),
            )
        };
        for mut d in devs {
            // The transfer queue goes first: its commands used the memory.
            drop(d.queue.take());
            let driver = d.ctx.platform.driver;
            for (_, m) in d.subs {
                // Sub-buffers, each released once, before their parent.
                release_arg_mem(driver, MemH(m));
            }
            let rec = d.ctx.registry.lock().remove(d.ptr);
            match (rec, d.mem) {
                // A later buffer of this size on this device reuses it.
                (Ok(record), _) if d.ptr != 0 => d.ctx.keep_device_alloc(CachedAlloc {
                    ptr: d.ptr,
                    record,
                    view: d.mem,
                }),
                // A plain memory object: a later buffer of this size on
                // this device reuses it.
                (Err(_), Some(m)) if d.ptr == 0 && d.ctx.buffers_on_mem => {
                    d.ctx.keep_device_mem(d.device, self.geom.bytes(), m);
                }
                (rec, mem) => {
                    if let Some(m) = mem {
                        // Released once, before any memory under it.
                        release_arg_mem(driver, MemH(m));
                    }
                    if let Ok(rec) = rec {
                        d.ctx.free_raw(rec.raw);
                    }
                }
            }
        }
        if let HostMem::Owned { ptr } = host {
            self.free_host(ptr);
        }
        // The user's allocator is called no more: its release runs now.
        drop(self.allocator.lock().take());
    }

    /// Frees the memory once no command, host task or host accessor can
    /// use it: called when the buffer's last handle goes, and again when a
    /// host accessor is released after that. The commands that used the
    /// storage may hold it until their queue next looks at them, but they
    /// are done once every access its tracker still holds is (a dropped
    /// entry was ordered before one kept), so the memory goes then, from
    /// the watcher thread, without a call into the library.
    pub(crate) fn free_when_idle(self: &Arc<Self>) {
        self.orphaned.store(true, Ordering::Release);
        let next = {
            let st = self.state.lock();
            let mut next = None;
            for t in st.tracker.tokens() {
                match t {
                    Token::Cmd(e) if !e.is_done() => next = Some(e),
                    Token::Lane(p) if !p.is_done() => match p.event() {
                        Ok(Some(e)) => next = Some(e),
                        Ok(None) => {}
                        // Left to the storage's drop.
                        Err(_) => return,
                    },
                    // Its release comes back here.
                    Token::Host(h) if !h.released.load(Ordering::Acquire) => return,
                    _ => {}
                }
                if next.is_some() {
                    break;
                }
            }
            next
        };
        match next {
            None => self.free_memory(),
            Some(e) => {
                let weak = Arc::downgrade(self);
                let again = Box::new(move || {
                    if let Some(s) = weak.upgrade() {
                        s.free_when_idle();
                    }
                });
                // Without a way to be told, the storage's drop frees it.
                let _ = crate::runtime::watch::on_watcher(&e, again);
            }
        }
    }

    /// Whether the buffer's last handle has gone.
    pub(crate) fn is_orphaned(&self) -> bool {
        self.orphaned.load(Ordering::Acquire)
    }
}

/// The owner of a storage on behalf of the user's handles: when the last
/// view goes, the final write-back happens here.
pub struct Owner {
    pub storage: Arc<Storage>,
    pub(crate) ownership: Ownership,
    pub(crate) user_ptr: usize,
    pub(crate) still_shared: Option<(StillShared, usize)>,
    pub(crate) final_data: Mutex<Option<usize>>,
    pub(crate) final_set: AtomicBool,
    pub(crate) write_back: AtomicBool,
}

// SAFETY: addresses are integers; the shared callback's user data is only
// passed back to it.
unsafe impl Send for Owner {}
// SAFETY: as above.
unsafe impl Sync for Owner {}

/// A user-visible buffer: an owner and the geometry it is seen with.
pub struct Buffer {
    /// The owner's storage, first: a command reaches it in one step.
    pub storage: Arc<Storage>,
    pub owner: Arc<Owner>,
    pub view: Geometry,
    pub dims: u32,
    /// The view is the storage's own geometry (not reinterpreted): its
    /// pages are the storage's, with no look at the storage needed.
    pub plain: bool,
}

impl Buffer {
    /// The owner seen with `view` (of `dims` dimensions).
    pub fn of(owner: Arc<Owner>, view: Geometry, dims: u32) -> Buffer {
        Buffer {
            plain: view == owner.storage.geom,
            storage: owner.storage.clone(),
            owner,
            view,
            dims,
        }
    }
}

/// Creation parameters.
pub struct BufferDesc {
    pub elem: usize,
    pub dims: u32,
    pub range: [usize; 3],
    pub page: [usize; 3],
    pub host_ptr: usize,
    pub ownership: Ownership,
    pub still_shared: Option<(StillShared, usize)>,
    pub allocator: Option<Allocator>,
}

/// Buffers the user released whose storage is still held by commands in
/// flight: allocating may wait for those to be dropped first.
pub(crate) static RELEASED_ALIVE: AtomicUsize = AtomicUsize::new(0);
