//! JS values to the arguments of the Rust API. JS passes anything anywhere,
//! and wasm-bindgen's typed parameters coerce silently (`'abc'` as an `f64`
//! is NaN, any truthy value a `true`), so every public method takes
//! `JsValue`s and converts them here, refusing what does not fit with an
//! error naming the op, the argument and what was passed.

use js_sys::{Array, Object, Reflect};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use crate::error::number as show;
use crate::ir::{DType, Values};
use crate::{DataFormat, Device, ErrorClass, Operand, Padding, Tensor};

use super::errors::op_error;
use super::registry::{self, Found};

/// Argument `name` of `op`, which must be a function: a `TypeError`
/// naming what came instead.
pub fn function(
    op: &'static str,
    name: &str,
    value: &JsValue,
) -> Result<js_sys::Function, JsValue> {
    value.dyn_ref::<js_sys::Function>().cloned().ok_or_else(|| {
        op_error(
            op,
            ErrorClass::Type,
            format!("{name} must be a function, got {}", describe(value)),
        )
    })
}

/// What a caller passed, as an error names it: `undefined`, `5`,
/// `the string "oops"`, `an object of class Tensor`.
pub fn describe(value: &JsValue) -> String {
    if value.is_undefined() {
        return "undefined".to_string();
    }
    if value.is_null() {
        return "null".to_string();
    }
    if let Some(n) = value.as_f64() {
        return show(n);
    }
    if let Some(n) = value.dyn_ref::<js_sys::BigInt>() {
        return n
            .to_string(10)
            .map_or_else(|_| "a bigint".to_string(), |s| format!("{s}n"));
    }
    if let Some(text) = value.as_string() {
        let mut shown: String = text.chars().take(40).collect();
        if shown.len() < text.len() {
            shown.push('…');
        }
        return format!("the string {shown:?}");
    }
    if let Some(flag) = value.as_bool() {
        return flag.to_string();
    }
    if value.is_symbol() {
        return "a symbol".to_string();
    }
    if value.is_function() {
        return "a function".to_string();
    }
    match registry::find(value) {
        Found::Tensor(_) | Found::Disposed(_) => return "a webfusion Tensor".to_string(),
        Found::Device(_) => return "a webfusion Device".to_string(),
        Found::Foreign => {}
    }
    if Array::is_array(value) {
        let n = value.unchecked_ref::<Array>().length();
        return format!("an array of {n} item{}", if n == 1 { "" } else { "s" });
    }
    // TF.js's tensors by their fields, not their class name (which a
    // minifier renames): the likeliest foreign tensor to reach this API.
    let field = |name: &str| Reflect::get(value, &name.into()).unwrap_or(JsValue::UNDEFINED);
    if field("dataSync").is_function() && !field("dataId").is_undefined() {
        return "a TF.js Tensor".to_string();
    }
    // Each step can run user code (a Proxy's traps); a step that throws
    // leaves the plainer description.
    let Ok(proto) = Reflect::get_prototype_of(value) else {
        return "an object".to_string();
    };
    if proto.is_null() {
        return "an object with no prototype".to_string();
    }
    let class = Reflect::get(&proto, &"constructor".into())
        .and_then(|c| Reflect::get(&c, &"name".into()))
        .ok()
        .and_then(|n| n.as_string())
        .filter(|n| !n.is_empty());
    match class.as_deref() {
        Some("Object") => "a plain object".to_string(),
        Some(name) => format!("an object of class {name}"),
        None => "an object".to_string(),
    }
}

/// An optional argument left out.
pub fn absent(value: &JsValue) -> bool {
    value.is_undefined() || value.is_null()
}

fn type_error(op: &'static str, reason: String) -> JsValue {
    op_error(op, ErrorClass::Type, reason)
}

pub fn range_error(op: &'static str, reason: String) -> JsValue {
    op_error(op, ErrorClass::Range, reason)
}

pub fn number(op: &'static str, what: &str, value: &JsValue) -> Result<f64, JsValue> {
    value.as_f64().ok_or_else(|| {
        type_error(
            op,
            format!("{what} must be a number, got {}", describe(value)),
        )
    })
}

pub fn number_or(
    op: &'static str,
    what: &str,
    value: &JsValue,
    default: f64,
) -> Result<f64, JsValue> {
    if absent(value) {
        Ok(default)
    } else {
        number(op, what, value)
    }
}

