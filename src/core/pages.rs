//! The page grid of a buffer and transfer planning over it.
//!
//! A buffer's range is a 3D grid (dimension 2 is contiguous in memory, as in
//! SYCL; 1D and 2D buffers are `[1, 1, n]` and `[1, rows, cols]`) cut into
//! pages of a fixed number of elements per dimension. Every allocation of
//! the buffer keeps one bit per page: up to date or not. An accessor's page
//! range is the box of pages its element range touches.

use super::error::{Error, Result};
use bitvec::prelude::*;

/// Target size of a default page, in bytes. See `docs/buffers.md` for the
/// measurement behind it.
pub const DEFAULT_PAGE_BYTES: usize = 256 * 1024;

/// A box of pages (or elements): `lo` inclusive, `hi` exclusive, per
/// dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Box3 {
    pub lo: [usize; 3],
    pub hi: [usize; 3],
}

impl Box3 {
    pub fn new(lo: [usize; 3], hi: [usize; 3]) -> Box3 {
        Box3 { lo, hi }
    }

    pub fn is_empty(&self) -> bool {
        (0..3).any(|i| self.hi[i] <= self.lo[i])
    }

    pub fn count(&self) -> usize {
        if self.is_empty() {
            0
        } else {
            (0..3).map(|i| self.hi[i] - self.lo[i]).product()
        }
    }

    pub fn overlaps(&self, o: &Box3) -> bool {
        !self.is_empty()
            && !o.is_empty()
            && (0..3).all(|i| self.lo[i] < o.hi[i] && o.lo[i] < self.hi[i])
    }

    pub fn contains(&self, o: &Box3) -> bool {
        o.is_empty() || (0..3).all(|i| self.lo[i] <= o.lo[i] && o.hi[i] <= self.hi[i])
    }

    pub fn extent(&self) -> [usize; 3] {
        [
            self.hi[0].saturating_sub(self.lo[0]),
            self.hi[1].saturating_sub(self.lo[1]),
            self.hi[2].saturating_sub(self.lo[2]),
        ]
    }
}

/// Shape of a buffer: element size, range and page size (elements per page
/// per dimension), all normalised to three dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub elem: usize,
    pub range: [usize; 3],
    pub page: [usize; 3],
    /// Pages per dimension (worked out once: every page lookup needs them).
    counts: [usize; 3],
}

/// Normalises a 1–3 dimensional extent to three dimensions (leading 1s).
pub fn normalize(dims: u32, v: &[usize; 3], fill: usize) -> Result<[usize; 3]> {
    match dims {
        1 => Ok([fill, fill, v[0]]),
        2 => Ok([fill, v[0], v[1]]),
        3 => Ok(*v),
        d => Err(Error::invalid(format!(
            "dimensions must be 1, 2 or 3, not {d}"
        ))),
    }
}

