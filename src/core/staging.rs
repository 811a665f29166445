//! Staging plans for copies between ordinary host memory and a device: on
//! devices with memory of their own, the driver copies ordinary (pageable)
//! memory far slower than pinned memory, so large copies go through a ring
//! of pinned chunks: host threads fill one chunk while the device copies
//! the previous one.

/// Bytes of the pinned ring a device's staged copies go through, one
/// contiguous block: chunk after chunk of a copy takes the next part of it,
/// wrapping round, so a copy larger than the ring reuses it.
pub const RING: usize = 64 << 20;
/// The largest chunk: the unit of the device's copies, which lose a little
/// speed to each copy's own cost (on an H100 host 4 MiB copies from pinned
/// memory ran at 49 GB/s, 16 MiB ones at 53).
pub const CHUNK: usize = 8 << 20;
/// The first chunk of a copy. Chunks start small and double up to the
/// copy's chunk size, so the device's first copy starts after a few host
/// pieces rather than a whole chunk's worth.
pub const FIRST: usize = 512 << 10;
/// Bytes one host thread copies at a time, at most.
pub const PIECE: usize = 256 << 10;
/// Bytes one host thread copies at a time, at least.
pub const SMALL_PIECE: usize = 64 << 10;

/// The piece size for a chunk of `len` bytes: an eighth of it as a power
/// of two, from [`SMALL_PIECE`] to [`PIECE`]. One host thread copies about
/// 6 GB/s on an H100 host (many together 70-100), so a piece of 256 KiB
/// takes it some 40 µs; the ramp's small chunks, cut finer, go to the
/// device sooner.
pub fn piece_for(len: usize) -> usize {
    (len / 8)
        .checked_next_power_of_two()
        .unwrap_or(PIECE)
        .clamp(SMALL_PIECE, PIECE)
}
/// Towards the device, the last bytes of a copy that host threads write
/// around their caches (see `core::stream`): the device reads them soon
/// after they are written, before other writes push them out of the
/// caches, and reading lines still held by a core is slow. On an H100 host
/// the last 16-24 MiB were affected (up to 8 MiB chunk copies taking
/// 300-1000 µs instead of 154); writing the whole copy that way slows the
/// device's reads of the earlier chunks instead, as the writes then compete
/// with them for memory.
pub const STREAM_TAIL: usize = 32 << 20;
/// The smallest copy worth staging: below it the chunks' extra host copy
/// and the hand-over to runtime threads cost more than they save. On an
/// H100 host, staged 4 MiB copies ran at 12-21 GB/s against 8-11 direct,
/// staged 1 MiB ones at 5-8 against 7-10.
pub const MIN_BYTES: usize = 4 << 20;

/// Whether copies between ordinary host memory and a device are staged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Staging {
    /// Never: the driver copies ordinary memory as it is.
    Off,
    /// Staged unless the device's record shows the driver doing better
    /// (see `core::route`): the default on devices with memory of their
    /// own.
    Auto,
    /// Always staged.
    On,
    /// Always to the driver, timed as when `Auto` measures the driver's
    /// path: for tests of that path.
    Probe,
}

/// How copies between ordinary host memory and a device go, from the
/// device's kind and the `SYRAH_STAGING` setting (`auto`, `on`, `off`,
/// `probe`, or unset for the default: `auto` on devices with memory of
/// their own, else `off`). An unknown setting keeps the default and is
/// reported in the second field.
pub fn enabled(own_memory: bool, setting: Option<&str>) -> (Staging, Option<String>) {
    let default = if own_memory {
        Staging::Auto
    } else {
        Staging::Off
    };
    match setting {
        None | Some("") => (default, None),
        Some("auto") => (Staging::Auto, None),
        Some("on") | Some("1") => (Staging::On, None),
        Some("off") | Some("0") => (Staging::Off, None),
        Some("probe") => (Staging::Probe, None),
        Some(other) => (
            default,
            Some(format!(
                "SYRAH_STAGING={other:?} is not one of auto, on, off, 1, 0, probe: using the default ({})",
                if own_memory { "auto" } else { "off" }
            )),
        ),
    }
}

