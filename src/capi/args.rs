//! Kernel arguments beyond plain ones: arguments bound to a kernel once
//! (`syrah_kernel_set_arg`) and taken by launches that do not give them,
//! and accessor pitches, both turned into plain arguments before a launch
//! or a graph records it.

use super::types::*;
use super::{borrow, guard, slice};
use crate::core::error::{Error, Result, Status};
use crate::runtime::buffer::AccessReq;
use crate::runtime::program::{BoundArg, Kernel};

/// A launch's arguments with bound ones and pitches made plain; the values
/// they point at live as long as this.
pub(crate) struct Resolved {
    pub(crate) args: Vec<syrah_kernel_arg>,
    _values: Vec<Box<[u8]>>,
}

fn value_arg(values: &mut Vec<Box<[u8]>>, bytes: Box<[u8]>) -> syrah_kernel_arg {
    let a = syrah_kernel_arg {
        kind: SYRAH_ARG_VALUE,
        size: bytes.len(),
        value: bytes.as_ptr().cast(),
    };
    // The box's bytes stay where they are when the vector grows.
    values.push(bytes);
    a
}

/// The plain arguments of a launch of `kernel` given `count` arguments at
/// `args` with accessors `reqs`; None when they are plain already (the
/// common case costs one pass over the kinds).
pub(crate) unsafe fn resolve(
    kernel: &Kernel,
    args: *const syrah_kernel_arg,
    count: usize,
    reqs: &[AccessReq<'_>],
) -> Result<Option<Resolved>> {
    // SAFETY: forwarded contract.
    let raw = unsafe { slice(args, count, "args") }?;
    let n = kernel.num_args as usize;
    let special = |a: &syrah_kernel_arg| {
        matches!(
            a.kind,
            SYRAH_ARG_BOUND | SYRAH_ARG_ACCESSOR_ROW_PITCH | SYRAH_ARG_ACCESSOR_SLICE_PITCH
        )
    };
    // Too many arguments is the launch check's to report.
    if raw.len() > n || (raw.len() == n && !raw.iter().any(special)) {
        return Ok(None);
    }
    // Held while the launch's arguments are made (memory only): a binding
    // made meanwhile on another thread is taken whole or not at all.
    let bound = kernel.bound.lock();
    let mut values = Vec::new();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let given = raw.get(i).filter(|a| a.kind != SYRAH_ARG_BOUND);
        let a = match given {
            Some(a) if matches!(a.kind, SYRAH_ARG_ACCESSOR_ROW_PITCH | SYRAH_ARG_ACCESSOR_SLICE_PITCH) => {
                let r = reqs.get(a.size).ok_or_else(|| {
                    Error::new(
                        Status::KernelArguments,
                        format!(
                            "args[{i}] asks for a pitch of accessor {} but the command group has {}",
                            a.size,
                            reqs.len()
                        ),
                    )
                })?;
                let g = &r.buffer.view;
                let pitch = if a.kind == SYRAH_ARG_ACCESSOR_ROW_PITCH {
                    g.range[2]
                } else {
                    g.range[1] * g.range[2]
                };
                let pitch = i32::try_from(pitch).map_err(|_| {
                    Error::new(
                        Status::KernelArguments,
                        format!("args[{i}]: the pitch of accessor {} ({pitch} elements) does not fit an int", a.size),
                    )
                })?;
                value_arg(&mut values, Box::new(pitch.to_ne_bytes()))
            }
            Some(a) => *a,
            None => match bound.get(i).and_then(Option::as_ref) {
                Some(BoundArg::Value(v)) => value_arg(&mut values, v.as_slice().into()),
                Some(&BoundArg::Usm(p)) => syrah_kernel_arg {
                    kind: SYRAH_ARG_USM,
                    size: std::mem::size_of::<usize>(),
                    value: p as *const std::ffi::c_void,
                },
                Some(&BoundArg::Local(bytes)) => syrah_kernel_arg {
                    kind: SYRAH_ARG_LOCAL,
                    size: bytes,
                    value: std::ptr::null(),
                },
                None if i >= count => {
                    return Err(Error::new(
                        Status::KernelArguments,
                        format!(
                            "kernel '{}' takes {n} argument{}, {count} given, and argument {i} is not \
                             bound with syrah_kernel_set_arg",
                            kernel.name,
                            if n == 1 { "" } else { "s" }
                        ),
                    ))
                }
                None => {
                    return Err(Error::new(
                        Status::KernelArguments,
                        format!(
                            "args[{i}] is SYRAH_ARG_BOUND but argument {i} of kernel '{}' is not bound \
                             with syrah_kernel_set_arg",
                            kernel.name
                        ),
                    ))
                }
            },
        };
        out.push(a);
    }
    Ok(Some(Resolved {
        args: out,
        _values: values,
    }))
}

/// Binds `*arg` to parameter `index` of `kernel`: launches that do not give
/// that argument (a shorter list, or kind `SYRAH_ARG_BOUND`) take it, until
/// it is bound again; NULL `arg` unbinds it. Values are copied. Only
/// `SYRAH_ARG_VALUE`, `SYRAH_ARG_USM` and `SYRAH_ARG_LOCAL` can be bound
/// (accessors belong to a command group). Launches on other threads see
/// the binding before or after, never half of it.
#[no_mangle]
pub unsafe extern "C" fn syrah_kernel_set_arg(
    kernel: *const Kernel,
    index: u32,
    arg: *const syrah_kernel_arg,
) -> syrah_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let k = unsafe { borrow(kernel, "kernel") }?;
        if index >= k.num_args {
            return Err(Error::new(
                Status::KernelArguments,
                format!(
                    "kernel '{}' has {} parameter{}, so there is no argument {index} to bind",
                    k.name,
                    k.num_args,
                    if k.num_args == 1 { "" } else { "s" }
                ),
            ));
        }
        let bound = if arg.is_null() {
            None
        } else {
            // SAFETY: a readable argument per the contract.
            let a = unsafe { &*arg };
            Some(match a.kind {
                SYRAH_ARG_VALUE if a.value.is_null() => {
                    return Err(Error::new(
                        Status::NullArgument,
                        "arg is a value argument with a NULL value",
                    ))
                }
                SYRAH_ARG_VALUE if a.size == 0 => {
                    return Err(Error::new(
                        Status::KernelArguments,
                        "arg is a value argument of size 0",
                    ))
                }
                // SAFETY: `size` readable bytes at `value` per the contract.
                SYRAH_ARG_VALUE => BoundArg::Value(
                    unsafe { std::slice::from_raw_parts(a.value.cast::<u8>(), a.size) }.to_vec(),
                ),
                SYRAH_ARG_USM => BoundArg::Usm(a.value as usize),
                SYRAH_ARG_LOCAL if a.size == 0 => {
                    return Err(Error::new(
                        Status::KernelArguments,
                        "arg asks for 0 bytes of local memory",
                    ))
                }
                SYRAH_ARG_LOCAL => BoundArg::Local(a.size),
                other => {
                    return Err(Error::new(
                        Status::KernelArguments,
                        format!(
                            "arg has kind {other}, which cannot be bound to a kernel (only values, USM \
                             pointers and local memory can; accessors belong to a command group)"
                        ),
                    ))
                }
            })
        };
        k.bound.lock()[index as usize] = bound;
        Ok(())
    })
}
