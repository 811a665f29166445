//! Platforms and devices, discovered once per process: OpenCL's, and the
//! CUDA back end's where asked for.

use crate::core::aspects::{
    choose_strategy, usm_support, UsmCaps, UsmStrategy, UsmSupport, USM_ACCESS, USM_ATOMIC_ACCESS,
    USM_CONCURRENT_ATOMIC_ACCESS,
};
use crate::core::error::{Error, Result, Status};
use crate::core::launch::Limits;
use crate::core::selector::{cuda_listing, CudaListing, DeviceDesc, DeviceKind};
use crate::cuda::devices::{list, DeviceInfo};
use crate::cuda::driver::Cuda;
use crate::opencl::cmdbuf::{
    CommandBuffers, CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR,
    CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR,
    CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR,
    CL_DEVICE_MUTABLE_DISPATCH_CAPABILITIES_KHR, CL_MUTABLE_DISPATCH_ARGUMENTS_KHR,
    MUTABLE_DISPATCH_ARRAY_VERSION,
};
use crate::opencl::ffi::*;
use crate::opencl::info;
use crate::opencl::intel::IntelUsm;
use crate::opencl::loader::{api, check, Api};
use std::sync::OnceLock;

/// One OpenCL platform and its devices.
pub struct Platform {
    pub id: cl_platform_id,
    pub index: usize,
    pub name: String,
    pub vendor: String,
    pub version: String,
    pub extensions: String,
    pub intel_usm: Option<IntelUsm>,
    /// `cl_khr_command_buffer`'s entry points, where a device has it.
    pub command_buffers: Option<CommandBuffers>,
    pub devices: Vec<Device>,
    /// The back end that runs the platform's commands.
    pub driver: &'static dyn crate::backend::Driver,
}

/// One device (OpenCL's, or the CUDA back end's) with everything Syrah
/// needs to know about it.
pub struct Device {
    /// The device as its back end names it: its `cl_device_id` on
    /// OpenCL, its ordinal on CUDA.
    pub id: crate::backend::DeviceH,
    pub platform_index: usize,
    pub index: usize,
    pub name: String,
    pub vendor: String,
    pub driver_version: String,
    pub version: String,
    pub opencl_c_version: String,
    pub extensions: String,
    pub il_version: String,
    pub kind: DeviceKind,
    pub compute_units: u32,
    pub global_mem_size: u64,
    pub max_mem_alloc_size: u64,
    pub max_clock_mhz: u32,
    /// Alignment of sub-buffer origins, in bytes; 0 where Syrah makes no
    /// sub-buffers (NVIDIA's driver crashed releasing one that a kernel had
    /// used), so that accessor windows at an offset are staged instead.
    pub base_align: usize,
    pub limits: Limits,
    pub fp64: bool,
    pub out_of_order: bool,
    pub profiling: bool,
    pub caps: UsmCaps,
    /// The device records commands into command-buffers
    /// (`cl_khr_command_buffer`, with its platform's entry points found,
    /// and no queue property required but profiling), with the queue
    /// properties its command-buffers' queues must have.
    pub command_buffer: Option<cl_command_queue_properties>,
    /// Its command-buffers may be made for simultaneous use (enqueued
    /// again while pending).
    pub command_buffer_simultaneous: bool,
    /// Its command-buffers' kernel arguments can be updated in place
    /// (`cl_khr_command_buffer_mutable_dispatch` 0.9.2 or later, with
    /// argument updates among its capabilities).
    pub command_buffer_mutable: bool,
    pub strategy: UsmStrategy,
    pub usm: UsmSupport,
    /// Whether large copies with ordinary host memory go through pinned
    /// chunks.
    pub staging: crate::core::staging::Staging,
    /// Whether the driver reads ordinary host memory when a copy from it
    /// is enqueued rather than when its queue reaches the copy (NVIDIA's
    /// OpenCL; `SYRAH_HOST_READS=early` or `late` says so for any device):
    /// such a copy behind unfinished work waits for it on the host.
    pub reads_host_early: bool,
    /// Whether a copy into the host that the caller waits for at once is
    /// made one blocking read (NVIDIA's OpenCL completes a read into
    /// ordinary memory enqueued without blocking later than a blocking one
    /// returns, however it is waited for: `bench_driver`;
    /// `SYRAH_READS_HOME=blocking` or `queued` says so for any OpenCL
    /// device).
    pub reads_home_blocking: bool,
    /// Whether an out-of-order queue spreads independent commands over its
    /// lanes even while the device finishes each before the next comes
    /// (CPU devices, whose drivers run each queue's commands one at a time
    /// on its cores, and the CUDA back end). Elsewhere such commands stay
    /// on the first lane until the device falls behind
    /// (`Queue::first_lane_takes`). `SYRAH_SPREAD=always` or `busy` says
    /// so for any OpenCL device.
    pub spread_always: bool,
    /// Whether each command is flushed as it is enqueued, so that it
    /// starts. Not on NVIDIA's OpenCL, which starts every command as it is
    /// enqueued (behind unflushed commands and user events too) and charges
    /// about 1 µs per flush; nor on CUDA, where flushing does nothing.
    /// `SYRAH_FLUSH=each` flushes each on every OpenCL device.
    pub flush_each: bool,
    /// Whether its kernels take a hidden byte offset after each global
    /// pointer argument (NVIDIA's OpenCL; `SYRAH_KERNEL_OFFSETS=off` says
    /// not): a buffer's storage there is then a memory object, and an
    /// accessor starting inside it is that object and an offset, with no
    /// SVM memory resident on the host and no staging.
    pub kernel_offsets: bool,
    /// The device (platform and device index) whose OpenCL compiler
    /// builds OpenCL C for this one, where its back end takes only
    /// binaries (the CUDA back end takes NVIDIA OpenCL's PTX).
    pub compiler: Option<(usize, usize)>,
    /// What copies between ordinary host memory and the device achieved,
    /// staged and not, towards the device and towards the host (see
    /// `core::route`): a property of the device and its host, shared by
    /// every context.
    pub(crate) routes: parking_lot::Mutex<[crate::core::route::Chooser; 2]>,
}

