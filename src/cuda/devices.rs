//! The devices the CUDA driver serves, and what Syrah needs to know of
//! each (name, memory, limits, compute capability).

use super::loader::*;
use crate::core::error::Result;
use std::ffi::c_char;

/// One CUDA device as discovery reports it.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub ordinal: i32,
    pub name: String,
    pub total_mem: u64,
    pub multiprocessors: u32,
    pub clock_mhz: u32,
    pub max_threads_per_block: usize,
    pub max_block: [usize; 3],
    pub shared_per_block: u64,
    pub capability: (i32, i32),
    /// The driver's CUDA version, as "13.0".
    pub driver_version: String,
    /// The device's PCI address, as "0000:65:00.0".
    pub pci_bus_id: String,
}

/// Every device of the CUDA driver.
pub fn list() -> Result<Vec<DeviceInfo>> {
    let api = api()?;
    let mut n = 0;
    // SAFETY: `n` is a valid slot.
    let rc = unsafe { (api.cuDeviceGetCount)(&mut n) };
    check(api, rc, "cuDeviceGetCount")?;
    let mut version = 0;
    // SAFETY: `version` is a valid slot.
    let rc = unsafe { (api.cuDriverGetVersion)(&mut version) };
    check(api, rc, "cuDriverGetVersion")?;
    let driver_version = format!("{}.{}", version / 1000, (version % 1000) / 10);
    let mut out = Vec::new();
    for i in 0..n {
        let mut d: CUdevice = 0;
        // SAFETY: `d` is a valid slot and `i` is below the count.
        check(api, unsafe { (api.cuDeviceGet)(&mut d, i) }, "cuDeviceGet")?;
        let attr = |a: i32| -> i32 {
            let mut v = 0;
            // SAFETY: `v` is a valid slot; `d` is a device.
            let rc = unsafe { (api.cuDeviceGetAttribute)(&mut v, a, d) };
            if rc == CUDA_SUCCESS {
                v
            } else {
                0
            }
        };
        let text = |f: &dyn Fn(*mut c_char, i32) -> CUresult| -> String {
            let mut buf = [0 as c_char; 256];
            if f(buf.as_mut_ptr(), buf.len() as i32) != CUDA_SUCCESS {
                return String::new();
            }
            // SAFETY: CUDA wrote a NUL-terminated string into `buf`.
            unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        };
        let name = text(&|b, len| {
            // SAFETY: `b` holds `len` bytes; `d` is a device.
            unsafe { (api.cuDeviceGetName)(b, len, d) }
        });
        let pci_bus_id = text(&|b, len| {
            // SAFETY: as above.
            unsafe { (api.cuDeviceGetPCIBusId)(b, len, d) }
        });
        let mut mem = 0usize;
        // SAFETY: `mem` is a valid slot.
        let rc = unsafe { (api.cuDeviceTotalMem)(&mut mem, d) };
        check(api, rc, "cuDeviceTotalMem")?;
        let size = |v: i32| usize::try_from(v).unwrap_or(0).max(1);
        out.push(DeviceInfo {
            ordinal: d,
            name,
            total_mem: mem as u64,
            multiprocessors: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).max(1) as u32,
            clock_mhz: (attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1000).max(0) as u32,
            max_threads_per_block: size(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)),
            max_block: [
                size(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)),
                size(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)),
                size(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)),
            ],
            shared_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK).max(0) as u64,
            capability: (
                attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
            ),
            driver_version: driver_version.clone(),
            pci_bus_id,
        });
    }
    Ok(out)
}
