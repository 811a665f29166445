//! Queues and kernel launches.

use super::buffer::syrah_accessor;
use super::copy::requests;
use super::device::device_ref;
use super::event::{deps_from, give_event, give_submitted};
use super::types::*;
use super::{borrow, clone_arc, guard, into_handle, out, release, retain, slice};
use crate::core::error::{Error, Result, Status};
use crate::core::launch::NdRange;
use crate::runtime::context::Context;
use crate::runtime::event::Event;
use crate::runtime::launch::Arg;
use crate::runtime::platform::Device;
use crate::runtime::program::Kernel;
use crate::runtime::queue::Queue;
use smallvec::SmallVec;
use std::ffi::{c_char, c_void};

/// Receives each asynchronous error once: the queue, the status, a
/// message (valid during the call) and the user data given at creation.
/// Called from `syrah_queue_wait` on the waiting thread.
pub type syrah_async_handler =
    Option<unsafe extern "C" fn(*const Queue, syrah_status, *const c_char, *mut c_void)>;

/// Creates a queue on `device`. `context` may be NULL, in which case a new
/// context holding only `device` is made for the queue. `flags` combines
/// `SYRAH_QUEUE_*`; without `SYRAH_QUEUE_IN_ORDER` only dependencies order
/// commands. `handler` may be NULL: errors are then returned by
/// `syrah_queue_wait`.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_create(
    context: *const Context,
    device: *const Device,
    flags: syrah_queue_flags,
    handler: syrah_async_handler,
    user_data: *mut c_void,
    out_queue: *mut *mut Queue,
) -> syrah_status {
    guard(|| {
        if out_queue.is_null() {
            return Err(super::null("out_queue"));
        }
        let d = device_ref(device, "device")?;
        let known = SYRAH_QUEUE_IN_ORDER | SYRAH_QUEUE_PROFILING;
        if flags & !known != 0 {
            return Err(Error::invalid(format!(
                "unknown queue flags {:#x} in {flags:#x}",
                flags & !known
            )));
        }
        let ctx = if context.is_null() {
            Context::create(&[d])?
        } else {
            // SAFETY: forwarded contract.
            unsafe { clone_arc(context, "context") }?
        };
        let q = Queue::create(
            ctx,
            d,
            flags & SYRAH_QUEUE_IN_ORDER != 0,
            flags & SYRAH_QUEUE_PROFILING != 0,
            handler.map(|h| (h, user_data as usize)),
        )?;
        // SAFETY: checked non-null.
        unsafe { out(out_queue, into_handle(q), "out_queue") }
    })
}

/// Adds a reference to a queue.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_retain(queue: *const Queue) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { retain(queue, "queue") })
}

/// Drops a reference; the last one waits for the queue's commands.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_release(queue: *const Queue) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { release(queue, "queue") })
}

/// The queue's context, with a new reference the caller releases.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_get_context(
    queue: *const Queue,
    out_context: *mut *mut Context,
) -> syrah_status {
    guard(|| {
        if out_context.is_null() {
            return Err(super::null("out_context"));
        }
        // SAFETY: forwarded contract.
        let q = unsafe { borrow(queue, "queue") }?;
        // SAFETY: checked non-null.
        unsafe { out(out_context, into_handle(q.ctx.clone()), "out_context") }
    })
}

/// The queue's device.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_get_device(
    queue: *const Queue,
    out_device: *mut *const Device,
) -> syrah_status {
    guard(|| {
        super::need(out_device, "out_device")?;
        // SAFETY: forwarded contract.
        let q = unsafe { borrow(queue, "queue") }?;
        // SAFETY: forwarded contract.
        unsafe { out(out_device, q.device as *const Device, "out_device") }
    })
}

/// Waits for every command submitted so far, then delivers each
/// asynchronous error not yet reported: to the handler when there is one
/// (and returns success), else as this call's status (the first error, with
/// the count of the others in the message).
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_wait(queue: *const Queue) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let q = unsafe { clone_arc(queue, "queue") }?;
        super::graph::refuse_while_recording(&q, "waiting for the queue")?;
        q.wait()
    })
}

/// Enqueues a barrier after `dependencies` (or, with none, after every
/// command before it); later commands of the queue wait for it.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_barrier(
    queue: *const Queue,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let q = unsafe { borrow(queue, "queue") }?;
        if let Some(rec) = crate::runtime::graph::recording_of(q) {
            // SAFETY: forwarded contract.
            return unsafe {
                super::graph::record(
                    &rec,
                    crate::runtime::graph::Action::Barrier,
                    Vec::new(),
                    dependencies,
                    dependency_count,
                    "barrier".into(),
                    out_event,
                )
            };
        }
        // SAFETY: forwarded contract.
        let deps = unsafe { deps_from(dependencies, dependency_count) }?;
        let ev = q.barrier(&deps)?;
        // SAFETY: forwarded contract.
        unsafe { give_event(ev, out_event) };
        Ok(())
    })
}

