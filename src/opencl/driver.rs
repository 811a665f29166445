//! OpenCL behind the back-end seam (`backend::Driver`): events, and the
//! conversions between the seam's handles and OpenCL's.
//!
//! OpenCL handles are opaque identifiers that only the driver interprets,
//! so passing them on is not a dereference by this code.

#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::ffi::*;
use super::info;
use super::loader::{api, check};
use crate::backend::{ContextH, DeviceH, Driver, EndCallback, EventH, QueueH, Stamp};
use crate::core::error::{Error, Result};
use std::ffi::c_void;

/// The OpenCL back end.
pub struct OpenCl;

/// The one instance platforms refer to.
pub static OPENCL: OpenCl = OpenCl;

/// The seam's handle for OpenCL event `e`.
pub fn event_h(e: cl_event) -> EventH {
    EventH(e as usize)
}

/// OpenCL's event for seam handle `e`.
pub fn cl_event_of(e: EventH) -> cl_event {
    e.0 as cl_event
}

/// A list of seam handles as OpenCL's wait list, without copying.
pub fn cl_events(list: &[EventH]) -> &[cl_event] {
    // SAFETY: `EventH` is a transparent `usize`, which has the size and
    // alignment of a pointer such as `cl_event`; OpenCL's handles are
    // those same values.
    unsafe { std::slice::from_raw_parts(list.as_ptr().cast::<cl_event>(), list.len()) }
}

/// OpenCL's queue for seam handle `q`.
pub fn cl_queue_of(q: QueueH) -> cl_command_queue {
    q.0 as cl_command_queue
}

/// The seam's handle for OpenCL device `d`.
pub fn device_h(d: cl_device_id) -> DeviceH {
    DeviceH(d as usize)
}

/// A command's queue, its wait list and where its event goes (nowhere
/// for a command without one), as the seam gives them to the closure that
/// enqueues it, in OpenCL's terms.
pub fn cl_args<'a>(
    q: QueueH,
    waits: &'a [EventH],
    ev: Option<&mut EventH>,
) -> (cl_command_queue, &'a [cl_event], *mut cl_event) {
    let out = match ev {
        Some(e) => (e as *mut EventH).cast::<cl_event>(),
        None => std::ptr::null_mut(),
    };
    (cl_queue_of(q), cl_events(waits), out)
}

/// The seam's handle for OpenCL context `c`.
pub fn context_h(c: cl_context) -> ContextH {
    ContextH(c as usize)
}

