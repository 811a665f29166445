//! Loads the OpenCL ICD loader at run time and resolves its entry points.
//!
//! The library is opened once per process: `SYRAH_OPENCL_LIBRARY` when set,
//! otherwise `libOpenCL.so.1` (the runtime package) and then `libOpenCL.so`
//! (the development symlink). Required symbols must all be present; optional
//! ones (newer than OpenCL 1.2) are `None` when absent.

#![allow(non_snake_case)]

use super::ffi::*;
pub use crate::core::cl_status::cl_error_name;
use crate::core::error::{Error, Status};
use std::ffi::c_void;
use std::sync::OnceLock;

macro_rules! cl_table {
    (
        required { $( $rname:ident : fn( $( $rarg:ty ),* ) -> $rret:ty ; )* }
        optional { $( $oname:ident : fn( $( $oarg:ty ),* ) -> $oret:ty ; )* }
    ) => {
        /// Entry points resolved from the OpenCL library.
        #[allow(non_snake_case)]
        pub struct Api {
            _lib: libloading::Library,
            /// Path or name the library was opened from.
            pub origin: String,
            $( pub $rname: unsafe extern "C" fn( $( $rarg ),* ) -> $rret, )*
            $( pub $oname: Option<unsafe extern "C" fn( $( $oarg ),* ) -> $oret>, )*
        }

        impl Api {
            fn resolve(lib: libloading::Library, origin: String) -> Result<Api, Error> {
                $(
                    // SAFETY: the symbol name and signature follow the OpenCL
                    // specification; the pointer is copied out while `lib` is
                    // kept alive in the returned table.
                    let $rname = unsafe {
                        match lib.get::<unsafe extern "C" fn( $( $rarg ),* ) -> $rret>(
                            concat!(stringify!($rname), "\0").as_bytes(),
                        ) {
                            Ok(s) => *s,
                            Err(e) => {
                                return Err(Error::new(
                                    Status::NoOpencl,
                                    format!(
                                        "the OpenCL library '{}' lacks the required entry point {}: {}",
                                        origin, stringify!($rname), e
                                    ),
                                ))
                            }
                        }
                    };
                )*
                $(
                    // SAFETY: as above; a missing optional symbol is None.
                    let $oname = unsafe {
                        lib.get::<unsafe extern "C" fn( $( $oarg ),* ) -> $oret>(
                            concat!(stringify!($oname), "\0").as_bytes(),
                        )
                        .ok()
                        .map(|s| *s)
                    };
                )*
                Ok(Api { _lib: lib, origin, $( $rname, )* $( $oname, )* })
            }
        }
    };
}

