//! `grads(f)` and `valueAndGrads(f)`, TF.js's: each returns a function of
//! `(xs, dy?)` that runs `f(...xs)` with the `xs` watched and returns the
//! gradients (and the value) as tensors, computed by the Rust API's
//! `value_and_grads` (deferred and fused like any work). Like TF.js, the
//! tensors `f` makes are disposed afterwards, all but its result.

use std::cell::RefCell;

use js_sys::{Array, Function, Object, Reflect};
use wasm_bindgen::prelude::*;

use super::{args, errors, registry};
use crate::{ErrorClass, RegistrationError, Tensor};

/// `grads(f)`: `(xs, dy?) => Tensor[]`.
#[wasm_bindgen(skip_typescript)]
pub fn grads(f: JsValue) -> Result<JsValue, JsValue> {
    gradient_fn("grads", f, false)
}

/// `valueAndGrads(f)`: `(xs, dy?) => ({ value, grads })`.
#[wasm_bindgen(js_name = valueAndGrads, skip_typescript)]
pub fn value_and_grads(f: JsValue) -> Result<JsValue, JsValue> {
    gradient_fn("valueAndGrads", f, true)
}

/// The function `grads`/`valueAndGrads` returns. Freed with the JS function
/// when the garbage collector takes it (the package is built with weak
/// references).
fn gradient_fn(op: &'static str, f: JsValue, with_value: bool) -> Result<JsValue, JsValue> {
    let Some(f) = f.dyn_ref::<Function>().cloned() else {
        return Err(errors::op_error(
            op,
            ErrorClass::Type,
            format!("f must be a function, got {}", args::describe(&f)),
        ));
    };
    let call = move |xs: JsValue, dy: JsValue| -> Result<JsValue, JsValue> {
        let tensors = args::tensors(op, "xs", &xs)?;
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
        // What `f` returned (kept), or what it threw, or its result that is
        // no tensor (thrown again as is once the Rust API has let go).
        let returned: RefCell<JsValue> = RefCell::new(JsValue::UNDEFINED);
        let thrown: RefCell<Option<JsValue>> = RefCell::new(None);
        let run = |_: &[Tensor]| -> Result<Tensor, RegistrationError> {
            let result = f
                .apply(&JsValue::NULL, xs.unchecked_ref::<Array>())
                .and_then(|value| {
                    let tensor = args::tensor(op, " returned by f", &value)?;
                    returned.replace(value);
                    Ok(tensor)
                });
            result.map_err(|error| {
                thrown.replace(Some(error));
                RegistrationError::new(op, ErrorClass::Other, "f failed")
            })
        };
        // As TF.js does: the tensors `f` makes are disposed once the
        // gradients are registered (the tape holds what the backward pass
        // reads), all but its result.
        registry::open_scope();
        let result = device.value_and_grads(run, &tensors, dy.as_ref());
        let value = returned.take();
        registry::close_scope(&registry::tensors_in(&value));
        if let Some(error) = thrown.take() {
            return Err(error);
        }
        let (_, grads) = result.map_err(|e| errors::registration(&e))?;
        let grads: Array = grads.into_iter().map(registry::wrap_tensor).collect();
        if !with_value {
            return Ok(grads.into());
        }
        let out = Object::new();
        Reflect::set(&out, &"value".into(), &value)?;
        Reflect::set(&out, &"grads".into(), &grads)?;
        Ok(out.into())
    };
    let closure = Closure::<dyn Fn(JsValue, JsValue) -> Result<JsValue, JsValue>>::new(call);
    Ok(closure.into_js_value())
}