pub fn boolean_or(
    op: &'static str,
    what: &str,
    value: &JsValue,
    default: bool,
) -> Result<bool, JsValue> {
    if absent(value) {
        return Ok(default);
    }
    value.as_bool().ok_or_else(|| {
        type_error(
            op,
            format!("{what} must be a boolean, got {}", describe(value)),
        )
    })
}

pub fn string(op: &'static str, what: &str, value: &JsValue) -> Result<String, JsValue> {
    value.as_string().ok_or_else(|| {
        type_error(
            op,
            format!("{what} must be a string, got {}", describe(value)),
        )
    })
}

/// A whole number in `[min, max]`: the bounds are those of the Rust type it
/// becomes (on wasm32 `usize` is 32 bits), so the conversion never
/// saturates into a different value than the caller wrote.
pub fn integer(
    op: &'static str,
    what: &str,
    value: &JsValue,
    min: f64,
    max: f64,
) -> Result<f64, JsValue> {
    let n = number(op, what, value)?;
    if n.fract() == 0.0 && n >= min && n <= max {
        Ok(n)
    } else {
        Err(range_error(
            op,
            format!(
                "{what} must be an integer from {} to {}, got {}",
                show(min),
                show(max),
                show(n)
            ),
        ))
    }
}

/// An optional seed: any integer a JS number holds exactly.
pub fn seed(op: &'static str, value: &JsValue) -> Result<Option<u64>, JsValue> {
    match absent(value) {
        true => Ok(None),
        false => integer(op, "seed", value, 0.0, 9_007_199_254_740_991.0).map(|n| Some(n as u64)),
    }
}

/// A count or dim.
pub fn count(op: &'static str, what: &str, value: &JsValue) -> Result<usize, JsValue> {
    integer(op, what, value, 0.0, usize::MAX as f64).map(|n| n as usize)
}

/// An axis or a size that may be negative.
pub fn int(op: &'static str, what: &str, value: &JsValue) -> Result<isize, JsValue> {
    integer(op, what, value, isize::MIN as f64, isize::MAX as f64).map(|n| n as isize)
}

pub fn int_or(
    op: &'static str,
    what: &str,
    value: &JsValue,
    default: isize,
) -> Result<isize, JsValue> {
    if absent(value) {
        Ok(default)
    } else {
        int(op, what, value)
    }
}

/// The items of an array argument; anything else is refused, array-likes
/// included, so that a string is never read as a list of characters.
fn items(op: &'static str, what: &str, value: &JsValue) -> Result<Array, JsValue> {
    if Array::is_array(value) {
        Ok(value.clone().unchecked_into())
    } else {
        Err(type_error(
            op,
            format!("{what} must be an array, got {}", describe(value)),
        ))
    }
}

/// A shape: an array of dims.
pub fn shape(op: &'static str, what: &str, value: &JsValue) -> Result<Vec<usize>, JsValue> {
    items(op, what, value)?
        .iter()
        .enumerate()
        .map(|(i, d)| count(op, &format!("{what}[{i}]"), &d))
        .collect()
}

/// `pad`'s paddings: an array of `[before, after]` pairs of counts.
pub fn pairs(
    op: &'static str,
    what: &str,
    value: &JsValue,
) -> Result<Vec<(usize, usize)>, JsValue> {
    items(op, what, value)?
        .iter()
        .enumerate()
        .map(|(i, pair)| {
            let place = format!("{what}[{i}]");
            match shape(op, &place, &pair)?.as_slice() {
                &[before, after] => Ok((before, after)),
                other => Err(range_error(
                    op,
                    format!(
                        "{place} must be a [before, after] pair, got {} numbers",
                        other.len()
                    ),
                )),
            }
        })
        .collect()
}

/// An array of integers that may be negative (`reshape`'s -1).
pub fn ints(op: &'static str, what: &str, value: &JsValue) -> Result<Vec<isize>, JsValue> {
    items(op, what, value)?
        .iter()
        .enumerate()
        .map(|(i, d)| int(op, &format!("{what}[{i}]"), &d))
        .collect()
}

/// One integer or an array of them, as TensorFlow.js takes axes and
/// `slice`'s sizes.
pub fn int_or_ints(op: &'static str, what: &str, value: &JsValue) -> Result<Vec<isize>, JsValue> {
    if Array::is_array(value) {
        ints(op, what, value)
    } else {
        Ok(vec![int(op, what, value)?])
    }
}

/// One count or an array of them (`slice`'s `begin`).
pub fn count_or_counts(
    op: &'static str,
    what: &str,
    value: &JsValue,
) -> Result<Vec<usize>, JsValue> {
    if Array::is_array(value) {
        shape(op, what, value)
    } else {
        Ok(vec![count(op, what, value)?])
    }
}

