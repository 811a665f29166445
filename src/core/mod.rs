//! Pure logic with no OpenCL calls: selection, aspects, allocation
//! registry, launch checks, fill planning, staging plans, page maps,
//! dependency tracking, counted locks, lane order, trace text, copies around the
//! caches and how long threads spin.

pub mod aspects;
pub mod cl_status;
pub mod counted;
pub mod deps;
pub mod error;
pub mod fill;
pub mod graph;
pub mod last_error;
pub mod launch;
pub mod linger;
pub mod order;
pub mod page_maps;
pub mod pages;
pub mod pool;
pub mod prefetch;
pub mod ptx;
pub mod registry;
pub mod route;
pub mod selector;
pub mod slab;
pub mod staging;
pub mod stream;
pub mod trace;
pub mod window;
