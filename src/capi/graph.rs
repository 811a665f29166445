//! Command graphs: recording from a queue, finalizing, submitting, and
//! updating kernel arguments between submissions; and the recording of
//! each kind of command, which the other C API files call when their
//! queue is recording.

use super::types::*;
use super::{borrow, clone_arc, clone_arc_with, guard, into_handle, out, release, retain, slice};
use crate::core::error::{Error, Result, Status};
use crate::core::launch::NdRange;
use crate::runtime::buffer::AccessReq;
use crate::runtime::event::Event;
use crate::runtime::graph::{
    recording_of, Action, Backend, ExecGraph, Graph, NodeAccess, NodeArg, Recording,
};
use crate::runtime::platform::Device;
use crate::runtime::program::Kernel;
use crate::runtime::queue::Queue;
use std::sync::Arc;

/// How a finalized graph is replayed (`syrah_graph_exec_get_backend`,
/// `syrah_device_get_graph_backend`).
pub type syrah_graph_backend = u32;
/// The graph's kernels are recorded once into an OpenCL command-buffer
/// (`cl_khr_command_buffer`), enqueued as one command per submission.
pub const SYRAH_GRAPH_BACKEND_COMMAND_BUFFER: syrah_graph_backend = 1;
/// The graph's commands are enqueued one by one with their dependencies
/// worked out once, when the graph was finalized.
pub const SYRAH_GRAPH_BACKEND_REPLAY: syrah_graph_backend = 2;

/// The events a recorded command depends on: events of earlier recorded
/// commands (others are refused when the node is added).
pub(crate) unsafe fn recorded_deps(
    list: *const *const Event,
    count: usize,
) -> Result<Vec<Arc<Event>>> {
    // SAFETY: forwarded contract.
    let raw = unsafe { slice(list, count, "dependencies") }?;
    raw.iter()
        .enumerate()
        // SAFETY: each entry is an event handle per the contract.
        .map(|(i, &p)| unsafe { clone_arc_with(p, || format!("dependencies[{i}]")) })
        .collect()
}

/// Records `action` into `rec` after `dependencies`; hands out the event
/// that names the node to later recorded commands.
pub(crate) unsafe fn record(
    rec: &Recording,
    action: Action,
    accesses: Vec<NodeAccess>,
    dependencies: *const *const Event,
    dependency_count: usize,
    what: String,
    out_event: *mut *mut Event,
) -> Result<()> {
    // SAFETY: forwarded contract.
    let deps = unsafe { recorded_deps(dependencies, dependency_count) }?;
    let ev = rec.add(action, accesses, &deps, Arc::from(what))?;
    if !out_event.is_null() {
        // SAFETY: writable per the contract.
        unsafe { *out_event = into_handle(ev) };
    }
    Ok(())
}

