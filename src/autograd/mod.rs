//! Reverse-mode gradients over the recorded ops (TF.js's `grads` and
//! `valueAndGrads`): `f` runs with its inputs watched, every op it registers
//! that reads a watched tensor (or one computed from them) is kept on a tape
//! (`tensor::tape`), and the backward pass walks the tape in reverse,
//! registering each op's gradient (`rules`) as ordinary ops. Nothing runs
//! and nothing is read back here: the backward pass is deferred, planned and
//! fused like the forward pass, and a failure anywhere in either reaches the
//! gradients through the same failure records as any other tensor.

mod rules;

use rustc_hash::FxHashMap;

use crate::device::Device;
use crate::error::{ErrorClass, RegistrationError};
use crate::ir::TensorId;
use crate::tensor::Tensor;
use crate::tensor::tape;

type Result<T> = std::result::Result<T, RegistrationError>;

/// A broken invariant of the tape, as the error a caller gets.
fn internal(why: &str) -> RegistrationError {
    RegistrationError::new("grads", ErrorClass::Other, format!("internal: {why}"))
}

impl Device {
    /// `f(xs)` and its gradients with respect to each of `xs`: `f` must
    /// return a scalar, or, with `dy`, a tensor of `dy`'s shape (the
    /// gradients are then of `sum(f(xs) * dy)`). An input `f` does not use
    /// gets zeros.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> { pollster::block_on(async {
    /// # use webfusion::{Device, DeviceOptions};
    /// # let Ok(gpu) = Device::request(DeviceOptions::default()).await else { return Ok(()) };
    /// let x = gpu.tensor(&[1.0, 2.0], None)?;
    /// let y = gpu.tensor(&[3.0, 4.0], None)?;
    /// // f = sum(x * y): df/dx = y, df/dy = x.
    /// let (value, grads) = gpu.value_and_grads(|v| v[0].mul(&v[1])?.sum(None, false), &[x, y], None)?;
    /// assert_eq!(value.to_vec().await?, vec![11.0]);
    /// assert_eq!(grads[0].to_vec().await?, vec![3.0, 4.0]);
    /// assert_eq!(grads[1].to_vec().await?, vec![1.0, 2.0]);
    /// # Ok(()) }) }
    /// ```
    pub fn value_and_grads(
        &self,
        f: impl FnOnce(&[Tensor]) -> Result<Tensor>,
        xs: &[Tensor],
        dy: Option<&Tensor>,
    ) -> Result<(Tensor, Vec<Tensor>)> {
        let (value, grads) = self.gradients(f, xs, dy)?;
        let grads = xs
            .iter()
            .zip(grads)
            .map(|(x, g)| match g {
                Some(g) => Ok(g),
                None => self.zeros(x.shape()),
            })
            .collect::<Result<Vec<Tensor>>>()?;
        Ok((value, grads))
    }

    /// `value_and_grads` of a function of one tensor.
    pub fn value_and_grad(
        &self,
        f: impl FnOnce(&Tensor) -> Result<Tensor>,
        x: &Tensor,
        dy: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor)> {
        let (value, mut grads) =
            self.value_and_grads(|xs| f(&xs[0]), std::slice::from_ref(x), dy)?;
        let grad = grads
            .pop()
            .ok_or_else(|| internal("no gradient came back"))?;
        Ok((value, grad))
    }

    /// `grads` of a function of one tensor.
    pub fn grad(
        &self,
        f: impl FnOnce(&Tensor) -> Result<Tensor>,
        x: &Tensor,
        dy: Option<&Tensor>,
    ) -> Result<Tensor> {
        self.value_and_grad(f, x, dy).map(|(_, grad)| grad)
    }

    /// `value_and_grads`, with `None` for an input the value does not
    /// depend on (TF.js's `variableGrads` leaves those out).
    pub(crate) fn gradients(
        &self,
        f: impl FnOnce(&[Tensor]) -> Result<Tensor>,
        xs: &[Tensor],
        dy: Option<&Tensor>,
    ) -> Result<(Tensor, Vec<Option<Tensor>>)> {
        let watched: Vec<&Tensor> = xs.iter().collect();
        self.admit("grads", &watched)?;
        gradients("grads", Some(self), f, xs, dy)
    }

