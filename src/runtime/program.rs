//! Programs (OpenCL C source, SPIR-V, binaries) and kernels.

use super::build_cache::{ProgramInner, ProgramKey, ProgramKind};
use super::context::Context;
use super::platform::Device;
use crate::backend::{KernelH, ProgramInput};
use crate::core::error::{Error, Result, Status};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A program handle: its context and the (possibly shared) build.
pub struct Program {
    pub ctx: Arc<Context>,
    pub inner: Arc<ProgramInner>,
}

impl Program {
    /// Builds (or finds in the context's cache) a program for `devices`
    /// (all of the context's devices when empty).
    pub fn build(
        ctx: &Arc<Context>,
        kind: ProgramKind,
        bytes: &[u8],
        options: &str,
        devices: &[&'static Device],
    ) -> Result<Program> {
        let devices: Vec<&'static Device> = if devices.is_empty() {
            ctx.devices.clone()
        } else {
            devices.to_vec()
        };
        let mut idx = Vec::with_capacity(devices.len());
        for d in &devices {
            idx.push(ctx.require_device(d)?);
        }
        if bytes.is_empty() {
            return Err(Error::invalid(match kind {
                ProgramKind::Source => "program source is empty",
                ProgramKind::Il => "SPIR-V module is empty (0 bytes)",
                ProgramKind::Binary => "program binary is empty (0 bytes)",
            }));
        }
        let key = ProgramKey {
            kind,
            bytes: bytes.to_vec(),
            options: options.to_string(),
            devices: idx,
        };
        if let Some(p) = ctx.programs.lock().get(&key) {
            return Ok(Program {
                ctx: ctx.clone(),
                inner: p.clone(),
            });
        }
        let inner = Arc::new(create_and_build(ctx, kind, bytes, options, &devices)?);
        ctx.programs.lock().insert(key, inner.clone());
        Ok(Program {
            ctx: ctx.clone(),
            inner,
        })
    }

    /// The binary built for `device`.
    pub fn binary(&self, device: &Device) -> Result<Vec<u8>> {
        let pos = self
            .inner
            .devices
            .iter()
            .position(|d| std::ptr::eq(*d, device))
            .ok_or_else(|| {
                Error::new(
                    Status::WrongContext,
                    format!("the program was not built for device {}", device.label()),
                )
            })?;
        let bins = self.inner.driver.program_binaries(self.inner.handle)?;
        bins.into_iter().nth(pos).ok_or_else(|| {
            Error::new(
                Status::Internal,
                "program reports fewer binaries than devices",
            )
        })
    }

    pub fn build_log(&self, device: &Device) -> Result<String> {
        if !self.inner.devices.iter().any(|d| std::ptr::eq(*d, device)) {
            return Err(Error::new(
                Status::WrongContext,
                format!("the program was not built for device {}", device.label()),
            ));
        }
        Ok(self
            .inner
            .driver
            .build_log(self.inner.handle, device.handle()))
    }

    pub fn kernel_names(&self) -> Vec<String> {
        self.inner.driver.kernel_names(self.inner.handle)
    }
}

