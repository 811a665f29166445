//! The CUDA back end's platform: NVIDIA GPUs as the CUDA driver lists
//! them, each paired with the same GPU on NVIDIA's OpenCL platform, whose
//! compiler turns OpenCL C into the PTX the CUDA back end loads. Listed
//! when `SYRAH_CUDA=on` (and `libcuda.so.1` loads).

use super::platform::{Device, Platform};
use crate::core::aspects::{
    usm_support, UsmCaps, UsmStrategy, USM_ACCESS, USM_ATOMIC_ACCESS, USM_CONCURRENT_ATOMIC_ACCESS,
};
use crate::core::launch::Limits;
use crate::core::selector::DeviceKind;
use crate::cuda::devices::{list, DeviceInfo};
use crate::cuda::driver::Cuda;

/// Whether the CUDA platform is asked for.
pub fn wanted() -> bool {
    std::env::var("SYRAH_CUDA").is_ok_and(|v| v == "on")
}

/// The CUDA platform, numbered `index`, with each device's OpenCL twin
/// found among `opencl` (the platforms found before it); `None` where the
/// CUDA driver is missing or lists no device.
pub fn platform(index: usize, opencl: &[Platform]) -> Option<Platform> {
    let infos = list().ok()?;
    if infos.is_empty() {
        return None;
    }
    let version = format!("CUDA {}", infos[0].driver_version);
    let mut taken = Vec::new();
    let devices = infos
        .iter()
        .enumerate()
        .map(|(i, info)| {
            let twin = opencl.iter().flat_map(|p| p.devices.iter()).find(|d| {
                d.vendor.contains("NVIDIA")
                    && d.name == info.name
                    && !taken.contains(&(d.platform_index, d.index))
            });
            if let Some(t) = twin {
                taken.push((t.platform_index, t.index));
            }
            device(index, i, info, twin)
        })
        .collect();
    Some(Platform {
        id: std::ptr::null_mut(),
        index,
        name: "CUDA".into(),
        vendor: "NVIDIA Corporation".into(),
        version,
        extensions: String::new(),
        intel_usm: None,
        command_buffers: None,
        devices,
        driver: Cuda::get(),
    })
}

fn device(platform_index: usize, index: usize, info: &DeviceInfo, twin: Option<&Device>) -> Device {
    let all = USM_ACCESS | USM_ATOMIC_ACCESS | USM_CONCURRENT_ATOMIC_ACCESS;
    let caps = UsmCaps {
        has_intel_usm: true,
        intel_host: USM_ACCESS | USM_ATOMIC_ACCESS,
        intel_device: USM_ACCESS | USM_ATOMIC_ACCESS,
        intel_shared: all,
        intel_system: 0,
        svm: 0,
    };
    let strategy = UsmStrategy::IntelUsm;
    let (major, minor) = info.capability;
    Device {
        // The seam names a CUDA device by its ordinal.
        id: info.ordinal as usize as crate::opencl::ffi::cl_device_id,
        platform_index,
        index,
        name: info.name.clone(),
        vendor: "NVIDIA Corporation".into(),
        driver_version: info.driver_version.clone(),
        version: format!(
            "CUDA {}, compute capability {major}.{minor}",
            info.driver_version
        ),
        opencl_c_version: twin.map(|t| t.opencl_c_version.clone()).unwrap_or_default(),
        extensions: twin.map(|t| t.extensions.clone()).unwrap_or_default(),
        il_version: String::new(),
        kind: DeviceKind::Gpu,
        compute_units: info.multiprocessors,
        global_mem_size: info.total_mem,
        max_mem_alloc_size: info.total_mem,
        max_clock_mhz: info.clock_mhz,
        base_align: 256,
        limits: Limits {
            max_work_group_size: info.max_threads_per_block,
            max_work_item_sizes: info.max_block,
            local_mem_size: info.shared_per_block,
        },
        fp64: true,
        out_of_order: true,
        profiling: true,
        caps,
        command_buffer: None,
        command_buffer_simultaneous: false,
        command_buffer_mutable: false,
        strategy,
        usm: usm_support(strategy, &caps),
        staging: crate::core::staging::enabled(false, None).0,
        routes: Default::default(),
        compiler: twin.map(|t| (t.platform_index, t.index)),
    }
}
