//! Device selection strings (`SYRAH_DEVICE`) and default scoring.
//!
//! Grammar, case-insensitive, surrounding blanks ignored:
//!
//! ```text
//! spec   := term ( ',' term )*        first term that matches a device wins
//! term   := P | P '.' D               platform index, device index within it
//!         | type                      gpu | cpu | accelerator | acc | default | any
//!         | name ':' type             e.g. nvidia:gpu, intel:cpu, pocl:cpu
//!         | name                      e.g. pocl, nvidia, "Intel(R) OpenCL"
//! ```
//!
//! `name` matches a substring of the platform name, platform vendor, device
//! name or device vendor. When a term matches several devices the best by
//! [`default_score`] wins, ties going to the first in enumeration order.

use super::error::{Error, Result, Status};

/// Device categories as OpenCL reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    Cpu,
    Gpu,
    Accelerator,
    Other,
}

/// What selection needs to know about one device.
#[derive(Clone, Debug)]
pub struct DeviceDesc {
    pub platform_index: usize,
    pub device_index: usize,
    pub platform_name: String,
    pub platform_vendor: String,
    pub device_name: String,
    pub device_vendor: String,
    pub kind: DeviceKind,
    /// Picked before others of its kind (a GPU the CUDA back end drives).
    pub preferred: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum TypeFilter {
    Any,
    Kind(DeviceKind),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Term {
    Index(usize, Option<usize>),
    Filter {
        name: Option<String>,
        ty: TypeFilter,
    },
}

fn parse_type(word: &str) -> Option<TypeFilter> {
    match word {
        "gpu" => Some(TypeFilter::Kind(DeviceKind::Gpu)),
        "cpu" => Some(TypeFilter::Kind(DeviceKind::Cpu)),
        "accelerator" | "acc" => Some(TypeFilter::Kind(DeviceKind::Accelerator)),
        "default" | "any" | "*" => Some(TypeFilter::Any),
        _ => None,
    }
}

fn parse_term(raw: &str, spec: &str) -> Result<Term> {
    let t = raw.trim().to_lowercase();
    if t.is_empty() {
        return Err(Error::invalid(format!(
            "device selection '{spec}' has an empty term"
        )));
    }
    if t.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        let mut parts = t.splitn(2, '.');
        let p = parts.next().unwrap_or("");
        let d = parts.next();
        let pi = p.parse::<usize>().map_err(|_| {
            Error::invalid(format!(
                "device selection term '{raw}' in '{spec}' is not of the form P or P.D"
            ))
        })?;
        let di = match d {
            None => None,
            Some(d) => Some(d.parse::<usize>().map_err(|_| {
                Error::invalid(format!(
                    "device selection term '{raw}' in '{spec}' is not of the form P or P.D"
                ))
            })?),
        };
        return Ok(Term::Index(pi, di));
    }
    if let Some((name, ty)) = t.rsplit_once(':') {
        let ty = parse_type(ty.trim()).ok_or_else(|| {
            Error::invalid(format!(
                "device selection term '{raw}' in '{spec}' names the unknown device type '{}' \
                 (use gpu, cpu, accelerator or any)",
                ty.trim()
            ))
        })?;
        let name = name.trim();
        return Ok(Term::Filter {
            name: if name.is_empty() {
                None
            } else {
                Some(name.to_string())
            },
            ty,
        });
    }
    match parse_type(&t) {
        Some(ty) => Ok(Term::Filter { name: None, ty }),
        None => Ok(Term::Filter {
            name: Some(t),
            ty: TypeFilter::Any,
        }),
    }
}

/// A parsed selection string.
#[derive(Clone, Debug)]
pub struct Selection {
    spec: String,
    terms: Vec<Term>,
}

impl Selection {
    pub fn parse(spec: &str) -> Result<Selection> {
        if spec.trim().is_empty() {
            return Err(Error::invalid("device selection string is empty"));
        }
        let terms = spec
            .split(',')
            .map(|t| parse_term(t, spec))
            .collect::<Result<Vec<_>>>()?;
        Ok(Selection {
            spec: spec.to_string(),
            terms,
        })
    }

