//! Expressions: held tensors whose bytes nobody has needed yet.
//!
//! A handle keeps a tensor alive, but only a read, or a kernel that cannot
//! compute the value itself, needs its bytes. In JS a handle lives until
//! `dispose()` or the garbage collector, so code that keeps intermediates in
//! variables holds nearly everything it computes; writing all of it would
//! undo the fusion. So a held tensor computed by an elementwise op and not
//! written by its flush stays an *expression*: its record keeps the op
//! (`State::Expr`), which holds the op's inputs as a queued op does. A later
//! flush that reads it runs that op again, prepended to the queue, and the
//! planner computes it inline, fused with whatever reads it.
//!
//! A block run on the host (`runtime::host`) keeps none: every held value
//! it computes becomes a host value, since it computed them anyway.
//!
//! What is written: a tensor a read asks for (`data()`, `array()`, `to()`),
//! one that an op the planner cannot fuse it into reads (a matmul, a
//! reduction that cannot take it as prologue, a view, a cat, a kernel of
//! another shape), everything held that is not elementwise (matmul,
//! reduction, cat, upload, view: written when their kernel runs, as
//! always), and what the recomputation bounds below write.
//!
//! Invariants kept here:
//! - Every flush that reads an expression computes it: its op, and those of
//!   the expressions it reads, are prepended to the flush (before every
//!   queued op, each after its inputs: an expression reads only tensors
//!   registered before it). Kept until the flush's submission resolves, as
//!   queued ops are, so a replay finds them.
//! - An expression's inputs are in memory, failed, or expressions: an
//!   elementwise tensor whose input the flush computes but will not leave
//!   behind (an anchor used only inside its kernel) is written instead.
//! - An expression carries no failure of its own: failures follow values.
//!   The flush that computes it finds its inputs' failures, and records its
//!   skips, exactly as the flush it was registered in would have; its steps
//!   keep their registration sites. A read of it reports the same chain,
//!   depth and site as if it had been written.
//! - Recomputation is bounded, by three rules, and a fourth writes what a
//!   kernel computes for free. All of what a flush writes is decided by one
//!   pure function, `writes`, with a unit test per rule:
//!   1. a flush whose queue reads an expression a kernel already computed
//!      inline writes it, on its second computation;
//!   2. a tensor a flush computes that an expression it leaves behind
//!      reads is written by that flush, so no kept expression recomputes
//!      what a kernel has already computed (without it a loop's
//!      `v = v.mul(0.9).add(g)`, kept each step, would recompute the
//!      whole history of `v` every step: measured, the fused ops per step
//!      grew by two each step);
//!   3. an expression whose computation would take more than
//!      `MAX_EXPRESSION_OPS` ops is written by the flush that would make it.
//!
//!   4. a held tensor a running matmul's epilogue could compute, ending
//!      such a chain, is written by that kernel (`write_epilogues`): the
//!      one place a held tensor nobody asked for is written early, since
//!      leaving it would cost a kernel of its own later.
//!
//!   A read of an intermediate after the result (rule 1 does not apply to
//!   reads: a read writes what it reads anyway) computes its cone again,
//!   once per such read, never more than `MAX_EXPRESSION_OPS` ops.

use rustc_hash::{FxHashMap, FxHashSet};

use super::{DeviceState, Expr, State};
use crate::fusion::{self, Block};
use crate::ir::{OpIr, TensorId};

/// The most ops a kernel computing one expression inline may take (an upper
/// bound: an input shared by two paths counts twice). Past it the tensor is
/// written. Chosen with the planner's `MAX_BLOCK_OPS` (2048, where the
/// compile times measured are): an expression this large plus a full default
/// queue (1024 ops) still fit one kernel.
pub(crate) const MAX_EXPRESSION_OPS: usize = 1024;

/// The ops a flush runs: expressions it must compute, then the queue.
pub(crate) struct Gathered {
    pub ops: Vec<OpIr>,
    /// How many of `ops` are expressions' (the first ones).
    pub prepended: usize,
    /// Tensors `ops` compute that the flush must leave in memory: the
    /// planner writes each of them (when it can, failed when it cannot).
    pub write: FxHashSet<TensorId>,
    /// Which of `ops` run with that `write` (`fusion::runs`), for the
    /// planner.
    pub runs: Vec<bool>,
}

