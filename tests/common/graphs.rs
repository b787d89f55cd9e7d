//! Random op graphs, built on the GPU and on the CPU reference in lockstep,
//! then read back and compared.
//!
//! A seed drives a tiny PRNG (splitmix64; no crates, so this also builds for
//! wasm32) that makes 1–3 inputs and 3–12 ops: unary activations, binary ops
//! with tensors (broadcasting both ways) and with scalars, `where_`, views
//! (transpose, slice, reshape, broadcast_to, expand_dims, squeeze, flatten),
//! reductions (one axis, several, all; `keep_dims` both ways), argmax,
//! softmax/log_softmax, matmul (2-D and batched with broadcast batch dims),
//! cat and stack (up to 10 pieces), and chains of 8–12 binary ops each taking
//! a new input (more buffers than one WebGPU kernel may bind). Shapes have rank 0–4 and dims 1–7, some graphs have 0-sized
//! dims. Several intermediates are checked, not only the last op.
//!
//! # Tolerances
//!
//! Every reference value carries an error bound (`Tracked::err`, one per
//! element) that is the sum of two parts:
//!
//! * what the op itself may round, `rel * |value| + abs`:
//!
//!   | ops | rel | abs |
//!   |---|---|---|
//!   | views, cat, stack, where_, neg, abs, relu, clamp, maximum, minimum, comparisons, max, min, argmax | 0 (bit-exact) | 0 |
//!   | add, sub, mul, div, square, arange | 1e-5 | 1e-6 |
//!   | exp, log, sqrt, rsqrt, pow, tanh, sigmoid, gelu | 1e-4 | 1e-5 |
//!   | sin, cos (WGSL allows 2^-11 absolute on [-π, π]) | 1e-4 | 5e-4 |
//!   | sum over n values | n · 2^-23 · Σ\|x\| (any summation order) | 1e-6 |
//!   | mean over n values | the sum's bound / n, plus 1e-5 relative | 1e-6 |
//!   | matmul with inner dim K | 2 · K · 2^-24 · Σ_k \|a_ik\|\|b_kj\| | 1e-6 |
//!   | softmax over a line of n | (1e-4 + n · 2^-23) · s_i | 1e-6 |
//!   | log_softmax | 1e-5 · \|out\| + 1e-5 · max\|x\| of the line | 1e-4 |
//!
//! * what the errors already in the inputs can do to the output: for
//!   functions monotone in each argument (and for convex ones) the worst
//!   change over the corners of the input error box; `L · err` for the
//!   Lipschitz ones that are neither (sin, cos: L = 1; gelu: L = 1.13);
//!   sums of input errors for sum/mean/matmul; `s_i (e^{2E} - 1)` for softmax
//!   and `err_i + E` for log_softmax (E the largest input error on the line);
//!   the largest input error for max/min. A comparison whose operands are
//!   closer than their errors, an argmax whose runner-up is within the
//!   errors, and a `where_` whose condition may be either side of 0 are
//!   ambiguous: the comparison may be 0 or 1 (error bound 1), the argmax may
//!   be any index (infinite bound: not checked), the `where_` may pick either
//!   side. Ties between bit-exact values are not ambiguous: argmax must pick
//!   the first.
//!
//! Inputs are kept where the ops are well conditioned: log, sqrt, rsqrt, the
//! base of pow and divisors get `abs().add(0.5)` when they come within 0.25 of
//! 0; exp gets `clamp(-6, 6)`, sin and cos `clamp(-3, 3)` and a tensor
//! exponent `clamp(-2, 2)` when their input is larger; any result larger than
//! 16 in magnitude is scaled back with `mul(8 / max)`.

use super::reference::{
    Ref, RefOperand, Window, broadcast_shapes, broadcast_source, norm_axis, numel, unravel,
};
use webfusion::{
    DType, DataFormat, Device, ExecutionError, FailureId, FailureKind, FaultKind, Operand, Padding,
    RegistrationError, Report, Tensor, TensorError, Values,
};

// ---------------------------------------------------------------------------
// PRNG

/// splitmix64: small, seedable, the same on every target.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        (lo as f64 + (hi as f64 - lo as f64) * self.unit()) as f32
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

// ---------------------------------------------------------------------------
// Error bounds

/// An op's own rounding: `rel * |value| + abs`.
#[derive(Clone, Copy, Debug)]
pub struct Tol {
    pub rel: f64,
    pub abs: f64,
}

pub const EXACT: Tol = Tol { rel: 0.0, abs: 0.0 };
pub const ARITH: Tol = Tol {
    rel: 1e-5,
    abs: 1e-6,
};
pub const TRANSCENDENTAL: Tol = Tol {
    rel: 1e-4,
    abs: 1e-5,
};
pub const SIN_COS: Tol = Tol {
    rel: 1e-4,
    abs: 5e-4,
};

/// 2^-23: twice the unit roundoff of f32.
const U: f64 = 1.0 / (1u64 << 23) as f64;

/// How input errors reach the output of an elementwise op.
#[derive(Clone, Copy, Debug)]
pub enum Rule {
    /// The worst change over the corners of the input error box (exact for
    /// functions monotone in each argument, and for convex ones).
    Corners,
    /// `L * err` for an L-Lipschitz function.
    Lipschitz(f64),
    /// Equality: ambiguous (bound 1) when the operands are within their
    /// errors of each other.
    Equality,
}

/// A reference value with a bound on how far a correct GPU result may be
/// from it, per element (infinite: anything goes).
#[derive(Clone, Debug)]
pub struct Tracked {
    pub val: Ref,
    pub err: Ref,
}

fn worst(d: f64) -> f64 {
    if d.is_nan() { f64::INFINITY } else { d }
}

impl Tracked {
    /// A value known exactly (an upload, a value read back).
    pub fn exact(val: Ref) -> Tracked {
        let err = Ref::zeros(&val.shape);
        Tracked { val, err }
    }

    /// `cast(bool)` of this value: 1 where it is non-zero, 0 elsewhere;
    /// uncertain (an error of 1) where its bound reaches 0.
    pub fn nonzero(&self) -> Tracked {
        let val = self.val.map(|v| if v != 0.0 { 1.0 } else { 0.0 });
        let err = Ref::new(
            self.val
                .data
                .iter()
                .zip(&self.err.data)
                .map(|(v, e)| if *e > 0.0 && v.abs() <= *e { 1.0 } else { 0.0 })
                .collect(),
            &self.val.shape,
        );
        Tracked { val, err }
    }

    /// A value from an op with rounding `tol` and exact inputs.
    pub fn rounded(val: Ref, tol: Tol) -> Tracked {
        let err = val.map(|v| tol.rel * v.abs() + tol.abs);
        Tracked { val, err }
    }

    pub fn shape(&self) -> &[usize] {
        &self.val.shape
    }

    pub fn max_abs(&self) -> f32 {
        self.val.data.iter().fold(0.0, |m, v| m.max(v.abs()))
    }

    /// The smallest `|x| - err` (how close to 0 the true value may be).
    pub fn min_margin(&self) -> f32 {
        self.val
            .data
            .iter()
            .zip(&self.err.data)
            .fold(f32::INFINITY, |m, (v, e)| m.min(v.abs() - e))
    }

    /// A view or data movement: the same op moves the errors.
    pub fn view(&self, f: impl Fn(&Ref) -> Ref) -> Tracked {
        Tracked {
            val: f(&self.val),
            err: f(&self.err),
        }
    }

    pub fn unary(&self, val: Ref, f: impl Fn(f64) -> f64, rule: Rule, tol: Tol) -> Tracked {
        let data = (0..val.size())
            .map(|i| {
                let (x, e) = (self.val.data[i] as f64, self.err.data[i] as f64);
                let y = f(x);
                let d = match rule {
                    Rule::Lipschitz(l) => l * e,
                    _ if e == 0.0 => 0.0,
                    _ => (f(x + e) - y).abs().max((f(x - e) - y).abs()),
                };
                worst(d + tol.rel * (val.data[i] as f64).abs() + tol.abs) as f32
            })
            .collect();
        Tracked {
            err: Ref::new(data, &val.shape),
            val,
        }
    }

    pub fn binary(
        &self,
        other: &Tracked,
        val: Ref,
        f: impl Fn(f64, f64) -> f64,
        rule: Rule,
        tol: Tol,
    ) -> Tracked {
        let shape = val.shape.clone();
        let data = (0..val.size())
            .map(|i| {
                let idx = unravel(i, &shape);
                let ia = broadcast_source(&idx, self.shape());
                let ib = broadcast_source(&idx, other.shape());
                let (a, ea) = (self.val.data[ia] as f64, self.err.data[ia] as f64);
                let (b, eb) = (other.val.data[ib] as f64, other.err.data[ib] as f64);
                let y = f(a, b);
                let d = match rule {
                    _ if ea == 0.0 && eb == 0.0 => 0.0,
                    Rule::Lipschitz(l) => l * (ea + eb),
                    Rule::Equality => {
                        if (a - b).abs() <= ea + eb {
                            1.0
                        } else {
                            0.0
                        }
                    }
                    Rule::Corners => {
                        let mut d: f64 = 0.0;
                        for (sa, sb) in [(1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0)] {
                            d = d.max((f(a + sa * ea, b + sb * eb) - y).abs());
                        }
                        d
                    }
                };
                worst(d + tol.rel * (val.data[i] as f64).abs() + tol.abs) as f32
            })
            .collect();
        Tracked {
            err: Ref::new(data, &shape),
            val,
        }
    }

    pub fn where_(cond: &Tracked, a: &Tracked, b: &Tracked) -> Tracked {
        let val = Ref::where_(&cond.val, &a.val, &b.val);
        let shape = val.shape.clone();
        let at = |t: &Tracked, idx: &[usize]| {
            let i = broadcast_source(idx, t.shape());
            (t.val.data[i], t.err.data[i])
        };
        let data = (0..val.size())
            .map(|i| {
                let idx = unravel(i, &shape);
                let (c, ec) = at(cond, &idx);
                let (x, ex) = at(a, &idx);
                let (y, ey) = at(b, &idx);
                if ec > 0.0 && c.abs() <= ec {
                    worst((ex.max(ey) + (x - y).abs()) as f64) as f32
                } else if c != 0.0 {
                    ex
                } else {
                    ey
                }
            })
            .collect();
        Tracked {
            err: Ref::new(data, &shape),
            val,
        }
    }

    pub fn cat(parts: &[&Tracked], axis: isize) -> Tracked {
        let vals: Vec<&Ref> = parts.iter().map(|t| &t.val).collect();
        let errs: Vec<&Ref> = parts.iter().map(|t| &t.err).collect();
        Tracked {
            val: Ref::cat(&vals, axis),
            err: Ref::cat(&errs, axis),
        }
    }

    pub fn stack(parts: &[&Tracked], axis: isize) -> Tracked {
        let vals: Vec<&Ref> = parts.iter().map(|t| &t.val).collect();
        let errs: Vec<&Ref> = parts.iter().map(|t| &t.err).collect();
        Tracked {
            val: Ref::stack(&vals, axis),
            err: Ref::stack(&errs, axis),
        }
    }

    fn reduced_count(&self, axes: Option<&[isize]>) -> usize {
        self.val
            .reduced_axes(axes)
            .iter()
            .map(|&d| self.shape()[d])
            .product()
    }

    pub fn sum(&self, axes: Option<&[isize]>, keep_dims: bool) -> Tracked {
        let n = self.reduced_count(axes) as f64;
        let val = self.val.sum(axes, keep_dims);
        let in_err = self.err.sum(axes, keep_dims);
        let abs_sum = self.val.abs().sum(axes, keep_dims);
        let data = (0..val.size())
            .map(|i| {
                let d = in_err.data[i] as f64 + n * U * abs_sum.data[i] as f64 + 1e-6;
                worst(d) as f32
            })
            .collect();
        Tracked {
            err: Ref::new(data, &val.shape),
            val,
        }
    }

    /// Running sums in order in f32: each within `n u` of the sum of the
    /// magnitudes before it (recursive summation's bound), plus what its
    /// inputs' errors add up to.
    pub fn cumsum(&self, axis: isize, exclusive: bool, reverse: bool) -> Tracked {
        let n = self.shape()[norm_axis(axis, self.shape().len())] as f64;
        let val = self.val.cumsum(axis, exclusive, reverse);
        let in_err = self.err.cumsum(axis, exclusive, reverse);
        let abs_sum = self.val.abs().cumsum(axis, exclusive, reverse);
        let data = (0..val.size())
            .map(|i| worst(in_err.data[i] as f64 + n * U * abs_sum.data[i] as f64 + 1e-6) as f32)
            .collect();
        Tracked {
            err: Ref::new(data, &val.shape),
            val,
        }
    }

