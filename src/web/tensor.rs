//! The `Tensor` class.

use js_sys::{Array, Float32Array, Int32Array, Promise, Uint8Array, Uint32Array};
use wasm_bindgen::prelude::*;

use crate::ir::{DType, Values};
use crate::{ErrorClass, Operand, RegistrationError, Tensor, TensorId};

use super::args;
use super::errors;
use super::registry::{self, Found, Handle, Key, register};

/// A tensor; its values are computed when read.
#[wasm_bindgen(js_name = Tensor)]
pub struct JsTensor {
    handle: Handle,
}

impl JsTensor {
    pub(super) fn new(key: Key, id: TensorId) -> JsTensor {
        let tensor = Some(id);
        JsTensor {
            handle: Handle { key, tensor },
        }
    }

    /// The tensor this object stands for, unless disposed; `op` names the
    /// method for the error.
    pub(super) fn tensor(&self, op: &'static str) -> Result<Tensor, JsValue> {
        match (registry::held(self.handle.key), self.handle.tensor) {
            (Found::Tensor(tensor), _) => Ok(tensor),
            (Found::Foreign | Found::Disposed(_), Some(id)) => Err(registry::disposed(op, id)),
            (Found::Foreign | Found::Disposed(_) | Found::Device(_), _) => Err(not_a_tensor(op)),
        }
    }

    /// `cumsum` or `cumprod` (`scan`) with JS's `(axis, exclusive, reverse)`.
    fn scan(
        &self,
        op: &'static str,
        [axis, exclusive, reverse]: [JsValue; 3],
        scan: fn(&Tensor, isize, bool, bool) -> Result<Tensor, crate::RegistrationError>,
    ) -> Result<JsValue, JsValue> {
        let t = self.tensor(op)?;
        let axis = args::int_or(op, "axis", &axis, 0)?;
        let exclusive = args::boolean_or(op, "exclusive", &exclusive, false)?;
        let reverse = args::boolean_or(op, "reverse", &reverse, false)?;
        register(t.device(), || scan(&t, axis, exclusive, reverse))
    }
}

impl JsTensor {
    /// The variable this object stands for; `op` names the method for the
    /// error when it is a plain tensor (or disposed).
    fn variable(&self, op: &'static str) -> Result<crate::Variable, JsValue> {
        if let Some(variable) = registry::variable(self.handle.key) {
            return Ok(variable);
        }
        let t = self.tensor(op)?;
        Err(errors::op_error(
            op,
            ErrorClass::Type,
            format!(
                "{} is not a variable; make one with device.variable(initial)",
                t.id()
            ),
        ))
    }
}

fn not_a_tensor(op: &'static str) -> JsValue {
    errors::op_error(
        op,
        ErrorClass::Type,
        "called on an object that is not a webfusion Tensor",
    )
}

impl Drop for JsTensor {
    /// The object was collected: the table forgets it.
    fn drop(&mut self) {
        registry::forget(self.handle.key);
    }
}

#[wasm_bindgen(js_class = Tensor)]
impl JsTensor {
    /// The tensor's number, as errors and reports name it (`tensor #5`).
    #[wasm_bindgen(getter)]
    pub fn id(&self) -> Result<f64, JsValue> {
        match (registry::held(self.handle.key), self.handle.tensor) {
            (Found::Tensor(tensor), _) => Ok(tensor.id().0 as f64),
            (Found::Foreign | Found::Disposed(_), Some(id)) => Ok(id.0 as f64),
            (Found::Foreign | Found::Disposed(_) | Found::Device(_), _) => Err(not_a_tensor("id")),
        }
    }

    #[wasm_bindgen(getter, unchecked_return_type = "number[]")]
    pub fn shape(&self) -> Result<Array, JsValue> {
        let t = self.tensor("shape")?;
        Ok(t.shape().iter().map(|&d| JsValue::from(d as f64)).collect())
    }

