//! Loads NVIDIA's CUDA driver library at run time and resolves the
//! entry points the CUDA back end calls. Syrah links neither OpenCL nor
//! CUDA: where `libcuda.so.1` is absent, this is an error the caller
//! reports as "no CUDA" and nothing else changes.
//!
//! The library is `libcuda.so.1`, else `libcuda.so`. `SYRAH_CUDA_LIBRARY`
//! names a library whose entry points come first (a fault-injection or
//! tracing library defines those it wraps, and the rest come from
//! `libcuda.so.1`), or a driver library at another path.
//!
//! Its results become Syrah errors here, and the contexts that an error
//! CUDA keeps for the whole context (a kernel's fault) has lost are
//! remembered, so that what waits for their devices can stop waiting.

#![allow(non_snake_case)]

use crate::core::error::{Error, Status};
use parking_lot::Mutex;
use std::ffi::{c_char, c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// A CUDA result code (0 is success).
pub type CUresult = i32;
/// A device ordinal.
pub type CUdevice = i32;
/// A device address.
pub type CUdeviceptr = u64;
pub type CUcontext = *mut c_void;
pub type CUmodule = *mut c_void;
pub type CUfunction = *mut c_void;
pub type CUstream = *mut c_void;
pub type CUevent = *mut c_void;
pub type CUgraph = *mut c_void;
pub type CUgraphNode = *mut c_void;
pub type CUgraphExec = *mut c_void;

/// `CUDA_MEMCPY3D`: a copy (here one row of `width` bytes between two
/// addresses, with unified addressing).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Memcpy3D {
    pub src_x: usize,
    pub src_y: usize,
    pub src_z: usize,
    pub src_lod: usize,
    pub src_type: u32,
    pub src_host: usize,
    pub src_device: CUdeviceptr,
    pub src_array: usize,
    pub reserved0: usize,
    pub src_pitch: usize,
    pub src_height: usize,
    pub dst_x: usize,
    pub dst_y: usize,
    pub dst_z: usize,
    pub dst_lod: usize,
    pub dst_type: u32,
    pub dst_host: usize,
    pub dst_device: CUdeviceptr,
    pub dst_array: usize,
    pub reserved1: usize,
    pub dst_pitch: usize,
    pub dst_height: usize,
    pub width: usize,
    pub height: usize,
    pub depth: usize,
}

/// `CUDA_MEMSET_NODE_PARAMS`: a fill of `width` elements of 1, 2 or 4
/// bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MemsetParams {
    pub dst: CUdeviceptr,
    pub pitch: usize,
    pub value: c_uint,
    pub element_size: c_uint,
    pub width: usize,
    pub height: usize,
}

/// `CUDA_KERNEL_NODE_PARAMS_v2`: a graph's kernel node.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelNodeParams {
    pub func: CUfunction,
    pub grid: [c_uint; 3],
    pub block: [c_uint; 3],
    pub shared_mem: c_uint,
    pub params: *mut *mut c_void,
    pub extra: *mut *mut c_void,
    pub kern: *mut c_void,
    pub ctx: CUcontext,
}

pub const CUDA_SUCCESS: CUresult = 0;
pub const CUDA_ERROR_OUT_OF_MEMORY: CUresult = 2;
pub const CUDA_ERROR_NOT_READY: CUresult = 600;
pub const CUDA_ERROR_NOT_SUPPORTED: CUresult = 801;
pub const CUDA_ERROR_UNKNOWN: CUresult = 999;
pub const CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: i32 = 1;
pub const CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: i32 = 2;
pub const CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: i32 = 3;
pub const CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: i32 = 4;
pub const CU_DEVICE_ATTRIBUTE_CLOCK_RATE: i32 = 13;
pub const CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: i32 = 8;
pub const CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: i32 = 16;
pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: i32 = 75;
pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: i32 = 76;
pub const CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: i32 = 8;
pub const CU_JIT_ERROR_LOG_BUFFER: i32 = 5;
pub const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: i32 = 6;
pub const CU_STREAM_NON_BLOCKING: c_uint = 1;
pub const CU_EVENT_DISABLE_TIMING: c_uint = 2;

