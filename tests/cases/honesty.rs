//! The defects found from outside (issue 9), each as the invariant it broke:
//! clean programs run, operands are checked against the device that runs
//! the op, sizes past 32 bits fail instead of computing wrong values, reads
//! do no unchecked GPU work, failures follow data dependence, and a device
//! lost with reads pending fails them promptly. In both worlds.

use std::future::Future;

use webfusion::{Device, FailureKind, FaultKind, Tensor};

use super::engine::{close_within, device, kernels_only, read, read_err};

/// Nothing reached wgpu's uncaptured-error handler: every GPU call was
/// checked first or ran inside an error scope.
fn no_uncaptured_errors(gpu: &Device) {
    assert_eq!(gpu.stats().uncaptured_errors, 0, "uncaptured GPU errors");
}

/// Sums of values that went through `exp` and `log`: a few ulps each.
fn close(got: &[f32], want: &[f32]) {
    close_within(got, want, 1e-4);
}

pub async fn a_matmul_and_four_held_elementwise_ops_after_it_read_correctly() {
    // Every intermediate kept in a variable, as JS code without `tidy`
    // keeps each one in a handle.
    let gpu = device().await;
    let x = gpu.ones(&[4, 3]).unwrap();
    let w = gpu.ones(&[3, 2]).unwrap();
    let bias = gpu.ones(&[2]).unwrap();
    let one = gpu.ones(&[4, 2]).unwrap();
    let mm = x.matmul(&w).unwrap();
    let l = mm.add(&bias).unwrap();
    let p = l.relu().unwrap();
    let d = p.sub(&one).unwrap();
    let sq = d.mul(&d).unwrap();
    assert_eq!(read(&sq).await, vec![9.0; 8]);
    assert_eq!(read(&mm).await, vec![3.0; 8]);
    no_uncaptured_errors(&gpu);
}

/// `k` distinct inputs of `shape`, input `j` filled with `j + 1`.
fn inputs(gpu: &Device, shape: &[usize], k: usize) -> Vec<Tensor> {
    (0..k)
        .map(|j| {
            gpu.full(shape, (j + 1) as f32)
                .unwrap()
                .exp()
                .unwrap()
                .log()
                .unwrap()
        })
        .collect()
}

pub async fn every_block_kind_with_many_inputs_and_held_outputs_fits_the_binding_limit() {
    let gpu = device().await;
    for k in 1..=10usize {
        let extra = inputs(&gpu, &[2, 4], k);
        gpu.sync().await.expect("the inputs compute");
        let sum_extra: f32 = (1..=k).map(|j| j as f32).sum();

        // A matmul's epilogue reading k inputs, every intermediate held.
        let a = gpu.ones(&[2, 3]).unwrap();
        let b = gpu.full(&[3, 4], 0.5).unwrap();
        let mut held = vec![a.matmul(&b).unwrap()];
        for t in &extra {
            let next = held.last().unwrap().add(t).unwrap();
            held.push(next);
        }
        close(&read(held.last().unwrap()).await, &[1.5 + sum_extra; 8]);

        // A row reduction's epilogue (softmax-like) reading k inputs.
        let x = gpu.full(&[2, 4], 2.0).unwrap();
        let mut row = vec![x.sub(&x.max(Some(&[-1]), true).unwrap()).unwrap()];
        for t in &extra {
            let next = row.last().unwrap().add(t).unwrap();
            row.push(next);
        }
        close(&read(row.last().unwrap()).await, &[sum_extra; 8]);

        // A reduction's prologue reading k inputs; argmax too (two outputs
        // per partial when split).
        let mut acc = extra[0].mul(1.0).unwrap();
        for t in &extra[1..] {
            acc = acc.add(t).unwrap();
        }
        let total = acc.sum(None, false).unwrap();
        drop(acc);
        let mut wide = extra[0]
            .broadcast_to(&[1000, 2, 4])
            .unwrap()
            .mul(1.0)
            .unwrap();
        for t in &extra[1..] {
            wide = wide.add(t).unwrap();
        }
        let arg = wide.arg_max(0).unwrap();
        drop(wide);
        // A float product split in two stages: its flags are a second
        // output per partial too.
        let mut zeros = extra[0]
            .broadcast_to(&[1100, 2, 4])
            .unwrap()
            .mul(0.0)
            .unwrap();
        for t in &extra[1..] {
            zeros = zeros.mul(t).unwrap();
        }
        let product = zeros.prod(None, false).unwrap();
        drop(zeros);
        close(&read(&total).await, &[8.0 * sum_extra]);
        assert_eq!(read(&arg).await, vec![0.0; 8]);
        assert_eq!(read(&product).await, vec![0.0], "{k} inputs");
    }
    no_uncaptured_errors(&gpu);
}