// SAFETY: OpenCL platform and device ids are process-wide identifiers that
// every OpenCL entry point accepts from any thread; the rest is plain data
// or behind a lock.
unsafe impl Send for Platform {}
// SAFETY: as above; nothing is mutated after discovery but what is locked.
unsafe impl Sync for Platform {}
// SAFETY: see Platform.
unsafe impl Send for Device {}
// SAFETY: see Platform.
unsafe impl Sync for Device {}

impl Device {
    /// The device as the back-end seam names it.
    pub fn handle(&self) -> crate::backend::DeviceH {
        self.id
    }

    pub fn desc(&self, platform: &Platform) -> DeviceDesc {
        DeviceDesc {
            platform_index: self.platform_index,
            device_index: self.index,
            platform_name: platform.name.clone(),
            platform_vendor: platform.vendor.clone(),
            device_name: self.name.clone(),
            device_vendor: self.vendor.clone(),
            kind: self.kind,
            preferred: platform.driver.preferred(),
        }
    }

    pub fn platform(&self) -> Result<&'static Platform> {
        runtime()?
            .platforms
            .get(self.platform_index)
            .ok_or_else(|| Error::new(Status::Internal, "device names an unknown platform"))
    }

    /// Whether buffers' storage on this device is a memory object rather
    /// than USM: without USM, or where kernels take hidden offsets.
    pub fn buffers_in_mem(&self) -> bool {
        self.strategy == UsmStrategy::None || self.kernel_offsets
    }

    /// "P.D name", for messages.
    pub fn label(&self) -> String {
        format!("{}.{} '{}'", self.platform_index, self.index, self.name)
    }
}

/// Every platform and device found.
pub struct Runtime {
    pub platforms: Vec<Platform>,
}

impl Runtime {
    pub fn devices(&self) -> impl Iterator<Item = &Device> {
        self.platforms.iter().flat_map(|p| p.devices.iter())
    }

    pub fn descs(&self) -> Vec<DeviceDesc> {
        self.platforms
            .iter()
            .flat_map(|p| p.devices.iter().map(move |d| d.desc(p)))
            .collect()
    }
}

static RUNTIME: OnceLock<Result<Runtime>> = OnceLock::new();

