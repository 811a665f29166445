//! The bytes a ranged accessor's window spans in its buffer, for devices
//! that cannot point a kernel into the middle of a memory object (no USM,
//! and a window that does not start at the device's sub-buffer alignment):
//! such a window is staged through scratch memory holding its rows or
//! slices whole, and
//! what the kernel writes is copied back as a rectangle, so that bytes
//! between the window's rows are left alone.

use super::pages::Geometry;

/// A window's span and the rectangle it copies back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Byte offset of the window's first element in the buffer.
    pub offset: usize,
    /// Bytes from the first element to the end of the last one.
    pub span: usize,
    /// Where the window's first element lies in the buffer: (bytes into
    /// its row, row, slice), as rectangle copies take origins.
    pub origin: [usize; 3],
    /// The window as a rectangle: (bytes per row, rows, slices).
    pub region: [usize; 3],
    /// The buffer's row and slice pitches in bytes; the scratch memory
    /// uses the same ones, starting at the window's first element.
    pub row_pitch: usize,
    pub slice_pitch: usize,
}

impl Window {
    /// The window of `range` elements at `offset` (three dimensions, the
    /// last contiguous) of a buffer of geometry `g`; None for an empty
    /// range.
    pub fn of(g: &Geometry, offset: [usize; 3], range: [usize; 3]) -> Option<Window> {
        if range.contains(&0) {
            return None;
        }
        let row_pitch = g.range[2] * g.elem;
        let slice_pitch = row_pitch * g.range[1];
        let first = g.byte_offset(offset);
        let last = g.byte_offset([
            offset[0] + range[0] - 1,
            offset[1] + range[1] - 1,
            offset[2] + range[2] - 1,
        ]);
        Some(Window {
            offset: first,
            span: last + g.elem - first,
            origin: [offset[2] * g.elem, offset[1], offset[0]],
            region: [range[2] * g.elem, range[1], range[0]],
            row_pitch,
            slice_pitch,
        })
    }

    /// Whether the window's rows are one contiguous run of bytes.
    pub fn contiguous(&self) -> bool {
        self.span == self.region[0] * self.region[1] * self.region[2]
    }

    /// The slice pitch of the scratch side of the copy back: the buffer's,
    /// or for a window of one slice the least a rectangle copy accepts
    /// (its rows), which no address of the copy uses.
    pub fn scratch_slice_pitch(&self) -> usize {
        if self.region[2] == 1 {
            self.region[1] * self.row_pitch
        } else {
            self.slice_pitch
        }
    }

    /// Bytes of scratch memory: the span, rounded up to whole slices of
    /// the scratch side. NVIDIA's driver refuses a rectangle copy whose
    /// source holds less than its slices times its slice pitch, though
    /// the last slice's last row ends earlier.
    pub fn scratch_bytes(&self) -> usize {
        if self.contiguous() {
            self.span
        } else {
            self.region[2] * self.scratch_slice_pitch()
        }
    }
}

/// Whether a kernel on a device without USM needs the window at byte
/// `offset` staged: memory objects can be viewed only from multiples of
/// the device's base address alignment (`align`, in bytes) on.
pub fn needs_staging(offset: usize, align: usize) -> bool {
    offset != 0 && (align == 0 || offset % align != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geom(range: [usize; 3], elem: usize) -> Geometry {
        Geometry::new(elem, range, range).expect("geometry")
    }

    #[test]
    fn a_1d_window_is_one_run() -> Result<(), &'static str> {
        let g = geom([1, 1, 100], 4);
        let w = Window::of(&g, [0, 0, 3], [1, 1, 10]).ok_or("empty")?;
        assert_eq!(w.offset, 12);
        assert_eq!(w.span, 40);
        assert_eq!(w.origin, [12, 0, 0]);
        assert_eq!(w.region, [40, 1, 1]);
        assert!(w.contiguous());
        assert_eq!(w.scratch_bytes(), 40);
        assert!(needs_staging(12, 128));
        assert!(!needs_staging(256, 128));
        assert!(!needs_staging(0, 128));
        assert_eq!(Window::of(&g, [0, 0, 3], [1, 1, 0]), None);
        Ok(())
    }

    #[test]
    fn a_2d_window_spans_its_rows_and_copies_back_a_rectangle() -> Result<(), &'static str> {
        // 8 rows of 16 floats; rows 5..7, columns 2..6.
        let g = geom([1, 8, 16], 4);
        let w = Window::of(&g, [0, 5, 2], [1, 2, 4]).ok_or("empty")?;
        assert_eq!(w.offset, (5 * 16 + 2) * 4);
        // From (5, 2) to the end of (6, 5).
        assert_eq!(w.span, ((6 * 16 + 5) - (5 * 16 + 2) + 1) * 4);
        assert_eq!(w.origin, [8, 5, 0]);
        assert_eq!(w.region, [16, 2, 1]);
        assert_eq!(w.row_pitch, 64);
        assert!(!w.contiguous());
        // The scratch holds the two rows whole, with a slice of two rows.
        assert_eq!(w.scratch_slice_pitch(), 2 * 64);
        assert_eq!(w.scratch_bytes(), 2 * 64);
        assert!(w.scratch_bytes() >= w.span);
        // Whole rows are contiguous again.
        assert!(Window::of(&g, [0, 5, 0], [1, 2, 16])
            .ok_or("empty")?
            .contiguous());
        Ok(())
    }

    #[test]
    fn a_3d_box_ends_at_its_span_and_its_scratch_holds_whole_slices() -> Result<(), &'static str> {
        let g = geom([5, 6, 7], 2);
        let w = Window::of(&g, [1, 2, 3], [2, 3, 4]).ok_or("empty")?;
        assert_eq!(w.offset, ((6 + 2) * 7 + 3) * 2);
        assert_eq!(w.origin, [6, 2, 1]);
        assert_eq!(w.region, [8, 3, 2]);
        assert_eq!(w.slice_pitch, 6 * 7 * 2);
        // The rectangle's last byte, from the window's start with the
        // buffer's pitches, is the span's last byte.
        let last =
            (w.region[2] - 1) * w.slice_pitch + (w.region[1] - 1) * w.row_pitch + w.region[0];
        assert_eq!(last, w.span);
        // The scratch holds two whole slices with the buffer's pitch.
        assert_eq!(w.scratch_slice_pitch(), w.slice_pitch);
        assert_eq!(w.scratch_bytes(), 2 * 6 * 7 * 2);
        Ok(())
    }
}
