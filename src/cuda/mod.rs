//! The CUDA back end for NVIDIA GPUs, beside `opencl` and independent of
//! it: the driver library loaded at run time (`loader`), OpenCL C's PTX
//! made loadable by CUDA (`ptx`), and modules with their launches
//! (`module`).

pub mod bounce;
pub mod callbacks;
pub mod devices;
pub mod driver;
pub mod events;
pub mod graph;
pub mod hold;
pub mod hostcopy;
pub mod landing;
pub mod loader;
pub mod memory;
pub mod module;
pub mod program;
pub mod ptx;
pub mod state;
