//! The entries of a context's build cache: what a program was made from,
//! and the built OpenCL program every handle of that key shares.

use super::platform::Device;
use crate::opencl::ffi::*;
use crate::opencl::loader::api;

/// What a program was made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProgramKind {
    Source,
    Il,
    Binary,
}

/// Build cache key: kind, exact bytes, options and target devices.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProgramKey {
    pub kind: ProgramKind,
    pub bytes: Vec<u8>,
    pub options: String,
    pub devices: Vec<usize>,
}

/// A built OpenCL program, shared by every handle made from the same key.
pub struct ProgramInner {
    pub cl: cl_program,
    pub devices: Vec<&'static Device>,
}

// SAFETY: cl_program is thread-safe for everything but clSetKernelArg on
// its kernels, which Kernel serialises.
unsafe impl Send for ProgramInner {}
// SAFETY: as above.
unsafe impl Sync for ProgramInner {}

impl Drop for ProgramInner {
    fn drop(&mut self) {
        if let Ok(api) = api() {
            // SAFETY: this value owns one reference to the program.
            unsafe { (api.clReleaseProgram)(self.cl) };
        }
    }
}