/// Checks argument kinds and accessor indices without building anything.
unsafe fn check_args(args: *const syrah_kernel_arg, count: usize, accessors: usize) -> Result<()> {
    // SAFETY: forwarded contract.
    let raw = unsafe { slice(args, count, "args") }?;
    for (i, a) in raw.iter().enumerate() {
        if a.kind == SYRAH_ARG_ACCESSOR && a.size >= accessors {
            return Err(Error::new(
                Status::KernelArguments,
                format!(
                    "args[{i}] names accessor {} but the command group has {accessors}",
                    a.size
                ),
            ));
        }
    }
    Ok(())
}

/// Arguments from the C descriptions, into `out` (filled in place: the
/// list is large to move); accessor arguments take the pointers of the
/// prepared accessors.
unsafe fn args_from<'a>(
    args: *const syrah_kernel_arg,
    count: usize,
    accessor_ptrs: &[Arg<'static>],
    out: &mut SmallVec<[Arg<'a>; 8]>,
) -> Result<()> {
    // SAFETY: forwarded contract.
    let raw = unsafe { slice(args, count, "args") }?;
    for (i, a) in raw.iter().enumerate() {
        out.push(match a.kind {
            SYRAH_ARG_VALUE => {
                if a.value.is_null() {
                    return Err(Error::new(
                        Status::NullArgument,
                        format!("args[{i}] is a value argument with a NULL value"),
                    ));
                }
                if a.size == 0 {
                    return Err(Error::new(
                        Status::KernelArguments,
                        format!("args[{i}] is a value argument of size 0"),
                    ));
                }
                // SAFETY: `size` readable bytes at `value` per the contract.
                Ok(Arg::Bytes(unsafe {
                    std::slice::from_raw_parts(a.value.cast::<u8>(), a.size)
                }))
            }
            SYRAH_ARG_USM => Ok(Arg::Usm(a.value as usize)),
            SYRAH_ARG_LOCAL => Ok(Arg::Local(a.size)),
            SYRAH_ARG_ACCESSOR => accessor_ptrs.get(a.size).copied().ok_or_else(|| {
                Error::new(
                    Status::KernelArguments,
                    format!(
                        "args[{i}] names accessor {} but the command group has {}",
                        a.size,
                        accessor_ptrs.len()
                    ),
                )
            }),
            other => Err(Error::new(
                Status::KernelArguments,
                format!("args[{i}] has the unknown kind {other}"),
            )),
        }?);
    }
    Ok(())
}

fn to_nd(r: &syrah_range) -> Result<NdRange> {
    if !(1..=3).contains(&r.dimensions) {
        return Err(Error::invalid(format!(
            "range dimensions must be 1, 2 or 3, not {}",
            r.dimensions
        )));
    }
    let d = r.dimensions as usize;
    let used = &r.local_size[..d];
    let local = if used.iter().all(|&x| x == 0) {
        None
    } else {
        let mut l = [1usize; 3];
        l[..d].copy_from_slice(used);
        Some(l)
    };
    let mut global = [1usize; 3];
    global[..d].copy_from_slice(&r.global_size[..d]);
    let mut offset = [0usize; 3];
    offset[..d].copy_from_slice(&r.global_offset[..d]);
    Ok(NdRange {
        dims: r.dimensions,
        global,
        local,
        offset,
    })
}

/// Launches `kernel` over `range` with `arg_count` arguments (the kernel's
/// parameters, in order; those left out at the end, and those of kind
/// `SYRAH_ARG_BOUND`, are the ones bound with `syrah_kernel_set_arg`) once
/// `dependencies` have completed.
/// Refused before reaching OpenCL when the work-group does not fit or the
/// local memory (the kernel's own plus `SYRAH_ARG_LOCAL` arguments) exceeds
/// the device's. `out_event` may be NULL.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_launch(
    queue: *const Queue,
    kernel: *const Kernel,
    range: *const syrah_range,
    args: *const syrah_kernel_arg,
    arg_count: usize,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    // SAFETY: forwarded contract; no accessors.
    unsafe {
        syrah_queue_submit_kernel(
            queue,
            kernel,
            range,
            std::ptr::null(),
            0,
            args,
            arg_count,
            dependencies,
            dependency_count,
            out_event,
        )
    }
}

