//! The host: values made on the CPU (uploads, seeded random values), and
//! small elementwise blocks, views, joins and int folds run there instead
//! of as a kernel.
//!
//! Why a block runs here at all: on a software adapter (SwiftShader,
//! lavapipe) the first launch of any new kernel costs ~10 ms of pipeline
//! compilation, and every read a round trip through a staging buffer. A
//! chain of a thousand ops on sixteen numbers the program just gave is
//! finished on the CPU before the GPU could have compiled it. The device
//! decides which blocks run here (`device::flush`); this file only computes
//! them, with the arithmetic of the kernels' WGSL (`codegen`): the same
//! clamped `tanh`, NumPy's `pow` for a negative base, comparisons as 0 or 1.
//! It is also what lets a synchronous read answer (`dataSync`): a shape
//! computed from a tensor's shape (TF.js's graph models slice, stack and
//! multiply them) is values the host holds, never a GPU round trip.

use crate::fusion::ElementwiseBlock;
use crate::ir::dtype::non_finite_bits;
use crate::ir::layout::Layout;
use crate::ir::shape;
use crate::ir::{
    BinaryOp, DType, Distribution, OpIr, OpKind, ReduceOp, TensorId, UnaryOp, Values, ViewOp,
};

/// A block's input on the host: its values (row-major) and shape.
pub type HostInput<'a> = &'a dyn Fn(TensorId) -> Option<(Values, Vec<usize>)>;

/// What a host block computed: each tensor's values, row-major, and, with
/// the numerics checks on, the values it flagged.
pub struct Computed {
    pub values: Vec<(TensorId, Values)>,
    pub flagged: Vec<NonFinite>,
}

/// A value an op of a host block made non-finite from finite operands, as
/// a kernel's `Finite` check reports it: the op's place in the block, the
/// first such flat position, and the value's class (0 NaN, 1 +Inf, 2 -Inf);
/// and, which a kernel does not keep, its float operands' values there.
#[derive(Debug, Clone, PartialEq)]
pub struct NonFinite {
    pub op: usize,
    pub position: usize,
    pub class: u32,
    pub operands: Vec<f32>,
}

impl Computed {
    /// Values no check looked at (an upload's, a view's).
    pub fn unflagged(values: Vec<(TensorId, Values)>) -> Computed {
        Computed {
            values,
            flagged: Vec::new(),
        }
    }
}