/// The chunk size for a staged copy of `size` bytes: the power of two at
/// or above an eighth of it, so that even a copy of a few chunks keeps host
/// threads and the device busy at once, but at least 2 MiB and at most
/// `CHUNK`. Always divides `RING`.
pub fn chunk_for(size: usize) -> usize {
    (size / 8)
        .checked_next_power_of_two()
        .unwrap_or(CHUNK)
        .clamp(2 << 20, CHUNK)
}

/// Threads of the pool that copies pieces on a host with `cores` cores:
/// three quarters of them, at least one (one core of the rest runs the
/// copy itself and hands chunks to the driver).
pub fn copiers_for(cores: usize) -> usize {
    (cores * 3 / 4).max(1)
}

/// A pool of [`copiers_for`] this host's cores, its threads named
/// `name-N`, for copying pieces of host memory.
pub fn copy_pool(
    name: &'static str,
) -> std::result::Result<rayon::ThreadPool, rayon::ThreadPoolBuildError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    rayon::ThreadPoolBuilder::new()
        .num_threads(copiers_for(cores))
        .thread_name(move |i| format!("{name}-{i}"))
        .build()
}

/// Whether a copy of `size` bytes may be staged on a device whose staging
/// is `mode`.
pub fn worth_it(mode: Staging, size: usize) -> bool {
    mode != Staging::Off && size >= MIN_BYTES
}

/// How a staged copy of `total` bytes is cut. Chunks follow each other
/// through the copy and through the ring (chunk `k` lies at its offset in
/// the copy modulo [`RING`]); the first ones ramp up from [`FIRST`],
/// doubling, until together they fill one chunk of the copy's chunk size,
/// after which every chunk has that size (the last one what is left).
/// Tapered, the copy's last chunk-sized stretch is cut in halves instead,
/// down to [`FIRST`]: towards the host the host threads copy each chunk out
/// after the device has copied it in, and so the last one they copy out is
/// small. No chunk crosses a multiple of the chunk size.
/// Chunks are cut into pieces ([`piece_for`] their length), numbered in
/// order chunk after chunk, so threads taking the next number finish the
/// chunks in order.
#[derive(Debug)]
pub struct Plan {
    /// Offset in the copy and length of each chunk, in order.
    pub chunks: Vec<(usize, usize)>,
    /// The number of each chunk's first piece.
    first_piece: Vec<usize>,
}

impl Plan {
    /// The plan for a copy of `total` bytes, with chunks of
    /// [`chunk_for`]`(total)`, tapered or not.
    pub fn new(total: usize, taper: bool) -> Plan {
        Plan::with_chunk(total, chunk_for(total), taper)
    }

    /// `chunk` must be a power of two of at least `2 * FIRST` that divides
    /// `RING`, so that no chunk straddles the ring's end.
    fn with_chunk(total: usize, chunk: usize, taper: bool) -> Plan {
        debug_assert!(chunk.is_power_of_two() && chunk >= 2 * FIRST && RING % chunk == 0);
        let mut chunks = Vec::with_capacity(total.div_ceil(chunk) + 16);
        let mut first_piece = Vec::with_capacity(chunks.capacity());
        let (mut off, mut pieces) = (0, 0);
        // Where the last chunk-sized stretch starts.
        let last = total.saturating_sub(1) / chunk * chunk;
        while off < total {
            let want = if off == 0 {
                FIRST
            } else if off < chunk {
                // Ramping up: as long as all chunks before it.
                off
            } else if taper && off >= last {
                // Tapering: half of what is left, whole pieces, from FIRST.
                ((total - off) / 2)
                    .div_ceil(PIECE)
                    .saturating_mul(PIECE)
                    .max(FIRST)
            } else {
                chunk
            };
            let len = want.min(total - off);
            chunks.push((off, len));
            first_piece.push(pieces);
            pieces += len.div_ceil(piece_for(len));
            off += len;
        }
        Plan {
            chunks,
            first_piece,
        }
    }

    /// Bytes of the copy.
    pub fn total(&self) -> usize {
        self.chunks.last().map_or(0, |&(off, len)| off + len)
    }

    /// Pieces in all.
    pub fn pieces(&self) -> usize {
        self.first_piece
            .last()
            .map_or(0, |&f| f + self.pieces_of(self.chunks.len() - 1))
    }

