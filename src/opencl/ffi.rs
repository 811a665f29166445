//! OpenCL types and constants used by the backend, declared from the
//! OpenCL 3.0 and `cl_intel_unified_shared_memory` specifications.
//!
//! Nothing here links against OpenCL: every entry point is resolved at run
//! time by [`super::loader`].

#![allow(non_camel_case_types, dead_code)]

use std::ffi::c_void;

pub type cl_int = i32;
pub type cl_uint = u32;
pub type cl_ulong = u64;
pub type cl_bool = cl_uint;
pub type cl_bitfield = cl_ulong;
pub type cl_properties = cl_ulong;

#[repr(C)]
pub struct _cl_platform_id {
    _p: [u8; 0],
}
#[repr(C)]
pub struct _cl_device_id {
    _p: [u8; 0],
}
#[repr(C)]
pub struct _cl_context {
    _p: [u8; 0],
}
#[repr(C)]
pub struct _cl_command_queue {
    _p: [u8; 0],
}
#[repr(C)]
pub struct _cl_program {
    _p: [u8; 0],
}
#[repr(C)]
pub struct _cl_kernel {
    _p: [u8; 0],
}
#[repr(C)]
pub struct _cl_event {
    _p: [u8; 0],
}
#[repr(C)]
pub struct _cl_mem {
    _p: [u8; 0],
}

pub type cl_platform_id = *mut _cl_platform_id;
pub type cl_device_id = *mut _cl_device_id;
pub type cl_context = *mut _cl_context;
pub type cl_command_queue = *mut _cl_command_queue;
pub type cl_program = *mut _cl_program;
pub type cl_kernel = *mut _cl_kernel;
pub type cl_event = *mut _cl_event;
pub type cl_mem = *mut _cl_mem;

pub type cl_device_type = cl_bitfield;
pub type cl_platform_info = cl_uint;
pub type cl_device_info = cl_uint;
pub type cl_context_properties = isize;
pub type cl_queue_properties = cl_properties;
pub type cl_command_queue_properties = cl_bitfield;
pub type cl_program_build_info = cl_uint;
pub type cl_program_info = cl_uint;
pub type cl_kernel_info = cl_uint;
pub type cl_kernel_work_group_info = cl_uint;
pub type cl_kernel_exec_info = cl_uint;
pub type cl_event_info = cl_uint;
pub type cl_profiling_info = cl_uint;
pub type cl_svm_mem_flags = cl_bitfield;
pub type cl_mem_flags = cl_bitfield;
pub type cl_map_flags = cl_bitfield;
pub type cl_mem_migration_flags = cl_bitfield;
pub type cl_device_svm_capabilities = cl_bitfield;
pub type cl_mem_properties_intel = cl_properties;
pub type cl_mem_info_intel = cl_uint;
pub type cl_mem_advice_intel = cl_uint;
pub type cl_unified_shared_memory_capabilities_intel = cl_bitfield;

pub type ContextNotify = Option<unsafe extern "C" fn(*const i8, *const c_void, usize, *mut c_void)>;
pub type ProgramNotify = Option<unsafe extern "C" fn(cl_program, *mut c_void)>;
pub type EventNotify = Option<unsafe extern "C" fn(cl_event, cl_int, *mut c_void)>;

pub const CL_TRUE: cl_bool = 1;
pub const CL_FALSE: cl_bool = 0;

// Error codes.
pub const CL_SUCCESS: cl_int = 0;
pub const CL_DEVICE_NOT_FOUND: cl_int = -1;
pub const CL_OUT_OF_RESOURCES: cl_int = -5;
pub const CL_OUT_OF_HOST_MEMORY: cl_int = -6;
pub const CL_MEM_OBJECT_ALLOCATION_FAILURE: cl_int = -4;
pub const CL_BUILD_PROGRAM_FAILURE: cl_int = -11;
pub const CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST: cl_int = -14;
pub const CL_INVALID_VALUE: cl_int = -30;
pub const CL_INVALID_BINARY: cl_int = -42;
pub const CL_INVALID_BUILD_OPTIONS: cl_int = -43;
pub const CL_INVALID_ARG_VALUE: cl_int = -50;
pub const CL_INVALID_ARG_SIZE: cl_int = -51;
pub const CL_INVALID_KERNEL_ARGS: cl_int = -52;
pub const CL_INVALID_KERNEL_NAME: cl_int = -46;
pub const CL_INVALID_OPERATION: cl_int = -59;
pub const CL_PLATFORM_NOT_FOUND_KHR: cl_int = -1001;

