//! `train.sgd`, `train.momentum` and `train.adam`, TF.js's optimizers: each
//! returns a plain object (`minimize`, `applyGradients`, `learningRate`,
//! `dispose`) over one Rust `Optimizer`. A plain object of closures rather
//! than a class: a closure cannot be called with a foreign `this`.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Function, Object, Reflect};
use wasm_bindgen::prelude::*;

use super::args::{self, Options};
use super::autograd::{run_user, var_list_arg};
use super::{errors, registry};
use crate::{ErrorClass, Optimizer, Tensor, Variable};

/// The namespace of the optimizers: `train.sgd(0.1)`. A class of static
/// methods only (wasm-bindgen exports no plain objects); never constructed.
#[wasm_bindgen(js_name = train, skip_typescript)]
pub struct Train;

#[wasm_bindgen(js_class = train)]
impl Train {
    /// `train.sgd(learningRate)`.
    #[wasm_bindgen(skip_typescript)]
    pub fn sgd(learning_rate: JsValue) -> Result<JsValue, JsValue> {
        let op = "sgd";
        let lr = args::number(op, "learningRate", &learning_rate)?;
        optimizer(op, Optimizer::sgd(lr as f32))
    }

    /// `train.momentum(learningRate, momentum, useNesterov = false)`.
    #[wasm_bindgen(skip_typescript)]
    pub fn momentum(
        learning_rate: JsValue,
        momentum: JsValue,
        use_nesterov: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "momentum";
        let lr = args::number(op, "learningRate", &learning_rate)?;
        let m = args::number(op, "momentum", &momentum)?;
        let nesterov = args::boolean_or(op, "useNesterov", &use_nesterov, false)?;
        optimizer(op, Optimizer::momentum(lr as f32, m as f32, nesterov))
    }

    /// `train.adam(learningRate = 0.001, beta1 = 0.9, beta2 = 0.999,
    /// epsilon = 1e-7)`.
    #[wasm_bindgen(skip_typescript)]
    pub fn adam(
        learning_rate: JsValue,
        beta1: JsValue,
        beta2: JsValue,
        epsilon: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "adam";
        let lr = args::number_or(op, "learningRate", &learning_rate, 0.001)?;
        let b1 = args::number_or(op, "beta1", &beta1, 0.9)?;
        let b2 = args::number_or(op, "beta2", &beta2, 0.999)?;
        let eps = args::number_or(op, "epsilon", &epsilon, 1e-7)?;
        optimizer(
            op,
            Optimizer::adam(lr as f32, b1 as f32, b2 as f32, eps as f32),
        )
    }
}

/// Defines `name` on `object` as an enumerable accessor of `get` and `set`.
fn property(
    object: &Object,
    name: &str,
    get: impl Fn() -> Result<JsValue, JsValue> + 'static,
    set: impl Fn(JsValue) -> Result<JsValue, JsValue> + 'static,
) -> Result<(), JsValue> {
    let descriptor = Object::new();
    let get = Closure::<dyn Fn() -> Result<JsValue, JsValue>>::new(get).into_js_value();
    let set = Closure::<dyn Fn(JsValue) -> Result<JsValue, JsValue>>::new(set).into_js_value();
    Reflect::set(&descriptor, &"get".into(), &get)?;
    Reflect::set(&descriptor, &"set".into(), &set)?;
    Reflect::set(&descriptor, &"enumerable".into(), &JsValue::TRUE)?;
    Object::define_property(object, &name.into(), &descriptor);
    Ok(())
}

