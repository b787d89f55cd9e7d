//! A CPU reference interpreter: the oracle the GPU results are compared with.
//!
//! `Ref` is a row-major f32 tensor. Every op of the library has a method here
//! with the same name and the same semantics (NumPy broadcasting, negative
//! axes counting from the end, `keep_dims`, `-1` sizes). Each op computes in
//! f64 from the f32 inputs and rounds its result to f32, like a GPU kernel
//! that stores f32. The code favours being obviously right over being fast:
//! broadcasting is index arithmetic, matmul is three loops, reductions
//! iterate over output positions.
//!
//! The generator only makes valid calls, so an invalid argument here is a bug
//! in the test, and panics.

use std::fmt;

#[derive(Clone, PartialEq)]
pub struct Ref {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl fmt::Debug for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ref{:?} {:?}", self.shape, self.data)
    }
}

/// The other operand of a binary op: a tensor or a number.
pub enum RefOperand<'a> {
    Tensor(&'a Ref),
    Scalar(f32),
}

impl<'a> From<&'a Ref> for RefOperand<'a> {
    fn from(r: &'a Ref) -> Self {
        RefOperand::Tensor(r)
    }
}

impl From<f32> for RefOperand<'_> {
    fn from(v: f32) -> Self {
        RefOperand::Scalar(v)
    }
}

// ---------------------------------------------------------------------------
// Index arithmetic

/// The number of elements of `shape` (1 for a scalar).
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Row-major strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The multi-index of flat position `flat` in `shape`.
pub fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for i in (0..shape.len()).rev() {
        idx[i] = flat % shape[i];
        flat /= shape[i];
    }
    idx
}

/// The flat position of multi-index `idx` in `shape`.
pub fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(strides(shape)).map(|(i, s)| i * s).sum()
}

/// NumPy broadcasting of two shapes: right-aligned, each pair of dims equal
/// or one of them 1.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Vec<usize> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            1
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            panic!("shapes {a:?} and {b:?} do not broadcast")
        };
    }
    out
}

/// The flat position in a tensor of shape `from` that broadcasts to
/// multi-index `out_idx` of the (larger) broadcast shape.
pub fn broadcast_source(out_idx: &[usize], from: &[usize]) -> usize {
    let offset = out_idx.len() - from.len();
    let mut flat = 0;
    for (i, &d) in from.iter().enumerate() {
        let j = if d == 1 { 0 } else { out_idx[offset + i] };
        flat = flat * d + j;
    }
    flat
}

/// A possibly negative axis of a tensor of rank `rank`, as an index.
pub fn norm_axis(axis: isize, rank: usize) -> usize {
    let r = rank as isize;
    assert!(
        (-r..r).contains(&axis),
        "axis {axis} is out of range for rank {rank}"
    );
    if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    }
}

fn round(v: f64) -> f32 {
    v as f32
}

// ---------------------------------------------------------------------------
// Creation

impl Ref {
    pub fn new(data: Vec<f32>, shape: &[usize]) -> Ref {
        assert_eq!(data.len(), numel(shape), "data does not fill {shape:?}");
        Ref {
            shape: shape.to_vec(),
            data,
        }
    }

    pub fn scalar(v: f32) -> Ref {
        Ref::new(vec![v], &[])
    }

    /// Like `Device::tensor`: `shape` defaults to `[values.len()]`.
    pub fn tensor(values: &[f32], shape: Option<&[usize]>) -> Ref {
        Ref::new(values.to_vec(), shape.unwrap_or(&[values.len()]))
    }

    pub fn full(shape: &[usize], value: f32) -> Ref {
        Ref::new(vec![value; numel(shape)], shape)
    }

    pub fn zeros(shape: &[usize]) -> Ref {
        Ref::full(shape, 0.0)
    }

    pub fn ones(shape: &[usize]) -> Ref {
        Ref::full(shape, 1.0)
    }