pub async fn operands_on_another_device_are_refused_even_when_they_agree_with_each_other() {
    let (one, two) = (device().await, device().await);
    let a1 = one.ones(&[3]).unwrap();
    let b1 = one.ones(&[3]).unwrap();
    let c1 = one.ones(&[3]).unwrap();
    let registered = two.stats().ops_registered;
    let refusals = [
        two.cat(&[&a1, &b1], 0).err(),
        two.stack(&[&a1, &b1], 0).err(),
        two.where_(&c1, &a1, &b1).err(),
    ];
    for refusal in refusals {
        let error = refusal.expect("refused at registration");
        let text = error.to_string();
        assert!(
            text.contains(&one.label()) && text.contains(&two.label()),
            "{text}"
        );
    }
    assert_eq!(two.stats().ops_registered, registered, "nothing queued");
    let a2 = two.ones(&[3]).unwrap();
    assert!(a2.add(&a1).is_err() && a1.matmul(&a2).is_err());
    assert_eq!(read(&two.cat(&[&a2, &a2], 0).unwrap()).await, vec![1.0; 6]);
    assert_eq!(read(&a1.add(&b1).unwrap()).await, vec![2.0; 3]);
}

pub async fn work_past_32_bit_indices_fails_as_index_range_instead_of_computing_a_wrong_value() {
    let gpu = device().await;
    let one = gpu.ones(&[1, 1]).unwrap();
    let cases = [
        one.broadcast_to(&[65536, 65536])
            .unwrap()
            .sum(None, false)
            .unwrap(),
        one.broadcast_to(&[65536, 65538])
            .unwrap()
            .mean(None, false)
            .unwrap(),
        one.broadcast_to(&[65536, 65537])
            .unwrap()
            .max(Some(&[1]), false)
            .unwrap()
            .sum(None, false)
            .unwrap(),
    ];
    let small = one.add(1.0).unwrap();
    assert_eq!(read(&small).await, vec![2.0]);
    for t in &cases {
        let error = read_err(t).await;
        let report = error.first().expect("a report");
        assert_eq!(report.root.kind, FailureKind::IndexRange, "{error}");
        assert!(report.root.message.contains("32 bits"), "{error}");
    }
    no_uncaptured_errors(&gpu);
}

pub async fn a_read_of_a_huge_strided_view_fails_as_an_allocation_before_any_gpu_call() {
    let gpu = device().await;
    let row = gpu.ones(&[1, 1 << 18]).unwrap();
    let view = row.broadcast_to(&[1 << 18, 1 << 18]).unwrap();
    let error = read_err(&view).await;
    let report = error.first().expect("a report");
    assert_eq!(report.root.kind, FailureKind::Allocation, "{error}");
    assert_eq!(report.root.op, "copy");
    assert!(report.root.message.contains("maxBufferSize"), "{error}");
    assert_eq!(error.tensor, view.id());
    no_uncaptured_errors(&gpu);
    assert_eq!(
        read(&row.slice(&[0, 0], &[1, 3]).unwrap()).await,
        vec![1.0; 3]
    );
    let strided = gpu
        .tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], Some(&[2, 3]))
        .unwrap()
        .transpose(None)
        .unwrap();
    assert_eq!(read(&strided).await, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    drop((view, row, strided));
    gpu.sync().await.expect_err("the refused copy is reported");
    assert_eq!(gpu.stats().failures_held, 0);
    assert_eq!(gpu.stats().bytes_in_use, 0, "the read's copy was released");
}

