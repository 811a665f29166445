//! Entry points of `cl_khr_command_buffer` (commands recorded once into a
//! command-buffer and enqueued as one), resolved per platform through
//! `clGetExtensionFunctionAddressForPlatform`. Only the calls whose shape
//! is the same from the extension's provisional 0.9.0 to its 1.0 are used,
//! and, from `cl_khr_command_buffer_mutable_dispatch`, the update entry
//! point in the shape it has had since 0.9.2 (an array of configurations).

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

pub type cl_mutable_command_khr = *mut c_void;
/// `CL_COMMAND_BUFFER_MUTABLE_KHR`: a command-buffer flag allowing updates.
pub const CL_COMMAND_BUFFER_MUTABLE_KHR: cl_ulong = 1 << 1;
/// `CL_DEVICE_MUTABLE_DISPATCH_CAPABILITIES_KHR` and its bit for updating
/// kernel arguments, also the value of the kernel command property
/// `CL_MUTABLE_DISPATCH_UPDATABLE_FIELDS_KHR`.
pub const CL_DEVICE_MUTABLE_DISPATCH_CAPABILITIES_KHR: cl_uint = 0x12B0;
pub const CL_MUTABLE_DISPATCH_ARGUMENTS_KHR: cl_ulong = 1 << 3;
pub const CL_MUTABLE_DISPATCH_UPDATABLE_FIELDS_KHR: cl_ulong = 0x12B1;
/// The configuration type of `cl_mutable_dispatch_config_khr` (0.9.2 on).
pub const CL_STRUCTURE_TYPE_MUTABLE_DISPATCH_CONFIG_KHR: cl_uint = 0;
/// The first version of the mutable-dispatch extension whose update entry
/// point takes an array of configurations: `CL_MAKE_VERSION(0, 9, 2)`.
pub const MUTABLE_DISPATCH_ARRAY_VERSION: u32 = (9 << 12) | 2;

/// One argument of an update, as `clSetKernelArg` (or, in the SVM list,
/// `clSetKernelArgSVMPointer`) would take it.
#[repr(C)]
pub struct cl_mutable_dispatch_arg_khr {
    pub arg_index: cl_uint,
    pub arg_size: usize,
    pub arg_value: *const c_void,
}

/// The update of one kernel command (0.9.2 on: no type or next fields).
#[repr(C)]
pub struct cl_mutable_dispatch_config_khr {
    pub command: cl_mutable_command_khr,
    pub num_args: cl_uint,
    pub num_svm_args: cl_uint,
    pub num_exec_infos: cl_uint,
    pub work_dim: cl_uint,
    pub arg_list: *const cl_mutable_dispatch_arg_khr,
    pub arg_svm_list: *const cl_mutable_dispatch_arg_khr,
    pub exec_info_list: *const c_void,
    pub global_work_offset: *const usize,
    pub global_work_size: *const usize,
    pub local_work_size: *const usize,
}

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
    *mut cl_mutable_command_khr,
) -> cl_int;
pub type UpdateFn = unsafe extern "C" fn(
    cl_command_buffer_khr,
    cl_uint,
    *const cl_uint,
    *const *const c_void,
) -> cl_int;

/// The extension's functions for one platform.
#[derive(Clone, Copy)]
pub struct CommandBuffers {
    pub clCreateCommandBufferKHR: Create,
    pub clFinalizeCommandBufferKHR: OneBuffer,
    pub clReleaseCommandBufferKHR: OneBuffer,
    pub clEnqueueCommandBufferKHR: Enqueue,
    pub clCommandNDRangeKernelKHR: NdRange,
    /// `cl_khr_command_buffer_mutable_dispatch`'s update, where the
    /// platform has it (devices say which version they implement).
    pub clUpdateMutableCommandsKHR: Option<UpdateFn>,
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
            clUpdateMutableCommandsKHR: resolve_ext!(api, p, clUpdateMutableCommandsKHR: UpdateFn),
        })
    }
}
