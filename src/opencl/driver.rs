//! OpenCL behind the back-end seam (`backend::Driver`): events, and the
//! conversions between the seam's handles and OpenCL's.
//!
//! OpenCL handles are opaque identifiers that only the driver interprets,
//! so passing them on is not a dereference by this code.

#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::ffi::*;
use super::info;
use super::intel::IntelUsm;
use super::loader::{api, check, cl_error_name};
use crate::backend::{
    ArgSet, CommandH, ContextH, DeviceH, Driver, EndCallback, EventH, HostEnd, KernelFacts,
    KernelH, MemH, NativeOf, ProgramH, ProgramInput, QueueH, RecNode, RecordH, RectSide, Side,
    Stamp,
};
use crate::core::aspects::UsmStrategy;
use crate::core::error::{Error, Result, Status};
use crate::core::launch::NdRange;
use crate::core::registry::AllocKind;
use std::ffi::c_void;

pub use super::handles::*;

/// The OpenCL back end of one platform: the platform (an OpenCL id, kept
/// as a number), and its entry points for Intel's USM extension, where it
/// has them.
pub struct OpenCl {
    platform: usize,
    intel: Option<IntelUsm>,
    cmdbuf: Option<super::cmdbuf::CommandBuffers>,
}

/// An instance for events whose platform is not at hand (those of staged
/// copies): events need no platform's entry points.
pub static OPENCL: OpenCl = OpenCl {
    platform: 0,
    intel: None,
    cmdbuf: None,
};

