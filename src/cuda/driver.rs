//! The CUDA back end behind the back-end seam (`backend::Driver`): Syrah
//! contexts are devices' primary contexts, queue lanes are streams,
//! unified shared memory is CUDA's device, pinned host and managed
//! memory, and kernels are NVIDIA OpenCL's PTX loaded through `ptx`.
//! Programs are built from PTX: the runtime compiles OpenCL C with
//! NVIDIA's OpenCL first.
//!
//! Handles are pointers to this back end's own objects (made with
//! `Box`/`Arc::into_raw`), read back only here.

#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::events::{self, Ev};
use super::graph;
use super::hold::{command, command_or_hold};
use super::hostcopy::{self, Rect};
use super::loader::{
    api, check, CUdeviceptr, MemLocation, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
    CU_MEM_LOCATION_TYPE_DEVICE,
};
use super::memory::{self, addr, fill, mem_of, new_mem, Mem};
use super::module::Function;
use super::program::{shape_of, Kern, OwnedArg, Prog};
use super::state::{make_current, Ctx, Stream};
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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The CUDA back end (one for all CUDA devices).
pub struct Cuda;

/// A queue handle for a stream of device `dev` of `ctx` (see
/// `Stream::create`).
fn stream_queue(ctx: ContextH, dev: DeviceH, timed: bool, spare: bool) -> Result<QueueH> {
    let d = ctx_of(ctx)
        .device(dev.0 as i32)
        .ok_or_else(|| Error::invalid(format!("CUDA device {} is not in the context", dev.0)))?;
    Ok(QueueH(
        Arc::into_raw(Stream::create(d, timed, spare)?) as usize
    ))
}

impl Cuda {
    /// The process's CUDA back end.
    pub fn get() -> &'static Cuda {
        static CUDA: Cuda = Cuda;
        &CUDA
    }
}

fn ctx_of(c: ContextH) -> &'static Ctx {
    // SAFETY: made by Box::into_raw in `create_context`, alive until
    // `release_context`, after every use through the handle.
    unsafe { &*(c.0 as *const Ctx) }
}

fn prog_of(p: ProgramH) -> &'static Arc<Prog> {
    // SAFETY: made by Box::into_raw in `build_program`, alive until
    // `release_program`.
    unsafe { &*(p.0 as *const Arc<Prog>) }
}

fn kern_of(k: KernelH) -> &'static Kern {
    // SAFETY: made by Box::into_raw in `create_kernel`, alive until
    // `release_kernel`.
    unsafe { &*(k.0 as *const Kern) }
}

