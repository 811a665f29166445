//! The CUDA back end's programs (NVIDIA OpenCL's PTX, translated and
//! loaded on each device) and kernels (a function per device and the
//! arguments set on it), with what a launch of them needs: arguments
//! checked against the kernel's, and a work-group shape where the caller
//! gave none, and the enqueueing of a launch.

use super::hold::command_or_hold;
use super::loader::api;
use super::module::{launch, Arg, Function, LaunchStream, Module, Params, Shape};
use super::ptx::{Entry, Param};
use super::state::{make_current, Ctx};
use crate::backend::{ArgSet, EventH, MemH, QueueH};
use crate::core::error::{Error, Result, Status};
use crate::core::launch::NdRange;
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::sync::Arc;

/// A program: the PTX it was built from (one per device) and the module
/// loaded from it on each device.
pub struct Prog {
    pub ptx: Vec<Vec<u8>>,
    pub modules: Vec<(i32, Module)>,
}

impl Prog {
    /// Loads `ptx` on each of `ordinals` of `ctx`; a device that refuses
    /// it fails the build, with the reason and the device's label.
    pub fn build(ctx: &Ctx, devices: &[(i32, String)], ptx: &[u8]) -> Result<Prog> {
        let api = api()?;
        let text = String::from_utf8_lossy(ptx)
            .trim_end_matches('\0')
            .to_string();
        let mut modules = Vec::with_capacity(devices.len());
        for (ordinal, label) in devices {
            let dev = ctx.device(*ordinal).ok_or_else(|| {
                Error::invalid(format!("device {label} is not in the program's context"))
            })?;
            make_current(api, dev.ctx)?;
            let m = Module::load(api, &text).map_err(|e| {
                Error::new(
                    e.status,
                    format!("building for device {label}: {}", e.message),
                )
            })?;
            modules.push((*ordinal, m));
        }
        Ok(Prog {
            ptx: vec![ptx.to_vec(); devices.len()],
            modules,
        })
    }

    /// The kernels' names, in the order the module declares them.
    pub fn kernel_names(&self) -> Vec<String> {
        self.modules
            .first()
            .map(|(_, m)| m.entries.iter().map(|e| e.name.clone()).collect())
            .unwrap_or_default()
    }
}

/// One argument as set on a kernel.
#[derive(Clone, Debug)]
enum Val {
    Bytes(Vec<u8>),
    Pointer(u64),
    Local(usize),
}

/// A kernel: its function on each device of its program, and the
/// arguments set on it (each kept until set again).
pub struct Kern {
    pub prog: Arc<Prog>,
    pub name: String,
    pub funcs: Vec<(i32, Arc<Function>)>,
    pub entry: Entry,
    args: Mutex<Vec<Option<Val>>>,
}

impl Kern {
    /// Kernel `name` of `prog`.
    pub fn create(prog: Arc<Prog>, name: &str) -> Result<Kern> {
        let mut funcs = Vec::with_capacity(prog.modules.len());
        for (ordinal, m) in &prog.modules {
            funcs.push((*ordinal, Arc::new(m.function(name)?)));
        }
        let entry = funcs.first().map(|(_, f)| f.entry.clone()).ok_or_else(|| {
            Error::new(
                Status::KernelNotFound,
                format!("no kernel named '{name}': the program has no device"),
            )
        })?;
        Ok(Kern {
            args: Mutex::new(vec![None; entry.params.len()]),
            prog,
            name: name.to_string(),
            funcs,
            entry,
        })
    }

    /// Sets argument `index` (`ptr_of` turns a memory object into its
    /// address). A value the kernel cannot take is
    /// `Status::KernelArguments`, with only the reason.
    pub fn set(
        &self,
        index: u32,
        arg: ArgSet<'_>,
        ptr_of: impl Fn(crate::backend::MemH) -> u64,
    ) -> Result<()> {
        let v = match arg_for(&self.entry, index as usize, arg, ptr_of)? {
            Arg::Bytes(b) => Val::Bytes(b.to_vec()),
            Arg::Pointer(p) => Val::Pointer(p),
            Arg::Local(n) => Val::Local(n),
        };
        self.args.lock()[index as usize] = Some(v);
        Ok(())
    }

