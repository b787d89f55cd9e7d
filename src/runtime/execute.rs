//! Running flushed work: each flush in one submit under one set of error
//! scopes, and everything a read needs to decide whether bytes can be
//! trusted.
//!
//! A flush's blocks are recorded into one command encoder and submitted
//! once, inside error scopes for out-of-memory, validation and internal
//! errors, so scoping costs the same for a flush of one kernel or fifty.
//! A scope does not say which block raised its error, and WebGPU voids a
//! whole submit when one command buffer in it is invalid, so when a flush's
//! scope reports an error the flush is *replayed*: each block runs again
//! from scratch in its own scope and submit, which isolates the failing
//! block and rewrites everything the voided submit should have written.
//! Work flushed after it, which may have read what was never written, is
//! replayed with it. What can be known on the CPU (a buffer beyond the
//! device's limits, an input that carries a failure) is decided once,
//! before any GPU call.
//!
//! Natively a scope's result is ready at once; in the browser it arrives
//! later. Until a submission resolves, its outputs are *pending*: a read
//! waits for it. A replayed block found failing taints its outputs, and
//! everything computed from them since, after the fact (late taints).
//!
//! Invariant: a submission keeps its ops, its plan, and the queue's hold on
//! every tensor they read and write until it resolves, so a replay finds
//! its inputs as they were (no buffer it reads can reach the pool).

use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::rc::Rc;

use futures_util::FutureExt;

use crate::codegen::{self, Access, Fused, Kernel, REDUCE_CHUNK, Stage};
use crate::device::{Data, DeviceState, Taint};
use crate::failure::{FailureKind, Report, Root};
use crate::fusion::{self, Block, ElementwiseBlock};
use crate::ir::layout::Layout;
use crate::ir::{Distribution, OpIr, OpKind, ReduceOp, TensorId};
use crate::runtime::{Allocation, PendingRead, Scope};
use crate::tensor::shape;

/// One block of a flush: what the failure bookkeeping needs, decided once
/// on the CPU and kept until its submission resolves.
pub struct BlockRun {
    /// Where its last op was registered, when stacks are captured.
    site: Option<Rc<str>>,
    steps: Vec<Step>,
    /// The tensors it writes to memory.
    outputs: Vec<TensorId>,
    /// The outputs its GPU work writes: those no input failure or refused
    /// allocation took. Empty when nothing is left to run.
    live: Vec<TensorId>,
    /// The fault injected into it, if one was.
    injected: Option<FaultKind>,
    /// Its own error scope, once replayed.
    scope: Option<Scope>,
    /// Pipelines compiled in its own scope, once replayed.
    compiled: Vec<String>,
}

impl BlockRun {
    /// Its ops' names joined by `+` (`zeros+add`): how reports name it.
    /// Made when asked for, which is rarely: a block can hold a thousand ops.
    fn name(&self) -> String {
        let names: Vec<&str> = self.steps.iter().map(|s| s.op).collect();
        names.join("+")
    }
}

/// One op of a block, as the failure bookkeeping sees it.
struct Step {
    op: &'static str,
    inputs: Vec<TensorId>,
    output: TensorId,
}

/// One flush, kept until its scopes resolve.
pub struct Submission {
    seq: u64,
    ops: Vec<OpIr>,
    blocks: Vec<Block>,
    runs: Vec<BlockRun>,
    /// The scope around the whole submit: `None` without error scopes, and
    /// once replayed (each run then has its own).
    scope: Option<Scope>,
    /// Pipelines compiled under `scope`.
    compiled: Vec<String>,
    replayed: bool,
}

/// The kinds of fault `inject_fault` can raise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    Validation,
    OutOfMemory,
    Internal,
}

impl FaultKind {
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Validation => "validation",
            FaultKind::OutOfMemory => "out-of-memory",
            FaultKind::Internal => "internal",
        }
    }
}

/// A fault waiting for the `nth` block that contains `op`.
#[derive(Debug, Clone)]
pub struct Fault {
    pub op: String,
    pub nth: usize,
    pub kind: FaultKind,
    seen: usize,
}

impl Fault {
    pub fn new(op: String, nth: usize, kind: FaultKind) -> Fault {
        Fault {
            op,
            nth,
            kind,
            seen: 0,
        }
    }
}

/// What a read does next.
pub enum ReadStep {
    /// Wait for these scopes, then ask again (`reread`).
    Wait(Vec<Scope>),
    /// The bytes were never written.
    Failed(Vec<Report>),
    /// The bytes are on their way.
    Go(PendingRead),
}

