//! A flush: the queue planned into blocks, what the CPU can decide about
//! each block decided before any GPU call, and the GPU work recorded into
//! one submit under one set of error scopes.
//!
//! Decided on the CPU, once, before the block touches the GPU (and kept if
//! the flush is replayed):
//! - an output whose inputs carry failures is skipped (not written); the
//!   skip is recorded on each failure, one op deeper;
//! - what `fusion::refusal` refuses from shapes and limits alone (a buffer
//!   beyond `maxBufferSize`/`maxStorageBufferBindingSize`, work a kernel
//!   cannot index with 32 bits) fails naming the limit, and the GPU is
//!   never asked; a block binding more storage buffers than the device
//!   allows (which the planner should never make) fails as `internal`, on
//!   its outputs only;
//! - an injected fault is assigned to the op it names, if that op runs;
//! - a small block on values the host holds runs there instead, and
//!   becomes host values (`runs_on_host`); a kernel's inputs the host
//!   holds are uploaded for it first.
//!
//! Invariant: a submission keeps its ops, its plan, and the queue's hold on
//! every tensor its ops read until it resolves, so a replay finds its inputs
//! as they were. A buffer freed while its submission is pending (an output
//! nobody holds, a reduction's scratch partials) waits in quarantine until
//! the submission resolves: no buffer a pending submission touches reaches
//! the pool, and one whose submission failed is destroyed, not pooled.

use std::rc::Rc;

use super::faults::{self, Injected};
use super::state::carries_failure;
use super::{Bytes, DeviceState, State};
use crate::codegen::Access;
use crate::failure::{FailureKind, Root};
use crate::fusion::{self, Block, Refusal};
use crate::ir::layout::Layout;
use crate::ir::shape;
use crate::ir::{DType, OpIr, OpKind, ReduceOp, TensorId, Values};
use crate::runtime::host;
use crate::runtime::lower::{Checked, Lowering, Written};
use crate::runtime::{Buffer, Encoder, OpenScope, PendingRead, Scope};
use futures_util::FutureExt;

/// One op of a block, as the failure bookkeeping sees it.
pub(crate) struct Step {
    pub op: &'static str,
    pub inputs: Vec<TensorId>,
    pub output: TensorId,
    /// Where the op was registered, when stacks are captured.
    pub site: Option<Rc<str>>,
}

/// One block of a flush: what the failure bookkeeping needs, decided once
/// on the CPU and kept until its submission resolves.
pub(crate) struct BlockRun {
    pub steps: Vec<Step>,
    /// The tensors it writes to memory.
    pub outputs: Vec<TensorId>,
    /// The outputs its GPU work writes: those no input failure or refused
    /// allocation took. Empty when nothing is left to run.
    pub live: Vec<TensorId>,
    /// Faults injected into it, each tied to its op.
    pub injected: Vec<Injected>,
    /// Once replayed: the parts it ran as, each in its own scope.
    pub parts: Vec<Part>,
    /// The checks its kernel made, on their way back (none once replayed:
    /// each part then has its own).
    pub flagged: Vec<Flagged>,
}

/// A kernel's checks (`runtime::lower::Checked`) being read back after the
/// submit that ran it: settled with the block, like its scope, and turned
/// into failures there (`settle::resolve`).
pub(crate) struct Flagged {
    pub checked: Checked,
    /// The flags' words.
    pub words: futures_util::future::Shared<PendingRead>,
    /// Resolves with `words`: what `settle` waits on, as on a scope.
    pub scope: Scope,
}

/// A piece of a replayed block that writes some of its outputs (with one
/// output, the whole block): what it ran, and what its scope caught.
pub(crate) struct Part {
    pub outputs: Vec<TensorId>,
    /// Indices into the run's steps of the ops it computes.
    pub steps: Vec<usize>,
    pub scope: Scope,
    /// Pipelines compiled in its scope, dropped if the scope failed.
    pub compiled: Vec<String>,
    /// The checks its kernel made, on their way back.
    pub flagged: Vec<Flagged>,
}

