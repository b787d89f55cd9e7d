//! Settling flushed work: waiting for error scopes, replaying a flush whose
//! scope caught an error, and landing each block's fate on its outputs.
//!
//! A scope does not say which block raised its error, and WebGPU voids a
//! whole submit when one command buffer in it is invalid, so when a flush's
//! scope reports an error the flush is *replayed*: each block runs again
//! from scratch in its own scope and submit, which rewrites everything the
//! voided submit should have written. A block writing several outputs is
//! replayed split along its data dependence (`fusion::split`): one part per
//! output, computing only what that output needs, so an error caught in a
//! part fails exactly the outputs that depend on the op that raised it.
//! What the planner fused is an implementation detail; a failure follows
//! data dependence, never kernel boundaries (contract item 6). Work flushed
//! after it, which may have read what was never written, is replayed too.
//!
//! Natively a scope's result is ready at once; in the browser it arrives
//! later. Until a submission resolves, its outputs are *pending*: a read
//! waits for it. A replayed part found failing taints its outputs, and
//! everything computed from them since, after the fact (late taints).

use futures_util::FutureExt;
use rustc_hash::FxHashMap;

use super::commit::Stale;
use super::faults::Injected;
use super::flush::{Flagged, Part, Step, Submission};
use super::state::{Record, carries_failure};
use super::{DeviceState, State, Taint};
use crate::codegen::CheckOf;
use crate::failure::{FailureId, FailureKind, Root};
use crate::fusion::{self, Block};
use crate::ir::{OpIr, OpKind, TensorId, UnaryOp};
use crate::runtime::{GpuError, GpuErrorKind, Scope};

