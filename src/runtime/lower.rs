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

use crate::codegen::{self, Access, Fused, Kernel, REDUCE_CHUNK, Stage};
use crate::fusion::{Block, ElementwiseBlock};
use crate::ir::layout::Layout;
use crate::ir::shape;
use crate::ir::{OpIr, OpKind, ReduceOp, TensorId};
use crate::runtime::{Allocation, Gpu, Stats};

/// What a block's output is once its commands are recorded.
#[derive(Debug)]
pub enum Written {
    /// No elements: nothing to store.
    Empty,
    /// Its own new buffer, row-major.
    Owned(Allocation),
    /// The memory of the input `of`, read through `layout` (a view).
    View { of: TensorId, layout: Layout },
}

/// Where a block's inputs are: a buffer and how to read it, or `None` for
/// an input with no bytes (one that carries a failure: only ops whose
/// outputs are discarded read it, and it binds the placeholder, which
/// WebGPU's bounds checks keep harmless).
pub type Inputs<'a> = &'a dyn Fn(TensorId) -> Option<(wgpu::Buffer, Access)>;

/// The GPU state one block's lowering records into.
pub struct Lowering<'a> {
    pub gpu: &'a mut Gpu,
    pub stats: &'a mut Stats,
    pub encoder: &'a mut wgpu::CommandEncoder,
    /// Scratch buffers to return to the pool once the encoder is submitted:
    /// an upload later in the same flush writes before the recorded kernels
    /// run, so the pool must not hand them out sooner.
    pub retired: &'a mut Vec<Allocation>,
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
        match block {
            Block::Elementwise(b) => {
                // Only outputs a failure took make the block differ.
                let b = match outputs == b.outputs.as_slice() {
                    true => Cow::Borrowed(b),
                    false => Cow::Owned(ElementwiseBlock {
                        outputs: outputs.to_vec(),
                        ..b.clone()
                    }),
                };
                self.elementwise(ops, &b, inputs)
            }
            Block::Single(i) => Ok(vec![(ops[*i].output, self.single(&ops[*i], inputs)?)]),
            Block::Reduction { op, prologue } => {
                let written = self.reduction(ops, *op, prologue, inputs)?;
                Ok(vec![(ops[*op].output, written)])
            }
        }
    }

    fn elementwise(
        &mut self,
        ops: &[OpIr],
        block: &ElementwiseBlock,
        inputs: Inputs<'_>,
    ) -> Result<Vec<(TensorId, Written)>, String> {
        if shape::numel(&block.shape) == 0 {
            return Ok(block.outputs.iter().map(|&t| (t, Written::Empty)).collect());
        }
        // An anchored block's operands (the matmul's two, the reduction's
        // one) come first.
        let operands: Vec<TensorId> = block
            .anchor
            .iter()
            .flat_map(|&i| ops[i].inputs.iter().copied())
            .collect();
        let (operand_buffers, operand_accesses) = bind(&operands, inputs)?;
        let (buffers, accesses) = bind(&block.inputs, inputs)?;
        // A row reduction's own value, when written, is the last binding:
        // its shape is not the block's.
        let reduced = block.anchor.and_then(|i| match &ops[i].kind {
            OpKind::Reduce { op, .. } => Some((i, *op, block.outputs.contains(&ops[i].output))),
            _ => None,
        });
        let epilogue = match reduced {
            Some((i, ..)) => Cow::Owned(ElementwiseBlock {
                outputs: block
                    .outputs
                    .iter()
                    .copied()
                    .filter(|&t| t != ops[i].output)
                    .collect(),
                ..block.clone()
            }),
            None => Cow::Borrowed(block),
        };
        let group = (epilogue.as_ref(), ops, accesses.as_slice());
        let kernel = match (block.anchor, operand_accesses.as_slice(), reduced) {
            (Some(i), [a, b], None) => codegen::matmul(a, b, &ops[i].shape, group),
            (Some(_), [x], Some((_, op, write))) => {
                let last = [x.shape.len() - 1];
                let stage = match codegen::reduces_per_thread(x, &last, self.gpu.cpu) {
                    true => Stage::PerThread,
                    false => Stage::Whole,
                };
                codegen::reduce(x, &last, op, false, stage, Fused::Epilogue(group, write))
            }
            (None, [], None) => codegen::elementwise(block, ops, &accesses),
            _ => return Err("an anchored block's operands do not match its anchor".into()),
        };
        refuse_broken(&kernel)?;
        let mut written: Vec<(TensorId, Written)> = epilogue
            .outputs
            .iter()
            .map(|&t| (t, self.allocate(&block.shape)))
            .collect();
        if let Some((i, _, true)) = reduced {
            written.push((ops[i].output, self.allocate(&ops[i].shape)));
        }
        let all: Vec<wgpu::Buffer> = operand_buffers.into_iter().chain(buffers).collect();
        let outputs: Vec<&Written> = written.iter().map(|(_, w)| w).collect();
        self.launch(&kernel, &all, &outputs);
        let fused = block.ops.len() + usize::from(block.anchor.is_some());
        if fused > 1 {
            self.stats.fused_ops += fused as u64;
        }
        Ok(written)
    }

    /// A reduction whose input is computed by its prologue, in the same
    /// kernel.
    fn reduction(
        &mut self,
        ops: &[OpIr],
        i: usize,
        prologue: &ElementwiseBlock,
        inputs: Inputs<'_>,
    ) -> Result<Written, String> {
        let op = &ops[i];
        let (axes, reduce, argmax) = match &op.kind {
            OpKind::Reduce { op, axes } => (axes.clone(), *op, false),
            OpKind::Argmax { axis } => (vec![*axis], ReduceOp::Max, true),
            other => return Err(format!("`{}` cannot take a prologue", other.name())),
        };
        let (buffers, accesses) = bind(&prologue.inputs, inputs)?;
        let input = Access {
            shape: prologue.shape.clone(),
            layout: Layout::contiguous(&prologue.shape),
        };
        let written = self.reduce(
            (&buffers, &input, Some((prologue, ops, &accesses))),
            &axes,
            reduce,
            argmax,
            &op.shape,
        )?;
        self.stats.fused_ops += prologue.ops.len() as u64 + 1;
        Ok(written)
    }

    fn single(&mut self, op: &OpIr, inputs: Inputs<'_>) -> Result<Written, String> {
        let numel = shape::numel(&op.shape);
        let (buffers, accesses) = bind(&op.inputs, inputs)?;
        match &op.kind {
            OpKind::Upload(values) => Ok(self.upload(&op.shape, values)),
            OpKind::Random { dist, seed } => {
                Ok(self.upload(&op.shape, &super::host::random(*dist, *seed, numel)))
            }
            OpKind::View(view) => {
                let input = &accesses[0];
                if numel == 0 || shape::numel(&input.shape) == 0 {
                    return Ok(Written::Empty);
                }
                match input.layout.view(view, &input.shape, &op.shape) {
                    Some(layout) => Ok(Written::View {
                        of: op.inputs[0],
                        layout,
                    }),
                    // A reshape of strided memory: copied row-major, which is
                    // already the new shape's layout.
                    None => self.copy(&buffers[0], input),
                }
            }
            OpKind::Copy => match numel {
                0 => Ok(Written::Empty),
                _ => self.copy(&buffers[0], &accesses[0]),
            },
            // Written as the new value; the device points it back at the
            // old one if a guard turns out failed when the submit settles.
            OpKind::Commit { .. } | OpKind::Guard => {
                let taken = match op.kind {
                    OpKind::Commit { take } => 1 + take,
                    _ => 0,
                };
                match (numel, accesses.get(taken)) {
                    (0, _) => Ok(Written::Empty),
                    (_, Some(access)) => Ok(Written::View {
                        of: op.inputs[taken],
                        layout: access.layout.clone(),
                    }),
                    (_, None) => Err(format!("`{}` lacks input {taken}", op.kind.name())),
                }
            }
            OpKind::Reduce { op: reduce, axes } => self.reduce(
                (&buffers[..1], &accesses[0], None),
                axes,
                *reduce,
                false,
                &op.shape,
            ),
            OpKind::Argmax { axis } => self.reduce(
                (&buffers[..1], &accesses[0], None),
                &[*axis],
                ReduceOp::Max,
                true,
                &op.shape,
            ),
            OpKind::Cat { axis } => {
                let mut dst = Layout::contiguous(&op.shape);
                let mut kernels = Vec::new();
                for access in &accesses {
                    if shape::numel(&access.shape) > 0 {
                        let kernel = codegen::copy(access, &dst);
                        refuse_broken(&kernel)?;
                        kernels.push(Some(kernel));
                    } else {
                        kernels.push(None);
                    }
                    dst.offset += access.shape[*axis] * dst.strides[*axis];
                }
                let out = self.allocate(&op.shape);
                for (buffer, kernel) in buffers.iter().zip(&kernels) {
                    if let Some(kernel) = kernel {
                        self.launch(kernel, std::slice::from_ref(buffer), &[&out]);
                    }
                }
                Ok(out)
            }
            other => Err(format!(
                "`{}` is elementwise and runs only in an elementwise block",
                other.name()
            )),
        }
    }

    /// `input` copied row-major into a new buffer.
    fn copy(&mut self, buffer: &wgpu::Buffer, input: &Access) -> Result<Written, String> {
        let kernel = codegen::copy(input, &Layout::contiguous(&input.shape));
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
        source: (&[wgpu::Buffer], &Access, Option<codegen::Group<'_>>),
        axes: &[usize],
        op: ReduceOp,
        argmax: bool,
        out_shape: &[usize],
    ) -> Result<Written, String> {
        let (buffers, input, prologue) = source;
        let prologue = prologue.map_or(Fused::None, Fused::Prologue);
        let n_out = shape::numel(out_shape);
        let total: usize = axes.iter().map(|&d| input.shape[d]).product();
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
            let kernel = codegen::reduce(input, axes, op, argmax, stage, prologue);
            refuse_broken(&kernel)?;
            let out = self.allocate(out_shape);
            self.launch(&kernel, buffers, &[&out]);
            return Ok(out);
        }
        let splits = total.div_ceil(REDUCE_CHUNK);
        let partial_shape = [n_out, splits];
        let first = codegen::reduce(input, axes, op, argmax, Stage::First { splits }, prologue);
        let partials = Access {
            shape: partial_shape.to_vec(),
            layout: Layout::contiguous(&partial_shape),
        };
        let last = codegen::reduce(
            &partials,
            &[1],
            op,
            argmax,
            Stage::Final { total },
            Fused::None,
        );
        refuse_broken(&first)?;
        refuse_broken(&last)?;
        let out = self.allocate(out_shape);
        let values = self.allocate(&partial_shape);
        let indices = argmax.then(|| self.allocate(&partial_shape));
        let mut outputs = vec![&values];
        outputs.extend(indices.as_ref());
        self.launch(&first, buffers, &outputs);
        let mut scratch = Vec::new();
        for written in std::iter::once(values).chain(indices) {
            if let Written::Owned(a) = written {
                scratch.push(a.buffer.clone());
                self.retired.push(a);
            }
        }
        self.launch(&last, &scratch, &[&out]);
        Ok(out)
    }

    fn upload(&mut self, shape: &[usize], values: &[f32]) -> Written {
        match shape::bytes(shape) {
            0 => Written::Empty,
            bytes => Written::Owned(self.gpu.upload(values, bytes, self.stats)),
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

    /// Launches `kernel` reading `inputs` and writing `outputs`' buffers.
    fn launch(&mut self, kernel: &Kernel, inputs: &[wgpu::Buffer], outputs: &[&Written]) {
        let placeholder = self.gpu.placeholder.clone();
        let mut buffers: Vec<&wgpu::Buffer> = inputs.iter().collect();
        for written in outputs {
            match written {
                Written::Owned(a) => buffers.push(&a.buffer),
                _ => buffers.push(&placeholder),
            }
        }
        self.gpu.launch(self.encoder, kernel, &buffers, self.stats);
    }
}

/// The buffers of `ids` and how to read them; an input with none is a
/// broken invariant (the device binds the placeholder for inputs that carry
/// failures, so every input of a block it runs has a binding).
fn bind(ids: &[TensorId], inputs: Inputs<'_>) -> Result<(Vec<wgpu::Buffer>, Vec<Access>), String> {
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
