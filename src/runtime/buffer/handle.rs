//! What the user's buffer handles do: creation, views, final data and
//! write-back, and the final write-back when the last handle goes.

use super::alloc::{copy_host_pages, ensure_dev, host_ptr};
use super::storage::{
    Buffer, BufferDesc, HostMem, Mode, Owner, Ownership, State, Stats, Storage, Token, NEXT_ID,
    RELEASED_ALIVE,
};
use super::transfer::{fetch_now, PRUNE_MIN};
use crate::core::counted::Counted;
use crate::core::deps::Tracker;
use crate::core::error::{Error, Result, Status};
use crate::core::page_maps::PageMaps;
use crate::core::pages::{self, Box3, Geometry};
use crate::runtime::queue::Queue;
use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
            allocator: Mutex::new(allocator),
            orphaned: AtomicBool::new(false),
            turn: <parking_lot::RawMutex as parking_lot::lock_api::RawMutex>::INIT,
            state: Counted::new(State {
                host: HostMem::None,
                bits: PageMaps::new(&geom),
                devs: Vec::new(),
                first: None,
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
                    st.bits.fill(0, true);
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
                    st.bits.fill(0, true);
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
        Ok(Buffer::of(owner, geom, d.dims))
    }

    pub fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    /// A view of the same storage with another element size and range.
    pub fn reinterpret(&self, elem: usize, dims: u32, range: [usize; 3]) -> Result<Buffer> {
        let r = pages::normalize(dims, &range, 1)?;
        let view = Geometry::new(elem, r, [0; 3])?;
        let total = self.storage.geom.bytes();
        if view.bytes() != total {
            return Err(Error::invalid(format!(
                "a reinterpreted view must keep the buffer's {total} bytes; {r:?} elements of {elem} bytes are {} bytes",
                view.bytes()
            )));
        }
        Ok(Buffer::of(self.owner.clone(), view, dims))
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
        // A reinterpreted view's exact coverage is not a page box.
        if mode.needs_data() || !self.plain {
            return vec![*pages];
        }
        pages::subtract(pages, &self.view.covered_box(offset, range))
    }

    /// The storage pages an element box of this view touches.
    pub fn pages_of(&self, offset: [usize; 3], range: [usize; 3]) -> Result<Box3> {
        if self.plain {
            // The storage's own geometry, which this handle holds.
            self.view.check_elements(offset, range)?;
            return Ok(self.view.page_box(offset, range));
        }
        let sg = &self.storage.geom;
        if offset == [0; 3] && range == self.view.range {
            // The whole view, which spans every byte of the storage.
            return Ok(sg.all_pages());
        }
        self.view.check_elements(offset, range)?;
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
        self.storage.state.lock().stats
    }

    /// The buffer's allocation on the queue's device as a native object:
    /// a USM pointer (true) or, without USM, its `cl_mem` (false).
    pub fn native(&self, q: &Queue) -> Result<(*mut c_void, bool)> {
        native_of(&self.storage, q)
    }

    /// The allocation of this buffer on the queue's device (made now if it
    /// does not exist yet): valid until the buffer is destroyed.
    pub fn device_pointer(&self, q: &Queue) -> Result<*mut c_void> {
        let s = &self.storage;
        let mut st = s.state.lock();
        let i = ensure_dev(s, &mut st, &q.ctx, q.device)?;
        let p = st.devs[i - 1].ptr;
        if p == 0 {
            let why = if q.ctx.strategy == crate::core::aspects::UsmStrategy::None {
                "has no USM"
            } else {
                "keeps buffers in memory objects, which its kernels take with offsets \
                 (SYRAH_KERNEL_OFFSETS=off keeps them in USM)"
            };
            return Err(Error::new(
                Status::FeatureNotSupported,
                format!(
                    "device {} {why}: its allocation of the buffer is a plain memory object, not a pointer",
                    q.device.label()
                ),
            ));
        }
        Ok(p as *mut c_void)
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        RELEASED_ALIVE.fetch_add(1, Ordering::AcqRel);
        self.write_back_final();
        // The memory goes as soon as the commands using it are done.
        self.storage.free_when_idle();
    }
}

impl Owner {
    /// Writes the final data back where the ownership mode or the user
    /// asked for it, waiting for the commands writing it.
    fn write_back_final(&mut self) {
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
        let host = match fetch_now(&s, &mut st, &all) {
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
        unsafe { copy_host_pages(&g, st.bits.map(0), h, dest) };
    }
}

/// [`Buffer::native`] of the buffer whose data is `s`.
pub fn native_of(s: &Arc<Storage>, q: &Queue) -> Result<(*mut c_void, bool)> {
    let mut st = s.state.lock();
    let i = ensure_dev(s, &mut st, &q.ctx, q.device)?;
    let d = &st.devs[i - 1];
    Ok(if d.ptr != 0 {
        (d.ptr as *mut c_void, true)
    } else {
        (d.mem.unwrap_or(0) as *mut c_void, false)
    })
}
