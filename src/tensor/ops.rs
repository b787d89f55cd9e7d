//! Registration of every op: check the arguments, infer the output shape,
//! queue. An op that fails a check returns an error and queues nothing.

use crate::device::Device;
use crate::error::{ErrorClass, RegistrationError, number, number_f32};
use crate::ir::shape::{self, display};
use crate::ir::{
    BinaryOp, DType, Distribution, OpKind, ReduceOp, ScanOp, TensorId, UnaryOp, ViewOp,
};
use crate::tensor::{Operand, Tensor};

type Result<T> = std::result::Result<T, RegistrationError>;

pub(super) fn range(op: &'static str, reason: String) -> RegistrationError {
    RegistrationError::new(op, ErrorClass::Range, reason)
}

pub(super) fn invalid(op: &'static str, reason: String) -> RegistrationError {
    RegistrationError::new(op, ErrorClass::Other, reason)
}

/// Refuses `t` unless it is a float32: the ops TF.js defines for floats
/// only (`log`, `sqrt`, `matmul`, ...), in TF.js's words.
pub(super) fn float_only(op: &'static str, t: &Tensor) -> Result<()> {
    match t.dtype() {
        DType::Float32 => Ok(()),
        other => Err(invalid(
            op,
            format!(
                "{} must be a float32 tensor, but it is {other}; cast it first",
                t.id()
            ),
        )),
    }
}

/// Refuses `t` unless it is a bool: a logical op's operand, or a
/// condition.
fn bool_only(op: &'static str, what: &str, t: &Tensor) -> Result<()> {
    match t.dtype() {
        DType::Bool => Ok(()),
        other => Err(invalid(
            op,
            format!(
                "{what} ({}) must be a bool tensor, but it is {other}; compare it, or cast it",
                t.id()
            ),
        )),
    }
}

/// Refuses `t` unless it is an int32: indices (`gather`, `oneHot`) and
/// segment ids, which name positions, and `bitwiseAnd`'s operands.
fn int32_only(op: &'static str, what: &str, t: &Tensor) -> Result<()> {
    match t.dtype() {
        DType::Int32 => Ok(()),
        other => Err(invalid(
            op,
            format!(
                "{what} ({}) must be an int32 tensor, not {other}; cast to int32 first",
                t.id()
            ),
        )),
    }
}

/// The dtype arithmetic computes in: TF.js's upcast, except that two bools
/// add as int32s (TF.js's `maximum`, `sum` and `relu` cast a bool so, and
/// a sum of bools stored as a bool would be no number at all).
fn arithmetic(dtype: DType) -> DType {
    match dtype {
        DType::Bool => DType::Int32,
        other => other,
    }
}

/// Both operands of a matmul have rank 2 or more.
fn matmul_ranks(a: &[usize], b: &[usize]) -> Result<()> {
    if a.len() < 2 || b.len() < 2 {
        return Err(range(
            "matmul",
            format!(
                "operands need rank >= 2, got {} x {}",
                display(a),
                display(b)
            ),
        ));
    }
    Ok(())
}

/// The shape of `a @ b`: `[..batch, m, n]`, the batch dims broadcast.
fn matmul_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    matmul_ranks(a, b)?;
    let (m, k) = (a[a.len() - 2], a[a.len() - 1]);
    let (k2, n) = (b[b.len() - 2], b[b.len() - 1]);
    if k != k2 {
        return Err(invalid(
            "matmul",
            format!("inner dimensions differ: {} x {}", display(a), display(b)),
        ));
    }
    let mut shape = shape::broadcast("matmul", &a[..a.len() - 2], &b[..b.len() - 2])?;
    shape.extend([m, n]);
    Ok(shape)
}

/// `shape` with its last two dims swapped when `swap` (rank >= 2).
fn swapped_shape(shape: &[usize], swap: bool) -> Vec<usize> {
    let mut shape = shape.to_vec();
    if swap {
        let r = shape.len();
        shape.swap(r - 2, r - 1);
    }
    shape
}

/// The whole shape `dims` makes (`None` where a dim overflows, `what`
/// naming the argument), checked before anything is registered: `pad`'s
/// and `tile`'s result.
fn whole_shape(
    op: &'static str,
    what: impl Fn() -> String,
    dims: impl Iterator<Item = Option<usize>>,
) -> Result<Vec<usize>> {
    let shape: Vec<usize> = dims
        .collect::<Option<_>>()
        .ok_or_else(|| range(op, format!("{} overflow", what())))?;
    shape::check_size(op, &shape)?;
    Ok(shape)
}

/// `dims` as the signed sizes the view ops take, refused where one passes
/// `isize` (a dim of 2^31 or more in 32-bit wasm) rather than wrapped.
pub(super) fn signed(op: &'static str, dims: &[usize]) -> Result<Vec<isize>> {
    dims.iter()
        .map(|&d| {
            isize::try_from(d)
                .map_err(|_| range(op, format!("a dim of {d} is past what an index can hold")))
        })
        .collect()
}

/// The largest index a float32 holds exactly (2^24): past it, `bandPart`'s
/// row and column indices would round and the band be wrong.
const EXACT_INDEX: usize = 1 << 24;

/// The most bytes a one-hot made for a matmul may take
/// (`segment_product`): 128 MiB, WebGPU's least
/// `maxStorageBufferBindingSize`, which every device allows.
const HOT_BYTES: usize = 1 << 27;

/// How `split` cuts an axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Split {
    /// This many pieces of equal size.
    Count(usize),
    /// Pieces of these sizes; one may be -1, the rest of the axis.
    Sizes(Vec<isize>),
}

/// The most pieces an empty axis is split into. TF.js takes any count there
/// (every piece empty), and each piece is a tensor of its own: 2^31 of them
/// panicked in wasm (a capacity overflow) and 2^28 exhausted its memory.
/// Any other axis is bounded by its size, which a count must divide.
const MAX_EMPTY_PIECES: usize = 1 << 16;

/// The sizes `parts` cuts an axis of `dim` elements into, or why it cannot.
fn split_sizes(parts: &Split, dim: usize) -> Result<Vec<usize>> {
    let op = "split";
    match parts {
        Split::Count(0) => Err(range(op, "the number of pieces must be at least 1".into())),
        Split::Count(n) if !dim.is_multiple_of(*n) => Err(range(
            op,
            format!("{n} pieces do not divide an axis of size {dim}"),
        )),
        Split::Count(n) if dim == 0 && *n > MAX_EMPTY_PIECES => Err(range(
            op,
            format!(
                "{n} pieces of an empty axis: at most {MAX_EMPTY_PIECES}, each a tensor of its own"
            ),
        )),
        Split::Count(n) => Ok(vec![dim / n; *n]),
        Split::Sizes(sizes) => {
            let rest = sizes.iter().filter(|&&s| s == -1).count();
            if rest > 1 || sizes.iter().any(|&s| s < -1) || sizes.is_empty() {
                return Err(range(
                    op,
                    format!("sizes {sizes:?} must be non-negative, with at most one -1"),
                ));
            }
            let known = sizes
                .iter()
                .filter(|&&s| s >= 0)
                .try_fold(0usize, |sum, &s| sum.checked_add(s.unsigned_abs()));
            let Some(known) = known.filter(|&k| if rest == 1 { k <= dim } else { k == dim }) else {
                return Err(range(
                    op,
                    format!("sizes {sizes:?} do not add up to the axis' size {dim}"),
                ));
            };
            Ok(sizes
                .iter()
                .map(|&s| {
                    if s == -1 {
                        dim - known
                    } else {
                        s.unsigned_abs()
                    }
                })
                .collect())
        }
    }
}

/// `axis` (negative counts from the end) as an index into `rank` dims.
fn axis_index(op: &'static str, axis: isize, rank: usize) -> Result<usize> {
    let r = rank as isize;
    if axis < -r || axis >= r {
        return Err(range(
            op,
            format!("axis {axis} is out of range for rank {rank}"),
        ));
    }
    Ok(if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    })
}

