//! Small device allocations carved out of larger blocks.
//!
//! Some drivers charge a fixed cost per allocation whatever its size
//! (NVIDIA's OpenCL keeps 2 MiB of resident host memory for every
//! coarse-grain SVM allocation), so allocations of at most [`MAX_CLASS`]
//! bytes come from blocks of [`BLOCK`] bytes cut into slots of one size
//! class (a power of two from [`MIN_CLASS`] up). This module only keeps the
//! books: the caller allocates and frees the blocks.

use std::collections::{BTreeMap, BTreeSet};

/// Bytes of one block.
pub const BLOCK: usize = 2 << 20;
/// The smallest slot: a page.
pub const MIN_CLASS: usize = 4096;
/// The largest slot; larger allocations get blocks of their own.
pub const MAX_CLASS: usize = 256 << 10;

/// The slot size for `size` bytes aligned to `align`, if small enough.
/// Blocks are aligned to [`MIN_CLASS`] (drivers may not align them more),
/// so so are the slots, and larger alignments get blocks of their own.
pub fn class_of(size: usize, align: usize) -> Option<usize> {
    if size == 0 || size > MAX_CLASS || align > MIN_CLASS {
        return None;
    }
    Some(size.max(MIN_CLASS).next_power_of_two())
}

struct Block {
    class: usize,
    /// Free slot indices.
    free: Vec<u32>,
}

impl Block {
    fn slots(&self) -> usize {
        BLOCK / self.class
    }
}

/// The blocks of one context, by base address.
#[derive(Default)]
pub struct Slabs {
    blocks: BTreeMap<usize, Block>,
    /// Per class, the blocks with a free slot.
    room: BTreeMap<usize, BTreeSet<usize>>,
}

impl Slabs {
    /// A free slot of `class` bytes, if a block has one.
    pub fn take(&mut self, class: usize) -> Option<usize> {
        let set = self.room.get_mut(&class)?;
        let base = *set.iter().next()?;
        let b = self.blocks.get_mut(&base)?;
        let slot = b.free.pop()?;
        if b.free.is_empty() {
            set.remove(&base);
        }
        Some(base + slot as usize * class)
    }

    /// Adds a new block at `base` (of [`BLOCK`] bytes, aligned to
    /// [`MIN_CLASS`]) for `class` and takes its first slot.
    pub fn add_block(&mut self, base: usize, class: usize) -> usize {
        let n = (BLOCK / class) as u32;
        // Lowest slots first.
        let free: Vec<u32> = (1..n).rev().collect();
        if !free.is_empty() {
            self.room.entry(class).or_default().insert(base);
        }
        self.blocks.insert(base, Block { class, free });
        base
    }

    /// The block holding `ptr`, as (base, block).
    fn block_of(&self, ptr: usize) -> Option<(usize, &Block)> {
        let (&base, b) = self.blocks.range(..=ptr).next_back()?;
        (ptr < base + BLOCK).then_some((base, b))
    }

    /// The class of the slot starting at `ptr`, if one does.
    pub fn slot_class(&self, ptr: usize) -> Option<usize> {
        let (base, b) = self.block_of(ptr)?;
        ((ptr - base) % b.class == 0).then_some(b.class)
    }

    /// Gives back the slot at `ptr`. None when `ptr` starts no slot; else
    /// the base of a block to free now (one left empty while another of
    /// its class has room), or None.
    pub fn give(&mut self, ptr: usize) -> Option<Option<usize>> {
        let (base, class) = match self.block_of(ptr) {
            Some((base, b)) if (ptr - base) % b.class == 0 => (base, b.class),
            _ => return None,
        };
        let slot = ((ptr - base) / class) as u32;
        let b = self.blocks.get_mut(&base)?;
        if b.free.contains(&slot) {
            return None;
        }
        b.free.push(slot);
        let empty = b.free.len() == b.slots();
        let room = self.room.entry(class).or_default();
        room.insert(base);
        if empty && room.len() > 1 {
            room.remove(&base);
            self.blocks.remove(&base);
            return Some(Some(base));
        }
        Some(None)
    }