/// A kernel command group with buffer requirements: like
/// `syrah_queue_launch`, plus `accessor_count` accessors. Syrah orders the
/// command after every earlier command whose accesses conflict with these
/// (overlapping pages, one of them writing), moves the pages the accessors
/// need to the queue's device (only those outdated there; none for discard
/// modes or buffers without data), and passes accessor `i` to arguments of
/// kind `SYRAH_ARG_ACCESSOR` with `size` = `i`.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_submit_kernel(
    queue: *const Queue,
    kernel: *const Kernel,
    range: *const syrah_range,
    accessors: *const syrah_accessor,
    accessor_count: usize,
    args: *const syrah_kernel_arg,
    arg_count: usize,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let q = unsafe { borrow(queue, "queue") }?;
        // SAFETY: forwarded contract.
        let k = unsafe { borrow(kernel, "kernel") }?;
        if range.is_null() {
            return Err(super::null("range"));
        }
        // SAFETY: checked non-null; readable per the contract.
        let nd = to_nd(unsafe { &*range })?;
        // A launch without accessors has nothing to look at (nor to move).
        let reqs = if accessor_count == 0 {
            SmallVec::new()
        } else {
            // SAFETY: forwarded contract.
            unsafe { requests(accessors, accessor_count) }?
        };
        // Arguments bound to the kernel and accessor pitches made plain.
        // SAFETY: forwarded contract.
        let resolved = unsafe { super::args::resolve(k, args, arg_count, &reqs) }?;
        let (args, arg_count) = match &resolved {
            Some(r) => (r.args.as_ptr(), r.args.len()),
            None => (args, arg_count),
        };
        if let Some(rec) = crate::runtime::graph::recording_of(q) {
            // SAFETY: forwarded contract.
            return unsafe {
                super::graph::record_kernel(
                    &rec,
                    q,
                    k,
                    nd,
                    &reqs,
                    args,
                    arg_count,
                    dependencies,
                    dependency_count,
                    out_event,
                )
            };
        }
        let done = if reqs.is_empty() {
            // Nothing to move or track: the launch alone.
            let kinfo = q.precheck(k, &nd, arg_count)?;
            // SAFETY: forwarded contract.
            let deps = unsafe { deps_from(dependencies, dependency_count) }?;
            let mut a = SmallVec::new();
            // SAFETY: forwarded contract.
            unsafe { args_from(args, arg_count, &[], &mut a) }?;
            q.launch(k, &kinfo, &nd, &a, &deps, &[], None, !out_event.is_null())?
        } else {
            // Cheap checks first, so a bad launch moves no data.
            // SAFETY: forwarded contract.
            unsafe { check_args(args, arg_count, reqs.len()) }?;
            let kinfo = q.precheck(k, &nd, arg_count)?;
            // SAFETY: forwarded contract.
            let mut deps = unsafe { deps_from(dependencies, dependency_count) }?;
            // Transfers for the accessors and the kernel share one lane.
            let _group = q.group_lane();
            let mut on_lanes = crate::runtime::queue::LanePositions::new();
            let prepared = q.prepare_accesses_at(&reqs, &mut deps, Some(&mut on_lanes))?;
            let offsets = k.takes_offsets();
            let staged = q.stage_windows(&reqs, &prepared, &mut deps, &on_lanes, offsets)?;
            let ptrs = crate::runtime::buffer::accessor_args(&prepared, &staged, offsets)?;
            let mut a = SmallVec::new();
            // SAFETY: forwarded contract.
            unsafe { args_from(args, arg_count, &ptrs, &mut a) }?;
            let keep = if prepared.is_empty() {
                None
            } else {
                Some(crate::runtime::buffer::held_storages(
                    prepared.iter().map(|p| &p.storage),
                ))
            };
            // With no event asked for, the command may go without one: later
            // accesses find it by its place on its lane.
            let want_event =
                !out_event.is_null() || !staged.is_empty() || prepared.iter().any(|p| p.eventful);
            let done = q.launch(k, &kinfo, &nd, &a, &deps, &on_lanes, keep, want_event)?;
            q.commit_submitted(&prepared, &done);
            q.unstage_windows(&prepared, staged, &done)?;
            done
        };
        // SAFETY: forwarded contract.
        unsafe { give_submitted(done, out_event) };
        Ok(())
    })
}

/// Launches `kernel` as a single work-item (one work-group of one).
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_single_task(
    queue: *const Queue,
    kernel: *const Kernel,
    args: *const syrah_kernel_arg,
    arg_count: usize,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    let range = syrah_range {
        dimensions: 1,
        global_size: [1, 1, 1],
        local_size: [1, 1, 1],
        global_offset: [0, 0, 0],
    };
    // SAFETY: forwarded contract; `range` is a valid local.
    unsafe {
        syrah_queue_launch(
            queue,
            kernel,
            &range,
            args,
            arg_count,
            dependencies,
            dependency_count,
            out_event,
        )
    }
}
