//! A lost device: everything on it is poisoned with one `device-lost`
//! failure, registration is refused, and pending work is forgotten.

use super::DeviceState;
use super::state::{State, Taint};
use crate::error::{ErrorClass, RegistrationError};
use crate::failure::{FailureId, FailureKind, Root};
use crate::ir::{OpIr, TensorId};

impl DeviceState {
    /// Fails registration on a lost device: nothing it queued could run.
    pub fn check_alive(&self, op: &'static str) -> Result<(), RegistrationError> {
        match &self.lost {
            None => Ok(()),
            Some(reason) => Err(RegistrationError::new(
                op,
                ErrorClass::Other,
                format!("{} was lost ({reason}); request a new device", self.label),
            )),
        }
    }

    /// The root of every failure a loss causes, `what` saying what it
    /// stopped (empty when it stopped everything): the one place it is
    /// worded.
    pub(super) fn loss_root(&self, what: &str) -> Root {
        let reason = self.lost.clone().unwrap_or_default();
        Root {
            kind: FailureKind::DeviceLost,
            op: "device".to_string(),
            message: format!("{} was lost{what}: {reason}", self.label),
            registered_at: None,
        }
    }

    /// Notices a loss the GPU reported (its callback only noted why).
    pub(super) fn notice_loss(&mut self) {
        if self.lost.is_some() {
            return;
        }
        if let Some(reason) = self.gpu.device.lost() {
            self.lose(reason);
        }
    }

    /// Poisons everything on this device: each tensor carries one
    /// `device-lost` failure, buffers are dropped (not pooled), pending work
    /// is forgotten.
    pub fn lose(&mut self, reason: String) {
        if self.lost.is_some() {
            return;
        }
        self.lost = Some(reason);
        let failure = self.new_failure(self.loss_root(""));
        self.settling.clear();
        self.retired.clear();
        let ids: Vec<TensorId> = self.records.keys().copied().collect();
        for id in ids {
            self.poison(id, failure);
        }
        self.abandon_submissions();
        // Buffers of a lost device are of no use: drop them, pooled or not.
        for (_, allocation) in std::mem::take(&mut self.quarantine) {
            self.gpu.forget(allocation, &mut self.stats);
        }
        self.gpu.forget_buffers();
        self.graph.prune(failure);
    }

    /// Taints the outputs of ops queued on a lost device with the loss
    /// (those registered before it already carry it, from `lose`).
    pub(super) fn poison_queued(&mut self, ops: &[OpIr]) {
        let mut loss = None;
        for op in ops {
            if self.failed(op.output) {
                continue;
            }
            let failure = *loss.get_or_insert_with(|| self.new_failure(self.loss_root("")));
            self.poison(op.output, failure);
        }
        if let Some(failure) = loss {
            self.graph.prune(failure);
        }
    }

    fn failed(&self, id: TensorId) -> bool {
        self.records
            .get(&id)
            .is_some_and(|r| matches!(r.state, State::Failed { .. }))
    }

    /// `id` carries the loss `failure`, unless it carries failures already.
    fn poison(&mut self, id: TensorId, failure: FailureId) {
        if !self.failed(id) {
            let taints = vec![Taint { failure, depth: 0 }];
            self.set_state(
                id,
                State::Failed {
                    taints,
                    pending: None,
                },
            );
        }
    }
}
