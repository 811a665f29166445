//! Buffers a finalized graph manages itself: those that only kernels the
//! graph enqueues directly use, on a device with USM. Their coherence is
//! planned once, at finalize time, as one access per buffer (the union of
//! the graph's accesses, reading or not as the first access needs); each
//! submission prepares that one access as a command group would, which
//! checks cheaply that the pages are current on the device (moving only
//! those that are not), orders the graph after conflicting commands
//! outside it, and records the graph's end as the access, so that later
//! commands order after the graph. Kernel nodes get their accessors'
//! device pointers as arguments, or, where buffers are memory objects and
//! kernels take hidden offsets (NVIDIA's OpenCL), the object and the
//! accessor's offset.

use super::{Action, Graph, NodeAccess};
use crate::core::error::{Error, Result, Status};
use crate::core::graph::union_box;
use crate::runtime::buffer::{AccessReq, AccessReqs, Buffer, Deps, Mode, PreparedList};
use crate::runtime::queue::{LanePositions, Queue};
use smallvec::SmallVec;

/// One buffer the graph manages: the union of its accesses.
pub(crate) struct Managed {
    pub storage: u64,
    /// A node's access to it, whose buffer view the union uses.
    pub node: usize,
    pub access: usize,
    pub offset: [usize; 3],
    pub range: [usize; 3],
    pub mode: Mode,
}

