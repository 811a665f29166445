//! The back-end seam: what the runtime knows of the driver that runs its
//! commands, as opaque handles and the operations a back end performs on
//! them. The runtime holds a back end as a `&'static dyn Driver` (one per
//! platform) and never looks inside a handle; `opencl/` implements the
//! trait for OpenCL, and another back end can stand beside it.
//!
//! So far the seam covers events (a command's completion, its failure
//! code, a wait, a callback at its end, its timestamps, user events), the
//! in-order queues commands go on (making and releasing them, flushing,
//! finishing, markers), unified shared memory (allocating and freeing it)
//! and the commands on it (copies, fills, migration, advice). A command
//! reaches the back end as a closure given the queue, its wait list and
//! where its event goes. Programs (building, binaries, logs), kernels
//! (making them, what they need on each device, their arguments),
//! launches, and buffers' memory objects with their copies and fills go
//! through it too.

pub mod handoff;
pub mod handoff_driver;
#[cfg(test)]
mod handoff_tests;

use crate::core::aspects::UsmStrategy;
use crate::core::error::{Error, Result, Status};
use crate::core::launch::NdRange;
use crate::core::registry::AllocKind;
use std::ffi::c_void;

/// A handle type: a back end's object as a pointer-sized value the
/// runtime passes on without looking inside (transparent, so that a list
/// of handles can be a back end's own list).
macro_rules! handle {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $name(pub usize);
    };
}

handle!(
    /// A back end's event: the end of one command, or a user event. The
    /// runtime owns one reference to each handle it keeps and gives it back
    /// with [`Driver::release_event`].
    EventH
);

impl EventH {
    /// No event (a command recorded into a graph, not run).
    pub const NONE: EventH = EventH(0);

    pub fn is_none(self) -> bool {
        self.0 == 0
    }
}

handle!(
    /// A back end's context: the devices and memory commands share.
    ContextH
);

handle!(
    /// A device of a back end.
    DeviceH
);

handle!(
    /// An in-order queue of a back end: its commands run one after another,
    /// each after the events it was given to wait for.
    QueueH
);

handle!(
    /// A memory object of a back end (a buffer's allocation on a device
    /// without unified shared memory).
    MemH
);

handle!(
    /// A kernel of a back end: its code and the arguments set on it.
    KernelH
);

handle!(
    /// A built program of a back end.
    ProgramH
);

handle!(
    /// A recording: a graph's kernels recorded once and enqueued as one
    /// command (OpenCL's command-buffer, CUDA's graph).
    RecordH
);

handle!(
    /// One kernel command of a recording, for argument updates (0: none).
    CommandH
);

/// One node of a recording.
#[derive(Clone, Copy, Debug)]
pub enum RecNode<'a> {
    /// Nothing (the node only orders others).
    Nothing,
    /// A kernel, with the arguments set on it now, over a range.
    Kernel(KernelH, &'a NdRange),
    /// A copy of `size` bytes between unified shared memory addresses.
    Copy { dst: usize, src: usize, size: usize },
    /// A fill of `size` bytes at `dst` with `pattern`.
    Fill {
        dst: usize,
        pattern: &'a [u8],
        size: usize,
    },
}

