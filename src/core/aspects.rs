//! USM strategy choice and the aspects a device reports.
//!
//! Aspects are derived from what the chosen strategy can really do, so a
//! program that checks an aspect before using a feature never meets
//! `SYRAH_ERROR_FEATURE_NOT_SUPPORTED` for it.

/// How a device provides unified shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsmStrategy {
    /// `cl_intel_unified_shared_memory`.
    IntelUsm,
    /// OpenCL 2.0 shared virtual memory.
    Svm,
    /// Plain `cl_mem` only: no USM.
    None,
}

impl UsmStrategy {
    pub fn name(self) -> &'static str {
        match self {
            UsmStrategy::IntelUsm => "cl_intel_unified_shared_memory",
            UsmStrategy::Svm => "svm",
            UsmStrategy::None => "none",
        }
    }
}

/// Raw capabilities read from the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsmCaps {
    pub has_intel_usm: bool,
    /// `CL_DEVICE_*_MEM_CAPABILITIES_INTEL` for host, device, single-device
    /// shared and shared-system memory.
    pub intel_host: u64,
    pub intel_device: u64,
    pub intel_shared: u64,
    pub intel_system: u64,
    /// `CL_DEVICE_SVM_CAPABILITIES`.
    pub svm: u64,
}

pub const USM_ACCESS: u64 = 1;
pub const USM_ATOMIC_ACCESS: u64 = 1 << 1;
pub const USM_CONCURRENT_ATOMIC_ACCESS: u64 = 1 << 3;
const SVM_COARSE: u64 = 1;
const SVM_FINE_BUFFER: u64 = 1 << 1;
const SVM_FINE_SYSTEM: u64 = 1 << 2;
const SVM_ATOMICS: u64 = 1 << 3;

/// Which USM allocation kinds a device supports under its strategy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsmSupport {
    pub device: bool,
    pub host: bool,
    pub shared: bool,
    pub system: bool,
    pub atomic_host: bool,
    pub atomic_shared: bool,
}

/// Picks the strategy: the Intel extension, else SVM, else none.
pub fn choose_strategy(caps: &UsmCaps) -> UsmStrategy {
    if caps.has_intel_usm && caps.intel_device & USM_ACCESS != 0 {
        UsmStrategy::IntelUsm
    } else if caps.svm & SVM_COARSE != 0 {
        UsmStrategy::Svm
    } else {
        UsmStrategy::None
    }
}

/// What the strategy supports on a device with these capabilities.
pub fn usm_support(strategy: UsmStrategy, caps: &UsmCaps) -> UsmSupport {
    match strategy {
        UsmStrategy::IntelUsm => UsmSupport {
            device: caps.intel_device & USM_ACCESS != 0,
            host: caps.intel_host & USM_ACCESS != 0,
            shared: caps.intel_shared & USM_ACCESS != 0,
            system: caps.intel_system & USM_ACCESS != 0,
            atomic_host: caps.intel_host & USM_ATOMIC_ACCESS != 0,
            atomic_shared: caps.intel_shared & USM_CONCURRENT_ATOMIC_ACCESS != 0,
        },
        UsmStrategy::Svm => {
            let fine = caps.svm & SVM_FINE_BUFFER != 0;
            let atomics = caps.svm & SVM_ATOMICS != 0;
            UsmSupport {
                device: caps.svm & SVM_COARSE != 0,
                host: fine,
                shared: fine,
                system: caps.svm & SVM_FINE_SYSTEM != 0,
                atomic_host: fine && atomics,
                atomic_shared: fine && atomics,
            }
        }
        UsmStrategy::None => UsmSupport::default(),
    }
}

/// SYCL-style device aspects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aspect {
    Cpu,
    Gpu,
    Accelerator,
    Fp64,
    UsmDeviceAllocations,
    UsmHostAllocations,
    UsmSharedAllocations,
    UsmSystemAllocations,
    UsmAtomicHostAllocations,
    UsmAtomicSharedAllocations,
}

impl Aspect {
    pub const ALL: [Aspect; 10] = [
        Aspect::Cpu,
        Aspect::Gpu,
        Aspect::Accelerator,
        Aspect::Fp64,
        Aspect::UsmDeviceAllocations,
        Aspect::UsmHostAllocations,
        Aspect::UsmSharedAllocations,
        Aspect::UsmSystemAllocations,
        Aspect::UsmAtomicHostAllocations,
        Aspect::UsmAtomicSharedAllocations,
    ];