impl Geometry {
    /// Builds a geometry; a page size of 0 in a dimension picks the default.
    pub fn new(elem: usize, range: [usize; 3], page: [usize; 3]) -> Result<Geometry> {
        if elem == 0 {
            return Err(Error::invalid("element size is 0"));
        }
        if range.contains(&0) {
            return Err(Error::invalid(format!(
                "buffer range {range:?} has an empty dimension"
            )));
        }
        let total = range
            .iter()
            .try_fold(elem, |a, &r| a.checked_mul(r))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "buffer of {range:?} elements of {elem} bytes overflows"
                ))
            })?;
        let _ = total;
        let default = default_page(elem, range);
        let mut p = [0usize; 3];
        for i in 0..3 {
            p[i] = if page[i] == 0 {
                default[i]
            } else {
                page[i].min(range[i])
            };
        }
        Ok(Geometry {
            elem,
            range,
            page: p,
            counts: [
                range[0].div_ceil(p[0]),
                range[1].div_ceil(p[1]),
                range[2].div_ceil(p[2]),
            ],
        })
    }

    pub fn bytes(&self) -> usize {
        self.elem * self.range.iter().product::<usize>()
    }

    /// Pages per dimension.
    pub fn pages(&self) -> [usize; 3] {
        self.counts
    }

    pub fn page_count(&self) -> usize {
        self.pages().iter().product()
    }

    pub fn all_pages(&self) -> Box3 {
        Box3::new([0; 3], self.pages())
    }

    pub fn linear(&self, p: [usize; 3]) -> usize {
        let n = self.pages();
        (p[0] * n[1] + p[1]) * n[2] + p[2]
    }

    /// Checks an element box against the range.
    pub fn check_elements(&self, offset: [usize; 3], range: [usize; 3]) -> Result<()> {
        for i in 0..3 {
            let end = offset[i].checked_add(range[i]);
            if range[i] == 0 || end.is_none_or(|e| e > self.range[i]) {
                return Err(Error::invalid(format!(
                    "accessed range {range:?} at offset {offset:?} does not fit the buffer's range {:?}",
                    self.range
                )));
            }
        }
        Ok(())
    }

    /// The box of pages an element box touches.
    pub fn page_box(&self, offset: [usize; 3], range: [usize; 3]) -> Box3 {
        let mut b = Box3::new([0; 3], [0; 3]);
        for i in 0..3 {
            b.lo[i] = offset[i] / self.page[i];
            b.hi[i] = (offset[i] + range[i]).div_ceil(self.page[i]);
        }
        b
    }

    /// The pages an element box covers completely (a page that the box
    /// reaches to the end of the buffer counts as covered).
    pub fn covered_box(&self, offset: [usize; 3], range: [usize; 3]) -> Box3 {
        let mut b = Box3::new([0; 3], [0; 3]);
        for i in 0..3 {
            let end = offset[i] + range[i];
            b.lo[i] = offset[i].div_ceil(self.page[i]);
            b.hi[i] = if end == self.range[i] {
                end.div_ceil(self.page[i])
            } else {
                end / self.page[i]
            };
            if b.hi[i] < b.lo[i] {
                b.hi[i] = b.lo[i];
            }
        }
        b
    }

    /// The pages touching the linear byte interval `[start, end)`,
    /// conservatively as a box (used for reinterpreted views).
    pub fn page_box_of_bytes(&self, start: usize, end: usize) -> Box3 {
        let first = start / self.elem;
        let last = (end.max(start + 1) - 1) / self.elem;
        let coord = |e: usize| {
            let c2 = e % self.range[2];
            let c1 = (e / self.range[2]) % self.range[1];
            let c0 = e / (self.range[2] * self.range[1]);
            [c0, c1, c2]
        };
        let (a, b) = (coord(first), coord(last));
        let mut lo = [a[0], 0, 0];
        let mut hi = [b[0] + 1, self.range[1], self.range[2]];
        if a[0] == b[0] {
            lo[1] = a[1];
            hi[1] = b[1] + 1;
            if a[1] == b[1] {
                lo[2] = a[2];
                hi[2] = b[2] + 1;
            }
        }
        self.page_box(lo, [hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]])
    }

    /// The element box a page box covers, clamped to the range.
    pub fn elements_of(&self, b: &Box3) -> Box3 {
        let mut e = Box3::new([0; 3], [0; 3]);
        for i in 0..3 {
            e.lo[i] = b.lo[i] * self.page[i];
            e.hi[i] = (b.hi[i] * self.page[i]).min(self.range[i]);
        }
        e
    }

    /// Byte offset of an element.
    pub fn byte_offset(&self, e: [usize; 3]) -> usize {
        ((e[0] * self.range[1] + e[1]) * self.range[2] + e[2]) * self.elem
    }

    /// Contiguous byte runs covering an element box, merged where rows or
    /// slices are adjacent in memory: `(offset, length)` pairs.
    pub fn byte_runs(&self, e: &Box3) -> Vec<(usize, usize)> {
        let ext = e.extent();
        if e.is_empty() {
            return Vec::new();
        }
        let row = ext[2] * self.elem;
        let full_rows = ext[2] == self.range[2];
        let full_slices = full_rows && ext[1] == self.range[1];
        if full_slices {
            return vec![(self.byte_offset(e.lo), row * ext[1] * ext[0])];
        }
        let mut runs = Vec::new();
        for z in e.lo[0]..e.hi[0] {
            if full_rows {
                runs.push((self.byte_offset([z, e.lo[1], 0]), row * ext[1]));
            } else {
                for y in e.lo[1]..e.hi[1] {
                    runs.push((self.byte_offset([z, y, e.lo[2]]), row));
                }
            }
        }
        runs
    }
}

