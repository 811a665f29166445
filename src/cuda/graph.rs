//! Recordings on the CUDA back end: a graph's kernels, copies and fills as
//! a CUDA graph of kernel, memcpy and memset nodes with their
//! dependencies, instantiated once and launched
//! as one command per replay; an argument update is applied to the
//! instantiated graph in place (`cuGraphExecKernelNodeSetParams`).
//!
//! CUDA handles are opaque identifiers that only the driver interprets,
//! so passing them on is not a dereference by this code.

#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::hostcopy::is_pageable;
use super::loader::{
    api, check, Api, CUgraph, CUgraphExec, CUgraphNode, KernelNodeParams, Memcpy3D, MemsetParams,
    CUDA_SUCCESS, CU_MEMORYTYPE_UNIFIED,
};
use super::module::{allow_smem, Function, Params, Shape};
use super::program::OwnedArg;
use super::state::{make_current, DevCtx};
use crate::backend::{CommandH, RecNode, RecordH};
use crate::core::error::Result;
use parking_lot::Mutex;
use std::sync::Arc;

/// A node to record.
pub enum Plan {
    Nothing,
    Kernel(Function, Shape, Vec<OwnedArg>),
    /// `size` bytes from `src` to `dst`.
    Copy {
        dst: u64,
        src: u64,
        size: usize,
    },
    /// `count` elements of `elem` bytes (1, 2 or 4) holding `value`.
    Fill {
        dst: u64,
        value: u32,
        elem: u32,
        count: usize,
    },
}

/// Whether a recording takes `n`: kernels; copies between memory CUDA
/// knows; fills of such memory with a pattern of 1, 2 or 4 bytes.
pub fn recordable(api: &Api, n: &RecNode<'_>) -> bool {
    match *n {
        RecNode::Nothing | RecNode::Kernel(..) => true,
        RecNode::Copy { dst, src, .. } => {
            !is_pageable(api, dst as u64) && !is_pageable(api, src as u64)
        }
        RecNode::Fill { dst, pattern, size } => {
            matches!(pattern.len(), 1 | 2 | 4)
                && size % pattern.len() == 0
                && !is_pageable(api, dst as u64)
        }
    }
}

/// A fill of `size` bytes at `dst` with `pattern`, which [`recordable`]
/// took (1, 2 or 4 bytes).
pub fn fill_plan(dst: usize, pattern: &[u8], size: usize) -> Plan {
    let value = match *pattern {
        [a] => u32::from(a),
        [a, b] => u32::from(u16::from_ne_bytes([a, b])),
        [a, b, c, d] => u32::from_ne_bytes([a, b, c, d]),
        _ => 0,
    };
    let elem = pattern.len().max(1);
    Plan::Fill {
        dst: dst as u64,
        value,
        elem: elem as u32,
        count: size / elem,
    }
}

/// One kernel node: its function, shape and current arguments.
struct Node {
    node: CUgraphNode,
    func: Function,
    shape: Shape,
    args: Vec<OwnedArg>,
}

/// A recorded graph.
pub struct Rec {
    graph: CUgraph,
    exec: CUgraphExec,
    pub dev: DevCtx,
    /// Node `i` of the recording (`None`: it launches nothing).
    nodes: Mutex<Vec<Option<Node>>>,
}

// SAFETY: CUDA graphs are usable from any thread whose current context is
// theirs (each use makes it so); the nodes are behind a lock.
unsafe impl Send for Rec {}
// SAFETY: as above.
unsafe impl Sync for Rec {}

/// The recording behind `r`.
pub fn of(r: RecordH) -> &'static Rec {
    // SAFETY: made by Arc::into_raw in `record`, alive until `release`.
    unsafe { &*(r.0 as *const Rec) }
}

fn node_params(n: &Node, params: &Params, slots: &mut [*mut std::ffi::c_void]) -> KernelNodeParams {
    KernelNodeParams {
        func: n.func.raw,
        grid: n.shape.groups,
        block: n.shape.local,
        shared_mem: params.smem,
        params: slots.as_mut_ptr(),
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    }
}

