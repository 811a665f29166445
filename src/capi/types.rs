//! Constants and plain structs of the C API. Enumerations are integer
//! typedefs with `#define`d values, so any value a caller passes is safe to
//! receive and an unknown one gets `SYRAH_ERROR_INVALID_ARGUMENT`.

use std::ffi::c_void;

pub const SYRAH_VERSION_MAJOR: u32 = 0;
pub const SYRAH_VERSION_MINOR: u32 = 1;
pub const SYRAH_VERSION_PATCH: u32 = 0;
/// MAJOR * 10000 + MINOR * 100 + PATCH.
pub const SYRAH_VERSION: u32 = 100;

/// Group-local memory (local-memory arguments and kernel-scope `__local`
/// arrays in work-group kernels) is supported.
pub const SYRAH_EXT_LOCAL_MEMORY: u32 = 1;

/// Result of every function: 0 is success.
pub type syrah_status = i32;
pub const SYRAH_SUCCESS: syrah_status = 0;
/// A required pointer argument was NULL.
pub const SYRAH_ERROR_NULL_ARGUMENT: syrah_status = 1;
/// An argument has a value that makes no sense; the message names it.
pub const SYRAH_ERROR_INVALID_ARGUMENT: syrah_status = 2;
/// No OpenCL library could be loaded.
pub const SYRAH_ERROR_NO_OPENCL: syrah_status = 3;
/// No OpenCL platform or device, or none matching the selection.
pub const SYRAH_ERROR_DEVICE_NOT_FOUND: syrah_status = 4;
/// An OpenCL call failed; the message names it, the error and its code.
pub const SYRAH_ERROR_OPENCL: syrah_status = 5;
/// A program failed to build; the message holds the build log.
pub const SYRAH_ERROR_BUILD_FAILURE: syrah_status = 6;
/// The device cannot do this (see its aspects).
pub const SYRAH_ERROR_FEATURE_NOT_SUPPORTED: syrah_status = 7;
pub const SYRAH_ERROR_OUT_OF_DEVICE_MEMORY: syrah_status = 8;
pub const SYRAH_ERROR_OUT_OF_HOST_MEMORY: syrah_status = 9;
/// A pointer is not (inside) a USM allocation where one is required.
pub const SYRAH_ERROR_INVALID_POINTER: syrah_status = 10;
/// Objects of different contexts were combined.
pub const SYRAH_ERROR_WRONG_CONTEXT: syrah_status = 11;
/// A launch needs more local memory than the device has.
pub const SYRAH_ERROR_OUT_OF_LOCAL_MEMORY: syrah_status = 12;
/// The work-group size does not fit the range, device or kernel.
pub const SYRAH_ERROR_INVALID_WORK_GROUP: syrah_status = 13;
/// Kernel arguments are missing, extra or malformed.
pub const SYRAH_ERROR_KERNEL_ARGUMENTS: syrah_status = 14;
/// Profiling data was asked of an event that has none.
pub const SYRAH_ERROR_PROFILING_UNAVAILABLE: syrah_status = 15;
/// A submitted command failed while executing (asynchronous error).
pub const SYRAH_ERROR_EXECUTION_FAILED: syrah_status = 16;
/// A released or foreign handle was passed (with SYRAH_VALIDATE=1).
pub const SYRAH_ERROR_INVALID_HANDLE: syrah_status = 17;
/// An output buffer is too small; the message gives the size needed.
pub const SYRAH_ERROR_BUFFER_TOO_SMALL: syrah_status = 18;
/// The program has no kernel of that name; the message lists its kernels.
pub const SYRAH_ERROR_KERNEL_NOT_FOUND: syrah_status = 19;
/// A communication library's call (MPI, in the companion `syrah_mpi`)
/// failed; the message holds its own error text.
pub const SYRAH_ERROR_COMMUNICATION: syrah_status = 20;
/// The call cannot be done in the object's present state: waiting on a
/// queue that is recording a graph, recording what a graph cannot hold.
pub const SYRAH_ERROR_INVALID_OPERATION: syrah_status = 21;
/// A bug in Syrah (a caught panic); please report the message.
pub const SYRAH_ERROR_INTERNAL: syrah_status = 99;

/// Device selectors for `syrah_device_select`.
pub type syrah_selector = u32;
/// `SYRAH_DEVICE` if set, else the best device (GPU, accelerator, CPU).
pub const SYRAH_SELECTOR_DEFAULT: syrah_selector = 0;
pub const SYRAH_SELECTOR_CPU: syrah_selector = 1;
pub const SYRAH_SELECTOR_GPU: syrah_selector = 2;
pub const SYRAH_SELECTOR_ACCELERATOR: syrah_selector = 3;

