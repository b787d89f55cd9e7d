//! The gradient of each op: given the gradient `g` of an op's output, the
//! gradients of its inputs (a vector-Jacobian product), built from ordinary
//! ops, so the backward pass is recorded, deferred and fused like any other
//! work. `None` for an input no gradient flows to.
//!
//! Conventions where the derivative is not defined everywhere, each chosen
//! as TF.js does:
//! - comparisons, `floorDiv`, `argMax` and `argMin` pass no gradient (they
//!   are piecewise constant), and nothing passes one to an int or a bool:
//!   the tape records only ops with a float32 result (`tensor::tape`);
//! - `mod(a, b)` sends `g` to `a` and `-g * floor(a / b)` to `b`;
//! - `relu` and `abs` take derivative 0 at 0; `clamp` passes the gradient
//!   where `min <= x <= max` (both ends included);
//! - `maximum(a, b)` sends it to `a` where `a >= b`, else to `b`
//!   (`minimum`: `a <= b`);
//! - `max`/`min` reductions send it to every position equal to the
//!   extremum (ties each get the whole gradient);
//! - `pow(a, b)`'s gradient for `b` uses `log(a)`, NaN for `a < 0`.

use super::Result;
use crate::error::{ErrorClass, RegistrationError};
use crate::ir::{BinaryOp, ConvGeometry, ConvPass, OpKind, ReduceOp, ScanOp, UnaryOp, ViewOp};
use crate::tensor::Tensor;

/// The gradients of `inputs` of an op `kind` that computed `output`, given
/// the gradient `g` of `output`.
pub(super) fn vjp(
    kind: &OpKind,
    inputs: &[Tensor],
    output: &Tensor,
    g: &Tensor,
) -> Result<Vec<Option<Tensor>>> {
    let x = inputs.first();
    Ok(match kind {
        OpKind::Upload(_) | OpKind::Random { .. } | OpKind::Fill(_) | OpKind::Arange { .. } => {
            Vec::new()
        }
        OpKind::Unary(op) => vec![Some(unary(*op, operand(x)?, output, g)?)],
        OpKind::Binary(op) => {
            let (a, b) = (operand(x)?, operand(inputs.get(1))?);
            let (ga, gb) = binary(*op, a, b, output, g)?;
            vec![
                ga.map(|t| unbroadcast(&t, a.shape())).transpose()?,
                gb.map(|t| unbroadcast(&t, b.shape())).transpose()?,
            ]
        }
        OpKind::BinaryScalar {
            op,
            scalar,
            scalar_first,
        } => vec![binary_scalar(
            *op,
            *scalar,
            *scalar_first,
            operand(x)?,
            output,
            g,
        )?],
        OpKind::Clamp { min, max } => {
            let x = operand(x)?;
            let inside = x.greater_equal(*min)?.mul(&x.less_equal(*max)?)?;
            vec![Some(g.mul(&inside)?)]
        }
        OpKind::Where => {
            let (cond, a, b) = (
                operand(x)?,
                operand(inputs.get(1))?,
                operand(inputs.get(2))?,
            );
            let zero = g.device().zeros(&[])?;
            let to_a = g.device().where_(cond, g, &zero)?;
            let to_b = g.device().where_(cond, &zero, g)?;
            vec![
                None,
                Some(unbroadcast(&to_a, a.shape())?),
                Some(unbroadcast(&to_b, b.shape())?),
            ]
        }
        OpKind::View(view) => vec![Some(view_grad(view, operand(x)?, g)?)],
        OpKind::Copy => vec![Some(g.clone())],
        OpKind::Reduce { op, axes } => vec![Some(reduce(*op, axes, operand(x)?, output, g)?)],
        OpKind::ArgReduce { .. } | OpKind::OneHot { .. } => vec![None],
        // Each input element is in the sums after it (before it, reversed):
        // its gradient is the running sum of `g` the other way.
        OpKind::Scan {
            op: ScanOp::Sum,
            axis,
            exclusive,
            reverse,
        } => vec![Some(g.cumsum(*axis as isize, *exclusive, !*reverse)?)],
        // TF.js defines none; one by division would be NaN at every zero.
        OpKind::Scan {
            op: ScanOp::Prod, ..
        } => {
            return Err(RegistrationError::new(
                "grads",
                ErrorClass::Other,
                "cumprod has no gradient (TF.js defines none either)".to_string(),
            ));
        }
        OpKind::Gather { axis, batch_dims } => {
            let (table, view) = (operand(x)?, operand(inputs.get(1))?);
            vec![Some(gather_grad(table, view, *axis, *batch_dims, g)?), None]
        }
        // Recorded only with a float result: from an int, whose gradient
        // the tape never asks for.
        OpKind::Cast => vec![None],
        // Not a function of its inputs' values but of their fate: no
        // gradient flows through a step's commit.
        OpKind::Commit { .. } => vec![None; inputs.len()],
        OpKind::Guard => vec![Some(g.clone())],
        OpKind::Conv {
            pass,
            geometry,
            depthwise,
        } => {
            let (a, b) = (operand(x)?, operand(inputs.get(1))?);
            let (ga, gb) = conv(*pass, (*geometry, *depthwise), a, b, g)?;
            vec![Some(ga), Some(gb)]
        }
        OpKind::Pool { op, size, geometry } => {
            vec![Some(operand(x)?.pool_grad(g, *op, *size, *geometry)?)]
        }
        OpKind::PoolGrad { .. } => {
            return Err(RegistrationError::new(
                "grads",
                ErrorClass::Other,
                format!(
                    "{} has no gradient (the gradient of a pool's gradient)",
                    kind.name()
                ),
            ));
        }
        OpKind::Matmul => {
            let (a, b) = (operand(x)?, operand(inputs.get(1))?);
            let ga = g.matmul(&swap_last(b)?)?;
            let gb = swap_last(a)?.matmul(g)?;
            vec![
                Some(unbroadcast(&ga, a.shape())?),
                Some(unbroadcast(&gb, b.shape())?),
            ]
        }
        OpKind::Cat { axis } => {
            let mut at = 0;
            let mut out = Vec::with_capacity(inputs.len());
            for input in inputs {
                let mut begin = vec![0; g.rank()];
                begin[*axis] = at;
                let size: Vec<isize> = input.shape().iter().map(|&d| d as isize).collect();
                at += input.shape()[*axis];
                out.push(Some(g.slice(&begin, &size)?));
            }
            out
        }
    })
}