/// Computes the elementwise `block` (no anchor) from `inputs`, returning the
/// values of each of its outputs and of each value it computes that `keep`
/// asks for, and with `check_numerics` the first value of each float op
/// that is not finite where its operands are (the check a kernel makes);
/// or why it cannot: a broken invariant (an operand with no source, an op
/// that is not elementwise, shapes that do not broadcast), which the
/// device turns into an `internal` failure, never a panic.
pub fn elementwise(
    block: &ElementwiseBlock,
    ops: &[OpIr],
    inputs: HostInput<'_>,
    keep: &dyn Fn(TensorId) -> bool,
    check_numerics: bool,
) -> Result<Computed, String> {
    let out = &block.shape;
    let numel = shape::numel(out);
    // Each value the block reads or makes, by tensor: an input loaded at the
    // block's positions (broadcast), then each op's value in turn. Dropped
    // after its last use, so a long chain holds two vectors, not all.
    let mut values: rustc_hash::FxHashMap<TensorId, Values> = Default::default();
    for &t in &block.inputs {
        let (data, in_shape) = inputs(t).ok_or_else(|| format!("{t} has no host values"))?;
        if shape::numel(&in_shape) != data.len() {
            return Err(format!("{t} has {} values for its shape", data.len()));
        }
        let loaded = match in_shape == *out {
            true => data,
            false => Values::new(
                data.dtype,
                broadcast(&data.words, &in_shape, out)
                    .ok_or_else(|| format!("{t} does not broadcast to the block's shape"))?,
            ),
        };
        values.insert(t, loaded);
    }
    let mut last_use: rustc_hash::FxHashMap<TensorId, usize> = Default::default();
    for (k, &i) in block.ops.iter().enumerate() {
        let op = ops
            .get(i)
            .ok_or_else(|| format!("op {i} is not in the flush"))?;
        if !op.kind.is_elementwise() {
            return Err(format!("`{}` is not elementwise", op.kind.name()));
        }
        if shape::numel(&op.shape) != numel {
            return Err(format!("`{}` is not of the block's shape", op.kind.name()));
        }
        for &t in &op.inputs {
            last_use.insert(t, k);
        }
    }
    let mut kept = Vec::new();
    let mut flagged = Vec::new();
    for (k, &i) in block.ops.iter().enumerate() {
        let op = &ops[i];
        let operand = |n: usize| -> Result<&Values, String> {
            let t = op.inputs.get(n).ok_or("an operand is missing")?;
            values
                .get(t)
                .ok_or_else(|| format!("{t} has no source in the block"))
        };
        let value = compute(op, numel, &operand)?;
        if check_numerics && op.checks_finite() {
            let floats: Vec<&Values> = (0..op.inputs.len())
                .map(operand)
                .collect::<Result<Vec<_>, String>>()?
                .into_iter()
                .filter(|v| v.dtype == DType::Float32 && op.kind.finite_check_sees_operands())
                .collect();
            let first = value.words.iter().enumerate().position(|(p, &w)| {
                non_finite_bits(w)
                    && floats
                        .iter()
                        .all(|x| x.words.get(p).is_some_and(|&o| !non_finite_bits(o)))
            });
            if let Some(position) = first {
                let w = value.words[position];
                let class = match (w & 0x007f_ffff != 0, w >> 31) {
                    (true, _) => 0,
                    (false, 0) => 1,
                    _ => 2,
                };
                let operands = floats
                    .iter()
                    .filter_map(|x| x.words.get(position).map(|&o| f32::from_bits(o)))
                    .collect();
                flagged.push(NonFinite {
                    op: k,
                    position,
                    class,
                    operands,
                });
            }
        }
        for &t in &op.inputs {
            if last_use.get(&t) == Some(&k) && !block.outputs.contains(&t) {
                values.remove(&t);
            }
        }
        if keep(op.output) && !block.outputs.contains(&op.output) {
            kept.push((op.output, value.clone()));
        }
        values.insert(op.output, value);
    }
    for &t in &block.outputs {
        match values.get(&t) {
            Some(v) => kept.push((t, v.clone())),
            None => return Err(format!("{t} has no source in the block")),
        }
    }
    Ok(Computed {
        values: kept,
        flagged,
    })
}

/// `data` (row-major, of `shape`) read at each position of `out`, which
/// `shape` broadcasts to.
fn broadcast(data: &[u32], shape: &[usize], out: &[usize]) -> Option<Vec<u32>> {
    if shape::broadcast("", shape, out).ok()? != out {
        return None;
    }
    let layout = Layout {
        offset: 0,
        strides: Layout::contiguous(shape).strides_for(shape, out),
    };
    gather(data, &layout, out)
}

/// `view` of `data` (row-major, of `shape`), row-major: the values a kernel
/// would read through the view's layout.
pub fn view(
    data: &Values,
    shape: &[usize],
    view: &ViewOp,
    out: &[usize],
) -> Result<Values, String> {
    let layout = Layout::contiguous(shape)
        .view(view, shape, out)
        .ok_or_else(|| format!("`{}` does not apply to a row-major tensor", view.name()))?;
    let words = gather(&data.words, &layout, out)
        .ok_or_else(|| format!("`{}` reads past its input", view.name()))?;
    Ok(Values::new(data.dtype, words))
}

