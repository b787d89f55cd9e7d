//! What a planned block may not do on a device, decided from shapes,
//! layouts and the device's limits alone: the one place a block is checked
//! before any GPU call. A pure function of its arguments, so each rule is
//! tested without a GPU, and every block kind passes through it: a kind
//! that forgot a rule would fail here by its shape, not on the GPU, where
//! an invalid command voids the whole submit.

use crate::ir::layout::Layout;
use crate::ir::shape;
use crate::ir::{OpIr, OpKind, TensorId};

use super::{Block, storage_bindings};

/// The largest element index a kernel may form. Kernels index with `u32`,
/// and a loop's counter may step past its bound by up to a workgroup
/// before it is tested: bounds under 2^31 keep every counter from wrapping,
/// so every loop ends, which is what lets kernels compile without wgpu's
/// forced loop bounding (`runtime::Compiler::now`).
pub const MAX_INDEX: u64 = i32::MAX as u64;

/// The device's limits a block is held to.
#[derive(Debug, Clone, Copy)]
pub struct DeviceLimits {
    /// `maxBufferSize`.
    pub max_buffer_size: u64,
    /// `maxStorageBufferBindingSize`.
    pub max_binding_size: u64,
    /// `maxStorageBuffersPerShaderStage`.
    pub max_storage_buffers: usize,
    /// Whether kernels check numerics, binding their checks' flags
    /// (`storage_bindings`).
    pub check_numerics: bool,
}

/// Why a block cannot run, as its failure's kind will say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A buffer it would create is past a size limit.
    Allocation(String),
    /// Its work cannot be indexed with 32 bits.
    IndexRange(String),
    /// It binds more storage buffers than the device allows: the planner
    /// should never make such a block, so this is an internal failure.
    Bindings(String),
}

/// Where one of a block's inputs lies: its shape and layout, `None` while it
/// has no bytes (a failed input: no op that reads it runs).
pub type Placed = Option<(Vec<usize>, Layout)>;

/// Why `block` cannot run on a device of `limits`, if it cannot; `placed`
/// says where each input lies. The size of the buffer it creates first
/// (a view allocates only when it must copy, a reduction's buffer has its
/// output's shape), then the 32-bit index range of every position it visits
/// and every input it reads, then its bindings.
pub fn refusal(
    block: &Block,
    ops: &[OpIr],
    placed: impl Fn(TensorId) -> Placed,
    limits: &DeviceLimits,
) -> Option<Refusal> {
    let aliases = |i: usize| {
        let op = &ops[i];
        let OpKind::View(view) = &op.kind else {
            return false;
        };
        placed(op.inputs[0])
            .is_some_and(|(shape, layout)| layout.view(view, &shape, &op.shape).is_some())
    };
    // What it allocates, and what its kernels visit and read.
    let (allocated, inputs, space): (Option<&[usize]>, Vec<TensorId>, &[usize]) = match block {
        Block::Elementwise(b) => (Some(&b.shape), b.inputs.clone(), &b.shape),
        Block::Matmul { op, epilogue: b } | Block::RowReduction { op, epilogue: b } => (
            Some(&b.shape),
            ops[*op].inputs.iter().chain(&b.inputs).copied().collect(),
            &b.shape,
        ),
        Block::Reduction {
            op,
            prologue: Some(p),
        } => (Some(&ops[*op].shape), p.inputs.clone(), &p.shape),
        Block::View(i) if aliases(*i) => return None,
        Block::Commit(_) | Block::Guard(_) => return None,
        Block::Reduction { op: i, .. }
        | Block::Upload(i)
        | Block::View(i)
        | Block::Copy(i)
        | Block::Cat(i) => (Some(&ops[*i].shape), ops[*i].inputs.clone(), &ops[*i].shape),
    };
    if let Some(shape) = allocated {
        let bytes = shape::bytes(shape);
        if bytes > limits.max_buffer_size {
            return Some(Refusal::Allocation(format!(
                "{bytes} bytes exceeds maxBufferSize ({})",
                limits.max_buffer_size
            )));
        }
        if bytes > limits.max_binding_size {
            return Some(Refusal::Allocation(format!(
                "{bytes} bytes exceeds maxStorageBufferBindingSize ({})",
                limits.max_binding_size
            )));
        }
    }
    let too_many = |what: String, n: u64| {
        Refusal::IndexRange(format!(
            "{what} spans {n} elements; kernels index with 32 bits, at most {MAX_INDEX}"
        ))
    };
    let positions = shape::bytes(space) / 4;
    if positions > MAX_INDEX {
        return Some(too_many(
            format!("its output {}", shape::display(space)),
            positions,
        ));
    }
    for t in inputs {
        let Some((shape, layout)) = placed(t) else {
            continue;
        };
        let count = shape::bytes(&shape) / 4;
        let reach = extent(&shape, &layout);
        if count > MAX_INDEX || reach > MAX_INDEX {
            let what = format!("its input {t} {}", shape::display(&shape));
            return Some(too_many(what, count.max(reach)));
        }
    }
    let bindings = storage_bindings(block, ops, limits.check_numerics);
    (bindings > limits.max_storage_buffers).then(|| {
        Refusal::Bindings(format!(
            "the planner made a kernel binding {bindings} storage buffers; the device allows {}",
            limits.max_storage_buffers
        ))
    })
}