/// The gradient of `gather(table, indices, axis, batch_dims)` (`view` the
/// indices in the output's shape): each row of the table gets the sum of
/// the rows of `g` that read it, `unsortedSegmentSum` along `axis`, as a
/// matmul of the indices' one-hot encoding, batched over the dims before
/// `axis` (the batch dims' own indices, with `batch_dims`).
fn gather_grad(
    table: &Tensor,
    view: &Tensor,
    axis: usize,
    batch_dims: usize,
    g: &Tensor,
) -> Result<Tensor> {
    if batch_dims > 0 && axis != batch_dims {
        // With the axis moved to just after the batch dims (in the table,
        // and the index dims likewise in the output), it is the gather
        // below; its gradient is moved back. Views only: nothing copied.
        let (b, a, m) = (batch_dims, axis, g.rank() + 1 - table.rank());
        let table_perm: Vec<usize> = (0..b)
            .chain([a])
            .chain(b..a)
            .chain(a + 1..table.rank())
            .collect();
        let out_perm: Vec<usize> = (0..b)
            .chain(a..a + m)
            .chain(b..a)
            .chain(a + m..g.rank())
            .collect();
        let grad = gather_grad(
            &table.transpose(Some(&table_perm))?,
            &view.transpose(Some(&out_perm))?,
            b,
            b,
            &g.transpose(Some(&out_perm))?,
        )?;
        return grad.transpose(Some(&inverse(&table_perm)));
    }
    let signed = |dims: &[usize]| -> Vec<isize> { dims.iter().map(|&d| d as isize).collect() };
    let (shape, out) = (table.shape(), g.shape());
    let j = out.len() + 1 - shape.len();
    // The indices themselves: the view at 0 along the table's own dims
    // (its batch dims are the indices' too).
    let mut size = signed(out);
    for d in (batch_dims..axis).chain(axis + j..out.len()) {
        size[d] = 1;
    }
    let n: usize = out[axis..axis + j].iter().product();
    let (before, after): (usize, usize) = (
        shape[..axis].iter().product(),
        shape[axis + 1..].iter().product(),
    );
    let batches: usize = shape[..batch_dims].iter().product();
    let indices = view
        .slice(&vec![0; out.len()], &size)?
        .reshape(&signed(&[batches, n]))?;
    let rows = shape[axis];
    // The indices as a gather of `0..rows` reads them: an index outside the
    // table fails this gradient as it failed the gather (kind `index`),
    // where a one-hot of it would be a row of zeros, a gradient that reads
    // as if the index had not been there.
    let checked = table
        .device()
        .range(0.0, rows as f64, 1.0, crate::ir::DType::Int32)?
        .gather(&indices, 0, 0)?;
    let g = g.reshape(&signed(&[before, n, after]))?;
    // Without batch dims: [1, n, rows] x [before, n, after], the one
    // encoding shared by every `before`; with them (then `before` is the
    // batch): one per batch. Either way [before, rows, after].
    checked.segment_product(rows, &g)?.reshape(&signed(shape))
}