/// Distinct, sorted axes; `None` means all of them.
pub(super) fn axes_indices(
    op: &'static str,
    axes: Option<&[isize]>,
    rank: usize,
) -> Result<Vec<usize>> {
    let Some(axes) = axes else {
        return Ok((0..rank).collect());
    };
    // Marked, then read in order: sorted without a sort, whose code (4 KB of
    // the wasm module) nothing else needs.
    let mut named = vec![false; rank];
    for &a in axes {
        let i = axis_index(op, a, rank)?;
        if std::mem::replace(&mut named[i], true) {
            return Err(range(op, format!("axis {a} appears twice in {axes:?}")));
        }
    }
    Ok((0..rank).filter(|&i| named[i]).collect())
}

impl Device {
    /// `start, start + step, ...` up to but excluding `stop`, float32.
    #[track_caller]
    pub fn arange(&self, start: f32, stop: f32, step: f32) -> Result<Tensor> {
        self.range(start.into(), stop.into(), step.into(), DType::Float32)
    }

    /// `start, start + step, ...` up to but excluding `stop`, of `dtype`
    /// (TF.js's `range`; an int32 range takes whole numbers within int32,
    /// so each value is exact).
    #[track_caller]
    pub fn range(&self, start: f64, stop: f64, step: f64, dtype: DType) -> Result<Tensor> {
        if dtype == DType::Bool {
            return Err(invalid(
                "arange",
                "a range is float32 or int32, not bool".into(),
            ));
        }
        let whole = |v: f64| v.fract() == 0.0 && (i32::MIN as f64..=i32::MAX as f64).contains(&v);
        if dtype == DType::Int32 && !(whole(start) && whole(stop) && whole(step)) {
            return Err(range(
                "arange",
                format!(
                    "an int32 range takes whole int32 bounds and step, got {}, {}, {}",
                    number(start),
                    number(stop),
                    number(step)
                ),
            ));
        }
        let (start, step) = match dtype {
            DType::Float32 => (start as f32 as f64, step as f32 as f64),
            _ => (start, step),
        };
        if !(start.is_finite() && stop.is_finite() && step.is_finite()) || step == 0.0 {
            return Err(range(
                "arange",
                format!(
                    "start, stop and step must be finite and step non-zero, got {}, {}, {}",
                    number(start),
                    number(stop),
                    number(step)
                ),
            ));
        }
        let n = ((stop - start) / step).ceil().max(0.0);
        if n > u32::MAX as f64 {
            return Err(range(
                "arange",
                format!("{} elements are too many", number(n)),
            ));
        }
        // An int32 range whose last value would pass int32 wraps nowhere:
        // it is refused.
        if dtype == DType::Int32 && n > 0.0 && !whole(start + (n - 1.0) * step) {
            return Err(range(
                "arange",
                format!(
                    "{} values from {} by {} pass int32",
                    number(n),
                    number(start),
                    number(step)
                ),
            ));
        }
        self.record(OpKind::Arange { start, step }, &[], vec![n as usize], dtype)
    }

    /// Uniform values in `[min, max)`; the same seed gives the same values on
    /// every device.
    #[track_caller]
    pub fn random_uniform(&self, shape: &[usize], min: f32, max: f32, seed: u64) -> Result<Tensor> {
        if !(min.is_finite() && max.is_finite() && min <= max) {
            return Err(range(
                "randomUniform",
                format!(
                    "needs finite min <= max, got {}, {}",
                    number_f32(min),
                    number_f32(max)
                ),
            ));
        }
        self.random(shape, Distribution::Uniform { min, max }, seed)
    }

    /// Normal values; the same seed gives the same values on every device.
    #[track_caller]
    pub fn random_normal(&self, shape: &[usize], mean: f32, std: f32, seed: u64) -> Result<Tensor> {
        if !(mean.is_finite() && std.is_finite() && std >= 0.0) {
            return Err(range(
                "randomNormal",
                format!(
                    "needs a finite mean and std >= 0, got {}, {}",
                    number_f32(mean),
                    number_f32(std)
                ),
            ));
        }
        self.random(shape, Distribution::Normal { mean, std }, seed)
    }

    #[track_caller]
    fn random(&self, shape: &[usize], dist: Distribution, seed: u64) -> Result<Tensor> {
        self.record(
            OpKind::Random { dist, seed },
            &[],
            shape.to_vec(),
            DType::Float32,
        )
    }

    /// `a` where the bool `cond` is true, `b` elsewhere, all three
    /// broadcast; `a` and `b` upcast to one dtype.
    #[track_caller]
    pub fn where_(&self, cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let op = "where";
        self.admit(op, &[cond, a, b])?;
        bool_only(op, "the condition", cond)?;
        let shape = shape::broadcast(op, cond.shape(), a.shape())?;
        let shape = shape::broadcast(op, &shape, b.shape())?;
        let dtype = a.dtype().upcast(b.dtype());
        let (a, b) = (a.as_dtype(dtype)?, b.as_dtype(dtype)?);
        self.record(OpKind::Where, &[cond, &a, &b], shape, dtype)
    }

    /// The tensors joined along `axis`; every other dim must agree, and
    /// they upcast to one dtype.
    #[track_caller]
    pub fn cat(&self, tensors: &[&Tensor], axis: isize) -> Result<Tensor> {
        let Some((first, rest)) = tensors.split_first() else {
            return Err(invalid("cat", "needs at least one tensor".to_string()));
        };
        self.admit("cat", tensors)?;
        let rank = first.rank();
        let axis = axis_index("cat", axis, rank)?;
        let mut shape = first.shape().to_vec();
        for (i, t) in rest.iter().enumerate() {
            let fits = t.rank() == rank
                && (0..rank).all(|d| d == axis || t.shape()[d] == first.shape()[d]);
            if !fits {
                return Err(invalid(
                    "cat",
                    format!(
                        "tensor {} has shape {}, which does not fit {} along axis {axis}",
                        i + 1,
                        display(t.shape()),
                        display(first.shape())
                    ),
                ));
            }
            shape[axis] = shape[axis].saturating_add(t.shape()[axis]);
        }
        shape::check_size("cat", &shape)?;
        let dtype = tensors
            .iter()
            .fold(first.dtype(), |d, t| d.upcast(t.dtype()));
        let cast = tensors
            .iter()
            .map(|t| t.as_dtype(dtype))
            .collect::<Result<Vec<_>>>()?;
        let cast: Vec<&Tensor> = cast.iter().collect();
        self.record(OpKind::Cat { axis }, &cast, shape, dtype)
    }

    /// The tensors (all of one shape) stacked along a new `axis`.
    #[track_caller]
    pub fn stack(&self, tensors: &[&Tensor], axis: isize) -> Result<Tensor> {
        let Some((first, rest)) = tensors.split_first() else {
            return Err(invalid("stack", "needs at least one tensor".to_string()));
        };
        self.admit("stack", tensors)?;
        if let Some((i, t)) = rest
            .iter()
            .enumerate()
            .find(|(_, t)| t.shape() != first.shape())
        {
            return Err(invalid(
                "stack",
                format!(
                    "tensor {} has shape {}, not {} like the first",
                    i + 1,
                    display(t.shape()),
                    display(first.shape())
                ),
            ));
        }
        let axis = axis_index("stack", axis, first.rank() + 1)? as isize;
        let expanded = tensors
            .iter()
            .map(|t| t.expand_dims(axis))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Tensor> = expanded.iter().collect();
        self.cat(&refs, axis)
    }
}

impl Tensor {
    /// This tensor converted to `dtype` (TF.js's `cast`): a float to an
    /// int truncated toward zero (saturating, NaN to 0), anything to a
    /// bool by whether it is non-zero. The tensor itself when it is of
    /// `dtype` already.
    #[track_caller]
    pub fn cast(&self, dtype: DType) -> Result<Tensor> {
        self.device().admit("cast", &[self])?;
        self.as_dtype(dtype)
    }