    pub fn mean(&self, axes: Option<&[isize]>, keep_dims: bool) -> Tracked {
        let n = self.reduced_count(axes) as f64;
        let val = self.val.mean(axes, keep_dims);
        let in_err = self.err.sum(axes, keep_dims);
        let abs_sum = self.val.abs().sum(axes, keep_dims);
        let data = (0..val.size())
            .map(|i| {
                let d = (in_err.data[i] as f64 + n * U * abs_sum.data[i] as f64) / n
                    + 1e-5 * (val.data[i] as f64).abs()
                    + 1e-6;
                worst(d) as f32
            })
            .collect();
        Tracked {
            err: Ref::new(data, &val.shape),
            val,
        }
    }

    pub fn max(&self, axes: Option<&[isize]>, keep_dims: bool) -> Tracked {
        Tracked {
            val: self.val.max(axes, keep_dims),
            err: self.err.max(axes, keep_dims),
        }
    }

    pub fn min(&self, axes: Option<&[isize]>, keep_dims: bool) -> Tracked {
        Tracked {
            val: self.val.min(axes, keep_dims),
            err: self.err.max(axes, keep_dims),
        }
    }

    /// Flat positions `0..size` in this shape: reducing them hands a closure
    /// the positions of each line, so it can look at values and errors
    /// together.
    fn positions(&self) -> Ref {
        let data = (0..self.val.size()).map(|i| i as f32).collect();
        Ref::new(data, self.shape())
    }

    pub fn argmax(&self, axis: isize) -> Tracked {
        let val = self.val.argmax(axis);
        let err = self.positions().reduce(Some(&[axis]), false, |line| {
            let at = |p: f32| {
                let p = p as usize;
                (self.val.data[p], self.err.data[p])
            };
            let mut best = 0;
            for (i, &p) in line.iter().enumerate() {
                if at(p).0 > at(line[best]).0 {
                    best = i;
                }
            }
            let (m, em) = at(line[best]);
            let ambiguous = line.iter().enumerate().any(|(i, &p)| {
                let (x, e) = at(p);
                i != best && e + em > 0.0 && x + e >= m - em
            });
            if ambiguous { f64::INFINITY } else { 0.0 }
        });
        Tracked { val, err }
    }

    pub fn softmax(&self, axis: isize) -> Tracked {
        let val = self.val.softmax(axis);
        let err = self.positions().along_axis(axis, |line| {
            let n = line.len() as f64;
            let e_max = line
                .iter()
                .map(|&p| self.err.data[p as usize] as f64)
                .fold(0.0, f64::max);
            line.iter()
                .map(|&p| {
                    let s = val.data[p as usize] as f64;
                    worst(s * ((2.0 * e_max).exp() - 1.0 + 1e-4 + n * U) + 1e-6)
                })
                .collect()
        });
        Tracked { val, err }
    }

    pub fn log_softmax(&self, axis: isize) -> Tracked {
        let val = self.val.log_softmax(axis);
        let err = self.positions().along_axis(axis, |line| {
            let at = |p: f64| self.err.data[p as usize] as f64;
            let e_max = line.iter().map(|&p| at(p)).fold(0.0, f64::max);
            let x_max = line
                .iter()
                .map(|&p| (self.val.data[p as usize] as f64).abs())
                .fold(0.0, f64::max);
            line.iter()
                .map(|&p| {
                    let y = (val.data[p as usize] as f64).abs();
                    worst(at(p) + e_max + 1e-5 * y + 1e-5 * x_max + 1e-4)
                })
                .collect()
        });
        Tracked { val, err }
    }

    pub fn matmul(&self, other: &Tracked) -> Tracked {
        let val = self.val.matmul(&other.val);
        let k = self.shape()[self.shape().len() - 1] as f64;
        let (abs_a, abs_b) = (self.val.abs(), other.val.abs());
        let prop = abs_a
            .matmul(&other.err)
            .add(&self.err.matmul(&abs_b))
            .add(&self.err.matmul(&other.err));
        let mag = abs_a.matmul(&abs_b);
        let data = (0..val.size())
            .map(|i| {
                let d = prop.data[i] as f64 + 2.0 * k * (U / 2.0) * mag.data[i] as f64 + 1e-6;
                worst(d) as f32
            })
            .collect();
        Tracked {
            err: Ref::new(data, &val.shape),
            val,
        }
    }
}

impl Tracked {
    /// A convolution's bound, as a matmul's: the inputs' errors carried
    /// through, plus each sum's rounding over its `kh * kw * c` terms.
    pub fn conv2d(&self, f: &Tracked, w: &Window) -> Tracked {
        let val = self.val.conv2d(&f.val, w);
        let k = (f.shape()[0] * f.shape()[1] * f.shape()[2]) as f64;
        let (abs_x, abs_f) = (self.val.abs(), f.val.abs());
        let prop = abs_x
            .conv2d(&f.err, w)
            .add(&self.err.conv2d(&abs_f, w))
            .add(&self.err.conv2d(&f.err, w));
        let mag = abs_x.conv2d(&abs_f, w);
        let data = (0..val.size())
            .map(|i| worst(prop.data[i] as f64 + k * U * mag.data[i] as f64 + 1e-6) as f32)
            .collect();
        Tracked {
            err: Ref::new(data, &val.shape),
            val,
        }
    }

    /// A depthwise filter `[kh, kw, c, m]` as a conv2d's `[kh, kw, c, c *
    /// m]`: zero (and exact) wherever an output channel is not its input
    /// channel's.
    pub fn block_diagonal(&self) -> Tracked {
        let spread = |r: &Ref| {
            let [kh, kw, c, m] = [r.shape[0], r.shape[1], r.shape[2], r.shape[3]];
            let mut data = vec![0.0; kh * kw * c * c * m];
            for tap in 0..kh * kw {
                for ci in 0..c {
                    for mi in 0..m {
                        let from = (tap * c + ci) * m + mi;
                        data[(tap * c + ci) * c * m + ci * m + mi] = r.data[from];
                    }
                }
            }
            Ref::new(data, &[kh, kw, c, c * m])
        };
        Tracked {
            val: spread(&self.val),
            err: spread(&self.err),
        }
    }

    /// A max pool moves the largest error of each window; a mean averages
    /// them, plus its sum's rounding.
    pub fn pool(&self, max: bool, w: &Window) -> Tracked {
        let val = self.val.pool(max, w);
        if max {
            return Tracked {
                err: self.err.pool(true, w),
                val,
            };
        }
        let n = (w.size[0] * w.size[1]) as f64;
        let (in_err, mag) = (self.err.pool(false, w), self.val.abs().pool(false, w));
        let data = (0..val.size())
            .map(|i| {
                worst(in_err.data[i] as f64 + (n + 2.0) * U * mag.data[i] as f64 + 1e-6) as f32
            })
            .collect();
        Tracked {
            err: Ref::new(data, &val.shape),
            val,
        }
    }
}

/// Compares GPU values with a tracked reference; the message names the first
/// element outside its bound.
pub fn compare(got: &[f32], expected: &Tracked) -> Result<(), String> {
    let want = &expected.val;
    if got.len() != want.size() {
        return Err(format!(
            "read {} values, the reference has {} (shape {:?})",
            got.len(),
            want.size(),
            want.shape
        ));
    }
    let bad = |i: usize| {
        let (g, w, e) = (got[i], want.data[i], expected.err.data[i]);
        if !e.is_finite() {
            false
        } else if w.is_nan() {
            !g.is_nan()
        } else if w.is_infinite() {
            g != w
        } else {
            let diff = (g - w).abs();
            diff.is_nan() || diff > e * 1.0001
        }
    };
    let mismatches: Vec<usize> = (0..got.len()).filter(|&i| bad(i)).collect();
    match mismatches.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{} of {} elements differ from the reference; the first at index {i} {:?}: \
             expected {}, got {}, tolerance {}",
            mismatches.len(),
            got.len(),
            unravel(i, &want.shape),
            want.data[i],
            got[i],
            expected.err.data[i]
        )),
    }
}

/// For hand-written tests: `got` against one op's reference result with the
/// op's rounding `tol` (its inputs exact).
pub fn close(got: &[f32], expected: &Ref, tol: Tol) -> Result<(), String> {
    compare(got, &Tracked::rounded(expected.clone(), tol))
}

// ---------------------------------------------------------------------------
// Op tables

type GpuUnary = fn(&Tensor) -> Result<Tensor, RegistrationError>;
type GpuBinary = for<'a> fn(&Tensor, Operand<'a>) -> Result<Tensor, RegistrationError>;
type RefBinary = for<'a> fn(&Ref, RefOperand<'a>) -> Ref;

/// What an input must satisfy before an op takes it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Domain {
    Any,
    /// At least 0.25 away from 0 (within its error), and positive.
    Positive,
    /// At most this large in magnitude.
    Within(f32),
}

#[derive(Clone, Copy)]
struct UnaryCase {
    name: &'static str,
    gpu: GpuUnary,
    reference: fn(&Ref) -> Ref,
    f: fn(f64) -> f64,
    rule: Rule,
    tol: Tol,
    domain: Domain,
}

fn unary_cases() -> Vec<UnaryCase> {
    use Domain::*;
    use Rule::*;
    let case = |name, gpu, reference, f, rule, tol, domain| UnaryCase {
        name,
        gpu,
        reference,
        f,
        rule,
        tol,
        domain,
    };
    vec![
        case("neg", Tensor::neg, Ref::neg, |x| -x, Corners, EXACT, Any),
        case("abs", Tensor::abs, Ref::abs, f64::abs, Corners, EXACT, Any),
        case(
            "exp",
            Tensor::exp,
            Ref::exp,
            f64::exp,
            Corners,
            TRANSCENDENTAL,
            Within(6.0),
        ),
        case(
            "log",
            Tensor::log,
            Ref::log,
            f64::ln,
            Corners,
            TRANSCENDENTAL,
            Positive,
        ),
        case(
            "sqrt",
            Tensor::sqrt,
            Ref::sqrt,
            f64::sqrt,
            Corners,
            TRANSCENDENTAL,
            Positive,
        ),
        case(
            "rsqrt",
            Tensor::rsqrt,
            Ref::rsqrt,
            |x| 1.0 / x.sqrt(),
            Corners,
            TRANSCENDENTAL,
            Positive,
        ),
        case(
            "square",
            Tensor::square,
            Ref::square,
            |x| x * x,
            Corners,
            ARITH,
            Any,
        ),
        case(
            "relu",
            Tensor::relu,
            Ref::relu,
            |x| x.max(0.0),
            Corners,
            EXACT,
            Any,
        ),
        case(
            "gelu",
            Tensor::gelu,
            Ref::gelu,
            super::reference::gelu,
            Lipschitz(1.13),
            TRANSCENDENTAL,
            Any,
        ),
        case(
            "sigmoid",
            Tensor::sigmoid,
            Ref::sigmoid,
            |x| 1.0 / (1.0 + (-x).exp()),
            Corners,
            TRANSCENDENTAL,
            Any,
        ),
        case(
            "tanh",
            Tensor::tanh,
            Ref::tanh,
            f64::tanh,
            Corners,
            TRANSCENDENTAL,
            Any,
        ),
        case(
            "sin",
            Tensor::sin,
            Ref::sin,
            f64::sin,
            Lipschitz(1.0),
            SIN_COS,
            Within(3.0),
        ),
        case(
            "cos",
            Tensor::cos,
            Ref::cos,
            f64::cos,
            Lipschitz(1.0),
            SIN_COS,
            Within(3.0),
        ),
    ]
}

#[derive(Clone, Copy)]
struct BinaryCase {
    name: &'static str,
    /// The library's name for it (`greaterEqual`).
    op: &'static str,
    gpu: GpuBinary,
    reference: RefBinary,
    f: fn(f64, f64) -> f64,
    rule: Rule,
    tol: Tol,
}

