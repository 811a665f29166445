//! Kernels with hidden byte offsets on NVIDIA's OpenCL. A program built
//! there has PTX as its binary; that PTX is rewritten (see
//! `core::ptx::add_offsets`) and built again, so that a memory object and
//! an offset stand for any address inside the object (sub-buffers there
//! need 512-byte origins). Kept here, per rewritten program: its kernels'
//! offset parameters and the binaries as the compiler wrote them, which
//! are what the program gives out.
//!
//! OpenCL handles are opaque identifiers that only the driver interprets,
//! so passing them on is not a dereference by this code.

use super::ffi::*;
use super::info;
use super::loader::api;
use crate::backend::{ContextH, DeviceH, KernelH, ProgramH, ProgramInput};
use crate::core::aspects::UsmStrategy;
use crate::core::error::{Error, Result, Status};
use crate::core::ptx::{add_offsets, OffsetEntry};
use parking_lot::Mutex;
use std::sync::Arc;

/// A rewritten program: its kernels with offsets and the original
/// binaries, one per device.
struct Rewritten {
    entries: Vec<OffsetEntry>,
    original: Vec<Vec<u8>>,
}

/// The rewritten programs, by handle.
static PROGRAMS: Mutex<Vec<(usize, Arc<Rewritten>)>> = Mutex::new(Vec::new());

/// Whether kernels of a device of `vendor` get hidden offsets:
/// NVIDIA's, unless `SYRAH_KERNEL_OFFSETS=off`.
pub fn enabled_for(vendor: &str) -> bool {
    vendor.contains("NVIDIA") && std::env::var("SYRAH_KERNEL_OFFSETS").as_deref() != Ok("off")
}

/// Whether a program for `devices` is to be rewritten.
fn wanted(devices: &[(DeviceH, String)]) -> bool {
    let Ok(api) = api() else {
        return false;
    };
    !devices.is_empty()
        && devices.iter().all(|(d, _)| {
            info::device_string(api, d.0 as cl_device_id, CL_DEVICE_VENDOR)
                .is_ok_and(|v| enabled_for(&v))
        })
}

/// Builds a program (see `backend::Driver::build_program`), rewritten
/// with offsets where its devices' kernels take them.
pub fn build(
    ctx: ContextH,
    devices: &[(DeviceH, String)],
    input: ProgramInput<'_>,
    options: &str,
) -> Result<ProgramH> {
    if let ProgramInput::Binary(bin) = input {
        // PTX given (one made here, or kept from an earlier build) is
        // rewritten first and built once.
        if let Some(p) = rewrite_and_build(ctx, devices, vec![bin.to_vec()], options)? {
            return Ok(p);
        }
    }
    let built = super::program::build(ctx, devices, input, options)?;
    if !matches!(input, ProgramInput::Source(_)) {
        return Ok(built);
    }
    let rebuilt = rebuild(ctx, devices, built, options);
    if !matches!(rebuilt, Ok(None)) {
        if let Ok(api) = api() {
            // SAFETY: the program built above, replaced by the rewritten
            // one or given up with the error.
            unsafe { (api.clReleaseProgram)(built.0 as cl_program) };
        }
    }
    Ok(rebuilt?.unwrap_or(built))
}

/// The binaries of `p`, one per device: as the compiler wrote them where
/// `p` was rewritten.
pub fn binaries(p: ProgramH) -> Result<Vec<Vec<u8>>> {
    find(p).map_or_else(|| super::program::binaries(p), |r| Ok(r.original.clone()))
}

/// Makes kernel `name` of `p` (see `backend::Driver::create_kernel`): its
/// hidden offsets, if any, start at 0 and are not counted among its
/// arguments.
pub fn kernel(p: ProgramH, name: &str, usm: UsmStrategy) -> Result<(KernelH, u32, String)> {
    let (k, n, real_name) = super::program::kernel(p, name, usm)?;
    match zero_offsets(p, k, &real_name) {
        Ok(hidden) => Ok((k, n.saturating_sub(hidden), real_name)),
        Err(rc) => {
            if let Ok(api) = api() {
                // SAFETY: the kernel just made, released once.
                unsafe { (api.clReleaseKernel)(k.0 as cl_kernel) };
            }
            Err(Error::opencl(rc, "clSetKernelArg (a hidden offset)"))
        }
    }
}

