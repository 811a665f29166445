//! Entry points of `cl_intel_unified_shared_memory`, resolved per platform
//! through `clGetExtensionFunctionAddressForPlatform`.

#![allow(non_snake_case)]

use super::ffi::*;
use super::loader::Api;
use std::ffi::c_void;

type AllocHost = unsafe extern "C" fn(
    cl_context,
    *const cl_mem_properties_intel,
    usize,
    cl_uint,
    *mut cl_int,
) -> *mut c_void;
type AllocDev = unsafe extern "C" fn(
    cl_context,
    cl_device_id,
    *const cl_mem_properties_intel,
    usize,
    cl_uint,
    *mut cl_int,
) -> *mut c_void;
type Free = unsafe extern "C" fn(cl_context, *mut c_void) -> cl_int;
type SetArg = unsafe extern "C" fn(cl_kernel, cl_uint, *const c_void) -> cl_int;
type Memcpy = unsafe extern "C" fn(
    cl_command_queue,
    cl_bool,
    *mut c_void,
    *const c_void,
    usize,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
type MemFill = unsafe extern "C" fn(
    cl_command_queue,
    *mut c_void,
    *const c_void,
    usize,
    usize,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
type Migrate = unsafe extern "C" fn(
    cl_command_queue,
    *const c_void,
    usize,
    cl_mem_migration_flags,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
type Advise = unsafe extern "C" fn(
    cl_command_queue,
    *const c_void,
    usize,
    cl_mem_advice_intel,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;

/// The extension's functions for one platform.
#[derive(Clone, Copy)]
pub struct IntelUsm {
    pub clHostMemAllocINTEL: AllocHost,
    pub clDeviceMemAllocINTEL: AllocDev,
    pub clSharedMemAllocINTEL: AllocDev,
    pub clMemBlockingFreeINTEL: Free,
    pub clSetKernelArgMemPointerINTEL: SetArg,
    pub clEnqueueMemcpyINTEL: Memcpy,
    pub clEnqueueMemFillINTEL: MemFill,
    pub clEnqueueMigrateMemINTEL: Option<Migrate>,
    pub clEnqueueMemAdviseINTEL: Option<Advise>,
}

impl IntelUsm {
    /// Resolves the table; `None` when any required entry point is missing.
    pub fn load(api: &Api, p: cl_platform_id) -> Option<IntelUsm> {
        Some(IntelUsm {
            clHostMemAllocINTEL: resolve_ext!(api, p, clHostMemAllocINTEL: AllocHost)?,
            clDeviceMemAllocINTEL: resolve_ext!(api, p, clDeviceMemAllocINTEL: AllocDev)?,
            clSharedMemAllocINTEL: resolve_ext!(api, p, clSharedMemAllocINTEL: AllocDev)?,
            clMemBlockingFreeINTEL: resolve_ext!(api, p, clMemBlockingFreeINTEL: Free)?,
            clSetKernelArgMemPointerINTEL: resolve_ext!(api, p, clSetKernelArgMemPointerINTEL: SetArg)?,
            clEnqueueMemcpyINTEL: resolve_ext!(api, p, clEnqueueMemcpyINTEL: Memcpy)?,
            clEnqueueMemFillINTEL: resolve_ext!(api, p, clEnqueueMemFillINTEL: MemFill)?,
            clEnqueueMigrateMemINTEL: resolve_ext!(api, p, clEnqueueMigrateMemINTEL: Migrate),
            clEnqueueMemAdviseINTEL: resolve_ext!(api, p, clEnqueueMemAdviseINTEL: Advise),
        })
    }
}
