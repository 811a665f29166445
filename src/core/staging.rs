//! Staging plans for copies between ordinary host memory and a device: on
//! devices with memory of their own, the driver copies ordinary (pageable)
//! memory far slower than pinned memory, so large copies go through a ring
//! of pinned chunks: host threads fill one chunk while the device copies
//! the previous one.

/// Bytes of one pinned chunk: the unit of the device's copies. Host
/// threads fill a chunk piece by piece, in order, and the device copy of a
/// chunk starts as soon as its last piece is in, so chunks can be small.
pub const CHUNK: usize = 4 << 20;
/// Chunks in the ring: how many device copies may be in flight.
pub const SLOTS: usize = 16;
/// Bytes one host thread copies at a time.
pub const PIECE: usize = 256 << 10;
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

/// The chunk size for a staged copy of `size` bytes: a `SLOTS`th of it
/// (in whole MiB), so that even a copy of a few chunks keeps host threads
/// and the device busy at once, but at least 2 MiB and at most `CHUNK`.
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

/// How a staged copy of `total` bytes is cut: chunks of `chunk` bytes (see
/// [`runs`]), each cut into pieces of at most [`PIECE`] bytes. Pieces are
/// numbered in order, chunk after chunk, so threads taking the next number
/// finish the chunks in order.
#[derive(Debug)]
pub struct Plan {
    pub chunks: Vec<(usize, usize)>,
    /// Pieces of a whole chunk.
    per_chunk: usize,
    /// Pieces in all.
    pub pieces: usize,
}

impl Plan {
    pub fn new(total: usize, chunk: usize) -> Plan {
        let chunks: Vec<(usize, usize)> = runs(total, chunk).collect();
        let per_chunk = chunk.max(1).div_ceil(PIECE);
        let pieces = match chunks.last() {
            None => 0,
            Some(&(_, last)) => (chunks.len() - 1) * per_chunk + last.div_ceil(PIECE),
        };
        Plan {
            chunks,
            per_chunk,
            pieces,
        }
    }

    /// Piece `p` (below `pieces`): its chunk, and its offset in the chunk
    /// and length.
    pub fn piece(&self, p: usize) -> (usize, usize, usize) {
        let k = p / self.per_chunk;
        let off = (p % self.per_chunk) * PIECE;
        (k, off, PIECE.min(self.chunks[k].1 - off))
    }

    /// Number of pieces of chunk `k`.
    pub fn pieces_of(&self, k: usize) -> usize {
        self.chunks[k].1.div_ceil(PIECE)
    }
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
        assert_eq!(chunk_for(64 << 20), 4 << 20);
        assert_eq!(chunk_for(48 << 20), 3 << 20);
        assert_eq!(chunk_for(40 << 20), 3 << 20);
        assert_eq!(chunk_for(32 << 20), 2 << 20);
        assert_eq!(chunk_for(16 << 20), 2 << 20);
        assert_eq!(chunk_for(1), 2 << 20);
    }

    #[test]
    fn pieces_cover_every_byte_once_chunk_after_chunk() {
        for &(total, chunk) in &[
            (16usize << 20, 2usize << 20),
            ((16 << 20) + 5, 2 << 20),
            ((3 << 20) + PIECE + 1, 3 << 20),
            (100, 2 << 20),
            (CHUNK * 3 - 1, CHUNK),
        ] {
            let plan = Plan::new(total, chunk);
            let mut covered = 0;
            let mut last_chunk = 0;
            let mut per = vec![0usize; plan.chunks.len()];
            for p in 0..plan.pieces {
                let (k, off, len) = plan.piece(p);
                assert!(k >= last_chunk, "pieces go chunk after chunk");
                last_chunk = k;
                assert!(len > 0 && len <= PIECE);
                // Pieces of a chunk are consecutive, from its start.
                assert_eq!(plan.chunks[k].0 + off, covered);
                assert!(off + len <= plan.chunks[k].1);
                covered += len;
                per[k] += 1;
            }
            assert_eq!(covered, total);
            for (k, n) in per.iter().enumerate() {
                assert_eq!(*n, plan.pieces_of(k));
            }
        }
        let plan = Plan::new((2 << 20) + 1, 2 << 20);
        assert_eq!(plan.pieces, 8 + 1);
        assert_eq!(plan.piece(8), (1, 0, 1));
        assert_eq!(Plan::new(0, 2 << 20).pieces, 0);
    }

    #[test]
    fn only_large_copies_are_staged() {
        assert!(!worth_it(true, MIN_BYTES - 1));
        assert!(worth_it(true, MIN_BYTES));
        assert!(!worth_it(false, 1 << 30));
    }
}
