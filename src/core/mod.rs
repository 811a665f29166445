//! Pure logic with no OpenCL calls: selection, aspects, allocation
//! registry, launch checks and fill planning.

pub mod aspects;
pub mod deps;
pub mod error;
pub mod fill;
pub mod launch;
pub mod pages;
pub mod registry;
pub mod selector;