    /// Like NumPy: `ceil((stop - start) / step)` values `start + i * step`.
    pub fn arange(start: f32, stop: f32, step: f32) -> Ref {
        assert!(step != 0.0, "arange step is 0");
        let (start, stop, step) = (start as f64, stop as f64, step as f64);
        let n = ((stop - start) / step).ceil().max(0.0) as usize;
        let data = (0..n).map(|i| round(start + i as f64 * step)).collect();
        Ref::new(data, &[n])
    }

    /// `cond != 0 ? a : b`, broadcasting all three.
    pub fn where_(cond: &Ref, a: &Ref, b: &Ref) -> Ref {
        let shape = broadcast_shapes(&cond.shape, &broadcast_shapes(&a.shape, &b.shape));
        let data = (0..numel(&shape))
            .map(|i| {
                let idx = unravel(i, &shape);
                let c = cond.data[broadcast_source(&idx, &cond.shape)];
                if c != 0.0 {
                    a.data[broadcast_source(&idx, &a.shape)]
                } else {
                    b.data[broadcast_source(&idx, &b.shape)]
                }
            })
            .collect();
        Ref::new(data, &shape)
    }

    /// Joins tensors of one rank along an existing axis; the other dims must
    /// agree.
    pub fn cat(tensors: &[&Ref], axis: isize) -> Ref {
        let first = tensors.first().expect("cat of no tensors");
        let rank = first.shape.len();
        let axis = norm_axis(axis, rank);
        for t in tensors {
            assert_eq!(t.shape.len(), rank, "cat of different ranks");
            for d in 0..rank {
                assert!(d == axis || t.shape[d] == first.shape[d], "cat shapes");
            }
        }
        let mut shape = first.shape.clone();
        shape[axis] = tensors.iter().map(|t| t.shape[axis]).sum();
        let data = (0..numel(&shape))
            .map(|i| {
                let mut idx = unravel(i, &shape);
                for t in tensors {
                    if idx[axis] < t.shape[axis] {
                        return t.data[ravel(&idx, &t.shape)];
                    }
                    idx[axis] -= t.shape[axis];
                }
                unreachable!()
            })
            .collect();
        Ref::new(data, &shape)
    }

    /// Joins tensors of one shape along a new axis (`-1` puts it last).
    pub fn stack(tensors: &[&Ref], axis: isize) -> Ref {
        let first = tensors.first().expect("stack of no tensors");
        for t in tensors {
            assert_eq!(t.shape, first.shape, "stack of different shapes");
        }
        let axis = norm_axis(axis, first.shape.len() + 1) as isize;
        let expanded: Vec<Ref> = tensors.iter().map(|t| t.expand_dims(axis)).collect();
        let refs: Vec<&Ref> = expanded.iter().collect();
        Ref::cat(&refs, axis)
    }
}

// ---------------------------------------------------------------------------
// Elementwise

impl Ref {
    pub fn size(&self) -> usize {
        self.data.len()
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Applies `f` to every element (computing in f64).
    pub fn map(&self, f: impl Fn(f64) -> f64) -> Ref {
        let data = self.data.iter().map(|&x| round(f(x as f64))).collect();
        Ref::new(data, &self.shape)
    }

    /// Applies `f` to pairs of elements under NumPy broadcasting.
    pub fn zip<'a>(&self, other: impl Into<RefOperand<'a>>, f: impl Fn(f64, f64) -> f64) -> Ref {
        let scalar;
        let other = match other.into() {
            RefOperand::Tensor(t) => t,
            RefOperand::Scalar(v) => {
                scalar = Ref::scalar(v);
                &scalar
            }
        };
        let shape = broadcast_shapes(&self.shape, &other.shape);
        let data = (0..numel(&shape))
            .map(|i| {
                let idx = unravel(i, &shape);
                let a = self.data[broadcast_source(&idx, &self.shape)];
                let b = other.data[broadcast_source(&idx, &other.shape)];
                round(f(a as f64, b as f64))
            })
            .collect();
        Ref::new(data, &shape)
    }

