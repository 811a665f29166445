//! The entries of a context's build cache: what a program was made from,
//! and the built program every handle of that key shares.

use super::platform::Device;
use crate::backend::{Driver, ProgramH};

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

/// A built program, shared by every handle made from the same key.
pub struct ProgramInner {
    pub handle: ProgramH,
    pub devices: Vec<&'static Device>,
    /// The back end that built it.
    pub driver: &'static dyn Driver,
}

impl Drop for ProgramInner {
    fn drop(&mut self) {
        // This value owns one reference to the program.
        self.driver.release_program(self.handle);
    }
}