impl DeviceState {
    /// Plans everything queued and runs it in one submit, under one set of
    /// error scopes.
    pub fn flush(&mut self) {
        if self.queue.is_empty() {
            return;
        }
        let ops = self.queue.take();
        self.stats.flushes += 1;
        let seq = self.next_submission;
        self.next_submission += 1;
        let blocks = if self.lost.is_some() {
            // Nothing runs on a lost device: every queued output carries the
            // loss.
            self.poison_queued(&ops);
            Vec::new()
        } else {
            let max_storage = self.gpu.limits.max_storage_buffers_per_shader_stage as usize;
            fusion::plan(
                &ops,
                |t| self.records.get(&t).is_some_and(|r| r.held),
                |t| {
                    self.records
                        .get(&t)
                        .map(|r| r.shape.clone())
                        .unwrap_or_default()
                },
                max_storage,
            )
        };
        let mut runs = Vec::with_capacity(blocks.len());
        let mut scope = None;
        let mut compiled = Vec::new();
        if !blocks.is_empty() {
            // Without error scopes (a benchmark baseline, never the default)
            // the same submit runs unguarded.
            let open = self.error_scopes.then(|| self.gpu.open_scope());
            let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
            for block in &blocks {
                let run = self.prepare(&ops, block);
                self.encode(&ops, block, &run, &mut encoder, seq);
                runs.push(run);
            }
            self.submit(encoder);
            compiled = self.gpu.take_compiled_in_scope();
            scope = open.map(|open| open.close());
        }
        self.submissions.push_back(Submission {
            seq,
            ops,
            blocks,
            runs,
            scope,
            compiled,
            replayed: false,
        });
        self.settle();
    }

    /// Decides on the CPU what can be decided before `block` touches the
    /// GPU: outputs whose inputs carry failures are skipped, a buffer beyond
    /// the device's limits is refused, an injected fault is assigned.
    fn prepare(&mut self, ops: &[OpIr], block: &Block) -> BlockRun {
        let (indices, outputs): (Vec<usize>, Vec<TensorId>) = match block {
            Block::Elementwise(b) => (
                b.anchor.iter().chain(&b.ops).copied().collect(),
                b.outputs.clone(),
            ),
            Block::Single(i) => (vec![*i], vec![ops[*i].output]),
            Block::Reduction { op, prologue } => (
                prologue.ops.iter().chain([op]).copied().collect(),
                vec![ops[*op].output],
            ),
        };
        let steps: Vec<Step> = indices
            .iter()
            .map(|&i| Step {
                op: ops[i].kind.name(),
                inputs: ops[i].inputs.clone(),
                output: ops[i].output,
            })
            .collect();
        let last = steps.last().map(|s| s.output);
        let mut run = BlockRun {
            site: last
                .and_then(|t| self.records.get(&t))
                .and_then(|r| r.site.clone()),
            steps,
            outputs,
            live: Vec::new(),
            injected: None,
            scope: None,
            compiled: Vec::new(),
        };

        // Inputs that carry failures: the ops reading them are skipped.
        let tainted = self.propagate(&run.steps, |state, t| state.taints_of(t));
        for &out in &run.outputs {
            if let Some(taints) = tainted.get(&out) {
                self.set_data(out, Data::Failed(taints.clone()), None);
            }
        }
        let live: Vec<TensorId> = run
            .outputs
            .iter()
            .copied()
            .filter(|o| !tainted.contains_key(o))
            .collect();
        if live.is_empty() {
            return run;
        }

        // Buffers beyond the device's limits are refused before any GPU call.
        let out_shape = match block {
            Block::Elementwise(b) => b.shape.clone(),
            Block::Single(i) | Block::Reduction { op: i, .. } => ops[*i].shape.clone(),
        };
        let allocates =
            !matches!(block, Block::Single(i) if matches!(ops[*i].kind, OpKind::View(_)));
        if allocates && let Some(message) = self.beyond_limits(shape::bytes(&out_shape)) {
            let failure = self.new_failure(Root {
                kind: FailureKind::Allocation,
                op: run.name(),
                message,
                registered_at: run.site.as_deref().map(str::to_string),
            });
            for &out in &live {
                self.set_data(out, Data::Failed(vec![Taint { failure, depth: 0 }]), None);
            }
            self.graph.prune(failure);
            return run;
        }
        run.injected = self.take_fault(&run);
        run.live = live;
        run
    }

