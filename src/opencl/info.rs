//! Typed wrappers over the `clGet*Info` queries.
//!
//! OpenCL handles are opaque identifiers that only the driver interprets,
//! so passing them on is not a dereference by this code.

#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::ffi::*;
use super::loader::{check, Api};
use crate::core::error::Result;
use std::ffi::c_void;

type InfoFn<H> = unsafe extern "C" fn(H, cl_uint, usize, *mut c_void, *mut usize) -> cl_int;

/// Reads a byte-array property through a two-step size/value query.
fn bytes<H: Copy>(f: InfoFn<H>, h: H, param: cl_uint, what: &str) -> Result<Vec<u8>> {
    let mut size = 0usize;
    check(
        // SAFETY: a size query with a null value pointer is permitted by every
        // clGet*Info function; `size` is a valid out pointer.
        unsafe { f(h, param, 0, std::ptr::null_mut(), &mut size) },
        what,
    )?;
    let mut buf = vec![0u8; size];
    if size > 0 {
        check(
            // SAFETY: `buf` holds exactly `size` writable bytes.
            unsafe {
                f(
                    h,
                    param,
                    size,
                    buf.as_mut_ptr().cast(),
                    std::ptr::null_mut(),
                )
            },
            what,
        )?;
    }
    Ok(buf)
}

fn to_string(mut b: Vec<u8>) -> String {
    while b.last() == Some(&0) {
        b.pop();
    }
    String::from_utf8_lossy(&b).trim().to_string()
}

/// Reads a plain-old-data property of exactly `size_of::<T>()` bytes.
fn scalar<H: Copy, T: Copy + Default>(f: InfoFn<H>, h: H, param: cl_uint, what: &str) -> Result<T> {
    let mut v = T::default();
    check(
        // SAFETY: `v` is a valid, writable `T`; OpenCL writes at most the size
        // passed and fails with CL_INVALID_VALUE if the property is larger.
        unsafe {
            f(
                h,
                param,
                std::mem::size_of::<T>(),
                (&mut v as *mut T).cast(),
                std::ptr::null_mut(),
            )
        },
        what,
    )?;
    Ok(v)
}

pub fn platform_string(api: &Api, p: cl_platform_id, param: cl_platform_info) -> Result<String> {
    bytes(api.clGetPlatformInfo, p, param, "clGetPlatformInfo").map(to_string)
}

pub fn device_string(api: &Api, d: cl_device_id, param: cl_device_info) -> Result<String> {
    bytes(api.clGetDeviceInfo, d, param, "clGetDeviceInfo").map(to_string)
}

/// The version a device reports for extension `name`
/// (`CL_DEVICE_EXTENSIONS_WITH_VERSION`, OpenCL 3), as
/// `major << 22 | minor << 12 | patch`; `None` where it is not reported.
pub fn device_extension_version(api: &Api, d: cl_device_id, name: &str) -> Option<u32> {
    const CL_DEVICE_EXTENSIONS_WITH_VERSION: cl_uint = 0x1060;
    // cl_name_version: a cl_version, then a 64-byte NUL-padded name.
    const ENTRY: usize = 4 + 64;
    let b = bytes(
        api.clGetDeviceInfo,
        d,
        CL_DEVICE_EXTENSIONS_WITH_VERSION,
        "CL_DEVICE_EXTENSIONS_WITH_VERSION",
    )
    .ok()?;
    b.chunks_exact(ENTRY).find_map(|e| {
        let n = &e[4..];
        let len = n.iter().position(|&c| c == 0).unwrap_or(n.len());
        (&n[..len] == name.as_bytes()).then(|| u32::from_ne_bytes([e[0], e[1], e[2], e[3]]))
    })
}

pub fn device_scalar<T: Copy + Default>(
    api: &Api,
    d: cl_device_id,
    param: cl_device_info,
) -> Result<T> {
    scalar(api.clGetDeviceInfo, d, param, "clGetDeviceInfo")
}

/// A device property that may be absent (older devices, missing extension).
pub fn device_scalar_or<T: Copy + Default>(
    api: &Api,
    d: cl_device_id,
    param: cl_device_info,
    default: T,
) -> T {
    device_scalar(api, d, param).unwrap_or(default)
}

pub fn device_sizes(api: &Api, d: cl_device_id, param: cl_device_info) -> Result<Vec<usize>> {
    let b = bytes(api.clGetDeviceInfo, d, param, "clGetDeviceInfo")?;
    Ok(b.chunks_exact(std::mem::size_of::<usize>())
        .map(|c| {
            let mut a = [0u8; std::mem::size_of::<usize>()];
            a.copy_from_slice(c);
            usize::from_ne_bytes(a)
        })
        .collect())
}

pub fn event_scalar<T: Copy + Default>(api: &Api, e: cl_event, param: cl_event_info) -> Result<T> {
    scalar(api.clGetEventInfo, e, param, "clGetEventInfo")
}

pub fn profiling(api: &Api, e: cl_event, param: cl_profiling_info) -> Result<u64> {
    scalar(
        api.clGetEventProfilingInfo,
        e,
        param,
        "clGetEventProfilingInfo",
    )
}

pub fn program_bytes(api: &Api, p: cl_program, param: cl_program_info) -> Result<Vec<u8>> {
    bytes(api.clGetProgramInfo, p, param, "clGetProgramInfo")
}

pub fn program_string(api: &Api, p: cl_program, param: cl_program_info) -> Result<String> {
    program_bytes(api, p, param).map(to_string)
}

pub fn build_log(api: &Api, p: cl_program, d: cl_device_id) -> String {
    let f = api.clGetProgramBuildInfo;
    let mut size = 0usize;
    // SAFETY: size query with null value; `size` is a valid out pointer.
    let rc = unsafe {
        f(
            p,
            d,
            CL_PROGRAM_BUILD_LOG,
            0,
            std::ptr::null_mut(),
            &mut size,
        )
    };
    if rc != CL_SUCCESS || size == 0 {
        return String::new();
    }
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` holds `size` writable bytes.
    let rc = unsafe {
        f(
            p,
            d,
            CL_PROGRAM_BUILD_LOG,
            size,
            buf.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    };
    if rc != CL_SUCCESS {
        return String::new();
    }
    to_string(buf)
}

pub fn kernel_scalar<T: Copy + Default>(
    api: &Api,
    k: cl_kernel,
    param: cl_kernel_info,
) -> Result<T> {
    scalar(api.clGetKernelInfo, k, param, "clGetKernelInfo")
}

pub fn kernel_string(api: &Api, k: cl_kernel, param: cl_kernel_info) -> Result<String> {
    bytes(api.clGetKernelInfo, k, param, "clGetKernelInfo").map(to_string)
}

pub fn kernel_work_group<T: Copy + Default>(
    api: &Api,
    k: cl_kernel,
    d: cl_device_id,
    param: cl_kernel_work_group_info,
) -> Result<T> {
    let mut v = T::default();
    check(
        // SAFETY: `v` is a valid writable `T` of the size passed.
        unsafe {
            (api.clGetKernelWorkGroupInfo)(
                k,
                d,
                param,
                std::mem::size_of::<T>(),
                (&mut v as *mut T).cast(),
                std::ptr::null_mut(),
            )
        },
        "clGetKernelWorkGroupInfo",
    )?;
    Ok(v)
}