/// `built` (a built program for `devices`) rewritten with offsets and
/// built with `options`, or `None` where nothing is to be rewritten or
/// the rewrite does not build: the program then stays as it was, and its
/// accessors at offsets are staged as on any driver. A failure to build
/// other than the driver refusing the PTX is an error.
fn rebuild(
    ctx: ContextH,
    devices: &[(DeviceH, String)],
    built: ProgramH,
    options: &str,
) -> Result<Option<ProgramH>> {
    if !wanted(devices) {
        return Ok(None);
    }
    let Ok(original) = super::program::binaries(built) else {
        return Ok(None);
    };
    rewrite_and_build(ctx, devices, original, options)
}

/// The program built from `original` (one PTX binary per device) rewritten
/// with offsets, or `None` where the devices' kernels take none, the
/// binaries are not PTX with kernels to rewrite, or the rewrite does not
/// build; an error where building fails otherwise.
fn rewrite_and_build(
    ctx: ContextH,
    devices: &[(DeviceH, String)],
    original: Vec<Vec<u8>>,
    options: &str,
) -> Result<Option<ProgramH>> {
    if original.len() != devices.len() || !wanted(devices) {
        return Ok(None);
    }
    let mut texts = Vec::with_capacity(original.len());
    let mut entries: Option<Vec<OffsetEntry>> = None;
    for bin in &original {
        let Ok(text) = std::str::from_utf8(bin) else {
            return Ok(None);
        };
        let (rewritten, found) = add_offsets(text.trim_end_matches('\0'));
        if found.is_empty() || entries.as_ref().is_some_and(|e| *e != found) {
            return Ok(None);
        }
        entries = Some(found);
        let mut bytes = rewritten.into_bytes();
        bytes.push(0);
        texts.push(bytes);
    }
    let Some(entries) = entries else {
        return Ok(None);
    };
    let bins: Vec<&[u8]> = texts.iter().map(Vec::as_slice).collect();
    let program = match super::program::build_binaries(ctx, devices, &bins, options) {
        Ok(p) => p,
        // The driver refuses the PTX, or its build fails: the program
        // stays as compiled.
        Err(e) if matches!(e.status, Status::InvalidArgument | Status::BuildFailure) => {
            return Ok(None)
        }
        // Out of memory, say: a build of the compiler's PTX would meet it
        // too.
        Err(e) => return Err(e),
    };
    PROGRAMS
        .lock()
        .push((program.0, Arc::new(Rewritten { entries, original })));
    Ok(Some(program))
}

fn find(p: ProgramH) -> Option<Arc<Rewritten>> {
    PROGRAMS
        .lock()
        .iter()
        .find(|(h, _)| *h == p.0)
        .map(|(_, r)| r.clone())
}

/// Per argument of kernel `name` of `p`, the index of the hidden parameter
/// holding its byte offset; empty where the kernel has none.
pub fn kernel_offsets(p: ProgramH, name: &str) -> Vec<Option<u32>> {
    find(p)
        .and_then(|r| {
            r.entries
                .iter()
                .find(|e| e.name == name)
                .map(|e| e.offsets.clone())
        })
        .unwrap_or_default()
}

/// Sets every hidden offset of the new kernel `k` of `p` to 0; returns how
/// many it has (they follow the kernel's own arguments).
fn zero_offsets(p: ProgramH, k: KernelH, name: &str) -> std::result::Result<u32, cl_int> {
    let offsets = kernel_offsets(p, name);
    let api = api().map_err(|_| CL_INVALID_VALUE)?;
    let zero = 0u64;
    for &i in offsets.iter().flatten() {
        // SAFETY: a live kernel and a readable 8-byte value for one of its
        // 64-bit parameters.
        let rc = unsafe {
            (api.clSetKernelArg)(
                k.0 as cl_kernel,
                i,
                std::mem::size_of::<u64>(),
                (&zero as *const u64).cast(),
            )
        };
        if rc != CL_SUCCESS {
            return Err(rc);
        }
    }
    Ok(offsets.iter().flatten().count() as u32)
}

/// Forgets `p`, released.
pub fn forget(p: ProgramH) {
    PROGRAMS.lock().retain(|(h, _)| *h != p.0);
}
