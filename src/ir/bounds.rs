//! What an op's values provably lie within, so the numerics checks skip an
//! op that cannot make a non-finite value (`DeviceOptions::check_numerics`).
//!
//! A check costs a software adapter about as much as the op it checks, so
//! checking every `add` of a chain on values in [-1, 1] doubles its time for
//! nothing: no sum of two such values can overflow. The bounds are derived
//! at registration, where every operand's record is at hand, from the
//! values the program gave (an upload is looked at, a fill or scalar is its
//! number) through each op's interval rule, and an op whose bounds prove it
//! finite (`Derived::proven`) is not checked, in a kernel or on the host.
//!
//! The invariant every rule keeps: each value the GPU or the host computes
//! for the op lies within the bounds, whatever the rounding. So each rule
//! widens what it computes in f64 (`widened`): relatively, by far more than
//! float32's rounding, and for the approximate built-ins (`exp`, `tanh`,
//! `log`: WGSL allows them thousands of ulps near the edges of their
//! range) by an absolute margin too; a sign is never widened across zero
//! where the op keeps it exactly (a sum of non-negative values, an `exp`).
//! A bound proves finiteness only well inside float32's range (`SAFE`),
//! and a domain (a `log`'s, a divisor's) only away from zero by more than
//! the largest value a GPU may flush to zero (`TINY`). A rule that cannot
//! say gives `None`: the op is checked, as without bounds. Being wrong
//! here would let a non-finite value pass unflagged; being loose costs only
//! a check.

use super::shape;
use super::{
    BinaryOp, ConvGeometry, DType, Distribution, OpIr, OpKind, PoolOp, ReduceOp, ScanOp, UnaryOp,
};

/// A closed interval holding every value of a tensor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    pub lo: f64,
    pub hi: f64,
}

/// Past this magnitude a bound proves nothing: float32 overflows at 3.4e38,
/// eight orders of magnitude above, far beyond any rule's rounding.
const SAFE: f64 = 1e30;

/// The smallest magnitude a divisor or a `log`'s operand may have for its
/// op to be proven: a GPU may flush float32's subnormals (below 1.2e-38)
/// to zero, so a bound just above zero does not keep a value from zero.
const TINY: f64 = 1e-30;

/// The relative margin every computed bound is widened by: float32 rounds
/// by 6e-8 per op, and a sum of k terms by k times that at most.
const ROUNDING: f64 = 1e-5;

/// The margins of an approximate built-in's result (`exp`, `log`, `tanh`,
/// `sigmoid`, `sin`, `pow`): WGSL's accuracy for them is a few ulps away
/// from their edges and an absolute 2^-21 for `log` near 1.
const APPROX_REL: f64 = 1e-3;
const APPROX_ABS: f64 = 1e-6;

impl Bounds {
    /// Every finite float32: what a checked op's value lies within (past it,
    /// the op is flagged and its value read by no one).
    pub const FINITE: Bounds = Bounds {
        lo: -(f32::MAX as f64),
        hi: f32::MAX as f64,
    };
    const INT: Bounds = Bounds {
        lo: i32::MIN as f64,
        hi: i32::MAX as f64,
    };
    const BOOL: Bounds = Bounds { lo: 0.0, hi: 1.0 };

    /// Exactly `v`; `None` where it is not finite.
    pub fn point(v: f64) -> Option<Bounds> {
        v.is_finite().then_some(Bounds { lo: v, hi: v })
    }

