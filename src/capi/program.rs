//! Programs and kernels.

use super::device::device_ref;
use super::types::*;
use super::{
    borrow, clone_arc, cstr, guard, into_handle, out, release, retain, write_bytes, write_string,
};
use crate::core::error::{Error, Result};
use crate::runtime::build_cache::ProgramKind;
use crate::runtime::context::Context;
use crate::runtime::platform::Device;
use crate::runtime::program::{Kernel, Program};
use std::ffi::{c_char, c_void};
use std::sync::Arc;

unsafe fn options<'a>(p: *const c_char) -> Result<&'a str> {
    if p.is_null() {
        Ok("")
    } else {
        // SAFETY: forwarded contract.
        unsafe { cstr(p, "options") }
    }
}

unsafe fn finish(
    ctx: *const Context,
    kind: ProgramKind,
    bytes: &[u8],
    opts: *const c_char,
    devices: &[&'static Device],
    out_program: *mut *mut Program,
) -> Result<()> {
    if out_program.is_null() {
        return Err(super::null("out_program"));
    }
    // SAFETY: forwarded contract.
    let c = unsafe { clone_arc(ctx, "context") }?;
    // SAFETY: forwarded contract.
    let o = unsafe { options(opts) }?;
    let p = Program::build(&c, kind, bytes, o, devices)?;
    // SAFETY: checked non-null.
    unsafe { out(out_program, into_handle(Arc::new(p)), "out_program") }
}

/// Builds OpenCL C `source` (NUL-terminated) for every device of `context`
/// with build `options` (may be NULL). Builds are cached per context by
/// (source, options, devices). A failed build returns
/// `SYRAH_ERROR_BUILD_FAILURE` with the build log in the message.
#[no_mangle]
pub unsafe extern "C" fn syrah_program_create_from_source(
    context: *const Context,
    source: *const c_char,
    options: *const c_char,
    out_program: *mut *mut Program,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { cstr(source, "source") }?;
        // SAFETY: forwarded contract.
        unsafe {
            finish(
                context,
                ProgramKind::Source,
                s.as_bytes(),
                options,
                &[],
                out_program,
            )
        }
    })
}

/// Builds a SPIR-V module of `size` bytes for every device of `context`.
/// Devices without SPIR-V support give `SYRAH_ERROR_FEATURE_NOT_SUPPORTED`.
#[no_mangle]
pub unsafe extern "C" fn syrah_program_create_from_il(
    context: *const Context,
    il: *const c_void,
    size: usize,
    options: *const c_char,
    out_program: *mut *mut Program,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { super::slice(il.cast::<u8>(), size, "il") }?;
        // SAFETY: forwarded contract.
        unsafe { finish(context, ProgramKind::Il, b, options, &[], out_program) }
    })
}

/// Builds a program from a device binary (as returned by
/// `syrah_program_get_binary`) for one `device` of `context`.
#[no_mangle]
pub unsafe extern "C" fn syrah_program_create_from_binary(
    context: *const Context,
    device: *const Device,
    binary: *const c_void,
    size: usize,
    options: *const c_char,
    out_program: *mut *mut Program,
) -> syrah_status {
    guard(|| {
        let d = device_ref(device, "device")?;
        // SAFETY: forwarded contract.
        let b = unsafe { super::slice(binary.cast::<u8>(), size, "binary") }?;
        // SAFETY: forwarded contract.
        unsafe { finish(context, ProgramKind::Binary, b, options, &[d], out_program) }
    })
}

/// Copies the program's binary for `device` into `buffer`; with `buffer`
/// NULL and `capacity` 0 only its size is written to `*out_size`.
#[no_mangle]
pub unsafe extern "C" fn syrah_program_get_binary(
    program: *const Program,
    device: *const Device,
    buffer: *mut c_void,
    capacity: usize,
    out_size: *mut usize,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let p = unsafe { borrow(program, "program") }?;
        let d = device_ref(device, "device")?;
        let bin = p.binary(d)?;
        // SAFETY: forwarded contract.
        unsafe { write_bytes(&bin, false, buffer.cast(), capacity, out_size) }
    })
}

/// Copies the build log for `device` (NUL-terminated), like
/// `syrah_device_get_info_string`.
#[no_mangle]
pub unsafe extern "C" fn syrah_program_get_build_log(
    program: *const Program,
    device: *const Device,
    buffer: *mut c_char,
    capacity: usize,
    out_length: *mut usize,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let p = unsafe { borrow(program, "program") }?;
        let d = device_ref(device, "device")?;
        let log = p.build_log(d)?;
        // SAFETY: forwarded contract.
        unsafe { write_string(&log, buffer, capacity, out_length) }
    })
}

/// Adds a reference to a program.
#[no_mangle]
pub unsafe extern "C" fn syrah_program_retain(program: *const Program) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { retain(program, "program") })
}

/// Drops a reference to a program (its kernels keep what they need).
#[no_mangle]
pub unsafe extern "C" fn syrah_program_release(program: *const Program) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { release(program, "program") })
}

/// Creates the kernel `name` of a built program. An unknown name gives
/// `SYRAH_ERROR_KERNEL_NOT_FOUND` listing the program's kernels.
#[no_mangle]
pub unsafe extern "C" fn syrah_kernel_create(
    program: *const Program,
    name: *const c_char,
    out_kernel: *mut *mut Kernel,
) -> syrah_status {
    guard(|| {
        if out_kernel.is_null() {
            return Err(super::null("out_kernel"));
        }
        // SAFETY: forwarded contract.
        let p = unsafe { borrow(program, "program") }?;
        // SAFETY: forwarded contract.
        let n = unsafe { cstr(name, "name") }?;
        let k = Kernel::create(p, n)?;
        // SAFETY: checked non-null.
        unsafe { out(out_kernel, into_handle(Arc::new(k)), "out_kernel") }
    })
}

/// Reads a kernel property (`SYRAH_KERNEL_INFO_*`) for `device`.
#[no_mangle]
pub unsafe extern "C" fn syrah_kernel_get_info(
    kernel: *const Kernel,
    device: *const Device,
    info: syrah_kernel_info,
    out_value: *mut u64,
) -> syrah_status {
    guard(|| {
        super::need(out_value, "out_value")?;
        // SAFETY: forwarded contract.
        let k = unsafe { borrow(kernel, "kernel") }?;
        let d = device_ref(device, "device")?;
        let i = k.info_for(d)?;
        let v = match info {
            SYRAH_KERNEL_INFO_NUM_ARGS => u64::from(k.num_args),
            SYRAH_KERNEL_INFO_WORK_GROUP_SIZE => i.work_group_size as u64,
            SYRAH_KERNEL_INFO_LOCAL_MEM_SIZE => i.static_local_mem,
            SYRAH_KERNEL_INFO_PRIVATE_MEM_SIZE => i.private_mem,
            SYRAH_KERNEL_INFO_PREFERRED_WORK_GROUP_SIZE_MULTIPLE => i.preferred_multiple as u64,
            other => return Err(Error::invalid(format!("unknown kernel info {other}"))),
        };
        // SAFETY: forwarded contract.
        unsafe { out(out_value, v, "out_value") }
    })
}

/// Adds a reference to a kernel.
#[no_mangle]
pub unsafe extern "C" fn syrah_kernel_retain(kernel: *const Kernel) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { retain(kernel, "kernel") })
}

/// Drops a reference to a kernel.
#[no_mangle]
pub unsafe extern "C" fn syrah_kernel_release(kernel: *const Kernel) -> syrah_status {
    // SAFETY: forwarded contract.
    guard(|| unsafe { release(kernel, "kernel") })
}