impl OpenCl {
    /// The back end of platform `id`, made once when platforms are found
    /// and kept as long as they are (for the rest of the process).
    pub fn for_platform(
        id: cl_platform_id,
        intel: Option<IntelUsm>,
        cmdbuf: Option<super::cmdbuf::CommandBuffers>,
    ) -> &'static OpenCl {
        Box::leak(Box::new(OpenCl {
            platform: id as usize,
            intel,
            cmdbuf,
        }))
    }

    /// Intel's entry points, when `usm` says the context reaches USM
    /// through them.
    fn intel(&self, usm: UsmStrategy) -> Option<&IntelUsm> {
        self.intel.as_ref().filter(|_| usm == UsmStrategy::IntelUsm)
    }
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

    fn records(&self) -> bool {
        self.cmdbuf.is_some()
    }

    fn record(
        &self,
        q: QueueH,
        flags: (bool, bool),
        deps: &[Vec<usize>],
        nodes: &[RecNode<'_>],
    ) -> Result<(RecordH, Vec<CommandH>)> {
        let fns = self.cmdbuf.as_ref().ok_or_else(|| {
            Error::new(
                Status::FeatureNotSupported,
                "the platform has no command-buffers",
            )
        })?;
        super::record::record(fns, flags, cl_queue_of(q), deps, nodes)
    }

    fn enqueue_recorded(
        &self,
        r: RecordH,
        _q: QueueH,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<bool> {
        let Some(fns) = &self.cmdbuf else {
            return Ok(false);
        };
        let mut own = EventH::NONE;
        let quiet = ev.is_none();
        let done = super::record::enqueue(fns, r, waits, ev.unwrap_or(&mut own));
        if quiet {
            self.release_event(own);
        }
        done
    }

    fn update_recorded(&self, r: RecordH, c: CommandH, index: u32, arg: ArgSet<'_>) -> bool {
        self.cmdbuf
            .as_ref()
            .is_some_and(|fns| super::record::update(fns, r, c, index, arg))
    }

    fn release_recorded(&self, r: RecordH) {
        if let Some(fns) = &self.cmdbuf {
            super::record::release(fns, r);
        }
    }

    fn native_object(&self, of: NativeOf) -> usize {
        match of {
            NativeOf::Queue(q) => q.0,
            NativeOf::Context(c, _) => c.0,
            NativeOf::Device(d) => d.0,
        }
    }

    fn create_context(&self, devices: &[DeviceH]) -> Result<ContextH> {
        let api = api()?;
        let props: [cl_context_properties; 3] = [
            CL_CONTEXT_PLATFORM,
            self.platform as cl_context_properties,
            0,
        ];
        let ids: Vec<cl_device_id> = devices.iter().map(|d| d.0 as cl_device_id).collect();
        let mut err = CL_SUCCESS;
        // SAFETY: `props` is zero-terminated, `ids` holds device ids of
        // this platform, and no callback is registered.
        let cl = unsafe {
            (api.clCreateContext)(
                props.as_ptr(),
                ids.len() as cl_uint,
                ids.as_ptr(),
                None,
                std::ptr::null_mut(),
                &mut err,
            )
        };
        if cl.is_null() || err != CL_SUCCESS {
            return Err(Error::opencl(err, "clCreateContext"));
        }
        Ok(context_h(cl))
    }

    fn release_context(&self, ctx: ContextH) {
        if let Ok(api) = api() {
            // SAFETY: the caller owns one reference to the context; OpenCL
            // keeps it alive for objects still using it.
            unsafe { (api.clReleaseContext)(ctx.0 as cl_context) };
        }
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

    fn build_program(
        &self,
        ctx: ContextH,
        devices: &[(DeviceH, String)],
        input: ProgramInput<'_>,
        options: &str,
    ) -> Result<ProgramH> {
        super::offsets::build(ctx, devices, input, options)
    }

    fn release_program(&self, p: ProgramH) {
        super::offsets::forget(p);
        if let Ok(api) = api() {
            // SAFETY: the caller owns one reference to the program.
            unsafe { (api.clReleaseProgram)(p.0 as cl_program) };
        }
    }

    fn program_binaries(&self, p: ProgramH) -> Result<Vec<Vec<u8>>> {
        super::offsets::binaries(p)
    }

    fn build_log(&self, p: ProgramH, d: DeviceH) -> String {
        super::program::log(p, d)
    }

    fn kernel_names(&self, p: ProgramH) -> Vec<String> {
        super::program::kernel_names(p)
    }

    fn create_kernel(
        &self,
        p: ProgramH,
        name: &str,
        usm: UsmStrategy,
    ) -> Result<(KernelH, u32, String)> {
        super::offsets::kernel(p, name, usm)
    }

    fn kernel_facts(&self, k: KernelH, d: DeviceH) -> KernelFacts {
        super::program::facts(k, d)
    }

    fn kernel_offsets(&self, p: ProgramH, name: &str) -> Vec<Option<u32>> {
        super::offsets::kernel_offsets(p, name)
    }

    fn release_kernel(&self, k: KernelH) {
        if let Ok(api) = api() {
            // SAFETY: the caller owns one reference to the kernel.
            unsafe { (api.clReleaseKernel)(k.0 as cl_kernel) };
        }
    }

    fn create_mem(&self, ctx: ContextH, size: usize) -> Result<MemH> {
        super::mem::create(ctx, size)
    }

    fn create_sub_mem(&self, m: MemH, offset: usize, size: usize) -> Result<MemH> {
        super::mem::sub(m, offset, size)
    }

    fn create_view(&self, ctx: ContextH, ptr: usize, size: usize) -> Option<MemH> {
        super::mem::view(ctx, ptr, size)
    }

    fn enqueue_copy(
        &self,
        q: QueueH,
        dst: Side,
        src: Side,
        len: usize,
        blocking: bool,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        super::mem::copy(q, dst, src, len, blocking, waits, ev)
    }

    fn enqueue_copy_rect(
        &self,
        q: QueueH,
        dst: &RectSide,
        src: &RectSide,
        region: [usize; 3],
        blocking: bool,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        super::mem::copy_rect(q, dst, src, region, blocking, waits, ev)
    }

    fn enqueue_fill_mem(
        &self,
        q: QueueH,
        m: MemH,
        offset: usize,
        pattern: &[u8],
        len: usize,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        super::mem::fill(q, m, offset, pattern, len, waits, ev)
    }

    fn set_kernel_arg(
        &self,
        k: KernelH,
        usm: UsmStrategy,
        index: u32,
        arg: ArgSet<'_>,
    ) -> Result<()> {
        let api = api()?;
        let k = k.0 as cl_kernel;
        let plain = |size: usize, value: *const c_void| {
            // SAFETY: every use below passes a null value or one pointing
            // at `size` readable bytes (a slice, or a memory object's
            // handle) alive for the call.
            let rc = unsafe { (api.clSetKernelArg)(k, index, size, value) };
            (rc, "clSetKernelArg")
        };
        let (rc, call) = match arg {
            ArgSet::Bytes(b) => plain(b.len(), b.as_ptr().cast()),
            // A null value with a size reserves local memory.
            ArgSet::Local(n) => plain(n, std::ptr::null()),
            ArgSet::MemAt(_, off @ 1..) => {
                return Err(Error::new(
                    Status::Internal,
                    format!("a memory object at byte {off} reached the driver as one argument"),
                ))
            }
            ArgSet::Mem(h) | ArgSet::MemAt(h, 0) => {
                let m = h.0 as cl_mem;
                plain(std::mem::size_of::<cl_mem>(), (&m as *const cl_mem).cast())
            }
            // A null memory object value sets a null global pointer.
            ArgSet::Usm(0) => plain(std::mem::size_of::<cl_mem>(), std::ptr::null()),
            ArgSet::Usm(p) => match (self.intel(usm), api.clSetKernelArgSVMPointer) {
                // SAFETY: the extension takes any USM pointer value.
                (Some(f), _) => unsafe {
                    let rc = (f.clSetKernelArgMemPointerINTEL)(k, index, p as *const c_void);
                    (rc, "clSetKernelArgMemPointerINTEL")
                },
                // SAFETY: SVM pointer arguments are plain values.
                (None, Some(f)) => unsafe {
                    (f(k, index, p as *const c_void), "clSetKernelArgSVMPointer")
                },
                (None, None) => (CL_INVALID_OPERATION, "clSetKernelArgSVMPointer"),
            },
        };
        if rc == CL_SUCCESS {
            return Ok(());
        }
        Err(Error::new(
            if rc == CL_INVALID_ARG_VALUE || rc == CL_INVALID_ARG_SIZE {
                Status::KernelArguments
            } else {
                Status::Opencl
            },
            format!("{call} returned {} ({rc})", cl_error_name(rc)),
        ))
    }

    fn retain_mem(&self, m: MemH) {
        if let Ok(api) = api() {
            // SAFETY: a live memory object.
            unsafe { (api.clRetainMemObject)(m.0 as cl_mem) };
        }
    }

    fn release_mem(&self, m: MemH) {
        if let Ok(api) = api() {
            // SAFETY: the caller owns the reference given back.
            unsafe { (api.clReleaseMemObject)(m.0 as cl_mem) };
        }
    }

    fn enqueue_kernel(
        &self,
        q: QueueH,
        k: KernelH,
        name: &str,
        local_args: bool,
        range: &NdRange,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        let api = api()?;
        let wl = cl_events(waits);
        // SAFETY: a live queue and kernel whose arguments are set; the
        // size arrays have three entries; the wait list holds events of
        // the queue's context.
        let rc = unsafe {
            (api.clEnqueueNDRangeKernel)(
                cl_queue_of(q),
                k.0 as cl_kernel,
                range.dims,
                range.offset_or_null(),
                range.global.as_ptr(),
                range.local_or_null(),
                wl.len() as cl_uint,
                ptr_or_null(wl),
                out_ptr(ev),
            )
        };
        if rc == CL_SUCCESS {
            return Ok(());
        }
        let mut e = Error::opencl(rc, &format!("clEnqueueNDRangeKernel of kernel '{name}'"));
        if rc == CL_INVALID_KERNEL_ARGS {
            e.status = Status::KernelArguments;
        }
        if rc == CL_OUT_OF_RESOURCES && local_args {
            e.status = Status::OutOfLocalMemory;
        }
        Err(e)
    }

    fn usm_alloc(
        &self,
        ctx: ContextH,
        usm: UsmStrategy,
        kind: AllocKind,
        dev: Option<DeviceH>,
        size: usize,
        align: usize,
        atomics: bool,
    ) -> Result<usize> {
        super::usm::alloc(self.intel(usm), ctx, usm, kind, dev, size, align, atomics)
    }

    fn usm_free(&self, ctx: ContextH, usm: UsmStrategy, ptr: usize) {
        super::usm::free(self.intel(usm), ctx, ptr);
    }

    fn enqueue_memcpy(
        &self,
        q: QueueH,
        usm: UsmStrategy,
        dst: usize,
        src: usize,
        size: usize,
        _host: HostEnd,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        // The extension's copy and the SVM copy take the same arguments.
        let (f, name) = match self.intel(usm) {
            Some(i) => (i.clEnqueueMemcpyINTEL, "clEnqueueMemcpyINTEL (USM memcpy)"),
            None => (
                api()?.clEnqueueSVMMemcpy.ok_or_else(|| {
                    Error::new(Status::Internal, "SVM strategy without clEnqueueSVMMemcpy")
                })?,
                "clEnqueueSVMMemcpy (USM memcpy)",
            ),
        };
        let wl = cl_events(waits);
        // SAFETY: the caller validated both ranges; the wait list holds
        // events of the queue's context.
        let rc = unsafe {
            f(
                cl_queue_of(q),
                CL_FALSE,
                dst as *mut c_void,
                src as *const c_void,
                size,
                wl.len() as cl_uint,
                ptr_or_null(wl),
                out_ptr(ev),
            )
        };
        check(rc, name)
    }

    fn enqueue_fill(
        &self,
        q: QueueH,
        usm: UsmStrategy,
        dst: usize,
        pattern: &[u8],
        size: usize,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        // The extension's fill and the SVM fill take the same arguments.
        let (f, name) = match self.intel(usm) {
            Some(i) => (i.clEnqueueMemFillINTEL, "clEnqueueMemFillINTEL (USM fill)"),
            None => (
                api()?.clEnqueueSVMMemFill.ok_or_else(|| {
                    Error::new(Status::Internal, "SVM strategy without clEnqueueSVMMemFill")
                })?,
                "clEnqueueSVMMemFill (USM fill)",
            ),
        };
        let wl = cl_events(waits);
        // SAFETY: a validated range; OpenCL copies the pattern; the wait
        // list holds events of the queue's context.
        let rc = unsafe {
            f(
                cl_queue_of(q),
                dst as *mut c_void,
                pattern.as_ptr().cast(),
                pattern.len(),
                size,
                wl.len() as cl_uint,
                ptr_or_null(wl),
                out_ptr(ev),
            )
        };
        check(rc, name)
    }

    fn can_migrate(&self, usm: UsmStrategy) -> bool {
        match self.intel(usm) {
            Some(i) => i.clEnqueueMigrateMemINTEL.is_some(),
            None => api().is_ok_and(|a| a.clEnqueueSVMMigrateMem.is_some()),
        }
    }

    fn enqueue_migrate(
        &self,
        q: QueueH,
        usm: UsmStrategy,
        ptr: usize,
        size: usize,
        waits: &[EventH],
        ev: &mut EventH,
    ) -> Result<bool> {
        let api = api()?;
        let (q, wl, out) = (cl_queue_of(q), cl_events(waits), out_ptr(Some(ev)));
        let p = ptr as *const c_void;
        let (rc, name) = match (self.intel(usm), api.clEnqueueSVMMigrateMem) {
            (Some(i), _) => match i.clEnqueueMigrateMemINTEL {
                // SAFETY: a validated range; flags 0 move it to the device.
                Some(m) => (
                    unsafe { m(q, p, size, 0, wl.len() as cl_uint, ptr_or_null(wl), out) },
                    "clEnqueueMigrateMemINTEL (USM prefetch)",
                ),
                None => (
                    CL_INVALID_OPERATION,
                    "clEnqueueMigrateMemINTEL (USM prefetch)",
                ),
            },
            // SAFETY: one validated SVM range, moved to the device.
            (None, Some(m)) => (
                unsafe {
                    m(
                        q,
                        1,
                        &p,
                        &size,
                        0,
                        wl.len() as cl_uint,
                        ptr_or_null(wl),
                        out,
                    )
                },
                "clEnqueueSVMMigrateMem (USM prefetch)",
            ),
            (None, None) => (
                CL_INVALID_OPERATION,
                "clEnqueueSVMMigrateMem (USM prefetch)",
            ),
        };
        if rc == CL_INVALID_VALUE || rc == CL_INVALID_OPERATION {
            return Ok(false);
        }
        check(rc, name).map(|()| true)
    }

    fn can_advise(&self, usm: UsmStrategy) -> bool {
        self.intel(usm)
            .is_some_and(|i| i.clEnqueueMemAdviseINTEL.is_some())
    }

    fn enqueue_advise(
        &self,
        q: QueueH,
        usm: UsmStrategy,
        ptr: usize,
        size: usize,
        advice: u32,
        waits: &[EventH],
        ev: &mut EventH,
    ) -> Result<bool> {
        let Some(a) = self.intel(usm).and_then(|i| i.clEnqueueMemAdviseINTEL) else {
            return Ok(false);
        };
        let wl = cl_events(waits);
        // SAFETY: a validated range; the driver checks the advice value.
        let rc = unsafe {
            a(
                cl_queue_of(q),
                ptr as *const c_void,
                size,
                advice,
                wl.len() as cl_uint,
                ptr_or_null(wl),
                out_ptr(Some(ev)),
            )
        };
        if rc == CL_INVALID_VALUE {
            return Ok(false);
        }
        check(rc, "clEnqueueMemAdviseINTEL (USM mem_advise)").map(|()| true)
    }
}
