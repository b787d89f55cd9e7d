//! The JS API: `Device` and `Tensor` classes over the Rust API, Promises for
//! reads, and JS errors carrying the same structure as the Rust ones.
//!
//! Every argument from JS is checked here or in `tensor`: malformed input
//! becomes a thrown `TypeError`/`RangeError`/`Error`, never a panic (a panic
//! would kill the module for the whole page).

use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Float32Array, Object, Reflect};
use wasm_bindgen::prelude::*;

use crate::device::{Device, DeviceOptions};
use crate::error::{ErrorClass, RegistrationError};
use crate::runtime::execute::FaultKind;
use crate::tensor::{Operand, Tensor, set_registration_site};

mod errors;

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// How many panics the library's hook has seen in this page: 0, always. A
/// test suite asserts it at the end.
#[wasm_bindgen(js_name = panicCount)]
pub fn panic_count() -> f64 {
    crate::device::panics_observed() as f64
}

/// A JS tensor's hold on its tensor: emptied by `dispose()` or by the
/// `tidy()` that created it, after which the JS object throws when used.
type Slot = Rc<RefCell<Option<Tensor>>>;

thread_local! {
    /// The tensors JS holds, by id, so an operand passed from JS can be found
    /// without taking it over (wasm-bindgen's by-value conversion would
    /// invalidate the caller's object), and so `tidy()` can dispose them.
    static LIVE: RefCell<FxHashMap<u64, Slot>> = RefCell::new(FxHashMap::default());
    /// The open `tidy()` scopes, innermost last: the ids each created.
    static SCOPES: RefCell<Vec<Vec<u64>>> = const { RefCell::new(Vec::new()) };
}

/// A GPU device.
#[wasm_bindgen(js_name = Device)]
pub struct JsDevice {
    inner: Device,
}

/// A tensor; its values are computed when read.
#[wasm_bindgen(js_name = Tensor)]
pub struct JsTensor {
    slot: Slot,
    id: u64,
}

impl Drop for JsTensor {
    /// The JS object was freed (`free()`, `Symbol.dispose`, or garbage
    /// collection): the table forgets it.
    fn drop(&mut self) {
        LIVE.with(|live| {
            if let Ok(mut live) = live.try_borrow_mut() {
                live.remove(&self.id);
            }
        });
    }
}

fn js_error(err: &RegistrationError) -> JsValue {
    errors::registration(err)
}

fn type_error(op: &'static str, reason: String) -> JsValue {
    js_error(&RegistrationError::new(op, ErrorClass::Type, reason))
}

fn wrap(tensor: Tensor) -> JsTensor {
    let id = tensor.id().0;
    let slot: Slot = Rc::new(RefCell::new(Some(tensor)));
    LIVE.with(|live| live.borrow_mut().insert(id, slot.clone()));
    SCOPES.with(|scopes| {
        if let Some(scope) = scopes.borrow_mut().last_mut() {
            scope.push(id);
        }
    });
    JsTensor { slot, id }
}

/// Disposes the tensor JS knows as `id`, wherever its JS object is.
fn dispose_id(id: u64) {
    if let Some(slot) = LIVE.with(|live| live.borrow_mut().remove(&id)) {
        slot.borrow_mut().take();
    }
}

/// The ids of the tensors in `value`: a `Tensor`, or arrays and plain
/// objects holding them (a few levels deep).
fn tensor_ids(value: &JsValue, depth: usize, out: &mut Vec<u64>) {
    if depth > 4 || !value.is_object() {
        return;
    }
    if is_tensor(value) {
        if let Some(id) = Reflect::get(value, &"id".into())
            .ok()
            .and_then(|v| v.as_f64())
        {
            out.push(id as u64);
        }
    } else if Array::is_array(value) {
        for item in Array::from(value).iter() {
            tensor_ids(&item, depth + 1, out);
        }
    } else if let Some(object) = value.dyn_ref::<Object>() {
        for item in Object::values(object).iter() {
            tensor_ids(&item, depth + 1, out);
        }
    }
}