/// The gradients of a convolution's pass for its two inputs `a`, `b`
/// (`ConvPass`). The three passes are each other's adjoints: the images'
/// gradient of a `conv2d` is its `Input` pass, the filter's its `Filter`
/// pass, and so round: every backward pass is a convolution on the same
/// tiles, with no transposed copy of anything.
fn conv(
    pass: ConvPass,
    (geometry, depthwise): (ConvGeometry, bool),
    a: &Tensor,
    b: &Tensor,
    g: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let shape = |t: &Tensor| t.shape().to_vec();
    let with = |first: &Tensor, pass, second: &Tensor, like: &Tensor| {
        first.conv_pass(pass, (geometry, depthwise), second, shape(like))
    };
    Ok(match pass {
        // y = conv(x, f)
        ConvPass::Forward => (
            with(g, ConvPass::Input, b, a)?,
            with(a, ConvPass::Filter, g, b)?,
        ),
        // y = input(dy, f)
        ConvPass::Input => (
            with(g, ConvPass::Forward, b, a)?,
            with(g, ConvPass::Filter, a, b)?,
        ),
        // y = filter(x, dy)
        ConvPass::Filter => (
            with(b, ConvPass::Input, g, a)?,
            with(a, ConvPass::Forward, g, b)?,
        ),
    })
}

/// An op's operand that must be there (the op was validated with it).
fn operand(t: Option<&Tensor>) -> Result<&Tensor> {
    t.ok_or_else(|| super::internal("an op on the tape lost an operand"))
}

fn unary(op: UnaryOp, x: &Tensor, y: &Tensor, g: &Tensor) -> Result<Tensor> {
    match op {
        UnaryOp::Neg => g.neg(),
        UnaryOp::Abs => g.mul(&x.greater(0.0)?.sub(&x.less(0.0)?)?),
        UnaryOp::Exp => g.mul(y),
        UnaryOp::Log => g.div(x),
        UnaryOp::Sqrt => g.mul(0.5)?.div(y),
        // d/dx x^(-1/2) = -1/2 x^(-3/2) = -1/2 y / x
        UnaryOp::Rsqrt => g.mul(&y.div(x)?.mul(-0.5)?),
        UnaryOp::Square => g.mul(&x.mul(2.0)?),
        UnaryOp::Relu => g.mul(&x.greater(0.0)?),
        UnaryOp::Gelu => {
            // The tanh form the kernels compute: 0.5 x (1 + t),
            // t = tanh(k (x + c x^3)).
            let (k, c) = (0.797_884_6_f32, 0.044_715_f32);
            let x2 = x.square()?;
            let t = x.add(&x.mul(&x2)?.mul(c)?)?.mul(k)?.tanh()?;
            let dt = t
                .square()?
                .neg()?
                .add(1.0)?
                .mul(&x2.mul(3.0 * c)?.add(1.0)?.mul(k)?)?;
            let d = t.add(1.0)?.mul(0.5)?.add(&x.mul(0.5)?.mul(&dt)?)?;
            g.mul(&d)
        }
        UnaryOp::Sigmoid => g.mul(&y.mul(&y.neg()?.add(1.0)?)?),
        UnaryOp::Tanh => g.mul(&y.square()?.neg()?.add(1.0)?),
        UnaryOp::Sin => g.mul(&x.cos()?),
        UnaryOp::Cos => g.mul(&x.sin()?.neg()?),
        UnaryOp::Tan => g.div(&x.cos()?.square()?),
        // Flat between whole numbers: TF.js's zeros.
        UnaryOp::Floor => g.device().zeros(g.shape()),
        // A bool's op: never on the tape.
        UnaryOp::LogicalNot => Err(super::internal("logicalNot has no gradient")),
        UnaryOp::CheckNumerics => Ok(g.clone()),
    }
}

