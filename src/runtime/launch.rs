//! Kernel launches.

use super::context::Context;
use super::event::Event;
use super::program::{ArgState, Kernel, KernelDeviceInfo, SetArg};
use super::queue::{LanePos, Queue, Submitted};
use crate::backend::{EventH, QueueH};
use crate::core::aspects::UsmStrategy;
use crate::core::error::{Error, Result, Status};
use crate::core::launch::{check_local_memory, NdRange};
use smallvec::SmallVec;
use std::sync::Arc;

/// One kernel argument, as the back ends take it: bytes by value, a USM
/// address (0: a null pointer), group-local memory of a size, or a memory
/// object (a buffer's allocation on a device without USM).
pub use crate::backend::ArgSet as Arg;

/// Whether `SYRAH_VALIDATE=1` asked for the expensive checks.
pub fn validating() -> bool {
    static V: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *V.get_or_init(|| std::env::var("SYRAH_VALIDATE").is_ok_and(|v| !v.is_empty() && v != "0"))
}

impl Queue {
    /// The checks of a launch that need no arguments' values: context,
    /// shape and argument count. Done before a command group moves data.
    pub fn precheck(
        &self,
        kernel: &Kernel,
        range: &NdRange,
        nargs: usize,
    ) -> Result<KernelDeviceInfo> {
        if kernel.ctx.id != self.ctx.id {
            return Err(Error::new(
                Status::WrongContext,
                format!(
                    "kernel '{}' belongs to context {}, the queue to context {}",
                    kernel.name, kernel.ctx.id, self.ctx.id
                ),
            ));
        }
        let kinfo = kernel.info_for(self.device)?;
        range.validate(&self.device.limits, kinfo.work_group_size)?;
        if nargs != kernel.num_args as usize {
            return Err(Error::new(
                Status::KernelArguments,
                format!(
                    "kernel '{}' takes {} argument{}, {} given",
                    kernel.name,
                    kernel.num_args,
                    if kernel.num_args == 1 { "" } else { "s" },
                    nargs
                ),
            ));
        }
        Ok(kinfo)
    }

    /// Launches `kernel` over `range` with `args` after `deps` and after
    /// the commands of this queue at `on_lanes` (see
    /// [`Queue::prepare_accesses_at`]); `kinfo` is what
    /// [`Queue::precheck`] returned for this kernel, range and arguments.
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &self,
        kernel: &Kernel,
        kinfo: &KernelDeviceInfo,
        range: &NdRange,
        args: &[Arg<'_>],
        deps: &[Arc<Event>],
        on_lanes: &[LanePos],
        keep: super::queue::Keep,
        want_event: bool,
    ) -> Result<Submitted> {
        let mut dynamic = Vec::new();
        for (i, a) in args.iter().enumerate() {
            match a {
                Arg::Bytes([]) => {
                    return Err(Error::new(
                        Status::KernelArguments,
                        format!(
                            "argument {i} of kernel '{}' is a value of 0 bytes",
                            kernel.name
                        ),
                    ))
                }
                Arg::Local(0) => {
                    return Err(Error::new(
                        Status::KernelArguments,
                        format!(
                            "argument {i} of kernel '{}' asks for 0 bytes of local memory",
                            kernel.name
                        ),
                    ))
                }
                Arg::Local(n) => dynamic.push(*n),
                // A null pointer is passed as OpenCL's null global pointer,
                // on every device.
                Arg::Usm(0) => {}
                Arg::Usm(p) => {
                    if self.ctx.strategy == UsmStrategy::None {
                        return Err(Error::new(
                            Status::FeatureNotSupported,
                            format!(
                                "argument {i} of kernel '{}' is a USM pointer but device {} has no USM",
                                kernel.name,
                                self.device.label()
                            ),
                        ));
                    }
                    if validating() {
                        let reg = self.ctx.registry.lock();
                        if reg.find(*p).is_none() {
                            return Err(Error::new(
                                Status::InvalidPointer,
                                format!(
                                    "argument {i} of kernel '{}' ({p:#x}) is not inside a USM \
                                     allocation of the queue's context",
                                    kernel.name
                                ),
                            ));
                        }
                    }
                }
                Arg::Bytes(_) | Arg::Mem(_) | Arg::MemAt(..) => {}
            }
        }
        check_local_memory(
            &kernel.name,
            kinfo.static_local_mem,
            &dynamic,
            self.device.limits.local_mem_size,
        )?;
        if range.is_empty() {
            let mut all: SmallVec<[Arc<Event>; 8]> = deps.iter().cloned().collect();
            for p in on_lanes {
                all.extend(p.event()?);
            }
            return self.marker(&all, &kernel.what).map(Submitted::Event);
        }
        let driver = self.ctx.platform.driver;
        if driver.launch_takes_args() {
            // The arguments go with the launch: nothing is set on the
            // kernel, so nothing needs its lock.
            let (k, name) = (kernel.handle, &kernel.name);
            let what = || kernel.what.clone();
            return self.submit_quiet(deps, on_lanes, what, keep, want_event, |q, wl, ev| {
                driver.enqueue_kernel_with(q, k, name, args, range, wl, ev)
            });
        }
        let mut held = kernel.lock.lock();
        set_args(&self.ctx, kernel, &mut held, args)?;
        let local_args = !dynamic.is_empty();
        let what = || kernel.what.clone();
        self.submit_quiet(deps, on_lanes, what, keep, want_event, |q, wl, ev| {
            // The arguments were set under the kernel's lock, still held.
            enqueue_ndrange(q, kernel, range, local_args, wl, ev)
        })
    }
}