/// `inputs` (each row-major, with its shape) joined along `axis` into
/// `out`, as a `Cat` kernel writes them.
pub fn cat(inputs: &[(Values, Vec<usize>)], axis: usize, out: &[usize]) -> Result<Values, String> {
    let dtype = inputs.first().map_or(DType::Float32, |(v, _)| v.dtype);
    // Row-major, a join is runs: for each position before `axis`, each
    // input's block of `shape[axis..]` in turn.
    let outer: usize = out
        .get(..axis)
        .ok_or("a join past its rank")?
        .iter()
        .product();
    let mut words = Vec::with_capacity(shape::numel(out));
    for i in 0..outer {
        for (values, shape) in inputs {
            let run: usize = shape
                .get(axis..)
                .ok_or("a join past its rank")?
                .iter()
                .product();
            let block = values
                .words
                .get(i * run..(i + 1) * run)
                .ok_or("a joined input shorter than its shape")?;
            words.extend_from_slice(block);
        }
    }
    if words.len() != shape::numel(out) {
        return Err("joined inputs that do not fill their output".to_string());
    }
    Ok(Values::new(dtype, words))
}

/// A reduction or an argmax (`kind`) of `values` (row-major, of `shape`),
/// each output folded from its elements in input order, as the kernels'
/// `Fold` does: an int's sum or product wraps, a float's max or min is NaN
/// where a NaN is, an argmax picks the first best and never a NaN (a line
/// with nothing to pick gives 0). A float's sum, product, mean or
/// logSumExp is refused: the kernels' order of summation is not a
/// sequential fold's, and the device leaves those to them.
pub fn fold(values: &Values, shape: &[usize], kind: &OpKind) -> Result<Values, String> {
    let float = values.dtype == DType::Float32;
    // The reduction's op, or None for an argmax (of the largest if `max`).
    let (axes, reduce, max) = match kind {
        OpKind::Reduce { op, axes } => (axes.as_slice(), Some(*op), false),
        OpKind::ArgReduce { axis, max } => (std::slice::from_ref(axis), None, *max),
        _ => return Err("not a fold".to_string()),
    };
    if axes.iter().any(|&d| d >= shape.len()) {
        return Err("a fold past its input's rank".to_string());
    }
    // The input read with the folded axes last: each output's elements are
    // then one run.
    let order: Vec<usize> = (0..shape.len())
        .filter(|d| !axes.contains(d))
        .chain(axes.iter().copied())
        .collect();
    let strides = Layout::contiguous(shape).strides;
    let layout = Layout {
        offset: 0,
        strides: order.iter().map(|&d| strides[d]).collect(),
    };
    let dims: Vec<usize> = order.iter().map(|&d| shape[d]).collect();
    let run: usize = axes.iter().map(|&d| shape[d]).product();
    let words = gather(&values.words, &layout, &dims)
        .filter(|w| run > 0 && w.len() == shape::numel(shape))
        .ok_or("a fold of values that do not fill its input")?;
    // A fold's state is `acc`; an argmax's also the position `at` of the
    // value in `acc`, and `seen`, whether it has one yet.
    let (init, step): (u32, fn(u32, u32) -> u32) = match (float, reduce) {
        (_, None) => (0, |_, x| x),
        (true, Some(ReduceOp::Max)) => (f(f32::NEG_INFINITY), |a, x| f(wgsl_max(fl(a), fl(x)))),
        (true, Some(ReduceOp::Min)) => (f(f32::INFINITY), |a, x| f(wgsl_min(fl(a), fl(x)))),
        (true, Some(_)) | (_, Some(ReduceOp::Mean | ReduceOp::LogSumExp)) => {
            return Err("a float's sum on the host".to_string());
        }
        (_, Some(ReduceOp::Sum)) => (0, |a, x| (a as i32).wrapping_add(x as i32) as u32),
        (_, Some(ReduceOp::Prod)) => (1, |a, x| (a as i32).wrapping_mul(x as i32) as u32),
        (_, Some(ReduceOp::Max)) => (i32::MIN as u32, |a, x| (a as i32).max(x as i32) as u32),
        (_, Some(ReduceOp::Min)) => (i32::MAX as u32, |a, x| (a as i32).min(x as i32) as u32),
    };
    let less = |a: u32, b: u32| match float {
        true => fl(a) < fl(b),
        false => (a as i32) < (b as i32),
    };
    let mut out = Vec::with_capacity(words.len() / run);
    for line in words.chunks(run) {
        let (mut acc, mut at, mut seen) = (init, 0, false);
        for (r, &x) in (0u32..).zip(line) {
            let take = reduce.is_some()
                || match (seen, max) {
                    (false, _) => !(float && fl(x).is_nan()),
                    (true, true) => less(acc, x),
                    (true, false) => less(x, acc),
                };
            if take {
                (acc, at, seen) = (step(acc, x), r, true);
            }
        }
        out.push(if reduce.is_some() { acc } else { at });
    }
    let dtype = if reduce.is_some() {
        values.dtype
    } else {
        DType::Int32
    };
    Ok(Values::new(dtype, out))
}