/// Device categories (`SYRAH_DEVICE_INFO_TYPE`).
pub type syrah_device_type = u32;
pub const SYRAH_DEVICE_TYPE_CPU: syrah_device_type = 1;
pub const SYRAH_DEVICE_TYPE_GPU: syrah_device_type = 2;
pub const SYRAH_DEVICE_TYPE_ACCELERATOR: syrah_device_type = 3;
pub const SYRAH_DEVICE_TYPE_OTHER: syrah_device_type = 4;

/// Platform queries (strings).
pub type syrah_platform_info = u32;
pub const SYRAH_PLATFORM_INFO_NAME: syrah_platform_info = 1;
pub const SYRAH_PLATFORM_INFO_VENDOR: syrah_platform_info = 2;
pub const SYRAH_PLATFORM_INFO_VERSION: syrah_platform_info = 3;
pub const SYRAH_PLATFORM_INFO_EXTENSIONS: syrah_platform_info = 4;

/// Device queries: values below 100 are strings
/// (`syrah_device_get_info_string`), from 100 on numbers
/// (`syrah_device_get_info_u64`).
pub type syrah_device_info = u32;
pub const SYRAH_DEVICE_INFO_NAME: syrah_device_info = 1;
pub const SYRAH_DEVICE_INFO_VENDOR: syrah_device_info = 2;
pub const SYRAH_DEVICE_INFO_DRIVER_VERSION: syrah_device_info = 3;
/// The device's OpenCL version string.
pub const SYRAH_DEVICE_INFO_VERSION: syrah_device_info = 4;
pub const SYRAH_DEVICE_INFO_OPENCL_C_VERSION: syrah_device_info = 5;
pub const SYRAH_DEVICE_INFO_EXTENSIONS: syrah_device_info = 6;
pub const SYRAH_DEVICE_INFO_IL_VERSION: syrah_device_info = 7;
pub const SYRAH_DEVICE_INFO_PLATFORM_NAME: syrah_device_info = 8;
/// Name of the USM strategy: "cl_intel_unified_shared_memory", "svm", "none".
pub const SYRAH_DEVICE_INFO_USM_STRATEGY_NAME: syrah_device_info = 9;
/// A `syrah_device_type`.
pub const SYRAH_DEVICE_INFO_TYPE: syrah_device_info = 100;
pub const SYRAH_DEVICE_INFO_COMPUTE_UNITS: syrah_device_info = 101;
pub const SYRAH_DEVICE_INFO_GLOBAL_MEM_SIZE: syrah_device_info = 102;
pub const SYRAH_DEVICE_INFO_LOCAL_MEM_SIZE: syrah_device_info = 103;
pub const SYRAH_DEVICE_INFO_MAX_MEM_ALLOC_SIZE: syrah_device_info = 104;
pub const SYRAH_DEVICE_INFO_MAX_WORK_GROUP_SIZE: syrah_device_info = 105;
pub const SYRAH_DEVICE_INFO_MAX_WORK_ITEM_SIZE_0: syrah_device_info = 106;
pub const SYRAH_DEVICE_INFO_MAX_WORK_ITEM_SIZE_1: syrah_device_info = 107;
pub const SYRAH_DEVICE_INFO_MAX_WORK_ITEM_SIZE_2: syrah_device_info = 108;
pub const SYRAH_DEVICE_INFO_MAX_CLOCK_FREQUENCY: syrah_device_info = 109;
/// A `syrah_usm_strategy`.
pub const SYRAH_DEVICE_INFO_USM_STRATEGY: syrah_device_info = 110;
pub const SYRAH_DEVICE_INFO_PLATFORM_INDEX: syrah_device_info = 111;
pub const SYRAH_DEVICE_INFO_DEVICE_INDEX: syrah_device_info = 112;
/// 1 when out-of-order queues run commands concurrently on this device.
pub const SYRAH_DEVICE_INFO_OUT_OF_ORDER: syrah_device_info = 113;
/// 1 when queues on this device can record profiling timestamps.
pub const SYRAH_DEVICE_INFO_PROFILING: syrah_device_info = 114;
/// 1 when buffer transfers of 2D/3D boxes on this device use one
/// rectangular copy per box; 0 when they use one copy per contiguous run.
pub const SYRAH_DEVICE_INFO_BUFFER_RECT_COPIES: syrah_device_info = 115;
/// 1 when kernel-argument updates of a graph using command-buffers on this
/// device are applied to its recorded command-buffers in place
/// (`cl_khr_command_buffer_mutable_dispatch`); 0 when they are recorded
/// again at the next submission.
pub const SYRAH_DEVICE_INFO_GRAPH_UPDATES_IN_PLACE: syrah_device_info = 116;
/// The back end that drives the device (`SYRAH_BACKEND_*`): it decides
/// what `syrah_host_task_get_native` returns.
pub const SYRAH_DEVICE_INFO_BACKEND: syrah_device_info = 117;
/// 1 when a buffer's storage on this device is USM memory, whose device
/// address `syrah_buffer_get_device_pointer` gives; 0 when it is a memory
/// object: on a device without USM, and on NVIDIA's OpenCL, whose kernels
/// take a memory object and an offset for an accessor (unless
/// `SYRAH_KERNEL_OFFSETS=off`).
pub const SYRAH_DEVICE_INFO_BUFFER_POINTERS: syrah_device_info = 118;

