//! Gradients against central finite differences computed in f64 on the CPU,
//! in both worlds. Each check takes the op's function twice: on the GPU
//! (webfusion's ops, gradients by `value_and_grads`) and on the CPU (plain
//! f64), reduced to a scalar by a weighted sum with fixed, distinct weights
//! so every element's gradient differs.
//!
//! Tolerance: |gpu - fd| <= 2e-3 * max(1, |fd|). The finite differences
//! (h = 1e-4, f64) are exact to ~1e-8; the rest is the GPU's f32 arithmetic
//! through the forward and backward passes (transcendentals to ~1e-6
//! relative, sums of up to 60 terms).

use webfusion::{Device, RegistrationError, Tensor, Values};

use super::engine::{Seeded, device, read};
use crate::common::graphs::broadcastable;
use crate::common::reference::broadcast_shapes;

type GpuFn = dyn Fn(&[Tensor]) -> Result<Tensor, RegistrationError>;
type CpuFn = dyn Fn(&[Vec<f64>]) -> Vec<f64>;

/// Seeded values in `[lo, hi)`.
fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = Seeded::new(seed);
    (0..n).map(|_| lo + (hi - lo) * s.unit()).collect()
}

/// Checks the gradients of `sum(f(xs) * w)` with respect to each input,
/// `f` given on the GPU and on the CPU (returning its output's elements in
/// row-major order; `out` is the output's shape).
async fn check(
    gpu: &Device,
    what: &str,
    inputs: &[(&[usize], f64, f64)],
    out: &[usize],
    gpu_f: &GpuFn,
    cpu_f: &CpuFn,
) {
    let xs: Vec<Vec<f64>> = inputs
        .iter()
        .enumerate()
        .map(|(k, (shape, lo, hi))| values(shape.iter().product(), 7 + k as u64, *lo, *hi))
        .collect();
    let n_out: usize = out.iter().product();
    let w = values(n_out, 99, 0.5, 1.5);
    let loss = |xs: &[Vec<f64>]| -> f64 { cpu_f(xs).iter().zip(&w).map(|(y, w)| y * w).sum() };
    let tensors: Vec<Tensor> = xs
        .iter()
        .zip(inputs)
        .map(|(x, (shape, ..))| {
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            gpu.tensor(&x32, Some(shape)).unwrap()
        })
        .collect();
    let w32: Vec<f32> = w.iter().map(|&v| v as f32).collect();
    let weights = gpu.tensor(&w32, Some(out)).unwrap();
    let (value, grads) = gpu
        .value_and_grads(
            |xs| gpu_f(xs)?.mul(&weights)?.sum(None, false),
            &tensors,
            None,
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    // The CPU sees the inputs as the GPU does: rounded to f32.
    let xs: Vec<Vec<f64>> = xs
        .iter()
        .map(|x| x.iter().map(|&v| v as f32 as f64).collect())
        .collect();
    let got = read(&value).await[0] as f64;
    let want = loss(&xs);
    assert!(
        (got - want).abs() <= 1e-3 * want.abs().max(1.0),
        "{what}: value {got} vs {want}"
    );
    for (k, grad) in grads.iter().enumerate() {
        assert_eq!(grad.shape(), inputs[k].0, "{what}: input {k}'s gradient");
        let got = read(grad).await;
        for i in 0..xs[k].len() {
            let h = 1e-4;
            let mut up = xs.clone();
            up[k][i] += h;
            let mut down = xs.clone();
            down[k][i] -= h;
            let fd = (loss(&up) - loss(&down)) / (2.0 * h);
            let g = got[i] as f64;
            assert!(
                (g - fd).abs() <= 2e-3 * fd.abs().max(1.0),
                "{what}: d/dx{k}[{i}] = {g}, finite differences give {fd}"
            );
        }
    }
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + (0.797_884_560_8 * (x + 0.044_715 * x * x * x)).tanh())
}

