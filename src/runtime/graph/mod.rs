//! Command graphs: commands recorded once from a queue (`record`), a
//! finalized graph's replay plan, its private kernels and command-buffers
//! (`exec`, `cmdbuf`), the buffers it manages itself (`managed`, and
//! `unchanged` for submissions that find them as the last one left them),
//! and its submission to a queue any number of times (`replay`, and
//! `onlane` for a chain of kernels).
//!
//! A kernel node is enqueued by the graph itself when its buffers, if it
//! has any, are used by such nodes only and the device has USM: its own
//! kernel object holds its arguments, set once; it goes onto one of the
//! graph's own in-order lanes with the waits worked out at finalize time
//! (`core::graph`), or a chain of them onto a lane of the queue as one
//! command, or all of them into a `cl_khr_command_buffer` where the device
//! has one and that costs less. Other nodes (host tasks, USM copies and
//! fills, kernels on buffers those use) are replayed through the queue's
//! ordinary path, so their buffers' pages are checked and moved at every
//! replay exactly as for a command submitted by hand.

mod cmdbuf;
mod direct;
mod exec;
mod managed;
mod onlane;
mod record;
mod replay;
mod unchanged;

pub use exec::{Backend, ExecGraph, ExecStats};
pub use record::{recording_of, recording_using, Recording};

use crate::backend::RecNode;
use crate::core::launch::NdRange;
use crate::runtime::buffer::{Buffer, Mode};
use crate::runtime::context::Context;
use crate::runtime::host_task::Task;
use crate::runtime::platform::Device;
use crate::runtime::program::Kernel;
use parking_lot::Mutex;
use std::sync::{Arc, Weak};

/// A kernel argument as a node keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeArg {
    Scalar(Vec<u8>),
    Usm(usize),
    Local(usize),
    /// The node's accessor of this index.
    Accessor(usize),
}

/// A buffer range a node accesses. The buffer is held weakly: a graph
/// does not keep a buffer the user released alive, and cannot be replayed
/// once one of its buffers is gone.
pub struct NodeAccess {
    pub owner: Weak<crate::runtime::buffer::Owner>,
    pub view: crate::core::pages::Geometry,
    pub dims: u32,
    pub storage: u64,
    pub mode: Mode,
    pub offset: [usize; 3],
    pub range: [usize; 3],
}

impl NodeAccess {
    pub fn of(b: &Buffer, mode: Mode, offset: [usize; 3], range: [usize; 3]) -> NodeAccess {
        NodeAccess {
            owner: Arc::downgrade(&b.owner),
            view: b.view,
            dims: b.dims,
            storage: b.storage.id,
            mode,
            offset,
            range,
        }
    }

    /// The buffer accessed, while the user holds it.
    pub fn buffer(&self) -> Option<Buffer> {
        self.owner
            .upgrade()
            .map(|owner| Buffer::of(owner, self.view, self.dims))
    }

    /// Whether this access and `o` must be ordered: the same storage, one
    /// of them writing, and boxes that overlap (or views that differ).
    pub fn conflicts(&self, o: &NodeAccess) -> bool {
        self.storage == o.storage
            && (self.mode.writes() || o.mode.writes())
            && (self.view != o.view
                || crate::core::graph::boxes_overlap(
                    (self.offset, self.range),
                    (o.offset, o.range),
                ))
    }
}

/// What a node does.
pub enum Action {
    Kernel {
        kernel: Arc<Kernel>,
        range: NdRange,
        /// Updated by `ExecGraph::set_arg` between replays.
        args: Mutex<Vec<NodeArg>>,
    },
    HostTasks(Vec<Task>),
    Memcpy {
        dst: usize,
        src: usize,
        size: usize,
    },
    Fill {
        ptr: usize,
        pattern: Vec<u8>,
        size: usize,
    },
    Prefetch {
        ptr: usize,
        size: usize,
    },
    Advise {
        ptr: usize,
        size: usize,
        advice: u32,
    },
    /// Orders later nodes after earlier ones; does nothing itself.
    Barrier,
}

impl Action {
    /// What a back end's recording holds for this node (`kernel`: the
    /// node's own kernel, where it launches one).
    pub(crate) fn recorded<'a>(&'a self, kernel: Option<&Arc<Kernel>>) -> RecNode<'a> {
        match (self, kernel) {
            (Action::Kernel { range, .. }, Some(k)) => RecNode::Kernel(k.handle, range),
            (&Action::Memcpy { dst, src, size }, _) => RecNode::Copy { dst, src, size },
            (Action::Fill { ptr, pattern, size }, _) => RecNode::Fill {
                dst: *ptr,
                pattern,
                size: *size,
            },
            _ => RecNode::Nothing,
        }
    }
}

/// One recorded command.
pub struct Node {
    pub action: Action,
    pub accesses: Vec<NodeAccess>,
    /// Earlier nodes this one depends on.
    pub deps: Vec<usize>,
    pub what: Arc<str>,
}

/// A recorded graph, ready to be finalized (any number of times).
pub struct Graph {
    pub id: u64,
    pub ctx: Arc<Context>,
    pub device: &'static Device,
    pub nodes: Vec<Node>,
}

impl Drop for Graph {
    fn drop(&mut self) {
        // Host tasks of a graph may run at every replay: their user data
        // is let go once, with the graph.
        for n in &self.nodes {
            if let Action::HostTasks(tasks) = &n.action {
                for t in tasks {
                    if let Some(f) = t.release {
                        // SAFETY: the user's release callback, called once
                        // with the user data it was given with.
                        unsafe { f(t.user_data as *mut std::ffi::c_void) };
                    }
                }
            }
        }
    }
}