/// A recorded node's accesses.
pub(crate) fn accesses_of(reqs: &[AccessReq<'_>]) -> Vec<NodeAccess> {
    reqs.iter()
        .map(|r| NodeAccess::of(r.buffer, r.mode, r.offset, r.range))
        .collect()
}

/// Kernel arguments as a recorded node keeps them (values copied).
pub(crate) unsafe fn node_args(
    args: *const syrah_kernel_arg,
    count: usize,
    accessors: usize,
) -> Result<Vec<NodeArg>> {
    // SAFETY: forwarded contract.
    let raw = unsafe { slice(args, count, "args") }?;
    raw.iter()
        .enumerate()
        // SAFETY: forwarded contract.
        .map(|(i, a)| unsafe { node_arg(a, accessors) }.map_err(|e| at(e, &format!("args[{i}]"))))
        .collect()
}

fn at(mut e: Error, name: &str) -> Error {
    e.message = format!("{name} {}", e.message);
    e
}

unsafe fn node_arg(a: &syrah_kernel_arg, accessors: usize) -> Result<NodeArg> {
    match a.kind {
        SYRAH_ARG_VALUE if a.value.is_null() => Err(Error::new(
            Status::NullArgument,
            "is a value argument with a NULL value",
        )),
        SYRAH_ARG_VALUE if a.size == 0 => Err(Error::new(
            Status::KernelArguments,
            "is a value argument of size 0",
        )),
        // SAFETY: `size` readable bytes at `value` per the contract.
        SYRAH_ARG_VALUE => Ok(NodeArg::Scalar(
            unsafe { std::slice::from_raw_parts(a.value.cast::<u8>(), a.size) }.to_vec(),
        )),
        SYRAH_ARG_USM => Ok(NodeArg::Usm(a.value as usize)),
        SYRAH_ARG_LOCAL if a.size == 0 => Err(Error::new(
            Status::KernelArguments,
            "asks for 0 bytes of local memory",
        )),
        SYRAH_ARG_LOCAL => Ok(NodeArg::Local(a.size)),
        SYRAH_ARG_ACCESSOR if a.size < accessors => Ok(NodeArg::Accessor(a.size)),
        SYRAH_ARG_ACCESSOR => Err(Error::new(
            Status::KernelArguments,
            format!(
                "names accessor {} but the command group has {accessors}",
                a.size
            ),
        )),
        other => Err(Error::new(
            Status::KernelArguments,
            format!("has the unknown kind {other}"),
        )),
    }
}

/// Records a kernel launch (checked as a launch is, before anything is
/// recorded).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn record_kernel(
    rec: &Recording,
    q: &Queue,
    kernel: &Kernel,
    nd: NdRange,
    reqs: &[AccessReq<'_>],
    args: *const syrah_kernel_arg,
    arg_count: usize,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> Result<()> {
    q.precheck(kernel, &nd, arg_count)?;
    // SAFETY: forwarded contract.
    let list = unsafe { node_args(args, arg_count, reqs.len()) }?;
    let what = kernel.what.to_string();
    // SAFETY: forwarded contract.
    let k = unsafe { clone_arc(kernel, "kernel") }?;
    let action = Action::Kernel {
        kernel: k,
        range: nd,
        args: parking_lot::Mutex::new(list),
    };
    // SAFETY: forwarded contract.
    unsafe {
        record(
            rec,
            action,
            accesses_of(reqs),
            dependencies,
            dependency_count,
            what,
            out_event,
        )
    }
}

/// Starts recording a graph from `queue`: until
/// `syrah_queue_end_recording`, kernels, host tasks, USM copies, fills,
/// prefetches and advice, and barriers submitted to it become the graph's
/// nodes instead of running, and their events (which cannot be waited for)
/// name them to later recorded commands as dependencies. Nodes depend on
/// each other as the commands would: in submission order on an in-order
/// queue, else through their dependencies, conflicting accessors and
/// barriers. Waiting for the queue, explicit accessor copies and fills,
/// and host accessors of a buffer a node uses fail while it records.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_begin_recording(queue: *const Queue) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let q = unsafe { clone_arc(queue, "queue") }?;
        Recording::begin(q).map(|_| ())
    })
}

/// Ends the recording of `queue` and gives the recorded graph (owned by
/// the caller, released with `syrah_graph_release`). Later submissions to
/// the queue run as usual.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_end_recording(
    queue: *const Queue,
    out_graph: *mut *mut Graph,
) -> syrah_status {
    guard(|| {
        super::need(out_graph, "out_graph")?;
        // SAFETY: forwarded contract.
        let q = unsafe { borrow(queue, "queue") }?;
        let g = Recording::end(q)?;
        // SAFETY: checked non-null.
        unsafe { out(out_graph, into_handle(Arc::new(g)), "out_graph") }
    })
}

/// Whether `queue` is recording a graph.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_is_recording(
    queue: *const Queue,
    out_recording: *mut bool,
) -> syrah_status {
    guard(|| {
        super::need(out_recording, "out_recording")?;
        // SAFETY: forwarded contract.
        let q = unsafe { borrow(queue, "queue") }?;
        // SAFETY: checked non-null.
        unsafe { out(out_recording, recording_of(q).is_some(), "out_recording") }
    })
}