    /// Piece `p` (below `pieces`): its chunk, and its offset in the chunk
    /// and length.
    pub fn piece(&self, p: usize) -> (usize, usize, usize) {
        let k = self.first_piece.partition_point(|&f| f <= p) - 1;
        let len = self.chunks[k].1;
        let piece = piece_for(len);
        let off = (p - self.first_piece[k]) * piece;
        (k, off, piece.min(len - off))
    }

    /// Number of pieces of chunk `k`.
    pub fn pieces_of(&self, k: usize) -> usize {
        let len = self.chunks[k].1;
        len.div_ceil(piece_for(len))
    }

    /// Where chunk `k` lies in the ring.
    pub fn ring_at(&self, k: usize) -> usize {
        self.chunks[k].0 % RING
    }

    /// The chunk holding byte `at` of the copy (below its total).
    fn chunk_at(&self, at: usize) -> usize {
        self.chunks.partition_point(|&(o, _)| o <= at) - 1
    }

    /// The earlier chunks whose ring space chunk `k` reuses: each must be
    /// done with it before `k` may use it.
    pub fn before(&self, k: usize) -> std::ops::Range<usize> {
        let (off, len) = self.chunks[k];
        if off < RING {
            return k..k;
        }
        self.chunk_at(off - RING)..self.chunk_at(off - RING + len - 1) + 1
    }

    /// Whether the byte at `at` of the copy is among the last
    /// [`STREAM_TAIL`] ones, to be written around the caches.
    pub fn near_end(&self, at: usize) -> bool {
        at + STREAM_TAIL >= self.total()
    }