/// Records `plans` after `deps[i]` on device `dev`, and instantiates the
/// graph.
pub fn record(
    dev: DevCtx,
    deps: &[Vec<usize>],
    plans: Vec<Plan>,
) -> Result<(RecordH, Vec<CommandH>)> {
    let api = api()?;
    make_current(api, dev.ctx)?;
    let mut graph: CUgraph = std::ptr::null_mut();
    // SAFETY: `graph` is a valid slot; flags must be 0.
    let rc = unsafe { (api.cuGraphCreate)(&mut graph, 0) };
    check(api, rc, "cuGraphCreate")?;
    let mut rec = Rec {
        graph,
        exec: std::ptr::null_mut(),
        dev,
        nodes: Mutex::new(Vec::new()),
    };
    // Each node's graph node (null: nothing), and its kernel's state.
    let mut made: Vec<CUgraphNode> = Vec::with_capacity(plans.len());
    let mut kernels: Vec<Option<Node>> = Vec::with_capacity(plans.len());
    for (i, plan) in plans.into_iter().enumerate() {
        let before: Vec<CUgraphNode> = deps
            .get(i)
            .into_iter()
            .flatten()
            .filter_map(|&d| made.get(d).copied().filter(|n| !n.is_null()))
            .collect();
        let mut node: CUgraphNode = std::ptr::null_mut();
        let mut kernel = None;
        match plan {
            Plan::Nothing => {}
            Plan::Kernel(func, shape, args) => {
                let n = Node {
                    node: std::ptr::null_mut(),
                    func,
                    shape,
                    args,
                };
                let list: Vec<_> = n.args.iter().map(|a| a.as_arg()).collect();
                let params = Params::new(&n.func.entry, &list, &n.shape)?;
                allow_smem(api, &n.func, params.smem)?;
                let mut slots = params.slots();
                let p = node_params(&n, &params, &mut slots);
                // SAFETY: a live graph; `before` holds nodes of it; `p`
                // points to values alive until the call returns, which
                // copies them.
                let rc = unsafe {
                    (api.cuGraphAddKernelNode)(
                        &mut node,
                        rec.graph,
                        before.as_ptr(),
                        before.len(),
                        &p,
                    )
                };
                check(api, rc, "cuGraphAddKernelNode")?;
                kernel = Some(Node { node, ..n });
            }
            Plan::Copy { dst, src, size } => {
                let c = Memcpy3D {
                    src_type: CU_MEMORYTYPE_UNIFIED,
                    src_device: src,
                    dst_type: CU_MEMORYTYPE_UNIFIED,
                    dst_device: dst,
                    width: size,
                    height: 1,
                    depth: 1,
                    ..Memcpy3D::default()
                };
                // SAFETY: as above; both addresses are memory CUDA knows,
                // `size` bytes each (checked when the graph was recorded).
                let rc = unsafe {
                    (api.cuGraphAddMemcpyNode)(
                        &mut node,
                        rec.graph,
                        before.as_ptr(),
                        before.len(),
                        &c,
                        dev.ctx,
                    )
                };
                check(api, rc, "cuGraphAddMemcpyNode")?;
            }
            Plan::Fill {
                dst,
                value,
                elem,
                count,
            } => {
                let m = MemsetParams {
                    dst,
                    pitch: 0,
                    value,
                    element_size: elem,
                    width: count,
                    height: 1,
                };
                // SAFETY: as above; `dst` holds `count` elements.
                let rc = unsafe {
                    (api.cuGraphAddMemsetNode)(
                        &mut node,
                        rec.graph,
                        before.as_ptr(),
                        before.len(),
                        &m,
                        dev.ctx,
                    )
                };
                check(api, rc, "cuGraphAddMemsetNode")?;
            }
        }
        made.push(node);
        kernels.push(kernel);
    }
    // SAFETY: a complete graph; `exec` is a valid slot; no flags.
    let rc = unsafe { (api.cuGraphInstantiate)(&mut rec.exec, rec.graph, 0) };
    check(api, rc, "cuGraphInstantiate")?;
    let commands = kernels
        .iter()
        .enumerate()
        .map(|(i, n)| CommandH(if n.is_some() { i + 1 } else { 0 }))
        .collect();
    *rec.nodes.get_mut() = kernels;
    Ok((RecordH(Arc::into_raw(Arc::new(rec)) as usize), commands))
}