/// How a device provides USM.
pub type syrah_usm_strategy = u32;
pub const SYRAH_USM_STRATEGY_NONE: syrah_usm_strategy = 0;
pub const SYRAH_USM_STRATEGY_INTEL: syrah_usm_strategy = 1;
pub const SYRAH_USM_STRATEGY_SVM: syrah_usm_strategy = 2;

/// Back ends (`SYRAH_DEVICE_INFO_BACKEND`).
pub type syrah_backend = u32;
/// OpenCL, loaded at run time.
pub const SYRAH_BACKEND_OPENCL: syrah_backend = 1;
/// NVIDIA's CUDA driver, loaded at run time (unless `SYRAH_CUDA=off`).
pub const SYRAH_BACKEND_CUDA: syrah_backend = 2;

/// SYCL-style device aspects for `syrah_device_has_aspect`.
pub type syrah_aspect = u32;
pub const SYRAH_ASPECT_CPU: syrah_aspect = 0;
pub const SYRAH_ASPECT_GPU: syrah_aspect = 1;
pub const SYRAH_ASPECT_ACCELERATOR: syrah_aspect = 2;
pub const SYRAH_ASPECT_FP64: syrah_aspect = 3;
pub const SYRAH_ASPECT_USM_DEVICE_ALLOCATIONS: syrah_aspect = 4;
pub const SYRAH_ASPECT_USM_HOST_ALLOCATIONS: syrah_aspect = 5;
pub const SYRAH_ASPECT_USM_SHARED_ALLOCATIONS: syrah_aspect = 6;
pub const SYRAH_ASPECT_USM_SYSTEM_ALLOCATIONS: syrah_aspect = 7;
pub const SYRAH_ASPECT_USM_ATOMIC_HOST_ALLOCATIONS: syrah_aspect = 8;
pub const SYRAH_ASPECT_USM_ATOMIC_SHARED_ALLOCATIONS: syrah_aspect = 9;

/// Kinds of USM allocation (`syrah_get_pointer_type`).
pub type syrah_usm_alloc = u32;
pub const SYRAH_USM_ALLOC_UNKNOWN: syrah_usm_alloc = 0;
pub const SYRAH_USM_ALLOC_HOST: syrah_usm_alloc = 1;
pub const SYRAH_USM_ALLOC_DEVICE: syrah_usm_alloc = 2;
pub const SYRAH_USM_ALLOC_SHARED: syrah_usm_alloc = 3;

/// Queue creation flags (bitwise or).
pub type syrah_queue_flags = u32;
/// Commands run in submission order; otherwise only given dependencies
/// order them.
pub const SYRAH_QUEUE_IN_ORDER: syrah_queue_flags = 1;
/// Events record profiling timestamps.
pub const SYRAH_QUEUE_PROFILING: syrah_queue_flags = 2;

/// Execution state of an event.
pub type syrah_event_status = u32;
pub const SYRAH_EVENT_QUEUED: syrah_event_status = 0;
pub const SYRAH_EVENT_SUBMITTED: syrah_event_status = 1;
pub const SYRAH_EVENT_RUNNING: syrah_event_status = 2;
pub const SYRAH_EVENT_COMPLETE: syrah_event_status = 3;
pub const SYRAH_EVENT_FAILED: syrah_event_status = 4;

/// Profiling timestamps, in nanoseconds of the device's clock.
pub type syrah_profiling_info = u32;
pub const SYRAH_PROFILING_QUEUED: syrah_profiling_info = 0;
pub const SYRAH_PROFILING_SUBMIT: syrah_profiling_info = 1;
pub const SYRAH_PROFILING_START: syrah_profiling_info = 2;
pub const SYRAH_PROFILING_END: syrah_profiling_info = 3;

