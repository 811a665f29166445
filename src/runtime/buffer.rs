//! Buffers: fixed-size storage with one lazily made allocation per device
//! (through the device's USM strategy) plus host storage, page-granular
//! up-to-date tracking, transfers planned from the page bits, and
//! dependencies inferred from accesses.

use super::context::{CachedAlloc, Context};
use super::event::Event;
use super::platform::Device;
use super::queue::{Held, LanePos, LanePositions, Queue, Submitted};
use crate::core::aspects::UsmStrategy;
use crate::core::deps::{Access, Tracker};
use crate::core::error::{Error, Result, Status};
use crate::core::pages::{self, Box3, Geometry, PageBits};
use crate::core::pool::AllocCache;
use crate::core::registry::AllocKind;
use crate::opencl::ffi::*;
use crate::opencl::loader::{api, check};
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

const HOST_ALIGN: usize = 4096;

enum HostMem {
    None,
    User { ptr: usize, writable: bool },
    Owned { ptr: usize },
}

struct DevAlloc {
    ctx: Arc<Context>,
    device: &'static Device,
    ptr: usize,
    /// A `cl_mem` over the same memory, for rectangular copies, where the
    /// device honours it (see `views_work`).
    mem: Option<usize>,
    /// Sub-buffers of `mem` by origin, for accessors at an offset on a
    /// device without USM.
    subs: Vec<(usize, usize)>,
    /// Queue for copies out of this allocation, made on first need.
    queue: Option<Arc<Queue>>,
}

/// State of an active host accessor that commands may have to wait for.
pub struct HostHold {
    released: AtomicBool,
    /// One user event per context that a conflicting command waited on.
    gates: Mutex<Vec<Arc<Event>>>,
}