fn create_and_build(
    ctx: &Context,
    kind: ProgramKind,
    bytes: &[u8],
    options: &str,
    devices: &[&'static Device],
) -> Result<ProgramInner> {
    let compiled;
    let input = match kind {
        ProgramKind::Source if devices.iter().any(|d| d.compiler.is_some()) => {
            let (binary, cached) = compile_on_twin(devices, bytes, options, true)?;
            if cached {
                // A kept binary that no longer builds (a changed driver
                // reporting the same version, a damaged file) is dropped
                // and the source compiled again.
                match build(ctx, ProgramInput::Binary(&binary), options, devices) {
                    Ok(built) => return Ok(built),
                    Err(e) => {
                        let fresh = compile_on_twin(devices, bytes, options, false)?.0;
                        // The same binary failing again would fail alike:
                        // that failure is the build's own.
                        if fresh == binary {
                            return Err(e);
                        }
                        return build(ctx, ProgramInput::Binary(&fresh), options, devices);
                    }
                }
            }
            compiled = binary;
            ProgramInput::Binary(&compiled)
        }
        ProgramKind::Source => match devices {
            [d] if d.kernel_offsets => return build_source_kept(ctx, bytes, options, d),
            _ => ProgramInput::Source(bytes),
        },
        ProgramKind::Il => {
            for d in devices {
                if !d.il_version.contains("SPIR-V") {
                    return Err(Error::new(
                        Status::FeatureNotSupported,
                        format!(
                            "device {} does not take SPIR-V (its IL versions: '{}')",
                            d.label(),
                            d.il_version
                        ),
                    ));
                }
            }
            ProgramInput::Il(bytes)
        }
        ProgramKind::Binary => {
            if devices.len() != 1 {
                return Err(Error::invalid(format!(
                    "a program binary targets exactly one device ({} given)",
                    devices.len()
                )));
            }
            ProgramInput::Binary(bytes)
        }
    };
    build(ctx, input, options, devices)
}

/// The program `input` builds for `devices`.
fn build(
    ctx: &Context,
    input: ProgramInput<'_>,
    options: &str,
    devices: &[&'static Device],
) -> Result<ProgramInner> {
    let labelled: Vec<_> = devices.iter().map(|d| (d.handle(), d.label())).collect();
    let driver = ctx.platform.driver;
    let handle = driver.build_program(ctx.handle(), &labelled, input, options)?;
    Ok(ProgramInner {
        handle,
        devices: devices.to_vec(),
        driver,
    })
}

/// What names a device's compiler in the keys of kept binaries: its
/// name, driver and OpenCL versions.
fn compiler_of(d: &Device) -> String {
    format!("{} / {} / {}", d.name, d.driver_version, d.version)
}

/// OpenCL C built for `device`, whose programs are built a second time
/// from their rewritten PTX (see `Device::kernel_offsets`): the PTX its
/// compiler made for the same source, options and compiler, kept on disk
/// by an earlier build, is built instead, once; a build of the source
/// keeps its PTX. A kept binary that the driver refuses or that fails to
/// build is dropped and the source built; other failures are the build's.
fn build_source_kept(
    ctx: &Context,
    bytes: &[u8],
    options: &str,
    device: &'static Device,
) -> Result<ProgramInner> {
    let Some(dir) = super::kernel_cache::dir() else {
        return build(ctx, ProgramInput::Source(bytes), options, &[device]);
    };
    let compiler = compiler_of(device);
    let key = super::kernel_cache::Key {
        compiler: &compiler,
        options,
        source: bytes,
    };
    if let Some(binary) = super::kernel_cache::load(&dir, &key) {
        match build(ctx, ProgramInput::Binary(&binary), options, &[device]) {
            Ok(built) => return Ok(built),
            // Refused or failing to build: not PTX of this driver any more.
            Err(e) if matches!(e.status, Status::BuildFailure | Status::InvalidArgument) => {
                super::kernel_cache::forget(&dir, &key)
            }
            // Out of memory, say: the source's build would meet it too.
            Err(e) => return Err(e),
        }
    }
    let built = build(ctx, ProgramInput::Source(bytes), options, &[device])?;
    if let Some(binary) = built
        .driver
        .program_binaries(built.handle)
        .ok()
        .and_then(|b| b.into_iter().next())
    {
        // A cache that cannot be written only costs the next process
        // this build again.
        let _ = super::kernel_cache::store(&dir, &key, &binary);
    }
    Ok(built)
}

/// OpenCL C compiled by the OpenCL device paired with `devices[0]` (its
/// back end takes binaries only), as that device's binary: the source
/// for every device of the build. With `use_kept`, a binary kept on disk
/// by an earlier build of the same source, options and compiler is taken
/// instead (then the flag returned is true), and a new one is kept.
fn compile_on_twin(
    devices: &[&'static Device],
    bytes: &[u8],
    options: &str,
    use_kept: bool,
) -> Result<(Vec<u8>, bool)> {
    /// The contexts on compiling devices, by platform and device index.
    type Twins = Vec<((usize, usize), Arc<Context>)>;
    static TWINS: Mutex<Twins> = Mutex::new(Vec::new());
    let first = devices[0];
    let Some(at) = first.compiler else {
        return Err(Error::new(
            Status::FeatureNotSupported,
            format!(
                "device {} builds from binaries only, and no OpenCL device of the same GPU was found to compile OpenCL C",
                first.label()
            ),
        ));
    };
    let twin: &'static Device = super::platform::runtime()?
        .platforms
        .get(at.0)
        .and_then(|p| p.devices.get(at.1))
        .ok_or_else(|| {
            Error::new(
                Status::Internal,
                "a device's compiler names an unknown device",
            )
        })?;
    let compiler = compiler_of(twin);
    let key = super::kernel_cache::Key {
        compiler: &compiler,
        options,
        source: bytes,
    };
    let dir = super::kernel_cache::dir();
    if let Some(dir) = &dir {
        if !use_kept {
            super::kernel_cache::forget(dir, &key);
        } else if let Some(binary) = super::kernel_cache::load(dir, &key) {
            return Ok((binary, true));
        }
    }
    let ctx = {
        let mut twins = TWINS.lock();
        match twins.iter().find(|(k, _)| *k == at) {
            Some((_, c)) => c.clone(),
            None => {
                let c = Context::create(&[twin])?;
                twins.push((at, c.clone()));
                c
            }
        }
    };
    let p = Program::build(&ctx, ProgramKind::Source, bytes, options, &[twin]).map_err(|e| {
        Error::new(
            e.status,
            format!(
                "compiling for device {} on {}: {}",
                first.label(),
                twin.label(),
                e.message
            ),
        )
    })?;
    let binary = p.binary(twin)?;
    if let Some(dir) = &dir {
        // A cache that cannot be written (no room, no rights) only costs
        // the next process this compilation again.
        let _ = super::kernel_cache::store(dir, &key, &binary);
    }
    Ok((binary, false))
}

/// Per-device facts about a kernel, read when it is created.
#[derive(Clone, Copy, Debug)]
pub struct KernelDeviceInfo {
    pub work_group_size: usize,
    pub static_local_mem: u64,
    pub private_mem: u64,
    pub preferred_multiple: usize,
}

/// An argument bound to a kernel, kept by value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BoundArg {
    Value(Vec<u8>),
    Usm(usize),
    Local(usize),
}

/// What a kernel's arguments are set to, kept under its lock.
#[derive(Default)]
pub struct ArgState {
    /// What each argument is set to now, where known: a launch that
    /// gives the same sets nothing (drivers charge for each setting, and
    /// OpenCL keeps a kernel's arguments until they change).
    pub set: Vec<SetArg>,
    /// `context::mem_generation()` when `set` was last trusted: memory
    /// objects set are not retained, and a released one's handle may come
    /// back for another.
    pub generation: u64,
    /// Bit `i`: argument `i` was ever given an SVM pointer. NVIDIA's
    /// OpenCL refuses to launch a kernel (`CL_INVALID_KERNEL_ARGS`) whose
    /// argument went from an SVM pointer to a memory object, so such an
    /// argument is never given a view afterwards.
    pub svm: u64,
    /// Per argument with a hidden offset: the offset set now.
    pub offsets: Vec<usize>,
}

/// An argument as last set on a kernel object.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub enum SetArg {
    /// Not known (never set, or its setting failed or may be stale).
    #[default]
    Unknown,
    /// A memory object, and the USM address it views (0 for one the
    /// caller gave).
    Mem { viewed: usize, mem: usize },
    /// A value of up to 16 bytes (longer ones are set at every launch).
    Value { len: u8, bytes: [u8; 16] },
}

impl SetArg {
    /// The value `b` as remembered (none when empty or longer than 16
    /// bytes).
    pub fn value(b: &[u8]) -> Option<SetArg> {
        let len = u8::try_from(b.len())
            .ok()
            .filter(|&n| (1..=16).contains(&n))?;
        let mut bytes = [0; 16];
        bytes[..b.len()].copy_from_slice(b);
        Some(SetArg::Value { len, bytes })
    }
}

pub struct Kernel {
    pub ctx: Arc<Context>,
    pub program: Arc<ProgramInner>,
    /// The back end's kernel.
    pub handle: KernelH,
    pub name: String,
    /// "kernel 'name'", for events and messages.
    pub what: Arc<str>,
    pub num_args: u32,
    /// Per argument, the hidden parameter holding its byte offset (see
    /// `Driver::kernel_offsets`); empty where the kernel has none.
    pub offsets: Vec<Option<u32>>,
    /// A kernel object made to replace `handle` (0: none; see
    /// [`Kernel::renew`]).
    replaced: AtomicUsize,
    pub per_device: Vec<(&'static Device, KernelDeviceInfo)>,
    /// Arguments bound to the kernel (`syrah_kernel_set_arg`), by index:
    /// a launch takes those it does not give itself.
    pub bound: Mutex<Vec<Option<BoundArg>>>,
    /// Serialises argument setting and enqueueing of this kernel, and
    /// remembers what its arguments are set to.
    pub lock: Mutex<ArgState>,
}

impl Drop for Kernel {
    fn drop(&mut self) {
        let driver = self.program.driver;
        driver.release_kernel(self.handle);
        let replaced = *self.replaced.get_mut();
        if replaced != 0 {
            driver.release_kernel(KernelH(replaced));
        }
    }
}

impl Kernel {
    pub fn create(program: &Program, name: &str) -> Result<Kernel> {
        let driver = program.inner.driver;
        let (handle, num_args, real_name) =
            driver.create_kernel(program.inner.handle, name, program.ctx.strategy)?;
        let per_device = program
            .inner
            .devices
            .iter()
            .map(|d| {
                let f = driver.kernel_facts(handle, d.handle());
                (
                    *d,
                    KernelDeviceInfo {
                        work_group_size: f.work_group_size.unwrap_or(d.limits.max_work_group_size),
                        static_local_mem: f.static_local_mem,
                        private_mem: f.private_mem,
                        preferred_multiple: f.preferred_multiple.unwrap_or(1),
                    },
                )
            })
            .collect();
        let offsets = driver.kernel_offsets(program.inner.handle, &real_name);
        Ok(Kernel {
            ctx: program.ctx.clone(),
            program: program.inner.clone(),
            handle,
            what: Arc::from(format!("kernel '{real_name}'")),
            name: real_name,
            num_args,
            offsets,
            replaced: AtomicUsize::new(0),
            per_device,
            bound: Mutex::new(vec![None; num_args as usize]),
            lock: Mutex::new(ArgState {
                set: vec![SetArg::Unknown; num_args as usize],
                offsets: vec![0; num_args as usize],
                ..ArgState::default()
            }),
        })
    }

    /// The kernel object launches use now.
    pub fn handle_now(&self) -> KernelH {
        match self.replaced.load(Ordering::Acquire) {
            0 => self.handle,
            k => KernelH(k),
        }
    }

    /// Whether an accessor starting inside a memory object reaches the
    /// kernel as the object and a hidden offset.
    pub fn takes_offsets(&self) -> bool {
        !self.offsets.is_empty()
    }

    /// Replaces the kernel object by a new one with no arguments set (`st`,
    /// the kernel's argument state, says so): NVIDIA's OpenCL refuses to
    /// launch a kernel whose argument went from an SVM pointer to a memory
    /// object. Commands already enqueued keep the old object alive.
    pub(crate) fn renew(&self, st: &mut ArgState) -> Result<()> {
        let driver = self.program.driver;
        let (k, _, _) = driver.create_kernel(self.program.handle, &self.name, self.ctx.strategy)?;
        let old = self.replaced.swap(k.0, Ordering::AcqRel);
        if old != 0 {
            driver.release_kernel(KernelH(old));
        }
        st.set.iter_mut().for_each(|s| *s = SetArg::Unknown);
        st.offsets.iter_mut().for_each(|o| *o = 0);
        st.svm = 0;
        Ok(())
    }

    pub fn info_for(&self, d: &Device) -> Result<KernelDeviceInfo> {
        self.per_device
            .iter()
            .find(|(x, _)| std::ptr::eq(*x, d))
            .map(|(_, i)| *i)
            .ok_or_else(|| {
                Error::new(
                    Status::WrongContext,
                    format!(
                        "kernel '{}' was not built for device {}",
                        self.name,
                        d.label()
                    ),
                )
            })
    }
}
