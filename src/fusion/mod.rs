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
//!   from outside the block are loaded through their layouts (broadcast,
//!   transposed, sliced: index maps, never copies).
//! - A matmul (or a convolution) always anchors a block: the elementwise
//!   ops that follow on its product (and only those) run as its epilogue. So does a reduction of
//!   the last axis that keeps it, over its input's shape (its value
//!   broadcasts along each row: a softmax is one kernel); with no op joining
//!   it, it is a block of its own. A reduction (or a scan) takes the open
//!   group as its prologue when that group computes its input for it alone
//!   and writes nothing else (and then anchors nothing).
//! - A tensor produced inside a block is written to memory only when the
//!   caller says it must be (`write`: a read wants it, or a handle holds it
//!   and it cannot stay an expression) or an op outside the block reads it:
//!   fused intermediates nobody needs never touch memory.
//! - A block binds at most `max_storage_buffers` storage buffers (inputs plus
//!   outputs), so it always fits the device's `maxStorageBuffersPerShaderStage`.
//! - An op nobody needs (not to be written, no live consumer) is not run at
//!   all.
//! - A block computes at most `max_ops` ops, so every kernel compiles in
//!   bounded time whatever the queue's capacity or an expression's size.

mod limits;

use rustc_hash::{FxHashMap, FxHashSet};

pub use limits::{DeviceLimits, Refusal, refusal};

use crate::ir::{DType, OpIr, OpKind, TensorId};

/// One unit of a flush's work: each kind of kernel (or of work that needs
/// none) is a variant of its own, so a new kind of kernel is a new variant
/// that every match over blocks must then handle, never a new combination
/// of flags to re-derive downstream.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Elementwise ops fused into one kernel.
    Elementwise(ElementwiseBlock),
    /// A matmul or a convolution's pass (`op`: a product on the matmul's
    /// tiles), the elementwise ops that follow on its product running as
    /// its epilogue (bias, activation, ...). The product is written only if
    /// it is one of the epilogue's outputs.
    Matmul {
        op: usize,
        epilogue: ElementwiseBlock,
    },
    /// A reduction of the last axis that keeps it (`op`), the elementwise
    /// ops reading its value broadcast along each row running as its
    /// epilogue over the reduction's input shape (a softmax is one kernel).
    /// Its value is written only if it is one of the epilogue's outputs.
    RowReduction {
        op: usize,
        epilogue: ElementwiseBlock,
    },
    /// A reduction, argmax, scan (`cumsum`, `cumprod`: a thread per line)
    /// or pool (a thread per window) of memory, or of what its prologue
    /// computes as each element is loaded (`x.sub(m).exp().sum(1)` is one
    /// kernel; the prologue writes nothing). A pool's gradient is one too,
    /// of its inputs in memory (never a prologue).
    Reduction {
        op: usize,
        prologue: Option<ElementwiseBlock>,
    },
    /// Values the host made (an upload, seeded random values) copied into a
    /// new buffer.
    Upload(usize),
    /// A view: an alias of its input's memory (no kernel), or a row-major
    /// copy where the input's layout cannot express it.
    View(usize),
    /// A row-major copy (a read of strided bytes, a variable's own value).
    Copy(usize),
    /// Inputs joined along an axis: one copy kernel per input.
    Cat(usize),
    /// A training step's commit: an alias of the old value or the new one,
    /// decided on the CPU or when its submission settles
    /// (`device::commit`).
    Commit(usize),
    /// A training step's cost: an alias of its first input that fails with
    /// any of the others (no kernel).
    Guard(usize),
}

/// An elementwise group: on its own one kernel, or the epilogue or prologue
/// of the kernel of the block that holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct ElementwiseBlock {
    /// Indices into the flushed ops, in execution order (an anchor's op is
    /// not among them).
    pub ops: Vec<usize>,
    /// Tensors read from memory, in binding order.
    pub inputs: Vec<TensorId>,
    /// Tensors written to memory, in binding order (an anchored block's
    /// may include the anchor's own value).
    pub outputs: Vec<TensorId>,
    /// Every op's shape (a row reduction's epilogue: its input's).
    pub shape: Vec<usize>,
}

