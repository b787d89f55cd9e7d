//! Optimizers, with TF.js's update rules (`tf.train.sgd`, `momentum`,
//! `adam`). An update is ordinary elementwise ops, fused into one kernel
//! per variable shape with the gradient's last ops; its new values replace
//! the old ones through the step's commits, so a failed step changes no
//! variable and does not advance the optimizer's state (moments, Adam's
//! step count, kept as tensors for that reason).

use std::rc::{Rc, Weak};

use rustc_hash::FxHashMap;

use super::{Result, Slot, Variable, commit, one_device, variable_grads_for};
use crate::device::Device;
use crate::error::{ErrorClass, RegistrationError, number_f32};
use crate::tensor::Tensor;

/// How an optimizer turns a gradient into an update.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    /// `w -= lr * g`.
    Sgd,
    /// `a = momentum * a + g; w -= lr * a` (Nesterov: `w -= lr * (g +
    /// momentum * a)`).
    Momentum { momentum: f32, nesterov: bool },
    /// `m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    /// w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + epsilon)`.
    Adam {
        beta1: f32,
        beta2: f32,
        epsilon: f32,
    },
}

/// Applies gradients to variables. Its state (per variable, and Adam's
/// step count) lives on the device of the first step it applies; it works
/// on that device only.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> { pollster::block_on(async {
/// use webfusion::{Device, DeviceOptions, FaultKind, Optimizer};
/// # let Ok(gpu) = Device::request(DeviceOptions::default()).await else { return Ok(()) };
/// # /*
/// let gpu = Device::request(DeviceOptions::default()).await?;
/// # */
/// let w = gpu.variable(&gpu.tensor(&[3.0, -2.0], None)?, true, Some("w"))?;
/// let mut sgd = Optimizer::sgd(0.25)?;
/// // loss = sum(w^2): each step halves w.
/// let loss = || w.value().square()?.sum(None, false);
/// sgd.minimize(loss, false, None)?;
/// assert_eq!(w.value().to_vec().await?, vec![1.5, -1.0]);
///
/// // A step that fails changes nothing; its cost says why.
/// gpu.inject_fault("square", 1, FaultKind::Validation)?;
/// let cost = sgd.minimize(loss, true, None)?.expect("asked for");
/// assert!(cost.to_vec().await.is_err());
/// assert_eq!(w.value().to_vec().await?, vec![1.5, -1.0]);
/// # Ok(()) }) }
/// ```
pub struct Optimizer {
    rule: Rule,
    learning_rate: f32,
    /// Per variable (by id): the variable, weakly (state of a variable that
    /// is gone is dropped), and its state tensors (momentum's accumulator;
    /// Adam's first and second moments).
    state: FxHashMap<u64, (Weak<Slot>, Vec<Tensor>)>,
    /// Adam's `beta1^t` and `beta2^t`, `t` the steps committed so far.
    powers: Option<[Tensor; 2]>,
    device: Option<Device>,
    /// Whether a step turns its device's numerics checks on
    /// (`set_skip_non_finite`).
    skip_non_finite: bool,
    /// A warm-up's commits, held until the next step: held, they are
    /// written by the warm-up's flush, so the whole step compiles even
    /// when its cost is not asked for (`apply`).
    warmed: Vec<Tensor>,
}

impl Optimizer {
    /// Plain gradient descent.
    pub fn sgd(learning_rate: f32) -> Result<Optimizer> {
        Optimizer::new("sgd", Rule::Sgd, learning_rate)
    }

    /// Gradient descent with momentum, optionally Nesterov's.
    pub fn momentum(learning_rate: f32, momentum: f32, nesterov: bool) -> Result<Optimizer> {
        finite("momentum", "momentum", momentum)?;
        Optimizer::new(
            "momentum",
            Rule::Momentum { momentum, nesterov },
            learning_rate,
        )
    }

    /// Adam; TF.js's defaults are `0.001, 0.9, 0.999, 1e-7`.
    pub fn adam(learning_rate: f32, beta1: f32, beta2: f32, epsilon: f32) -> Result<Optimizer> {
        for (what, v) in [("beta1", beta1), ("beta2", beta2)] {
            if !(0.0..1.0).contains(&v) {
                return Err(RegistrationError::new(
                    "adam",
                    ErrorClass::Range,
                    format!("{what} must be in [0, 1), got {}", number_f32(v)),
                ));
            }
        }
        finite("adam", "epsilon", epsilon)?;
        let rule = Rule::Adam {
            beta1,
            beta2,
            epsilon,
        };
        Optimizer::new("adam", rule, learning_rate)
    }

    fn new(op: &'static str, rule: Rule, learning_rate: f32) -> Result<Optimizer> {
        finite(op, "learning rate", learning_rate)?;
        Ok(Optimizer {
            rule,
            learning_rate,
            state: FxHashMap::default(),
            powers: None,
            device: None,
            skip_non_finite: false,
            warmed: Vec::new(),
        })
    }

    pub fn learning_rate(&self) -> f32 {
        self.learning_rate
    }