/// `outer` without `inner` (which it contains), as at most six boxes.
pub fn subtract(outer: &Box3, inner: &Box3) -> Vec<Box3> {
    if inner.is_empty() {
        return if outer.is_empty() {
            Vec::new()
        } else {
            vec![*outer]
        };
    }
    let mut out = Vec::new();
    let mut rest = *outer;
    for d in 0..3 {
        if rest.lo[d] < inner.lo[d] {
            let mut b = rest;
            b.hi[d] = inner.lo[d];
            out.push(b);
            rest.lo[d] = inner.lo[d];
        }
        if inner.hi[d] < rest.hi[d] {
            let mut b = rest;
            b.lo[d] = inner.hi[d];
            out.push(b);
            rest.hi[d] = inner.hi[d];
        }
    }
    out.retain(|b| !b.is_empty());
    out
}

/// Default page: about [`DEFAULT_PAGE_BYTES`], whole rows first.
pub fn default_page(elem: usize, range: [usize; 3]) -> [usize; 3] {
    let per_page = (DEFAULT_PAGE_BYTES / elem).max(1);
    let p2 = range[2].min(per_page);
    let p1 = range[1].min((per_page / p2).max(1));
    let p0 = range[0].min((per_page / (p2 * p1)).max(1));
    [p0.max(1), p1.max(1), p2.max(1)]
}

/// Up-to-date bits of one allocation.
pub type PageBits = BitVec<usize, Lsb0>;

pub fn new_bits(g: &Geometry, value: bool) -> PageBits {
    bitvec![usize, Lsb0; if value { 1 } else { 0 }; g.page_count()]
}

/// The word of a page map holding page `i`'s bit, and that bit's mask
/// (the map's words are `usize`, first page in the lowest bit).
fn word_bit(i: usize) -> (usize, usize) {
    let w = usize::BITS as usize;
    (i / w, 1usize << (i % w))
}

pub fn set_box(g: &Geometry, bits: &mut PageBits, b: &Box3, value: bool) {
    if b.count() == 1 {
        // One page (most small buffers): one bit of one word.
        let (word, mask) = word_bit(g.linear(b.lo));
        if let Some(w) = bits.as_raw_mut_slice().get_mut(word) {
            if value {
                *w |= mask;
            } else {
                *w &= !mask;
            }
        }
        return;
    }
    for z in b.lo[0]..b.hi[0] {
        for y in b.lo[1]..b.hi[1] {
            let start = g.linear([z, y, b.lo[2]]);
            let end = g.linear([z, y, b.hi[2] - 1]) + 1;
            bits[start..end].fill(value);
        }
    }
}

pub fn all_set(g: &Geometry, bits: &PageBits, b: &Box3) -> bool {
    if b.is_empty() {
        return true;
    }
    if b.count() == 1 {
        let (word, mask) = word_bit(g.linear(b.lo));
        return bits.as_raw_slice().get(word).is_some_and(|w| w & mask != 0);
    }
    for z in b.lo[0]..b.hi[0] {
        for y in b.lo[1]..b.hi[1] {
            let start = g.linear([z, y, b.lo[2]]);
            let end = g.linear([z, y, b.hi[2] - 1]) + 1;
            if !bits[start..end].all() {
                return false;
            }
        }
    }
    true
}

/// One planned copy: a box of pages from allocation `src`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub src: usize,
    pub pages: Box3,
}