impl Block {
    /// The block of op `i` on its own, for an op that is planned alone
    /// (an elementwise op alone is a group of one).
    fn single(i: usize, op: &OpIr) -> Block {
        match &op.kind {
            OpKind::Upload(_) | OpKind::Random { .. } => Block::Upload(i),
            OpKind::View(_) => Block::View(i),
            OpKind::Copy => Block::Copy(i),
            OpKind::Cat { .. } => Block::Cat(i),
            OpKind::Commit { .. } => Block::Commit(i),
            OpKind::Guard => Block::Guard(i),
            OpKind::Reduce { .. }
            | OpKind::ArgReduce { .. }
            | OpKind::Scan { .. }
            | OpKind::Pool { .. }
            | OpKind::PoolGrad { .. } => Block::Reduction {
                op: i,
                prologue: None,
            },
            OpKind::Matmul | OpKind::Conv { .. } => Block::Matmul {
                op: i,
                epilogue: ElementwiseBlock {
                    ops: Vec::new(),
                    inputs: Vec::new(),
                    outputs: vec![op.output],
                    shape: op.shape.clone(),
                },
            },
            _ => Block::Elementwise(ElementwiseBlock {
                ops: vec![i],
                inputs: distinct(&op.inputs).collect(),
                outputs: vec![op.output],
                shape: op.shape.clone(),
            }),
        }
    }

    /// The flushed ops it computes, by index, in execution order.
    pub fn op_indices(&self) -> Vec<usize> {
        match self {
            Block::Elementwise(b) => b.ops.clone(),
            Block::Matmul { op, epilogue } | Block::RowReduction { op, epilogue } => {
                std::iter::once(*op)
                    .chain(epilogue.ops.iter().copied())
                    .collect()
            }
            Block::Reduction { op, prologue } => prologue
                .iter()
                .flat_map(|p| p.ops.iter().copied())
                .chain([*op])
                .collect(),
            Block::Upload(i)
            | Block::View(i)
            | Block::Copy(i)
            | Block::Cat(i)
            | Block::Commit(i)
            | Block::Guard(i) => vec![*i],
        }
    }

    /// The tensors it writes to memory.
    pub fn outputs(&self, ops: &[OpIr]) -> Vec<TensorId> {
        match self {
            Block::Elementwise(b)
            | Block::Matmul { epilogue: b, .. }
            | Block::RowReduction { epilogue: b, .. } => b.outputs.clone(),
            Block::Reduction { op: i, .. }
            | Block::Upload(i)
            | Block::View(i)
            | Block::Copy(i)
            | Block::Cat(i)
            | Block::Commit(i)
            | Block::Guard(i) => vec![ops[*i].output],
        }
    }
}

/// What the planner must respect, given by the device and the kernels it
/// has (passed in, so the planner depends on neither).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The device's `maxStorageBuffersPerShaderStage`: no block binds more.
    pub max_storage_buffers: usize,
    /// The longest row a row reduction folds in one workgroup: only such a
    /// reduction can anchor an epilogue (no split launch between them).
    pub max_row: usize,
    /// The most ops one block computes (see `MAX_BLOCK_OPS`).
    pub max_ops: usize,
    /// Whether kernels check numerics: a kernel that makes a check binds
    /// their flags after everything else (`storage_bindings`).
    pub check_numerics: bool,
}

/// The most ops the device lets one kernel compute: compile time grows
/// with the ops, faster than linearly on SwiftShader (one fused chain
/// written out, first read included: 76 ms at 1024 ops, 157 ms at 2048,
/// 341 ms at 4096, 928 ms at 8192; lavapipe 28, 46, 91, 232 ms; a chain
/// that repeats a pattern is rolled into a loop and compiles far faster).
/// A longer chain is cut into kernels of this many ops, writing one
/// intermediate at each cut.
pub const MAX_BLOCK_OPS: usize = 2048;

