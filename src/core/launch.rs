//! Launch geometry and local-memory checks, done before anything reaches
//! OpenCL so that the error names the values at fault.

use super::error::{Error, Result, Status};

/// A 1–3 dimensional launch: global size, optional work-group size, offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NdRange {
    pub dims: u32,
    pub global: [usize; 3],
    pub local: Option<[usize; 3]>,
    pub offset: [usize; 3],
}

/// Device limits that bound a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_work_group_size: usize,
    pub max_work_item_sizes: [usize; 3],
    pub local_mem_size: u64,
}

impl NdRange {
    /// The global offset as a launch passes it: no offset at all rather
    /// than zeros, as hand-written code passes it (drivers may keep a
    /// faster path for it).
    pub fn offset_or_null(&self) -> *const usize {
        if self.offset.iter().all(|&o| o == 0) {
            std::ptr::null()
        } else {
            self.offset.as_ptr()
        }
    }

    /// The work-group size as a launch passes it: null to let the driver
    /// choose.
    pub fn local_or_null(&self) -> *const usize {
        self.local.as_ref().map_or(std::ptr::null(), |l| l.as_ptr())
    }

    /// True when the launch has no work item (a valid no-op).
    pub fn is_empty(&self) -> bool {
        self.global[..self.dims as usize].contains(&0)
    }

    /// Checks the shape against the device and the kernel's own limit.
    pub fn validate(&self, limits: &Limits, kernel_max_work_group: usize) -> Result<()> {
        if !(1..=3).contains(&self.dims) {
            return Err(Error::invalid(format!(
                "launch dimensions must be 1, 2 or 3, not {}",
                self.dims
            )));
        }
        let d = self.dims as usize;
        for i in 0..d {
            if self.global[i].checked_add(self.offset[i]).is_none() {
                return Err(Error::invalid(format!(
                    "global size {} plus offset {} overflows in dimension {i}",
                    self.global[i], self.offset[i]
                )));
            }
        }
        let Some(local) = self.local else {
            return Ok(());
        };
        let mut product: usize = 1;
        for (i, &l) in local.iter().enumerate().take(d) {
            if l == 0 {
                return Err(Error::new(
                    Status::InvalidWorkGroup,
                    format!("work-group size is 0 in dimension {i}"),
                ));
            }
            if self.global[i] % l != 0 {
                return Err(Error::new(
                    Status::InvalidWorkGroup,
                    format!(
                        "global size {} is not a multiple of the work-group size {} in dimension {i}",
                        self.global[i], l
                    ),
                ));
            }
            if l > limits.max_work_item_sizes[i] {
                return Err(Error::new(
                    Status::InvalidWorkGroup,
                    format!(
                        "work-group size {} exceeds the device's maximum of {} in dimension {i}",
                        l, limits.max_work_item_sizes[i]
                    ),
                ));
            }
            product = product.saturating_mul(l);
        }
        let cap = limits.max_work_group_size.min(kernel_max_work_group);
        if product > cap {
            return Err(Error::new(
                Status::InvalidWorkGroup,
                format!(
                    "work-group of {product} work-items exceeds the limit of {cap} \
                     (device {}, kernel {})",
                    limits.max_work_group_size, kernel_max_work_group
                ),
            ));
        }
        Ok(())
    }
}

/// Refuses a launch whose local memory (the kernel's static use plus its
/// local-memory arguments) exceeds the device's.
pub fn check_local_memory(
    kernel: &str,
    static_bytes: u64,
    dynamic: &[usize],
    device_bytes: u64,
) -> Result<u64> {
    let dynamic_total = dynamic
        .iter()
        .try_fold(0u64, |acc, &b| acc.checked_add(b as u64))
        .unwrap_or(u64::MAX);
    let total = static_bytes.saturating_add(dynamic_total);
    if total > device_bytes {
        return Err(Error::new(
            Status::OutOfLocalMemory,
            format!(
                "kernel '{kernel}' needs {total} bytes of local memory ({static_bytes} declared in \
                 the kernel + {dynamic_total} from local-memory arguments) but the device has \
                 {device_bytes} bytes"
            ),
        ));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: Limits = Limits {
        max_work_group_size: 1024,
        max_work_item_sizes: [1024, 1024, 64],
        local_mem_size: 49152,
    };

    fn r(dims: u32, g: [usize; 3], l: Option<[usize; 3]>) -> NdRange {
        NdRange {
            dims,
            global: g,
            local: l,
            offset: [0; 3],
        }
    }

    #[test]
    fn good_shapes_pass() {
        assert!(r(1, [1000, 1, 1], None).validate(&LIM, 1024).is_ok());
        assert!(r(2, [64, 64, 1], Some([16, 16, 1]))
            .validate(&LIM, 1024)
            .is_ok());
        assert!(r(3, [8, 8, 8], Some([4, 4, 4]))
            .validate(&LIM, 1024)
            .is_ok());
        // Dimensions past `dims` are ignored.
        assert!(r(1, [64, 0, 0], Some([64, 0, 0]))
            .validate(&LIM, 1024)
            .is_ok());
    }

    #[test]
    fn bad_shapes_name_the_values() {
        let e = r(0, [1, 1, 1], None)
            .validate(&LIM, 1024)
            .expect_err("dims");
        assert!(e.message.contains("not 0"));
        let e = r(1, [100, 1, 1], Some([32, 1, 1]))
            .validate(&LIM, 1024)
            .expect_err("div");
        assert_eq!(e.status, Status::InvalidWorkGroup);
        assert!(e.message.contains("100") && e.message.contains("32"));
        let e = r(3, [128, 1, 128], Some([1, 1, 128]))
            .validate(&LIM, 1024)
            .expect_err("dim");
        assert!(
            e.message.contains("maximum of 64 in dimension 2"),
            "{}",
            e.message
        );
        let e = r(2, [64, 64, 1], Some([32, 32, 1]))
            .validate(&LIM, 256)
            .expect_err("wg");
        assert!(e.message.contains("1024 work-items") && e.message.contains("256"));
        let e = r(1, [4, 1, 1], Some([0, 1, 1]))
            .validate(&LIM, 256)
            .expect_err("zero");
        assert!(e.message.contains("size is 0"));
        let mut o = r(1, [usize::MAX, 1, 1], None);
        o.offset[0] = 1;
        assert!(o.validate(&LIM, 1024).is_err());
    }

    #[test]
    fn empty_ranges() {
        assert!(r(2, [4, 0, 1], None).is_empty());
        assert!(!r(1, [4, 0, 0], None).is_empty());
    }

    #[test]
    fn local_memory_limit_reports_both_numbers() {
        assert_eq!(
            check_local_memory("k", 1024, &[2048, 4096], 65536),
            Ok(7168)
        );
        let e = check_local_memory("reduce", 40000, &[16384], 49152).expect_err("over");
        assert_eq!(e.status, Status::OutOfLocalMemory);
        assert!(e.message.contains("56384 bytes"), "{}", e.message);
        assert!(e.message.contains("49152 bytes"), "{}", e.message);
        assert!(e.message.contains("'reduce'"));
        assert!(check_local_memory("k", 0, &[usize::MAX, usize::MAX], u64::MAX - 1).is_err());
    }
}