impl DeviceState {
    /// Resolves every submission whose scopes have all resolved, oldest
    /// first, replaying from the first whose scope reported an error.
    /// Returns the scopes still pending (empty when all are settled).
    pub fn settle(&mut self) -> Vec<Scope> {
        let mut cx = std::task::Context::from_waker(futures_util::task::noop_waker_ref());
        while let Some(front) = self.submissions.front() {
            let waiting: Vec<Scope> = front
                .scope
                .iter()
                .chain(front.runs.iter().flat_map(|r| {
                    let parts = r.parts.iter();
                    parts
                        .clone()
                        .map(|p| &p.scope)
                        .chain(r.flagged.iter().map(|f| &f.scope))
                        .chain(parts.flat_map(|p| p.flagged.iter().map(|f| &f.scope)))
                }))
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
        self.settling.clear();
        Vec::new()
    }

    /// Runs every pending submission not yet replayed again, block by block
    /// and part by part, each part in its own scope and submit: the oldest
    /// one's scope reported an error that may have voided its whole submit,
    /// and the later ones may have read what it never wrote.
    fn replay(&mut self) {
        let mut submissions = std::mem::take(&mut self.submissions);
        for submission in submissions.iter_mut().filter(|s| !s.replayed) {
            // A pipeline compiled under a failing scope may be invalid:
            // compiled anew, its error lands in its own part's scope.
            self.gpu.forget_pipelines(&submission.compiled);
            submission.scope = None;
            submission.replayed = true;
            let ops = &submission.ops;
            for (block, run) in submission.blocks.iter().zip(&mut submission.runs) {
                // What the voided submit flagged is void too: its parts
                // check again.
                for flagged in std::mem::take(&mut run.flagged) {
                    self.retired.push(flagged.checked.flags);
                }
                // Outputs its lowering already failed (as `internal`) keep
                // that failure.
                let records = &self.records;
                let rewrite: Vec<TensorId> = run
                    .live
                    .iter()
                    .copied()
                    .filter(|t| {
                        !records
                            .get(t)
                            .is_some_and(|r| matches!(r.state, State::Failed { .. }))
                    })
                    .collect();
                for (part, outputs) in fusion::split(block, ops, &rewrite) {
                    let steps = part_steps(&run.steps, ops, &part);
                    let inject = run.injected.iter().any(|i| steps.contains(&i.step));
                    for &out in &outputs {
                        self.unwrite(out);
                    }
                    let open = self.gpu.open_scope();
                    let mut encoder = self.gpu.device.encoder();
                    let checked =
                        self.encode(ops, &part, &outputs, inject, &mut encoder, submission.seq);
                    self.submit(encoder, submission.seq);
                    let flagged = self
                        .read_flags(vec![checked])
                        .into_iter()
                        .flatten()
                        .collect();
                    run.parts.push(Part {
                        outputs,
                        steps,
                        compiled: self.gpu.take_compiled_in_scope(),
                        scope: open.close(),
                        flagged,
                    });
                }
            }
        }
        self.submissions = submissions;
    }

    /// Lands a submission's results: a replayed part whose scope reported an
    /// error roots a failure on its outputs; a block that read a tensor
    /// found tainted while settling ran on garbage, and its outputs carry
    /// that failure one op deeper. Everything else is trusted from now on,
    /// and the queue's hold on what the flush read and wrote ends.
    fn resolve(&mut self, submission: Submission) {
        for (block, run) in submission.blocks.iter().zip(&submission.runs) {
            // A commit is decided when its submission settles (`commit`).
            if matches!(block, Block::Commit(_)) {
                self.settle_commit(run, submission.seq);
                continue;
            }
            let errors: Vec<(&Part, GpuError)> = run
                .parts
                .iter()
                .filter_map(|p| p.scope.peek().cloned().flatten().map(|e| (p, e)))
                .collect();
            let mut rooted = self.root_errors(&run.steps, &run.injected, &errors);
            if errors.is_empty() {
                let flagged: Vec<(&Flagged, Option<&[usize]>)> = match run.parts.is_empty() {
                    true => run.flagged.iter().map(|f| (f, None)).collect(),
                    false => run
                        .parts
                        .iter()
                        .flat_map(|p| p.flagged.iter().map(|f| (f, Some(p.steps.as_slice()))))
                        .collect(),
                };
                rooted = self.root_flags(&submission.ops, block, &run.steps, &flagged);
            }
            let (roots, mut failed) = (rooted.failures, rooted.outputs);
            for (&out, taints) in &failed {
                self.add_taints(out, taints.clone());
            }
            // A failure rooted at an op holds for that op's tensor, and those
            // computed from it, even where the kernel computed them inline:
            // left as expressions, the next read would compute them again
            // (an injected fault fires once) and resolve with values the
            // report just said could not be made.
            for (t, taints) in rooted.expressions {
                let expression = self
                    .records
                    .get(&t)
                    .is_some_and(|r| matches!(r.state, State::Expr(_)));
                if expression {
                    self.add_taints(t, taints);
                }
            }
            for root in roots {
                self.graph.prune(root);
            }
            if !self.settling.is_empty() {
                let seq = submission.seq;
                let late = self.propagate(&run.steps, |state, t| state.settling.late(t, seq));
                // Outputs already failed (skipped or refused on the CPU
                // while an input was pending) gain the late failure too: a
                // tensor reached by two failures reports both.
                for &out in &run.outputs {
                    if let Some(taints) = late.get(&out) {
                        self.add_taints(out, taints.clone());
                        failed
                            .entry(out)
                            .or_default()
                            .extend(taints.iter().copied());
                    }
                }
            }
            for &out in &run.outputs {
                if !failed.contains_key(&out) {
                    self.settled(out);
                }
            }
            // Later blocks that read any of these ran on garbage too.
            self.settling.failed.extend(failed);
        }
        for run in submission.runs {
            let parts = run.parts.into_iter().flat_map(|p| p.flagged);
            for flagged in run.flagged.into_iter().chain(parts) {
                self.gpu.release(flagged.checked.flags, &mut self.stats);
            }
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

    /// The failure each output of the failing `errors` parts carries. When
    /// every failing part computes an injected fault's op, each such fault
    /// is rooted at its own op, and the block's later ops carry it one op
    /// deeper each, as they would unfused. A real GPU error is rooted at the
    /// ops every failing part shares (the culprit is among them), at depth
    /// 0.
    fn root_errors(
        &mut self,
        steps: &[Step],
        injected: &[Injected],
        errors: &[(&Part, GpuError)],
    ) -> Rooted {
        let mut failed = FxHashMap::default();
        let Some((_, first)) = errors.first() else {
            return Rooted::default();
        };
        let outputs: Vec<TensorId> = errors
            .iter()
            .flat_map(|(p, _)| p.outputs.iter().copied())
            .collect();
        let explained = errors
            .iter()
            .all(|(p, _)| injected.iter().any(|i| p.steps.contains(&i.step)));
        if explained && !injected.is_empty() {
            let roots: Vec<(usize, FailureId)> = injected
                .iter()
                .map(|i| {
                    let step = &steps[i.step];
                    let failure = self.new_failure(Root {
                        kind: FailureKind::Injected,
                        op: step.op.to_string(),
                        message: format!(
                            "injected {} fault (raised on the GPU as a validation error, the one \
                             kind a program can cause: {})",
                            i.kind.name(),
                            first.message
                        ),
                        registered_at: step.site.as_deref().map(str::to_string),
                    });
                    (i.step, failure)
                })
                .collect();
            let carried = self.propagate_from(steps, &roots, |_, _| Vec::new());
            let mut unexplained = Vec::new();
            for &out in &outputs {
                match carried.get(&out) {
                    Some(taints) => {
                        failed.insert(out, taints.clone());
                    }
                    None => unexplained.push(out),
                }
            }
            let expressions = carried
                .into_iter()
                .filter(|(t, _)| !outputs.contains(t))
                .collect();
            let mut failures: Vec<FailureId> = roots.into_iter().map(|(_, f)| f).collect();
            // The pipelines of parts an injected fault explains are sound:
            // the error was the fault's own command. Kept, so a loop with a
            // failing step does not compile its kernels again each time.
            if !unexplained.is_empty() {
                // A part failed without computing a faulted op's value into
                // this output: a real error besides the injected ones.
                let (failure, _) = self.gpu_failure(steps, errors, first);
                for out in unexplained {
                    failed.insert(out, vec![Taint { failure, depth: 0 }]);
                }
                failures.push(failure);
            }
            return Rooted {
                failures,
                outputs: failed,
                expressions,
            };
        }
        let (failure, culprits) = self.gpu_failure(steps, errors, first);
        let taint = vec![Taint { failure, depth: 0 }];
        for out in outputs {
            failed.insert(out, taint.clone());
        }
        Rooted {
            failures: vec![failure],
            outputs: failed,
            expressions: culprits
                .into_iter()
                .map(|s| (steps[s].output, taint.clone()))
                .collect(),
        }
    }

    /// The failures a block's checks flagged: for each check that failed,
    /// an `index` failure rooted at the op that made it (its position and
    /// value in the report), carried by that op's tensor and by what the
    /// block computed from it, exactly as an injected fault is. A part's
    /// checks name its ops by their place in the part (`Some(steps)`: the
    /// run's steps it computes). Flags that could not be read leave the
    /// outputs untrusted: an `internal` failure on them.
    fn root_flags(
        &mut self,
        ops: &[OpIr],
        block: &Block,
        steps: &[Step],
        flagged: &[(&Flagged, Option<&[usize]>)],
    ) -> Rooted {
        let indices = block.op_indices();
        let mut roots = Vec::new();
        // Each failed check, by the run's step that made it.
        let mut failed = Vec::new();
        for &(f, part) in flagged {
            let words = match f.words.peek() {
                Some(Ok(words)) => words.clone(),
                other => {
                    let why = match other {
                        Some(Err(e)) => e.clone(),
                        _ => "they never came back".to_string(),
                    };
                    let step = f.checked.checks.first().map_or(0, |c| c.op);
                    let step = part.and_then(|p| p.get(step).copied()).unwrap_or(step);
                    let failure = self.new_failure(Root {
                        kind: FailureKind::Internal,
                        op: steps.get(step).map_or("check", |s| s.op).to_string(),
                        message: format!("its kernel's checks could not be read: {why}"),
                        registered_at: None,
                    });
                    roots.push((step, failure));
                    continue;
                }
            };
            for (slot, check) in f.checked.checks.iter().enumerate() {
                let word = words.get(2 * slot).copied().unwrap_or(u32::MAX);
                if word == u32::MAX {
                    continue;
                }
                let step = part
                    .and_then(|p| p.get(check.op).copied())
                    .unwrap_or(check.op);
                let value = words.get(2 * slot + 1).copied().unwrap_or(0);
                failed.push((step, check, word, value));
            }
        }
        let mut origin = vec![false; steps.len()];
        for &(step, ..) in &failed {
            if let Some(o) = origin.get_mut(step) {
                *o = true;
            }
        }
        // Only a block some check of which failed pays for these passes.
        let (reads_failures, below_flags) = match failed.is_empty() {
            true => Default::default(),
            false => (
                steps_reading_failures(&self.records, steps, &[]),
                steps_reading_failures(&self.records, steps, &origin),
            ),
        };
        for (step, check, word, value) in failed {
            let (Some(s), Some(&i)) = (steps.get(step), indices.get(step)) else {
                continue;
            };
            let (kind, message) = match check.of {
                CheckOf::Index { .. } => {
                    let message =
                        self.flag_message(&ops[i], &check.shape, word as usize, value as i32);
                    (FailureKind::Index, message)
                }
                // An operand that an earlier block of this submission
                // failed (its bytes hold what that failure left) is the
                // cause, not this op: the failure it carries reaches this
                // op's dependents as any taint does. So is what an earlier
                // step of this block flagged, for a check that does not
                // look at its operands (an anchor's, a reduction's); an
                // elementwise op's does, so its flag is its own.
                CheckOf::Finite
                    if match ops[i].kind.finite_check_sees_operands() {
                        true => reads_failures.get(step) == Some(&true),
                        false => below_flags.get(step) == Some(&true),
                    } =>
                {
                    continue;
                }
                CheckOf::Finite => {
                    let (at, class) = CheckOf::finite_key(word);
                    (
                        FailureKind::NonFinite,
                        non_finite_message(&ops[i], &check.shape, at, class, &[]),
                    )
                }
            };
            let failure = self.new_failure(Root {
                kind,
                op: s.op.to_string(),
                message,
                registered_at: s.site.as_deref().map(str::to_string),
            });
            roots.push((step, failure));
        }
        if roots.is_empty() {
            return Rooted::default();
        }
        let carried = self.propagate_from(steps, &roots, |_, _| Vec::new());
        let outputs = block.outputs(ops);
        let (outs, expressions): (Vec<_>, Vec<_>) =
            carried.into_iter().partition(|(t, _)| outputs.contains(t));
        Rooted {
            failures: roots.into_iter().map(|(_, f)| f).collect(),
            outputs: outs.into_iter().collect(),
            expressions,
        }
    }

    /// What a failed check of `op` says: for a gather, the index, where it
    /// is in the indices (the flagged flat position of the output, `shape`,
    /// read as the indices' coordinates) and the range it left.
    fn flag_message(&self, op: &OpIr, shape: &[usize], position: usize, value: i32) -> String {
        let OpKind::Gather { axis, batch_dims } = op.kind else {
            return format!("its check failed at position {position} (value {value})");
        };
        let table = self
            .records
            .get(&op.inputs[0])
            .map(|r| r.shape.clone())
            .unwrap_or_default();
        let coords = crate::ir::shape::coords(position, shape);
        let j = (shape.len() + 1).saturating_sub(table.len());
        let at: Vec<usize> = coords[..batch_dims]
            .iter()
            .chain(coords.get(axis..axis + j).unwrap_or(&[]))
            .copied()
            .collect();
        format!(
            "index {value} at {at:?} of the indices is outside [0, {}), the axis {axis} of the table {}",
            table.get(axis).copied().unwrap_or(0),
            crate::ir::shape::display(&table)
        )
    }

    /// A failure for a real GPU error caught in the failing `errors` parts,
    /// rooted at the ops they all share (the culprit is among them), with
    /// the steps it names.
    fn gpu_failure(
        &mut self,
        steps: &[Step],
        errors: &[(&Part, GpuError)],
        first: &GpuError,
    ) -> (FailureId, Vec<usize>) {
        // Pipelines compiled in those parts may be what failed: they leave
        // the cache, and compile anew (their error in their own scope).
        for (part, _) in errors {
            self.gpu.forget_pipelines(&part.compiled);
        }
        // Parts that share no op failed for a reason of the kernel itself
        // (one compiled for all of them): name them all.
        let in_all: Vec<usize> = (0..steps.len())
            .filter(|s| errors.iter().all(|(p, _)| p.steps.contains(s)))
            .collect();
        let shared = match in_all.is_empty() {
            false => in_all,
            true => (0..steps.len())
                .filter(|s| errors.iter().any(|(p, _)| p.steps.contains(s)))
                .collect(),
        };
        let failure = self.new_failure(Root {
            kind: failure_kind(first.kind),
            op: crate::ir::fused_name(shared.iter().map(|&s| steps[s].op)),
            message: first.message.clone(),
            registered_at: shared
                .last()
                .and_then(|&s| steps[s].site.as_deref())
                .map(str::to_string),
        });
        (failure, shared)
    }

    /// For each step in order, the failures its output carries: those of its
    /// inputs (per `known`, or tainted earlier in these steps), one op deeper.
    /// Records a skip per failure: the op, the input that carried it, the
    /// output it would have written. A failure reaching a step through two
    /// inputs is recorded once, through the deeper one.
    pub(crate) fn propagate(
        &mut self,
        steps: &[Step],
        known: impl Fn(&Self, TensorId) -> Vec<Taint>,
    ) -> FxHashMap<TensorId, Vec<Taint>> {
        self.propagate_from(steps, &[], known)
    }

    /// `propagate`, with the ops at the steps of `roots` failing themselves:
    /// each one's output carries its failure at depth 0, besides what its
    /// inputs bring.
    pub(super) fn propagate_from(
        &mut self,
        steps: &[Step],
        roots: &[(usize, FailureId)],
        known: impl Fn(&Self, TensorId) -> Vec<Taint>,
    ) -> FxHashMap<TensorId, Vec<Taint>> {
        let mut tainted: FxHashMap<TensorId, Vec<Taint>> = FxHashMap::default();
        for (s, step) in steps.iter().enumerate() {
            let own: Vec<Taint> = roots
                .iter()
                .filter(|(r, _)| *r == s)
                .map(|&(_, failure)| Taint { failure, depth: 0 })
                .collect();
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
            reached.retain(|(t, _)| !own.iter().any(|o| o.failure == t.failure));
            if reached.is_empty() && own.is_empty() {
                continue;
            }
            let mut out = own;
            for (taint, needed) in reached {
                out.extend(self.skip(step.op, needed, step.output, &[taint]));
            }
            tainted.insert(step.output, out);
        }
        tainted
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
}

/// What settling found, for the blocks of submissions still pending that
/// read it: tensors found failed after blocks flushed on top of them ran
/// (on garbage), and commits decided against after blocks read their new
/// value (never committed). Emptied once nothing is pending: blocks
/// flushed after a decision read what it decided. The one table a pending
/// block's late fate is looked up in (`late`).
#[derive(Default)]
pub(crate) struct Settling {
    pub failed: FxHashMap<TensorId, Vec<Taint>>,
    pub stale: Vec<Stale>,
}

impl Settling {
    /// What `id` was found to carry, as blocks of submission `seq` read it:
    /// a late failure, or a commit decided against after they were flushed.
    pub fn late(&self, id: TensorId, seq: u64) -> Vec<Taint> {
        let mut taints = self.failed.get(&id).cloned().unwrap_or_default();
        for stale in &self.stale {
            if stale.id == id && seq < stale.flushed_before {
                taints.extend(stale.taints.iter().copied());
            }
        }
        taints
    }

    pub fn is_empty(&self) -> bool {
        self.failed.is_empty() && self.stale.is_empty()
    }

    pub fn clear(&mut self) {
        self.failed.clear();
        self.stale.clear();
    }
}

/// The kind of failure a GPU error is.
fn failure_kind(kind: GpuErrorKind) -> FailureKind {
    match kind {
        GpuErrorKind::OutOfMemory => FailureKind::OutOfMemory,
        GpuErrorKind::Validation => FailureKind::Validation,
        GpuErrorKind::Internal => FailureKind::Internal,
    }
}

/// What the GPU errors caught in one block's parts root.
#[derive(Default)]
struct Rooted {
    /// The new failures, for the caller to prune once their carriers
    /// carry them.
    failures: Vec<FailureId>,
    /// What each output of a failing part carries.
    outputs: FxHashMap<TensorId, Vec<Taint>>,
    /// What the other tensors the failing parts computed carry: the failed
    /// op's own and those computed from it (an injected fault), or the ops
    /// a GPU error is rooted at. Only those kept as expressions take it:
    /// the rest were never more than values inside the kernel.
    expressions: Vec<(TensorId, Vec<Taint>)>,
}

/// The positions in `steps` of the ops `part` computes.
fn part_steps(steps: &[Step], ops: &[OpIr], part: &fusion::Block) -> Vec<usize> {
    let outputs: Vec<TensorId> = part
        .op_indices()
        .into_iter()
        .map(|i| ops[i].output)
        .collect();
    (0..steps.len())
        .filter(|&s| outputs.contains(&steps[s].output))
        .collect()
}

/// For each of a block's steps, whether it reads a tensor that carries a
/// failure, or what a step of the block whose check failed (`origin`)
/// made, itself or through what earlier steps of the block computed from
/// one (a reduction reads its prologue's value, never in memory; an
/// anchor's or a reduction's check does not see its operands): a
/// non-finite value it makes is then that failure's doing, whatever its
/// own operands were. One pass, in the steps' order.
pub(super) fn steps_reading_failures(
    records: &FxHashMap<TensorId, Record>,
    steps: &[Step],
    origin: &[bool],
) -> Vec<bool> {
    let mut reads: Vec<bool> = Vec::with_capacity(steps.len());
    let mut made: FxHashMap<TensorId, usize> = FxHashMap::default();
    for (j, s) in steps.iter().enumerate() {
        let failed = s.inputs.iter().any(|&t| {
            carries_failure(records, t)
                || made
                    .get(&t)
                    .is_some_and(|&k| reads[k] || origin.get(k) == Some(&true))
        });
        reads.push(failed);
        made.insert(s.output, j);
    }
    reads
}

/// What a failed `Finite` check of `op` says: the value it made, where (the
/// flagged flat position of the block's `shape`, read in `op`'s own shape,
/// which broadcasts to it: an anchor's may be smaller) and that its
/// operands were finite there, with their values where they were kept (the
/// host keeps them; a kernel keeps only the position and the class).
pub(super) fn non_finite_message(
    op: &OpIr,
    shape: &[usize],
    position: usize,
    class: u32,
    operands: &[f32],
) -> String {
    let value = match class {
        0 => "NaN",
        1 => "+Infinity",
        _ => "-Infinity",
    };
    let coords = crate::ir::shape::coords(position, shape);
    let lead = coords.len().saturating_sub(op.shape.len());
    let at: Vec<usize> = coords[lead..]
        .iter()
        .zip(&op.shape)
        .map(|(&c, &d)| if d == 1 { 0 } else { c })
        .collect();
    if op.kind == OpKind::Unary(UnaryOp::CheckNumerics) {
        return format!(
            "a training step would write {value} at {at:?} of a {} value that no op's check \
             flagged (a value the page gave, or one made unchecked): skipNonFinite left every \
             variable as it was",
            crate::ir::shape::display(&op.shape)
        );
    }
    let mut message = format!(
        "it made {value} at {at:?} of its {} result from finite operands",
        crate::ir::shape::display(&op.shape)
    );
    if !operands.is_empty() {
        let shown: Vec<String> = operands
            .iter()
            .map(|&v| crate::error::number_f32(v))
            .collect();
        message.push_str(": ");
        message.push_str(&shown.join(" and "));
    }
    message
}
