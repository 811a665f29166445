//! Platforms and devices. Their handles live as long as the process and
//! are never released.

use super::types::*;
use super::{cstr, guard, null, out, write_string};
use crate::core::aspects::{has_aspect, Aspect, UsmStrategy};
use crate::core::error::{Error, Result, Status};
use crate::core::selector::{default_score, DeviceKind, Selection};
use crate::runtime::platform::{runtime, Device, Platform};
use std::ffi::{c_char, c_void};

/// Checks that `p` is one of the runtime's devices.
pub(crate) fn device_ref<'a>(p: *const Device, what: &str) -> Result<&'a Device> {
    if p.is_null() {
        return Err(null(what));
    }
    let rt = runtime()?;
    rt.devices().find(|d| std::ptr::eq(*d, p)).ok_or_else(|| {
        Error::new(
            Status::InvalidHandle,
            format!("{what} {p:?} is not a device handle returned by Syrah"),
        )
    })
}

fn platform_ref<'a>(p: *const Platform) -> Result<&'a Platform> {
    if p.is_null() {
        return Err(null("platform"));
    }
    runtime()?
        .platforms
        .iter()
        .find(|x| std::ptr::eq(*x, p))
        .ok_or_else(|| {
            Error::new(
                Status::InvalidHandle,
                format!("platform {p:?} is not a platform handle returned by Syrah"),
            )
        })
}

unsafe fn write_list<T>(
    items: &[*const T],
    outp: *mut *const T,
    cap: usize,
    count: *mut usize,
) -> Result<()> {
    if outp.is_null() && cap != 0 {
        return Err(Error::new(
            Status::NullArgument,
            format!("output array is NULL but its capacity is {cap}"),
        ));
    }
    if count.is_null() {
        return Err(null("out_count"));
    }
    for (i, it) in items.iter().take(cap).enumerate() {
        // SAFETY: `outp` has `cap` writable slots per the contract.
        unsafe { *outp.add(i) = *it };
    }
    // SAFETY: checked non-null; writable per the contract.
    unsafe { *count = items.len() };
    Ok(())
}

fn no_devices_error() -> Error {
    Error::new(
        Status::DeviceNotFound,
        "no OpenCL device found: the OpenCL library loaded but lists no platform with a device; \
         install a driver (on Debian: apt-get install pocl-opencl-icd) or point OCL_ICD_VENDORS \
         at a folder of .icd files",
    )
}

/// Lists the OpenCL platforms. Writes up to `capacity` handles to
/// `platforms` (which may be NULL when `capacity` is 0) and the total
/// number to `*out_count`.
#[no_mangle]
pub unsafe extern "C" fn syrah_get_platforms(
    platforms: *mut *const Platform,
    capacity: usize,
    out_count: *mut usize,
) -> syrah_status {
    guard(|| {
        let rt = runtime()?;
        let list: Vec<*const Platform> =
            rt.platforms.iter().map(|p| p as *const Platform).collect();
        // SAFETY: forwarded contract.
        unsafe { write_list(&list, platforms, capacity, out_count) }
    })
}

/// Reads a platform string (`SYRAH_PLATFORM_INFO_*`) into `buffer`
/// (NUL-terminated). With `buffer` NULL and `capacity` 0, only the length
/// including the NUL is written to `*out_length`, which may be NULL
/// otherwise.
#[no_mangle]
pub unsafe extern "C" fn syrah_platform_get_info(
    platform: *const Platform,
    info: syrah_platform_info,
    buffer: *mut c_char,
    capacity: usize,
    out_length: *mut usize,
) -> syrah_status {
    guard(|| {
        let p = platform_ref(platform)?;
        let s = match info {
            SYRAH_PLATFORM_INFO_NAME => &p.name,
            SYRAH_PLATFORM_INFO_VENDOR => &p.vendor,
            SYRAH_PLATFORM_INFO_VERSION => &p.version,
            SYRAH_PLATFORM_INFO_EXTENSIONS => &p.extensions,
            other => return Err(Error::invalid(format!("unknown platform info {other}"))),
        };
        // SAFETY: forwarded contract.
        unsafe { write_string(s, buffer, capacity, out_length) }
    })
}