/// `tidy(fn)`: runs `fn` and disposes every tensor it created, except those
/// it returns (a tensor, or arrays and objects of tensors). Tensors nobody
/// holds can then fuse: a JS object keeps its tensor alive until it is
/// disposed or garbage-collected, and garbage collection comes late.
#[wasm_bindgen]
pub fn tidy(f: &js_sys::Function) -> Result<JsValue, JsValue> {
    SCOPES.with(|scopes| scopes.borrow_mut().push(Vec::new()));
    let result = f.call0(&JsValue::NULL);
    let created = SCOPES
        .with(|scopes| scopes.borrow_mut().pop())
        .unwrap_or_default();
    let mut kept = Vec::new();
    if let Ok(value) = &result {
        tensor_ids(value, 0, &mut kept);
    }
    let promise = result
        .as_ref()
        .is_ok_and(|v| v.is_instance_of::<js_sys::Promise>());
    for &id in &created {
        if promise || !kept.contains(&id) {
            dispose_id(id);
        }
    }
    // What it returns belongs to the enclosing scope, if any.
    SCOPES.with(|scopes| {
        if let Some(outer) = scopes.borrow_mut().last_mut() {
            outer.extend(created.iter().filter(|id| kept.contains(id)));
        }
    });
    if promise {
        return Err(type_error(
            "tidy",
            "fn must not be async (it returned a Promise)".to_string(),
        ));
    }
    result
}

/// A number read from an options object, if present.
fn option_f64(options: &JsValue, key: &str) -> Option<f64> {
    Reflect::get(options, &key.into())
        .ok()
        .and_then(|v| v.as_f64())
}

/// Dims given from JS as numbers: each must be a finite,
/// non-negative integer. `what` names the argument in the error.
fn dims_from_f64(
    op: &'static str,
    what: &str,
    dims: &[f64],
) -> Result<Vec<usize>, RegistrationError> {
    dims.iter()
        .map(|&d| {
            if d.is_finite() && d >= 0.0 && d.fract() == 0.0 && d <= u32::MAX as f64 {
                Ok(d as usize)
            } else {
                Err(RegistrationError::new(
                    op,
                    ErrorClass::Range,
                    format!("{what} must hold non-negative integers, got {d}"),
                ))
            }
        })
        .collect()
}

/// A shape passed from JS: an array of non-negative integers.
fn shape_arg(op: &'static str, value: &JsValue) -> Result<Vec<usize>, JsValue> {
    if !Array::is_array(value) {
        return Err(type_error(
            op,
            "shape must be an array of numbers".to_string(),
        ));
    }
    let mut dims = Vec::new();
    for d in Array::from(value).iter() {
        match d.as_f64() {
            Some(d) => dims.push(d),
            None => {
                return Err(type_error(
                    op,
                    format!("shape must hold numbers, got {d:?}"),
                ));
            }
        }
    }
    dims_from_f64(op, "shape", &dims).map_err(|e| js_error(&e))
}

/// Flattens `tensor(values)`'s values: a `Float32Array`, a flat array, or
/// nested arrays whose nesting gives the shape.
fn values_arg(value: &JsValue) -> Result<(Vec<f32>, Vec<usize>), JsValue> {
    if let Some(typed) = value.dyn_ref::<Float32Array>() {
        let values = typed.to_vec();
        let len = values.len();
        return Ok((values, vec![len]));
    }
    if let Some(n) = value.as_f64() {
        return Ok((vec![n as f32], vec![]));
    }
    if !Array::is_array(value) {
        return Err(type_error(
            "tensor",
            "values must be a number, an array or a Float32Array".to_string(),
        ));
    }
    // The shape is read off the first element at each depth; every other
    // element must then match it.
    let mut shape = Vec::new();
    let mut probe = value.clone();
    while Array::is_array(&probe) {
        let array = Array::from(&probe);
        shape.push(array.length() as usize);
        if array.length() == 0 {
            break;
        }
        probe = array.get(0);
    }
    let mut values = Vec::new();
    flatten(value, &shape, &mut values)?;
    Ok((values, shape))
}

/// Appends `value`'s numbers to `out`, checking it has exactly `shape`.
fn flatten(value: &JsValue, shape: &[usize], out: &mut Vec<f32>) -> Result<(), JsValue> {
    match shape.split_first() {
        Some((&len, rest))
            if Array::is_array(value) && Array::from(value).length() as usize == len =>
        {
            for item in Array::from(value).iter() {
                flatten(&item, rest, out)?;
            }
            Ok(())
        }
        None if value.as_f64().is_some() => {
            out.push(value.as_f64().unwrap_or_default() as f32);
            Ok(())
        }
        None if !Array::is_array(value) => Err(type_error(
            "tensor",
            format!("values must be numbers, got {value:?}"),
        )),
        _ => Err(js_error(&RegistrationError::new(
            "tensor",
            ErrorClass::Range,
            "nested arrays must be rectangular (every row the same length and depth)",
        ))),
    }
}

