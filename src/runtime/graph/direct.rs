//! The nodes a finalized graph enqueues itself onto its lanes, one command
//! each: kernels (see `managed` for which), and USM copies and fills whose
//! every byte lies in USM allocations of the graph's context, which need
//! neither staging nor checks at each submission.

use super::{Action, Graph};
use crate::backend::{EventH, QueueH};
use crate::core::error::{Error, Result, Status};
use crate::core::fill::{self, FillPlan};
use crate::runtime::launch::enqueue_ndrange;
use crate::runtime::queue::Queue;
use crate::runtime::usm::FILL_SEED_CAP;
use std::ffi::c_void;

/// Whether a USM copy or fill node can be enqueued by the graph itself:
/// a copy of at least one byte between non-overlapping ranges that both
/// lie inside USM allocations of the context, or a fill the backend does
/// in one command (pattern size and alignment) inside one.
pub(crate) fn usm_op_direct(graph: &Graph, action: &Action) -> bool {
    let reg = graph.ctx.registry.lock();
    let inside = |p: usize, n: usize| reg.check_range(p, n, "").is_ok();
    match action {
        Action::Memcpy { dst, src, size } => {
            let (d, s, n) = (*dst, *src, *size);
            n > 0
                && d.checked_add(n).is_some()
                && s.checked_add(n).is_some()
                && !(d < s + n && s < d + n)
                && inside(d, n)
                && inside(s, n)
        }
        Action::Fill { ptr, pattern, size } => {
            matches!(
                fill::plan(pattern, *size, FILL_SEED_CAP),
                Ok(FillPlan::Native)
            ) && ptr % pattern.len().max(1) == 0
                && inside(*ptr, *size)
        }
        _ => false,
    }
}

/// Enqueues direct node `i` of `graph` on `lane` after `wl`; `ev`
/// receives its event unless null. `q` is the submitting queue (of the
/// graph's context), whose USM backend copies and fills; `kernel`, for a
/// kernel node, its kernel object and whether it takes local memory.
pub(crate) fn enqueue(
    graph: &Graph,
    q: &Queue,
    i: usize,
    lane: QueueH,
    wl: &[EventH],
    ev: Option<&mut EventH>,
    kernel: Option<(&crate::runtime::program::Kernel, bool)>,
) -> Result<()> {
    let p = |a: usize| a as *mut c_void;
    let node = &graph.nodes[i];
    let done = match (&node.action, kernel) {
        (Action::Kernel { range, .. }, Some((k, local))) => {
            enqueue_ndrange(lane, k, range, local, wl, ev)
        }
        (Action::Memcpy { dst, src, size }, _) => {
            let ends = q.ends_of(p(*dst), p(*src));
            q.copy_cmd(lane, p(*dst), p(*src), *size, ends, wl, ev)
        }
        (Action::Fill { ptr, pattern, size }, _) => {
            q.fill_cmd(lane, p(*ptr), pattern, *size, wl, ev)
        }
        _ => Err(Error::new(
            Status::Internal,
            format!("node {i} is direct but neither a kernel, a copy nor a fill"),
        )),
    };
    done.map_err(|mut e| {
        e.message = format!(
            "node {i} ({}) of graph {}: {}",
            node.what, graph.id, e.message
        );
        e
    })
}
