//! Warm-ups: a program's kernels compiled before its first run.
//!
//! A first step is slow because each kernel's pipeline is compiled as the
//! step first launches it (on a software adapter, 10-500 ms each). A
//! warm-up records the step once and flushes it as any flush would, so the
//! same blocks are planned and the same kernel texts compiled, but
//! submits none of its kernels. What it made cannot hold values, so:
//! - every output of a block that computes (a kernel, a copy, a view or a
//!   cost of what one computes) fails as `warmup`, which no `sync()`
//!   reports: a read of one says plainly that nothing ran, never returns
//!   garbage. Failed once the whole flush is encoded: a block reading an
//!   output failed before would be skipped, and its kernels never compiled;
//! - every commit keeps its old value, so a training step warmed up
//!   changes no variable and no optimizer state (a step whose guards
//!   failed keeps them as well, `device::commit`), and the optimizer keeps
//!   none of the step's (`is_warming`): the next step is a first step;
//! - uploads and the small blocks the host runs are real values, as
//!   cheap as recording them, and run as they always do (a kernel would
//!   read a host value otherwise than a first step does, so its text
//!   would not be the step's);
//! - work queued before the warm-up runs for real first, and held
//!   expressions are written (so its flush makes only what `f` made), and
//!   an injected fault waits for a kernel that runs.
//!
//! So the first real step compiles nothing new. A block the host ran in
//! the warm-up and in the first step that the second step runs as a kernel,
//! its inputs then on the GPU (Adam's powers of the betas: uploads at
//! first, committed values after), compiles in the second step, as it
//! would without a warm-up.

use super::flush::BlockRun;
use super::{Device, DeviceState, State};
use crate::error::RegistrationError;
use crate::failure::{FailureKind, Root};
use crate::fusion::Block;
use crate::ir::TensorId;
use crate::tensor::Tensor;

type Result<T> = std::result::Result<T, RegistrationError>;

impl Device {
    /// Compiles the kernels `f` would launch, running none of them (TF.js's
    /// compile-only mode, for a whole program). `f` records its work as a
    /// step would and returns the tensors the step would read (its cost,
    /// its predictions): those are flushed as a read flushes them. What `f`
    /// made fails as `warmup` when read; drop it. A training step inside
    /// changes nothing. Work queued before runs first, for real.
    pub fn warmup(&self, f: impl FnOnce() -> Result<Vec<Tensor>>) -> Result<()> {
        self.with_state(|state| {
            // Held expressions are written first, for real: the warm-up's
            // flush then computes only what `f` makes (never writing, and
            // failing, a tensor made before, as an expression's second
            // computation would), and what came before stays readable.
            // The queue is flushed first: an op queued and not yet read
            // becomes an expression there, to be written with the rest.
            state.flush();
            let expressions: Vec<TensorId> = state
                .records
                .iter()
                .filter(|(_, r)| matches!(r.state, State::Expr(_)))
                .map(|(&id, _)| id)
                .collect();
            state.flush_writing(&expressions);
            state.warming = true;
        });
        let made = f();
        // Flushed warming even when `f` failed part way: what it queued
        // must not run later for real.
        let read: Vec<_> = made.iter().flatten().map(Tensor::id).collect();
        self.with_state(|state| {
            state.flush_writing(&read);
            state.warming = false;
        });
        made.map(|_| ())
    }

    /// Whether a warm-up is recording (`warmup`'s `f` is running): a
    /// training step then keeps no state of its own.
    pub(crate) fn is_warming(&self) -> bool {
        self.with_state(|state| state.warming)
    }
}

impl DeviceState {
    /// Fails what `block` would have computed (its live outputs) as made
    /// by a warm-up, once its kernels are compiled.
    pub(super) fn warm(&mut self, block: &Block, run: &BlockRun) {
        // An upload's values are real; a commit kept its old value. Every
        // other output, an alias of one included, is what a kernel would
        // have written.
        let made = !matches!(block, Block::Upload(_) | Block::Commit(_));
        if !made || run.live.is_empty() {
            return;
        }
        let root = Root {
            kind: FailureKind::Warmup,
            op: run.name(),
            message: "made inside warmup(), which compiles kernels and runs none".into(),
            registered_at: None,
        };
        self.root_failure(root, &run.live, None);
    }
}