/// Sets `args` on `kernel` (whose lock the caller holds, `st` being what
/// it guards): values, local memory, memory objects (Syrah's own, whose
/// releases `context::release_arg_mem` counts) and USM pointers through
/// the context's USM strategy, or views of them where the context passes
/// views (see `arg_views.rs`; the context keeps those). A memory object or
/// value already set is not set again.
pub(crate) fn set_args(
    ctx: &Arc<Context>,
    kernel: &Kernel,
    st: &mut ArgState,
    args: &[Arg<'_>],
) -> Result<()> {
    let driver = ctx.platform.driver;
    // A memory object for an argument that was an SVM pointer needs a new
    // kernel object where buffers live in memory objects beside SVM.
    if ctx.buffers_on_mem && ctx.strategy != UsmStrategy::None {
        let svm_then_mem = args.iter().enumerate().any(|(i, a)| {
            matches!(a, Arg::Mem(_) | Arg::MemAt(..))
                && 1u64
                    .checked_shl(i as u32)
                    .is_some_and(|bit| st.svm & bit != 0)
        });
        if svm_then_mem {
            kernel.renew(st)?;
        }
    }
    let k = kernel.handle_now();
    let views_on = ctx.arg_views_on();
    let generation = super::context::mem_generation();
    if st.generation != generation {
        // A memory object was released: one set here may be gone, and its
        // handle given to another.
        st.set
            .iter_mut()
            .filter(|s| matches!(s, SetArg::Mem { .. }))
            .for_each(|s| *s = SetArg::Unknown);
        st.generation = generation;
    }
    for (i, a) in args.iter().enumerate() {
        let a = &hidden_offset(ctx, kernel, st, i, *a)?;
        // Indices past 64 have no bits: they keep pointers.
        let bit = 1u64.checked_shl(i as u32).unwrap_or(0);
        let now = st.set.get(i).copied().unwrap_or_default();
        let (a, viewed) = match *a {
            Arg::Usm(p) if p != 0 && views_on && bit != 0 && st.svm & bit == 0 => {
                if matches!(now, SetArg::Mem { viewed, .. } if viewed == p) {
                    // The view of `p` set last time, still the context's.
                    continue;
                }
                match ctx.arg_view(p) {
                    Some(m) => (Arg::Mem(m), p),
                    None => {
                        st.svm |= bit;
                        (Arg::Usm(p), 0)
                    }
                }
            }
            Arg::Usm(p) => {
                if p != 0 {
                    st.svm |= bit;
                }
                (Arg::Usm(p), 0)
            }
            a => (a, 0),
        };
        let wanted = match a {
            Arg::Mem(m) => Some(SetArg::Mem { viewed, mem: m.0 }),
            Arg::Bytes(b) => SetArg::value(b),
            _ => None,
        };
        if wanted.is_some_and(|w| w == now) {
            continue;
        }
        // Whatever happens next, argument `i` is no longer what was set.
        if let Some(s) = st.set.get_mut(i) {
            *s = SetArg::Unknown;
        }
        if let Err(mut e) = driver.set_kernel_arg(k, ctx.strategy, i as u32, a) {
            e.message = format!(
                "setting argument {i} ({}) of kernel '{}' failed: {}",
                a.describe(),
                kernel.name,
                e.message
            );
            return Err(e);
        }
        if let (Some(w), Some(s)) = (wanted, st.set.get_mut(i)) {
            *s = w;
        }
    }
    Ok(())
}

/// Sets the hidden offset of argument `i` of `kernel` (where it has one)
/// to what `a` says (0 unless a memory object at an offset), and returns
/// the argument itself to set.
fn hidden_offset<'a>(
    ctx: &Context,
    kernel: &Kernel,
    st: &mut ArgState,
    i: usize,
    a: Arg<'a>,
) -> Result<Arg<'a>> {
    let off = match a {
        Arg::MemAt(_, off) => off,
        _ => 0,
    };
    match kernel.offsets.get(i).copied().flatten() {
        Some(hidden) if st.offsets.get(i) != Some(&off) => {
            let bytes = (off as u64).to_ne_bytes();
            ctx.platform
                .driver
                .set_kernel_arg(kernel.handle_now(), ctx.strategy, hidden, Arg::Bytes(&bytes))
                .map_err(|mut e| {
                    e.message = format!(
                        "setting the offset ({off} bytes) of argument {i} of kernel '{}' failed: {}",
                        kernel.name, e.message
                    );
                    e
                })?;
            if let Some(o) = st.offsets.get_mut(i) {
                *o = off;
            }
        }
        Some(_) => {}
        None if off != 0 => {
            return Err(Error::new(
                Status::Internal,
                format!(
                    "argument {i} of kernel '{}' has no hidden offset for an accessor {off} bytes into its buffer",
                    kernel.name
                ),
            ))
        }
        None => {}
    }
    Ok(match a {
        Arg::MemAt(m, _) => Arg::Mem(m),
        a => a,
    })
}

/// Enqueues `kernel` (its arguments already set) over `range` on `q`
/// after `wl`; `ev` receives its event when given. `local_args`: it takes
/// group-local memory arguments.
pub(crate) fn enqueue_ndrange(
    q: QueueH,
    kernel: &Kernel,
    range: &NdRange,
    local_args: bool,
    wl: &[EventH],
    ev: Option<&mut EventH>,
) -> Result<()> {
    kernel.ctx.platform.driver.enqueue_kernel(
        q,
        kernel.handle_now(),
        &kernel.name,
        local_args,
        range,
        wl,
        ev,
    )
}