    /// `cast` without its own admission: how an op converts an operand
    /// it has already admitted.
    #[track_caller]
    pub(super) fn as_dtype(&self, dtype: DType) -> Result<Tensor> {
        if self.dtype() == dtype {
            return Ok(self.clone());
        }
        self.device()
            .record(OpKind::Cast, &[self], self.shape().to_vec(), dtype)
    }

    /// Unary `op`, with TF.js's dtype rules: the float functions refuse an
    /// int (`log`, `sqrt`, ...), `exp` makes a float of one, `neg`, `abs`,
    /// `square` and `relu` keep an int (a bool becomes an int32 for them),
    /// and `logicalNot` takes a bool.
    #[track_caller]
    fn unary(&self, op: UnaryOp) -> Result<Tensor> {
        self.device().admit(op.name(), &[self])?;
        let dtype = match op {
            UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Square | UnaryOp::Relu => {
                arithmetic(self.dtype())
            }
            UnaryOp::Exp | UnaryOp::Floor => DType::Float32,
            UnaryOp::LogicalNot => {
                bool_only(op.name(), "its operand", self)?;
                DType::Bool
            }
            _ => {
                float_only(op.name(), self)?;
                DType::Float32
            }
        };
        let x = self.as_dtype(dtype)?;
        self.device()
            .record(OpKind::Unary(op), &[&x], self.shape().to_vec(), dtype)
    }