impl BlockRun {
    /// Its ops' names joined by `+` (`zeros+add`): how reports name it.
    /// Made when asked for, which is rarely: a block can hold a thousand ops.
    pub fn name(&self) -> String {
        crate::ir::fused_name(self.steps.iter().map(|s| s.op))
    }

    /// Where its last op was registered, when stacks are captured.
    pub fn site(&self) -> Option<String> {
        self.steps.last()?.site.as_deref().map(str::to_string)
    }
}

/// One flush, kept until its scopes resolve.
pub(crate) struct Submission {
    pub seq: u64,
    pub ops: Vec<OpIr>,
    pub blocks: Vec<Block>,
    pub runs: Vec<BlockRun>,
    /// The scope around the whole submit: `None` without error scopes, and
    /// once replayed (each part then has its own).
    pub scope: Option<Scope>,
    /// Pipelines compiled under `scope`.
    pub compiled: Vec<String>,
    pub replayed: bool,
}

impl DeviceState {
    /// Plans everything queued, with the expressions it reads, and runs it
    /// in one submit, under one set of error scopes. What it computes but
    /// need not write stays an expression.
    pub fn flush(&mut self) {
        self.flush_writing(&[]);
    }

    /// `flush`, writing `wanted` too (a read is about to wait for their
    /// bytes), expressions included.
    pub fn flush_writing(&mut self, wanted: &[TensorId]) {
        let wanted: Vec<TensorId> = wanted
            .iter()
            .copied()
            .filter(|t| self.records.get(t).is_some_and(|r| r.state.unwritten()))
            .collect();
        if self.queue.is_empty() && wanted.is_empty() {
            return;
        }
        let queued = self.queue.take();
        let gathered = self.gather(queued, &wanted);
        if gathered.ops.is_empty() {
            return;
        }
        let ops = gathered.ops;
        self.stats.flushes += 1;
        let seq = self.next_submission;
        self.next_submission += 1;
        let blocks = if self.lost.is_some() {
            // Nothing runs on a lost device: every queued output carries the
            // loss.
            self.poison_queued(&ops);
            Vec::new()
        } else {
            let records = &self.records;
            let write = &gathered.write;
            fusion::plan(
                &ops,
                &gathered.runs,
                |t| write.contains(&t),
                |t| records.get(&t).map(|r| r.shape.clone()),
                &fusion::Limits {
                    max_storage_buffers: self.max_storage_buffers(),
                    max_row: crate::codegen::REDUCE_CHUNK,
                    max_ops: fusion::MAX_BLOCK_OPS,
                    check_numerics: self.check_numerics,
                },
            )
        };
        let mut runs = Vec::with_capacity(blocks.len());
        let mut scope = None;
        let mut compiled = Vec::new();
        // The GPU is touched from the first block the host does not run
        // that has an output left to write: a flush of host work alone (a
        // thousand ops on sixteen numbers) opens no error scope and submits
        // nothing, which would cost more than the work.
        let mut gpu: Option<(Option<OpenScope>, Encoder)> = None;
        let mut checked = Vec::with_capacity(blocks.len());
        self.gpu.compile_only = self.warming;
        for block in &blocks {
            let mut run = self.steps_of(&ops, block);
            if self.runs_on_host(&ops, block, &run.steps) {
                self.run_on_host(&ops, block, &run);
                checked.push(Vec::new());
                runs.push(run);
                continue;
            }
            // A block whose every output reads a failure, or that the
            // device refuses, is decided here, on the CPU, and touches no
            // GPU: a flush of such blocks alone opens no scope and submits
            // nothing, so it settles at once. With an empty scope, its
            // queue's holds on what it read (and their failures) lasted
            // until something settled again, in the browser a later
            // `sync()` (outside testing found `failuresHeld` above 0 with
            // every tensor disposed).
            let live = match block {
                Block::Commit(_) => Vec::new(),
                _ => {
                    let live = self.skip_failed_inputs(&run, seq);
                    if live.is_empty() || self.refuse(&ops, block, &run, &live, seq) {
                        checked.push(Vec::new());
                        runs.push(run);
                        continue;
                    }
                    live
                }
            };
            let (_, encoder) = gpu.get_or_insert_with(|| {
                // Without error scopes (a benchmark baseline, never the
                // default) the same submit runs unguarded.
                let open = self.error_scopes.then(|| self.gpu.open_scope());
                (open, self.gpu.device.encoder())
            });
            self.prepare(&ops, block, &mut run, live, seq);
            self.profile_start_block();
            checked.push(self.encode(
                &ops,
                block,
                &run.live,
                !run.injected.is_empty(),
                encoder,
                seq,
            ));
            self.profile_block(&run);
            runs.push(run);
        }
        self.gpu.compile_only = false;
        if let Some((open, encoder)) = gpu {
            if self.warming {
                // Its kernels' pipelines are compiled; none runs. Failed
                // only now: a block reading an output failed earlier would
                // be skipped, its kernels never compiled.
                for (block, run) in blocks.iter().zip(&runs) {
                    self.warm(block, run);
                }
                drop(encoder);
                let flags = checked.into_iter().flatten().map(|c| c.flags);
                self.retired.extend(flags);
                let empty = self.gpu.device.encoder();
                self.submit(empty, seq);
            } else {
                self.submit(encoder, seq);
                for (run, flagged) in runs.iter_mut().zip(self.read_flags(checked)) {
                    run.flagged = flagged;
                }
            }
            compiled = self.gpu.take_compiled_in_scope();
            scope = open.map(|open| open.close());
        }
        self.keep_expressions(&ops, gathered.prepended, &blocks);
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

    pub(crate) fn max_storage_buffers(&self) -> usize {
        self.gpu.limits.max_storage_buffers_per_shader_stage as usize
    }

    /// The most bytes a kernel binds in one buffer: what a table the host
    /// makes at registration for a kernel (a resize's sources) must fit.
    pub(crate) fn max_binding_size(&self) -> u64 {
        self.gpu.limits.max_storage_buffer_binding_size
    }

    /// The limits every block is held to before any GPU call.
    fn device_limits(&self) -> fusion::DeviceLimits {
        fusion::DeviceLimits {
            max_buffer_size: self.gpu.limits.max_buffer_size,
            max_binding_size: self.max_binding_size(),
            max_storage_buffers: self.max_storage_buffers(),
            check_numerics: self.check_numerics,
        }
    }

    /// `block`'s steps, nothing decided yet.
    fn steps_of(&self, ops: &[OpIr], block: &Block) -> BlockRun {
        let capture = self.capture_stacks;
        let steps: Vec<Step> = block
            .op_indices()
            .iter()
            .map(|&i| Step {
                op: ops[i].kind.name(),
                inputs: ops[i].inputs.clone(),
                output: ops[i].output,
                site: match capture {
                    true => self
                        .records
                        .get(&ops[i].output)
                        .and_then(|r| r.site.clone()),
                    false => None,
                },
            })
            .collect();
        BlockRun {
            steps,
            outputs: block.outputs(ops),
            live: Vec::new(),
            injected: Vec::new(),
            parts: Vec::new(),
            flagged: Vec::new(),
        }
    }

    /// Readies `block`, which the host does not run, for encoding, inside
    /// the flush's scope: its host inputs uploaded, a commit decided
    /// (`prepare_commit`), faults assigned. `live`: the outputs left to
    /// write, neither skipped nor refused (empty for a commit, which
    /// decides its own).
    fn prepare(
        &mut self,
        ops: &[OpIr],
        block: &Block,
        run: &mut BlockRun,
        live: Vec<TensorId>,
        seq: u64,
    ) {
        self.upload_host_inputs(&run.steps);
        if let Block::Commit(i) = block {
            self.prepare_commit(&ops[*i], run, seq);
            return;
        }
        if !self.warming {
            run.injected = self.assign_faults(&run.steps, &live);
        }
        run.live = live;
    }

    /// Skips the ops that read a tensor carrying a failure: the outputs
    /// they reach fail, one op deeper per op (each skip recorded), pending
    /// while an input is. Returns the outputs left to write.
    fn skip_failed_inputs(&mut self, run: &BlockRun, seq: u64) -> Vec<TensorId> {
        let tainted = self.propagate(&run.steps, |state, t| state.failures_of(t, seq));
        for &out in &run.outputs {
            if let Some(taints) = tainted.get(&out) {
                let pending = self.pending_while_inputs_are(&run.steps, seq);
                let taints = taints.clone();
                self.set_state(out, State::Failed { taints, pending });
            }
        }
        run.outputs
            .iter()
            .copied()
            .filter(|o| !tainted.contains_key(o))
            .collect()
    }

    /// Fails `live` with a new failure when `fusion::refusal` refuses the
    /// block on this device; says whether it did.
    fn refuse(
        &mut self,
        ops: &[OpIr],
        block: &Block,
        run: &BlockRun,
        live: &[TensorId],
        seq: u64,
    ) -> bool {
        // Decided before the block touches the GPU: a value the host holds
        // and has not uploaded yet will be contiguous (`upload_host_inputs`).
        let placed = |t: TensorId| match self.records.get(&t).map(|r| (&r.state, &r.shape)) {
            Some((State::Host { uploaded: None, .. }, shape)) => {
                Some((shape.clone(), Layout::contiguous(shape)))
            }
            _ => self.access(t).map(|(_, a)| (a.shape, a.layout)),
        };
        let Some(refusal) = fusion::refusal(block, ops, placed, &self.device_limits()) else {
            return false;
        };
        let (kind, message, registered_at) = match refusal {
            Refusal::Allocation(message) => {
                (FailureKind::Allocation, message, self.site_of_largest(run))
            }
            Refusal::IndexRange(message) => {
                (FailureKind::IndexRange, message, self.site_of_largest(run))
            }
            Refusal::Bindings(message) => {
                debug_assert!(false, "{message}");
                (FailureKind::Internal, message, run.site())
            }
        };
        let root = Root {
            kind,
            op: run.name(),
            message,
            registered_at,
        };
        let pending = self.pending_while_inputs_are(&run.steps, seq);
        self.root_failure(root, live, pending);
        true
    }

    /// The injected faults this block fires, each tied to its op. Only the
    /// ops that compute a live output can fire one: a fault on a skipped op
    /// would never run, unfused.
    fn assign_faults(&mut self, steps: &[Step], live: &[TensorId]) -> Vec<Injected> {
        if self.faults.is_empty() {
            return Vec::new();
        }
        let producers: Vec<(TensorId, &[TensorId])> = steps
            .iter()
            .map(|s| (s.output, s.inputs.as_slice()))
            .collect();
        let computed = fusion::cone(&producers, live);
        faults::take(&mut self.faults, steps, &computed)
    }

    /// Whether `block` runs on the host (`runtime::host`) rather than as a
    /// kernel: an upload or seeded random values; a view, a join or an
    /// int's fold, a max, a min or an argmax of values the host holds; or an
    /// elementwise block without an anchor whose inputs the host holds;
    /// each of at most `host_max_elements` elements (and a
    /// block of at most `HOST_MAX_WORK` elements times ops). An empty
    /// value is small, a fold's input aside (the host folds only values it
    /// holds, and an empty one is not held: `filled`): it has nothing to
    /// compute and no submission to fail in, so `dataSync()` answers it
    /// as TF.js does; unless the device is kernels-only
    /// (`host_max_elements` 0). A kernel reads it as any empty value, from
    /// the placeholder (`access`). Never a
    /// block with an op a pending injected fault names: a fault is asked of
    /// a kernel, and counting blocks run here toward its `nth` would move
    /// it.
    ///
    /// Nothing else needs deciding for such a block: its inputs carry no
    /// failure and are never pending (only uploads and other host blocks
    /// make host values), and it is far inside every limit.
    fn runs_on_host(&self, ops: &[OpIr], block: &Block, steps: &[Step]) -> bool {
        let max = self.host_max_elements;
        let small = |shape: &[usize]| max > 0 && shape::numel(shape) <= max;
        let on_host = |t: &TensorId| {
            matches!(
                self.records.get(t).map(|r| &r.state),
                Some(State::Host { .. })
            )
        };
        let eligible = match block {
            Block::Upload(i) => small(&ops[*i].shape),
            Block::View(i) => small(&ops[*i].shape) && ops[*i].inputs.iter().all(on_host),
            Block::Cat(i) => small(&ops[*i].shape) && ops[*i].inputs.iter().all(on_host),
            // An int's fold and a max or min are exact in any order; a
            // float's sum is left to the kernel, whose order a sequential
            // fold would not match.
            Block::Reduction {
                op: i,
                prologue: None,
            } => {
                let op = &ops[*i];
                let int = |t: &TensorId| {
                    self.records
                        .get(t)
                        .is_some_and(|r| r.dtype != DType::Float32)
                };
                let folds = match &op.kind {
                    OpKind::Reduce { op: r, .. } => match r {
                        ReduceOp::Max | ReduceOp::Min => true,
                        ReduceOp::Sum | ReduceOp::Prod => op.inputs.iter().all(int),
                        ReduceOp::Mean | ReduceOp::LogSumExp => false,
                    },
                    OpKind::ArgReduce { .. } => true,
                    _ => false,
                };
                // A value the host holds is small already: only small
                // blocks make one.
                let filled = |t: &TensorId| {
                    self.records
                        .get(t)
                        .is_some_and(|r| shape::numel(&r.shape) > 0)
                };
                folds && op.inputs.iter().all(|t| on_host(t) && filled(t))
            }
            // A block that checks indices (a gather) runs as its kernel,
            // which makes them; the host checks numerics itself.
            Block::Elementwise(b) => {
                let work = shape::numel(&b.shape).saturating_mul(b.ops.len());
                small(&b.shape)
                    && work <= super::HOST_MAX_WORK
                    && b.inputs.iter().all(on_host)
                    && !b.checks(ops, false)
            }
            _ => false,
        };
        eligible
            && !self
                .faults
                .iter()
                .any(|f| steps.iter().any(|s| s.op == f.op))
    }

    /// Computes a block `runs_on_host` chose: its outputs become host
    /// values. A block the host cannot compute (a broken invariant) fails as
    /// `internal` on its outputs.
    fn run_on_host(&mut self, ops: &[OpIr], block: &Block, run: &BlockRun) {
        let computed = match block {
            Block::Upload(i) => match &ops[*i].kind {
                OpKind::Upload(values) => Ok(vec![(ops[*i].output, values.clone())]),
                OpKind::Random { dist, seed } => {
                    let values = host::random(*dist, *seed, shape::numel(&ops[*i].shape));
                    Ok(vec![(ops[*i].output, Values::float32(&values))])
                }
                other => Err(format!("`{}` is not made on the host", other.name())),
            }
            .map(host::Computed::unflagged),
            Block::View(i) => {
                let op = &ops[*i];
                match (&op.kind, self.host_values(op.inputs[0])) {
                    (OpKind::View(view), Some((values, shape))) => {
                        host::view(&values, &shape, view, &op.shape)
                            .map(|values| host::Computed::unflagged(vec![(op.output, values)]))
                    }
                    _ => Err(format!("{} is not a view on the host", op.output)),
                }
            }
            Block::Elementwise(b) => {
                // What a kernel would leave as expressions, the host keeps as
                // values: it computed them anyway, they are small, and a
                // read of one later costs nothing.
                let held = |t| {
                    self.records
                        .get(&t)
                        .is_some_and(|r| r.held && r.state.unwritten())
                };
                let numerics = self.check_numerics;
                host::elementwise(b, ops, &|t| self.host_values(t), &held, numerics)
            }
            Block::Cat(i) => {
                let op = &ops[*i];
                let inputs: Option<Vec<_>> =
                    op.inputs.iter().map(|&t| self.host_values(t)).collect();
                match (&op.kind, inputs) {
                    (OpKind::Cat { axis }, Some(inputs)) => host::cat(&inputs, *axis, &op.shape)
                        .map(|values| host::Computed::unflagged(vec![(op.output, values)])),
                    _ => Err(format!("{} is not a join on the host", op.output)),
                }
            }
            Block::Reduction { op: i, .. } => {
                let op = &ops[*i];
                match op.inputs.first().and_then(|&t| self.host_values(t)) {
                    Some((values, shape)) => host::fold(&values, &shape, &op.kind),
                    None => Err(format!("{} is not a fold on the host", op.output)),
                }
                .map(|values| host::Computed::unflagged(vec![(op.output, values)]))
            }
            _ => Err(
                "only uploads, views, joins, folds and elementwise blocks run on the host"
                    .to_string(),
            ),
        };
        match computed {
            Ok(computed) => {
                self.stats.host_ops += run.steps.len() as u64;
                let (failed, roots) = self.root_host_flags(ops, block, run, &computed.flagged);
                for (t, values) in computed.values {
                    match failed.get(&t) {
                        Some(taints) => self.add_taints(t, taints.clone()),
                        None => {
                            let uploaded = None;
                            self.set_state(t, State::Host { values, uploaded });
                        }
                    }
                }
                for root in roots {
                    self.graph.prune(root);
                }
            }
            Err(why) => {
                debug_assert!(false, "the host refused a block it was given: {why}");
                let root = Root {
                    kind: FailureKind::Internal,
                    op: run.name(),
                    message: why,
                    registered_at: run.site(),
                };
                self.root_failure(root, &run.outputs, None);
            }
        }
    }

    /// The `non-finite` failures a host block's check flagged, each rooted
    /// at its op as a kernel's flag is (`settle::root_flags`): what each
    /// tensor the block computed carries of them, and the failures (to
    /// prune once their carriers hold them).
    fn root_host_flags(
        &mut self,
        ops: &[OpIr],
        block: &Block,
        run: &BlockRun,
        flagged: &[host::NonFinite],
    ) -> (
        rustc_hash::FxHashMap<TensorId, Vec<super::Taint>>,
        Vec<crate::failure::FailureId>,
    ) {
        if flagged.is_empty() {
            return Default::default();
        }
        let indices = block.op_indices();
        // A flag of a check that does not look at its operands, below
        // another flag of the block, is that one's doing (as in a kernel:
        // `settle::root_flags`).
        let mut origin = vec![false; run.steps.len()];
        for f in flagged {
            if let Some(o) = origin.get_mut(f.op) {
                *o = true;
            }
        }
        let below = super::settle::steps_reading_failures(&self.records, &run.steps, &origin);
        let mut roots = Vec::new();
        for f in flagged {
            let (Some(step), Some(&i)) = (run.steps.get(f.op), indices.get(f.op)) else {
                continue;
            };
            if !ops[i].kind.finite_check_sees_operands() && below.get(f.op) == Some(&true) {
                continue;
            }
            let root = Root {
                kind: FailureKind::NonFinite,
                op: step.op.to_string(),
                message: super::settle::non_finite_message(
                    &ops[i],
                    &ops[i].shape,
                    f.position,
                    f.class,
                    &f.operands,
                ),
                registered_at: step.site.as_deref().map(str::to_string),
            };
            roots.push((f.op, self.new_failure(root)));
        }
        let carried = self.propagate_from(&run.steps, &roots, |_, _| Vec::new());
        (carried, roots.into_iter().map(|(_, f)| f).collect())
    }

    /// `t`'s values and shape, if the host holds them.
    fn host_values(&self, t: TensorId) -> Option<(Values, Vec<usize>)> {
        let record = self.records.get(&t)?;
        match &record.state {
            State::Host { values, .. } => Some((values.clone(), record.shape.clone())),
            _ => None,
        }
    }

    /// Uploads each input of `steps` the host holds and has not uploaded,
    /// for a kernel to read.
    fn upload_host_inputs(&mut self, steps: &[Step]) {
        for &t in steps.iter().flat_map(|s| &s.inputs) {
            let Some(record) = self.records.get_mut(&t) else {
                continue;
            };
            let State::Host {
                values,
                uploaded: uploaded @ None,
            } = &mut record.state
            else {
                continue;
            };
            // An empty value is read from the placeholder (`access`).
            let bytes = shape::bytes(&record.shape);
            if bytes > 0 {
                *uploaded = Some(self.gpu.upload(&values.words, bytes, &mut self.stats));
            }
        }
    }

    /// Where the op that made `run`'s largest value was registered: the op
    /// a refusal for size is about. Fused with the ops after it, a `zeros`
    /// of 2^36 elements is what asked for the size, not the `add` that
    /// ends the block.
    fn site_of_largest(&self, run: &BlockRun) -> Option<String> {
        let size = |s: &Step| {
            self.records
                .get(&s.output)
                .map_or(0, |r| shape::bytes(&r.shape))
        };
        let largest = run.steps.iter().map(size).max()?;
        let step = run.steps.iter().find(|s| size(s) == largest)?;
        step.site.as_deref().map(str::to_string)
    }

    /// `Some(seq)` when an input of `steps` is still pending. An output failed
    /// on the CPU while an input's submission is pending may yet gain that
    /// submission's failure: it stays pending on this one, so a read waits
    /// to report both. Asked only for outputs that fail here.
    pub(super) fn pending_while_inputs_are(&self, steps: &[Step], seq: u64) -> Option<u64> {
        steps
            .iter()
            .flat_map(|s| &s.inputs)
            .any(|t| {
                self.records
                    .get(t)
                    .is_some_and(|r| r.state.pending().is_some())
            })
            .then_some(seq)
    }

    /// Records `block`'s GPU work writing `live` into `encoder`, pending on
    /// submission `seq`; with `inject`, followed by a genuine validation
    /// error that voids the submit as a real failure would. A block whose
    /// lowering finds a broken invariant records nothing, and its outputs
    /// carry an `internal` failure.
    pub(crate) fn encode(
        &mut self,
        ops: &[OpIr],
        block: &Block,
        live: &[TensorId],
        inject: bool,
        encoder: &mut Encoder,
        seq: u64,
    ) -> Vec<Checked> {
        let mut checked = Vec::new();
        if live.is_empty() {
            return checked;
        }
        let records = &self.records;
        let placeholder = self.gpu.placeholder.clone();
        let inputs = |t: TensorId| {
            access(records, &placeholder, t).or_else(|| {
                // An input that carries a failure: only ops whose outputs
                // are discarded read it.
                let record = records.get(&t)?;
                carries_failure(records, t).then(|| {
                    let layout = Layout::contiguous(&record.shape);
                    let shape = record.shape.clone();
                    let dtype = record.dtype;
                    (
                        placeholder.clone(),
                        Access {
                            shape,
                            layout,
                            dtype,
                        },
                    )
                })
            })
        };
        let finite = |t: TensorId| records.get(&t).is_some_and(|r| r.bounds.is_some());
        let mut lowering = Lowering {
            gpu: &mut self.gpu,
            stats: &mut self.stats,
            encoder,
            retired: &mut self.retired,
            checked: &mut checked,
            finite: self
                .check_numerics
                .then_some(&finite as &dyn Fn(TensorId) -> bool),
        };
        let lowered = lowering.block(ops, block, live, &inputs);
        if inject {
            lowering.gpu.provoke_validation_error(lowering.encoder);
        }
        match lowered {
            Ok(written) => {
                for (t, written) in written {
                    let bytes = match written {
                        Written::Empty => Bytes::Empty,
                        Written::Owned(allocation) => Bytes::Owned(allocation),
                        Written::View { of, layout } => Bytes::View {
                            base: self.owner(of),
                            layout,
                        },
                    };
                    let pending = Some(seq);
                    self.set_state(t, State::Written { bytes, pending });
                }
            }
            Err(why) => {
                debug_assert!(false, "lowering refused a planned block: {why}");
                let root = Root {
                    kind: FailureKind::Internal,
                    op: block_name(ops, block),
                    message: why,
                    registered_at: None,
                };
                self.root_failure(root, live, None);
            }
        }
        checked
    }

    /// Starts reading back the flags of `checked` (each block's kernels'),
    /// encoded in a submit just made: after it, so they hold what its
    /// kernels flagged. One read brings them all back; each kernel's words
    /// are its slice of it.
    pub(super) fn read_flags(&mut self, checked: Vec<Vec<Checked>>) -> Vec<Vec<Flagged>> {
        let ranges: Vec<(&Buffer, u64, u64)> = checked
            .iter()
            .flatten()
            .map(|c| (&c.flags.buffer, 0, 8 * c.checks.len() as u64))
            .collect();
        let all = self.gpu.read_ranges(&ranges, &mut self.stats).shared();
        let mut at = 0;
        checked
            .into_iter()
            .map(|block| {
                block
                    .into_iter()
                    .map(|checked| {
                        let (start, end) = (at, at + 2 * checked.checks.len());
                        at = end;
                        let words: PendingRead = Box::pin(all.clone().map(move |words| {
                            words.and_then(|w| {
                                w.get(start..end)
                                    .map(<[u32]>::to_vec)
                                    .ok_or_else(|| "fewer flags came back than were read".into())
                            })
                        }));
                        let words = words.shared();
                        let done: std::pin::Pin<Box<dyn std::future::Future<Output = _>>> =
                            Box::pin(words.clone().map(|_| None));
                        Flagged {
                            checked,
                            words,
                            scope: done.shared(),
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// The buffer and layout to read `id` through (see `access`).
    pub(crate) fn access(&self, id: TensorId) -> Option<(Buffer, Access)> {
        access(&self.records, &self.gpu.placeholder, id)
    }

    /// The tensor owning `id`'s memory: itself, or the base of its view.
    pub(crate) fn owner(&self, id: TensorId) -> TensorId {
        match self.records.get(&id).map(|r| &r.state) {
            Some(State::Written {
                bytes: Bytes::View { base, .. },
                ..
            }) => *base,
            _ => id,
        }
    }

    /// Submits `encoder` (of submission `seq`). The scratch buffers it used
    /// wait in quarantine with the submission's outputs: if its scope fails
    /// they may be invalid, and must not reach the pool.
    pub(crate) fn submit(&mut self, encoder: Encoder, seq: u64) {
        self.gpu.submit(encoder);
        for allocation in std::mem::take(&mut self.retired) {
            self.quarantine.push((seq, allocation));
        }
    }
}

/// `block`'s ops' names joined by `+`.
fn block_name(ops: &[OpIr], block: &Block) -> String {
    crate::ir::fused_name(block.op_indices().into_iter().map(|i| ops[i].kind.name()))
}

/// The buffer and layout to read `id` through; `None` while it has no
/// bytes. An empty tensor reads as the GPU's placeholder buffer (no kernel
/// indexes into it, but a binding must exist).
pub(crate) fn access(
    records: &rustc_hash::FxHashMap<TensorId, super::Record>,
    placeholder: &Buffer,
    id: TensorId,
) -> Option<(Buffer, Access)> {
    let record = records.get(&id)?;
    let owned = |state: &State| match state {
        State::Written {
            bytes: Bytes::Owned(a),
            ..
        }
        | State::Host {
            uploaded: Some(a), ..
        } => Some(a.buffer.clone()),
        _ => None,
    };
    let (buffer, layout) = match &record.state {
        State::Written {
            bytes: Bytes::Empty,
            ..
        } => (placeholder.clone(), Layout::contiguous(&record.shape)),
        State::Host { .. } if shape::numel(&record.shape) == 0 => {
            (placeholder.clone(), Layout::contiguous(&record.shape))
        }
        State::Written {
            bytes: Bytes::View { base, layout },
            ..
        } => (owned(&records.get(base)?.state)?, layout.clone()),
        state => (owned(state)?, Layout::contiguous(&record.shape)),
    };
    Some((
        buffer,
        Access {
            shape: record.shape.clone(),
            layout,
            dtype: record.dtype,
        },
    ))
}