/// The gradients of `a op b`, at the broadcast shape.
fn binary(
    op: BinaryOp,
    a: &Tensor,
    b: &Tensor,
    y: &Tensor,
    g: &Tensor,
) -> Result<(Option<Tensor>, Option<Tensor>)> {
    Ok(match op {
        BinaryOp::Add => (Some(g.clone()), Some(g.clone())),
        BinaryOp::Sub => (Some(g.clone()), Some(g.neg()?)),
        BinaryOp::Mul => (Some(g.mul(b)?), Some(g.mul(a)?)),
        BinaryOp::Div => (Some(g.div(b)?), Some(g.mul(y)?.div(b)?.neg()?)),
        // d/db is y log(a) where a > 0 and 0 elsewhere, as TF.js's: the
        // log is of 1 there, so no NaN or infinity is made and masked.
        BinaryOp::Pow => {
            let one = g.device().full(&[], 1.0)?;
            let positive = g.device().where_(&a.greater(0.0)?, a, &one)?;
            (
                Some(g.mul(b)?.mul(&a.pow(&b.sub(1.0)?)?)?),
                Some(g.mul(y)?.mul(&positive.log()?)?),
            )
        }
        BinaryOp::Maximum => {
            let to_a = a.greater_equal(b)?;
            (Some(g.mul(&to_a)?), Some(g.mul(&to_a.logical_not()?)?))
        }
        BinaryOp::Minimum => {
            let to_a = a.less_equal(b)?;
            (Some(g.mul(&to_a)?), Some(g.mul(&to_a.logical_not()?)?))
        }
        BinaryOp::Mod => (Some(g.clone()), Some(g.mul(&a.floor_quotient(b)?)?.neg()?)),
        BinaryOp::FloorDiv
        | BinaryOp::Equal
        | BinaryOp::Greater
        | BinaryOp::GreaterEqual
        | BinaryOp::Less
        | BinaryOp::LessEqual
        | BinaryOp::LogicalAnd
        | BinaryOp::LogicalOr
        | BinaryOp::LogicalXor
        | BinaryOp::BitwiseAnd => (None, None),
    })
}

/// The gradient of `x op s` (or `s op x` when `scalar_first`).
fn binary_scalar(
    op: BinaryOp,
    s: f32,
    scalar_first: bool,
    x: &Tensor,
    y: &Tensor,
    g: &Tensor,
) -> Result<Option<Tensor>> {
    Ok(Some(match (op, scalar_first) {
        (BinaryOp::Add, _) => g.clone(),
        (BinaryOp::Sub, false) => g.clone(),
        (BinaryOp::Sub, true) => g.neg()?,
        (BinaryOp::Mul, _) => g.mul(s)?,
        (BinaryOp::Div, false) => g.div(s)?,
        // d/dx s/x = -s/x^2 = -y/x
        (BinaryOp::Div, true) => g.mul(&y.div(x)?.neg()?)?,
        (BinaryOp::Pow, false) => g.mul(&x.pow(s - 1.0)?.mul(s)?)?,
        // TF.js's: y log(s) where s > 0, else 0.
        (BinaryOp::Pow, true) => g.mul(&y.mul(if s > 0.0 { s.ln() } else { 0.0 })?)?,
        (BinaryOp::Maximum, _) => g.mul(&x.greater_equal(s)?)?,
        (BinaryOp::Minimum, _) => g.mul(&x.less_equal(s)?)?,
        (BinaryOp::Mod, false) => g.clone(),
        // d/dx (s mod x) = -floor(s / x)
        (BinaryOp::Mod, true) => {
            let s = x.device().full(x.shape(), s)?;
            g.mul(&s.floor_quotient(x)?)?.neg()?
        }
        (
            BinaryOp::FloorDiv
            | BinaryOp::LogicalAnd
            | BinaryOp::LogicalOr
            | BinaryOp::LogicalXor
            | BinaryOp::BitwiseAnd
            | BinaryOp::Equal
            | BinaryOp::Greater
            | BinaryOp::GreaterEqual
            | BinaryOp::Less
            | BinaryOp::LessEqual,
            _,
        ) => return Ok(None),
    }))
}