/// Axes: one, several, or all when left out.
pub fn axes(op: &'static str, value: &JsValue) -> Result<Option<Vec<isize>>, JsValue> {
    if absent(value) {
        Ok(None)
    } else {
        int_or_ints(op, "axis", value).map(Some)
    }
}

/// A webfusion `Tensor` that is still live. `place` says which argument,
/// for ops that take several (`" for b"`, `" at tensors[1]"`).
pub fn tensor(op: &'static str, place: &str, value: &JsValue) -> Result<Tensor, JsValue> {
    match registry::find(value) {
        Found::Tensor(t) => Ok(t),
        Found::Disposed(id) => Err(registry::disposed(op, id)),
        Found::Device(_) | Found::Foreign => Err(type_error(
            op,
            format!(
                "expected a webfusion Tensor{place}, got {}",
                describe(value)
            ),
        )),
    }
}

pub fn tensors(op: &'static str, what: &str, value: &JsValue) -> Result<Vec<Tensor>, JsValue> {
    items(op, what, value)?
        .iter()
        .enumerate()
        .map(|(i, t)| tensor(op, &format!(" at {what}[{i}]"), &t))
        .collect()
}

pub fn device(op: &'static str, value: &JsValue) -> Result<Device, JsValue> {
    match registry::find(value) {
        Found::Device(d) => Ok(d),
        _ => Err(type_error(
            op,
            format!("expected a webfusion Device, got {}", describe(value)),
        )),
    }
}

/// A binary op's other operand, owned until the op borrows it.
pub enum OperandArg {
    Scalar(f32),
    Tensor(Tensor),
}

impl OperandArg {
    pub fn get(&self) -> Operand<'_> {
        match self {
            OperandArg::Scalar(v) => Operand::Scalar(*v),
            OperandArg::Tensor(t) => Operand::Tensor(t),
        }
    }
}

pub fn operand(op: &'static str, value: &JsValue) -> Result<OperandArg, JsValue> {
    if let Some(n) = value.as_f64() {
        return Ok(OperandArg::Scalar(n as f32));
    }
    match registry::find(value) {
        Found::Tensor(t) => Ok(OperandArg::Tensor(t)),
        Found::Disposed(id) => Err(registry::disposed(op, id)),
        Found::Device(_) | Found::Foreign => Err(type_error(
            op,
            format!(
                "expected a webfusion Tensor or a number, got {}",
                describe(value)
            ),
        )),
    }
}

/// An options object. Keys it does not know are refused: a misspelt key
/// (`{ minval: 2 }`, `{ captureStack: true }`) would otherwise be ignored
/// without a word and its default used.
pub struct Options {
    op: &'static str,
    /// How keys are named in errors: `""` at the top, `"debug."` inside.
    prefix: String,
    object: Option<Object>,
}

impl Options {
    /// `value` read as an argument of options with `known` keys (`what`
    /// names the argument); left out, every key takes its default.
    pub fn read(
        op: &'static str,
        what: &str,
        value: &JsValue,
        known: &[&str],
    ) -> Result<Options, JsValue> {
        Options::with_prefix(op, what, String::new(), value, known)
    }

    /// The options object at `key`, itself an option.
    pub fn nested(&self, key: &str, known: &[&str]) -> Result<Options, JsValue> {
        let (value, what) = self.get(key)?;
        let prefix = format!("{what}.");
        Options::with_prefix(self.op, &what, prefix, &value, known)
    }