    /// Records `block`'s GPU work into `encoder`: its live outputs get new
    /// buffers, pending on submission `seq`.
    fn encode(
        &mut self,
        ops: &[OpIr],
        block: &Block,
        run: &BlockRun,
        encoder: &mut wgpu::CommandEncoder,
        seq: u64,
    ) {
        if run.live.is_empty() {
            return;
        }
        match block {
            Block::Elementwise(b) => {
                // Only outputs a failure took make the block differ.
                let written = match run.live == b.outputs {
                    true => Cow::Borrowed(b),
                    false => Cow::Owned(ElementwiseBlock {
                        outputs: run.live.clone(),
                        ..b.clone()
                    }),
                };
                self.run_elementwise(ops, &written, encoder, seq);
            }
            Block::Single(i) => self.run_single(&ops[*i], encoder, seq),
            Block::Reduction { op, prologue } => {
                self.run_reduction(ops, *op, prologue, encoder, seq)
            }
        }
        if run.injected.is_some() {
            self.gpu.provoke_validation_error(encoder);
        }
    }

    /// Runs every pending submission again, block by block, each block in
    /// its own scope and submit: the oldest one's scope reported an error
    /// that may have voided its whole submit, and the later ones may have
    /// read what it never wrote.
    fn replay(&mut self) {
        let mut submissions = std::mem::take(&mut self.submissions);
        for submission in &mut submissions {
            // A pipeline compiled under a failing scope may be invalid:
            // compiled anew, its error lands in its own block's scope.
            self.gpu.forget_pipelines(&submission.compiled);
            submission.scope = None;
            submission.replayed = true;
            for (block, run) in submission.blocks.iter().zip(&mut submission.runs) {
                if run.live.is_empty() {
                    continue;
                }
                for &out in &run.live {
                    self.unwrite(out);
                }
                let open = self.gpu.open_scope();
                let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
                self.encode(&submission.ops, block, run, &mut encoder, submission.seq);
                self.submit(encoder);
                run.compiled = self.gpu.take_compiled_in_scope();
                run.scope = Some(open.close());
            }
        }
        self.submissions = submissions;
    }

    /// Taints the outputs of ops queued on a lost device.
    fn poison_queued(&mut self, ops: &[OpIr]) {
        let lost = ops.iter().flat_map(|op| &op.inputs).find_map(|&t| {
            match self.records.get(&t).map(|r| &r.data) {
                Some(Data::Failed(taints)) => taints.first().copied(),
                _ => None,
            }
        });
        let reason = self.lost.clone().unwrap_or_default();
        let taint = lost.unwrap_or_else(|| {
            let failure = self.new_failure(Root {
                kind: FailureKind::DeviceLost,
                op: "device".to_string(),
                message: format!("{} was lost: {reason}", self.label),
                registered_at: None,
            });
            Taint { failure, depth: 0 }
        });
        for op in ops {
            self.set_data(op.output, Data::Failed(vec![taint]), None);
        }
        self.graph.prune(taint.failure);
    }

    /// Why a buffer of `bytes` cannot exist on this device, if it cannot.
    fn beyond_limits(&self, bytes: u64) -> Option<String> {
        let limits = &self.gpu.limits;
        if bytes > limits.max_buffer_size {
            Some(format!(
                "{bytes} bytes exceeds maxBufferSize ({})",
                limits.max_buffer_size
            ))
        } else if bytes > limits.max_storage_buffer_binding_size {
            Some(format!(
                "{bytes} bytes exceeds maxStorageBufferBindingSize ({})",
                limits.max_storage_buffer_binding_size
            ))
        } else {
            None
        }
    }

    /// The fault to inject into `run`, if it is the `nth` block containing a
    /// fault's op.
    fn take_fault(&mut self, run: &BlockRun) -> Option<FaultKind> {
        let hit = self.faults.iter_mut().position(|fault| {
            let contains = run.steps.iter().any(|s| s.op == fault.op) || run.name() == fault.op;
            if contains {
                fault.seen += 1;
            }
            contains && fault.seen == fault.nth
        })?;
        Some(self.faults.remove(hit).kind)
    }