    /// The function for device `ordinal`.
    fn function(&self, ordinal: i32) -> Result<&Arc<Function>> {
        self.funcs
            .iter()
            .find(|(o, _)| *o == ordinal)
            .map(|(_, f)| f)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "kernel '{}' was not built for the queue's device",
                    self.name
                ))
            })
    }

    /// The function for device `ordinal`, and the arguments set now (each
    /// must be).
    pub fn prepare(&self, ordinal: i32) -> Result<(Arc<Function>, ArgList)> {
        let f = self.function(ordinal)?;
        let args = self.args.lock();
        let mut out = ArgList::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            out.push(match a {
                Some(Val::Bytes(b)) => OwnedArg::Bytes(SmallVec::from_slice(b)),
                Some(Val::Pointer(p)) => OwnedArg::Pointer(*p),
                Some(Val::Local(n)) => OwnedArg::Local(*n),
                None => {
                    return Err(Error::new(
                        Status::KernelArguments,
                        format!("argument {i} of kernel '{}' is not set", self.name),
                    ))
                }
            });
        }
        Ok((f.clone(), out))
    }

    /// The function for device `ordinal` and the parameters of a launch of
    /// it over `shape` with the arguments set now (each must be).
    pub fn launch_as_set(&self, ordinal: i32, shape: &Shape) -> Result<(Arc<Function>, Params)> {
        let (f, args) = self.prepare(ordinal)?;
        let list: SmallVec<[Arg; 8]> = args.iter().map(|a| a.as_arg()).collect();
        let params = Params::new(&f.entry, &list, shape)?;
        Ok((f, params))
    }

    /// Enqueues a launch of `f` (this kernel's function for `q`'s device)
    /// with `params` over `shape` on `q`.
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue(
        &self,
        q: QueueH,
        f: &Arc<Function>,
        params: &Params,
        shape: Shape,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        command_or_hold(
            q,
            waits,
            ev,
            |api, s, _| launch(api, f, params, shape, LaunchStream(s.raw)),
            || {
                // The program stays loaded while the launch is held.
                let (prog, f, params) = (self.prog.clone(), f.clone(), params.clone());
                Box::new(move |api, s, _| {
                    let r = launch(api, &f, &params, shape, LaunchStream(s.raw));
                    drop(prog);
                    r
                })
            },
        )
        .map_err(|e| {
            Error::new(
                e.status,
                format!("launching kernel '{}': {}", self.name, e.message),
            )
        })
    }

    /// The function for device `ordinal` and the parameters of one launch
    /// of it with `args` over `shape`, leaving the arguments set on the
    /// kernel as they are. An argument the kernel cannot take is named
    /// with its index, as setting it would be.
    pub fn launch_with(
        &self,
        ordinal: i32,
        args: &[ArgSet<'_>],
        shape: &Shape,
        ptr_of: impl Fn(crate::backend::MemH) -> u64,
    ) -> Result<(&Arc<Function>, Params)> {
        let f = self.function(ordinal)?;
        let params = Params::build(&f.entry, args.len(), shape, |i| {
            arg_for(&self.entry, i, args[i], &ptr_of).map_err(|e| {
                Error::new(
                    e.status,
                    format!(
                        "setting argument {i} ({}) of kernel '{}' failed: {}",
                        args[i].describe(),
                        self.name,
                        e.message
                    ),
                )
            })
        })?;
        Ok((f, params))
    }
}

