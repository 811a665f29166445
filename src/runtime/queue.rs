//! Queues: submission, dependencies, and asynchronous error delivery.

use super::context::Context;
use super::event::Event;
use super::platform::Device;
use crate::core::error::{Error, Result, Status};
use crate::opencl::ffi::*;
use crate::opencl::loader::{api, check};
use parking_lot::Mutex;
use std::any::Any;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::Arc;

/// Called once per asynchronous error: the queue, the status, the message
/// and the user data given at creation.
pub type AsyncHandler =
    unsafe extern "C" fn(*const Queue, i32, *const std::ffi::c_char, *mut c_void);

struct Entry {
    event: Arc<Event>,
    /// Memory the command reads until it completes (e.g. a fill seed).
    _keep: Option<Box<dyn Any + Send>>,
}

#[derive(Default)]
struct Inflight {
    entries: VecDeque<Entry>,
    /// Length at which the next full scan happens.
    scan_at: usize,
}

pub struct Queue {
    pub ctx: Arc<Context>,
    pub device: &'static Device,
    pub cl: cl_command_queue,
    pub in_order: bool,
    pub profiling: bool,
    handler: Option<(AsyncHandler, usize)>,
    me: std::sync::Weak<Queue>,
    inflight: Mutex<Inflight>,
    errors: Mutex<Vec<Error>>,
}

// SAFETY: cl_command_queue is thread-safe per the OpenCL specification; the
// handler's user data is only passed back to the user's callback, which the
// header documents may run on any thread.
unsafe impl Send for Queue {}
// SAFETY: as above; mutable state is behind mutexes.
unsafe impl Sync for Queue {}

const SCAN_MIN: usize = 64;

impl Queue {
    pub fn create(
        ctx: Arc<Context>,
        device: &'static Device,
        in_order: bool,
        profiling: bool,
        handler: Option<(AsyncHandler, usize)>,
    ) -> Result<Arc<Queue>> {
        let api = api()?;
        ctx.require_device(device)?;
        if profiling && !device.profiling {
            return Err(Error::new(
                Status::FeatureNotSupported,
                format!("device {} does not support profiling", device.label()),
            ));
        }
        let mut props: cl_command_queue_properties = 0;
        if !in_order && device.out_of_order {
            props |= CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE;
        }
        if profiling {
            props |= CL_QUEUE_PROFILING_ENABLE;
        }
        let mut err = CL_SUCCESS;
        let cl = match api.clCreateCommandQueueWithProperties {
            Some(f) => {
                let list: [cl_queue_properties; 3] = [CL_QUEUE_PROPERTIES, props, 0];
                // SAFETY: live context and one of its devices; the property
                // list is zero-terminated.
                unsafe { f(ctx.cl, device.id, list.as_ptr(), &mut err) }
            }
            // SAFETY: as above, through the OpenCL 1.x entry point.
            None => unsafe { (api.clCreateCommandQueue)(ctx.cl, device.id, props, &mut err) },
        };
        if cl.is_null() || err != CL_SUCCESS {
            return Err(Error::opencl(err, "clCreateCommandQueueWithProperties"));
        }
        let q = Arc::new_cyclic(|me| Queue {
            ctx: ctx.clone(),
            device,
            cl,
            in_order,
            profiling,
            handler,
            me: me.clone(),
            inflight: Mutex::new(Inflight {
                entries: VecDeque::new(),
                scan_at: SCAN_MIN,
            }),
            errors: Mutex::new(Vec::new()),
        });
        let mut qs = ctx.queues.lock();
        qs.retain(|w| w.strong_count() > 0);
        qs.push(Arc::downgrade(&q));
        Ok(q)
    }

    /// A strong reference to this queue, while one exists.
    pub fn self_arc(&self) -> Option<Arc<Queue>> {
        self.me.upgrade()
    }