    /// For each step in order, the failures its output carries: those of its
    /// inputs (per `known`, or tainted earlier in these steps), one op deeper.
    /// Records a skip per failure: the op, the input that carried it, the
    /// output it would have written. A failure reaching a step through two
    /// inputs is recorded once, through the deeper one.
    fn propagate(
        &mut self,
        steps: &[Step],
        known: impl Fn(&Self, TensorId) -> Vec<Taint>,
    ) -> FxHashMap<TensorId, Vec<Taint>> {
        let mut tainted: FxHashMap<TensorId, Vec<Taint>> = FxHashMap::default();
        for step in steps {
            let mut reached: Vec<(Taint, TensorId)> = Vec::new();
            for &input in &step.inputs {
                let taints = tainted
                    .get(&input)
                    .cloned()
                    .unwrap_or_else(|| known(self, input));
                for taint in taints {
                    match reached.iter_mut().find(|(t, _)| t.failure == taint.failure) {
                        Some(entry) if taint.depth > entry.0.depth => *entry = (taint, input),
                        Some(_) => {}
                        None => reached.push((taint, input)),
                    }
                }
            }
            if reached.is_empty() {
                continue;
            }
            let out: Vec<Taint> = reached
                .into_iter()
                .flat_map(|(taint, needed)| self.skip(step.op, needed, step.output, &[taint]))
                .collect();
            tainted.insert(step.output, out);
        }
        tainted
    }

    /// Resolves every submission whose scopes have all resolved, oldest
    /// first, replaying from the first whose scope reported an error.
    /// Returns the scopes still pending (empty when all are settled).
    pub fn settle(&mut self) -> Vec<Scope> {
        let mut cx = std::task::Context::from_waker(futures_util::task::noop_waker_ref());
        while let Some(front) = self.submissions.front() {
            let waiting: Vec<Scope> = front
                .scope
                .iter()
                .chain(front.runs.iter().filter_map(|r| r.scope.as_ref()))
                .filter(|scope| (*scope).clone().poll_unpin(&mut cx).is_pending())
                .cloned()
                .collect();
            if !waiting.is_empty() {
                return waiting;
            }
            if front
                .scope
                .as_ref()
                .is_some_and(|s| matches!(s.peek(), Some(Some(_))))
            {
                self.replay();
                continue;
            }
            if let Some(submission) = self.submissions.pop_front() {
                self.resolve(submission);
            }
        }
        self.late_taints.clear();
        Vec::new()
    }

