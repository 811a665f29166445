//! A finalized graph's command-buffers: its kernel nodes recorded once
//! into a `cl_khr_command_buffer` with their dependencies as sync points,
//! and a few copies of it, so that a replay need not wait for the previous
//! enqueue of one copy to finish (some drivers refuse to enqueue a
//! command-buffer still pending; with those, a replay finding every copy
//! pending enqueues the nodes one by one instead). An argument update is
//! applied in place to the copies not pending where the device has
//! mutable dispatch; other copies become stale, and once none is current
//! the next replay enqueues the nodes one by one, the one after records a
//! copy again.

use crate::core::error::{Error, Result};
use crate::core::graph::resolve_empty;
use crate::opencl::cmdbuf::*;
use crate::opencl::ffi::*;
use crate::opencl::loader::check;
use crate::runtime::event::Event;
use crate::runtime::launch::Arg;
use std::sync::Arc;

/// Copies recorded at most.
const COPIES: usize = 8;

/// One recorded command-buffer.
struct Copy {
    cb: cl_command_buffer_khr,
    /// The end event of its last enqueue.
    end: Option<Arc<Event>>,
    /// Node `i`'s mutable-command handle (null where none); empty when
    /// the command-buffer is not mutable.
    handles: Vec<cl_mutable_command_khr>,
}

impl Copy {
    /// Whether its last enqueue is known to have ended (asking the event
    /// when `ask`).
    fn free(&self, ask: bool) -> bool {
        self.end
            .as_ref()
            .is_none_or(|e| e.known_done() || (ask && e.is_done()))
    }
}

/// A command-buffer and its nodes' mutable-command handles.
pub(crate) type Recorded = (cl_command_buffer_khr, Vec<cl_mutable_command_khr>);

/// The recorded copies.
#[derive(Default)]
pub(crate) struct Pool {
    copies: Vec<Copy>,
    fns: Option<&'static CommandBuffers>,
    /// Copies recorded before the last argument update.
    stale: Vec<cl_command_buffer_khr>,
    next: usize,
    last: Option<usize>,
    /// The driver refuses to enqueue a command-buffer still pending.
    no_reuse: bool,
    /// An argument update left no copy current: the next submission
    /// replays the nodes instead of recording a copy (an application that
    /// updates before every submission never pays for recordings); the
    /// one after it records.
    replay_next: bool,
    /// Copies recorded so far, and updates applied in place.
    pub recorded: u64,
    pub updated: u64,
}

impl Pool {
    /// Marks every copy as recorded with old arguments.
    pub(crate) fn stale(&mut self) {
        for c in self.copies.drain(..) {
            self.stale.push(c.cb);
        }
    }

    /// Sets argument `index` of node `node` to `arg` in every copy that
    /// can take the update in place (mutable, not pending); the others
    /// become stale. Submissions already made keep the old value.
    pub(crate) fn update(&mut self, node: usize, index: usize, arg: &Arg<'_>) {
        let update = self.fns.and_then(|f| f.clUpdateMutableCommandsKHR);
        let mut kept = Vec::with_capacity(self.copies.len());
        for c in self.copies.drain(..) {
            let handle = c.handles.get(node).copied().unwrap_or(std::ptr::null_mut());
            let done = match update {
                Some(f) if !handle.is_null() && c.free(true) => {
                    // SAFETY: a finalized mutable command-buffer of this
                    // pool, not pending, and the handle of one of its
                    // kernel commands.
                    let rc = unsafe { update_arg(f, c.cb, handle, index, arg) };
                    rc == CL_SUCCESS
                }
                _ => false,
            };
            if done {
                self.updated += 1;
                kept.push(c);
            } else {
                self.stale.push(c.cb);
            }
        }
        self.replay_next = kept.is_empty();
        self.copies = kept;
    }

    /// Releases every copy (OpenCL keeps a pending one until it ends).
    pub(crate) fn release(&mut self) {
        self.stale();
        if let Some(f) = self.fns {
            for cb in self.stale.drain(..) {
                // SAFETY: a command-buffer this pool created and owns.
                unsafe { (f.clReleaseCommandBufferKHR)(cb) };
            }
        }
    }

