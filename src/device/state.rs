//! A tensor's record and its one state: the home of what the device knows
//! of each tensor, and of every change of it.
//!
//! Invariants kept here:
//! - A record is in exactly one `State`, and changes only through
//!   `set_state`, which undoes what the old state held (a buffer, a view's
//!   hold on its base, an expression's hold on its inputs, a carrier's hold
//!   on its failures) and takes what the new one holds. So what a state
//!   holds is released exactly once, whichever path changed it.
//! - A tensor carries failures (`State::Failed`) exactly when its bytes were
//!   never written because of them, and the failure graph counts each
//!   carrier once. Bytes written by a submission still `pending` are trusted
//!   only once it resolves (a read waits for it); a tensor failed on the CPU
//!   while an input's submission was pending stays pending too, since it may
//!   yet gain that submission's failure. Only these two states can be
//!   pending.
//! - An expression has no bytes and carries no failure of its own until a
//!   kernel that computed it inline fails at or above its op
//!   (`settle::resolve`): from then on it carries that failure like any
//!   tensor, and is never computed again.
//! - A host value is never pending and carries no failure: only uploads and
//!   blocks run on the host make one, and those read host values only, so
//!   no GPU error can reach it.
//! - A tensor stays while a handle holds it, a queued op or an expression
//!   reads it, or a view aliases it (`dependents`); a failure stays while a
//!   tensor carries it.

use std::rc::Rc;

use rustc_hash::FxHashMap;

use super::DeviceState;
use crate::failure::FailureId;
use crate::ir::bounds::{self, Bounds, Derived, Operand};
use crate::ir::layout::Layout;
use crate::ir::{DType, OpIr, OpKind, TensorId, Values};
use crate::runtime::Allocation;

/// Every live tensor's record, by id. Its lookups are calls: some forty
/// places look a record up, and hashbrown's probe inlined into each was
/// 12 KB of the wasm module (2.5 KB gzip); everything else is the map's own
/// (`Deref`).
#[derive(Default)]
pub(crate) struct Records(FxHashMap<TensorId, Record>);

impl Records {
    #[inline(never)]
    pub fn get(&self, id: &TensorId) -> Option<&Record> {
        self.0.get(id)
    }

    #[inline(never)]
    pub fn get_mut(&mut self, id: &TensorId) -> Option<&mut Record> {
        self.0.get_mut(id)
    }
}

impl std::ops::Deref for Records {
    type Target = FxHashMap<TensorId, Record>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Records {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// What the device knows of one tensor.
pub(crate) struct Record {
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// Whether a handle (Rust `Tensor` or JS object) still refers to it.
    pub held: bool,
    /// Queued ops that read it, plus views that alias its memory and
    /// expressions that read it. A tensor nobody holds stays while it has
    /// dependents.
    pub dependents: usize,
    pub state: State,
    /// Where the op writing it was registered, when stacks are captured.
    pub site: Option<Rc<str>>,
    /// What its values lie within unless an op on the way was flagged
    /// (`ir::bounds`), and so whether they are finite: `None` where an
    /// upload, a constant or a scalar brought a NaN or an infinity of the
    /// program's own. A kernel checks an anchor's value (a product, a
    /// reduction) only where its operands are finite, so a user's NaN
    /// passes through without blaming the op that met it; an elementwise op
    /// looks at its operands' values itself. An op whose operands' bounds
    /// prove it finite is not checked at all. An upload's values are looked
    /// at only while the device checks numerics: one made before they were
    /// switched on is taken as finite, of unknown size, unless the host
    /// still holds its values (`Device::set_check_numerics` looks).
    pub bounds: Option<Bounds>,
    /// The ops its bounds were carried through (`ir::bounds::MAX_DEPTH`).
    pub depth: u32,
}

/// Where a tensor's values are, or why they are not.
pub(crate) enum State {
    /// Its op is queued, or it was a fused intermediate nobody needed.
    Queued,
    /// Held, but nobody has needed its bytes: its value is `op`
    /// (elementwise) applied to its inputs, which it holds as a queued op
    /// does. Any later kernel that reads it computes it inline (see
    /// `expressions`).
    Expr(Expr),
    /// Values the host holds, row-major: an upload, or what a block run on
    /// the host made (`runtime::host`). No GPU memory until a kernel reads
    /// it: the flush that launches the first such kernel uploads it, and
    /// the host keeps its values, so later host work still reads them and
    /// later kernels the same upload.
    Host {
        values: Values,
        uploaded: Option<Allocation>,
    },
    /// Its bytes, trusted once `pending` (the submission that writes them)
    /// resolves.
    Written { bytes: Bytes, pending: Option<u64> },
    /// Its bytes were never written: the failures that stopped them. It may
    /// gain more until `pending` resolves (see the module doc).
    Failed {
        taints: Vec<Taint>,
        pending: Option<u64>,
    },
}

/// Where written bytes lie.
pub(crate) enum Bytes {
    /// No elements: nothing to store.
    Empty,
    /// Its own buffer, row-major.
    Owned(Allocation),
    /// Another tensor's memory read through `layout`. `base` is always an
    /// owner (views of views are collapsed), and counts this view among its
    /// dependents so it outlives it.
    View { base: TensorId, layout: Layout },
}

/// A tensor kept as the op that computes it.
pub(crate) struct Expr {
    pub op: OpIr,
    /// Whether a kernel has computed it inline already: a flush that needs
    /// it again writes it, so no value is recomputed on and on.
    pub inlined: bool,
}

/// One failure a tensor carries, and how many ops were skipped between that
/// failure's root and this tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taint {
    pub failure: FailureId,
    pub depth: usize,
}

impl State {
    /// The submission whose scopes must resolve before this state is final.
    pub fn pending(&self) -> Option<u64> {
        match self {
            State::Written { pending, .. } | State::Failed { pending, .. } => *pending,
            _ => None,
        }
    }

