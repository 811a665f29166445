//! Entry points of `cl_khr_command_buffer` (commands recorded once into a
//! command-buffer and enqueued as one), resolved per platform through
//! `clGetExtensionFunctionAddressForPlatform`. Only the calls whose shape
//! is the same from the extension's provisional 0.9.0 to its 1.0 are used.

#![allow(non_snake_case, non_camel_case_types)]

use super::ffi::*;
use super::loader::Api;
use std::ffi::c_void;

pub type cl_command_buffer_khr = *mut c_void;
pub type cl_sync_point_khr = cl_uint;

/// `CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR`: queue
/// properties a command-buffer's queue must have.
pub const CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR: cl_uint = 0x12AA;
/// `CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR` and its bit saying that a
/// command-buffer created with `CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR`
/// may be enqueued again while pending (provisional versions).
pub const CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR: cl_uint = 0x12A9;
pub const CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR: cl_ulong = 1 << 2;
/// The command-buffer property `CL_COMMAND_BUFFER_FLAGS_KHR` and its flag
/// `CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR`.
pub const CL_COMMAND_BUFFER_FLAGS_KHR: cl_ulong = 0x1293;
pub const CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR: cl_ulong = 1;

type Create = unsafe extern "C" fn(
    cl_uint,
    *const cl_command_queue,
    *const cl_ulong,
    *mut cl_int,
) -> cl_command_buffer_khr;
type OneBuffer = unsafe extern "C" fn(cl_command_buffer_khr) -> cl_int;
type Enqueue = unsafe extern "C" fn(
    cl_uint,
    *mut cl_command_queue,
    cl_command_buffer_khr,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
type NdRange = unsafe extern "C" fn(
    cl_command_buffer_khr,
    cl_command_queue,
    *const cl_ulong,
    cl_kernel,
    cl_uint,
    *const usize,
    *const usize,
    *const usize,
    cl_uint,
    *const cl_sync_point_khr,
    *mut cl_sync_point_khr,
    *mut c_void,
) -> cl_int;

/// The extension's functions for one platform.
pub struct CommandBuffers {
    pub clCreateCommandBufferKHR: Create,
    pub clFinalizeCommandBufferKHR: OneBuffer,
    pub clReleaseCommandBufferKHR: OneBuffer,
    pub clEnqueueCommandBufferKHR: Enqueue,
    pub clCommandNDRangeKernelKHR: NdRange,
}

impl CommandBuffers {
    /// Resolves the table; `None` when any entry point is missing.
    pub fn load(api: &Api, p: cl_platform_id) -> Option<CommandBuffers> {
        Some(CommandBuffers {
            clCreateCommandBufferKHR: resolve_ext!(api, p, clCreateCommandBufferKHR: Create)?,
            clFinalizeCommandBufferKHR: resolve_ext!(api, p, clFinalizeCommandBufferKHR: OneBuffer)?,
            clReleaseCommandBufferKHR: resolve_ext!(api, p, clReleaseCommandBufferKHR: OneBuffer)?,
            clEnqueueCommandBufferKHR: resolve_ext!(api, p, clEnqueueCommandBufferKHR: Enqueue)?,
            clCommandNDRangeKernelKHR: resolve_ext!(api, p, clCommandNDRangeKernelKHR: NdRange)?,
        })
    }
}
