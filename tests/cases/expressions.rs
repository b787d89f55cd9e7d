//! Bytes are written when they are needed (docs/design.md §2 item 10), in both
//! worlds: code that keeps every intermediate in a live handle, as JS code
//! without `tidy` does, fuses as code that drops them, and a temporary
//! holds neither bytes nor failures.

use webfusion::{FailureKind, Tensor};

use super::engine::{close_within, device, kernels_only, read, read_err};

/// The 16-op chain of the engine tests, applied `n` times over: op `i`.
fn step(y: &Tensor, x: &Tensor, i: usize) -> Tensor {
    match i % 4 {
        0 => y.mul(0.9).unwrap(),
        1 => y.tanh().unwrap(),
        2 => y.add(x).unwrap(),
        _ => y.sigmoid().unwrap(),
    }
}

/// `x` and the `n` tensors of `step` applied `n` times to it, every one
/// kept in a live handle, as code without `tidy` keeps them.
fn held_chain(x: &Tensor, n: usize) -> Vec<Tensor> {
    let mut kept = vec![x.clone()];
    for i in 0..n {
        let next = step(kept.last().unwrap(), x, i);
        kept.push(next);
    }
    kept
}

/// The benchmark's W6 loop: 1000 ops on `x` (add, mul, sub and maximum
/// with scalars, in turn), every intermediate kept.
pub fn w6_chain(x: Tensor) -> Vec<Tensor> {
    let mut kept = vec![x];
    for i in 0..1000 {
        let y = kept.last().unwrap();
        let next = match i % 4 {
            0 => y.add(0.01),
            1 => y.mul(0.999),
            2 => y.sub(0.005),
            _ => y.maximum(-2.0),
        };
        kept.push(next.unwrap());
    }
    kept
}

/// `v` after the first `n` ops of `w6_chain`, on the CPU.
pub fn w6_on_cpu(v: f32, n: usize) -> f32 {
    (0..n).fold(v, |y, i| match i % 4 {
        0 => y + 0.01,
        1 => y * 0.999,
        2 => y - 0.005,
        _ => y.max(-2.0),
    })
}

/// `step` on the CPU: every intermediate's values.
fn steps_on_cpu(x: &[f32], n: usize) -> Vec<Vec<f32>> {
    let mut out = vec![x.to_vec()];
    for i in 0..n {
        let y: Vec<f32> = out[i]
            .iter()
            .zip(x)
            .map(|(&v, &x)| match i % 4 {
                0 => v * 0.9,
                1 => v.tanh(),
                2 => v + x,
                _ => 1.0 / (1.0 + (-v).exp()),
            })
            .collect();
        out.push(y);
    }
    out
}

pub async fn a_16_op_chain_with_every_intermediate_held_launches_one_kernel_and_allocates_one_buffer()
 {
    let gpu = kernels_only().await;
    let data = [0.5, -1.0, 2.0, 0.25];
    let x = gpu.tensor(&data, None).unwrap();
    gpu.sync().await.expect("upload");
    let before = gpu.stats();
    let mut kept = held_chain(&x, 16);
    let want = steps_on_cpu(&data, 16);
    close_within(&read(&kept[16]).await, &want[16], 1e-5);
    let after = gpu.stats();
    assert_eq!(after.kernels_launched - before.kernels_launched, 1);
    assert_eq!(after.buffers_allocated - before.buffers_allocated, 1);
    assert_eq!(after.bytes_written - before.bytes_written, 16, "the result");
    assert_eq!(after.expressions_held - before.expressions_held, 15);

    // An intermediate read after the result: computed inline from `x` by
    // one more kernel, its values those it had in the chain.
    close_within(&read(&kept[8]).await, &want[8], 1e-5);
    let after = gpu.stats();
    assert_eq!(after.kernels_launched - before.kernels_launched, 2);
    assert_eq!(after.bytes_written - before.bytes_written, 32);
    assert_eq!(after.expressions_held - before.expressions_held, 14);

    kept.truncate(1);
    gpu.sync().await.expect("nothing failed");
    let end = gpu.stats();
    assert_eq!(end.expressions_held, before.expressions_held);
    assert_eq!(end.bytes_in_use, before.bytes_in_use);
}

