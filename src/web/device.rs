//! The `Device` class.

use js_sys::{Object, Promise, Reflect};
use wasm_bindgen::prelude::*;

use crate::ir::DType;
use crate::{Device, DeviceOptions, ErrorClass, FaultKind, RegistrationError, Tensor};

use super::args::{self, Options};
use super::errors;
use super::registry::{self, Found, Handle, Key, register};

/// A GPU device.
#[wasm_bindgen(js_name = Device)]
pub struct JsDevice {
    handle: Handle,
}

impl JsDevice {
    pub(super) fn new(key: Key) -> JsDevice {
        let tensor = None;
        JsDevice {
            handle: Handle { key, tensor },
        }
    }

    /// The device this object stands for; `op` names the method for the
    /// error when `this` is not a webfusion Device.
    fn device(&self, op: &'static str) -> Result<Device, JsValue> {
        match registry::held(self.handle.key) {
            Found::Device(device) => Ok(device),
            _ => Err(errors::op_error(
                op,
                ErrorClass::Type,
                "called on an object that is not a webfusion Device",
            )),
        }
    }

    /// `zeros`, `ones` and `full`: `shape` filled with `value` in the
    /// `dtype` asked for (float32 when absent).
    fn fill(
        &self,
        op: &'static str,
        shape: &JsValue,
        value: f64,
        dtype: &JsValue,
    ) -> Result<JsValue, JsValue> {
        let device = self.device(op)?;
        let shape = args::shape(op, "shape", shape)?;
        let dtype = args::dtype_or(op, dtype, DType::Float32)?;
        register(&device, || device.fill_as(op, &shape, value, dtype))
    }
}

impl Drop for JsDevice {
    /// The object was collected: the table forgets it.
    fn drop(&mut self) {
        registry::forget(self.handle.key);
    }
}