    pub fn add<'a>(&self, o: impl Into<RefOperand<'a>>) -> Ref {
        self.zip(o, |a, b| a + b)
    }
    pub fn sub<'a>(&self, o: impl Into<RefOperand<'a>>) -> Ref {
        self.zip(o, |a, b| a - b)
    }
    pub fn mul<'a>(&self, o: impl Into<RefOperand<'a>>) -> Ref {
        self.zip(o, |a, b| a * b)
    }
    pub fn div<'a>(&self, o: impl Into<RefOperand<'a>>) -> Ref {
        self.zip(o, |a, b| a / b)
    }
    /// JS's `Math.pow` (the kernels' `wf_pow`): `f64::powf` (a negative
    /// base needs an integer exponent), but NaN for a NaN exponent and for
    /// ±1 to an infinite one.
    pub fn pow<'a>(&self, o: impl Into<RefOperand<'a>>) -> Ref {
        self.zip(o, |a, b| {
            match b.is_nan() || (b.is_infinite() && a.abs() == 1.0) {
                true => f64::NAN,
                false => a.powf(b),
            }
        })
    }
    pub fn maximum<'a>(&self, o: impl Into<RefOperand<'a>>) -> Ref {
        self.zip(o, nan_max)
    }
    pub fn minimum<'a>(&self, o: impl Into<RefOperand<'a>>) -> Ref {
        self.zip(o, nan_min)
    }
    pub fn equal<'a>(&self, o: impl Into<RefOperand<'a>>) -> Ref {
        self.zip(o, |a, b| truth(a == b))
    }
    pub fn greater<'a>(&self, o: impl Into<RefOperand<'a>>) -> Ref {
        self.zip(o, |a, b| truth(a > b))
    }
    pub fn greater_equal<'a>(&self, o: impl Into<RefOperand<'a>>) -> Ref {
        self.zip(o, |a, b| truth(a >= b))
    }
    pub fn less<'a>(&self, o: impl Into<RefOperand<'a>>) -> Ref {
        self.zip(o, |a, b| truth(a < b))
    }
    pub fn less_equal<'a>(&self, o: impl Into<RefOperand<'a>>) -> Ref {
        self.zip(o, |a, b| truth(a <= b))
    }

    pub fn neg(&self) -> Ref {
        self.map(|x| -x)
    }
    pub fn abs(&self) -> Ref {
        self.map(f64::abs)
    }
    pub fn exp(&self) -> Ref {
        self.map(f64::exp)
    }
    pub fn log(&self) -> Ref {
        self.map(f64::ln)
    }
    pub fn sqrt(&self) -> Ref {
        self.map(f64::sqrt)
    }
    pub fn rsqrt(&self) -> Ref {
        self.map(|x| 1.0 / x.sqrt())
    }
    pub fn square(&self) -> Ref {
        self.map(|x| x * x)
    }
    pub fn relu(&self) -> Ref {
        self.map(|x| nan_max(x, 0.0))
    }
    pub fn gelu(&self) -> Ref {
        self.map(gelu)
    }
    pub fn sigmoid(&self) -> Ref {
        self.map(|x| 1.0 / (1.0 + (-x).exp()))
    }
    pub fn tanh(&self) -> Ref {
        self.map(f64::tanh)
    }
    pub fn sin(&self) -> Ref {
        self.map(f64::sin)
    }
    pub fn cos(&self) -> Ref {
        self.map(f64::cos)
    }
    pub fn clamp(&self, min: f32, max: f32) -> Ref {
        self.map(|x| nan_min(nan_max(x, min as f64), max as f64))
    }
}

/// TF.js's `maximum`: NaN in either operand gives NaN (`f64::max` would
/// give the other operand, and hide it).
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

fn truth(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

/// The tanh approximation of GELU.
pub fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + (0.7978845608 * (x + 0.044715 * x * x * x)).tanh())
}

// ---------------------------------------------------------------------------
// Reductions