    /// OpenCL wait list for `deps`. Events of another context cannot be
    /// waited on by OpenCL; those are waited for on the host here.
    pub fn wait_list(&self, deps: &[Arc<Event>]) -> Result<Vec<cl_event>> {
        let mut out = Vec::with_capacity(deps.len());
        for d in deps {
            if d.ctx_id == self.ctx.id {
                out.push(d.cl);
            } else {
                d.wait()?;
            }
        }
        Ok(out)
    }

    /// Tracks a just-enqueued command and returns its event.
    pub fn record(
        &self,
        cl: cl_event,
        what: String,
        keep: Option<Box<dyn Any + Send>>,
        deps: &[Arc<Event>],
    ) -> Arc<Event> {
        let ev = Event::new(cl, self.ctx.id, what, self.profiling, deps.to_vec());
        if let Ok(api) = api() {
            // SAFETY: flushing a live queue so the command starts even if
            // nobody waits on it.
            unsafe { (api.clFlush)(self.cl) };
        }
        let mut inf = self.inflight.lock();
        inf.entries.push_back(Entry {
            event: ev.clone(),
            _keep: keep,
        });
        self.prune(&mut inf);
        ev
    }

    /// Drops completed commands from the front and, when the list has
    /// doubled since the last scan, from anywhere; collects failures.
    fn prune(&self, inf: &mut Inflight) {
        while let Some(front) = inf.entries.front() {
            match front.event.outcome() {
                Ok(Some(r)) => {
                    self.note_outcome(&front.event, r);
                    inf.entries.pop_front();
                }
                _ => break,
            }
        }
        if inf.entries.len() >= inf.scan_at {
            let mut kept = VecDeque::with_capacity(inf.entries.len());
            for e in inf.entries.drain(..) {
                match e.event.outcome() {
                    Ok(Some(r)) => self.note_outcome(&e.event, r),
                    _ => kept.push_back(e),
                }
            }
            inf.entries = kept;
            inf.scan_at = (inf.entries.len() * 2).max(SCAN_MIN);
        }
    }

    fn note_outcome(&self, ev: &Event, outcome: std::result::Result<(), Error>) {
        if let Err(e) = outcome {
            if ev.claim_report() {
                self.errors.lock().push(e);
            }
        }
    }

    /// Number of commands still tracked (for tests of bounded memory).
    pub fn inflight_len(&self) -> usize {
        self.inflight.lock().entries.len()
    }

    /// Waits for every tracked command. Waiting on the commands' own events
    /// rather than calling clFinish keeps drivers that mishandle clFinish
    /// after a failed dependency (Intel's CPU runtime) out of trouble; every
    /// command Syrah enqueues is tracked, so nothing is missed.
    fn finish(&self) -> Result<()> {
        let api = api()?;
        let entries: Vec<Entry> = {
            let mut inf = self.inflight.lock();
            inf.scan_at = SCAN_MIN;
            inf.entries.drain(..).collect()
        };
        for e in &entries {
            // SAFETY: waiting on one live event; a failed command makes this
            // return an error code, and its outcome is read just below.
            unsafe { (api.clWaitForEvents)(1, &e.event.cl) };
            loop {
                match e.event.outcome()? {
                    Some(r) => {
                        self.note_outcome(&e.event, r);
                        break;
                    }
                    None => std::thread::sleep(std::time::Duration::from_micros(50)),
                }
            }
        }
        Ok(())
    }

    /// Finishes without reporting (used before freeing memory).
    pub fn finish_quietly(&self) {
        if let Ok(api) = api() {
            let events: Vec<Arc<Event>> = self
                .inflight
                .lock()
                .entries
                .iter()
                .map(|e| e.event.clone())
                .collect();
            for ev in events {
                // SAFETY: waiting on one event kept alive by `ev`.
                unsafe { (api.clWaitForEvents)(1, &ev.cl) };
            }
        }
    }

    /// Waits for everything submitted so far and delivers each asynchronous
    /// error once: to the handler if there is one, else as the result.
    pub fn wait(self: &Arc<Self>) -> Result<()> {
        self.finish()?;
        self.deliver_errors()
    }