fn is_tensor(value: &JsValue) -> bool {
    value.is_object()
        && Reflect::get(value, &"constructor".into())
            .ok()
            .and_then(|c| Reflect::get(&c, &"name".into()).ok())
            .and_then(|n| n.as_string())
            .is_some_and(|n| n == "Tensor")
}

/// A `Tensor` passed from JS, found in the table of live tensors without
/// taking it over.
fn tensor_arg(op: &'static str, value: &JsValue) -> Result<Tensor, JsValue> {
    let not_a_tensor = || type_error(op, format!("expected a Tensor, got {value:?}"));
    if !is_tensor(value) {
        return Err(not_a_tensor());
    }
    let id = Reflect::get(value, &"id".into())
        .ok()
        .and_then(|v| v.as_f64())
        .ok_or_else(not_a_tensor)?;
    let found = LIVE.with(|live| {
        live.borrow()
            .get(&(id as u64))
            .and_then(|slot| slot.borrow().clone())
    });
    match found {
        Some(tensor) => Ok(tensor),
        None => Err(js_error(&RegistrationError::new(
            op,
            ErrorClass::Other,
            format!("tensor #{id} was disposed"),
        ))),
    }
}

/// An array of `Tensor`s passed from JS.
fn tensors_arg(op: &'static str, value: &JsValue) -> Result<Vec<Tensor>, JsValue> {
    if !Array::is_array(value) {
        return Err(type_error(op, "expected an array of Tensors".to_string()));
    }
    Array::from(value)
        .iter()
        .map(|t| tensor_arg(op, &t))
        .collect()
}

/// Integers passed from JS: one number or an array of them. `what` names the
/// argument in the error.
fn ints_arg(op: &'static str, what: &str, value: &JsValue) -> Result<Vec<isize>, JsValue> {
    let items: Vec<JsValue> = if Array::is_array(value) {
        Array::from(value).iter().collect()
    } else {
        vec![value.clone()]
    };
    items
        .iter()
        .map(|v| match v.as_f64() {
            Some(n) if n.fract() == 0.0 && n.abs() <= u32::MAX as f64 => Ok(n as isize),
            Some(n) => Err(js_error(&RegistrationError::new(
                op,
                ErrorClass::Range,
                format!("{what} must hold integers, got {n}"),
            ))),
            None => Err(type_error(
                op,
                format!("{what} must hold numbers, got {v:?}"),
            )),
        })
        .collect()
}

/// Non-negative integers passed from JS.
fn dims_arg(op: &'static str, what: &str, value: &JsValue) -> Result<Vec<usize>, JsValue> {
    let ints = ints_arg(op, what, value)?;
    dims_from_f64(
        op,
        what,
        &ints.iter().map(|&i| i as f64).collect::<Vec<_>>(),
    )
    .map_err(|e| js_error(&e))
}

/// One integer argument, `default` when omitted.
fn int_arg(
    op: &'static str,
    what: &str,
    value: &JsValue,
    default: isize,
) -> Result<isize, JsValue> {
    if value.is_undefined() || value.is_null() {
        return Ok(default);
    }
    if Array::is_array(value) {
        return Err(type_error(op, format!("{what} must be a number")));
    }
    Ok(ints_arg(op, what, value)?[0])
}

/// Axes passed from JS: a number, an array, or nothing (all axes).
fn axes_arg(op: &'static str, value: &JsValue) -> Result<Option<Vec<isize>>, JsValue> {
    if value.is_undefined() || value.is_null() {
        Ok(None)
    } else {
        ints_arg(op, "axis", value).map(Some)
    }
}

/// A number from an options object, `default` when absent; `TypeError` when
/// present but not a number.
fn option_number(
    op: &'static str,
    options: &JsValue,
    key: &str,
    default: f64,
) -> Result<f64, JsValue> {
    if options.is_undefined() || options.is_null() {
        return Ok(default);
    }
    let value = Reflect::get(options, &key.into()).unwrap_or(JsValue::UNDEFINED);
    if value.is_undefined() {
        return Ok(default);
    }
    value
        .as_f64()
        .ok_or_else(|| type_error(op, format!("option {key} must be a number, got {value:?}")))
}