/// The words at each position of `out` of `data` read through `layout`;
/// `None` if a position falls outside `data`.
fn gather(data: &[u32], layout: &Layout, out: &[usize]) -> Option<Vec<u32>> {
    if layout.strides.len() != out.len() {
        return None;
    }
    (0..shape::numel(out))
        .map(|flat| {
            let (mut rem, mut index) = (flat, layout.offset);
            for d in (0..out.len()).rev() {
                index += (rem % out[d]) * layout.strides[d];
                rem /= out[d];
            }
            data.get(index).copied()
        })
        .collect()
}

/// A float's word.
fn f(x: f32) -> u32 {
    x.to_bits()
}

/// A float read from its word.
fn fl(w: u32) -> f32 {
    f32::from_bits(w)
}

/// A bool's word.
fn flag(c: bool) -> u32 {
    u32::from(c)
}

/// The values of elementwise `op` at `numel` positions, its operands given
/// by `operand`, in `op.dtype`. Registration gave the operands the dtype
/// the op computes in, so only a cast looks at two.
fn compute<'a>(
    op: &OpIr,
    numel: usize,
    operand: &dyn Fn(usize) -> Result<&'a Values, String>,
) -> Result<Values, String> {
    let dtype = op.dtype;
    let int = dtype != DType::Float32;
    let map = |x: &Values, g: &dyn Fn(u32) -> u32| -> Vec<u32> {
        x.words.iter().map(|&w| g(w)).collect()
    };
    let map2 = |x: &Values, y: &Values, g: &dyn Fn(u32, u32) -> u32| -> Vec<u32> {
        x.words
            .iter()
            .zip(y.words.iter())
            .map(|(&a, &b)| g(a, b))
            .collect()
    };
    let words: Vec<u32> = match &op.kind {
        OpKind::Fill(v) => {
            let w = if int { *v as i32 as u32 } else { f(*v as f32) };
            (0..numel).map(|_| w).collect()
        }
        OpKind::Arange { start, step } if int => {
            let (start, step) = (*start as i32, *step as i32);
            (0..numel)
                .map(|i| start.wrapping_add((i as i32).wrapping_mul(step)) as u32)
                .collect()
        }
        OpKind::Arange { start, step } => {
            let (start, step) = (*start as f32, *step as f32);
            (0..numel).map(|i| f(start + i as f32 * step)).collect()
        }
        OpKind::Cast => {
            let x = operand(0)?;
            map(x, &|w| cast(x.dtype, dtype, w))
        }
        OpKind::Unary(u) if int => map(operand(0)?, &|w| unary_i32(*u, w as i32)),
        OpKind::Unary(u) => map(operand(0)?, &|w| f(unary(*u, fl(w)))),
        OpKind::Binary(o) => {
            let (x, y) = (operand(0)?, operand(1)?);
            match x.dtype {
                DType::Float32 => map2(x, y, &|a, b| binary(*o, fl(a), fl(b))),
                _ => map2(x, y, &|a, b| binary_i32(*o, a as i32, b as i32)),
            }
        }
        OpKind::BinaryScalar {
            op: o,
            scalar,
            scalar_first,
        } => {
            let x = operand(0)?;
            match scalar_first {
                true => map(x, &|w| binary(*o, *scalar, fl(w))),
                false => map(x, &|w| binary(*o, fl(w), *scalar)),
            }
        }
        OpKind::Clamp { min, max } if int => {
            let (lo, hi) = crate::codegen::int_bounds(*min, *max);
            map(operand(0)?, &|w| (w as i32).max(lo).min(hi) as u32)
        }
        OpKind::Clamp { min, max } => map(operand(0)?, &|w| f(clamp(fl(w), *min, *max))),
        OpKind::OneHot { depth, on, off } => {
            let word = |v: f64| if int { v as i32 as u32 } else { f(v as f32) };
            let (on, off) = (word(*on), word(*off));
            let x = operand(0)?;
            x.words
                .iter()
                .enumerate()
                .map(|(i, &w)| {
                    if i64::from(w as i32) == (i % depth) as i64 {
                        on
                    } else {
                        off
                    }
                })
                .collect()
        }
        OpKind::Where => {
            let (c, x, y) = (operand(0)?, operand(1)?, operand(2)?);
            c.words
                .iter()
                .zip(x.words.iter().zip(y.words.iter()))
                .map(|(&c, (&a, &b))| if c != 0 { a } else { b })
                .collect()
        }
        other => return Err(format!("`{}` is not elementwise", other.name())),
    };
    Ok(Values::new(dtype, words))
}