    /// The bounds of `words` read as `dtype`: their least and greatest where
    /// all are of one sign, else plus and minus the largest magnitude;
    /// `None` where one is not finite. An empty tensor's bounds are zero's.
    pub fn of_words(words: &[u32], dtype: DType) -> Option<Bounds> {
        if words.is_empty() {
            return Some(Bounds { lo: 0.0, hi: 0.0 });
        }
        // One pass of integer ops on the bits, no branch and no float
        // compare per value: an upload of a million floats is looked at on
        // every step of a checked loop. Magnitudes order as their bits do;
        // the signs say which side of zero the values are on (mixed signs
        // give the symmetric bound, which is all an overflow needs).
        let (lo, hi) = match dtype {
            DType::Float32 => {
                // Four lanes of accumulators, so consecutive values do not
                // wait on each other's max and min.
                let (mut most, mut least) = ([0u32; 4], [u32::MAX; 4]);
                let (mut any_sign, mut all_sign) = ([0u32; 4], [!0u32; 4]);
                let mut take = |lane: usize, w: u32| {
                    let magnitude = w & 0x7fff_ffff;
                    most[lane] = most[lane].max(magnitude);
                    least[lane] = least[lane].min(magnitude);
                    any_sign[lane] |= w;
                    all_sign[lane] &= w;
                };
                let chunks = words.chunks_exact(4);
                for &w in chunks.remainder() {
                    take(0, w);
                }
                for chunk in chunks {
                    for (lane, &w) in chunk.iter().enumerate() {
                        take(lane, w);
                    }
                }
                let most = most.into_iter().max().unwrap_or(0);
                let least = least.into_iter().min().unwrap_or(u32::MAX);
                let any_sign = any_sign.into_iter().fold(0, |a, b| a | b);
                let all_sign = all_sign.into_iter().fold(!0, |a, b| a & b);
                if super::dtype::non_finite_bits(most) {
                    return None;
                }
                let (most, least) = (
                    f64::from(f32::from_bits(most)),
                    f64::from(f32::from_bits(least)),
                );
                match (any_sign >> 31, all_sign >> 31) {
                    (0, _) => (least, most),
                    (_, 1) => (-most, -least),
                    _ => (-most, most),
                }
            }
            DType::Int32 => {
                let ints = words.iter().map(|&w| w as i32);
                let lo = ints.clone().min().unwrap_or(0);
                (f64::from(lo), f64::from(ints.max().unwrap_or(0)))
            }
            DType::Bool => (0.0, 1.0),
        };
        Some(Bounds { lo, hi })
    }

    /// Whether no value within can be taken for an overflow's result.
    pub fn proves_finite(&self) -> bool {
        self.lo >= -SAFE && self.hi <= SAFE
    }

    fn union(self, other: Bounds) -> Bounds {
        Bounds {
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
        }
    }

    fn intersect(self, other: Bounds) -> Bounds {
        Bounds {
            lo: self.lo.max(other.lo),
            hi: self.hi.min(other.hi),
        }
    }

    fn max_abs(self) -> f64 {
        self.lo.abs().max(self.hi.abs())
    }

    /// Whether every value is at least `TINY` away from zero.
    fn away_from_zero(self) -> bool {
        self.lo >= TINY || self.hi <= -TINY
    }

    /// The least and greatest of `values` (corners of a monotone function),
    /// widened relatively by `rel` (`widened`); `None` where one is NaN.
    fn hull(values: &[f64], rel: f64) -> Option<Bounds> {
        if values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        widened(lo, hi, rel, 0.0)
    }
}

/// `[lo, hi]` widened by `rel` of each end's magnitude and by `abs`, an
/// infinite end held at f64's largest (far past `SAFE`: it proves nothing,
/// and later arithmetic on it stays a number); `None` where an end is NaN.
/// A zero end widened only relatively stays zero: the rules that give one
/// keep the sign exactly.
fn widened(lo: f64, hi: f64, rel: f64, abs: f64) -> Option<Bounds> {
    let lo = (lo - lo.abs() * rel - abs).max(f64::MIN);
    let hi = (hi + hi.abs() * rel + abs).min(f64::MAX);
    (lo <= hi).then_some(Bounds { lo, hi })
}

/// How many ops bounds are carried through from the values they started
/// at (an upload's, a fill's). Past it an op's value is any finite one: a
/// loop that computes its next values from its last (weights updated by
/// hand, a recurrence) would otherwise carry bounds that grow every
/// iteration, each iteration proving a different set of ops, its kernels
/// compiled anew, until the bounds proved nothing. Deep enough for a
/// chain of elementwise ops, a layer, a softmax; a training step's update
/// is past it, so its second step runs the kernels every later one runs,
/// and a variable's value is past it from the start (a loop over
/// variables runs the same kernels from its first step).
const MAX_DEPTH: u32 = 32;