    /// The number of elements, as a JS number: exact up to 2^53, where a
    /// count in `usize` (32 bits in wasm) would saturate.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> Result<f64, JsValue> {
        let t = self.tensor("size")?;
        Ok(t.shape().iter().map(|&d| d as f64).product())
    }

    #[wasm_bindgen(getter)]
    pub fn rank(&self) -> Result<f64, JsValue> {
        Ok(self.tensor("rank")?.rank() as f64)
    }

    /// `'float32'`, `'int32'` or `'bool'`: the same JS string each time,
    /// made once (decoding a new one cost more than the op that made the
    /// tensor; TF.js's backend asks for every result's dtype).
    #[wasm_bindgen(getter, unchecked_return_type = "DataType")]
    pub fn dtype(&self) -> Result<JsValue, JsValue> {
        thread_local! {
            static NAMES: [JsValue; 3] = [DType::Float32, DType::Int32, DType::Bool].map(|d| JsValue::from_str(d.name()));
        }
        let dtype = self.tensor("dtype")?.dtype();
        let index = match dtype {
            DType::Float32 => 0,
            DType::Int32 => 1,
            DType::Bool => 2,
        };
        Ok(NAMES.with(|names| names[index].clone()))
    }

    /// A `Promise` of the values, row-major: a `Float32Array`, an
    /// `Int32Array`, or for a bool a `Uint8Array` of 0 and 1, as TF.js's.
    /// Every refusal rejects, a disposed tensor's too (`read`).
    #[wasm_bindgen(unchecked_return_type = "Promise<TypedValues>")]
    pub fn data(&self) -> Promise {
        read(self, "data", |values, _| typed(values))
    }

    /// The values now, as `data()` would give them, when the host holds
    /// them: values the page gave, and small work on them (views, joins,
    /// folds, elementwise ops) that ran on the CPU (values of more than
    /// `hostMaxElements` elements go to the GPU, as they would be kept
    /// twice otherwise); and the values an earlier `data()` or `array()`
    /// of this object brought back, as TF.js keeps them. A tensor whose
    /// work failed throws its `TensorError`. One whose bytes are on the
    /// GPU and not yet read throws: WebGPU reads only asynchronously, and
    /// whether the submission that wrote its bytes failed is known only
    /// then (TF.js's WebGPU backend reads such a tensor through a canvas,
    /// and can give a wrong value).
    #[wasm_bindgen(js_name = dataSync, unchecked_return_type = "TypedValues")]
    pub fn data_sync(&self) -> Result<JsValue, JsValue> {
        read_now(self, "dataSync", |values, _| typed(values))
    }

    /// The values now as `array()` gives them, when `dataSync()` has them
    /// (TF.js's `arraySync`); it throws when `dataSync()` would.
    #[wasm_bindgen(js_name = arraySync, unchecked_return_type = "NestedNumbers")]
    pub fn array_sync(&self) -> Result<JsValue, JsValue> {
        read_now(self, "arraySync", |values, shape| {
            nest(&numbers(values), shape)
        })
    }

    /// `Promise` of the values as nested arrays of numbers (a number for a
    /// scalar; a bool's as 1 and 0, as TF.js gives them).
    #[wasm_bindgen(unchecked_return_type = "Promise<NestedNumbers>")]
    pub fn array(&self) -> Promise {
        read(self, "array", |values, shape| nest(&numbers(values), shape))
    }

    /// `cast(dtype)`: a float to an int truncated toward zero (saturating,
    /// NaN to 0), anything to a bool by whether it is non-zero.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn cast(
        &self,
        #[wasm_bindgen(unchecked_param_type = "DataType")] dtype: JsValue,
    ) -> Result<JsValue, JsValue> {
        let t = self.tensor("cast")?;
        if args::absent(&dtype) {
            return Err(errors::op_error(
                "cast",
                ErrorClass::Type,
                "needs a dtype: 'float32', 'int32' or 'bool'",
            ));
        }
        let dtype = args::dtype("cast", &dtype)?;
        register(t.device(), || t.cast(dtype))
    }

    /// `to(device)`: a `Promise` of this tensor on `device`. A tainted tensor
    /// arrives tainted: the copy carries its failures, naming this device.
    #[wasm_bindgen(unchecked_return_type = "Promise<Tensor>")]
    pub fn to(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Device")] device: JsValue,
    ) -> Result<Promise, JsValue> {
        let tensor = self.tensor("to")?;
        let device = args::device("to", &device)?;
        let moving = tensor.to(&device).map_err(|e| errors::registration(&e))?;
        Ok(super::promise(Box::pin(async move {
            match moving.await {
                Ok(moved) => Ok(registry::wrap_tensor(moved)),
                Err(e) => Err(errors::registration(&e)),
            }
        })))
    }

    /// Releases the tensor's memory now; using this object afterwards
    /// throws. `free()` and `[Symbol.dispose]()` do the same.
    pub fn dispose(&self) {
        registry::dispose(self.handle.key);
    }

    /// A variable's `assign(value)`: its value becomes a copy of `value`
    /// (same shape, same device). Typed on `Variable` only; on a plain
    /// tensor it throws.
    #[wasm_bindgen(skip_typescript)]
    pub fn assign(&self, value: JsValue) -> Result<(), JsValue> {
        let op = "assign";
        let variable = self.variable(op)?;
        let value = args::tensor(op, " (value)", &value)?;
        let site = errors::site_if_captured(&variable.device());
        crate::tensor::with_site(site, || variable.assign(&value))
            .map_err(|e| errors::registration(&e))
    }

    /// A variable's name; `undefined` on a plain tensor.
    #[wasm_bindgen(getter, skip_typescript)]
    pub fn name(&self) -> Option<String> {
        registry::variable(self.handle.key).map(|v| v.name().to_string())
    }

    /// Whether a variable is trainable; `false` on a plain tensor.
    #[wasm_bindgen(getter, skip_typescript)]
    pub fn trainable(&self) -> bool {
        registry::variable(self.handle.key).is_some_and(|v| v.trainable())
    }

    /// Each value limited to `[min, max]`.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn clamp(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] min: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] max: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "clamp";
        let t = self.tensor(op)?;
        let min = args::number(op, "min", &min)?;
        let max = args::number(op, "max", &max)?;
        register(t.device(), || t.clamp(min as f32, max as f32))
    }

    /// `argMax(axis = 0)`: the int32 index of the largest value.
    #[wasm_bindgen(js_name = argMax, unchecked_return_type = "Tensor")]
    pub fn arg_max(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: JsValue,
    ) -> Result<JsValue, JsValue> {
        along(self, "argMax", &axis, 0, Tensor::arg_max)
    }

    /// `topk(k = 1, sorted = true)`: TF.js's `topk(x, k, sorted)`, `{ values,
    /// indices }` along the last axis, largest first (always sorted).
    #[wasm_bindgen(unchecked_return_type = "{ values: Tensor; indices: Tensor }")]
    pub fn topk(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] k: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] sorted: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "topk";
        let t = self.tensor(op)?;
        let k = match args::absent(&k) {
            true => 1,
            false => args::count(op, "k", &k)?,
        };
        args::boolean_or(op, "sorted", &sorted, true)?;
        registry::register_pair(t.device(), ["values", "indices"], || t.top_k(k))
    }

    /// `moments(axis?, keepDims = false)`: TF.js's `moments(x, axis,
    /// keepDims)`, `{ mean, variance }` over the axes.
    #[wasm_bindgen(unchecked_return_type = "{ mean: Tensor; variance: Tensor }")]
    pub fn moments(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number | number[]")] axis: JsValue,
        #[wasm_bindgen(js_name = keepDims, unchecked_optional_param_type = "boolean")]
        keep_dims: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "moments";
        let t = self.tensor(op)?;
        let axes = args::axes(op, &axis)?;
        let keep_dims = args::boolean_or(op, "keepDims", &keep_dims, false)?;
        registry::register_pair(t.device(), ["mean", "variance"], || {
            t.moments(axes.as_deref(), keep_dims)
        })
    }

    /// `batchNorm(mean, variance, offset?, scale?, varianceEpsilon =
    /// 0.001)`: TF.js's `batchNorm(x, mean, variance, offset, scale,
    /// varianceEpsilon)`; each statistic a tensor that broadcasts to this
    /// one's shape.
    #[wasm_bindgen(js_name = batchNorm, unchecked_return_type = "Tensor")]
    pub fn batch_norm(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] mean: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] variance: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | null")] offset: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "Tensor | null")] scale: JsValue,
        #[wasm_bindgen(js_name = varianceEpsilon, unchecked_optional_param_type = "number")]
        epsilon: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "batchNorm";
        let t = self.tensor(op)?;
        let mean = args::tensor(op, " as mean", &mean)?;
        let variance = args::tensor(op, " as variance", &variance)?;
        let optional = |value: &JsValue, place| match args::absent(value) {
            true => Ok(None),
            false => args::tensor(op, place, value).map(Some),
        };
        let offset = optional(&offset, " as offset")?;
        let scale = optional(&scale, " as scale")?;
        let epsilon = args::number_or(op, "varianceEpsilon", &epsilon, 0.001)?;
        register(t.device(), || {
            t.batch_norm(
                &mean,
                &variance,
                offset.as_ref(),
                scale.as_ref(),
                epsilon as f32,
            )
        })
    }

    /// `dropout(rate, noiseShape?, seed?)`: TF.js's `dropout(x, rate,
    /// noiseShape, seed)`; without a seed each call draws a new mask.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn dropout(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] rate: JsValue,
        #[wasm_bindgen(js_name = noiseShape, unchecked_optional_param_type = "number[] | null")]
        noise_shape: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] seed: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "dropout";
        let t = self.tensor(op)?;
        let rate = args::number(op, "rate", &rate)?;
        let noise = match args::absent(&noise_shape) {
            true => None,
            false => Some(args::shape(op, "noiseShape", &noise_shape)?),
        };
        let seed = args::seed(op, &seed)?;
        register(t.device(), || {
            t.dropout(rate as f32, noise.as_deref(), seed)
        })
    }

    /// `cumsum(axis = 0, exclusive = false, reverse = false)`.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn cumsum(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] exclusive: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] reverse: JsValue,
    ) -> Result<JsValue, JsValue> {
        self.scan("cumsum", [axis, exclusive, reverse], Tensor::cumsum)
    }

    /// `cumprod(axis = 0, exclusive = false, reverse = false)`.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn cumprod(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] exclusive: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] reverse: JsValue,
    ) -> Result<JsValue, JsValue> {
        self.scan("cumprod", [axis, exclusive, reverse], Tensor::cumprod)
    }

    /// `multinomial(numSamples, seed = 0, normalized = false)` of these
    /// logits (TF.js's `multinomial(logits, numSamples, seed, normalized)`):
    /// int32 class indices.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn multinomial(
        &self,
        #[wasm_bindgen(js_name = numSamples, unchecked_param_type = "number")] num_samples: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] seed: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "boolean")] normalized: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "multinomial";
        let t = self.tensor(op)?;
        let n = args::count(op, "numSamples", &num_samples)?;
        let seed = args::seed(op, &seed)?.unwrap_or(0);
        let normalized = args::boolean_or(op, "normalized", &normalized, false)?;
        register(t.device(), || t.multinomial(n, seed, normalized))
    }

    /// `gather(indices, axis = 0, batchDims = 0)`: TF.js's `gather(x,
    /// indices, axis, batchDims)`, the indices an int32 tensor.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn gather(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] indices: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: JsValue,
        #[wasm_bindgen(js_name = batchDims, unchecked_optional_param_type = "number")]
        batch_dims: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "gather";
        let t = self.tensor(op)?;
        let axis = args::int_or(op, "axis", &axis, 0)?;
        let batch_dims = args::int_or(op, "batchDims", &batch_dims, 0)?;
        let indices = args::tensor(op, " as indices", &indices)?;
        register(t.device(), || t.gather(&indices, axis, batch_dims))
    }

    /// `unsortedSegmentSum(segmentIds, numSegments)`: TF.js's
    /// `unsortedSegmentSum(x, segmentIds, numSegments)`.
    #[wasm_bindgen(js_name = unsortedSegmentSum, unchecked_return_type = "Tensor")]
    pub fn unsorted_segment_sum(
        &self,
        #[wasm_bindgen(js_name = segmentIds, unchecked_param_type = "Tensor")] segment_ids: JsValue,
        #[wasm_bindgen(js_name = numSegments, unchecked_param_type = "number")]
        num_segments: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "unsortedSegmentSum";
        let t = self.tensor(op)?;
        let n = args::count(op, "numSegments", &num_segments)?;
        let ids = args::tensor(op, " as segmentIds", &segment_ids)?;
        register(t.device(), || t.unsorted_segment_sum(&ids, n))
    }

    /// `oneHot(depth, onValue = 1, offValue = 0, dtype = 'int32')` of these
    /// int32 indices (TF.js's `oneHot(indices, ...)`): a new last dim.
    #[wasm_bindgen(js_name = oneHot, unchecked_return_type = "Tensor")]
    pub fn one_hot(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] depth: JsValue,
        #[wasm_bindgen(js_name = onValue, unchecked_optional_param_type = "number")] on: JsValue,
        #[wasm_bindgen(js_name = offValue, unchecked_optional_param_type = "number")] off: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "DataType")] dtype: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "oneHot";
        let t = self.tensor(op)?;
        let depth = args::count(op, "depth", &depth)?;
        let on = args::number_or(op, "onValue", &on, 1.0)?;
        let off = args::number_or(op, "offValue", &off, 0.0)?;
        let dtype = args::dtype_or(op, &dtype, DType::Int32)?;
        register(t.device(), || t.one_hot(depth, on, off, dtype))
    }

    /// `argMin(axis = 0)`: the int32 index of the smallest value.
    #[wasm_bindgen(js_name = argMin, unchecked_return_type = "Tensor")]
    pub fn arg_min(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: JsValue,
    ) -> Result<JsValue, JsValue> {
        along(self, "argMin", &axis, 0, Tensor::arg_min)
    }

    /// `softmax(axis = -1)`.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn softmax(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: JsValue,
    ) -> Result<JsValue, JsValue> {
        along(self, "softmax", &axis, -1, Tensor::softmax)
    }

    /// `logSoftmax(axis = -1)`.
    #[wasm_bindgen(js_name = logSoftmax, unchecked_return_type = "Tensor")]
    pub fn log_softmax(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: JsValue,
    ) -> Result<JsValue, JsValue> {
        along(self, "logSoftmax", &axis, -1, Tensor::log_softmax)
    }

    /// `matmul(b, transposeA = false, transposeB = false)`: 2-D, or batched
    /// with broadcast batch dims; a transposed operand is read in place.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn matmul(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] other: JsValue,
        #[wasm_bindgen(js_name = transposeA, unchecked_optional_param_type = "boolean")]
        transpose_a: JsValue,
        #[wasm_bindgen(js_name = transposeB, unchecked_optional_param_type = "boolean")]
        transpose_b: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "matmul";
        let t = self.tensor(op)?;
        let other = args::tensor(op, "", &other)?;
        let a = args::boolean_or(op, "transposeA", &transpose_a, false)?;
        let b = args::boolean_or(op, "transposeB", &transpose_b, false)?;
        register(t.device(), || t.matmul_transposed(&other, a, b))
    }

    /// `pad(paddings, constantValue = 0)`: `paddings` one `[before, after]`
    /// pair per dim.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn pad(
        &self,
        #[wasm_bindgen(unchecked_param_type = "[number, number][]")] paddings: JsValue,
        #[wasm_bindgen(js_name = constantValue, unchecked_optional_param_type = "number")]
        value: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "pad";
        let t = self.tensor(op)?;
        let paddings = args::pairs(op, "paddings", &paddings)?;
        let value = args::number_or(op, "constantValue", &value, 0.0)? as f32;
        register(t.device(), || t.pad(&paddings, value))
    }

    /// `bandPart(numLower, numUpper)`: TF.js's `linalg.bandPart`, each
    /// matrix with the elements outside the band set to 0 (a negative bound
    /// keeps that whole triangle; `bandPart(-1, 0)` is a causal mask).
    #[wasm_bindgen(js_name = bandPart, unchecked_return_type = "Tensor")]
    pub fn band_part(
        &self,
        #[wasm_bindgen(js_name = numLower, unchecked_param_type = "number")] num_lower: JsValue,
        #[wasm_bindgen(js_name = numUpper, unchecked_param_type = "number")] num_upper: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "bandPart";
        let t = self.tensor(op)?;
        let lower = args::int(op, "numLower", &num_lower)?;
        let upper = args::int(op, "numUpper", &num_upper)?;
        register(t.device(), || t.band_part(lower, upper))
    }

    /// `tile(reps)`: one count per dim.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn tile(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] reps: JsValue,
    ) -> Result<JsValue, JsValue> {
        to_shape(self, "tile", "reps", &reps, Tensor::tile)
    }

    /// `split(numOrSizeSplits, axis = 0)`: pieces along `axis`, each a
    /// view: a number of equal pieces (it must divide the axis), or their
    /// sizes (one may be -1, the rest).
    #[wasm_bindgen(unchecked_return_type = "Tensor[]")]
    pub fn split(
        &self,
        #[wasm_bindgen(js_name = numOrSizeSplits, unchecked_param_type = "number | number[]")]
        parts: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: JsValue,
    ) -> Result<Array, JsValue> {
        let op = "split";
        let t = self.tensor(op)?;
        let parts = if parts.is_object() {
            crate::Split::Sizes(args::ints(op, "numOrSizeSplits", &parts)?)
        } else {
            crate::Split::Count(args::count(op, "numOrSizeSplits", &parts)?)
        };
        let axis = args::int_or(op, "axis", &axis, 0)?;
        let site = errors::site_if_captured(t.device());
        let pieces = crate::tensor::with_site(site, || t.split(&parts, axis))
            .map_err(|e| errors::registration(&e))?;
        Ok(pieces.into_iter().map(registry::wrap_tensor).collect())
    }

    /// `transpose(perm?)`: dims reversed when `perm` is left out.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn transpose(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number[]")] perm: JsValue,
    ) -> Result<JsValue, JsValue> {
        let t = self.tensor("transpose")?;
        let perm = if args::absent(&perm) {
            None
        } else {
            Some(args::shape("transpose", "perm", &perm)?)
        };
        register(t.device(), || t.transpose(perm.as_deref()))
    }

    /// `reshape(shape)`: one dim may be -1.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn reshape(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    ) -> Result<JsValue, JsValue> {
        let t = self.tensor("reshape")?;
        let shape = args::ints("reshape", "shape", &shape)?;
        register(t.device(), || t.reshape(&shape))
    }

    /// `slice(begin, size?)`: a `size` of -1 (or left out) runs to the end.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn slice(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number | number[]")] begin: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number | number[]")] size: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "slice";
        let t = self.tensor(op)?;
        let begin = args::count_or_counts(op, "begin", &begin)?;
        let size = if args::absent(&size) {
            vec![-1; begin.len()]
        } else {
            args::int_or_ints(op, "size", &size)?
        };
        register(t.device(), || t.slice(&begin, &size))
    }

    /// `broadcastTo(shape)`.
    #[wasm_bindgen(js_name = broadcastTo, unchecked_return_type = "Tensor")]
    pub fn broadcast_to(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number[]")] shape: JsValue,
    ) -> Result<JsValue, JsValue> {
        to_shape(self, "broadcastTo", "shape", &shape, Tensor::broadcast_to)
    }

    /// `expandDims(axis = 0)`.
    #[wasm_bindgen(js_name = expandDims, unchecked_return_type = "Tensor")]
    pub fn expand_dims(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] axis: JsValue,
    ) -> Result<JsValue, JsValue> {
        along(self, "expandDims", &axis, 0, Tensor::expand_dims)
    }

    /// `squeeze(axis?)`: the listed dims of size 1, or all of them.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn squeeze(
        &self,
        #[wasm_bindgen(unchecked_optional_param_type = "number | number[]")] axis: JsValue,
    ) -> Result<JsValue, JsValue> {
        let t = self.tensor("squeeze")?;
        let axes = args::axes("squeeze", &axis)?;
        register(t.device(), || t.squeeze(axes.as_deref()))
    }

    /// All elements in one dim.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn flatten(&self) -> Result<JsValue, JsValue> {
        let t = self.tensor("flatten")?;
        register(t.device(), || t.flatten())
    }
}