/// The kernels' conversion of word `w` from `from` to `to` (`OpKind::Cast`):
/// Rust's `as` saturates and maps NaN to 0, as `wf_f2i` does.
fn cast(from: DType, to: DType, w: u32) -> u32 {
    match (from, to) {
        (DType::Float32, DType::Int32) => fl(w) as i32 as u32,
        (DType::Float32, DType::Bool) => flag(w & 0x7fff_ffff != 0),
        (DType::Int32 | DType::Bool, DType::Float32) => f(w as i32 as f32),
        (DType::Int32, DType::Bool) => flag(w != 0),
        _ => w,
    }
}

/// The kernels' `wf_max`: NaN in either operand gives NaN (TF.js's rule;
/// Rust's `f32::max`, like WGSL's `max`, would give the other operand),
/// and the larger zero is +0, as `Math.max` gives it (neither leaves the
/// sign of two zeros' max defined: wasm's gave relu(-0) = -0).
fn wgsl_max(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a == b {
        // Equal values have equal bits, but for two zeros: the sign bit
        // kept only where both have it.
        f32::from_bits(a.to_bits() & b.to_bits())
    } else {
        a.max(b)
    }
}

/// The kernels' `wf_min`: `wgsl_max`'s rules, the smaller zero -0.
fn wgsl_min(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a == b {
        f32::from_bits(a.to_bits() | b.to_bits())
    } else {
        a.min(b)
    }
}

/// The kernels' `wf_clamp`: TF.js's comparisons, so a NaN passes and a
/// zero within the bounds keeps its sign (`clamp(-0, 0, 6)` is -0).
fn clamp(x: f32, min: f32, max: f32) -> f32 {
    if x > max {
        max
    } else if x < min {
        min
    } else {
        x
    }
}

/// The kernels' `wf_tanh`: `tanh` of the input clamped to ±15, where it is
/// ±1 in f32 already.
fn tanh(x: f32) -> f32 {
    clamp(x, -15.0, 15.0).tanh()
}

fn unary(op: UnaryOp, x: f32) -> f32 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Square => x * x,
        UnaryOp::Relu => wgsl_max(x, 0.0),
        UnaryOp::Gelu => 0.5 * x * (1.0 + tanh(0.797_884_6 * (x + 0.044715 * x * x * x))),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Tanh => tanh(x),
        // The trigonometry in float64, rounded: it shares its argument
        // reduction with the `libm::cos` random normals use, where f32's
        // `sin` and `cos` brought a reduction of their own (5 KB of wasm).
        UnaryOp::Sin => libm::sin(f64::from(x)) as f32,
        UnaryOp::Cos => libm::cos(f64::from(x)) as f32,
        UnaryOp::Tan => libm::tan(f64::from(x)) as f32,
        UnaryOp::Floor => x.floor(),
        UnaryOp::CheckNumerics => x,
        // A bool is never a float: registration refuses it.
        UnaryOp::LogicalNot => f32::NAN,
    }
}