/// Plans `ops` (one flush, in registration order). `write` says whether a
/// tensor must be in memory once the flush is done, `live` which ops run
/// (`runs` of that `write`, which the caller has already computed to
/// decide `write`), `shape_of` what shape a tensor has (`None` for a tensor
/// the device does not know, which then anchors nothing). Linear in the
/// number of ops: a loop that registers thousands of small ops must not
/// pay for planning them.
pub fn plan(
    ops: &[OpIr],
    live: &[bool],
    write: impl Fn(TensorId) -> bool,
    shape_of: impl Fn(TensorId) -> Option<Vec<usize>>,
    limits: &Limits,
) -> Vec<Block> {
    let max_storage_buffers = limits.max_storage_buffers;
    let consumers = consumer_counts(ops, live);
    let live_consumers = |t: TensorId| consumers.get(&t).copied().unwrap_or(0);
    let mut blocks = Vec::new();
    let mut group: Option<Group> = None;
    // Ops that are not elementwise, met while a group was open. They run
    // right after the group (they may read what it writes), so an op reading
    // one of their outputs cannot join the group.
    let mut pending: Vec<usize> = Vec::new();
    let mut pending_outputs: FxHashSet<TensorId> = FxHashSet::default();

    for (i, op) in ops.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let reduces = matches!(
            op.kind,
            OpKind::Reduce { .. }
                | OpKind::ArgReduce { .. }
                | OpKind::Scan { .. }
                | OpKind::Pool { .. }
        );
        if reduces
            && group
                .as_ref()
                .is_some_and(|g| g.feeds_only(op, &write, max_storage_buffers))
        {
            if let Some(g) = group.take() {
                blocks.push(Block::Reduction {
                    op: i,
                    prologue: Some(g.finish(ops, &write).without_outputs()),
                });
            }
            blocks.extend(pending.drain(..).map(|j| Block::single(j, &ops[j])));
            pending_outputs.clear();
            continue;
        }
        // A matmul starts a group of its own, its epilogue: whatever
        // elementwise ops follow on its output's shape. So does a reduction
        // of rows, on its input's shape: the epilogue runs over each row once
        // its value is known (a softmax is one kernel).
        let epilogue_shape = match op.kind {
            _ if op.kind.is_product() => Some(op.shape.clone()),
            _ => row_reduction_input(op, &shape_of, limits.max_row),
        };
        if let Some(shape) = epilogue_shape {
            if let Some(done) = group.take() {
                blocks.push(done.into_block(ops, &write));
            }
            blocks.extend(pending.drain(..).map(|j| Block::single(j, &ops[j])));
            pending_outputs.clear();
            let mut anchored = Group::new(shape, limits.check_numerics, true);
            anchored.anchor(i, op, &write, &live_consumers);
            group = Some(anchored);
            continue;
        }
        if !op.kind.is_elementwise() {
            // An op reading nothing (an upload), or a view of nothing the
            // open group or a pending op makes, depends on no group: its
            // block goes before the open one, so what reads it may still
            // join the group (`x.mod(tensor([3]))` stays one kernel, and so
            // do two gathers, each reading its indices through a view).
            let independent = matches!(op.kind, OpKind::View(_))
                && group.as_ref().is_some_and(|g| {
                    op.inputs
                        .iter()
                        .all(|t| !g.outside.contains_key(t) && !pending_outputs.contains(t))
                });
            if op.inputs.is_empty() || independent {
                blocks.push(Block::single(i, op));
                continue;
            }
            if group.is_some() {
                pending.push(i);
                pending_outputs.insert(op.output);
            } else {
                blocks.push(Block::single(i, op));
            }
            continue;
        }
        let gather = matches!(op.kind, OpKind::Gather { .. });
        let joins = group.as_ref().is_some_and(|g| {
            g.shape == op.shape
                // A gather reads its table and indices from memory: the
                // kernel checks the indices it loads and reads the table
                // at them (`codegen`), so neither may be computed inline.
                && !(gather && op.inputs.iter().any(|t| g.outside.contains_key(t)))
                && g.ops.len() + usize::from(g.anchor.is_some()) < limits.max_ops
                && !op.inputs.iter().any(|t| pending_outputs.contains(t))
                // A matmul's epilogue takes only what depends on its product:
                // independent work must not share its kernel (and its fate).
                && (g.anchor.is_none() || op.inputs.iter().any(|t| g.outside.contains_key(t)))
                && g.bindings_with(op, &write, &live_consumers) <= max_storage_buffers
        });
        if !joins {
            if let Some(done) = group.take() {
                blocks.push(done.into_block(ops, &write));
            }
            blocks.extend(pending.drain(..).map(|j| Block::single(j, &ops[j])));
            pending_outputs.clear();
            group = Some(Group::new(op.shape.clone(), limits.check_numerics, false));
        }
        if let Some(g) = group.as_mut() {
            g.add(i, op, &write, &live_consumers);
        }
    }
    if let Some(done) = group.take() {
        blocks.push(done.into_block(ops, &write));
    }
    blocks.extend(pending.drain(..).map(|j| Block::single(j, &ops[j])));
    blocks
}

