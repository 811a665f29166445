//! A buffer's page maps, one per place (the host, then each device
//! allocation), with a summary of the places known to hold every page and
//! those known to hold none, so that the common access (all its pages
//! current where it runs, nowhere else to clear) reads no map.

use super::pages::{self, Box3, Geometry, PageBits};

/// Places past this many have no summary bits: their maps are always read.
const SUMMED: usize = u64::BITS as usize;

/// The page maps of a buffer's places.
#[derive(Clone, Debug)]
pub struct PageMaps {
    maps: Vec<PageBits>,
    /// Bit `i` set: every page is current at place `i`. Clear: unknown.
    whole: u64,
    /// Bit `i` set: no page is current at place `i`. Clear: unknown.
    empty: u64,
}

fn bit(place: usize) -> u64 {
    if place < SUMMED {
        1 << place
    } else {
        0
    }
}

impl PageMaps {
    /// The maps of a buffer with one place (the host), no page current.
    pub fn new(g: &Geometry) -> PageMaps {
        PageMaps {
            maps: vec![pages::new_bits(g, false)],
            whole: 0,
            empty: bit(0),
        }
    }

    /// Adds a place where no page is current; returns its index.
    pub fn push(&mut self, g: &Geometry) -> usize {
        self.maps.push(pages::new_bits(g, false));
        let i = self.maps.len() - 1;
        self.empty |= bit(i);
        self.whole &= !bit(i);
        i
    }

    pub fn len(&self) -> usize {
        self.maps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }

    /// The map of one place (panics past `len`, like a slice).
    pub fn map(&self, place: usize) -> &PageBits {
        &self.maps[place]
    }

    /// Every place's map, in place order.
    pub fn all(&self) -> &[PageBits] {
        &self.maps
    }

    /// Marks every page of `place` current (or not).
    pub fn fill(&mut self, place: usize, value: bool) {
        self.maps[place].fill(value);
        if value {
            self.whole |= bit(place);
            self.empty &= !bit(place);
        } else {
            self.empty |= bit(place);
            self.whole &= !bit(place);
        }
    }

    /// Marks the pages of `b` at `place` current (or not).
    pub fn set_box(&mut self, g: &Geometry, place: usize, b: &Box3, value: bool) {
        let m = bit(place);
        if b.is_empty() || (value && self.whole & m != 0) || (!value && self.empty & m != 0) {
            return;
        }
        pages::set_box(g, &mut self.maps[place], b, value);
        let everything = b.contains(&g.all_pages());
        if value {
            self.empty &= !m;
            if everything {
                self.whole |= m;
            }
        } else {
            self.whole &= !m;
            if everything {
                self.empty |= m;
            }
        }
    }

    /// Makes the pages of `b` current at `place` alone (a write there).
    pub fn write_box(&mut self, g: &Geometry, place: usize, b: &Box3) {
        for i in 0..self.maps.len() {
            self.set_box(g, i, b, i == place);
        }
    }

    /// Whether every page of `b` is current at `place`.
    pub fn all_set(&self, g: &Geometry, place: usize, b: &Box3) -> bool {
        self.whole & bit(place) != 0 || pages::all_set(g, &self.maps[place], b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geom(pages: usize) -> Geometry {
        Geometry::new(4, [1, 1, pages * 16], [1, 1, 16]).expect("geometry")
    }

    fn b(lo: usize, hi: usize) -> Box3 {
        Box3::new([0, 0, lo], [1, 1, hi])
    }

    /// Every page of every place, read from the maps themselves.
    fn bits(m: &PageMaps, g: &Geometry) -> Vec<Vec<bool>> {
        (0..m.len())
            .map(|i| (0..g.page_count()).map(|p| m.map(i)[p]).collect())
            .collect()
    }

    #[test]
    fn summaries_follow_the_maps() {
        let g = geom(4);
        let mut m = PageMaps::new(&g);
        assert_eq!(m.push(&g), 1);
        assert!(!m.all_set(&g, 0, &b(0, 1)));
        m.fill(0, true);
        assert!(m.all_set(&g, 0, &b(0, 4)));
        m.write_box(&g, 1, &b(1, 3));
        assert_eq!(
            bits(&m, &g),
            vec![
                vec![true, false, false, true],
                vec![false, true, true, false]
            ]
        );
        assert!(m.all_set(&g, 1, &b(1, 3)));
        assert!(!m.all_set(&g, 1, &b(0, 3)));
        m.write_box(&g, 1, &g.all_pages());
        assert_eq!(bits(&m, &g), vec![vec![false; 4], vec![true; 4]]);
        assert_eq!((m.whole, m.empty), (0b10, 0b01));
        // Known whole or empty: nothing changes, and the answer stays.
        m.write_box(&g, 1, &b(2, 3));
        assert_eq!(bits(&m, &g), vec![vec![false; 4], vec![true; 4]]);
        m.set_box(&g, 0, &b(0, 1), true);
        assert_eq!((m.whole, m.empty), (0b10, 0b00));
        assert!(m.all_set(&g, 0, &b(0, 1)) && !m.all_set(&g, 0, &b(0, 2)));
    }

    /// Seeded random operations against maps with no summary: the answers
    /// and the bits always agree.
    #[test]
    fn random_operations_match_plain_maps() {
        let g = geom(5);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for _ in 0..200 {
            let mut m = PageMaps::new(&g);
            let mut plain = vec![pages::new_bits(&g, false)];
            for _ in 0..1 + next(3) {
                m.push(&g);
                plain.push(pages::new_bits(&g, false));
            }
            for _ in 0..60 {
                let lo = next(5);
                let hi = lo + 1 + next(5 - lo);
                let bx = b(lo, hi);
                let place = next(m.len());
                match next(4) {
                    0 => {
                        let v = next(2) == 0;
                        m.fill(place, v);
                        plain[place].fill(v);
                    }
                    1 => {
                        let v = next(2) == 0;
                        m.set_box(&g, place, &bx, v);
                        pages::set_box(&g, &mut plain[place], &bx, v);
                    }
                    _ => {
                        m.write_box(&g, place, &bx);
                        for (i, p) in plain.iter_mut().enumerate() {
                            pages::set_box(&g, p, &bx, i == place);
                        }
                    }
                }
                for (i, p) in plain.iter().enumerate() {
                    assert_eq!(m.map(i), p);
                    assert_eq!(m.all_set(&g, i, &bx), pages::all_set(&g, p, &bx));
                }
            }
        }
    }
}