impl Driver for Cuda {
    fn name(&self) -> &'static str {
        "CUDA"
    }

    /// It launches kernels and replays graphs faster than NVIDIA's OpenCL.
    fn preferred(&self) -> bool {
        true
    }

    fn failure_detail(&self, e: EventH) -> Option<String> {
        events::of(e).why().map(str::to_string)
    }

    /// CUDA's name for the error that ended the command.
    fn failure_name(&self, code: i32) -> String {
        match (events::cuda_code(code), api()) {
            (Some(c), Ok(api)) => super::loader::error_name(api, c),
            (Some(c), Err(_)) => format!("CUDA error {c}"),
            (None, _) => crate::core::cl_status::cl_error_name(code).to_string(),
        }
    }

    fn release_event(&self, e: EventH) {
        events::release(e);
    }

    fn event_status(&self, e: EventH) -> Result<i32> {
        events::status(e)
    }

    fn wait_event(&self, e: EventH) -> Result<i32> {
        events::wait(e)
    }

    /// A user event is the host's alone: commands after it are held on
    /// the host until it completes.
    fn create_user_event(&self, _ctx: ContextH) -> Result<EventH> {
        Ok(Ev::user())
    }

    fn complete_user_event(&self, e: EventH) -> Result<()> {
        events::complete(e)
    }

    fn on_end(&self, e: EventH, f: EndCallback, user: *mut c_void) -> Result<()> {
        events::on_end(e, f, user)
    }

    /// The callback thread looks at the events it is given (`callbacks`).
    fn ends_called_soon(&self) -> bool {
        true
    }

    fn timestamp(&self, e: EventH, which: Stamp) -> Result<u64> {
        events::timestamp(e, which)
    }

    fn records(&self) -> bool {
        true
    }

    /// Kernels; copies between memory CUDA knows; fills with a pattern
    /// of 1, 2 or 4 bytes of such memory.
    fn can_record(&self, n: &RecNode<'_>) -> bool {
        api().is_ok_and(|api| graph::recordable(api, n))
    }

    fn record(
        &self,
        q: QueueH,
        _flags: (bool, bool),
        deps: &[Vec<usize>],
        nodes: &[RecNode<'_>],
    ) -> Result<(RecordH, Vec<CommandH>)> {
        let s = Stream::of(q);
        let mut plans = Vec::with_capacity(nodes.len());
        for n in nodes {
            plans.push(match *n {
                RecNode::Nothing => graph::Plan::Nothing,
                RecNode::Kernel(k, range) => {
                    let kern = kern_of(k);
                    let (f, args) = kern.prepare(s.dev.ordinal)?;
                    graph::Plan::Kernel(
                        Function::clone(&f),
                        shape_of(range, &kern.name)?,
                        args.into_vec(),
                    )
                }
                RecNode::Copy { dst, src, size } => graph::Plan::Copy {
                    dst: dst as u64,
                    src: src as u64,
                    size,
                },
                RecNode::Fill { dst, pattern, size } => graph::fill_plan(dst, pattern, size),
            });
        }
        graph::record(s.dev, deps, plans)
    }

    fn enqueue_recorded(
        &self,
        r: RecordH,
        q: QueueH,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<bool> {
        command_or_hold(
            q,
            waits,
            ev,
            |api, s, _| graph::launch(api, graph::of(r), s.raw),
            || {
                let rec = graph::share(r);
                Box::new(move |api, s, _| graph::launch(api, &rec, s.raw))
            },
        )?;
        Ok(true)
    }

    fn recordings_run_anywhere(&self) -> bool {
        true
    }

    fn pin_host(&self, ptr: usize, len: usize) -> bool {
        memory::pin_host(ptr, len)
    }

    fn can_pin_host(&self) -> bool {
        super::state::any_context().is_some()
    }

    fn unpin_host(&self, ptr: usize) {
        memory::unpin_host(ptr);
    }

    fn update_recorded(&self, r: RecordH, c: CommandH, index: u32, arg: ArgSet<'_>) -> bool {
        graph::update(r, c, index, OwnedArg::of(arg, |m| mem_of(m).ptr))
    }

    fn release_recorded(&self, r: RecordH) {
        graph::release(r);
    }

    /// A stream (`CUstream`), a device's primary context (`CUcontext`), or
    /// a pointer to a device's `CUdevice` (an ordinal, which may be 0).
    fn native_object(&self, of: NativeOf) -> usize {
        static ORDINALS: [i32; 64] = {
            let mut a = [0i32; 64];
            let mut i = 0;
            while i < 64 {
                a[i] = i as i32;
                i += 1;
            }
            a
        };
        match of {
            NativeOf::Queue(q) => Stream::of(q).raw as usize,
            NativeOf::Context(c, d) => ctx_of(c).device(d.0 as i32).map_or(0, |x| x.ctx as usize),
            NativeOf::Device(d) => ORDINALS.get(d.0).map_or(0, |o| o as *const i32 as usize),
        }
    }

    fn create_context(&self, devices: &[DeviceH]) -> Result<ContextH> {
        let ordinals: Vec<i32> = devices.iter().map(|d| d.0 as i32).collect();
        let c = Ctx::create(&ordinals)?;
        Ok(ContextH(Box::into_raw(Box::new(c)) as usize))
    }

    fn release_context(&self, ctx: ContextH) {
        // SAFETY: made by Box::into_raw in `create_context`, released once.
        drop(unsafe { Box::from_raw(ctx.0 as *mut Ctx) });
    }

    fn create_queue(&self, ctx: ContextH, dev: DeviceH, timed: bool) -> Result<QueueH> {
        stream_queue(ctx, dev, timed, false)
    }

    fn create_transfer_queue(&self, ctx: ContextH, dev: DeviceH) -> Result<QueueH> {
        stream_queue(ctx, dev, false, true)
    }

    fn release_queue(&self, q: QueueH) {
        // SAFETY: the runtime's one reference, given back once.
        drop(unsafe { Arc::from_raw(q.0 as *const Stream) });
    }

    fn flush(&self, _q: QueueH) {
        // CUDA hands each command to the device as it is enqueued.
    }

    fn finish(&self, q: QueueH) -> Result<()> {
        Stream::of(q).drain()
    }

    fn enqueue_marker(&self, q: QueueH, waits: &[EventH]) -> Result<EventH> {
        let mut ev = EventH::NONE;
        command(q, waits, Some(&mut ev), |_, _, _| Ok(()))?;
        Ok(ev)
    }

    fn usm_alloc(
        &self,
        ctx: ContextH,
        _usm: UsmStrategy,
        kind: AllocKind,
        dev: Option<DeviceH>,
        size: usize,
        align: usize,
        _atomics: bool,
    ) -> Result<usize> {
        let api = api()?;
        let c = ctx_of(ctx);
        let d = match dev {
            Some(d) => c.device(d.0 as i32),
            None => c.devices.first().copied(),
        }
        .ok_or_else(|| Error::invalid("the USM allocation's device is not in the context"))?;
        memory::alloc(api, d.ctx, kind, size, align)
    }

    /// `cuMemAlloc` and `cuMemFree` cost tens to hundreds of
    /// microseconds each, and free synchronises the device.
    fn pools_device_allocations(&self) -> bool {
        true
    }

    fn usm_free(&self, ctx: ContextH, _usm: UsmStrategy, ptr: usize) {
        let Some((kind, base)) = memory::forget(ptr) else {
            return;
        };
        let Ok(api) = api() else { return };
        if let Some(d) = ctx_of(ctx).devices.first() {
            if make_current(api, d.ctx).is_err() {
                return;
            }
        }
        // SAFETY: an allocation this back end made, freed once; CUDA's
        // free waits for the device's work that may use it.
        unsafe {
            match kind {
                AllocKind::Host => (api.cuMemFreeHost)(base as *mut c_void),
                _ => (api.cuMemFree)(base as CUdeviceptr),
            }
        };
    }

    fn build_program(
        &self,
        ctx: ContextH,
        devices: &[(DeviceH, String)],
        input: ProgramInput<'_>,
        _options: &str,
    ) -> Result<ProgramH> {
        let ProgramInput::Binary(ptx) = input else {
            return Err(Error::new(
                Status::FeatureNotSupported,
                "the CUDA back end builds programs from PTX only (OpenCL C is compiled by NVIDIA's OpenCL first; SPIR-V is not taken)",
            ));
        };
        let list: Vec<(i32, String)> = devices
            .iter()
            .map(|(d, l)| (d.0 as i32, l.clone()))
            .collect();
        let p = Prog::build(ctx_of(ctx), &list, ptx)
            .map_err(|e| Error::new(Status::BuildFailure, e.message))?;
        Ok(ProgramH(Box::into_raw(Box::new(Arc::new(p))) as usize))
    }

    fn release_program(&self, p: ProgramH) {
        // SAFETY: made by Box::into_raw in `build_program`, released once.
        drop(unsafe { Box::from_raw(p.0 as *mut Arc<Prog>) });
    }

    fn program_binaries(&self, p: ProgramH) -> Result<Vec<Vec<u8>>> {
        Ok(prog_of(p).ptx.clone())
    }

    fn build_log(&self, _p: ProgramH, _d: DeviceH) -> String {
        String::new()
    }

    fn kernel_names(&self, p: ProgramH) -> Vec<String> {
        prog_of(p).kernel_names()
    }

    fn create_kernel(
        &self,
        p: ProgramH,
        name: &str,
        _usm: UsmStrategy,
    ) -> Result<(KernelH, u32, String)> {
        let k = Kern::create(prog_of(p).clone(), name)?;
        let n = k.entry.params.len() as u32;
        Ok((
            KernelH(Box::into_raw(Box::new(k)) as usize),
            n,
            name.to_string(),
        ))
    }

    fn kernel_facts(&self, k: KernelH, d: DeviceH) -> KernelFacts {
        let Ok(api) = api() else {
            return KernelFacts::default();
        };
        let kern = kern_of(k);
        let Some((_, f)) = kern.funcs.iter().find(|(o, _)| *o == d.0 as i32) else {
            return KernelFacts::default();
        };
        KernelFacts {
            work_group_size: usize::try_from(
                f.attribute(api, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            )
            .ok(),
            static_local_mem: u64::try_from(f.attribute(api, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES))
                .unwrap_or(0),
            private_mem: u64::try_from(f.attribute(api, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES))
                .unwrap_or(0),
            preferred_multiple: Some(32),
        }
    }

    fn release_kernel(&self, k: KernelH) {
        // SAFETY: made by Box::into_raw in `create_kernel`, released once.
        drop(unsafe { Box::from_raw(k.0 as *mut Kern) });
    }

    fn create_mem(&self, ctx: ContextH, size: usize) -> Result<MemH> {
        let api = api()?;
        let d = ctx_of(ctx)
            .devices
            .first()
            .copied()
            .ok_or_else(|| Error::invalid("a context without devices"))?;
        make_current(api, d.ctx)?;
        let mut p: CUdeviceptr = 0;
        // SAFETY: `p` is a valid slot; the context is current.
        let rc = unsafe { (api.cuMemAlloc)(&mut p, size.max(1)) };
        check(api, rc, "cuMemAlloc")?;
        memory::remember_other(p as usize, size, AllocKind::Device);
        Ok(new_mem(Mem {
            ptr: p,
            refs: AtomicUsize::new(1),
            owner: Some(d.ctx as usize),
            parent: None,
        }))
    }

    fn create_sub_mem(&self, m: MemH, offset: usize, _size: usize) -> Result<MemH> {
        self.retain_mem(m);
        Ok(new_mem(Mem {
            ptr: mem_of(m).ptr + offset as u64,
            refs: AtomicUsize::new(1),
            owner: None,
            parent: Some(m),
        }))
    }

    fn create_view(&self, _ctx: ContextH, ptr: usize, _size: usize) -> Option<MemH> {
        Some(new_mem(Mem {
            ptr: ptr as u64,
            refs: AtomicUsize::new(1),
            owner: None,
            parent: None,
        }))
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
        let (d, sr) = (addr(&dst), addr(&src));
        command(q, waits, ev, move |api, s, enq| {
            hostcopy::copy(api, s, d, sr, len, HostEnd::Unknown, enq)
        })?;
        if blocking {
            // After a blocking command, outside its stream's tail lock.
            Stream::of(q).drain()?;
        }
        Ok(())
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
        let rect = |r: &RectSide| Rect {
            base: addr(&r.side),
            origin: r.origin,
            row: r.row_pitch,
            slice: r.slice_pitch,
        };
        let (d, sr) = (rect(dst), rect(src));
        command(q, waits, ev, move |api, s, enq| {
            hostcopy::copy_rect(api, s, d, sr, region, enq.seq)
        })?;
        if blocking {
            // After a blocking command, outside its stream's tail lock.
            Stream::of(q).drain()?;
        }
        Ok(())
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
        let dst = mem_of(m).ptr + offset as u64;
        let pattern = pattern.to_vec();
        command(q, waits, ev, move |api, s, _| {
            fill(api, s, dst, &pattern, len)
        })
    }

    fn set_kernel_arg(
        &self,
        k: KernelH,
        _usm: UsmStrategy,
        index: u32,
        arg: ArgSet<'_>,
    ) -> Result<()> {
        kern_of(k).set(index, arg, |m| mem_of(m).ptr)
    }

    fn retain_mem(&self, m: MemH) {
        mem_of(m).refs.fetch_add(1, Ordering::AcqRel);
    }

    fn release_mem(&self, m: MemH) {
        memory::release(m);
    }

    fn enqueue_kernel(
        &self,
        q: QueueH,
        k: KernelH,
        name: &str,
        _local_args: bool,
        range: &NdRange,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        let kern = kern_of(k);
        let shape = shape_of(range, name)?;
        let (f, params) = kern.launch_as_set(Stream::of(q).dev.ordinal, &shape)?;
        kern.enqueue(q, &f, &params, shape, waits, ev)
    }

    fn launch_takes_args(&self) -> bool {
        true
    }

    fn enqueue_kernel_with(
        &self,
        q: QueueH,
        k: KernelH,
        name: &str,
        args: &[ArgSet<'_>],
        range: &NdRange,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        let kern = kern_of(k);
        let shape = shape_of(range, name)?;
        let ordinal = Stream::of(q).dev.ordinal;
        let (f, params) = kern.launch_with(ordinal, args, &shape, |m| mem_of(m).ptr)?;
        kern.enqueue(q, f, &params, shape, waits, ev)
    }

    fn enqueue_memcpy(
        &self,
        q: QueueH,
        _usm: UsmStrategy,
        dst: usize,
        src: usize,
        size: usize,
        host: HostEnd,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        command(q, waits, ev, move |api, s, enq| {
            hostcopy::copy(api, s, dst as u64, src as u64, size, host, enq)
        })
    }

    fn enqueue_fill(
        &self,
        q: QueueH,
        _usm: UsmStrategy,
        dst: usize,
        pattern: &[u8],
        size: usize,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        let pattern = pattern.to_vec();
        command(q, waits, ev, move |api, s, _| {
            fill(api, s, dst as u64, &pattern, size)
        })
    }

    fn can_migrate(&self, _usm: UsmStrategy) -> bool {
        true
    }

    fn enqueue_migrate(
        &self,
        q: QueueH,
        _usm: UsmStrategy,
        ptr: usize,
        size: usize,
        waits: &[EventH],
        ev: &mut EventH,
    ) -> Result<bool> {
        if memory::kind_at(ptr) != Some(AllocKind::Shared) {
            return Ok(false);
        }
        command(q, waits, Some(ev), move |api, s, _| {
            let to = MemLocation {
                kind: CU_MEM_LOCATION_TYPE_DEVICE,
                id: s.dev.ordinal,
            };
            // SAFETY: managed memory this back end allocated, `size`
            // bytes (the runtime's checks).
            let rc = unsafe { (api.cuMemPrefetchAsync)(ptr as u64, size, to, 0, s.raw) };
            check(api, rc, "cuMemPrefetchAsync")
        })?;
        Ok(true)
    }

    fn can_advise(&self, _usm: UsmStrategy) -> bool {
        true
    }

    /// Advice is CUDA's `CUmem_advise` (1 to 6) for shared memory; other
    /// values and memory are not taken.
    fn enqueue_advise(
        &self,
        q: QueueH,
        _usm: UsmStrategy,
        ptr: usize,
        size: usize,
        advice: u32,
        waits: &[EventH],
        ev: &mut EventH,
    ) -> Result<bool> {
        let shared = memory::kind_at(ptr) == Some(AllocKind::Shared);
        if !shared || !(1..=6).contains(&advice) {
            return Ok(false);
        }
        command(q, waits, Some(ev), move |api, s, _| {
            let at = MemLocation {
                kind: CU_MEM_LOCATION_TYPE_DEVICE,
                id: s.dev.ordinal,
            };
            // SAFETY: managed memory this back end allocated, `size`
            // bytes (the runtime's checks); advice applies at once.
            let rc = unsafe { (api.cuMemAdvise)(ptr as u64, size, advice as i32, at) };
            check(api, rc, "cuMemAdvise")
        })?;
        Ok(true)
    }
}
