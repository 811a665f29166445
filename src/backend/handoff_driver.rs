//! A back end wrapped so that its commands are enqueued on a thread of
//! Syrah's own (see `handoff.rs`): launches, markers, fills, copies
//! between device memory, argument settings, flushes and releases go to
//! the thread in order, each command's event handed out at once. Calls
//! that answer wait for the thread as far as they must; copies through
//! host memory and the rarer commands go from the caller once it has
//! caught up. A command the thread cannot enqueue fails its event; one
//! without an event fails the queue's next wait and next event; an
//! argument it cannot set fails the kernel's launches until set again.
use super::handoff::{
    off_line, reals, relayed, wanted, Launch, Line, Proxy, Relay, Small, NOT_ENQUEUED,
};
use super::{
    ArgSet, CommandH, ContextH, DeviceH, Driver, EndCallback, EventH, HostEnd, KernelFacts,
    KernelH, MemH, NativeOf, ProgramH, ProgramInput, QueueH, RecNode, RecordH, RectSide, Side,
    Stamp,
};
use crate::core::aspects::UsmStrategy;
use crate::core::error::{Error, Result, Status};
use crate::core::launch::NdRange;
use crate::core::registry::AllocKind;
use parking_lot::RwLock;
use smallvec::SmallVec;
use std::collections::HashSet;
use std::ffi::c_void;

/// A back end whose enqueues go through a submission thread.
pub struct Handoff {
    inner: &'static dyn Driver,
    line: &'static Line,
    /// The queues made through this back end: the lanes whose commands
    /// go to the thread.
    queues: RwLock<HashSet<usize>>,
}

