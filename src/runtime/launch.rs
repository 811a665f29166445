//! Kernel launches.

use super::context::Context;
use super::event::Event;
use super::program::{Kernel, KernelDeviceInfo};
use super::queue::{LanePos, Queue, Submitted};
use crate::core::aspects::UsmStrategy;
use crate::core::error::{Error, Result, Status};
use crate::core::launch::{check_local_memory, NdRange};
use crate::opencl::driver::ptr_or_null;
use crate::opencl::ffi::*;
use crate::opencl::loader::{api, cl_error_name};
use smallvec::SmallVec;
use std::ffi::c_void;
use std::sync::Arc;

/// One kernel argument.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// Bytes passed by value.
    Scalar(&'a [u8]),
    /// A USM pointer.
    Usm(*const c_void),
    /// Group-local memory of this many bytes.
    Local(usize),
    /// A `cl_mem` (a buffer's allocation on a device without USM).
    Mem(cl_mem),
}

/// Whether `SYRAH_VALIDATE=1` asked for the expensive checks.
pub fn validating() -> bool {
    static V: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *V.get_or_init(|| std::env::var("SYRAH_VALIDATE").is_ok_and(|v| !v.is_empty() && v != "0"))
}

impl Queue {
    /// The checks of a launch that need no arguments' values: context,
    /// shape and argument count. Done before a command group moves data.
    pub fn precheck(
        &self,
        kernel: &Kernel,
        range: &NdRange,
        nargs: usize,
    ) -> Result<KernelDeviceInfo> {
        if kernel.ctx.id != self.ctx.id {
            return Err(Error::new(
                Status::WrongContext,
                format!(
                    "kernel '{}' belongs to context {}, the queue to context {}",
                    kernel.name, kernel.ctx.id, self.ctx.id
                ),
            ));
        }
        let kinfo = kernel.info_for(self.device)?;
        range.validate(&self.device.limits, kinfo.work_group_size)?;
        if nargs != kernel.num_args as usize {
            return Err(Error::new(
                Status::KernelArguments,
                format!(
                    "kernel '{}' takes {} argument{}, {} given",
                    kernel.name,
                    kernel.num_args,
                    if kernel.num_args == 1 { "" } else { "s" },
                    nargs
                ),
            ));
        }
        Ok(kinfo)
    }

    /// Launches `kernel` over `range` with `args` after `deps` and after
    /// the commands of this queue at `on_lanes` (see
    /// [`Queue::prepare_accesses_at`]); `kinfo` is what
    /// [`Queue::precheck`] returned for this kernel, range and arguments.
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &self,
        kernel: &Kernel,
        kinfo: &KernelDeviceInfo,
        range: &NdRange,
        args: &[Arg<'_>],
        deps: &[Arc<Event>],
        on_lanes: &[LanePos],
        keep: super::queue::Keep,
        want_event: bool,
    ) -> Result<Submitted> {
        let mut dynamic = Vec::new();
        for (i, a) in args.iter().enumerate() {
            match a {
                Arg::Scalar([]) => {
                    return Err(Error::new(
                        Status::KernelArguments,
                        format!(
                            "argument {i} of kernel '{}' is a value of 0 bytes",
                            kernel.name
                        ),
                    ))
                }
                Arg::Local(0) => {
                    return Err(Error::new(
                        Status::KernelArguments,
                        format!(
                            "argument {i} of kernel '{}' asks for 0 bytes of local memory",
                            kernel.name
                        ),
                    ))
                }
                Arg::Local(n) => dynamic.push(*n),
                // A null pointer is passed as OpenCL's null global pointer,
                // on every device.
                Arg::Usm(p) if p.is_null() => {}
                Arg::Usm(p) => {
                    if self.ctx.strategy == UsmStrategy::None {
                        return Err(Error::new(
                            Status::FeatureNotSupported,
                            format!(
                                "argument {i} of kernel '{}' is a USM pointer but device {} has no USM",
                                kernel.name,
                                self.device.label()
                            ),
                        ));
                    }
                    if validating() && !p.is_null() {
                        let reg = self.ctx.registry.lock();
                        if reg.find(*p as usize).is_none() {
                            return Err(Error::new(
                                Status::InvalidPointer,
                                format!(
                                    "argument {i} of kernel '{}' ({p:?}) is not inside a USM \
                                     allocation of the queue's context",
                                    kernel.name
                                ),
                            ));
                        }
                    }
                }
                Arg::Scalar(_) | Arg::Mem(_) => {}
            }
        }
        check_local_memory(
            &kernel.name,
            kinfo.static_local_mem,
            &dynamic,
            self.device.limits.local_mem_size,
        )?;
        let what = kernel.what.clone();
        if range.is_empty() {
            let mut all: SmallVec<[Arc<Event>; 8]> = deps.iter().cloned().collect();
            for p in on_lanes {
                all.extend(p.event()?);
            }
            return self.marker(&all, &what).map(Submitted::Event);
        }
        let mut held = kernel.lock.lock();
        set_args(&self.ctx, kernel, &mut held, args)?;
        let local_args = !dynamic.is_empty();
        self.submit_quiet(deps, on_lanes, what, keep, want_event, |q, wl, ev| {
            let (q, wl, ev) = crate::opencl::driver::cl_args(q, wl, ev);
            // The arguments were set under the kernel's lock, still held.
            enqueue_ndrange(q, kernel.cl, &kernel.name, range, local_args, wl, ev)
        })
    }
}