    fn matches(term: &Term, d: &DeviceDesc) -> bool {
        match term {
            Term::Index(p, dev) => {
                d.platform_index == *p && dev.is_none_or(|x| x == d.device_index)
            }
            Term::Filter { name, ty } => {
                let ty_ok = match ty {
                    TypeFilter::Any => true,
                    TypeFilter::Kind(k) => d.kind == *k,
                };
                let name_ok = name.as_ref().is_none_or(|n| {
                    [
                        &d.platform_name,
                        &d.platform_vendor,
                        &d.device_name,
                        &d.device_vendor,
                    ]
                    .iter()
                    .any(|s| s.to_lowercase().contains(n.as_str()))
                });
                ty_ok && name_ok
            }
        }
    }

    /// The position in `devices` of the selected device.
    pub fn select(&self, devices: &[DeviceDesc]) -> Result<usize> {
        for term in &self.terms {
            let best = devices
                .iter()
                .enumerate()
                .filter(|(_, d)| Selection::matches(term, d))
                .max_by_key(|(i, d)| (default_score(d), std::cmp::Reverse(*i)));
            if let Some((i, _)) = best {
                return Ok(i);
            }
        }
        let listing = devices
            .iter()
            .map(|d| {
                format!(
                    "{}.{} {} ({}, {:?})",
                    d.platform_index, d.device_index, d.device_name, d.platform_name, d.kind
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        Err(Error::new(
            Status::DeviceNotFound,
            format!(
                "no device matches the selection '{}'; devices found: {}",
                self.spec,
                if listing.is_empty() {
                    "none".to_string()
                } else {
                    listing
                }
            ),
        ))
    }
}

/// Score of the default selector: GPUs first, then accelerators, then CPUs.
pub fn default_score(d: &DeviceDesc) -> i32 {
    let kind = match d.kind {
        DeviceKind::Gpu => 300,
        DeviceKind::Accelerator => 200,
        DeviceKind::Cpu => 100,
        DeviceKind::Other => 50,
    };
    kind + i32::from(d.preferred)
}

/// Which NVIDIA GPUs the CUDA back end lists, from `SYRAH_CUDA`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaListing {
    /// None (`off`).
    Off,
    /// Those NVIDIA's OpenCL lists too, whose compiler builds OpenCL C
    /// for them (unset, `auto`).
    Paired,
    /// All of them, those without an OpenCL twin building from PTX only
    /// (`on`).
    All,
}

/// `SYRAH_CUDA`'s value as a listing, with a message for a value that is
/// not one (the default is used then).
pub fn cuda_listing(setting: Option<&str>) -> (CudaListing, Option<String>) {
    match setting {
        None | Some("") | Some("auto") => (CudaListing::Paired, None),
        Some("off") | Some("0") => (CudaListing::Off, None),
        Some("on") | Some("1") => (CudaListing::All, None),
        Some(other) => (
            CudaListing::Paired,
            Some(format!(
                "SYRAH_CUDA={other:?} is not one of auto, on, off, 1, 0: using the default (auto)"
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(p: usize, d: usize, pname: &str, dname: &str, kind: DeviceKind) -> DeviceDesc {
        let vendor = match p {
            0 => "The pocl project",
            1 => "Intel(R) Corporation",
            _ => "NVIDIA Corporation",
        };
        DeviceDesc {
            platform_index: p,
            device_index: d,
            platform_name: pname.into(),
            platform_vendor: vendor.into(),
            device_name: dname.into(),
            device_vendor: "v".into(),
            kind,
            preferred: false,
        }
    }

    fn machine() -> Vec<DeviceDesc> {
        vec![
            dev(
                0,
                0,
                "Portable Computing Language",
                "pthread-cpu",
                DeviceKind::Cpu,
            ),
            dev(
                0,
                1,
                "Portable Computing Language",
                "pthread-cpu",
                DeviceKind::Cpu,
            ),
            dev(1, 0, "Intel(R) OpenCL", "AMD EPYC", DeviceKind::Cpu),
            dev(2, 0, "NVIDIA CUDA", "NVIDIA H100", DeviceKind::Gpu),
        ]
    }

    fn pick(spec: &str) -> Result<usize> {
        Selection::parse(spec)?.select(&machine())
    }

    #[test]
    fn types_and_indices() {
        assert_eq!(pick("gpu"), Ok(3));
        assert_eq!(pick("cpu"), Ok(0));
        assert_eq!(pick("default"), Ok(3));
        assert_eq!(pick("1.0"), Ok(2));
        assert_eq!(pick("0.1"), Ok(1));
        assert_eq!(pick("1"), Ok(2));
        assert_eq!(pick(" GPU "), Ok(3));
    }

    #[test]
    fn names_and_name_type_pairs() {
        assert_eq!(pick("nvidia:gpu"), Ok(3));
        assert_eq!(pick("intel:cpu"), Ok(2));
        assert_eq!(pick("pocl"), Ok(0)); // matches the platform vendor text
        assert_eq!(pick("portable"), Ok(0));
        assert_eq!(pick("epyc"), Ok(2));
        assert_eq!(pick(":cpu"), Ok(0));
    }

    #[test]
    fn a_preferred_device_wins_over_its_kind_but_not_an_explicit_choice() {
        let mut m = machine();
        let mut cuda = dev(3, 0, "CUDA driver", "NVIDIA H100", DeviceKind::Gpu);
        cuda.preferred = true;
        m.push(cuda);
        let pick_in = |spec: &str| Selection::parse(spec)?.select(&m);
        assert_eq!(pick_in("default"), Ok(4));
        assert_eq!(pick_in("gpu"), Ok(4));
        assert_eq!(pick_in("nvidia:gpu"), Ok(4));
        assert_eq!(pick_in("2.0"), Ok(3));
        assert_eq!(pick_in("cpu"), Ok(0));
        // Preference ranks within a kind only: a CPU never beats a GPU.
        m[4].kind = DeviceKind::Cpu;
        let pick_in = |spec: &str| Selection::parse(spec)?.select(&m);
        assert_eq!(pick_in("default"), Ok(3));
        assert_eq!(pick_in("cpu"), Ok(4));
    }

    #[test]
    fn cuda_settings_and_a_bad_one_named() {
        assert_eq!(cuda_listing(None), (CudaListing::Paired, None));
        assert_eq!(cuda_listing(Some("auto")), (CudaListing::Paired, None));
        assert_eq!(cuda_listing(Some("off")), (CudaListing::Off, None));
        assert_eq!(cuda_listing(Some("0")), (CudaListing::Off, None));
        assert_eq!(cuda_listing(Some("on")), (CudaListing::All, None));
        let (l, msg) = cuda_listing(Some("yes"));
        assert_eq!(l, CudaListing::Paired);
        let msg = msg.unwrap_or_default();
        assert!(msg.contains("SYRAH_CUDA=\"yes\""), "{msg}");
    }

    #[test]
    fn fallbacks_in_order() {
        assert_eq!(pick("accelerator,intel:cpu"), Ok(2));
        assert_eq!(pick("amd:gpu, 0.1"), Ok(1));
    }

    #[test]
    fn errors_name_the_bad_value() {
        let e = pick("nvidia:gpx")
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(e.contains("'gpx'"), "{e}");
        let e = pick("1.x").err().map(|e| e.message).unwrap_or_default();
        assert!(e.contains("'1.x'"), "{e}");
        let e = pick("").err().map(|e| e.status);
        assert_eq!(e, Some(Status::InvalidArgument));
        let e = pick("gpu,,cpu").err().map(|e| e.status);
        assert_eq!(e, Some(Status::InvalidArgument));
        let e = pick("7.0").err();
        assert_eq!(e.as_ref().map(|e| e.status), Some(Status::DeviceNotFound));
        assert!(e.map(|e| e.message).unwrap_or_default().contains("'7.0'"));
        let e = Selection::parse("cpu").and_then(|s| s.select(&[])).err();
        assert!(e
            .map(|e| e.message)
            .unwrap_or_default()
            .contains("devices found: none"));
    }
}