/// The `seed` option: a non-negative integer up to 2^53.
fn seed_arg(op: &'static str, options: &JsValue) -> Result<u64, JsValue> {
    let seed = option_number(op, options, "seed", 0.0)?;
    if seed >= 0.0 && seed.fract() == 0.0 && seed <= 9_007_199_254_740_992.0 {
        Ok(seed as u64)
    } else {
        Err(js_error(&RegistrationError::new(
            op,
            ErrorClass::Range,
            format!("seed must be a non-negative integer, got {seed}"),
        )))
    }
}

/// Checks that `device` still works and, when it captures stacks, hands the
/// caller's JS frame to the op about to be registered.
fn registering(op: &'static str, device: &Device) -> Result<(), JsValue> {
    if let Some(reason) = device.lost_reason() {
        return Err(js_error(&RegistrationError::new(
            op,
            ErrorClass::Other,
            format!(
                "{} was lost ({reason}); request a new device",
                device.label()
            ),
        )));
    }
    if device.captures_stacks() {
        set_registration_site(errors::caller_site());
    }
    Ok(())
}

fn done(result: Result<Tensor, RegistrationError>) -> Result<JsTensor, JsValue> {
    result.map(wrap).map_err(|e| js_error(&e))
}

impl JsDevice {
    /// The device, about to register `op` (see `registering`).
    fn device(&self, op: &'static str) -> Result<&Device, JsValue> {
        registering(op, &self.inner)?;
        Ok(&self.inner)
    }
}

#[wasm_bindgen(js_class = Device)]
impl JsDevice {
    /// Opens a GPU device. Rejects with an `Error` saying what is missing
    /// when WebGPU or an adapter is not available.
    pub async fn request(options: Option<Object>) -> Result<JsDevice, JsValue> {
        let mut opts = DeviceOptions::default();
        if let Some(capacity) = options.as_ref().and_then(|o| option_f64(o, "capacity")) {
            if !(capacity >= 1.0 && capacity.fract() == 0.0) {
                return Err(js_sys::RangeError::new(&format!(
                    "Device.request: capacity must be a positive integer, got {capacity}"
                ))
                .into());
            }
            opts.capacity = capacity as usize;
        }
        if let Some(debug) = options
            .as_ref()
            .and_then(|o| Reflect::get(o, &"debug".into()).ok())
            && !debug.is_undefined()
        {
            let flag = |key: &str, default: bool| {
                Reflect::get(&debug, &key.into())
                    .ok()
                    .and_then(|v| v.as_bool())
                    .unwrap_or(default)
            };
            opts.capture_stacks = flag("captureStacks", false);
            opts.error_scopes = flag("errorScopes", true);
        }
        crate::device::install_panic_hook();
        match Device::request(opts).await {
            Ok(inner) => Ok(JsDevice { inner }),
            Err(e) => Err(js_sys::Error::new(&format!("Device.request: {e}")).into()),
        }
    }

    /// `tensor(values, shape?)`: values as a number, (nested) array or
    /// `Float32Array`; the shape is inferred from nesting when omitted.
    pub fn tensor(&self, values: JsValue, shape: JsValue) -> Result<JsTensor, JsValue> {
        let (values, inferred) = values_arg(&values)?;
        let shape = if shape.is_undefined() || shape.is_null() {
            inferred
        } else {
            shape_arg("tensor", &shape)?
        };
        done(self.device("tensor")?.tensor(&values, Some(&shape)))
    }

    pub fn zeros(&self, shape: JsValue) -> Result<JsTensor, JsValue> {
        let shape = shape_arg("zeros", &shape)?;
        done(self.device("zeros")?.zeros(&shape))
    }

    pub fn ones(&self, shape: JsValue) -> Result<JsTensor, JsValue> {
        let shape = shape_arg("ones", &shape)?;
        done(self.device("ones")?.ones(&shape))
    }

    pub fn full(&self, shape: JsValue, value: f64) -> Result<JsTensor, JsValue> {
        let shape = shape_arg("full", &shape)?;
        done(self.device("full")?.full(&shape, value as f32))
    }

