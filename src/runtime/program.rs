//! Programs (OpenCL C source, SPIR-V, binaries) and kernels.

use super::build_cache::{ProgramInner, ProgramKey, ProgramKind};
use super::context::Context;
use super::platform::Device;
use crate::core::aspects::UsmStrategy;
use crate::core::error::{Error, Result, Status};
use crate::opencl::ffi::*;
use crate::opencl::info;
use crate::opencl::loader::{api, check};
use parking_lot::Mutex;
use std::ffi::CString;
use std::sync::Arc;

const CL_PROGRAM_KERNEL_NAMES: cl_program_info = 0x1168;
const CL_KERNEL_FUNCTION_NAME: cl_kernel_info = 0x1190;

/// A program handle: its context and the (possibly shared) build.
pub struct Program {
    pub ctx: Arc<Context>,
    pub inner: Arc<ProgramInner>,
}

fn options_cstring(options: &str) -> Result<CString> {
    CString::new(options).map_err(|_| Error::invalid("build options contain a NUL byte"))
}

impl Program {
    /// Builds (or finds in the context's cache) a program for `devices`
    /// (all of the context's devices when empty).
    pub fn build(
        ctx: &Arc<Context>,
        kind: ProgramKind,
        bytes: &[u8],
        options: &str,
        devices: &[&'static Device],
    ) -> Result<Program> {
        let devices: Vec<&'static Device> = if devices.is_empty() {
            ctx.devices.clone()
        } else {
            devices.to_vec()
        };
        let mut idx = Vec::with_capacity(devices.len());
        for d in &devices {
            idx.push(ctx.require_device(d)?);
        }
        if bytes.is_empty() {
            return Err(Error::invalid(match kind {
                ProgramKind::Source => "program source is empty",
                ProgramKind::Il => "SPIR-V module is empty (0 bytes)",
                ProgramKind::Binary => "program binary is empty (0 bytes)",
            }));
        }
        let key = ProgramKey {
            kind,
            bytes: bytes.to_vec(),
            options: options.to_string(),
            devices: idx,
        };
        if let Some(p) = ctx.programs.lock().get(&key) {
            return Ok(Program {
                ctx: ctx.clone(),
                inner: p.clone(),
            });
        }
        let inner = Arc::new(create_and_build(ctx, kind, bytes, options, &devices)?);
        ctx.programs.lock().insert(key, inner.clone());
        Ok(Program {
            ctx: ctx.clone(),
            inner,
        })
    }

