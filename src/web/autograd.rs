//! Gradients, TF.js's way: `grad(f)`, `grads(f)`, `valueAndGrad(f)` and
//! `valueAndGrads(f)` return a function of `(x or xs, dy?)` that runs `f`
//! with its inputs watched; `variableGrads(f, varList?)` takes gradients
//! with respect to variables. All over the Rust API (deferred and fused like
//! any work). Like TF.js, the tensors `f` makes are disposed afterwards, all
//! but its result.

use std::cell::RefCell;

use js_sys::{Array, Function, Object, Reflect};
use wasm_bindgen::prelude::*;

use super::{args, errors, registry};
use crate::{Device, ErrorClass, RegistrationError, Tensor, Variable};

/// `grad(f)`: `(x, dy?) => Tensor`.
#[wasm_bindgen(skip_typescript)]
pub fn grad(f: JsValue) -> Result<JsValue, JsValue> {
    gradient_fn("grad", f, Form::Single)
}

/// `valueAndGrad(f)`: `(x, dy?) => ({ value, grad })`.
#[wasm_bindgen(js_name = valueAndGrad, skip_typescript)]
pub fn value_and_grad(f: JsValue) -> Result<JsValue, JsValue> {
    gradient_fn("valueAndGrad", f, Form::SingleWithValue)
}

/// `grads(f)`: `(xs, dy?) => Tensor[]`.
#[wasm_bindgen(skip_typescript)]
pub fn grads(f: JsValue) -> Result<JsValue, JsValue> {
    gradient_fn("grads", f, Form::Many)
}

/// `valueAndGrads(f)`: `(xs, dy?) => ({ value, grads })`.
#[wasm_bindgen(js_name = valueAndGrads, skip_typescript)]
pub fn value_and_grads(f: JsValue) -> Result<JsValue, JsValue> {
    gradient_fn("valueAndGrads", f, Form::ManyWithValue)
}

/// `variableGrads(f, varList?)`: `{ value, grads }`, `grads` keyed by
/// variable name, for the trainable variables of `varList` (by default
/// every trainable variable) that `f()`'s value depends on.
#[wasm_bindgen(js_name = variableGrads, skip_typescript)]
pub fn variable_grads(f: JsValue, var_list: JsValue) -> Result<JsValue, JsValue> {
    let op = "variableGrads";
    let f = args::function(op, "f", &f)?;
    let vars = var_list_arg(op, &var_list)?;
    let device = vars
        .as_deref()
        .and_then(|v| v.first())
        .map(Variable::device);
    let ((_, grads), value) = run_user(op, &f, &Array::new(), device.as_ref(), true, |call| {
        crate::variable_grads(call, vars.as_deref())
    })?;
    let named = Object::new();
    for (variable, grad) in grads {
        Reflect::set(
            &named,
            &variable.name().into(),
            &registry::wrap_tensor(grad),
        )?;
    }
    let out = Object::new();
    Reflect::set(&out, &"value".into(), &value)?;
    Reflect::set(&out, &"grads".into(), &named)?;
    Ok(out.into())
}

/// What a gradient function takes and returns.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    Single,
    SingleWithValue,
    Many,
    ManyWithValue,
}

