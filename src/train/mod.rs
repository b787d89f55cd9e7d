//! Training, TF.js's way: variables (tensors a program replaces between
//! steps), the gradients of a loss with respect to them (`variable_grads`),
//! and optimizers that apply those gradients (`optimizers`).
//!
//! A step fails whole: the new values of a step (every variable it updates
//! and the optimizer's state) replace the old ones through one `commit` op
//! each, all reading the same guards (every new value, and the cost), so
//! when any op of the forward pass, the backward pass or the update fails,
//! no variable and no moment changes (see `device::commit`). Nothing is
//! read back to decide it: the device decides when the guards' fate is
//! known, and the step stays deferred and fused like any work.

mod optimizers;

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use crate::device::Device;
use crate::error::{ErrorClass, RegistrationError};
use crate::ir::shape;
use crate::ir::{DType, OpKind};
use crate::tensor::Tensor;

pub use optimizers::Optimizer;

type Result<T> = std::result::Result<T, RegistrationError>;

/// A tensor a program replaces between steps: a model's weight. Reading it
/// (`value`) gives its current tensor; `assign` and the optimizers replace
/// that. Cloning gives another handle to the same variable.
#[derive(Clone)]
pub struct Variable {
    slot: Rc<Slot>,
}

struct Slot {
    /// Never reused: optimizers key their state by it.
    id: u64,
    name: String,
    trainable: bool,
    value: RefCell<Tensor>,
}

thread_local! {
    /// Every variable made on this thread, for `trainable_variables` and
    /// name checks. Weak: a variable goes when its last handle does.
    static VARIABLES: RefCell<Vec<Weak<Slot>>> = const { RefCell::new(Vec::new()) };
    static NEXT_ID: Cell<u64> = const { Cell::new(1) };
}

/// The variables still alive, oldest first (forgetting the dead ones): the
/// one registry of variables (JS maps them to their objects, `web::registry`).
pub(crate) fn alive() -> Vec<Variable> {
    VARIABLES.with(|all| {
        let mut all = all.borrow_mut();
        all.retain(|v| v.strong_count() > 0);
        all.iter()
            .filter_map(Weak::upgrade)
            .map(|slot| Variable { slot })
            .collect()
    })
}

impl Device {
    /// A variable holding a copy of `initial` (a copy, so two variables made
    /// from one tensor are two values, each with its own gradient). `name`
    /// must be unique among this device's live variables; by default it is
    /// `variable<N>`.
    #[track_caller]
    pub fn variable(
        &self,
        initial: &Tensor,
        trainable: bool,
        name: Option<&str>,
    ) -> Result<Variable> {
        let op = "variable";
        self.admit(op, &[initial])?;
        let id = NEXT_ID.with(|n| n.replace(n.get() + 1));
        let name = name.map_or_else(|| format!("variable{id}"), str::to_string);
        if let Some(other) = self
            .trainable_or_not()
            .into_iter()
            .find(|v| v.name() == name)
        {
            return Err(RegistrationError::new(
                op,
                ErrorClass::Other,
                format!(
                    "{} already has a variable named '{name}' ({}); names are unique",
                    self.label(),
                    other.value().id()
                ),
            ));
        }
        let value = copy(initial)?;
        let slot = Rc::new(Slot {
            id,
            name,
            trainable,
            value: RefCell::new(value),
        });
        VARIABLES.with(|all| all.borrow_mut().push(Rc::downgrade(&slot)));
        Ok(Variable { slot })
    }

    /// This device's live trainable variables, oldest first.
    pub fn trainable_variables(&self) -> Vec<Variable> {
        self.trainable_or_not()
            .into_iter()
            .filter(Variable::trainable)
            .collect()
    }

    fn trainable_or_not(&self) -> Vec<Variable> {
        alive()
            .into_iter()
            .filter(|v| v.device().same(self))
            .collect()
    }
}