impl DeviceState {
    /// The ops of a flush of `queued`: the expressions `wanted` (by a read)
    /// or read by a queued op, prepended, and which of the tensors they
    /// compute must be written (`wanted` among them).
    pub(super) fn gather(&mut self, queued: Vec<OpIr>, wanted: &[TensorId]) -> Gathered {
        let expression =
            |t: &TensorId| matches!(self.records.get(t).map(|r| &r.state), Some(State::Expr(_)));
        let mut roots = wanted.to_vec();
        roots.extend(
            queued
                .iter()
                .flat_map(|op| op.inputs.iter().copied())
                .filter(expression),
        );
        let mut ops = self.expression_ops(&roots);
        for op in &ops {
            // The flush holds what it reads, as for a queued op; released
            // when its submission resolves.
            self.hold(&op.inputs);
        }
        let prepended = ops.len();
        ops.extend(queued);
        let records = &self.records;
        let held = |t: TensorId| records.get(&t).is_some_and(|r| r.held);
        let inlined = |t: TensorId| {
            matches!(
                records.get(&t).map(|r| &r.state),
                Some(State::Expr(Expr { inlined: true, .. }))
            )
        };
        let (write, runs) = writes(&ops, prepended, wanted, &held, &inlined);
        Gathered {
            ops,
            prepended,
            write,
            runs,
        }
    }

    /// The ops of the expressions among `roots` and of those they read, each
    /// after its inputs.
    fn expression_ops(&self, roots: &[TensorId]) -> Vec<OpIr> {
        let mut ops = Vec::new();
        let mut seen = FxHashSet::default();
        // Depth first, an op emitted once its inputs are.
        let mut stack: Vec<(TensorId, bool)> = roots.iter().rev().map(|&t| (t, false)).collect();
        while let Some((t, inputs_done)) = stack.pop() {
            let Some(State::Expr(expr)) = self.records.get(&t).map(|r| &r.state) else {
                continue;
            };
            if inputs_done {
                ops.push(expr.op.clone());
            } else if seen.insert(t) {
                stack.push((t, true));
                stack.extend(expr.op.inputs.iter().rev().map(|&i| (i, false)));
            }
        }
        ops
    }

    /// After a flush of `ops` is encoded as `blocks`: each tensor of its
    /// queue that was not written, is elementwise, and is held (or read by
    /// another such tensor) becomes an expression; the expressions a block
    /// computed inline are marked so.
    pub(super) fn keep_expressions(&mut self, ops: &[OpIr], prepended: usize, blocks: &[Block]) {
        let mut computed = vec![false; ops.len()];
        for i in blocks.iter().flat_map(Block::op_indices) {
            computed[i] = true;
        }
        let mut needed: FxHashSet<TensorId> =
            FxHashSet::with_capacity_and_hasher(ops.len(), Default::default());
        for (i, op) in ops.iter().enumerate().rev() {
            let Some(record) = self.records.get_mut(&op.output) else {
                continue;
            };
            let keep = i >= prepended
                && op.kind.is_elementwise()
                && (record.held || needed.contains(&op.output));
            match &mut record.state {
                State::Expr(expr) => expr.inlined |= computed[i],
                State::Queued if keep => {
                    needed.extend(op.inputs.iter().copied());
                    let expr = Expr {
                        op: op.clone(),
                        inlined: computed[i],
                    };
                    self.set_state(op.output, State::Expr(expr));
                }
                _ => {}
            }
        }
    }
}

