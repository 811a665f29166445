//! Host tasks.

use super::buffer::syrah_accessor;
use super::copy::requests;
use super::event::{deps_from, give_event};
use super::types::*;
use super::{guard, null, out};
use crate::backend::NativeOf;
use crate::core::error::{Error, Result};
use crate::runtime::event::Event;
use crate::runtime::host_task::{HostTaskContext, Task};
use crate::runtime::queue::Queue;
use std::ffi::c_void;

/// A host task: a function run on a runtime thread with the group's
/// context and its user data. It returns `SYRAH_SUCCESS`, or another status
/// to report failure (which becomes an asynchronous error of the group,
/// with this thread's last Syrah error message if it set one).
pub type syrah_host_task_fn =
    Option<unsafe extern "C" fn(*const HostTaskContext, *mut c_void) -> syrah_status>;

/// One host task of a group. `release` (may be NULL) is called with the
/// user data exactly once, when the group will not call `run` any more
/// (after it ran, or when a failed dependency kept it from running); not
/// when the submission itself fails.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct syrah_host_task {
    pub run: syrah_host_task_fn,
    pub user_data: *mut c_void,
    pub release: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// Native objects a host task can reach.
pub type syrah_native = u32;
/// The `cl_command_queue` of the queue's device.
pub const SYRAH_NATIVE_QUEUE: syrah_native = 1;
/// The `cl_context` of the queue.
pub const SYRAH_NATIVE_CONTEXT: syrah_native = 2;
/// The `cl_device_id` of the queue's device.
pub const SYRAH_NATIVE_DEVICE: syrah_native = 3;

/// Submits a group of `task_count` host tasks that run, in order, on a
/// runtime thread (never the calling one) once `dependencies` and every
/// earlier conflicting command are done and the accessors' data is current
/// on the host; commands that depend on the group run after it. Returns at
/// once. Inside, `syrah_host_task_get_pointer` gives the accessors' host
/// memory. A group holds host tasks only: kernels go through
/// `syrah_queue_submit_kernel`.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_submit_host_tasks(
    queue: *const Queue,
    accessors: *const syrah_accessor,
    accessor_count: usize,
    tasks: *const syrah_host_task,
    task_count: usize,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let q = unsafe { super::clone_arc(queue, "queue") }?;
        // SAFETY: forwarded contract.
        let raw = unsafe { super::slice(tasks, task_count, "tasks") }?;
        let list = raw
            .iter()
            .enumerate()
            .map(|(i, t)| {
                Ok(Task {
                    run: t.run.ok_or_else(|| null(&format!("tasks[{i}].run")))?,
                    user_data: t.user_data as usize,
                    release: t.release,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // SAFETY: forwarded contract.
        let reqs = unsafe { requests(accessors, accessor_count) }?;
        if let Some(rec) = crate::runtime::graph::recording_of(&q) {
            if list.is_empty() {
                return Err(Error::invalid(
                    "a host-task group needs at least one task (0 given)",
                ));
            }
            let n = list.len();
            // SAFETY: forwarded contract.
            return unsafe {
                super::graph::record(
                    &rec,
                    crate::runtime::graph::Action::HostTasks(list),
                    super::graph::accesses_of(&reqs),
                    dependencies,
                    dependency_count,
                    format!("host task group of {n}"),
                    out_event,
                )
            };
        }
        // SAFETY: forwarded contract.
        let deps = unsafe { deps_from(dependencies, dependency_count) }?;
        let ev = q.submit_host_tasks(&reqs, &list, &deps)?;
        // SAFETY: forwarded contract.
        unsafe { give_event(ev, out_event) };
        Ok(())
    })
}

fn context<'a>(ctx: *const HostTaskContext) -> Result<&'a HostTaskContext> {
    if ctx.is_null() {
        return Err(null("context"));
    }
    // SAFETY: a host task receives a context that stays valid while it runs.
    Ok(unsafe { &*ctx })
}

/// Host memory of accessor `index` of the running group: a pointer to its
/// first element, with the buffer's pitches. Valid while the task runs.
#[no_mangle]
pub unsafe extern "C" fn syrah_host_task_get_pointer(
    context: *const HostTaskContext,
    index: usize,
    out_pointer: *mut *mut c_void,
) -> syrah_status {
    guard(|| {
        super::need(out_pointer, "out_pointer")?;
        let c = self::context(context)?;
        let a = c.accessors.get(index).ok_or_else(|| {
            Error::invalid(format!(
                "accessor index {index} is out of range: the group has {} accessors",
                c.accessors.len()
            ))
        })?;
        // SAFETY: forwarded contract.
        unsafe { out(out_pointer, a.ptr as *mut c_void, "out_pointer") }
    })
}

/// A native object of the group's queue (`SYRAH_NATIVE_*`), for
/// interoperation: OpenCL's `cl_command_queue`, `cl_context` and
/// `cl_device_id`, or on the CUDA back end's devices CUDA's `CUstream`,
/// `CUcontext` and a pointer to the `CUdevice`. Syrah keeps ownership: do
/// not release it.
#[no_mangle]
pub unsafe extern "C" fn syrah_host_task_get_native(
    context: *const HostTaskContext,
    which: syrah_native,
    out_object: *mut *mut c_void,
) -> syrah_status {
    guard(|| {
        super::need(out_object, "out_object")?;
        let c = self::context(context)?;
        let of = match which {
            SYRAH_NATIVE_QUEUE => NativeOf::Queue(c.queue.sync_queue()),
            SYRAH_NATIVE_CONTEXT => NativeOf::Context(c.queue.ctx.raw, c.queue.device.handle()),
            SYRAH_NATIVE_DEVICE => NativeOf::Device(c.queue.device.handle()),
            other => return Err(Error::invalid(format!("unknown native object {other}"))),
        };
        let v = c.queue.ctx.platform.driver.native_object(of) as *mut c_void;
        // SAFETY: forwarded contract.
        unsafe { out(out_object, v, "out_object") }
    })
}

/// The buffer of accessor `index` on the queue's device: its USM pointer
/// (`*out_is_usm` true) or, on a device without USM, its `cl_mem`; made if
/// the device had no allocation yet. Its contents are not synchronised with
/// the host data the task sees.
#[no_mangle]
pub unsafe extern "C" fn syrah_host_task_get_native_buffer(
    context: *const HostTaskContext,
    index: usize,
    out_object: *mut *mut c_void,
    out_is_usm: *mut bool,
) -> syrah_status {
    guard(|| {
        let c = self::context(context)?;
        if out_object.is_null() || out_is_usm.is_null() {
            return Err(null(if out_object.is_null() {
                "out_object"
            } else {
                "out_is_usm"
            }));
        }
        let a = c.accessors.get(index).ok_or_else(|| {
            Error::invalid(format!(
                "accessor index {index} is out of range: the group has {} accessors",
                c.accessors.len()
            ))
        })?;
        let (p, usm) = crate::runtime::buffer::native_of(&a.storage, &c.queue)?;
        // SAFETY: both checked non-null.
        unsafe {
            *out_object = p;
            *out_is_usm = usm;
        }
        Ok(())
    })
}