cl_table! {
    required {
        clGetPlatformIDs: fn(cl_uint, *mut cl_platform_id, *mut cl_uint) -> cl_int;
        clGetPlatformInfo: fn(cl_platform_id, cl_platform_info, usize, *mut c_void, *mut usize) -> cl_int;
        clGetDeviceIDs: fn(cl_platform_id, cl_device_type, cl_uint, *mut cl_device_id, *mut cl_uint) -> cl_int;
        clGetDeviceInfo: fn(cl_device_id, cl_device_info, usize, *mut c_void, *mut usize) -> cl_int;
        clCreateContext: fn(*const cl_context_properties, cl_uint, *const cl_device_id, ContextNotify, *mut c_void, *mut cl_int) -> cl_context;
        clReleaseContext: fn(cl_context) -> cl_int;
        clCreateCommandQueue: fn(cl_context, cl_device_id, cl_command_queue_properties, *mut cl_int) -> cl_command_queue;
        clReleaseCommandQueue: fn(cl_command_queue) -> cl_int;
        clFinish: fn(cl_command_queue) -> cl_int;
        clFlush: fn(cl_command_queue) -> cl_int;
        clCreateProgramWithSource: fn(cl_context, cl_uint, *const *const i8, *const usize, *mut cl_int) -> cl_program;
        clCreateProgramWithBinary: fn(cl_context, cl_uint, *const cl_device_id, *const usize, *const *const u8, *mut cl_int, *mut cl_int) -> cl_program;
        clBuildProgram: fn(cl_program, cl_uint, *const cl_device_id, *const i8, ProgramNotify, *mut c_void) -> cl_int;
        clGetProgramInfo: fn(cl_program, cl_program_info, usize, *mut c_void, *mut usize) -> cl_int;
        clGetProgramBuildInfo: fn(cl_program, cl_device_id, cl_program_build_info, usize, *mut c_void, *mut usize) -> cl_int;
        clReleaseProgram: fn(cl_program) -> cl_int;
        clCreateKernel: fn(cl_program, *const i8, *mut cl_int) -> cl_kernel;
        clReleaseKernel: fn(cl_kernel) -> cl_int;
        clSetKernelArg: fn(cl_kernel, cl_uint, usize, *const c_void) -> cl_int;
        clGetKernelInfo: fn(cl_kernel, cl_kernel_info, usize, *mut c_void, *mut usize) -> cl_int;
        clGetKernelWorkGroupInfo: fn(cl_kernel, cl_device_id, cl_kernel_work_group_info, usize, *mut c_void, *mut usize) -> cl_int;
        clEnqueueNDRangeKernel: fn(cl_command_queue, cl_kernel, cl_uint, *const usize, *const usize, *const usize, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueMarkerWithWaitList: fn(cl_command_queue, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueBarrierWithWaitList: fn(cl_command_queue, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clWaitForEvents: fn(cl_uint, *const cl_event) -> cl_int;
        clGetEventInfo: fn(cl_event, cl_event_info, usize, *mut c_void, *mut usize) -> cl_int;
        clGetEventProfilingInfo: fn(cl_event, cl_profiling_info, usize, *mut c_void, *mut usize) -> cl_int;
        clRetainEvent: fn(cl_event) -> cl_int;
        clReleaseEvent: fn(cl_event) -> cl_int;
        clCreateUserEvent: fn(cl_context, *mut cl_int) -> cl_event;
        clSetUserEventStatus: fn(cl_event, cl_int) -> cl_int;
        clSetEventCallback: fn(cl_event, cl_int, EventNotify, *mut c_void) -> cl_int;
        clCreateBuffer: fn(cl_context, cl_mem_flags, usize, *mut c_void, *mut cl_int) -> cl_mem;
        clReleaseMemObject: fn(cl_mem) -> cl_int;
        clRetainMemObject: fn(cl_mem) -> cl_int;
        clEnqueueReadBuffer: fn(cl_command_queue, cl_mem, cl_bool, usize, usize, *mut c_void, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueWriteBuffer: fn(cl_command_queue, cl_mem, cl_bool, usize, usize, *const c_void, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueCopyBuffer: fn(cl_command_queue, cl_mem, cl_mem, usize, usize, usize, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clCreateSubBuffer: fn(cl_mem, cl_mem_flags, cl_uint, *const c_void, *mut cl_int) -> cl_mem;
        clEnqueueMapBuffer: fn(cl_command_queue, cl_mem, cl_bool, cl_map_flags, usize, usize, cl_uint, *const cl_event, *mut cl_event, *mut cl_int) -> *mut c_void;
        clEnqueueUnmapMemObject: fn(cl_command_queue, cl_mem, *mut c_void, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueFillBuffer: fn(cl_command_queue, cl_mem, *const c_void, usize, usize, usize, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueReadBufferRect: fn(cl_command_queue, cl_mem, cl_bool, *const usize, *const usize, *const usize, usize, usize, usize, usize, *mut c_void, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueWriteBufferRect: fn(cl_command_queue, cl_mem, cl_bool, *const usize, *const usize, *const usize, usize, usize, usize, usize, *const c_void, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueCopyBufferRect: fn(cl_command_queue, cl_mem, cl_mem, *const usize, *const usize, *const usize, usize, usize, usize, usize, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
    }
    optional {
        clCreateCommandQueueWithProperties: fn(cl_context, cl_device_id, *const cl_queue_properties, *mut cl_int) -> cl_command_queue;
        clCreateProgramWithIL: fn(cl_context, *const c_void, usize, *mut cl_int) -> cl_program;
        clSVMAlloc: fn(cl_context, cl_svm_mem_flags, usize, cl_uint) -> *mut c_void;
        clSVMFree: fn(cl_context, *mut c_void) -> ();
        clSetKernelArgSVMPointer: fn(cl_kernel, cl_uint, *const c_void) -> cl_int;
        clSetKernelExecInfo: fn(cl_kernel, cl_kernel_exec_info, usize, *const c_void) -> cl_int;
        clEnqueueSVMMemcpy: fn(cl_command_queue, cl_bool, *mut c_void, *const c_void, usize, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueSVMMemFill: fn(cl_command_queue, *mut c_void, *const c_void, usize, usize, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clEnqueueSVMMigrateMem: fn(cl_command_queue, cl_uint, *const *const c_void, *const usize, cl_mem_migration_flags, cl_uint, *const cl_event, *mut cl_event) -> cl_int;
        clGetExtensionFunctionAddressForPlatform: fn(cl_platform_id, *const i8) -> *mut c_void;
    }
}

static API: OnceLock<Result<Api, Error>> = OnceLock::new();

fn candidates() -> Vec<String> {
    match std::env::var("SYRAH_OPENCL_LIBRARY") {
        Ok(p) if !p.is_empty() => vec![p],
        _ => vec!["libOpenCL.so.1".to_string(), "libOpenCL.so".to_string()],
    }
}

fn load() -> Result<Api, Error> {
    let mut failures = Vec::new();
    for name in candidates() {
        // SAFETY: opening a shared library runs its initialisers; the OpenCL
        // ICD loader's initialisers have no preconditions on the caller.
        match unsafe { libloading::Library::new(&name) } {
            Ok(lib) => return Api::resolve(lib, name),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    Err(Error::new(
        Status::NoOpencl,
        format!(
            "no OpenCL library could be loaded ({}); install an OpenCL ICD loader and a driver \
             (on Debian: apt-get install ocl-icd-libopencl1 pocl-opencl-icd) or set \
             SYRAH_OPENCL_LIBRARY to the path of libOpenCL.so.1",
            failures.join("; ")
        ),
    ))
}

/// The process-wide OpenCL entry points, loaded on first use.
pub fn api() -> Result<&'static Api, Error> {
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// Turns an OpenCL return code into a Syrah error naming the call.
pub fn check(code: cl_int, what: &str) -> Result<(), Error> {
    if code == CL_SUCCESS {
        Ok(())
    } else {
        Err(Error::opencl(code, what))
    }
}

/// The address of extension entry point `name` of platform `p`, if the
/// driver has it.
pub(crate) fn ext_addr(api: &Api, p: cl_platform_id, name: &str) -> Option<*mut std::ffi::c_void> {
    let f = api.clGetExtensionFunctionAddressForPlatform?;
    let cname = std::ffi::CString::new(name).ok()?;
    // SAFETY: `p` is a platform id returned by clGetPlatformIDs and `cname`
    // is a NUL-terminated string that outlives the call.
    let ptr = unsafe { f(p, cname.as_ptr()) };
    (!ptr.is_null()).then_some(ptr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_maps_failure_to_opencl_status() {
        assert!(check(0, "x").is_ok());
        let e = check(-30, "clFoo").err();
        let e = e.as_ref().map(|e| (e.status, e.message.clone()));
        assert_eq!(
            e,
            Some((
                Status::Opencl,
                "clFoo failed: CL_INVALID_VALUE (-30)".to_string()
            ))
        );
    }
}
