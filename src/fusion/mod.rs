//! The planner: turns a flushed queue into blocks, each one kernel launch (or
//! one host upload).
//!
//! Invariants kept here, which codegen and the runtime rely on:
//! - Every block's inputs were written by an earlier block of this flush or
//!   by an earlier flush: blocks keep queue order, except that an op met
//!   while a group is open runs right after that group, and nothing that
//!   reads it may join the group.
//! - Every op of an elementwise block has the block's shape, so each op's
//!   value at an output position is computed from the same position; inputs
//!   from outside the block are loaded through broadcast index maps.
//! - A tensor produced inside a block is written to memory only when a live
//!   handle holds it or an op outside the block reads it: fused
//!   intermediates nobody can observe never touch memory.
//! - A block binds at most `max_storage_buffers` storage buffers (inputs plus
//!   outputs), so it always fits the device's `maxStorageBuffersPerShaderStage`.
//! - An op nobody can observe (no handle, no live consumer) is not run at all.

use std::collections::{HashMap, HashSet};

use crate::ir::{OpIr, TensorId};

#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Elementwise ops fused into one kernel.
    Elementwise(ElementwiseBlock),
    /// One op that is not elementwise: a host upload, a view (no kernel), a
    /// reduction, a matmul or a cat (kernels of their own).
    Single(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ElementwiseBlock {
    /// Indices into the flushed ops, in execution order.
    pub ops: Vec<usize>,
    /// Tensors read from memory, in binding order.
    pub inputs: Vec<TensorId>,
    /// Tensors written to memory, in binding order.
    pub outputs: Vec<TensorId>,
    pub shape: Vec<usize>,
}

/// Plans `ops` (one flush, in registration order). `held` says whether a live
/// handle still refers to a tensor.
pub fn plan(
    ops: &[OpIr],
    held: impl Fn(TensorId) -> bool,
    max_storage_buffers: usize,
) -> Vec<Block> {
    let consumers = consumers(ops);
    let live = liveness(ops, &consumers, &held);
    let mut blocks = Vec::new();
    let mut group: Option<ElementwiseBlock> = None;
    // Ops that are not elementwise, met while a group was open. They run
    // right after the group (they may read what it writes), so an op reading
    // one of their outputs cannot join the group.
    let mut pending: Vec<usize> = Vec::new();

    for (i, op) in ops.iter().enumerate() {
        if !live[i] {
            continue;
        }
        if !op.kind.is_elementwise() {
            if group.is_some() {
                pending.push(i);
            } else {
                blocks.push(Block::Single(i));
            }
            continue;
        }
        let joined = group.as_mut().is_some_and(|g| {
            g.shape == op.shape
                && !op
                    .inputs
                    .iter()
                    .any(|t| pending.iter().any(|&p| ops[p].output == *t))
                && {
                    let mut trial = g.ops.clone();
                    trial.push(i);
                    bindings(ops, &trial, &consumers, &live, &held) <= max_storage_buffers
                }
        });
        if joined {
            if let Some(g) = group.as_mut() {
                g.ops.push(i);
            }
        } else {
            if let Some(done) = group.take() {
                blocks.push(Block::Elementwise(finish(
                    ops, done, &consumers, &live, &held,
                )));
            }
            blocks.extend(pending.drain(..).map(Block::Single));
            group = Some(ElementwiseBlock {
                ops: vec![i],
                inputs: Vec::new(),
                outputs: Vec::new(),
                shape: op.shape.clone(),
            });
        }
    }
    if let Some(done) = group.take() {
        blocks.push(Block::Elementwise(finish(
            ops, done, &consumers, &live, &held,
        )));
    }
    blocks.extend(pending.drain(..).map(Block::Single));
    blocks
}

/// For each tensor, the ops (by index) that read it.
fn consumers(ops: &[OpIr]) -> HashMap<TensorId, Vec<usize>> {
    let mut map: HashMap<TensorId, Vec<usize>> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        for &input in &op.inputs {
            map.entry(input).or_default().push(i);
        }
    }
    map
}

/// Whether each op's output can be observed: held by a handle, or read by a
/// live op. Decided back to front, since consumers come after producers.
fn liveness(
    ops: &[OpIr],
    consumers: &HashMap<TensorId, Vec<usize>>,
    held: &impl Fn(TensorId) -> bool,
) -> Vec<bool> {
    let mut live = vec![false; ops.len()];
    for i in (0..ops.len()).rev() {
        let out = ops[i].output;
        live[i] = held(out)
            || consumers
                .get(&out)
                .is_some_and(|c| c.iter().any(|&j| live[j]));
    }
    live
}

/// Which of `group`'s outputs must be written: held, or read by a live op
/// outside the group.
fn written(
    ops: &[OpIr],
    group: &[usize],
    consumers: &HashMap<TensorId, Vec<usize>>,
    live: &[bool],
    held: &impl Fn(TensorId) -> bool,
) -> Vec<TensorId> {
    group
        .iter()
        .map(|&i| ops[i].output)
        .filter(|&t| {
            held(t)
                || consumers
                    .get(&t)
                    .is_some_and(|c| c.iter().any(|&j| live[j] && !group.contains(&j)))
        })
        .collect()
}

/// Tensors `group` reads that it does not produce, first use first.
fn external_inputs(ops: &[OpIr], group: &[usize]) -> Vec<TensorId> {
    let produced: HashSet<TensorId> = group.iter().map(|&i| ops[i].output).collect();
    let mut inputs = Vec::new();
    for &i in group {
        for &t in &ops[i].inputs {
            if !produced.contains(&t) && !inputs.contains(&t) {
                inputs.push(t);
            }
        }
    }
    inputs
}