/// The function `grad`, `grads`, `valueAndGrad` and `valueAndGrads` return.
/// Freed with the JS function when the garbage collector takes it (the
/// package is built with weak references).
fn gradient_fn(op: &'static str, f: JsValue, form: Form) -> Result<JsValue, JsValue> {
    let f = args::function(op, "f", &f)?;
    let single = matches!(form, Form::Single | Form::SingleWithValue);
    let call = move |xs: JsValue, dy: JsValue| -> Result<JsValue, JsValue> {
        let (tensors, arguments) = match single {
            true => {
                let x = args::tensor(op, " (x)", &xs)?;
                (vec![x], Array::of1(&xs))
            }
            false => {
                let tensors = args::tensors(op, "xs", &xs)?;
                (tensors, xs.clone().unchecked_into::<Array>())
            }
        };
        let Some(device) = tensors.first().map(|t| t.device().clone()) else {
            return Err(errors::op_error(
                op,
                ErrorClass::Type,
                "xs must hold at least one tensor",
            ));
        };
        let dy = match args::absent(&dy) {
            true => None,
            false => Some(args::tensor(op, " (dy)", &dy)?),
        };
        let with_value = matches!(form, Form::SingleWithValue | Form::ManyWithValue);
        let ((_, grads), value) =
            run_user(op, &f, &arguments, Some(&device), with_value, |call| {
                device.value_and_grads(|_| call(), &tensors, dy.as_ref())
            })?;
        let mut grads: Vec<JsValue> = grads.into_iter().map(registry::wrap_tensor).collect();
        let (key, grads) = match single {
            true => ("grad", grads.pop().unwrap_or(JsValue::UNDEFINED)),
            false => ("grads", grads.into_iter().collect::<Array>().into()),
        };
        if !with_value {
            return Ok(grads);
        }
        let out = Object::new();
        Reflect::set(&out, &"value".into(), &value)?;
        Reflect::set(&out, &key.into(), &grads)?;
        Ok(out.into())
    };
    let closure = Closure::<dyn Fn(JsValue, JsValue) -> Result<JsValue, JsValue>>::new(call);
    Ok(closure.into_js_value())
}

/// `varList`: absent, or an array of variables.
pub(super) fn var_list_arg(
    op: &'static str,
    value: &JsValue,
) -> Result<Option<Vec<Variable>>, JsValue> {
    if args::absent(value) {
        return Ok(None);
    }
    let Some(list) = value.dyn_ref::<Array>() else {
        return Err(errors::op_error(
            op,
            ErrorClass::Type,
            format!(
                "varList must be an array of variables, got {}",
                args::describe(value)
            ),
        ));
    };
    list.iter()
        .enumerate()
        .map(|(i, item)| match registry::find_variable(&item) {
            Some(v) => Ok(v),
            None => Err(errors::op_error(
                op,
                ErrorClass::Type,
                format!(
                    "varList[{i}] must be a variable (device.variable), got {}",
                    args::describe(&item)
                ),
            )),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Runs `body`, which calls the user's `f(...arguments)` through the
/// closure it is given, at most once. Returns what `body` returned and the
/// value `f` returned (a tensor object, kept when `keep_value`); every
/// other tensor `f` made is disposed afterwards, as TF.js does (the tape
/// holds what the backward pass reads). A value not kept is disposed too
/// when `f` made it (not when it is a tensor `f` was given): `grad` and
/// `grads` return none, and one kept would be held until collected, as
/// would one of a call `body` refuses (`minimize` of no scalar). What
/// `f` throws is thrown again as is, once the Rust API has let go; a result
/// of `f` that is no tensor is refused naming `op`. The ops `body`
/// registers itself (the backward pass, an update) get the user's call as
/// their site, when `device` records sites.
pub(super) fn run_user<T>(
    op: &'static str,
    f: &Function,
    arguments: &Array,
    device: Option<&Device>,
    keep_value: bool,
    body: impl FnOnce(&dyn Fn() -> Result<Tensor, RegistrationError>) -> Result<T, RegistrationError>,
) -> Result<(T, JsValue), JsValue> {
    let returned: RefCell<JsValue> = RefCell::new(JsValue::UNDEFINED);
    let thrown: RefCell<Option<JsValue>> = RefCell::new(None);
    let call = || -> Result<Tensor, RegistrationError> {
        let result = f.apply(&JsValue::NULL, arguments).and_then(|value| {
            let tensor = args::tensor(op, " returned by f", &value)?;
            returned.replace(value);
            Ok(tensor)
        });
        result.map_err(|error| {
            thrown.replace(Some(error));
            RegistrationError::new(op, ErrorClass::Other, "f failed")
        })
    };
    let site = device.and_then(errors::site_if_captured);
    registry::open_scope();
    let result = crate::tensor::with_site(site, || body(&call));
    let value = returned.take();
    // A refused call returns no value: one kept then would be out of the
    // caller's reach, held until the device goes.
    let kept = match keep_value && result.is_ok() {
        true => registry::tensors_in(&value),
        false => Default::default(),
    };
    registry::close_scope(&kept);
    if let Some(error) = thrown.take() {
        return Err(error);
    }
    let result = result.map_err(|e| errors::registration(&e))?;
    Ok((result, value))
}