    /// Lands a submission's results: a replayed block whose scope reported
    /// an error roots a new failure on its outputs; a block that read a
    /// tensor found tainted while settling ran on garbage, and its outputs
    /// carry that failure one op deeper. Everything else is trusted from now
    /// on, and the queue's hold on what the flush read and wrote ends.
    fn resolve(&mut self, submission: Submission) {
        for run in submission.runs {
            let error = run.scope.as_ref().and_then(|s| s.peek().cloned().flatten());
            let failed: FxHashMap<TensorId, Vec<Taint>> = match error {
                Some(error) => {
                    self.gpu.forget_pipelines(&run.compiled);
                    let (kind, message) = match run.injected {
                        Some(fault) => (
                            FailureKind::Injected,
                            format!(
                                "injected {} fault (raised on the GPU as: {})",
                                fault.name(),
                                error.message
                            ),
                        ),
                        None => (error.kind, error.message),
                    };
                    let failure = self.new_failure(Root {
                        kind,
                        op: run.name(),
                        message,
                        registered_at: run.site.as_deref().map(str::to_string),
                    });
                    let taint = vec![Taint { failure, depth: 0 }];
                    let failed: FxHashMap<TensorId, Vec<Taint>> =
                        run.live.iter().map(|&o| (o, taint.clone())).collect();
                    for (&out, taints) in &failed {
                        self.fail_written(out, taints.clone());
                    }
                    self.graph.prune(failure);
                    failed
                }
                None if run.live.is_empty() || self.late_taints.is_empty() => FxHashMap::default(),
                None => {
                    let failed = self.propagate(&run.steps, |state, t| {
                        state.late_taints.get(&t).cloned().unwrap_or_default()
                    });
                    for &out in &run.live {
                        if let Some(taints) = failed.get(&out) {
                            self.fail_written(out, taints.clone());
                        }
                    }
                    failed
                }
            };
            for &out in &run.outputs {
                if !failed.contains_key(&out)
                    && let Some(record) = self.records.get_mut(&out)
                {
                    record.pending = None;
                }
            }
            // Later blocks that read any of these ran on garbage too.
            self.late_taints.extend(failed);
        }
        // Buffers freed while pending: possibly invalid if a scope failed.
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.quarantine)
            .into_iter()
            .partition(|(seq, _)| *seq == submission.seq);
        self.quarantine = rest;
        for (_, allocation) in mine {
            if submission.replayed {
                self.gpu.forget(allocation, &mut self.stats);
            } else {
                self.gpu.release(allocation, &mut self.stats);
            }
        }
        self.release_ops(&submission.ops);
    }

    /// Ends the queue's hold on what `ops` read and wrote: a tensor nobody
    /// holds any more goes now.
    pub fn release_ops(&mut self, ops: &[OpIr]) {
        for op in ops {
            for &input in &op.inputs {
                self.release_dependent(input);
            }
        }
        for op in ops {
            self.collect(op.output);
        }
    }

    /// Forgets pending work on a lost device (whose tensors already carry
    /// the loss), ending the queue's hold on what it read and wrote.
    pub fn abandon_submissions(&mut self) {
        for submission in std::mem::take(&mut self.submissions) {
            self.release_ops(&submission.ops);
        }
    }

    /// Drops what a tensor's GPU work wrote, before it is written again or
    /// tainted: its buffer may be invalid, so it is destroyed, not pooled.
    fn unwrite(&mut self, id: TensorId) {
        let Some(record) = self.records.get_mut(&id) else {
            return;
        };
        record.pending = None;
        match std::mem::replace(&mut record.data, Data::Unwritten) {
            Data::Owned(allocation) => self.gpu.forget(allocation, &mut self.stats),
            other => self.discard(other, None),
        }
    }

    /// Taints a written tensor after the fact.
    fn fail_written(&mut self, id: TensorId, taints: Vec<Taint>) {
        self.unwrite(id);
        self.set_data(id, Data::Failed(taints), None);
    }

    /// The next step of a read of `id`: flush, then either report the
    /// failures it carries, wait for the scopes its bytes depend on, or
    /// start copying its bytes back.
    pub fn read(&mut self, id: TensorId) -> ReadStep {
        self.flush();
        self.reread(id)
    }

    /// `read` after waiting.
    pub fn reread(&mut self, id: TensorId) -> ReadStep {
        let waiting = self.settle();
        let Some(record) = self.records.get(&id) else {
            return ReadStep::Failed(vec![self.internal_report(id, "its record is gone")]);
        };
        if let Data::Failed(taints) = &record.data {
            let reports = taints
                .iter()
                .filter_map(|t| self.graph.report(t.failure, id, t.depth))
                .collect();
            return ReadStep::Failed(reports);
        }
        if record.pending.is_some() && !waiting.is_empty() {
            return ReadStep::Wait(waiting);
        }
        match self.start_copy(id) {
            Some(read) => ReadStep::Go(read),
            None => ReadStep::Failed(vec![self.internal_report(id, "it was never written")]),
        }
    }

    /// Starts copying `id`'s bytes to the host, made row-major first if it
    /// is a strided view; `None` when it has no bytes to copy.
    fn start_copy(&mut self, id: TensorId) -> Option<PendingRead> {
        let (buffer, access) = self.access(id)?;
        let numel = shape::numel(&access.shape);
        if numel == 0 {
            return Some(self.gpu.read(&buffer, 0, 0));
        }
        if access.layout.is_contiguous(&access.shape) {
            return Some(
                self.gpu
                    .read(&buffer, 4 * access.layout.offset as u64, 4 * numel as u64),
            );
        }
        let temp = self.allocate(&access.shape);
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        let kernel = codegen::copy(&access, &Layout::contiguous(&access.shape));
        self.launch(&mut encoder, &kernel, &[buffer], &[&temp]);
        self.submit(encoder);
        let Data::Owned(temp) = temp else { return None };
        let read = self.gpu.read(&temp.buffer, 0, 4 * numel as u64);
        // The read's copy is submitted: later work cannot overtake it.
        self.gpu.release(temp, &mut self.stats);
        Some(read)
    }

    /// A report for a read that failed for a reason of the runtime's own (a
    /// bug, not a GPU failure): carried by nothing, named all the same.
    pub fn internal_report(&mut self, id: TensorId, why: &str) -> Report {
        let root = Root {
            kind: FailureKind::Internal,
            op: "read".to_string(),
            message: format!("{id} could not be read: {why}"),
            registered_at: None,
        };
        let failure = self.graph.insert(root.clone());
        self.graph.prune(failure);
        Report {
            failure,
            carriers: 0,
            depth: 0,
            chain: Vec::new(),
            dropped: 0,
            root,
        }
    }

    /// The buffer and layout to read `id` through; `None` while unwritten.
    /// An empty tensor reads as the GPU's placeholder buffer (no kernel
    /// indexes into it, but a binding must exist).
    pub fn access(&self, id: TensorId) -> Option<(wgpu::Buffer, Access)> {
        let record = self.records.get(&id)?;
        let (buffer, layout) = match &record.data {
            Data::Unwritten | Data::Failed(_) => return None,
            Data::Empty => (
                self.gpu.placeholder.clone(),
                Layout::contiguous(&record.shape),
            ),
            Data::Owned(a) => (a.buffer.clone(), Layout::contiguous(&record.shape)),
            Data::View { base, layout } => match &self.records.get(base)?.data {
                Data::Owned(a) => (a.buffer.clone(), layout.clone()),
                _ => return None,
            },
        };
        Some((
            buffer,
            Access {
                shape: record.shape.clone(),
                layout,
            },
        ))
    }

    /// A new buffer for a tensor of `shape`, or `Empty` when it has no
    /// elements.
    fn allocate(&mut self, shape: &[usize]) -> Data {
        match shape::numel(shape) {
            0 => Data::Empty,
            n => Data::Owned(self.gpu.allocate(4 * n as u64, &mut self.stats)),
        }
    }

    /// Launches `kernel` reading `inputs` and writing `outputs`' buffers.
    fn launch(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        kernel: &Kernel,
        inputs: &[wgpu::Buffer],
        outputs: &[&Data],
    ) {
        let placeholder = self.gpu.placeholder.clone();
        let mut buffers: Vec<&wgpu::Buffer> = inputs.iter().collect();
        for data in outputs {
            match data {
                Data::Owned(a) => buffers.push(&a.buffer),
                _ => buffers.push(&placeholder),
            }
        }
        self.gpu.launch(encoder, kernel, &buffers, &mut self.stats);
    }

    /// The buffers of `inputs` and how to read them. An input that carries a
    /// failure binds the placeholder: only ops whose outputs are discarded
    /// read it, and WebGPU's bounds checks keep those reads harmless.
    fn input_buffers(&self, inputs: &[TensorId]) -> (Vec<wgpu::Buffer>, Vec<Access>) {
        inputs
            .iter()
            .map(|&t| {
                self.access(t).unwrap_or_else(|| {
                    let shape = self
                        .records
                        .get(&t)
                        .map(|r| r.shape.clone())
                        .unwrap_or_default();
                    let layout = Layout::contiguous(&shape);
                    (self.gpu.placeholder.clone(), Access { shape, layout })
                })
            })
            .unzip()
    }

    fn run_elementwise(
        &mut self,
        ops: &[OpIr],
        block: &ElementwiseBlock,
        encoder: &mut wgpu::CommandEncoder,
        seq: u64,
    ) {
        if shape::numel(&block.shape) == 0 {
            for &t in &block.outputs {
                self.set_data(t, Data::Empty, None);
            }
            return;
        }
        // An anchored block's operands (the matmul's two, the reduction's
        // one) come first.
        let operands: Vec<TensorId> = block
            .anchor
            .iter()
            .flat_map(|&i| ops[i].inputs.iter().copied())
            .collect();
        let (operand_buffers, operand_accesses) = self.input_buffers(&operands);
        let (buffers, accesses) = self.input_buffers(&block.inputs);
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
            _ => codegen::elementwise(block, ops, &accesses),
        };
        let mut written: Vec<(TensorId, Data)> = epilogue
            .outputs
            .iter()
            .map(|&t| (t, self.allocate(&block.shape)))
            .collect();
        if let Some((i, _, true)) = reduced {
            written.push((ops[i].output, self.allocate(&ops[i].shape)));
        }
        let all: Vec<wgpu::Buffer> = operand_buffers.into_iter().chain(buffers).collect();
        let outputs: Vec<&Data> = written.iter().map(|(_, data)| data).collect();
        self.launch(encoder, &kernel, &all, &outputs);
        let fused = block.ops.len() + usize::from(block.anchor.is_some());
        if fused > 1 {
            self.stats.fused_ops += fused as u64;
        }
        for (t, data) in written {
            self.set_data(t, data, Some(seq));
        }
    }

    /// A reduction whose input is computed by its prologue, in the same
    /// kernel.
    fn run_reduction(
        &mut self,
        ops: &[OpIr],
        i: usize,
        prologue: &ElementwiseBlock,
        encoder: &mut wgpu::CommandEncoder,
        seq: u64,
    ) {
        let op = &ops[i];
        let (axes, reduce, argmax) = match &op.kind {
            OpKind::Reduce { op, axes } => (axes.clone(), *op, false),
            OpKind::Argmax { axis } => (vec![*axis], ReduceOp::Max, true),
            _ => return,
        };
        let (buffers, accesses) = self.input_buffers(&prologue.inputs);
        let input = Access {
            shape: prologue.shape.clone(),
            layout: Layout::contiguous(&prologue.shape),
        };
        let data = self.reduce(
            encoder,
            (&buffers, &input, Some((prologue, ops, &accesses))),
            &axes,
            reduce,
            argmax,
            &op.shape,
        );
        self.stats.fused_ops += prologue.ops.len() as u64 + 1;
        self.set_data(op.output, data, Some(seq));
    }

    fn run_single(&mut self, op: &OpIr, encoder: &mut wgpu::CommandEncoder, seq: u64) {
        let numel = shape::numel(&op.shape);
        let (buffers, accesses) = self.input_buffers(&op.inputs);
        let data = match &op.kind {
            OpKind::Upload(values) => self.upload(&op.shape, values),
            OpKind::Random { dist, seed } => self.upload(&op.shape, &random(*dist, *seed, numel)),
            OpKind::View(view) => {
                let (base, input) = (op.inputs[0], &accesses[0]);
                if numel == 0 || shape::numel(&input.shape) == 0 {
                    Data::Empty
                } else {
                    match input.layout.view(view, &input.shape, &op.shape) {
                        Some(layout) => Data::View {
                            base: self.owner(base),
                            layout,
                        },
                        // A reshape of strided memory: copy it row-major; the
                        // copy already has the new shape's layout.
                        None => {
                            let out = self.allocate(&op.shape);
                            let kernel = codegen::copy(input, &Layout::contiguous(&input.shape));
                            self.launch(encoder, &kernel, &buffers, &[&out]);
                            out
                        }
                    }
                }
            }
            OpKind::Reduce { op: reduce, axes } => self.reduce(
                encoder,
                (&buffers[..1], &accesses[0], None),
                axes,
                *reduce,
                false,
                &op.shape,
            ),
            OpKind::Argmax { axis } => self.reduce(
                encoder,
                (&buffers[..1], &accesses[0], None),
                &[*axis],
                ReduceOp::Max,
                true,
                &op.shape,
            ),
            OpKind::Cat { axis } => {
                let out = self.allocate(&op.shape);
                let mut dst = Layout::contiguous(&op.shape);
                for (buffer, access) in buffers.iter().zip(&accesses) {
                    if shape::numel(&access.shape) > 0 {
                        let kernel = codegen::copy(access, &dst);
                        self.launch(encoder, &kernel, std::slice::from_ref(buffer), &[&out]);
                    }
                    dst.offset += access.shape[*axis] * dst.strides[*axis];
                }
                out
            }
            // Elementwise ops always run in an elementwise block.
            _ => return,
        };
        self.set_data(op.output, data, Some(seq));
    }

    /// A reduction of `input` over `axes` into a new tensor of `out_shape`:
    /// one launch, or two when the reduced elements exceed one workgroup's
    /// chunk (partials, then the final values).
    #[allow(clippy::too_many_arguments)]
    fn reduce(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        source: (&[wgpu::Buffer], &Access, Option<codegen::Group<'_>>),
        axes: &[usize],
        op: ReduceOp,
        argmax: bool,
        out_shape: &[usize],
    ) -> Data {
        let (buffers, input, prologue) = source;
        let prologue = prologue.map_or(Fused::None, Fused::Prologue);
        let out = self.allocate(out_shape);
        let n_out = shape::numel(out_shape);
        let total: usize = axes.iter().map(|&d| input.shape[d]).product();
        if n_out == 0 {
            return out;
        }
        if codegen::reduces_per_thread(input, axes, self.gpu.cpu) {
            let kernel = codegen::reduce(input, axes, op, argmax, Stage::PerThread, prologue);
            self.launch(encoder, &kernel, buffers, &[&out]);
            return out;
        }
        if total <= REDUCE_CHUNK {
            let kernel = codegen::reduce(input, axes, op, argmax, Stage::Whole, prologue);
            self.launch(encoder, &kernel, buffers, &[&out]);
            return out;
        }
        let splits = total.div_ceil(REDUCE_CHUNK);
        let partial_shape = [n_out, splits];
        let values = self.allocate(&partial_shape);
        let indices = if argmax {
            Some(self.allocate(&partial_shape))
        } else {
            None
        };
        let first = codegen::reduce(input, axes, op, argmax, Stage::First { splits }, prologue);
        let mut outputs = vec![&values];
        outputs.extend(indices.as_ref());
        self.launch(encoder, &first, buffers, &outputs);

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
        let mut inputs = Vec::new();
        for data in std::iter::once(values).chain(indices) {
            if let Data::Owned(a) = data {
                inputs.push(a.buffer.clone());
                self.retire(a);
            }
        }
        self.launch(encoder, &last, &inputs, &[&out]);
        out
    }

    /// Returns a scratch buffer to the pool once the work recorded so far is
    /// submitted: an upload later in the same flush writes before the
    /// submitted kernels run, so the pool must not hand the buffer out sooner.
    fn retire(&mut self, allocation: Allocation) {
        self.retired.push(allocation);
    }

    fn submit(&mut self, encoder: wgpu::CommandEncoder) {
        self.gpu.queue.submit([encoder.finish()]);
        for allocation in std::mem::take(&mut self.retired) {
            self.gpu.release(allocation, &mut self.stats);
        }
    }

    fn upload(&mut self, shape: &[usize], values: &[f32]) -> Data {
        let data = self.allocate(shape);
        if let Data::Owned(a) = &data {
            self.gpu
                .queue
                .write_buffer(&a.buffer, 0, bytemuck::cast_slice(values));
        }
        data
    }

    /// The tensor owning `id`'s memory: itself, or the base of its view.
    fn owner(&self, id: TensorId) -> TensorId {
        match self.records.get(&id).map(|r| &r.data) {
            Some(Data::View { base, .. }) => *base,
            _ => id,
        }
    }
}