impl Ref {
    /// Which axes a reduction reduces (`None` = all), normalized and sorted.
    pub fn reduced_axes(&self, axes: Option<&[isize]>) -> Vec<usize> {
        let mut out: Vec<usize> = match axes {
            None => (0..self.rank()).collect(),
            Some(axes) => axes.iter().map(|&a| norm_axis(a, self.rank())).collect(),
        };
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Calls `f` once per output position of a reduction over `axes` with
    /// the values it reduces; returns the output (its shape follows
    /// `keep_dims`).
    pub fn reduce(
        &self,
        axes: Option<&[isize]>,
        keep_dims: bool,
        f: impl Fn(&[f32]) -> f64,
    ) -> Ref {
        let axes = self.reduced_axes(axes);
        // The output with reduced axes kept as 1, then the same positions
        // without them.
        let kept: Vec<usize> = (0..self.rank())
            .map(|d| if axes.contains(&d) { 1 } else { self.shape[d] })
            .collect();
        let inner: Vec<usize> = axes.iter().map(|&d| self.shape[d]).collect();
        let data = (0..numel(&kept))
            .map(|o| {
                let out_idx = unravel(o, &kept);
                let values: Vec<f32> = (0..numel(&inner))
                    .map(|r| {
                        let r_idx = unravel(r, &inner);
                        let mut idx = out_idx.clone();
                        for (k, &d) in axes.iter().enumerate() {
                            idx[d] = r_idx[k];
                        }
                        self.data[ravel(&idx, &self.shape)]
                    })
                    .collect();
                round(f(&values))
            })
            .collect();
        let shape: Vec<usize> = if keep_dims {
            kept
        } else {
            (0..self.rank())
                .filter(|d| !axes.contains(d))
                .map(|d| self.shape[d])
                .collect()
        };
        Ref::new(data, &shape)
    }

    pub fn sum(&self, axes: Option<&[isize]>, keep_dims: bool) -> Ref {
        self.reduce(axes, keep_dims, |v| v.iter().map(|&x| x as f64).sum())
    }

    pub fn mean(&self, axes: Option<&[isize]>, keep_dims: bool) -> Ref {
        self.reduce(axes, keep_dims, |v| {
            v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64
        })
    }

    pub fn max(&self, axes: Option<&[isize]>, keep_dims: bool) -> Ref {
        self.reduce(axes, keep_dims, |v| {
            v.iter().map(|&x| x as f64).fold(f64::NEG_INFINITY, nan_max)
        })
    }

    pub fn min(&self, axes: Option<&[isize]>, keep_dims: bool) -> Ref {
        self.reduce(axes, keep_dims, |v| {
            v.iter().map(|&x| x as f64).fold(f64::INFINITY, nan_min)
        })
    }

    /// The index of the largest value along `axis` (the first one on ties),
    /// as f32; the axis is removed.
    /// `gather` along `axis` (non-negative) at `idx` (each in range), of
    /// shape `idx_shape`, no batch dims.
    pub fn gather(&self, idx: &[usize], idx_shape: &[usize], axis: usize) -> Ref {
        let before: usize = self.shape[..axis].iter().product();
        let after: usize = self.shape[axis + 1..].iter().product();
        let mut data = Vec::new();
        for p in 0..before {
            for &i in idx {
                let row = p * self.shape[axis] + i;
                data.extend_from_slice(&self.data[row * after..(row + 1) * after]);
            }
        }
        let mut shape = self.shape[..axis].to_vec();
        shape.extend_from_slice(idx_shape);
        shape.extend_from_slice(&self.shape[axis + 1..]);
        Ref::new(data, &shape)
    }

    pub fn argmax(&self, axis: isize) -> Ref {
        self.reduce(Some(&[axis]), false, |v| {
            let mut best = 0;
            for (i, &x) in v.iter().enumerate() {
                if x > v[best] {
                    best = i;
                }
            }
            best as f64
        })
    }

    /// Calls `f` on every line along `axis` and writes what it returns back
    /// in place (softmax, log_softmax).
    pub fn along_axis(&self, axis: isize, f: impl Fn(&[f64]) -> Vec<f64>) -> Ref {
        let axis = norm_axis(axis, self.rank());
        let n = self.shape[axis];
        let stride = strides(&self.shape)[axis];
        let mut data = self.data.clone();
        for start in 0..self.size() {
            if unravel(start, &self.shape)[axis] != 0 {
                continue;
            }
            let line: Vec<f64> = (0..n)
                .map(|i| self.data[start + i * stride] as f64)
                .collect();
            for (i, v) in f(&line).into_iter().enumerate() {
                data[start + i * stride] = round(v);
            }
        }
        Ref::new(data, &self.shape)
    }

    /// `conv2d` of these NHWC images with the HWIO filter `f`, windows
    /// placed by `w`.
    pub fn conv2d(&self, f: &Ref, w: &Window) -> Ref {
        let ([n, h, wd, c], [kh, kw, _, o]) = (dims4(&self.shape), dims4(&f.shape));
        let [oh, ow] = w.out;
        let mut data = vec![0.0f64; n * oh * ow * o];
        for b in 0..n {
            for i in 0..oh {
                for j in 0..ow {
                    for (p, q, ih, iw) in w.taps([i, j], [kh, kw], [h, wd]) {
                        for ci in 0..c {
                            let x = self.data[((b * h + ih) * wd + iw) * c + ci] as f64;
                            for co in 0..o {
                                data[((b * oh + i) * ow + j) * o + co] +=
                                    x * f.data[((p * kw + q) * c + ci) * o + co] as f64;
                            }
                        }
                    }
                }
            }
        }
        Ref::new(data.into_iter().map(round).collect(), &[n, oh, ow, o])
    }

    /// `maxPool` (`max`) or `avgPool` of these NHWC images, windows of
    /// `w.size` placed by `w`; a mean counts the positions inside the images.
    pub fn pool(&self, max: bool, w: &Window) -> Ref {
        let [n, h, wd, c] = dims4(&self.shape);
        let [oh, ow] = w.out;
        let mut data = Vec::with_capacity(n * oh * ow * c);
        for b in 0..n {
            for i in 0..oh {
                for j in 0..ow {
                    let taps = w.taps([i, j], w.size, [h, wd]);
                    for ch in 0..c {
                        let at = |&(_, _, ih, iw): &(usize, usize, usize, usize)| {
                            self.data[((b * h + ih) * wd + iw) * c + ch] as f64
                        };
                        data.push(round(match max {
                            true => taps.iter().map(at).fold(f64::NEG_INFINITY, f64::max),
                            false => taps.iter().map(at).sum::<f64>() / taps.len() as f64,
                        }));
                    }
                }
            }
        }
        Ref::new(data, &[n, oh, ow, c])
    }

    /// The running sums along `axis` (TF.js's `cumsum`): without each
    /// element when `exclusive`, from the end when `reverse`.
    pub fn cumsum(&self, axis: isize, exclusive: bool, reverse: bool) -> Ref {
        self.along_axis(axis, |line| {
            let n = line.len();
            let mut out = vec![0.0; n];
            let mut acc = 0.0;
            for k in 0..n {
                let i = if reverse { n - 1 - k } else { k };
                if exclusive {
                    out[i] = acc;
                    acc += line[i];
                } else {
                    acc += line[i];
                    out[i] = acc;
                }
            }
            out
        })
    }

    pub fn softmax(&self, axis: isize) -> Ref {
        self.along_axis(axis, |line| {
            let m = line.iter().cloned().fold(f64::NEG_INFINITY, nan_max);
            let total: f64 = line.iter().map(|x| (x - m).exp()).sum();
            line.iter().map(|x| (x - m).exp() / total).collect()
        })
    }

    pub fn log_softmax(&self, axis: isize) -> Ref {
        self.along_axis(axis, |line| {
            let m = line.iter().cloned().fold(f64::NEG_INFINITY, nan_max);
            let total: f64 = line.iter().map(|x| (x - m).exp()).sum();
            line.iter().map(|x| x - m - total.ln()).collect()
        })
    }
}

// ---------------------------------------------------------------------------
// Linear algebra

impl Ref {
    /// `[..., m, k] @ [..., k, n] -> [..., m, n]`, the batch dims broadcast.
    pub fn matmul(&self, other: &Ref) -> Ref {
        assert!(
            self.rank() >= 2 && other.rank() >= 2,
            "matmul needs rank >= 2"
        );
        let (ra, rb) = (self.rank(), other.rank());
        let (m, k) = (self.shape[ra - 2], self.shape[ra - 1]);
        let (k2, n) = (other.shape[rb - 2], other.shape[rb - 1]);
        assert_eq!(k, k2, "matmul inner dims");
        let batch_a = &self.shape[..ra - 2];
        let batch_b = &other.shape[..rb - 2];
        let batch = broadcast_shapes(batch_a, batch_b);
        let mut shape = batch.clone();
        shape.extend([m, n]);
        let mut data = vec![0.0; numel(&shape)];
        for bi in 0..numel(&batch) {
            let b_idx = unravel(bi, &batch);
            let a0 = broadcast_source(&b_idx, batch_a) * m * k;
            let b0 = broadcast_source(&b_idx, batch_b) * k * n;
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0.0f64;
                    for p in 0..k {
                        acc += self.data[a0 + i * k + p] as f64 * other.data[b0 + p * n + j] as f64;
                    }
                    data[bi * m * n + i * n + j] = round(acc);
                }
            }
        }
        Ref::new(data, &shape)
    }

    /// Output dim `i` is input dim `perm[i]`; `None` reverses the dims.
    pub fn transpose(&self, perm: Option<&[usize]>) -> Ref {
        let perm: Vec<usize> = match perm {
            Some(p) => p.to_vec(),
            None => (0..self.rank()).rev().collect(),
        };
        let mut sorted = perm.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..self.rank()).collect::<Vec<_>>(), "bad perm");
        let shape: Vec<usize> = perm.iter().map(|&p| self.shape[p]).collect();
        let data = (0..numel(&shape))
            .map(|o| {
                let out_idx = unravel(o, &shape);
                let mut idx = vec![0; self.rank()];
                for (i, &p) in perm.iter().enumerate() {
                    idx[p] = out_idx[i];
                }
                self.data[ravel(&idx, &self.shape)]
            })
            .collect();
        Ref::new(data, &shape)
    }
}