pub async fn a_failure_taints_only_what_depends_on_the_failed_op_whatever_was_fused_with_it() {
    let gpu = device().await;
    let x = gpu.tensor(&[1.0, 2.0], None).unwrap();
    let y = gpu.tensor(&[3.0, 4.0], None).unwrap();
    gpu.sync().await.expect("uploads");

    // Independent work of the same shape, fused into the failing kernel.
    gpu.inject_fault("exp", 1, FaultKind::Validation).unwrap();
    let failed = x.exp().unwrap().add(1.0).unwrap();
    let independent = y.mul(3.0).unwrap();
    assert_eq!(read(&independent).await, vec![9.0, 12.0]);
    let error = read_err(&failed).await;
    let report = error.first().unwrap();
    assert_eq!(report.root.op, "exp");
    assert_eq!(report.depth, 1, "the add is one op below the exp");
    assert_eq!(report.chain.len(), 1, "the chain names the add");
    assert_eq!(report.chain[0].op, "add");

    // A value computed before the failing op, in the same kernel.
    gpu.inject_fault("sin", 1, FaultKind::Internal).unwrap();
    let a = x.sigmoid().unwrap();
    let b = a.sin().unwrap();
    close(&read(&a).await, &[0.7310586, 0.8807971]);
    let error = read_err(&b).await;
    assert_eq!(error.first().unwrap().root.op, "sin");
    assert_eq!(error.first().unwrap().depth, 0);

    // After a matmul: its product is written though its epilogue failed.
    gpu.inject_fault("relu", 1, FaultKind::OutOfMemory).unwrap();
    let w = gpu.ones(&[2, 2]).unwrap();
    let product = x.reshape(&[1, 2]).unwrap().matmul(&w).unwrap();
    let activated = product.relu().unwrap();
    let shifted = product.add(1.0).unwrap();
    assert_eq!(read(&product).await, vec![3.0, 3.0]);
    assert_eq!(read(&shifted).await, vec![4.0, 4.0]);
    assert_eq!(read_err(&activated).await.first().unwrap().root.op, "relu");
    let sync = gpu.sync().await.expect_err("three injected failures");
    assert_eq!(sync.failures.len(), 3);
    no_uncaptured_errors(&gpu);
}

pub async fn a_lost_device_fails_every_pending_read_promptly_and_a_new_device_works() {
    // Kernels only: a value the host holds has no GPU read to be pending.
    let gpu = kernels_only().await;
    let x = gpu.tensor(&[1.0, 2.0, 3.0], None).unwrap();
    let tensors: Vec<Tensor> = (0..8).map(|i| x.mul(i as f32).unwrap()).collect();
    // Reads on their way: each polled once, so its GPU work is submitted and
    // it waits for the GPU (in the browser; natively the first poll waits
    // for the device and finishes the read).
    let waker = futures_util::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut in_flight = Vec::new();
    for (i, t) in tensors[..4].iter().enumerate() {
        let mut read = Box::pin(t.to_vec());
        match read.as_mut().poll(&mut cx) {
            std::task::Poll::Pending => in_flight.push(read),
            std::task::Poll::Ready(values) => {
                let want: Vec<f32> = [1.0, 2.0, 3.0].map(|v| v * i as f32).to_vec();
                assert_eq!(values.expect("a read done before the loss"), want);
            }
        }
    }
    #[cfg(target_arch = "wasm32")]
    assert_eq!(
        in_flight.len(),
        4,
        "WebGPU reads resolve from the event loop"
    );
    // Reads asked for and not yet started.
    let asked: Vec<_> = tensors[4..].iter().map(|t| t.to_vec()).collect();
    gpu.destroy();
    let results = futures_util::future::join_all(in_flight).await;
    let asked = futures_util::future::join_all(asked).await;
    for result in results.into_iter().chain(asked) {
        let error = result.expect_err("no read of a lost device resolves");
        assert_eq!(
            error.first().unwrap().root.kind,
            FailureKind::DeviceLost,
            "{error}"
        );
    }
    assert!(x.add(1.0).is_err(), "registration is refused");
    let fresh = device().await;
    let t = fresh.tensor(&[1.0, 2.0], None).unwrap().mul(2.0).unwrap();
    assert_eq!(read(&t).await, vec![2.0, 4.0]);
}