/// The highest element index (plus one) a read of `shape` through `layout`
/// touches, in 64 bits: its offset plus each dim's last step.
fn extent(shape: &[usize], layout: &Layout) -> u64 {
    if shape.contains(&0) {
        return 0;
    }
    shape
        .iter()
        .zip(&layout.strides)
        .fold(layout.offset as u64 + 1, |acc, (&d, &s)| {
            acc.saturating_add((d as u64 - 1).saturating_mul(s as u64))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::ElementwiseBlock;
    use crate::ir::{ReduceOp, UnaryOp, ViewOp};

    const LIMITS: DeviceLimits = DeviceLimits {
        max_buffer_size: 1 << 28,
        max_binding_size: 1 << 27,
        max_storage_buffers: 8,
        check_numerics: false,
    };

    fn exp_of(input: u64, shape: &[usize]) -> (Block, Vec<OpIr>) {
        let ops = vec![OpIr::of(OpKind::Unary(UnaryOp::Exp), &[input], 9, shape)];
        let block = Block::Elementwise(ElementwiseBlock {
            ops: vec![0],
            inputs: vec![TensorId(input)],
            outputs: vec![TensorId(9)],
            shape: shape.to_vec(),
        });
        (block, ops)
    }

    fn row_major(shape: &[usize]) -> Placed {
        Some((shape.to_vec(), Layout::contiguous(shape)))
    }

    #[test]
    fn a_buffer_past_max_buffer_size_is_an_allocation_refusal_naming_the_limit() {
        let shape = [1 << 15, 1 << 14];
        let (block, ops) = exp_of(1, &shape);
        let refused = refusal(&block, &ops, |_| row_major(&shape), &LIMITS);
        assert_eq!(
            refused,
            Some(Refusal::Allocation(
                "2147483648 bytes exceeds maxBufferSize (268435456)".into()
            ))
        );
    }

    #[test]
    fn a_buffer_within_max_buffer_size_but_past_the_binding_size_is_refused_too() {
        let shape = [1 << 26];
        let (block, ops) = exp_of(1, &shape);
        let refused = refusal(&block, &ops, |_| row_major(&shape), &LIMITS);
        assert!(
            matches!(&refused, Some(Refusal::Allocation(m)) if m.contains("maxStorageBufferBindingSize")),
            "{refused:?}"
        );
    }

    /// A sum of `exp` of a broadcast scalar over `big`: its buffer is one
    /// float, the positions its prologue visits are all of `big`.
    fn sum_of_broadcast(big: [usize; 2]) -> (Block, Vec<OpIr>, Placed) {
        let ops = vec![
            OpIr::of(OpKind::View(ViewOp::Broadcast), &[1], 2, &big),
            OpIr::of(OpKind::Unary(UnaryOp::Exp), &[2], 3, &big),
            OpIr::of(
                OpKind::Reduce {
                    op: ReduceOp::Sum,
                    axes: vec![0, 1],
                },
                &[3],
                4,
                &[],
            ),
        ];
        let block = Block::Reduction {
            op: 2,
            prologue: Some(ElementwiseBlock {
                ops: vec![1],
                inputs: vec![TensorId(2)],
                outputs: vec![],
                shape: big.to_vec(),
            }),
        };
        let broadcast = Some((
            big.to_vec(),
            Layout {
                offset: 0,
                strides: vec![0, 0],
            },
        ));
        (block, ops, broadcast)
    }

    #[test]
    fn a_small_sum_over_a_broadcast_of_two_to_the_32_elements_is_an_index_range_refusal() {
        let (block, ops, broadcast) = sum_of_broadcast([1 << 16, 1 << 16]);
        let refused = refusal(&block, &ops, |_| broadcast.clone(), &LIMITS);
        assert!(
            matches!(&refused, Some(Refusal::IndexRange(m)) if m.starts_with("its output [65536,65536] spans 4294967296")),
            "{refused:?}"
        );
    }

    #[test]
    fn work_of_two_to_the_31_positions_is_refused_so_no_loop_counter_can_wrap() {
        // Its loops would count to 2^31 and step by up to a workgroup: a
        // counter that high could wrap and never end.
        let (block, ops, broadcast) = sum_of_broadcast([1 << 15, 1 << 16]);
        let refused = refusal(&block, &ops, |_| broadcast.clone(), &LIMITS);
        assert!(
            matches!(&refused, Some(Refusal::IndexRange(m)) if m.contains("spans 2147483648 elements")),
            "{refused:?}"
        );
        let (block, ops, broadcast) = sum_of_broadcast([1 << 15, (1 << 16) - 1]);
        assert_eq!(refusal(&block, &ops, |_| broadcast.clone(), &LIMITS), None);
    }

    #[test]
    fn an_input_whose_layout_reaches_past_element_two_to_the_32_is_an_index_range_refusal() {
        // Four elements, a stride of 2^31: the last one sits past u32.
        let (block, ops) = exp_of(1, &[4]);
        let strided = Some((
            vec![4],
            Layout {
                offset: 0,
                strides: vec![1 << 31],
            },
        ));
        let refused = refusal(&block, &ops, |_| strided.clone(), &LIMITS);
        assert!(
            matches!(&refused, Some(Refusal::IndexRange(m)) if m.starts_with("its input tensor #1 [4]")),
            "{refused:?}"
        );
    }

    #[test]
    fn a_view_that_aliases_allocates_nothing_and_one_that_copies_is_held_to_the_limits() {
        let big = [1 << 15, 1 << 14];
        let ops = vec![OpIr::of(OpKind::View(ViewOp::Reshape), &[1], 2, &[1 << 29])];
        let block = Block::View(0);
        // Row-major input: the reshape aliases it.
        assert_eq!(refusal(&block, &ops, |_| row_major(&big), &LIMITS), None);
        // Transposed input: the reshape copies into a buffer past the limit.
        let transposed = Some((
            big.to_vec(),
            Layout {
                offset: 0,
                strides: vec![1, 1 << 15],
            },
        ));
        assert!(matches!(
            refusal(&block, &ops, |_| transposed.clone(), &LIMITS),
            Some(Refusal::Allocation(_))
        ));
    }

    #[test]
    fn a_block_binding_more_buffers_than_the_device_allows_is_refused_as_bindings() {
        // Nine inputs and one output bind ten storage buffers.
        let ops = vec![OpIr::of(OpKind::Unary(UnaryOp::Exp), &[1], 20, &[4])];
        let block = Block::Elementwise(ElementwiseBlock {
            ops: vec![0],
            inputs: (1..=9).map(TensorId).collect(),
            outputs: vec![TensorId(20)],
            shape: vec![4],
        });
        let refused = refusal(&block, &ops, |_| row_major(&[4]), &LIMITS);
        assert!(
            matches!(&refused, Some(Refusal::Bindings(m)) if m.contains("binding 10 storage buffers")),
            "{refused:?}"
        );
    }

    #[test]
    fn commits_and_guards_are_aliases_and_never_refused() {
        let shape = [1 << 15, 1 << 14];
        let ops = vec![OpIr::of(OpKind::Guard, &[1, 2], 3, &shape)];
        assert_eq!(
            refusal(&Block::Guard(0), &ops, |_| row_major(&shape), &LIMITS),
            None
        );
    }
}