macro_rules! cuda_table {
    ($( $name:ident = $sym:literal : fn( $( $arg:ty ),* ) ; )*) => {
        /// Entry points resolved from the CUDA driver library.
        pub struct Api {
            _libs: Vec<libloading::Library>,
            /// Path or name the library was opened from.
            pub origin: String,
            $( pub $name: unsafe extern "C" fn( $( $arg ),* ) -> CUresult, )*
            /// Stream memory operations, where the driver has them.
            pub stream_ops: Option<StreamOps>,
        }

        impl Api {
            /// Each entry point from the first of `libs` that has it.
            fn resolve(libs: Vec<libloading::Library>, origin: String) -> Result<Api, Error> {
                $(
                    // SAFETY: the symbol's signature is the CUDA driver API's
                    // for this versioned name; the pointer is copied out while
                    // `libs` are kept alive in the returned table.
                    let $name = unsafe {
                        match libs.iter().find_map(|lib| {
                            lib.get::<unsafe extern "C" fn( $( $arg ),* ) -> CUresult>(
                                concat!($sym, "\0").as_bytes(),
                            )
                            .ok()
                            .map(|s| *s)
                        }) {
                            Some(f) => f,
                            None => {
                                return Err(Error::new(
                                    Status::DeviceNotFound,
                                    format!(
                                        "the CUDA library '{}' lacks the entry point {}",
                                        origin, $sym
                                    ),
                                ))
                            }
                        }
                    };
                )*
                let stream_ops = StreamOps::resolve(&libs);
                Ok(Api { _libs: libs, origin, $( $name, )* stream_ops })
            }
        }
    };
}