/// The number of nodes of a recorded graph; nodes are numbered from 0 in
/// the order they were recorded (`syrah_graph_exec_set_arg` names them so).
#[no_mangle]
pub unsafe extern "C" fn syrah_graph_get_node_count(
    graph: *const Graph,
    out_count: *mut usize,
) -> syrah_status {
    guard(|| {
        super::need(out_count, "out_count")?;
        // SAFETY: forwarded contract.
        let g = unsafe { borrow(graph, "graph") }?;
        // SAFETY: checked non-null.
        unsafe { out(out_count, g.nodes.len(), "out_count") }
    })
}

/// Adds a reference to a recorded graph.
#[no_mangle]
pub unsafe extern "C" fn syrah_graph_retain(graph: *const Graph) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { retain(graph, "graph") })
}

/// Drops a reference to a recorded graph. Its host tasks' `release`
/// callbacks run when the graph and every executable graph made from it
/// are gone.
#[no_mangle]
pub unsafe extern "C" fn syrah_graph_release(graph: *const Graph) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { release(graph, "graph") })
}

/// Makes an executable graph from `graph`: plans its replay once (lanes,
/// waits, events), gives each kernel node its own kernel object with its
/// arguments set, and on a device with `cl_khr_command_buffer` records a
/// graph of kernels into command-buffers. The result is owned by the
/// caller (`syrah_graph_exec_release`) and may be submitted any number of
/// times.
#[no_mangle]
pub unsafe extern "C" fn syrah_graph_finalize(
    graph: *const Graph,
    out_exec: *mut *mut ExecGraph,
) -> syrah_status {
    guard(|| {
        super::need(out_exec, "out_exec")?;
        // SAFETY: forwarded contract.
        let g = unsafe { clone_arc(graph, "graph") }?;
        let e = ExecGraph::finalize(g)?;
        // SAFETY: checked non-null.
        unsafe { out(out_exec, into_handle(e), "out_exec") }
    })
}

/// Adds a reference to an executable graph.
#[no_mangle]
pub unsafe extern "C" fn syrah_graph_exec_retain(exec: *const ExecGraph) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { retain(exec, "exec") })
}

/// Drops a reference to an executable graph; submissions in flight keep it
/// until they end.
#[no_mangle]
pub unsafe extern "C" fn syrah_graph_exec_release(exec: *const ExecGraph) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { release(exec, "exec") })
}

/// How the executable graph's next submission is replayed
/// (`SYRAH_GRAPH_BACKEND_*`). A graph that can use a command-buffer times
/// its first submissions both ways and keeps the cheaper (unless
/// `SYRAH_COMMAND_BUFFER=on`), so the answer may change over its first
/// eight submissions.
#[no_mangle]
pub unsafe extern "C" fn syrah_graph_exec_get_backend(
    exec: *const ExecGraph,
    out_backend: *mut syrah_graph_backend,
) -> syrah_status {
    guard(|| {
        super::need(out_backend, "out_backend")?;
        // SAFETY: forwarded contract.
        let e = unsafe { borrow(exec, "exec") }?;
        let b = match e.current_backend() {
            Backend::CommandBuffer => SYRAH_GRAPH_BACKEND_COMMAND_BUFFER,
            Backend::Replay => SYRAH_GRAPH_BACKEND_REPLAY,
        };
        // SAFETY: checked non-null.
        unsafe { out(out_backend, b, "out_backend") }
    })
}

/// What a finalized graph's submissions did so far
/// (`syrah_graph_exec_get_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct syrah_graph_exec_stats {
    /// Submissions made.
    pub submissions: u64,
    /// Command-buffers recorded: one per copy a submission needed (a copy
    /// still pending is not enqueued again on every driver), and copies
    /// recorded again after an argument update they could not take in
    /// place.
    pub command_buffer_recordings: u64,
    /// Argument updates applied in place to recorded command-buffers
    /// (one per copy updated; see `SYRAH_DEVICE_INFO_GRAPH_UPDATES_IN_PLACE`).
    pub command_buffer_updates: u64,
    /// Submissions that found every buffer the graph enqueues its kernels
    /// on as the graph's previous submission to the same queue left it
    /// (nothing else accessed, moved or freed it since), and so looked for
    /// no conflicts and moved no data.
    pub buffers_unchanged: u64,
}