// Platform info.
pub const CL_PLATFORM_PROFILE: cl_platform_info = 0x0900;
pub const CL_PLATFORM_VERSION: cl_platform_info = 0x0901;
pub const CL_PLATFORM_NAME: cl_platform_info = 0x0902;
pub const CL_PLATFORM_VENDOR: cl_platform_info = 0x0903;
pub const CL_PLATFORM_EXTENSIONS: cl_platform_info = 0x0904;

// Device types.
pub const CL_DEVICE_TYPE_DEFAULT: cl_device_type = 1;
pub const CL_DEVICE_TYPE_CPU: cl_device_type = 1 << 1;
pub const CL_DEVICE_TYPE_GPU: cl_device_type = 1 << 2;
pub const CL_DEVICE_TYPE_ACCELERATOR: cl_device_type = 1 << 3;
pub const CL_DEVICE_TYPE_CUSTOM: cl_device_type = 1 << 4;
pub const CL_DEVICE_TYPE_ALL: cl_device_type = 0xFFFF_FFFF;

// Device info.
pub const CL_DEVICE_TYPE: cl_device_info = 0x1000;
pub const CL_DEVICE_MAX_COMPUTE_UNITS: cl_device_info = 0x1002;
pub const CL_DEVICE_HOST_UNIFIED_MEMORY: cl_device_info = 0x1035;
pub const CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS: cl_device_info = 0x1003;
pub const CL_DEVICE_MAX_WORK_GROUP_SIZE: cl_device_info = 0x1004;
pub const CL_DEVICE_MAX_WORK_ITEM_SIZES: cl_device_info = 0x1005;
pub const CL_DEVICE_MAX_CLOCK_FREQUENCY: cl_device_info = 0x100C;
pub const CL_DEVICE_MAX_MEM_ALLOC_SIZE: cl_device_info = 0x1010;
pub const CL_DEVICE_MEM_BASE_ADDR_ALIGN: cl_device_info = 0x1019;
pub const CL_DEVICE_GLOBAL_MEM_SIZE: cl_device_info = 0x101F;
pub const CL_DEVICE_LOCAL_MEM_SIZE: cl_device_info = 0x1023;
pub const CL_DEVICE_AVAILABLE: cl_device_info = 0x1027;
pub const CL_DEVICE_COMPILER_AVAILABLE: cl_device_info = 0x1028;
pub const CL_DEVICE_QUEUE_ON_HOST_PROPERTIES: cl_device_info = 0x102A;
pub const CL_DEVICE_NAME: cl_device_info = 0x102B;
pub const CL_DEVICE_VENDOR: cl_device_info = 0x102C;
pub const CL_DRIVER_VERSION: cl_device_info = 0x102D;
pub const CL_DEVICE_VERSION: cl_device_info = 0x102F;
pub const CL_DEVICE_EXTENSIONS: cl_device_info = 0x1030;
pub const CL_DEVICE_DOUBLE_FP_CONFIG: cl_device_info = 0x1032;
pub const CL_DEVICE_OPENCL_C_VERSION: cl_device_info = 0x103D;
pub const CL_DEVICE_SVM_CAPABILITIES: cl_device_info = 0x1053;
pub const CL_DEVICE_IL_VERSION: cl_device_info = 0x105B;

// SVM capabilities and allocation flags.
pub const CL_DEVICE_SVM_COARSE_GRAIN_BUFFER: cl_device_svm_capabilities = 1;
pub const CL_DEVICE_SVM_FINE_GRAIN_BUFFER: cl_device_svm_capabilities = 1 << 1;
pub const CL_DEVICE_SVM_FINE_GRAIN_SYSTEM: cl_device_svm_capabilities = 1 << 2;
pub const CL_DEVICE_SVM_ATOMICS: cl_device_svm_capabilities = 1 << 3;
pub const CL_MEM_READ_WRITE: cl_mem_flags = 1;
pub const CL_MEM_ALLOC_HOST_PTR: cl_mem_flags = 1 << 4;
pub const CL_MAP_READ: cl_map_flags = 1;
pub const CL_MAP_WRITE: cl_map_flags = 1 << 1;
pub const CL_MEM_USE_HOST_PTR: cl_mem_flags = 1 << 3;
pub const CL_MEM_SVM_FINE_GRAIN_BUFFER: cl_svm_mem_flags = 1 << 10;
pub const CL_MEM_SVM_ATOMICS: cl_svm_mem_flags = 1 << 11;
pub const CL_MIGRATE_MEM_OBJECT_HOST: cl_mem_migration_flags = 1;

