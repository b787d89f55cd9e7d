//! Lowering: one planned block into GPU commands. Given where its inputs
//! are, it allocates its outputs, generates its kernels and records them
//! into an encoder, and returns what each output now is.
//!
//! A leaf: it knows nothing of records, failures or submissions. Whether a
//! block should run at all, and what its outputs' data means afterwards, is
//! the device's business (`device::flush`). A lowering that finds a broken
//! invariant (a kernel codegen refused, an operand with no buffer) returns
//! the reason before recording anything, and the device turns it into an
//! `internal` failure on the block's outputs.

use std::borrow::Cow;
use std::rc::Rc;

use crate::codegen::{
    self, Access, CheckOf, Fused, Generator, Group, Kernel, Key, Numerics, REDUCE_CHUNK, Reducer,
    Stage,
};
use crate::fusion::{Block, ElementwiseBlock};
use crate::ir::layout::Layout;
use crate::ir::shape;
use crate::ir::{DType, OpIr, OpKind, TensorId, Values};
use crate::runtime::{Allocation, Buffer, Encoder, Gpu, Stats};

/// What a block's output is once its commands are recorded.
pub enum Written {
    /// No elements: nothing to store.
    Empty,
    /// Its own new buffer, row-major.
    Owned(Allocation),
    /// The memory of the input `of`, read through `layout` (a view).
    View { of: TensorId, layout: Layout },
}

/// Where a block's inputs are: a buffer and how to read it. An input that
/// carries a failure is given as the placeholder buffer (only ops whose
/// outputs are discarded read it, and WebGPU's bounds checks keep that
/// harmless); `None`, an input with no buffer at all, is a broken
/// invariant, and the block is refused.
pub type Inputs<'a> = &'a dyn Fn(TensorId) -> Option<(Buffer, Access)>;

/// The checks one kernel made (`codegen::Check`), and the buffer of their
/// flags: two words per check, the first position that failed it
/// (`u32::MAX` for none) and the value there. Read back after the submit,
/// with the block's scope; the device turns a flag into a failure.
pub struct Checked {
    pub flags: Allocation,
    pub checks: Vec<codegen::Check>,
}

/// The GPU state one block's lowering records into.
pub struct Lowering<'a> {
    pub gpu: &'a mut Gpu,
    pub stats: &'a mut Stats,
    pub encoder: &'a mut Encoder,
    /// Scratch buffers to return to the pool once the encoder is submitted:
    /// an upload later in the same flush writes before the recorded kernels
    /// run, so the pool must not hand them out sooner.
    pub retired: &'a mut Vec<Allocation>,
    /// The checks the block's kernels make, for the device to read.
    pub checked: &'a mut Vec<Checked>,
    /// With the numerics checks on, which tensors are known finite
    /// (`Record::bounds`): an anchor, whose operands its kernel does not
    /// look at, is checked only where they are. `None` with the checks off.
    pub finite: Option<&'a dyn Fn(TensorId) -> bool>,
}