/// What the rules know of an operand: its bounds, `None` where it may hold
/// a non-finite value the program gave (a NaN in an upload), how many ops
/// they were carried through (`MAX_DEPTH`), and its shape.
pub struct Operand<'a> {
    pub bounds: Option<Bounds>,
    pub depth: u32,
    pub shape: &'a [usize],
}

impl Operand<'_> {
    /// A tensor the device has no record of: nothing known about it.
    pub const UNKNOWN: Operand<'static> = Operand {
        bounds: None,
        depth: 0,
        shape: &[],
    };
}

/// An op's bounds and whether they prove it finite.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Derived {
    /// `None` where a value may be a non-finite one of the program's own,
    /// which the checks must not blame on the op that meets it.
    pub bounds: Option<Bounds>,
    /// Its operands' bounds keep it from making a non-finite value: it
    /// needs no check (`OpIr::proven_finite`).
    pub proven: bool,
    /// The ops its bounds were carried through (`MAX_DEPTH`).
    pub depth: u32,
}

impl Derived {
    /// Finite, with nothing known of its size: an op made while nobody
    /// looked at values (an upload while the checks are off).
    pub const UNLOOKED: Derived = Derived {
        bounds: Some(Bounds::FINITE),
        proven: false,
        depth: 0,
    };
}