/// An elementwise group being built, with what it would bind kept up to
/// date as ops join.
struct Group {
    shape: Vec<usize>,
    anchor: Option<usize>,
    ops: Vec<usize>,
    /// Tensors read from memory, first use first.
    inputs: Vec<TensorId>,
    input_set: FxHashSet<TensorId>,
    /// For each tensor produced in the group: its live consumers outside the
    /// group (so far: ops not yet met count as outside). Written to memory
    /// when `write` says so or while this is non-zero.
    outside: FxHashMap<TensorId, usize>,
    /// How many produced tensors are written.
    written: usize,
    /// Bindings the group needs besides its inputs and outputs (a matmul
    /// anchor's operands).
    base_bindings: usize,
    /// Whether its kernel makes checks (a gather's, an op's the numerics
    /// checks look at, or an anchor's while they are on): it binds the
    /// checks' flags.
    checks: bool,
    /// Whether it gathers: an index check is completed by a kernel reading
    /// the indices after the group's own (`codegen::flag_value`), which
    /// only a group's own launch gets.
    gathers: bool,
    /// Whether the device checks numerics (`Limits::check_numerics`).
    numerics: bool,
}

impl Group {
    /// An empty group; one anchored is taken to check its anchor while
    /// numerics are checked (the planner cannot see whether the anchor's
    /// operands are known finite: it counts the flags' binding anyway).
    fn new(shape: Vec<usize>, check_numerics: bool, anchored: bool) -> Group {
        Group {
            shape,
            anchor: None,
            ops: Vec::new(),
            inputs: Vec::new(),
            input_set: FxHashSet::default(),
            outside: FxHashMap::default(),
            written: 0,
            base_bindings: 0,
            checks: check_numerics && anchored,
            gathers: false,
            numerics: check_numerics,
        }
    }

    /// Storage buffers the group would bind with `op` in it. Counts as written
    /// every output some op not yet in the group reads, which only
    /// over-counts: an op that joins later can only take outputs away.
    fn bindings_with(
        &self,
        op: &OpIr,
        write: &impl Fn(TensorId) -> bool,
        live_consumers: &impl Fn(TensorId) -> usize,
    ) -> usize {
        let mut new_inputs = 0;
        let mut no_longer_written = 0;
        // Counted as `storage_bindings` counts the finished block: the
        // anchor's operands, then inputs, then outputs.
        for t in distinct(&op.inputs) {
            match self.outside.get(&t) {
                None if !self.input_set.contains(&t) => new_inputs += 1,
                Some(&1) if !write(t) => no_longer_written += 1,
                _ => {}
            }
        }
        let writes_output = write(op.output) || live_consumers(op.output) > 0;
        let checks = self.checks || op_checks(op, self.numerics);
        self.base_bindings
            + self.inputs.len()
            + self.written
            + new_inputs
            + usize::from(writes_output)
            + usize::from(checks)
            - no_longer_written
    }

    fn add(
        &mut self,
        i: usize,
        op: &OpIr,
        write: &impl Fn(TensorId) -> bool,
        live_consumers: &impl Fn(TensorId) -> usize,
    ) {
        for t in distinct(&op.inputs) {
            match self.outside.get_mut(&t) {
                Some(count) => {
                    // This consumer is inside now.
                    let was_written = write(t) || *count > 0;
                    *count = count.saturating_sub(1);
                    if was_written && !(write(t) || *count > 0) {
                        self.written -= 1;
                    }
                }
                None => {
                    if self.input_set.insert(t) {
                        self.inputs.push(t);
                    }
                }
            }
        }
        let outside = live_consumers(op.output);
        if write(op.output) || outside > 0 {
            self.written += 1;
        }
        self.outside.insert(op.output, outside);
        self.checks |= op_checks(op, self.numerics);
        self.gathers |= matches!(op.kind, OpKind::Gather { .. });
        self.ops.push(i);
    }