    /// Whether steps skip non-finite values (`set_skip_non_finite`).
    pub fn skips_non_finite(&self) -> bool {
        self.skip_non_finite
    }

    /// With `on`, each step turns its device's numerics checks on
    /// (`Device::set_check_numerics`, from the step's forward pass if
    /// nothing flushed it yet), so a step whose cost, gradients or new
    /// values would be NaN or infinite fails whole and changes nothing,
    /// its cost rejecting with the op that made the first one, or, where
    /// no op made it (a NaN in the values the page gave, which the ops'
    /// checks let pass), with the step's own `checkNumerics`. The checks
    /// stay on for that device: work queued with the step is checked when
    /// it runs, whenever that is. Off again does not turn them off.
    pub fn set_skip_non_finite(&mut self, on: bool) {
        self.skip_non_finite = on;
    }

    /// Takes effect from the next step.
    pub fn set_learning_rate(&mut self, learning_rate: f32) -> Result<()> {
        finite("learningRate", "learning rate", learning_rate)?;
        self.learning_rate = learning_rate;
        Ok(())
    }

    /// One training step: the gradients of `f`'s value (a scalar) with
    /// respect to `var_list` (by default every trainable variable), applied.
    /// Returns the cost when asked. The step fails whole (see the module
    /// doc of `train`): the cost is among its guards, so a failure anywhere
    /// in the forward pass leaves every variable as it was.
    pub fn minimize(
        &mut self,
        f: impl FnOnce() -> Result<Tensor>,
        return_cost: bool,
        var_list: Option<&[Variable]>,
    ) -> Result<Option<Tensor>> {
        let (cost, grads) = variable_grads_for("minimize", f, var_list)?;
        let cost = self.apply("minimize", &grads, Some(&cost))?;
        Ok(cost.filter(|_| return_cost))
    }

    /// Applies `grads` (each of its variable's shape) as one step, all or
    /// nothing.
    pub fn apply_gradients(&mut self, grads: &[(Variable, Tensor)]) -> Result<()> {
        self.apply("applyGradients", grads, None).map(drop)
    }

    /// Applies `grads` as one step whose guards include `cost`; returns the
    /// cost as the step leaves it (failing with the step). Refusals name
    /// `op`, the method called.
    fn apply(
        &mut self,
        op: &'static str,
        grads: &[(Variable, Tensor)],
        cost: Option<&Tensor>,
    ) -> Result<Option<Tensor>> {
        let device = self.step_device(op, grads)?;
        if self.skip_non_finite && !device.checks_numerics() {
            device.set_check_numerics(true);
        }
        self.state.retain(|_, (alive, _)| alive.strong_count() > 0);

        // Every new value, with what it replaces: (old, new) pairs, in the
        // order they are replaced below.
        let mut pairs: Vec<(Tensor, Tensor)> = Vec::new();
        // Adam's step count advances (as powers of the betas), and its bias
        // corrections `1 - beta^t` are made once for every variable: made
        // per variable, each would cut that variable's fused update in two.
        let mut corrections = None;
        if let Rule::Adam { beta1, beta2, .. } = self.rule {
            let [p1, p2] = match &self.powers {
                Some(p) => p.clone(),
                None => [
                    device.tensor(&[1.0], Some(&[]))?,
                    device.tensor(&[1.0], Some(&[]))?,
                ],
            };
            let next = [p1.mul(beta1)?, p2.mul(beta2)?];
            corrections = Some([next[0].neg()?.add(1.0)?, next[1].neg()?.add(1.0)?]);
            pairs.push((p1, next[0].clone()));
            pairs.push((p2, next[1].clone()));
        }
        // Each variable, and how many of the pairs are its (value and state).
        let mut updated: Vec<(Variable, usize)> = Vec::new();
        for (v, g) in grads {
            let w = v.value();
            let state = match self.state.get(&v.id()) {
                Some((_, state)) => state.clone(),
                None => self.fresh_state(&w)?,
            };
            let (new_w, new_state) = self.update(&w, g, &state, corrections.as_ref())?;
            updated.push((v.clone(), 1 + new_state.len()));
            pairs.push((w, new_w));
            pairs.extend(state.into_iter().zip(new_state));
        }

        // A NaN or an infinity the page gave passes the numerics checks of
        // the ops that carry it (no op made it); the values the step would
        // write, and its cost, are checked whatever made them.
        let mut guarded = None;
        if self.skip_non_finite {
            guarded = cost.map(Tensor::check_numerics).transpose()?;
            for (_, new) in &mut pairs {
                *new = new.check_numerics()?;
            }
        }
        let (committed, cost) = commit(&pairs, guarded.as_ref().or(cost))?;
        // A warm-up's step keeps no state: the next step is a first step,
        // its state made as the warm-up's was (taking the warm-up's
        // commits, whose records carry no bounds, Adam's powers were read
        // as unknown and, with the numerics checks on, the first real
        // step's kernel was not the one the warm-up compiled). Its commits
        // are held apart instead, for the warm-up to write.
        if device.is_warming() {
            self.warmed.extend(committed);
            return Ok(cost);
        }
        self.warmed.clear();
        // Nothing is replaced before every commit is registered.
        self.device = Some(device);
        let mut committed = committed.into_iter();
        if corrections.is_some()
            && let (Some(p1), Some(p2)) = (committed.next(), committed.next())
        {
            self.powers = Some([p1, p2]);
        }
        for (v, count) in updated {
            // This variable's commits: its value, then its state.
            let mut mine = committed.by_ref().take(count);
            if let Some(w) = mine.next() {
                v.set(w);
            }
            self.state
                .insert(v.id(), (Rc::downgrade(&v.slot), mine.collect()));
        }
        Ok(cost)
    }