/// A `Promise` of the values of `object`'s tensor, as `finish` gives them
/// from the values and the shape, which are then kept for `dataSync()`:
/// `data()`'s and `array()`'s (`op`) one body (the read's future, copied
/// into each, was 5 KB of wasm apiece).
///
/// A disposed tensor's refusal is the promise's rejection, not a throw:
/// TF.js's `data()` and `array()` are `async` functions, so code written
/// for it (`t.data().catch(...)`) sees every refusal there.
#[inline(never)]
fn read(object: &JsTensor, op: &'static str, finish: fn(&Values, &[usize]) -> JsValue) -> Promise {
    let tensor = match object.tensor(op) {
        Ok(tensor) => tensor,
        Err(refusal) => return Promise::reject(&refusal),
    };
    let key = object.handle.key;
    let asked_at = errors::site_if_captured(tensor.device());
    super::promise(Box::pin(async move {
        match tensor.read(asked_at).await {
            Ok(values) => {
                let answer = finish(&values, tensor.shape());
                registry::keep_read(key, tensor.id(), values);
                Ok(answer)
            }
            Err(e) => Err(errors::tensor(&e)),
        }
    }))
}

/// `dataSync()` or `arraySync()` (`op`): the values the host holds or a
/// read through this object kept, given to JS by `finish`.
fn read_now(
    object: &JsTensor,
    op: &'static str,
    finish: fn(&Values, &[usize]) -> JsValue,
) -> Result<JsValue, JsValue> {
    let tensor = object.tensor(op)?;
    // Asked after the device settled: a lost device's tensors fail there,
    // read or not, as `data()` fails them.
    let values = match tensor.values_on_host(errors::site_if_captured(tensor.device())) {
        Some(answer) => answer,
        None => Ok(registry::kept_read(object.handle.key, tensor.id())
            .ok_or_else(|| not_on_host(op, &tensor))?),
    };
    match values {
        Ok(values) => Ok(finish(&values, tensor.shape())),
        Err(e) => Err(errors::tensor(&e)),
    }
}