/// The optimizer object: its methods share one `Optimizer`, gone once
/// disposed.
fn optimizer(
    op: &'static str,
    made: Result<Optimizer, crate::RegistrationError>,
) -> Result<JsValue, JsValue> {
    let made = made.map_err(|e| errors::registration(&e))?;
    let state = Rc::new(RefCell::new(Some(made)));
    let object = Object::new();
    let method = |name: &str, f: JsValue| Reflect::set(&object, &name.into(), &f);

    let held = state.clone();
    let minimize = move |f: JsValue, second: JsValue, third: JsValue| {
        with_optimizer(&held, "minimize", |opt| minimize(opt, &f, &second, &third))
    };
    method(
        "minimize",
        Closure::<dyn Fn(JsValue, JsValue, JsValue) -> Result<JsValue, JsValue>>::new(minimize)
            .into_js_value(),
    )?;

    let held = state.clone();
    let apply = move |grads: JsValue| {
        with_optimizer(&held, "applyGradients", |opt| apply_gradients(opt, &grads))
    };
    method(
        "applyGradients",
        Closure::<dyn Fn(JsValue) -> Result<JsValue, JsValue>>::new(apply).into_js_value(),
    )?;

    let held = state.clone();
    let dispose = move || {
        // Taken out first: its tensors are released outside the borrow.
        let taken = held.try_borrow_mut().ok().and_then(|mut s| s.take());
        drop(taken);
    };
    method("dispose", Closure::<dyn Fn()>::new(dispose).into_js_value())?;

    let held = state.clone();
    let get = move || {
        with_optimizer(&held, "learningRate", |opt| {
            Ok(JsValue::from(crate::error::shortest(opt.learning_rate())))
        })
    };
    let held = state.clone();
    let set = move |value: JsValue| set_learning_rate(&held, "learningRate", &value);
    property(&object, "learningRate", get, set)?;
    // TF.js's name for the same (its `sgd` and `momentum` have it).
    let held = state.clone();
    let set = move |value: JsValue| set_learning_rate(&held, "setLearningRate", &value);
    method(
        "setLearningRate",
        Closure::<dyn Fn(JsValue) -> Result<JsValue, JsValue>>::new(set).into_js_value(),
    )?;

    let held = state.clone();
    let get = move || {
        with_optimizer(&held, "skipNonFinite", |opt| {
            Ok(JsValue::from(opt.skips_non_finite()))
        })
    };
    let held = state;
    let set = move |value: JsValue| {
        with_optimizer(&held, "skipNonFinite", |opt| {
            let on = value.as_bool().ok_or_else(|| {
                errors::op_error("skipNonFinite", ErrorClass::Type, "takes a boolean")
            })?;
            opt.set_skip_non_finite(on);
            Ok(JsValue::UNDEFINED)
        })
    };
    property(&object, "skipNonFinite", get, set)?;
    Reflect::set(&object, &"name".into(), &op.into())?;
    Ok(object.into())
}

/// Sets the learning rate from JS, refusals naming `op`.
fn set_learning_rate(
    state: &RefCell<Option<Optimizer>>,
    op: &'static str,
    value: &JsValue,
) -> Result<JsValue, JsValue> {
    with_optimizer(state, op, |opt| {
        let lr = args::number(op, "learningRate", value)?;
        // Checked as given: past float32, `lr as f32` would say Infinity.
        if !(lr as f32).is_finite() {
            return Err(args::range_error(
                op,
                format!(
                    "the learning rate must be a finite float32, got {}",
                    crate::error::number(lr)
                ),
            ));
        }
        opt.set_learning_rate(lr as f32)
            .map(|()| JsValue::UNDEFINED)
            .map_err(|e| errors::registration(&e))
    })
}

/// Runs `f` on the optimizer, unless it was disposed or is busy (the user's
/// `f` called back into it during `minimize`).
fn with_optimizer(
    state: &RefCell<Option<Optimizer>>,
    op: &'static str,
    f: impl FnOnce(&mut Optimizer) -> Result<JsValue, JsValue>,
) -> Result<JsValue, JsValue> {
    let Ok(mut borrowed) = state.try_borrow_mut() else {
        return Err(errors::op_error(
            op,
            ErrorClass::Other,
            "the optimizer is busy: f called it from inside minimize",
        ));
    };
    match borrowed.as_mut() {
        Some(opt) => f(opt),
        None => Err(errors::op_error(
            op,
            ErrorClass::Other,
            "the optimizer was disposed",
        )),
    }
}