    /// Binary `op`, with TF.js's dtype rules: the operands upcast to one
    /// dtype (two bools to int32 for arithmetic), a number is a float32
    /// (so an int tensor with a number computes in floats, as in TF.js),
    /// an int32 `div` is `floorDiv`, comparisons give a bool, the logical
    /// ops take bools, and `bitwiseAnd` two int32s of one shape.
    #[track_caller]
    fn binary<'a>(&self, op: BinaryOp, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        let name = op.name();
        let out = |compute: DType| match op.compares() || op.is_logical() {
            true => DType::Bool,
            false => compute,
        };
        match other.into() {
            Operand::Scalar(scalar) => {
                self.device().admit(name, &[self])?;
                if op.is_logical() {
                    return Err(invalid(name, "takes two bool tensors, not a number".into()));
                }
                if op == BinaryOp::BitwiseAnd {
                    return Err(invalid(
                        name,
                        "takes two int32 tensors, not a number".into(),
                    ));
                }
                let x = self.as_dtype(DType::Float32)?;
                self.device().record(
                    OpKind::BinaryScalar {
                        op,
                        scalar,
                        scalar_first: false,
                    },
                    &[&x],
                    self.shape().to_vec(),
                    out(DType::Float32),
                )
            }
            Operand::Tensor(other) => {
                self.device().admit(name, &[self, other])?;
                let shape = shape::broadcast(name, self.shape(), other.shape())?;
                let upcast = self.dtype().upcast(other.dtype());
                let compute = if op.is_logical() {
                    bool_only(name, "operand 0", self)?;
                    bool_only(name, "operand 1", other)?;
                    DType::Bool
                } else if op == BinaryOp::BitwiseAnd {
                    int32_only(name, "operand 0", self)?;
                    int32_only(name, "operand 1", other)?;
                    // TF.js's `bitwiseAnd` broadcasts nothing.
                    if self.shape() != other.shape() {
                        return Err(invalid(
                            name,
                            format!(
                                "needs two int32 tensors of one shape, got {} and {}",
                                display(self.shape()),
                                display(other.shape())
                            ),
                        ));
                    }
                    DType::Int32
                } else if op.compares() {
                    upcast
                } else {
                    arithmetic(upcast)
                };
                let op = match (op, compute) {
                    (BinaryOp::Div, DType::Int32) => BinaryOp::FloorDiv,
                    _ => op,
                };
                let (a, b) = (self.as_dtype(compute)?, other.as_dtype(compute)?);
                self.device()
                    .record(OpKind::Binary(op), &[&a, &b], shape, out(compute))
            }
        }
    }

    /// Each value limited to `[min, max]`, a NaN kept (as TF.js keeps it;
    /// WGSL's `max` would give the other operand, so the kernels test the
    /// bits, `wf_clamp`). Refuses bounds that are NaN or out of order: a
    /// clamp that silently did nothing (or everything) would hide the
    /// caller's mistake.
    #[track_caller]
    pub fn clamp(&self, min: f32, max: f32) -> Result<Tensor> {
        if min.is_nan() || max.is_nan() || min > max {
            return Err(range(
                "clamp",
                format!(
                    "needs min <= max (neither NaN), got {}, {}",
                    number_f32(min),
                    number_f32(max)
                ),
            ));
        }
        // An int stays an int, clamped to each bound's whole part, as
        // TF.js's CPU stores its float clamp (`codegen::int_bounds`).
        self.device().admit("clamp", &[self])?;
        let dtype = arithmetic(self.dtype());
        let x = self.as_dtype(dtype)?;
        self.device().record(
            OpKind::Clamp { min, max },
            &[&x],
            self.shape().to_vec(),
            dtype,
        )
    }

    /// Reduction `op`, with TF.js's dtype rules: a sum or product of bools
    /// is an int32, a mean or logSumExp a float32, a max or min keeps the
    /// dtype.
    #[track_caller]
    fn reduce(&self, op: ReduceOp, axes: Option<&[isize]>, keep_dims: bool) -> Result<Tensor> {
        let axes = axes_indices(op.name(), axes, self.rank())?;
        self.device().admit(op.name(), &[self])?;
        let shape = reduced_shape(self.shape(), &axes, keep_dims);
        let dtype = match op {
            ReduceOp::Sum | ReduceOp::Prod => arithmetic(self.dtype()),
            ReduceOp::Mean | ReduceOp::LogSumExp => DType::Float32,
            ReduceOp::Max | ReduceOp::Min => self.dtype(),
        };
        let x = self.as_dtype(dtype)?;
        self.device()
            .record(OpKind::Reduce { op, axes }, &[&x], shape, dtype)
    }

    /// The sum over `axes` (all when `None`).
    #[track_caller]
    pub fn sum(&self, axes: Option<&[isize]>, keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, axes, keep_dims)
    }

    /// The mean over `axes` (all when `None`).
    #[track_caller]
    pub fn mean(&self, axes: Option<&[isize]>, keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Mean, axes, keep_dims)
    }

    /// The product over `axes` (all when `None`); an int32's wraps.
    #[track_caller]
    pub fn prod(&self, axes: Option<&[isize]>, keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Prod, axes, keep_dims)
    }

    /// The largest value over `axes` (all when `None`).
    #[track_caller]
    pub fn max(&self, axes: Option<&[isize]>, keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Max, axes, keep_dims)
    }

    /// The smallest value over `axes` (all when `None`).
    #[track_caller]
    pub fn min(&self, axes: Option<&[isize]>, keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Min, axes, keep_dims)
    }

    /// The index (an int32) of the largest value along `axis`; the first
    /// wins on ties. The axis is removed.
    #[track_caller]
    pub fn arg_max(&self, axis: isize) -> Result<Tensor> {
        self.arg_reduce(axis, true)
    }

    /// The index (an int32) of the smallest value along `axis`; the first
    /// wins on ties. The axis is removed.
    #[track_caller]
    pub fn arg_min(&self, axis: isize) -> Result<Tensor> {
        self.arg_reduce(axis, false)
    }

    #[track_caller]
    fn arg_reduce(&self, axis: isize, max: bool) -> Result<Tensor> {
        let kind = OpKind::ArgReduce { axis: 0, max };
        let axis = axis_index(kind.name(), axis, self.rank())?;
        if self.shape()[axis] == 0 {
            return Err(range(
                kind.name(),
                format!(
                    "axis {axis} of {} is empty: it has no index",
                    display(self.shape())
                ),
            ));
        }
        let shape = reduced_shape(self.shape(), &[axis], false);
        self.device().record(
            OpKind::ArgReduce { axis, max },
            &[self],
            shape,
            DType::Int32,
        )
    }

    /// `log(sum(exp(x)))` over `axes` (all when `None`), computed stably in
    /// one pass.
    #[track_caller]
    pub fn log_sum_exp(&self, axes: Option<&[isize]>, keep_dims: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::LogSumExp, axes, keep_dims)
    }

    /// `exp(x - max(x)) / sum(exp(x - max(x)))` along `axis`, to float32's
    /// precision for inputs of any size. Along the last axis, over rows one
    /// workgroup reduces (`REDUCE_CHUNK`), it is `exp(x - logSumExp(x))` in
    /// one kernel: the reduction anchors the exp and hands it its row max
    /// and the log of its sum apart (`AnchorParts::Split`), so the exponent
    /// is `(x - max) - log(sum)`, exact where it matters. Elsewhere the
    /// logSumExp would be written as one rounded float (an ulp of 10^-3 for
    /// rows near 10^4, a relative error of 10^-3 after `exp`), so it is
    /// written out: the max, the sum with `exp(x - max)` as its prologue,
    /// and the quotient, three kernels.
    #[track_caller]
    pub fn softmax(&self, axis: isize) -> Result<Tensor> {
        let axis = axis_index("softmax", axis, self.rank())?;
        self.device().admit("softmax", &[self])?;
        float_only("softmax", self)?;
        let row = self.shape()[axis];
        if axis + 1 == self.rank() && row <= crate::codegen::REDUCE_CHUNK {
            let axis = axis as isize;
            self.shifted_below(&self.log_sum_exp(Some(&[axis]), true)?)?
                .exp()
        } else {
            // `exp(x - max)` registered twice: once as the sum's prologue,
            // once for the quotient's kernel. One tensor read by both would
            // be written by a kernel of its own.
            let axis = axis as isize;
            let max = self.max(Some(&[axis]), true)?;
            let sum = self.shifted_below(&max)?.exp()?.sum(Some(&[axis]), true)?;
            self.shifted_below(&max)?.exp()?.div(&sum)
        }
    }

    /// `self - top`, for `exp`, where `top` (a max or logSumExp of `self`,
    /// kept dims) is at least each value it is taken from: the difference
    /// is at most 0, and its one non-finite value is -Infinity, which `exp`
    /// makes the exact 0, so the numerics checks skip it
    /// (`OpIr::unchecked`). A float32 `sub` otherwise, of `self`'s shape
    /// (`top`'s dims are `self`'s or 1).
    #[track_caller]
    #[inline(never)]
    pub(crate) fn shifted_below(&self, top: &Tensor) -> Result<Tensor> {
        self.device().record_unchecked(
            OpKind::Binary(BinaryOp::Sub),
            &[self, top],
            self.shape().to_vec(),
            DType::Float32,
        )
    }

    /// `(x - max(x)) - logSumExp(x - max(x))` along `axis`. Not the shorter
    /// `x - logSumExp(x)`: for inputs near 10^4 the float32 rounding of
    /// `logSumExp(x)` (an ulp of 10^-3) lands whole in the result, while
    /// `x - max(x)` is exact and its logSumExp is small.
    #[track_caller]
    pub fn log_softmax(&self, axis: isize) -> Result<Tensor> {
        axis_index("logSoftmax", axis, self.rank())?;
        self.device().admit("logSoftmax", &[self])?;
        float_only("logSoftmax", self)?;
        let shifted = self.sub(&self.max(Some(&[axis]), true)?)?;
        shifted.sub(&shifted.log_sum_exp(Some(&[axis]), true)?)
    }

    /// `matmul` of this tensor and `other`, each with its last two dims
    /// swapped first when asked (TF.js's `matMul(b, transposeA,
    /// transposeB)`). The swap is a view: the product reads the operand
    /// through its layout, and nothing is copied.
    #[track_caller]
    pub fn matmul_transposed(
        &self,
        other: &Tensor,
        transpose_a: bool,
        transpose_b: bool,
    ) -> Result<Tensor> {
        self.device().admit("matmul", &[self, other])?;
        float_only("matmul", self)?;
        float_only("matmul", other)?;
        matmul_ranks(self.shape(), other.shape())?;
        // Checked before a view is registered: a refused call queues nothing.
        let a = swapped_shape(self.shape(), transpose_a);
        let b = swapped_shape(other.shape(), transpose_b);
        matmul_shape(&a, &b)?;
        // Written out, not a closure: each view keeps the caller's site.
        let last_two = |r: usize| {
            let mut perm: Vec<usize> = (0..r).collect();
            perm.swap(r - 2, r - 1);
            perm
        };
        let a = match transpose_a {
            true => self.transpose(Some(&last_two(self.rank())))?,
            false => self.clone(),
        };
        let b = match transpose_b {
            true => other.transpose(Some(&last_two(other.rank())))?,
            false => other.clone(),
        };
        a.matmul(&b)
    }

    /// The matrix product over the last two dims, batched over the others
    /// (which broadcast).
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        float_only("matmul", self)?;
        float_only("matmul", other)?;
        let shape = matmul_shape(self.shape(), other.shape())?;
        self.device()
            .record(OpKind::Matmul, &[self, other], shape, DType::Float32)
    }

    /// The slices of this tensor along `axis` at the int32 `indices`
    /// (TF.js's `gather`): the output is `shape[..axis] + indices.shape
    /// [batch_dims..] + shape[axis + 1..]`, the first `batch_dims` dims of
    /// `indices` matching this tensor's and shared with it. An elementwise
    /// op on the indices viewed in the output's shape, reading this tensor
    /// from memory: what reads the result fuses with it. An index outside
    /// `[0, shape[axis])` is not read: the tensor fails as `index`, naming
    /// the position and the value (TF.js's WebGPU backend gives zeros).
    #[track_caller]
    pub fn gather(&self, indices: &Tensor, axis: isize, batch_dims: isize) -> Result<Tensor> {
        let op = "gather";
        self.device().admit(op, &[self, indices])?;
        int32_only(op, "the indices", indices)?;
        let axis = axis_index(op, axis, self.rank())?;
        // Negative counts from the end of the indices' dims.
        let b = match batch_dims {
            b if b < 0 => indices.rank().checked_sub(b.unsigned_abs()),
            b => Some(b.unsigned_abs()),
        }
        .filter(|&b| b <= indices.rank() && b <= axis);
        let Some(b) = b else {
            return Err(range(
                op,
                format!(
                    "batchDims {batch_dims} must be at most axis {axis} and the indices' rank {}",
                    indices.rank()
                ),
            ));
        };
        if self.shape()[..b] != indices.shape()[..b] {
            return Err(invalid(
                op,
                format!(
                    "the first {b} dims (batchDims) of the table and the indices must be one, got {} and indices {}",
                    display(self.shape()),
                    display(indices.shape())
                ),
            ));
        }
        let mut shape = self.shape()[..axis].to_vec();
        shape.extend_from_slice(&indices.shape()[b..]);
        shape.extend_from_slice(&self.shape()[axis + 1..]);
        shape::check_size(op, &shape)?;
        // The indices in the output's shape: their batch dims where the
        // output's are, their own where the gathered axis was, size 1 on the
        // table's other dims, broadcast.
        let mut view = indices.shape()[..b].to_vec();
        view.extend(std::iter::repeat_n(1, axis - b));
        view.extend_from_slice(&indices.shape()[b..]);
        view.extend(std::iter::repeat_n(1, self.rank() - axis - 1));
        let view = indices.reshape(&signed(op, &view)?)?.broadcast_to(&shape)?;
        self.device().record(
            OpKind::Gather {
                axis,
                batch_dims: b,
            },
            &[self, &view],
            shape,
            self.dtype(),
        )
    }

    /// The sums of this tensor's slices by segment (TF.js's
    /// `unsortedSegmentSum`): `segment_ids` (int32) labels the slices along
    /// this tensor's leading `segment_ids.rank()` dims, whose shape it must
    /// be; the result is `[num_segments] + the other dims`. An id outside
    /// `[0, num_segments)` adds nowhere, as in TensorFlow. Computed as
    /// `oneHot(ids)ᵀ · x`, a matmul: exact sums of the slices each segment
    /// holds, and the gradient of `gather`.
    #[track_caller]
    pub fn unsorted_segment_sum(
        &self,
        segment_ids: &Tensor,
        num_segments: usize,
    ) -> Result<Tensor> {
        let op = "unsortedSegmentSum";
        self.device().admit(op, &[self, segment_ids])?;
        float_only(op, self)?;
        int32_only(op, "the segment ids", segment_ids)?;
        let k = segment_ids.rank();
        if num_segments == 0 {
            return Err(range(op, "numSegments must be at least 1, got 0".into()));
        }
        if k > self.rank() || self.shape()[..k] != *segment_ids.shape() {
            return Err(invalid(
                op,
                format!(
                    "segment ids {} must be the leading dims of {}",
                    display(segment_ids.shape()),
                    display(self.shape())
                ),
            ));
        }
        let n = segment_ids.size();
        let rest: Vec<usize> = self.shape()[k..].to_vec();
        let mut out = vec![num_segments];
        out.extend_from_slice(&rest);
        shape::check_size(op, &out)?;
        shape::check_size(op, &[n, num_segments])?;
        let ids = segment_ids.reshape(&signed(op, &[1, n])?)?;
        let rows = self.reshape(&signed(op, &[1, n, shape::numel(&rest)])?)?;
        ids.segment_product(num_segments, &rows)?
            .reshape(&signed(op, &out)?)
    }

    /// `oneHot(ids, segments)ᵀ · g` for int32 `ids` `[batches, n]` and `g`
    /// `[before, n, after]` (`batches` 1, shared by every `before`, or
    /// `before`): `[before, segments, after]`, each segment the sum of the
    /// rows of `g` its ids label. A matmul reads its operands from memory,
    /// so the one-hot is a buffer: it is made for as many ids at a time as
    /// fit `HOT_BYTES`, and the slices' products are added. One buffer of
    /// every id would fail an embedding's gradient (8192 ids of a vocabulary
    /// of 8000: 262 MB) where its gather worked.
    pub(crate) fn segment_product(&self, segments: usize, g: &Tensor) -> Result<Tensor> {
        let (batches, n) = (self.shape()[0], self.shape()[1]);
        let (before, after) = (g.shape()[0], g.shape()[2]);
        let row_bytes = batches.saturating_mul(segments).saturating_mul(4);
        let per = (HOT_BYTES / row_bytes.max(1)).max(1);
        let product = |ids: &Tensor, g: &Tensor| {
            ids.hot(segments, 1.0, 0.0, DType::Float32)?
                .matmul_transposed(g, true, false)
        };
        // The ids from `start`, `len` of them, and their rows of `g`.
        let slice = |start: usize, len: usize| -> Result<Tensor> {
            let ids = self.slice(&[0, start], &signed("segment sum", &[batches, len])?)?;
            let rows = g.slice(
                &[0, start, 0],
                &signed("segment sum", &[before, len, after])?,
            )?;
            product(&ids, &rows)
        };
        if n <= per {
            return product(self, g);
        }
        let mut total = slice(0, per)?;
        for start in (per..n).step_by(per) {
            total = total.add(&slice(start, per.min(n - start))?)?;
        }
        Ok(total)
    }

    /// The `k` largest values along the last axis and their int32 indices
    /// (TF.js's `topk`), largest first, the lower index first among equal
    /// values, a NaN the largest (as a sort ranks it; `argMax` skips one):
    /// `k` rounds of an arg-max over the positions not yet taken, and the
    /// value picked read as the max of the input where the pick is, so a
    /// float's gradient flows to that element alone. A bool's are ranked
    /// as int32s, as TF.js's are. Each round is a kernel or two: a sort
    /// kernel is what large `k` wants.
    #[track_caller]
    pub fn top_k(&self, k: usize) -> Result<(Tensor, Tensor)> {
        let op = "topk";
        self.device().admit(op, &[self])?;
        let Some(&n) = self.shape().last() else {
            return Err(range(op, "needs rank >= 1, got a scalar".into()));
        };
        if k > n {
            return Err(range(
                op,
                format!("k ({k}) is past the last dim of {}", display(self.shape())),
            ));
        }
        let mut out = self.shape()[..self.rank() - 1].to_vec();
        out.push(k);
        if k == 0 {
            let device = self.device();
            return Ok((
                device.fill(&out, 0.0, self.dtype())?,
                device.fill(&out, 0.0, DType::Int32)?,
            ));
        }
        let device = self.device().clone();
        let rank = self.rank();
        let (mut values, mut indices) = (Vec::with_capacity(k), Vec::with_capacity(k));
        // Each step picks the first NaN not yet taken (a NaN is the
        // largest, as in a sort), else the first largest value not taken,
        // else (every value left is the lowest) the first not taken. Taken
        // ones are masked by `taken`, never by a value: masking them with
        // NaN made an input's NaN look taken, and the picks ran out into a
        // repeated index (found by outside testing).
        let float = self.dtype() == DType::Float32;
        let x = match float {
            true => self.clone(),
            false => self.as_dtype(DType::Int32)?,
        };
        let lowest = match float {
            true => f64::NEG_INFINITY,
            false => f64::from(i32::MIN),
        };
        let low = device.fill(&[], lowest, x.dtype())?;
        let nan = x.equal(&x)?.logical_not()?;
        let mut taken = device.fill(self.shape(), 0.0, DType::Bool)?;
        for _ in 0..k {
            let free = taken.logical_not()?;
            let nan_left = nan.logical_and(&free)?.cast(DType::Int32)?;
            let left = device.where_(&taken.logical_or(&nan)?, &low, &x)?;
            let top = left.max(Some(&[-1]), false)?;
            let first_free = free.cast(DType::Int32)?.arg_max(-1)?;
            let largest = device.where_(&top.equal(&low)?, &first_free, &left.arg_max(-1)?)?;
            let any_nan = nan_left.max(Some(&[-1]), false)?.greater(0.0)?;
            let index = device.where_(&any_nan, &nan_left.arg_max(-1)?, &largest)?;
            let picked = index.hot(n, 1.0, 0.0, DType::Bool)?;
            let value = device.where_(&picked, &x, &low)?.max(Some(&[-1]), true)?;
            values.push(value.as_dtype(self.dtype())?);
            indices.push(index.expand_dims(-1)?);
            taken = taken.logical_or(&picked)?;
        }
        let axis = rank as isize - 1;
        let values = device.cat(&values.iter().collect::<Vec<_>>(), axis)?;
        let indices = device.cat(&indices.iter().collect::<Vec<_>>(), axis)?;
        Ok((values, indices))
    }

    /// The running sums along `axis` (TF.js's `cumsum`): each position's
    /// sum of the elements up to it, without it when `exclusive`, from the
    /// end when `reverse`. An int32's stay int32 (a bool's become one),
    /// summed in order, exactly.
    #[track_caller]
    pub fn cumsum(&self, axis: isize, exclusive: bool, reverse: bool) -> Result<Tensor> {
        self.scan(ScanOp::Sum, axis, exclusive, reverse)
    }

    /// The running products along `axis` (TF.js's `cumprod`), as `cumsum`
    /// sums: an exclusive product starts at 1.
    #[track_caller]
    pub fn cumprod(&self, axis: isize, exclusive: bool, reverse: bool) -> Result<Tensor> {
        self.scan(ScanOp::Prod, axis, exclusive, reverse)
    }

    #[track_caller]
    fn scan(&self, op: ScanOp, axis: isize, exclusive: bool, reverse: bool) -> Result<Tensor> {
        let kind = OpKind::Scan {
            op,
            axis: 0,
            exclusive,
            reverse,
        };
        let axis = axis_index(kind.name(), axis, self.rank())?;
        self.device().admit(kind.name(), &[self])?;
        let dtype = arithmetic(self.dtype());
        let x = self.as_dtype(dtype)?;
        self.device().record(
            OpKind::Scan {
                op,
                axis,
                exclusive,
                reverse,
            },
            &[&x],
            self.shape().to_vec(),
            dtype,
        )
    }

    /// `num_samples` class indices (int32) drawn from each row of these
    /// logits (TF.js's `multinomial`): of rank 1 (`[classes]`, giving
    /// `[num_samples]`) or 2 (`[batch, classes]`, giving `[batch,
    /// num_samples]`); probabilities already when `normalized`. Seeded: the
    /// same seed gives the same draws on every device. Each draw is the
    /// number of classes whose cumulative probability is at most a uniform
    /// value in `[0, 1)` (class i's interval `[cdf[i - 1], cdf[i])`, empty
    /// for a probability of 0: counting those strictly below drew a first
    /// class of probability 0 at a value of exactly 0), the cumulative sums
    /// divided by their last so they end at exactly 1: a softmax, a cumsum
    /// and a count, all fused where they can be.
    #[track_caller]
    pub fn multinomial(&self, num_samples: usize, seed: u64, normalized: bool) -> Result<Tensor> {
        let op = "multinomial";
        self.device().admit(op, &[self])?;
        float_only(op, self)?;
        let (rows, classes) = match *self.shape() {
            [c] => (1, c),
            [b, c] => (b, c),
            _ => {
                return Err(range(
                    op,
                    format!(
                        "logits must have rank 1 or 2, got {}",
                        display(self.shape())
                    ),
                ));
            }
        };
        if classes == 0 || num_samples == 0 {
            return Err(range(
                op,
                format!(
                    "needs at least one class and one sample, got {} and {num_samples}",
                    display(self.shape())
                ),
            ));
        }
        shape::check_size(op, &[rows, num_samples, classes])?;
        let logits = self.reshape(&signed(op, &[rows, classes])?)?;
        let probs = match normalized {
            true => logits,
            false => logits.softmax(-1)?,
        };
        let cdf = probs.cumsum(-1, false, false)?;
        let total = cdf.slice(&[0, classes - 1], &[-1, 1])?;
        let cdf = cdf.div(&total)?.expand_dims(1)?;
        let u = self
            .device()
            .random_uniform(&[rows, num_samples, 1], 0.0, 1.0, seed)?;
        let below = cdf.less_equal(&u)?.sum(Some(&[-1]), false)?;
        let drawn = below.clamp(0.0, (classes - 1) as f32)?;
        match self.rank() {
            1 => drawn.reshape(&signed(op, &[num_samples])?),
            _ => Ok(drawn),
        }
    }

    /// TF.js's `dropout(x, rate, noiseShape, seed)`: each element zeroed
    /// with probability `rate` and the rest scaled by `1 / (1 - rate)`, so
    /// the expected value is unchanged. `noise_shape` (it must broadcast to
    /// this shape) shares one draw along its dims of 1: a whole channel
    /// dropped at once. A `seed` gives the same mask on every device; left
    /// out, each call draws a fresh one (seeded from a fresh tensor id, so a
    /// program's run repeats itself): a mask fixed by a default seed would
    /// drop the same units every step, which is not dropout. The gradient
    /// passes through the kept elements, scaled alike.
    #[track_caller]
    pub fn dropout(
        &self,
        rate: f32,
        noise_shape: Option<&[usize]>,
        seed: Option<u64>,
    ) -> Result<Tensor> {
        let op = "dropout";
        self.device().admit(op, &[self])?;
        float_only(op, self)?;
        if !(0.0..1.0).contains(&rate) {
            return Err(range(
                op,
                format!("rate must be in [0, 1), got {}", number_f32(rate)),
            ));
        }
        let noise = noise_shape.unwrap_or(self.shape());
        let fits = noise.len() == self.rank()
            && shape::broadcast(op, noise, self.shape()).is_ok_and(|b| b == self.shape());
        if !fits {
            return Err(invalid(
                op,
                format!(
                    "noiseShape {} must have x's rank and broadcast to x {}",
                    display(noise),
                    display(self.shape())
                ),
            ));
        }
        let keep = 1.0 - rate;
        let seed = seed.unwrap_or_else(|| TensorId::next().0 ^ 0x9e37_79b9_7f4a_7c15);
        let kept = self
            .device()
            .random_uniform(noise, 0.0, 1.0, seed)?
            .greater_equal(rate)?
            .as_dtype(DType::Float32)?;
        self.mul(&kept.div(keep)?)
    }

    /// A one-hot encoding of these int32 indices (TF.js's `oneHot`): a new
    /// last dim of `depth`, `on` where it is the index, `off` elsewhere, in
    /// `dtype` (TF.js's default is int32). An index outside `[0, depth)`
    /// gives a row of `off`, as in TensorFlow. An elementwise op on the
    /// indices broadcast along the new dim: it fuses with what reads it.
    #[track_caller]
    pub fn one_hot(&self, depth: usize, on: f64, off: f64, dtype: DType) -> Result<Tensor> {
        // TF.js's rule for its op: a one-hot of one class says nothing.
        if !(2..=i32::MAX as usize).contains(&depth) {
            return Err(range(
                "oneHot",
                format!("depth must be at least 2 and at most 2^31 - 1, got {depth}"),
            ));
        }
        self.hot(depth, on, off, dtype)
    }

    /// `one_hot` for the ops built on it (segment sums, `topk`, `gather`'s
    /// gradient), where one class is a real case: a gather from an axis of
    /// length 1 has a gradient, and a segment sum may have one segment.
    #[track_caller]
    pub(crate) fn hot(&self, depth: usize, on: f64, off: f64, dtype: DType) -> Result<Tensor> {
        let op = "oneHot";
        self.device().admit(op, &[self])?;
        int32_only(op, "the indices", self)?;
        // An int32 index can name no position past 2^31 - 1.
        if !(1..=i32::MAX as usize).contains(&depth) {
            return Err(range(
                op,
                format!("depth must be at least 1 and at most 2^31 - 1, got {depth}"),
            ));
        }
        let value = |v: f64| match dtype {
            DType::Float32 => Ok(v as f32 as f64),
            DType::Int32
                if v.fract() == 0.0 && (i32::MIN as f64..=i32::MAX as f64).contains(&v) =>
            {
                Ok(v)
            }
            DType::Int32 => Err(range(op, format!("{} is not an int32", number(v)))),
            DType::Bool => Ok(f64::from(u8::from(v != 0.0))),
        };
        let (on, off) = (value(on)?, value(off)?);
        let mut shape = self.shape().to_vec();
        shape.push(depth);
        shape::check_size(op, &shape)?;
        let wide = self.expand_dims(-1)?.broadcast_to(&shape)?;
        self.device()
            .record(OpKind::OneHot { depth, on, off }, &[&wide], shape, dtype)
    }

    /// This tensor with `paddings[d] = (before, after)` elements of `value`
    /// added around each dim `d`: TF.js's `pad`. Written as a `cat` with
    /// filled blocks per padded dim (a copy kernel each, gradients through
    /// the cat's slices); the whole shape is checked first, so a refused
    /// call queues nothing.
    #[track_caller]
    pub fn pad(&self, paddings: &[(usize, usize)], value: f32) -> Result<Tensor> {
        let op = "pad";
        self.device().admit(op, &[self])?;
        if paddings.len() != self.rank() {
            return Err(range(
                op,
                format!(
                    "paddings has {} pairs for {}; it needs one per dim",
                    paddings.len(),
                    display(self.shape())
                ),
            ));
        }
        let dims = self.shape().iter().zip(paddings);
        whole_shape(
            op,
            || format!("paddings {paddings:?}"),
            dims.map(|(&d, &(before, after))| d.checked_add(before)?.checked_add(after)),
        )?;
        let device = self.device().clone();
        let mut out = self.clone();
        for (axis, &(before, after)) in paddings.iter().enumerate() {
            if before == 0 && after == 0 {
                continue;
            }
            let mut block = out.shape().to_vec();
            let mut parts = Vec::with_capacity(3);
            if before > 0 {
                block[axis] = before;
                parts.push(device.fill_as(op, &block, value.into(), self.dtype())?);
            }
            parts.push(out.clone());
            if after > 0 {
                block[axis] = after;
                parts.push(device.fill_as(op, &block, value.into(), self.dtype())?);
            }
            out = device.cat(&parts.iter().collect::<Vec<_>>(), axis as isize)?;
        }
        Ok(out)
    }

    /// Each matrix (the last two dims) with the elements outside a band set
    /// to 0: those more than `num_lower` below the diagonal and more than
    /// `num_upper` above it, a negative bound keeping that whole triangle
    /// (TF.js's `linalg.bandPart`; `bandPart(-1, 0)` is a causal mask).
    /// The band is an `[m, n]` mask computed from row and column `arange`s
    /// (three small kernels, or the host for matrices it takes), selected
    /// with `where`, which fuses with what reads the result.
    #[track_caller]
    pub fn band_part(&self, num_lower: isize, num_upper: isize) -> Result<Tensor> {
        let op = "bandPart";
        self.device().admit(op, &[self])?;
        let r = self.rank();
        if r < 2 {
            return Err(range(
                op,
                format!("needs a matrix (rank >= 2), got {}", display(self.shape())),
            ));
        }
        let (m, n) = (self.shape()[r - 2], self.shape()[r - 1]);
        if m.max(n) > EXACT_INDEX {
            return Err(range(
                op,
                format!(
                    "rows and columns of {}: float32 indices are exact only to {EXACT_INDEX}",
                    display(self.shape())
                ),
            ));
        }
        let device = self.device().clone();
        // Indices made in their broadcast shapes: a reshape would be a view,
        // and a view needs its input written.
        let index = OpKind::Arange {
            start: 0.0,
            step: 1.0,
        };
        let rows = device.record(index.clone(), &[], vec![m, 1], DType::Float32)?;
        let cols = device.record(index, &[], vec![1, n], DType::Float32)?;
        // Below the diagonal by `row - col`, above it by `col - row`.
        let below = rows.sub(&cols)?;
        let mut keep = device.fill(&[m, n], 1.0, DType::Bool)?;
        if num_lower >= 0 {
            keep = keep.logical_and(&below.less_equal(num_lower as f32)?)?;
        }
        if num_upper >= 0 {
            keep = keep.logical_and(&below.greater_equal(-(num_upper as f32))?)?;
        }
        device.where_(&keep, self, &device.fill(&[], 0.0, self.dtype())?)
    }

    /// This tensor repeated `reps[d]` times along each dim `d`: TF.js's
    /// `tile`. Per repeated dim, a broadcast view copied once (a rep of 0
    /// empties the dim); the whole shape is checked first, so a refused
    /// call queues nothing.
    #[track_caller]
    pub fn tile(&self, reps: &[usize]) -> Result<Tensor> {
        let op = "tile";
        self.device().admit(op, &[self])?;
        if reps.len() != self.rank() {
            return Err(range(
                op,
                format!(
                    "reps {reps:?} has {} entries for {}; it needs one per dim",
                    reps.len(),
                    display(self.shape())
                ),
            ));
        }
        let dims = self.shape().iter().zip(reps);
        let tiled = whole_shape(
            op,
            || format!("reps {reps:?}"),
            dims.map(|(&d, &r)| d.checked_mul(r)),
        )?;
        let mut out = self.clone();
        for (axis, &r) in reps.iter().enumerate() {
            let mut size = signed(op, out.shape())?;
            out = match r {
                1 => continue,
                0 => {
                    size[axis] = 0;
                    out.slice(&vec![0; self.rank()], &size)?
                }
                // `r` copies side by side: a broadcast along a new dim before
                // `axis`, read row-major. One copy kernel, whatever `r`.
                _ => {
                    let mut wide = out.shape().to_vec();
                    wide.insert(axis, r);
                    size[axis] = signed(op, &tiled[axis..=axis])?[0];
                    out.expand_dims(axis as isize)?
                        .broadcast_to(&wide)?
                        .reshape(&size)?
                }
            };
        }
        Ok(out)
    }

    /// `count` equal pieces along `axis` (`Split::Count`, which must divide
    /// its size) or pieces of the given sizes (`Split::Sizes`, one of which
    /// may be -1 for the rest): TF.js's `split`. Each piece is a slice, a
    /// view of this tensor's memory.
    #[track_caller]
    pub fn split(&self, parts: &Split, axis: isize) -> Result<Vec<Tensor>> {
        let op = "split";
        let axis = axis_index(op, axis, self.rank())?;
        self.device().admit(op, &[self])?;
        let dim = self.shape()[axis];
        let sizes = split_sizes(parts, dim)?;
        let mut pieces = Vec::with_capacity(sizes.len());
        let mut begin = vec![0; self.rank()];
        for len in sizes {
            let mut size = signed(op, self.shape())?;
            size[axis] = signed(op, &[len])?[0];
            pieces.push(self.slice(&begin, &size)?);
            begin[axis] += len;
        }
        Ok(pieces)
    }

    #[track_caller]
    fn view(&self, view: ViewOp, shape: Vec<usize>) -> Result<Tensor> {
        self.device()
            .record(OpKind::View(view), &[self], shape, self.dtype())
    }

    /// Dims reordered by `perm` (reversed when `None`).
    #[track_caller]
    pub fn transpose(&self, perm: Option<&[usize]>) -> Result<Tensor> {
        let rank = self.rank();
        let perm: Vec<usize> = perm.map_or_else(|| (0..rank).rev().collect(), <[usize]>::to_vec);
        let mut seen = vec![false; rank];
        let valid = perm.len() == rank
            && perm
                .iter()
                .all(|&p| p < rank && !std::mem::replace(&mut seen[p], true));
        if !valid {
            return Err(range(
                "transpose",
                format!(
                    "perm {perm:?} is not a permutation of the {rank} dims of {}",
                    display(self.shape())
                ),
            ));
        }
        let shape = perm.iter().map(|&p| self.shape()[p]).collect();
        self.view(ViewOp::Transpose(perm), shape)
    }

    /// The same elements in `shape`; one dim may be -1 (inferred).
    #[track_caller]
    pub fn reshape(&self, shape: &[isize]) -> Result<Tensor> {
        let bad = || {
            range(
                "reshape",
                format!(
                    "cannot reshape {} ({} elements) into {shape:?}",
                    display(self.shape()),
                    self.size()
                ),
            )
        };
        if shape.iter().filter(|&&d| d == -1).count() > 1 || shape.iter().any(|&d| d < -1) {
            return Err(bad());
        }
        let known_dims: Vec<usize> = shape
            .iter()
            .filter(|&&d| d >= 0)
            .map(|&d| d as usize)
            .collect();
        let known = shape::numel(&known_dims);
        let out: Vec<usize> = shape
            .iter()
            .map(|&d| match d {
                -1 if known > 0 && self.size().is_multiple_of(known) => Ok(self.size() / known),
                -1 => Err(bad()),
                d => Ok(d as usize),
            })
            .collect::<Result<_>>()?;
        if shape::numel(&out) != self.size() {
            return Err(bad());
        }
        self.view(ViewOp::Reshape, out)
    }

    /// All elements in one dim.
    #[track_caller]
    pub fn flatten(&self) -> Result<Tensor> {
        self.device().admit("flatten", &[self])?;
        self.view(ViewOp::Reshape, vec![self.size()])
    }

    /// The box starting at `begin` of `size` (-1: to the end of that dim),
    /// each of at most rank entries: TF.js's short lists.
    #[track_caller]
    pub fn slice(&self, begin: &[usize], size: &[isize]) -> Result<Tensor> {
        let rank = self.rank();
        if begin.len() > rank || size.len() > rank {
            return Err(range(
                "slice",
                format!(
                    "begin {begin:?} and size {size:?} have at most {rank} entries for {}",
                    display(self.shape())
                ),
            ));
        }
        // As in TF.js, short lists name the leading dims: the rest begin
        // at 0 and run to the end.
        let begin: Vec<usize> = begin
            .iter()
            .copied()
            .chain(std::iter::repeat(0))
            .take(rank)
            .collect();
        let size: Vec<isize> = size
            .iter()
            .copied()
            .chain(std::iter::repeat(-1))
            .take(rank)
            .collect();
        let mut out = Vec::with_capacity(rank);
        for d in 0..rank {
            let dim = self.shape()[d];
            let len = match size[d] {
                -1 => dim.checked_sub(begin[d]),
                s if s >= 0 => Some(s as usize)
                    .filter(|&s| begin[d].checked_add(s).is_some_and(|end| end <= dim)),
                _ => None,
            };
            match len {
                Some(len) if begin[d] <= dim => out.push(len),
                _ => {
                    return Err(range(
                        "slice",
                        format!(
                            "begin {begin:?} size {size:?} reaches outside {}",
                            display(self.shape())
                        ),
                    ));
                }
            }
        }
        self.view(ViewOp::Slice(begin), out)
    }

    /// This tensor broadcast to `shape`.
    #[track_caller]
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        let fits = shape.len() >= self.rank()
            && shape::broadcast("broadcastTo", self.shape(), shape).is_ok_and(|b| b == shape);
        if !fits {
            return Err(invalid(
                "broadcastTo",
                format!(
                    "{} cannot broadcast to {}",
                    display(self.shape()),
                    display(shape)
                ),
            ));
        }
        self.view(ViewOp::Broadcast, shape.to_vec())
    }

    /// A dim of size 1 inserted at `axis` (`-1` appends).
    #[track_caller]
    pub fn expand_dims(&self, axis: isize) -> Result<Tensor> {
        let axis = axis_index("expandDims", axis, self.rank() + 1)?;
        let mut shape = self.shape().to_vec();
        shape.insert(axis, 1);
        self.view(ViewOp::ExpandDims(axis), shape)
    }

    /// The dims of size 1 removed: those listed, or all when `None` or
    /// empty (TF.js's `squeeze(x, [])` removes them all).
    #[track_caller]
    pub fn squeeze(&self, axes: Option<&[isize]>) -> Result<Tensor> {
        let axes = match axes {
            Some(named) if !named.is_empty() => axes_indices("squeeze", axes, self.rank())?,
            _ => (0..self.rank()).filter(|&d| self.shape()[d] == 1).collect(),
        };
        if let Some(&d) = axes.iter().find(|&&d| self.shape()[d] != 1) {
            return Err(range(
                "squeeze",
                format!(
                    "dim {d} of {} has size {}, not 1",
                    display(self.shape()),
                    self.shape()[d]
                ),
            ));
        }
        let shape = reduced_shape(self.shape(), &axes, false);
        self.view(ViewOp::Squeeze(axes), shape)
    }
}