/// Kernel queries for `syrah_kernel_get_info`.
pub type syrah_kernel_info = u32;
pub const SYRAH_KERNEL_INFO_NUM_ARGS: syrah_kernel_info = 0;
/// Largest work-group this kernel can run with on the device.
pub const SYRAH_KERNEL_INFO_WORK_GROUP_SIZE: syrah_kernel_info = 1;
/// Local memory the kernel declares itself (kernel-scope `__local`).
pub const SYRAH_KERNEL_INFO_LOCAL_MEM_SIZE: syrah_kernel_info = 2;
pub const SYRAH_KERNEL_INFO_PRIVATE_MEM_SIZE: syrah_kernel_info = 3;
pub const SYRAH_KERNEL_INFO_PREFERRED_WORK_GROUP_SIZE_MULTIPLE: syrah_kernel_info = 4;

/// Kinds of kernel argument.
pub type syrah_arg_kind = u32;
/// The argument bound to the kernel with `syrah_kernel_set_arg` (arguments
/// past the end of a launch's list are taken from there too).
pub const SYRAH_ARG_BOUND: syrah_arg_kind = 0;
/// `size` bytes read from `value` (a scalar or plain struct).
pub const SYRAH_ARG_VALUE: syrah_arg_kind = 1;
/// `value` is itself a USM pointer (of the queue's context); `size` unused.
pub const SYRAH_ARG_USM: syrah_arg_kind = 2;
/// `size` bytes of group-local memory for a `__local` pointer parameter;
/// `value` unused.
pub const SYRAH_ARG_LOCAL: syrah_arg_kind = 3;

/// The kernel argument is a buffer accessor of the command group: `size`
/// is the accessor's index; the kernel receives a pointer to the
/// accessor's first element (see `syrah_accessor`).
pub const SYRAH_ARG_ACCESSOR: syrah_arg_kind = 4;
/// An `int` parameter receiving the row pitch, in elements, of the
/// command group's accessor `size` (the buffer's own: elements from one
/// row of the accessor to the next).
pub const SYRAH_ARG_ACCESSOR_ROW_PITCH: syrah_arg_kind = 5;
/// An `int` parameter receiving the slice pitch, in elements, of the
/// command group's accessor `size`.
pub const SYRAH_ARG_ACCESSOR_SLICE_PITCH: syrah_arg_kind = 6;

/// Access modes of accessors and host accessors.
pub type syrah_access_mode = u32;
pub const SYRAH_ACCESS_READ: syrah_access_mode = 1;
/// Writes that keep the rest of the range: current data is transferred.
pub const SYRAH_ACCESS_WRITE: syrah_access_mode = 2;
pub const SYRAH_ACCESS_READ_WRITE: syrah_access_mode = 3;
/// Overwrites the whole range: no data is transferred.
pub const SYRAH_ACCESS_DISCARD_WRITE: syrah_access_mode = 4;
/// Overwrites the whole range and reads back its own writes: no transfer.
pub const SYRAH_ACCESS_DISCARD_READ_WRITE: syrah_access_mode = 5;

/// What a buffer does with the host memory given at creation.
pub type syrah_host_ownership = u32;
/// No host memory: the buffer starts without data.
pub const SYRAH_HOST_NONE: syrah_host_ownership = 0;
/// The runtime uses the memory until the buffer is released and writes the
/// final data back into it then (the release waits for that).
pub const SYRAH_HOST_WRITE_BACK: syrah_host_ownership = 1;
/// The data is copied in during creation; the memory may be reused at once;
/// nothing is written back.
pub const SYRAH_HOST_COPY_IN: syrah_host_ownership = 2;
/// Read-only data (a const pointer): read until release, never written.
pub const SYRAH_HOST_READ_ONLY: syrah_host_ownership = 3;
/// Shared memory: at release, `still_shared(shared_user_data)` decides
/// whether the final data is written back into it.
pub const SYRAH_HOST_SHARED: syrah_host_ownership = 4;

/// User callbacks providing the buffer's host storage. `allocate` returns
/// `size` bytes aligned to `alignment`, or NULL (the operation that needed
/// the memory then fails with `SYRAH_ERROR_OUT_OF_HOST_MEMORY`);
/// `deallocate` (may be NULL) frees it; `release` (may be NULL) is called
/// once the runtime will not call the allocator again, which can be after
/// the buffer was released.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct syrah_allocator {
    pub allocate: Option<unsafe extern "C" fn(usize, usize, *mut c_void) -> *mut c_void>,
    pub deallocate: Option<unsafe extern "C" fn(*mut c_void, usize, *mut c_void)>,
    pub release: Option<unsafe extern "C" fn(*mut c_void)>,
    pub user_data: *mut c_void,
}