/// What a program is built from.
#[derive(Clone, Copy, Debug)]
pub enum ProgramInput<'a> {
    /// Kernel source text.
    Source(&'a [u8]),
    /// An intermediate language module (SPIR-V).
    Il(&'a [u8]),
    /// A binary the back end made for the one device given.
    Binary(&'a [u8]),
}

/// What a kernel needs and prefers on one device (the back end's word,
/// `None` where it does not say).
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelFacts {
    pub work_group_size: Option<usize>,
    pub static_local_mem: u64,
    pub private_mem: u64,
    pub preferred_multiple: Option<usize>,
}

/// One side of a copy: memory object `mem` at byte offset `at`, or
/// (`mem` none) host memory at address `at`.
#[derive(Clone, Copy, Debug)]
pub struct Side {
    pub mem: Option<MemH>,
    pub at: usize,
}

/// One side of a rectangle copy: where (`at` is the host address, or 0
/// with a memory object), the rectangle's origin there (bytes, rows,
/// slices) and the row and slice pitches in bytes.
#[derive(Clone, Copy, Debug)]
pub struct RectSide {
    pub side: Side,
    pub origin: [usize; 3],
    pub row_pitch: usize,
    pub slice_pitch: usize,
}

/// One argument set on a kernel.
#[derive(Clone, Copy, Debug)]
pub enum ArgSet<'a> {
    /// Bytes passed by value.
    Bytes(&'a [u8]),
    /// This many bytes of group-local memory.
    Local(usize),
    /// A memory object.
    Mem(MemH),
    /// A unified shared memory address (0: a null pointer).
    Usm(usize),
    /// A memory object seen from a byte offset, for a pointer argument
    /// with a hidden offset (see `Driver::kernel_offsets`); the runtime
    /// sets the object and the offset as two parameters.
    MemAt(MemH, usize),
}

impl ArgSet<'_> {
    /// What the argument is, for messages.
    pub fn describe(&self) -> String {
        match self {
            ArgSet::Bytes(b) => format!("value of {} bytes", b.len()),
            ArgSet::Local(n) => format!("{n} bytes of local memory"),
            ArgSet::Usm(p) => format!("USM pointer {p:#x}"),
            ArgSet::Mem(_) => "buffer accessor".to_string(),
            ArgSet::MemAt(_, off) => format!("buffer accessor at byte {off}"),
        }
    }
}

/// Execution status, numbered as OpenCL numbers it (every back end
/// reports in these terms): complete, running, submitted, queued; a
/// negative status is the failure code of a command that ended in error.
pub const COMPLETE: i32 = 0;
pub const RUNNING: i32 = 1;
pub const SUBMITTED: i32 = 2;
pub const QUEUED: i32 = 3;

/// A command's timestamps, in nanoseconds of the device's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stamp {
    Queued,
    Submitted,
    Started,
    Ended,
}

/// Called once when an event ends: the event's handle (as a pointer-sized
/// value), its final status and the user data given with it. It may run
/// on any thread, including the back end's own.
pub type EndCallback = unsafe extern "C" fn(*mut c_void, i32, *mut c_void);

/// Which side of a copy its caller knows to be host memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostEnd {
    /// Neither, as far as the caller knows.
    Unknown,
    Src,
    Dst,
    /// Neither: both are device allocations (said where the back end
    /// [`Driver::hands_off`] its commands).
    Device,
}

/// An object a back end hands to a user for interoperation.
#[derive(Clone, Copy, Debug)]
pub enum NativeOf {
    /// A queue lane.
    Queue(QueueH),
    /// A context, as seen from one of its devices.
    Context(ContextH, DeviceH),
    /// A device.
    Device(DeviceH),
}

/// The operations the runtime asks of a back end.
pub trait Driver: Send + Sync {
    /// The back end's name, for messages.
    fn name(&self) -> &'static str;

    /// Whether the default selector picks this back end's device of a
    /// GPU over the same GPU through another back end.
    fn preferred(&self) -> bool {
        false
    }

    /// The name of failure status `code` of one of this back end's
    /// events (OpenCL's names by default).
    fn failure_name(&self, code: i32) -> String {
        crate::core::cl_status::cl_error_name(code).to_string()
    }

    /// What failed where command `e` could not be given to the device (a
    /// call of the driver's, named), when the back end knows more than
    /// its failure status says.
    fn failure_detail(&self, e: EventH) -> Option<String> {
        let _ = e;
        None
    }

    /// Gives back the runtime's reference to `e`.
    fn release_event(&self, e: EventH);

    /// The execution status of `e` (see [`COMPLETE`]).
    fn event_status(&self, e: EventH) -> Result<i32>;

    /// Waits until `e` has ended, and returns 0 if it completed, else the
    /// back end's failure code.
    fn wait_event(&self, e: EventH) -> Result<i32>;

    /// A new user event of context `ctx`, not complete.
    fn create_user_event(&self, ctx: ContextH) -> Result<EventH>;

    /// Completes user event `e`: commands waiting for it may start.
    fn complete_user_event(&self, e: EventH) -> Result<()>;

    /// Calls `f(e, status, user)` once `e` has ended; an error when the
    /// back end cannot (the callback is then never called).
    fn on_end(&self, e: EventH, f: EndCallback, user: *mut c_void) -> Result<()>;