fn view_grad(view: &ViewOp, x: &Tensor, g: &Tensor) -> Result<Tensor> {
    let dims: Vec<isize> = x.shape().iter().map(|&d| d as isize).collect();
    match view {
        ViewOp::Transpose(perm) => g.transpose(Some(&inverse(perm))),
        ViewOp::Reshape | ViewOp::ExpandDims(_) | ViewOp::Squeeze(_) => g.reshape(&dims),
        ViewOp::Broadcast => unbroadcast(g, x.shape()),
        ViewOp::Slice(begin) => {
            // The gradient in place, zeros around it: along each axis, the
            // zeros before and after the box joined to it.
            let mut padded = g.clone();
            for (d, &start) in begin.iter().enumerate() {
                let end = start + g.shape()[d];
                let mut pieces = Vec::new();
                let mut shape = padded.shape().to_vec();
                if start > 0 {
                    shape[d] = start;
                    pieces.push(g.device().zeros(&shape)?);
                }
                pieces.push(padded.clone());
                if end < x.shape()[d] {
                    shape[d] = x.shape()[d] - end;
                    pieces.push(g.device().zeros(&shape)?);
                }
                if pieces.len() > 1 {
                    let refs: Vec<&Tensor> = pieces.iter().collect();
                    padded = g.device().cat(&refs, d as isize)?;
                }
            }
            Ok(padded)
        }
    }
}

fn reduce(op: ReduceOp, axes: &[usize], x: &Tensor, y: &Tensor, g: &Tensor) -> Result<Tensor> {
    // The output and its gradient with the reduced axes kept (size 1), so
    // they broadcast over the input.
    let kept: Vec<isize> = x
        .shape()
        .iter()
        .enumerate()
        .map(|(d, &n)| if axes.contains(&d) { 1 } else { n as isize })
        .collect();
    let g = g.reshape(&kept)?.broadcast_to(x.shape())?;
    let y = || -> Result<Tensor> { y.reshape(&kept)?.broadcast_to(x.shape()) };
    match op {
        ReduceOp::Sum => Ok(g),
        ReduceOp::Mean => {
            let count: usize = axes.iter().map(|&d| x.shape()[d]).product();
            g.div(count.max(1) as f32)
        }
        ReduceOp::Max | ReduceOp::Min => g.mul(&x.equal(&y()?)?),
        // The softmax of `x` over `axes`, from its max, as TF.js's
        // composed gradient is. `exp(x - y)` took the rounded logSumExp,
        // which loses the `log(sum)` it carries where its ulp is larger
        // (1e8's is 8, against log 2): [1e8, 1e8] had gradient [1, 1].
        ReduceOp::LogSumExp => {
            let axes: Vec<isize> = axes.iter().map(|&d| d as isize).collect();
            let e = x.shifted_below(&x.max(Some(&axes), true)?)?.exp()?;
            g.mul(&e.div(&e.sum(Some(&axes), true)?)?)
        }
        ReduceOp::Prod => g.mul(&product_of_others(x, axes)?),
    }
}

/// Each element's product of the other elements it was reduced with: the
/// exclusive running products from both ends, multiplied. Dividing the
/// product by the element would be shorter and wrong where an element is 0
/// (the others' product is what the derivative is, zero or not).
fn product_of_others(x: &Tensor, axes: &[usize]) -> Result<Tensor> {
    if x.shape().contains(&0) {
        return Ok(x.clone());
    }
    // The reduced axes first, flattened into one, the kept ones after it.
    let perm: Vec<usize> = axes
        .iter()
        .copied()
        .chain((0..x.rank()).filter(|d| !axes.contains(d)))
        .collect();
    let moved = x.transpose(Some(&perm))?;
    let moved_shape: Vec<isize> = moved.shape().iter().map(|&n| n as isize).collect();
    let reduced: usize = axes.iter().map(|&d| x.shape()[d]).product();
    let lines = moved.reshape(&[reduced as isize, -1])?;
    let others = lines
        .cumprod(0, true, false)?
        .mul(&lines.cumprod(0, true, true)?)?;
    others
        .reshape(&moved_shape)?
        .transpose(Some(&inverse(&perm)))
}

/// The permutation that undoes `perm` (a transpose by `perm`, then by it,
/// is the identity).
fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inverse = vec![0; perm.len()];
    for (at, &d) in perm.iter().enumerate() {
        inverse[d] = at;
    }
    inverse
}

/// `t` with its last two axes swapped.
fn swap_last(t: &Tensor) -> Result<Tensor> {
    let r = t.rank();
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 2, r - 1);
    t.transpose(Some(&perm))
}

/// A gradient at a broadcast shape summed back to `shape`: over the leading
/// axes `shape` does not have, and over the axes where it has 1.
pub(super) fn unbroadcast(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let extra = g.rank() - shape.len();
    let axes: Vec<isize> = (0..g.rank())
        .filter(|&d| d < extra || (shape[d - extra] == 1 && g.shape()[d] != 1))
        .map(|d| d as isize)
        .collect();
    let summed = g.sum(Some(&axes), true)?;
    let dims: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    summed.reshape(&dims)
}