// ---------------------------------------------------------------------------
// Shape

impl Ref {
    /// The same values in a new shape; one dim may be -1 (inferred).
    pub fn reshape(&self, shape: &[isize]) -> Ref {
        let known: usize = shape
            .iter()
            .filter(|&&d| d >= 0)
            .map(|&d| d as usize)
            .product();
        let out: Vec<usize> = shape
            .iter()
            .map(|&d| {
                if d < 0 {
                    assert!(known > 0, "cannot infer -1 with a 0 dim");
                    self.size() / known
                } else {
                    d as usize
                }
            })
            .collect();
        assert_eq!(
            numel(&out),
            self.size(),
            "reshape {:?} to {shape:?}",
            self.shape
        );
        Ref::new(self.data.clone(), &out)
    }

    /// The block starting at `begin` with `size` (-1: to the end) per dim.
    pub fn slice(&self, begin: &[usize], size: &[isize]) -> Ref {
        assert_eq!(begin.len(), self.rank());
        assert_eq!(size.len(), self.rank());
        let shape: Vec<usize> = (0..self.rank())
            .map(|d| {
                let s = if size[d] < 0 {
                    self.shape[d] - begin[d]
                } else {
                    size[d] as usize
                };
                assert!(begin[d] + s <= self.shape[d], "slice out of bounds");
                s
            })
            .collect();
        let data = (0..numel(&shape))
            .map(|o| {
                let idx: Vec<usize> = unravel(o, &shape)
                    .iter()
                    .zip(begin)
                    .map(|(i, b)| i + b)
                    .collect();
                self.data[ravel(&idx, &self.shape)]
            })
            .collect();
        Ref::new(data, &shape)
    }