pub async fn every_unary_op_has_the_gradient_of_finite_differences() {
    let gpu = device().await;
    type Unary = (
        &'static str,
        fn(&Tensor) -> Result<Tensor, RegistrationError>,
        fn(f64) -> f64,
        f64,
        f64,
    );
    let ops: [Unary; 14] = [
        ("neg", Tensor::neg, |x| -x, -2.0, 2.0),
        ("abs", Tensor::abs, f64::abs, 0.1, 2.0),
        ("exp", Tensor::exp, f64::exp, -2.0, 2.0),
        ("log", Tensor::log, f64::ln, 0.2, 3.0),
        ("sqrt", Tensor::sqrt, f64::sqrt, 0.2, 3.0),
        ("rsqrt", Tensor::rsqrt, |x| 1.0 / x.sqrt(), 0.3, 3.0),
        ("square", Tensor::square, |x| x * x, -2.0, 2.0),
        ("relu", Tensor::relu, |x| x.max(0.0), 0.1, 2.0),
        ("gelu", Tensor::gelu, gelu, -2.0, 2.0),
        (
            "sigmoid",
            Tensor::sigmoid,
            |x| 1.0 / (1.0 + (-x).exp()),
            -3.0,
            3.0,
        ),
        ("tanh", Tensor::tanh, f64::tanh, -2.0, 2.0),
        ("sin", Tensor::sin, f64::sin, -3.0, 3.0),
        ("cos", Tensor::cos, f64::cos, -3.0, 3.0),
        ("tan", Tensor::tan, f64::tan, -1.2, 1.2),
    ];
    for (name, op, f, lo, hi) in ops {
        check(
            &gpu,
            name,
            &[(&[2, 3], lo, hi)],
            &[2, 3],
            &move |xs| op(&xs[0]),
            &move |xs| xs[0].iter().map(|&x| f(x)).collect(),
        )
        .await;
    }
    // relu and abs on the negative side too.
    check(
        &gpu,
        "relu<0",
        &[(&[4], -2.0, -0.1)],
        &[4],
        &|xs| xs[0].relu(),
        &|xs| xs[0].iter().map(|&x| x.max(0.0)).collect(),
    )
    .await;
}

/// `a` [2,3] op `b` broadcast from `b_shape` ([3] or [2,1]).
fn broadcast_pairs(a: &[f64], b: &[f64], b_shape: &[usize], f: fn(f64, f64) -> f64) -> Vec<f64> {
    (0..6)
        .map(|i| {
            let (r, c) = (i / 3, i % 3);
            let j = if b_shape == [3] { c } else { r };
            f(a[i], b[j])
        })
        .collect()
}

pub async fn binary_ops_sum_their_gradients_over_broadcast_axes() {
    let gpu = device().await;
    type Binary = (
        &'static str,
        fn(&Tensor, &Tensor) -> Result<Tensor, RegistrationError>,
        fn(f64, f64) -> f64,
    );
    let ops: [Binary; 7] = [
        ("add", |a, b| a.add(b), |a, b| a + b),
        ("sub", |a, b| a.sub(b), |a, b| a - b),
        ("mul", |a, b| a.mul(b), |a, b| a * b),
        ("div", |a, b| a.div(b), |a, b| a / b),
        ("pow", |a, b| a.pow(b), f64::powf),
        ("maximum", |a, b| a.maximum(b), f64::max),
        ("minimum", |a, b| a.minimum(b), f64::min),
    ];
    for (name, op, f) in ops {
        for b_shape in [&[3usize][..], &[2, 1]] {
            check(
                &gpu,
                &format!("{name} [2,3] x {b_shape:?}"),
                &[(&[2, 3], 0.5, 2.0), (b_shape, 0.4, 1.9)],
                &[2, 3],
                &move |xs| op(&xs[0], &xs[1]),
                &move |xs| broadcast_pairs(&xs[0], &xs[1], b_shape, f),
            )
            .await;
        }
    }
}

pub async fn scalar_operands_clamp_and_where_have_their_gradients() {
    let gpu = device().await;
    let one = |f: fn(f64) -> f64| move |xs: &[Vec<f64>]| xs[0].iter().map(|&x| f(x)).collect();
    check(
        &gpu,
        "x - 3",
        &[(&[5], -2.0, 2.0)],
        &[5],
        &|xs| xs[0].sub(3.0),
        &one(|x| x - 3.0),
    )
    .await;
    check(
        &gpu,
        "2 / x",
        &[(&[5], 0.5, 2.0)],
        &[5],
        &|xs| xs[0].device().full(&[], 2.0)?.div(&xs[0]),
        &one(|x| 2.0 / x),
    )
    .await;
    check(
        &gpu,
        "x ^ 3",
        &[(&[5], 0.5, 2.0)],
        &[5],
        &|xs| xs[0].pow(3.0),
        &one(|x| x.powi(3)),
    )
    .await;
    check(
        &gpu,
        "clamp",
        &[(&[8], -2.0, 2.0)],
        &[8],
        &|xs| xs[0].clamp(-1.0, 1.0),
        &one(|x| x.clamp(-1.0, 1.0)),
    )
    .await;
    // where(x > 0, x * 2, x * x): the condition passes nothing.
    check(
        &gpu,
        "where",
        &[(&[6], -2.0, 2.0)],
        &[6],
        &|xs| {
            let x = &xs[0];
            x.device()
                .where_(&x.greater(0.0)?, &x.mul(2.0)?, &x.square()?)
        },
        &one(|x| if x > 0.0 { 2.0 * x } else { x * x }),
    )
    .await;
}

