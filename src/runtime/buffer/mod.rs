//! Buffers: fixed-size storage with one lazily made allocation per device
//! (through the device's USM strategy) plus host storage, page-granular
//! up-to-date tracking, transfers planned from the page bits, and
//! dependencies inferred from accesses. The files, from the bottom up:
//! `host_blocks` (page-locked host storage), `storage` (the state),
//! `alloc` (memory), `transfer` (moving pages and
//! recording commands), `access` (command groups' and host accessors),
//! `copies` (explicit copies and fills), `window` (accessor windows staged
//! for devices without USM), `read` (small reads) and `handle` (the
//! user's handles).

mod access;
mod alloc;
mod copies;
mod handle;
mod host_blocks;
mod read;
mod storage;
mod transfer;
mod window;

pub use access::{
    held_storages, record_access, AccessReq, AccessReqs, HostAccessor, HostPrepared, Prepared,
    PreparedList,
};
pub use alloc::views_work;
pub use handle::native_of;
pub(crate) use storage::take_turns;
pub use storage::{
    Allocator, Buffer, BufferDesc, Deps, Mode, Owner, Ownership, Stats, Storage, Turn,
};
pub use window::{accessor_args, StagedWindows};
