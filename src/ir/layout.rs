//! Where a tensor's elements sit in its buffer: an offset and a stride per
//! dim, in elements. Every kernel loads its inputs through a layout, which is
//! what lets a view (transpose, slice, broadcast, ...) cost nothing.

use crate::ir::ViewOp;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    pub offset: usize,
    pub strides: Vec<usize>,
}

impl Layout {
    /// Row-major, starting at element 0: how every kernel writes.
    pub fn contiguous(shape: &[usize]) -> Layout {
        let mut strides = vec![0; shape.len()];
        let mut stride = 1;
        for d in (0..shape.len()).rev() {
            strides[d] = stride;
            stride *= shape[d];
        }
        Layout { offset: 0, strides }
    }

    /// Whether the elements are in row-major order without gaps (dims of
    /// size 1 may have any stride), so the bytes can be read as they lie.
    pub fn is_contiguous(&self, shape: &[usize]) -> bool {
        let mut expected = 1;
        for d in (0..shape.len()).rev() {
            if shape[d] != 1 && self.strides[d] != expected {
                return false;
            }
            expected *= shape[d];
        }
        true
    }

    /// The strides to read this tensor (of `shape`) at the positions of
    /// `out`, which `shape` broadcasts to: 0 along every broadcast dim.
    pub fn strides_for(&self, shape: &[usize], out: &[usize]) -> Vec<usize> {
        let mut strides = vec![0; out.len()];
        for i in 0..shape.len() {
            let d = shape.len() - 1 - i;
            if shape[d] != 1 {
                strides[out.len() - 1 - i] = self.strides[d];
            }
        }
        strides
    }

    /// The layout of `view` applied to a tensor of `shape` with this layout,
    /// giving `out_shape`; `None` when the view cannot alias the memory (a
    /// reshape of a non-contiguous tensor), and the tensor must be copied.
    pub fn view(&self, view: &ViewOp, shape: &[usize], out_shape: &[usize]) -> Option<Layout> {
        let offset = self.offset;
        let strides = match view {
            ViewOp::Transpose(perm) => perm.iter().map(|&p| self.strides[p]).collect(),
            ViewOp::Slice(begin) => {
                let shift: usize = begin.iter().zip(&self.strides).map(|(b, s)| b * s).sum();
                return Some(Layout {
                    offset: offset + shift,
                    strides: self.strides.clone(),
                });
            }
            ViewOp::Broadcast => self.strides_for(shape, out_shape),
            ViewOp::Reshape => {
                if !self.is_contiguous(shape) {
                    return None;
                }
                Layout::contiguous(out_shape).strides
            }
            ViewOp::ExpandDims(axis) => {
                let mut strides = self.strides.clone();
                strides.insert(*axis, 0);
                strides
            }
            ViewOp::Squeeze(axes) => self
                .strides
                .iter()
                .enumerate()
                .filter(|(d, _)| !axes.contains(d))
                .map(|(_, &s)| s)
                .collect(),
        };
        Some(Layout { offset, strides })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transpose_permutes_the_strides_and_copies_nothing() {
        let layout = Layout::contiguous(&[2, 3]);
        let t = layout
            .view(&ViewOp::Transpose(vec![1, 0]), &[2, 3], &[3, 2])
            .unwrap();
        assert_eq!(
            t,
            Layout {
                offset: 0,
                strides: vec![1, 3]
            }
        );
        assert!(!t.is_contiguous(&[3, 2]));
    }

    #[test]
    fn a_slice_moves_the_offset() {
        let layout = Layout::contiguous(&[4, 5]);
        let s = layout
            .view(&ViewOp::Slice(vec![1, 2]), &[4, 5], &[2, 2])
            .unwrap();
        assert_eq!(
            s,
            Layout {
                offset: 7,
                strides: vec![5, 1]
            }
        );
    }

    #[test]
    fn a_reshape_of_a_transposed_tensor_needs_a_copy() {
        let t = Layout {
            offset: 0,
            strides: vec![1, 3],
        };
        assert_eq!(t.view(&ViewOp::Reshape, &[3, 2], &[6]), None);
        let c = Layout::contiguous(&[3, 2]);
        assert_eq!(
            c.view(&ViewOp::Reshape, &[3, 2], &[6]),
            Some(Layout::contiguous(&[6]))
        );
    }

    #[test]
    fn dims_of_size_one_do_not_break_contiguity() {
        let layout = Layout {
            offset: 0,
            strides: vec![0, 3, 1],
        };
        assert!(layout.is_contiguous(&[1, 2, 3]));
    }
}