#[wasm_bindgen(js_class = Device)]
impl JsDevice {
    /// `Device.request({ capacity?, hostMaxElements?, debug?: { captureStacks?,
    /// errorScopes?, checkNumerics? } })` opens a GPU device. With
    /// `checkNumerics` (also `device.checkNumerics = true` later) the op that
    /// first makes a NaN or an infinity from finite values fails as
    /// `non-finite`, with what depends on it. `hostMaxElements` (default
    /// 1024, 0 for never) is the largest elementwise work on values the
    /// page gave that runs in wasm rather than as a kernel, as TF.js
    /// forwards small tensors to its CPU backend. `errorScopes: false` is
    /// only for measuring what failure isolation costs: a GPU error is then
    /// caught by nothing, and what its submission wrote, independent work
    /// included, reads as zeros, not as a failure (`stats().uncapturedErrors`
    /// counts such errors). Options are checked at once (a bad one throws);
    /// the `Promise` rejects with an `Error` saying what is missing when
    /// WebGPU or an adapter is not available.
    #[wasm_bindgen(unchecked_return_type = "Promise<Device>")]
    pub fn request(
        #[wasm_bindgen(
            unchecked_optional_param_type = "{ capacity?: number; hostMaxElements?: number; debug?: { captureStacks?: boolean; errorScopes?: boolean; checkNumerics?: boolean } }"
        )]
        options: JsValue,
    ) -> Result<Promise, JsValue> {
        let op = "Device.request";
        let options = Options::read(
            op,
            "options",
            &options,
            &["capacity", "hostMaxElements", "debug"],
        )?;
        let debug = options.nested("debug", &["captureStacks", "errorScopes", "checkNumerics"])?;
        let defaults = DeviceOptions::default();
        let opts = DeviceOptions {
            capacity: options.integer_or(
                "capacity",
                1.0,
                usize::MAX as f64,
                defaults.capacity as f64,
            )? as usize,
            capture_stacks: debug.boolean_or("captureStacks", defaults.capture_stacks)?,
            error_scopes: debug.boolean_or("errorScopes", defaults.error_scopes)?,
            check_numerics: debug.boolean_or("checkNumerics", defaults.check_numerics)?,
            cpu_kernels: defaults.cpu_kernels,
            subgroups: defaults.subgroups,
            host_max_elements: options.integer_or(
                "hostMaxElements",
                0.0,
                usize::MAX as f64,
                defaults.host_max_elements as f64,
            )? as usize,
        };
        Ok(super::promise(Box::pin(async move {
            match Device::request(opts).await {
                Ok(device) => Ok(registry::wrap_device(device)),
                Err(e) => Err(errors::op_error(op, ErrorClass::Other, e.to_string())),
            }
        })))
    }

    /// `tensor(values, shape?, dtype?)`: values as a number, a boolean,
    /// (nested) arrays or a typed array; the dtype TF.js infers from them
    /// (`Int32Array` int32, booleans bool, numbers float32) unless one is
    /// given. Nested arrays give the shape; a `shape` given with them must
    /// be that shape. A flat or typed array takes any shape its length
    /// fills.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn tensor(
        &self,
        #[wasm_bindgen(
            unchecked_param_type = "NestedNumbers | NestedBooleans | Float32Array | Int32Array | Uint8Array"
        )]
        values: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number[] | null")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "DataType")] dtype: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "tensor";
        let device = self.device(op)?;
        let dtype = (!args::absent(&dtype))
            .then(|| args::dtype(op, &dtype))
            .transpose()?;
        let (values, nested) = args::values(op, &values, dtype)?;
        let shape = if args::absent(&shape) {
            nested
        } else {
            let shape = args::shape(op, "shape", &shape)?;
            if nested.len() > 1 && shape != nested {
                return Err(errors::op_error(
                    op,
                    ErrorClass::Range,
                    format!(
                        "shape {} differs from the shape {} the nested arrays give",
                        crate::ir::shape::display(&shape),
                        crate::ir::shape::display(&nested)
                    ),
                ));
            }
            shape
        };
        register(&device, || device.tensor_of(values, Some(&shape)))
    }

    /// `zeros(shape, dtype = 'float32')`.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn zeros(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "DataType")] dtype: JsValue,
    ) -> Result<JsValue, JsValue> {
        self.fill("zeros", &shape, 0.0, &dtype)
    }

    /// `ones(shape, dtype = 'float32')`.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn ones(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "DataType")] dtype: JsValue,
    ) -> Result<JsValue, JsValue> {
        self.fill("ones", &shape, 1.0, &dtype)
    }

    /// `full(shape, value, dtype = 'float32')` (TF.js's `fill`).
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn full(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] value: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "DataType")] dtype: JsValue,
    ) -> Result<JsValue, JsValue> {
        let value = args::number("full", "value", &value)?;
        self.fill("full", &shape, value, &dtype)
    }

    /// `arange(start, stop, step = 1, dtype = 'float32')` (TF.js's `range`).
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn arange(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] start: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] stop: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] step: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "DataType")] dtype: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "arange";
        let device = self.device(op)?;
        let start = args::number(op, "start", &start)?;
        let stop = args::number(op, "stop", &stop)?;
        let step = args::number_or(op, "step", &step, 1.0)?;
        let dtype = args::dtype_or(op, &dtype, DType::Float32)?;
        register(&device, || device.range(start, stop, step, dtype))
    }

    /// `randomUniform(shape, { min = 0, max = 1, seed = 0 })`.
    #[wasm_bindgen(js_name = randomUniform, unchecked_return_type = "Tensor")]
    pub fn random_uniform(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(
            unchecked_optional_param_type = "{ min?: number; max?: number; seed?: number }"
        )]
        options: JsValue,
    ) -> Result<JsValue, JsValue> {
        let keys = ["min", "max", "seed"];
        random(
            self,
            "randomUniform",
            &shape,
            &options,
            keys,
            [0.0, 1.0],
            Device::random_uniform,
        )
    }

    /// `randomNormal(shape, { mean = 0, std = 1, seed = 0 })`.
    #[wasm_bindgen(js_name = randomNormal, unchecked_return_type = "Tensor")]
    pub fn random_normal(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
        #[wasm_bindgen(
            unchecked_optional_param_type = "{ mean?: number; std?: number; seed?: number }"
        )]
        options: JsValue,
    ) -> Result<JsValue, JsValue> {
        let keys = ["mean", "std", "seed"];
        random(
            self,
            "randomNormal",
            &shape,
            &options,
            keys,
            [0.0, 1.0],
            Device::random_normal,
        )
    }

    /// `where(cond, a, b)`: `a` where the bool `cond` is true, else `b`.
    #[wasm_bindgen(js_name = where, unchecked_return_type = "Tensor")]
    pub fn where_(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] cond: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] a: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] b: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "where";
        let device = self.device(op)?;
        let cond = args::tensor(op, " for cond", &cond)?;
        let a = args::tensor(op, " for a", &a)?;
        let b = args::tensor(op, " for b", &b)?;
        register(&device, || device.where_(&cond, &a, &b))
    }

    /// `cat(tensors, axis = 0)`.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn cat(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor[]")] tensors: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: JsValue,
    ) -> Result<JsValue, JsValue> {
        join(self, "cat", &tensors, &axis, Device::cat)
    }

    /// `stack(tensors, axis = 0)`.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn stack(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor[]")] tensors: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: JsValue,
    ) -> Result<JsValue, JsValue> {
        join(self, "stack", &tensors, &axis, Device::stack)
    }

    /// `variable(initial, { trainable = true, name? })`: a `Variable`, a
    /// `Tensor` holding a copy of `initial` that `assign` and the
    /// optimizers replace. Kept until disposed (`tidy` leaves it alone, as
    /// TF.js does). `name` must be unique among this device's variables.
    #[wasm_bindgen(unchecked_return_type = "Variable")]
    pub fn variable(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] initial: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "{ trainable?: boolean; name?: string }")]
        options: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "variable";
        let device = self.device(op)?;
        let initial = args::tensor(op, " (initial)", &initial)?;
        let options = Options::read(op, "options", &options, &["trainable", "name"])?;
        let trainable = options.boolean_or("trainable", true)?;
        let (name, what) = options.get("name")?;
        let name = match args::absent(&name) {
            true => None,
            false => Some(args::string(op, &what, &name)?),
        };
        let site = errors::site_if_captured(&device);
        crate::tensor::with_site(site, || {
            device.variable(&initial, trainable, name.as_deref())
        })
        .map(registry::wrap_variable)
        .map_err(|e| errors::registration(&e))
    }

    /// This device's trainable variables not disposed, oldest first: the
    /// objects `variable` returned.
    #[wasm_bindgen(js_name = trainableVariables, unchecked_return_type = "Variable[]")]
    pub fn trainable_variables(&self) -> Result<js_sys::Array, JsValue> {
        let device = self.device("trainableVariables")?;
        Ok(registry::variables()
            .into_iter()
            .filter(|(_, v)| v.trainable() && v.device().same(&device))
            .map(|(object, _)| object)
            .collect())
    }

    /// Runs everything queued. Resolves when all of it succeeded; rejects
    /// with an `ExecutionError` naming each failure once when any work
    /// flushed since the last `sync()` failed. Tensors kept as expressions
    /// are not computed (a sync is not a read).
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn sync(&self) -> Result<Promise, JsValue> {
        let device = self.device("sync")?;
        Ok(super::promise(Box::pin(async move {
            match device.sync().await {
                Ok(()) => Ok(JsValue::UNDEFINED),
                Err(e) => Err(errors::execution(&e)),
            }
        })))
    }

    /// Destroys the GPU device: every tensor on it rejects reads with kind
    /// `device-lost`; registration throws. Request a new device afterwards.
    /// `free()` and `[Symbol.dispose]()` do the same.
    pub fn destroy(&self) -> Result<(), JsValue> {
        self.device("destroy")?.destroy();
        Ok(())
    }

    /// Whether the device checks numerics (`debug.checkNumerics`).
    #[wasm_bindgen(getter = checkNumerics)]
    pub fn check_numerics(&self) -> Result<bool, JsValue> {
        Ok(self.device("checkNumerics")?.checks_numerics())
    }

    /// Turns the numerics checks on or off for the work run from now on,
    /// what is queued included.
    #[wasm_bindgen(setter = checkNumerics)]
    pub fn set_check_numerics(
        &self,
        #[wasm_bindgen(unchecked_param_type = "boolean")] on: JsValue,
    ) -> Result<(), JsValue> {
        let op = "checkNumerics";
        let device = self.device(op)?;
        let on = on
            .as_bool()
            .ok_or_else(|| errors::op_error(op, ErrorClass::Type, "takes a boolean"))?;
        device.set_check_numerics(on);
        Ok(())
    }

    /// Why the device was lost, or `null` while it works.
    #[wasm_bindgen(getter, unchecked_return_type = "string | null")]
    pub fn lost(&self) -> Result<JsValue, JsValue> {
        Ok(self
            .device("lost")?
            .lost_reason()
            .map_or(JsValue::NULL, JsValue::from))
    }

    /// `injectFault({ op, nth = 1, kind = 'validation' })`: the nth kernel
    /// that computes `op` fails through a genuine GPU error; its root says
    /// it was injected. `kind` is `'validation'`, `'out-of-memory'` or
    /// `'internal'`.
    #[wasm_bindgen(js_name = injectFault)]
    pub fn inject_fault(
        &self,
        #[wasm_bindgen(
            unchecked_param_type = "{ op: string; nth?: number; kind?: 'validation' | 'out-of-memory' | 'internal' }"
        )]
        spec: JsValue,
    ) -> Result<(), JsValue> {
        let name = "injectFault";
        let device = self.device(name)?;
        if args::absent(&spec) {
            return Err(errors::op_error(
                name,
                ErrorClass::Type,
                format!(
                    "expected {{ op, nth?, kind? }}, got {}",
                    args::describe(&spec)
                ),
            ));
        }
        let spec = Options::read(name, "spec", &spec, &["op", "nth", "kind"])?;
        let (op, what) = spec.get("op")?;
        let op = args::string(name, &what, &op)?;
        let nth = spec.integer_or("nth", 0.0, usize::MAX as f64, 1.0)? as usize;
        let (kind, what) = spec.get("kind")?;
        let kind = if args::absent(&kind) {
            FaultKind::Validation
        } else {
            fault_kind(name, &what, &kind)?
        };
        device
            .inject_fault(&op, nth, kind)
            .map_err(|e| errors::registration(&e))
    }

    /// `profile(fn)`, TF.js's `tf.profile`: runs `fn` (which may be async)
    /// and everything it queued, and resolves to what that launched: `{
    /// kernels, kernelNames, kernelMs, newBytes, peakBytes, result }`, each
    /// kernel `{ name, ops, inputs, outputs, wgsl, kernelMs }` (tensors as
    /// `{ id, shape, bytes }`). `kernelMs` is the GPU's time from its
    /// timestamps, `undefined` where the adapter writes none. What `fn`
    /// throws or rejects with rejects the profile.
    ///
    /// A device records one profile at a time. A synchronous `fn` (or one
    /// that threw) ends its profile before `profile` returns: ended in the
    /// promise, a second `profile` called meanwhile took this one's
    /// kernels and left it none (found by outside testing). A `profile`
    /// called while an async `fn`'s is still running is refused, since the
    /// two could not tell their kernels apart.
    #[wasm_bindgen(unchecked_return_type = "Promise<Profile>")]
    pub fn profile(
        &self,
        #[wasm_bindgen(js_name = fn, unchecked_param_type = "() => unknown")] f: JsValue,
    ) -> Result<Promise, JsValue> {
        let op = "profile";
        let device = self.device(op)?;
        let f = args::function(op, "fn", &f)?;
        // A lost device profiles nothing: refused, as registration is.
        device
            .admit(op, &[])
            .map_err(|e| errors::registration(&e))?;
        if device.is_profiling() {
            return Err(errors::op_error(
                op,
                ErrorClass::Other,
                "another profile of this device is running: profiles do not nest, and an async fn's must be awaited before the next starts",
            ));
        }
        device.start_profile();
        let run = match f.call0(&JsValue::UNDEFINED) {
            Ok(value) => match value.dyn_into::<Promise>() {
                Ok(promise) => Run::Running(promise),
                Err(value) => Run::Done(Ok(value), device.end_profile()),
            },
            Err(error) => Run::Done(Err(error), device.end_profile()),
        };
        Ok(super::promise(Box::pin(async move {
            let (result, timing) = match run {
                Run::Done(result, timing) => (result, timing),
                Run::Running(promise) => {
                    let result = wasm_bindgen_futures::JsFuture::from(promise).await;
                    (result, device.end_profile())
                }
            };
            let result = result?;
            profile_object(&timing.finish().await, result)
        })))
    }

    /// Compiles every kernel `fn` would launch on this device, running none
    /// (`Device::warmup`; TF.js's compile-only mode, for a whole step):
    /// `fn` builds a step as it would, without `await`, and returns what
    /// the step reads (its cost, its predictions). Everything it made is
    /// disposed after, its result too, as by a `tidy` that keeps nothing;
    /// a training step inside changes no variable. What `fn` throws is
    /// thrown; an async `fn` is refused. Work the step would have refused
    /// (past a limit of the device) fails in the warm-up as it would in the
    /// step, and the next `sync()` reports it, as it would the step's.
    pub fn warmup(
        &self,
        #[wasm_bindgen(js_name = fn, unchecked_param_type = "() => unknown")] f: JsValue,
    ) -> Result<(), JsValue> {
        let op = "warmup";
        let device = self.device(op)?;
        let f = args::function(op, "fn", &f)?;
        registry::open_scope();
        let mut called = None;
        let _ = device.warmup(|| {
            let value = f.call0(&JsValue::UNDEFINED);
            let read = match &value {
                Ok(v) if !v.is_instance_of::<Promise>() => registry::tensors_in(v)
                    .into_iter()
                    .filter_map(|key| match registry::held(key) {
                        registry::Found::Tensor(t) => Some(t),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            called = Some(value);
            Ok(read)
        });
        registry::close_scope(&Default::default());
        match called {
            Some(Err(error)) => Err(error),
            Some(Ok(value)) if value.is_instance_of::<Promise>() => Err(errors::op_error(
                op,
                ErrorClass::Type,
                "fn must not be async (it returned a Promise): a warm-up records a step, it cannot wait in it",
            )),
            _ => Ok(()),
        }
    }

    /// Every counter of `Stats` under its JS name (`Stats::named`), and
    /// `tensorsHeld`: the Tensor objects of this device JS holds undisposed
    /// (TF.js's `numTensors`).
    #[wasm_bindgen(unchecked_return_type = "Stats")]
    pub fn stats(&self) -> Result<Object, JsValue> {
        let device = self.device("stats")?;
        let stats = device.stats();
        let object = Object::new();
        let held = ("tensorsHeld", registry::tensors_held(&device) as u64);
        for (key, value) in stats.named().into_iter().chain([held]) {
            Reflect::set(&object, &key.into(), &(value as f64).into())?;
        }
        Ok(object)
    }
}

/// `list` as a JS array of strings.
fn strings(list: &[String]) -> js_sys::Array {
    list.iter().map(|s| JsValue::from(s.as_str())).collect()
}

/// A profiled `fn` as `profile` left it: returned (or thrown) with its
/// profile ended, or still running as a promise.
enum Run {
    Done(Result<JsValue, JsValue>, crate::device::Timing),
    Running(Promise),
}

/// A profile as JS gets it (see `profile`).
fn profile_object(profile: &crate::Profile, result: JsValue) -> Result<JsValue, JsValue> {
    let tensors = |list: &[(crate::TensorId, Vec<usize>)]| -> Result<js_sys::Array, JsValue> {
        list.iter()
            .map(|(id, shape)| {
                let t = Object::new();
                Reflect::set(&t, &"id".into(), &(id.0 as f64).into())?;
                let dims: js_sys::Array = shape.iter().map(|&d| JsValue::from(d as f64)).collect();
                Reflect::set(&t, &"shape".into(), &dims)?;
                let bytes = crate::ir::shape::bytes(shape);
                Reflect::set(&t, &"bytes".into(), &(bytes as f64).into())?;
                Ok::<JsValue, JsValue>(t.into())
            })
            .collect()
    };
    let kernels = js_sys::Array::new();
    let names = js_sys::Array::new();
    for kernel in &profile.kernels {
        let k = Object::new();
        let name = crate::ir::fused_name(kernel.ops.iter().map(String::as_str));
        names.push(&name.as_str().into());
        Reflect::set(&k, &"name".into(), &name.into())?;
        Reflect::set(&k, &"ops".into(), &strings(&kernel.ops))?;
        Reflect::set(&k, &"inputs".into(), &tensors(&kernel.inputs)?.into())?;
        Reflect::set(&k, &"outputs".into(), &tensors(&kernel.outputs)?.into())?;
        Reflect::set(&k, &"wgsl".into(), &strings(&kernel.wgsl))?;
        Reflect::set(&k, &"kernelMs".into(), &kernel.kernel_ms.into())?;
        kernels.push(&k);
    }
    let out = Object::new();
    Reflect::set(&out, &"kernels".into(), &kernels)?;
    Reflect::set(&out, &"kernelNames".into(), &names)?;
    Reflect::set(&out, &"kernelMs".into(), &profile.kernel_ms.into())?;
    Reflect::set(&out, &"newBytes".into(), &(profile.new_bytes as f64).into())?;
    Reflect::set(
        &out,
        &"peakBytes".into(),
        &(profile.peak_bytes as f64).into(),
    )?;
    Reflect::set(&out, &"result".into(), &result)?;
    Ok(out.into())
}

/// `kind` by the names Rust gives the fault kinds.
fn fault_kind(op: &'static str, what: &str, value: &JsValue) -> Result<FaultKind, JsValue> {
    let names: Vec<String> = FaultKind::ALL
        .iter()
        .map(|k| format!("'{}'", k.name()))
        .collect();
    let refuse = |class| {
        errors::op_error(
            op,
            class,
            format!(
                "{what} must be one of {}, got {}",
                names.join(", "),
                args::describe(value)
            ),
        )
    };
    let name = value.as_string().ok_or_else(|| refuse(ErrorClass::Type))?;
    FaultKind::ALL
        .into_iter()
        .find(|k| k.name() == name)
        .ok_or_else(|| refuse(ErrorClass::Range))
}

/// `cat` and `stack`: one body for both (not inlined into each).
#[inline(never)]
fn join(
    this: &JsDevice,
    op: &'static str,
    tensors: &JsValue,
    axis: &JsValue,
    f: fn(&Device, &[&Tensor], isize) -> Result<Tensor, RegistrationError>,
) -> Result<JsValue, JsValue> {
    let device = this.device(op)?;
    let tensors = args::tensors(op, "tensors", tensors)?;
    let axis = args::int_or(op, "axis", axis, 0)?;
    register(&device, || {
        f(&device, &tensors.iter().collect::<Vec<_>>(), axis)
    })
}

/// `Device::random_uniform` or `Device::random_normal`.
type Random = fn(&Device, &[usize], f32, f32, u64) -> Result<Tensor, RegistrationError>;

/// `randomUniform` and `randomNormal`: one body for both (not inlined into
/// each), their two numbers named by `keys` with these `defaults`.
#[inline(never)]
fn random(
    this: &JsDevice,
    op: &'static str,
    shape: &JsValue,
    options: &JsValue,
    keys: [&'static str; 3],
    defaults: [f64; 2],
    f: Random,
) -> Result<JsValue, JsValue> {
    let device = this.device(op)?;
    let shape = args::shape(op, "shape", shape)?;
    let options = Options::read(op, "options", options, &keys)?;
    let first = options.number_or(keys[0], defaults[0])?;
    let second = options.number_or(keys[1], defaults[1])?;
    let seed = options.seed()?;
    register(&device, || {
        f(&device, &shape, first as f32, second as f32, seed)
    })
}
