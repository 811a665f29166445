//! Conversions between the back-end seam's handles and OpenCL's: the
//! same pointer-sized values, so lists convert without copying.
//!
//! OpenCL handles are opaque identifiers that only the driver interprets,
//! so passing them on is not a dereference by this code.

#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::ffi::*;
use crate::backend::{ContextH, DeviceH, EventH, QueueH};

/// A command's event slot as OpenCL takes it: null for none.
pub fn out_ptr(ev: Option<&mut EventH>) -> *mut cl_event {
    match ev {
        Some(e) => (e as *mut EventH).cast::<cl_event>(),
        None => std::ptr::null_mut(),
    }
}

/// The seam's event slot for OpenCL's `ev`: none when null.
///
/// # Safety
/// `ev` is null or valid for writes for as long as the slot is used.
pub unsafe fn event_slot<'a>(ev: *mut cl_event) -> Option<&'a mut EventH> {
    // SAFETY: the caller's promise; `EventH` has the layout of `cl_event`.
    unsafe { ev.cast::<EventH>().as_mut() }
}

/// The seam's handle for OpenCL queue `q`.
pub fn queue_h(q: cl_command_queue) -> QueueH {
    QueueH(q as usize)
}

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

/// The OpenCL device behind seam handle `d` (a device of an OpenCL
/// platform).
pub fn cl_device_of(d: DeviceH) -> cl_device_id {
    d.0 as cl_device_id
}

/// The seam's handle for OpenCL context `c`.
pub fn context_h(c: cl_context) -> ContextH {
    ContextH(c as usize)
}

/// The OpenCL context behind the seam's handle `c`.
pub fn cl_context_of(c: ContextH) -> cl_context {
    c.0 as cl_context
}

/// Pointer to a wait list's first element, or null when it is empty.
pub fn ptr_or_null(v: &[cl_event]) -> *const cl_event {
    if v.is_empty() {
        std::ptr::null()
    } else {
        v.as_ptr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_and_opencl_lists_are_the_same_values() {
        let list = [EventH(0x10), EventH(0x20), EventH(0x30)];
        let cl = cl_events(&list);
        assert_eq!(cl.len(), 3);
        assert_eq!(cl[1] as usize, 0x20);
        assert_eq!(event_h(cl[2]), EventH(0x30));
        assert_eq!(cl_event_of(EventH(0x40)) as usize, 0x40);
        assert_eq!(
            cl_queue_of(queue_h(0x50 as cl_command_queue)),
            0x50 as cl_command_queue
        );
        assert!(ptr_or_null(&cl[..0]).is_null());
        assert_eq!(ptr_or_null(cl), cl.as_ptr());
        let mut slot = EventH::NONE;
        let out = out_ptr(Some(&mut slot));
        // SAFETY: `out` points at `slot`, alive and unaliased here.
        unsafe { *out = 0x60 as cl_event };
        assert_eq!(slot, EventH(0x60));
        assert!(out_ptr(None).is_null());
        // SAFETY: a null slot is none; a live one is that event's.
        assert!(unsafe { event_slot(std::ptr::null_mut()) }.is_none());
    }
}