/// Argument `i` of a kernel taking `entry`'s parameters, given as `arg`
/// (`ptr_of` turns a memory object into its address). A value the kernel
/// cannot take is `Status::KernelArguments`, with only the reason.
fn arg_for<'a>(
    entry: &Entry,
    i: usize,
    arg: ArgSet<'a>,
    ptr_of: impl Fn(crate::backend::MemH) -> u64,
) -> Result<Arg<'a>> {
    let p = entry.params.get(i).ok_or_else(|| {
        Error::new(
            Status::KernelArguments,
            format!("the kernel takes {} arguments", entry.params.len()),
        )
    })?;
    let wrong = |what: &str| Error::new(Status::KernelArguments, what.to_string());
    Ok(match (p, arg) {
        (Param::Value(n), ArgSet::Bytes(b)) if *n == b.len() => Arg::Bytes(b),
        (Param::Value(n), ArgSet::Bytes(b)) => {
            return Err(wrong(&format!(
                "it takes {n} bytes by value, {} were given",
                b.len()
            )))
        }
        (Param::Pointer, ArgSet::Bytes(b)) if b.len() == 8 => {
            Arg::Pointer(u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))
        }
        (Param::Pointer | Param::Value(8), ArgSet::Usm(a)) => Arg::Pointer(a as u64),
        (Param::Pointer | Param::Value(8), ArgSet::Mem(m)) => Arg::Pointer(ptr_of(m)),
        (Param::Pointer | Param::Value(8), ArgSet::MemAt(m, off)) => {
            Arg::Pointer(ptr_of(m).wrapping_add(off as u64))
        }
        (Param::Local(_), ArgSet::Local(n)) if n > 0 => Arg::Local(n),
        (Param::Local(_), ArgSet::Local(_)) => return Err(wrong("group-local memory of 0 bytes")),
        (Param::Local(_), _) => return Err(wrong("it takes group-local memory (a size)")),
        (_, ArgSet::Local(_)) => return Err(wrong("it takes no group-local memory")),
        (Param::Value(n), _) => return Err(wrong(&format!("it takes {n} bytes by value"))),
        (Param::Pointer, _) => return Err(wrong("it takes a device address")),
    })
}

/// A launch's arguments, kept inline for the usual few.
pub type ArgList = SmallVec<[OwnedArg; 8]>;

/// An argument copied out of a kernel for one launch.
pub enum OwnedArg {
    Bytes(SmallVec<[u8; 16]>),
    Pointer(u64),
    Local(usize),
}

impl OwnedArg {
    /// `arg` kept beyond the call that gave it, a memory object as its
    /// address (`ptr_of`).
    pub fn of(arg: ArgSet<'_>, ptr_of: impl Fn(MemH) -> u64) -> OwnedArg {
        match arg {
            ArgSet::Bytes(b) => OwnedArg::Bytes(b.into()),
            ArgSet::Local(n) => OwnedArg::Local(n),
            ArgSet::Usm(p) => OwnedArg::Pointer(p as u64),
            ArgSet::Mem(m) => OwnedArg::Pointer(ptr_of(m)),
            ArgSet::MemAt(m, off) => OwnedArg::Pointer(ptr_of(m).wrapping_add(off as u64)),
        }
    }

    pub fn as_arg(&self) -> Arg<'_> {
        match self {
            OwnedArg::Bytes(b) => Arg::Bytes(b),
            OwnedArg::Pointer(p) => Arg::Pointer(*p),
            OwnedArg::Local(n) => Arg::Local(*n),
        }
    }
}

/// The CUDA shape of a launch of kernel `name` over `range` (its groups
/// chosen here where the range gives none).
pub fn shape_of(range: &NdRange, name: &str) -> Result<Shape> {
    let local = match range.local {
        Some(l) => l,
        None => chosen_local(range.dims, range.global),
    };
    let g = groups(range.global, local, range.dims)?;
    let u32_of = |v: usize, what: &str| {
        u32::try_from(v)
            .map_err(|_| Error::invalid(format!("{what} {v} of kernel '{name}' is above 2^32")))
    };
    Ok(Shape {
        groups: g,
        local: [
            u32_of(local[0], "work-group size")?,
            u32_of(local[1], "work-group size")?,
            u32_of(local[2], "work-group size")?,
        ],
        offset: [
            u32_of(range.offset[0], "offset")?,
            u32_of(range.offset[1], "offset")?,
            u32_of(range.offset[2], "offset")?,
        ],
        dims: range.dims,
    })
}

thread_local! {
    /// The last range given no work-group size on this thread, and the
    /// size chosen for it (dimension count 0: none yet).
    static LAST_CHOSEN: std::cell::Cell<(u32, [usize; 3], [usize; 3])> =
        const { std::cell::Cell::new((0, [0; 3], [0; 3])) };
}