/// Sets `args` on `kernel` (whose lock the caller holds, `held` being
/// what it guards): values, local memory, buffers' memory objects
/// (retained while they are arguments) and USM pointers through the
/// context's USM strategy.
pub(crate) fn set_args(
    ctx: &Context,
    kernel: &Kernel,
    held: &mut [usize],
    args: &[Arg<'_>],
) -> Result<()> {
    let api = api()?;
    let intel = ctx
        .platform
        .intel_usm
        .as_ref()
        .filter(|_| ctx.strategy == UsmStrategy::IntelUsm);
    for (i, a) in args.iter().enumerate() {
        let idx = i as cl_uint;
        let rc = match a {
            // SAFETY: `b` is a readable slice of the given length.
            Arg::Scalar(b) => unsafe {
                (api.clSetKernelArg)(kernel.cl, idx, b.len(), b.as_ptr().cast())
            },
            // SAFETY: a null value with a size reserves local memory.
            Arg::Local(n) => unsafe { (api.clSetKernelArg)(kernel.cl, idx, *n, std::ptr::null()) },
            // SAFETY: a live memory object passed by value; the kernel
            // keeps a reference to it while it is the argument.
            Arg::Mem(m) => unsafe {
                let rc = (api.clSetKernelArg)(
                    kernel.cl,
                    idx,
                    std::mem::size_of::<cl_mem>(),
                    (m as *const cl_mem).cast(),
                );
                if rc == CL_SUCCESS {
                    (api.clRetainMemObject)(*m);
                    if let Some(old) = held.get_mut(i) {
                        if *old != 0 {
                            (api.clReleaseMemObject)(*old as cl_mem);
                        }
                        *old = *m as usize;
                    }
                }
                rc
            },
            // SAFETY: a null memory object value sets a null global
            // pointer (OpenCL's clSetKernelArg).
            Arg::Usm(p) if p.is_null() => unsafe {
                (api.clSetKernelArg)(
                    kernel.cl,
                    idx,
                    std::mem::size_of::<cl_mem>(),
                    std::ptr::null(),
                )
            },
            Arg::Usm(p) => match (intel, api.clSetKernelArgSVMPointer) {
                // SAFETY: the extension takes any USM pointer value.
                (Some(f), _) => unsafe { (f.clSetKernelArgMemPointerINTEL)(kernel.cl, idx, *p) },
                // SAFETY: SVM pointer arguments are plain values.
                (None, Some(f)) => unsafe { f(kernel.cl, idx, *p) },
                (None, None) => CL_INVALID_OPERATION,
            },
        };
        if rc != CL_SUCCESS {
            return Err(Error::new(
                if rc == -50 || rc == -51 {
                    Status::KernelArguments
                } else {
                    Status::Opencl
                },
                format!(
                    "setting argument {i} ({}) of kernel '{}' failed: {} ({rc})",
                    match a {
                        Arg::Scalar(b) => format!("value of {} bytes", b.len()),
                        Arg::Local(n) => format!("{n} bytes of local memory"),
                        Arg::Usm(p) => format!("USM pointer {p:?}"),
                        Arg::Mem(_) => "buffer accessor".to_string(),
                    },
                    kernel.name,
                    cl_error_name(rc)
                ),
            ));
        }
    }
    Ok(())
}

/// Enqueues `kernel` (named `name`; its arguments already set) over
/// `range` on `q` after the events of `wl`; `ev` receives its event unless
/// null. `local_args`: some arguments are group-local memory, so running
/// out of resources means out of local memory.
pub(crate) fn enqueue_ndrange(
    q: cl_command_queue,
    kernel: cl_kernel,
    name: &str,
    range: &NdRange,
    local_args: bool,
    wl: &[cl_event],
    ev: *mut cl_event,
) -> Result<()> {
    let api = api()?;
    // SAFETY: a live queue and kernel whose arguments are set; the size
    // arrays have three entries; the wait list holds events of the queue's
    // context.
    let rc = unsafe {
        (api.clEnqueueNDRangeKernel)(
            q,
            kernel,
            range.dims,
            range.offset_or_null(),
            range.global.as_ptr(),
            range.local_or_null(),
            wl.len() as cl_uint,
            ptr_or_null(wl),
            ev,
        )
    };
    if rc != CL_SUCCESS {
        let mut e = Error::opencl(rc, &format!("clEnqueueNDRangeKernel of kernel '{name}'"));
        if rc == -52 {
            e.status = Status::KernelArguments;
        }
        if rc == -5 && local_args {
            e.status = Status::OutOfLocalMemory;
        }
        return Err(e);
    }
    Ok(())
}