cuda_table! {
    cuInit = "cuInit": fn(c_uint);
    cuDriverGetVersion = "cuDriverGetVersion": fn(*mut i32);
    cuGetErrorName = "cuGetErrorName": fn(CUresult, *mut *const c_char);
    cuDeviceGetCount = "cuDeviceGetCount": fn(*mut i32);
    cuDeviceGet = "cuDeviceGet": fn(*mut CUdevice, i32);
    cuDeviceGetName = "cuDeviceGetName": fn(*mut c_char, i32, CUdevice);
    cuDeviceGetAttribute = "cuDeviceGetAttribute": fn(*mut i32, i32, CUdevice);
    cuDeviceTotalMem = "cuDeviceTotalMem_v2": fn(*mut usize, CUdevice);
    cuDevicePrimaryCtxRetain = "cuDevicePrimaryCtxRetain": fn(*mut CUcontext, CUdevice);
    cuDevicePrimaryCtxRelease = "cuDevicePrimaryCtxRelease_v2": fn(CUdevice);
    cuCtxSetCurrent = "cuCtxSetCurrent": fn(CUcontext);
    cuCtxGetCurrent = "cuCtxGetCurrent": fn(*mut CUcontext);
    cuCtxSynchronize = "cuCtxSynchronize": fn();
    cuModuleLoadDataEx = "cuModuleLoadDataEx": fn(*mut CUmodule, *const c_void, c_uint, *mut i32, *mut *mut c_void);
    cuModuleUnload = "cuModuleUnload": fn(CUmodule);
    cuModuleGetFunction = "cuModuleGetFunction": fn(*mut CUfunction, CUmodule, *const c_char);
    cuFuncSetAttribute = "cuFuncSetAttribute": fn(CUfunction, i32, i32);
    cuLaunchKernel = "cuLaunchKernel": fn(CUfunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, CUstream, *mut *mut c_void, *mut *mut c_void);
    cuMemAlloc = "cuMemAlloc_v2": fn(*mut CUdeviceptr, usize);
    cuMemFree = "cuMemFree_v2": fn(CUdeviceptr);
    cuMemAllocHost = "cuMemAllocHost_v2": fn(*mut *mut c_void, usize);
    cuMemFreeHost = "cuMemFreeHost": fn(*mut c_void);
    cuMemAllocManaged = "cuMemAllocManaged": fn(*mut CUdeviceptr, usize, c_uint);
    cuMemcpyHtoD = "cuMemcpyHtoD_v2": fn(CUdeviceptr, *const c_void, usize);
    cuMemcpyDtoH = "cuMemcpyDtoH_v2": fn(*mut c_void, CUdeviceptr, usize);
    cuMemcpyAsync = "cuMemcpyAsync": fn(CUdeviceptr, CUdeviceptr, usize, CUstream);
    cuMemsetD8Async = "cuMemsetD8Async": fn(CUdeviceptr, u8, usize, CUstream);
    cuMemsetD32Async = "cuMemsetD32Async": fn(CUdeviceptr, c_uint, usize, CUstream);
    cuStreamCreate = "cuStreamCreate": fn(*mut CUstream, c_uint);
    cuStreamDestroy = "cuStreamDestroy_v2": fn(CUstream);
    cuStreamSynchronize = "cuStreamSynchronize": fn(CUstream);
    cuStreamQuery = "cuStreamQuery": fn(CUstream);
    cuStreamWaitEvent = "cuStreamWaitEvent": fn(CUstream, CUevent, c_uint);
    cuEventCreate = "cuEventCreate": fn(*mut CUevent, c_uint);
    cuEventRecord = "cuEventRecord": fn(CUevent, CUstream);
    cuEventQuery = "cuEventQuery": fn(CUevent);
    cuEventSynchronize = "cuEventSynchronize": fn(CUevent);
    cuEventElapsedTime = "cuEventElapsedTime": fn(*mut f32, CUevent, CUevent);
    cuEventDestroy = "cuEventDestroy_v2": fn(CUevent);
    cuLaunchHostFunc = "cuLaunchHostFunc": fn(CUstream, HostFn, *mut c_void);
    cuMemHostAlloc = "cuMemHostAlloc": fn(*mut *mut c_void, usize, c_uint);
    cuMemHostRegister = "cuMemHostRegister_v2": fn(*mut c_void, usize, c_uint);
    cuMemHostUnregister = "cuMemHostUnregister": fn(*mut c_void);
    cuFuncGetAttribute = "cuFuncGetAttribute": fn(*mut i32, i32, CUfunction);
    cuMemsetD16Async = "cuMemsetD16Async": fn(CUdeviceptr, u16, usize, CUstream);
    cuMemcpy2DAsync = "cuMemcpy2DAsync_v2": fn(*const Memcpy2D, CUstream);
    cuMemPrefetchAsync = "cuMemPrefetchAsync_v2": fn(CUdeviceptr, usize, MemLocation, c_uint, CUstream);
    cuDeviceGetPCIBusId = "cuDeviceGetPCIBusId": fn(*mut c_char, i32, CUdevice);
    cuPointerGetAttribute = "cuPointerGetAttribute": fn(*mut c_void, i32, CUdeviceptr);
    cuMemAdvise = "cuMemAdvise_v2": fn(CUdeviceptr, usize, i32, MemLocation);
    cuGraphCreate = "cuGraphCreate": fn(*mut CUgraph, c_uint);
    cuGraphAddKernelNode = "cuGraphAddKernelNode_v2": fn(*mut CUgraphNode, CUgraph, *const CUgraphNode, usize, *const KernelNodeParams);
    cuGraphAddMemcpyNode = "cuGraphAddMemcpyNode": fn(*mut CUgraphNode, CUgraph, *const CUgraphNode, usize, *const Memcpy3D, CUcontext);
    cuGraphAddMemsetNode = "cuGraphAddMemsetNode": fn(*mut CUgraphNode, CUgraph, *const CUgraphNode, usize, *const MemsetParams, CUcontext);
    cuGraphInstantiate = "cuGraphInstantiateWithFlags": fn(*mut CUgraphExec, CUgraph, u64);
    cuGraphLaunch = "cuGraphLaunch": fn(CUgraphExec, CUstream);
    cuGraphExecKernelNodeSetParams = "cuGraphExecKernelNodeSetParams_v2": fn(CUgraphExec, CUgraphNode, *const KernelNodeParams);
    cuGraphExecDestroy = "cuGraphExecDestroy": fn(CUgraphExec);
    cuGraphDestroy = "cuGraphDestroy": fn(CUgraph);
}

/// `cuStreamWaitValue32` and `cuStreamWriteValue32`: a stream waiting
/// for, or writing, a 32-bit word of memory (here pinned host memory
/// mapped into the device), and `cuMemHostGetDevicePointer`, which gives
/// such memory's device address. Absent from drivers before CUDA 11.7.
#[derive(Clone, Copy)]
pub struct StreamOps {
    pub wait: unsafe extern "C" fn(CUstream, CUdeviceptr, u32, c_uint) -> CUresult,
    pub write: unsafe extern "C" fn(CUstream, CUdeviceptr, u32, c_uint) -> CUresult,
    pub device_pointer: unsafe extern "C" fn(*mut CUdeviceptr, *mut c_void, c_uint) -> CUresult,
}