impl Lowering<'_> {
    /// Records `block`, writing `outputs` (the block's outputs that are
    /// still to be written). Returns each output's new data, or why the
    /// block cannot run (then nothing was allocated or recorded).
    pub fn block(
        &mut self,
        ops: &[OpIr],
        block: &Block,
        outputs: &[TensorId],
        inputs: Inputs<'_>,
    ) -> Result<Vec<(TensorId, Written)>, String> {
        // Only outputs a failure took make a group differ from the plan's.
        fn only<'b>(b: &'b ElementwiseBlock, outputs: &[TensorId]) -> Cow<'b, ElementwiseBlock> {
            match outputs == b.outputs.as_slice() {
                true => Cow::Borrowed(b),
                false => Cow::Owned(ElementwiseBlock {
                    outputs: outputs.to_vec(),
                    ..b.clone()
                }),
            }
        }
        let one = |written: Written, i: usize| Ok(vec![(ops[i].output, written)]);
        match block {
            Block::Elementwise(b) => self.elementwise(ops, &only(b, outputs), inputs),
            Block::Matmul { op, epilogue } => {
                self.matmul(ops, *op, &only(epilogue, outputs), inputs)
            }
            Block::RowReduction { op, epilogue } => {
                self.row_reduction(ops, *op, &only(epilogue, outputs), inputs)
            }
            Block::Reduction { op, prologue } => {
                one(self.reduction(ops, *op, prologue.as_ref(), inputs)?, *op)
            }
            Block::Upload(i) => one(self.upload(&ops[*i]), *i),
            Block::View(i) => one(self.view(&ops[*i], inputs)?, *i),
            Block::Copy(i) => one(self.copy_op(&ops[*i], inputs)?, *i),
            Block::Cat(i) => one(self.cat(&ops[*i], inputs)?, *i),
            Block::Commit(i) | Block::Guard(i) => one(self.commit(&ops[*i], inputs)?, *i),
        }
    }

    /// Elementwise ops alone: one kernel over the block's shape.
    fn elementwise(
        &mut self,
        ops: &[OpIr],
        block: &ElementwiseBlock,
        inputs: Inputs<'_>,
    ) -> Result<Vec<(TensorId, Written)>, String> {
        if shape::numel(&block.shape) == 0 {
            return Ok(empty(block));
        }
        let (buffers, accesses) = bind(&block.inputs, inputs)?;
        let group = Group {
            block,
            ops,
            accesses: &accesses,
            anchor: None,
            numerics: self.numerics(None),
        };
        let key = Key::of(Generator::Elementwise, &(), &[Some(&group)]);
        let kernel = self.generate(key, || codegen::elementwise(group));
        refuse_broken(&kernel)?;
        // Generated before anything is allocated or recorded: a broken one
        // refuses the block whole.
        let mut values = Vec::new();
        for (slot, check) in kernel.checks.iter().enumerate() {
            let CheckOf::Index { input } = check.of else {
                continue;
            };
            let access = accesses
                .get(input)
                .ok_or_else(|| format!("check {slot} reads input {input} it does not have"))?;
            let key = Key::of(Generator::FlagValue, &(access, &block.shape, slot), &[]);
            let value = self.generate(key, || codegen::flag_value(access, &block.shape, slot));
            refuse_broken(&value)?;
            values.push((value, buffers[input].clone()));
        }
        let written = self.allocate_outputs(block, &block.outputs);
        let outputs: Vec<&Written> = written.iter().map(|(_, w)| w).collect();
        self.launch_with(&kernel, &buffers, &outputs, &values);
        self.count_fused(block.ops.len());
        Ok(written)
    }

    /// What a group anchored by `anchor` checks: nothing with the checks
    /// off; its ops, and its anchor's value where every operand of the
    /// anchor is known finite and their bounds do not prove it finite (an
    /// elementwise group alone has no anchor).
    fn numerics(&self, anchor: Option<&OpIr>) -> Numerics {
        let Some(finite) = self.finite else {
            return Numerics::Off;
        };
        match anchor {
            Some(op) if !op.proven_finite && op.inputs.iter().all(|&t| finite(t)) => {
                Numerics::OpsAndAnchor
            }
            _ => Numerics::Ops,
        }
    }

    /// A matmul, its epilogue computing what follows on its product in the
    /// same kernel (the product itself written only if it is an output).
    fn matmul(
        &mut self,
        ops: &[OpIr],
        i: usize,
        epilogue: &ElementwiseBlock,
        inputs: Inputs<'_>,
    ) -> Result<Vec<(TensorId, Written)>, String> {
        if shape::numel(&epilogue.shape) == 0 {
            return Ok(empty(epilogue));
        }
        let (mut operand_buffers, mut operands) = bind(&ops[i].inputs, inputs)?;
        let cpu = self.gpu.cpu;
        let conv = match ops[i].kind {
            OpKind::Conv {
                pass,
                geometry,
                depthwise,
            } => Some((pass, geometry, depthwise)),
            _ => None,
        };
        let shape = &ops[i].shape;
        // A right operand the plain kernel reads from a row-major copy: the
        // product is keyed and generated for the copy's layout.
        let stored_b = match (conv, operands.as_mut_slice()) {
            (None, [_, b]) if codegen::copies_right_operand(b, shape, cpu) => {
                let stored = b.clone();
                b.layout = Layout::contiguous(&b.shape);
                Some(stored)
            }
            _ => None,
        };
        let [a, b] = operands.as_slice() else {
            return Err("a matmul reads two operands".into());
        };
        let (buffers, accesses) = bind(&epilogue.inputs, inputs)?;
        let group = Group {
            block: epilogue,
            ops,
            accesses: &accesses,
            anchor: Some(ops[i].output),
            numerics: self.numerics(Some(&ops[i])),
        };
        let key = Key::of(
            Generator::Product,
            &(conv, a, b, shape, cpu),
            &[Some(&group)],
        );
        let kernel = self.generate(key, || match conv {
            Some((pass, geometry, depthwise)) => {
                codegen::conv(pass, geometry, depthwise, [a, b], shape, group, cpu)
            }
            None => codegen::matmul(a, b, shape, group, cpu),
        });
        refuse_broken(&kernel)?;
        if let Some(stored) = stored_b {
            // The copy's buffer goes back once the submit has run.
            if let Written::Owned(copied) = self.copy(&operand_buffers[1], &stored)? {
                operand_buffers[1] = copied.buffer.clone();
                self.retired.push(copied);
            }
        }
        let written = self.allocate_outputs(epilogue, &epilogue.outputs);
        Ok(self.launch_anchored(&kernel, operand_buffers, buffers, written, epilogue))
    }

    /// A reduction of rows, its epilogue running over each row once its
    /// value is known (reading it broadcast), in the same kernel. Its own
    /// value, when written, is the last binding: its shape is not the
    /// block's.
    fn row_reduction(
        &mut self,
        ops: &[OpIr],
        i: usize,
        epilogue: &ElementwiseBlock,
        inputs: Inputs<'_>,
    ) -> Result<Vec<(TensorId, Written)>, String> {
        if shape::numel(&epilogue.shape) == 0 {
            return Ok(empty(epilogue));
        }
        let OpKind::Reduce { op, .. } = &ops[i].kind else {
            return Err(format!("`{}` cannot anchor rows", ops[i].kind.name()));
        };
        let (operand_buffers, operands) = bind(&ops[i].inputs, inputs)?;
        let [x] = operands.as_slice() else {
            return Err("a row reduction reads one operand".into());
        };
        let (buffers, accesses) = bind(&epilogue.inputs, inputs)?;
        let reduced = ops[i].output;
        let write_reduced = epilogue.outputs.contains(&reduced);
        let others: Vec<TensorId> = epilogue
            .outputs
            .iter()
            .copied()
            .filter(|&t| t != reduced)
            .collect();
        let rows = ElementwiseBlock {
            outputs: others.clone(),
            ..epilogue.clone()
        };
        let group = Group {
            block: &rows,
            ops,
            accesses: &accesses,
            anchor: Some(reduced),
            numerics: self.numerics(Some(&ops[i])),
        };
        let last = [x.shape.len() - 1];
        let stage = match codegen::reduces_per_thread(x, &last, self.gpu.cpu) {
            true => Stage::PerThread,
            false => Stage::Whole,
        };
        let fused = Fused::Epilogue(group, write_reduced);
        let reducer = Reducer::Fold(*op);
        let lanes = self.gpu.lanes();
        let key = Key::reduce(x, &last, reducer, stage, &fused, None, lanes);
        let kernel = self.generate(key, || {
            codegen::reduce(x, &last, reducer, stage, fused, None, lanes)
        });
        refuse_broken(&kernel)?;
        let mut written = self.allocate_outputs(epilogue, &others);
        if write_reduced {
            written.push((reduced, self.allocate(&ops[i].shape)));
        }
        Ok(self.launch_anchored(&kernel, operand_buffers, buffers, written, epilogue))
    }

    /// Launches an anchored kernel, binding the anchor's operands, then its
    /// epilogue's inputs, then `written`; the anchor and the epilogue's ops
    /// count as fused. Returns `written`.
    fn launch_anchored(
        &mut self,
        kernel: &Kernel,
        operands: Vec<Buffer>,
        inputs: Vec<Buffer>,
        written: Vec<(TensorId, Written)>,
        epilogue: &ElementwiseBlock,
    ) -> Vec<(TensorId, Written)> {
        let all: Vec<Buffer> = operands.into_iter().chain(inputs).collect();
        let outputs: Vec<&Written> = written.iter().map(|(_, w)| w).collect();
        self.launch(kernel, &all, &outputs);
        self.count_fused(1 + epilogue.ops.len());
        written
    }

    /// A new buffer of `block`'s shape for each of `outputs`.
    fn allocate_outputs(
        &mut self,
        block: &ElementwiseBlock,
        outputs: &[TensorId],
    ) -> Vec<(TensorId, Written)> {
        outputs
            .iter()
            .map(|&t| (t, self.allocate(&block.shape)))
            .collect()
    }

    /// Counts the ops a kernel computed together (`Stats::fused_ops`): only
    /// a kernel of more than one op fused anything.
    fn count_fused(&mut self, ops: usize) {
        if ops > 1 {
            self.stats.fused_ops += ops as u64;
        }
    }

    /// A reduction, argmax or scan of memory, or of what its prologue
    /// computes as each element is loaded, in the same kernel.
    fn reduction(
        &mut self,
        ops: &[OpIr],
        i: usize,
        prologue: Option<&ElementwiseBlock>,
        inputs: Inputs<'_>,
    ) -> Result<Written, String> {
        let op = &ops[i];
        if let OpKind::PoolGrad {
            op: pool,
            size,
            geometry,
        } = op.kind
        {
            let (buffers, accesses) = bind(&op.inputs, inputs)?;
            let how = (pool, size, geometry, &accesses, &op.shape);
            let key = Key::of(Generator::PoolGrad, &how, &[]);
            let kernel = self.generate(key, || {
                codegen::pool_grad(pool, size, geometry, &accesses, &op.shape)
            });
            let written = self.launch_one(&kernel, &buffers, &op.shape)?;
            self.check_written(op, 0, &written);
            return Ok(written);
        }
        let Some(prologue) = prologue else {
            let (buffers, accesses) = bind(&op.inputs[..1], inputs)?;
            return self.fold(op, 0, (&buffers, &accesses[0], None));
        };
        let (buffers, accesses) = bind(&prologue.inputs, inputs)?;
        // What the prologue computes: its last op's value.
        let last = prologue.ops.last().map(|&k| &ops[k]);
        let input = Access {
            shape: prologue.shape.clone(),
            layout: Layout::contiguous(&prologue.shape),
            dtype: last.map_or(DType::Float32, |o| o.dtype),
        };
        let group = Group {
            block: prologue,
            ops,
            accesses: &accesses,
            anchor: None,
            numerics: self.numerics(None),
        };
        let written = self.fold(op, prologue.ops.len(), (&buffers, &input, Some(group)))?;
        self.stats.fused_ops += prologue.ops.len() as u64 + 1;
        Ok(written)
    }

    /// Reduction, argmax or scan `op` (the block's op `at`) of `source`'s
    /// elements, its values checked with the numerics checks on.
    fn fold(
        &mut self,
        op: &OpIr,
        at: usize,
        source: (&[Buffer], &Access, Option<codegen::Group<'_>>),
    ) -> Result<Written, String> {
        let (axes, reducer) = match &op.kind {
            OpKind::Reduce { op, axes } => (axes.clone(), Reducer::Fold(*op)),
            OpKind::ArgReduce { axis, max } => (vec![*axis], Reducer::Arg { max: *max }),
            OpKind::Scan { .. } => {
                let written = self.scan(op, source)?;
                self.check_written(op, at, &written);
                return Ok(written);
            }
            OpKind::Pool {
                op: pool,
                size,
                geometry,
            } => {
                let (buffers, input, prologue) = source;
                let how = (*pool, *size, *geometry, input, &op.shape);
                let key = Key::of(Generator::Pool, &how, &[prologue.as_ref()]);
                let kernel = self.generate(key, || {
                    codegen::pool(*pool, *size, *geometry, input, prologue, &op.shape)
                });
                let written = self.launch_one(&kernel, buffers, &op.shape)?;
                self.check_written(op, at, &written);
                return Ok(written);
            }
            other => return Err(format!("`{}` is not a reduction", other.name())),
        };
        let checked = self.checks_value(op).then_some(codegen::OutputCheck {
            op: at,
            shape: &op.shape,
        });
        self.reduce(source, &axes, reducer, &op.shape, checked)
    }

    /// Running sums or products along an axis, one kernel.
    fn scan(
        &mut self,
        op: &OpIr,
        (buffers, input, prologue): (&[Buffer], &Access, Option<codegen::Group<'_>>),
    ) -> Result<Written, String> {
        let OpKind::Scan {
            op: scan,
            axis,
            exclusive,
            reverse,
        } = op.kind
        else {
            return Err(format!("`{}` is not a scan", op.kind.name()));
        };
        let how = (scan, axis, exclusive, reverse);
        let key = Key::of(Generator::Scan, &(input, how), &[prologue.as_ref()]);
        let kernel = self.generate(key, || {
            codegen::scan(input, prologue, scan, axis, exclusive, reverse)
        });
        self.launch_one(&kernel, buffers, &op.shape)
    }

    /// With the numerics checks on, the float values a reduction, scan or
    /// pool `op` (the block's op `at`) wrote, looked at by a kernel of its
    /// own in the same submit: such kernels have no elementwise group to
    /// check in, and their outputs are mostly small. Only where `op`'s
    /// operands are known finite: a user's NaN passes through.
    fn check_written(&mut self, op: &OpIr, at: usize, written: &Written) {
        let Written::Owned(out) = written else {
            return;
        };
        if !self.checks_value(op) {
            return;
        }
        let key = Key::of(Generator::FiniteScan, &(&op.shape, at), &[]);
        let kernel = self.generate(key, || codegen::finite_scan(&op.shape, at));
        let buffer = out.buffer.clone();
        self.launch(&kernel, &[buffer], &[]);
    }

    /// Whether the float values `op` makes are checked (`numerics`).
    fn checks_value(&self, op: &OpIr) -> bool {
        op.dtype == DType::Float32 && self.numerics(Some(op)) == Numerics::OpsAndAnchor
    }

    /// `kernel` launched on `buffers` into a new tensor of `shape`.
    fn launch_one(
        &mut self,
        kernel: &Kernel,
        buffers: &[Buffer],
        shape: &[usize],
    ) -> Result<Written, String> {
        if shape::numel(shape) == 0 {
            return Ok(Written::Empty);
        }
        refuse_broken(kernel)?;
        let out = self.allocate(shape);
        self.launch(kernel, buffers, &[&out]);
        Ok(out)
    }

    /// An upload, or seeded random values made on the host, in a new buffer.
    fn upload(&mut self, op: &OpIr) -> Written {
        match &op.kind {
            OpKind::Random { dist, seed } => {
                let values = super::host::random(*dist, *seed, shape::numel(&op.shape));
                self.upload_values(&op.shape, &Values::float32(&values).words)
            }
            OpKind::Upload(values) => self.upload_values(&op.shape, &values.words),
            _ => Written::Empty,
        }
    }

    /// A view: its input's memory through a new layout, or a row-major copy
    /// where a layout cannot express it (a reshape of strided memory).
    fn view(&mut self, op: &OpIr, inputs: Inputs<'_>) -> Result<Written, String> {
        let OpKind::View(view) = &op.kind else {
            return Err(format!("`{}` is not a view", op.kind.name()));
        };
        let (buffers, accesses) = bind(&op.inputs, inputs)?;
        let input = &accesses[0];
        if shape::numel(&op.shape) == 0 || shape::numel(&input.shape) == 0 {
            return Ok(Written::Empty);
        }
        match input.layout.view(view, &input.shape, &op.shape) {
            Some(layout) => Ok(Written::View {
                of: op.inputs[0],
                layout,
            }),
            // Copied row-major, which is already the new shape's layout.
            None => self.copy(&buffers[0], input),
        }
    }

    fn copy_op(&mut self, op: &OpIr, inputs: Inputs<'_>) -> Result<Written, String> {
        let (buffers, accesses) = bind(&op.inputs, inputs)?;
        match shape::numel(&op.shape) {
            0 => Ok(Written::Empty),
            _ => self.copy(&buffers[0], &accesses[0]),
        }
    }

    /// Written as the new value; the device points it back at the old one
    /// if a guard turns out failed when the submit settles.
    fn commit(&mut self, op: &OpIr, inputs: Inputs<'_>) -> Result<Written, String> {
        let taken = match op.kind {
            OpKind::Commit { take } => 1 + take,
            _ => 0,
        };
        let (_, accesses) = bind(&op.inputs, inputs)?;
        match (shape::numel(&op.shape), accesses.get(taken)) {
            (0, _) => Ok(Written::Empty),
            (_, Some(access)) => Ok(Written::View {
                of: op.inputs[taken],
                layout: access.layout.clone(),
            }),
            (_, None) => Err(format!("`{}` lacks input {taken}", op.kind.name())),
        }
    }

    /// The inputs joined along the axis: one copy kernel each into its
    /// place in the output.
    fn cat(&mut self, op: &OpIr, inputs: Inputs<'_>) -> Result<Written, String> {
        let OpKind::Cat { axis } = op.kind else {
            return Err(format!("`{}` is not a cat", op.kind.name()));
        };
        let (buffers, accesses) = bind(&op.inputs, inputs)?;
        let mut dst = Layout::contiguous(&op.shape);
        let mut kernels = Vec::new();
        for access in &accesses {
            if shape::numel(&access.shape) > 0 {
                let key = Key::of(Generator::Copy, &(access, &dst), &[]);
                let kernel = self.generate(key, || codegen::copy(access, &dst));
                refuse_broken(&kernel)?;
                kernels.push(Some(kernel));
            } else {
                kernels.push(None);
            }
            dst.offset += access.shape[axis] * dst.strides[axis];
        }
        let out = self.allocate(&op.shape);
        for (buffer, kernel) in buffers.iter().zip(&kernels) {
            if let Some(kernel) = kernel {
                self.launch(kernel, std::slice::from_ref(buffer), &[&out]);
            }
        }
        Ok(out)
    }

    /// `input` copied row-major into a new buffer.
    fn copy(&mut self, buffer: &Buffer, input: &Access) -> Result<Written, String> {
        let to = Layout::contiguous(&input.shape);
        let key = Key::of(Generator::Copy, &(input, &to), &[]);
        let kernel = self.generate(key, || codegen::copy(input, &to));
        refuse_broken(&kernel)?;
        let out = self.allocate(&input.shape);
        self.launch(&kernel, std::slice::from_ref(buffer), &[&out]);
        Ok(out)
    }

    /// A reduction of `input` over `axes` into a new tensor of `out_shape`:
    /// one launch, or two when the reduced elements exceed one workgroup's
    /// chunk (partials, then the final values).
    fn reduce(
        &mut self,
        source: (&[Buffer], &Access, Option<codegen::Group<'_>>),
        axes: &[usize],
        reducer: Reducer,
        out_shape: &[usize],
        checked: Option<codegen::OutputCheck<'_>>,
    ) -> Result<Written, String> {
        let (buffers, input, prologue) = source;
        let prologue = prologue.map_or(Fused::None, Fused::Prologue);
        let n_out = shape::numel(out_shape);
        let total: usize = axes.iter().map(|&d| input.shape[d]).product();
        let lanes = self.gpu.lanes();
        if n_out == 0 {
            return Ok(Written::Empty);
        }
        let single = if codegen::reduces_per_thread(input, axes, self.gpu.cpu) {
            Some(Stage::PerThread)
        } else if total <= REDUCE_CHUNK {
            Some(Stage::Whole)
        } else {
            None
        };
        if let Some(stage) = single {
            let key = Key::reduce(
                input,
                axes,
                reducer,
                stage,
                &prologue,
                checked.as_ref(),
                lanes,
            );
            let kernel = self.generate(key, || {
                codegen::reduce(input, axes, reducer, stage, prologue, checked, lanes)
            });
            refuse_broken(&kernel)?;
            let out = self.allocate(out_shape);
            self.launch(&kernel, buffers, &[&out]);
            return Ok(out);
        }
        let splits = total.div_ceil(REDUCE_CHUNK);
        let partial_shape = [n_out, splits];
        let stage = Stage::First { splits };
        let key = Key::reduce(input, axes, reducer, stage, &prologue, None, lanes);
        let first = self.generate(key, || {
            codegen::reduce(input, axes, reducer, stage, prologue, None, lanes)
        });
        let partials = Access {
            shape: partial_shape.to_vec(),
            layout: Layout::contiguous(&partial_shape),
            dtype: input.dtype,
        };
        let stage = Stage::Final;
        let key = Key::reduce(
            &partials,
            &[1],
            reducer,
            stage,
            &Fused::None,
            checked.as_ref(),
            lanes,
        );
        let last = self.generate(key, || {
            codegen::reduce(&partials, &[1], reducer, stage, Fused::None, checked, lanes)
        });
        refuse_broken(&first)?;
        refuse_broken(&last)?;
        let out = self.allocate(out_shape);
        let values = self.allocate(&partial_shape);
        let carried = reducer
            .carries_aux(input.dtype)
            .then(|| self.allocate(&partial_shape));
        let mut outputs = vec![&values];
        outputs.extend(carried.as_ref());
        self.launch(&first, buffers, &outputs);
        let mut scratch = Vec::new();
        for written in std::iter::once(values).chain(carried) {
            if let Written::Owned(a) = written {
                scratch.push(a.buffer.clone());
                self.retired.push(a);
            }
        }
        self.launch(&last, &scratch, &[&out]);
        Ok(out)
    }

    fn upload_values(&mut self, shape: &[usize], words: &[u32]) -> Written {
        match shape::bytes(shape) {
            0 => Written::Empty,
            bytes => Written::Owned(self.gpu.upload(words, bytes, self.stats)),
        }
    }

    /// A new buffer for a kernel to write a tensor of `shape` into, or
    /// `Empty` when it has no elements; its bytes count as written by
    /// kernels (`Stats::bytes_written`). Its size was checked against the
    /// device's limits when the block was prepared.
    fn allocate(&mut self, shape: &[usize]) -> Written {
        self.stats.bytes_written += shape::bytes(shape);
        self.buffer(shape)
    }

    /// A new buffer for a tensor of `shape` (or `Empty`).
    fn buffer(&mut self, shape: &[usize]) -> Written {
        match shape::bytes(shape) {
            0 => Written::Empty,
            bytes => Written::Owned(self.gpu.allocate(bytes, self.stats)),
        }
    }

    /// `make`'s kernel, or the one generated before from the same key
    /// (`codegen::Memo`); a block no key describes generates its own.
    fn generate(&mut self, key: Option<Key>, make: impl FnOnce() -> Kernel) -> Rc<Kernel> {
        if let Some(kernel) = self.gpu.kernels.get(key.as_ref()) {
            return kernel;
        }
        let kernel = Rc::new(make());
        self.gpu.kernels.insert(key, &kernel);
        self.stats.kernels_generated += 1;
        kernel
    }

    /// Launches `kernel` reading `inputs` and writing `outputs`' buffers.
    fn launch(&mut self, kernel: &Kernel, inputs: &[Buffer], outputs: &[&Written]) {
        self.launch_with(kernel, inputs, outputs, &[]);
    }

    /// Launches a kernel on `inputs` and `outputs`, and if it makes checks,
    /// their flags (cleared to "none failed") bound last (where
    /// `codegen`'s `Params::kernel` declares them), then each index check's
    /// `values` kernel (reading the checked input) that writes the value at
    /// the flagged position beside it; the flags go to the device to read
    /// (`checked`).
    fn launch_with(
        &mut self,
        kernel: &Kernel,
        inputs: &[Buffer],
        outputs: &[&Written],
        values: &[(Rc<Kernel>, Buffer)],
    ) {
        let placeholder = self.gpu.placeholder.clone();
        let mut bound: Vec<&Buffer> = inputs.iter().collect();
        for written in outputs {
            match written {
                Written::Owned(a) => bound.push(&a.buffer),
                _ => bound.push(&placeholder),
            }
        }
        if kernel.checks.is_empty() {
            return self.gpu.launch(self.encoder, kernel, &bound, self.stats);
        }
        let words: Vec<u32> = kernel.checks.iter().flat_map(|_| [u32::MAX, 0]).collect();
        let flags = self.gpu.upload(&words, 4 * words.len() as u64, self.stats);
        bound.push(&flags.buffer);
        self.gpu.launch(self.encoder, kernel, &bound, self.stats);
        for (value, buffer) in values {
            self.gpu
                .launch(self.encoder, value, &[buffer, &flags.buffer], self.stats);
        }
        self.checked.push(Checked {
            flags,
            checks: kernel.checks.clone(),
        });
    }
}

/// The buffers of `ids` and how to read them; an input with none is a
/// broken invariant (the device binds the placeholder for inputs that carry
/// failures, so every input of a block it runs has a binding).
fn bind(ids: &[TensorId], inputs: Inputs<'_>) -> Result<(Vec<Buffer>, Vec<Access>), String> {
    ids.iter()
        .map(|&t| inputs(t).ok_or_else(|| format!("{t} has no buffer to bind")))
        .collect::<Result<Vec<_>, String>>()
        .map(|bound| bound.into_iter().unzip())
}

/// The reason codegen gave for not launching `kernel`, if it gave one.
fn refuse_broken(kernel: &Kernel) -> Result<(), String> {
    match &kernel.broken {
        Some(why) => Err(format!("its kernel was not generated: {why}")),
        None => Ok(()),
    }
}

/// Each output of an empty group: nothing to compute or store.
fn empty(block: &ElementwiseBlock) -> Vec<(TensorId, Written)> {
    block.outputs.iter().map(|&t| (t, Written::Empty)).collect()
}