/// The discovered platforms; errors when OpenCL is missing.
pub fn runtime() -> Result<&'static Runtime> {
    RUNTIME.get_or_init(discover).as_ref().map_err(Clone::clone)
}

fn discover() -> Result<Runtime> {
    let api = api()?;
    let mut n: cl_uint = 0;
    // SAFETY: count query with a null list; `n` is a valid out pointer.
    let rc = unsafe { (api.clGetPlatformIDs)(0, std::ptr::null_mut(), &mut n) };
    if rc == CL_PLATFORM_NOT_FOUND_KHR || (rc == CL_SUCCESS && n == 0) {
        return Ok(Runtime {
            platforms: Vec::new(),
        });
    }
    check(rc, "clGetPlatformIDs")?;
    let mut ids = vec![std::ptr::null_mut(); n as usize];
    check(
        // SAFETY: `ids` has room for `n` platform ids.
        unsafe { (api.clGetPlatformIDs)(n, ids.as_mut_ptr(), std::ptr::null_mut()) },
        "clGetPlatformIDs",
    )?;
    let mut platforms = Vec::new();
    for id in ids {
        // A platform that cannot be queried is left out rather than failing
        // discovery of the others.
        if let Ok(p) = load_platform(api, id, platforms.len()) {
            platforms.push(p);
        }
    }
    let listing = cuda_wanted();
    if listing != CudaListing::Off {
        if let Some(p) = cuda_platform(platforms.len(), &platforms, listing) {
            platforms.push(p);
        }
    }
    Ok(Runtime { platforms })
}