/// `CU_STREAM_WAIT_VALUE_GEQ`: wait until the word, compared cyclically,
/// is at least the value.
pub const CU_STREAM_WAIT_VALUE_GEQ: c_uint = 0;
/// `CU_STREAM_WRITE_VALUE_DEFAULT`: the write comes after a fence, so
/// what the stream wrote before is seen first.
pub const CU_STREAM_WRITE_VALUE_DEFAULT: c_uint = 0;

impl StreamOps {
    /// The three entry points from the first of `libs` that has each;
    /// `None` where one is missing.
    fn resolve(libs: &[libloading::Library]) -> Option<StreamOps> {
        fn find<T: Copy>(libs: &[libloading::Library], sym: &[u8]) -> Option<T> {
            // SAFETY: `T` is the driver API's signature for this versioned
            // name (see the fields of `StreamOps`); the pointer is copied
            // out while `libs` stay loaded in the `Api` that keeps it.
            libs.iter()
                .find_map(|lib| unsafe { lib.get::<T>(sym) }.ok().map(|s| *s))
        }
        Some(StreamOps {
            wait: find(libs, b"cuStreamWaitValue32_v2\0")?,
            write: find(libs, b"cuStreamWriteValue32_v2\0")?,
            device_pointer: find(libs, b"cuMemHostGetDevicePointer_v2\0")?,
        })
    }
}

/// A host function a stream runs in order (`cuLaunchHostFunc`); it must
/// not call CUDA.
pub type HostFn = unsafe extern "C" fn(*mut c_void);

/// `CUmemLocation`: where memory is to be (a device by ordinal).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemLocation {
    pub kind: i32,
    pub id: i32,
}

pub const CU_MEM_LOCATION_TYPE_DEVICE: i32 = 1;
pub const CU_MEMORYTYPE_UNIFIED: u32 = 4;
pub const CU_POINTER_ATTRIBUTE_MEMORY_TYPE: i32 = 2;
pub const CU_MEMHOSTALLOC_PORTABLE: c_uint = 1;
pub const CU_MEMHOSTREGISTER_PORTABLE: c_uint = 1;
pub const CU_MEMHOSTALLOC_DEVICEMAP: c_uint = 2;
pub const CU_MEM_ATTACH_GLOBAL: c_uint = 1;
pub const CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: i32 = 0;
pub const CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: i32 = 1;
pub const CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: i32 = 3;

/// `CUDA_MEMCPY2D`: a copy of `height` rows of `width` bytes between two
/// pitched regions; with unified addressing both sides are addresses
/// (`*_device`), of host or device memory alike.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Memcpy2D {
    pub src_x: usize,
    pub src_y: usize,
    pub src_type: u32,
    pub src_host: usize,
    pub src_device: CUdeviceptr,
    pub src_array: usize,
    pub src_pitch: usize,
    pub dst_x: usize,
    pub dst_y: usize,
    pub dst_type: u32,
    pub dst_host: usize,
    pub dst_device: CUdeviceptr,
    pub dst_array: usize,
    pub dst_pitch: usize,
    pub width: usize,
    pub height: usize,
}

static API: OnceLock<Result<Api, Error>> = OnceLock::new();

fn open(name: &str) -> Result<libloading::Library, String> {
    // SAFETY: opening a shared library runs its initialisers; the CUDA
    // driver library's (and an interposer's) have no preconditions.
    unsafe { libloading::Library::new(name) }.map_err(|e| format!("{name}: {e}"))
}

fn load() -> Result<Api, Error> {
    let none = |failures: &[String]| {
        Error::new(
            Status::DeviceNotFound,
            format!(
                "no CUDA driver library could be loaded ({}); NVIDIA's driver installs libcuda.so.1, \
                 or set SYRAH_CUDA_LIBRARY to its path",
                failures.join("; ")
            ),
        )
    };
    let mut libs = Vec::new();
    let mut origin = None;
    if let Some(first) = std::env::var("SYRAH_CUDA_LIBRARY")
        .ok()
        .filter(|p| !p.is_empty())
    {
        libs.push(open(&first).map_err(|e| none(&[e]))?);
        origin = Some(first);
    }
    let mut failures = Vec::new();
    for name in ["libcuda.so.1", "libcuda.so"] {
        match open(name) {
            Ok(l) => {
                libs.push(l);
                origin.get_or_insert_with(|| name.to_string());
                break;
            }
            Err(e) => failures.push(e),
        }
    }
    let Some(origin) = origin else {
        return Err(none(&failures));
    };
    let api = Api::resolve(libs, origin)?;
    // SAFETY: cuInit takes flags, which must be 0.
    check(&api, unsafe { (api.cuInit)(0) }, "cuInit")?;
    Ok(api)
}

