//! Finalized graphs: the replay plan, the graph's own in-order lanes, one
//! private kernel per directly replayed node with its arguments set, the
//! back end chosen for the device, and argument updates between replays.

use super::cmdbuf::Pool;
use super::managed::{self, accessor_pointers, plan_buffers, Base, Managed};
use super::unchanged::{Memo, Prep};
use super::{Action, Graph, NodeArg};
use crate::core::error::{Error, Result, Status};
use crate::core::graph::{plan, BackendChooser, NodeKind, Plan, PlanNode};
use crate::runtime::buffer::{Deps, Storage};
use crate::runtime::event::Event;
use crate::runtime::launch::{set_args, Arg};
use crate::runtime::program::{Kernel, Program};
use crate::runtime::queue::open_lane;
use crate::runtime::queue::{Held, LanePositions, Queue};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Lanes a graph's independent direct nodes spread over.
const GRAPH_LANES: usize = 4;

/// How a finalized graph is replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Every node is a kernel, recorded once into a `cl_khr_command_buffer`
    /// that each replay enqueues as one command.
    CommandBuffer,
    /// The planned commands are enqueued one by one onto the graph's lanes,
    /// with waits worked out once; other nodes go through the queue.
    Replay,
}

/// `SYRAH_COMMAND_BUFFER`: `on` uses command-buffers wherever a graph can,
/// `off` never (the device then reports none), anything else (the
/// default, `auto`) times both and keeps the cheaper per graph.
pub(crate) fn command_buffers_forced() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("SYRAH_COMMAND_BUFFER").is_ok_and(|v| v == "on"))
}

/// `ExecGraph::kept_backend`: no verdict yet, replay, command-buffer.
const KEPT_NONE: u8 = 0;
const KEPT_REPLAY: u8 = 1;
const KEPT_BUFFER: u8 = 2;

/// Counts of what a finalized graph's submissions did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecStats {
    /// Submissions made.
    pub submissions: u64,
    /// Command-buffers recorded (copies for submissions still pending, and
    /// copies recorded again after an argument update they could not take
    /// in place).
    pub command_buffer_recordings: u64,
    /// Argument updates applied in place to recorded command-buffers.
    pub command_buffer_updates: u64,
    /// Submissions that found the buffers the graph manages as its
    /// previous submission left them, and prepared nothing.
    pub buffers_unchanged: u64,
}

/// How the last submission of a graph ended.
#[derive(Clone)]
pub(crate) enum Last {
    /// On the graph's own lane 0, with this event.
    Own(Arc<Event>),
    /// As one command of the queue's (see `onlane`).
    Queue(crate::runtime::queue::Submitted),
}

/// A graph ready to be submitted.
pub struct ExecGraph {
    pub graph: Arc<Graph>,
    pub plan: Plan,
    pub kinds: Vec<NodeKind>,
    /// The graph's own in-order OpenCL queues (at least one: the end marker
    /// goes on the first).
    pub(crate) lanes: Vec<crate::backend::QueueH>,
    /// A private kernel per direct node, its arguments set; nodes of the
    /// same kernel with the same arguments share one (drivers may enqueue
    /// one kernel object faster than many), until an update parts them.
    pub(crate) kernels: Mutex<Vec<Option<Arc<Kernel>>>>,
    /// The back end the graph can use: with `CommandBuffer`, the chooser
    /// (or `SYRAH_COMMAND_BUFFER=on`) says whether a submission does.
    pub backend: Backend,
    pub(crate) chooser: Mutex<BackendChooser>,
    /// The chooser's verdict once it has one (`KEPT_*`), read without its
    /// lock by every submission after; set only by `timed`, from the
    /// chooser's own.
    kept_backend: std::sync::atomic::AtomicU8,
    /// Buffers whose coherence the graph plans itself.
    pub(crate) managed: Vec<Managed>,
    /// The nodes that access buffers.
    pub(crate) accessing: Vec<usize>,
    /// Per node: a kernel with local-memory arguments (for the status of
    /// a launch that runs out of resources).
    pub(crate) locals: Mutex<Vec<bool>>,
    /// The managed buffers' device bases the kernels' accessor arguments
    /// were last set with.
    pub(crate) bases: Mutex<Vec<Base>>,
    /// The node whose event is the graph's end, when the graph is one lane
    /// of direct nodes (no end marker is needed then).
    pub(crate) single_end: Option<usize>,
    /// The graph is a chain of kernels it enqueues itself (one lane, no
    /// node through the queue): see `onlane`.
    pub(crate) one_lane: bool,
    /// "graph N", for the queue's records and messages.
    pub(crate) what: Arc<str>,
    pub(crate) pool: Mutex<Pool>,
    /// Submissions made.
    pub(crate) submitted: std::sync::atomic::AtomicU64,
    /// What the last submission that prepared the managed buffers left
    /// (used under `turn`): `prepare_buffers` gives the buffers, and a
    /// submission records itself through `unchanged.commit`.
    pub(crate) unchanged: Memo,
    /// Held for a whole submission (one replay at a time) and for argument
    /// updates; holds the end event of the last submission, which the next
    /// one follows.
    pub(crate) turn: Mutex<Option<Last>>,
}