pub async fn a_thousand_held_ops_on_one_tensor_launch_one_kernel_per_iteration_and_create_no_buffer_after_the_first()
 {
    let gpu = kernels_only().await;
    let data: Vec<f32> = (0..16).map(|i| i as f32 / 8.0 - 1.0).collect();
    let mut created = Vec::new();
    for iteration in 0..3 {
        let before = gpu.stats();
        let kept = w6_chain(gpu.tensor(&data, None).unwrap());
        let got = read(kept.last().unwrap()).await;
        let want: Vec<f32> = data.iter().map(|&v| w6_on_cpu(v, 1000)).collect();
        close_within(&got, &want, 1e-3);
        let after = gpu.stats();
        assert_eq!(
            after.kernels_launched - before.kernels_launched,
            1,
            "iteration {iteration}"
        );
        assert_eq!(after.expressions_held - before.expressions_held, 999);
        created.push(after.gpu_buffers_created);
        drop(kept);
    }
    assert_eq!(created[1], created[0], "{created:?}");
    assert_eq!(created[2], created[0], "{created:?}");
}

/// `w = w.sub(a.matmul(w).mul(0.1))` in a loop, every part held and
/// nothing read until the end: each step's matmul runs (its product is
/// held, and not elementwise), and the update is computed in its epilogue,
/// rather than by kernels of their own at the next step (expressions' rule
/// 4). The first step's flush also uploads `a` and `w`.
pub async fn a_held_update_of_a_matmul_product_is_computed_in_the_matmuls_epilogue() {
    let gpu = kernels_only().await;
    let a: Vec<f32> = (0..16).map(|i| i as f32 / 8.0 - 1.0).collect();
    let mut want: Vec<f32> = (0..16).map(|i| 0.5 - i as f32 / 16.0).collect();
    let ta = gpu.tensor(&a, Some(&[4, 4])).unwrap();
    let mut w = gpu.tensor(&want, Some(&[4, 4])).unwrap();
    let mut kept = Vec::new();
    for step in 0..3 {
        let before = gpu.stats();
        let product = ta.matmul(&w).unwrap();
        let update = product.mul(0.1).unwrap();
        let next = w.sub(&update).unwrap();
        gpu.sync().await.unwrap();
        let synced = gpu.stats();
        assert_eq!(
            synced.kernels_launched - before.kernels_launched,
            1,
            "step {step}"
        );
        assert_eq!(
            synced.bytes_written - before.bytes_written,
            2 * 64,
            "step {step}: the product and the new w"
        );
        want = (0..16)
            .map(|k| {
                let (r, c) = (k / 4, k % 4);
                let p: f32 = (0..4).map(|j| a[r * 4 + j] * want[j * 4 + c]).sum();
                want[k] - p * 0.1
            })
            .collect();
        kept.extend([product, update, std::mem::replace(&mut w, next)]);
    }
    let kernels = gpu.stats().kernels_launched;
    close_within(&read(&w).await, &want, 1e-5);
    assert_eq!(gpu.stats().kernels_launched, kernels, "already written");
}

pub async fn an_mlp_forward_with_its_pre_activations_held_launches_one_kernel_per_layer() {
    let gpu = device().await;
    let sizes = [16, 32, 32, 4];
    let x = gpu.random_uniform(&[8, sizes[0]], -1.0, 1.0, 1).unwrap();
    let layers: Vec<(Tensor, Tensor)> = (0..3)
        .map(|l| {
            let w = gpu.random_uniform(&[sizes[l], sizes[l + 1]], -0.3, 0.3, 10 + l as u64);
            let b = gpu.random_uniform(&[sizes[l + 1]], -0.1, 0.1, 20 + l as u64);
            (w.unwrap(), b.unwrap())
        })
        .collect();
    gpu.sync().await.expect("uploads");
    let before = gpu.stats();
    // Every intermediate kept: the products, the pre-activations, the
    // activations.
    let mut kept: Vec<Tensor> = Vec::new();
    let mut h = x.clone();
    for (l, (w, b)) in layers.iter().enumerate() {
        let product = h.matmul(w).unwrap();
        let pre = product.add(b).unwrap();
        h = if l < 2 {
            pre.relu().unwrap()
        } else {
            pre.clone()
        };
        kept.extend([product, pre, h.clone()]);
    }
    let got = read(&h).await;
    let after = gpu.stats();
    assert_eq!(after.kernels_launched - before.kernels_launched, 3);

    // The CPU's forward pass from the same values.
    let mut act = read(&x).await;
    for (l, (w, b)) in layers.iter().enumerate() {
        let (w, b) = (read(w).await, read(b).await);
        let (n, m) = (sizes[l], sizes[l + 1]);
        act = (0..8)
            .flat_map(|r| {
                let (act, w, b) = (&act, &w, &b);
                (0..m).map(move |c| {
                    let z = b[c] + (0..n).map(|k| act[r * n + k] * w[k * m + c]).sum::<f32>();
                    if l < 2 { z.max(0.0) } else { z }
                })
            })
            .collect();
    }
    close_within(&got, &act, 1e-4);
}

