//! JS errors built from the Rust error values: the same structure, as
//! properties, with the same text as `message`.

use js_sys::{Array, Object, Reflect};
use wasm_bindgen::prelude::*;

use crate::{Device, ErrorClass, ExecutionError, RegistrationError, Report, Root, TensorError};

fn set(target: &JsValue, key: &str, value: impl Into<JsValue>) {
    let _ = Reflect::set(target, &key.into(), &value.into());
}

fn string_or_null(value: Option<&str>) -> JsValue {
    value.map_or(JsValue::NULL, JsValue::from)
}

/// A registration error as the conventional JS class (`TypeError`,
/// `RangeError` or `Error`), with `op` naming the op.
pub fn registration(err: &RegistrationError) -> JsValue {
    let message = err.to_string();
    let error: JsValue = match err.class {
        ErrorClass::Type => js_sys::TypeError::new(&message).into(),
        ErrorClass::Range => js_sys::RangeError::new(&message).into(),
        ErrorClass::Other => js_sys::Error::new(&message).into(),
    };
    set(&error, "op", err.op);
    error
}

/// An error of `op` raised in this layer (an argument refused before
/// anything reached the Rust API, a device that could not be had), built
/// like one the Rust API returns: JS code meets one kind of error.
pub fn op_error(op: &'static str, class: ErrorClass, reason: impl Into<String>) -> JsValue {
    registration(&RegistrationError::new(op, class, reason))
}

/// The user's JS frame, when `device` records where things happen; `None`
/// otherwise, without the cost of capturing a stack.
pub fn site_if_captured(device: &Device) -> Option<String> {
    if device.captures_stacks() {
        caller_site()
    } else {
        None
    }
}

/// `{ kind, op, message }`.
fn root(root: &Root) -> Object {
    let object = Object::new();
    set(&object, "kind", root.kind.name());
    set(&object, "op", root.op.as_str());
    set(&object, "message", root.message.as_str());
    object
}

/// One failure's part of a report: `failureId`, `depth`, `carriers`,
/// `chain` (`{ op, needed, produced }`, newest first), `droppedSkips`,
/// `root`, `registeredAt`.
fn report(report: &Report) -> Object {
    let object = Object::new();
    fill_report(&object, report);
    object
}

fn fill_report(target: &JsValue, report: &Report) {
    set(target, "failureId", report.failure.get() as f64);
    set(target, "depth", report.depth as f64);
    set(target, "carriers", report.carriers as f64);
    let chain: Array = report
        .chain
        .iter()
        .map(|skip| {
            let hop = Object::new();
            set(&hop, "op", skip.op.as_str());
            set(&hop, "needed", skip.needed.to_string());
            let produced: Array = skip
                .produced
                .iter()
                .map(|t| JsValue::from(t.to_string()))
                .collect();
            set(&hop, "produced", produced);
            JsValue::from(hop)
        })
        .collect();
    set(target, "chain", chain);
    set(target, "droppedSkips", report.dropped as f64);
    set(target, "root", root(&report.root));
    set(
        target,
        "registeredAt",
        string_or_null(report.root.registered_at.as_deref()),
    );
}

/// The class of what a failed read rejects with, exported so JS code can
/// test `e instanceof TensorError`. A wasm-bindgen class holds no
/// inheritance, so its prototype is made to inherit `Error.prototype` when
/// its first object is made (`e instanceof Error` holds too). What is
/// thrown is not that object but a real `Error` given its prototype: a
/// structured clone (a Worker's `postMessage`) keeps an `Error`'s message,
/// and an object that only inherited from one came out `[object Object]`,
/// its message lost and its wasm pointer an enumerable field. Its `free()`
/// and `Symbol.dispose` do nothing: the error owns no wasm memory. Never
/// constructed from JS.
#[wasm_bindgen(js_name = TensorError, skip_typescript)]
pub struct JsTensorError {
    _made_here: (),
}

/// The class of what a failed `sync()` rejects with (see `JsTensorError`).
#[wasm_bindgen(js_name = ExecutionError, skip_typescript)]
pub struct JsExecutionError {
    _made_here: (),
}

