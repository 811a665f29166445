//! Status codes and the error type shared by every layer.

use super::cl_status::cl_error_name;

/// Outcome of an operation. The discriminants are the values the C API
/// returns; they are never reused for another meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Status {
    Success = 0,
    NullArgument = 1,
    InvalidArgument = 2,
    NoOpencl = 3,
    DeviceNotFound = 4,
    Opencl = 5,
    BuildFailure = 6,
    FeatureNotSupported = 7,
    OutOfDeviceMemory = 8,
    OutOfHostMemory = 9,
    InvalidPointer = 10,
    WrongContext = 11,
    OutOfLocalMemory = 12,
    InvalidWorkGroup = 13,
    KernelArguments = 14,
    ProfilingUnavailable = 15,
    ExecutionFailed = 16,
    InvalidHandle = 17,
    BufferTooSmall = 18,
    KernelNotFound = 19,
    Communication = 20,
    InvalidOperation = 21,
    Internal = 99,
}

impl Status {
    /// Every status, in the order of its code.
    pub const ALL: [Status; 23] = [
        Status::Success,
        Status::NullArgument,
        Status::InvalidArgument,
        Status::NoOpencl,
        Status::DeviceNotFound,
        Status::Opencl,
        Status::BuildFailure,
        Status::FeatureNotSupported,
        Status::OutOfDeviceMemory,
        Status::OutOfHostMemory,
        Status::InvalidPointer,
        Status::WrongContext,
        Status::OutOfLocalMemory,
        Status::InvalidWorkGroup,
        Status::KernelArguments,
        Status::ProfilingUnavailable,
        Status::ExecutionFailed,
        Status::InvalidHandle,
        Status::BufferTooSmall,
        Status::KernelNotFound,
        Status::Communication,
        Status::InvalidOperation,
        Status::Internal,
    ];

    pub fn code(self) -> i32 {
        self as i32
    }

    pub fn from_code(code: i32) -> Option<Status> {
        Status::ALL.iter().copied().find(|s| s.code() == code)
    }

    /// The name of the constant in the C header.
    pub fn name(self) -> &'static str {
        match self {
            Status::Success => "SYRAH_SUCCESS",
            Status::NullArgument => "SYRAH_ERROR_NULL_ARGUMENT",
            Status::InvalidArgument => "SYRAH_ERROR_INVALID_ARGUMENT",
            Status::NoOpencl => "SYRAH_ERROR_NO_OPENCL",
            Status::DeviceNotFound => "SYRAH_ERROR_DEVICE_NOT_FOUND",
            Status::Opencl => "SYRAH_ERROR_OPENCL",
            Status::BuildFailure => "SYRAH_ERROR_BUILD_FAILURE",
            Status::FeatureNotSupported => "SYRAH_ERROR_FEATURE_NOT_SUPPORTED",
            Status::OutOfDeviceMemory => "SYRAH_ERROR_OUT_OF_DEVICE_MEMORY",
            Status::OutOfHostMemory => "SYRAH_ERROR_OUT_OF_HOST_MEMORY",
            Status::InvalidPointer => "SYRAH_ERROR_INVALID_POINTER",
            Status::WrongContext => "SYRAH_ERROR_WRONG_CONTEXT",
            Status::OutOfLocalMemory => "SYRAH_ERROR_OUT_OF_LOCAL_MEMORY",
            Status::InvalidWorkGroup => "SYRAH_ERROR_INVALID_WORK_GROUP",
            Status::KernelArguments => "SYRAH_ERROR_KERNEL_ARGUMENTS",
            Status::ProfilingUnavailable => "SYRAH_ERROR_PROFILING_UNAVAILABLE",
            Status::ExecutionFailed => "SYRAH_ERROR_EXECUTION_FAILED",
            Status::InvalidHandle => "SYRAH_ERROR_INVALID_HANDLE",
            Status::BufferTooSmall => "SYRAH_ERROR_BUFFER_TOO_SMALL",
            Status::KernelNotFound => "SYRAH_ERROR_KERNEL_NOT_FOUND",
            Status::Communication => "SYRAH_ERROR_COMMUNICATION",
            Status::InvalidOperation => "SYRAH_ERROR_INVALID_OPERATION",
            Status::Internal => "SYRAH_ERROR_INTERNAL",
        }
    }
}

/// A failure: what kind, and a message naming the offending value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Error {
        Error::new(Status::InvalidArgument, message)
    }

    /// A backend failure: the OpenCL call, the error's name and its code.
    /// Allocation failures map onto the out-of-memory statuses.
    pub fn opencl(code: i32, what: &str) -> Error {
        let status = match code {
            -4 | -61 => Status::OutOfDeviceMemory,
            -6 => Status::OutOfHostMemory,
            _ => Status::Opencl,
        };
        Error::new(
            status,
            format!("{what} failed: {} ({code})", cl_error_name(code)),
        )
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for s in Status::ALL {
            assert!(seen.insert(s.code()), "duplicate code {}", s.code());
            assert_eq!(Status::from_code(s.code()), Some(s));
        }
        assert_eq!(Status::from_code(1000), None);
        assert_eq!(Status::Success.code(), 0);
        assert_eq!(Status::Internal.code(), 99);
    }

    #[test]
    fn opencl_errors_name_the_call_and_code() {
        let e = Error::opencl(-4, "clSVMAlloc");
        assert_eq!(e.status, Status::OutOfDeviceMemory);
        assert_eq!(
            e.message,
            "clSVMAlloc failed: CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)"
        );
        assert_eq!(Error::opencl(-6, "x").status, Status::OutOfHostMemory);
        assert_eq!(Error::opencl(-36, "x").status, Status::Opencl);
    }
}
