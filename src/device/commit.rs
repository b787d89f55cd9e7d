//! Commits: how a training step replaces values all or nothing.
//!
//! A step computes new values for its variables and its optimizer's state
//! (the *guards*), deferred like any work. Each value it replaces is
//! registered as a `commit` op reading the old value and every guard; its
//! output is the new value when no guard carries a failure, and the old
//! value otherwise. So a step whose forward pass, backward pass or update
//! fails anywhere changes nothing: every variable and every moment keeps
//! the value it had, and carries no failure (the step's cost and gradients
//! carry it). A step is never applied in part: its commits read the same
//! guards, so they all decide the same way.
//!
//! When it is decided:
//! - at flush time, on the CPU, when a guard already carries a failure
//!   (skipped, refused past the limits, lost device) or the old value does
//!   (then the output carries it: there is nothing sound to keep);
//! - otherwise the output is written as the new value (an alias of its
//!   memory, no kernel), pending on its submission, and decided again when
//!   that submission settles, once every guard's fate is known (a GPU
//!   error or an injected fault is found only then). A guard found failed
//!   points the output back at the old value.
//!
//! Invariant: work flushed before such a late decision read the output as
//! the new value, which is never committed. Those blocks ran on values the
//! program will never see, so, as they settle, they carry the guard's
//! failure through the commit (`Stale`): steps already flushed on top of a
//! failed step fail whole too, each keeping its old values, and the first
//! step flushed after the decision runs normally. Work flushed after the
//! decision reads the old value and is not touched.

use super::flush::BlockRun;
use super::{Bytes, DeviceState, State, Taint};
use crate::failure::{FailureKind, Root};
use crate::ir::{OpIr, TensorId};

/// A commit output pointed back at its old value as its submission
/// settled: blocks of submissions flushed before that (`seq <
/// flushed_before`) read the uncommitted value, and carry `taints`.
pub(crate) struct Stale {
    pub id: TensorId,
    pub taints: Vec<Taint>,
    pub flushed_before: u64,
}

impl DeviceState {
    /// Decides a commit on the CPU where it can (see the module doc); leaves
    /// `run.live` set when its GPU work (the alias) must be recorded and the
    /// decision waits for the submission to settle.
    pub(super) fn prepare_commit(&mut self, op: &OpIr, run: &mut BlockRun, seq: u64) {
        let (old, out) = (op.inputs[0], op.output);
        let carried = self.failures_of(old, seq);
        if !carried.is_empty() {
            let taints = self.skip("commit", old, out, &carried);
            let pending = self.pending_while_inputs_are(&run.steps, seq);
            self.set_state(out, State::Failed { taints, pending });
            return;
        }
        let failed = op.inputs[1..]
            .iter()
            .any(|&g| !self.failures_of(g, seq).is_empty());
        // A warm-up changes no value, whatever its guards are.
        if failed || self.warming {
            self.keep_old(out, old, Some(seq));
            return;
        }
        run.live = vec![out];
    }

    /// Decides, as its submission settles, a commit that was written as the
    /// new value: kept when every guard was written, else pointed back at
    /// the old value, with blocks flushed since marked as having read the
    /// uncommitted one.
    pub(super) fn settle_commit(&mut self, run: &BlockRun, seq: u64) {
        let Some(step) = run.steps.first() else {
            return;
        };
        let (old, out) = (step.inputs[0], step.output);
        if run.live.is_empty() {
            self.settled(out);
            return;
        }
        // Only a late failure: an old value that is a stale commit output is
        // sound now (it was pointed back), whatever pending readers saw.
        let carried = self.settling.failed.get(&old).cloned().unwrap_or_default();
        if !carried.is_empty() {
            let taints = self.skip("commit", old, out, &carried);
            self.add_taints(out, taints.clone());
            self.settling.failed.insert(out, taints);
            return;
        }
        let failed = step.inputs[1..].iter().find_map(|&g| {
            let taints = self.failures_of(g, seq);
            (!taints.is_empty()).then_some((g, taints))
        });
        let Some((guard, taints)) = failed else {
            self.settled(out);
            return;
        };
        self.keep_old(out, old, None);
        let taints = self.skip("commit", guard, out, &taints);
        self.settling.stale.push(Stale {
            id: out,
            taints,
            flushed_before: self.next_submission,
        });
    }

    /// `out` reads as `old` from now on: an alias of its memory (`old` is an
    /// input of the commit, so the planner wrote it, and the submission's
    /// hold keeps it).
    fn keep_old(&mut self, out: TensorId, old: TensorId, pending: Option<u64>) {
        let empty = |r: &super::Record| {
            matches!(
                r.state,
                State::Written {
                    bytes: Bytes::Empty,
                    ..
                }
            )
        };
        let bytes = match (self.records.get(&old).is_some_and(empty), self.access(old)) {
            (true, _) => Bytes::Empty,
            (_, Some((_, access))) => Bytes::View {
                base: self.owner(old),
                layout: access.layout,
            },
            _ => {
                let root = Root {
                    kind: FailureKind::Internal,
                    op: "commit".to_string(),
                    message: format!("the value {out} was to keep, {old}, has no bytes"),
                    registered_at: None,
                };
                self.root_failure(root, &[out], None);
                return;
            }
        };
        self.set_state(out, State::Written { bytes, pending });
    }
}