// SAFETY: OpenCL queues and kernels are thread-safe objects; the kernels'
// arguments change only under `turn`.
unsafe impl Send for ExecGraph {}
// SAFETY: as above.
unsafe impl Sync for ExecGraph {}

impl Drop for ExecGraph {
    fn drop(&mut self) {
        self.pool.get_mut().release();
        self.kernels.get_mut().clear();
        let ctx = &self.graph.ctx;
        let driver = ctx.platform.driver;
        // Queues this graph made and owns; every submission kept the graph
        // alive until its end, so nothing runs there.
        for &q in &self.lanes {
            let _ = driver.finish(q);
            if ctx.defers_queue_release() {
                ctx.retired_queues.lock().push(q.0);
            } else {
                driver.release_queue(q);
            }
        }
    }
}

/// A node's kernel arguments as the launch path takes them.
pub(crate) fn args_of<'a>(args: &'a [NodeArg], accessors: &[Arg<'static>]) -> Vec<Arg<'a>> {
    args.iter()
        .map(|a| match a {
            NodeArg::Scalar(b) => Arg::Bytes(b),
            NodeArg::Usm(p) => Arg::Usm(*p),
            NodeArg::Local(n) => Arg::Local(*n),
            NodeArg::Accessor(i) => accessors.get(*i).copied().unwrap_or(Arg::Usm(0)),
        })
        .collect()
}

impl ExecGraph {
    /// Plans `graph`, makes its lanes and private kernels, and picks its
    /// back end.
    pub fn finalize(graph: Arc<Graph>) -> Result<Arc<ExecGraph>> {
        let (direct, managed) = plan_buffers(&graph);
        let kinds: Vec<NodeKind> = graph
            .nodes
            .iter()
            .zip(&direct)
            .map(|(n, &d)| match n.action {
                Action::Barrier => NodeKind::Empty,
                _ if d => NodeKind::Direct,
                _ => NodeKind::Eager,
            })
            .collect();
        let nodes: Vec<PlanNode> = graph
            .nodes
            .iter()
            .zip(&kinds)
            .map(|(n, &kind)| PlanNode {
                kind,
                deps: n.deps.clone(),
            })
            .collect();
        let plan = plan(&nodes, GRAPH_LANES).map_err(|m| Error::new(Status::Internal, m))?;
        // A recording holds kernels, and copies and fills where the back
        // end takes them (a kernel's handle is not needed to ask).
        let driver = graph.ctx.platform.driver;
        let all_direct = kinds.iter().all(|&k| k != NodeKind::Eager)
            && kinds.contains(&NodeKind::Direct)
            && graph.nodes.iter().zip(&kinds).all(|(n, &k)| {
                k != NodeKind::Direct
                    || matches!(n.action, Action::Kernel { .. })
                    || driver.can_record(&n.action.recorded(None))
            });
        let backend = match graph.device.command_buffer {
            Some(_) if all_direct && graph.ctx.platform.driver.records() => Backend::CommandBuffer,
            _ => Backend::Replay,
        };
        let props = graph.device.command_buffer.unwrap_or(0);
        let single_end = match plan.ends[..] {
            [e] if plan.lanes == 1 && !kinds.contains(&NodeKind::Eager) => Some(e),
            _ => None,
        };
        let one_lane = plan.lanes == 1 && !kinds.contains(&NodeKind::Eager);
        let mut exec = ExecGraph {
            single_end,
            one_lane,
            what: Arc::from(format!("graph {}", graph.id)),
            managed,
            bases: Mutex::new(Vec::new()),
            accessing: (0..graph.nodes.len())
                .filter(|&i| !graph.nodes[i].accesses.is_empty())
                .collect(),
            locals: Mutex::new(graph.nodes.iter().map(has_local).collect()),
            chooser: Mutex::new(BackendChooser::default()),
            kept_backend: std::sync::atomic::AtomicU8::new(KEPT_NONE),
            kinds,
            plan,
            lanes: Vec::new(),
            kernels: Mutex::new(Vec::new()),
            backend,
            pool: Mutex::new(Pool::default()),
            submitted: Default::default(),
            unchanged: Memo::default(),
            turn: Mutex::new(None),
            graph: graph.clone(),
        };
        // Both back ends need the planned lanes: the command-buffer one
        // replays node by node when its copies are all pending.
        for _ in 0..exec.plan.lanes.max(1) {
            // Owned by `exec` at once: released with it on a failure.
            let lane = open_lane(&graph.ctx, graph.device, props != 0, false)?;
            exec.lanes.push(lane);
        }
        let mut kernels: Vec<Option<Arc<Kernel>>> = Vec::with_capacity(graph.nodes.len());
        // Kernels made so far, by (kernel object, arguments).
        let mut made: Vec<(*const Kernel, Vec<NodeArg>, Arc<Kernel>)> = Vec::new();
        for (i, n) in graph.nodes.iter().enumerate() {
            let k = match (&n.action, exec.kinds[i]) {
                (Action::Kernel { kernel, args, .. }, NodeKind::Direct) => {
                    let args = args.lock();
                    let key = Arc::as_ptr(kernel);
                    // Accessor arguments are set per node at the first
                    // submission: such nodes keep kernels of their own.
                    let shareable = n.accesses.is_empty();
                    match made
                        .iter()
                        .find(|(k, a, _)| shareable && *k == key && *a == *args)
                    {
                        Some((_, _, own)) => Some(own.clone()),
                        None => {
                            let set = shareable.then_some(&args[..]);
                            let own = private_kernel(&graph, kernel, set).map_err(|mut e| {
                                e.message = format!("node {i} of the graph: {}", e.message);
                                e
                            })?;
                            made.push((key, args.clone(), own.clone()));
                            Some(own)
                        }
                    }
                }
                _ => None,
            };
            kernels.push(k);
        }
        *exec.kernels.get_mut() = kernels;
        Ok(Arc::new(exec))
    }

    /// Sets argument `index` of kernel node `node` for later replays.
    pub fn set_arg(&self, node: usize, index: usize, arg: NodeArg) -> Result<()> {
        let n = self.graph.nodes.get(node).ok_or_else(|| {
            Error::invalid(format!(
                "node {node} is out of range: the graph has {} nodes",
                self.graph.nodes.len()
            ))
        })?;
        let Action::Kernel { kernel, args, .. } = &n.action else {
            return Err(Error::invalid(format!(
                "node {node} is a {}, not a kernel launch: only kernel arguments can be updated",
                n.what
            )));
        };
        let _turn = self.turn.lock();
        let mut args = args.lock();
        let count = args.len();
        let slot = args.get(index).ok_or_else(|| {
            Error::new(
                Status::KernelArguments,
                format!(
                    "argument index {index} is out of range: kernel '{}' of node {node} takes {count}",
                    kernel.name
                ),
            )
        })?;
        if matches!(slot, NodeArg::Accessor(_)) != matches!(arg, NodeArg::Accessor(_)) {
            return Err(Error::new(
                Status::KernelArguments,
                format!(
                    "argument {index} of node {node} (kernel '{}') is {} accessor; an update \
                     must keep it so",
                    kernel.name,
                    if matches!(slot, NodeArg::Accessor(_)) {
                        "an"
                    } else {
                        "not an"
                    }
                ),
            ));
        }
        let mut kernels = self.kernels.lock();
        if let Some(own) = kernels[node].as_mut() {
            let mut list: Vec<NodeArg> = args.clone();
            list[index] = arg.clone();
            let named = |mut e: Error| {
                e.message = format!("updating node {node}: {}", e.message);
                e
            };
            let bases = self.bases.lock();
            if !n.accesses.is_empty() && bases.is_empty() {
                // Not submitted yet: the first submission sets them all.
            } else if Arc::strong_count(own) > 1 {
                // Shared with other nodes: this one gets its own.
                *own = private_kernel(&self.graph, kernel, Some(&list)).map_err(named)?;
            } else {
                let ptrs = accessor_pointers(&self.graph, &self.managed, &bases, node);
                set_args(
                    &self.graph.ctx,
                    own,
                    &mut own.lock.lock(),
                    &args_of(&list, &ptrs),
                )
                .map_err(named)?;
            }
            let new = args_of(std::slice::from_ref(&arg), &[]);
            self.pool.lock().update(node, index, &new[0]);
        }
        args[index] = arg;
        self.locals.lock()[node] = args.iter().any(|a| matches!(a, NodeArg::Local(_)));
        Ok(())
    }

    /// Sets the accessor arguments of the direct nodes for the managed
    /// buffers' device `bases`, when they differ from those last set (at
    /// the first submission: allocations never move afterwards).
    pub(crate) fn point_accessors(&self, bases: &[Base]) -> Result<()> {
        if self.managed.is_empty() {
            // No accessor to point anywhere.
            return Ok(());
        }
        let mut last = self.bases.lock();
        if *last == bases {
            return Ok(());
        }
        let kernels = self.kernels.lock();
        for (i, n) in self.graph.nodes.iter().enumerate() {
            let (Action::Kernel { args, .. }, Some(own)) = (&n.action, &kernels[i]) else {
                continue;
            };
            if n.accesses.is_empty() {
                continue;
            }
            let ptrs = accessor_pointers(&self.graph, &self.managed, bases, i);
            let args = args.lock();
            set_args(
                &self.graph.ctx,
                own,
                &mut own.lock.lock(),
                &args_of(&args, &ptrs),
            )
            .map_err(|mut e| {
                e.message = format!("node {i} of graph {}: {}", self.graph.id, e.message);
                e
            })?;
        }
        self.pool.lock().stale();
        *last = bases.to_vec();
        Ok(())
    }

    /// The managed buffers for a submission to `q` (holding `turn`): as
    /// the last submission left them, or prepared (conflicts outside the
    /// graph added to `waits`, or with `on_lanes` their places on the
    /// queue's lanes; outdated pages moved; the kernels pointed at them).
    pub(crate) fn prepare_buffers(
        &self,
        q: &Queue,
        waits: &mut Deps,
        on_lanes: Option<&mut LanePositions>,
    ) -> Result<Prep> {
        if !self.managed.is_empty() {
            if let Some(same) = self.unchanged.same(q) {
                return Ok(same);
            }
        }
        let b = managed::prepare(&self.graph, &self.managed, q, waits, on_lanes)?;
        self.point_accessors(&b.bases)?;
        Ok(Prep::New(b))
    }

    /// What this graph's submissions did so far.
    pub fn stats(&self) -> ExecStats {
        let pool = self.pool.lock();
        ExecStats {
            submissions: self.submitted.load(Ordering::Relaxed),
            command_buffer_recordings: pool.recorded,
            command_buffer_updates: pool.updated,
            buffers_unchanged: self.unchanged.found(),
        }
    }

    /// What a submission keeps alive until it has run: this graph and
    /// the storages of the buffers it accesses, held as shared objects, so
    /// that back-to-back submissions of the graph on one lane keep one
    /// entry there (see `Held::Storages`).
    pub(crate) fn kept<'a>(
        self: &Arc<Self>,
        storages: impl IntoIterator<Item = &'a Arc<Storage>>,
    ) -> Held {
        let mut all: SmallVec<[Arc<dyn Any + Send + Sync>; 2]> = SmallVec::new();
        all.push(self.clone());
        // One at a time: a graph without buffers (the usual replay) gives
        // none, and pays nothing for them.
        for s in storages {
            all.push(s.clone() as Arc<dyn Any + Send + Sync>);
        }
        Held::Storages(all)
    }

    /// Whether submissions are still being timed to choose the back end.
    pub(crate) fn choosing(&self) -> bool {
        self.backend == Backend::CommandBuffer
            && !command_buffers_forced()
            && self.kept_backend.load(Ordering::Acquire) == KEPT_NONE
    }

    /// The back end the next submission uses.
    pub fn current_backend(&self) -> Backend {
        if self.backend != Backend::CommandBuffer {
            return Backend::Replay;
        }
        let buffer = command_buffers_forced()
            || match self.kept_backend.load(Ordering::Acquire) {
                KEPT_BUFFER => true,
                KEPT_REPLAY => false,
                _ => self.chooser.lock().next_is_buffer(),
            };
        if buffer {
            Backend::CommandBuffer
        } else {
            Backend::Replay
        }
    }

    /// Gives the chooser what a timed submission (through the
    /// command-buffer, or replayed) cost the host, `ns`.
    pub(crate) fn timed(&self, buffer: bool, ns: u64) {
        let mut c = self.chooser.lock();
        c.record(buffer, ns);
        if let Some(b) = c.decided {
            let kept = if b { KEPT_BUFFER } else { KEPT_REPLAY };
            self.kept_backend.store(kept, Ordering::Release);
        }
    }

    /// With `SYRAH_VALIDATE=1`: every USM pointer argument of a kernel
    /// node, and every range a copy or fill the graph enqueues itself
    /// touches, still lies inside a USM allocation of the graph's context
    /// (not freed since it was recorded or set).
    pub fn check_pointers(&self) -> Result<()> {
        if !crate::runtime::launch::validating() {
            return Ok(());
        }
        for (i, n) in self.graph.nodes.iter().enumerate() {
            if self.kinds[i] == NodeKind::Direct {
                let ranges = match &n.action {
                    Action::Memcpy { dst, src, size } => vec![(*dst, *size), (*src, *size)],
                    Action::Fill { ptr, size, .. } => vec![(*ptr, *size)],
                    _ => Vec::new(),
                };
                for (p, len) in ranges {
                    let reg = self.graph.ctx.registry.lock();
                    if let Err(e) = reg.check_range(p, len, "pointer") {
                        return Err(Error::new(
                            Status::InvalidPointer,
                            format!(
                                "node {i} ({}) of graph {}: {} (freed since it was recorded?)",
                                n.what, self.graph.id, e.message
                            ),
                        ));
                    }
                }
            }
            let Action::Kernel { kernel, args, .. } = &n.action else {
                continue;
            };
            for (j, a) in args.lock().iter().enumerate() {
                if let NodeArg::Usm(p) = *a {
                    if p != 0 && self.graph.ctx.registry.lock().find(p).is_none() {
                        return Err(Error::new(
                            Status::InvalidPointer,
                            format!(
                                "argument {j} of node {i} (kernel '{}') of graph {}, USM pointer \
                                 {p:#x}, is not inside a USM allocation of its context (freed \
                                 since it was recorded?)",
                                kernel.name, self.graph.id
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Nodes whose buffers the user released, if any: such a graph cannot
    /// be replayed.
    pub fn released_buffer(&self) -> Option<(usize, &str)> {
        self.accessing
            .iter()
            .find(|&&i| {
                self.graph.nodes[i]
                    .accesses
                    .iter()
                    .any(|a| a.owner.strong_count() == 0)
            })
            .map(|&i| (i, &*self.graph.nodes[i].what))
    }
}

/// Whether node `n` is a kernel with local-memory arguments.
fn has_local(n: &super::Node) -> bool {
    match &n.action {
        Action::Kernel { args, .. } => args.lock().iter().any(|a| matches!(a, NodeArg::Local(_))),
        _ => false,
    }
}

/// A new kernel object of `kernel`'s program and name, with `args` set
/// when given (a node with accessors gets its arguments at its first
/// submission, once its buffers' device pointers are known).
fn private_kernel(graph: &Graph, kernel: &Kernel, args: Option<&[NodeArg]>) -> Result<Arc<Kernel>> {
    let own = Kernel::create(
        &Program {
            ctx: kernel.ctx.clone(),
            inner: kernel.program.clone(),
        },
        &kernel.name,
    )?;
    if let Some(args) = args {
        set_args(&graph.ctx, &own, &mut own.lock.lock(), &args_of(args, &[]))?;
    }
    Ok(Arc::new(own))
}