/// `minimize(f, returnCost = false, varList?)`, or `minimize(f, {
/// returnCost, varList })`: one step; the cost (failing with the step) or
/// `null`.
fn minimize(
    opt: &mut Optimizer,
    f: &JsValue,
    second: &JsValue,
    third: &JsValue,
) -> Result<JsValue, JsValue> {
    let op = "minimize";
    let f: Function = args::function(op, "f", f)?;
    let (return_cost, var_list) = if second.is_object() {
        let options = Options::read(op, "options", second, &["returnCost", "varList"])?;
        let (list, _) = options.get("varList")?;
        (options.boolean_or("returnCost", false)?, list)
    } else {
        let cost = args::boolean_or(op, "returnCost", second, false)?;
        (cost, third.clone())
    };
    let vars = var_list_arg(op, &var_list)?;
    let device = vars
        .as_deref()
        .and_then(|v| v.first().map(Variable::device))
        .or_else(|| registry::variables().first().map(|(_, v)| v.device()));
    let (cost, returned) = run_user(op, &f, &Array::new(), device.as_ref(), true, |call| {
        opt.minimize(call, true, vars.as_deref())
    })?;
    // As TF.js does: the value `f` returned is disposed; the cost returned
    // is the step's own tensor.
    registry::dispose_tensors(&registry::tensors_in(&returned));
    match cost {
        Some(cost) if return_cost => Ok(registry::wrap_tensor(cost)),
        _ => Ok(JsValue::NULL),
    }
}

/// `applyGradients(grads)`: `grads` as `{ [variableName]: Tensor }` or
/// `[{ name, tensor }]`, each gradient of its variable's shape.
fn apply_gradients(opt: &mut Optimizer, grads: &JsValue) -> Result<JsValue, JsValue> {
    let op = "applyGradients";
    let type_error = |why: String| errors::op_error(op, ErrorClass::Type, why);
    let entries: Vec<(String, JsValue)> = if let Some(list) = grads.dyn_ref::<Array>() {
        list.iter()
            .enumerate()
            .map(|(i, item)| {
                let name = Reflect::get(&item, &"name".into()).unwrap_or_default();
                let name = name.as_string().ok_or_else(|| {
                    type_error(format!("grads[{i}].name must be a variable's name"))
                })?;
                let tensor = Reflect::get(&item, &"tensor".into()).unwrap_or_default();
                Ok((name, tensor))
            })
            .collect::<Result<_, JsValue>>()?
    } else if grads.is_object() && matches!(registry::find(grads), registry::Found::Foreign) {
        Object::entries(grads.unchecked_ref())
            .iter()
            .map(|pair| {
                let pair: Array = pair.unchecked_into();
                (pair.get(0).as_string().unwrap_or_default(), pair.get(1))
            })
            .collect()
    } else {
        return Err(type_error(format!(
            "grads must map variable names to tensors, got {}",
            args::describe(grads)
        )));
    };
    let variables = registry::variables();
    let mut pairs: Vec<(Variable, Tensor)> = Vec::new();
    for (name, tensor) in entries {
        let mut named = variables.iter().filter(|(_, v)| v.name() == name);
        let variable = match (named.next(), named.next()) {
            (Some((_, v)), None) => v.clone(),
            (None, _) => {
                return Err(errors::op_error(
                    op,
                    ErrorClass::Other,
                    format!("no variable is named '{name}'"),
                ));
            }
            (Some(_), Some(_)) => {
                return Err(errors::op_error(
                    op,
                    ErrorClass::Other,
                    format!("variables of several devices are named '{name}'; pass one device's"),
                ));
            }
        };
        let place = format!(" (the gradient of '{name}')");
        pairs.push((variable, args::tensor(op, &place, &tensor)?));
    }
    let site = pairs
        .first()
        .and_then(|(v, _)| errors::site_if_captured(&v.device()));
    crate::tensor::with_site(site, || opt.apply_gradients(&pairs))
        .map(|()| JsValue::UNDEFINED)
        .map_err(|e| errors::registration(&e))
}
