//! Staging plans for copies between ordinary host memory and a device: on
//! devices with memory of their own, the driver copies ordinary (pageable)
//! memory far slower than pinned memory, so large copies go through a ring
//! of pinned chunks: host threads fill one chunk while the device copies
//! the previous one.

/// Bytes of one pinned chunk. Measured on an H100 host (16 cores): 4 MiB
/// chunks reach 15-20 GB/s, 16 MiB chunks 30-50 GB/s, larger ones no more.
pub const CHUNK: usize = 16 << 20;
/// Chunks in the ring: how many device copies may be in flight.
pub const SLOTS: usize = 4;
/// The smallest copy worth staging: below it the chunk's extra host copy
/// and the hand-over to a runtime thread cost more than they save
/// (measured on an H100 host: staged 4 MiB copies ran at 4-6 GB/s, direct
/// ones at 10; from 16 MiB on staging wins).
pub const MIN_BYTES: usize = 16 << 20;

/// Whether copies between ordinary host memory and a device are staged,
/// from the device's kind and the `SYRAH_STAGING` setting (`on`, `off`, or
/// unset for the default: devices with memory of their own). An unknown
/// setting keeps the default and is reported in the second field.
pub fn enabled(own_memory: bool, setting: Option<&str>) -> (bool, Option<String>) {
    match setting {
        None | Some("") => (own_memory, None),
        Some("on") | Some("1") => (true, None),
        Some("off") | Some("0") => (false, None),
        Some(other) => (
            own_memory,
            Some(format!(
                "SYRAH_STAGING={other:?} is not one of on, off, 1, 0: using the default ({})",
                if own_memory { "on" } else { "off" }
            )),
        ),
    }
}

/// The chunk size for a staged copy of `size` bytes: a quarter of it (in
/// whole MiB), so that even a copy of a few chunks keeps host threads and
/// the device busy at once, but at least 2 MiB and at most `CHUNK`.
pub fn chunk_for(size: usize) -> usize {
    const MIB: usize = 1 << 20;
    (size / SLOTS)
        .div_ceil(MIB)
        .saturating_mul(MIB)
        .clamp(2 * MIB, CHUNK)
}

/// Whether a copy of `size` bytes is staged on a device where staging is
/// `on`.
pub fn worth_it(on: bool, size: usize) -> bool {
    on && size >= MIN_BYTES
}

/// The chunks of a staged copy of `total` bytes: (offset, length) pairs of
/// at most `chunk` bytes, in order, covering every byte once.
pub fn runs(total: usize, chunk: usize) -> impl Iterator<Item = (usize, usize)> {
    let chunk = chunk.max(1);
    (0..total.div_ceil(chunk)).map(move |k| {
        let off = k * chunk;
        (off, chunk.min(total - off))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_every_byte_once_in_order() {
        let r: Vec<_> = runs(10, 4).collect();
        assert_eq!(r, vec![(0, 4), (4, 4), (8, 2)]);
        let r: Vec<_> = runs(8, 4).collect();
        assert_eq!(r, vec![(0, 4), (4, 4)]);
        assert_eq!(runs(0, 4).count(), 0);
        let r: Vec<_> = runs(3 * CHUNK + 5, CHUNK).collect();
        assert_eq!(r.len(), 4);
        assert_eq!(r[3], (3 * CHUNK, 5));
        assert_eq!(r.iter().map(|x| x.1).sum::<usize>(), 3 * CHUNK + 5);
    }

    #[test]
    fn setting_overrides_the_default_and_names_a_bad_value() {
        assert_eq!(enabled(true, None), (true, None));
        assert_eq!(enabled(false, None), (false, None));
        assert_eq!(enabled(false, Some("on")), (true, None));
        assert_eq!(enabled(true, Some("off")), (false, None));
        assert_eq!(enabled(true, Some("0")), (false, None));
        let (on, msg) = enabled(true, Some("fast"));
        assert!(on);
        assert_eq!(
            msg.as_deref(),
            Some("SYRAH_STAGING=\"fast\" is not one of on, off, 1, 0: using the default (on)")
        );
    }

    #[test]
    fn chunks_shrink_for_smaller_copies() {
        assert_eq!(chunk_for(1 << 30), CHUNK);
        assert_eq!(chunk_for(64 << 20), CHUNK);
        assert_eq!(chunk_for(32 << 20), 8 << 20);
        assert_eq!(chunk_for((10 << 20) + 1), 3 << 20);
        assert_eq!(chunk_for(4 << 20), 2 << 20);
        assert_eq!(chunk_for(1), 2 << 20);
    }

    #[test]
    fn only_large_copies_are_staged() {
        assert!(!worth_it(true, MIN_BYTES - 1));
        assert!(worth_it(true, MIN_BYTES));
        assert!(!worth_it(false, 1 << 30));
    }
}