    /// The finished group as a block of its kind: a matmul with its
    /// epilogue, a row reduction with its (or, when no elementwise op
    /// joined it, a reduction of its own), or elementwise ops alone.
    fn into_block(self, ops: &[OpIr], write: &impl Fn(TensorId) -> bool) -> Block {
        match self.anchor {
            Some(i) if ops[i].kind.is_product() => Block::Matmul {
                op: i,
                epilogue: self.finish(ops, write),
            },
            Some(i) if self.ops.is_empty() => Block::single(i, &ops[i]),
            Some(i) => Block::RowReduction {
                op: i,
                epilogue: self.finish(ops, write),
            },
            None => Block::Elementwise(self.finish(ops, write)),
        }
    }

    /// Makes the matmul or row reduction `i` the group's anchor: its
    /// operands are bound by its kernel, its output is produced in the
    /// group.
    fn anchor(
        &mut self,
        i: usize,
        op: &OpIr,
        write: &impl Fn(TensorId) -> bool,
        live_consumers: &impl Fn(TensorId) -> usize,
    ) {
        self.anchor = Some(i);
        // The matmul's two operands, or the reduction's one.
        self.base_bindings = op.inputs.len();
        let outside = live_consumers(op.output);
        if write(op.output) || outside > 0 {
            self.written += 1;
        }
        self.outside.insert(op.output, outside);
    }

    /// Whether the group computes `t` for one consumer (the reduction `op`,
    /// met now) and writes nothing else, so it can run as that consumer's
    /// prologue, and the reduction's kernel still fits the binding limit.
    fn feeds_only(
        &self,
        op: &OpIr,
        write: &impl Fn(TensorId) -> bool,
        max_storage_buffers: usize,
    ) -> bool {
        let t = op.inputs[0];
        // The reduction binds the checks' flags while numerics are checked
        // (`storage_bindings`).
        self.anchor.is_none()
            && !self.gathers
            && !write(t)
            && self.outside.get(&t) == Some(&1)
            && self.written == 1
            && self.inputs.len() + reduction_outputs(op) + usize::from(self.numerics)
                <= max_storage_buffers
    }

    fn finish(self, ops: &[OpIr], write: &impl Fn(TensorId) -> bool) -> ElementwiseBlock {
        let outputs = self
            .anchor
            .iter()
            .chain(&self.ops)
            .map(|&i| ops[i].output)
            .filter(|t| write(*t) || self.outside.get(t).is_some_and(|&n| n > 0))
            .collect();
        ElementwiseBlock {
            ops: self.ops,
            inputs: self.inputs,
            outputs,
            shape: self.shape,
        }
    }
}

/// Whether `op` makes a check in its group's kernel: a gather's index
/// range, or, with the numerics checked, its value (`OpIr::checks_finite`).
fn op_checks(op: &OpIr, check_numerics: bool) -> bool {
    matches!(op.kind, OpKind::Gather { .. }) || (check_numerics && op.checks_finite())
}

impl ElementwiseBlock {
    /// Whether its kernel makes checks (`op_checks`), binding their flags
    /// after its outputs.
    pub fn checks(&self, ops: &[OpIr], check_numerics: bool) -> bool {
        self.ops.iter().any(|&i| op_checks(&ops[i], check_numerics))
    }

    /// The block as a prologue: its last op's value is consumed in the
    /// kernel, nothing is written.
    fn without_outputs(mut self) -> ElementwiseBlock {
        self.outputs.clear();
        self
    }
}

/// Which of `producers` (each op's output and inputs, in execution order)
/// the values of `outputs` depend on: their indices, in order. The data
/// dependence the failure model follows (docs/design.md §2 item 6).
pub fn cone(producers: &[(TensorId, &[TensorId])], outputs: &[TensorId]) -> Vec<usize> {
    let index: FxHashMap<TensorId, usize> = producers
        .iter()
        .enumerate()
        .map(|(k, (out, _))| (*out, k))
        .collect();
    let mut needed = vec![false; producers.len()];
    let mut stack = outputs.to_vec();
    while let Some(t) = stack.pop() {
        if let Some(&k) = index.get(&t)
            && !std::mem::replace(&mut needed[k], true)
        {
            stack.extend(producers[k].1.iter().copied());
        }
    }
    (0..producers.len()).filter(|&k| needed[k]).collect()
}