/// Why `op` (`dataSync` or `arraySync`) cannot answer for `tensor` now.
fn not_on_host(op: &'static str, tensor: &Tensor) -> JsValue {
    // An empty tensor a kernel made, or a view of one, has no bytes, but
    // whether the GPU work it belongs to failed is known only
    // asynchronously.
    let has = match tensor.size() {
        0 => "has no elements but is made on the GPU",
        _ => "has its bytes on the GPU",
    };
    let asynchronous = op.strip_suffix("Sync").unwrap_or(op);
    errors::op_error(
        op,
        ErrorClass::Other,
        format!(
            "{} of shape {:?} {has}, and WebGPU answers only asynchronously: \
             use `await tensor.{asynchronous}()` (the host answers synchronously \
             only for values the page gave of at most `hostMaxElements` elements, \
             small work on them, and values this object's `data()` or `array()` \
             brought back)",
            tensor.id(),
            tensor.shape(),
        ),
    )
}

/// `values` as the typed array TF.js's `data()` gives for its dtype. A
/// float32's or int32's words are copied out of wasm memory once, as they
/// lie, and the array views their bits: no conversion in between.
fn typed(values: &Values) -> JsValue {
    let bits = || Uint32Array::from(values.words.as_slice()).buffer();
    match values.dtype {
        DType::Float32 => Float32Array::new(&bits()).into(),
        DType::Int32 => Int32Array::new(&bits()).into(),
        DType::Bool => {
            let bytes: Vec<u8> = values.to_bool().into_iter().map(u8::from).collect();
            Uint8Array::from(bytes.as_slice()).into()
        }
    }
}

