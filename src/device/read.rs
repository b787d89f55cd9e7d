//! Reads: whether a tensor's bytes can be trusted, and getting them back.
//!
//! A read is planned like an op: a tensor whose bytes do not lie row-major
//! in one buffer (a strided view) is first copied by a queued `copy` op,
//! which goes through the same limit checks, error scopes and failure
//! records as any kernel. So every GPU command a read issues either was
//! checked on the CPU first or runs in a scope; the only command left here
//! is the copy of a contiguous range into a staging buffer of the same size.

use super::{DeviceState, State};
use crate::failure::{FailureKind, Report, Root};
use crate::ir::shape;
use crate::ir::{DType, OpIr, OpKind, TensorId, Values};
use crate::runtime::{PendingRead, Scope};

/// What a read does next.
pub enum ReadStep {
    /// Wait for these scopes, then ask again (`reread`).
    Wait(Vec<Scope>),
    /// The bytes were never written.
    Failed(Vec<Report>),
    /// The bytes are on their way.
    Go(PendingRead),
    /// The host holds the values: no GPU work to wait for.
    Ready(Values),
    /// The bytes are strided: read this row-major copy instead (queued and
    /// flushed; its record is held, and the reader releases it).
    Via(TensorId),
}

impl DeviceState {
    /// The next step of a read of `id`: flush, then either report the
    /// failures it carries, wait for the scopes its bytes depend on, or
    /// start copying its bytes back.
    pub fn read(&mut self, id: TensorId) -> ReadStep {
        self.flush_writing(&[id]);
        self.reread(id)
    }

    /// `read` after waiting.
    pub fn reread(&mut self, id: TensorId) -> ReadStep {
        let waiting = self.settle();
        let Some(record) = self.records.get(&id) else {
            return ReadStep::Failed(vec![self.internal_report(id, "its record is gone")]);
        };
        // Pending first: a tensor failed on the CPU while an input was
        // pending may yet gain that input's failure, and reports both.
        if record.state.pending().is_some() && !waiting.is_empty() {
            return ReadStep::Wait(waiting);
        }
        if let Some(answer) = self.answer_on_host(id) {
            return answer;
        }
        let Some((buffer, access)) = self.access(id) else {
            return ReadStep::Failed(vec![self.internal_report(id, "it was never written")]);
        };
        let numel = shape::numel(&access.shape);
        if numel > 0 && !access.layout.is_contiguous(&access.shape) {
            return ReadStep::Via(self.queue_copy(id));
        }
        // In 64 bits: a contiguous read lies inside a buffer that passed the
        // limit checks, so these fit; `bytes` never truncates.
        let offset = 4 * access.layout.offset as u64;
        let bytes = shape::bytes(&access.shape);
        ReadStep::Go(self.gpu.read(&buffer, offset, bytes, &mut self.stats))
    }

    /// A read that needs no GPU, or None: flushes what `id` depends on,
    /// then answers with the values the host holds (an upload, a small
    /// block on them that ran there) or the failures `id` carries for
    /// good. A tensor whose bytes are on the GPU, or whose failures a
    /// pending submission may add to, gets None, and nothing is started
    /// to read it: WebGPU reads only asynchronously, so a synchronous read
    /// (`dataSync`, TF.js's `readSync`) answers only what the host knows.
    pub fn read_on_host(&mut self, id: TensorId) -> Option<ReadStep> {
        self.flush_writing(&[id]);
        let waiting = self.settle();
        let Some(record) = self.records.get(&id) else {
            return Some(ReadStep::Failed(vec![
                self.internal_report(id, "its record is gone"),
            ]));
        };
        if record.state.pending().is_some() && !waiting.is_empty() {
            return None;
        }
        self.answer_on_host(id)
    }

    /// The answer to a read of the settled `id` that the host holds: its
    /// failures' reports, or its values.
    fn answer_on_host(&self, id: TensorId) -> Option<ReadStep> {
        match &self.records.get(&id)?.state {
            State::Failed { taints, .. } => Some(ReadStep::Failed(
                taints
                    .iter()
                    .filter_map(|t| self.graph.report(t.failure, id, t.depth))
                    .collect(),
            )),
            State::Host { values, .. } => Some(ReadStep::Ready(values.clone())),
            _ => None,
        }
    }

    /// Queues and flushes a row-major copy of `id`, held until the reader
    /// releases it.
    fn queue_copy(&mut self, id: TensorId) -> TensorId {
        let (shape, dtype) = self
            .records
            .get(&id)
            .map_or((Vec::new(), DType::Float32), |r| (r.shape.clone(), r.dtype));
        let copy = TensorId::next();
        let op = OpIr {
            kind: OpKind::Copy,
            inputs: vec![id],
            output: copy,
            shape,
            dtype,
            proven_finite: false,
            unchecked: false,
        };
        self.register(op, None);
        self.flush();
        copy
    }

    /// A report for a read whose bytes could not be had although nothing
    /// tainted them: the device was lost while the read was on its way, or
    /// the runtime broke an invariant of its own (`internal`). Carried by
    /// nothing, named all the same.
    pub fn internal_report(&mut self, id: TensorId, why: &str) -> Report {
        let root = match &self.lost {
            Some(_) => self.loss_root(&format!(" while {id} was being read")),
            None => Root {
                kind: FailureKind::Internal,
                op: "read".to_string(),
                message: format!("{id} could not be read: {why}"),
                registered_at: None,
            },
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
}