pub async fn reductions_with_and_without_keep_dims_have_their_gradients() {
    let gpu = device().await;
    // x [2,3,4] reduced over axis 1 (kept or not) and over everything.
    let over_1 = |f: fn(&[f64]) -> f64| {
        move |xs: &[Vec<f64>]| {
            let x = &xs[0];
            let mut out = Vec::new();
            for i in 0..2 {
                for k in 0..4 {
                    let line: Vec<f64> = (0..3).map(|j| x[i * 12 + j * 4 + k]).collect();
                    out.push(f(&line));
                }
            }
            out
        }
    };
    let sum: fn(&[f64]) -> f64 = |l| l.iter().sum();
    let mean: fn(&[f64]) -> f64 = |l| l.iter().sum::<f64>() / l.len() as f64;
    let max: fn(&[f64]) -> f64 = |l| l.iter().copied().fold(f64::MIN, f64::max);
    let min: fn(&[f64]) -> f64 = |l| l.iter().copied().fold(f64::MAX, f64::min);
    let lse: fn(&[f64]) -> f64 = |l| l.iter().map(|v| v.exp()).sum::<f64>().ln();
    let prod: fn(&[f64]) -> f64 = |l| l.iter().product();
    type Reduce = fn(&Tensor, Option<&[isize]>, bool) -> Result<Tensor, RegistrationError>;
    type Line = fn(&[f64]) -> f64;
    let ops: [(&str, Reduce, Line); 6] = [
        ("sum", Tensor::sum, sum),
        ("mean", Tensor::mean, mean),
        ("max", Tensor::max, max),
        ("min", Tensor::min, min),
        ("logSumExp", Tensor::log_sum_exp, lse),
        ("prod", Tensor::prod, prod),
    ];
    for (name, op, f) in ops {
        for keep in [false, true] {
            let out: &[usize] = if keep { &[2, 1, 4] } else { &[2, 4] };
            check(
                &gpu,
                &format!("{name}(axis 1, keepDims {keep})"),
                &[(&[2, 3, 4], -2.0, 2.0)],
                out,
                &move |xs| op(&xs[0], Some(&[1]), keep),
                &over_1(f),
            )
            .await;
        }
        check(
            &gpu,
            &format!("{name}(all)"),
            &[(&[2, 3, 4], -2.0, 2.0)],
            &[],
            &move |xs| op(&xs[0], None, false),
            &move |xs| vec![f(&xs[0])],
        )
        .await;
    }
}

/// `a` [batch?, m, k] times `b` [k, n] (the batch broadcast over `b`).
fn matmul_cpu(a: &[f64], b: &[f64], batch: usize, m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; batch * m * n];
    for t in 0..batch {
        for i in 0..m {
            for j in 0..n {
                out[(t * m + i) * n + j] =
                    (0..k).map(|p| a[(t * m + i) * k + p] * b[p * n + j]).sum();
            }
        }
    }
    out
}

pub async fn matmul_2d_and_batched_with_a_broadcast_operand_has_its_gradients() {
    let gpu = device().await;
    check(
        &gpu,
        "matmul [3,4] x [4,5]",
        &[(&[3, 4], -1.0, 1.0), (&[4, 5], -1.0, 1.0)],
        &[3, 5],
        &|xs| xs[0].matmul(&xs[1]),
        &|xs| matmul_cpu(&xs[0], &xs[1], 1, 3, 4, 5),
    )
    .await;
    check(
        &gpu,
        "matmul [2,3,4] x [4,5]",
        &[(&[2, 3, 4], -1.0, 1.0), (&[4, 5], -1.0, 1.0)],
        &[2, 3, 5],
        &|xs| xs[0].matmul(&xs[1]),
        &|xs| matmul_cpu(&xs[0], &xs[1], 2, 3, 4, 5),
    )
    .await;
}

