//! OpenCL's side of building programs and making kernels behind the
//! back-end seam: creating and building programs with their logs,
//! binaries, kernel names, kernels and what they need on each device.
//!
//! OpenCL handles are opaque identifiers that only the driver interprets,
//! so passing them on is not a dereference by this code.

#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::ffi::*;
use super::info;
use super::loader::{api, check, cl_error_name};
use crate::backend::{ContextH, DeviceH, KernelFacts, KernelH, ProgramH, ProgramInput};
use crate::core::aspects::UsmStrategy;
use crate::core::error::{Error, Result, Status};
use std::ffi::CString;

const CL_PROGRAM_KERNEL_NAMES: cl_program_info = 0x1168;
const CL_KERNEL_FUNCTION_NAME: cl_kernel_info = 0x1190;

/// Creates and builds a program (see `backend::Driver::build_program`).
pub fn build(
    ctx: ContextH,
    devices: &[(DeviceH, String)],
    input: ProgramInput<'_>,
    options: &str,
) -> Result<ProgramH> {
    let api = api()?;
    let c = ctx.0 as cl_context;
    let mut err = CL_SUCCESS;
    let (cl, call) = match input {
        ProgramInput::Binary(bytes) => return build_binaries(ctx, devices, &[bytes], options),
        ProgramInput::Source(bytes) => {
            let ptr = bytes.as_ptr().cast::<i8>();
            let len = bytes.len();
            // SAFETY: one string of `len` bytes; OpenCL copies it.
            let cl = unsafe { (api.clCreateProgramWithSource)(c, 1, &ptr, &len, &mut err) };
            (cl, "clCreateProgramWithSource")
        }
        ProgramInput::Il(bytes) => {
            let f = api.clCreateProgramWithIL.ok_or_else(|| {
                Error::new(
                    Status::FeatureNotSupported,
                    "the OpenCL library has no clCreateProgramWithIL (OpenCL 2.1 or later needed)",
                )
            })?;
            // SAFETY: `bytes` is a readable buffer of the given length.
            let cl = unsafe { f(c, bytes.as_ptr().cast(), bytes.len(), &mut err) };
            (cl, "clCreateProgramWithIL")
        }
    };
    if cl.is_null() || err != CL_SUCCESS {
        return Err(Error::opencl(err, call));
    }
    build_made(cl, devices, options, None)
}

/// Creates a program from one binary per device of `devices` and builds
/// it. A binary the driver refuses, when the program is made or when it
/// is built, is reported as invalid (`Status::InvalidArgument`); a build
/// that fails, with the build logs (`Status::BuildFailure`).
pub fn build_binaries(
    ctx: ContextH,
    devices: &[(DeviceH, String)],
    bins: &[&[u8]],
    options: &str,
) -> Result<ProgramH> {
    let api = api()?;
    if bins.len() != devices.len() {
        return Err(Error::invalid(format!(
            "{} program binaries for {} devices",
            bins.len(),
            devices.len()
        )));
    }
    let ids: Vec<cl_device_id> = devices.iter().map(|(d, _)| d.0 as cl_device_id).collect();
    let lens: Vec<usize> = bins.iter().map(|b| b.len()).collect();
    let ptrs: Vec<*const u8> = bins.iter().map(|b| b.as_ptr()).collect();
    let mut status = vec![CL_SUCCESS; ids.len()];
    let mut err = CL_SUCCESS;
    // SAFETY: one readable binary of the given length per device; the
    // status list has one entry per device.
    let cl = unsafe {
        (api.clCreateProgramWithBinary)(
            ctx.0 as cl_context,
            ids.len() as cl_uint,
            ids.as_ptr(),
            lens.as_ptr(),
            ptrs.as_ptr(),
            status.as_mut_ptr(),
            &mut err,
        )
    };
    let refused = err == CL_INVALID_BINARY || status.contains(&CL_INVALID_BINARY);
    if cl.is_null() || err != CL_SUCCESS || refused {
        if !cl.is_null() {
            // SAFETY: the program made above, released once.
            unsafe { (api.clReleaseProgram)(cl) };
        }
        return Err(if refused {
            invalid_binary(devices, &lens)
        } else {
            Error::opencl(err, "clCreateProgramWithBinary")
        });
    }
    build_made(cl, devices, options, Some(&lens))
}