    /// The device a step on `grads` runs on, once the gradients are checked
    /// against their variables (shape, device, one each) and the
    /// optimizer's state (one device: the first step's).
    fn step_device(&self, op: &'static str, grads: &[(Variable, Tensor)]) -> Result<Device> {
        let vars: Vec<Variable> = grads.iter().map(|(v, _)| v.clone()).collect();
        let device = one_device(op, &vars)?;
        if let Some(mine) = &self.device
            && !mine.same(&device)
        {
            // A program that requests a new device after a loss and keeps
            // its optimizer lands here: say so, not only that devices differ.
            let lost = match mine.lost_reason() {
                Some(_) => ", which was lost",
                None => "",
            };
            return Err(RegistrationError::new(
                op,
                ErrorClass::Other,
                format!(
                    "this optimizer's state lives on {}{lost}, the variables on {}; use one \
                     optimizer per device",
                    mine.label(),
                    device.label()
                ),
            ));
        }
        for (i, (v, g)) in grads.iter().enumerate() {
            device.admit(op, &[g])?;
            if g.shape() != v.shape().as_slice() {
                return Err(RegistrationError::new(
                    op,
                    ErrorClass::Range,
                    format!(
                        "gradient {i} has shape {:?}, variable '{}' {:?}",
                        g.shape(),
                        v.name(),
                        v.shape()
                    ),
                ));
            }
            if grads[..i].iter().any(|(u, _)| u.same(v)) {
                return Err(RegistrationError::new(
                    op,
                    ErrorClass::Other,
                    format!("variable '{}' has two gradients", v.name()),
                ));
            }
        }
        Ok(device)
    }

    /// A variable's new value and state, from its value `w`, its gradient
    /// `g` and its state (Adam's bias corrections made once per step).
    fn update(
        &self,
        w: &Tensor,
        g: &Tensor,
        state: &[Tensor],
        corrections: Option<&[Tensor; 2]>,
    ) -> Result<(Tensor, Vec<Tensor>)> {
        let lr = self.learning_rate;
        let missing = || {
            RegistrationError::new(
                "applyGradients",
                ErrorClass::Other,
                "internal: the optimizer's state is missing",
            )
        };
        Ok(match self.rule {
            Rule::Sgd => (w.sub(&g.mul(lr)?)?, Vec::new()),
            Rule::Momentum { momentum, nesterov } => {
                let a = state.first().ok_or_else(missing)?.mul(momentum)?.add(g)?;
                let step = match nesterov {
                    true => g.add(&a.mul(momentum)?)?,
                    false => a.clone(),
                };
                (w.sub(&step.mul(lr)?)?, vec![a])
            }
            Rule::Adam {
                beta1,
                beta2,
                epsilon,
            } => {
                let ([m, s], Some([c1, c2])) = (state, corrections) else {
                    return Err(missing());
                };
                let m = m.mul(beta1)?.add(&g.mul(1.0 - beta1)?)?;
                let s = s.mul(beta2)?.add(&g.square()?.mul(1.0 - beta2)?)?;
                let step = m.div(c1)?.div(&s.div(c2)?.sqrt()?.add(epsilon)?)?;
                (w.sub(&step.mul(lr)?)?, vec![m, s])
            }
        })
    }

    /// The state a variable starts with: zeros of its shape, one per
    /// tensor the rule keeps. Uploaded, as are Adam's first powers: the
    /// first step's update then reads them from buffers as every later
    /// step does, so the step's kernels keep their texts and the second
    /// step compiles nothing new (made by `zeros`, they were fused into the
    /// first step's kernels as constants, and every later step's texts
    /// differed).
    fn fresh_state(&self, w: &Tensor) -> Result<Vec<Tensor>> {
        let n = match self.rule {
            Rule::Sgd => 0,
            Rule::Momentum { .. } => 1,
            Rule::Adam { .. } => 2,
        };
        let zeros = vec![0.0; w.size()];
        (0..n)
            .map(|_| w.device().tensor(&zeros, Some(w.shape())))
            .collect()
    }
}

fn finite(op: &'static str, what: &str, v: f32) -> Result<()> {
    match v.is_finite() {
        true => Ok(()),
        false => Err(RegistrationError::new(
            op,
            ErrorClass::Range,
            format!("the {what} must be a finite number, got {}", number_f32(v)),
        )),
    }
}