fn load_platform(api: &Api, id: cl_platform_id, index: usize) -> Result<Platform> {
    let name = info::platform_string(api, id, CL_PLATFORM_NAME)?;
    let vendor = info::platform_string(api, id, CL_PLATFORM_VENDOR)?;
    let version = info::platform_string(api, id, CL_PLATFORM_VERSION)?;
    let extensions = info::platform_string(api, id, CL_PLATFORM_EXTENSIONS).unwrap_or_default();
    let mut n: cl_uint = 0;
    // SAFETY: count query with a null list.
    let rc =
        unsafe { (api.clGetDeviceIDs)(id, CL_DEVICE_TYPE_ALL, 0, std::ptr::null_mut(), &mut n) };
    let mut dev_ids = Vec::new();
    if rc == CL_SUCCESS && n > 0 {
        dev_ids = vec![std::ptr::null_mut(); n as usize];
        check(
            // SAFETY: `dev_ids` has room for `n` ids.
            unsafe {
                (api.clGetDeviceIDs)(
                    id,
                    CL_DEVICE_TYPE_ALL,
                    n,
                    dev_ids.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            },
            "clGetDeviceIDs",
        )?;
    } else if rc != CL_DEVICE_NOT_FOUND {
        check(rc, "clGetDeviceIDs")?;
    }
    let any_intel_usm = dev_ids.iter().any(|&d| {
        info::device_string(api, d, CL_DEVICE_EXTENSIONS)
            .map(|e| has_ext(&e, "cl_intel_unified_shared_memory"))
            .unwrap_or(false)
    });
    let intel_usm = if any_intel_usm {
        IntelUsm::load(api, id)
    } else {
        None
    };
    let any_command_buffer = dev_ids.iter().any(|&d| {
        info::device_string(api, d, CL_DEVICE_EXTENSIONS)
            .map(|e| has_ext(&e, "cl_khr_command_buffer"))
            .unwrap_or(false)
    });
    let command_buffers = if any_command_buffer {
        CommandBuffers::load(api, id)
    } else {
        None
    };
    let mut devices = Vec::new();
    for d in dev_ids {
        let fns = (
            intel_usm.is_some(),
            command_buffers.is_some(),
            command_buffers
                .as_ref()
                .is_some_and(|c| c.clUpdateMutableCommandsKHR.is_some()),
        );
        if let Ok(dev) = load_device(api, d, index, devices.len(), fns) {
            devices.push(dev);
        }
    }
    Ok(Platform {
        id,
        index,
        name,
        vendor,
        version,
        extensions,
        intel_usm,
        command_buffers,
        devices,
        driver: crate::backend::handoff_driver::wrap(crate::opencl::driver::OpenCl::for_platform(
            id,
            intel_usm,
            command_buffers,
        )),
    })
}

/// Whether `SYRAH_FLUSH=each` asks for every command to be flushed as it
/// is enqueued, on every device (any other value is named on standard
/// error once and ignored).
fn flush_each_setting() -> bool {
    static EACH: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *EACH.get_or_init(|| match std::env::var("SYRAH_FLUSH") {
        Ok(v) if v == "each" => true,
        Ok(v) if v.is_empty() || v == "auto" => false,
        Ok(v) => {
            eprintln!("syrah: SYRAH_FLUSH='{v}' is not 'each' or 'auto'; it is ignored");
            false
        }
        Err(_) => false,
    })
}

/// A setting `var` that turns a device property on (`on`) or off (`off`)
/// for every OpenCL device, read once (in `cell`): None where it is unset
/// or empty, and for any other value, which is named on standard error.
fn forced(
    cell: &'static std::sync::OnceLock<Option<bool>>,
    var: &str,
    on: &str,
    off: &str,
) -> Option<bool> {
    *cell.get_or_init(|| match std::env::var(var) {
        Ok(v) if v == on => Some(true),
        Ok(v) if v == off => Some(false),
        Ok(v) if !v.is_empty() => {
            eprintln!("syrah: {var}='{v}' is not '{on}' or '{off}'; it is ignored");
            None
        }
        _ => None,
    })
}

fn has_ext(list: &str, name: &str) -> bool {
    list.split_whitespace().any(|e| e == name)
}

fn load_device(
    api: &Api,
    id: cl_device_id,
    platform_index: usize,
    index: usize,
    (intel_fns, command_buffer_fns, update_fn): (bool, bool, bool),
) -> Result<Device> {
    let ty: cl_device_type = info::device_scalar(api, id, CL_DEVICE_TYPE)?;
    let kind = if ty & CL_DEVICE_TYPE_GPU != 0 {
        DeviceKind::Gpu
    } else if ty & CL_DEVICE_TYPE_CPU != 0 {
        DeviceKind::Cpu
    } else if ty & CL_DEVICE_TYPE_ACCELERATOR != 0 {
        DeviceKind::Accelerator
    } else {
        DeviceKind::Other
    };
    let extensions = info::device_string(api, id, CL_DEVICE_EXTENSIONS).unwrap_or_default();
    let sizes = info::device_sizes(api, id, CL_DEVICE_MAX_WORK_ITEM_SIZES).unwrap_or_default();
    let item = |i: usize| sizes.get(i).copied().unwrap_or(1);
    let queue_props: cl_command_queue_properties =
        info::device_scalar_or(api, id, CL_DEVICE_QUEUE_ON_HOST_PROPERTIES, 0);
    // A graph's lanes are in-order queues; profiling can be asked for.
    let required: cl_command_queue_properties = info::device_scalar_or(
        api,
        id,
        CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR,
        0,
    );
    let command_buffer = (command_buffer_fns
        && has_ext(&extensions, "cl_khr_command_buffer")
        && required & !CL_QUEUE_PROFILING_ENABLE == 0
        && std::env::var("SYRAH_COMMAND_BUFFER").map_or(true, |v| v != "off"))
    .then_some(required);
    let cb_caps: cl_ulong =
        info::device_scalar_or(api, id, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR, 0);
    let command_buffer_simultaneous = command_buffer.is_some()
        && cb_caps & CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR != 0;
    let command_buffer_mutable = command_buffer.is_some()
        && update_fn
        && has_ext(&extensions, "cl_khr_command_buffer_mutable_dispatch")
        && info::device_extension_version(api, id, "cl_khr_command_buffer_mutable_dispatch")
            .is_some_and(|v| v >= MUTABLE_DISPATCH_ARRAY_VERSION)
        && info::device_scalar_or::<cl_ulong>(
            api,
            id,
            CL_DEVICE_MUTABLE_DISPATCH_CAPABILITIES_KHR,
            0,
        ) & CL_MUTABLE_DISPATCH_ARGUMENTS_KHR
            != 0;
    let has_intel = intel_fns && has_ext(&extensions, "cl_intel_unified_shared_memory");
    let caps = UsmCaps {
        has_intel_usm: has_intel,
        intel_host: if has_intel {
            info::device_scalar_or(api, id, CL_DEVICE_HOST_MEM_CAPABILITIES_INTEL, 0)
        } else {
            0
        },
        intel_device: if has_intel {
            info::device_scalar_or(api, id, CL_DEVICE_DEVICE_MEM_CAPABILITIES_INTEL, 0)
        } else {
            0
        },
        intel_shared: if has_intel {
            info::device_scalar_or(
                api,
                id,
                CL_DEVICE_SINGLE_DEVICE_SHARED_MEM_CAPABILITIES_INTEL,
                0,
            )
        } else {
            0
        },
        intel_system: if has_intel {
            info::device_scalar_or(api, id, CL_DEVICE_SHARED_SYSTEM_MEM_CAPABILITIES_INTEL, 0)
        } else {
            0
        },
        svm: if api.clSVMAlloc.is_some() {
            info::device_scalar_or(api, id, CL_DEVICE_SVM_CAPABILITIES, 0)
        } else {
            0
        },
    };
    // SYRAH_FORCE_USM=none runs a device as if it had no USM (plain cl_mem
    // buffers only), to exercise that path on any machine.
    let strategy = match std::env::var("SYRAH_FORCE_USM").as_deref() {
        Ok("none") => UsmStrategy::None,
        _ => choose_strategy(&caps),
    };
    let usm = usm_support(strategy, &caps);
    let unified: cl_bool = info::device_scalar_or(api, id, CL_DEVICE_HOST_UNIFIED_MEMORY, 0);
    let (staging, bad_setting) = crate::core::staging::enabled(
        kind == DeviceKind::Gpu && unified == 0,
        std::env::var("SYRAH_STAGING").ok().as_deref(),
    );
    if let Some(msg) = bad_setting {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| eprintln!("syrah: {msg}"));
    }
    let double_fp: cl_ulong = info::device_scalar_or(api, id, CL_DEVICE_DOUBLE_FP_CONFIG, 0);
    let vendor = info::device_string(api, id, CL_DEVICE_VENDOR).unwrap_or_default();
    let kernel_offsets = crate::opencl::offsets::enabled_for(&vendor);
    let nvidia = vendor.contains("NVIDIA");
    static HOST_READS: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    static READS_HOME: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    let reads_host_early =
        forced(&HOST_READS, "SYRAH_HOST_READS", "early", "late").unwrap_or(nvidia);
    let reads_home_blocking =
        forced(&READS_HOME, "SYRAH_READS_HOME", "blocking", "queued").unwrap_or(nvidia);
    static SPREAD: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    let spread_always =
        forced(&SPREAD, "SYRAH_SPREAD", "always", "busy").unwrap_or(kind == DeviceKind::Cpu);
    let flush_each = flush_each_setting() || !nvidia;
    let base_align = if nvidia {
        0
    } else {
        (info::device_scalar_or::<cl_uint>(api, id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, 1024) as usize
            / 8)
        .max(1)
    };
    Ok(Device {
        id: crate::opencl::handles::device_h(id),
        platform_index,
        index,
        name: info::device_string(api, id, CL_DEVICE_NAME)?,
        vendor,
        driver_version: info::device_string(api, id, CL_DRIVER_VERSION).unwrap_or_default(),
        version: info::device_string(api, id, CL_DEVICE_VERSION).unwrap_or_default(),
        opencl_c_version: info::device_string(api, id, CL_DEVICE_OPENCL_C_VERSION)
            .unwrap_or_default(),
        il_version: info::device_string(api, id, CL_DEVICE_IL_VERSION).unwrap_or_default(),
        extensions,
        kind,
        compute_units: info::device_scalar_or(api, id, CL_DEVICE_MAX_COMPUTE_UNITS, 1),
        global_mem_size: info::device_scalar_or(api, id, CL_DEVICE_GLOBAL_MEM_SIZE, 0),
        max_mem_alloc_size: info::device_scalar_or(api, id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, 0),
        max_clock_mhz: info::device_scalar_or(api, id, CL_DEVICE_MAX_CLOCK_FREQUENCY, 0),
        base_align,
        limits: Limits {
            max_work_group_size: info::device_scalar_or(api, id, CL_DEVICE_MAX_WORK_GROUP_SIZE, 1),
            max_work_item_sizes: [item(0), item(1), item(2)],
            local_mem_size: info::device_scalar_or(api, id, CL_DEVICE_LOCAL_MEM_SIZE, 0),
        },
        fp64: double_fp != 0,
        out_of_order: queue_props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE != 0,
        profiling: queue_props & CL_QUEUE_PROFILING_ENABLE != 0,
        caps,
        command_buffer,
        command_buffer_simultaneous,
        command_buffer_mutable,
        strategy,
        usm,
        staging,
        reads_host_early,
        reads_home_blocking,
        spread_always,
        flush_each,
        kernel_offsets,
        routes: Default::default(),
        compiler: None,
    })
}