/// The error for binaries (of `lens` bytes) that `devices` refuse.
fn invalid_binary(devices: &[(DeviceH, String)], lens: &[usize]) -> Error {
    let labels: Vec<&str> = devices.iter().map(|(_, l)| l.as_str()).collect();
    Error::invalid(format!(
        "the binary ({} bytes) is not a valid program binary for device {}",
        lens.iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        labels.join(", ")
    ))
}

/// Builds `cl`, just made for `devices`, with `options`; releases it when
/// the build fails. `binary_lens`: the binaries it was made from, if any.
fn build_made(
    cl: cl_program,
    devices: &[(DeviceH, String)],
    options: &str,
    binary_lens: Option<&[usize]>,
) -> Result<ProgramH> {
    let api = api()?;
    let ids: Vec<cl_device_id> = devices.iter().map(|(d, _)| d.0 as cl_device_id).collect();
    let Ok(opts) = CString::new(options) else {
        // SAFETY: the program made by the caller, released once.
        unsafe { (api.clReleaseProgram)(cl) };
        return Err(Error::invalid("build options contain a NUL byte"));
    };
    // SAFETY: live program, its devices, a NUL-terminated option string and
    // no callback (the build is synchronous).
    let rc = unsafe {
        (api.clBuildProgram)(
            cl,
            ids.len() as cl_uint,
            ids.as_ptr(),
            opts.as_ptr(),
            None,
            std::ptr::null_mut(),
        )
    };
    if rc == CL_SUCCESS {
        return Ok(ProgramH(cl as usize));
    }
    let failed = if rc == CL_BUILD_PROGRAM_FAILURE || rc == CL_INVALID_BUILD_OPTIONS || rc == -66 {
        let logs = devices
            .iter()
            .zip(&ids)
            .map(|((_, label), &d)| {
                format!(
                    "--- build log for {label} ---\n{}",
                    info::build_log(api, cl, d)
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        Error::new(
            Status::BuildFailure,
            format!(
                "program build failed ({}) with options '{options}'\n{logs}",
                cl_error_name(rc)
            ),
        )
    } else {
        match (rc, binary_lens) {
            // Some drivers refuse a binary only when it is built.
            (CL_INVALID_BINARY, Some(lens)) => invalid_binary(devices, lens),
            _ => Error::opencl(rc, "clBuildProgram"),
        }
    };
    // SAFETY: the program made by the caller, released once.
    unsafe { (api.clReleaseProgram)(cl) };
    Err(failed)
}

/// The binaries of a built program, one per device, in order.
pub fn binaries(p: ProgramH) -> Result<Vec<Vec<u8>>> {
    let api = api()?;
    let cl = p.0 as cl_program;
    let sizes_raw = info::program_bytes(api, cl, CL_PROGRAM_BINARY_SIZES)?;
    let sizes: Vec<usize> = sizes_raw
        .chunks_exact(std::mem::size_of::<usize>())
        .map(|c| {
            let mut a = [0u8; std::mem::size_of::<usize>()];
            a.copy_from_slice(c);
            usize::from_ne_bytes(a)
        })
        .collect();
    let mut bufs: Vec<Vec<u8>> = sizes.iter().map(|&s| vec![0u8; s]).collect();
    let mut ptrs: Vec<*mut u8> = bufs.iter_mut().map(|b| b.as_mut_ptr()).collect();
    check(
        // SAFETY: one writable buffer of the reported size per device.
        unsafe {
            (api.clGetProgramInfo)(
                cl,
                CL_PROGRAM_BINARIES,
                ptrs.len() * std::mem::size_of::<*mut u8>(),
                ptrs.as_mut_ptr().cast(),
                std::ptr::null_mut(),
            )
        },
        "clGetProgramInfo(CL_PROGRAM_BINARIES)",
    )?;
    Ok(bufs)
}

/// The build log of a program for a device.
pub fn log(p: ProgramH, d: DeviceH) -> String {
    api().map_or_else(
        |_| String::new(),
        |a| info::build_log(a, p.0 as cl_program, d.0 as cl_device_id),
    )
}

/// The names of a program's kernels.
pub fn kernel_names(p: ProgramH) -> Vec<String> {
    api()
        .and_then(|a| info::program_string(a, p.0 as cl_program, CL_PROGRAM_KERNEL_NAMES))
        .map(|s| {
            s.split(';')
                .filter(|n| !n.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Makes a kernel (see `backend::Driver::create_kernel`).
pub fn kernel(p: ProgramH, name: &str, usm: UsmStrategy) -> Result<(KernelH, u32, String)> {
    let api = api()?;
    let cname =
        CString::new(name).map_err(|_| Error::invalid("kernel name contains a NUL byte"))?;
    let mut err = CL_SUCCESS;
    // SAFETY: built program and a NUL-terminated name.
    let cl = unsafe { (api.clCreateKernel)(p.0 as cl_program, cname.as_ptr(), &mut err) };
    if cl.is_null() || err != CL_SUCCESS {
        if err == CL_INVALID_KERNEL_NAME {
            return Err(Error::new(
                Status::KernelNotFound,
                format!(
                    "the program has no kernel named '{name}' (its kernels: {})",
                    kernel_names(p).join(", ")
                ),
            ));
        }
        return Err(Error::opencl(err, "clCreateKernel"));
    }
    let num_args: cl_uint = match info::kernel_scalar(api, cl, CL_KERNEL_NUM_ARGS) {
        Ok(n) => n,
        Err(e) => {
            // SAFETY: releasing the kernel just created.
            unsafe { (api.clReleaseKernel)(cl) };
            return Err(e);
        }
    };
    let real_name =
        info::kernel_string(api, cl, CL_KERNEL_FUNCTION_NAME).unwrap_or_else(|_| name.to_string());
    if usm == UsmStrategy::IntelUsm {
        if let Some(f) = api.clSetKernelExecInfo {
            let yes: cl_bool = CL_TRUE;
            for p in [
                CL_KERNEL_EXEC_INFO_INDIRECT_HOST_ACCESS_INTEL,
                CL_KERNEL_EXEC_INFO_INDIRECT_DEVICE_ACCESS_INTEL,
                CL_KERNEL_EXEC_INFO_INDIRECT_SHARED_ACCESS_INTEL,
            ] {
                // SAFETY: `yes` is a readable cl_bool; failure only means
                // indirect access stays off, which is reported nowhere
                // because direct pointer arguments still work.
                unsafe {
                    f(
                        cl,
                        p,
                        std::mem::size_of::<cl_bool>(),
                        (&yes as *const cl_bool).cast(),
                    )
                };
            }
        }
    }
    Ok((KernelH(cl as usize), num_args, real_name))
}

/// What a kernel needs and prefers on a device.
pub fn facts(k: KernelH, d: DeviceH) -> KernelFacts {
    let Ok(api) = api() else {
        return KernelFacts::default();
    };
    let (k, d) = (k.0 as cl_kernel, d.0 as cl_device_id);
    KernelFacts {
        work_group_size: info::kernel_work_group(api, k, d, CL_KERNEL_WORK_GROUP_SIZE).ok(),
        static_local_mem: info::kernel_work_group(api, k, d, CL_KERNEL_LOCAL_MEM_SIZE).unwrap_or(0),
        private_mem: info::kernel_work_group(api, k, d, CL_KERNEL_PRIVATE_MEM_SIZE).unwrap_or(0),
        preferred_multiple: info::kernel_work_group(
            api,
            k,
            d,
            CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
        )
        .ok(),
    }
}