    /// Takes every block out (the context is going); returns their bases.
    pub fn drain(&mut self) -> Vec<usize> {
        self.room.clear();
        std::mem::take(&mut self.blocks).into_keys().collect()
    }

    /// Blocks held.
    pub fn blocks(&self) -> usize {
        self.blocks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_powers_of_two_within_bounds() {
        assert_eq!(class_of(1, 0), Some(4096));
        assert_eq!(class_of(4096, 0), Some(4096));
        assert_eq!(class_of(4097, 0), Some(8192));
        assert_eq!(class_of(100, 4096), Some(4096));
        assert_eq!(class_of(100, 8192), None);
        assert_eq!(class_of(MAX_CLASS, 0), Some(MAX_CLASS));
        assert_eq!(class_of(MAX_CLASS + 1, 0), None);
        assert_eq!(class_of(0, 0), None);
    }

    #[test]
    fn slots_fill_a_block_then_a_new_one_is_needed() {
        let mut s = Slabs::default();
        let base = 64 * BLOCK;
        assert_eq!(s.take(16384), None);
        assert_eq!(s.add_block(base, 16384), base);
        let mut got = vec![base];
        while let Some(p) = s.take(16384) {
            got.push(p);
        }
        assert_eq!(got.len(), BLOCK / 16384);
        got.sort();
        got.dedup();
        assert_eq!(got.len(), BLOCK / 16384);
        assert!(got
            .iter()
            .all(|p| (p - base) % 16384 == 0 && *p < base + BLOCK));
        // Other classes do not share the block.
        assert_eq!(s.take(4096), None);
    }

    #[test]
    fn slot_class_names_slot_starts_only() {
        let mut s = Slabs::default();
        let base = 32 * BLOCK;
        assert_eq!(s.slot_class(base), None);
        s.add_block(base, 8192);
        assert_eq!(s.slot_class(base), Some(8192));
        assert_eq!(s.slot_class(base + 3 * 8192), Some(8192));
        assert_eq!(s.slot_class(base + 8192 + 4096), None);
        assert_eq!(s.slot_class(base + BLOCK), None);
        assert_eq!(s.slot_class(base - 8192), None);
    }

    #[test]
    fn giving_back_reuses_slots_and_frees_spare_empty_blocks() {
        let mut s = Slabs::default();
        let (a, b) = (8 * BLOCK, 16 * BLOCK);
        let class = MAX_CLASS;
        let n = BLOCK / class;
        let mut first = vec![s.add_block(a, class)];
        for _ in 1..n {
            first.push(s.take(class).unwrap_or(0));
        }
        let second = s.add_block(b, class);
        assert_eq!(s.blocks(), 2);
        // Interior or unknown addresses are no slots.
        assert_eq!(s.give(a + 1), None);
        assert_eq!(s.give(4 * BLOCK), None);
        // A slot comes back and is handed out again (lowest block first).
        assert_eq!(s.give(first[3]), Some(None));
        assert_eq!(s.give(first[3]), None, "given back twice");
        assert_eq!(s.take(class), Some(first[3]));
        // Emptying block b while block a has room frees b.
        assert_eq!(s.give(first[5]), Some(None));
        assert_eq!(s.give(second), Some(Some(b)));
        assert_eq!(s.blocks(), 1);
        assert_eq!(s.drain(), vec![a]);
        assert_eq!(s.blocks(), 0);
    }

    #[test]
    fn the_last_block_of_a_class_stays_when_empty() {
        let mut s = Slabs::default();
        let p = s.add_block(2 * BLOCK, 4096);
        assert_eq!(s.give(p), Some(None));
        assert_eq!(s.blocks(), 1);
        assert_eq!(s.take(4096).map(|q| q >= p), Some(true));
    }
}
