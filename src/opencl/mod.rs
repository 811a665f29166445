//! The only part of Syrah that calls OpenCL; `driver` puts it behind the
//! back-end seam.

/// Resolves extension entry point `$name` of platform `$p` as a function
/// of type `$ty`; `None` where the driver has none.
macro_rules! resolve_ext {
    ($api:expr, $p:expr, $name:ident : $ty:ty) => {
        match $crate::opencl::loader::ext_addr($api, $p, stringify!($name)) {
            // SAFETY: the driver returned this address for the named entry
            // point, whose signature the extension specification defines.
            Some(a) => Some(unsafe { std::mem::transmute::<*mut std::ffi::c_void, $ty>(a) }),
            None => None,
        }
    };
}

pub mod cmdbuf;
pub mod driver;
pub mod ffi;
pub mod handles;
pub mod info;
pub mod intel;
pub mod loader;
pub mod mem;
pub mod offsets;
pub mod program;
pub mod record;
pub mod usm;