/// Storage buffers `group` would bind. Counts as written every output some op
/// not yet in the group reads, which only over-counts: an op that joins later
/// can only take outputs away.
fn bindings(
    ops: &[OpIr],
    group: &[usize],
    consumers: &HashMap<TensorId, Vec<usize>>,
    live: &[bool],
    held: &impl Fn(TensorId) -> bool,
) -> usize {
    external_inputs(ops, group).len() + written(ops, group, consumers, live, held).len()
}

fn finish(
    ops: &[OpIr],
    mut group: ElementwiseBlock,
    consumers: &HashMap<TensorId, Vec<usize>>,
    live: &[bool],
    held: &impl Fn(TensorId) -> bool,
) -> ElementwiseBlock {
    group.inputs = external_inputs(ops, &group.ops);
    group.outputs = written(ops, &group.ops, consumers, live, held);
    group
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{BinaryOp, OpKind, UnaryOp};

    fn op(kind: OpKind, inputs: &[u64], output: u64, shape: &[usize]) -> OpIr {
        OpIr {
            kind,
            inputs: inputs.iter().map(|&i| TensorId(i)).collect(),
            output: TensorId(output),
            shape: shape.to_vec(),
        }
    }

    fn upload(output: u64, shape: &[usize]) -> OpIr {
        op(
            OpKind::Upload(vec![0.0; shape.iter().product()].into()),
            &[],
            output,
            shape,
        )
    }

    #[test]
    fn a_chain_of_elementwise_ops_is_one_block_writing_only_the_held_result() {
        let mut ops = vec![upload(1, &[4])];
        for k in 0..16 {
            ops.push(op(OpKind::Unary(UnaryOp::Exp), &[1 + k], 2 + k, &[4]));
        }
        let blocks = plan(&ops, |t| t == TensorId(1) || t == TensorId(17), 8);
        assert_eq!(blocks.len(), 2, "{blocks:?}");
        let Block::Elementwise(block) = &blocks[1] else {
            panic!("{blocks:?}")
        };
        assert_eq!(block.ops.len(), 16);
        assert_eq!(block.inputs, vec![TensorId(1)]);
        assert_eq!(block.outputs, vec![TensorId(17)]);
    }

    #[test]
    fn a_held_intermediate_is_an_extra_output_of_the_same_block() {
        let ops = vec![
            upload(1, &[4]),
            op(OpKind::Unary(UnaryOp::Exp), &[1], 2, &[4]),
            op(OpKind::Unary(UnaryOp::Tanh), &[2], 3, &[4]),
        ];
        let blocks = plan(&ops, |_| true, 8);
        let Block::Elementwise(block) = &blocks[1] else {
            panic!("{blocks:?}")
        };
        assert_eq!(block.outputs, vec![TensorId(2), TensorId(3)]);
    }

    #[test]
    fn an_op_nobody_can_observe_is_not_planned() {
        let ops = vec![
            upload(1, &[4]),
            op(OpKind::Unary(UnaryOp::Exp), &[1], 2, &[4]),
            op(OpKind::Unary(UnaryOp::Tanh), &[1], 3, &[4]),
        ];
        let blocks = plan(&ops, |t| t != TensorId(2), 8);
        let Block::Elementwise(block) = &blocks[1] else {
            panic!("{blocks:?}")
        };
        assert_eq!(block.ops, vec![2]);
    }

    #[test]
    fn a_group_is_split_before_it_binds_more_buffers_than_the_device_allows() {
        // Ten inputs summed: a single kernel would bind 11 storage buffers.
        let mut ops: Vec<OpIr> = (1..=10).map(|i| upload(i, &[4])).collect();
        ops.push(op(OpKind::Binary(BinaryOp::Add), &[1, 2], 11, &[4]));
        for k in 3..=10 {
            ops.push(op(OpKind::Binary(BinaryOp::Add), &[k + 8, k], k + 9, &[4]));
        }
        let last = TensorId(19);
        let blocks = plan(&ops, |t| t == last || t.0 <= 10, 8);
        let kernels: Vec<&ElementwiseBlock> = blocks
            .iter()
            .filter_map(|b| match b {
                Block::Elementwise(e) => Some(e),
                _ => None,
            })
            .collect();
        assert!(kernels.len() >= 2, "{kernels:?}");
        for k in &kernels {
            assert!(k.inputs.len() + k.outputs.len() <= 8, "{k:?}");
        }
        assert_eq!(kernels.iter().map(|k| k.ops.len()).sum::<usize>(), 9);
    }

    #[test]
    fn ops_of_different_shapes_are_separate_blocks() {
        let ops = vec![
            upload(1, &[3]),
            upload(2, &[2, 3]),
            op(
                OpKind::BinaryScalar {
                    op: BinaryOp::Mul,
                    scalar: 2.0,
                    scalar_first: false,
                },
                &[1],
                3,
                &[3],
            ),
            op(OpKind::Binary(BinaryOp::Add), &[3, 2], 4, &[2, 3]),
        ];
        let blocks = plan(&ops, |t| t == TensorId(4), 8);
        assert_eq!(
            blocks
                .iter()
                .filter(|b| matches!(b, Block::Elementwise(_)))
                .count(),
            2
        );
    }
}