    /// Whether [`Driver::on_end`]'s callbacks come soon after the end, so
    /// that nobody need look at the event meanwhile (OpenCL drivers may
    /// call them milliseconds late).
    fn ends_called_soon(&self) -> bool {
        false
    }

    /// Timestamp `which` of `e`, a command of a queue that records them.
    fn timestamp(&self, e: EventH, which: Stamp) -> Result<u64>;

    /// The back end's own object for `of`, as a pointer-sized value that
    /// the back end keeps owning.
    fn native_object(&self, of: NativeOf) -> usize;

    /// Whether the back end records graphs (see [`Driver::record`]).
    fn records(&self) -> bool {
        false
    }

    /// Whether a recording can hold `n` (kernels, where the back end
    /// records at all; copies and fills where it says so).
    fn can_record(&self, n: &RecNode<'_>) -> bool {
        self.records() && matches!(n, RecNode::Nothing | RecNode::Kernel(..))
    }

    /// Records `nodes` (each one [`Driver::can_record`] takes) after
    /// `deps[i]` (indices of earlier nodes that do something) for queue
    /// `q`. `flags`: (enqueued again while pending, argument updates
    /// wanted). Returns the recording and each node's command for updates
    /// (empty where updates are not possible).
    fn record(
        &self,
        q: QueueH,
        flags: (bool, bool),
        deps: &[Vec<usize>],
        nodes: &[RecNode<'_>],
    ) -> Result<(RecordH, Vec<CommandH>)> {
        let _ = (q, flags, deps, nodes);
        Err(crate::core::error::Error::new(
            crate::core::error::Status::FeatureNotSupported,
            format!("the {} back end records no graphs", self.name()),
        ))
    }

    /// Page-locks `len` bytes of ordinary host memory at `ptr` for this
    /// back end's devices, where that makes copies to and from it faster;
    /// false where it does not (the memory stays as it was).
    fn pin_host(&self, ptr: usize, len: usize) -> bool {
        let _ = (ptr, len);
        false
    }

    /// Whether [`Driver::pin_host`] can lock memory now.
    fn can_pin_host(&self) -> bool {
        false
    }

    /// Undoes a [`Driver::pin_host`] that returned true.
    fn unpin_host(&self, ptr: usize) {
        let _ = ptr;
    }

    /// Whether a recording may be enqueued on any queue of its device,
    /// not only on the one it was recorded for.
    fn recordings_run_anywhere(&self) -> bool {
        false
    }

    /// Enqueues recording `r` on `q` after `waits`, its event to `ev` when
    /// one is asked for. `Ok(false)`: the back end refused it while an
    /// earlier enqueue of it is pending, and enqueued nothing.
    fn enqueue_recorded(
        &self,
        r: RecordH,
        q: QueueH,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<bool> {
        let _ = (r, q, waits, ev);
        Ok(false)
    }

    /// Sets argument `index` of command `c` of recording `r` (not
    /// pending) for its later enqueues; `false` where it cannot.
    fn update_recorded(&self, r: RecordH, c: CommandH, index: u32, arg: ArgSet<'_>) -> bool {
        let _ = (r, c, index, arg);
        false
    }

    /// Gives back recording `r` (kept by the back end until a pending
    /// enqueue of it ends).
    fn release_recorded(&self, r: RecordH) {
        let _ = r;
    }

    /// A new context over `devices`, all of this back end's platform.
    fn create_context(&self, devices: &[DeviceH]) -> Result<ContextH>;

    /// Gives back the runtime's reference to `ctx`; the back end keeps it
    /// for what still uses it.
    fn release_context(&self, ctx: ContextH);

    /// A new in-order queue of `dev` in `ctx`, recording timestamps when
    /// `timed`.
    fn create_queue(&self, ctx: ContextH, dev: DeviceH, timed: bool) -> Result<QueueH>;

    /// A new in-order queue of `dev` in `ctx` for the runtime's own copies
    /// of buffers' data; a back end may give an idle one it kept (such
    /// queues come and go with buffers).
    fn create_transfer_queue(&self, ctx: ContextH, dev: DeviceH) -> Result<QueueH> {
        self.create_queue(ctx, dev, false)
    }

    /// Gives back the runtime's reference to `q`; its commands still run.
    fn release_queue(&self, q: QueueH);

    /// Hands what was enqueued on `q` to the device.
    fn flush(&self, q: QueueH);

    /// Waits until every command of `q` has ended.
    fn finish(&self, q: QueueH) -> Result<()>;

    /// Enqueues on `q` a command that ends once `waits` and the commands
    /// before it on `q` have; returns its event.
    fn enqueue_marker(&self, q: QueueH, waits: &[EventH]) -> Result<EventH>;

    /// Allocates `size` bytes of `kind` unified shared memory in `ctx`,
    /// reached as `usm` says (`dev`: the device of device and shared
    /// memory; `align`: 0 for the back end's own; `atomics`: host and
    /// shared memory that device atomics work on). 0 when the back end
    /// gave no memory without saying why.
    #[allow(clippy::too_many_arguments)]
    fn usm_alloc(
        &self,
        ctx: ContextH,
        usm: UsmStrategy,
        kind: AllocKind,
        dev: Option<DeviceH>,
        size: usize,
        align: usize,
        atomics: bool,
    ) -> Result<usize>;

    /// Whether freed device allocations are worth keeping for reuse even
    /// where the runtime would not otherwise (allocating costs the back
    /// end far more than reusing).
    fn pools_device_allocations(&self) -> bool {
        false
    }

    /// Frees what [`Driver::usm_alloc`] gave at `ptr`, once no command
    /// uses it.
    fn usm_free(&self, ctx: ContextH, usm: UsmStrategy, ptr: usize);

    /// Builds a program for `devices` (each with the label messages name
    /// it by) in `ctx`. A failed build is `Status::BuildFailure`, its
    /// message holding each device's build log.
    fn build_program(
        &self,
        ctx: ContextH,
        devices: &[(DeviceH, String)],
        input: ProgramInput<'_>,
        options: &str,
    ) -> Result<ProgramH>;

    /// Gives back the runtime's reference to `p`.
    fn release_program(&self, p: ProgramH);

    /// The binaries of `p`, one per device it was built for, in order.
    fn program_binaries(&self, p: ProgramH) -> Result<Vec<Vec<u8>>>;

    /// The build log of `p` for `d` (empty when there is none).
    fn build_log(&self, p: ProgramH, d: DeviceH) -> String;

    /// The names of the kernels in `p`.
    fn kernel_names(&self, p: ProgramH) -> Vec<String>;

    /// Makes kernel `name` of `p`, able to reach memory as `usm` says:
    /// the kernel, its number of arguments and its name as the program
    /// spells it. A name the program lacks is `Status::KernelNotFound`.
    fn create_kernel(
        &self,
        p: ProgramH,
        name: &str,
        usm: UsmStrategy,
    ) -> Result<(KernelH, u32, String)>;

    /// What `k` needs and prefers on `d`.
    fn kernel_facts(&self, k: KernelH, d: DeviceH) -> KernelFacts;

    /// Per argument of kernel `name` of `p` (as the program spells it),
    /// the index of a hidden parameter after the kernel's own that holds a
    /// byte offset added to that pointer argument, set to 0 when a kernel
    /// is made; empty where the kernel has none. With it, a memory object
    /// and an offset stand for any address inside the object.
    fn kernel_offsets(&self, _p: ProgramH, _name: &str) -> Vec<Option<u32>> {
        Vec::new()
    }

    /// Gives back the runtime's reference to `k`.
    fn release_kernel(&self, k: KernelH);

    /// A new memory object of `size` bytes in `ctx`.
    fn create_mem(&self, ctx: ContextH, size: usize) -> Result<MemH>;

    /// A memory object over the bytes `offset..offset + size` of `m`.
    fn create_sub_mem(&self, m: MemH, offset: usize, size: usize) -> Result<MemH>;

    /// A memory object whose storage is the unified shared memory at
    /// `ptr` (`size` bytes), where the back end makes one.
    fn create_view(&self, ctx: ContextH, ptr: usize, size: usize) -> Option<MemH>;

    /// Enqueues a copy of `len` bytes from `src` to `dst`; at least one
    /// side is a memory object. `blocking`: returns once the copy is done.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_copy(
        &self,
        q: QueueH,
        dst: Side,
        src: Side,
        len: usize,
        blocking: bool,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()>;

    /// Enqueues a copy of `region` (bytes, rows, slices) from `src` to
    /// `dst`; at least one side is a memory object.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_copy_rect(
        &self,
        q: QueueH,
        dst: &RectSide,
        src: &RectSide,
        region: [usize; 3],
        blocking: bool,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()>;

    /// Enqueues a fill of `len` bytes of `m` from byte `offset` with
    /// `pattern`.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_fill_mem(
        &self,
        q: QueueH,
        m: MemH,
        offset: usize,
        pattern: &[u8],
        len: usize,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()>;

    /// Sets argument `index` of `k` (pointers reached as `usm` says). A
    /// failure's message is only the back end's reason, for the caller to
    /// put in context; an argument the kernel cannot take is
    /// `Status::KernelArguments`.
    fn set_kernel_arg(
        &self,
        k: KernelH,
        usm: UsmStrategy,
        index: u32,
        arg: ArgSet<'_>,
    ) -> Result<()>;

    /// Takes another reference to memory object `m`.
    fn retain_mem(&self, m: MemH);

    /// Gives back a reference to memory object `m`.
    fn release_mem(&self, m: MemH);

    /// Enqueues `k` (named `name`), with the arguments set on it now, over
    /// `range` on `q`. `local_args`: it takes group-local memory
    /// arguments, so that running out of resources is reported as
    /// running out of local memory.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_kernel(
        &self,
        q: QueueH,
        k: KernelH,
        name: &str,
        local_args: bool,
        range: &NdRange,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()>;

    /// Whether [`Driver::enqueue_kernel_with`] launches a kernel with
    /// arguments given for that launch alone, so that a launch need not
    /// set them on the kernel first.
    fn launch_takes_args(&self) -> bool {
        false
    }

    /// Whether commands reach the driver later, from a thread of Syrah's
    /// (see `handoff.rs`): a copy between device allocations said to be
    /// so ([`HostEnd::Device`]) then goes the same way.
    fn hands_off(&self) -> bool {
        false
    }

    /// Enqueues `k` (named `name`) over `range` on `q` with `args`, for
    /// this launch alone: the arguments set on the kernel stay as they
    /// are. A back end that cannot ([`Driver::launch_takes_args`] false)
    /// refuses it.
    #[allow(clippy::too_many_arguments)]
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
        let _ = (q, k, args, range, waits, ev);
        Err(Error::new(
            Status::FeatureNotSupported,
            format!(
                "the {} back end sets a kernel's arguments before launching '{name}'",
                self.name()
            ),
        ))
    }

    /// Enqueues on `q` a copy of `size` bytes from `src` to `dst`, each
    /// unified shared memory reached as `usm` says, or host memory; `ev`
    /// receives the command's event when given. `host` is the side the
    /// caller vouches is host memory (a buffer's host storage), if either:
    /// a back end that would ask its driver what that memory is may skip
    /// asking.
    #[allow(clippy::too_many_arguments)]
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
    ) -> Result<()>;