    fn with_prefix(
        op: &'static str,
        what: &str,
        prefix: String,
        value: &JsValue,
        known: &[&str],
    ) -> Result<Options, JsValue> {
        if absent(value) {
            return Ok(Options {
                op,
                prefix,
                object: None,
            });
        }
        if !value.is_object() || Array::is_array(value) {
            return Err(type_error(
                op,
                format!("{what} must be an object, got {}", describe(value)),
            ));
        }
        let object: Object = value.clone().unchecked_into();
        for key in Object::keys(&object).iter() {
            let key = key.as_string().unwrap_or_default();
            if !known.contains(&key.as_str()) {
                return Err(type_error(
                    op,
                    format!(
                        "{what} has no option '{key}' (it takes {})",
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(Options {
            op,
            prefix,
            object: Some(object),
        })
    }

    /// The value at `key` (undefined when absent) and how errors name it.
    /// A getter that throws throws through here unchanged: it is the
    /// caller's own error.
    pub fn get(&self, key: &str) -> Result<(JsValue, String), JsValue> {
        let value = match &self.object {
            Some(object) => Reflect::get(object, &key.into())?,
            None => JsValue::UNDEFINED,
        };
        Ok((value, format!("{}{key}", self.prefix)))
    }

    pub fn number_or(&self, key: &str, default: f64) -> Result<f64, JsValue> {
        let (value, what) = self.get(key)?;
        number_or(self.op, &what, &value, default)
    }

    pub fn boolean_or(&self, key: &str, default: bool) -> Result<bool, JsValue> {
        let (value, what) = self.get(key)?;
        boolean_or(self.op, &what, &value, default)
    }

    /// An integer option in `[min, max]`, `default` when absent.
    pub fn integer_or(&self, key: &str, min: f64, max: f64, default: f64) -> Result<f64, JsValue> {
        let (value, what) = self.get(key)?;
        if absent(&value) {
            Ok(default)
        } else {
            integer(self.op, &what, &value, min, max)
        }
    }

    /// The `seed` option: any integer a JS number holds exactly.
    pub fn seed(&self) -> Result<u64, JsValue> {
        self.integer_or("seed", 0.0, 9_007_199_254_740_991.0, 0.0)
            .map(|s| s as u64)
    }
}

/// A `dtype` argument: `'float32'`, `'int32'` or `'bool'`, or `default`
/// when absent.
pub fn dtype_or(op: &'static str, value: &JsValue, default: DType) -> Result<DType, JsValue> {
    match absent(value) {
        true => Ok(default),
        false => dtype(op, value),
    }
}

/// A `dtype` argument that is there: `'float32'`, `'int32'` or `'bool'`.
pub fn dtype(op: &'static str, value: &JsValue) -> Result<DType, JsValue> {
    value
        .as_string()
        .and_then(|name| DType::parse(&name))
        .ok_or_else(|| {
            type_error(
                op,
                format!(
                    "dtype must be 'float32', 'int32' or 'bool', got {}",
                    describe(value)
                ),
            )
        })
}

/// `tensor()`'s values, flattened row-major, in `dtype` (or the one they
/// give: an `Int32Array` or `Uint8Array` int32, booleans bool, numbers and
/// a `Float32Array` float32, as TF.js infers them), and the shape their
/// nesting gives: a number or boolean (a scalar), a typed or flat array
/// (one dim), or nested arrays, which must be rectangular. A value the
/// dtype cannot hold exactly (1.5 or 2^31 as an int32) is refused, naming
/// its position: TF.js would truncate it silently.
pub fn values(
    op: &'static str,
    value: &JsValue,
    dtype: Option<DType>,
) -> Result<(Values, Vec<usize>), JsValue> {
    // A typed array of 32-bit values arrives as its words lie: one copy into
    // wasm memory, converted there in place where the dtype is not its own.
    let words32 = |given: DType, buffer, byte_offset, length: u32| {
        let dtype = dtype.unwrap_or(given);
        let mut words = own_words(op, buffer, byte_offset, length)?;
        if dtype != given {
            for (position, word) in words.iter_mut().enumerate() {
                let v = match given {
                    DType::Float32 => f64::from(f32::from_bits(*word)),
                    _ => f64::from(*word as i32),
                };
                *word = encode(op, v, position, dtype)?;
            }
        }
        Ok((Values::new(dtype, words), vec![length as usize]))
    };
    if let Some(array) = value.dyn_ref::<js_sys::Int32Array>() {
        return words32(
            DType::Int32,
            array.buffer(),
            array.byte_offset(),
            array.length(),
        );
    }
    if let Some(array) = value.dyn_ref::<js_sys::Float32Array>() {
        return words32(
            DType::Float32,
            array.buffer(),
            array.byte_offset(),
            array.length(),
        );
    }
    if let Some(array) = value.dyn_ref::<js_sys::Uint8Array>() {
        let dtype = dtype.unwrap_or(DType::Int32);
        let words = bytes_as(op, array, dtype)?;
        return Ok((Values::new(dtype, words), vec![array.length() as usize]));
    }
    let (leaves, shape, all_booleans) = leaves(op, value)?;
    let inferred = if all_booleans && !leaves.is_empty() {
        DType::Bool
    } else {
        DType::Float32
    };
    let dtype = dtype.unwrap_or(inferred);
    let mut words = reserve_words(op, leaves.len())?;
    for v in leaves {
        words.push(encode(op, v, words.len(), dtype)?);
    }
    Ok((Values::new(dtype, words), shape))
}

/// Room for `count` words in wasm memory, or a `RangeError` where the page
/// cannot give it. The page chooses the size, and a failed allocation would
/// abort the module for the whole page (wasm has no recovery from one):
/// values larger than wasm can address (2 GiB a vector), or than the
/// memory it can still grow to, are refused here, before any is copied.
fn reserve_words(op: &'static str, count: usize) -> Result<Vec<u32>, JsValue> {
    let mut words = Vec::new();
    match words.try_reserve_exact(count) {
        Ok(()) => Ok(words),
        Err(_) => Err(range_error(
            op,
            format!(
                "{count} values need {} bytes of wasm memory, more than this page can give it",
                show(count as f64 * 4.0)
            ),
        )),
    }
}

/// A typed array of 32-bit words, copied as they lie.
fn own_words(
    op: &'static str,
    buffer: js_sys::ArrayBuffer,
    byte_offset: u32,
    length: u32,
) -> Result<Vec<u32>, JsValue> {
    let mut words = reserve_words(op, length as usize)?;
    words.resize(length as usize, 0);
    js_sys::Uint32Array::new_with_byte_offset_and_length(&buffer, byte_offset, length)
        .copy_to(&mut words);
    Ok(words)
}

/// A `Uint8Array`'s bytes as words of `dtype`, copied out of JS a piece at
/// a time: its words are four times its bytes, and a conversion holds one
/// piece beside them, never a second copy of the whole array.
fn bytes_as(
    op: &'static str,
    array: &js_sys::Uint8Array,
    dtype: DType,
) -> Result<Vec<u32>, JsValue> {
    const PIECE: u32 = 1 << 14;
    let length = array.length();
    let mut words = reserve_words(op, length as usize)?;
    let mut piece = [0u8; PIECE as usize];
    let mut start = 0;
    while start < length {
        let end = start + PIECE.min(length - start);
        let piece = &mut piece[..(end - start) as usize];
        array.subarray(start, end).copy_to(piece);
        for &byte in piece.iter() {
            words.push(encode(op, f64::from(byte), words.len(), dtype)?);
        }
        start = end;
    }
    Ok(words)
}

/// `v` as a word of `dtype`, refusing a value an int32 cannot hold, named
/// by its position among all the values.
fn encode(op: &'static str, v: f64, position: usize, dtype: DType) -> Result<u32, JsValue> {
    match dtype {
        DType::Float32 => Ok((v as f32).to_bits()),
        DType::Bool => Ok(u32::from(v != 0.0)),
        DType::Int32 if v.fract() == 0.0 && (i32::MIN as f64..=i32::MAX as f64).contains(&v) => {
            Ok(v as i32 as u32)
        }
        DType::Int32 => Err(range_error(
            op,
            format!("value {} at position {position} is not an int32", show(v)),
        )),
    }
}

/// The numbers (a boolean as 1 or 0) of a number, a boolean or nested
/// arrays of them, row-major; the shape the nesting gives; and whether
/// every one was a boolean.
fn leaves(op: &'static str, value: &JsValue) -> Result<(Vec<f64>, Vec<usize>, bool), JsValue> {
    let leaf = |item: &JsValue| {
        item.as_f64()
            .map(|n| (n, false))
            .or_else(|| item.as_bool().map(|b| (f64::from(u8::from(b)), true)))
    };
    if let Some((n, boolean)) = leaf(value) {
        return Ok((vec![n], vec![], boolean));
    }
    if !Array::is_array(value) {
        return Err(type_error(
            op,
            format!(
                "values must be a number, a boolean, an array or a typed array, got {}",
                describe(value)
            ),
        ));
    }
    // The shape is read off the first element at each depth; every other
    // element must then match it.
    let mut shape = Vec::new();
    let mut probe = value.clone();
    while Array::is_array(&probe) {
        let array: &Array = probe.unchecked_ref();
        shape.push(array.length() as usize);
        if array.length() == 0 {
            break;
        }
        probe = array.get(0);
    }
    let ragged = || {
        range_error(
            op,
            format!(
                "nested arrays must be rectangular (every row the same length and depth, \
                 {} like the first)",
                crate::ir::shape::display(&shape)
            ),
        )
    };
    let not_a_number = |item: &JsValue| {
        type_error(
            op,
            format!(
                "values must hold numbers or booleans, got {}",
                describe(item)
            ),
        )
    };
    // Depth-first without recursion: a deeply nested array must not
    // exhaust the wasm stack. Children are pushed last first, so the values
    // come out row-major.
    let mut out = Vec::new();
    let mut all_booleans = true;
    let mut stack = vec![(value.clone(), 0usize)];
    while let Some((item, depth)) = stack.pop() {
        if depth == shape.len() {
            match leaf(&item) {
                Some((n, boolean)) => {
                    out.push(n);
                    all_booleans &= boolean;
                }
                None if Array::is_array(&item) => return Err(ragged()),
                None => return Err(not_a_number(&item)),
            }
        } else if Array::is_array(&item) {
            let array: &Array = item.unchecked_ref();
            if array.length() as usize != shape[depth] {
                return Err(ragged());
            }
            for i in (0..array.length()).rev() {
                stack.push((array.get(i), depth + 1));
            }
        } else if leaf(&item).is_some() {
            return Err(ragged());
        } else {
            return Err(not_a_number(&item));
        }
    }
    Ok((out, shape, all_booleans))
}

/// A count of at least 1, or a pair of them (`conv2d`'s strides and
/// dilations: a number is both).
pub fn steps(op: &'static str, what: &str, value: &JsValue) -> Result<[usize; 2], JsValue> {
    let pair = if Array::is_array(value) {
        match shape(op, what, value)?.as_slice() {
            &[a, b] => [a, b],
            other => {
                return Err(range_error(
                    op,
                    format!(
                        "{what} must be a number or a pair, got {} numbers",
                        other.len()
                    ),
                ));
            }
        }
    } else {
        let n = count(op, what, value)?;
        [n, n]
    };
    if pair.contains(&0) {
        return Err(range_error(
            op,
            format!("{what} must each be at least 1, got {pair:?}"),
        ));
    }
    Ok(pair)
}

/// `steps`, or `[1, 1]` when left out.
pub fn steps_or_one(op: &'static str, what: &str, value: &JsValue) -> Result<[usize; 2], JsValue> {
    if absent(value) {
        Ok([1, 1])
    } else {
        steps(op, what, value)
    }
}

/// TF.js's `dataFormat`: `'NHWC'` (the default) or `'NCHW'`; for a 1-D
/// convolution (`one_d`) `'NWC'` or `'NCW'`.
pub fn data_format(op: &'static str, value: &JsValue, one_d: bool) -> Result<DataFormat, JsValue> {
    if absent(value) {
        return Ok(DataFormat::Nhwc);
    }
    let (last, first) = if one_d {
        ("NWC", "NCW")
    } else {
        ("NHWC", "NCHW")
    };
    match string(op, "dataFormat", value)?.as_str() {
        s if s == last => Ok(DataFormat::Nhwc),
        s if s == first => Ok(DataFormat::Nchw),
        other => Err(range_error(
            op,
            format!("dataFormat must be '{last}' or '{first}', got '{other}'"),
        )),
    }
}

/// TF.js's `pad`: `'valid'`, `'same'`, a count for every side, or, for a
/// 2-D convolution (`format` given), the explicit `[[0, 0], [top, bottom],
/// [left, right], [0, 0]]` (NCHW: `[[0, 0], [0, 0], [top, bottom], [left,
/// right]]`).
pub fn conv_pad(
    op: &'static str,
    value: &JsValue,
    format: Option<DataFormat>,
) -> Result<Padding, JsValue> {
    if let Some(s) = value.as_string() {
        return match s.as_str() {
            "valid" => Ok(Padding::Valid),
            "same" => Ok(Padding::Same),
            other => Err(range_error(
                op,
                format!("pad must be 'valid', 'same', a number or explicit pairs, got '{other}'"),
            )),
        };
    }
    let Some(format) = format.filter(|_| Array::is_array(value)) else {
        let p = count(op, "pad", value)?;
        return Ok(Padding::Explicit([[p, p], [p, p]]));
    };
    let pairs = pairs(op, "pad", value)?;
    let spatial = match format {
        DataFormat::Nhwc => [1, 2],
        DataFormat::Nchw => [2, 3],
    };
    let good = pairs.len() == 4
        && pairs
            .iter()
            .enumerate()
            .all(|(d, &p)| spatial.contains(&d) || p == (0, 0));
    if !good {
        return Err(range_error(
            op,
            format!(
                "an explicit pad is four [before, after] pairs, one per dim of the input, zero but for \
                 its height and width; got {pairs:?}"
            ),
        ));
    }
    let [h, w] = spatial.map(|d| [pairs[d].0, pairs[d].1]);
    Ok(Padding::Explicit([h, w]))
}