/// Lists a platform's devices, like `syrah_get_platforms`.
#[no_mangle]
pub unsafe extern "C" fn syrah_platform_get_devices(
    platform: *const Platform,
    devices: *mut *const Device,
    capacity: usize,
    out_count: *mut usize,
) -> syrah_status {
    guard(|| {
        let p = platform_ref(platform)?;
        let list: Vec<*const Device> = p.devices.iter().map(|d| d as *const Device).collect();
        // SAFETY: forwarded contract.
        unsafe { write_list(&list, devices, capacity, out_count) }
    })
}

/// Lists every device of every platform, like `syrah_get_platforms`.
#[no_mangle]
pub unsafe extern "C" fn syrah_get_devices(
    devices: *mut *const Device,
    capacity: usize,
    out_count: *mut usize,
) -> syrah_status {
    guard(|| {
        let list: Vec<*const Device> = runtime()?.devices().map(|d| d as *const Device).collect();
        // SAFETY: forwarded contract.
        unsafe { write_list(&list, devices, capacity, out_count) }
    })
}

/// The platform a device belongs to.
#[no_mangle]
pub unsafe extern "C" fn syrah_device_get_platform(
    device: *const Device,
    out_platform: *mut *const Platform,
) -> syrah_status {
    guard(|| {
        super::need(out_platform, "out_platform")?;
        let d = device_ref(device, "device")?;
        let p = d.platform()?;
        // SAFETY: forwarded contract.
        unsafe { out(out_platform, p as *const Platform, "out_platform") }
    })
}

/// Reads a string property (`SYRAH_DEVICE_INFO_*` below 100), like
/// `syrah_platform_get_info`.
#[no_mangle]
pub unsafe extern "C" fn syrah_device_get_info_string(
    device: *const Device,
    info: syrah_device_info,
    buffer: *mut c_char,
    capacity: usize,
    out_length: *mut usize,
) -> syrah_status {
    guard(|| {
        let d = device_ref(device, "device")?;
        let platform_name;
        let s: &str = match info {
            SYRAH_DEVICE_INFO_NAME => &d.name,
            SYRAH_DEVICE_INFO_VENDOR => &d.vendor,
            SYRAH_DEVICE_INFO_DRIVER_VERSION => &d.driver_version,
            SYRAH_DEVICE_INFO_VERSION => &d.version,
            SYRAH_DEVICE_INFO_OPENCL_C_VERSION => &d.opencl_c_version,
            SYRAH_DEVICE_INFO_EXTENSIONS => &d.extensions,
            SYRAH_DEVICE_INFO_IL_VERSION => &d.il_version,
            SYRAH_DEVICE_INFO_PLATFORM_NAME => {
                platform_name = d.platform()?.name.clone();
                &platform_name
            }
            SYRAH_DEVICE_INFO_USM_STRATEGY_NAME => d.strategy.name(),
            other if other >= 100 => {
                return Err(Error::invalid(format!(
                    "device info {other} is a number: use syrah_device_get_info_u64"
                )))
            }
            other => return Err(Error::invalid(format!("unknown device info {other}"))),
        };
        // SAFETY: forwarded contract.
        unsafe { write_string(s, buffer, capacity, out_length) }
    })
}