/// Plans the copies that make every page of `want` up to date in
/// allocation `target`. `allocs[i]` are the bits of allocation `i` (None if
/// it does not exist); `rank(i)` orders candidate sources (lower first).
/// Pages up to date nowhere hold no data and are not transferred. The
/// result is a partition of the outdated pages into boxes, each from one
/// source, grown greedily along dimension 2, then 1, then 0.
pub fn plan(
    g: &Geometry,
    target: usize,
    want: &Box3,
    allocs: &[Option<&PageBits>],
    rank: impl Fn(usize) -> usize,
) -> Vec<Transfer> {
    let ext = want.extent();
    let n = want.count();
    if n == 0 {
        return Vec::new();
    }
    const NONE: usize = usize::MAX;
    let mut order: Vec<usize> = (0..allocs.len())
        .filter(|&i| i != target && allocs[i].is_some())
        .collect();
    order.sort_by_key(|&i| rank(i));
    let local = |p: [usize; 3]| {
        ((p[0] - want.lo[0]) * ext[1] + (p[1] - want.lo[1])) * ext[2] + (p[2] - want.lo[2])
    };
    let mut src = vec![NONE; n];
    let tbits = allocs.get(target).copied().flatten();
    for z in want.lo[0]..want.hi[0] {
        for y in want.lo[1]..want.hi[1] {
            for x in want.lo[2]..want.hi[2] {
                let lin = g.linear([z, y, x]);
                if tbits.is_some_and(|b| b[lin]) {
                    continue;
                }
                if let Some(&s) = order.iter().find(|&&s| allocs[s].is_some_and(|b| b[lin])) {
                    src[local([z, y, x])] = s;
                }
            }
        }
    }
    let mut out = Vec::new();
    for z in want.lo[0]..want.hi[0] {
        for y in want.lo[1]..want.hi[1] {
            for x in want.lo[2]..want.hi[2] {
                let s = src[local([z, y, x])];
                if s == NONE {
                    continue;
                }
                let mut x1 = x + 1;
                while x1 < want.hi[2] && src[local([z, y, x1])] == s {
                    x1 += 1;
                }
                let row_ok = |zz: usize, yy: usize| (x..x1).all(|xx| src[local([zz, yy, xx])] == s);
                let mut y1 = y + 1;
                while y1 < want.hi[1] && row_ok(z, y1) {
                    y1 += 1;
                }
                let mut z1 = z + 1;
                while z1 < want.hi[0] && (y..y1).all(|yy| row_ok(z1, yy)) {
                    z1 += 1;
                }
                for zz in z..z1 {
                    for yy in y..y1 {
                        for xx in x..x1 {
                            src[local([zz, yy, xx])] = NONE;
                        }
                    }
                }
                out.push(Transfer {
                    src: s,
                    pages: Box3::new([z, y, x], [z1, y1, x1]),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g2(rows: usize, cols: usize, pr: usize, pc: usize) -> Geometry {
        Geometry::new(4, [1, rows, cols], [1, pr, pc]).expect("geometry")
    }

    #[test]
    fn single_pages_are_set_and_read_as_their_bits() {
        // 10 x 20 pages: 200 bits over four words; pages 63 and 64 on
        // either side of a word boundary.
        let g = g2(10, 20, 1, 1);
        let mut bits = new_bits(&g, false);
        for (k, &(r, c)) in [(0, 0), (3, 3), (3, 4), (9, 19), (6, 7)].iter().enumerate() {
            let b = Box3::new([0, r, c], [1, r + 1, c + 1]);
            assert!(!all_set(&g, &bits, &b));
            set_box(&g, &mut bits, &b, true);
            assert!(all_set(&g, &bits, &b));
            assert!(bits[g.linear([0, r, c])]);
            assert_eq!(bits.count_ones(), k + 1);
        }
        let b = Box3::new([0, 3, 4], [1, 4, 5]);
        set_box(&g, &mut bits, &b, false);
        assert!(!bits[g.linear([0, 3, 4])] && !all_set(&g, &bits, &b));
        assert_eq!(bits.count_ones(), 4);
    }

    #[test]
    fn default_pages_are_about_256k_and_whole_rows_first() {
        assert_eq!(default_page(4, [1, 1, 1 << 20]), [1, 1, 65536]);
        assert_eq!(default_page(4, [1, 1024, 1024]), [1, 64, 1024]);
        assert_eq!(default_page(8, [64, 64, 64]), [8, 64, 64]);
        assert_eq!(default_page(4, [1, 1, 10]), [1, 1, 10]);
        assert_eq!(default_page(1 << 20, [1, 1, 4]), [1, 1, 1]);
        let g = Geometry::new(4, [1, 1, 1 << 20], [0; 3]).expect("g");
        assert_eq!(g.page_count(), 16);
    }

    #[test]
    fn geometry_errors_name_values() {
        assert!(Geometry::new(0, [1, 1, 1], [0; 3]).is_err());
        let e = Geometry::new(4, [1, 0, 3], [0; 3]).expect_err("empty");
        assert!(e.message.contains("[1, 0, 3]"));
        assert!(Geometry::new(4, [usize::MAX, 2, 2], [0; 3]).is_err());
        let g = g2(10, 10, 4, 4);
        assert!(g.check_elements([0, 0, 0], [1, 10, 10]).is_ok());
        let e = g
            .check_elements([0, 5, 0], [1, 6, 10])
            .expect_err("past the end");
        assert!(e.message.contains("[1, 6, 10]") && e.message.contains("[0, 5, 0]"));
        assert!(g.check_elements([0, 0, 0], [1, 0, 10]).is_err());
    }

    #[test]
    fn page_boxes_round_outwards() {
        let g = g2(10, 10, 4, 4); // pages: 3 x 3, the last ones partial
        assert_eq!(g.pages(), [1, 3, 3]);
        assert_eq!(
            g.page_box([0, 3, 3], [1, 2, 2]),
            Box3::new([0, 0, 0], [1, 2, 2])
        );
        assert_eq!(
            g.page_box([0, 8, 0], [1, 2, 10]),
            Box3::new([0, 2, 0], [1, 3, 3])
        );
        assert_eq!(
            g.elements_of(&Box3::new([0, 2, 2], [1, 3, 3])),
            Box3::new([0, 8, 8], [1, 10, 10])
        );
    }

    #[test]
    fn byte_runs_merge_full_rows() {
        let g = g2(10, 10, 4, 4);
        assert_eq!(
            g.byte_runs(&Box3::new([0, 0, 0], [1, 10, 10])),
            vec![(0, 400)]
        );
        assert_eq!(
            g.byte_runs(&Box3::new([0, 4, 0], [1, 8, 10])),
            vec![(160, 160)]
        );
        assert_eq!(
            g.byte_runs(&Box3::new([0, 4, 4], [1, 6, 8])),
            vec![(4 * 44, 16), (4 * 54, 16)]
        );
        let g3 = Geometry::new(1, [2, 3, 4], [1, 1, 4]).expect("g");
        assert_eq!(
            g3.byte_runs(&Box3::new([0, 1, 0], [2, 3, 4])),
            vec![(4, 8), (16, 8)]
        );
    }

    #[test]
    fn covered_pages_and_subtraction() {
        let g = g2(10, 10, 4, 4); // 3 x 3 pages, the last ones partial
                                  // Rows 1..9: page rows 0 and 2 are partial, only row 1 is covered.
        assert_eq!(
            g.covered_box([0, 1, 0], [1, 8, 10]),
            Box3::new([0, 1, 0], [1, 2, 3])
        );
        // Reaching the end of the buffer covers the last, partial page.
        assert_eq!(
            g.covered_box([0, 4, 0], [1, 6, 10]),
            Box3::new([0, 1, 0], [1, 3, 3])
        );
        assert!(g.covered_box([0, 1, 1], [1, 2, 2]).is_empty());
        let outer = Box3::new([0, 0, 0], [1, 3, 3]);
        let inner = Box3::new([0, 1, 0], [1, 2, 3]);
        let parts = subtract(&outer, &inner);
        assert_eq!(parts.iter().map(|b| b.count()).sum::<usize>(), 6);
        assert!(parts
            .iter()
            .all(|b| !b.overlaps(&inner) && outer.contains(b)));
        let inner = Box3::new([0, 1, 1], [1, 2, 2]);
        let parts = subtract(&outer, &inner);
        assert_eq!(parts.iter().map(|b| b.count()).sum::<usize>(), 8);
        for (i, a) in parts.iter().enumerate() {
            for b in &parts[i + 1..] {
                assert!(!a.overlaps(b));
            }
        }
        assert_eq!(subtract(&outer, &Box3::new([0; 3], [0; 3])), vec![outer]);
        assert!(subtract(&outer, &outer).is_empty());
    }

    #[test]
    fn bytes_map_to_covering_pages() {
        let g = g2(10, 10, 4, 4);
        // Bytes of row 5, columns 2..6.
        assert_eq!(
            g.page_box_of_bytes(4 * 52, 4 * 56),
            Box3::new([0, 1, 0], [1, 2, 2])
        );
        // Rows 3 to 4 span whole rows in between.
        assert_eq!(
            g.page_box_of_bytes(4 * 39, 4 * 41),
            Box3::new([0, 0, 0], [1, 2, 3])
        );
    }

    #[test]
    fn bits_set_and_test_boxes() {
        let g = g2(16, 16, 4, 4);
        let mut b = new_bits(&g, false);
        set_box(&g, &mut b, &Box3::new([0, 1, 1], [1, 3, 3]), true);
        assert_eq!(b.count_ones(), 4);
        assert!(all_set(&g, &b, &Box3::new([0, 1, 1], [1, 3, 3])));
        assert!(!all_set(&g, &b, &Box3::new([0, 1, 1], [1, 3, 4])));
        assert!(all_set(&g, &b, &Box3::new([0, 0, 0], [1, 0, 0])));
        // One page: the page at row 3, column 2 (linear 14), alone.
        let one = Box3::new([0, 3, 2], [1, 4, 3]);
        assert!(!all_set(&g, &b, &one));
        set_box(&g, &mut b, &one, true);
        assert!(b[14] && !b[13] && !b[15]);
        assert_eq!(b.count_ones(), 5);
        assert!(all_set(&g, &b, &one));
        set_box(&g, &mut b, &Box3::new([0, 1, 1], [1, 2, 2]), false);
        assert_eq!(b.count_ones(), 4);
        assert!(!b[5] && b[6]);
    }

    #[test]
    fn plan_merges_into_maximal_boxes() {
        let g = g2(16, 16, 4, 4); // 4 x 4 pages
        let host = new_bits(&g, true);
        let dev = new_bits(&g, false);
        let all = g.all_pages();
        let t = plan(&g, 1, &all, &[Some(&host), Some(&dev)], |i| i);
        assert_eq!(t, vec![Transfer { src: 0, pages: all }]);
        // Target already holds the middle 2x2: the rest splits into 4 boxes.
        let mut dev = new_bits(&g, false);
        set_box(&g, &mut dev, &Box3::new([0, 1, 1], [1, 3, 3]), true);
        let t = plan(&g, 1, &all, &[Some(&host), Some(&dev)], |i| i);
        let pages: usize = t.iter().map(|x| x.pages.count()).sum();
        assert_eq!(pages, 12);
        assert_eq!(t.len(), 4);
        for x in &t {
            assert!(!x.pages.overlaps(&Box3::new([0, 1, 1], [1, 3, 3])));
        }
    }

    #[test]
    fn plan_uses_several_sources_and_skips_data_nowhere() {
        let g = g2(8, 8, 4, 4); // 2 x 2 pages
        let mut a = new_bits(&g, false);
        let mut b = new_bits(&g, false);
        set_box(&g, &mut a, &Box3::new([0, 0, 0], [1, 1, 2]), true); // top row
        set_box(&g, &mut b, &Box3::new([0, 1, 0], [1, 2, 1]), true); // bottom-left
        let target = new_bits(&g, false);
        let t = plan(
            &g,
            2,
            &g.all_pages(),
            &[Some(&a), Some(&b), Some(&target)],
            |i| i,
        );
        assert_eq!(
            t,
            vec![
                Transfer {
                    src: 0,
                    pages: Box3::new([0, 0, 0], [1, 1, 2])
                },
                Transfer {
                    src: 1,
                    pages: Box3::new([0, 1, 0], [1, 2, 1])
                },
            ]
        );
        // Ranking prefers the second source where both hold a page.
        set_box(&g, &mut b, &Box3::new([0, 0, 0], [1, 1, 2]), true);
        let t = plan(
            &g,
            2,
            &g.all_pages(),
            &[Some(&a), Some(&b), Some(&target)],
            |i| 10 - i,
        );
        assert_eq!(
            t,
            vec![
                Transfer {
                    src: 1,
                    pages: Box3::new([0, 0, 0], [1, 1, 2])
                },
                Transfer {
                    src: 1,
                    pages: Box3::new([0, 1, 0], [1, 2, 1])
                },
            ]
        );
    }
}