pub async fn a_long_training_like_loop_with_a_failing_step_every_tenth_keeps_memory_flat() {
    let gpu = device().await;
    let data = gpu.random_uniform(&[16, 8], -1.0, 1.0, 1).unwrap();
    let target = gpu.random_uniform(&[16, 4], -1.0, 1.0, 2).unwrap();
    let mut weights = gpu.random_uniform(&[8, 4], -0.5, 0.5, 3).unwrap();
    // Bytes in use after a step that updated the weights, and after one
    // that failed: an update is kept as an expression until the next step
    // reads it, holding the old weights and the gradient until then.
    let mut baseline = [None, None];
    let mut compiled = None;
    let (mut failed, mut steps) = (0, 0);
    for step in 0..600 {
        if step == 20 {
            compiled = Some(gpu.stats().pipelines_compiled);
        }
        if step % 10 == 5 {
            // Into the forward pass: the first `sub` kernel would be the
            // last step's weight update, kept as an expression until now.
            gpu.inject_fault("tanh", 1, FaultKind::Validation).unwrap();
        }
        let out = data.matmul(&weights).unwrap().tanh().unwrap();
        let diff = out.sub(&target).unwrap();
        let loss = diff.square().unwrap().mean(None, false).unwrap();
        let grad = data
            .transpose(None)
            .unwrap()
            .matmul(&diff.mul(0.01).unwrap())
            .unwrap();
        let read = loss.to_vec().await;
        let outcome = usize::from(read.is_err());
        match read {
            Ok(_) => {
                weights = weights.sub(&grad).unwrap();
                steps += 1;
            }
            Err(error) => {
                assert_eq!(error.first().unwrap().root.op, "tanh", "{error}");
                failed += 1;
            }
        }
        drop((out, diff, loss, grad));
        let _ = gpu.sync().await;
        let stats = gpu.stats();
        assert_eq!(
            stats.failures_held, 0,
            "step {step}: failures freed with their tensors"
        );
        match baseline[outcome] {
            None => baseline[outcome] = Some(stats.bytes_in_use),
            Some(bytes) => assert_eq!(stats.bytes_in_use, bytes, "step {step}: memory stays flat"),
        }
    }
    assert_eq!((steps, failed), (540, 60));
    assert_eq!(
        Some(gpu.stats().pipelines_compiled),
        compiled,
        "a failing step compiles nothing once its kernels were seen"
    );
    assert!(read(&weights).await.iter().all(|v| v.is_finite()));
    no_uncaptured_errors(&gpu);
}

pub async fn log_softmax_of_inputs_near_ten_thousand_keeps_float32_precision() {
    // ONNX's `test_logsoftmax_large_number`: x - logSumExp(x) loses the
    // rounding of a logSumExp near 10^4 (an ulp of 10^-3) whole.
    let gpu = device().await;
    let rows = [
        [1.0f32, 2.0, 3.0, 4.0],
        [10000.0, 10001.0, 10002.0, 10003.0],
    ];
    let flat: Vec<f32> = rows.iter().flatten().copied().collect();
    let x = gpu.tensor(&flat, Some(&[2, 4])).unwrap();
    let got = read(&x.log_softmax(-1).unwrap()).await;
    let mut want = Vec::new();
    for row in rows {
        let max = row.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
        let lse = max
            + row
                .iter()
                .map(|&v| (v as f64 - max).exp())
                .sum::<f64>()
                .ln();
        want.extend(row.iter().map(|&v| v as f64 - lse));
    }
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (*g as f64 - w).abs() <= 4e-6,
            "logSoftmax {got:?} vs {want:?}"
        );
    }
}