/// `n` seeded values of `dist`, made with a counter-based generator
/// (splitmix64 of seed and position) and `libm`'s portable math, so the bits
/// are the same natively and in wasm, on every device.
fn random(dist: Distribution, seed: u64, n: usize) -> Vec<f32> {
    let bits = |i: u64| {
        let mut z = seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    // A uniform double in [0, 1) from the top 53 bits.
    let unit = |i: u64| (bits(i) >> 11) as f64 / (1u64 << 53) as f64;
    (0..n as u64)
        .map(|i| match dist {
            Distribution::Uniform { min, max } => {
                let v = min as f64 + (max as f64 - min as f64) * unit(i);
                // Rounding to f32 can land on `max`; keep the interval half-open.
                let v = v as f32;
                if v >= max && max > min {
                    libm::nextafterf(max, min)
                } else {
                    v
                }
            }
            Distribution::Normal { mean, std } => {
                // Box-Muller on two independent uniforms of this position.
                let u1 = 1.0 - unit(2 * i + (1 << 62));
                let u2 = unit(2 * i + 1 + (1 << 62));
                let z =
                    libm::sqrt(-2.0 * libm::log(u1)) * libm::cos(2.0 * std::f64::consts::PI * u2);
                (mean as f64 + std as f64 * z) as f32
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_values_and_another_seed_others() {
        let dist = Distribution::Uniform {
            min: -1.0,
            max: 1.0,
        };
        assert_eq!(random(dist, 7, 100), random(dist, 7, 100));
        assert_ne!(random(dist, 7, 100), random(dist, 8, 100));
        assert!(
            random(dist, 7, 1000)
                .iter()
                .all(|v| (-1.0..1.0).contains(v))
        );
    }

    #[test]
    fn normal_values_have_the_asked_mean_and_spread() {
        let values = random(
            Distribution::Normal {
                mean: 3.0,
                std: 2.0,
            },
            1,
            20_000,
        );
        let mean = values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64;
        let var = values
            .iter()
            .map(|&v| (v as f64 - mean).powi(2))
            .sum::<f64>()
            / values.len() as f64;
        assert!((mean - 3.0).abs() < 0.05, "{mean}");
        assert!((var.sqrt() - 2.0).abs() < 0.05, "{}", var.sqrt());
    }
}