    pub fn from_code(code: u32) -> Option<Aspect> {
        Aspect::ALL.get(code as usize).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            Aspect::Cpu => "cpu",
            Aspect::Gpu => "gpu",
            Aspect::Accelerator => "accelerator",
            Aspect::Fp64 => "fp64",
            Aspect::UsmDeviceAllocations => "usm_device_allocations",
            Aspect::UsmHostAllocations => "usm_host_allocations",
            Aspect::UsmSharedAllocations => "usm_shared_allocations",
            Aspect::UsmSystemAllocations => "usm_system_allocations",
            Aspect::UsmAtomicHostAllocations => "usm_atomic_host_allocations",
            Aspect::UsmAtomicSharedAllocations => "usm_atomic_shared_allocations",
        }
    }
}

/// Whether a device has an aspect.
pub fn has_aspect(
    aspect: Aspect,
    kind: super::selector::DeviceKind,
    fp64: bool,
    usm: &UsmSupport,
) -> bool {
    use super::selector::DeviceKind;
    match aspect {
        Aspect::Cpu => kind == DeviceKind::Cpu,
        Aspect::Gpu => kind == DeviceKind::Gpu,
        Aspect::Accelerator => kind == DeviceKind::Accelerator,
        Aspect::Fp64 => fp64,
        Aspect::UsmDeviceAllocations => usm.device,
        Aspect::UsmHostAllocations => usm.host,
        Aspect::UsmSharedAllocations => usm.shared,
        Aspect::UsmSystemAllocations => usm.system,
        Aspect::UsmAtomicHostAllocations => usm.atomic_host,
        Aspect::UsmAtomicSharedAllocations => usm.atomic_shared,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_coarse_grain_svm_gives_device_allocations_only() {
        let caps = UsmCaps {
            svm: SVM_COARSE,
            ..Default::default()
        };
        assert_eq!(choose_strategy(&caps), UsmStrategy::Svm);
        assert_eq!(
            usm_support(UsmStrategy::Svm, &caps),
            UsmSupport {
                device: true,
                ..Default::default()
            }
        );
    }

    #[test]
    fn pocl_fine_grain_svm() {
        let caps = UsmCaps {
            svm: SVM_COARSE | SVM_FINE_BUFFER | SVM_ATOMICS,
            ..Default::default()
        };
        let s = usm_support(choose_strategy(&caps), &caps);
        assert_eq!(
            s,
            UsmSupport {
                device: true,
                host: true,
                shared: true,
                system: false,
                atomic_host: true,
                atomic_shared: true
            }
        );
    }

    #[test]
    fn intel_extension_wins_over_svm() {
        let all = USM_ACCESS | USM_ATOMIC_ACCESS | 4 | USM_CONCURRENT_ATOMIC_ACCESS;
        let caps = UsmCaps {
            has_intel_usm: true,
            intel_host: USM_ACCESS,
            intel_device: all,
            intel_shared: USM_ACCESS | USM_ATOMIC_ACCESS,
            intel_system: 0,
            svm: 0xF,
        };
        assert_eq!(choose_strategy(&caps), UsmStrategy::IntelUsm);
        let s = usm_support(UsmStrategy::IntelUsm, &caps);
        assert!(s.device && s.host && s.shared);
        assert!(!s.system && !s.atomic_host && !s.atomic_shared);
    }

    #[test]
    fn no_svm_no_extension_means_no_usm() {
        let caps = UsmCaps::default();
        assert_eq!(choose_strategy(&caps), UsmStrategy::None);
        assert_eq!(usm_support(UsmStrategy::None, &caps), UsmSupport::default());
        // The extension advertised without device access falls through.
        let caps = UsmCaps {
            has_intel_usm: true,
            svm: SVM_COARSE,
            ..Default::default()
        };
        assert_eq!(choose_strategy(&caps), UsmStrategy::Svm);
    }

    #[test]
    fn aspect_codes_are_dense() {
        for (i, a) in Aspect::ALL.iter().enumerate() {
            assert_eq!(Aspect::from_code(i as u32), Some(*a));
        }
        assert_eq!(Aspect::from_code(10), None);
    }
}