/// What a flush of `ops` (the first `prepended` of them expressions it
/// computes again, then its queue) must leave in memory: one pure function
/// of the ops, what is held, what a read asks for (`wanted`) and which
/// expressions a kernel computed inline already. Every rule of the module
/// doc is applied here, and only here:
/// - what a read asks for is written;
/// - rule 1: an expression a kernel already computed inline, read by the
///   queue, is written on this, its second computation;
/// - what is held and cannot stay an expression is written: not
///   elementwise, reading what the flush will not leave behind, or rule 3,
///   heavier than `MAX_EXPRESSION_OPS`;
/// - rule 2: what the flush computes that an expression it leaves behind
///   reads is written;
/// - rule 4: a held chain a running matmul's epilogue can compute ends in a
///   tensor that kernel writes.
///
/// Returns it with which ops run with it (`fusion::runs`): the rules need
/// that, and the planner takes it from here instead of computing it again.
pub(super) fn writes(
    ops: &[OpIr],
    prepended: usize,
    wanted: &[TensorId],
    held: &dyn Fn(TensorId) -> bool,
    inlined: &dyn Fn(TensorId) -> bool,
) -> (FxHashSet<TensorId>, Vec<bool>) {
    let mut write: FxHashSet<TensorId> = wanted.iter().copied().collect();
    let recomputed: FxHashSet<TensorId> = ops[..prepended].iter().map(|op| op.output).collect();
    for op in &ops[prepended..] {
        for &t in &op.inputs {
            if recomputed.contains(&t) && inlined(t) {
                write.insert(t);
            }
        }
    }
    let runs = bound_expressions(ops, held, &mut write)
        .unwrap_or_else(|| fusion::runs(ops, |t| write.contains(&t)));
    (write, runs)
}

/// Adds to `write` each held tensor `ops` compute that cannot stay an
/// expression (not elementwise, reading what the flush will not leave
/// behind, or heavier than `MAX_EXPRESSION_OPS`), and each tensor the
/// flush computes that an expression it leaves behind reads.
///
/// The second rule is what keeps loops bounded: `v = v.mul(0.9).add(g)`
/// kept as an expression each step, and computed each step for another
/// use, would otherwise read last step's `v` as an expression, and that
/// one the step's before: every step would compute the whole history.
/// With it, a value a kernel computes is never computed again for an
/// expression that outlives the flush.
///
/// Returns which ops run with the final `write`, when it had to find out
/// (adding to `write` what already runs changes nothing of that).
fn bound_expressions(
    ops: &[OpIr],
    held: &dyn Fn(TensorId) -> bool,
    write: &mut FxHashSet<TensorId>,
) -> Option<Vec<bool>> {
    let producer: FxHashMap<TensorId, usize> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| (op.output, i))
        .collect();
    // For each op whose output could be left as an expression: the ops
    // computing it inline takes.
    let mut weight: Vec<Option<usize>> = vec![None; ops.len()];
    let mut candidates = false;
    for (i, op) in ops.iter().enumerate() {
        let mut ops_inline = op.kind.is_elementwise().then_some(1usize);
        for t in fusion::distinct(&op.inputs) {
            if write.contains(&t) {
                continue; // in memory (or failed) once the flush is done
            }
            if let Some(&j) = producer.get(&t) {
                ops_inline = match (ops_inline, weight[j]) {
                    (Some(w), Some(k)) => Some(w.saturating_add(k)),
                    _ => None,
                };
            }
        }
        let out = op.output;
        match ops_inline {
            Some(w) if w <= MAX_EXPRESSION_OPS => {
                weight[i] = Some(w);
                candidates |= !write.contains(&out) && held(out);
            }
            _ if held(out) => {
                write.insert(out);
            }
            _ => {}
        }
    }
    if !candidates {
        return None; // nothing held stays an expression (code under `tidy`)
    }
    let mut runs = fusion::runs(ops, |t| write.contains(&t));
    if write_epilogues(ops, held, &producer, &runs, &weight, write) {
        runs = fusion::runs(ops, |t| write.contains(&t));
    }
    // The expressions the flush will leave: ops that do not run, held or
    // read by another such op. What they read that does run is written.
    let mut kept: FxHashSet<TensorId> = FxHashSet::default();
    for (i, op) in ops.iter().enumerate().rev() {
        let out = op.output;
        if runs[i] || weight[i].is_none() || !(kept.contains(&out) || held(out)) {
            continue;
        }
        for &t in &op.inputs {
            match producer.get(&t) {
                Some(&j) if runs[j] => {
                    write.insert(t);
                }
                Some(_) => {
                    kept.insert(t);
                }
                None => {}
            }
        }
    }
    Some(runs)
}