/// `tensor` row-major in a buffer of its own.
#[track_caller]
fn copy(tensor: &Tensor) -> Result<Tensor> {
    let shape = tensor.shape().to_vec();
    tensor
        .device()
        .record(OpKind::Copy, &[tensor], shape, tensor.dtype())
}

impl Variable {
    /// Its current value.
    pub fn value(&self) -> Tensor {
        self.slot.value.borrow().clone()
    }

    pub fn name(&self) -> &str {
        &self.slot.name
    }

    pub fn trainable(&self) -> bool {
        self.slot.trainable
    }

    pub fn shape(&self) -> Vec<usize> {
        self.slot.value.borrow().shape().to_vec()
    }

    pub fn device(&self) -> Device {
        self.slot.value.borrow().device().clone()
    }

    /// Whether two handles name the same variable.
    pub fn same(&self, other: &Variable) -> bool {
        Rc::ptr_eq(&self.slot, &other.slot)
    }

    pub(crate) fn id(&self) -> u64 {
        self.slot.id
    }

    /// Replaces its value with a copy of `value`, which must have its shape
    /// and dtype (as in TF.js: an optimizer's state and a step's gradients
    /// are of the dtype the variable was made with) and live on its device.
    #[track_caller]
    pub fn assign(&self, value: &Tensor) -> Result<()> {
        let op = "assign";
        let device = self.device();
        device.admit(op, &[value])?;
        let dtype = self.slot.value.borrow().dtype();
        if value.dtype() != dtype {
            return Err(RegistrationError::new(
                op,
                ErrorClass::Type,
                format!(
                    "variable '{}' is {dtype}, the new value {}",
                    self.name(),
                    value.dtype()
                ),
            ));
        }
        let shape = self.shape();
        if value.shape() != shape {
            return Err(RegistrationError::new(
                op,
                ErrorClass::Range,
                format!(
                    "variable '{}' has shape {}, the new value {}",
                    self.name(),
                    shape::display(&shape),
                    shape::display(value.shape())
                ),
            ));
        }
        self.set(copy(value)?);
        Ok(())
    }

    /// Replaces its value (a step's commit output: already its own tensor).
    fn set(&self, value: Tensor) {
        *self.slot.value.borrow_mut() = value;
    }
}

/// The gradients of what `f` returns (a scalar) with respect to the
/// variables it depends on, with its value: TF.js's `variableGrads`. Takes
/// `var_list` (by default every trainable float32 variable of every device
/// not lost: an int32 step counter has no gradient, and must not stop every
/// step that does not name its variables), keeps the trainable ones the
/// value depends on and leaves out the rest; fails when none is left, and
/// when `var_list` names a trainable variable that is not float32.
/// Variables of other devices than the value's are left out like any other
/// the value does not read (a page with two models trains each without
/// naming its variables), so the one-device rule of a step holds of the
/// kept ones by construction, and is checked on them.
pub fn variable_grads(
    f: impl FnOnce() -> Result<Tensor>,
    var_list: Option<&[Variable]>,
) -> Result<(Tensor, Vec<(Variable, Tensor)>)> {
    variable_grads_for("variableGrads", f, var_list)
}