/// `values` as JS numbers, each exact (an f64 holds every f32 and i32).
fn numbers(values: &Values) -> Vec<f64> {
    match values.dtype {
        DType::Float32 => values.to_f32().into_iter().map(f64::from).collect(),
        DType::Int32 | DType::Bool => values.to_i32().into_iter().map(f64::from).collect(),
    }
}

/// `values` (row-major) as nested JS arrays of `shape`.
fn nest(values: &[f64], shape: &[usize]) -> JsValue {
    match shape.split_first() {
        None => JsValue::from(values.first().copied().unwrap_or(0.0)),
        Some((&outer, rest)) => {
            let inner: usize = rest.iter().product();
            (0..outer)
                .map(|i| nest(&values[i * inner..(i + 1) * inner], rest))
                .collect::<Array>()
                .into()
        }
    }
}

// The one body of each kind of op's entry points (binary, reduction,
// unary), each taking the op as a function. Not inlined: each entry point
// held its own copy of its body, 700 to 1076 bytes apiece.

/// An op along one axis (`default` when left out).
#[inline(never)]
fn along(
    this: &JsTensor,
    op: &'static str,
    axis: &JsValue,
    default: isize,
    f: fn(&Tensor, isize) -> Result<Tensor, RegistrationError>,
) -> Result<JsValue, JsValue> {
    let t = this.tensor(op)?;
    let axis = args::int_or(op, "axis", axis, default)?;
    register(t.device(), || f(&t, axis))
}

