//! The tape: while gradients are being taken (`autograd`), each op
//! registered on the watched device that reads a tensor needing a gradient
//! is kept with its operands and output. Ops on tensors that need no
//! gradient record nothing: the tape follows the watched tensors forward.
//!
//! Thread-local, a stack of tapes (one per `value_and_grads` in progress, so
//! gradients of code that itself takes gradients record on each). Kept out
//! of the device cell: a tape holds tensor handles, and handles hold their
//! device.

use std::cell::RefCell;

use rustc_hash::FxHashSet;

use super::Tensor;
use crate::device::Device;
use crate::ir::{OpKind, TensorId};

/// One op on the tape.
pub(crate) struct Entry {
    pub kind: OpKind,
    pub inputs: Vec<Tensor>,
    pub output: Tensor,
}

/// What one gradient computation records.
pub(crate) struct Tape {
    device: Device,
    /// The watched tensors and everything computed from them so far.
    pub needs: FxHashSet<TensorId>,
    pub entries: Vec<Entry>,
}

thread_local! {
    static TAPES: RefCell<Vec<Tape>> = const { RefCell::new(Vec::new()) };
}

/// Starts a tape on `device` watching `xs`.
pub(crate) fn watch(device: &Device, xs: &[Tensor]) {
    let tape = Tape {
        device: device.clone(),
        needs: xs.iter().map(Tensor::id).collect(),
        entries: Vec::new(),
    };
    TAPES.with(|t| t.borrow_mut().push(tape));
}

/// Ends the newest tape and hands it over.
pub(crate) fn stop() -> Option<Tape> {
    TAPES.with(|t| t.borrow_mut().pop())
}

/// Whether any tape is recording (on this thread).
pub(super) fn recording() -> bool {
    TAPES.with(|t| !t.borrow().is_empty())
}

/// Called for every op registered while one is: kept on each tape of its
/// device that watches one of its inputs.
pub(super) fn record(kind: &OpKind, inputs: &[&Tensor], output: &Tensor) {
    TAPES.with(|t| {
        for tape in t.borrow_mut().iter_mut() {
            let watched = tape.device.same(output.device())
                && inputs.iter().any(|i| tape.needs.contains(&i.id()));
            if watched {
                tape.needs.insert(output.id());
                tape.entries.push(Entry {
                    kind: kind.clone(),
                    inputs: inputs.iter().map(|&i| i.clone()).collect(),
                    output: output.clone(),
                });
            }
        }
    });
}