/// The unary ops of an int32 or bool (see `codegen::unary`), wrapping as
/// WGSL's `i32` does.
fn unary_i32(op: UnaryOp, x: i32) -> u32 {
    let v = match op {
        UnaryOp::Neg => x.wrapping_neg(),
        UnaryOp::Abs => x.wrapping_abs(),
        UnaryOp::Square => x.wrapping_mul(x),
        UnaryOp::Relu => x.max(0),
        UnaryOp::LogicalNot => 1 ^ x,
        // Registration casts or refuses an int for the others.
        _ => 0,
    };
    v as u32
}

/// Binary `op` of two floats, as a word of its result's dtype.
fn binary(op: BinaryOp, a: f32, b: f32) -> u32 {
    match op {
        BinaryOp::Add => f(a + b),
        BinaryOp::Sub => f(a - b),
        BinaryOp::Mul => f(a * b),
        BinaryOp::Div => f(a / b),
        BinaryOp::Pow => f(pow(a, b)),
        BinaryOp::Maximum => f(wgsl_max(a, b)),
        BinaryOp::Minimum => f(wgsl_min(a, b)),
        BinaryOp::Mod => f(floor_mod(a, b)),
        // In doubles, as TF.js's CPU backend divides: a float32 quotient
        // rounds up to the next whole number just below it.
        BinaryOp::FloorDiv => f((f64::from(a) / f64::from(b)).floor() as f32),
        BinaryOp::Equal => flag(a == b),
        BinaryOp::Greater => flag(a > b),
        BinaryOp::GreaterEqual => flag(a >= b),
        BinaryOp::Less => flag(a < b),
        BinaryOp::LessEqual => flag(a <= b),
        // Logical ops take bools and `bitwiseAnd` int32s: registration
        // refuses floats.
        BinaryOp::LogicalAnd
        | BinaryOp::LogicalOr
        | BinaryOp::LogicalXor
        | BinaryOp::BitwiseAnd => 0,
    }
}

/// Binary `op` of two int32s (or bools), as a word of its result's dtype:
/// the kernels' integer arithmetic, wrapping, and a division by 0 giving 0.
fn binary_i32(op: BinaryOp, a: i32, b: i32) -> u32 {
    let v = match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Div | BinaryOp::FloorDiv => floor_div_i32(a, b),
        BinaryOp::Pow => pow_i32(a, b),
        BinaryOp::Maximum => a.max(b),
        BinaryOp::Minimum => a.min(b),
        BinaryOp::Mod => mod_i32(a, b),
        BinaryOp::Equal => i32::from(a == b),
        BinaryOp::Greater => i32::from(a > b),
        BinaryOp::GreaterEqual => i32::from(a >= b),
        BinaryOp::Less => i32::from(a < b),
        BinaryOp::LessEqual => i32::from(a <= b),
        BinaryOp::LogicalAnd | BinaryOp::BitwiseAnd => a & b,
        BinaryOp::LogicalOr => a | b,
        BinaryOp::LogicalXor => a ^ b,
    };
    v as u32
}

/// The kernels' `wf_mod`: C's `fmod` (Rust's `%`, exact), moved to the
/// divisor's sign, a zero taking its sign: the floor mod, NumPy's, and
/// TF.js's but for a negative value modulo +infinity (TF.js gives NaN,
/// the floor mod +infinity).
fn floor_mod(a: f32, b: f32) -> f32 {
    let r = a % b;
    if r == 0.0 {
        0.0f32.copysign(b)
    } else if (r < 0.0) != (b < 0.0) {
        r + b
    } else {
        r
    }
}

/// The kernels' `wf_floordiv_i`.
fn floor_div_i32(a: i32, b: i32) -> i32 {
    match b {
        0 => 0,
        -1 => a.wrapping_neg(),
        _ if a % b != 0 && ((a < 0) != (b < 0)) => a / b - 1,
        _ => a / b,
    }
}

/// The kernels' `wf_mod_i`.
fn mod_i32(a: i32, b: i32) -> i32 {
    if b == 0 || b == -1 {
        return 0;
    }
    let r = a % b;
    if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    }
}