/// Sets argument `index` of command `c` of `r` to `arg` in the
/// instantiated graph; `false` where CUDA refuses.
pub fn update(r: RecordH, c: CommandH, index: u32, arg: OwnedArg) -> bool {
    let Ok(api) = api() else { return false };
    let rec = of(r);
    if make_current(api, rec.dev.ctx).is_err() || c.0 == 0 {
        return false;
    }
    let mut nodes = rec.nodes.lock();
    let Some(Some(n)) = nodes.get_mut(c.0 - 1) else {
        return false;
    };
    let Some(slot) = n.args.get_mut(index as usize) else {
        return false;
    };
    let old = std::mem::replace(slot, arg);
    let list: Vec<_> = n.args.iter().map(|a| a.as_arg()).collect();
    let made = Params::new(&n.func.entry, &list, &n.shape)
        .and_then(|p| allow_smem(api, &n.func, p.smem).map(|()| p));
    let ok = match made {
        Ok(params) => {
            let mut slots = params.slots();
            let p = node_params(n, &params, &mut slots);
            // SAFETY: a node of this instantiated graph, not running (the
            // caller's contract); the values live until the call returns.
            unsafe { (api.cuGraphExecKernelNodeSetParams)(rec.exec, n.node, &p) == CUDA_SUCCESS }
        }
        Err(_) => false,
    };
    if !ok {
        drop(list);
        n.args[index as usize] = old;
    }
    ok
}

/// Destroys recording `r` (CUDA finishes a launch of it still running).
pub fn release(r: RecordH) {
    // SAFETY: made by Arc::into_raw in `record`, released once; launches
    // still held keep their own reference.
    drop(unsafe { Arc::from_raw(r.0 as *const Rec) });
}

/// Another reference to `r`, for a launch that may be held.
pub fn share(r: RecordH) -> Arc<Rec> {
    // SAFETY: as in `of`; the count is raised before a new Arc is made.
    unsafe {
        Arc::increment_strong_count(r.0 as *const Rec);
        Arc::from_raw(r.0 as *const Rec)
    }
}

/// Launches `r` on stream `s` (of its device).
pub fn launch(api: &Api, r: &Rec, s: super::loader::CUstream) -> Result<()> {
    // Not at once with an update: CUDA's graphs take one thread at a time,
    // and a held launch runs on whichever thread lets it go.
    let _nodes = r.nodes.lock();
    // SAFETY: an instantiated graph and a stream of its context.
    let rc = unsafe { (api.cuGraphLaunch)(r.exec, s) };
    check(api, rc, "cuGraphLaunch")
}

impl Drop for Rec {
    fn drop(&mut self) {
        let Ok(api) = api() else { return };
        if make_current(api, self.dev.ctx).is_err() {
            return;
        }
        // SAFETY: made in `record`, destroyed once.
        unsafe {
            if !self.exec.is_null() {
                (api.cuGraphExecDestroy)(self.exec);
            }
            (api.cuGraphDestroy)(self.graph);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(pattern: &[u8], size: usize) -> (u64, u32, u32, usize) {
        match fill_plan(0x1000, pattern, size) {
            Plan::Fill {
                dst,
                value,
                elem,
                count,
            } => (dst, value, elem, count),
            _ => (0, 0, 0, 0),
        }
    }

    #[test]
    fn fills_become_memset_elements() {
        assert_eq!(fill(&[0xab], 100), (0x1000, 0xab, 1, 100));
        let two = 0x1234u16.to_ne_bytes();
        assert_eq!(fill(&two, 64), (0x1000, 0x1234, 2, 32));
        let four = 0xdead_beefu32.to_ne_bytes();
        assert_eq!(fill(&four, 64), (0x1000, 0xdead_beef, 4, 16));
    }
}