/// Which nodes the graph can enqueue itself (`direct[i]`), and the
/// buffers it manages. A kernel node qualifies when its launch is not
/// empty and every buffer it accesses is used by qualifying kernel nodes
/// only, through one view, on a device with USM or with kernels that take
/// hidden offsets; a USM copy or fill as `direct::usm_op_direct` says.
pub(crate) fn plan_buffers(graph: &Graph) -> (Vec<bool>, Vec<Managed>) {
    // Buffers in memory objects have no device address to point nodes at:
    // a kernel reaches them as the object and an offset, where it takes
    // offsets (not in a command-buffer, which takes no offsets).
    let usm = !graph.ctx.buffers_on_mem;
    let offsets = graph.device.command_buffer.is_none();
    let mut direct: Vec<bool> = graph
        .nodes
        .iter()
        .map(|n| match &n.action {
            Action::Kernel { range, kernel, .. } => {
                !range.is_empty()
                    && (n.accesses.is_empty() || usm || (offsets && kernel.takes_offsets()))
            }
            a => super::direct::usm_op_direct(graph, a),
        })
        .collect();
    // A buffer used by a node that is not direct, or through two views,
    // makes every node using it go through the queue: repeat until stable.
    loop {
        let mut changed = false;
        let bad: Vec<u64> = graph
            .nodes
            .iter()
            .enumerate()
            .flat_map(|(i, n)| {
                let dir = direct[i];
                n.accesses
                    .iter()
                    .filter_map(move |a| (!dir).then_some(a.storage))
            })
            .chain(mixed_views(graph))
            .collect();
        for (i, n) in graph.nodes.iter().enumerate() {
            if direct[i] && n.accesses.iter().any(|a| bad.contains(&a.storage)) {
                direct[i] = false;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut managed: Vec<Managed> = Vec::new();
    for (i, n) in graph.nodes.iter().enumerate() {
        if !direct[i] {
            continue;
        }
        for (j, a) in n.accesses.iter().enumerate() {
            match managed.iter_mut().find(|m| m.storage == a.storage) {
                Some(m) => {
                    (m.offset, m.range) = union_box((m.offset, m.range), (a.offset, a.range));
                    if a.mode.writes() {
                        m.mode = match m.mode {
                            Mode::Read => Mode::ReadWrite,
                            other => other,
                        };
                    }
                }
                None => managed.push(Managed {
                    storage: a.storage,
                    node: i,
                    access: j,
                    offset: a.offset,
                    range: a.range,
                    mode: a.mode,
                }),
            }
        }
    }
    // The union keeps a discard mode only where the first access, which
    // discarded, covers all of it; a plain write keeps the data around it.
    for m in &mut managed {
        let first = &graph.nodes[m.node].accesses[m.access];
        let covers = first.offset == m.offset && first.range == m.range;
        m.mode = match m.mode {
            Mode::Read => Mode::Read,
            Mode::DiscardWrite | Mode::DiscardReadWrite if covers => Mode::DiscardReadWrite,
            _ => Mode::ReadWrite,
        };
    }
    (direct, managed)
}

/// Storages some nodes access through different views.
fn mixed_views(graph: &Graph) -> Vec<u64> {
    let all: Vec<&NodeAccess> = graph.nodes.iter().flat_map(|n| &n.accesses).collect();
    all.iter()
        .filter(|a| {
            all.iter()
                .any(|b| b.storage == a.storage && (b.view != a.view || b.dims != a.dims))
        })
        .map(|a| a.storage)
        .collect()
}

/// Where a managed buffer's element 0 is on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Base {
    /// At this device address.
    Usm(usize),
    /// At the start of this memory object.
    Mem(usize),
}

/// The managed buffers, prepared for one submission on `q`.
pub(crate) struct PreparedBuffers {
    pub prepared: PreparedList,
    /// Per managed buffer: where its element 0 is.
    pub bases: Vec<Base>,
}

/// Prepares the managed buffers' accesses on `q` for a submission:
/// allocations, conflicts with commands outside the graph (added to
/// `waits`, or with `on_lanes` their places on the queue's lanes) and
/// transfers of outdated pages.
pub(crate) fn prepare(
    graph: &Graph,
    managed: &[Managed],
    q: &Queue,
    waits: &mut Deps,
    on_lanes: Option<&mut LanePositions>,
) -> Result<PreparedBuffers> {
    if managed.is_empty() {
        return Ok(PreparedBuffers {
            prepared: SmallVec::new(),
            bases: Vec::new(),
        });
    }
    let buffers = managed
        .iter()
        .map(|m| {
            graph.nodes[m.node].accesses[m.access]
                .buffer()
                .ok_or_else(|| {
                    Error::new(
                        Status::InvalidOperation,
                        format!(
                            "graph {} cannot be replayed: node {} ({}) accesses a buffer that was \
                             released",
                            graph.id, m.node, graph.nodes[m.node].what
                        ),
                    )
                })
        })
        .collect::<Result<Vec<Buffer>>>()?;
    let reqs: AccessReqs<'_> = managed
        .iter()
        .zip(&buffers)
        .map(|(m, b)| AccessReq {
            buffer: b,
            mode: m.mode,
            offset: m.offset,
            range: m.range,
        })
        .collect();
    let prepared = q.prepare_accesses_at(&reqs, waits, on_lanes)?;
    let bases = prepared
        .iter()
        .map(|p| match (p.ptr, p.mem) {
            (0, 0) => Err(Error::new(
                Status::Internal,
                "a buffer the graph manages has no device pointer or memory object",
            )),
            (0, m) => Ok(Base::Mem(m)),
            (ptr, _) => Ok(Base::Usm(ptr - p.offset)),
        })
        .collect::<Result<Vec<Base>>>()?;
    Ok(PreparedBuffers { prepared, bases })
}

/// The arguments of node `i`'s accessors, from the managed buffers'
/// bases: device pointers, or memory objects and offsets.
pub(crate) fn accessor_pointers(
    graph: &Graph,
    managed: &[Managed],
    bases: &[Base],
    i: usize,
) -> Vec<crate::backend::ArgSet<'static>> {
    use crate::backend::{ArgSet, MemH};
    graph.nodes[i]
        .accesses
        .iter()
        .map(|a| {
            let base = managed
                .iter()
                .position(|m| m.storage == a.storage)
                .and_then(|k| bases.get(k))
                .copied()
                .unwrap_or(Base::Usm(0));
            let off = a.view.byte_offset(a.offset);
            match base {
                Base::Usm(b) => ArgSet::Usm(b + off),
                Base::Mem(m) => ArgSet::MemAt(MemH(m), off),
            }
        })
        .collect()
}