    /// The later chunks that reuse chunk `k`'s ring space: `k` is among
    /// [`Plan::before`] of each.
    pub fn reused_by(&self, k: usize) -> std::ops::Range<usize> {
        let (off, len) = self.chunks[k];
        let at = off + RING;
        if at >= self.total() {
            return k..k;
        }
        self.chunk_at(at)..self.chunk_at((at + len).min(self.total()) - 1) + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setting_overrides_the_default_and_names_a_bad_value() {
        assert_eq!(enabled(true, None), (Staging::Auto, None));
        assert_eq!(enabled(false, None), (Staging::Off, None));
        assert_eq!(enabled(false, Some("on")), (Staging::On, None));
        assert_eq!(enabled(false, Some("1")), (Staging::On, None));
        assert_eq!(enabled(false, Some("auto")), (Staging::Auto, None));
        assert_eq!(enabled(false, Some("probe")), (Staging::Probe, None));
        assert_eq!(enabled(true, Some("off")), (Staging::Off, None));
        assert_eq!(enabled(true, Some("0")), (Staging::Off, None));
        let (mode, msg) = enabled(true, Some("fast"));
        assert_eq!(mode, Staging::Auto);
        assert_eq!(
            msg.as_deref(),
            Some(
                "SYRAH_STAGING=\"fast\" is not one of auto, on, off, 1, 0, probe: using the default (auto)"
            )
        );
        let (mode, msg) = enabled(false, Some("ON"));
        assert_eq!(mode, Staging::Off);
        assert!(msg.is_some_and(|m| m.contains("\"ON\"") && m.ends_with("(off)")));
    }

    #[test]
    fn chunks_shrink_for_smaller_copies() {
        assert_eq!(chunk_for(1 << 30), CHUNK);
        assert_eq!(chunk_for(64 << 20), 8 << 20);
        assert_eq!(chunk_for(48 << 20), 8 << 20);
        assert_eq!(chunk_for(32 << 20), 4 << 20);
        assert_eq!(chunk_for(20 << 20), 4 << 20);
        assert_eq!(chunk_for(16 << 20), 2 << 20);
        assert_eq!(chunk_for(1), 2 << 20);
        assert_eq!(chunk_for(usize::MAX), CHUNK);
        for size in [1usize, 5 << 20, 16 << 20, 33 << 20, 1 << 30] {
            let c = chunk_for(size);
            assert!(c.is_power_of_two() && c >= 2 * FIRST && RING % c == 0);
        }
    }

    #[test]
    fn chunks_ramp_up_then_keep_the_chunk_size() {
        let mib = 1usize << 20;
        let lens = |plan: &Plan| plan.chunks.iter().map(|c| c.1).collect::<Vec<_>>();
        // 64 MiB: 0.5, 0.5, 1, 2, 4 (one 8 MiB chunk's worth), then 8s.
        let plan = Plan::new(64 * mib, false);
        assert_eq!(
            lens(&plan),
            vec![
                FIRST,
                FIRST,
                mib,
                2 * mib,
                4 * mib,
                8 * mib,
                8 * mib,
                8 * mib,
                8 * mib,
                8 * mib,
                8 * mib,
                8 * mib
            ]
        );
        assert_eq!(plan.chunks[5].0, 8 * mib);
        // The ramp's chunks in eighths, from 64 KiB; then 256 KiB pieces.
        assert_eq!(
            (0..5).map(|k| plan.pieces_of(k)).collect::<Vec<_>>(),
            vec![8, 8, 8, 8, 16]
        );
        assert_eq!(plan.pieces(), 4 * 8 + 16 + 7 * 8 * mib / PIECE);
        // 16 MiB: 2 MiB chunks after 0.5, 0.5, 1.
        let plan = Plan::new(16 * mib, false);
        assert_eq!(lens(&plan)[..4], [FIRST, FIRST, mib, 2 * mib]);
        assert_eq!(plan.chunks.len(), 3 + 7);
        // Tapered: the last 8 MiB in halves down to FIRST.
        let plan = Plan::new(64 * mib, true);
        assert_eq!(
            lens(&plan)[plan.chunks.len() - 6..],
            [8 * mib, 4 * mib, 2 * mib, mib, FIRST, FIRST]
        );
        assert_eq!(plan.chunks.iter().map(|c| c.1).sum::<usize>(), 64 * mib);
        // A partial last stretch (4 MiB chunks): 3 MiB and 12 bytes after
        // 16 MiB, halved in whole pieces.
        let plan = Plan::new(19 * mib + 12, true);
        let tail: Vec<usize> = plan
            .chunks
            .iter()
            .filter(|c| c.0 >= 16 * mib)
            .map(|c| c.1)
            .collect();
        assert_eq!(tail, vec![7 * PIECE, 3 * PIECE, 2 * PIECE, 12]);
        // Short copies: the ramp cut where the copy ends.
        assert_eq!(lens(&Plan::with_chunk(100, 2 * mib, false)), vec![100]);
        assert_eq!(
            lens(&Plan::with_chunk(FIRST + 7, 2 * mib, false)),
            vec![FIRST, 7]
        );
        assert_eq!(Plan::new(0, false).pieces(), 0);
        assert!(Plan::new(0, false).chunks.is_empty());
    }

    #[test]
    fn pieces_cover_every_byte_once_chunk_after_chunk() {
        for total in [
            16usize << 20,
            (16 << 20) + 5,
            (3 << 20) + PIECE + 1,
            100,
            RING * 2 + CHUNK * 3 - 1,
        ] {
            let plan = Plan::new(total, false);
            let mut covered = 0;
            let mut last_chunk = 0;
            let mut per = vec![0usize; plan.chunks.len()];
            for p in 0..plan.pieces() {
                let (k, off, len) = plan.piece(p);
                assert!(k >= last_chunk, "pieces go chunk after chunk");
                last_chunk = k;
                assert!(len > 0 && len <= PIECE);
                // Every piece but a chunk's last has the chunk's piece size.
                if off + len < plan.chunks[k].1 {
                    assert_eq!(len, piece_for(plan.chunks[k].1));
                }
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
        let plan = Plan::with_chunk(FIRST + 1, 2 << 20, false);
        assert_eq!(plan.pieces(), 8 + 1);
        assert_eq!(plan.piece(8), (1, 0, 1));
        assert_eq!(plan.piece(7), (0, 7 * SMALL_PIECE, SMALL_PIECE));
        assert_eq!(piece_for(FIRST), SMALL_PIECE);
        assert_eq!(piece_for(1), SMALL_PIECE);
        assert_eq!(piece_for(1 << 20), 128 << 10);
        assert_eq!(piece_for(2 << 20), PIECE);
        assert_eq!(piece_for(CHUNK), PIECE);
        assert_eq!(piece_for(usize::MAX), PIECE);
    }

    #[test]
    fn ring_space_is_reused_only_after_its_earlier_chunks() {
        let mib = 1usize << 20;
        for (total, taper) in [64 * mib, 64 * mib + 1, 80 * mib + 12, 200 * mib, 1 << 30]
            .into_iter()
            .flat_map(|t| [(t, false), (t, true)])
        {
            let plan = Plan::new(total, taper);
            let n = plan.chunks.len();
            let mut pairs = Vec::new();
            for k in 0..n {
                let (off, len) = plan.chunks[k];
                let at = plan.ring_at(k);
                assert!(at + len <= RING, "chunk {k} straddles the ring's end");
                let before = plan.before(k);
                if off < RING {
                    assert!(before.is_empty());
                }
                // Exactly the earlier chunks that last used some of the
                // ring space of `k`.
                for j in 0..k {
                    let (ja, jl) = (plan.ring_at(j), plan.chunks[j].1);
                    let (from, to) = (ja.max(at), (ja + jl).min(at + len));
                    let latest = from < to
                        && (j + 1..k).all(|m| {
                            let ma = plan.ring_at(m);
                            !(ma < to && from < ma + plan.chunks[m].1)
                        });
                    assert_eq!(
                        before.contains(&j),
                        latest,
                        "chunk {k} after {j}, {total} bytes, tapered: {taper}"
                    );
                    if before.contains(&j) {
                        pairs.push((j, k));
                    }
                }
            }
            for k in 0..n {
                let by: Vec<usize> = pairs.iter().filter(|p| p.0 == k).map(|p| p.1).collect();
                assert_eq!(
                    plan.reused_by(k).collect::<Vec<_>>(),
                    by,
                    "chunk {k} of {total} bytes, tapered: {taper}"
                );
            }
        }
        // 200 MiB: the 8 MiB chunk at 64 MiB reuses the five ramp chunks.
        let plan = Plan::new(200 * mib, false);
        assert_eq!(plan.chunk_at(64 * mib), 12);
        assert_eq!(plan.before(12), 0..5);
        assert_eq!(plan.before(13), 5..6);
        assert_eq!(plan.reused_by(3), 12..13);
        assert!(plan.reused_by(plan.chunks.len() - 1).is_empty());
        // Tapered, 200 MiB ends 4, 2, 1, 0.5, 0.5 in the block from 192
        // MiB, which reuses the ring space of one 8 MiB chunk.
        let plan = Plan::new(200 * mib, true);
        let n = plan.chunks.len();
        assert_eq!(plan.chunk_at(192 * mib), n - 5);
        assert_eq!(plan.reused_by(plan.chunk_at(128 * mib)), n - 5..n);
        for k in n - 5..n {
            assert_eq!(plan.before(k).len(), 1);
        }
    }

    #[test]
    fn only_the_last_bytes_are_near_the_end() {
        let mib = 1usize << 20;
        let plan = Plan::new(64 * mib, false);
        assert!(!plan.near_end(0));
        assert!(!plan.near_end(32 * mib - 1));
        assert!(plan.near_end(32 * mib));
        assert!(plan.near_end(64 * mib - 1));
        let plan = Plan::new(16 * mib, false);
        assert!(plan.near_end(0));
    }

    #[test]
    fn copiers_leave_a_quarter_of_the_cores() {
        assert_eq!(copiers_for(16), 12);
        assert_eq!(copiers_for(2), 1);
        assert_eq!(copiers_for(4), 3);
        assert_eq!(copiers_for(1), 1);
        assert_eq!(copiers_for(0), 1);
        assert_eq!(copiers_for(128), 96);
    }

    #[test]
    fn only_large_copies_are_staged() {
        assert!(!worth_it(Staging::On, MIN_BYTES - 1));
        assert!(worth_it(Staging::On, MIN_BYTES));
        assert!(worth_it(Staging::Auto, MIN_BYTES));
        assert!(worth_it(Staging::Probe, MIN_BYTES));
        assert!(!worth_it(Staging::Off, 1 << 30));
    }
}