/// `shape` with `axes` removed, or set to 1 when `keep_dims`.
fn reduced_shape(shape: &[usize], axes: &[usize], keep_dims: bool) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .filter_map(|(d, &n)| match (axes.contains(&d), keep_dims) {
            (false, _) => Some(n),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

macro_rules! binary_ops {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
                    self.binary(BinaryOp::$op, other)
                }
            )*
        }
    };
}

binary_ops! {
    add => Add, sub => Sub, mul => Mul, div => Div,
    /// NumPy's power: a negative base takes integer exponents only (NaN otherwise).
    pow => Pow,
    maximum => Maximum, minimum => Minimum,
    /// The remainder of a floor division: its sign is the divisor's (TF.js's
    /// `mod`); an int32 modulo 0 is 0.
    mod_ => Mod,
    /// A bool: true where equal; the comparisons below likewise.
    equal => Equal,
    greater => Greater, greater_equal => GreaterEqual, less => Less, less_equal => LessEqual,
    /// Of two bools; `logical_or` and `logical_xor` likewise.
    logical_and => LogicalAnd,
    logical_or => LogicalOr, logical_xor => LogicalXor,
    /// The bits both have, of two int32 tensors of one shape (TF.js's
    /// `bitwiseAnd`).
    bitwise_and => BitwiseAnd,
}

