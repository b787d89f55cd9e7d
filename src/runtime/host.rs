//! The host: values made on the CPU (uploads, seeded random values), and
//! small elementwise blocks run there instead of as a kernel.
//!
//! Why a block runs here at all: on a software adapter (SwiftShader,
//! lavapipe) the first launch of any new kernel costs ~10 ms of pipeline
//! compilation, and every read a round trip through a staging buffer. A
//! chain of a thousand ops on sixteen numbers the program just gave is
//! finished on the CPU before the GPU could have compiled it. The device
//! decides which blocks run here (`device::flush`); this file only computes
//! them, with the arithmetic of the kernels' WGSL (`codegen`): the same
//! clamped `tanh`, NumPy's `pow` for a negative base, comparisons as 0 or 1.

use std::rc::Rc;

use crate::fusion::ElementwiseBlock;
use crate::ir::layout::Layout;
use crate::ir::shape;
use crate::ir::{BinaryOp, Distribution, OpIr, OpKind, TensorId, UnaryOp, ViewOp};

/// A block's input on the host: its values (row-major) and shape.
pub type HostInput<'a> = &'a dyn Fn(TensorId) -> Option<(Rc<[f32]>, Vec<usize>)>;

/// What a host block computed: each tensor's values, row-major.
pub type Computed = Vec<(TensorId, Rc<[f32]>)>;

/// Computes the elementwise `block` (no anchor) from `inputs`, returning the
/// values of each of its outputs and of each value it computes that `keep`
/// asks for; or why it cannot: a broken invariant (an operand with no
/// source, an op that is not elementwise, shapes that do not broadcast),
/// which the device turns into an `internal` failure, never a panic.
pub fn elementwise(
    block: &ElementwiseBlock,
    ops: &[OpIr],
    inputs: HostInput<'_>,
    keep: &dyn Fn(TensorId) -> bool,
) -> Result<Computed, String> {
    let out = &block.shape;
    let numel = shape::numel(out);
    // Each value the block reads or makes, by tensor: an input loaded at the
    // block's positions (broadcast), then each op's value in turn. Dropped
    // after its last use, so a long chain holds two vectors, not all.
    let mut values: rustc_hash::FxHashMap<TensorId, Rc<[f32]>> = Default::default();
    for &t in &block.inputs {
        let (data, in_shape) = inputs(t).ok_or_else(|| format!("{t} has no host values"))?;
        if shape::numel(&in_shape) != data.len() {
            return Err(format!("{t} has {} values for its shape", data.len()));
        }
        let loaded = match in_shape == *out {
            true => data,
            false => broadcast(&data, &in_shape, out)
                .ok_or_else(|| format!("{t} does not broadcast to the block's shape"))?,
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
    for (k, &i) in block.ops.iter().enumerate() {
        let op = &ops[i];
        let operand = |n: usize| -> Result<&[f32], String> {
            let t = op.inputs.get(n).ok_or("an operand is missing")?;
            let v = values
                .get(t)
                .ok_or_else(|| format!("{t} has no source in the block"))?;
            Ok(&v[..])
        };
        let value = compute(&op.kind, numel, &operand)?;
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
    Ok(kept)
}

/// `data` (row-major, of `shape`) read at each position of `out`, which
/// `shape` broadcasts to.
fn broadcast(data: &[f32], shape: &[usize], out: &[usize]) -> Option<Rc<[f32]>> {
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
    data: &[f32],
    shape: &[usize],
    view: &ViewOp,
    out: &[usize],
) -> Result<Rc<[f32]>, String> {
    let layout = Layout::contiguous(shape)
        .view(view, shape, out)
        .ok_or_else(|| format!("`{}` does not apply to a row-major tensor", view.name()))?;
    gather(data, &layout, out).ok_or_else(|| format!("`{}` reads past its input", view.name()))
}

/// The values at each position of `out` of `data` read through `layout`;
/// `None` if a position falls outside `data`.
fn gather(data: &[f32], layout: &Layout, out: &[usize]) -> Option<Rc<[f32]>> {
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

/// The values of elementwise op `kind` at `numel` positions, its operands
/// given by `operand`.
fn compute<'a>(
    kind: &OpKind,
    numel: usize,
    operand: &dyn Fn(usize) -> Result<&'a [f32], String>,
) -> Result<Rc<[f32]>, String> {
    // Each collected straight into its `Rc`: one allocation per op.
    let map2 = |a: &[f32], b: &[f32], f: &dyn Fn(f32, f32) -> f32| {
        a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
    };
    Ok(match kind {
        OpKind::Fill(v) => (0..numel).map(|_| *v).collect(),
        OpKind::Arange { start, step } => (0..numel).map(|i| start + i as f32 * step).collect(),
        OpKind::Unary(u) => operand(0)?.iter().map(|&x| unary(*u, x)).collect(),
        OpKind::Binary(b) => map2(operand(0)?, operand(1)?, &|x, y| binary(*b, x, y)),
        OpKind::BinaryScalar {
            op,
            scalar,
            scalar_first,
        } => {
            let a = operand(0)?;
            match scalar_first {
                true => a.iter().map(|&x| binary(*op, *scalar, x)).collect(),
                false => a.iter().map(|&x| binary(*op, x, *scalar)).collect(),
            }
        }
        OpKind::Clamp { min, max } => operand(0)?
            .iter()
            .map(|&x| wgsl_min(wgsl_max(x, *min), *max))
            .collect(),
        OpKind::Where => {
            let (c, a, b) = (operand(0)?, operand(1)?, operand(2)?);
            c.iter()
                .zip(a.iter().zip(b))
                .map(|(&c, (&a, &b))| if c != 0.0 { a } else { b })
                .collect()
        }
        other => return Err(format!("`{}` is not elementwise", other.name())),
    })
}

/// WGSL's `max`, as the adapters here compute it: NaN in either operand
/// gives the other (IEEE maxNum, Rust's `f32::max`).
fn wgsl_max(a: f32, b: f32) -> f32 {
    a.max(b)
}

fn wgsl_min(a: f32, b: f32) -> f32 {
    a.min(b)
}

/// The kernels' `wf_tanh`: `tanh` of the input clamped to ±15, where it is
/// ±1 in f32 already.
fn tanh(x: f32) -> f32 {
    wgsl_min(wgsl_max(x, -15.0), 15.0).tanh()
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
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
    }
}

fn binary(op: BinaryOp, a: f32, b: f32) -> f32 {
    let flag = |c: bool| if c { 1.0 } else { 0.0 };
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => pow(a, b),
        BinaryOp::Maximum => wgsl_max(a, b),
        BinaryOp::Minimum => wgsl_min(a, b),
        BinaryOp::Equal => flag(a == b),
        BinaryOp::Greater => flag(a > b),
        BinaryOp::GreaterEqual => flag(a >= b),
        BinaryOp::Less => flag(a < b),
        BinaryOp::LessEqual => flag(a <= b),
    }
}

/// The kernels' `wf_pow`: NumPy's `pow`, defined for a negative base when
/// the exponent is an integer.
fn pow(a: f32, b: f32) -> f32 {
    let fract = |x: f32| x - x.floor();
    if b == 0.0 {
        1.0
    } else if a >= 0.0 {
        a.powf(b)
    } else if fract(b) != 0.0 {
        f32::NAN
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
