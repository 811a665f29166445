//! Pure logic with no OpenCL calls: selection, aspects, allocation
//! registry, launch checks and fill planning.

pub mod aspects;
pub mod error;
pub mod fill;
pub mod launch;
pub mod registry;
pub mod selector;
