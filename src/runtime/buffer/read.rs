//! Small reads: exactly the bytes of a range of a buffer's elements, into
//! the user's memory, once the commands writing them are done, from
//! wherever they are current, without making any page current anywhere
//! (a host accessor would bring whole pages home).

use super::access::{refuse_held, wait_on_host};
use super::alloc::host_ptr;
use super::storage::{Buffer, State};
use super::transfer::{fetch_now, prune, token_events_for_copy, transfer_queue};
use crate::backend::HostEnd;
use crate::core::error::{Error, Result, Status};
use crate::core::pages::Box3;
use crate::runtime::event::Event;
use std::ffi::c_void;
use std::sync::Arc;

impl Buffer {
    /// Copies the `range` elements at `offset` (three dimensions, the last
    /// contiguous) into `dst`, packed in row order; returns the bytes
    /// copied.
    ///
    /// # Safety
    /// `dst` must be writable for the range's bytes.
    pub unsafe fn read(
        &self,
        offset: [usize; 3],
        range: [usize; 3],
        dst: *mut u8,
    ) -> Result<usize> {
        let s = self.storage.clone();
        let g = s.geom;
        if self.view != g {
            // A reinterpreted view's elements are no box of the storage's:
            // read through a host accessor.
            let acc = self.host_access(super::storage::Mode::Read, offset, range)?;
            let runs = self.view.byte_runs(&elements(offset, range));
            let base = acc.ptr - self.view.byte_offset(offset);
            // SAFETY: the accessor maps these runs on the host; `dst` holds
            // their total per the contract.
            return Ok(unsafe { copy_runs(&runs, base, dst) });
        }
        let pages = self.pages_of(offset, range)?;
        let _turn = s.take_turn();
        let mut st = s.state.lock();
        prune(&mut st);
        if !st.has_data {
            return Err(Error::invalid(
                "the buffer holds no data yet: nothing has been written to it",
            ));
        }
        refuse_held(&st, &pages, false, "a read")?;
        let runs = g.byte_runs(&elements(offset, range));
        let total: usize = runs.iter().map(|r| r.1).sum();
        // From the host when its pages are current there; else straight
        // from a device holding all of them (these bytes only), or after
        // bringing the pages home. The copies go behind the commands that
        // write the pages (they wait for them themselves), then everything
        // is waited for at once.
        let holding = |st: &State| (1..st.bits.len()).find(|&i| st.bits.all_set(&g, i, &pages));
        let (copies, direct) = if st.bits.all_set(&g, 0, &pages) {
            (Vec::new(), false)
        } else if let Some(i) = holding(&st) {
            (read_from_device(&mut st, i, &pages, &runs, dst)?, true)
        } else {
            (fetch_now(&s, &mut st, &pages)?, false)
        };
        wait_on_host(&mut st, &pages, false, copies)?;
        if direct {
            return Ok(total);
        }
        let host = host_ptr(&st)
            .ok_or_else(|| Error::new(Status::Internal, "current pages without host storage"))?;
        // SAFETY: the host storage holds the buffer's bytes and is current
        // for these runs; `dst` holds `total` bytes per the contract.
        Ok(unsafe { copy_runs(&runs, host, dst) })
    }
}

/// Copies `runs` of the buffer from device `i` (1-based), which holds all
/// of `pages`, into `dst` packed, behind the commands writing those pages;
/// the copies' events, for the caller to wait for.
fn read_from_device(
    st: &mut State,
    i: usize,
    pages: &Box3,
    runs: &[(usize, usize)],
    dst: *mut u8,
) -> Result<Vec<Arc<Event>>> {
    let deps = token_events_for_copy(st, pages, 0, i)?;
    let q = transfer_queue(st, i)?;
    let (ptr, mem) = (st.devs[i - 1].ptr, st.devs[i - 1].mem);
    let mut at = 0;
    let mut events = Vec::with_capacity(runs.len());
    for &(off, len) in runs {
        let to = dst as usize + at;
        let ev = match mem.filter(|_| ptr == 0) {
            Some(m) => q.copy_mem((None, to), (Some(m), 0), (0, off), len, &deps, true)?,
            // SAFETY: the allocation holds the buffer's bytes and the run
            // lies inside it; `dst` holds the runs' total per the caller's
            // contract, and the caller waits for the copies.
            None => unsafe {
                q.copy_raw(
                    to as *mut c_void,
                    (ptr + off) as *const c_void,
                    len,
                    &deps,
                    format!("read of {len} bytes"),
                    None,
                    HostEnd::Unknown,
                )
            }?,
        };
        events.push(ev);
        at += len;
        st.stats.d2h_bytes += len as u64;
        st.stats.d2h_copies += 1;
    }
    Ok(events)
}

/// The element box of `range` elements at `offset`.
fn elements(offset: [usize; 3], range: [usize; 3]) -> Box3 {
    Box3::new(
        offset,
        [
            offset[0] + range[0],
            offset[1] + range[1],
            offset[2] + range[2],
        ],
    )
}

/// Copies byte runs of the buffer at `base` into `dst`, packed; returns the
/// bytes copied.
///
/// # Safety
/// `base` must hold the runs and `dst` their total.
unsafe fn copy_runs(runs: &[(usize, usize)], base: usize, dst: *mut u8) -> usize {
    let mut at = 0;
    for &(off, len) in runs {
        // SAFETY: the caller's guarantee.
        unsafe { std::ptr::copy_nonoverlapping((base + off) as *const u8, dst.add(at), len) };
        at += len;
    }
    at
}