/// `op`'s bounds from its operands'. An op that brings a non-finite value
/// of its own, or reads one that may hold one, has none; one whose rule
/// gives no finite interval is still finite once checked (`FINITE`).
pub fn derive(op: &OpIr, operands: &[Operand<'_>]) -> Derived {
    let depth = match op.kind {
        // A variable's value: past the depth from its first step, so that
        // step proves what every later one does.
        OpKind::Copy | OpKind::Commit { .. } => MAX_DEPTH + 1,
        _ => operands.iter().map(|o| o.depth + 1).max().unwrap_or(0),
    };
    let not_finite = Derived {
        bounds: None,
        proven: false,
        depth,
    };
    if let OpKind::Upload(values) = &op.kind {
        return match Bounds::of_words(&values.words, values.dtype) {
            Some(b) => Derived {
                bounds: Some(b),
                proven: true,
                depth,
            },
            None => not_finite,
        };
    }
    if !op.kind.adds_only_finite() {
        return not_finite;
    }
    // What `checkNumerics` lets through is finite, whatever its operand
    // was (its check fails the rest). Without bounds, a NaN the page gave
    // that one step stopped would leave the values it commits, and every
    // later step's, unbounded for good, their products unchecked.
    if op.kind == OpKind::Unary(UnaryOp::CheckNumerics)
        && operands.iter().any(|o| o.bounds.is_none())
    {
        return Derived {
            bounds: Some(Bounds::FINITE),
            proven: false,
            depth,
        };
    }
    let Some(ins) = operands
        .iter()
        .map(|o| o.bounds)
        .collect::<Option<Vec<_>>>()
    else {
        return not_finite;
    };
    let shapes: Vec<&[usize]> = operands.iter().map(|o| o.shape).collect();
    let exact = match op.dtype {
        _ if depth > MAX_DEPTH => None,
        DType::Float32 => rule(op, &ins, &shapes),
        DType::Int32 => Some(Bounds::INT),
        DType::Bool => Some(Bounds::BOOL),
    };
    Derived {
        bounds: Some(exact.map_or(Bounds::FINITE, |b| b.intersect(Bounds::FINITE))),
        proven: exact.is_some_and(|b| b.proves_finite()),
        depth,
    }
}

/// The interval rule of a float-valued `op` on operands within `ins`;
/// `None` where it has none (the op is then checked where it can make a
/// non-finite value, and taken as any finite value after).
fn rule(op: &OpIr, ins: &[Bounds], shapes: &[&[usize]]) -> Option<Bounds> {
    let all = || ins.iter().copied().reduce(Bounds::union);
    let first = ins.first().copied();
    // The number of terms summed into one output from inputs of `shapes`.
    let terms_per_output = |input: &[usize]| -> f64 {
        let out = shape::numel(&op.shape);
        match out {
            0 => 0.0,
            _ => (shape::numel(input) / out) as f64,
        }
    };
    match &op.kind {
        OpKind::Upload(_) => None,
        OpKind::Random { dist, .. } => match *dist {
            Distribution::Uniform { min, max } => widened(f64::from(min), f64::from(max), 0.0, 0.0),
            // Box-Muller on a uniform no smaller than 2^-53: |z| < 8.6.
            Distribution::Normal { mean, std } => {
                let (mean, reach) = (f64::from(mean), 9.0 * f64::from(std).abs());
                widened(mean - reach, mean + reach, ROUNDING, 0.0)
            }
        },
        OpKind::Fill(v) => Bounds::point(*v),
        OpKind::Arange { start, step } => {
            let last = start + step * (shape::numel(&op.shape).max(1) - 1) as f64;
            Bounds::hull(&[*start, last], ROUNDING)
        }
        OpKind::Cast | OpKind::Gather { .. } | OpKind::Guard => first,
        OpKind::View(_) | OpKind::Cat { .. } => all(),
        // A variable's value (its first copy, each step's commit): past
        // `MAX_DEPTH` from the start (see `derive`).
        OpKind::Copy | OpKind::Commit { .. } => None,
        OpKind::Unary(u) => unary(*u, first?),
        OpKind::Binary(b) => binary(*b, *ins.first()?, *ins.get(1)?),
        OpKind::BinaryScalar {
            op: b,
            scalar,
            scalar_first,
        } => {
            let s = Bounds::point(f64::from(*scalar))?;
            match scalar_first {
                true => binary(*b, s, first?),
                false => binary(*b, first?, s),
            }
        }
        OpKind::Clamp { min, max } => {
            let x = first?;
            let clamp = |v: f64| v.max(f64::from(*min)).min(f64::from(*max));
            Some(Bounds {
                lo: clamp(x.lo),
                hi: clamp(x.hi),
            })
        }
        OpKind::Where => Some(ins.get(1)?.union(*ins.get(2)?)),
        OpKind::OneHot { on, off, .. } => Bounds::hull(&[*on, *off], 0.0),
        OpKind::Reduce { op: r, .. } => {
            let (x, n) = (first?, terms_per_output(shapes.first()?));
            match r {
                ReduceOp::Sum => widened(n * x.lo, n * x.hi, ROUNDING + n * 1e-7, 0.0),
                // Of nothing: 0 for a mean (a sum of no quotients, as
                // TF.js's), infinities for the others.
                _ if n == 0.0 => None,
                ReduceOp::Mean => widened(x.lo, x.hi, ROUNDING, 0.0),
                ReduceOp::Max | ReduceOp::Min => Some(x),
                ReduceOp::Prod => power_bound(x.max_abs(), n),
                ReduceOp::LogSumExp => {
                    widened(x.lo, x.hi + f32s(n, f32::ln), APPROX_REL, APPROX_ABS)
                }
            }
        }
        OpKind::Scan { op: s, axis, .. } => {
            let x = first?;
            let n = *shapes.first()?.get(*axis)? as f64;
            match s {
                // A prefix sums between none and all n of its terms.
                ScanOp::Sum => widened(
                    (n * x.lo).min(0.0),
                    (n * x.hi).max(0.0),
                    ROUNDING + n * 1e-7,
                    0.0,
                ),
                ScanOp::Prod => power_bound(x.max_abs(), n),
            }
        }
        OpKind::Matmul => {
            let k = *shapes.first()?.last()? as f64;
            product_bound(k, *ins.first()?, *ins.get(1)?)
        }
        // Each term of an output reads an element of either operand no
        // other term of it reads: no more terms than either has elements.
        OpKind::Conv { .. } => {
            let k = shape::numel(shapes.first()?).min(shape::numel(shapes.get(1)?)) as f64;
            product_bound(k, *ins.first()?, *ins.get(1)?)
        }
        OpKind::Pool {
            op: p,
            size,
            geometry,
        } => {
            let x = first?;
            match p {
                // A window wholly in the padding is -Infinity, as TF.js's.
                PoolOp::Max if padding_window(shapes.first()?, &op.shape, *size, geometry) => None,
                PoolOp::Max => Some(x),
                PoolOp::Avg => widened(x.lo.min(0.0), x.hi.max(0.0), ROUNDING, 0.0),
            }
        }
        // An input position gets a share of the gradient of each window
        // that holds it: at most one per tap. In floats: a window's taps
        // pass usize in wasm (a filter of 2^31 - 1, which TF.js takes).
        OpKind::PoolGrad { size, .. } => {
            let m = all()?.max_abs() * (size[0] as f64 * size[1] as f64);
            widened(-m, m, ROUNDING, 0.0)
        }
        OpKind::ArgReduce { .. } => None,
    }
}

/// Whether a pool of `size` windows over NHWC images of `input` into
/// `output` has a window that lies wholly in the padding: the first
/// window ends before the images along a dim, or the last starts after.
fn padding_window(input: &[usize], output: &[usize], size: [usize; 2], g: &ConvGeometry) -> bool {
    (0..2).any(|d| {
        let (images, windows) = (input.get(1 + d), output.get(1 + d));
        let (Some(&images), Some(&windows)) = (images, windows) else {
            return true;
        };
        let reach = size[d].saturating_sub(1) * g.dilation[d];
        let last_start = windows.saturating_sub(1) * g.stride[d];
        windows > 0 && (reach < g.pad[d] || last_start >= images + g.pad[d])
    })
}

/// A sum of `k` products of values within `a` and `b`.
fn product_bound(k: f64, a: Bounds, b: Bounds) -> Option<Bounds> {
    let m = k * a.max_abs() * b.max_abs();
    widened(-m, m, ROUNDING + k * 1e-7, 0.0)
}

/// A product of `n` values no larger than `m` in magnitude, each of its
/// n roundings a factor of at most 1 + 2^-23 (none past 1 when `m` is).
fn power_bound(m: f64, n: f64) -> Option<Bounds> {
    let p = match m <= 1.0 {
        true => 1.0,
        false => powf(m, n) * f32s(n * 1.2e-7, f32::exp),
    };
    widened(-p, p, ROUNDING, 0.0)
}

fn unary(op: UnaryOp, x: Bounds) -> Option<Bounds> {
    let approx = |lo: f64, hi: f64| widened(lo, hi, APPROX_REL, APPROX_ABS);
    match op {
        UnaryOp::Neg => Some(Bounds {
            lo: -x.hi,
            hi: -x.lo,
        }),
        UnaryOp::Abs => Some(abs(x)),
        // Positive whatever its rounding: only its top end is approximate.
        UnaryOp::Exp => widened(f32s(x.lo, f32::exp), f32s(x.hi, f32::exp), APPROX_REL, 0.0),
        UnaryOp::Log if x.lo >= TINY => approx(f32s(x.lo, f32::ln), f32s(x.hi, f32::ln)),
        UnaryOp::Sqrt if x.lo >= 0.0 => widened(x.lo.sqrt(), x.hi.sqrt(), APPROX_REL, 0.0),
        UnaryOp::Rsqrt if x.lo >= TINY => {
            widened(1.0 / x.hi.sqrt(), 1.0 / x.lo.sqrt(), APPROX_REL, 0.0)
        }
        UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Tan => None,
        UnaryOp::Square => {
            let a = abs(x);
            widened(a.lo * a.lo, a.hi * a.hi, ROUNDING, 0.0)
        }
        UnaryOp::Relu => Some(Bounds {
            lo: x.lo.max(0.0),
            hi: x.hi.max(0.0),
        }),
        // 0.5 x (1 + tanh(..)), the tanh within [-1, 1] but approximate.
        UnaryOp::Gelu => {
            let half = binary(
                BinaryOp::Mul,
                x,
                Bounds {
                    lo: -APPROX_ABS,
                    hi: 2.0 + APPROX_ABS,
                },
            )?;
            widened(half.lo * 0.5, half.hi * 0.5, APPROX_REL, APPROX_ABS)
        }
        UnaryOp::Sigmoid => approx(sigmoid(x.lo), sigmoid(x.hi)),
        UnaryOp::Tanh => approx(f32s(x.lo, f32::tanh), f32s(x.hi, f32::tanh)),
        UnaryOp::Sin | UnaryOp::Cos => approx(-1.0, 1.0),
        UnaryOp::Floor => Some(Bounds {
            lo: x.lo.floor(),
            hi: x.hi.floor(),
        }),
        UnaryOp::LogicalNot => Some(Bounds::BOOL),
        UnaryOp::CheckNumerics => Some(x),
    }
}

/// `f` computed in float32, as the host computes it: the package then
/// holds one copy of each built-in (its error, and the argument's rounding
/// to float32, are far inside `APPROX_REL`; an argument past float32's
/// range is an infinity, which proves nothing, as it should).
fn f32s(v: f64, f: fn(f32) -> f32) -> f64 {
    f64::from(f(v as f32))
}

fn powf(a: f64, b: f64) -> f64 {
    f64::from((a as f32).powf(b as f32))
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + f32s(-v, f32::exp))
}

