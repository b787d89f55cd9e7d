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
    /// The device whose ops it keeps; `None` keeps any device's (TF.js's
    /// `variableGrads` over every trainable variable, which may live on
    /// several devices: the value's own device is known only once `f`
    /// returns, and an op never mixes devices, so a variable of another
    /// device is simply never reached).
    device: Option<Device>,
    /// The watched tensors and everything computed from them so far.
    pub needs: FxHashSet<TensorId>,
    pub entries: Vec<Entry>,
}

thread_local! {
    static TAPES: RefCell<Vec<Tape>> = const { RefCell::new(Vec::new()) };
}

/// Starts a tape on `device` (any device with `None`) watching `xs`.
pub(crate) fn watch(device: Option<&Device>, xs: &[Tensor]) {
    let tape = Tape {
        device: device.cloned(),
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
/// device that watches one of its inputs, when its result is a float (no
/// gradient flows to an int or a bool: a comparison, an argMax, a cast to
/// an int ends the path, as in TF.js).
pub(super) fn record(kind: &OpKind, inputs: &[&Tensor], output: &Tensor) {
    if output.dtype() != crate::ir::DType::Float32 {
        return;
    }
    TAPES.with(|t| {
        for tape in t.borrow_mut().iter_mut() {
            let watched = tape.device.as_ref().is_none_or(|d| d.same(output.device()))
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