/// Rule 4: adds to `write` each held elementwise tensor that a matmul
/// the flush runs could compute in its epilogue (of the product's shape,
/// reading the product or another such tensor, and otherwise only
/// tensors in memory by the time the matmul runs) and that no other such
/// tensor reads: the ones before it stay expressions, computed inline
/// from the product. Returns whether it added any.
///
/// The kernel runs anyway; left as an expression, the tensor would cost
/// a kernel of its own later, reading the product back. Measured on the
/// benchmark's training step written with every intermediate kept
/// (`w.sub(wt.matmul(grad).mul(lr))`, each part held): the new weights
/// were expressions computed by three more kernels at the next step, 24
/// kernels a step against 21 under `tidy`; with this rule, 20.
fn write_epilogues(
    ops: &[OpIr],
    held: &dyn Fn(TensorId) -> bool,
    producer: &FxHashMap<TensorId, usize>,
    runs: &[bool],
    weight: &[Option<usize>],
    write: &mut FxHashSet<TensorId>,
) -> bool {
    // Whether `t` is in memory before the op at `anchor` runs: written by
    // an earlier flush, or by an op of this one before it (a matmul, an
    // upload, anything that is not elementwise writes what it makes).
    let ready = |t: &TensorId, anchor: usize| match producer.get(t) {
        None => true,
        Some(&j) => j < anchor && runs[j] && (write.contains(t) || !ops[j].kind.is_elementwise()),
    };
    // Each running product, and what its epilogue makes: its shape and
    // the matmul's place.
    let mut epilogue: FxHashMap<TensorId, (&[usize], usize)> = FxHashMap::default();
    let mut tips: Vec<TensorId> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        if runs[i] && op.kind.is_product() {
            epilogue.insert(op.output, (&op.shape, i));
            continue;
        }
        if runs[i] || weight[i].is_none() {
            continue;
        }
        let Some((shape, anchor)) = op.inputs.iter().find_map(|t| epilogue.get(t).copied()) else {
            continue;
        };
        let others_ready = op
            .inputs
            .iter()
            .all(|t| epilogue.get(t).is_some_and(|e| e.1 == anchor) || ready(t, anchor));
        if shape == op.shape.as_slice() && others_ready {
            epilogue.insert(op.output, (&op.shape, anchor));
            tips.retain(|t| !op.inputs.contains(t));
            if held(op.output) {
                tips.push(op.output);
            }
        }
    }
    let before = write.len();
    write.extend(tips);
    write.len() > before
}

#[cfg(test)]
mod tests {
    //! One test per rule of `writes`, on ops built by hand: no GPU.
    use super::*;
    use crate::ir::{OpKind, ReduceOp, UnaryOp, Values};

    fn upload(output: u64) -> OpIr {
        OpIr::of(
            OpKind::Upload(Values::float32(&[0.0; 4])),
            &[],
            output,
            &[2, 2],
        )
    }

    fn unary(u: UnaryOp, input: u64, output: u64) -> OpIr {
        OpIr::of(OpKind::Unary(u), &[input], output, &[2, 2])
    }

    fn ids(ts: &[u64]) -> Vec<TensorId> {
        ts.iter().map(|&t| TensorId(t)).collect()
    }

    /// `writes` of a flush with nothing prepended, holding `held` and the
    /// tensors given as values (uploads), as a program holds its inputs.
    fn written(ops: &[OpIr], wanted: &[u64], held: &[u64]) -> FxHashSet<TensorId> {
        let mut held = ids(held);
        held.extend(
            ops.iter()
                .filter(|op| matches!(op.kind, OpKind::Upload(_)))
                .map(|op| op.output),
        );
        writes(ops, 0, &ids(wanted), &|t| held.contains(&t), &|_| false).0
    }