impl Driver for OpenCl {
    fn name(&self) -> &'static str {
        "OpenCL"
    }

    fn release_event(&self, e: EventH) {
        if e.is_none() {
            return;
        }
        if let Ok(api) = api() {
            // SAFETY: the caller owns one reference to the event.
            unsafe { (api.clReleaseEvent)(cl_event_of(e)) };
        }
    }

    fn event_status(&self, e: EventH) -> Result<i32> {
        info::event_scalar::<cl_int>(api()?, cl_event_of(e), CL_EVENT_COMMAND_EXECUTION_STATUS)
    }

    fn wait_event(&self, e: EventH) -> Result<i32> {
        let api = api()?;
        let cl = cl_event_of(e);
        // SAFETY: waiting on one live event.
        Ok(unsafe { (api.clWaitForEvents)(1, &cl) })
    }

    fn create_user_event(&self, ctx: ContextH) -> Result<EventH> {
        let api = api()?;
        let mut err = CL_SUCCESS;
        // SAFETY: `ctx` is a live OpenCL context.
        let cl = unsafe { (api.clCreateUserEvent)(ctx.0 as cl_context, &mut err) };
        if cl.is_null() || err != CL_SUCCESS {
            return Err(Error::opencl(err, "clCreateUserEvent"));
        }
        Ok(event_h(cl))
    }

    fn complete_user_event(&self, e: EventH) -> Result<()> {
        let api = api()?;
        // SAFETY: `e` is a user event made by clCreateUserEvent.
        let rc = unsafe { (api.clSetUserEventStatus)(cl_event_of(e), CL_COMPLETE) };
        check(rc, "clSetUserEventStatus")
    }

    fn on_end(&self, e: EventH, f: EndCallback, user: *mut c_void) -> Result<()> {
        let api = api()?;
        // SAFETY: OpenCL's callback takes the event, its status and the
        // user data: pointer arguments of the same layout as the seam's.
        let cb = unsafe {
            std::mem::transmute::<EndCallback, unsafe extern "C" fn(cl_event, cl_int, *mut c_void)>(
                f,
            )
        };
        // SAFETY: a live event; the callback is called at most once.
        let rc = unsafe { (api.clSetEventCallback)(cl_event_of(e), CL_COMPLETE, Some(cb), user) };
        check(rc, "clSetEventCallback")
    }

    fn timestamp(&self, e: EventH, which: Stamp) -> Result<u64> {
        let param = match which {
            Stamp::Queued => CL_PROFILING_COMMAND_QUEUED,
            Stamp::Submitted => CL_PROFILING_COMMAND_SUBMIT,
            Stamp::Started => CL_PROFILING_COMMAND_START,
            Stamp::Ended => CL_PROFILING_COMMAND_END,
        };
        info::profiling(api()?, cl_event_of(e), param)
    }

    fn create_queue(&self, ctx: ContextH, dev: DeviceH, timed: bool) -> Result<QueueH> {
        let api = api()?;
        let props: cl_command_queue_properties = if timed { CL_QUEUE_PROFILING_ENABLE } else { 0 };
        let (c, d) = (ctx.0 as cl_context, dev.0 as cl_device_id);
        let mut err = CL_SUCCESS;
        let q = match api.clCreateCommandQueueWithProperties {
            Some(f) => {
                let list: [cl_queue_properties; 3] = [CL_QUEUE_PROPERTIES, props, 0];
                // SAFETY: a live context and one of its devices; the
                // property list is zero-terminated.
                unsafe { f(c, d, list.as_ptr(), &mut err) }
            }
            // SAFETY: as above, through the OpenCL 1.x entry point.
            None => unsafe { (api.clCreateCommandQueue)(c, d, props, &mut err) },
        };
        if q.is_null() || err != CL_SUCCESS {
            return Err(Error::opencl(err, "clCreateCommandQueueWithProperties"));
        }
        Ok(QueueH(q as usize))
    }

    fn release_queue(&self, q: QueueH) {
        if let Ok(api) = api() {
            // SAFETY: the caller owns one reference to the queue.
            unsafe { (api.clReleaseCommandQueue)(cl_queue_of(q)) };
        }
    }

    fn flush(&self, q: QueueH) {
        if let Ok(api) = api() {
            // SAFETY: flushing a live queue.
            unsafe { (api.clFlush)(cl_queue_of(q)) };
        }
    }

    fn finish(&self, q: QueueH) -> Result<()> {
        let api = api()?;
        // SAFETY: a live queue.
        check(unsafe { (api.clFinish)(cl_queue_of(q)) }, "clFinish")
    }

    fn enqueue_marker(&self, q: QueueH, waits: &[EventH]) -> Result<EventH> {
        let api = api()?;
        let wl = cl_events(waits);
        let mut ev: cl_event = std::ptr::null_mut();
        let list = if wl.is_empty() {
            std::ptr::null()
        } else {
            wl.as_ptr()
        };
        // SAFETY: a live queue; the wait list holds events of its context;
        // `ev` receives the marker's event.
        let rc = unsafe {
            (api.clEnqueueMarkerWithWaitList)(cl_queue_of(q), wl.len() as cl_uint, list, &mut ev)
        };
        check(rc, "clEnqueueMarkerWithWaitList")?;
        Ok(event_h(ev))
    }
}

/// Pointer to a wait list's first element, or null when it is empty.
pub fn ptr_or_null(v: &[cl_event]) -> *const cl_event {
    if v.is_empty() {
        std::ptr::null()
    } else {
        v.as_ptr()
    }
}