    /// Enqueues a fill of `size` bytes at `dst` with `pattern` (whose size
    /// the back end takes, `dst` aligned to it).
    #[allow(clippy::too_many_arguments)]
    fn enqueue_fill(
        &self,
        q: QueueH,
        usm: UsmStrategy,
        dst: usize,
        pattern: &[u8],
        size: usize,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()>;

    /// Whether the back end can move shared memory to a device.
    fn can_migrate(&self, usm: UsmStrategy) -> bool;

    /// Enqueues a move of the shared memory `[ptr, ptr + size)` to `q`'s
    /// device. `Ok(false)`: the back end leaves this memory where it is
    /// and enqueued nothing.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_migrate(
        &self,
        q: QueueH,
        usm: UsmStrategy,
        ptr: usize,
        size: usize,
        waits: &[EventH],
        ev: &mut EventH,
    ) -> Result<bool>;

    /// Whether the back end takes advice on memory use.
    fn can_advise(&self, usm: UsmStrategy) -> bool;

    /// Enqueues `advice` for `[ptr, ptr + size)`. `Ok(false)`: the back
    /// end does not know this advice and enqueued nothing.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_advise(
        &self,
        q: QueueH,
        usm: UsmStrategy,
        ptr: usize,
        size: usize,
        advice: u32,
        waits: &[EventH],
        ev: &mut EventH,
    ) -> Result<bool>;
}