    pub fn broadcast_to(&self, shape: &[usize]) -> Ref {
        assert_eq!(broadcast_shapes(&self.shape, shape), shape, "broadcast_to");
        let data = (0..numel(shape))
            .map(|o| self.data[broadcast_source(&unravel(o, shape), &self.shape)])
            .collect();
        Ref::new(data, shape)
    }

    /// Inserts a dim of 1 at `axis` of the output (`-1` = last).
    pub fn expand_dims(&self, axis: isize) -> Ref {
        let axis = norm_axis(axis, self.rank() + 1);
        let mut shape = self.shape.clone();
        shape.insert(axis, 1);
        Ref::new(self.data.clone(), &shape)
    }

    /// Removes the given dims (which must be 1), or every dim of 1.
    pub fn squeeze(&self, axes: Option<&[isize]>) -> Ref {
        let drop: Vec<usize> = match axes {
            None => (0..self.rank()).filter(|&d| self.shape[d] == 1).collect(),
            Some(axes) => axes.iter().map(|&a| norm_axis(a, self.rank())).collect(),
        };
        for &d in &drop {
            assert_eq!(self.shape[d], 1, "squeeze of a dim that is not 1");
        }
        let shape: Vec<usize> = (0..self.rank())
            .filter(|d| !drop.contains(d))
            .map(|d| self.shape[d])
            .collect();
        Ref::new(self.data.clone(), &shape)
    }

