//! The runtime core over the OpenCL backend: devices, contexts, queues,
//! events, programs, kernels and USM.

pub(crate) mod arg_views;
pub mod buffer;
pub mod build_cache;
pub mod context;
pub mod event;
pub mod graph;
pub mod host_task;
pub(crate) mod kernel_cache;
pub mod launch;
pub(crate) mod linger;
pub mod pinned;
pub(crate) mod pinned_blocks;
pub mod platform;
pub mod program;
pub mod queue;
pub(crate) mod read_now;
pub mod staging;
pub(crate) mod staging_pipe;
pub mod trace;
pub mod usm;
pub(crate) mod usm_alloc;
pub(crate) mod usm_pool;
pub mod watch;