    /// Delivers collected errors without waiting.
    pub fn deliver_errors(self: &Arc<Self>) -> Result<()> {
        let errors = std::mem::take(&mut *self.errors.lock());
        if errors.is_empty() {
            return Ok(());
        }
        if let Some((h, ud)) = self.handler {
            for e in &errors {
                let msg = std::ffi::CString::new(e.message.replace('\0', " ")).unwrap_or_default();
                // SAFETY: the user registered `h` for this queue; the queue
                // pointer and message stay valid for the call.
                unsafe {
                    h(
                        Arc::as_ptr(self),
                        e.status.code(),
                        msg.as_ptr(),
                        ud as *mut c_void,
                    )
                };
            }
            return Ok(());
        }
        let n = errors.len();
        let mut first = errors
            .into_iter()
            .next()
            .unwrap_or_else(|| Error::new(Status::Internal, "error list emptied while delivering"));
        if n > 1 {
            first.message = format!(
                "{} (and {} more asynchronous error{})",
                first.message,
                n - 1,
                if n > 2 { "s" } else { "" }
            );
        }
        Err(first)
    }

    /// Enqueues a marker that completes when `deps` (or, on an in-order
    /// queue, everything before it) have completed.
    pub fn marker(&self, deps: &[Arc<Event>], what: &str) -> Result<Arc<Event>> {
        let api = api()?;
        let wl = self.wait_list(deps)?;
        let mut ev: cl_event = std::ptr::null_mut();
        check(
            // SAFETY: live queue; `wl` holds valid events of this context.
            unsafe {
                (api.clEnqueueMarkerWithWaitList)(
                    self.cl,
                    wl.len() as cl_uint,
                    ptr_or_null(&wl),
                    &mut ev,
                )
            },
            "clEnqueueMarkerWithWaitList",
        )?;
        Ok(self.record(ev, what.to_string(), None, deps))
    }

    /// Enqueues a barrier: later commands wait for it.
    pub fn barrier(&self, deps: &[Arc<Event>]) -> Result<Arc<Event>> {
        let api = api()?;
        let wl = self.wait_list(deps)?;
        let mut ev: cl_event = std::ptr::null_mut();
        check(
            // SAFETY: live queue; `wl` holds valid events of this context.
            unsafe {
                (api.clEnqueueBarrierWithWaitList)(
                    self.cl,
                    wl.len() as cl_uint,
                    ptr_or_null(&wl),
                    &mut ev,
                )
            },
            "clEnqueueBarrierWithWaitList",
        )?;
        Ok(self.record(ev, "barrier".into(), None, deps))
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        let Ok(api) = api() else { return };
        // Commands must end before the memory they hold alive is dropped.
        let entries: Vec<Entry> = self.inflight.get_mut().entries.drain(..).collect();
        for e in &entries {
            // SAFETY: waiting on one live event.
            unsafe { (api.clWaitForEvents)(1, &e.event.cl) };
            let mut spins = 0;
            while let Ok(None) = e.event.outcome() {
                spins += 1;
                if spins > 20_000 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            if let Ok(Some(r)) = e.event.outcome() {
                self.note_outcome(&e.event, r);
            }
        }
        drop(entries);
        // Errors nobody collected are not dropped silently: the handler gets
        // them, or, without one, standard error does.
        let errors = std::mem::take(self.errors.get_mut());
        for e in errors {
            match self.handler {
                Some((h, ud)) => {
                    let msg =
                        std::ffi::CString::new(e.message.replace('\0', " ")).unwrap_or_default();
                    // SAFETY: the queue is still valid during drop; the
                    // message outlives the call.
                    unsafe {
                        h(
                            self as *const Queue,
                            e.status.code(),
                            msg.as_ptr(),
                            ud as *mut c_void,
                        )
                    };
                }
                None => eprintln!(
                    "syrah: asynchronous error of a released queue that nobody waited for: {}: {}",
                    e.status.name(),
                    e.message
                ),
            }
        }
        // SAFETY: this Queue owns its one reference.
        unsafe { (api.clReleaseCommandQueue)(self.cl) };
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