    /// The gradients of `f` with respect to each of `xs` (`value_and_grads`
    /// without the value).
    pub fn grads(
        &self,
        f: impl FnOnce(&[Tensor]) -> Result<Tensor>,
        xs: &[Tensor],
        dy: Option<&Tensor>,
    ) -> Result<Vec<Tensor>> {
        self.value_and_grads(f, xs, dy).map(|(_, grads)| grads)
    }
}

/// The value of `f(xs)` and, for each of `xs`, its gradient, or `None` where
/// the value does not depend on it. With `device`, the value must live
/// there; without, `xs` may live on several devices and the value's device
/// is the one differentiated on (the others' tensors are never reached: an
/// op never mixes devices). Refusals name `op`, the entry point the user
/// called (`grads`, `variableGrads`).
pub(crate) fn gradients(
    op: &'static str,
    device: Option<&Device>,
    f: impl FnOnce(&[Tensor]) -> Result<Tensor>,
    xs: &[Tensor],
    dy: Option<&Tensor>,
) -> Result<(Tensor, Vec<Option<Tensor>>)> {
    // Gradients are of floats only, as in TF.js: an int's or a bool's
    // would be zero everywhere it is defined.
    if let Some(x) = xs.iter().find(|x| x.dtype() != crate::ir::DType::Float32) {
        return Err(RegistrationError::new(
            op,
            ErrorClass::Other,
            format!(
                "{} is {}: gradients are taken of float32 tensors",
                x.id(),
                x.dtype()
            ),
        ));
    }
    tape::watch(device, xs);
    let value = f(xs);
    let tape = tape::stop().ok_or_else(|| internal("the tape was gone"))?;
    let value = value?;
    if let Some(device) = device
        && !value.device().same(device)
    {
        return Err(RegistrationError::new(
            op,
            ErrorClass::Other,
            format!(
                "f returned a tensor of {}, not of {}",
                value.device().label(),
                device.label()
            ),
        ));
    }
    let seed = match dy {
        // A seed of another device would mix devices in every op below it,
        // and an int's or a bool's is no gradient (TF.js refuses both).
        Some(dy) if !dy.device().same(value.device()) => {
            return Err(RegistrationError::new(
                op,
                ErrorClass::Other,
                format!(
                    "dy lives on {}, f returned a tensor of {}",
                    dy.device().label(),
                    value.device().label()
                ),
            ));
        }
        Some(dy) if dy.dtype() != crate::ir::DType::Float32 => {
            return Err(RegistrationError::new(
                op,
                ErrorClass::Other,
                format!("dy is {}: a gradient is float32", dy.dtype()),
            ));
        }
        Some(dy) if dy.shape() == value.shape() => dy.clone(),
        Some(dy) => {
            return Err(RegistrationError::new(
                op,
                ErrorClass::Other,
                format!(
                    "dy has shape {:?}, f returned {:?}",
                    dy.shape(),
                    value.shape()
                ),
            ));
        }
        None if value.size() == 1 => value.device().ones(value.shape())?,
        None => {
            return Err(RegistrationError::new(
                op,
                ErrorClass::Other,
                format!(
                    "f must return a scalar without dy, it returned shape {:?}",
                    value.shape()
                ),
            ));
        }
    };
    // The gradient of each tensor reached so far, summed over its uses.
    let mut grads: FxHashMap<TensorId, Tensor> = FxHashMap::default();
    grads.insert(value.id(), seed);
    for entry in tape.entries.iter().rev() {
        let Some(g) = grads.get(&entry.output.id()).cloned() else {
            continue; // nothing f returned depends on it
        };
        let inputs = rules::vjp(&entry.kind, &entry.inputs, &entry.output, &g)?;
        for (input, gi) in entry.inputs.iter().zip(inputs) {
            let Some(gi) = gi else { continue };
            if !tape.needs.contains(&input.id()) {
                continue;
            }
            let summed = match grads.remove(&input.id()) {
                Some(before) => before.add(&gi)?,
                None => gi,
            };
            grads.insert(input.id(), summed);
        }
    }
    let grads = xs.iter().map(|x| grads.get(&x.id()).cloned()).collect();
    Ok((value, grads))
}