impl Tensor {
    /// `floor(a / b)`, an int32 whatever the operands: TF.js's dtype, so
    /// that code indexing with it (`gather(i.floorDiv(2))`) runs unchanged.
    /// An int32 divided by 0 is 0; a float quotient is cast (`cast`: one
    /// past int32 saturates, as TF.js's WebGPU backend stores it, a NaN is 0).
    #[track_caller]
    pub fn floor_div<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        let quotient = self.floor_quotient(other)?;
        match quotient.dtype() {
            DType::Int32 => Ok(quotient),
            _ => quotient.cast(DType::Int32),
        }
    }

    /// `floor(a / b)` in the operands' dtype: `mod`'s gradient, which a
    /// quotient past int32 would saturate.
    #[track_caller]
    pub(crate) fn floor_quotient<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(BinaryOp::FloorDiv, other)
    }

    /// Itself, failing as `non-finite` where an element is not finite
    /// while the device checks numerics, whatever made it (see
    /// `UnaryOp::CheckNumerics`).
    #[track_caller]
    pub(crate) fn check_numerics(&self) -> Result<Tensor> {
        self.unary(UnaryOp::CheckNumerics)
    }
}

macro_rules! unary_ops {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self) -> Result<Tensor> {
                    self.unary(UnaryOp::$op)
                }
            )*
        }
    };
}

