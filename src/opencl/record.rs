//! Recording a graph's kernels into a `cl_khr_command_buffer` with their
//! dependencies as sync points, and updating a recorded kernel's argument
//! in place (`cl_khr_command_buffer_mutable_dispatch`): the OpenCL side of
//! the seam's recordings.

use super::cmdbuf::*;
use super::ffi::*;
use super::handles::{cl_events, event_h, ptr_or_null};
use super::loader::check;
use crate::backend::{ArgSet, CommandH, EventH, KernelH, RecNode, RecordH};
use crate::core::error::{Error, Result};
use crate::core::launch::NdRange;
use std::ffi::c_void;

/// Records `nodes` (kernels, or nothing) with dependencies `deps` into a new command-buffer
/// on `queue`, and finalizes it. `mutable`: with argument updates allowed,
/// returning each kernel command's handle.
pub fn record(
    fns: &CommandBuffers,
    (simultaneous, mutable): (bool, bool),
    queue: cl_command_queue,
    deps: &[Vec<usize>],
    nodes: &[RecNode<'_>],
) -> Result<(RecordH, Vec<CommandH>)> {
    let mut launches: Vec<Option<(KernelH, &NdRange)>> = Vec::with_capacity(nodes.len());
    for n in nodes {
        launches.push(match *n {
            RecNode::Nothing => None,
            RecNode::Kernel(k, range) => Some((k, range)),
            RecNode::Copy { .. } | RecNode::Fill { .. } => {
                return Err(Error::new(
                    crate::core::error::Status::FeatureNotSupported,
                    "OpenCL command-buffers here hold kernels only",
                ))
            }
        });
    }
    let mut err = CL_SUCCESS;
    let q = [queue];
    let wanted = (CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR * cl_ulong::from(simultaneous))
        | (CL_COMMAND_BUFFER_MUTABLE_KHR * cl_ulong::from(mutable));
    // The flags wanted, then mutability alone, then none: a driver may
    // refuse a combination it reported.
    let mut cb: cl_command_buffer_khr = std::ptr::null_mut();
    let mut flags = 0;
    for f in [wanted, wanted & CL_COMMAND_BUFFER_MUTABLE_KHR, 0] {
        if cb.is_null() && (f != 0 || flags == 0) {
            let props: [cl_ulong; 3] = [CL_COMMAND_BUFFER_FLAGS_KHR, f, 0];
            // SAFETY: one live queue; a zero-terminated property list, or
            // none.
            cb = unsafe {
                (fns.clCreateCommandBufferKHR)(
                    1,
                    q.as_ptr(),
                    if f == 0 {
                        std::ptr::null()
                    } else {
                        props.as_ptr()
                    },
                    &mut err,
                )
            };
            flags = f;
        }
    }
    if cb.is_null() || err != CL_SUCCESS {
        return Err(Error::opencl(err, "clCreateCommandBufferKHR"));
    }
    let mutable = flags & CL_COMMAND_BUFFER_MUTABLE_KHR != 0;
    let fail = |e: Error| {
        // SAFETY: the command-buffer created above, not yet handed out.
        unsafe { (fns.clReleaseCommandBufferKHR)(cb) };
        Err(e)
    };
    let command_props: [cl_ulong; 3] = [
        CL_MUTABLE_DISPATCH_UPDATABLE_FIELDS_KHR,
        CL_MUTABLE_DISPATCH_ARGUMENTS_KHR,
        0,
    ];
    let mut handles: Vec<cl_mutable_command_khr> = if mutable {
        vec![std::ptr::null_mut(); launches.len()]
    } else {
        Vec::new()
    };
    let mut points: Vec<cl_sync_point_khr> = vec![0; launches.len()];
    for (i, l) in launches.iter().enumerate() {
        let Some((kernel, range)) = l else { continue };
        let waits: Vec<cl_sync_point_khr> = deps[i]
            .iter()
            .filter(|&&d| launches[d].is_some())
            .map(|&d| points[d])
            .collect();
        // SAFETY: a live command-buffer and kernel with its arguments set;
        // the size arrays have three entries; the sync points came from
        // this command-buffer; the handle slot exists when asked for.
        let rc = unsafe {
            (fns.clCommandNDRangeKernelKHR)(
                cb,
                std::ptr::null_mut(),
                if mutable {
                    command_props.as_ptr()
                } else {
                    std::ptr::null()
                },
                kernel.0 as cl_kernel,
                range.dims,
                range.offset_or_null(),
                range.global.as_ptr(),
                range.local_or_null(),
                waits.len() as cl_uint,
                if waits.is_empty() {
                    std::ptr::null()
                } else {
                    waits.as_ptr()
                },
                &mut points[i],
                handles
                    .get_mut(i)
                    .map_or(std::ptr::null_mut(), |h| h as *mut _),
            )
        };
        if let Err(e) = check(rc, "clCommandNDRangeKernelKHR") {
            return fail(e);
        }
    }
    // SAFETY: the command-buffer recorded above.
    let rc = unsafe { (fns.clFinalizeCommandBufferKHR)(cb) };
    if let Err(e) = check(rc, "clFinalizeCommandBufferKHR") {
        return fail(e);
    }
    Ok((
        RecordH(cb as usize),
        handles.into_iter().map(|h| CommandH(h as usize)).collect(),
    ))
}

/// Sets argument `index` of the kernel command `handle` of `cb` to `arg`
/// for the command-buffer's later enqueues.
///
/// # Safety
/// `cb` is a finalized mutable command-buffer not pending and `handle`
/// one of its kernel commands.
pub unsafe fn update_arg(
    f: UpdateFn,
    cb: cl_command_buffer_khr,
    handle: cl_mutable_command_khr,
    index: u32,
    arg: ArgSet<'_>,
) -> cl_int {
    let mem;
    let (value, size, svm) = match arg {
        ArgSet::Bytes(b) => (b.as_ptr().cast(), b.len(), false),
        ArgSet::Local(n) => (std::ptr::null(), n, false),
        ArgSet::Usm(p) => (p as *const c_void, 0, true),
        ArgSet::MemAt(_, 1..) => return CL_INVALID_ARG_VALUE,
        ArgSet::Mem(m) | ArgSet::MemAt(m, 0) => {
            mem = m.0 as cl_mem;
            (
                (&mem as *const cl_mem).cast(),
                std::mem::size_of::<cl_mem>(),
                false,
            )
        }
    };
    let one = cl_mutable_dispatch_arg_khr {
        arg_index: index,
        arg_size: size,
        arg_value: value,
    };
    let config = cl_mutable_dispatch_config_khr {
        command: handle,
        num_args: u32::from(!svm),
        num_svm_args: u32::from(svm),
        num_exec_infos: 0,
        work_dim: 0,
        arg_list: if svm { std::ptr::null() } else { &one },
        arg_svm_list: if svm { &one } else { std::ptr::null() },
        exec_info_list: std::ptr::null(),
        global_work_offset: std::ptr::null(),
        global_work_size: std::ptr::null(),
        local_work_size: std::ptr::null(),
    };
    let kind = CL_STRUCTURE_TYPE_MUTABLE_DISPATCH_CONFIG_KHR;
    let configs = [(&config as *const cl_mutable_dispatch_config_khr).cast()];
    // SAFETY: per the contract; one configuration of the type named, whose
    // pointers live until the call returns.
    unsafe { f(cb, 1, &kind, configs.as_ptr()) }
}

/// Enqueues command-buffer `r` on `q`'s device after `waits`; `Ok(false)`
/// when the driver refuses it while an earlier enqueue is pending.
pub fn enqueue(
    fns: &CommandBuffers,
    r: RecordH,
    waits: &[EventH],
    ev: &mut EventH,
) -> Result<bool> {
    let wl = cl_events(waits);
    let mut out: cl_event = std::ptr::null_mut();
    // SAFETY: a finalized command-buffer of this platform (it names its
    // queue); the wait list holds events of its context.
    let rc = unsafe {
        (fns.clEnqueueCommandBufferKHR)(
            0,
            std::ptr::null_mut(),
            r.0 as cl_command_buffer_khr,
            wl.len() as cl_uint,
            ptr_or_null(wl),
            &mut out,
        )
    };
    if rc == CL_INVALID_OPERATION {
        return Ok(false);
    }
    check(rc, "clEnqueueCommandBufferKHR")?;
    *ev = event_h(out);
    Ok(true)
}

/// Updates argument `index` of command `c` of `r` in place; `false` where
/// the platform cannot.
pub fn update(fns: &CommandBuffers, r: RecordH, c: CommandH, index: u32, arg: ArgSet<'_>) -> bool {
    match fns.clUpdateMutableCommandsKHR {
        Some(f) if c.0 != 0 => {
            // SAFETY: the caller's recording, finalized, mutable and not
            // pending, and one of its kernel commands.
            let rc = unsafe {
                update_arg(
                    f,
                    r.0 as cl_command_buffer_khr,
                    c.0 as cl_mutable_command_khr,
                    index,
                    arg,
                )
            };
            rc == CL_SUCCESS
        }
        _ => false,
    }
}

/// Releases command-buffer `r` (OpenCL keeps a pending one until it ends).
pub fn release(fns: &CommandBuffers, r: RecordH) {
    // SAFETY: a command-buffer the caller owns, released once.
    unsafe { (fns.clReleaseCommandBufferKHR)(r.0 as cl_command_buffer_khr) };
}