/// `block` split along data dependence: for each of `outputs` (the block's
/// outputs still to be written), a block computing that output alone, from
/// only the ops its value depends on. How a failing block is replayed: an
/// error caught in one part belongs to an op every failing part computes,
/// so the outputs that do not depend on it are written, whatever the planner
/// fused them with; and no part computes an op whose outputs were all
/// skipped. A block that is not elementwise has one output and is its own
/// only part.
pub fn split(block: &Block, ops: &[OpIr], outputs: &[TensorId]) -> Vec<(Block, Vec<TensorId>)> {
    let (anchor, b) = match block {
        Block::Elementwise(b) => (None, b),
        Block::Matmul { op, epilogue } | Block::RowReduction { op, epilogue } => {
            (Some(*op), epilogue)
        }
        _ => return vec![(block.clone(), outputs.to_vec())],
    };
    let indices = block.op_indices();
    let producers: Vec<(TensorId, &[TensorId])> = indices
        .iter()
        .map(|&i| (ops[i].output, ops[i].inputs.as_slice()))
        .collect();
    outputs
        .iter()
        .map(|&out| {
            let needed: Vec<usize> = cone(&producers, &[out])
                .into_iter()
                .map(|k| indices[k])
                .collect();
            let part_ops: Vec<usize> = b
                .ops
                .iter()
                .copied()
                .filter(|i| needed.contains(i))
                .collect();
            let group = ElementwiseBlock {
                inputs: b
                    .inputs
                    .iter()
                    .copied()
                    .filter(|t| part_ops.iter().any(|&i| ops[i].inputs.contains(t)))
                    .collect(),
                ops: part_ops,
                outputs: vec![out],
                shape: b.shape.clone(),
            };
            let part = match anchor.filter(|a| needed.contains(a)) {
                None => Block::Elementwise(group),
                Some(a) if ops[a].kind.is_product() => Block::Matmul {
                    op: a,
                    epilogue: group,
                },
                // A row reduction's own value, alone: a reduction block.
                Some(a) if group.ops.is_empty() => Block::single(a, &ops[a]),
                Some(a) => Block::RowReduction {
                    op: a,
                    epilogue: group,
                },
            };
            (part, vec![out])
        })
        .collect()
}

/// Storage buffers the kernels of `block` bind at most (one launch's worth:
/// a block of several launches, a cat or a split reduction, counts its
/// widest). The one count of bindings: the planner grows groups by it
/// (`Group::bindings_with` is its incremental form) and the runtime checks
/// every block against the device's limit with it before any GPU call, so a
/// block kind the planner forgot to count fails as an internal error naming
/// the count, never as a rejected kernel that takes its neighbours down.
///
/// With `check_numerics` an elementwise group's kernel binds its checks'
/// flags where one of its ops is checked, and an anchored group's or a
/// reduction's always (its anchor, its prologue or its own values may be).
pub fn storage_bindings(block: &Block, ops: &[OpIr], check_numerics: bool) -> usize {
    match block {
        Block::Elementwise(b) => {
            b.inputs.len() + b.outputs.len() + usize::from(b.checks(ops, check_numerics))
        }
        Block::Matmul { op, epilogue } | Block::RowReduction { op, epilogue } => {
            ops[*op].inputs.len()
                + epilogue.inputs.len()
                + epilogue.outputs.len()
                + usize::from(check_numerics)
        }
        Block::Reduction { op, prologue } => {
            let inputs = prologue
                .as_ref()
                .map_or(ops[*op].inputs.len(), |p| p.inputs.len());
            inputs + reduction_outputs(&ops[*op]) + usize::from(check_numerics)
        }
        // One copy kernel per input: its buffer and the output's.
        Block::Cat(_) => 2,
        // An alias: no kernel, nothing bound.
        Block::Commit(_) | Block::Guard(_) => 0,
        Block::Upload(i) | Block::View(i) | Block::Copy(i) => ops[*i].inputs.len() + 1,
    }
}

/// Outputs an op's kernel binds: a reduction split in two stages that
/// hands each partial on with more than its value writes two per partial,
/// an argmax (its index) and a fold that carries flags
/// (`ReduceOp::carries_flags`).
fn reduction_outputs(op: &OpIr) -> usize {
    match op.kind {
        OpKind::ArgReduce { .. } => 2,
        OpKind::Reduce { op: fold, .. } if fold.carries_flags(op.dtype) => 2,
        _ => 1,
    }
}