/// Which GPUs the CUDA platform lists (see `CudaListing`): each is
/// paired with the same GPU on NVIDIA's OpenCL platform, whose compiler
/// turns OpenCL C into the PTX the CUDA back end loads. A bad
/// `SYRAH_CUDA` is reported once on standard error.
fn cuda_wanted() -> CudaListing {
    let (listing, bad) = cuda_listing(std::env::var("SYRAH_CUDA").ok().as_deref());
    if let Some(msg) = bad {
        eprintln!("syrah: {msg}");
    }
    listing
}

/// The CUDA platform, numbered `index`, with each device's OpenCL twin
/// found among `opencl` (the platforms found before it), and devices
/// without one only when `listing` is `All`; `None` where the CUDA driver
/// is missing (said on standard error when `SYRAH_CUDA=on` asked for it)
/// or leaves no device.
fn cuda_platform(index: usize, opencl: &[Platform], listing: CudaListing) -> Option<Platform> {
    let all = listing == CudaListing::All;
    let infos = match list() {
        Ok(i) => i,
        Err(e) => {
            if all {
                eprintln!(
                    "syrah: SYRAH_CUDA=on, but the CUDA back end lists no device: {}",
                    e.message
                );
            }
            return None;
        }
    };
    let version = format!("CUDA {}", infos.first()?.driver_version);
    let mut taken = Vec::new();
    let mut paired = Vec::new();
    for info in &infos {
        let twin = opencl.iter().flat_map(|p| p.devices.iter()).find(|d| {
            d.vendor.contains("NVIDIA")
                && d.name == info.name
                && !taken.contains(&(d.platform_index, d.index))
        });
        if let Some(t) = twin {
            taken.push((t.platform_index, t.index));
        }
        if all || twin.is_some() {
            paired.push((info, twin));
        }
    }
    if paired.is_empty() {
        return None;
    }
    let devices = paired
        .into_iter()
        .enumerate()
        .map(|(i, (info, twin))| cuda_device(index, i, info, twin))
        .collect();
    Some(Platform {
        id: std::ptr::null_mut(),
        index,
        name: "CUDA driver".into(),
        vendor: "NVIDIA Corporation".into(),
        version,
        extensions: String::new(),
        intel_usm: None,
        command_buffers: None,
        devices,
        driver: Cuda::get(),
    })
}

fn cuda_device(
    platform_index: usize,
    index: usize,
    info: &DeviceInfo,
    twin: Option<&Device>,
) -> Device {
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
    let recording = std::env::var("SYRAH_COMMAND_BUFFER").map_or(true, |v| v != "off");
    let (major, minor) = info.capability;
    Device {
        id: crate::backend::DeviceH(info.ordinal as usize),
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
        // Graphs of kernels are recorded as CUDA graphs, launched again
        // while pending (in order), their arguments updated in place;
        // `SYRAH_COMMAND_BUFFER=off` turns recording off here too.
        command_buffer: recording.then_some(0),
        command_buffer_simultaneous: recording,
        command_buffer_mutable: recording,
        strategy,
        usm: usm_support(strategy, &caps),
        staging: crate::core::staging::enabled(false, None).0,
        // The CUDA back end keeps copies with ordinary memory in order.
        reads_host_early: false,
        // Its copies into ordinary memory are landed by Syrah's own threads.
        reads_home_blocking: false,
        spread_always: true,
        // A CUDA stream has nothing to flush.
        flush_each: false,
        kernel_offsets: false,
        routes: Default::default(),
        compiler: twin.map(|t| (t.platform_index, t.index)),
    }
}