/// `inner`, wrapped when `SYRAH_SUBMIT=thread` asks for it (and its
/// thread starts).
pub fn wrap(inner: &'static dyn Driver) -> &'static dyn Driver {
    if !wanted() {
        return inner;
    }
    threaded(inner).unwrap_or(inner)
}

/// `inner` wrapped, whatever the environment says; None where the
/// thread cannot be started.
pub fn threaded(inner: &'static dyn Driver) -> Option<&'static dyn Driver> {
    let line = Line::start(inner)?;
    Some(Box::leak(Box::new(Handoff {
        inner,
        line,
        queues: RwLock::new(HashSet::new()),
    })))
}

impl Handoff {
    fn known(&self, q: QueueH) -> bool {
        self.queues.read().contains(&q.0)
    }

    /// The driver's event behind `e`, once the thread has enqueued it.
    fn resolve(&self, e: EventH) -> Result<EventH> {
        let p = Proxy::of(e);
        self.line.reach(p.seq);
        match (p.real(), p.failure.get()) {
            (Some(r), _) => Ok(r),
            (None, Some(f)) => Err(f.clone()),
            (None, None) => Err(Error::new(
                Status::Internal,
                "an event of the submission thread has no driver event",
            )),
        }
    }

    /// Queues a command on lane `q` after `waits`: `call` enqueues it with
    /// the driver's events; its event, when asked for, goes to `ev` now.
    fn defer<F>(&self, q: QueueH, waits: &[EventH], ev: Option<&mut EventH>, call: F)
    where
        F: FnOnce(&'static dyn Driver, &[EventH], Option<&mut EventH>) -> Result<()>
            + Send
            + 'static,
    {
        let waits: SmallVec<[EventH; 8]> = waits.into();
        let want = ev.is_some();
        let line = self.line;
        let handle = line.push_command(want, |h| {
            Box::new(move |inner| {
                let mut real = EventH::NONE;
                let done = reals(&waits).and_then(|w| {
                    let slot = if want { Some(&mut real) } else { None };
                    call(inner, &w, slot)
                });
                line.settle(q, h, done, real);
            })
        });
        if let Some(slot) = ev {
            *slot = handle;
        }
    }

    /// Runs `call` on this thread once the thread has caught up, with the
    /// driver's events for `waits`; the event it makes, when asked for,
    /// goes to `ev` as one of this back end's.
    fn direct<T>(
        &self,
        waits: &[EventH],
        ev: Option<&mut EventH>,
        call: impl FnOnce(&[EventH], Option<&mut EventH>) -> Result<T>,
    ) -> Result<T> {
        self.line.drain();
        let w = reals(waits)?;
        let Some(slot) = ev else {
            return call(&w, None);
        };
        let mut real = EventH::NONE;
        let r = call(&w, Some(&mut real))?;
        *slot = if real.is_none() {
            real
        } else {
            Proxy::handle(0, real)
        };
        Ok(r)
    }

    /// A fill of `pattern` on `q`: `call` enqueues it, on the thread
    /// where `q` is a lane of this back end.
    fn fill<F>(
        &self,
        q: QueueH,
        pattern: &[u8],
        waits: &[EventH],
        ev: Option<&mut EventH>,
        call: F,
    ) -> Result<()>
    where
        F: FnOnce(&'static dyn Driver, &[u8], &[EventH], Option<&mut EventH>) -> Result<()>
            + Send
            + 'static,
    {
        if self.known(q) {
            let owned: SmallVec<[u8; 16]> = pattern.into();
            self.defer(q, waits, ev, move |inner, w, e| call(inner, &owned, w, e));
            return Ok(());
        }
        let inner = self.inner;
        self.direct(waits, ev, |w, e| call(inner, pattern, w, e))
    }

    /// Queues a call that answers nothing.
    fn later(&self, f: impl FnOnce(&'static dyn Driver) + Send + 'static) {
        self.line.push(Box::new(f));
    }
}

impl Driver for Handoff {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn preferred(&self) -> bool {
        self.inner.preferred()
    }
    fn failure_name(&self, code: i32) -> String {
        if code == NOT_ENQUEUED {
            return "the command could not be enqueued".into();
        }
        self.inner.failure_name(code)
    }
    fn failure_detail(&self, e: EventH) -> Option<String> {
        let p = Proxy::of(e);
        if let Some(f) = p.failure.get() {
            return Some(f.message.clone());
        }
        p.real().and_then(|r| self.inner.failure_detail(r))
    }

    fn release_event(&self, e: EventH) {
        if e.is_none() {
            return;
        }
        self.later(move |inner| {
            if let Some(r) = Proxy::of(e).real() {
                inner.release_event(r);
            }
            Proxy::free(e);
        });
    }

    fn event_status(&self, e: EventH) -> Result<i32> {
        let p = Proxy::of(e);
        let failed = p.failure.get().is_some();
        match p.real() {
            // One that reports an earlier failure ends when its command
            // does.
            Some(r) if failed => Ok(match self.inner.event_status(r)? {
                s if s > super::COMPLETE => s,
                _ => NOT_ENQUEUED,
            }),
            Some(r) => self.inner.event_status(r),
            None if failed => Ok(NOT_ENQUEUED),
            // Not yet given to the driver.
            None => Ok(super::QUEUED),
        }
    }

    fn wait_event(&self, e: EventH) -> Result<i32> {
        let p = Proxy::of(e);
        self.line.reach(p.seq);
        let rc = match p.real() {
            Some(r) => self.inner.wait_event(r)?,
            None => 0,
        };
        // As OpenCL reports a failure among the events waited for.
        Ok(if p.failure.get().is_some() { -14 } else { rc })
    }

    fn create_user_event(&self, ctx: ContextH) -> Result<EventH> {
        Ok(Proxy::handle(0, self.inner.create_user_event(ctx)?))
    }

    fn complete_user_event(&self, e: EventH) -> Result<()> {
        self.inner.complete_user_event(self.resolve(e)?)
    }

    fn on_end(&self, e: EventH, f: EndCallback, user: *mut c_void) -> Result<()> {
        // Called when the driver's command ends (a failure it reports is
        // read from its status then), at once where it never got one.
        if let Some(r) = Proxy::of(e).real() {
            return self.inner.on_end(r, f, user);
        }
        let user = user as usize;
        self.later(move |inner| {
            let call = move |status: i32| {
                off_line(move || {
                    // SAFETY: the runtime registered `f` with `user` for
                    // `e`, to be called once it has ended; it has.
                    unsafe { f(e.0 as *mut c_void, status, user as *mut c_void) }
                })
            };
            let Some(r) = Proxy::of(e).real() else {
                return call(NOT_ENQUEUED);
            };
            let relay = Box::into_raw(Box::new(Relay { f, user, e }));
            if inner.on_end(r, relayed, relay.cast()).is_err() {
                // SAFETY: not registered, so still this job's alone.
                drop(unsafe { Box::from_raw(relay) });
                call(NOT_ENQUEUED);
            }
        });
        Ok(())
    }

    fn ends_called_soon(&self) -> bool {
        self.inner.ends_called_soon()
    }

    fn timestamp(&self, e: EventH, which: Stamp) -> Result<u64> {
        self.inner.timestamp(self.resolve(e)?, which)
    }

    fn native_object(&self, of: NativeOf) -> usize {
        self.line.drain();
        self.inner.native_object(of)
    }

    fn records(&self) -> bool {
        self.inner.records()
    }
    fn can_record(&self, n: &RecNode<'_>) -> bool {
        self.inner.can_record(n)
    }
    fn record(
        &self,
        q: QueueH,
        flags: (bool, bool),
        deps: &[Vec<usize>],
        nodes: &[RecNode<'_>],
    ) -> Result<(RecordH, Vec<CommandH>)> {
        self.line.drain();
        self.inner.record(q, flags, deps, nodes)
    }
    fn pin_host(&self, ptr: usize, len: usize) -> bool {
        self.inner.pin_host(ptr, len)
    }
    fn can_pin_host(&self) -> bool {
        self.inner.can_pin_host()
    }
    fn unpin_host(&self, ptr: usize) {
        self.line.drain();
        self.inner.unpin_host(ptr)
    }
    fn recordings_run_anywhere(&self) -> bool {
        self.inner.recordings_run_anywhere()
    }
    fn enqueue_recorded(
        &self,
        r: RecordH,
        q: QueueH,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<bool> {
        let inner = self.inner;
        self.direct(waits, ev, |w, e| inner.enqueue_recorded(r, q, w, e))
    }
    fn update_recorded(&self, r: RecordH, c: CommandH, index: u32, arg: ArgSet<'_>) -> bool {
        self.line.drain();
        self.inner.update_recorded(r, c, index, arg)
    }
    fn release_recorded(&self, r: RecordH) {
        self.later(move |inner| inner.release_recorded(r));
    }

    fn create_context(&self, devices: &[DeviceH]) -> Result<ContextH> {
        self.inner.create_context(devices)
    }
    fn release_context(&self, ctx: ContextH) {
        self.later(move |inner| inner.release_context(ctx));
    }
    fn create_queue(&self, ctx: ContextH, dev: DeviceH, timed: bool) -> Result<QueueH> {
        let q = self.inner.create_queue(ctx, dev, timed)?;
        self.queues.write().insert(q.0);
        Ok(q)
    }
    fn create_transfer_queue(&self, ctx: ContextH, dev: DeviceH) -> Result<QueueH> {
        let q = self.inner.create_transfer_queue(ctx, dev)?;
        self.queues.write().insert(q.0);
        Ok(q)
    }
    fn release_queue(&self, q: QueueH) {
        self.queues.write().remove(&q.0);
        let line = self.line;
        self.later(move |inner| {
            line.take_lost(q.0);
            inner.release_queue(q);
        });
    }
    fn flush(&self, q: QueueH) {
        if self.known(q) {
            self.later(move |inner| inner.flush(q));
        } else {
            self.inner.flush(q);
        }
    }
    fn finish(&self, q: QueueH) -> Result<()> {
        self.line.drain();
        self.inner.finish(q)?;
        match self.line.lost_on(q.0) {
            Some(e) => Err(Line::before(&e)),
            None => Ok(()),
        }
    }
    fn enqueue_marker(&self, q: QueueH, waits: &[EventH]) -> Result<EventH> {
        let mut ev = EventH::NONE;
        if self.known(q) {
            self.defer(q, waits, Some(&mut ev), move |inner, w, e| {
                let m = inner.enqueue_marker(q, w)?;
                if let Some(slot) = e {
                    *slot = m;
                }
                Ok(())
            });
            return Ok(ev);
        }
        let inner = self.inner;
        self.direct(waits, Some(&mut ev), |w, e| {
            let m = inner.enqueue_marker(q, w)?;
            if let Some(slot) = e {
                *slot = m;
            }
            Ok(())
        })?;
        Ok(ev)
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
        self.inner
            .usm_alloc(ctx, usm, kind, dev, size, align, atomics)
    }
    fn pools_device_allocations(&self) -> bool {
        self.inner.pools_device_allocations()
    }
    fn usm_free(&self, ctx: ContextH, usm: UsmStrategy, ptr: usize) {
        self.line.drain();
        self.inner.usm_free(ctx, usm, ptr)
    }

    fn build_program(
        &self,
        ctx: ContextH,
        devices: &[(DeviceH, String)],
        input: ProgramInput<'_>,
        options: &str,
    ) -> Result<ProgramH> {
        self.inner.build_program(ctx, devices, input, options)
    }
    fn release_program(&self, p: ProgramH) {
        self.later(move |inner| inner.release_program(p));
    }
    fn program_binaries(&self, p: ProgramH) -> Result<Vec<Vec<u8>>> {
        self.inner.program_binaries(p)
    }
    fn build_log(&self, p: ProgramH, d: DeviceH) -> String {
        self.inner.build_log(p, d)
    }
    fn kernel_names(&self, p: ProgramH) -> Vec<String> {
        self.inner.kernel_names(p)
    }
    fn create_kernel(
        &self,
        p: ProgramH,
        name: &str,
        usm: UsmStrategy,
    ) -> Result<(KernelH, u32, String)> {
        self.inner.create_kernel(p, name, usm)
    }
    fn kernel_facts(&self, k: KernelH, d: DeviceH) -> KernelFacts {
        self.inner.kernel_facts(k, d)
    }
    fn kernel_offsets(&self, p: ProgramH, name: &str) -> Vec<Option<u32>> {
        self.inner.kernel_offsets(p, name)
    }
    fn release_kernel(&self, k: KernelH) {
        let line = self.line;
        line.forget_kernel(k);
        self.later(move |inner| {
            line.poisoned.lock().retain(|(kk, _), _| *kk != k.0);
            inner.release_kernel(k);
        });
    }

    fn create_mem(&self, ctx: ContextH, size: usize) -> Result<MemH> {
        self.inner.create_mem(ctx, size)
    }
    fn create_sub_mem(&self, m: MemH, offset: usize, size: usize) -> Result<MemH> {
        self.inner.create_sub_mem(m, offset, size)
    }
    fn create_view(&self, ctx: ContextH, ptr: usize, size: usize) -> Option<MemH> {
        self.inner.create_view(ctx, ptr, size)
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
        let through_host = dst.mem.is_none() || src.mem.is_none();
        if self.known(q) && !blocking && !through_host {
            self.defer(q, waits, ev, move |inner, w, e| {
                inner.enqueue_copy(q, dst, src, len, false, w, e)
            });
            return Ok(());
        }
        if !self.known(q) && waits.is_empty() {
            // A queue of Syrah's own helpers (their events are theirs).
            return self
                .inner
                .enqueue_copy(q, dst, src, len, blocking, waits, ev);
        }
        let inner = self.inner;
        self.direct(waits, ev, |w, e| {
            inner.enqueue_copy(q, dst, src, len, blocking, w, e)
        })
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
        let through_host = dst.side.mem.is_none() || src.side.mem.is_none();
        if self.known(q) && !blocking && !through_host {
            let (d, s) = (*dst, *src);
            self.defer(q, waits, ev, move |inner, w, e| {
                inner.enqueue_copy_rect(q, &d, &s, region, false, w, e)
            });
            return Ok(());
        }
        let inner = self.inner;
        self.direct(waits, ev, |w, e| {
            inner.enqueue_copy_rect(q, dst, src, region, blocking, w, e)
        })
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
        self.fill(q, pattern, waits, ev, move |inner, p, w, e| {
            inner.enqueue_fill_mem(q, m, offset, p, len, w, e)
        })
    }

    fn set_kernel_arg(
        &self,
        k: KernelH,
        usm: UsmStrategy,
        index: u32,
        arg: ArgSet<'_>,
    ) -> Result<()> {
        self.line.set_arg(self.inner, k, usm, index, arg)
    }

    fn retain_mem(&self, m: MemH) {
        // On the thread, before any release asked for later: the driver
        // is left to it alone while it enqueues.
        self.line.push_small(Small::Retain(m));
    }
    fn release_mem(&self, m: MemH) {
        self.line.push_small(Small::Release(m));
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
        if !self.known(q) {
            let inner = self.inner;
            return self.direct(waits, ev, |w, e| {
                inner.enqueue_kernel(q, k, name, local_args, range, w, e)
            });
        }
        let name = self.line.name_of(k, name);
        let handle = self.line.push_launch(ev.is_some(), |h| Launch {
            q,
            k,
            name,
            local_args,
            range: *range,
            waits: waits.into(),
            ev: h,
        });
        if let Some(slot) = ev {
            *slot = handle;
        }
        Ok(())
    }

    fn launch_takes_args(&self) -> bool {
        self.inner.launch_takes_args()
    }
    fn hands_off(&self) -> bool {
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
        let inner = self.inner;
        self.direct(waits, ev, |w, e| {
            inner.enqueue_kernel_with(q, k, name, args, range, w, e)
        })
    }

    fn enqueue_memcpy(
        &self,
        q: QueueH,
        usm: UsmStrategy,
        dst: usize,
        src: usize,
        size: usize,
        host: HostEnd,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        if !self.known(q) && waits.is_empty() {
            // A queue of Syrah's own helpers (their events are theirs).
            return self
                .inner
                .enqueue_memcpy(q, usm, dst, src, size, host, waits, ev);
        }
        if host == HostEnd::Device && self.known(q) {
            self.defer(q, waits, ev, move |inner, w, e| {
                inner.enqueue_memcpy(q, usm, dst, src, size, host, w, e)
            });
            return Ok(());
        }
        // Either side may be host memory its caller reuses once the
        // driver has read it: given to the driver now.
        let inner = self.inner;
        self.direct(waits, ev, |w, e| {
            inner.enqueue_memcpy(q, usm, dst, src, size, host, w, e)
        })
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
        self.fill(q, pattern, waits, ev, move |inner, p, w, e| {
            inner.enqueue_fill(q, usm, dst, p, size, w, e)
        })
    }

    fn can_migrate(&self, usm: UsmStrategy) -> bool {
        self.inner.can_migrate(usm)
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
        let inner = self.inner;
        self.direct(waits, Some(ev), |w, e| {
            let mut none = EventH::NONE;
            inner.enqueue_migrate(q, usm, ptr, size, w, e.unwrap_or(&mut none))
        })
    }

    fn can_advise(&self, usm: UsmStrategy) -> bool {
        self.inner.can_advise(usm)
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
        let inner = self.inner;
        self.direct(waits, Some(ev), |w, e| {
            let mut none = EventH::NONE;
            inner.enqueue_advise(q, usm, ptr, size, advice, w, e.unwrap_or(&mut none))
        })
    }
}