/// Reads what `exec`'s submissions did so far.
#[no_mangle]
pub unsafe extern "C" fn syrah_graph_exec_get_stats(
    exec: *const ExecGraph,
    out_stats: *mut syrah_graph_exec_stats,
) -> syrah_status {
    guard(|| {
        super::need(out_stats, "out_stats")?;
        // SAFETY: forwarded contract.
        let e = unsafe { borrow(exec, "exec") }?;
        let s = e.stats();
        let v = syrah_graph_exec_stats {
            submissions: s.submissions,
            command_buffer_recordings: s.command_buffer_recordings,
            command_buffer_updates: s.command_buffer_updates,
            buffers_unchanged: s.buffers_unchanged,
        };
        // SAFETY: checked non-null.
        unsafe { out(out_stats, v, "out_stats") }
    })
}

/// The back ends graphs of kernels only can use on `device`:
/// `SYRAH_GRAPH_BACKEND_COMMAND_BUFFER` where it has
/// `cl_khr_command_buffer` (unless `SYRAH_COMMAND_BUFFER=off`; such graphs
/// then also keep the planned replay, taking whichever costs less), else
/// `SYRAH_GRAPH_BACKEND_REPLAY`. Graphs with other nodes always use the
/// planned replay.
#[no_mangle]
pub unsafe extern "C" fn syrah_device_get_graph_backend(
    device: *const Device,
    out_backend: *mut syrah_graph_backend,
) -> syrah_status {
    guard(|| {
        super::need(out_backend, "out_backend")?;
        let d = super::device::device_ref(device, "device")?;
        let b = if d.command_buffer.is_some() {
            SYRAH_GRAPH_BACKEND_COMMAND_BUFFER
        } else {
            SYRAH_GRAPH_BACKEND_REPLAY
        };
        // SAFETY: checked non-null.
        unsafe { out(out_backend, b, "out_backend") }
    })
}

/// Sets argument `index` of kernel node `node` (numbered in recording
/// order) for the submissions that follow: a value (copied now), a USM
/// pointer or a local-memory size. Accessor arguments cannot be changed.
#[no_mangle]
pub unsafe extern "C" fn syrah_graph_exec_set_arg(
    exec: *const ExecGraph,
    node: usize,
    index: usize,
    arg: *const syrah_kernel_arg,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let e = unsafe { borrow(exec, "exec") }?;
        if arg.is_null() {
            return Err(super::null("arg"));
        }
        // SAFETY: checked non-null; readable per the contract.
        let a = unsafe { node_arg(&*arg, usize::MAX) }.map_err(|e| at(e, "arg"))?;
        e.set_arg(node, index, a)
    })
}

/// Submits an executable graph to `queue` (of the device and context it
/// was recorded for) after `dependencies`, after the queue's earlier
/// commands on an in-order queue, and after the previous submission of the
/// same graph. Buffers' pages that moved since are brought back as for any
/// command. `out_event` (may be NULL) completes when the whole graph has.
#[no_mangle]
pub unsafe extern "C" fn syrah_queue_submit_graph(
    queue: *const Queue,
    exec: *const ExecGraph,
    dependencies: *const *const Event,
    dependency_count: usize,
    out_event: *mut *mut Event,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let q = unsafe { clone_arc(queue, "queue") }?;
        // SAFETY: forwarded contract.
        let e = unsafe { clone_arc(exec, "exec") }?;
        if let Some(rec) = recording_of(&q) {
            return Err(rec.refuse("submitting a graph"));
        }
        // SAFETY: forwarded contract.
        let deps = unsafe { super::event::deps_from(dependencies, dependency_count) }?;
        let done = e.submit(&q, &deps, !out_event.is_null())?;
        // SAFETY: forwarded contract.
        unsafe { super::event::give_submitted(done, out_event) };
        Ok(())
    })
}

/// Refuses explicit accessor copies and fills while `queue` records.
pub(crate) fn refuse_while_recording(q: &Queue, what: &str) -> Result<()> {
    match recording_of(q) {
        Some(rec) => Err(rec.refuse(what)),
        None => Ok(()),
    }
}