/// Reads a numeric property (`SYRAH_DEVICE_INFO_*` from 100 on).
#[no_mangle]
pub unsafe extern "C" fn syrah_device_get_info_u64(
    device: *const Device,
    info: syrah_device_info,
    out_value: *mut u64,
) -> syrah_status {
    guard(|| {
        super::need(out_value, "out_value")?;
        let d = device_ref(device, "device")?;
        let v: u64 = match info {
            SYRAH_DEVICE_INFO_TYPE => u64::from(match d.kind {
                DeviceKind::Cpu => SYRAH_DEVICE_TYPE_CPU,
                DeviceKind::Gpu => SYRAH_DEVICE_TYPE_GPU,
                DeviceKind::Accelerator => SYRAH_DEVICE_TYPE_ACCELERATOR,
                DeviceKind::Other => SYRAH_DEVICE_TYPE_OTHER,
            }),
            SYRAH_DEVICE_INFO_COMPUTE_UNITS => u64::from(d.compute_units),
            SYRAH_DEVICE_INFO_GLOBAL_MEM_SIZE => d.global_mem_size,
            SYRAH_DEVICE_INFO_LOCAL_MEM_SIZE => d.limits.local_mem_size,
            SYRAH_DEVICE_INFO_MAX_MEM_ALLOC_SIZE => d.max_mem_alloc_size,
            SYRAH_DEVICE_INFO_MAX_WORK_GROUP_SIZE => d.limits.max_work_group_size as u64,
            SYRAH_DEVICE_INFO_MAX_WORK_ITEM_SIZE_0 => d.limits.max_work_item_sizes[0] as u64,
            SYRAH_DEVICE_INFO_MAX_WORK_ITEM_SIZE_1 => d.limits.max_work_item_sizes[1] as u64,
            SYRAH_DEVICE_INFO_MAX_WORK_ITEM_SIZE_2 => d.limits.max_work_item_sizes[2] as u64,
            SYRAH_DEVICE_INFO_MAX_CLOCK_FREQUENCY => u64::from(d.max_clock_mhz),
            SYRAH_DEVICE_INFO_USM_STRATEGY => u64::from(match d.strategy {
                UsmStrategy::None => SYRAH_USM_STRATEGY_NONE,
                UsmStrategy::IntelUsm => SYRAH_USM_STRATEGY_INTEL,
                UsmStrategy::Svm => SYRAH_USM_STRATEGY_SVM,
            }),
            SYRAH_DEVICE_INFO_PLATFORM_INDEX => d.platform_index as u64,
            SYRAH_DEVICE_INFO_DEVICE_INDEX => d.index as u64,
            SYRAH_DEVICE_INFO_OUT_OF_ORDER => u64::from(d.out_of_order),
            SYRAH_DEVICE_INFO_PROFILING => u64::from(d.profiling),
            SYRAH_DEVICE_INFO_BUFFER_RECT_COPIES => {
                // Without USM the allocations are memory objects: always.
                if !d.usm.device {
                    1
                } else {
                    let ctx = crate::runtime::context::Context::create(&[d])?;
                    u64::from(crate::runtime::buffer::views_work(&ctx, d))
                }
            }
            SYRAH_DEVICE_INFO_GRAPH_UPDATES_IN_PLACE => u64::from(d.command_buffer_mutable),
            SYRAH_DEVICE_INFO_BUFFER_POINTERS => u64::from(!d.buffers_in_mem()),
            SYRAH_DEVICE_INFO_BACKEND => match d.platform()?.driver.name() {
                "CUDA" => u64::from(SYRAH_BACKEND_CUDA),
                _ => u64::from(SYRAH_BACKEND_OPENCL),
            },
            other if other < 100 => {
                return Err(Error::invalid(format!(
                    "device info {other} is a string: use syrah_device_get_info_string"
                )))
            }
            other => return Err(Error::invalid(format!("unknown device info {other}"))),
        };
        // SAFETY: forwarded contract.
        unsafe { out(out_value, v, "out_value") }
    })
}

/// Whether a device has an aspect (`SYRAH_ASPECT_*`). USM aspects state
/// exactly what the device's USM strategy can allocate.
#[no_mangle]
pub unsafe extern "C" fn syrah_device_has_aspect(
    device: *const Device,
    aspect: syrah_aspect,
    out_has: *mut bool,
) -> syrah_status {
    guard(|| {
        super::need(out_has, "out_has")?;
        let d = device_ref(device, "device")?;
        let a = Aspect::from_code(aspect)
            .ok_or_else(|| Error::invalid(format!("unknown aspect {aspect}")))?;
        let v = has_aspect(a, d.kind, d.fp64, &d.usm);
        // SAFETY: forwarded contract.
        unsafe { out(out_has, v, "out_has") }
    })
}