/// An op to a shape (`tile`'s repetitions, `broadcastTo`'s shape).
#[inline(never)]
fn to_shape(
    this: &JsTensor,
    op: &'static str,
    what: &str,
    shape: &JsValue,
    f: fn(&Tensor, &[usize]) -> Result<Tensor, RegistrationError>,
) -> Result<JsValue, JsValue> {
    let t = this.tensor(op)?;
    let shape = args::shape(op, what, shape)?;
    register(t.device(), || f(&t, &shape))
}

#[inline(never)]
fn binary(
    this: &JsTensor,
    op: &'static str,
    other: &JsValue,
    f: fn(&Tensor, Operand<'_>) -> Result<Tensor, RegistrationError>,
) -> Result<JsValue, JsValue> {
    let t = this.tensor(op)?;
    let other = args::operand(op, other)?;
    register(t.device(), || f(&t, other.get()))
}

/// A reduction: its axes (all when `None`) and whether it keeps them.
type Reduction = fn(&Tensor, Option<&[isize]>, bool) -> Result<Tensor, RegistrationError>;

#[inline(never)]
fn reduce(
    this: &JsTensor,
    op: &'static str,
    axis: &JsValue,
    keep_dims: &JsValue,
    f: Reduction,
) -> Result<JsValue, JsValue> {
    let t = this.tensor(op)?;
    let axes = args::axes(op, axis)?;
    let keep_dims = args::boolean_or(op, "keepDims", keep_dims, false)?;
    register(t.device(), || f(&t, axes.as_deref(), keep_dims))
}

#[inline(never)]
fn unary(
    this: &JsTensor,
    op: &'static str,
    f: fn(&Tensor) -> Result<Tensor, RegistrationError>,
) -> Result<JsValue, JsValue> {
    let t = this.tensor(op)?;
    register(t.device(), || f(&t))
}

/// Binary ops whose other operand's TypeScript type is `$other`: the
/// logical and bitwise ops take no numbers (TF.js's rule), so their type
/// says so.
macro_rules! binary_ops {
    ($other:literal; $($js:literal => $name:ident),* $(,)?) => {
        #[wasm_bindgen(js_class = Tensor)]
        impl JsTensor {
            $(
                #[wasm_bindgen(js_name = $js, unchecked_return_type = "Tensor")]
                pub fn $name(
                    &self,
                    #[wasm_bindgen(unchecked_param_type = $other)] other: JsValue,
                ) -> Result<JsValue, JsValue> {
                    binary(self, $js, &other, |t, other| t.$name(other))
                }
            )*
        }
    };
}

binary_ops! {
    "Tensor | number";
    "add" => add, "sub" => sub, "mul" => mul, "div" => div, "pow" => pow,
    "maximum" => maximum, "minimum" => minimum, "equal" => equal,
    "greater" => greater, "greaterEqual" => greater_equal,
    "less" => less, "lessEqual" => less_equal,
    "mod" => mod_, "floorDiv" => floor_div,
}

binary_ops! {
    "Tensor";
    "logicalAnd" => logical_and, "logicalOr" => logical_or, "logicalXor" => logical_xor,
    "bitwiseAnd" => bitwise_and,
}

macro_rules! reduce_ops {
    ($($js:literal => $name:ident),* $(,)?) => {
        #[wasm_bindgen(js_class = Tensor)]
        impl JsTensor {
            $(
                #[doc = concat!("`", $js, "(axis?, keepDims = false)`: over one axis, several, or all.")]
                #[wasm_bindgen(js_name = $js, unchecked_return_type = "Tensor")]
                pub fn $name(
                    &self,
                    #[wasm_bindgen(unchecked_optional_param_type = "number | number[]")] axis: JsValue,
                    #[wasm_bindgen(js_name = keepDims, unchecked_optional_param_type = "boolean")]
                    keep_dims: JsValue,
                ) -> Result<JsValue, JsValue> {
                    reduce(self, $js, &axis, &keep_dims, |t, axes, keep_dims| t.$name(axes, keep_dims))
                }
            )*
        }
    };
}

reduce_ops! {
    "sum" => sum, "mean" => mean, "max" => max, "min" => min, "prod" => prod,
    "logSumExp" => log_sum_exp,
}

macro_rules! unary_ops {
    ($($js:literal => $name:ident),* $(,)?) => {
        #[wasm_bindgen(js_class = Tensor)]
        impl JsTensor {
            $(
                #[wasm_bindgen(js_name = $js, unchecked_return_type = "Tensor")]
                pub fn $name(&self) -> Result<JsValue, JsValue> {
                    unary(self, $js, |t| t.$name())
                }
            )*
        }
    };
}

unary_ops! {
    "neg" => neg, "abs" => abs, "exp" => exp, "log" => log, "sqrt" => sqrt,
    "rsqrt" => rsqrt, "square" => square, "relu" => relu, "gelu" => gelu,
    "sigmoid" => sigmoid, "tanh" => tanh, "sin" => sin, "cos" => cos, "tan" => tan,
    "floor" => floor,
    "logicalNot" => logical_not,
}
