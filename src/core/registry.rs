//! The USM allocations of one context, looked up by any address inside them.
//!
//! Look-ups are `O(log n)` in the number of live allocations; nothing in a
//! kernel launch walks the whole set.

use super::error::{Error, Result, Status};
use std::collections::BTreeMap;

/// The kind of a USM allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocKind {
    Host,
    Device,
    Shared,
}

impl AllocKind {
    pub fn name(self) -> &'static str {
        match self {
            AllocKind::Host => "host",
            AllocKind::Device => "device",
            AllocKind::Shared => "shared",
        }
    }
}

/// One live allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocRecord {
    pub size: usize,
    pub kind: AllocKind,
    /// Index of the device within its context; `None` for host allocations.
    pub device: Option<usize>,
    /// Address the backend returned, to free; differs from the base when
    /// Syrah aligned the allocation itself.
    pub raw: usize,
    /// Bytes of the block when it goes back to the context's pool of freed
    /// device allocations instead of the driver (0: it does not).
    pub pooled: usize,
}

/// Allocation found for an address: its base and record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    pub base: usize,
    pub record: AllocRecord,
}

#[derive(Default, Debug)]
pub struct Registry {
    map: BTreeMap<usize, AllocRecord>,
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Records an allocation; overlapping an existing one is an internal error.
    pub fn insert(&mut self, base: usize, record: AllocRecord) -> Result<()> {
        if record.size == 0 {
            return Err(Error::new(Status::Internal, "zero-sized USM record"));
        }
        let end = base.checked_add(record.size).ok_or_else(|| {
            Error::new(Status::Internal, format!("USM record at {base:#x} wraps"))
        })?;
        if let Some(f) = self.find(base) {
            return Err(Error::new(
                Status::Internal,
                format!("USM allocation at {base:#x} overlaps one at {:#x}", f.base),
            ));
        }
        if let Some((&next, _)) = self.map.range(base..).next() {
            if next < end {
                return Err(Error::new(
                    Status::Internal,
                    format!("USM allocation at {base:#x} overlaps one at {next:#x}"),
                ));
            }
        }
        self.map.insert(base, record);
        Ok(())
    }

    /// The allocation containing `addr`.
    pub fn find(&self, addr: usize) -> Option<Found> {
        let (&base, &record) = self.map.range(..=addr).next_back()?;
        (addr - base < record.size).then_some(Found { base, record })
    }

    /// Removes the allocation starting exactly at `base`.
    pub fn remove(&mut self, base: usize) -> Result<AllocRecord> {
        if let Some(r) = self.map.remove(&base) {
            return Ok(r);
        }
        match self.find(base) {
            Some(f) => Err(Error::new(
                Status::InvalidPointer,
                format!(
                    "pointer {base:#x} is inside the USM allocation at {:#x} ({} bytes), not at its start",
                    f.base, f.record.size
                ),
            )),
            None => Err(Error::new(
                Status::InvalidPointer,
                format!("pointer {base:#x} is not a USM allocation of this context"),
            )),
        }
    }

    /// Checks that `[addr, addr + len)` lies inside one allocation.
    pub fn check_range(&self, addr: usize, len: usize, what: &str) -> Result<Found> {
        let f = self.find(addr).ok_or_else(|| {
            Error::new(
                Status::InvalidPointer,
                format!("{what} {addr:#x} is not inside a USM allocation of this context"),
            )
        })?;
        let avail = f.record.size - (addr - f.base);
        if len > avail {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "{what} {addr:#x} + {len} bytes runs past the end of its USM allocation \
                     ({} bytes at {:#x}; {avail} bytes available)",
                    f.record.size, f.base
                ),
            ));
        }
        Ok(f)
    }

    /// Every allocation, for cleanup.
    pub fn drain(&mut self) -> Vec<(usize, AllocRecord)> {
        std::mem::take(&mut self.map).into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(size: usize) -> AllocRecord {
        AllocRecord {
            pooled: 0,
            size,
            kind: AllocKind::Device,
            device: Some(0),
            raw: 0,
        }
    }

    #[test]
    fn find_inside_and_outside() {
        let mut r = Registry::new();
        r.insert(0x1000, rec(0x100)).expect("insert");
        r.insert(0x2000, rec(0x10)).expect("insert");
        assert_eq!(r.find(0x1000).map(|f| f.base), Some(0x1000));
        assert_eq!(r.find(0x10ff).map(|f| f.base), Some(0x1000));
        assert_eq!(r.find(0x1100), None);
        assert_eq!(r.find(0xfff), None);
        assert_eq!(r.find(0x200f).map(|f| f.base), Some(0x2000));
        assert_eq!(r.find(0x2010), None);
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn overlap_is_rejected() {
        let mut r = Registry::new();
        r.insert(0x1000, rec(0x100)).expect("insert");
        assert!(r.insert(0x10f0, rec(0x100)).is_err());
        assert!(r.insert(0xf80, rec(0x100)).is_err());
        assert!(r.insert(0x1100, rec(0x100)).is_ok());
        assert!(r.insert(0x5000, rec(0)).is_err());
    }

    #[test]
    fn remove_needs_the_base() {
        let mut r = Registry::new();
        r.insert(0x1000, rec(0x100)).expect("insert");
        let e = r.remove(0x1008).expect_err("interior pointer");
        assert_eq!(e.status, Status::InvalidPointer);
        assert!(e.message.contains("0x1008") && e.message.contains("0x1000"));
        let e = r.remove(0x9000).expect_err("unknown pointer");
        assert!(e.message.contains("0x9000"));
        assert_eq!(r.remove(0x1000).map(|x| x.size), Ok(0x100));
        assert!(r.is_empty());
    }

    #[test]
    fn ranges_are_bounded() {
        let mut r = Registry::new();
        r.insert(0x1000, rec(0x100)).expect("insert");
        assert!(r.check_range(0x1000, 0x100, "dst").is_ok());
        assert!(r.check_range(0x1080, 0x80, "dst").is_ok());
        let e = r.check_range(0x1080, 0x81, "dst").expect_err("overrun");
        assert_eq!(e.status, Status::InvalidArgument);
        assert!(e.message.contains("128 bytes available"), "{}", e.message);
        let e = r.check_range(0x3000, 1, "src").expect_err("unknown");
        assert_eq!(e.status, Status::InvalidPointer);
    }
}