/// Creation parameters of a buffer. Extents are in elements; with
/// `dimensions` below 3 only the first entries are used, the last one being
/// contiguous in memory. `page_size` all zero picks the default pages.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct syrah_buffer_desc {
    pub element_size: usize,
    pub dimensions: u32,
    pub range: [usize; 3],
    pub page_size: [usize; 3],
    pub host_pointer: *mut c_void,
    pub ownership: syrah_host_ownership,
    pub still_shared: Option<unsafe extern "C" fn(*mut c_void) -> bool>,
    pub shared_user_data: *mut c_void,
    /// May be NULL: the default allocator.
    pub allocator: *const syrah_allocator,
}

/// Bytes moved and copy commands issued for a buffer, per direction.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct syrah_buffer_stats {
    pub host_to_device_bytes: u64,
    pub device_to_host_bytes: u64,
    pub device_to_device_bytes: u64,
    pub host_to_device_copies: u64,
    pub device_to_host_copies: u64,
    pub device_to_device_copies: u64,
}

/// One kernel argument, in parameter order.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct syrah_kernel_arg {
    pub kind: syrah_arg_kind,
    pub size: usize,
    pub value: *const c_void,
}

/// A launch shape. Entries past `dimensions` are ignored. `local_size` all
/// zero lets the implementation choose the work-group size; otherwise every
/// used entry is non-zero and divides `global_size`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct syrah_range {
    pub dimensions: u32,
    pub global_size: [usize; 3],
    pub local_size: [usize; 3],
    pub global_offset: [usize; 3],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::Status;

    #[test]
    fn status_constants_match_the_core_codes() {
        let pairs = [
            (SYRAH_SUCCESS, Status::Success),
            (SYRAH_ERROR_NULL_ARGUMENT, Status::NullArgument),
            (SYRAH_ERROR_INVALID_ARGUMENT, Status::InvalidArgument),
            (SYRAH_ERROR_NO_OPENCL, Status::NoOpencl),
            (SYRAH_ERROR_DEVICE_NOT_FOUND, Status::DeviceNotFound),
            (SYRAH_ERROR_OPENCL, Status::Opencl),
            (SYRAH_ERROR_BUILD_FAILURE, Status::BuildFailure),
            (
                SYRAH_ERROR_FEATURE_NOT_SUPPORTED,
                Status::FeatureNotSupported,
            ),
            (SYRAH_ERROR_OUT_OF_DEVICE_MEMORY, Status::OutOfDeviceMemory),
            (SYRAH_ERROR_OUT_OF_HOST_MEMORY, Status::OutOfHostMemory),
            (SYRAH_ERROR_INVALID_POINTER, Status::InvalidPointer),
            (SYRAH_ERROR_WRONG_CONTEXT, Status::WrongContext),
            (SYRAH_ERROR_OUT_OF_LOCAL_MEMORY, Status::OutOfLocalMemory),
            (SYRAH_ERROR_INVALID_WORK_GROUP, Status::InvalidWorkGroup),
            (SYRAH_ERROR_KERNEL_ARGUMENTS, Status::KernelArguments),
            (
                SYRAH_ERROR_PROFILING_UNAVAILABLE,
                Status::ProfilingUnavailable,
            ),
            (SYRAH_ERROR_EXECUTION_FAILED, Status::ExecutionFailed),
            (SYRAH_ERROR_INVALID_HANDLE, Status::InvalidHandle),
            (SYRAH_ERROR_BUFFER_TOO_SMALL, Status::BufferTooSmall),
            (SYRAH_ERROR_KERNEL_NOT_FOUND, Status::KernelNotFound),
            (SYRAH_ERROR_COMMUNICATION, Status::Communication),
            (SYRAH_ERROR_INVALID_OPERATION, Status::InvalidOperation),
            (SYRAH_ERROR_INTERNAL, Status::Internal),
        ];
        assert_eq!(pairs.len(), Status::ALL.len());
        for (c, s) in pairs {
            assert_eq!(c, s.code(), "{}", s.name());
        }
        assert_eq!(
            SYRAH_VERSION,
            SYRAH_VERSION_MAJOR * 10000 + SYRAH_VERSION_MINOR * 100 + SYRAH_VERSION_PATCH
        );
    }
}