pub async fn views_cat_stack_and_softmax_pass_their_gradients() {
    let gpu = device().await;
    // x [2,3]: transpose, reshape, slice, broadcast, expand/squeeze, flatten,
    // each then multiplied by itself so the gradient depends on the value.
    let x_of = |xs: &[Vec<f64>]| xs[0].clone();
    check(
        &gpu,
        "transpose",
        &[(&[2, 3], -1.0, 1.0)],
        &[3, 2],
        &|xs| {
            let t = xs[0].transpose(None)?;
            t.mul(&t)
        },
        &move |xs| {
            let x = x_of(xs);
            (0..6)
                .map(|i| {
                    let (r, c) = (i / 2, i % 2);
                    x[c * 3 + r].powi(2)
                })
                .collect()
        },
    )
    .await;
    check(
        &gpu,
        "reshape+flatten",
        &[(&[2, 3], -1.0, 1.0)],
        &[6],
        &|xs| xs[0].reshape(&[3, 2])?.flatten()?.exp(),
        &|xs| xs[0].iter().map(|v| v.exp()).collect(),
    )
    .await;
    check(
        &gpu,
        "slice",
        &[(&[3, 4], -1.0, 1.0)],
        &[2, 2],
        &|xs| xs[0].slice(&[1, 1], &[2, 2])?.square(),
        &|xs| {
            let x = &xs[0];
            vec![x[5] * x[5], x[6] * x[6], x[9] * x[9], x[10] * x[10]]
        },
    )
    .await;
    check(
        &gpu,
        "broadcastTo+expandDims+squeeze",
        &[(&[3], -1.0, 1.0)],
        &[2, 3],
        &|xs| {
            xs[0]
                .expand_dims(0)?
                .broadcast_to(&[2, 3])?
                .mul(&xs[0])?
                .squeeze(None)
        },
        &|xs| {
            let x = &xs[0];
            (0..6).map(|i| x[i % 3] * x[i % 3]).collect()
        },
    )
    .await;
    check(
        &gpu,
        "cat",
        &[(&[2, 2], -1.0, 1.0), (&[2, 1], -1.0, 1.0)],
        &[2, 3],
        &|xs| xs[0].device().cat(&[&xs[0], &xs[1].mul(3.0)?], 1),
        &|xs| {
            let (a, b) = (&xs[0], &xs[1]);
            vec![a[0], a[1], 3.0 * b[0], a[2], a[3], 3.0 * b[1]]
        },
    )
    .await;
    check(
        &gpu,
        "stack",
        &[(&[3], -1.0, 1.0), (&[3], -1.0, 1.0)],
        &[2, 3],
        &|xs| xs[0].device().stack(&[&xs[0], &xs[1].exp()?], 0),
        &|xs| {
            let mut out = xs[0].clone();
            out.extend(xs[1].iter().map(|v| v.exp()));
            out
        },
    )
    .await;
    let softmax_rows = |x: &[f64], log: bool| -> Vec<f64> {
        x.chunks(4)
            .flat_map(|row| {
                let m = row.iter().copied().fold(f64::MIN, f64::max);
                let z: f64 = row.iter().map(|v| (v - m).exp()).sum();
                row.iter()
                    .map(move |v| {
                        if log {
                            v - m - z.ln()
                        } else {
                            (v - m).exp() / z
                        }
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    check(
        &gpu,
        "softmax",
        &[(&[2, 4], -2.0, 2.0)],
        &[2, 4],
        &|xs| xs[0].softmax(-1),
        &move |xs| softmax_rows(&xs[0], false),
    )
    .await;
    check(
        &gpu,
        "logSoftmax",
        &[(&[2, 4], -2.0, 2.0)],
        &[2, 4],
        &|xs| xs[0].log_softmax(-1),
        &move |xs| softmax_rows(&xs[0], true),
    )
    .await;
}

pub async fn an_mlp_loss_has_the_gradients_of_finite_differences_and_an_unused_input_gets_zeros() {
    let gpu = device().await;
    // x [4,3] -> relu(x w1 + b1) w2 -> mean squared error to a fixed target.
    check(
        &gpu,
        "mlp",
        &[
            (&[3, 5], -0.8, 0.8),
            (&[5], -0.3, 0.3),
            (&[5, 2], -0.8, 0.8),
        ],
        &[],
        &|ws| {
            let d = ws[0].device();
            let x = d.tensor(
                &[
                    0.5, -1.0, 2.0, 1.5, 0.3, -0.7, -0.2, 0.9, 1.1, 0.4, -1.3, 0.8,
                ],
                Some(&[4, 3]),
            )?;
            let target = d.tensor(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0], Some(&[4, 2]))?;
            let h = x.matmul(&ws[0])?.add(&ws[1])?.relu()?;
            h.matmul(&ws[2])?.sub(&target)?.square()?.mean(None, false)
        },
        &|ws| {
            let x = [
                0.5, -1.0, 2.0, 1.5, 0.3, -0.7, -0.2, 0.9, 1.1, 0.4, -1.3, 0.8,
            ];
            let target = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0];
            let mut h = matmul_cpu(&x, &ws[0], 1, 4, 3, 5);
            for (i, v) in h.iter_mut().enumerate() {
                *v = (*v + ws[1][i % 5]).max(0.0);
            }
            let y = matmul_cpu(&h, &ws[2], 1, 4, 5, 2);
            vec![
                y.iter()
                    .zip(target)
                    .map(|(y, t)| (y - t).powi(2))
                    .sum::<f64>()
                    / 8.0,
            ]
        },
    )
    .await;
    let a = gpu.tensor(&[1.0, 2.0], None).unwrap();
    let unused = gpu.tensor(&[3.0, 4.0, 5.0], None).unwrap();
    let grads = gpu
        .grads(|xs| xs[0].square()?.sum(None, false), &[a, unused], None)
        .unwrap();
    assert_eq!(read(&grads[0]).await, vec![2.0, 4.0]);
    assert_eq!(read(&grads[1]).await, vec![0.0, 0.0, 0.0]);
    // A non-scalar result needs dy.
    let x = gpu.tensor(&[1.0, 2.0], None).unwrap();
    let refused = gpu.grads(|xs| xs[0].exp(), std::slice::from_ref(&x), None);
    let Err(refused) = refused else {
        panic!("grads of a non-scalar without dy was accepted")
    };
    assert!(refused.to_string().contains("scalar"), "{refused}");
    let dy = gpu.tensor(&[1.0, -1.0], None).unwrap();
    let g = gpu
        .grads(|xs| xs[0].mul(3.0), std::slice::from_ref(&x), Some(&dy))
        .unwrap();
    assert_eq!(read(&g[0]).await, vec![3.0, -3.0]);
    // The forms for one tensor.
    let g = gpu
        .grad(|x| x.square()?.sum(None, false), &x, None)
        .unwrap();
    assert_eq!(read(&g).await, vec![2.0, 4.0]);
    let (v, g) = gpu.value_and_grad(|x| x.mul(2.0), &x, Some(&dy)).unwrap();
    assert_eq!(
        (read(&v).await, read(&g).await),
        (vec![2.0, 4.0], vec![2.0, -2.0])
    );
}

/// A dy of another device, or of ints or bools, is refused, as TF.js
/// refuses them: both were taken before (found by outside testing), and a
/// dy of another device was multiplied into this one's gradients.
pub async fn a_dy_of_another_device_or_of_ints_or_bools_is_refused() {
    let gpu = device().await;
    let other = device().await;
    let x = gpu.tensor(&[1.0, 2.0], None).unwrap();
    let triple = |xs: &[Tensor]| xs[0].mul(3.0);
    let elsewhere = other.tensor(&[1.0, -1.0], None).unwrap();
    let refused = gpu.grads(triple, std::slice::from_ref(&x), Some(&elsewhere));
    assert!(refused.is_err_and(|e| e.to_string().contains("dy lives on")));
    for dy in [
        gpu.tensor_of(Values::int32(&[1, -1]), None).unwrap(),
        gpu.tensor_of(Values::bool(&[true, false]), None).unwrap(),
    ] {
        let refused = gpu.grads(triple, std::slice::from_ref(&x), Some(&dy));
        let Err(refused) = refused else {
            panic!("a {} dy was accepted", dy.dtype())
        };
        assert!(refused.to_string().contains("dy is"), "{refused}");
    }
    let dy = gpu.tensor(&[1.0, -1.0], None).unwrap();
    let g = gpu
        .grads(triple, std::slice::from_ref(&x), Some(&dy))
        .unwrap();
    assert_eq!(read(&g[0]).await, vec![3.0, -3.0]);
}

pub async fn a_failure_in_the_forward_pass_reaches_the_value_and_the_gradients() {
    let gpu = device().await;
    let x = gpu.tensor(&[0.5, -0.25], None).unwrap();
    // 2^36 elements: no kernel can index them, forward or backward.
    let (value, grads) = gpu
        .value_and_grads(
            |xs| {
                xs[0]
                    .reshape(&[1, 1, 2])?
                    .broadcast_to(&[1 << 17, 1 << 18, 2])?
                    .exp()?
                    .sum(None, false)
            },
            std::slice::from_ref(&x),
            None,
        )
        .unwrap();
    let value_error = super::engine::read_err(&value).await;
    let grad_error = super::engine::read_err(&grads[0]).await;
    // Refused on the CPU either way: as a buffer past maxBufferSize where a
    // value must be stored, as work past 32-bit indexing where it is not.
    use webfusion::FailureKind::{Allocation, IndexRange};
    for error in [&value_error, &grad_error] {
        let kind = error.first().unwrap().root.kind;
        assert!(matches!(kind, Allocation | IndexRange), "{error}");
    }
    // Everything else reads normally, the input included.
    assert_eq!(read(&x).await, vec![0.5, -0.25]);
}

/// A random program over smooth ops: each step reads values made before it
/// (inputs or earlier steps) and makes one more. Replayed on any inputs, so
/// the same program gives the gradients and the finite differences.
///
/// Ops with kinks (`relu`, `abs`, `clamp`, `maximum`/`minimum`, `max`/`min`
/// reductions, comparisons, `where`) are left out: a finite difference
/// across a kink measures neither side. Their rules are checked by the
/// cases above, away from the kinks. `log`, `sqrt`, `rsqrt`, `div`, `pow`
/// and `exp` are applied to values kept in their domain (`1 + x^2`,
/// `tanh(x)`).
#[derive(Debug, Clone)]
enum Step {
    Unary(usize, &'static str),
    Binary(usize, usize, &'static str),
    Matmul(usize, usize),
    Reduce(usize, &'static str, isize, bool),
    Softmax(usize, bool),
    Transpose(usize),
    Flatten(usize),
    Slice(usize),
    ExpandBroadcast(usize),
    Cat(usize, usize),
}

/// A seeded program and its inputs' shapes.
fn random_program(seed: u64) -> (Vec<Vec<usize>>, Vec<Step>) {
    let mut s = Seeded::new(seed);
    let mut below = move |n: usize| s.below(n);
    let (m, n, k) = (2 + below(3), 2 + below(3), 2 + below(2));
    let inputs = vec![vec![m, n], vec![n], vec![n, k]];
    let mut shapes = inputs.clone();
    let mut steps = Vec::new();
    while steps.len() < 8 {
        let a = below(shapes.len());
        let sa = shapes[a].clone();
        let b = below(shapes.len());
        let sb = shapes[b].clone();
        let (step, shape) = match below(10) {
            0 | 1 => {
                let ops = [
                    "tanh", "sigmoid", "sin", "cos", "square", "neg", "gelu", "exp", "log", "sqrt",
                    "rsqrt",
                ];
                (Step::Unary(a, ops[below(ops.len())]), sa)
            }
            2 | 3 => {
                if !broadcastable(&sa, &sb) {
                    continue;
                }
                let shape = broadcast_shapes(&sa, &sb);
                let ops = ["add", "sub", "mul", "div", "pow"];
                (Step::Binary(a, b, ops[below(ops.len())]), shape)
            }
            4 if sa.len() == 2 && sb.len() == 2 && sa[1] == sb[0] => {
                (Step::Matmul(a, b), vec![sa[0], sb[1]])
            }
            5 if !sa.is_empty() => {
                let axis = below(sa.len());
                let keep = below(2) == 0;
                let op = ["sum", "mean", "logSumExp"][below(3)];
                let mut shape = sa.clone();
                match keep {
                    true => shape[axis] = 1,
                    false => {
                        shape.remove(axis);
                    }
                }
                (Step::Reduce(a, op, axis as isize, keep), shape)
            }
            6 if !sa.is_empty() => (Step::Softmax(a, below(2) == 0), sa),
            7 if sa.len() == 2 => (Step::Transpose(a), vec![sa[1], sa[0]]),
            7 => (Step::Flatten(a), vec![sa.iter().product()]),
            8 if sa.first().is_some_and(|&d| d > 1) => {
                let mut shape = sa.clone();
                shape[0] -= 1;
                (Step::Slice(a), shape)
            }
            8 if sa.len() == 1 => (Step::ExpandBroadcast(a), vec![2, sa[0]]),
            9 if sa == sb && !sa.is_empty() => {
                let mut shape = sa.clone();
                shape[0] *= 2;
                (Step::Cat(a, b), shape)
            }
            _ => continue,
        };
        steps.push(step);
        shapes.push(shape);
    }
    (inputs, steps)
}

/// Runs `steps` on `xs`; the loss is the weighted sum of the last two values
/// made (fixed weights), so every step near the end counts.
fn run_program(steps: &[Step], xs: &[Tensor]) -> Result<Tensor, RegistrationError> {
    let mut values: Vec<Tensor> = xs.to_vec();
    let positive = |t: &Tensor| t.square()?.add(1.0);
    for step in steps {
        let v = |i: usize| &values[i];
        let made = match step {
            Step::Unary(a, op) => match *op {
                "tanh" => v(*a).tanh(),
                "sigmoid" => v(*a).sigmoid(),
                "sin" => v(*a).sin(),
                "cos" => v(*a).cos(),
                "square" => v(*a).square(),
                "neg" => v(*a).neg(),
                "gelu" => v(*a).gelu(),
                "exp" => v(*a).tanh()?.exp(),
                "log" => positive(v(*a))?.log(),
                "sqrt" => positive(v(*a))?.sqrt(),
                _ => positive(v(*a))?.rsqrt(),
            },
            Step::Binary(a, b, op) => match *op {
                "add" => v(*a).add(v(*b)),
                "sub" => v(*a).sub(v(*b)),
                "mul" => v(*a).mul(v(*b)),
                "div" => v(*a).div(&positive(v(*b))?),
                _ => positive(v(*a))?.pow(&v(*b).tanh()?),
            },
            Step::Matmul(a, b) => v(*a).matmul(v(*b)),
            Step::Reduce(a, op, axis, keep) => {
                let axes = [*axis];
                match *op {
                    "sum" => v(*a).sum(Some(&axes), *keep),
                    "mean" => v(*a).mean(Some(&axes), *keep),
                    _ => v(*a).log_sum_exp(Some(&axes), *keep),
                }
            }
            Step::Softmax(a, log) => match log {
                true => v(*a).log_softmax(-1),
                false => v(*a).softmax(-1),
            },
            Step::Transpose(a) => v(*a).transpose(None),
            Step::Flatten(a) => v(*a).flatten(),
            Step::Slice(a) => {
                let t = v(*a);
                let mut size: Vec<isize> = t.shape().iter().map(|&d| d as isize).collect();
                size[0] -= 1;
                let mut begin = vec![0; t.rank()];
                begin[0] = 1;
                t.slice(&begin, &size)
            }
            Step::ExpandBroadcast(a) => {
                let t = v(*a).expand_dims(0)?;
                t.broadcast_to(&[2, t.shape()[1]])
            }
            Step::Cat(a, b) => {
                let d = v(*a).device().clone();
                d.cat(&[v(*a), v(*b)], 0)
            }
        }?;
        values.push(made);
    }
    let term = |i: usize, t: &Tensor| -> Result<Tensor, RegistrationError> {
        let w: Vec<f32> = (0..t.size())
            .map(|j| 0.5 + ((j * 7 + i * 3) % 5) as f32 * 0.25)
            .collect();
        t.mul(&t.device().tensor(&w, Some(t.shape()))?)?
            .sum(None, false)
    };
    let n = values.len();
    term(0, &values[n - 1])?.add(&term(1, &values[n - 2])?)
}

/// Tolerance of the random-program check: |g - fd| <= 2e-2 * max(1, |fd|).
/// The finite differences here are central, h = 1e-2, of the GPU's own f32
/// forward pass (checked against the CPU reference by the engine's property
/// tests): truncation ~h^2 and f32 rounding of the loss over 2h ~1e-5.
const PROGRAM_TOL: f32 = 2e-2;

pub async fn random_programs_of_smooth_ops_have_the_gradients_of_finite_differences() {
    let gpu = device().await;
    let h = 1e-2f32;
    for seed in 0..24u64 {
        let (shapes, steps) = random_program(seed);
        let xs: Vec<Vec<f32>> = shapes
            .iter()
            .enumerate()
            .map(|(k, shape)| {
                let n = shape.iter().product();
                values(n, seed * 10 + k as u64, -1.0, 1.0)
                    .into_iter()
                    .map(|v| v as f32)
                    .collect()
            })
            .collect();
        let upload = |xs: &[Vec<f32>]| -> Vec<Tensor> {
            xs.iter()
                .zip(&shapes)
                .map(|(x, s)| gpu.tensor(x, Some(s)).unwrap())
                .collect()
        };
        let inputs = upload(&xs);
        let (_, grads) = gpu
            .value_and_grads(|xs| run_program(&steps, xs), &inputs, None)
            .unwrap_or_else(|e| panic!("seed {seed}: {steps:?}: {e}"));
        // Every perturbed forward pass registered before any is read: one
        // flush computes them all.
        let mut perturbed = Vec::new();
        for (k, x) in xs.iter().enumerate() {
            for j in 0..x.len() {
                for sign in [1.0f32, -1.0] {
                    let mut moved = xs.to_vec();
                    moved[k][j] += sign * h;
                    perturbed.push(run_program(&steps, &upload(&moved)).unwrap());
                }
            }
        }
        let mut fd = perturbed.chunks(2);
        for (k, g) in grads.iter().enumerate() {
            let got = read(g).await;
            for (j, &g) in got.iter().enumerate() {
                let pair = fd.next().unwrap();
                let (up, down) = (read(&pair[0]).await[0], read(&pair[1]).await[0]);
                let want = (up - down) / (2.0 * h);
                assert!(
                    (g - want).abs() <= PROGRAM_TOL * want.abs().max(1.0),
                    "seed {seed}, input {k}, element {j}: gradient {g}, finite difference {want}\n{steps:?}"
                );
            }
        }
    }
}

/// Found by outside testing: the gradient of `a ^ b` with respect to `b`
/// was NaN where `a <= 0` (`y * log(a)`), and with the checks on it failed
/// at `log`. TF.js's is `y * log(a)` where `a > 0` and 0 elsewhere, for a
/// tensor base and a scalar one, and so is ours, with the checks on and
/// off, on the host and in kernels.
pub async fn the_gradient_of_pow_by_its_exponent_is_zero_where_the_base_is_not_positive() {
    for kernels in [false, true] {
        for checks in [false, true] {
            let gpu = match kernels {
                false => device().await,
                true => super::engine::kernels_only().await,
            };
            gpu.set_check_numerics(checks);
            let what = format!("kernels {kernels}, checks {checks}");
            let a = gpu.tensor(&[0.0, -2.0, 2.0, 3.0], None).unwrap();
            let b = gpu.tensor(&[2.0, 2.0, 2.0, 0.5], None).unwrap();
            let grads = gpu
                .grads(|v| v[0].pow(&v[1])?.sum(None, false), &[a, b], None)
                .unwrap();
            let want = [0.0, 0.0, 4.0 * 2f32.ln(), 3f32.sqrt() * 3f32.ln()];
            super::engine::close_within(&read(&grads[1]).await, &want, 1e-6);
            // The base's gradient, b a^(b-1), is as it was.
            let base = [0.0, -4.0, 4.0, 0.5 / 3f32.sqrt()];
            super::engine::close_within(&read(&grads[0]).await, &base, 1e-6);
            // A scalar base: s ^ x, by x.
            for (s, factor) in [(0.0f32, 0.0f32), (-2.0, 0.0), (2.0, 2f32.ln())] {
                let x = gpu.tensor(&[2.0, 3.0], None).unwrap();
                let g = gpu
                    .grad(|x| gpu.full(&[], s)?.pow(x)?.sum(None, false), &x, None)
                    .unwrap();
                let want: Vec<f32> = [2.0, 3.0].iter().map(|&e| s.powf(e) * factor).collect();
                super::engine::close_within(&read(&g).await, &want, 1e-6);
                assert!(gpu.sync().await.is_ok(), "{what}, base {s}: nothing failed");
            }
        }
    }
}

/// The gradient of `logSumExp` over values near 10^8 read `[1, 1]` for
/// `[1e8, 1e8]` where it is `[0.5, 0.5]` (found by outside testing), and
/// so did every softmax's, which passes through it: the rule took
/// `exp(x - logSumExp(x))` from the rounded logSumExp, whose ulp there (8)
/// is larger than the `log 2` it carries. It is the softmax of `x` from
/// its max now, as TF.js's composed gradient is, on every path; rows of
/// ordinary values keep their gradients (the other tests here).
pub async fn log_sum_exp_and_softmax_keep_their_gradients_for_values_far_from_zero() {
    let softmax = |x: &[f64]| -> Vec<f64> {
        let m = x.iter().cloned().fold(f64::MIN, f64::max);
        let e: Vec<f64> = x.iter().map(|v| (v - m).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|v| v / s).collect()
    };
    for max in [1024, 0] {
        let gpu = super::engine::device_with(webfusion::DeviceOptions {
            host_max_elements: max,
            ..webfusion::DeviceOptions::default()
        })
        .await;
        for row in [
            vec![1e8f32, 1e8],
            vec![-1e8, -1e8],
            vec![1e8, 99999992.0, 100000008.0],
            vec![1e4, 1e4 + 1.0, 1e4 - 2.0, 1e4],
        ] {
            let x64: Vec<f64> = row.iter().map(|&v| f64::from(v)).collect();
            let s = softmax(&x64);
            // d/dx of sum(softmax(x) * w): s * (w - sum(w * s)).
            let w: Vec<f64> = (0..row.len()).map(|i| i as f64 + 1.0).collect();
            let ws: f64 = w.iter().zip(&s).map(|(a, b)| a * b).sum();
            let want_softmax: Vec<f64> = s.iter().zip(&w).map(|(s, w)| s * (w - ws)).collect();
            let x = gpu.tensor(&row, Some(&[1, row.len()])).unwrap();
            let weights: Vec<f32> = w.iter().map(|&v| v as f32).collect();
            let wt = gpu.tensor(&weights, Some(&[1, row.len()])).unwrap();
            let lse = gpu
                .grad(|x| x.log_sum_exp(Some(&[-1]), false), &x, None)
                .unwrap();
            let sm = gpu
                .grad(|x| x.softmax(-1)?.mul(&wt)?.sum(None, false), &x, None)
                .unwrap();
            for (what, got, want) in [
                ("logSumExp", read(&lse).await, &s),
                ("softmax", read(&sm).await, &want_softmax),
            ] {
                for (g, w) in got.iter().zip(want.iter()) {
                    assert!(
                        (f64::from(*g) - w).abs() <= 1e-5 * w.abs().max(1.0),
                        "host {max}: {what}'s gradient at {row:?}: {got:?}, not {want:?}"
                    );
                }
            }
        }
    }
}
