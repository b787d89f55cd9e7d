//! The JS API: `Device` and `Tensor` classes over the Rust API, Promises for
//! reads, and JS errors carrying the same structure as the Rust ones.
//!
//! Malformed input from JS becomes a thrown `TypeError`/`RangeError`/`Error`
//! whose `op` names the method and whose message starts with it, never a
//! panic (a panic kills the module for the whole page). Policy (which
//! shapes fit, whether the device is alive, which operands may meet) stays
//! in the Rust API; this layer only turns JS values into its arguments and
//! its results into JS values.
//!
//! Which file owns what:
//! - `args.rs`: JS values to Rust arguments (shapes, integers, axes,
//!   numbers, options objects, tensor values), and how an error names what
//!   was passed.
//! - `registry.rs`: which JS objects are webfusion's (a brand per object)
//!   and what each holds; disposal; `tidy()` scopes; registering an op and
//!   wrapping its result.
//! - `device.rs`: the `Device` class.
//! - `tensor.rs`: the `Tensor` class and its op families.
//! - `errors.rs`: JS errors built from the Rust error values, and the
//!   user's JS frame for reports.
//! - here: start-up, `panicCount()` and `tidy()`.

use wasm_bindgen::prelude::*;

use crate::ErrorClass;

mod args;
mod device;
mod errors;
mod registry;
mod tensor;

#[wasm_bindgen(start)]
fn start() {
    crate::device::install_panic_hook();
}

/// How many panics the library's hook has seen in this page: 0, always. A
/// test suite asserts it at the end.
#[wasm_bindgen(js_name = panicCount)]
pub fn panic_count() -> f64 {
    crate::panics_observed() as f64
}

/// `tidy(fn)`: runs `fn` and disposes every tensor it created, except those
/// it returns (a tensor, or tensors anywhere inside the arrays, plain
/// objects, `Map`s and `Set`s it returns). Tensors nobody holds can then
/// fuse: a JS object keeps its tensor alive until it is disposed or
/// collected, and collection comes late.
#[wasm_bindgen(unchecked_return_type = "any")]
pub fn tidy(
    #[wasm_bindgen(js_name = fn, unchecked_param_type = "() => any")] f: JsValue,
) -> Result<JsValue, JsValue> {
    let op = "tidy";
    if !f.is_function() {
        return Err(errors::op_error(
            op,
            ErrorClass::Type,
            format!("fn must be a function, got {}", args::describe(&f)),
        ));
    }
    registry::open_scope();
    let result = f
        .unchecked_ref::<js_sys::Function>()
        .call0(&JsValue::UNDEFINED);
    // An async fn's tensors are made after tidy returns, outside its scope:
    // refused, rather than leaving them to the enclosing scope unseen.
    let promise = result
        .as_ref()
        .is_ok_and(|v| v.is_instance_of::<js_sys::Promise>());
    let kept = match &result {
        Ok(value) if !promise => registry::tensors_in(value),
        _ => Default::default(),
    };
    registry::close_scope(&kept);
    if promise {
        return Err(errors::op_error(
            op,
            ErrorClass::Type,
            "fn must not be async (it returned a Promise)",
        ));
    }
    result
}