/// `variable_grads`, its refusals naming `op`, the call the user made
/// (`minimize` takes its gradients here too).
pub(crate) fn variable_grads_for(
    op: &'static str,
    f: impl FnOnce() -> Result<Tensor>,
    var_list: Option<&[Variable]>,
) -> Result<(Tensor, Vec<(Variable, Tensor)>)> {
    let floats = |v: &Variable| v.value().dtype() == DType::Float32;
    let vars: Vec<Variable> = match var_list {
        Some(list) => {
            let vars: Vec<Variable> = list.iter().filter(|v| v.trainable()).cloned().collect();
            if let Some(v) = vars.iter().find(|v| !floats(v)) {
                return Err(RegistrationError::new(
                    op,
                    ErrorClass::Type,
                    format!(
                        "variable '{}' in varList is {}: gradients are of float32 variables \
                         (leave it out, or make it with trainable false)",
                        v.name(),
                        v.value().dtype()
                    ),
                ));
            }
            vars
        }
        None => {
            // A lost device's variables cannot train (their values went
            // with it): a program that moved to a new device trains there.
            let (lost, live): (Vec<Variable>, Vec<Variable>) = alive()
                .into_iter()
                .filter(|v| v.trainable() && floats(v))
                .partition(|v| v.device().lost_reason().is_some());
            if let (true, Some(v)) = (live.is_empty(), lost.first()) {
                v.device().admit(op, &[])?;
            }
            live
        }
    };
    if vars.is_empty() {
        return Err(RegistrationError::new(
            op,
            ErrorClass::Other,
            "there are no trainable variables to differentiate with respect to",
        ));
    }
    let values: Vec<Tensor> = vars.iter().map(Variable::value).collect();
    let (value, grads) = crate::autograd::gradients(op, None, |_| f(), &values, None)?;
    let grads: Vec<(Variable, Tensor)> = vars
        .into_iter()
        .zip(grads)
        .filter_map(|(v, g)| g.map(|g| (v, g)))
        .collect();
    if grads.is_empty() {
        return Err(RegistrationError::new(
            op,
            ErrorClass::Other,
            "the value f returned does not depend on any of the variables",
        ));
    }
    let kept: Vec<Variable> = grads.iter().map(|(v, _)| v.clone()).collect();
    one_device(op, &kept)?;
    Ok((value, grads))
}

/// The device every one of `vars` lives on: a step runs, and commits, on
/// one device.
fn one_device(op: &'static str, vars: &[Variable]) -> Result<Device> {
    let Some(first) = vars.first() else {
        return Err(RegistrationError::new(
            op,
            ErrorClass::Other,
            "there are no trainable variables to differentiate with respect to",
        ));
    };
    let device = first.device();
    if let Some(other) = vars.iter().find(|v| !v.device().same(&device)) {
        return Err(RegistrationError::new(
            op,
            ErrorClass::Other,
            format!(
                "variable '{}' lives on {}, variable '{}' on {}; one step runs on one device",
                first.name(),
                device.label(),
                other.name(),
                other.device().label()
            ),
        ));
    }
    Ok(device)
}

/// Registers a step's commits: for each `(old, new)`, a tensor that is
/// `new` when every one of the news and of `guards` is written, else `old`
/// (see `device::commit`), and, for `cost`, a tensor that is `cost` and
/// fails with the step. All or nothing: nothing is registered past the
/// first refusal, and the caller replaces nothing unless all succeed.
fn commit(
    pairs: &[(Tensor, Tensor)],
    cost: Option<&Tensor>,
) -> Result<(Vec<Tensor>, Option<Tensor>)> {
    let guards: Vec<&Tensor> = pairs.iter().map(|(_, new)| new).chain(cost).collect();
    let committed = pairs
        .iter()
        .enumerate()
        .map(|(take, (old, new))| {
            if old.shape() != new.shape() {
                return Err(RegistrationError::new(
                    "commit",
                    ErrorClass::Other,
                    format!(
                        "internal: {} of shape {} would replace {} of shape {}",
                        new.id(),
                        shape::display(new.shape()),
                        old.id(),
                        shape::display(old.shape())
                    ),
                ));
            }
            let mut inputs = vec![old];
            inputs.extend(guards.iter().copied());
            old.device().record(
                OpKind::Commit { take },
                &inputs,
                old.shape().to_vec(),
                old.dtype(),
            )
        })
        .collect::<Result<Vec<Tensor>>>()?;
    let cost = match cost {
        Some(cost) => {
            let mut inputs = guards.clone();
            inputs.rotate_right(1); // the cost first, then the news
            Some(cost.device().record(
                OpKind::Guard,
                &inputs,
                cost.shape().to_vec(),
                cost.dtype(),
            )?)
        }
        None => None,
    };
    Ok((committed, cost))
}