/// The input shape of a reduction that can anchor an epilogue, if `op` is
/// one: it folds only the last axis and keeps it (so its value broadcasts
/// along rows), over rows short enough for one workgroup (no split launch),
/// and is a float32 fold (an anchor hands its epilogue a float; an argmax
/// is not a fold).
fn row_reduction_input(
    op: &OpIr,
    shape_of: &impl Fn(TensorId) -> Option<Vec<usize>>,
    max_row: usize,
) -> Option<Vec<usize>> {
    let OpKind::Reduce { axes, .. } = &op.kind else {
        return None;
    };
    if op.dtype != DType::Float32 {
        return None;
    }
    let input = shape_of(*op.inputs.first()?)?;
    let rank = input.len();
    let row = *input.last()?;
    let keeps_rows = axes.as_slice() == [rank - 1] && op.shape.len() == rank;
    (keeps_rows && row > 0 && row <= max_row && op.shape.iter().product::<usize>() > 0)
        .then_some(input)
}

/// An op's inputs, each once (`x.mul(x)` reads `x` once). Ops have at most
/// three inputs, so a scan beats a set.
pub fn distinct(inputs: &[TensorId]) -> impl Iterator<Item = TensorId> + '_ {
    inputs
        .iter()
        .enumerate()
        .filter(|&(k, t)| !inputs[..k].contains(t))
        .map(|(_, &t)| t)
}

/// For each tensor, how many of the ops that run (`live`) read it. Counts,
/// not lists of the readers: the planner asks only how many, and a list
/// per tensor was an allocation per op in every flush.
fn consumer_counts(ops: &[OpIr], live: &[bool]) -> FxHashMap<TensorId, usize> {
    let mut map: FxHashMap<TensorId, usize> =
        FxHashMap::with_capacity_and_hasher(ops.len(), Default::default());
    for (op, _) in ops.iter().zip(live).filter(|&(_, &runs)| runs) {
        // Once per op, however often it reads the input (`d.mul(d)`): a
        // group counts a consumer in once per distinct input.
        for input in distinct(&op.inputs) {
            *map.entry(input).or_default() += 1;
        }
    }
    map
}