    /// `arange(start, stop, step = 1)`.
    pub fn arange(&self, start: f64, stop: f64, step: Option<f64>) -> Result<JsTensor, JsValue> {
        done(
            self.device("arange")?
                .arange(start as f32, stop as f32, step.unwrap_or(1.0) as f32),
        )
    }

    /// `randomUniform(shape, { min = 0, max = 1, seed = 0 })`.
    #[wasm_bindgen(js_name = randomUniform)]
    pub fn random_uniform(&self, shape: JsValue, options: JsValue) -> Result<JsTensor, JsValue> {
        let op = "randomUniform";
        let shape = shape_arg(op, &shape)?;
        let min = option_number(op, &options, "min", 0.0)?;
        let max = option_number(op, &options, "max", 1.0)?;
        let seed = seed_arg(op, &options)?;
        done(
            self.device("randomUniform")?
                .random_uniform(&shape, min as f32, max as f32, seed),
        )
    }

    /// `randomNormal(shape, { mean = 0, std = 1, seed = 0 })`.
    #[wasm_bindgen(js_name = randomNormal)]
    pub fn random_normal(&self, shape: JsValue, options: JsValue) -> Result<JsTensor, JsValue> {
        let op = "randomNormal";
        let shape = shape_arg(op, &shape)?;
        let mean = option_number(op, &options, "mean", 0.0)?;
        let std = option_number(op, &options, "std", 1.0)?;
        let seed = seed_arg(op, &options)?;
        done(
            self.device("randomNormal")?
                .random_normal(&shape, mean as f32, std as f32, seed),
        )
    }

    /// `where(cond, a, b)`: `a` where `cond` is non-zero, else `b`.
    #[wasm_bindgen(js_name = where)]
    pub fn where_(&self, cond: JsValue, a: JsValue, b: JsValue) -> Result<JsTensor, JsValue> {
        let (c, a, b) = (
            tensor_arg("where", &cond)?,
            tensor_arg("where", &a)?,
            tensor_arg("where", &b)?,
        );
        done(self.device("where")?.where_(&c, &a, &b))
    }

    /// `cat(tensors, axis = 0)`.
    pub fn cat(&self, tensors: JsValue, axis: JsValue) -> Result<JsTensor, JsValue> {
        let tensors = tensors_arg("cat", &tensors)?;
        let axis = int_arg("cat", "axis", &axis, 0)?;
        done(
            self.device("cat")?
                .cat(&tensors.iter().collect::<Vec<_>>(), axis),
        )
    }

    /// `stack(tensors, axis = 0)`.
    pub fn stack(&self, tensors: JsValue, axis: JsValue) -> Result<JsTensor, JsValue> {
        let tensors = tensors_arg("stack", &tensors)?;
        let axis = int_arg("stack", "axis", &axis, 0)?;
        done(
            self.device("stack")?
                .stack(&tensors.iter().collect::<Vec<_>>(), axis),
        )
    }