/// The process-wide CUDA entry points, loaded and initialised on first
/// use.
pub fn api() -> Result<&'static Api, Error> {
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// The name CUDA gives result `code` (`CUDA_ERROR_...`).
pub fn error_name(api: &Api, code: CUresult) -> String {
    let mut name: *const c_char = std::ptr::null();
    // SAFETY: `name` is a valid slot; CUDA stores a pointer to a static
    // string there, or fails for an unknown code.
    let rc = unsafe { (api.cuGetErrorName)(code, &mut name) };
    if rc != CUDA_SUCCESS || name.is_null() {
        return format!("CUDA error {code}");
    }
    // SAFETY: CUDA returned a NUL-terminated static string.
    unsafe { std::ffi::CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}

/// Turns a CUDA result into a Syrah error naming the call.
pub fn check(api: &Api, code: CUresult, what: &str) -> Result<(), Error> {
    if code == CUDA_SUCCESS {
        Ok(())
    } else {
        LAST_FAILURE.set(code);
        let status = match code {
            CUDA_ERROR_OUT_OF_MEMORY => Status::OutOfDeviceMemory,
            _ => Status::Opencl,
        };
        let mut lost = "";
        if is_sticky(code) {
            let mut ctx: CUcontext = std::ptr::null_mut();
            // SAFETY: `ctx` is a valid slot.
            if unsafe { (api.cuCtxGetCurrent)(&mut ctx) } == CUDA_SUCCESS && !ctx.is_null() {
                note_lost(ctx as usize);
            }
            lost = "; a command on this device failed, and CUDA fails every later call of its \
                    context";
        }
        Err(Error::new(
            status,
            format!("{what} failed: {} ({code}){lost}", error_name(api, code)),
        ))
    }
}

/// Contexts whose device failed with an error that CUDA keeps for the
/// whole context (a kernel's fault, say): their streams run nothing more.
static LOST: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// How many contexts [`LOST`] holds, read without its lock.
static LOST_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Whether CUDA error `code` leaves its context unable to run anything
/// more: an uncorrectable memory error, or a kernel that faulted (an
/// illegal address or instruction, a misaligned address, a hardware
/// stack error, a failed assertion, a timeout).
pub fn is_sticky(code: CUresult) -> bool {
    matches!(code, 214 | 700 | 702 | 710 | 714..=719)
}

/// Remembers context `ctx` as lost.
pub fn note_lost(ctx: usize) {
    let mut lost = LOST.lock();
    if !lost.contains(&ctx) {
        lost.push(ctx);
        LOST_COUNT.store(lost.len(), Ordering::Release);
    }
}

/// How many contexts have been found lost (it only grows).
pub fn lost_count() -> usize {
    LOST_COUNT.load(Ordering::Acquire)
}

/// Whether context `ctx` was found lost.
pub fn is_lost(ctx: usize) -> bool {
    lost_count() > 0 && LOST.lock().contains(&ctx)
}

thread_local! {
    /// The code of the last CUDA call `check` found failed on this thread.
    static LAST_FAILURE: std::cell::Cell<CUresult> = const { std::cell::Cell::new(CUDA_SUCCESS) };
}

/// Takes the code of the last failed CUDA call on this thread (success
/// where none failed since the last take).
pub fn take_last_failure() -> CUresult {
    LAST_FAILURE.replace(CUDA_SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::is_sticky;

    #[test]
    fn only_errors_kept_for_the_context_are_sticky() {
        for code in [214, 700, 702, 710, 714, 715, 716, 717, 718, 719] {
            assert!(is_sticky(code), "{code}");
        }
        // Out of memory, not ready, out of resources, too large a
        // cooperative launch, not supported: the context goes on.
        for code in [0, 2, 600, 701, 720, 801, 999] {
            assert!(!is_sticky(code), "{code}");
        }
    }
}