fn truth(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

fn binary_cases() -> Vec<BinaryCase> {
    use Rule::*;
    macro_rules! case {
        ($name:ident, $op:literal, $f:expr, $rule:expr, $tol:expr) => {
            BinaryCase {
                name: stringify!($name),
                op: $op,
                gpu: |a, o| a.$name(o),
                reference: |a, o| a.$name(o),
                f: $f,
                rule: $rule,
                tol: $tol,
            }
        };
    }
    vec![
        case!(add, "add", |a, b| a + b, Corners, ARITH),
        case!(sub, "sub", |a, b| a - b, Corners, ARITH),
        case!(mul, "mul", |a, b| a * b, Corners, ARITH),
        case!(div, "div", |a, b| a / b, Corners, ARITH),
        case!(pow, "pow", f64::powf, Corners, TRANSCENDENTAL),
        case!(maximum, "maximum", f64::max, Corners, EXACT),
        case!(minimum, "minimum", f64::min, Corners, EXACT),
        case!(equal, "equal", |a, b| truth(a == b), Equality, EXACT),
        case!(greater, "greater", |a, b| truth(a > b), Corners, EXACT),
        case!(
            greater_equal,
            "greaterEqual",
            |a, b| truth(a >= b),
            Corners,
            EXACT
        ),
        case!(less, "less", |a, b| truth(a < b), Corners, EXACT),
        case!(
            less_equal,
            "lessEqual",
            |a, b| truth(a <= b),
            Corners,
            EXACT
        ),
    ]
}

// ---------------------------------------------------------------------------
// Shapes

/// Whether two shapes broadcast together.
pub fn broadcastable(a: &[usize], b: &[usize]) -> bool {
    a.iter()
        .rev()
        .zip(b.iter().rev())
        .all(|(&x, &y)| x == y || x == 1 || y == 1)
}

/// Generated tensors stay below this many elements.
const MAX_ELEMENTS: usize = 4096;

fn prime_factors(mut n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut p = 2;
    while p * p <= n {
        while n.is_multiple_of(p) {
            out.push(p);
            n /= p;
        }
        p += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out
}

/// The library's name for a constant of `value` (`zeros`, `ones`, `full`).
fn fill_name(value: f32) -> &'static str {
    if value == 0.0 {
        "zeros"
    } else if value == 1.0 {
        "ones"
    } else {
        "full"
    }
}

/// An axis written as given or counted from the end.
fn maybe_negative(rng: &mut Rng, axis: usize, rank: usize) -> isize {
    if rng.chance(0.4) {
        axis as isize - rank as isize
    } else {
        axis as isize
    }
}

// ---------------------------------------------------------------------------
// The builder

struct Node {
    name: String,
    line: String,
    gpu: Tensor,
    t: Tracked,
    /// The library ops that registering it queued, in order, by the names
    /// reports and `inject_fault` use (`softmax` is `logSumExp`, `sub`,
    /// `exp`).
    ops: Vec<&'static str>,
    /// The nodes it reads.
    inputs: Vec<usize>,
}

struct Builder<'d> {
    gpu: &'d Device,
    rng: Rng,
    /// Whether this graph makes 0-sized dims.
    zero_dims: bool,
    nodes: Vec<Node>,
    chain: Vec<String>,
    checked: Vec<usize>,
    /// Nodes before this one have run: building reads random inputs back,
    /// and a read flushes everything queued.
    flushed: usize,
}

fn registered(what: &str, r: Result<Tensor, RegistrationError>) -> Result<Tensor, String> {
    r.map_err(|e| format!("{what} was rejected at registration: {e}"))
}

impl<'d> Builder<'d> {
    fn new(gpu: &'d Device, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let zero_dims = rng.chance(0.15);
        Builder {
            gpu,
            rng,
            zero_dims,
            nodes: Vec::new(),
            chain: Vec::new(),
            checked: Vec::new(),
            flushed: 0,
        }
    }

    fn t(&self, i: usize) -> &Tracked {
        &self.nodes[i].t
    }

    fn g(&self, i: usize) -> Tensor {
        self.nodes[i].gpu.clone()
    }

    fn name(&self, i: usize) -> String {
        self.nodes[i].name.clone()
    }

    fn shape(&self, i: usize) -> Vec<usize> {
        self.nodes[i].t.shape().to_vec()
    }

