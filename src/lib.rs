//! Syrah: SYCL's data model for C and C++ over any OpenCL 3 implementation
//! loaded at run time.
//!
//! Layers, in the one direction calls flow: [`capi`] (the exported C ABI)
//! calls [`runtime`] (devices, contexts, queues, programs, USM), which calls
//! [`opencl`] (the only code that talks to OpenCL), partly through the
//! back-end seam [`backend`], which `opencl` implements; [`cuda`] is the
//! CUDA back end beside it, for NVIDIA GPUs. [`core`] holds the pure logic
//! the runtime relies on and is tested without a device.

/// cbindgen:ignore
pub mod backend;
pub mod capi;
/// cbindgen:ignore
pub mod core;
/// cbindgen:ignore
pub mod cuda;
/// cbindgen:ignore
pub mod opencl;
pub mod runtime;
