//! Allocating and freeing unified shared memory on OpenCL: through
//! Intel's USM extension, or SVM.

use super::ffi::*;
use super::intel::IntelUsm;
use super::loader::api;
use crate::backend::{ContextH, DeviceH};
use crate::core::aspects::UsmStrategy;
use crate::core::error::{Error, Result, Status};
use crate::core::registry::AllocKind;
use std::ffi::c_void;

/// Allocates `size` bytes of `kind` USM in `ctx` as `usm` says (see
/// `backend::Driver::usm_alloc`), with Intel's entry points where the
/// context reaches USM through them.
#[allow(clippy::too_many_arguments)]
pub fn alloc(
    intel: Option<&IntelUsm>,
    ctx: ContextH,
    usm: UsmStrategy,
    kind: AllocKind,
    dev: Option<DeviceH>,
    size: usize,
    align: usize,
    atomics: bool,
) -> Result<usize> {
    let c = ctx.0 as cl_context;
    match (usm, intel) {
        (UsmStrategy::IntelUsm, Some(f)) => {
            let a = cl_uint::try_from(align)
                .map_err(|_| Error::invalid(format!("USM alignment {align} is too large")))?;
            let mut err = CL_SUCCESS;
            let d = dev.map_or(std::ptr::null_mut(), |d| d.0 as cl_device_id);
            // SAFETY: a live context (and one of its devices); null
            // properties; the caller checked the size and alignment.
            let p = unsafe {
                match (kind, dev) {
                    (AllocKind::Host, _) => {
                        (f.clHostMemAllocINTEL)(c, std::ptr::null(), size, a, &mut err)
                    }
                    (AllocKind::Device, Some(_)) => {
                        (f.clDeviceMemAllocINTEL)(c, d, std::ptr::null(), size, a, &mut err)
                    }
                    (AllocKind::Shared, Some(_)) => {
                        (f.clSharedMemAllocINTEL)(c, d, std::ptr::null(), size, a, &mut err)
                    }
                    _ => std::ptr::null_mut(),
                }
            };
            if err != CL_SUCCESS {
                return Err(Error::opencl(
                    err,
                    &format!(
                        "{} ({} USM allocation of {size} bytes)",
                        match kind {
                            AllocKind::Host => "clHostMemAllocINTEL",
                            AllocKind::Shared => "clSharedMemAllocINTEL",
                            _ => "clDeviceMemAllocINTEL",
                        },
                        kind.name()
                    ),
                ));
            }
            Ok(p as usize)
        }
        (UsmStrategy::IntelUsm, None) => Err(Error::new(
            Status::Internal,
            "Intel USM strategy without its entry points",
        )),
        (UsmStrategy::Svm, _) => {
            let f = api()?
                .clSVMAlloc
                .ok_or_else(|| Error::new(Status::Internal, "SVM strategy without clSVMAlloc"))?;
            let a = cl_uint::try_from(align).map_err(|_| {
                Error::invalid(format!("USM alignment {align} is too large for SVM"))
            })?;
            let mut flags = CL_MEM_READ_WRITE;
            if kind != AllocKind::Device {
                flags |= CL_MEM_SVM_FINE_GRAIN_BUFFER;
                if atomics {
                    flags |= CL_MEM_SVM_ATOMICS;
                }
            }
            // SAFETY: a live context; the flags and alignment are valid.
            Ok(unsafe { f(c, flags, size, a) } as usize)
        }
        (UsmStrategy::None, _) => Err(Error::new(
            Status::FeatureNotSupported,
            format!("no USM for a {} allocation of {size} bytes", kind.name()),
        )),
    }
}

/// Frees what `alloc` gave at `ptr`, once no command uses it.
pub fn free(intel: Option<&IntelUsm>, ctx: ContextH, ptr: usize) {
    let (c, p) = (ctx.0 as cl_context, ptr as *mut c_void);
    if let Some(f) = intel {
        // SAFETY: `p` came from an Intel USM allocation in this context
        // and is freed once; the blocking free waits for its users.
        unsafe { (f.clMemBlockingFreeINTEL)(c, p) };
    } else if let Some(free) = api().ok().and_then(|a| a.clSVMFree) {
        // SAFETY: `p` came from clSVMAlloc in this context, freed once
        // after the queues that could use it finished.
        unsafe { free(c, p) };
    }
}