    /// The binary built for `device`.
    pub fn binary(&self, device: &Device) -> Result<Vec<u8>> {
        let api = api()?;
        let pos = self
            .inner
            .devices
            .iter()
            .position(|d| std::ptr::eq(*d, device))
            .ok_or_else(|| {
                Error::new(
                    Status::WrongContext,
                    format!("the program was not built for device {}", device.label()),
                )
            })?;
        let sizes_raw = info::program_bytes(api, self.inner.cl, CL_PROGRAM_BINARY_SIZES)?;
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
                    self.inner.cl,
                    CL_PROGRAM_BINARIES,
                    ptrs.len() * std::mem::size_of::<*mut u8>(),
                    ptrs.as_mut_ptr().cast(),
                    std::ptr::null_mut(),
                )
            },
            "clGetProgramInfo(CL_PROGRAM_BINARIES)",
        )?;
        bufs.into_iter().nth(pos).ok_or_else(|| {
            Error::new(
                Status::Internal,
                "program reports fewer binaries than devices",
            )
        })
    }

    pub fn build_log(&self, device: &Device) -> Result<String> {
        if !self.inner.devices.iter().any(|d| std::ptr::eq(*d, device)) {
            return Err(Error::new(
                Status::WrongContext,
                format!("the program was not built for device {}", device.label()),
            ));
        }
        Ok(info::build_log(api()?, self.inner.cl, device.id))
    }

    pub fn kernel_names(&self) -> Vec<String> {
        api()
            .and_then(|a| info::program_string(a, self.inner.cl, CL_PROGRAM_KERNEL_NAMES))
            .map(|s| {
                s.split(';')
                    .filter(|n| !n.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn create_and_build(
    ctx: &Context,
    kind: ProgramKind,
    bytes: &[u8],
    options: &str,
    devices: &[&'static Device],
) -> Result<ProgramInner> {
    let api = api()?;
    let ids: Vec<cl_device_id> = devices.iter().map(|d| d.id).collect();
    let mut err = CL_SUCCESS;
    let cl = match kind {
        ProgramKind::Source => {
            let ptr = bytes.as_ptr().cast::<i8>();
            let len = bytes.len();
            // SAFETY: one string of `len` bytes; OpenCL copies it.
            unsafe { (api.clCreateProgramWithSource)(ctx.cl, 1, &ptr, &len, &mut err) }
        }
        ProgramKind::Il => {
            for d in devices {
                if !d.il_version.contains("SPIR-V") {
                    return Err(Error::new(
                        Status::FeatureNotSupported,
                        format!(
                            "device {} does not take SPIR-V (its IL versions: '{}')",
                            d.label(),
                            d.il_version
                        ),
                    ));
                }
            }
            let f = api.clCreateProgramWithIL.ok_or_else(|| {
                Error::new(
                    Status::FeatureNotSupported,
                    "the OpenCL library has no clCreateProgramWithIL (OpenCL 2.1 or later needed)",
                )
            })?;
            // SAFETY: `bytes` is a readable buffer of the given length.
            unsafe { f(ctx.cl, bytes.as_ptr().cast(), bytes.len(), &mut err) }
        }
        ProgramKind::Binary => {
            if devices.len() != 1 {
                return Err(Error::invalid(format!(
                    "a program binary targets exactly one device ({} given)",
                    devices.len()
                )));
            }
            let ptr = bytes.as_ptr();
            let len = bytes.len();
            let mut bin_status = CL_SUCCESS;
            // SAFETY: one device, one binary of `len` readable bytes.
            unsafe {
                (api.clCreateProgramWithBinary)(
                    ctx.cl,
                    1,
                    ids.as_ptr(),
                    &len,
                    &ptr,
                    &mut bin_status,
                    &mut err,
                )
            }
        }
    };
    if cl.is_null() || err != CL_SUCCESS {
        if err == CL_INVALID_BINARY {
            return Err(Error::invalid(format!(
                "the binary ({} bytes) is not a valid program binary for device {}",
                bytes.len(),
                devices.first().map(|d| d.label()).unwrap_or_default()
            )));
        }
        return Err(Error::opencl(
            err,
            match kind {
                ProgramKind::Source => "clCreateProgramWithSource",
                ProgramKind::Il => "clCreateProgramWithIL",
                ProgramKind::Binary => "clCreateProgramWithBinary",
            },
        ));
    }
    let inner = ProgramInner {
        cl,
        devices: devices.to_vec(),
    };
    let opts = options_cstring(options)?;
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
    if rc == CL_BUILD_PROGRAM_FAILURE || rc == CL_INVALID_BUILD_OPTIONS || rc == -66 {
        let logs = devices
            .iter()
            .map(|d| {
                format!(
                    "--- build log for {} ---\n{}",
                    d.label(),
                    info::build_log(api, cl, d.id)
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        return Err(Error::new(
            Status::BuildFailure,
            format!(
                "program build failed ({}) with options '{options}'\n{logs}",
                crate::opencl::loader::cl_error_name(rc)
            ),
        ));
    }
    check(rc, "clBuildProgram")?;
    Ok(inner)
}

/// Per-device facts about a kernel, read when it is created.
#[derive(Clone, Copy, Debug)]
pub struct KernelDeviceInfo {
    pub work_group_size: usize,
    pub static_local_mem: u64,
    pub private_mem: u64,
    pub preferred_multiple: usize,
}

/// An argument bound to a kernel, kept by value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BoundArg {
    Value(Vec<u8>),
    Usm(usize),
    Local(usize),
}

pub struct Kernel {
    pub ctx: Arc<Context>,
    pub program: Arc<ProgramInner>,
    pub cl: cl_kernel,
    pub name: String,
    /// "kernel 'name'", for events and messages.
    pub what: Arc<str>,
    pub num_args: u32,
    pub per_device: Vec<(&'static Device, KernelDeviceInfo)>,
    /// Arguments bound to the kernel (`syrah_kernel_set_arg`), by index:
    /// a launch takes those it does not give itself.
    pub bound: Mutex<Vec<Option<BoundArg>>>,
    /// Serialises argument setting and enqueueing of this kernel, and
    /// holds the memory objects currently set as its arguments (some
    /// drivers use them after the caller released them).
    pub lock: Mutex<Vec<usize>>,
}

// SAFETY: all use of `cl` that mutates it (clSetKernelArg) happens under
// `lock`; other kernel calls are thread-safe per the specification.
unsafe impl Send for Kernel {}
// SAFETY: as above.
unsafe impl Sync for Kernel {}

impl Drop for Kernel {
    fn drop(&mut self) {
        if let Ok(api) = api() {
            // SAFETY: this value owns one reference to the kernel.
            unsafe { (api.clReleaseKernel)(self.cl) };
            for m in self.lock.get_mut().drain(..) {
                if m != 0 {
                    // SAFETY: one reference taken when the argument was set.
                    unsafe { (api.clReleaseMemObject)(m as cl_mem) };
                }
            }
        }
    }
}

impl Kernel {
    /// The kernel as the back-end seam names it.
    pub fn handle(&self) -> crate::backend::KernelH {
        crate::backend::KernelH(self.cl as usize)
    }

    pub fn create(program: &Program, name: &str) -> Result<Kernel> {
        let api = api()?;
        let cname =
            CString::new(name).map_err(|_| Error::invalid("kernel name contains a NUL byte"))?;
        let mut err = CL_SUCCESS;
        // SAFETY: built program and a NUL-terminated name.
        let cl = unsafe { (api.clCreateKernel)(program.inner.cl, cname.as_ptr(), &mut err) };
        if cl.is_null() || err != CL_SUCCESS {
            if err == CL_INVALID_KERNEL_NAME {
                return Err(Error::new(
                    Status::KernelNotFound,
                    format!(
                        "the program has no kernel named '{name}' (its kernels: {})",
                        program.kernel_names().join(", ")
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
        let real_name = info::kernel_string(api, cl, CL_KERNEL_FUNCTION_NAME)
            .unwrap_or_else(|_| name.to_string());
        let mut per_device = Vec::new();
        for d in &program.inner.devices {
            let wg: usize = info::kernel_work_group(api, cl, d.id, CL_KERNEL_WORK_GROUP_SIZE)
                .unwrap_or(d.limits.max_work_group_size);
            let local: u64 =
                info::kernel_work_group(api, cl, d.id, CL_KERNEL_LOCAL_MEM_SIZE).unwrap_or(0);
            let private: u64 =
                info::kernel_work_group(api, cl, d.id, CL_KERNEL_PRIVATE_MEM_SIZE).unwrap_or(0);
            let pref: usize = info::kernel_work_group(
                api,
                cl,
                d.id,
                CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
            )
            .unwrap_or(1);
            per_device.push((
                *d,
                KernelDeviceInfo {
                    work_group_size: wg,
                    static_local_mem: local,
                    private_mem: private,
                    preferred_multiple: pref,
                },
            ));
        }
        if program.ctx.strategy == UsmStrategy::IntelUsm {
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
        Ok(Kernel {
            ctx: program.ctx.clone(),
            program: program.inner.clone(),
            cl,
            what: Arc::from(format!("kernel '{real_name}'")),
            name: real_name,
            num_args,
            per_device,
            bound: Mutex::new(vec![None; num_args as usize]),
            lock: Mutex::new(vec![0; num_args as usize]),
        })
    }

    pub fn info_for(&self, d: &Device) -> Result<KernelDeviceInfo> {
        self.per_device
            .iter()
            .find(|(x, _)| std::ptr::eq(*x, d))
            .map(|(_, i)| *i)
            .ok_or_else(|| {
                Error::new(
                    Status::WrongContext,
                    format!(
                        "kernel '{}' was not built for device {}",
                        self.name,
                        d.label()
                    ),
                )
            })
    }
}