fn select_spec(spec: &str) -> Result<&'static Device> {
    let rt = runtime()?;
    let descs = rt.descs();
    if descs.is_empty() {
        return Err(no_devices_error());
    }
    let i = Selection::parse(spec)?.select(&descs)?;
    rt.devices()
        .nth(i)
        .ok_or_else(|| Error::new(Status::Internal, "selected device vanished"))
}

/// Picks a device. `SYRAH_SELECTOR_DEFAULT` honours the `SYRAH_DEVICE`
/// environment variable (see `syrah_device_select_by_string`); the others
/// pick the best device of that type.
#[no_mangle]
pub unsafe extern "C" fn syrah_device_select(
    selector: syrah_selector,
    out_device: *mut *const Device,
) -> syrah_status {
    guard(|| {
        super::need(out_device, "out_device")?;
        let spec = match selector {
            SYRAH_SELECTOR_DEFAULT => match std::env::var("SYRAH_DEVICE") {
                Ok(s) if !s.trim().is_empty() => s,
                _ => "default".to_string(),
            },
            SYRAH_SELECTOR_CPU => "cpu".into(),
            SYRAH_SELECTOR_GPU => "gpu".into(),
            SYRAH_SELECTOR_ACCELERATOR => "accelerator".into(),
            other => return Err(Error::invalid(format!("unknown selector {other}"))),
        };
        let d = select_spec(&spec).map_err(|mut e| {
            if selector == SYRAH_SELECTOR_DEFAULT && spec != "default" {
                e.message = format!("SYRAH_DEVICE: {}", e.message);
            }
            e
        })?;
        // SAFETY: forwarded contract.
        unsafe { out(out_device, d as *const Device, "out_device") }
    })
}

/// Picks a device by a selection string, e.g. "gpu", "cpu", "1.0",
/// "nvidia:gpu", "intel:cpu", "pocl", or a comma-separated list of such
/// terms tried in order. Grammar in docs/devices.md.
#[no_mangle]
pub unsafe extern "C" fn syrah_device_select_by_string(
    spec: *const c_char,
    out_device: *mut *const Device,
) -> syrah_status {
    guard(|| {
        super::need(out_device, "out_device")?;
        // SAFETY: forwarded contract.
        let s = unsafe { cstr(spec, "spec") }?;
        let d = select_spec(s)?;
        // SAFETY: forwarded contract.
        unsafe { out(out_device, d as *const Device, "out_device") }
    })
}

/// Scores a device for `syrah_device_select_by_score`; a negative score
/// rejects it.
pub type syrah_device_score_fn = Option<unsafe extern "C" fn(*const Device, *mut c_void) -> i32>;

/// Picks the device with the highest non-negative score (the first on ties).
#[no_mangle]
pub unsafe extern "C" fn syrah_device_select_by_score(
    score: syrah_device_score_fn,
    user_data: *mut c_void,
    out_device: *mut *const Device,
) -> syrah_status {
    guard(|| {
        super::need(out_device, "out_device")?;
        let f = score.ok_or_else(|| null("score"))?;
        let rt = runtime()?;
        let mut best: Option<(i32, &'static Device)> = None;
        for d in rt.devices() {
            // SAFETY: the user's callback receives a valid device handle.
            let s = unsafe { f(d as *const Device, user_data) };
            if s >= 0 && best.is_none_or(|(b, _)| s > b) {
                best = Some((s, d));
            }
        }
        let (_, d) = best.ok_or_else(|| {
            Error::new(
                Status::DeviceNotFound,
                format!(
                    "the score callback rejected all {} devices",
                    rt.devices().count()
                ),
            )
        })?;
        // SAFETY: forwarded contract.
        unsafe { out(out_device, d as *const Device, "out_device") }
    })
}

/// The default selector's score for a device (GPU 300, accelerator 200,
/// CPU 100), for use inside score callbacks.
#[no_mangle]
pub unsafe extern "C" fn syrah_device_default_score(
    device: *const Device,
    out_score: *mut i32,
) -> syrah_status {
    guard(|| {
        super::need(out_score, "out_score")?;
        let d = device_ref(device, "device")?;
        let s = default_score(&d.desc(d.platform()?));
        // SAFETY: forwarded contract.
        unsafe { out(out_score, s, "out_score") }
    })
}