    /// Runs everything queued. Resolves when all of it succeeded; rejects
    /// with an `ExecutionError` naming each failure once when any work
    /// flushed since the last `sync()` failed.
    pub fn sync(&self) -> js_sys::Promise {
        let device = self.inner.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            match device.sync().await {
                Ok(()) => Ok(JsValue::UNDEFINED),
                Err(e) => Err(errors::execution(&e)),
            }
        })
    }

    /// Destroys the GPU device: every tensor on it rejects reads with kind
    /// `device-lost`; registration throws. Request a new device afterwards.
    pub fn destroy(&self) {
        self.inner.destroy();
    }

    /// Why the device was lost, or `null` while it works.
    #[wasm_bindgen(getter)]
    pub fn lost(&self) -> Option<String> {
        self.inner.lost_reason()
    }

    /// `injectFault({ op, nth = 1, kind = 'validation' })`: the nth block
    /// containing `op` fails through a genuine GPU error; its root says it
    /// was injected.
    #[wasm_bindgen(js_name = injectFault)]
    pub fn inject_fault(&self, spec: JsValue) -> Result<(), JsValue> {
        let name = "injectFault";
        let op = Reflect::get(&spec, &"op".into())
            .ok()
            .and_then(|v| v.as_string())
            .ok_or_else(|| type_error(name, "needs { op: string }".to_string()))?;
        let nth = option_number(name, &spec, "nth", 1.0)?;
        if !(nth >= 1.0 && nth.fract() == 0.0) {
            return Err(js_error(&RegistrationError::new(
                name,
                ErrorClass::Range,
                format!("nth must be a positive integer, got {nth}"),
            )));
        }
        let kind = match Reflect::get(&spec, &"kind".into())
            .ok()
            .and_then(|v| v.as_string())
            .as_deref()
        {
            None | Some("validation") => FaultKind::Validation,
            Some("out-of-memory") => FaultKind::OutOfMemory,
            Some("internal") => FaultKind::Internal,
            Some(other) => {
                return Err(js_error(&RegistrationError::new(
                    name,
                    ErrorClass::Range,
                    format!(
                        "kind must be 'validation', 'out-of-memory' or 'internal', got '{other}'"
                    ),
                )));
            }
        };
        self.inner.inject_fault(&op, nth as usize, kind);
        Ok(())
    }

    /// `{ opsRegistered, flushes, kernelsLaunched, fusedOps, buffersAllocated,
    /// bytesAllocated, bytesInUse, pipelinesCompiled, pipelineCacheHits, failuresHeld }`.
    pub fn stats(&self) -> Object {
        let s = self.inner.stats();
        let object = Object::new();
        for (key, value) in [
            ("opsRegistered", s.ops_registered),
            ("flushes", s.flushes),
            ("kernelsLaunched", s.kernels_launched),
            ("fusedOps", s.fused_ops),
            ("buffersAllocated", s.buffers_allocated),
            ("bytesAllocated", s.bytes_allocated),
            ("bytesInUse", s.bytes_in_use),
            ("pipelinesCompiled", s.pipelines_compiled),
            ("pipelineCacheHits", s.pipeline_cache_hits),
            ("failuresHeld", s.failures_held),
        ] {
            let _ = Reflect::set(&object, &key.into(), &(value as f64).into());
        }
        object
    }
}

impl JsTensor {
    /// The tensor, unless disposed.
    fn get(&self, op: &'static str) -> Result<Tensor, JsValue> {
        self.slot.borrow().clone().ok_or_else(|| {
            js_error(&RegistrationError::new(
                op,
                ErrorClass::Other,
                format!("tensor #{} was disposed", self.id),
            ))
        })
    }

    /// The tensor, about to be an operand of `op`: refused when disposed or
    /// when its device is lost; hands the caller's JS frame to the
    /// registration when the device captures stacks.
    fn tensor(&self, op: &'static str) -> Result<Tensor, JsValue> {
        let tensor = self.get(op)?;
        registering(op, tensor.device())?;
        Ok(tensor)
    }

    /// The other operand of a binary op: a number, or a live `Tensor`.
    fn operand(op: &'static str, value: &JsValue) -> Result<OperandArg, JsValue> {
        match value.as_f64() {
            Some(n) => Ok(OperandArg::Scalar(n as f32)),
            None => tensor_arg(op, value).map(OperandArg::Tensor),
        }
    }

    fn binary(
        &self,
        op: &'static str,
        other: &JsValue,
        f: impl FnOnce(&Tensor, Operand<'_>) -> Result<Tensor, RegistrationError>,
    ) -> Result<JsTensor, JsValue> {
        let this = self.tensor(op)?;
        let result = match Self::operand(op, other)? {
            OperandArg::Scalar(v) => f(&this, Operand::Scalar(v)),
            OperandArg::Tensor(t) => f(&this, Operand::Tensor(&t)),
        };
        done(result)
    }
}

enum OperandArg {
    Scalar(f32),
    Tensor(Tensor),
}

#[wasm_bindgen(js_class = Tensor)]
impl JsTensor {
    #[wasm_bindgen(getter)]
    pub fn id(&self) -> f64 {
        self.id as f64
    }

    #[wasm_bindgen(getter)]
    pub fn shape(&self) -> Result<Array, JsValue> {
        let t = self.get("shape")?;
        Ok(t.shape().iter().map(|&d| JsValue::from(d as f64)).collect())
    }

    #[wasm_bindgen(getter)]
    pub fn size(&self) -> Result<f64, JsValue> {
        Ok(self.get("size")?.size() as f64)
    }

    #[wasm_bindgen(getter)]
    pub fn rank(&self) -> Result<f64, JsValue> {
        Ok(self.get("rank")?.rank() as f64)
    }