fn abs(x: Bounds) -> Bounds {
    match (x.lo >= 0.0, x.hi <= 0.0) {
        (true, _) => x,
        (_, true) => Bounds {
            lo: -x.hi,
            hi: -x.lo,
        },
        _ => Bounds {
            lo: 0.0,
            hi: x.max_abs(),
        },
    }
}

fn binary(op: BinaryOp, a: Bounds, b: Bounds) -> Option<Bounds> {
    let corners =
        |f: fn(f64, f64) -> f64| [f(a.lo, b.lo), f(a.lo, b.hi), f(a.hi, b.lo), f(a.hi, b.hi)];
    match op {
        BinaryOp::Add => widened(a.lo + b.lo, a.hi + b.hi, ROUNDING, 0.0),
        BinaryOp::Sub => widened(a.lo - b.hi, a.hi - b.lo, ROUNDING, 0.0),
        BinaryOp::Mul => Bounds::hull(&corners(|x, y| x * y), ROUNDING),
        BinaryOp::Div if b.away_from_zero() => Bounds::hull(&corners(|x, y| x / y), ROUNDING),
        // a^b = exp(b ln a): bilinear in (b, ln a), so its extremes are at
        // the corners; a base that may be 0 or negative is checked.
        BinaryOp::Pow if a.lo >= TINY => {
            let c = corners(powf);
            let lo = c.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = c.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            widened(lo, hi, APPROX_REL, 0.0)
        }
        BinaryOp::Maximum => Some(Bounds {
            lo: a.lo.max(b.lo),
            hi: a.hi.max(b.hi),
        }),
        BinaryOp::Minimum => Some(Bounds {
            lo: a.lo.min(b.lo),
            hi: a.hi.min(b.hi),
        }),
        // C's fmod, exact, shifted into b's sign: within |b| for a finite a.
        BinaryOp::Mod if b.away_from_zero() && a.proves_finite() => Some(Bounds {
            lo: -b.max_abs(),
            hi: b.max_abs(),
        }),
        BinaryOp::FloorDiv if b.away_from_zero() => {
            let q = Bounds::hull(&corners(|x, y| x / y), ROUNDING)?;
            Some(Bounds {
                lo: q.lo.floor() - 1.0,
                hi: q.hi.floor(),
            })
        }
        BinaryOp::Div | BinaryOp::Pow | BinaryOp::Mod | BinaryOp::FloorDiv => None,
        BinaryOp::Equal
        | BinaryOp::Greater
        | BinaryOp::GreaterEqual
        | BinaryOp::Less
        | BinaryOp::LessEqual
        | BinaryOp::LogicalAnd
        | BinaryOp::LogicalOr
        | BinaryOp::LogicalXor => Some(Bounds::BOOL),
        // An int32's bits within a non-negative one's: 0 up to it.
        BinaryOp::BitwiseAnd if a.lo >= 0.0 || b.lo >= 0.0 => Some(Bounds {
            lo: 0.0,
            hi: match (a.lo >= 0.0, b.lo >= 0.0) {
                (true, true) => a.hi.min(b.hi),
                (true, false) => a.hi,
                _ => b.hi,
            },
        }),
        BinaryOp::BitwiseAnd => Some(Bounds {
            lo: f64::from(i32::MIN),
            hi: f64::from(i32::MAX),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Values;

    fn bounds(lo: f64, hi: f64) -> Option<Bounds> {
        Some(Bounds { lo, hi })
    }

    /// `kind` on operands within `ins`, each of `shape`.
    fn derived(kind: OpKind, ins: &[Option<Bounds>], shape: &[usize]) -> Derived {
        let operands: Vec<Operand<'_>> = ins
            .iter()
            .map(|&bounds| Operand {
                bounds,
                depth: 0,
                shape,
            })
            .collect();
        let inputs: Vec<u64> = (1..=ins.len() as u64).collect();
        derive(&OpIr::of(kind, &inputs, 99, shape), &operands)
    }

    fn unary_on(op: UnaryOp, lo: f64, hi: f64) -> Derived {
        derived(OpKind::Unary(op), &[bounds(lo, hi)], &[4])
    }

    #[test]
    fn an_upload_of_one_sign_is_bounded_by_its_least_and_greatest_values() {
        let positive = OpKind::Upload(Values::float32(&[0.5, 2.0, 3.0]));
        assert_eq!(derived(positive, &[], &[3]).bounds, bounds(0.5, 3.0));
        let negative = OpKind::Upload(Values::float32(&[-0.5, -2.0]));
        assert_eq!(derived(negative, &[], &[2]).bounds, bounds(-2.0, -0.5));
        // Mixed signs: the largest magnitude either way.
        let mixed = OpKind::Upload(Values::float32(&[0.5, -2.0, 3.0]));
        assert_eq!(derived(mixed, &[], &[3]).bounds, bounds(-3.0, 3.0));
        let nan = OpKind::Upload(Values::float32(&[0.5, f32::NAN]));
        assert_eq!(derived(nan, &[], &[2]).bounds, None);
    }

    #[test]
    fn ops_on_small_values_are_proven_and_their_overflowing_kin_are_not() {
        assert!(unary_on(UnaryOp::Exp, -1.0, 1.0).proven);
        assert!(!unary_on(UnaryOp::Exp, -1.0, 100.0).proven);
        assert!(unary_on(UnaryOp::Square, -1e10, 1.0).proven);
        assert!(!unary_on(UnaryOp::Square, -1e20, 1.0).proven);
        let add = |hi: f64| {
            derived(
                OpKind::Binary(BinaryOp::Add),
                &[bounds(0.0, hi), bounds(0.0, hi)],
                &[4],
            )
        };
        assert!(add(1e29).proven);
        assert!(!add(1e38).proven);
    }

    #[test]
    fn a_domain_that_reaches_zero_or_below_is_not_proven() {
        assert!(unary_on(UnaryOp::Log, 0.5, 2.0).proven);
        assert!(!unary_on(UnaryOp::Log, 0.0, 2.0).proven);
        // Small enough for a GPU to flush to zero.
        assert!(!unary_on(UnaryOp::Log, 1e-39, 2.0).proven);
        assert!(unary_on(UnaryOp::Sqrt, 0.0, 2.0).proven);
        assert!(!unary_on(UnaryOp::Sqrt, -1e-9, 2.0).proven);
        let div = |lo: f64, hi: f64| {
            derived(
                OpKind::Binary(BinaryOp::Div),
                &[bounds(-1.0, 1.0), bounds(lo, hi)],
                &[4],
            )
        };
        assert!(div(0.5, 2.0).proven);
        assert!(div(-2.0, -0.5).proven);
        assert!(!div(-1.0, 1.0).proven);
        let pow = |lo: f64| {
            derived(
                OpKind::Binary(BinaryOp::Pow),
                &[bounds(lo, 2.0), bounds(-3.0, 3.0)],
                &[4],
            )
        };
        assert!(pow(0.5).proven);
        assert!(!pow(0.0).proven);
    }

    #[test]
    fn rounding_cannot_carry_a_value_past_a_bound_that_decides_a_domain() {
        // 1 - tanh(x) may round below zero on a GPU: its sqrt is checked.
        let tanh = unary_on(UnaryOp::Tanh, -20.0, 20.0).bounds.unwrap();
        let one_minus = binary(BinaryOp::Sub, Bounds { lo: 1.0, hi: 1.0 }, tanh).unwrap();
        assert!(one_minus.lo < 0.0);
        assert!(!unary(UnaryOp::Sqrt, one_minus).is_some_and(|b| b.proves_finite()));
        // A sum of non-negative values keeps its sign exactly.
        let sq = unary_on(UnaryOp::Square, -3.0, 2.0).bounds.unwrap();
        assert_eq!(sq.lo, 0.0);
        assert!(unary(UnaryOp::Sqrt, sq).is_some());
    }

    #[test]
    fn a_product_or_reduction_is_bounded_by_its_number_of_terms() {
        let matmul = derived(
            OpKind::Matmul,
            &[bounds(-1.0, 1.0), bounds(-2.0, 2.0)],
            &[8, 8],
        );
        let b = matmul.bounds.unwrap();
        assert!(matmul.proven && b.hi >= 16.0 && b.hi < 16.1 && b.lo <= -16.0);
        let sum = OpIr::of(
            OpKind::Reduce {
                op: ReduceOp::Sum,
                axes: vec![1],
            },
            &[1],
            2,
            &[2],
        );
        let x = [Operand {
            bounds: bounds(0.0, 3.0),
            depth: 0,
            shape: &[2, 5],
        }];
        let d = derive(&sum, &x);
        assert_eq!(d.bounds.unwrap().lo, 0.0);
        assert!(d.bounds.unwrap().hi >= 15.0 && d.proven);
        let huge = [Operand {
            bounds: bounds(0.0, 1e30),
            depth: 0,
            shape: &[2, 5],
        }];
        assert!(!derive(&sum, &huge).proven);
    }

    #[test]
    fn a_value_that_may_be_non_finite_gives_no_bounds_and_proves_nothing() {
        let d = derived(OpKind::Unary(UnaryOp::Tanh), &[None], &[4]);
        assert_eq!(
            d,
            Derived {
                bounds: None,
                proven: false,
                depth: 1
            }
        );
        let nan_scalar = OpKind::BinaryScalar {
            op: BinaryOp::Add,
            scalar: f32::NAN,
            scalar_first: false,
        };
        assert_eq!(derived(nan_scalar, &[bounds(0.0, 1.0)], &[4]).bounds, None);
    }

    #[test]
    fn an_op_whose_rule_proves_nothing_is_still_finite_once_checked() {
        let d = unary_on(UnaryOp::Log, -1.0, 1.0);
        assert_eq!(
            d,
            Derived {
                bounds: Some(Bounds::FINITE),
                proven: false,
                depth: 1
            }
        );
        let d = unary_on(UnaryOp::Exp, 0.0, 1000.0);
        assert!(
            !d.proven && d.bounds.unwrap().lo > 0.99 && d.bounds.unwrap().hi == Bounds::FINITE.hi
        );
    }

    #[test]
    fn bounds_carried_through_more_than_max_depth_ops_prove_nothing() {
        let at = |depth: u32| {
            let x = [Operand {
                bounds: bounds(-1.0, 1.0),
                depth,
                shape: &[4],
            }];
            derive(&OpIr::of(OpKind::Unary(UnaryOp::Exp), &[1], 2, &[4]), &x)
        };
        assert!(at(MAX_DEPTH - 1).proven);
        let past = at(MAX_DEPTH);
        assert!(!past.proven && past.bounds == Some(Bounds::FINITE) && past.depth == MAX_DEPTH + 1);
    }
}