    #[test]
    fn what_a_read_wants_is_written_and_a_held_elementwise_result_stays_an_expression() {
        let ops = [
            upload(1),
            unary(UnaryOp::Exp, 1, 2),
            unary(UnaryOp::Tanh, 1, 3),
        ];
        let write = written(&ops, &[2], &[3]);
        assert!(write.contains(&TensorId(2)));
        assert!(
            !write.contains(&TensorId(3)),
            "held, elementwise, nobody read it"
        );
    }

    #[test]
    fn a_held_tensor_that_is_not_elementwise_is_written() {
        let sum = OpIr::of(
            OpKind::Reduce {
                op: ReduceOp::Sum,
                axes: vec![1],
            },
            &[1],
            2,
            &[2],
        );
        let write = written(&[upload(1), sum], &[], &[2]);
        assert!(write.contains(&TensorId(2)));
    }

    #[test]
    fn rule_1_an_expression_a_kernel_computed_inline_is_written_when_the_queue_reads_it_again() {
        // Prepended: the expression 2 = exp(1); queued: 3 = tanh(2), read.
        let ops = [unary(UnaryOp::Exp, 1, 2), unary(UnaryOp::Tanh, 2, 3)];
        let held = |t: TensorId| t == TensorId(2);
        let (once, _) = writes(&ops, 1, &ids(&[3]), &held, &|_| false);
        assert!(!once.contains(&TensorId(2)), "first computed inline: stays");
        let (again, _) = writes(&ops, 1, &ids(&[3]), &held, &|t| t == TensorId(2));
        assert!(
            again.contains(&TensorId(2)),
            "its second computation writes it"
        );
    }

    #[test]
    fn rule_2_what_an_expression_left_behind_reads_is_written_by_the_flush_that_computes_it() {
        // 2 = exp(1) runs (the read 3 = tanh(2) needs it); 4 = sin(2) is
        // held and left behind, so 2 must not be left to compute again.
        let ops = [
            upload(1),
            unary(UnaryOp::Exp, 1, 2),
            unary(UnaryOp::Tanh, 2, 3),
            unary(UnaryOp::Sin, 2, 4),
        ];
        let write = written(&ops, &[3], &[4]);
        assert!(write.contains(&TensorId(2)));
        assert!(
            !write.contains(&TensorId(4)),
            "nobody read it: an expression"
        );
    }

    #[test]
    fn rule_3_an_expression_heavier_than_the_bound_is_written() {
        let chain = |n: u64| {
            let mut ops = vec![upload(1)];
            ops.extend((0..n).map(|k| unary(UnaryOp::Exp, 1 + k, 2 + k)));
            ops
        };
        let light = chain(10);
        assert!(!written(&light, &[], &[11]).contains(&TensorId(11)));
        let n = MAX_EXPRESSION_OPS as u64 + 1;
        let heavy = chain(n);
        assert!(written(&heavy, &[], &[1 + n]).contains(&TensorId(1 + n)));
    }

    #[test]
    fn rule_4_a_held_chain_on_a_running_matmul_is_written_at_its_tip_by_that_kernel() {
        // 3 = x @ w is held and runs (4 = sum(3) is read); 5 = relu(3) and
        // 6 = exp(5) are held too: the matmul's epilogue writes 6, and 5
        // stays an expression computed inline from the product.
        let matmul = OpIr::of(OpKind::Matmul, &[1, 2], 3, &[2, 2]);
        let sum = OpIr::of(
            OpKind::Reduce {
                op: ReduceOp::Sum,
                axes: vec![0, 1],
            },
            &[3],
            4,
            &[],
        );
        let ops = [
            upload(1),
            upload(2),
            matmul,
            sum,
            unary(UnaryOp::Relu, 3, 5),
            unary(UnaryOp::Exp, 5, 6),
        ];
        let write = written(&ops, &[4], &[3, 5, 6]);
        assert!(write.contains(&TensorId(6)), "{write:?}");
        assert!(!write.contains(&TensorId(5)), "{write:?}");
    }
}