#[wasm_bindgen(inline_js = r#"
export function make_error(object, name, message) {
  const proto = Object.getPrototypeOf(object);
  if (!Error.prototype.isPrototypeOf(proto)) {
    Object.setPrototypeOf(proto, Error.prototype);
    // An error owns no wasm memory: the class's free() would free a null
    // pointer and throw.
    for (const key of ['free', Symbol.dispose]) {
      if (key !== undefined && key in proto) Object.defineProperty(proto, key, { value() {}, configurable: true, writable: true });
    }
  }
  const error = new Error(message);
  Object.setPrototypeOf(error, proto);
  Object.defineProperty(error, 'name', { value: name, writable: true, configurable: true, enumerable: false });
  if (typeof error.stack === 'string') error.stack = error.stack.replace(/^Error/, name);
  return error;
}
"#)]
extern "C" {
    /// An `Error` named `name` with `message`, of the class of `object` (an
    /// instance of an error class of this module, made for its prototype).
    fn make_error(object: JsValue, name: &str, message: &str) -> JsValue;
}

/// A failed read as a `TensorError` (an `Error`): the first failure's
/// fields at the top (the common case has one), every failure in
/// `failures`, and `cause` an `Error` for the root, so consoles print the
/// chain.
pub fn tensor(err: &TensorError) -> JsValue {
    let made = JsValue::from(JsTensorError { _made_here: () });
    let error = make_error(made, "TensorError", &err.to_string());
    set(&error, "tensor", err.tensor.0 as f64);
    if let Some(first) = err.first() {
        fill_report(&error, first);
        let cause = js_sys::Error::new(&first.root.to_string());
        cause.set_name(&format!("{}Error", first.root.kind.name()));
        set(&error, "cause", cause);
    }
    let failures: Array = err
        .failures
        .iter()
        .map(|r| JsValue::from(report(r)))
        .collect();
    set(&error, "failures", failures);
    set(&error, "askedAt", string_or_null(err.asked_at.as_deref()));
    error
}

/// A failed `sync()` as an `ExecutionError` (an `Error`), with `failures`:
/// `{ failureId, root, tainted }` per distinct failure (the first 256), and
/// `omitted`, how many more there were.
pub fn execution(err: &ExecutionError) -> JsValue {
    let made = JsValue::from(JsExecutionError { _made_here: () });
    let error = make_error(made, "ExecutionError", &err.to_string());
    let failures: Array = err
        .failures
        .iter()
        .map(|f| {
            let object = Object::new();
            set(&object, "failureId", f.failure.get() as f64);
            set(&object, "root", root(&f.root));
            set(&object, "tainted", f.tainted as f64);
            JsValue::from(object)
        })
        .collect();
    set(&error, "failures", failures);
    set(&error, "omitted", err.omitted as f64);
    error
}

/// The user's frame of the current JS stack, `url:line:column`: the frame
/// that called the library's method (cut at that method, which holds in a
/// bundle too), or, where the engine cannot cut a stack at a function, the
/// first frame that is not the library's own glue or wasm by file name.
pub fn caller_site() -> Option<String> {
    let stack = super::registry::user_stack()
        .filter(|stack| stack.lines().count() > 1)
        .or_else(whole_stack)?;
    stack
        .lines()
        .skip(1)
        .map(str::trim)
        .find(|line| {
            !(line.contains("webfusion.js")
                || line.contains("/snippets/webfusion-")
                || line.contains("webfusion_bg.wasm")
                || line.contains("wasm-function")
                || line.contains("wasm://"))
        })
        .map(|line| {
            // `at f (url:1:2)`, `at url:1:2`, or for code run by eval or
            // `new Function`, `at f (eval at g (url:1:2), <anonymous>:3:4)`,
            // whose own place is the last one.
            let at = line.strip_prefix("at ").unwrap_or(line);
            let place = match at.find('(') {
                Some(open) if at.ends_with(')') => &at[open + 1..at.len() - 1],
                _ => at,
            };
            match place.strip_prefix("eval at ") {
                Some(eval) => eval.rsplit(", ").next().unwrap_or(eval).to_string(),
                None => place.to_string(),
            }
        })
}

/// The current JS stack, with room for the library's frames above the user's.
fn whole_stack() -> Option<String> {
    let error_class = js_sys::global()
        .dyn_into::<Object>()
        .ok()
        .and_then(|g| Reflect::get(&g, &"Error".into()).ok())?;
    let limit = Reflect::get(&error_class, &"stackTraceLimit".into()).unwrap_or(JsValue::UNDEFINED);
    set(&error_class, "stackTraceLimit", 100);
    let stack = Reflect::get(&js_sys::Error::new(""), &"stack".into())
        .ok()
        .and_then(|s| s.as_string());
    set(&error_class, "stackTraceLimit", limit);
    stack
}