/// [`auto_local`] with CUDA's limits, the last answer kept: a program
/// launches the same range again and again, and a size without a divisor
/// near the limit (a prime) costs a few hundred divisions per dimension.
fn chosen_local(dims: u32, global: [usize; 3]) -> [usize; 3] {
    let (d, g, l) = LAST_CHOSEN.with(|c| c.get());
    if d == dims && g == global {
        return l;
    }
    let l = auto_local(dims, global, 256, [1024, 1024, 64]);
    LAST_CHOSEN.with(|c| c.set((dims, global, l)));
    l
}

/// Work-items per group for a range of `global` items in `dims`
/// dimensions when the caller gave none: in each dimension the largest
/// divisor of its size that keeps the group within `max_items` in all
/// and `max_dim` in that dimension.
pub fn auto_local(
    dims: u32,
    global: [usize; 3],
    max_items: usize,
    max_dim: [usize; 3],
) -> [usize; 3] {
    let mut local = [1usize; 3];
    let mut room = max_items.max(1);
    for d in 0..(dims as usize).min(3) {
        let cap = room.min(max_dim[d].max(1)).min(global[d].max(1));
        let l = (1..=cap).rev().find(|l| global[d] % l == 0).unwrap_or(1);
        local[d] = l;
        room /= l;
    }
    local
}

/// The number of groups in each dimension, or why `local` does not
/// divide `global`.
pub fn groups(global: [usize; 3], local: [usize; 3], dims: u32) -> Result<[u32; 3]> {
    let mut g = [1u32; 3];
    for d in 0..(dims as usize).min(3) {
        if local[d] == 0 || global[d] % local[d] != 0 {
            return Err(Error::new(
                Status::InvalidWorkGroup,
                format!(
                    "work-group size {} does not divide the global size {} in dimension {d}",
                    local[d], global[d]
                ),
            ));
        }
        g[d] = u32::try_from(global[d] / local[d]).map_err(|_| {
            Error::new(
                Status::InvalidWorkGroup,
                format!("{} groups in dimension {d}", global[d] / local[d]),
            )
        })?;
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automatic_groups_divide_the_range() {
        assert_eq!(auto_local(1, [1000, 1, 1], 256, [1024; 3]), [250, 1, 1]);
        assert_eq!(auto_local(1, [1 << 20, 1, 1], 256, [1024; 3]), [256, 1, 1]);
        assert_eq!(auto_local(2, [64, 64, 1], 256, [1024; 3]), [64, 4, 1]);
        assert_eq!(auto_local(3, [7, 5, 3], 256, [1024, 1024, 64]), [7, 5, 3]);
        assert_eq!(auto_local(1, [509, 1, 1], 256, [1024; 3]), [1, 1, 1]);
    }

    #[test]
    fn the_kept_group_size_is_the_one_for_the_range_asked() {
        // Alternating ranges, and the same global size in fewer dimensions.
        let ranges = [
            (1, [1000, 1, 1]),
            (1, [509, 1, 1]),
            (1, [1000, 1, 1]),
            (2, [64, 64, 1]),
            (1, [64, 64, 1]),
            (1, [64, 64, 1]),
            (3, [7, 5, 3]),
        ];
        for (dims, global) in ranges {
            assert_eq!(
                chosen_local(dims, global),
                auto_local(dims, global, 256, [1024, 1024, 64]),
                "{dims} dimensions, {global:?}"
            );
        }
    }

    #[test]
    fn groups_are_counted_or_refused() {
        assert_eq!(
            groups([1024, 8, 1], [256, 2, 1], 2).map_err(|e| e.message),
            Ok([4, 4, 1])
        );
        let e = groups([1000, 1, 1], [256, 1, 1], 1)
            .err()
            .map(|e| (e.status, e.message));
        assert_eq!(
            e,
            Some((
                Status::InvalidWorkGroup,
                "work-group size 256 does not divide the global size 1000 in dimension 0".into()
            ))
        );
    }
}