    pub fn flatten(&self) -> Ref {
        Ref::new(self.data.clone(), &[self.size()])
    }
}

/// A rank-4 shape's dims.
fn dims4(shape: &[usize]) -> [usize; 4] {
    [shape[0], shape[1], shape[2], shape[3]]
}

/// Where a convolution's or pool's windows sit: `size` taps `dilation`
/// apart, placed every `stride`, `before` rows and columns of padding
/// before the images, `out` windows down and across.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub size: [usize; 2],
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    pub before: [usize; 2],
    pub out: [usize; 2],
}

impl Window {
    /// TF.js's output size and pad before for `size` input elements along
    /// each dim: `same` (the extra after), or explicit `pads` (`[before,
    /// after]` per dim; zeros for valid).
    pub fn new(
        input: [usize; 2],
        size: [usize; 2],
        stride: [usize; 2],
        dilation: [usize; 2],
        same: bool,
        pads: [[usize; 2]; 2],
    ) -> Window {
        let (mut before, mut out) = ([0; 2], [0; 2]);
        for d in 0..2 {
            let reach = (size[d] - 1) * dilation[d] + 1;
            if same {
                out[d] = input[d].div_ceil(stride[d]);
                let total = ((out[d].max(1) - 1) * stride[d] + reach).saturating_sub(input[d]);
                before[d] = total / 2;
            } else {
                out[d] = (input[d] + pads[d][0] + pads[d][1] - reach) / stride[d] + 1;
                before[d] = pads[d][0];
            }
        }
        Window {
            size,
            stride,
            dilation,
            before,
            out,
        }
    }

    /// The taps of window `at` of a `size` filter inside images `hw`: each
    /// tap's place in the filter and in the images.
    fn taps(
        &self,
        at: [usize; 2],
        size: [usize; 2],
        hw: [usize; 2],
    ) -> Vec<(usize, usize, usize, usize)> {
        let mut out = Vec::new();
        for p in 0..size[0] {
            for q in 0..size[1] {
                let ih = (at[0] * self.stride[0] + p * self.dilation[0]) as isize
                    - self.before[0] as isize;
                let iw = (at[1] * self.stride[1] + q * self.dilation[1]) as isize
                    - self.before[1] as isize;
                if ih >= 0 && iw >= 0 && (ih as usize) < hw[0] && (iw as usize) < hw[1] {
                    out.push((p, q, ih as usize, iw as usize));
                }
            }
        }
        out
    }
}