    /// A copy to enqueue now: one whose last enqueue has finished, a new
    /// one while fewer than `COPIES` exist, else the oldest pending one
    /// (returned with `true`), which only drivers that allow enqueueing a
    /// pending command-buffer take. `None` once the driver refused that,
    /// and right after an update left no copy current: the caller then
    /// replays the nodes one by one.
    pub(crate) fn take(
        &mut self,
        fns: &'static CommandBuffers,
        simultaneous: bool,
        record: impl Fn() -> Result<Recorded>,
    ) -> Result<Option<(usize, bool)>> {
        self.fns = Some(fns);
        for cb in self.stale.drain(..) {
            // SAFETY: an owned command-buffer no longer used; OpenCL keeps
            // it until a pending enqueue ends.
            unsafe { (fns.clReleaseCommandBufferKHR)(cb) };
        }
        let n = self.copies.len();
        if n == 0 && std::mem::take(&mut self.replay_next) {
            return Ok(None);
        }
        if simultaneous && n > 0 {
            // Made for simultaneous use: one copy serves every replay.
            return Ok(Some((0, false)));
        }
        let oldest = self.next % n.max(1);
        if let Some(i) = (0..n).find(|&i| self.copies[i].free(i == oldest)) {
            return Ok(Some((i, false)));
        }
        if n < COPIES {
            let (cb, handles) = record()?;
            self.recorded += 1;
            self.copies.push(Copy {
                cb,
                end: None,
                handles,
            });
            return Ok(Some((n, false)));
        }
        if self.no_reuse {
            return Ok(None);
        }
        Ok(Some((oldest, true)))
    }

    /// The driver refused to enqueue a pending command-buffer.
    pub(crate) fn refused_pending(&mut self) {
        self.no_reuse = true;
    }

    pub(crate) fn get(&self, i: usize) -> cl_command_buffer_khr {
        self.copies[i].cb
    }

    /// Notes that copy `i` was just enqueued.
    pub(crate) fn set_last(&mut self, i: usize) {
        self.last = Some(i);
        self.next = i + 1;
    }

    /// Gives the copy enqueued last the end event of that enqueue.
    pub(crate) fn ran_last(&mut self, end: Arc<Event>) {
        if let Some(c) = self.last.take().and_then(|i| self.copies.get_mut(i)) {
            c.end = Some(end);
        }
    }
}

/// Records `kernels` (node `i` enqueues `kernels[i]` over `ranges[i]`, or
/// nothing when `None`) with dependencies `deps` into a new
/// command-buffer on `queue`, and finalizes it. `mutable`: with argument
/// updates allowed, returning each kernel command's handle.
pub(crate) fn record(
    fns: &CommandBuffers,
    (simultaneous, mutable): (bool, bool),
    queue: cl_command_queue,
    nodes: &[crate::core::graph::PlanNode],
    launches: &[Option<(cl_kernel, &crate::core::launch::NdRange)>],
) -> Result<Recorded> {
    let deps = resolve_empty(nodes).map_err(Error::invalid)?;
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
                *kernel,
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
    Ok((cb, handles))
}

/// Sets argument `index` of the kernel command `handle` of `cb` to `arg`
/// for the command-buffer's later enqueues.
///
/// # Safety
/// `cb` is a finalized mutable command-buffer not pending and `handle`
/// one of its kernel commands.
unsafe fn update_arg(
    f: UpdateFn,
    cb: cl_command_buffer_khr,
    handle: cl_mutable_command_khr,
    index: usize,
    arg: &Arg<'_>,
) -> cl_int {
    let mem;
    let (value, size, svm) = match *arg {
        Arg::Scalar(b) => (b.as_ptr().cast(), b.len(), false),
        Arg::Local(n) => (std::ptr::null(), n, false),
        Arg::Usm(p) => (p, 0, true),
        Arg::Mem(m) => {
            mem = m.0 as cl_mem;
            (
                (&mem as *const cl_mem).cast(),
                std::mem::size_of::<cl_mem>(),
                false,
            )
        }
    };
    let one = cl_mutable_dispatch_arg_khr {
        arg_index: index as cl_uint,
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