    #[wasm_bindgen(getter)]
    pub fn dtype(&self) -> String {
        "float32".to_string()
    }

    /// `Promise<Float32Array>` of the values, row-major.
    pub fn data(&self) -> Result<js_sys::Promise, JsValue> {
        let tensor = self.get("data")?;
        let asked_at = errors::caller_site();
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            match tensor.read(asked_at).await {
                Ok(values) => Ok(Float32Array::from(values.as_slice()).into()),
                Err(e) => Err(errors::tensor(&e)),
            }
        }))
    }

    /// `Promise` of the values as nested arrays (a number for a scalar).
    pub fn array(&self) -> Result<js_sys::Promise, JsValue> {
        let tensor = self.get("array")?;
        let asked_at = errors::caller_site();
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            match tensor.read(asked_at).await {
                Ok(values) => Ok(nest(&values, tensor.shape())),
                Err(e) => Err(errors::tensor(&e)),
            }
        }))
    }

    /// `to(device)`: a `Promise` of this tensor on `device`. A tainted tensor
    /// arrives tainted: the copy carries its failures, naming this device.
    pub fn to(&self, device: &JsDevice) -> Result<js_sys::Promise, JsValue> {
        let tensor = self.get("to")?;
        let device = device.inner.clone();
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            match tensor.to(&device).await {
                Ok(moved) => Ok(wrap(moved).into()),
                Err(e) => Err(js_error(&e)),
            }
        }))
    }

    /// Releases the tensor's memory now; using it afterwards throws.
    pub fn dispose(&self) {
        self.slot.borrow_mut().take();
        LIVE.with(|live| live.borrow_mut().remove(&self.id));
    }
}

#[wasm_bindgen(js_class = Tensor)]
impl JsTensor {
    /// Each value limited to `[min, max]`.
    pub fn clamp(&self, min: f64, max: f64) -> Result<JsTensor, JsValue> {
        Ok(wrap(self.tensor("clamp")?.clamp(min as f32, max as f32)))
    }

    /// `argmax(axis = 0)`: the index of the largest value, as a float.
    pub fn argmax(&self, axis: JsValue) -> Result<JsTensor, JsValue> {
        let axis = int_arg("argmax", "axis", &axis, 0)?;
        done(self.tensor("argmax")?.argmax(axis))
    }

    /// `softmax(axis = -1)`.
    pub fn softmax(&self, axis: JsValue) -> Result<JsTensor, JsValue> {
        let axis = int_arg("softmax", "axis", &axis, -1)?;
        done(self.tensor("softmax")?.softmax(axis))
    }

    /// `logSoftmax(axis = -1)`.
    #[wasm_bindgen(js_name = logSoftmax)]
    pub fn log_softmax(&self, axis: JsValue) -> Result<JsTensor, JsValue> {
        let axis = int_arg("logSoftmax", "axis", &axis, -1)?;
        done(self.tensor("logSoftmax")?.log_softmax(axis))
    }

    /// `matmul(b)`: 2-D, or batched with broadcast batch dims.
    pub fn matmul(&self, other: JsValue) -> Result<JsTensor, JsValue> {
        let other = tensor_arg("matmul", &other)?;
        done(self.tensor("matmul")?.matmul(&other))
    }

    /// `transpose(perm?)`: dims reversed when `perm` is omitted.
    pub fn transpose(&self, perm: JsValue) -> Result<JsTensor, JsValue> {
        let perm = if perm.is_undefined() || perm.is_null() {
            None
        } else {
            Some(dims_arg("transpose", "perm", &perm)?)
        };
        done(self.tensor("transpose")?.transpose(perm.as_deref()))
    }

    /// `reshape(shape)`: one dim may be -1.
    pub fn reshape(&self, shape: JsValue) -> Result<JsTensor, JsValue> {
        if !Array::is_array(&shape) {
            return Err(type_error(
                "reshape",
                "shape must be an array of numbers".to_string(),
            ));
        }
        let shape = ints_arg("reshape", "shape", &shape)?;
        done(self.tensor("reshape")?.reshape(&shape))
    }