// Contexts and queues.
pub const CL_CONTEXT_PLATFORM: cl_context_properties = 0x1084;
pub const CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE: cl_command_queue_properties = 1;
pub const CL_QUEUE_PROFILING_ENABLE: cl_command_queue_properties = 1 << 1;
pub const CL_QUEUE_PROPERTIES: cl_queue_properties = 0x1093;

// Programs and kernels.
pub const CL_PROGRAM_BINARY_SIZES: cl_program_info = 0x1165;
pub const CL_PROGRAM_BINARIES: cl_program_info = 0x1166;
pub const CL_PROGRAM_BUILD_LOG: cl_program_build_info = 0x1183;
pub const CL_KERNEL_NUM_ARGS: cl_kernel_info = 0x1191;
pub const CL_KERNEL_WORK_GROUP_SIZE: cl_kernel_work_group_info = 0x11B0;
pub const CL_KERNEL_LOCAL_MEM_SIZE: cl_kernel_work_group_info = 0x11B2;
pub const CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE: cl_kernel_work_group_info = 0x11B3;
pub const CL_KERNEL_PRIVATE_MEM_SIZE: cl_kernel_work_group_info = 0x11B4;

// Events and profiling.
pub const CL_EVENT_COMMAND_EXECUTION_STATUS: cl_event_info = 0x11D3;
pub const CL_EVENT_CONTEXT: cl_event_info = 0x11D4;
pub const CL_COMPLETE: cl_int = 0;
pub const CL_RUNNING: cl_int = 1;
pub const CL_SUBMITTED: cl_int = 2;
pub const CL_QUEUED: cl_int = 3;
pub const CL_PROFILING_COMMAND_QUEUED: cl_profiling_info = 0x1280;
pub const CL_PROFILING_COMMAND_SUBMIT: cl_profiling_info = 0x1281;
pub const CL_PROFILING_COMMAND_START: cl_profiling_info = 0x1282;
pub const CL_PROFILING_COMMAND_END: cl_profiling_info = 0x1283;

// cl_intel_unified_shared_memory.
pub const CL_DEVICE_HOST_MEM_CAPABILITIES_INTEL: cl_device_info = 0x4190;
pub const CL_DEVICE_DEVICE_MEM_CAPABILITIES_INTEL: cl_device_info = 0x4191;
pub const CL_DEVICE_SINGLE_DEVICE_SHARED_MEM_CAPABILITIES_INTEL: cl_device_info = 0x4192;
pub const CL_DEVICE_CROSS_DEVICE_SHARED_MEM_CAPABILITIES_INTEL: cl_device_info = 0x4193;
pub const CL_DEVICE_SHARED_SYSTEM_MEM_CAPABILITIES_INTEL: cl_device_info = 0x4194;
pub const CL_UNIFIED_SHARED_MEMORY_ACCESS_INTEL: cl_bitfield = 1;
pub const CL_UNIFIED_SHARED_MEMORY_ATOMIC_ACCESS_INTEL: cl_bitfield = 1 << 1;
pub const CL_UNIFIED_SHARED_MEMORY_CONCURRENT_ACCESS_INTEL: cl_bitfield = 1 << 2;
pub const CL_UNIFIED_SHARED_MEMORY_CONCURRENT_ATOMIC_ACCESS_INTEL: cl_bitfield = 1 << 3;
pub const CL_KERNEL_EXEC_INFO_INDIRECT_HOST_ACCESS_INTEL: cl_kernel_exec_info = 0x4200;
pub const CL_KERNEL_EXEC_INFO_INDIRECT_DEVICE_ACCESS_INTEL: cl_kernel_exec_info = 0x4201;
pub const CL_KERNEL_EXEC_INFO_INDIRECT_SHARED_ACCESS_INTEL: cl_kernel_exec_info = 0x4202;
