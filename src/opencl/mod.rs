//! The only part of Syrah that calls OpenCL.

pub mod ffi;
pub mod info;
pub mod intel;
pub mod loader;