unary_ops! {
    neg => Neg, abs => Abs, exp => Exp, log => Log, sqrt => Sqrt, rsqrt => Rsqrt,
    square => Square, relu => Relu,
    /// The tanh approximation, as PyTorch's `gelu(approximate='tanh')`.
    gelu => Gelu,
    sigmoid => Sigmoid, tanh => Tanh, sin => Sin, cos => Cos,
    /// TF.js's `tan`: on the host TF.js's CPU value, in kernels `sin / cos`
    /// (see `UnaryOp::Tan`).
    tan => Tan,
    /// The largest whole number not above each value (TF.js's `floor`; an
    /// int's is itself, as a float32); NaN and the infinities as they are.
    floor => Floor,
    /// `!x` of a bool.
    logical_not => LogicalNot,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[track_caller]
    fn an_axis_may_count_from_the_end() {
        assert_eq!(axis_index("sum", -1, 3).unwrap(), 2);
        assert_eq!(axis_index("sum", 2, 3).unwrap(), 2);
        assert!(axis_index("sum", 3, 3).is_err());
        assert!(axis_index("sum", -4, 3).is_err());
        assert!(axis_index("sum", 0, 0).is_err());
    }

    #[test]
    #[track_caller]
    fn a_repeated_axis_is_refused() {
        let err = axes_indices("sum", Some(&[1, -1]), 2).unwrap_err();
        assert_eq!(err.class, ErrorClass::Range);
    }

    #[test]
    #[track_caller]
    fn reducing_keeps_or_drops_the_axes() {
        assert_eq!(reduced_shape(&[2, 3, 4], &[1], true), vec![2, 1, 4]);
        assert_eq!(reduced_shape(&[2, 3, 4], &[0, 2], false), vec![3]);
    }
}