    /// The failures it carries, if it failed.
    pub fn taints(&self) -> Option<&[Taint]> {
        match self {
            State::Failed { taints, .. } => Some(taints),
            _ => None,
        }
    }

    /// Whether no kernel has written it and nothing holds its value yet:
    /// queued, or kept as an expression.
    pub fn unwritten(&self) -> bool {
        matches!(self, State::Queued | State::Expr(_))
    }
}

impl DeviceState {
    /// A record for `id`, held by the handle about to be returned, queued.
    pub(super) fn insert_record(
        &mut self,
        id: TensorId,
        shape: Vec<usize>,
        dtype: DType,
        site: Option<Rc<str>>,
        derived: Derived,
    ) {
        let record = Record {
            shape,
            dtype,
            held: true,
            dependents: 0,
            state: State::Queued,
            site,
            bounds: derived.bounds,
            depth: derived.depth,
        };
        self.records.insert(id, record);
    }

    /// Moves `id` to `state`: the one place a tensor's state changes (see
    /// the module doc). A tensor nobody can read any more takes nothing:
    /// what the new state would hold is released at once.
    pub fn set_state(&mut self, id: TensorId, state: State) {
        if !self.records.contains_key(&id) {
            if let State::Written {
                bytes: Bytes::Owned(allocation),
                pending,
            } = state
            {
                self.release_bytes(allocation, pending);
            }
            return;
        }
        match &state {
            State::Written {
                bytes: Bytes::View { base, .. },
                ..
            } => {
                if let Some(record) = self.records.get_mut(base) {
                    record.dependents += 1;
                }
            }
            State::Expr(expr) => self.hold(&expr.op.inputs),
            State::Failed { taints, .. } => {
                let carried: Vec<FailureId> = self
                    .records
                    .get(&id)
                    .and_then(|r| r.state.taints())
                    .map_or_else(Vec::new, |old| old.iter().map(|t| t.failure).collect());
                for taint in taints {
                    self.graph.tag(taint.failure);
                    if carried.contains(&taint.failure) {
                        continue;
                    }
                    if let Some(u) = self
                        .unreported
                        .iter_mut()
                        .find(|u| u.failure == taint.failure)
                    {
                        u.tainted += 1;
                    }
                }
            }
            _ => {}
        }
        if let Some(record) = self.records.get_mut(&id) {
            let old = std::mem::replace(&mut record.state, state);
            self.release(old);
        }
    }

    /// Undoes what `state` held: a buffer back to the pool (or to
    /// quarantine while its submission is pending), a view's hold on its
    /// base, an expression's on its inputs, a carrier's on its failures.
    pub(super) fn release(&mut self, state: State) {
        match state {
            State::Written {
                bytes: Bytes::Owned(allocation),
                pending,
            } => self.release_bytes(allocation, pending),
            State::Written {
                bytes: Bytes::View { base, .. },
                ..
            } => self.release_dependent(base),
            State::Expr(expr) => {
                for input in expr.op.inputs {
                    self.release_dependent(input);
                }
            }
            State::Failed { taints, .. } => {
                for taint in taints {
                    self.graph.untag(taint.failure);
                }
            }
            State::Host {
                uploaded: Some(allocation),
                ..
            } => self.gpu.release(allocation, &mut self.stats),
            State::Queued
            | State::Written {
                bytes: Bytes::Empty,
                ..
            }
            | State::Host { .. } => {}
        }
    }

    /// A buffer no tensor uses any more: pooled, or, while the submission
    /// that writes it is pending, kept in quarantine until it resolves (if
    /// its scope fails the buffer may be invalid, and must not be pooled).
    fn release_bytes(&mut self, allocation: Allocation, pending: Option<u64>) {
        match pending {
            Some(seq) => self.quarantine.push((seq, allocation)),
            None => self.gpu.release(allocation, &mut self.stats),
        }
    }

    /// Drops what a tensor's GPU work wrote, before it is written again or
    /// tainted: its buffer may be invalid, so it is destroyed, not pooled.
    pub(super) fn unwrite(&mut self, id: TensorId) {
        let Some(record) = self.records.get_mut(&id) else {
            return;
        };
        match std::mem::replace(&mut record.state, State::Queued) {
            State::Written {
                bytes: Bytes::Owned(allocation),
                ..
            } => self.gpu.forget(allocation, &mut self.stats),
            other => self.release(other),
        }
    }