    /// `slice(begin, size?)`: `size` -1 (or omitted) runs to the end.
    pub fn slice(&self, begin: JsValue, size: JsValue) -> Result<JsTensor, JsValue> {
        let t = self.tensor("slice")?;
        let begin = dims_arg("slice", "begin", &begin)?;
        let size = if size.is_undefined() || size.is_null() {
            vec![-1; begin.len()]
        } else {
            ints_arg("slice", "size", &size)?
        };
        done(t.slice(&begin, &size))
    }

    /// `broadcastTo(shape)`.
    #[wasm_bindgen(js_name = broadcastTo)]
    pub fn broadcast_to(&self, shape: JsValue) -> Result<JsTensor, JsValue> {
        let shape = shape_arg("broadcastTo", &shape)?;
        done(self.tensor("broadcastTo")?.broadcast_to(&shape))
    }

    /// `expandDims(axis = 0)`.
    #[wasm_bindgen(js_name = expandDims)]
    pub fn expand_dims(&self, axis: JsValue) -> Result<JsTensor, JsValue> {
        let axis = int_arg("expandDims", "axis", &axis, 0)?;
        done(self.tensor("expandDims")?.expand_dims(axis))
    }

    /// `squeeze(axis?)`: the listed dims of size 1, or all of them.
    pub fn squeeze(&self, axis: JsValue) -> Result<JsTensor, JsValue> {
        let axes = axes_arg("squeeze", &axis)?;
        done(self.tensor("squeeze")?.squeeze(axes.as_deref()))
    }

    /// All elements in one dim.
    pub fn flatten(&self) -> Result<JsTensor, JsValue> {
        Ok(wrap(self.tensor("flatten")?.flatten()))
    }
}

/// `values` (row-major) as nested JS arrays of `shape`.
fn nest(values: &[f32], shape: &[usize]) -> JsValue {
    match shape.split_first() {
        None => JsValue::from(values.first().copied().unwrap_or(0.0) as f64),
        Some((&outer, rest)) => {
            let inner: usize = rest.iter().product();
            (0..outer)
                .map(|i| nest(&values[i * inner..(i + 1) * inner], rest))
                .collect::<Array>()
                .into()
        }
    }
}

macro_rules! js_binary_ops {
    ($($js:literal => $name:ident),* $(,)?) => {
        #[wasm_bindgen(js_class = Tensor)]
        impl JsTensor {
            $(
                #[wasm_bindgen(js_name = $js)]
                pub fn $name(&self, other: JsValue) -> Result<JsTensor, JsValue> {
                    self.binary($js, &other, |a, b| a.$name(b))
                }
            )*
        }
    };
}

js_binary_ops! {
    "add" => add, "sub" => sub, "mul" => mul, "div" => div, "pow" => pow,
    "maximum" => maximum, "minimum" => minimum, "equal" => equal,
    "greater" => greater, "greaterEqual" => greater_equal,
    "less" => less, "lessEqual" => less_equal,
}

macro_rules! js_reduce_ops {
    ($($js:literal => $name:ident),* $(,)?) => {
        #[wasm_bindgen(js_class = Tensor)]
        impl JsTensor {
            $(
                #[doc = concat!("`", $js, "(axis?, keepDims = false)`: over one axis, several, or all.")]
                #[wasm_bindgen(js_name = $js)]
                pub fn $name(&self, axis: JsValue, keep_dims: Option<bool>) -> Result<JsTensor, JsValue> {
                    let axes = axes_arg($js, &axis)?;
                    done(self.tensor($js)?.$name(axes.as_deref(), keep_dims.unwrap_or(false)))
                }
            )*
        }
    };
}

js_reduce_ops! {
    "sum" => sum, "mean" => mean, "max" => max, "min" => min, "logSumExp" => log_sum_exp,
}

macro_rules! js_unary_ops {
    ($($js:literal => $name:ident),* $(,)?) => {
        #[wasm_bindgen(js_class = Tensor)]
        impl JsTensor {
            $(
                #[wasm_bindgen(js_name = $js)]
                pub fn $name(&self) -> Result<JsTensor, JsValue> {
                    Ok(wrap(self.tensor($js)?.$name()))
                }
            )*
        }
    };
}

js_unary_ops! {
    "neg" => neg, "abs" => abs, "exp" => exp, "log" => log, "sqrt" => sqrt,
    "rsqrt" => rsqrt, "square" => square, "relu" => relu, "gelu" => gelu,
    "sigmoid" => sigmoid, "tanh" => tanh, "sin" => sin, "cos" => cos,
}
