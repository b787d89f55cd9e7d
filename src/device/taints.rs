//! Failures on tensors: making a failure, rooting it on the tensors it
//! stopped, carrying it one op deeper through each op it skipped, and the
//! one question every decision asks, what a tensor carries (`failures_of`).

use super::state::{Bytes, State, Taint};
use super::{DeviceState, MAX_UNREPORTED};
use crate::failure::{FailureId, FailureKind, FailureSummary, Root, Skip, TensorError};
use crate::ir::{DType, TensorId};

impl DeviceState {
    /// A new failure rooted at `root`, reported to the next `sync()`.
    pub fn new_failure(&mut self, root: Root) -> FailureId {
        let failure = self.graph.insert(root.clone());
        // A warm-up's outputs fail by design: nothing went wrong to report.
        if root.kind == FailureKind::Warmup {
            return failure;
        }
        if self.unreported.len() >= MAX_UNREPORTED {
            // A program that never calls `sync()` must not grow this list.
            self.unreported_omitted += 1;
            return failure;
        }
        self.unreported.push(FailureSummary {
            failure,
            root,
            tainted: 0,
        });
        failure
    }

    /// A new failure rooted at `root`, carried by `outputs` at depth 0.
    pub(crate) fn root_failure(&mut self, root: Root, outputs: &[TensorId], pending: Option<u64>) {
        let failure = self.new_failure(root);
        for &out in outputs {
            let taints = vec![Taint { failure, depth: 0 }];
            self.set_state(out, State::Failed { taints, pending });
        }
        self.graph.prune(failure);
    }

    /// Records that `op` did not run because `needed` carried `taints`;
    /// returns what its output carries instead (one op deeper).
    pub fn skip(
        &mut self,
        op: &str,
        needed: TensorId,
        produced: TensorId,
        taints: &[Taint],
    ) -> Vec<Taint> {
        let (graph, records) = (&mut self.graph, &self.records);
        taints
            .iter()
            .map(|taint| {
                graph.skipped(
                    taint.failure,
                    Skip {
                        op: op.to_string(),
                        needed,
                        produced: vec![produced],
                    },
                    &|t| records.get(&t).is_some_and(|r| r.held),
                );
                Taint {
                    failure: taint.failure,
                    depth: taint.depth + 1,
                }
            })
            .collect()
    }

    /// Adds `taints` to what `id` carries: a tensor already failed keeps its
    /// failures and gains the new ones (each failure once); any other state
    /// fails (written bytes, made by work that read garbage, are destroyed,
    /// not pooled: they may be invalid).
    pub fn add_taints(&mut self, id: TensorId, taints: Vec<Taint>) {
        let Some(record) = self.records.get_mut(&id) else {
            return;
        };
        let mut merged = record
            .state
            .taints()
            .map(<[Taint]>::to_vec)
            .unwrap_or_default();
        let before = merged.len();
        for taint in taints {
            if !merged.iter().any(|t| t.failure == taint.failure) {
                merged.push(taint);
            }
        }
        if before > 0 && merged.len() == before {
            return;
        }
        if let State::Written {
            bytes: Bytes::Owned(_),
            ..
        } = record.state
        {
            self.unwrite(id);
        }
        self.set_state(
            id,
            State::Failed {
                taints: merged,
                pending: None,
            },
        );
    }

    /// The failures `id` carries as blocks of submission `seq` read it
    /// (empty when its bytes are, or will be, written): those of its state,
    /// and those settling found since that submission was flushed
    /// (`Settling::late`).
    ///
    /// A view whose base was found tainted while the view's own submission
    /// is still pending carries its base's failures one op deeper: the view
    /// op stands between them (its skip is recorded when that submission
    /// resolves).
    pub fn failures_of(&self, id: TensorId, seq: u64) -> Vec<Taint> {
        let state = self.records.get(&id).map(|r| &r.state);
        let mut taints = match state {
            Some(State::Failed { taints, .. }) => taints.clone(),
            Some(State::Written {
                bytes: Bytes::View { base, .. },
                ..
            }) => match self.records.get(base).and_then(|r| r.state.taints()) {
                Some(taints) => taints
                    .iter()
                    .map(|t| Taint {
                        failure: t.failure,
                        depth: t.depth + 1,
                    })
                    .collect(),
                None => Vec::new(),
            },
            _ => Vec::new(),
        };
        if matches!(state, Some(State::Failed { .. })) {
            return taints;
        }
        for taint in self.settling.late(id, seq) {
            if !taints.iter().any(|t| t.failure == taint.failure) {
                taints.push(taint);
            }
        }
        taints
    }

    /// A tensor moved here from another device while tainted. Each failure
    /// it carried there becomes one here with the same root (its message
    /// naming the device it came from), the source's chain copied, and one
    /// hop more: the move itself. Not reported by this device's `sync()`: no
    /// work of this device failed.
    pub fn adopt_failures(
        &mut self,
        id: TensorId,
        shape: Vec<usize>,
        dtype: DType,
        error: &TensorError,
        from: &str,
    ) {
        self.insert_record(
            id,
            shape,
            dtype,
            None,
            crate::ir::bounds::Derived {
                bounds: None,
                proven: false,
                depth: 0,
            },
        );
        let mut taints = Vec::new();
        for report in &error.failures {
            let failure = self.graph.insert(Root {
                message: format!("{} (on {from}; carried here by `to`)", report.root.message),
                ..report.root.clone()
            });
            // The hops the report kept, and the move: every one is on the
            // new tensor's chain.
            for hop in report.chain.iter().rev() {
                self.graph.skipped(failure, hop.clone(), &|_| true);
            }
            self.graph.skipped(
                failure,
                Skip {
                    op: "to".to_string(),
                    needed: error.tensor,
                    produced: vec![id],
                },
                &|_| true,
            );
            taints.push(Taint {
                failure,
                depth: report.depth + 1,
            });
        }
        self.set_state(
            id,
            State::Failed {
                taints,
                pending: None,
            },
        );
    }
}