    /// `id`'s state is final: the submission it waited for resolved, and
    /// nothing more can fail it (written bytes are trusted from now on).
    pub(super) fn settled(&mut self, id: TensorId) {
        if let Some(record) = self.records.get_mut(&id)
            && let State::Written { pending, .. } | State::Failed { pending, .. } =
                &mut record.state
        {
            *pending = None;
        }
    }

    pub fn release_handle(&mut self, id: TensorId) {
        if let Some(record) = self.records.get_mut(&id) {
            record.held = false;
        }
        self.collect(id);
    }

    /// Forgets `id` once nothing can read it: no handle, no dependent, and no
    /// queued op still to write it (the planner must see that nobody holds
    /// it, so its record stays until the flush).
    pub fn collect(&mut self, id: TensorId) {
        let unreachable = self
            .records
            .get(&id)
            .is_some_and(|r| !r.held && r.dependents == 0);
        if !unreachable || self.queue.produces(id) {
            return;
        }
        if let Some(record) = self.records.remove(&id) {
            self.release(record.state);
        }
    }

    /// Counts one more dependent of each of `inputs` (an op reading them:
    /// queued, or kept as an expression); `release_dependent` undoes it.
    pub fn hold(&mut self, inputs: &[TensorId]) {
        for input in inputs {
            if let Some(record) = self.records.get_mut(input) {
                record.dependents += 1;
            }
        }
    }

    pub fn release_dependent(&mut self, id: TensorId) {
        if let Some(record) = self.records.get_mut(&id) {
            record.dependents = record.dependents.saturating_sub(1);
        }
        self.collect(id);
    }

    /// Queues `op`, whose output is a new tensor held by the handle the caller
    /// is about to return. Flushes when the queue is full.
    pub fn register(&mut self, mut op: OpIr, site: Option<Rc<str>>) {
        self.hold(&op.inputs);
        let derived = self.derive(&op);
        op.proven_finite = derived.proven;
        self.insert_record(op.output, op.shape.clone(), op.dtype, site, derived);
        self.queue.push(op);
        if self.queue.len() >= self.capacity {
            self.flush();
        }
    }

    /// With the numerics checks just switched on, `Record::bounds` from
    /// what can be looked at now: the values the host holds, and each
    /// queued op again from its inputs (an upload's own values included).
    pub fn look_at_values(&mut self) {
        for record in self.records.values_mut() {
            if let State::Host { values, .. } = &record.state {
                record.bounds = Bounds::of_words(&values.words, values.dtype);
                record.depth = 0;
            }
        }
        // In order: a queued op's inputs may be queued before it.
        for i in 0..self.queue.len() {
            let Some(op) = self.queue.ops().get(i) else {
                break;
            };
            let (output, derived) = (op.output, self.derive(op));
            self.queue.set_proven_finite(i, derived.proven);
            if let Some(record) = self.records.get_mut(&output) {
                record.bounds = derived.bounds;
                record.depth = derived.depth;
            }
        }
    }

    /// `op`'s bounds from its inputs' records (`ir::bounds::derive`). An
    /// upload's values are looked at only while the checks are on; one
    /// made while they are off is taken as finite, of unknown size.
    fn derive(&self, op: &OpIr) -> Derived {
        if matches!(op.kind, OpKind::Upload(_)) && !self.check_numerics {
            return Derived::UNLOOKED;
        }
        let operand = |t: &TensorId| match self.records.get(t) {
            Some(r) => Operand {
                bounds: r.bounds,
                depth: r.depth,
                shape: &r.shape,
            },
            None => Operand::UNKNOWN,
        };
        // Every op is derived as it is registered: the operands of one that
        // reads up to three tensors stay on the stack, not in an allocation.
        let mut few = [Operand::UNKNOWN; 3];
        match few.get_mut(..op.inputs.len()) {
            Some(few) => {
                for (slot, t) in few.iter_mut().zip(&op.inputs) {
                    *slot = operand(t);
                }
                bounds::derive(op, few)
            }
            None => bounds::derive(op, &op.inputs.iter().map(operand).collect::<Vec<_>>()),
        }
    }

    /// Held tensors kept as expressions (`stats().expressionsHeld`).
    pub fn expressions_held(&self) -> u64 {
        let count = self
            .records
            .values()
            .filter(|r| r.held && matches!(r.state, State::Expr(_)))
            .count();
        count as u64
    }
}

/// Whether `t` carries a failure, or is a view of memory that does: its
/// bytes hold only what that failure left.
pub(crate) fn carries_failure(records: &FxHashMap<TensorId, Record>, t: TensorId) -> bool {
    let failed = |r: &Record| matches!(r.state, State::Failed { .. });
    records.get(&t).is_some_and(|record| {
        failed(record)
            || matches!(&record.state, State::Written { bytes: Bytes::View { base, .. }, .. }
                if records.get(base).is_some_and(failed))
    })
}