impl HostHold {
    fn gate(&self, ctx: &Context) -> Result<Arc<Event>> {
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

    fn release(&self) {
        self.released.store(true, Ordering::Release);
        for e in self.gates.lock().iter() {
            let _ = e.complete_user(false);
        }
    }
}

#[derive(Clone)]
enum Token {
    Cmd(Arc<Event>),
    /// A command enqueued without an event on an in-order lane.
    Lane(LanePos),
    Host(Arc<HostHold>),
}

impl Token {
    /// An event to wait on for this access (None: nothing to wait for).
    /// Sets `loose` when the event also waits for later commands (see
    /// `State::eventful`).
    fn event(&self, ctx: &Context, loose: &mut bool) -> Result<Option<Arc<Event>>> {
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

struct State {
    host: HostMem,
    /// bits[0] is the host; bits[i] is devs[i - 1].
    bits: Vec<PageBits>,
    devs: Vec<DevAlloc>,
    tracker: Tracker<Token>,
    /// Tracker length at which finished accesses are next looked for.
    prune_at: usize,
    /// Some page has been current somewhere: without that, nothing moves.
    has_data: bool,
    /// Commands using the buffer keep their events: another queue, device
    /// or the host once waited for one that went without, and the marker
    /// standing for it also waited for the commands after it (which, for a
    /// buffer whose pages move between devices, serialises the devices).
    eventful: bool,
    stats: Stats,
}

/// The storage shared by a buffer and its reinterpreted views.
pub struct Storage {
    pub id: u64,
    pub geom: Geometry,
    allocator: Option<Arc<Allocator>>,
    state: Mutex<State>,
    /// Held from looking for a command's conflicts until the command is
    /// recorded, so that commands submitted at once from several threads
    /// see each other (the state lock itself is let go in between, while
    /// the command is enqueued). Taken before `state`, in storage id order.
    turn: Arc<Mutex<()>>,
}

/// A storage's turn (see `Storage::turn`), given back when dropped.
pub type Turn = parking_lot::ArcMutexGuard<parking_lot::RawMutex, ()>;

impl Storage {
    /// Waits for the storage's turn to track a command.
    fn take_turn(&self) -> Turn {
        self.turn.lock_arc()
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

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Storage {
    fn alloc_host(&self, bytes: usize) -> Result<usize> {
        let p = match &self.allocator {
            Some(a) => {
                // SAFETY: the user's allocation callback.
                unsafe { (a.allocate)(bytes, HOST_ALIGN, a.user_data as *mut c_void) }
            }
            None => match take_host_block(bytes) {
                Some(p) => p as *mut c_void,
                None => match std::alloc::Layout::from_size_align(bytes, HOST_ALIGN) {
                    // SAFETY: non-zero size (buffers are never empty), valid
                    // layout.
                    Ok(l) => unsafe { std::alloc::alloc(l) }.cast(),
                    Err(_) => std::ptr::null_mut(),
                },
            },
        };
        if p.is_null() {
            return Err(Error::new(
                Status::OutOfHostMemory,
                format!(
                    "the {} allocator returned no memory for {bytes} bytes of the buffer's host storage",
                    if self.allocator.is_some() { "user's" } else { "default" }
                ),
            ));
        }
        Ok(p as usize)
    }

    fn free_host(&self, ptr: usize) {
        let bytes = self.geom.bytes();
        match &self.allocator {
            Some(a) => {
                if let Some(d) = a.deallocate {
                    // SAFETY: `ptr` came from this allocator with this size.
                    unsafe { d(ptr as *mut c_void, bytes, a.user_data as *mut c_void) };
                }
            }
            None => {
                // Large blocks are kept for the next buffer of their size:
                // fresh ones cost a page fault per page at first touch.
                let out = if bytes >= HOST_CACHE_MIN {
                    HOST_CACHE.lock().put(0, bytes, (ptr, bytes))
                } else {
                    vec![(ptr, bytes)]
                };
                for (p, n) in out {
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
fn take_host_block(bytes: usize) -> Option<usize> {
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
static HOST_CACHE: Mutex<AllocCache<(usize, usize)>> = Mutex::new(AllocCache::new(512 << 20));
const HOST_CACHE_MIN: usize = 1 << 20;

impl Drop for Storage {
    fn drop(&mut self) {
        // Kernels using the storage held a reference to it (with or without
        // events of their own), so they are done; copies it tracks (an
        // asynchronous update of the host) may not be.
        let st = self.state.get_mut();
        for t in st.tracker.tokens() {
            if let Token::Cmd(e) = t {
                let _ = e.wait();
            }
        }
        let devs = std::mem::take(&mut st.devs);
        let host = std::mem::replace(&mut st.host, HostMem::None);
        if let Ok(api) = api() {
            for mut d in devs {
                // The transfer queue goes first: its commands used the memory.
                drop(d.queue.take());
                for (_, m) in d.subs {
                    // SAFETY: sub-buffers made by clCreateSubBuffer, each
                    // released once, before their parent.
                    unsafe { (api.clReleaseMemObject)(m as cl_mem) };
                }
                let rec = d.ctx.registry.lock().remove(d.ptr);
                match rec {
                    // A later buffer of this size on this device reuses it.
                    Ok(record) if d.ptr != 0 => d.ctx.keep_device_alloc(CachedAlloc {
                        ptr: d.ptr,
                        record,
                        view: d.mem,
                    }),
                    _ => {
                        if let Some(m) = d.mem {
                            // SAFETY: a memory object made by clCreateBuffer,
                            // released once, before any memory under it.
                            unsafe { (api.clReleaseMemObject)(m as cl_mem) };
                        }
                        if let Ok(rec) = rec {
                            d.ctx.free_raw(api, rec.raw);
                        }
                    }
                }
            }
        }
        let _ =
            RELEASED_ALIVE.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if let HostMem::Owned { ptr } = host {
            self.free_host(ptr);
        }
    }
}

/// The owner of a storage on behalf of the user's handles: when the last
/// view goes, the final write-back happens here.
pub struct Owner {
    pub storage: Arc<Storage>,
    ownership: Ownership,
    user_ptr: usize,
    still_shared: Option<(StillShared, usize)>,
    final_data: Mutex<Option<usize>>,
    final_set: AtomicBool,
    write_back: AtomicBool,
}

// SAFETY: addresses are integers; the shared callback's user data is only
// passed back to it.
unsafe impl Send for Owner {}
// SAFETY: as above.
unsafe impl Sync for Owner {}

/// A user-visible buffer: an owner and the geometry it is seen with.
pub struct Buffer {
    pub owner: Arc<Owner>,
    pub view: Geometry,
    pub dims: u32,
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

impl Buffer {
    pub fn create(d: BufferDesc) -> Result<Buffer> {
        let range = pages::normalize(d.dims, &d.range, 1)?;
        // All zero: the default page; otherwise unused leading dimensions
        // get pages of 1 and a zero entry the default for that dimension.
        let page = if d.page[..(d.dims as usize).min(3)].iter().all(|&x| x == 0) {
            [0; 3]
        } else {
            pages::normalize(d.dims, &d.page, 1)?
        };
        let geom = Geometry::new(d.elem, range, page)?;
        let needs_ptr = d.ownership != Ownership::None;
        if needs_ptr && d.host_ptr == 0 {
            return Err(Error::new(
                Status::NullArgument,
                "host_pointer is NULL but the ownership mode needs host memory",
            ));
        }
        if !needs_ptr && d.host_ptr != 0 {
            return Err(Error::invalid(
                "host_pointer is given but the ownership mode is SYRAH_HOST_NONE",
            ));
        }
        if d.ownership == Ownership::Shared && d.still_shared.is_none() {
            return Err(Error::new(
                Status::NullArgument,
                "shared host memory needs a still_shared callback",
            ));
        }
        let allocator = d.allocator.map(Arc::new);
        let storage = Arc::new(Storage {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            geom,
            allocator,
            turn: Arc::new(Mutex::new(())),
            state: Mutex::new(State {
                host: HostMem::None,
                bits: vec![pages::new_bits(&geom, false)],
                devs: Vec::new(),
                tracker: Tracker::new(),
                prune_at: PRUNE_MIN,
                has_data: false,
                eventful: false,
                stats: Stats::default(),
            }),
        });
        {
            let mut st = storage.state.lock();
            match d.ownership {
                Ownership::None => {}
                Ownership::WriteBack | Ownership::Shared | Ownership::ReadOnly => {
                    st.host = HostMem::User {
                        ptr: d.host_ptr,
                        writable: d.ownership != Ownership::ReadOnly,
                    };
                    st.bits[0].fill(true);
                    st.has_data = true;
                }
                Ownership::CopyIn => {
                    let p = storage.alloc_host(geom.bytes())?;
                    // SAFETY: the user's pointer holds the buffer's bytes per
                    // the contract; `p` is a fresh allocation of that size.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            d.host_ptr as *const u8,
                            p as *mut u8,
                            geom.bytes(),
                        )
                    };
                    st.host = HostMem::Owned { ptr: p };
                    st.bits[0].fill(true);
                    st.has_data = true;
                }
            }
        }
        let owner = Arc::new(Owner {
            storage,
            ownership: d.ownership,
            user_ptr: d.host_ptr,
            still_shared: d.still_shared,
            final_data: Mutex::new(None),
            final_set: AtomicBool::new(false),
            write_back: AtomicBool::new(true),
        });
        Ok(Buffer {
            owner,
            view: geom,
            dims: d.dims,
        })
    }

    pub fn storage(&self) -> &Arc<Storage> {
        &self.owner.storage
    }

    /// A view of the same storage with another element size and range.
    pub fn reinterpret(&self, elem: usize, dims: u32, range: [usize; 3]) -> Result<Buffer> {
        let r = pages::normalize(dims, &range, 1)?;
        let view = Geometry::new(elem, r, [0; 3])?;
        let total = self.owner.storage.geom.bytes();
        if view.bytes() != total {
            return Err(Error::invalid(format!(
                "a reinterpreted view must keep the buffer's {total} bytes; {r:?} elements of {elem} bytes are {} bytes",
                view.bytes()
            )));
        }
        Ok(Buffer {
            owner: self.owner.clone(),
            view,
            dims,
        })
    }

    /// The page boxes an access must bring up to date first: all its pages
    /// when it needs the data; for discard modes only the pages it covers
    /// in part, whose bytes outside the access must survive the page
    /// becoming current on this allocation alone.
    pub fn fetch_boxes(
        &self,
        mode: Mode,
        offset: [usize; 3],
        range: [usize; 3],
        pages: &Box3,
    ) -> Vec<Box3> {
        if mode.needs_data() {
            return vec![*pages];
        }
        let sg = &self.owner.storage.geom;
        if self.view != *sg {
            // A reinterpreted view: its exact coverage is not a page box.
            return vec![*pages];
        }
        pages::subtract(pages, &sg.covered_box(offset, range))
    }

    /// The storage pages an element box of this view touches.
    pub fn pages_of(&self, offset: [usize; 3], range: [usize; 3]) -> Result<Box3> {
        self.view.check_elements(offset, range)?;
        let sg = &self.owner.storage.geom;
        if self.view == *sg {
            return Ok(sg.page_box(offset, range));
        }
        let start = self.view.byte_offset(offset);
        let last = [
            offset[0] + range[0] - 1,
            offset[1] + range[1] - 1,
            offset[2] + range[2] - 1,
        ];
        let end = self.view.byte_offset(last) + self.view.elem;
        Ok(sg.page_box_of_bytes(start, end))
    }

    pub fn set_final_data(&self, ptr: usize) {
        *self.owner.final_data.lock() = (ptr != 0).then_some(ptr);
        self.owner.final_set.store(true, Ordering::Release);
    }

    pub fn set_write_back(&self, on: bool) {
        self.owner.write_back.store(on, Ordering::Release);
    }

    pub fn stats(&self) -> Stats {
        self.owner.storage.state.lock().stats
    }

    /// The buffer's allocation on the queue's device as a native object:
    /// a USM pointer (true) or, without USM, its `cl_mem` (false).
    pub fn native(&self, q: &Queue) -> Result<(*mut c_void, bool)> {
        let s = &self.owner.storage;
        let mut st = s.state.lock();
        let i = ensure_dev(s, &mut st, &q.ctx, q.device)?;
        let d = &st.devs[i - 1];
        Ok(if d.ptr != 0 {
            (d.ptr as *mut c_void, true)
        } else {
            (d.mem.unwrap_or(0) as *mut c_void, false)
        })
    }

    /// The allocation of this buffer on the queue's device (made now if it
    /// does not exist yet): valid until the buffer is destroyed.
    pub fn device_pointer(&self, q: &Queue) -> Result<*mut c_void> {
        let s = &self.owner.storage;
        let mut st = s.state.lock();
        let i = ensure_dev(s, &mut st, &q.ctx, q.device)?;
        let p = st.devs[i - 1].ptr;
        if p == 0 {
            return Err(Error::new(
                Status::FeatureNotSupported,
                format!(
                    "device {} has no USM: its allocation of the buffer is a plain memory object, not a pointer",
                    q.device.label()
                ),
            ));
        }
        Ok(p as *mut c_void)
    }
}

/// A released buffer's allocation of `bytes` on `device`, if one is kept
/// or is freed by dropping finished commands.
fn reuse(ctx: &Context, device: &'static Device, bytes: usize) -> Option<(usize, Option<usize>)> {
    ctx.reuse_device_alloc(device, bytes).or_else(|| {
        if RELEASED_ALIVE.load(Ordering::Acquire) == 0 {
            return None;
        }
        // Every context: a released buffer used on several devices is held
        // by finished commands of each.
        Context::reclaim_all();
        ctx.reuse_device_alloc(device, bytes)
    })
}

/// Index (into bits) of the allocation on `device` through `ctx`.
fn ensure_dev(
    s: &Storage,
    st: &mut State,
    ctx: &Arc<Context>,
    device: &'static Device,
) -> Result<usize> {
    if let Some(i) = st
        .devs
        .iter()
        .position(|d| d.ctx.id == ctx.id && std::ptr::eq(d.device, device))
    {
        return Ok(i + 1);
    }
    let (p, mem) = if ctx.strategy == UsmStrategy::None {
        // No USM: a plain memory object is the allocation.
        let api = api()?;
        let mut err = CL_SUCCESS;
        // SAFETY: live context; no host pointer.
        let m = unsafe {
            (api.clCreateBuffer)(
                ctx.cl,
                CL_MEM_READ_WRITE,
                s.geom.bytes(),
                std::ptr::null_mut(),
                &mut err,
            )
        };
        if m.is_null() || err != CL_SUCCESS {
            return Err(Error::opencl(
                err,
                &format!("clCreateBuffer of {} bytes", s.geom.bytes()),
            ));
        }
        (std::ptr::null_mut(), Some(m as usize))
    } else if let Some((p, mem)) = reuse(ctx, device, s.geom.bytes()) {
        (p as *mut c_void, mem)
    } else {
        let p = match ctx.usm_alloc(AllocKind::Device, Some(device), s.geom.bytes(), 0) {
            Err(e) if e.status == Status::OutOfDeviceMemory => {
                // Released buffers' memory kept for reuse goes back first.
                ctx.drop_device_cache();
                ctx.usm_alloc(AllocKind::Device, Some(device), s.geom.bytes(), 0)?
            }
            r => r?,
        };
        let mem = if views_work(ctx, device) {
            make_view(ctx, p, s.geom.bytes())
        } else {
            None
        };
        (p, mem)
    };
    st.devs.push(DevAlloc {
        ctx: ctx.clone(),
        device,
        ptr: p as usize,
        mem,
        subs: Vec::new(),
        queue: None,
    });
    st.bits.push(pages::new_bits(&s.geom, false));
    Ok(st.devs.len())
}

/// The memory object of a no-USM allocation seen from byte `off` on.
fn sub_buffer(s: &Storage, d: &mut DevAlloc, off: usize) -> Result<usize> {
    let base = d
        .mem
        .ok_or_else(|| Error::new(Status::Internal, "allocation without memory object"))?;
    if off == 0 {
        return Ok(base);
    }
    if let Some(&(_, m)) = d.subs.iter().find(|(o, _)| *o == off) {
        return Ok(m);
    }
    if off % d.device.base_align != 0 {
        return Err(Error::new(
            Status::FeatureNotSupported,
            format!(
                "an accessor starting {off} bytes into the buffer needs a sub-buffer on device {}, \
                 which has no USM, and sub-buffers must start at multiples of its base address \
                 alignment of {} bytes",
                d.device.label(),
                d.device.base_align
            ),
        ));
    }
    let api = api()?;
    let region = [off, s.geom.bytes() - off];
    let mut err = CL_SUCCESS;
    // SAFETY: `base` is a live buffer; the region lies inside it and its
    // origin is aligned as the device requires.
    let m = unsafe {
        (api.clCreateSubBuffer)(
            base as cl_mem,
            CL_MEM_READ_WRITE,
            0x1220,
            region.as_ptr().cast(),
            &mut err,
        )
    };
    if m.is_null() || err != CL_SUCCESS {
        return Err(Error::opencl(err, "clCreateSubBuffer"));
    }
    d.subs.push((off, m as usize));
    Ok(m as usize)
}

/// A `cl_mem` using the USM memory at `p` as its storage.
fn make_view(ctx: &Context, p: *mut c_void, bytes: usize) -> Option<usize> {
    let api = api().ok()?;
    let mut err = CL_SUCCESS;
    // SAFETY: `p` is a live allocation of `bytes` bytes in this context;
    // with CL_MEM_USE_HOST_PTR the buffer uses that memory as its storage.
    let m = unsafe {
        (api.clCreateBuffer)(
            ctx.cl,
            CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
            bytes,
            p,
            &mut err,
        )
    };
    (err == CL_SUCCESS && !m.is_null()).then_some(m as usize)
}

/// Whether `cl_mem` views over USM device memory of `device` see the same
/// bytes as the USM pointer (the specification promises it for SVM; some
/// drivers copy instead). Checked once per device with a small round trip.
pub fn views_work(ctx: &Arc<Context>, device: &'static Device) -> bool {
    static CHECKED: Mutex<Vec<(usize, bool)>> = Mutex::new(Vec::new());
    let key = device as *const Device as usize;
    if let Some(&(_, ok)) = CHECKED.lock().iter().find(|(k, _)| *k == key) {
        return ok;
    }
    let ok = probe_views(ctx, device).unwrap_or(false);
    CHECKED.lock().push((key, ok));
    ok
}

fn probe_views(ctx: &Arc<Context>, device: &'static Device) -> Result<bool> {
    let api = api()?;
    const BYTES: usize = 256;
    let p = ctx.usm_alloc(AllocKind::Device, Some(device), BYTES, 0)?;
    let result = (|| -> Result<bool> {
        let Some(m) = make_view(ctx, p, BYTES) else {
            return Ok(false);
        };
        let q = Queue::create(ctx.clone(), device, true, false, None)?;
        let pattern: Vec<u8> = (0..BYTES).map(|i| (i * 7 + 3) as u8).collect();
        let mut back = vec![0u8; BYTES];
        // Written through the pointer, read through the view.
        // SAFETY: `p` holds BYTES bytes; `pattern` outlives the wait below.
        let ev = unsafe { q.copy_raw(p, pattern.as_ptr().cast(), BYTES, &[], "view check", None) }?;
        ev.wait()?;
        // SAFETY: blocking read of BYTES bytes into `back`.
        let rc = unsafe {
            (api.clEnqueueReadBuffer)(
                q.sync_cl(),
                m as cl_mem,
                CL_TRUE,
                0,
                BYTES,
                back.as_mut_ptr().cast(),
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        let mut ok = rc == CL_SUCCESS && back == pattern;
        if ok {
            // Written through the view, read through the pointer.
            let rev: Vec<u8> = pattern.iter().rev().copied().collect();
            let origin = [0usize; 3];
            let region = [BYTES, 1, 1];
            // SAFETY: blocking rectangular write of BYTES bytes from `rev`.
            let rc = unsafe {
                (api.clEnqueueWriteBufferRect)(
                    q.sync_cl(),
                    m as cl_mem,
                    CL_TRUE,
                    origin.as_ptr(),
                    origin.as_ptr(),
                    region.as_ptr(),
                    BYTES,
                    BYTES,
                    BYTES,
                    BYTES,
                    rev.as_ptr().cast(),
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                )
            };
            back.fill(0);
            // SAFETY: `back` holds BYTES bytes and outlives the wait.
            let ev =
                unsafe { q.copy_raw(back.as_mut_ptr().cast(), p, BYTES, &[], "view check", None) }?;
            ev.wait()?;
            ok = rc == CL_SUCCESS && back == rev;
        }
        drop(q);
        // SAFETY: releasing the view made above.
        unsafe { (api.clReleaseMemObject)(m as cl_mem) };
        Ok(ok)
    })();
    let _ = ctx.usm_free(p);
    result
}

fn host_ptr(st: &State) -> Option<usize> {
    match st.host {
        HostMem::None => None,
        HostMem::User { ptr, .. } | HostMem::Owned { ptr } => Some(ptr),
    }
}

/// Makes sure host storage exists and, if `write`, may be written.
fn ensure_host(s: &Storage, st: &mut State, write: bool) -> Result<usize> {
    match st.host {
        HostMem::Owned { ptr } => Ok(ptr),
        HostMem::User { ptr, writable } if writable || !write => Ok(ptr),
        HostMem::User { ptr, .. } => {
            // Read-only user data: take a private copy before writing. Only
            // the pages current on the host carry data worth copying; the
            // others are outdated there and are fetched before any read.
            let p = s.alloc_host(s.geom.bytes())?;
            // SAFETY: both hold the buffer's bytes.
            unsafe { copy_host_pages(&s.geom, &st.bits[0], ptr, p) };
            st.host = HostMem::Owned { ptr: p };
            Ok(p)
        }
        HostMem::None => {
            let p = s.alloc_host(s.geom.bytes())?;
            st.host = HostMem::Owned { ptr: p };
            Ok(p)
        }
    }
}

fn transfer_queue(st: &mut State, dev_index: usize) -> Result<Arc<Queue>> {
    let d = &mut st.devs[dev_index - 1];
    if let Some(q) = &d.queue {
        return Ok(q.clone());
    }
    let q = Queue::create(d.ctx.clone(), d.device, false, false, None)?;
    d.queue = Some(q.clone());
    Ok(q)
}

/// Events (in `ctx`) for the given tokens.
fn token_events(tokens: &[Token], ctx: &Context, loose: &mut bool) -> Result<Vec<Arc<Event>>> {
    let mut out = Vec::with_capacity(tokens.len());
    for t in tokens {
        out.extend(t.event(ctx, loose)?);
    }
    Ok(out)
}

/// Records an access at allocation `place`. Covered earlier commands are
/// forgotten when this one writes, or (for `lane` != 0) when they are reads
/// that ran earlier on the same in-order lane; held host accessors are
/// never forgotten this way.
fn record(st: &mut State, pages: Box3, write: bool, token: Token, lane: u64, place: usize) {
    record_dropping(st, pages, write, token, lane, place, None, |_| true);
}

/// [`record`] for an access at `place` (a copy from `from`), dropping
/// covered earlier accesses only where `waited` says this one waited for
/// them.
#[allow(clippy::too_many_arguments)]
fn record_dropping(
    st: &mut State,
    pages: Box3,
    write: bool,
    token: Token,
    lane: u64,
    place: usize,
    from: Option<usize>,
    waited: impl Fn(&Access<Token>) -> bool,
) {
    st.tracker.record_at(
        pages,
        write,
        token,
        place,
        from,
        |t| match t {
            Token::Cmd(e) => lane != 0 && e.lane.load(Ordering::Acquire) == lane,
            Token::Lane(p) => lane != 0 && p.lane == lane,
            Token::Host(_) => false,
        },
        // A read stands in for earlier reads of its lane only: a copy into
        // another place waits for writes, not reads, so a write must stay.
        |a| !matches!(a.token, Token::Host(_)) && (write || !a.write) && waited(a),
    );
}

/// Forgets finished accesses. Asking a driver about events costs time, so
/// this only looks once the list has doubled since it last looked (or
/// always, with `force`); finished entries left in between only add event
/// waits that are already satisfied.
fn prune_if(st: &mut State, force: bool) {
    if !force && st.tracker.len() < st.prune_at {
        return;
    }
    st.tracker.retain(|t| match t {
        Token::Cmd(e) => !e.is_done(),
        Token::Lane(p) => !p.is_done(),
        Token::Host(h) => !h.released.load(Ordering::Acquire),
    });
    st.prune_at = (st.tracker.len() * 2).max(PRUNE_MIN);
}

const PRUNE_MIN: usize = 16;

fn prune(st: &mut State) {
    prune_if(st, true);
}

/// Copies the pages of `want` that are outdated on allocation `target`
/// (0 = host) from wherever they are current. Copies into a device are
/// enqueued on `q` (the target's queue); copies to the host go through the
/// source's transfer queue. Returns the copy events; marks the target's
/// bits up to date.
fn fetch(
    s: &Arc<Storage>,
    st: &mut State,
    target: usize,
    want: &Box3,
    q: Option<&Queue>,
) -> Result<Vec<Arc<Event>>> {
    let g = s.geom;
    if !st.has_data || pages::all_set(&g, &st.bits[target], want) {
        return Ok(Vec::new());
    }
    let target_ctx = if target == 0 {
        None
    } else {
        Some(st.devs[target - 1].ctx.id)
    };
    let plan = {
        let refs: Vec<Option<&PageBits>> = st.bits.iter().map(Some).collect();
        let devs = &st.devs;
        pages::plan(&g, target, want, &refs, |i| {
            // Same-context devices first, then the host, then the rest.
            if i == 0 {
                1
            } else if Some(devs[i - 1].ctx.id) == target_ctx {
                0
            } else {
                2
            }
        })
    };
    let mut events = Vec::new();
    for t in plan {
        let elems = g.elements_of(&t.pages);
        let runs = g.byte_runs(&elems);
        let deps = token_events_for_copy(st, &t.pages, target, t.src)?;
        let same_ctx = t.src != 0 && Some(st.devs[t.src - 1].ctx.id) == target_ctx;
        if target != 0 && t.src != 0 && !same_ctx {
            // Between contexts: through host storage first. The copy in
            // waits for the copy out through a bridge to the other context
            // (see `watch`), not on this thread.
            let via = fetch_one(s, st, 0, t.src, &t.pages, &runs, &deps, None)?;
            events.extend(fetch_one(s, st, target, 0, &t.pages, &runs, &via, q)?);
        } else {
            events.extend(fetch_one(s, st, target, t.src, &t.pages, &runs, &deps, q)?);
        }
    }
    Ok(events)
}

/// What a copy of `pages` from allocation `src` into allocation `target`
/// must wait for (see [`Access::holds_up_copy`]).
fn token_events_for_copy(
    st: &mut State,
    pages: &Box3,
    target: usize,
    src: usize,
) -> Result<Vec<Arc<Event>>> {
    let tokens = st.tracker.copy_conflicts(pages, target, src);
    let ctx_of = |i: usize| {
        if i == 0 {
            None
        } else {
            Some(st.devs[i - 1].ctx.clone())
        }
    };
    // Host-accessor gates are made in the context of the queue that runs
    // the copy: the target's, or the source's for copies to the host.
    let ctx = ctx_of(target).or_else(|| ctx_of(src));
    let mut loose = false;
    let events = match ctx {
        Some(c) => token_events(&tokens, &c, &mut loose)?,
        None => Vec::new(),
    };
    st.eventful |= loose;
    Ok(events)
}

#[allow(clippy::too_many_arguments)]
fn fetch_one(
    s: &Arc<Storage>,
    st: &mut State,
    target: usize,
    src: usize,
    pages: &Box3,
    runs: &[(usize, usize)],
    deps: &[Arc<Event>],
    q: Option<&Queue>,
) -> Result<Vec<Arc<Event>>> {
    let write_host = target == 0;
    let host = if src == 0 || target == 0 {
        Some(ensure_host(s, st, write_host)?)
    } else {
        None
    };
    let base = |i: usize| {
        if i == 0 {
            host.unwrap_or(0)
        } else {
            st.devs[i - 1].ptr
        }
    };
    let (dst_base, src_base) = (base(target), base(src));
    let queue = match (target, q) {
        // Behind the command that wrote the pages, on its own lane when it
        // is still the last there: no wait across queues, which some
        // drivers make slow.
        (0, _) => match writer_queue(st, src, deps) {
            Some(wq) => wq,
            None => transfer_queue(st, src)?,
        },
        (_, Some(q)) => transfer_queue_for_target(st, target, q)?,
        (_, None) => transfer_queue(st, target)?,
    };
    let mut events = Vec::with_capacity(runs.len());
    let g = s.geom;
    let elems = g.elements_of(pages);
    let (src_mem, dst_mem) = (
        if src == 0 { None } else { st.devs[src - 1].mem },
        if target == 0 {
            None
        } else {
            st.devs[target - 1].mem
        },
    );
    let rect_ok =
        runs.len() > 1 && (src == 0 || src_mem.is_some()) && (target == 0 || dst_mem.is_some());
    let count = |st: &mut State, len: usize| {
        let (b, c) = match (src, target) {
            (0, _) => (&mut st.stats.h2d_bytes, &mut st.stats.h2d_copies),
            (_, 0) => (&mut st.stats.d2h_bytes, &mut st.stats.d2h_copies),
            _ => (&mut st.stats.d2d_bytes, &mut st.stats.d2d_copies),
        };
        *b += len as u64;
        *c += 1;
    };
    if rect_ok {
        let ext = elems.extent();
        let origin = [elems.lo[2] * g.elem, elems.lo[1], elems.lo[0]];
        let region = [ext[2] * g.elem, ext[1], ext[0]];
        let row = g.range[2] * g.elem;
        let slice = row * g.range[1];
        let ev = queue.copy_rect(
            (dst_mem, dst_base),
            (src_mem, src_base),
            origin,
            region,
            row,
            slice,
            deps,
        )?;
        events.push(ev);
        count(st, region.iter().product());
    } else {
        // A side with no pointer (a device without USM) is copied through
        // its memory object.
        let pointers = (target == 0 || dst_base != 0) && (src == 0 || src_base != 0);
        for &(off, len) in runs {
            let ev = if pointers {
                // SAFETY: both bases are allocations of the buffer's full
                // size and the runs lie inside them; the storage outlives
                // the copy (see Storage's drop).
                unsafe {
                    queue.copy_raw(
                        (dst_base + off) as *mut c_void,
                        (src_base + off) as *const c_void,
                        len,
                        deps,
                        format!("buffer copy of {len} bytes"),
                        None,
                    )
                }?
            } else {
                queue.copy_mem(
                    (dst_mem, dst_base),
                    (src_mem, src_base),
                    (off, off),
                    len,
                    deps,
                )?
            };
            events.push(ev);
            count(st, len);
        }
    }
    pages::set_box(&s.geom, &mut st.bits[target], pages, true);
    // The copies write the target's copy of these pages: later accesses
    // that read it (on any lane or thread) must wait for them. They stand
    // in only for what they waited for.
    for e in &events {
        e.internal.store(true, Ordering::Release);
        record_dropping(
            st,
            *pages,
            true,
            Token::Cmd(e.clone()),
            0,
            target,
            Some(src),
            |a| a.holds_up_copy(target, src),
        );
    }
    Ok(events)
}

/// The queue of a command in `deps` on device `src` of the buffer that a
/// copy can follow directly on its lane.
fn writer_queue(st: &State, src: usize, deps: &[Arc<Event>]) -> Option<Arc<Queue>> {
    let d = st.devs.get(src.checked_sub(1)?)?;
    deps.iter().rev().find_map(|e| {
        let wq = e.owner.upgrade()?.downcast::<Queue>().ok()?;
        (wq.ctx.id == d.ctx.id && std::ptr::eq(wq.device, d.device) && wq.follows_directly(e))
            .then_some(wq)
    })
}

/// The queue to enqueue copies into `target` on: the caller's queue when it
/// runs on the target's device and context, else the target's own.
fn transfer_queue_for_target(st: &mut State, target: usize, q: &Queue) -> Result<Arc<Queue>> {
    let d = &st.devs[target - 1];
    if d.ctx.id == q.ctx.id && std::ptr::eq(d.device, q.device) {
        if let Some(me) = q.self_arc() {
            return Ok(me);
        }
    }
    transfer_queue(st, target)
}

/// One side of a rectangular copy: a memory object (or none for host
/// memory) with its base pointer, the window's origin (bytes, rows,
/// slices) and its row and slice pitches.
struct RectSide {
    side: (Option<usize>, usize),
    origin: [usize; 3],
    pitches: (usize, usize),
}

/// One accessor of a command group.
pub struct AccessReq<'a> {
    pub buffer: &'a Buffer,
    pub mode: Mode,
    pub offset: [usize; 3],
    pub range: [usize; 3],
}

/// Prepared accessor: its pages and the allocation it uses.
pub struct Prepared {
    /// The command should keep its event (see `State::eventful`).
    pub eventful: bool,
    pub storage: Arc<Storage>,
    pub pages: Box3,
    pub write: bool,
    pub alloc: usize,
    /// Pointer to the accessor's first element on the device (0 on a
    /// device without USM).
    pub ptr: usize,
    /// Byte offset of the accessor's first element in the buffer.
    pub offset: usize,
    /// The storage's turn, held until the command is recorded and this is
    /// dropped (by the first accessor of each storage).
    _turn: Option<Turn>,
}

impl Prepared {
    /// What a kernel argument bound to this accessor receives on a device
    /// without USM: the memory object starting at its first element (None
    /// where the device has USM and `ptr` serves).
    pub fn arg_mem(&self) -> Result<Option<usize>> {
        if self.ptr != 0 {
            return Ok(None);
        }
        let mut st = self.storage.state.lock();
        let d = &mut st.devs[self.alloc - 1];
        sub_buffer(&self.storage, d, self.offset).map(Some)
    }
}

impl Queue {
    /// One linear copy of `len` bytes, from offset `s0` of `src` to offset
    /// `d0` of `dst`, where a device side is a memory object (`mem`) and
    /// the host side a pointer (`base`).
    fn copy_mem(
        &self,
        dst: (Option<usize>, usize),
        src: (Option<usize>, usize),
        (d0, s0): (usize, usize),
        len: usize,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        let api = api()?;
        self.submit(
            deps,
            format!("buffer copy of {len} bytes"),
            None,
            |q, wl, ev| {
                let wptr = super::queue::ptr_or_null(wl);
                let n = wl.len() as cl_uint;
                // SAFETY: memory objects and host memory cover the copied bytes;
                // the wait list is of this context; the host memory outlives
                // the copy.
                let rc = unsafe {
                    match (dst.0, src.0) {
                        (Some(d), Some(sm)) => (api.clEnqueueCopyBuffer)(
                            q,
                            sm as cl_mem,
                            d as cl_mem,
                            s0,
                            d0,
                            len,
                            n,
                            wptr,
                            ev,
                        ),
                        (Some(d), None) => (api.clEnqueueWriteBuffer)(
                            q,
                            d as cl_mem,
                            CL_FALSE,
                            d0,
                            len,
                            (src.1 + s0) as *const c_void,
                            n,
                            wptr,
                            ev,
                        ),
                        (None, Some(sm)) => (api.clEnqueueReadBuffer)(
                            q,
                            sm as cl_mem,
                            CL_FALSE,
                            s0,
                            len,
                            (dst.1 + d0) as *mut c_void,
                            n,
                            wptr,
                            ev,
                        ),
                        (None, None) => CL_INVALID_OPERATION,
                    }
                };
                check(
                    rc,
                    match (dst.0, src.0) {
                        (Some(_), Some(_)) => "clEnqueueCopyBuffer (buffer copy)",
                        (Some(_), None) => "clEnqueueWriteBuffer (buffer copy)",
                        _ => "clEnqueueReadBuffer (buffer copy)",
                    },
                )
            },
        )
        .map(|e| e.with_bytes(len))
    }

    /// One rectangular copy between a buffer's allocations: device sides
    /// are `cl_mem` views, the host side is a pointer (`mem` None); both
    /// sides have the buffer's own pitches and the same origin.
    #[allow(clippy::too_many_arguments)]
    fn copy_rect(
        &self,
        dst: (Option<usize>, usize),
        src: (Option<usize>, usize),
        origin: [usize; 3],
        region: [usize; 3],
        row: usize,
        slice: usize,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        let pitches = (row, slice);
        self.enqueue_rect(
            RectSide {
                side: dst,
                origin,
                pitches,
            },
            RectSide {
                side: src,
                origin,
                pitches,
            },
            region,
            deps,
        )
    }

    /// One rectangular copy of `region` (bytes, rows, slices) from `src` to
    /// `dst`, each with its own origin and pitches.
    fn enqueue_rect(
        &self,
        dst: RectSide,
        src: RectSide,
        region: [usize; 3],
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        let api = api()?;
        let what = format!("buffer copy of {region:?} bytes x rows x slices");
        self.submit(deps, what, None, |q, wl, ev| {
            let wptr = super::queue::ptr_or_null(wl);
            let n = wl.len() as cl_uint;
            let r = region.as_ptr();
            let (dor, sor) = (dst.origin.as_ptr(), src.origin.as_ptr());
            let ((dr, ds), (sr, ss)) = (dst.pitches, src.pitches);
            // SAFETY: memory objects and host storage cover the windows the
            // origins, region and pitches describe; the wait list is of this
            // context; the host storage outlives the copy.
            let rc = unsafe {
                match (dst.side.0, src.side.0) {
                    (Some(d), Some(sm)) => (api.clEnqueueCopyBufferRect)(
                        q,
                        sm as cl_mem,
                        d as cl_mem,
                        sor,
                        dor,
                        r,
                        sr,
                        ss,
                        dr,
                        ds,
                        n,
                        wptr,
                        ev,
                    ),
                    (Some(d), None) => (api.clEnqueueWriteBufferRect)(
                        q,
                        d as cl_mem,
                        CL_FALSE,
                        dor,
                        sor,
                        r,
                        dr,
                        ds,
                        sr,
                        ss,
                        src.side.1 as *const c_void,
                        n,
                        wptr,
                        ev,
                    ),
                    (None, Some(sm)) => (api.clEnqueueReadBufferRect)(
                        q,
                        sm as cl_mem,
                        CL_FALSE,
                        sor,
                        dor,
                        r,
                        sr,
                        ss,
                        dr,
                        ds,
                        dst.side.1 as *mut c_void,
                        n,
                        wptr,
                        ev,
                    ),
                    (None, None) => CL_INVALID_OPERATION,
                }
            };
            check(
                rc,
                match (dst.side.0, src.side.0) {
                    (Some(_), Some(_)) => "clEnqueueCopyBufferRect (rectangular buffer copy)",
                    (Some(_), None) => "clEnqueueWriteBufferRect (rectangular buffer copy)",
                    _ => "clEnqueueReadBufferRect (rectangular buffer copy)",
                },
            )
        })
        .map(|e| e.with_bytes(region.iter().product()))
    }

    /// Prepares the accessors of a command group on this queue's device:
    /// allocations, dependencies and transfers. Returns what the command
    /// must wait for and the per-accessor results; `commit` records it.
    pub fn prepare_accesses(
        &self,
        reqs: &[AccessReq<'_>],
        waits: &mut Deps,
    ) -> Result<SmallVec<[Prepared; 4]>> {
        self.prepare_accesses_at(reqs, waits, None)
    }

    /// [`Queue::prepare_accesses`]; with `on_lanes`, conflicting commands
    /// of this queue that went without events are put there (for the
    /// command to follow them on their lane) instead of getting an event.
    pub fn prepare_accesses_at(
        &self,
        reqs: &[AccessReq<'_>],
        waits: &mut Deps,
        mut on_lanes: Option<&mut LanePositions>,
    ) -> Result<SmallVec<[Prepared; 4]>> {
        // Storages are locked one at a time in id order; each accessor's
        // work is done under its storage's lock.
        let mut order: SmallVec<[usize; 8]> = (0..reqs.len()).collect();
        order.sort_by_key(|&i| reqs[i].buffer.owner.storage.id);
        let mut slots: SmallVec<[Option<Prepared>; 4]> = (0..reqs.len()).map(|_| None).collect();
        let mut last_id = 0;
        for i in order {
            let r = &reqs[i];
            let s = r.buffer.owner.storage.clone();
            let pages = r.buffer.pages_of(r.offset, r.range)?;
            let turn = (s.id != last_id).then(|| s.take_turn());
            last_id = s.id;
            let mut st = s.state.lock();
            prune_if(&mut st, false);
            let alloc = ensure_dev(&s, &mut st, &self.ctx, self.device)?;
            let mut gate_err = None;
            let mut loose = false;
            st.tracker
                .for_each_conflict(&pages, r.mode.writes(), alloc, |t| match t {
                    Token::Cmd(e) => waits.push(e.clone()),
                    // This in-order queue runs the command after it anyway.
                    Token::Lane(p) if p.orders(self) => {}
                    Token::Lane(p) if p.is_of(self) && on_lanes.is_some() => {
                        if let Some(l) = on_lanes.as_deref_mut() {
                            l.push(p.clone());
                        }
                    }
                    _ => match t.event(&self.ctx, &mut loose) {
                        Ok(e) => waits.extend(e),
                        Err(e) => gate_err = Some(e),
                    },
                });
            st.eventful |= loose;
            if let Some(e) = gate_err {
                return Err(e);
            }
            if st.has_data && !pages::all_set(&s.geom, &st.bits[alloc], &pages) {
                for part in r.buffer.fetch_boxes(r.mode, r.offset, r.range, &pages) {
                    waits.extend(fetch(&s, &mut st, alloc, &part, Some(self))?);
                }
            }
            let off = r.buffer.view.byte_offset(r.offset);
            let base = st.devs[alloc - 1].ptr;
            let eventful = st.eventful;
            drop(st);
            slots[i] = Some(Prepared {
                eventful,
                storage: s,
                pages,
                write: r.mode.writes(),
                alloc,
                ptr: if base != 0 { base + off } else { 0 },
                offset: off,
                _turn: turn,
            });
        }
        Ok(slots.into_iter().flatten().collect())
    }

    /// Records a command that used prepared accessors.
    pub fn commit_accesses(&self, prepared: &[Prepared], ev: &Arc<Event>) {
        self.commit_submitted(prepared, &Submitted::Event(ev.clone()));
    }

    /// Records a command that used prepared accessors, with or without its
    /// event.
    pub fn commit_submitted(&self, prepared: &[Prepared], done: &Submitted) {
        if prepared.is_empty() {
            return;
        }
        let (token, lane) = match done {
            Submitted::Event(e) => (Token::Cmd(e.clone()), e.lane.load(Ordering::Acquire)),
            Submitted::Quiet(p) => (Token::Lane(p.clone()), p.lane),
        };
        for p in prepared {
            let mut st = p.storage.state.lock();
            record(&mut st, p.pages, p.write, token.clone(), lane, p.alloc);
            if p.write {
                let g = p.storage.geom;
                for (i, b) in st.bits.iter_mut().enumerate() {
                    pages::set_box(&g, b, &p.pages, i == p.alloc);
                }
                st.has_data = true;
            }
        }
    }
}

/// What a command over these storages keeps alive until it completes.
pub fn held_storages<'a>(storages: impl IntoIterator<Item = &'a Arc<Storage>>) -> Held {
    Held::Storages(
        storages
            .into_iter()
            .map(|s| s.clone() as Arc<dyn std::any::Any + Send + Sync>)
            .collect(),
    )
}

/// An accessor of a host-task group, prepared on the host.
pub struct HostPrepared {
    pub storage: Arc<Storage>,
    pub buffer: Arc<Buffer>,
    /// Host pointer to the accessor's first element.
    pub ptr: usize,
    /// Byte offset of the accessor's first element in the buffer.
    pub offset: usize,
}

impl Queue {
    /// Prepares host-task accessors: waits for conflicting work, brings the
    /// pages home (copies the group then waits for) and records `done` as
    /// the group's access.
    pub fn prepare_host_accesses(
        &self,
        reqs: &[AccessReq<'_>],
        waits: &mut Deps,
        done: &Arc<Event>,
    ) -> Result<Vec<HostPrepared>> {
        let mut order: SmallVec<[usize; 8]> = (0..reqs.len()).collect();
        order.sort_by_key(|&i| reqs[i].buffer.owner.storage.id);
        let mut pending: Vec<(Arc<Storage>, Box3, bool)> = Vec::new();
        let mut slots: Vec<Option<HostPrepared>> = (0..reqs.len()).map(|_| None).collect();
        // Held until every access is recorded.
        let mut turns: SmallVec<[Turn; 4]> = SmallVec::new();
        let mut last_id = 0;
        for i in order {
            let r = &reqs[i];
            let s = r.buffer.owner.storage.clone();
            if s.id != last_id {
                turns.push(s.take_turn());
                last_id = s.id;
            }
            let pages = r.buffer.pages_of(r.offset, r.range)?;
            let mut st = s.state.lock();
            prune_if(&mut st, false);
            let conflicts = st.tracker.conflicts(&pages, r.mode.writes(), 0);
            let mut loose = false;
            waits.extend(token_events(&conflicts, &self.ctx, &mut loose)?);
            st.eventful |= loose;
            let mut host = ensure_host(&s, &mut st, r.mode.writes())?;
            for part in r.buffer.fetch_boxes(r.mode, r.offset, r.range, &pages) {
                waits.extend(fetch(&s, &mut st, 0, &part, None)?);
            }
            // Data fetched into read-only user memory goes to a private
            // copy instead, which the task must see.
            host = host_ptr(&st).unwrap_or(host);
            let off = r.buffer.view.byte_offset(r.offset);
            drop(st);
            pending.push((s.clone(), pages, r.mode.writes()));
            slots[i] = Some(HostPrepared {
                storage: s,
                buffer: Arc::new(Buffer {
                    owner: r.buffer.owner.clone(),
                    view: r.buffer.view,
                    dims: r.buffer.dims,
                }),
                ptr: host + off,
                offset: off,
            });
        }
        for (s, pages, write) in pending {
            let mut st = s.state.lock();
            record(&mut st, pages, write, Token::Cmd(done.clone()), 0, 0);
            if write {
                let g = s.geom;
                for (i, b) in st.bits.iter_mut().enumerate() {
                    pages::set_box(&g, b, &pages, i == 0);
                }
                st.has_data = true;
            }
        }
        Ok(slots.into_iter().flatten().collect())
    }
}

/// An active host accessor.
pub struct HostAccessor {
    storage: Arc<Storage>,
    hold: Arc<HostHold>,
    pub ptr: usize,
}

impl Drop for HostAccessor {
    fn drop(&mut self) {
        self.hold.release();
        let mut st = self.storage.state.lock();
        prune(&mut st);
    }
}

impl Buffer {
    /// Maps a range of the buffer on the host; returns once the data is
    /// current there. Conflicting commands submitted later wait until the
    /// accessor is released.
    pub fn host_access(
        &self,
        mode: Mode,
        offset: [usize; 3],
        range: [usize; 3],
    ) -> Result<HostAccessor> {
        let s = self.owner.storage.clone();
        let pages = self.pages_of(offset, range)?;
        let _turn = s.take_turn();
        let mut st = s.state.lock();
        prune(&mut st);
        let conflicts = st.tracker.conflicts(&pages, mode.writes(), 0);
        for t in &conflicts {
            match t {
                Token::Cmd(e) => e.wait()?,
                Token::Lane(p) => {
                    let (e, exact) = p.event_exact()?;
                    st.eventful |= !exact;
                    if let Some(e) = e {
                        e.wait()?
                    }
                }
                Token::Host(h) if !h.released.load(Ordering::Acquire) => {
                    return Err(Error::invalid(format!(
                        "a {} host accessor conflicts with another host accessor of this buffer that is \
                         still held; release it first",
                        mode.name()
                    )))
                }
                Token::Host(_) => {}
            }
        }
        let mut host = ensure_host(&s, &mut st, mode.writes())?;
        for part in self.fetch_boxes(mode, offset, range, &pages) {
            for e in fetch(&s, &mut st, 0, &part, None)? {
                e.wait()?;
            }
        }
        // Data fetched into read-only user memory goes to a private copy
        // instead, which the accessor must see.
        host = host_ptr(&st).unwrap_or(host);
        let hold = Arc::new(HostHold {
            released: AtomicBool::new(false),
            gates: Mutex::new(Vec::new()),
        });
        record(
            &mut st,
            pages,
            mode.writes(),
            Token::Host(hold.clone()),
            0,
            0,
        );
        if mode.writes() {
            let g = s.geom;
            for (i, b) in st.bits.iter_mut().enumerate() {
                pages::set_box(&g, b, &pages, i == 0);
            }
            st.has_data = true;
        }
        let ptr = host + self.view.byte_offset(offset);
        drop(st);
        Ok(HostAccessor {
            storage: s,
            hold,
            ptr,
        })
    }

    /// Starts bringing every page home to the host; returns when the copies
    /// are enqueued, with the events to wait for.
    pub fn update_host(&self) -> Result<Vec<Arc<Event>>> {
        let s = self.owner.storage.clone();
        let _turn = s.take_turn();
        let mut st = s.state.lock();
        prune(&mut st);
        ensure_host(&s, &mut st, true)?;
        let all = s.geom.all_pages();
        let evs = fetch(&s, &mut st, 0, &all, None)?;
        for e in &evs {
            record(&mut st, all, false, Token::Cmd(e.clone()), 0, 0);
        }
        Ok(evs)
    }
}

/// Buffers the user released whose storage is still held by commands in
/// flight: allocating may wait for those to be dropped first.
static RELEASED_ALIVE: AtomicUsize = AtomicUsize::new(0);

impl Drop for Owner {
    fn drop(&mut self) {
        RELEASED_ALIVE.fetch_add(1, Ordering::AcqRel);
        let dest = if !self.write_back.load(Ordering::Acquire) {
            None
        } else if self.final_set.load(Ordering::Acquire) {
            *self.final_data.get_mut()
        } else {
            match self.ownership {
                Ownership::WriteBack => Some(self.user_ptr),
                Ownership::Shared => match self.still_shared {
                    // SAFETY: the user's callback with its user data.
                    Some((f, ud)) if unsafe { f(ud as *mut c_void) } => Some(self.user_ptr),
                    _ => None,
                },
                _ => None,
            }
        };
        let Some(dest) = dest else { return };
        let s = self.storage.clone();
        let mut st = s.state.lock();
        // Wait for every writer, then bring the pages home.
        for t in st.tracker.tokens() {
            match t {
                Token::Cmd(e) => {
                    let _ = e.wait();
                }
                Token::Lane(p) => {
                    if let Ok(Some(e)) = p.event() {
                        let _ = e.wait();
                    }
                }
                Token::Host(_) => {}
            }
        }
        let g = s.geom;
        let all = g.all_pages();
        let host = match fetch(&s, &mut st, 0, &all, None) {
            Ok(evs) => {
                for e in evs {
                    let _ = e.wait();
                }
                host_ptr(&st)
            }
            Err(e) => {
                eprintln!(
                    "syrah: writing the buffer back at release failed: {}",
                    e.message
                );
                None
            }
        };
        let Some(h) = host else { return };
        if h == dest {
            return;
        }
        // Copy the pages that hold data; pages never written anywhere leave
        // the destination untouched.
        // SAFETY: both hold the buffer's bytes: the host storage and the
        // destination the user named.
        unsafe { copy_host_pages(&g, &st.bits[0], h, dest) };
    }
}

/// Copies the pages marked in `host_bits` from `from` to `to`.
///
/// # Safety
/// Both must hold the buffer's bytes and not overlap.
unsafe fn copy_host_pages(g: &Geometry, host_bits: &PageBits, from: usize, to: usize) {
    let n = g.pages();
    for z in 0..n[0] {
        for y in 0..n[1] {
            for x in 0..n[2] {
                if !host_bits[g.linear([z, y, x])] {
                    continue;
                }
                let pb = Box3::new([z, y, x], [z + 1, y + 1, x + 1]);
                for (off, len) in g.byte_runs(&g.elements_of(&pb)) {
                    // SAFETY: the caller's guarantee; the runs lie inside
                    // the buffer.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            (from + off) as *const u8,
                            (to + off) as *mut u8,
                            len,
                        )
                    };
                }
            }
        }
    }
}

/// Which side of an explicit copy a window is on.
#[derive(Clone, Copy)]
enum Side {
    /// Packed host memory.
    Host(usize),
    /// A buffer's allocation on the queue's device: pointer (0 without USM),
    /// memory object if any, and the window's element box in the view.
    Dev {
        ptr: usize,
        mem: Option<usize>,
        view: Geometry,
        lo: [usize; 3],
    },
}

impl Side {
    /// Byte offset of row (z, y) of the window and the row pitch / slice
    /// pitch used by rectangular copies.
    fn row(&self, ext: [usize; 3], elem: usize, z: usize, y: usize) -> usize {
        match *self {
            Side::Host(_) => (z * ext[1] + y) * ext[2] * elem,
            Side::Dev { view, lo, .. } => view.byte_offset([lo[0] + z, lo[1] + y, lo[2]]),
        }
    }

    fn pitches(&self, ext: [usize; 3], elem: usize) -> (usize, usize) {
        match *self {
            Side::Host(_) => (ext[2] * elem, ext[1] * ext[2] * elem),
            Side::Dev { view, .. } => (
                view.range[2] * view.elem,
                view.range[1] * view.range[2] * view.elem,
            ),
        }
    }

    fn origin(&self, elem: usize) -> [usize; 3] {
        match *self {
            Side::Host(_) => [0; 3],
            Side::Dev { lo, .. } => [lo[2] * elem, lo[1], lo[0]],
        }
    }

    fn base(&self) -> usize {
        match *self {
            Side::Host(p) => p,
            Side::Dev { ptr, .. } => ptr,
        }
    }

    fn mem(&self) -> Option<usize> {
        match *self {
            Side::Host(_) => None,
            Side::Dev { mem, .. } => mem,
        }
    }

    fn has_ptr(&self) -> bool {
        self.base() != 0
    }

    fn contiguous(&self, ext: [usize; 3]) -> bool {
        match *self {
            Side::Host(_) => true,
            Side::Dev { view, .. } => {
                ext[0] == 1 && ext[1] == 1
                    || (ext[2] == view.range[2] && (ext[0] == 1 || ext[1] == view.range[1]))
            }
        }
    }
}

impl Queue {
    /// Copies a window of `ext` elements of `elem` bytes between two sides,
    /// after `deps`; one command when the backend allows, else one per row.
    fn copy_window(
        &self,
        dst: Side,
        src: Side,
        ext: [usize; 3],
        elem: usize,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        let bytes = ext.iter().product::<usize>() * elem;
        let first = |s: &Side| s.row(ext, elem, 0, 0);
        if dst.contiguous(ext) && src.contiguous(ext) {
            let (d0, s0) = (first(&dst), first(&src));
            return if dst.has_ptr() && src.has_ptr() {
                // SAFETY: both windows lie inside live allocations of at
                // least `bytes` bytes from their first element.
                unsafe {
                    self.copy_raw(
                        (dst.base() + d0) as *mut c_void,
                        (src.base() + s0) as *const c_void,
                        bytes,
                        deps,
                        "buffer copy",
                        None,
                    )
                }
            } else {
                self.copy_mem_at(dst, src, d0, s0, bytes, deps)
            };
        }
        let dev_ok = |s: &Side| matches!(s, Side::Host(_)) || s.mem().is_some();
        if dev_ok(&dst) && dev_ok(&src) {
            return self.copy_rect_between(dst, src, ext, elem, deps);
        }
        // Row by row, through pointers (USM without views).
        let mut evs: Deps = SmallVec::new();
        for z in 0..ext[0] {
            for y in 0..ext[1] {
                let (d, s) = (dst.row(ext, elem, z, y), src.row(ext, elem, z, y));
                // SAFETY: each row lies inside its allocation.
                evs.push(unsafe {
                    self.copy_raw(
                        (dst.base() + d) as *mut c_void,
                        (src.base() + s) as *const c_void,
                        ext[2] * elem,
                        deps,
                        "buffer copy (row)",
                        None,
                    )
                }?);
            }
        }
        self.marker(&evs, "buffer copy")
    }

    fn copy_mem_at(
        &self,
        dst: Side,
        src: Side,
        d0: usize,
        s0: usize,
        len: usize,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        self.copy_mem(
            (dst.mem(), dst.base()),
            (src.mem(), src.base()),
            (d0, s0),
            len,
            deps,
        )
    }

    fn copy_rect_between(
        &self,
        dst: Side,
        src: Side,
        ext: [usize; 3],
        elem: usize,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        let rect = |s: &Side| RectSide {
            side: (s.mem(), s.base()),
            origin: s.origin(elem),
            pitches: s.pitches(ext, elem),
        };
        self.enqueue_rect(
            rect(&dst),
            rect(&src),
            [ext[2] * elem, ext[1], ext[0]],
            deps,
        )
    }

    fn dev_side(&self, p: &Prepared, r: &AccessReq<'_>) -> Result<Side> {
        let st = p.storage.state.lock();
        let d = &st.devs[p.alloc - 1];
        Ok(Side::Dev {
            ptr: d.ptr,
            mem: d.mem,
            view: r.buffer.view,
            lo: r.offset,
        })
    }

    /// Explicit copy between an accessor and packed host memory (`to_host`:
    /// from the accessor into `host`, else from `host` into it).
    ///
    /// # Safety
    /// `host` must hold the accessor's bytes and stay valid until the
    /// returned event completes.
    pub unsafe fn copy_host_accessor(
        &self,
        r: &AccessReq<'_>,
        host: usize,
        to_host: bool,
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        let mut waits: Deps = deps.iter().cloned().collect();
        let prepared = self.prepare_accesses(std::slice::from_ref(r), &mut waits)?;
        let p = &prepared[0];
        let dev = self.dev_side(p, r)?;
        let ext = r.range;
        let elem = r.buffer.view.elem;
        let ev = if to_host {
            self.copy_window(Side::Host(host), dev, ext, elem, &waits)?
        } else {
            self.copy_window(dev, Side::Host(host), ext, elem, &waits)?
        };
        self.commit_accesses(&prepared, &ev);
        self.hold(ev.clone(), Some(held_storages([&p.storage])));
        Ok(ev)
    }

    /// Explicit copy from one accessor to another of the same shape.
    ///
    /// With no event wanted, a copy of one contiguous run between device
    /// allocations goes without an OpenCL event where it can, as kernel
    /// launches with accessors do: later accesses find it by its place on
    /// its lane.
    pub fn copy_accessors(
        &self,
        src: &AccessReq<'_>,
        dst: &AccessReq<'_>,
        deps: &[Arc<Event>],
        want_event: bool,
    ) -> Result<Submitted> {
        let mut waits: Deps = deps.iter().cloned().collect();
        let reqs = [
            AccessReq {
                buffer: src.buffer,
                mode: src.mode,
                offset: src.offset,
                range: src.range,
            },
            AccessReq {
                buffer: dst.buffer,
                mode: dst.mode,
                offset: dst.offset,
                range: dst.range,
            },
        ];
        // Transfers for the accessors and the copy share one lane.
        let _group = self.group_lane();
        let mut on_lanes = LanePositions::new();
        let prepared = self.prepare_accesses_at(&reqs, &mut waits, Some(&mut on_lanes))?;
        let s = self.dev_side(&prepared[0], src)?;
        let d = self.dev_side(&prepared[1], dst)?;
        let keep = Some(held_storages(prepared.iter().map(|p| &p.storage)));
        let (ext, elem) = (src.range, src.buffer.view.elem);
        let bytes = ext.iter().product::<usize>() * elem;
        let run =
            (d.contiguous(ext) && s.contiguous(ext) && d.has_ptr() && s.has_ptr()).then(|| {
                (
                    (d.base() + d.row(ext, elem, 0, 0)) as *mut c_void,
                    (s.base() + s.row(ext, elem, 0, 0)) as *const c_void,
                )
            });
        // Both sides are device allocations: never staged.
        let done = match run {
            Some((to, from)) => {
                let want = want_event || prepared.iter().any(|p| p.eventful);
                self.submit_quiet(&waits, &on_lanes, "buffer copy", keep, want, |q, wl, ev| {
                    self.copy_cmd(q, to, from, bytes, wl, ev)
                })?
                .with_bytes(bytes)
            }
            None => {
                for p in &on_lanes {
                    waits.extend(p.event()?);
                }
                let ev = self.copy_window(d, s, ext, elem, &waits)?;
                self.hold(ev.clone(), keep);
                Submitted::Event(ev)
            }
        };
        self.commit_submitted(&prepared, &done);
        Ok(done)
    }

    /// Fills an accessor's window with a pattern of 1–128 bytes (a power
    /// of two).
    pub fn fill_accessor(
        &self,
        r: &AccessReq<'_>,
        pattern: &[u8],
        deps: &[Arc<Event>],
    ) -> Result<Arc<Event>> {
        let mut waits: Deps = deps.iter().cloned().collect();
        let prepared = self.prepare_accesses(std::slice::from_ref(r), &mut waits)?;
        let p = &prepared[0];
        let side = self.dev_side(p, r)?;
        let elem = r.buffer.view.elem;
        let ext = r.range;
        let row_bytes = ext[2] * elem;
        let rows: Vec<(usize, usize)> = if side.contiguous(ext) {
            vec![(
                side.row(ext, elem, 0, 0),
                ext.iter().product::<usize>() * elem,
            )]
        } else {
            (0..ext[0])
                .flat_map(|z| (0..ext[1]).map(move |y| (z, y)))
                .map(|(z, y)| (side.row(ext, elem, z, y), row_bytes))
                .collect()
        };
        let api = api()?;
        let mut evs: Deps = SmallVec::new();
        for (off, len) in rows {
            let ev = if side.has_ptr() {
                // SAFETY: the run lies inside the buffer's USM allocation.
                unsafe { self.fill((side.base() + off) as *mut c_void, pattern, len, &waits) }?
            } else {
                let m = side
                    .mem()
                    .ok_or_else(|| Error::new(Status::Internal, "allocation without memory"))?;
                self.submit(
                    &waits,
                    format!("buffer fill of {len} bytes"),
                    None,
                    |q, wl, ev| {
                        // SAFETY: the run lies inside the memory object; OpenCL
                        // copies the pattern before returning.
                        let rc = unsafe {
                            (api.clEnqueueFillBuffer)(
                                q,
                                m as cl_mem,
                                pattern.as_ptr().cast(),
                                pattern.len(),
                                off,
                                len,
                                wl.len() as cl_uint,
                                super::queue::ptr_or_null(wl),
                                ev,
                            )
                        };
                        check(rc, "clEnqueueFillBuffer")
                    },
                )?
                .with_bytes(len)
            };
            evs.push(ev);
        }
        let ev = if evs.len() == 1 {
            evs.remove(0)
        } else {
            self.marker(&evs, "buffer fill")?
        };
        self.commit_accesses(&prepared, &ev);
        self.hold(ev.clone(), Some(held_storages([&p.storage])));
        Ok(ev)
    }
}
