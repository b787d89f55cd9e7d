//! Numerics checks (`DeviceOptions::check_numerics`): the op that first
//! made a NaN or an infinity from finite operands is a failure's root, on
//! the host and in kernels, alone and fused; a user's own NaN passes
//! through; with the checks off nothing changes.

use webfusion::{Device, DeviceOptions, FailureKind, Tensor};

use super::engine::{device_with, read_err};

/// A checking device that runs small work on the host, and one that runs
/// every block as a kernel.
async fn checking() -> Vec<(&'static str, Device)> {
    let host = DeviceOptions {
        check_numerics: true,
        ..DeviceOptions::default()
    };
    let kernels = DeviceOptions {
        host_max_elements: 0,
        ..host.clone()
    };
    vec![
        ("host", device_with(host).await),
        ("kernels", device_with(kernels).await),
    ]
}

async fn floats(t: &Tensor) -> Vec<f32> {
    t.to_vec().await.expect("the tensor reads")
}

/// Asserts `t`'s read rejects with one `non-finite` failure rooted at `op`
/// whose message says `says`; returns the failure's report.
async fn non_finite_at(name: &str, t: &Tensor, op: &str, says: &str) -> webfusion::Report {
    let error = read_err(t).await;
    assert_eq!(error.failures.len(), 1, "{name}: one failure: {error}");
    let report = error.failures[0].clone();
    assert_eq!(report.root.kind, FailureKind::NonFinite, "{name}: {error}");
    assert_eq!(report.root.op, op, "{name}: {error}");
    assert!(report.root.message.contains(says), "{name}: {error}");
    report
}

pub async fn the_op_that_makes_a_non_finite_value_from_finite_operands_is_the_root() {
    for (name, gpu) in checking().await {
        let x = gpu.tensor(&[1.0, 0.0, 4.0, 2.0], None).unwrap();
        // Alone.
        let log = x.log().unwrap();
        non_finite_at(name, &log, "log", "-Infinity at [1]").await;
        // Fused with ops before and after it: the op, not the kernel.
        let scaled = x.mul(2.0).unwrap();
        let fused = scaled
            .sub(3.0)
            .unwrap()
            .sqrt()
            .unwrap()
            .add(1.0)
            .unwrap()
            .tanh()
            .unwrap();
        let report = non_finite_at(name, &fused, "sqrt", "NaN at [0]").await;
        assert!(report.depth >= 2, "{name}: tanh is two ops below sqrt");
        let reciprocal = gpu.tensor(&[1.0; 4], None).unwrap().div(&x).unwrap();
        non_finite_at(name, &reciprocal, "div", "+Infinity at [1]").await;
        let overflow = x.mul(100.0).unwrap().exp().unwrap();
        non_finite_at(name, &overflow, "exp", "+Infinity at [0]").await;
        // What made only finite values reads, intermediates kept in
        // variables included.
        assert_eq!(floats(&scaled).await, [2.0, 0.0, 8.0, 4.0], "{name}");
        assert_eq!(
            floats(&x.add(1.0).unwrap()).await,
            [2.0, 1.0, 5.0, 3.0],
            "{name}"
        );
        drop((log, fused, reciprocal, overflow));
        assert_eq!(
            gpu.stats().failures_held,
            0,
            "{name}: freed with their carriers"
        );
    }
}

pub async fn a_product_or_a_sum_that_overflows_is_the_root() {
    for (name, gpu) in checking().await {
        let a = gpu.tensor(&[3e38, 3e38, 1.0, 2.0], Some(&[2, 2])).unwrap();
        let b = gpu.tensor(&[1.0, 0.0, 1.0, 0.0], Some(&[2, 2])).unwrap();
        let product = a.matmul(&b).unwrap();
        non_finite_at(name, &product, "matmul", "+Infinity at [0, 0]").await;
        // With its epilogue, the product is still the root.
        let activated = a.matmul(&b).unwrap().add(1.0).unwrap().relu().unwrap();
        non_finite_at(name, &activated, "matmul", "+Infinity at [0, 0]").await;
        let total = a.sum(None, false).unwrap();
        non_finite_at(name, &total, "sum", "+Infinity at []").await;
        // Rows that fit read.
        let rows = a
            .slice(&[1, 0], &[1, 2])
            .unwrap()
            .sum(Some(&[-1]), false)
            .unwrap();
        assert_eq!(floats(&rows).await, [3.0], "{name}");
    }
}

pub async fn a_users_non_finite_values_pass_through_without_blaming_an_op() {
    for (name, gpu) in checking().await {
        let x = gpu
            .tensor(&[f32::NAN, 1.0, f32::INFINITY, 4.0], Some(&[2, 2]))
            .unwrap();
        let y = x.log().unwrap().add(1.0).unwrap();
        let got = floats(&y).await;
        assert!(
            got[0].is_nan() && got[2] == f32::INFINITY,
            "{name}: {got:?}"
        );
        assert_eq!(got[1], 1.0, "{name}");
        let product = x
            .matmul(&gpu.tensor(&[1.0, 0.0, 0.0, 1.0], Some(&[2, 2])).unwrap())
            .unwrap();
        assert!(
            floats(&product).await[0].is_nan(),
            "{name}: the product reads"
        );
        let total = x.sum(None, false).unwrap();
        assert!(floats(&total).await[0].is_nan(), "{name}: the sum reads");
        // A scalar of the user's own is not the op's doing either.
        let scaled = gpu
            .tensor(&[1.0, 2.0], None)
            .unwrap()
            .mul(f32::INFINITY)
            .unwrap();
        assert_eq!(floats(&scaled).await, [f32::INFINITY; 2], "{name}");
        assert!(gpu.sync().await.is_ok(), "{name}: nothing failed");
    }
}

pub async fn with_the_checks_off_a_non_finite_value_reads_as_a_value() {
    let options = |host_max_elements| DeviceOptions {
        host_max_elements,
        ..DeviceOptions::default()
    };
    for (name, max) in [("host", 1024), ("kernels", 0)] {
        let gpu = device_with(options(max)).await;
        assert!(!gpu.checks_numerics(), "off by default");
        let x = gpu.tensor(&[1.0, 0.0], None).unwrap();
        assert_eq!(
            floats(&x.log().unwrap()).await,
            [0.0, f32::NEG_INFINITY],
            "{name}"
        );
        let a = gpu.tensor(&[3e38, 3e38], Some(&[1, 2])).unwrap();
        let p = a
            .matmul(&gpu.tensor(&[1.0, 1.0], Some(&[2, 1])).unwrap())
            .unwrap();
        assert_eq!(floats(&p).await, [f32::INFINITY], "{name}");
        // Switched on, ops registered from then on are checked.
        gpu.set_check_numerics(true);
        non_finite_at(name, &x.log().unwrap(), "log", "-Infinity at [1]").await;
        gpu.set_check_numerics(false);
        assert_eq!(
            floats(&x.log().unwrap()).await[1],
            f32::NEG_INFINITY,
            "{name}"
        );
        assert!(
            gpu.sync().await.is_err(),
            "{name}: the checked log's failure is reported"
        );
    }
}