pub async fn a_fault_on_an_op_that_was_skipped_leaves_its_fused_neighbour_written() {
    let gpu = device().await;
    let x0 = gpu.tensor(&[1.0, 2.0], None).unwrap();
    let y = gpu.tensor(&[3.0, 4.0], None).unwrap();
    gpu.inject_fault("neg", 1, FaultKind::Validation).unwrap();
    let x = x0.neg().unwrap();
    read_err(&x).await;
    let _ = gpu.sync().await;
    // `exp` reads the failed `x`, so it is skipped; `b` shares its kernel
    // (a `cat` of both needs both in memory).
    gpu.inject_fault("exp", 1, FaultKind::Validation).unwrap();
    let a = x.exp().unwrap();
    let b = y.add(1.0).unwrap();
    let both = gpu.cat(&[&a, &b], 0).unwrap();
    let before = gpu.stats().kernels_launched;
    gpu.sync().await.expect("nothing new failed");
    assert_eq!(
        gpu.stats().kernels_launched - before,
        1,
        "the block of exp and add writes b; the cat is skipped"
    );
    assert_eq!(read(&b).await, vec![4.0, 5.0], "b is written, not garbage");
    assert_eq!(read_err(&both).await.first().unwrap().root.op, "neg");
    let error = read_err(&a).await;
    assert_eq!(error.failures.len(), 1, "{error}");
    assert_eq!(error.first().unwrap().root.op, "neg");
    assert_eq!(error.first().unwrap().depth, 1);
    // The exp fault did not fire on a kernel that never computed exp: the
    // next one that does fails.
    let later = y.exp().unwrap();
    assert_eq!(read_err(&later).await.first().unwrap().root.op, "exp");
    no_uncaptured_errors(&gpu);
}

pub async fn ops_queued_when_a_device_is_lost_carry_the_loss_not_an_older_failure() {
    let gpu = device().await;
    let huge = gpu.zeros(&[1 << 18, 1 << 18]).unwrap().add(1.0).unwrap();
    let _ = gpu.sync().await;
    let y = gpu.tensor(&[1.0, 2.0], None).unwrap();
    let u = huge.exp().unwrap();
    let v = y.mul(2.0).unwrap();
    gpu.destroy();
    let error = read_err(&v).await;
    assert_eq!(error.failures.len(), 1, "{error}");
    assert_eq!(error.first().unwrap().root.kind, FailureKind::DeviceLost);
    // `u` was queued too: it never ran, and the loss says why.
    let error = read_err(&u).await;
    assert_eq!(error.first().unwrap().root.kind, FailureKind::DeviceLost);
    drop((huge, y, u, v));
    assert_eq!(gpu.stats().bytes_in_use, 0, "a lost device holds no bytes");
    assert_eq!(gpu.stats().failures_held, 0);
}

pub async fn an_intermediate_read_twice_by_one_op_still_fuses_into_the_reduction() {
    let gpu = kernels_only().await;
    let x = gpu.tensor(&[1.0, 2.0, 3.0, 4.0], None).unwrap();
    gpu.sync().await.expect("upload");
    let before = gpu.stats();
    let y = x.mul(2.0).unwrap();
    let total = y.mul(&y).unwrap().sum(None, false).unwrap();
    drop(y);
    assert_eq!(read(&total).await, vec![120.0]);
    let after = gpu.stats();
    assert_eq!(
        after.kernels_launched - before.kernels_launched,
        1,
        "one kernel"
    );
    assert_eq!(
        after.bytes_allocated - before.bytes_allocated,
        4,
        "only the sum is written"
    );
}