/// The kernels' `wf_pow_i`: by squaring, wrapping; a negative exponent
/// gives what TF.js's int32 result of a fraction does (0, unless the base
/// is 1 or -1).
fn pow_i32(a: i32, b: i32) -> i32 {
    if b < 0 {
        return match a {
            1 => 1,
            -1 if b & 1 != 0 => -1,
            -1 => 1,
            _ => 0,
        };
    }
    let (mut r, mut base, mut e) = (1i32, a, b);
    while e != 0 {
        if e & 1 != 0 {
            r = r.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        e >>= 1;
    }
    r
}

/// The kernels' `wf_pow`: JS's `Math.pow` (TF.js's), and NumPy's `pow`
/// for a negative base, defined when the exponent is an integer.
fn pow(a: f32, b: f32) -> f32 {
    let fract = |x: f32| x - x.floor();
    if b == 0.0 {
        1.0
    } else if a.is_nan() || b.is_nan() || (b.is_infinite() && a.abs() == 1.0) {
        f32::NAN
    } else if b.is_infinite() {
        match (a.abs() > 1.0) == (b > 0.0) {
            true => f32::INFINITY,
            false => 0.0,
        }
    } else if a >= 0.0 {
        a.powf(b)
    } else if fract(b) != 0.0 {
        // -Infinity's powers are defined at every exponent, as a limit:
        // Math.pow(-Infinity, 1.5) is Infinity, and with -1.5 it is 0.
        match a.is_infinite() {
            true => f32::INFINITY.powf(b),
            false => f32::NAN,
        }
    } else {
        let m = (-a).powf(b);
        if fract(b * 0.5) != 0.0 { -m } else { m }
    }
}

/// `n` seeded values of `dist`, made with a counter-based generator
/// (splitmix64 of seed and position) and `libm`'s portable math, so the bits
/// are the same natively and in wasm, on every device.
pub fn random(dist: Distribution, seed: u64, n: usize) -> Vec<f32> {
    let bits = |i: u64| {
        let mut z = seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    // A uniform double in [0, 1) from the top 53 bits.
    let unit = |i: u64| (bits(i) >> 11) as f64 / (1u64 << 53) as f64;
    (0..n as u64)
        .map(|i| match dist {
            Distribution::Uniform { min, max } => {
                let v = min as f64 + (max as f64 - min as f64) * unit(i);
                // Rounding to f32 can land on `max`; keep the interval half-open.
                let v = v as f32;
                if v >= max && max > min {
                    libm::nextafterf(max, min)
                } else {
                    v
                }
            }
            Distribution::Normal { mean, std } => {
                // Box-Muller on two independent uniforms of this position.
                let u1 = 1.0 - unit(2 * i + (1 << 62));
                let u2 = unit(2 * i + 1 + (1 << 62));
                let z =
                    libm::sqrt(-2.0 * libm::log(u1)) * libm::cos(2.0 * std::f64::consts::PI * u2);
                (mean as f64 + std as f64 * z) as f32
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_values_and_another_seed_others() {
        let dist = Distribution::Uniform {
            min: -1.0,
            max: 1.0,
        };
        assert_eq!(random(dist, 7, 100), random(dist, 7, 100));
        assert_ne!(random(dist, 7, 100), random(dist, 8, 100));
        assert!(
            random(dist, 7, 1000)
                .iter()
                .all(|v| (-1.0..1.0).contains(v))
        );
    }

    #[test]
    fn normal_values_have_the_asked_mean_and_spread() {
        let values = random(
            Distribution::Normal {
                mean: 3.0,
                std: 2.0,
            },
            1,
            20_000,
        );
        let mean = values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64;
        let var = values
            .iter()
            .map(|&v| (v as f64 - mean).powi(2))
            .sum::<f64>()
            / values.len() as f64;
        assert!((mean - 3.0).abs() < 0.05, "{mean}");
        assert!((var.sqrt() - 2.0).abs() < 0.05, "{}", var.sqrt());
    }
}