    /// Records a new node after checking the library's shape against the
    /// reference's: made by the library ops `ops` from the nodes `inputs`.
    fn push(
        &mut self,
        gpu: Tensor,
        t: Tracked,
        desc: String,
        ops: &[&'static str],
        inputs: &[usize],
    ) -> Result<usize, String> {
        let i = self.nodes.len();
        let name = format!("t{i}");
        let line = format!("{name} = {desc} -> {:?}", t.shape());
        if gpu.shape() != t.shape() {
            return Err(format!("{line}: the library gives shape {:?}", gpu.shape()));
        }
        self.chain.push(line.clone());
        self.nodes.push(Node {
            name,
            line,
            gpu,
            t,
            ops: ops.to_vec(),
            inputs: inputs.to_vec(),
        });
        if self.rng.chance(0.4) {
            self.checked.push(i);
        }
        Ok(i)
    }

    /// A recent node most of the time (long chains), any node otherwise;
    /// a float: an int or a bool node (a comparison, an argMax) is cast to
    /// one first, as a node of its own, so every op of the graph reads the
    /// dtype it computes in and registers nothing the graph does not know
    /// of (no implicit cast: a fault injected into the nth `cast` is the
    /// nth cast node).
    fn pick(&mut self) -> Result<usize, String> {
        let i = if self.rng.chance(0.6) {
            self.nodes.len() - 1
        } else {
            self.rng.below(self.nodes.len())
        };
        self.float(i)
    }

    /// Node `i`, or a new node of it cast to a float where it is not one.
    fn float(&mut self, i: usize) -> Result<usize, String> {
        if self.nodes[i].gpu.dtype() == DType::Float32 {
            return Ok(i);
        }
        let g = registered("cast", self.g(i).cast(DType::Float32))?;
        let t = self.t(i).view(Ref::clone);
        let desc = format!("cast({}, float32)", self.name(i));
        self.push(g, t, desc, &["cast"], &[i])
    }

    fn dim(&mut self) -> usize {
        if self.zero_dims && self.rng.chance(0.08) {
            0
        } else {
            self.rng.range(1, 7)
        }
    }

    fn random_shape(&mut self) -> Vec<usize> {
        let rank = self.rng.pick(&[0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4]);
        (0..rank).map(|_| self.dim()).collect()
    }

    /// A shape that broadcasts with `shape`: fewer or more leading dims, some
    /// dims 1, and dims where `shape` has 1 sometimes larger.
    fn compatible_shape(&mut self, shape: &[usize]) -> Vec<usize> {
        let mut out: Vec<usize> = shape
            .iter()
            .map(|&d| {
                if self.rng.chance(0.3) {
                    1
                } else if d == 1 && self.rng.chance(0.4) {
                    self.rng.range(2, 5)
                } else {
                    d
                }
            })
            .collect();
        if !out.is_empty() && self.rng.chance(0.3) {
            let drop = self.rng.range(1, out.len());
            out.drain(..drop);
        }
        if self.rng.chance(0.2) {
            let grown = numel(&out) * numel(shape);
            let d = self.rng.range(1, 3);
            // A new leading dim only where `shape` has none.
            if out.len() >= shape.len() && out.len() < 4 && grown * d <= MAX_ELEMENTS {
                out.insert(0, d);
            }
        }
        if numel(&out).max(1) * numel(shape).max(1) > MAX_ELEMENTS * 4 {
            return vec![];
        }
        out
    }

    /// A new input tensor of `shape`, made one of several ways.
    async fn input(&mut self, shape: &[usize]) -> Result<usize, String> {
        let gpu = self.gpu;
        let how = self.rng.below(100);
        if how < 10 {
            let seed = self.rng.next_u64();
            let (lo, hi) = (self.rng.uniform(-3.0, 0.0), self.rng.uniform(0.5, 3.0));
            let t = registered("random_uniform", gpu.random_uniform(shape, lo, hi, seed))?;
            let vals = read(&t, "random_uniform").await?;
            if let Some(v) = vals.iter().find(|v| !(lo..=hi).contains(*v)) {
                return Err(format!(
                    "random_uniform({shape:?}, {lo}, {hi}, {seed}) produced {v}, outside its range"
                ));
            }
            let desc = format!("random_uniform({shape:?}, {lo}, {hi}, seed {seed})");
            let r = Tracked::exact(Ref::new(vals, shape));
            let i = self.push(t, r, desc, &["randomUniform"], &[])?;
            self.flushed = i + 1;
            return Ok(i);
        }
        if how < 15 {
            let seed = self.rng.next_u64();
            let t = registered("random_normal", gpu.random_normal(shape, 0.0, 1.0, seed))?;
            let vals = read(&t, "random_normal").await?;
            if let Some(v) = vals.iter().find(|v| !v.is_finite()) {
                return Err(format!("random_normal({shape:?}) produced {v}"));
            }
            let desc = format!("random_normal({shape:?}, 0, 1, seed {seed})");
            let r = Tracked::exact(Ref::new(vals, shape));
            let i = self.push(t, r, desc, &["randomNormal"], &[])?;
            self.flushed = i + 1;
            return Ok(i);
        }
        if how < 25 {
            let value = self.rng.pick(&[0.0, 1.0, -1.5, 0.25, 3.0]);
            let (t, desc) = match self.rng.below(3) {
                0 if value == 0.0 => (gpu.zeros(shape), format!("zeros({shape:?})")),
                1 if value == 1.0 => (gpu.ones(shape), format!("ones({shape:?})")),
                _ => (gpu.full(shape, value), format!("full({shape:?}, {value})")),
            };
            let t = registered("full", t)?;
            let r = Tracked::exact(Ref::full(shape, value));
            return self.push(t, r, desc, &[fill_name(value)], &[]);
        }
        if how < 32 && shape.len() == 1 {
            let start = self.rng.range(0, 6) as f32 - 3.0;
            let step = self.rng.pick(&[1.0f32, 0.5, 2.0, -1.0, 0.25, -0.5]);
            let stop = start + step * shape[0] as f32;
            let t = registered("arange", gpu.arange(start, stop, step))?;
            let r = Tracked::rounded(Ref::arange(start, stop, step), ARITH);
            let desc = format!("arange({start}, {stop}, {step})");
            return self.push(t, r, desc, &["arange"], &[]);
        }
        self.upload(shape)
    }

    /// A new input of `shape` with values uploaded from this PRNG.
    fn upload(&mut self, shape: &[usize]) -> Result<usize, String> {
        let values: Vec<f32> = (0..numel(shape))
            .map(|_| self.rng.uniform(-2.0, 2.0))
            .collect();
        let default_shape = shape.len() == 1 && self.rng.chance(0.5);
        let t = if default_shape {
            self.gpu.tensor(&values, None)
        } else {
            self.gpu.tensor(&values, Some(shape))
        };
        let t = registered("tensor", t)?;
        self.push(
            t,
            Tracked::exact(Ref::new(values, shape)),
            format!("tensor({shape:?})"),
            &["tensor"],
            &[],
        )
    }

    /// A node that broadcasts with `shape`: an existing one, or a new input.
    async fn operand_for(&mut self, shape: &[usize]) -> Result<usize, String> {
        if self.rng.chance(0.4) {
            let fits: Vec<usize> = (0..self.nodes.len())
                .filter(|&j| broadcastable(self.t(j).shape(), shape))
                .collect();
            if !fits.is_empty() {
                let j = self.rng.pick(&fits);
                return self.float(j);
            }
        }
        let s = self.compatible_shape(shape);
        self.input(&s).await
    }

    // ----- conditioning ---------------------------------------------------

    fn unary_node(&mut self, i: usize, case: &UnaryCase) -> Result<usize, String> {
        let i = self.float(i)?;
        let g = registered(case.name, (case.gpu)(&self.nodes[i].gpu))?;
        let x = self.t(i);
        let t = x.unary((case.reference)(&x.val), case.f, case.rule, case.tol);
        let desc = format!("{}({})", case.name, self.name(i));
        self.push(g, t, desc, &[case.name], &[i])
    }

    fn scalar_node(&mut self, i: usize, case: &BinaryCase, s: f32) -> Result<usize, String> {
        let i = self.float(i)?;
        let g = registered(
            case.name,
            (case.gpu)(&self.nodes[i].gpu, Operand::Scalar(s)),
        )?;
        let x = self.t(i);
        let val = (case.reference)(&x.val, RefOperand::Scalar(s));
        let t = x.binary(
            &Tracked::exact(Ref::scalar(s)),
            val,
            case.f,
            case.rule,
            case.tol,
        );
        let desc = format!("{}({}, {s})", case.name, self.name(i));
        self.push(g, t, desc, &[case.op], &[i])
    }

    fn clamp_node(&mut self, i: usize, lo: f32, hi: f32) -> Result<usize, String> {
        let i = self.float(i)?;
        let g = registered("clamp", self.nodes[i].gpu.clamp(lo, hi))?;
        let x = self.t(i);
        let f = |v: f64| v.max(lo as f64).min(hi as f64);
        let t = x.unary(x.val.clamp(lo, hi), f, Rule::Corners, EXACT);
        let desc = format!("clamp({}, {lo}, {hi})", self.name(i));
        self.push(g, t, desc, &["clamp"], &[i])
    }

    fn case_binary(name: &str) -> BinaryCase {
        binary_cases()
            .into_iter()
            .find(|c| c.name == name)
            .expect("a binary op")
    }

    fn case_unary(name: &str) -> UnaryCase {
        unary_cases()
            .into_iter()
            .find(|c| c.name == name)
            .expect("a unary op")
    }

    /// `i`, or `abs(i) + 0.5` when `i` may come within 0.25 of 0.
    fn make_positive(&mut self, i: usize) -> Result<usize, String> {
        let t = self.t(i);
        let positive = t.val.data.iter().all(|&v| v > 0.0);
        if t.val.size() == 0 || (positive && t.min_margin() >= 0.25) {
            return Ok(i);
        }
        let a = self.unary_node(i, &Self::case_unary("abs"))?;
        self.scalar_node(a, &Self::case_binary("add"), 0.5)
    }

    /// `i`, or `clamp(i, -limit, limit)` when it is larger.
    fn make_within(&mut self, i: usize, limit: f32) -> Result<usize, String> {
        if self.t(i).max_abs() <= limit {
            return Ok(i);
        }
        self.clamp_node(i, -limit, limit)
    }

    fn condition(&mut self, i: usize, domain: Domain) -> Result<usize, String> {
        match domain {
            Domain::Any => Ok(i),
            Domain::Positive => self.make_positive(i),
            Domain::Within(limit) => self.make_within(i, limit),
        }
    }

    /// Scales a result larger than 16 back to at most 8.
    fn tame(&mut self, i: usize) -> Result<usize, String> {
        let m = self.t(i).max_abs();
        if m <= 16.0 {
            return Ok(i);
        }
        let s = 8.0 / m;
        self.scalar_node(i, &Self::case_binary("mul"), s)
    }

    // ----- op families ----------------------------------------------------

    fn op_unary(&mut self) -> Result<usize, String> {
        let i = self.pick()?;
        if self.rng.chance(0.1) {
            let m = self.t(i).max_abs().max(1.0);
            let lo = self.rng.uniform(-m, 0.0);
            let hi = lo + self.rng.uniform(0.0, 2.0 * m);
            return self.clamp_node(i, lo, hi);
        }
        let case = self.rng.pick(&unary_cases());
        let x = self.condition(i, case.domain)?;
        self.unary_node(x, &case)
    }

    fn op_scalar(&mut self) -> Result<usize, String> {
        let i = self.pick()?;
        let case = self.rng.pick(&binary_cases());
        let n = self.t(i).val.size();
        let mut s = if n > 0 && self.rng.chance(0.3) {
            // A value of the tensor itself: exact ties for comparisons.
            let k = self.rng.below(n);
            self.t(i).val.data[k]
        } else {
            self.rng
                .pick(&[-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 0.3, -1.7])
        };
        let mut x = i;
        match case.name {
            "div" if s.abs() < 0.25 => s = 0.5,
            "pow" => {
                s = self.rng.pick(&[2.0, 3.0, 0.5, -1.0, -0.5, 1.5, 0.0, 1.0]);
                x = self.make_positive(i)?;
            }
            _ => {}
        }
        self.scalar_node(x, &case, s)
    }

    async fn op_binary(&mut self) -> Result<usize, String> {
        let case = self.rng.pick(&binary_cases());
        let a = self.pick()?;
        let sa = self.shape(a);
        let b = self.operand_for(&sa).await?;
        let (mut a, mut b) = if self.rng.chance(0.5) { (a, b) } else { (b, a) };
        match case.name {
            "div" if self.t(b).min_margin() < 0.25 => {
                b = self.make_positive(b)?;
            }
            "pow" => {
                a = self.make_positive(a)?;
                b = self.make_within(b, 2.0)?;
            }
            _ => {}
        }
        self.binary_node(a, b, &case)
    }

    fn binary_node(&mut self, a: usize, b: usize, case: &BinaryCase) -> Result<usize, String> {
        let (a, b) = (self.float(a)?, self.float(b)?);
        let g = registered(
            case.name,
            (case.gpu)(&self.g(a), Operand::Tensor(&self.g(b))),
        )?;
        let (ta, tb) = (self.t(a), self.t(b));
        let val = (case.reference)(&ta.val, RefOperand::Tensor(&tb.val));
        let t = ta.binary(tb, val, case.f, case.rule, case.tol);
        let desc = format!("{}({}, {})", case.name, self.name(a), self.name(b));
        self.push(g, t, desc, &[case.op], &[a, b])
    }

    /// A chain of 8–12 binary ops each taking a new input: fused, one kernel
    /// would read more buffers than WebGPU's default limit of 8.
    fn op_many_inputs(&mut self) -> Result<usize, String> {
        let mut x = self.pick()?;
        let cases: Vec<BinaryCase> = binary_cases()
            .into_iter()
            .filter(|c| ["add", "sub", "mul", "maximum", "minimum"].contains(&c.name))
            .collect();
        for _ in 0..self.rng.range(8, 12) {
            let shape = self.shape(x);
            let other = if self.rng.chance(0.5) {
                shape
            } else {
                self.compatible_shape(&shape)
            };
            let y = self.upload(&other)?;
            let case = self.rng.pick(&cases);
            x = if self.rng.chance(0.5) {
                self.binary_node(x, y, &case)?
            } else {
                self.binary_node(y, x, &case)?
            };
            x = self.tame(x)?;
        }
        Ok(x)
    }

    async fn op_where(&mut self) -> Result<usize, String> {
        let a = self.pick()?;
        let sa = self.shape(a);
        let cond = if self.rng.chance(0.5) {
            self.operand_for(&sa).await?
        } else {
            let s = self.compatible_shape(&sa);
            let values: Vec<f32> = (0..numel(&s))
                .map(|_| self.rng.pick(&[0.0, 1.0, 0.0, 0.5, -1.0]))
                .collect();
            let t = registered("tensor", self.gpu.tensor(&values, Some(&s)))?;
            self.push(
                t,
                Tracked::exact(Ref::new(values, &s)),
                format!("tensor({s:?})"),
                &["tensor"],
                &[],
            )?
        };
        // A condition is a bool: the values above, or any node, cast.
        let cond = if self.nodes[cond].gpu.dtype() == DType::Bool {
            cond
        } else {
            let g = registered("cast", self.g(cond).cast(DType::Bool))?;
            let t = self.t(cond).nonzero();
            let desc = format!("cast({}, bool)", self.name(cond));
            self.push(g, t, desc, &["cast"], &[cond])?
        };
        let both = broadcast_shapes(&sa, &self.shape(cond));
        let b = self.operand_for(&both).await?;
        let (a, b) = if self.rng.chance(0.5) { (a, b) } else { (b, a) };
        let g = registered(
            "where_",
            self.gpu.where_(&self.g(cond), &self.g(a), &self.g(b)),
        )?;
        let t = Tracked::where_(self.t(cond), self.t(a), self.t(b));
        let desc = format!(
            "where_({}, {}, {})",
            self.name(cond),
            self.name(a),
            self.name(b)
        );
        self.push(g, t, desc, &["where"], &[cond, a, b])
    }

    /// A new int32 input of `values` in `shape`, known exactly.
    fn int_input(&mut self, values: &[i32], shape: &[usize]) -> Result<usize, String> {
        let g = registered(
            "tensor",
            self.gpu.tensor_of(Values::int32(values), Some(shape)),
        )?;
        let r = Ref::new(values.iter().map(|&v| v as f32).collect(), shape);
        let desc = format!("int32 tensor({shape:?})");
        self.push(g, Tracked::exact(r), desc, &["tensor"], &[])
    }

    /// Integer arithmetic, exact: two int32 tensors of small values (the
    /// divisor sometimes 0), one of `add`, `mul`, `floorDiv`, `mod`,
    /// `maximum`, computed as TF.js does, then cast to a float so the rest
    /// of the graph may read it.
    async fn op_ints(&mut self) -> Result<usize, String> {
        let a = self.pick()?;
        let s = self.compatible_shape(&self.shape(a));
        let n = numel(&s);
        let int_input = |rng: &mut Rng, spread: i64| -> Vec<i32> {
            (0..n)
                .map(|_| (rng.below(2 * spread as usize + 1) as i64 - spread) as i32)
                .collect()
        };
        let x = int_input(&mut self.rng, 50);
        let y = int_input(&mut self.rng, 4);
        let inputs = [self.int_input(&x, &s)?, self.int_input(&y, &s)?];
        let (name, f): (&'static str, fn(i32, i32) -> i32) = match self.rng.below(5) {
            0 => ("add", |a, b| a + b),
            1 => ("mul", |a, b| a * b),
            2 => ("floorDiv", |a, b| {
                if b == 0 {
                    0
                } else {
                    (a as f64 / b as f64).floor() as i32
                }
            }),
            3 => ("mod", |a, b| {
                if b == 0 {
                    0
                } else {
                    let r = a % b;
                    if r != 0 && (r < 0) != (b < 0) {
                        r + b
                    } else {
                        r
                    }
                }
            }),
            _ => ("maximum", |a, b| a.max(b)),
        };
        let (gx, gy) = (self.g(inputs[0]), self.g(inputs[1]));
        let g = registered(
            name,
            match name {
                "add" => gx.add(&gy),
                "mul" => gx.mul(&gy),
                "floorDiv" => gx.floor_div(&gy),
                "mod" => gx.mod_(&gy),
                _ => gx.maximum(&gy),
            },
        )?;
        if g.dtype() != DType::Int32 {
            return Err(format!("{name} of two int32s gave {}", g.dtype()));
        }
        let want: Vec<f32> = x.iter().zip(&y).map(|(&a, &b)| f(a, b) as f32).collect();
        let desc = format!("{name}({}, {})", self.name(inputs[0]), self.name(inputs[1]));
        let int = self.push(
            g,
            Tracked::exact(Ref::new(want.clone(), &s)),
            desc,
            &[name],
            &inputs,
        )?;
        let g = registered("cast", self.g(int).cast(DType::Float32))?;
        let desc = format!("cast({}, float32)", self.name(int));
        self.push(
            g,
            Tracked::exact(Ref::new(want, &s)),
            desc,
            &["cast"],
            &[int],
        )
    }

    /// `gather` of a node along a random axis at fresh int32 indices (all
    /// in range: a flagged index is a failure the reference has no value
    /// for), or a `oneHot` of fresh indices (some out of range: a row of
    /// `off`), cast to a float.
    async fn op_indexing(&mut self) -> Result<usize, String> {
        let i = self.pick()?;
        let shape = self.shape(i);
        let rank = self.rng.range(0, 2);
        let idx_shape: Vec<usize> = (0..rank).map(|_| self.rng.range(1, 3)).collect();
        let n = numel(&idx_shape);
        if shape.is_empty() || shape.contains(&0) || self.rng.chance(0.3) {
            let depth = self.rng.range(2, 5);
            let idx: Vec<i32> = (0..n)
                .map(|_| self.rng.below(depth + 2) as i32 - 1)
                .collect();
            let t = self.int_input(&idx, &idx_shape)?;
            let (on, off) = (
                self.rng.pick(&[1.0f32, 0.5]),
                self.rng.pick(&[0.0f32, -1.0]),
            );
            let g = registered(
                "oneHot",
                self.g(t)
                    .one_hot(depth, on.into(), off.into(), DType::Float32),
            )?;
            let mut shape = idx_shape.clone();
            shape.push(depth);
            let data = idx
                .iter()
                .flat_map(|&v| (0..depth).map(move |d| if v == d as i32 { on } else { off }))
                .collect();
            let desc = format!("one_hot({}, {depth}, {on}, {off})", self.name(t));
            return self.push(
                g,
                Tracked::exact(Ref::new(data, &shape)),
                desc,
                &["oneHot"],
                &[t],
            );
        }
        let axis = self.rng.below(shape.len());
        let idx: Vec<usize> = (0..n).map(|_| self.rng.below(shape[axis])).collect();
        let as_i32: Vec<i32> = idx.iter().map(|&v| v as i32).collect();
        let j = self.int_input(&as_i32, &idx_shape)?;
        let signed = maybe_negative(&mut self.rng, axis, shape.len());
        let g = registered("gather", self.g(i).gather(&self.g(j), signed, 0))?;
        let t = self.t(i).view(|r| r.gather(&idx, &idx_shape, axis));
        let desc = format!("gather({}, {}, {signed})", self.name(i), self.name(j));
        // The indices' view (a reshape, a broadcast) registers with it.
        self.push(g, t, desc, &["reshape", "broadcastTo", "gather"], &[i, j])
    }

    fn op_view(&mut self) -> Result<usize, String> {
        let i = self.pick()?;
        let shape = self.shape(i);
        let rank = shape.len();
        let x = self.g(i);
        let name = self.name(i);
        let t = self.t(i).clone();
        match self.rng.below(7) {
            0 => {
                let perm: Option<Vec<usize>> = if self.rng.chance(0.25) {
                    None
                } else {
                    let mut p: Vec<usize> = (0..rank).collect();
                    self.rng.shuffle(&mut p);
                    Some(p)
                };
                let g = registered("transpose", x.transpose(perm.as_deref()))?;
                let r = t.view(|v| v.transpose(perm.as_deref()));
                self.push(
                    g,
                    r,
                    format!("transpose({name}, {perm:?})"),
                    &["transpose"],
                    &[i],
                )
            }
            1 => {
                let mut begin = Vec::new();
                let mut size = Vec::new();
                for &d in &shape {
                    let b = if d == 0 { 0 } else { self.rng.below(d) };
                    let s = if self.rng.chance(0.3) {
                        -1
                    } else if self.zero_dims && self.rng.chance(0.1) {
                        0
                    } else {
                        self.rng.range((d - b).min(1), d - b) as isize
                    };
                    begin.push(b);
                    size.push(s);
                }
                let g = registered("slice", x.slice(&begin, &size))?;
                let r = t.view(|v| v.slice(&begin, &size));
                let desc = format!("slice({name}, {begin:?}, {size:?})");
                self.push(g, r, desc, &["slice"], &[i])
            }
            2 => {
                let target = self.reshape_target(numel(&shape));
                let g = registered("reshape", x.reshape(&target))?;
                let r = t.view(|v| v.reshape(&target));
                let desc = format!("reshape({name}, {target:?})");
                self.push(g, r, desc, &["reshape"], &[i])
            }
            3 => {
                let mut target: Vec<usize> = shape
                    .iter()
                    .map(|&d| {
                        if d == 1 && self.rng.chance(0.6) {
                            self.rng.range(1, 5)
                        } else {
                            d
                        }
                    })
                    .collect();
                while target.len() < 4 && self.rng.chance(0.4) {
                    target.insert(0, self.rng.range(1, 4));
                }
                if numel(&target) > MAX_ELEMENTS {
                    target = shape.clone();
                }
                let g = registered("broadcast_to", x.broadcast_to(&target))?;
                let r = t.view(|v| v.broadcast_to(&target));
                let desc = format!("broadcast_to({name}, {target:?})");
                self.push(g, r, desc, &["broadcastTo"], &[i])
            }
            4 => {
                let axis = self.rng.range(0, rank);
                let axis = maybe_negative(&mut self.rng, axis, rank + 1);
                let g = registered("expand_dims", x.expand_dims(axis))?;
                let r = t.view(|v| v.expand_dims(axis));
                let desc = format!("expand_dims({name}, {axis})");
                self.push(g, r, desc, &["expandDims"], &[i])
            }
            5 => {
                let ones: Vec<usize> = (0..rank).filter(|&d| shape[d] == 1).collect();
                let axes: Option<Vec<isize>> = if ones.is_empty() || self.rng.chance(0.3) {
                    None
                } else {
                    let mut chosen: Vec<isize> = Vec::new();
                    for &d in &ones {
                        if chosen.is_empty() || self.rng.chance(0.6) {
                            chosen.push(maybe_negative(&mut self.rng, d, rank));
                        }
                    }
                    self.rng.shuffle(&mut chosen);
                    Some(chosen)
                };
                let g = registered("squeeze", x.squeeze(axes.as_deref()))?;
                let r = t.view(|v| v.squeeze(axes.as_deref()));
                let desc = format!("squeeze({name}, {axes:?})");
                self.push(g, r, desc, &["squeeze"], &[i])
            }
            _ => {
                let g = registered("flatten", x.flatten())?;
                let r = t.view(Ref::flatten);
                self.push(g, r, format!("flatten({name})"), &["reshape"], &[i])
            }
        }
    }

    /// A shape of `size` elements, of rank 0–4, sometimes with a -1.
    fn reshape_target(&mut self, size: usize) -> Vec<isize> {
        if size == 0 {
            let mut s: Vec<isize> = (0..self.rng.range(1, 3))
                .map(|_| self.rng.range(1, 5) as isize)
                .collect();
            let z = self.rng.below(s.len());
            s[z] = 0;
            return s;
        }
        let min_rank = usize::from(size > 1);
        let rank = self.rng.range(min_rank, 4);
        let mut dims = vec![1usize; rank];
        for p in prime_factors(size) {
            let d = self.rng.below(rank.max(1));
            dims[d] *= p;
        }
        let mut out: Vec<isize> = dims.iter().map(|&d| d as isize).collect();
        if rank > 0 && self.rng.chance(0.4) {
            let d = self.rng.below(rank);
            out[d] = -1;
        }
        out
    }

    fn op_reduce(&mut self) -> Result<usize, String> {
        let i = self.pick()?;
        let shape = self.shape(i);
        let rank = shape.len();
        let axes: Option<Vec<isize>> = if rank == 0 || self.rng.chance(0.2) {
            None
        } else if self.rng.chance(0.5) {
            let a = self.rng.below(rank);
            Some(vec![maybe_negative(&mut self.rng, a, rank)])
        } else {
            let mut all: Vec<usize> = (0..rank).collect();
            self.rng.shuffle(&mut all);
            let k = self.rng.range(1, rank);
            Some(
                all[..k]
                    .iter()
                    .map(|&a| maybe_negative(&mut self.rng, a, rank))
                    .collect(),
            )
        };
        let keep = self.rng.chance(0.5);
        let t = self.t(i).clone();
        if rank > 0 && self.rng.chance(0.2) {
            let axis = self.rng.below(rank);
            let signed = maybe_negative(&mut self.rng, axis, rank);
            let (exclusive, reverse) = (self.rng.chance(0.5), self.rng.chance(0.5));
            let g = registered("cumsum", self.g(i).cumsum(signed, exclusive, reverse))?;
            let desc = format!("cumsum({}, {signed}, {exclusive}, {reverse})", self.name(i));
            let r = t.cumsum(signed, exclusive, reverse);
            return self.push(g, r, desc, &["cumsum"], &[i]);
        }
        let empty = t.reduced_count(axes.as_deref()) == 0;
        // max/min/mean of nothing are undefined: those become sums.
        let op = if empty {
            "sum"
        } else {
            self.rng.pick(&["sum", "mean", "max", "min"])
        };
        let x = self.g(i);
        let ax = axes.as_deref();
        let (g, r) = match op {
            "sum" => (x.sum(ax, keep), t.sum(ax, keep)),
            "mean" => (x.mean(ax, keep), t.mean(ax, keep)),
            "max" => (x.max(ax, keep), t.max(ax, keep)),
            _ => (x.min(ax, keep), t.min(ax, keep)),
        };
        let g = registered(op, g)?;
        let desc = format!("{op}({}, {axes:?}, keep_dims={keep})", self.name(i));
        self.push(g, r, desc, &[op], &[i])
    }

    fn op_argmax_or_softmax(&mut self) -> Result<usize, String> {
        let mut i = self.pick()?;
        if self.t(i).shape().is_empty() {
            let g = registered("expand_dims", self.g(i).expand_dims(0))?;
            let r = self.t(i).view(|v| v.expand_dims(0));
            let desc = format!("expand_dims({}, 0)", self.name(i));
            i = self.push(g, r, desc, &["expandDims"], &[i])?;
        }
        let shape = self.shape(i);
        let rank = shape.len();
        let a = self.rng.below(rank);
        let axis = maybe_negative(&mut self.rng, a, rank);
        let x = self.g(i);
        let t = self.t(i).clone();
        let name = self.name(i);
        match self.rng.below(3) {
            0 if shape[a] > 0 => {
                let g = registered("argmax", x.arg_max(axis))?;
                let desc = format!("argmax({name}, {axis})");
                self.push(g, t.argmax(axis), desc, &["argMax"], &[i])
            }
            1 => {
                let g = registered("log_softmax", x.log_softmax(axis))?;
                self.push(
                    g,
                    t.log_softmax(axis),
                    format!("log_softmax({name}, {axis})"),
                    &["max", "sub", "logSumExp", "sub"],
                    &[i],
                )
            }
            _ => {
                let g = registered("softmax", x.softmax(axis))?;
                let desc = format!("softmax({name}, {axis})");
                // Along rows one workgroup reduces, one kernel; elsewhere
                // written out (see `Tensor::softmax`).
                let ops: &[&'static str] = if a + 1 == shape.len() && shape[a] <= 8192 {
                    &["logSumExp", "sub", "exp"]
                } else {
                    &["max", "sub", "exp", "sum", "sub", "exp", "div"]
                };
                self.push(g, t.softmax(axis), desc, ops, &[i])
            }
        }
    }

    /// A `conv2d` of a node seen as NHWC images (leading dims of 1 added,
    /// a rank past 4 flattened into one row) with a fresh filter, or a
    /// `maxPool` or `avgPool` of it: random windows, strides, dilations
    /// and pads, valid, same or explicit.
    async fn op_window(&mut self) -> Result<usize, String> {
        let picked = self.pick()?;
        let mut i = self.float(picked)?;
        while self.t(i).shape().len() < 4 {
            let g = registered("expand_dims", self.g(i).expand_dims(0))?;
            let r = self.t(i).view(|v| v.expand_dims(0));
            let desc = format!("expand_dims({}, 0)", self.name(i));
            i = self.push(g, r, desc, &["expandDims"], &[i])?;
        }
        if self.t(i).shape().len() > 4 {
            let n = numel(self.t(i).shape()) as isize;
            let g = registered("reshape", self.g(i).reshape(&[1, 1, n, 1]))?;
            let r = self.t(i).view(|v| v.reshape(&[1, 1, n, 1]));
            let desc = format!("reshape({}, [1, 1, {n}, 1])", self.name(i));
            i = self.push(g, r, desc, &["reshape"], &[i])?;
        }
        let shape = self.shape(i);
        let (h, w) = (shape[1], shape[2]);
        // 0 a conv2d, 4 a depthwiseConv2d, else a pool.
        let kind = self.rng.below(5);
        let size = [self.rng.range(1, 3), self.rng.range(1, 3)];
        let stride = [self.rng.range(1, 2), self.rng.range(1, 2)];
        let convolves = kind == 0 || kind == 4;
        let dilation = match convolves && stride == [1, 1] && self.rng.chance(0.4) {
            true => [self.rng.range(1, 2), self.rng.range(1, 2)],
            false => [1, 1],
        };
        let reach = |d: usize| (size[d] - 1) * dilation[d] + 1;
        // Pads each smaller than the window (a pool's must be); valid only
        // where the window fits.
        let mut pads = [[0; 2]; 2];
        for (d, side) in pads.iter_mut().enumerate() {
            for p in side.iter_mut() {
                *p = self.rng.below(size[d]);
            }
        }
        let fits =
            |pads: [[usize; 2]; 2]| (0..2).all(|d| [h, w][d] + pads[d][0] + pads[d][1] >= reach(d));
        let same = h == 0 || w == 0 || self.rng.chance(0.4) || !fits(pads);
        let pad = match same {
            true => Padding::Same,
            false if pads == [[0; 2]; 2] => Padding::Valid,
            false => Padding::Explicit(pads),
        };
        let window = Window::new([h, w], size, stride, dilation, same, pads);
        let name = self.name(i);
        if kind == 0 {
            let o = self.rng.range(1, 4);
            let f = self.input(&[size[0], size[1], shape[3], o]).await?;
            let g = registered(
                "conv2d",
                self.g(i)
                    .conv2d(&self.g(f), stride, pad, DataFormat::Nhwc, dilation),
            )?;
            let t = self.t(i).conv2d(self.t(f), &window);
            let desc = format!(
                "conv2d({name}, {}, {stride:?}, {pad:?}, {dilation:?})",
                self.name(f)
            );
            return self.push(g, t, desc, &["conv2d"], &[i, f]);
        }
        if kind == 4 {
            let m = self.rng.range(1, 2);
            let f = self.input(&[size[0], size[1], shape[3], m]).await?;
            let g = registered(
                "depthwiseConv2d",
                self.g(i)
                    .depthwise_conv2d(&self.g(f), stride, pad, DataFormat::Nhwc, dilation),
            )?;
            // The reference: a conv2d whose filter reads each channel's
            // own `m` outputs only.
            let t = self.t(i).conv2d(&self.t(f).block_diagonal(), &window);
            let desc = format!(
                "depthwiseConv2d({name}, {}, {stride:?}, {pad:?}, {dilation:?})",
                self.name(f)
            );
            return self.push(g, t, desc, &["depthwiseConv2d"], &[i, f]);
        }
        let (max, op) = match kind {
            1 => (true, "maxPool"),
            _ => (false, "avgPool"),
        };
        let g = match max {
            true => self.g(i).max_pool(size, stride, pad),
            false => self.g(i).avg_pool(size, stride, pad),
        };
        let g = registered(op, g)?;
        let t = self.t(i).pool(max, &window);
        let desc = format!("{op}({name}, {size:?}, {stride:?}, {pad:?})");
        self.push(g, t, desc, &[op], &[i])
    }

    async fn op_matmul(&mut self) -> Result<usize, String> {
        let mut i = self.pick()?;
        // Make it a matrix: [] -> [1, 1], [n] -> [1, n] or [n, 1].
        match self.t(i).shape().len() {
            0 => {
                let g = registered("reshape", self.g(i).reshape(&[1, 1]))?;
                let r = self.t(i).view(|v| v.reshape(&[1, 1]));
                let desc = format!("reshape({}, [1, 1])", self.name(i));
                i = self.push(g, r, desc, &["reshape"], &[i])?;
            }
            1 => {
                let axis = self.rng.pick(&[0isize, -1]);
                let g = registered("expand_dims", self.g(i).expand_dims(axis))?;
                let r = self.t(i).view(|v| v.expand_dims(axis));
                let desc = format!("expand_dims({}, {axis})", self.name(i));
                i = self.push(g, r, desc, &["expandDims"], &[i])?;
            }
            _ => {}
        }
        let shape = self.shape(i);
        let r = shape.len();
        let (rows, cols) = (shape[r - 2], shape[r - 1]);
        let on_the_left = self.rng.chance(0.6);
        // The other operand: [batch', k, n] or [batch', m, k].
        let fits = |s: &[usize]| {
            s.len() >= 2
                && broadcastable(&s[..s.len() - 2], &shape[..r - 2])
                && if on_the_left {
                    s[s.len() - 2] == cols
                } else {
                    s[s.len() - 1] == rows
                }
        };
        let existing: Vec<usize> = (0..self.nodes.len())
            .filter(|&j| fits(self.t(j).shape()) && self.nodes[j].gpu.dtype() == DType::Float32)
            .collect();
        let other = if !existing.is_empty() && self.rng.chance(0.3) {
            self.rng.pick(&existing)
        } else {
            let mut s = if r > 2 || self.rng.chance(0.3) {
                self.compatible_shape(&shape[..r - 2])
            } else {
                vec![]
            };
            let free = self.rng.range(1, 6);
            if on_the_left {
                s.extend([cols, free]);
            } else {
                s.extend([free, rows]);
            }
            self.input(&s).await?
        };
        let (a, b) = if on_the_left { (i, other) } else { (other, i) };
        let g = registered("matmul", self.g(a).matmul(&self.g(b)))?;
        let t = self.t(a).matmul(self.t(b));
        let desc = format!("matmul({}, {})", self.name(a), self.name(b));
        self.push(g, t, desc, &["matmul"], &[a, b])
    }

    async fn op_join(&mut self) -> Result<usize, String> {
        let i = self.pick()?;
        let shape = self.shape(i);
        let rank = shape.len();
        let count = if self.rng.chance(0.2) {
            self.rng.range(4, 10)
        } else {
            self.rng.range(2, 3)
        };
        let stack = rank == 0 || self.rng.chance(0.4);
        let mut parts = vec![i];
        if stack {
            let axis = self.rng.range(0, rank);
            let axis = maybe_negative(&mut self.rng, axis, rank + 1);
            while parts.len() < count {
                let same: Vec<usize> = (0..self.nodes.len())
                    .filter(|&j| self.t(j).shape() == shape.as_slice())
                    .collect();
                let p = if self.rng.chance(0.5) {
                    let j = self.rng.pick(&same);
                    self.float(j)?
                } else {
                    self.input(&shape).await?
                };
                parts.push(p);
            }
            self.rng.shuffle(&mut parts);
            let gs: Vec<Tensor> = parts.iter().map(|&p| self.g(p)).collect();
            let refs: Vec<&Tensor> = gs.iter().collect();
            let g = registered("stack", self.gpu.stack(&refs, axis))?;
            let ts: Vec<&Tracked> = parts.iter().map(|&p| self.t(p)).collect();
            let t = Tracked::stack(&ts, axis);
            let names: Vec<String> = parts.iter().map(|&p| self.name(p)).collect();
            let desc = format!("stack([{}], {axis})", names.join(", "));
            // One expandDims per piece, then a cat.
            let mut ops = vec!["expandDims"; parts.len()];
            ops.push("cat");
            return self.push(g, t, desc, &ops, &parts);
        }
        let a = self.rng.below(rank);
        let axis = maybe_negative(&mut self.rng, a, rank);
        while parts.len() < count {
            let matching: Vec<usize> = (0..self.nodes.len())
                .filter(|&j| {
                    let s = self.t(j).shape();
                    s.len() == rank && (0..rank).all(|d| d == a || s[d] == shape[d])
                })
                .collect();
            let p = if self.rng.chance(0.5) {
                let j = self.rng.pick(&matching);
                self.float(j)?
            } else {
                let mut s = shape.clone();
                s[a] = if self.zero_dims && self.rng.chance(0.2) {
                    0
                } else {
                    self.rng.range(1, 4)
                };
                self.input(&s).await?
            };
            parts.push(p);
        }
        self.rng.shuffle(&mut parts);
        let gs: Vec<Tensor> = parts.iter().map(|&p| self.g(p)).collect();
        let refs: Vec<&Tensor> = gs.iter().collect();
        let g = registered("cat", self.gpu.cat(&refs, axis))?;
        let ts: Vec<&Tracked> = parts.iter().map(|&p| self.t(p)).collect();
        let t = Tracked::cat(&ts, axis);
        let names: Vec<String> = parts.iter().map(|&p| self.name(p)).collect();
        let desc = format!("cat([{}], {axis})", names.join(", "));
        self.push(g, t, desc, &["cat"], &parts)
    }

    /// Builds the whole graph: inputs, then 3–12 ops.
    async fn build(&mut self) -> Result<(), String> {
        for _ in 0..self.rng.range(1, 3) {
            let s = self.random_shape();
            self.input(&s).await?;
        }
        for _ in 0..self.rng.range(3, 12) {
            let family = self.rng.below(100);
            let out = match family {
                0..17 => self.op_unary()?,
                17..20 => self.op_many_inputs()?,
                20..32 => self.op_scalar()?,
                32..50 => self.op_binary().await?,
                50..54 => self.op_where().await?,
                54..72 => self.op_view()?,
                72..82 => self.op_reduce()?,
                82..88 => self.op_argmax_or_softmax()?,
                88..93 => self.op_matmul().await?,
                93..95 => self.op_window().await?,
                95..97 => self.op_ints().await?,
                97..99 => self.op_indexing().await?,
                _ => self.op_join().await?,
            };
            self.tame(out)?;
        }
        let last = self.nodes.len() - 1;
        if !self.checked.contains(&last) {
            self.checked.push(last);
        }
        Ok(())
    }
}

async fn read(t: &Tensor, what: &str) -> Result<Vec<f32>, String> {
    t.to_vec()
        .await
        .map_err(|e| format!("reading {what} failed: {e}"))
}

/// A description of the graph a seed builds (for reading a failure).
pub async fn describe_graph(gpu: &Device, seed: u64) -> String {
    let mut b = Builder::new(gpu, seed);
    let built = b.build().await;
    let mut out = b.chain.join("\n");
    if let Err(e) = built {
        out.push_str(&format!("\nstopped: {e}"));
    }
    out
}

/// Builds the graph of `seed` on `gpu` and on the reference, reads every
/// checked tensor and compares it with the reference within the tolerances
/// documented at the top of this module. The error names the seed, the op
/// chain and the first element out of tolerance.
pub async fn check_graph(gpu: &Device, seed: u64) -> Result<(), String> {
    let mut b = Builder::new(gpu, seed);
    let built = b.build().await;
    let chain = b.chain.join("\n  ");
    let fail = |msg: String| format!("seed {seed}: {msg}\nop chain:\n  {chain}");
    built.map_err(fail)?;
    let checks: Vec<(String, Tensor, Tracked)> = b
        .checked
        .iter()
        .map(|&i| {
            let n = &b.nodes[i];
            (n.line.clone(), n.gpu.clone(), n.t.clone())
        })
        .collect();
    // Drop the unchecked intermediates: the library need not write them.
    drop(b);
    for (line, t, expected) in &checks {
        let got = t
            .to_vec()
            .await
            .map_err(|e| fail(format!("reading {line} failed: {e}")))?;
        compare(&got, expected).map_err(|m| fail(format!("{line}: {m}")))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Failures in random graphs

/// Ops that make no kernel of their own: views (index maps), host uploads,
/// and the copy a read makes. Every other op an injected fault can hit.
const NO_KERNEL: &[&str] = &[
    "tensor",
    "randomUniform",
    "randomNormal",
    "transpose",
    "slice",
    "broadcastTo",
    "reshape",
    "expandDims",
    "squeeze",
    "copy",
];

/// What one seed of [`check_graph_with_faults`] did.
#[derive(Debug, Default, Clone)]
pub struct FaultRun {
    /// The ops faults were injected into (none, one or two).
    pub injected: Vec<String>,
    /// Whether a branch past the device's buffer limits was added.
    pub refused: bool,
    /// Checked tensors read, and how many of them rejected.
    pub reads: usize,
    pub rejected: usize,
}

/// A node of a graph under failure: what the oracle needs of it.
struct Site {
    line: String,
    shape: Vec<usize>,
    ops: Vec<&'static str>,
    inputs: Vec<usize>,
    /// The reference; `None` for nodes too large to compute on the CPU
    /// (they depend on the refused allocation, so they must not read).
    expected: Option<Tracked>,
    gpu: Option<Tensor>,
    /// Queued when the fault was injected (not run by a read while building).
    queued: bool,
}

struct Sites {
    sites: Vec<Site>,
}

impl Sites {
    fn push(
        &mut self,
        gpu: Result<Tensor, RegistrationError>,
        desc: String,
        ops: &[&'static str],
        inputs: &[usize],
    ) -> Result<usize, String> {
        let i = self.sites.len();
        let gpu = registered(&desc, gpu)?;
        let shape = gpu.shape().to_vec();
        self.sites.push(Site {
            line: format!("t{i} = {desc} -> {shape:?}"),
            shape,
            ops: ops.to_vec(),
            inputs: inputs.to_vec(),
            expected: None,
            gpu: Some(gpu),
            queued: true,
        });
        Ok(i)
    }

    fn g(&self, i: usize) -> &Tensor {
        self.sites[i]
            .gpu
            .as_ref()
            .expect("a handle kept until the reads")
    }

    /// Node `i`, or a new node of it cast to a float where it is not one
    /// (as `Builder::float`: no op registers a cast the graph does not
    /// know of).
    fn float(&mut self, i: usize) -> Result<usize, String> {
        if self.g(i).dtype() == DType::Float32 {
            return Ok(i);
        }
        let cast = self.g(i).cast(DType::Float32);
        let j = self.push(cast, format!("cast(t{i}, float32)"), &["cast"], &[i])?;
        self.sites[j].expected = self.sites[i].expected.clone();
        Ok(j)
    }

    /// `ancestors[i][j]`: node `i` reads node `j`'s value, directly or not
    /// (every node is its own ancestor).
    fn ancestors(&self) -> Vec<Vec<bool>> {
        let n = self.sites.len();
        let mut anc = vec![vec![false; n]; n];
        for i in 0..n {
            anc[i][i] = true;
            for &j in &self.sites[i].inputs {
                // Inputs come before their readers: row `j` is complete.
                let (done, rest) = anc.split_at_mut(i);
                for (mine, &theirs) in rest[0].iter_mut().zip(&done[j]) {
                    *mine |= theirs;
                }
            }
        }
        anc
    }
}

/// Adds a branch reading node `p` through a tensor beyond `maxBufferSize`
/// (2^28 bytes on the test devices; this one has 2^30 to 2^38), reduced back
/// to `p`'s shape. Returns the over-large node, its op's library name, and
/// the node reduced back.
fn refused_branch(
    gpu: &Device,
    s: &mut Sites,
    rng: &mut Rng,
    p: usize,
) -> Result<(usize, &'static str, usize), String> {
    let p = s.float(p)?;
    let shape = s.sites[p].shape.clone();
    let n = numel(&shape);
    // Dims a 32-bit usize holds, whatever the total.
    let floats: u64 = 1 << rng.pick(&[28u32, 30, 33, 36]);
    let wide = 1usize << 10;
    let rows = floats.div_ceil((n * wide) as u64) as usize;
    let big = vec![rows, wide, n];
    let flat = s.push(
        s.g(p).reshape(&[1, 1, n as isize]),
        format!("reshape(t{p}, [1, 1, {n}])"),
        &["reshape"],
        &[p],
    )?;
    let (huge, op) = match rng.below(3) {
        0 => {
            let view = s.push(
                s.g(flat).broadcast_to(&big),
                format!("broadcast_to(t{flat}, {big:?})"),
                &["broadcastTo"],
                &[flat],
            )?;
            let op: &'static str = rng.pick(&["neg", "abs", "relu", "square", "sigmoid"]);
            let x = s.g(view);
            let t = match op {
                "neg" => x.neg(),
                "abs" => x.abs(),
                "relu" => x.relu(),
                "square" => x.square(),
                _ => x.sigmoid(),
            };
            (s.push(t, format!("{op}(t{view})"), &[op], &[view])?, op)
        }
        1 => {
            let z = s.push(gpu.zeros(&big), format!("zeros({big:?})"), &["zeros"], &[])?;
            let t = s.g(z).add(s.g(flat));
            let huge = s.push(t, format!("add(t{z}, t{flat})"), &["add"], &[z, flat])?;
            (huge, "add")
        }
        _ => {
            let view = s.push(
                s.g(flat).broadcast_to(&big),
                format!("broadcast_to(t{flat}, {big:?})"),
                &["broadcastTo"],
                &[flat],
            )?;
            let t = s.g(view).mul(s.g(flat));
            let huge = s.push(t, format!("mul(t{view}, t{flat})"), &["mul"], &[view, flat])?;
            (huge, "mul")
        }
    };
    // Read through a view, which needs `huge` in memory: a reduction could
    // otherwise compute it inline, never storing it (and never failing).
    let lifted = s.push(
        s.g(huge).expand_dims(0),
        format!("expand_dims(t{huge}, 0)"),
        &["expandDims"],
        &[huge],
    )?;
    let reduce: &'static str = rng.pick(&["sum", "mean", "max", "min"]);
    let axes: &[isize] = &[1, 2];
    let x = s.g(lifted);
    let t = match reduce {
        "sum" => x.sum(Some(axes), false),
        "mean" => x.mean(Some(axes), false),
        "max" => x.max(Some(axes), false),
        _ => x.min(Some(axes), false),
    };
    let back = s.push(
        t,
        format!("{reduce}(t{lifted}, [1, 2])"),
        &[reduce],
        &[lifted],
    )?;
    let dims: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    let back = s.push(
        s.g(back).reshape(&dims),
        format!("reshape(t{back}, {dims:?})"),
        &["reshape"],
        &[back],
    )?;
    Ok((huge, op, back))
}

/// The refused branch of [`refused_branch`] on a random node of the graph
/// (its first `graph` nodes), combined with another node; its over-large
/// node and what reads its failure are checked. `None` when every node is
/// empty.
fn add_refused(
    gpu: &Device,
    s: &mut Sites,
    rng: &mut Rng,
    checked: &mut Vec<usize>,
    graph: usize,
) -> Result<Option<(usize, &'static str)>, String> {
    let sources: Vec<usize> = (0..graph)
        .filter(|&i| numel(&s.sites[i].shape) > 0)
        .collect();
    if sources.is_empty() {
        return Ok(None);
    }
    let p = rng.pick(&sources);
    let (huge, op, back) = refused_branch(gpu, s, rng, p)?;
    let shape = s.sites[back].shape.clone();
    let partners: Vec<usize> = (0..graph)
        .filter(|&q| {
            let sq = &s.sites[q].shape;
            broadcastable(sq, &shape) && numel(&broadcast_shapes(sq, &shape)) <= MAX_ELEMENTS
        })
        .collect();
    let q = if partners.is_empty() {
        p
    } else {
        rng.pick(&partners)
    };
    let q = s.float(q)?;
    let case: &'static str = rng.pick(&["add", "mul", "maximum"]);
    let (x, y) = if rng.chance(0.5) {
        (back, q)
    } else {
        (q, back)
    };
    let t = match case {
        "add" => s.g(x).add(s.g(y)),
        "mul" => s.g(x).mul(s.g(y)),
        _ => s.g(x).maximum(s.g(y)),
    };
    let joined = s.push(t, format!("{case}(t{x}, t{y})"), &[case], &[x, y])?;
    checked.extend([huge, joined]);
    if rng.chance(0.4) {
        checked.push(back);
    }
    Ok(Some((huge, op)))
}

/// Where a fault can go: `(node, op)` for a node of the graph (its first
/// `graph` nodes) still queued, non-empty, whose `op` runs in a kernel and
/// is the only op of that name (so the first kernel computing `op` is this
/// node's), and which some checked node reads without also reading the
/// refused allocation.
fn fault_sites(
    s: &Sites,
    anc: &[Vec<bool>],
    checked: &[usize],
    graph: usize,
    refused: Option<usize>,
) -> Vec<(usize, &'static str)> {
    // Over every node, not only the queued ones: a node that ran while
    // building may be an expression, computed again by a later kernel.
    let mut count: std::collections::BTreeMap<&str, usize> = Default::default();
    for site in &s.sites {
        for &op in &site.ops {
            *count.entry(op).or_default() += 1;
        }
    }
    let mut out = Vec::new();
    for i in 0..graph {
        let site = &s.sites[i];
        let empty = |j: usize| numel(&s.sites[j].shape) == 0;
        if !site.queued || empty(i) || site.inputs.iter().any(|&j| empty(j)) {
            continue;
        }
        let observed = checked
            .iter()
            .any(|&c| anc[c][i] && refused.is_none_or(|h| !anc[c][h]));
        if !observed {
            continue;
        }
        for &op in &site.ops {
            if webfusion::op_names().contains(&op) && !NO_KERNEL.contains(&op) && count[op] == 1 {
                out.push((i, op));
            }
        }
    }
    out
}

/// One failure a graph is made to have.
#[derive(Debug, Clone, Copy)]
struct Failing {
    /// The node whose op fails.
    node: usize,
    /// That op's library name.
    op: &'static str,
    /// `Injected` (a fault in the op's kernel) or `Allocation` (the op's
    /// block is past the buffer limits).
    kind: FailureKind,
}

impl Failing {
    /// Whether every read of a tensor that depends on it must reject. A
    /// refused allocation fails each time its op is computed; an injected
    /// fault fails one kernel, and a value that kernel computed inline
    /// without storing it (an expression) is computed again, correctly,
    /// by the next kernel that needs it: failures follow values.
    fn sticky(&self) -> bool {
        self.kind != FailureKind::Injected
    }

    fn describe(&self) -> String {
        match self.kind {
            FailureKind::Injected => format!("the fault in `{}` (t{})", self.op, self.node),
            _ => format!("the refused allocation of `{}` (t{})", self.op, self.node),
        }
    }

    /// Whether `report` is this failure's.
    fn matches(&self, report: &Report) -> bool {
        report.root.kind == self.kind
            && match self.kind {
                FailureKind::Injected => report.root.op == self.op,
                // The root names the whole block: `zeros+add`.
                _ => report.root.op.split('+').any(|o| o == self.op),
            }
    }
}

/// The failures of one graph, and what each read must say about them.
struct Oracle {
    failing: Vec<Failing>,
    /// The id each failure was reported under, once seen.
    ids: Vec<Option<FailureId>>,
    /// Reads that rejected soundly but left out a failure they depend on.
    incomplete: Vec<String>,
}

impl Oracle {
    fn new(failing: Vec<Failing>) -> Oracle {
        let ids = vec![None; failing.len()];
        Oracle {
            failing,
            ids,
            incomplete: Vec::new(),
        }
    }

    /// Checks the read of node `c`; says whether it rejected.
    fn check(
        &mut self,
        s: &Sites,
        anc: &[Vec<bool>],
        c: usize,
        read: Result<Vec<f32>, TensorError>,
    ) -> Result<bool, String> {
        let line = &s.sites[c].line;
        let reached: Vec<usize> = (0..self.failing.len())
            .filter(|&k| anc[c][self.failing[k].node])
            .collect();
        let error = match read {
            Ok(got) => {
                if let Some(&k) = reached.iter().find(|&&k| self.failing[k].sticky()) {
                    return Err(format!(
                        "{line} read normally, though it depends on {}",
                        self.failing[k].describe()
                    ));
                }
                let expected = s.sites[c]
                    .expected
                    .as_ref()
                    .ok_or_else(|| format!("{line} has no reference"))?;
                compare(&got, expected).map_err(|m| format!("{line}: {m}"))?;
                return Ok(false);
            }
            Err(error) => error,
        };
        if reached.is_empty() {
            return Err(format!(
                "{line} depends on no failed op, yet its read rejected:\n{error}"
            ));
        }
        let bad = |why: String| format!("{line}: {why}\nthe read's error:\n{error}");
        if error.failures.is_empty() {
            return Err(bad("rejected without a report".to_string()));
        }
        let mut reported = Vec::new();
        for report in &error.failures {
            let Some(k) = (0..self.failing.len()).find(|&k| self.failing[k].matches(report)) else {
                return Err(bad(format!(
                    "a report of a failure the graph does not have: {:?} at `{}`",
                    report.root.kind, report.root.op
                )));
            };
            let failing = self.failing[k];
            if !reached.contains(&k) {
                return Err(bad(format!(
                    "it reports {}, which it does not depend on",
                    failing.describe()
                )));
            }
            if reported.contains(&k) {
                return Err(bad(format!("{} is reported twice", failing.describe())));
            }
            reported.push(k);
            let first = *self.ids[k].get_or_insert(report.failure);
            if first != report.failure {
                return Err(bad(format!(
                    "{} is {} here and {first} in an earlier read",
                    failing.describe(),
                    report.failure
                )));
            }
            if report.carriers == 0 {
                return Err(bad("a report carried by no buffer".to_string()));
            }
            // Depth 0 only where the failed op's output is this node (the
            // last of the node's ops); every op between adds one.
            let own = c == failing.node && s.sites[c].ops.last() == Some(&failing.op);
            if own && report.depth != 0 {
                return Err(bad(format!(
                    "depth {} on the failed op's own output",
                    report.depth
                )));
            }
            if !own && report.depth == 0 {
                return Err(bad(format!(
                    "depth 0 for {}, though ops were skipped below it",
                    failing.describe()
                )));
            }
        }
        // Each failure it depends on, not only the first the runtime met
        // (contract items 4 and 5). Noted, and the seed's other checks go on.
        for &k in &reached {
            if self.failing[k].sticky() && !reported.contains(&k) {
                self.incomplete.push(format!(
                    "{line}: {} is not reported, though it depends on it; the read's \
                     error:\n{error}",
                    self.failing[k].describe()
                ));
            }
        }
        Ok(true)
    }

    /// Checks what `sync()` said after the reads: each failure once.
    fn check_sync(
        &self,
        synced: Result<(), ExecutionError>,
        all_held_are_read: bool,
    ) -> Result<(), String> {
        let summaries = match synced {
            Ok(()) => Vec::new(),
            Err(e) => e.failures,
        };
        let mut named = vec![false; self.failing.len()];
        for f in &summaries {
            let report = Report {
                failure: f.failure,
                carriers: 0,
                depth: 0,
                chain: Vec::new(),
                dropped: 0,
                root: f.root.clone(),
            };
            let k = (0..self.failing.len())
                .find(|&k| self.failing[k].matches(&report) && !named[k])
                .ok_or_else(|| format!("sync() names an unexpected failure: {f:?}"))?;
            named[k] = true;
            if let Some(id) = self.ids[k]
                && id != f.failure
            {
                return Err(format!(
                    "sync() names {} for {}, the reads named {id}",
                    f.failure,
                    self.failing[k].describe()
                ));
            }
        }
        if let Some(k) = named.iter().position(|&n| !n) {
            return Err(format!(
                "sync() does not name {}: {summaries:?}",
                self.failing[k].describe()
            ));
        }
        // A failure lands on a tensor something reads: a written output
        // that is read or held, or an expression's input. (A tensor held
        // but never read may be the only one.)
        if let Some(k) = self.ids.iter().position(Option::is_none)
            && all_held_are_read
        {
            return Err(format!(
                "no read reported {}, though it happened",
                self.failing[k].describe()
            ));
        }
        Ok(())
    }
}

/// Ops registered on checked tensors after their graph ran (and failed):
/// 1–3 of them, on the tensors `held`. A failure must reach them through
/// the later flush too.
fn late_ops(s: &mut Sites, rng: &mut Rng, held: &[usize]) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for _ in 0..rng.range(1, 3) {
        let c = rng.pick(held);
        let c = s.float(c)?;
        let x = s.g(c).clone();
        let t = s.sites[c].expected.clone();
        let partners: Vec<usize> = held
            .iter()
            .copied()
            .filter(|&d| {
                let (sc, sd) = (&s.sites[c].shape, &s.sites[d].shape);
                // Checked in usize arithmetic that cannot overflow: an
                // over-large node has 2^36 elements, past a 32-bit usize.
                broadcastable(sc, sd)
                    && broadcast_shapes(sc, sd)
                        .iter()
                        .try_fold(1usize, |n, &d| n.checked_mul(d))
                        .is_some_and(|n| n <= MAX_ELEMENTS)
            })
            .collect();
        let late = match rng.below(4) {
            0 => {
                let r = t.map(|t| t.unary(t.val.neg(), |v| -v, Rule::Corners, EXACT));
                let i = s.push(x.neg(), format!("neg(t{c})"), &["neg"], &[c])?;
                s.sites[i].expected = r;
                i
            }
            1 => {
                let k = rng.pick(&[0.5f32, -1.0, 2.0]);
                let r = t.map(|t| {
                    let val = t.val.add(RefOperand::Scalar(k));
                    t.binary(
                        &Tracked::exact(Ref::scalar(k)),
                        val,
                        |a, b| a + b,
                        Rule::Corners,
                        ARITH,
                    )
                });
                let i = s.push(x.add(k), format!("add(t{c}, {k})"), &["add"], &[c])?;
                s.sites[i].expected = r;
                i
            }
            2 if !partners.is_empty() => {
                let d = rng.pick(&partners);
                let d = s.float(d)?;
                let r = match (&t, &s.sites[d].expected) {
                    (Some(a), Some(b)) => {
                        let val = a.val.mul(RefOperand::Tensor(&b.val));
                        Some(a.binary(b, val, |a, b| a * b, Rule::Corners, ARITH))
                    }
                    _ => None,
                };
                let y = s.g(d).clone();
                let i = s.push(x.mul(&y), format!("mul(t{c}, t{d})"), &["mul"], &[c, d])?;
                s.sites[i].expected = r;
                i
            }
            _ => {
                let r = t.map(|t| t.sum(None, false));
                let i = s.push(x.sum(None, false), format!("sum(t{c})"), &["sum"], &[c])?;
                s.sites[i].expected = r;
                i
            }
        };
        out.push(late);
    }
    Ok(out)
}

/// Builds the graph of `seed` as [`check_graph`] does, then (from a second
/// PRNG stream, so the graph is the same) sometimes adds a branch that
/// allocates past the device's limits, injects a fault into the first
/// kernel computing an op that only one queued node has (sometimes a second
/// one, into a node independent of the first), and reads the checked
/// tensors; then registers a few ops on them (a later flush) and reads
/// those.
///
/// The oracle (contract items 4–7 and 10): a tensor that depends on no
/// failure reads the reference's values. One that depends on the refused
/// allocation rejects with a report for it; one that depends only on an
/// injected fault either rejects with it or, when the faulted kernel
/// computed its value inline without storing it, reads the reference's
/// values (computed again). A read reports only failures it depends on:
/// `injected` rooted at the faulted op, `allocation` rooted at a block that
/// holds the over-large op; depth 0 on the failed op's own output, at least
/// 1 below it; one failure id per failure across all reads. Then `sync()`
/// names each failure once, some read has reported each, and once every
/// tensor is dropped the device holds no failure and no more bytes than
/// before.
pub async fn check_graph_with_faults(gpu: &Device, seed: u64) -> Result<FaultRun, String> {
    let _ = gpu.sync().await;
    let before = gpu.stats();
    let mut b = Builder::new(gpu, seed);
    if let Err(e) = b.build().await {
        let chain = b.chain.join("\n  ");
        return Err(format!("seed {seed}: {e}\nop chain:\n  {chain}"));
    }
    let graph = b.nodes.len();
    let flushed = b.flushed;
    let mut checked = b.checked.clone();
    let mut s = Sites {
        sites: b
            .nodes
            .drain(..)
            .enumerate()
            .map(|(i, n)| Site {
                line: n.line,
                shape: n.t.shape().to_vec(),
                ops: n.ops,
                inputs: n.inputs,
                expected: Some(n.t),
                gpu: Some(n.gpu),
                queued: i >= flushed,
            })
            .collect(),
    };
    drop(b);

    let mut rng = Rng::new(seed ^ 0xFA17_5EED_D15E_A5E5);
    for i in flushed..graph {
        if !checked.contains(&i) && rng.chance(0.1) {
            checked.push(i);
        }
    }
    let mut refused = None;
    if rng.chance(0.35) {
        refused = add_refused(gpu, &mut s, &mut rng, &mut checked, graph)?;
    }
    let mut anc = s.ancestors();
    let mut sites = fault_sites(&s, &anc, &checked, graph, refused.map(|r| r.0));
    if sites.is_empty() && refused.is_none() {
        refused = add_refused(gpu, &mut s, &mut rng, &mut checked, graph)?;
        anc = s.ancestors();
        sites = fault_sites(&s, &anc, &checked, graph, refused.map(|r| r.0));
    }
    let kinds = [
        FaultKind::Validation,
        FaultKind::OutOfMemory,
        FaultKind::Internal,
    ];
    let mut targets: Vec<(usize, &'static str, FaultKind)> = Vec::new();
    if !sites.is_empty() {
        let (i, op) = rng.pick(&sites);
        targets.push((i, op, rng.pick(&kinds)));
        // Sometimes a second fault, in a node independent of the first.
        let others: Vec<(usize, &'static str)> = sites
            .iter()
            .copied()
            .filter(|&(j, o)| o != op && j != i && !anc[i][j] && !anc[j][i])
            .collect();
        if !others.is_empty() && rng.chance(0.3) {
            let (j, o) = rng.pick(&others);
            targets.push((j, o, rng.pick(&kinds)));
        }
    }
    for &(i, _, _) in &targets {
        if !checked.contains(&i) && rng.chance(0.3) {
            checked.push(i);
        }
    }
    checked.sort_unstable();
    checked.dedup();

    let mut lines: Vec<String> = s.sites.iter().map(|site| site.line.clone()).collect();
    if flushed > 0 {
        lines.insert(
            flushed,
            format!("-- t0..t{} ran while building", flushed - 1),
        );
    }
    for &(i, op, kind) in &targets {
        lines.push(format!(
            "fault: {} into the 1st kernel computing `{op}` (t{i})",
            kind.name()
        ));
    }
    if let Some((h, op)) = refused {
        lines.push(format!("refused: t{h} (`{op}`) is past maxBufferSize"));
    }
    let names: Vec<String> = checked.iter().map(|c| format!("t{c}")).collect();
    lines.push(format!("checked: {}", names.join(", ")));
    let mut description = lines.join("\n  ");
    let fail =
        |description: &str, msg: String| format!("seed {seed}: {msg}\ngraph:\n  {description}");

    // The tensor of each faulted op stays held to the end, read or not: a
    // failure rooted at an op must hold for that op's tensor, however the
    // kernel that failed computed it (issue 19: an expression computed
    // inline was computed again by a later read, and resolved).
    let faulted: Vec<(usize, &'static str, Tensor)> = targets
        .iter()
        .filter_map(|&(i, op, _)| Some((i, op, s.sites[i].gpu.clone()?)))
        .collect();
    // Besides the checked tensors, a random third of the others stays held
    // (as a program keeps intermediates in variables), each dropped after a
    // random read: holding a tensor must not change any value or failure.
    let mut order = checked.clone();
    rng.shuffle(&mut order);
    let mut drops: Vec<Vec<Tensor>> = vec![Vec::new(); order.len() + 1];
    let mut held = Vec::new();
    for (i, site) in s.sites.iter_mut().enumerate() {
        if checked.contains(&i) {
            continue;
        }
        if let Some(t) = site.gpu.take()
            && rng.chance(0.33)
        {
            held.push(format!("t{i}"));
            drops[rng.below(order.len() + 1)].push(t);
        }
    }
    if !held.is_empty() {
        description.push_str(&format!("\n  also held: {}", held.join(", ")));
    }
    for &(_, op, kind) in &targets {
        gpu.inject_fault(op, 1, kind).map_err(|e| {
            fail(
                &description,
                format!("inject_fault({op}, 1) was refused: {e}"),
            )
        })?;
    }

    let mut run = FaultRun {
        injected: targets.iter().map(|t| t.1.to_string()).collect(),
        refused: refused.is_some(),
        ..FaultRun::default()
    };
    let mut failing: Vec<Failing> = targets
        .iter()
        .map(|&(node, op, _)| Failing {
            node,
            op,
            kind: FailureKind::Injected,
        })
        .collect();
    failing.extend(refused.map(|(node, op)| Failing {
        node,
        op,
        kind: FailureKind::Allocation,
    }));
    let mut oracle = Oracle::new(failing);
    for (k, &c) in order.iter().enumerate() {
        drops[k].clear();
        let read = s.g(c).to_vec().await;
        run.reads += 1;
        let rejected = oracle
            .check(&s, &anc, c, read)
            .map_err(|m| fail(&description, m))?;
        run.rejected += usize::from(rejected);
    }

    // A later flush: ops on what was read, failed or not.
    let late = late_ops(&mut s, &mut rng, &checked).map_err(|m| fail(&description, m))?;
    for &i in &late {
        description.push_str(&format!("\n  later: {}", s.sites[i].line));
    }
    anc = s.ancestors();
    for &c in &late {
        let read = s.g(c).to_vec().await;
        run.reads += 1;
        let rejected = oracle
            .check(&s, &anc, c, read)
            .map_err(|m| fail(&description, m))?;
        run.rejected += usize::from(rejected);
    }

    for (i, op, t) in faulted {
        let read = t.to_vec().await;
        run.reads += 1;
        if let Ok(values) = &read {
            let msg = format!(
                "t{i}, the tensor of the faulted `{op}`, read {values:?}, though a fault was injected into its op"
            );
            return Err(fail(&description, msg));
        }
        let rejected = oracle
            .check(&s, &anc, i, read)
            .map_err(|m| fail(&description, m))?;
        run.rejected += usize::from(rejected);
    }

    drop((s, drops));
    oracle
        .check_sync(gpu.sync().await, held.is_empty())
        .map_err(|m| fail(&description, m))?;
    let after = gpu.stats();
    if after.failures_held != 0 {
        let msg = format!(
            "{} failure(s) still held once every tensor was dropped",
            after.failures_held
        );
        return Err(fail(&description, msg));
    }
    if after.bytes_in_use != before.bytes_in_use {
        let msg = format!(
            "{} bytes in use once every tensor was dropped, {} before the graph",
            after.bytes_in_use, before.bytes_in_use
        );
        return Err(fail(&description, msg));
    }
    if after.uncaptured_errors != before.uncaptured_errors {
        let msg = format!(
            "{} GPU error(s) no scope caught",
            after.uncaptured_errors - before.uncaptured_errors
        );
        return Err(fail(&description, msg));
    }
    if let Some(first) = oracle.incomplete.first() {
        let msg = format!(
            "{} read(s) left out a failure they depend on; the first: {first}",
            oracle.incomplete.len()
        );
        return Err(fail(&description, msg));
    }
    Ok(run)
}