pub async fn a_temporary_of_a_failed_read_keeps_no_failure_once_the_result_is_dropped() {
    let gpu = device().await;
    let before = gpu.stats();
    // `zeros` stays held, as a JS temporary does until the collector runs.
    let zeros = gpu.zeros(&[1 << 16, 1 << 16]).unwrap();
    let y = zeros.add(1.0).unwrap();
    let error = read_err(&y).await;
    assert_eq!(error.first().unwrap().root.kind, FailureKind::Allocation);
    assert_eq!(error.first().unwrap().root.op, "zeros+add");
    drop(y);
    let _ = gpu.sync().await;
    let after = gpu.stats();
    assert_eq!(after.failures_held, 0, "the temporary carries no failure");
    assert_eq!(after.bytes_in_use, before.bytes_in_use);
    assert_eq!(after.expressions_held - before.expressions_held, 1);
    drop(zeros);
    assert_eq!(gpu.stats().expressions_held, before.expressions_held);
}

pub async fn a_momentum_loop_without_tidy_computes_the_same_ops_every_step() {
    // `v` and `w` are replaced each step and never read: each is kept as an
    // expression until the next step's matmul needs `w`. No step may
    // compute the history of `v` again.
    let gpu = device().await;
    let x = gpu.random_uniform(&[8, 4], -1.0, 1.0, 1).unwrap();
    let mut w = gpu.random_uniform(&[4, 2], -0.5, 0.5, 2).unwrap();
    let mut v = gpu.zeros(&[4, 2]).unwrap();
    let mut per_step = Vec::new();
    for _ in 0..12 {
        let before = gpu.stats();
        let y = x.matmul(&w).unwrap();
        let loss = y.square().unwrap().mean(None, false).unwrap();
        let grad = x
            .transpose(None)
            .unwrap()
            .matmul(&y)
            .unwrap()
            .mul(0.25)
            .unwrap();
        v = v.mul(0.9).unwrap().add(&grad).unwrap();
        w = w.sub(&v.mul(0.1).unwrap()).unwrap();
        assert!(read(&loss).await[0].is_finite());
        let after = gpu.stats();
        per_step.push((
            after.kernels_launched - before.kernels_launched,
            after.fused_ops - before.fused_ops,
        ));
    }
    assert!(
        per_step[3..].iter().all(|s| *s == per_step[3]),
        "kernels and fused ops per step: {per_step:?}"
    );
    assert!(read(&w).await.iter().all(|v| v.is_finite()));
}

pub async fn a_chain_of_ten_thousand_held_ops_is_cut_into_kernels_the_device_compiles() {
    let gpu = kernels_only().await;
    let data = [0.5, -1.0, 2.0, 0.25];
    let x = gpu.tensor(&data, None).unwrap();
    gpu.sync().await.expect("upload");
    let before = gpu.stats();
    let kept = held_chain(&x, 10_000);
    let want = steps_on_cpu(&data, 10_000);
    close_within(&read(&kept[10_000]).await, &want[10_000], 1e-4);
    let kernels = gpu.stats().kernels_launched - before.kernels_launched;
    // Blocks of at most 2048 ops: 5 at least; a handful more where an
    // expression past 1024 ops was written.
    assert!((5..=12).contains(&kernels), "{kernels} kernels");
    close_within(&read(&kept[5_000]).await, &want[5_000], 1e-4);
}

pub async fn a_long_repeating_chain_of_clamps_wheres_and_tensor_operands_matches_the_cpu() {
    // Written once as a loop (each period: clamp with two scalars, a
    // product with a tensor, a `where`, an add of a scalar), its scalars
    // different every period.
    let gpu = kernels_only().await;
    let xs = [0.5f32, -0.25, 2.0, -3.0, 0.0, 1.5];
    let conds = [1.0f32, 0.0, 1.0, 0.0, 1.0, 1.0];
    let x = gpu.tensor(&xs, None).unwrap();
    let cond = gpu
        .tensor(&conds, None)
        .unwrap()
        .cast(webfusion::DType::Bool)
        .unwrap();
    let mut y = x.clone();
    let mut want = xs.to_vec();
    for k in 0..200 {
        let (lo, hi, s) = (
            -1.0 - k as f32 * 0.01,
            1.0 + k as f32 * 0.005,
            0.001 * k as f32,
        );
        y = y.clamp(lo, hi).unwrap();
        y = y.mul(&x).unwrap();
        y = gpu.where_(&cond, &y, &x).unwrap();
        y = y.add(s).unwrap();
        for (w, (&xv, &c)) in want.iter_mut().zip(xs.iter().zip(&conds)) {
            let v = w.clamp(lo, hi) * xv;
            *w = if c != 0.0 { v } else { xv } + s;
        }
    }
    let before = gpu.stats().kernels_launched;
    close_within(&read(&y).await, &want, 1e-4);
    assert_eq!(gpu.stats().kernels_launched - before, 1);
}