/// Whether each of `ops` runs in the plan `plan` makes with the same `write`:
/// its output is to be written, or an op that runs reads it. Decided back to
/// front, since consumers come after producers: what the ops already found
/// to run read is all that can make an earlier op run.
pub fn runs(ops: &[OpIr], write: impl Fn(TensorId) -> bool) -> Vec<bool> {
    let mut read: FxHashSet<TensorId> =
        FxHashSet::with_capacity_and_hasher(ops.len(), Default::default());
    let mut live = vec![false; ops.len()];
    for (i, op) in ops.iter().enumerate().rev() {
        if write(op.output) || read.contains(&op.output) {
            live[i] = true;
            read.extend(op.inputs.iter().copied());
        }
    }
    live
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{BinaryOp, UnaryOp, Values};

    const LIMITS: Limits = Limits {
        max_storage_buffers: 8,
        max_row: 1024,
        max_ops: MAX_BLOCK_OPS,
        check_numerics: false,
    };

    /// `plan`, with the ops that run computed from `write` as the device
    /// does.
    fn planned(
        ops: &[OpIr],
        write: impl Fn(TensorId) -> bool,
        shape_of: impl Fn(TensorId) -> Option<Vec<usize>>,
        limits: &Limits,
    ) -> Vec<Block> {
        let live = runs(ops, &write);
        plan(ops, &live, write, shape_of, limits)
    }

    fn upload(output: u64, shape: &[usize]) -> OpIr {
        OpIr::of(
            OpKind::Upload(Values::float32(&vec![0.0; shape.iter().product()])),
            &[],
            output,
            shape,
        )
    }

    #[test]
    fn a_chain_of_elementwise_ops_is_one_block_writing_only_the_held_result() {
        let mut ops = vec![upload(1, &[4])];
        for k in 0..16 {
            ops.push(OpIr::of(OpKind::Unary(UnaryOp::Exp), &[1 + k], 2 + k, &[4]));
        }
        let blocks = planned(
            &ops,
            |t| t == TensorId(1) || t == TensorId(17),
            |_| None,
            &LIMITS,
        );
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
            OpIr::of(OpKind::Unary(UnaryOp::Exp), &[1], 2, &[4]),
            OpIr::of(OpKind::Unary(UnaryOp::Tanh), &[2], 3, &[4]),
        ];
        let blocks = planned(&ops, |_| true, |_| None, &LIMITS);
        let Block::Elementwise(block) = &blocks[1] else {
            panic!("{blocks:?}")
        };
        assert_eq!(block.outputs, vec![TensorId(2), TensorId(3)]);
    }

    #[test]
    fn an_op_nobody_can_observe_is_not_planned() {
        let ops = vec![
            upload(1, &[4]),
            OpIr::of(OpKind::Unary(UnaryOp::Exp), &[1], 2, &[4]),
            OpIr::of(OpKind::Unary(UnaryOp::Tanh), &[1], 3, &[4]),
        ];
        let blocks = planned(&ops, |t| t != TensorId(2), |_| None, &LIMITS);
        let Block::Elementwise(block) = &blocks[1] else {
            panic!("{blocks:?}")
        };
        assert_eq!(block.ops, vec![2]);
    }

    #[test]
    fn a_group_is_split_before_it_binds_more_buffers_than_the_device_allows() {
        // Ten inputs summed: a single kernel would bind 11 storage buffers.
        let mut ops: Vec<OpIr> = (1..=10).map(|i| upload(i, &[4])).collect();
        ops.push(OpIr::of(OpKind::Binary(BinaryOp::Add), &[1, 2], 11, &[4]));
        for k in 3..=10 {
            ops.push(OpIr::of(
                OpKind::Binary(BinaryOp::Add),
                &[k + 8, k],
                k + 9,
                &[4],
            ));
        }
        let last = TensorId(19);
        let blocks = planned(&ops, |t| t == last || t.0 <= 10, |_| None, &LIMITS);
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
            OpIr::of(
                OpKind::BinaryScalar {
                    op: BinaryOp::Mul,
                    scalar: 2.0,
                    scalar_first: false,
                },
                &[1],
                3,
                &[3],
            ),
            OpIr::of(OpKind::Binary(BinaryOp::Add), &[3, 2], 4, &[2, 3]),
        ];
        let blocks = planned(&ops, |t| t == TensorId(4), |_| None, &LIMITS);
        assert_eq!(
            blocks
                .iter()
                .filter(|b| matches!(b, Block::Elementwise(_)))
                .count(),
            2
        );
    }

    #[test]
    fn a_softmax_is_one_block_anchored_on_its_row_reduction() {
        // x [4, 8]; lse = logSumExp(x, -1, keepDims); y = exp(x - lse).
        let ops = vec![
            upload(1, &[4, 8]),
            OpIr::of(
                OpKind::Reduce {
                    op: crate::ir::ReduceOp::LogSumExp,
                    axes: vec![1],
                },
                &[1],
                2,
                &[4, 1],
            ),
            OpIr::of(OpKind::Binary(BinaryOp::Sub), &[1, 2], 3, &[4, 8]),
            OpIr::of(OpKind::Unary(UnaryOp::Exp), &[3], 4, &[4, 8]),
        ];
        let shape_of = |t: TensorId| {
            if t == TensorId(2) {
                Some(vec![4, 1])
            } else {
                Some(vec![4, 8])
            }
        };
        let blocks = planned(
            &ops,
            |t| t == TensorId(1) || t == TensorId(4),
            shape_of,
            &LIMITS,
        );
        assert_eq!(blocks.len(), 2, "{blocks:?}");
        let Block::RowReduction {
            op: 1,
            epilogue: block,
        } = &blocks[1]
        else {
            panic!("{blocks:?}");
        };
        assert_eq!(block.ops, vec![2, 3]);
        assert_eq!(block.shape, vec![4, 8]);
        assert_eq!(
            block.outputs,
            vec![TensorId(4)],
            "neither lse nor x - lse is written"
        );

        // Reduced without keeping the axis, nothing can broadcast it back
        // along rows: a reduction of its own.
        let mut flat = ops.clone();
        flat[1].shape = vec![4];
        let blocks = planned(&flat[..2], |_| true, shape_of, &LIMITS);
        assert!(
            matches!(
                blocks[1],
                Block::Reduction {
                    op: 1,
                    prologue: None
                }
            ),
            "{blocks:?}"
        );
    }
}
