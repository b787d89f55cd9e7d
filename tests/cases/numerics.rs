//! Numerics checks (`DeviceOptions::check_numerics`): the op that first
//! made a NaN or an infinity from finite operands is a failure's root, on
//! the host and in kernels, alone and fused; a user's own NaN passes
//! through; with the checks off nothing changes.

use webfusion::{Device, DeviceOptions, FailureKind, Tensor};

use super::engine::{Seeded, device_with, kernels_only, read_err};

/// A checking device that runs small work on the host, and one that runs
/// every block as a kernel.
async fn checking() -> Vec<(&'static str, Device)> {
    paths(true).await
}

/// A device whose small work runs on the host, and a kernels-only one,
/// each checking numerics or not.
async fn paths(check_numerics: bool) -> Vec<(&'static str, Device)> {
    let host = DeviceOptions {
        check_numerics,
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

pub async fn a_mean_whose_sum_would_overflow_reads_finite_as_tf_js_divides_first() {
    let mut devices = checking().await;
    devices.push(("unchecked", super::engine::device().await));
    for (name, gpu) in devices {
        // 65536 elements fold in two launches (partials, then their sum).
        for n in [2usize, 4096, 65536] {
            let x = gpu.tensor(&vec![3e38; n], Some(&[n])).unwrap();
            let mean = x.mean(None, false).unwrap();
            super::engine::close_within(&floats(&mean).await, &[3e38], 1e-5);
            let rows = x
                .reshape(&[2, -1])
                .unwrap()
                .mean(Some(&[1]), false)
                .unwrap();
            super::engine::close_within(&floats(&rows).await, &[3e38, 3e38], 1e-5);
        }
        // 512 rows of 4: a thread per row on a CPU adapter.
        let x = gpu.tensor(&vec![3e38; 2048], Some(&[512, 4])).unwrap();
        let rows = floats(&x.mean(Some(&[1]), false).unwrap()).await;
        super::engine::close_within(&rows, &[3e38; 512], 1e-5);
        // A mean of nothing is 0, a sum of no quotients (TF.js's too).
        let empty = gpu.tensor(&[], Some(&[2, 0])).unwrap();
        let none = empty.mean(Some(&[1]), false).unwrap();
        assert_eq!(floats(&none).await, [0.0, 0.0], "{name}");
        let x = gpu.tensor(&[1e19, -1e19, 1e19, -1e19], None).unwrap();
        let (mean, variance) = x.moments(None, false).unwrap();
        assert_eq!(floats(&mean).await, [0.0], "{name}");
        super::engine::close_within(&floats(&variance).await, &[1e38], 1e-6);
    }
}

/// Found by outside testing: an average pool over values near float32's
/// largest overflowed as `mean` did (Infinity, or a `non-finite` failure
/// with the checks on) where TF.js's CPU backend, adding in doubles, reads
/// the finite mean. Each element is divided by its window's count first.
/// The 'same' windows at the edges count 4 and 6 positions, the middle 9:
/// each reads 3e38 only if its own count divides it.
pub async fn an_average_pool_whose_window_sum_would_overflow_reads_finite() {
    use webfusion::Padding;
    let mut devices = checking().await;
    devices.push(("unchecked", super::engine::device().await));
    for (name, gpu) in devices {
        let x = gpu.tensor(&[3e38; 9], Some(&[1, 3, 3, 1])).unwrap();
        let same = x.avg_pool([3, 3], [1, 1], Padding::Same).unwrap();
        let got = floats(&same).await;
        assert_eq!(got.len(), 9, "{name}");
        super::engine::close_within(&got, &[3e38; 9], 1e-5);
        let valid = x.avg_pool([2, 2], [1, 1], Padding::Valid).unwrap();
        super::engine::close_within(&floats(&valid).await, &[3e38; 4], 1e-5);
        // A window of mixed signs averages as before: (1 + 2 + 4 + 5) / 4.
        let small = gpu
            .tensor(
                &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
                Some(&[1, 3, 3, 1]),
            )
            .unwrap()
            .avg_pool([2, 2], [1, 1], Padding::Valid)
            .unwrap();
        assert_eq!(floats(&small).await, [3.0, 4.0, 6.0, 7.0], "{name}");
        assert!(gpu.sync().await.is_ok(), "{name}: nothing failed");
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
        let own = gpu.tensor(&[f32::NAN, 1.0], Some(&[1, 2])).unwrap();
        // Switched on, ops registered from then on are checked, tensors
        // made before included: a product of them too (taken as finite).
        gpu.set_check_numerics(true);
        non_finite_at(name, &x.log().unwrap(), "log", "-Infinity at [1]").await;
        let ones = gpu.tensor(&[1.0, 1.0], Some(&[2, 1])).unwrap();
        non_finite_at(
            name,
            &a.matmul(&ones).unwrap(),
            "matmul",
            "+Infinity at [0, 0]",
        )
        .await;
        if max > 0 {
            // The host still holds the values of a small upload, so the
            // switch looks at them: the page's NaN is no op's doing.
            assert!(
                floats(&own.matmul(&ones).unwrap()).await[0].is_nan(),
                "{name}"
            );
        }
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

/// What breaks a random chain: the op that makes the first non-finite value
/// from the finite ones before it (each of the chain's values lies in
/// [-2, 2], none is 0 where it matters).
const BREAKERS: [&str; 5] = ["log", "div", "exp", "matmul", "sum"];

/// `y` broken by `breaker`: the tensors registered on the way (the first
/// finite, the breaker's value last).
fn broken(y: &Tensor, breaker: &str) -> Vec<Tensor> {
    let gpu = y.device();
    match breaker {
        "log" => {
            let zero = y.sub(y).unwrap();
            vec![zero.clone(), zero.log().unwrap()]
        }
        "div" => {
            let zero = y.mul(0.0).unwrap();
            let ones = gpu.ones(y.shape()).unwrap();
            vec![zero.clone(), ones.div(&zero).unwrap()]
        }
        "exp" => {
            let big = y.abs().unwrap().add(100.0).unwrap();
            vec![big.clone(), big.exp().unwrap()]
        }
        "matmul" => {
            let big = y.abs().unwrap().add(1.0).unwrap().mul(1e20).unwrap();
            let t = big.transpose(None).unwrap();
            vec![big.clone(), big.matmul(&t).unwrap()]
        }
        _ => {
            let big = y
                .tanh()
                .unwrap()
                .abs()
                .unwrap()
                .add(1.0)
                .unwrap()
                .mul(1.5e38)
                .unwrap();
            vec![big.clone(), big.sum(Some(&[-1]), true).unwrap()]
        }
    }
}

/// A finite op of the chains, picked by `k`.
fn finite_op(y: &Tensor, k: u64) -> Tensor {
    match k % 7 {
        0 => y.tanh(),
        1 => y.sigmoid(),
        2 => y.mul(1.5).and_then(|t| t.tanh()),
        3 => y.add(0.25),
        4 => y.sin(),
        5 => y.neg(),
        _ => y.cos(),
    }
    .unwrap()
}

pub async fn in_random_chains_every_tensor_below_the_breaking_op_fails_at_it_and_the_rest_read() {
    let mut seeded = Seeded::new(0x9e37_79b9_7f4a_7c15);
    let mut next = move || seeded.next();
    for (name, gpu) in checking().await {
        for seed in 0..40 {
            let breaker = BREAKERS[(next() % 5) as usize];
            let values: Vec<f32> = (0..16)
                .map(|i| ((i * 7 + seed) % 13) as f32 * 0.3 - 1.8)
                .collect();
            let x = gpu.tensor(&values, Some(&[4, 4])).unwrap();
            // Finite ops, each kept in a variable, then the breaker, then
            // more ops (some of which would turn the value finite again).
            let mut above = vec![x.clone()];
            for _ in 0..next() % 5 {
                let y = finite_op(above.last().unwrap(), next());
                above.push(y);
            }
            let mut made = broken(above.last().unwrap(), breaker);
            let root = made.pop().unwrap();
            above.extend(made);
            let mut below = vec![root];
            for _ in 0..next() % 4 {
                let y = finite_op(below.last().unwrap(), next());
                below.push(y);
            }
            if next() % 2 == 0 {
                below.push(below.last().unwrap().sum(None, false).unwrap());
            }
            let unrelated = x.mul(2.0).unwrap();
            // Read in a random order: the last tensor first, or the first.
            if next() % 2 == 0 {
                below.reverse();
            }
            let what = format!("{name}, seed {seed}, broken by {breaker}");
            for t in &below {
                let error = read_err(t).await;
                assert_eq!(error.failures.len(), 1, "{what}: {error}");
                let root = &error.failures[0].root;
                assert_eq!(root.kind, FailureKind::NonFinite, "{what}: {error}");
                assert_eq!(root.op, breaker, "{what}: {error}");
            }
            for t in &above {
                let got = floats(t).await;
                assert!(got.iter().all(|v| v.is_finite()), "{what}: {got:?}");
            }
            let doubled: Vec<f32> = values.iter().map(|v| v * 2.0).collect();
            assert_eq!(floats(&unrelated).await, doubled, "{what}");
            drop((above, below));
            let _ = gpu.sync().await;
            assert_eq!(
                gpu.stats().failures_held,
                0,
                "{what}: freed with their carriers"
            );
        }
    }
}

pub async fn log_sqrt_and_rsqrt_give_ieee_values_at_zero_below_it_at_infinity_and_at_nan() {
    let options = |host_max_elements| DeviceOptions {
        host_max_elements,
        ..DeviceOptions::default()
    };
    let inf = f32::INFINITY;
    let edges = [0.0, -0.0, -1.0, inf, -inf, f32::NAN, 4.0];
    // NaN is written as NaN: compared by class below.
    let want: [(&str, [f32; 7]); 3] = [
        (
            "log",
            [-inf, -inf, f32::NAN, inf, f32::NAN, f32::NAN, 4f32.ln()],
        ),
        ("sqrt", [0.0, -0.0, f32::NAN, inf, f32::NAN, f32::NAN, 2.0]),
        ("rsqrt", [inf, -inf, f32::NAN, 0.0, f32::NAN, f32::NAN, 0.5]),
    ];
    for (name, max) in [("host", 1024), ("kernels", 0)] {
        let gpu = device_with(options(max)).await;
        let x = gpu.tensor(&edges, None).unwrap();
        for (op, want) in want {
            let y = match op {
                "log" => x.log(),
                "sqrt" => x.sqrt(),
                _ => x.rsqrt(),
            }
            .unwrap();
            let got = floats(&y).await;
            for (i, (g, w)) in got.iter().zip(want).enumerate() {
                let same = (g.is_nan() && w.is_nan())
                    || (g.to_bits() == w.to_bits())
                    || (i == 6 && (g - w).abs() < 1e-6);
                assert!(same, "{name}: {op}({}) is {g}, not {w}", edges[i]);
            }
        }
    }
}

/// The WGSL `f` launched on a kernels-only device, checking or not, and
/// what it computed there.
async fn launched(check_numerics: bool, f: impl Fn(&Device) -> Tensor) -> (Vec<String>, Vec<f32>) {
    let gpu = device_with(DeviceOptions {
        check_numerics,
        host_max_elements: 0,
        ..DeviceOptions::default()
    })
    .await;
    let (y, profile) = gpu.profile(|| f(&gpu));
    let wgsl = profile.kernels.into_iter().flat_map(|k| k.wgsl).collect();
    (wgsl, floats(&y).await)
}

/// A program that a test runs on the device it is given.
type Program<'a> = dyn Fn(&Device) -> Tensor + 'a;

/// W1's chain of 16 ops, `x` its input.
fn chain(x: &Tensor) -> Tensor {
    let y = x
        .mul(0.5)
        .unwrap()
        .add(0.1)
        .unwrap()
        .exp()
        .unwrap()
        .mul(x)
        .unwrap();
    let y = y
        .tanh()
        .unwrap()
        .sub(0.2)
        .unwrap()
        .sigmoid()
        .unwrap()
        .add(x)
        .unwrap();
    let y = y
        .mul(1.5)
        .unwrap()
        .tanh()
        .unwrap()
        .add(x)
        .unwrap()
        .sigmoid()
        .unwrap();
    y.mul(0.9)
        .unwrap()
        .exp()
        .unwrap()
        .sub(x)
        .unwrap()
        .tanh()
        .unwrap()
}

pub async fn ops_whose_operands_bounds_prove_them_finite_are_not_checked_and_the_rest_are() {
    let small: Vec<f32> = (0..256).map(|i| i as f32 / 128.0 - 1.0).collect();
    // Values in [-1, 1): no op of the chain, the layer or the softmax can
    // make a non-finite value, so the checking device launches exactly the
    // kernels the other does (the softmax's prologue fused, no scan after
    // the sum), and they compute the same.
    let programs: [(&str, &Program<'_>); 3] = [
        ("chain", &|gpu| chain(&gpu.tensor(&small, None).unwrap())),
        ("layer", &|gpu| {
            let x = gpu.tensor(&small, Some(&[16, 16])).unwrap();
            let w = gpu.tensor(&small[..64], Some(&[16, 4])).unwrap();
            let b = gpu.tensor(&[0.5, -0.5, 0.25, 0.0], None).unwrap();
            let h = x.matmul(&w).unwrap().add(&b).unwrap().relu().unwrap();
            h.sum(Some(&[1]), false).unwrap().sqrt().unwrap()
        }),
        ("softmax", &|gpu| {
            let x = gpu.tensor(&small, Some(&[16, 16])).unwrap();
            x.mul(3.0).unwrap().softmax(-1).unwrap().log().unwrap()
        }),
    ];
    for (name, program) in programs {
        let (plain, expected) = launched(false, program).await;
        let (checked, values) = launched(true, program).await;
        assert_eq!(checked, plain, "{name}: the same kernels, none checking");
        assert_eq!(values, expected, "{name}");
        assert!(!checked.concat().contains("flag_nonfinite("), "{name}");
    }
    // The same chain on values up to 1000: its first exp overflows, and it
    // is checked (and so are the ops after it that bounds cannot clear).
    let large: Vec<f32> = small.iter().map(|v| v * 1000.0).collect();
    let gpu = device_with(DeviceOptions {
        check_numerics: true,
        host_max_elements: 0,
        ..DeviceOptions::default()
    })
    .await;
    let (y, profile) = gpu.profile(|| chain(&gpu.tensor(&large, None).unwrap()));
    let wgsl: String = profile.kernels.into_iter().flat_map(|k| k.wgsl).collect();
    assert!(
        wgsl.contains("flag_nonfinite("),
        "the large chain is checked"
    );
    // Its first exp overflows, and so does the product after it where exp
    // stays just finite: two roots, each an op the bounds could not clear.
    let roots = |e: webfusion::TensorError| -> Vec<String> {
        let mut roots: Vec<String> = e
            .failures
            .iter()
            .map(|f| format!("{:?} at {}", f.root.kind, f.root.op))
            .collect();
        roots.sort();
        roots
    };
    let expected = ["NonFinite at exp", "NonFinite at mul"];
    assert_eq!(roots(read_err(&y).await), expected, "profiled");
    for (name, gpu) in checking().await {
        let y = chain(&gpu.tensor(&large, None).unwrap());
        assert_eq!(roots(read_err(&y).await), expected, "{name}");
    }
}

/// The host keeps the operands' values where an op went non-finite and the
/// report gives them; a kernel keeps the position and the value only.
pub async fn a_report_from_the_host_gives_the_operands_values_where_the_op_went_non_finite() {
    for (name, gpu) in checking().await {
        let x = gpu.tensor(&[1.0, 0.0, 4.0, 2.0], None).unwrap();
        let ones = gpu.tensor(&[1.0, 1.0, 1.0, 1e30], None).unwrap();
        let cases = [
            (x.log().unwrap(), "log", "-Infinity at [1]", ": 0"),
            (
                ones.div(&x).unwrap(),
                "div",
                "+Infinity at [1]",
                ": 1 and 0",
            ),
            (
                ones.mul(1e10).unwrap(),
                "mul",
                "+Infinity at [3]",
                ": 1e+30",
            ),
        ];
        for (t, op, says, operands) in cases {
            let report = non_finite_at(name, &t, op, says).await;
            let message = report.root.message;
            match name {
                "host" => assert!(
                    message.ends_with(&format!("from finite operands{operands}")),
                    "{message}"
                ),
                _ => assert!(
                    message.ends_with("from finite operands"),
                    "{name}: {message}"
                ),
            }
        }
    }
}

/// Bit patterns, every NaN one (its sign and payload are no one's), so a
/// NaN compares equal to a NaN and -0 differs from 0.
fn bits(values: &[f32]) -> Vec<u32> {
    values
        .iter()
        .map(|v| {
            if v.is_nan() {
                f32::NAN.to_bits()
            } else {
                v.to_bits()
            }
        })
        .collect()
}

/// WGSL lets a compiler assume no infinity or NaN is made, and the ones
/// under the kernels did: `x / 0` read 0 where the scalar 0 was written
/// into the kernel or the divisor was `y - y`, and `pow(0, -1)` read 0
/// (found by the random overflowing graphs of tests/properties.rs). Every
/// path gives IEEE's values, checks off.
pub async fn quotients_by_zero_and_powers_of_zero_read_their_ieee_values_on_every_path() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    for (name, max) in [("host", 1024), ("kernels", 0)] {
        let gpu = device_with(DeviceOptions {
            host_max_elements: max,
            ..DeviceOptions::default()
        })
        .await;
        let x = gpu.tensor(&[1.0, -2.0, 0.0], None).unwrap();
        let cases = [
            ("x / 0", x.div(0.0).unwrap(), vec![inf, -inf, nan]),
            ("x / -0", x.div(-0.0).unwrap(), vec![-inf, inf, nan]),
            (
                "x / (x - x)",
                x.div(&x.sub(&x).unwrap()).unwrap(),
                vec![inf, -inf, nan],
            ),
            ("pow(x, -1)", x.pow(-1.0).unwrap(), vec![1.0, -0.5, inf]),
            ("pow(x, -2)", x.pow(-2.0).unwrap(), vec![1.0, 0.25, inf]),
            ("pow(x, 0)", x.pow(0.0).unwrap(), vec![1.0, 1.0, 1.0]),
            ("pow(x, 2)", x.pow(2.0).unwrap(), vec![1.0, 4.0, 0.0]),
        ];
        for (what, t, want) in cases {
            assert_eq!(bits(&floats(&t).await), bits(&want), "{name}: {what}");
        }
        let own = gpu.tensor(&[inf, nan, 1.0], None).unwrap();
        let zero = own.mul(0.0).unwrap();
        assert_eq!(
            bits(&floats(&zero).await),
            bits(&[nan, nan, 0.0]),
            "{name}: x * 0"
        );
    }
}

/// WGSL's `pow` is undefined at a NaN or an infinity: SwiftShader's kernels
/// read pow(NaN, 2) as infinity and pow(1, infinity) as infinity, where
/// the host gave NaN and 1 (found by outside testing). Every path gives
/// JS's `Math.pow`, TF.js's.
pub async fn pow_gives_what_js_math_pow_does_at_nan_and_infinity_on_every_path() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    // (base, exponent, Math.pow's value)
    let cases: [(f32, f32, f32); 28] = [
        (nan, 2.0, nan),
        (nan, 1.0, nan),
        (nan, 0.0, 1.0),
        (2.0, nan, nan),
        (1.0, nan, nan),
        (-0.0, nan, nan),
        (1.0, inf, nan),
        (-1.0, -inf, nan),
        (2.0, inf, inf),
        (-2.0, inf, inf),
        (0.5, inf, 0.0),
        (-0.5, inf, 0.0),
        (2.0, -inf, 0.0),
        (0.5, -inf, inf),
        (inf, 2.0, inf),
        (inf, -2.0, 0.0),
        (-inf, 3.0, -inf),
        (-inf, 2.0, inf),
        (-inf, -3.0, -0.0),
        (-inf, -2.0, 0.0),
        // A fraction's power of -Infinity is its limit, not NaN (the host
        // gave NaN: found by outside testing).
        (-inf, 1.5, inf),
        (-inf, -1.5, 0.0),
        (-0.0, 1.5, 0.0),
        (-0.0, -1.5, inf),
        (-0.0, 3.0, -0.0),
        (-0.0, -3.0, -inf),
        (-8.0, 1.0 / 3.0, nan),
        (-2.0, 3.0, -8.0),
    ];
    let base: Vec<f32> = cases.iter().map(|c| c.0).collect();
    let exponent: Vec<f32> = cases.iter().map(|c| c.1).collect();
    let want: Vec<f32> = cases.iter().map(|c| c.2).collect();
    for (name, max) in [("host", 1024), ("kernels", 0)] {
        let gpu = device_with(DeviceOptions {
            host_max_elements: max,
            check_numerics: false,
            ..DeviceOptions::default()
        })
        .await;
        let a = gpu.tensor(&base, None).unwrap();
        let b = gpu.tensor(&exponent, None).unwrap();
        let got = floats(&a.pow(&b).unwrap()).await;
        for (i, (g, w)) in bits(&got).iter().zip(bits(&want)).enumerate() {
            assert_eq!(
                *g, w,
                "{name}: pow({}, {}) read {}, Math.pow gives {}",
                base[i], exponent[i], got[i], want[i]
            );
        }
    }
}

/// Two zeros' max is +0 and their min -0, as JS's `Math.max` and
/// `Math.min` (TF.js's) give them, and a clamp keeps a zero within its
/// bounds as TF.js's comparisons do, on every path: relu(-0) read -0 on
/// the host and +0 in kernels (found by outside testing), and WGSL leaves
/// the sign to the GPU.
pub async fn a_zero_s_sign_from_relu_maximum_minimum_and_clamp_is_what_js_and_tf_js_give_on_every_path()
 {
    for (name, gpu) in paths(false).await {
        let a = gpu.tensor(&[-0.0, 0.0, -0.0, 0.0], None).unwrap();
        let b = gpu.tensor(&[0.0, -0.0, -0.0, 0.0], None).unwrap();
        let cases = [
            ("relu(a)", a.relu().unwrap(), [0.0, 0.0, 0.0, 0.0]),
            (
                "maximum(a, b)",
                a.maximum(&b).unwrap(),
                [0.0, 0.0, -0.0, 0.0],
            ),
            (
                "minimum(a, b)",
                a.minimum(&b).unwrap(),
                [-0.0, -0.0, -0.0, 0.0],
            ),
            (
                "clamp(a, 0, 6)",
                a.clamp(0.0, 6.0).unwrap(),
                [-0.0, 0.0, -0.0, 0.0],
            ),
            (
                "clamp(a, -1, 0)",
                a.clamp(-1.0, 0.0).unwrap(),
                [-0.0, 0.0, -0.0, 0.0],
            ),
        ];
        for (what, t, want) in cases {
            assert_eq!(bits(&floats(&t).await), bits(&want), "{name}: {what}");
        }
    }
}

/// A float product holding a zero is ±0 however far the others' product
/// overflows float32, and NaN with an infinity or a NaN (IEEE's
/// `Infinity * 0`): `[0, 1e4 x 20]` read NaN, `0 * Infinity` of the
/// overflowed rest (found by outside testing; TF.js's CPU multiplies in
/// float64). In one
/// launch per row, one thread per row, and two stages (rows past a
/// workgroup's chunk, the zero in another chunk than the overflow); and a
/// running product from its zero on, inclusive and exclusive.
pub async fn a_product_holding_a_zero_is_zero_however_far_the_rest_overflows_and_nan_with_an_infinity()
 {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let big = |n: usize| vec![1e4f32; n];
    let row = |head: &[f32], n: usize, tail: &[f32]| -> Vec<f32> { [head, &big(n), tail].concat() };
    // (row, its product), each row 23 long.
    let rows: [(Vec<f32>, f32); 7] = [
        (row(&[0.0], 20, &[1.0, 1.0]), 0.0),
        (row(&[], 20, &[-0.0, 1.0, 1.0]), -0.0),
        (row(&[-2.0, 0.0], 20, &[3.0]), -0.0),
        (row(&[0.0, inf], 20, &[1.0]), nan),
        (row(&[nan, 0.0], 20, &[1.0]), nan),
        (row(&[], 23, &[]), inf),
        (row(&[-0.0, -0.0], 1, &[0.5; 20]), 0.0),
    ];
    for (name, gpu) in paths(false).await {
        let values: Vec<f32> = rows.iter().flat_map(|(r, _)| r.clone()).collect();
        let want: Vec<f32> = rows.iter().map(|(_, p)| *p).collect();
        let x = gpu.tensor(&values, Some(&[rows.len(), 23])).unwrap();
        let got = floats(&x.prod(Some(&[1]), false).unwrap()).await;
        assert_eq!(bits(&got), bits(&want), "{name}: a row each: {got:?}");
        // Enough rows for one thread per row.
        let many: Vec<f32> = (0..300).flat_map(|_| rows[0].0.clone()).collect();
        let x = gpu.tensor(&many, Some(&[300, 23])).unwrap();
        let got = floats(&x.prod(Some(&[1]), false).unwrap()).await;
        assert!(
            got.iter().all(|v| v.to_bits() == 0),
            "{name}: 300 rows: {got:?}"
        );
        // Two stages: 20000 elements, the overflow in the first chunk, the
        // zero (or an infinity and a zero) in a later one.
        let mut long = vec![1e4f32; 20_000];
        long[15_000] = -0.0;
        let mut with_inf = long.clone();
        with_inf[3] = inf;
        let x = gpu
            .tensor(&[long, with_inf].concat(), Some(&[2, 20_000]))
            .unwrap();
        let got = floats(&x.prod(Some(&[1]), false).unwrap()).await;
        assert_eq!(
            bits(&got),
            bits(&[-0.0, nan]),
            "{name}: two stages: {got:?}"
        );
        // As a row value an epilogue reads: each row less its product.
        let x = gpu.tensor(&rows[0].0, Some(&[1, 23])).unwrap();
        let less = x.sub(&x.prod(Some(&[1]), true).unwrap()).unwrap();
        let got = floats(&less).await;
        assert_eq!(bits(&got), bits(&rows[0].0), "{name}: an epilogue: {got:?}");
        // Running products: in order, overflowing to Infinity, then 0 from
        // the zero on, the signs multiplied, NaN from an infinity on.
        let line = row(&[], 20, &[0.0, 2.0, -1.0, inf, 3.0]);
        let mut inclusive = Vec::new();
        let mut acc = 1f32;
        for &v in &line[..20] {
            acc *= v;
            inclusive.push(acc);
        }
        inclusive.extend([0.0, 0.0, -0.0, nan, nan]);
        let exclusive: Vec<f32> = [&[1.0], &inclusive[..24]].concat();
        let x = gpu.tensor(&line, None).unwrap();
        let got = floats(&x.cumprod(0, false, false).unwrap()).await;
        assert_eq!(bits(&got), bits(&inclusive), "{name}: cumprod: {got:?}");
        let got = floats(&x.cumprod(0, true, false).unwrap()).await;
        assert_eq!(
            bits(&got),
            bits(&exclusive),
            "{name}: exclusive cumprod: {got:?}"
        );
    }
}

/// A reduction whose prologue reads a tensor an earlier kernel of the same
/// submission flagged makes a non-finite value of that failure's: it is no
/// root of its own (found by the random overflowing graphs).
pub async fn a_reduction_of_what_a_failed_op_made_is_no_root_of_its_own() {
    for (name, gpu) in checking().await {
        let x = gpu.tensor(&[-1.0, 1.0, 1.0, 1.0], Some(&[2, 2])).unwrap();
        let root = x.sqrt().unwrap();
        let scaled = root.div(3.0).unwrap();
        let rows = scaled.sum(Some(&[-1]), true).unwrap();
        let report = non_finite_at(name, &rows, "sqrt", "NaN at [0, 0]").await;
        assert!(report.depth >= 1, "{name}: the sum carries sqrt's failure");
        assert_eq!(floats(&x.sum(None, false).unwrap()).await, [2.0], "{name}");
    }
}

/// A checked op feeding a reduction alone runs as the reduction's
/// prologue, its checks in the reduction's kernel, which checks its own
/// values as it writes them: as many kernels as unchecked. The prologue's
/// flag is the root; the sum it made infinite is not a second one, and a
/// sum that overflows from finite values is a root of its own.
pub async fn a_checked_op_runs_as_its_reductions_prologue_and_the_reduction_checks_what_it_writes()
{
    let program: &Program<'_> = &|gpu| {
        let x = gpu
            .tensor(&[1.0, 100.0, 2.0, 3.0, 80.0, 80.0], Some(&[3, 2]))
            .unwrap();
        x.exp().unwrap().sum(Some(&[-1]), false).unwrap()
    };
    let (plain, _) = launched(false, program).await;
    let gpu = device_with(DeviceOptions {
        check_numerics: true,
        host_max_elements: 0,
        ..DeviceOptions::default()
    })
    .await;
    let (y, profile) = gpu.profile(|| program(&gpu));
    let wgsl: Vec<String> = profile.kernels.into_iter().flat_map(|k| k.wgsl).collect();
    assert_eq!(wgsl.len(), plain.len(), "one kernel each: {wgsl:?}");
    assert!(wgsl[0].contains("flag_nonfinite("), "{}", wgsl[0]);
    non_finite_at("profiled", &y, "exp", "+Infinity at [0, 1]").await;
    for (name, gpu) in checking().await {
        non_finite_at(name, &program(&gpu), "exp", "+Infinity at [0, 1]").await;
        // exp(88.5) is finite, twice it is not: the sum is the root.
        let x = gpu.tensor(&[88.5, 88.5, 1.0, 2.0], Some(&[2, 2])).unwrap();
        let sum = x.exp().unwrap().sum(Some(&[-1]), false).unwrap();
        non_finite_at(name, &sum, "sum", "+Infinity at [0]").await;
        let fine = floats(&x.exp().unwrap().sum(Some(&[0]), false).unwrap()).await;
        let expected = [88.5f32.exp() + 1f32.exp(), 88.5f32.exp() + 2f32.exp()];
        for (got, want) in fine.iter().zip(expected) {
            assert!((got - want).abs() <= 1e-5 * want, "{name}: {fine:?}");
        }
    }
}

/// Found by TF.js's own op tests: WGSL's `max`, `min` and `clamp` (and
/// Rust's `f32::max` on the host) give the other operand for a NaN, so a
/// NaN vanished into a number through `relu`, `maximum`, `clipByValue`, a
/// max reduction or a softmax: a silent wrong value. So did SwiftShader's
/// `exp` (its `exp(NaN)` is Infinity; found by the browser run of this
/// case). Each now gives NaN where TF.js does, on the host and in kernels,
/// fused or not.
pub async fn a_nan_propagates_through_exp_max_min_clamp_relu_sigmoid_tanh_and_softmax_and_a_max_pool_ignores_it()
 {
    let options = |host_max_elements| DeviceOptions {
        host_max_elements,
        ..DeviceOptions::default()
    };
    for (name, max) in [("host", 1024), ("kernels", 0)] {
        let gpu = device_with(options(max)).await;
        let x = gpu
            .tensor(&[f32::NAN, -1.0, 2.0, 0.5], Some(&[2, 2]))
            .unwrap();
        let nan_first = |v: &[f32], what: &str| {
            assert!(v[0].is_nan(), "{name}: {what} of NaN is NaN: {v:?}");
        };
        nan_first(&floats(&x.exp().unwrap()).await, "exp");
        nan_first(&floats(&x.relu().unwrap()).await, "relu");
        nan_first(&floats(&x.sigmoid().unwrap()).await, "sigmoid");
        nan_first(&floats(&x.tanh().unwrap()).await, "tanh");
        nan_first(&floats(&x.clamp(0.0, 1.0).unwrap()).await, "clamp");
        let m = floats(&x.maximum(0.0).unwrap()).await;
        nan_first(&m, "maximum");
        assert_eq!(m[1..], [0.0, 2.0, 0.5], "{name}: the rest are numbers");
        nan_first(
            &floats(&x.minimum(&x.neg().unwrap()).unwrap()).await,
            "minimum",
        );
        // Fused: a chain through relu and clamp keeps the NaN to its end.
        let chain = x
            .mul(2.0)
            .unwrap()
            .relu()
            .unwrap()
            .clamp(-5.0, 5.0)
            .unwrap()
            .add(1.0)
            .unwrap();
        nan_first(&floats(&chain).await, "a fused chain");
        // Reductions: the row holding the NaN reduces to NaN, the other not.
        for (what, r) in [
            ("max", x.max(Some(&[1]), false).unwrap()),
            ("min", x.min(Some(&[1]), false).unwrap()),
            ("logSumExp", x.log_sum_exp(Some(&[1]), false).unwrap()),
        ] {
            let v = floats(&r).await;
            assert!(v[0].is_nan() && v[1].is_finite(), "{name}: {what}: {v:?}");
        }
        let all = floats(&x.max(None, false).unwrap()).await;
        nan_first(&all, "a whole max");
        let s = floats(&x.softmax(1).unwrap()).await;
        assert!(
            s[0].is_nan() && s[1].is_nan(),
            "{name}: softmax's NaN row: {s:?}"
        );
        assert!(
            (s[2] + s[3] - 1.0).abs() < 1e-6,
            "{name}: the other row: {s:?}"
        );
        // A max pool ignores a NaN in its window, as TF.js's does.
        let image = x.reshape(&[1, 2, 2, 1]).unwrap();
        let pooled = image
            .max_pool([2, 2], [1, 1], webfusion::Padding::Valid)
            .unwrap();
        assert_eq!(floats(&pooled).await, [2.0], "{name}: maxPool");
    }
}

/// Found by TF.js's own op tests: WGSL allows `sin` and `cos` an absolute
/// error of 2^-11, and SwiftShader's are 1.5e-4 off inside [-pi, pi], so
/// `tan`'s gradient at 2 (a tenfold `1/cos^2`) was off by 1e-2; past
/// [-pi, pi] WGSL promises nothing (`tan(1e9)` was 1). Kernels compute
/// both to about 1e-7 for every finite argument, as the host does, on a
/// grid that crosses every quadrant and at a point of every binade.
pub async fn sin_and_cos_are_within_2e_7_for_every_finite_argument_in_kernels_as_on_the_host() {
    let options = |host_max_elements| DeviceOptions {
        host_max_elements,
        ..DeviceOptions::default()
    };
    let mut xs: Vec<f32> = (-400..=400).map(|i| i as f32 * 0.0625).collect();
    xs.extend([
        5.0, -5.0, 1.2831853, 100.0, 1463.982, -33404.555, 964065.25, -999_999.0,
    ]);
    // From 1e6 to the largest float, where a reduction by a split pi/2
    // runs out of bits: every binade, at a point of it no multiple of pi/4
    // is near by design, and the extremes.
    let mut seed = 0x9e37_79b9_u32;
    for exponent in 19..=127 {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let x = f32::from_bits(((exponent + 127) << 23) | (seed >> 9));
        xs.extend([x, -x]);
    }
    xs.extend([1e6, -1e6, 16_777_216.0, 1e9, -1e9, 3e9, f32::MAX, -f32::MAX]);
    for (name, max) in [("host", 1 << 20), ("kernels", 0)] {
        let gpu = device_with(options(max)).await;
        let x = gpu.tensor(&xs, None).unwrap();
        let sin = floats(&x.sin().unwrap()).await;
        let cos = floats(&x.cos().unwrap()).await;
        for (i, &v) in xs.iter().enumerate() {
            let (s, c) = (f64::from(v).sin(), f64::from(v).cos());
            assert!(
                (f64::from(sin[i]) - s).abs() < 2e-7 && (f64::from(cos[i]) - c).abs() < 2e-7,
                "{name}: sin and cos of {v}: {} and {}, not {s} and {c}",
                sin[i],
                cos[i]
            );
        }
    }
}

/// Found by TF.js's own op tests ("numbers exceed float32 precision"):
/// `tan` of -470910688 is 30144.17578, and a float32 `sin / cos` is an
/// ulp (0.002) off there, past TF.js's absolute 1e-3. Small work run on
/// the host gives what TF.js's CPU backend gives, the float64 tangent
/// rounded; kernels give the quotient, whose sin and cos are exactly
/// reduced, so it stays within a relative 1e-5 here, poles included.
pub async fn tan_on_the_host_is_the_float64_tangent_rounded_and_in_kernels_the_quotient_of_sin_and_cos()
 {
    let options = |host_max_elements| DeviceOptions {
        host_max_elements,
        ..DeviceOptions::default()
    };
    let mut xs: Vec<f32> = (-300..=300).map(|i| i as f32 * 0.005).collect();
    xs.extend([
        // TF.js's spec's values, as float32s.
        -608065408.0,
        781902016.0,
        -470910688.0,
        1786759296.0,
        1873777920.0,
        -1015107968.0,
        830023232.0,
        // The float32s nearest the poles at pi/2, -pi/2 and 3pi/2.
        std::f32::consts::FRAC_PI_2,
        -std::f32::consts::FRAC_PI_2,
        3.0 * std::f32::consts::FRAC_PI_2,
        1e30,
        0.0,
        -0.0,
    ]);
    let special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY];
    xs.extend(special);
    for (name, max) in [("host", 1 << 20), ("kernels", 0)] {
        let gpu = device_with(options(max)).await;
        let x = gpu.tensor(&xs, None).unwrap();
        let tan = floats(&x.tan().unwrap()).await;
        for (i, &v) in xs.iter().enumerate() {
            let want = f64::from(v).tan();
            let got = tan[i];
            if special.iter().any(|s| s.to_bits() == v.to_bits()) {
                assert!(got.is_nan(), "{name}: tan({v}) is NaN, not {got}");
            } else if name == "host" {
                assert_eq!(got.to_bits(), (want as f32).to_bits(), "{name}: tan({v})");
            } else {
                assert!(
                    (f64::from(got) - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "{name}: tan({v}) is {got}, not {want}"
                );
            }
        }
    }
}

/// `softmax([Infinity, 1, 0])` read `[NaN, 0, 0]` (found by outside
/// testing): its logSumExp was +Infinity, the limit, and `exp(x - lse)`
/// is NaN at the infinity and 0 elsewhere, neither TF.js's answer nor its
/// own `logSoftmax`'s (all NaN). A row holding +Infinity has the logSumExp
/// TF.js computes, `max + log(sum(exp(x - max)))` = NaN, so every one of
/// these is NaN there, on rows short and long; other rows are untouched.
pub async fn a_row_holding_infinity_is_nan_through_log_sum_exp_softmax_and_log_softmax() {
    let inf = f32::INFINITY;
    for max in [1024, 0] {
        let gpu = device_with(DeviceOptions {
            host_max_elements: max,
            ..DeviceOptions::default()
        })
        .await;
        // Past `REDUCE_CHUNK` (20000): partial logSumExps merged, and a
        // softmax by its max and sum.
        for n in [3usize, 5000, 20000] {
            // Row 0 holds +Infinity; row 1 is finite with a -Infinity; row 2
            // is all -Infinity (every path gives NaN for its softmax).
            let mut values = vec![0.0f32; 3 * n];
            values[0] = inf;
            values[1] = 1.0;
            values[n] = 1.0;
            values[n + 1] = -inf;
            for v in &mut values[2 * n..] {
                *v = -inf;
            }
            let x = gpu.tensor(&values, Some(&[3, n])).unwrap();
            let lse = floats(&x.log_sum_exp(Some(&[-1]), false).unwrap()).await;
            assert!(
                lse[0].is_nan(),
                "n {n}: logSumExp of a row with +Infinity: {lse:?}"
            );
            assert!(lse[1].is_finite(), "n {n}: {lse:?}");
            assert_eq!(lse[2], -inf, "n {n}: a sum of nothing's log");
            for (what, t) in [
                ("softmax", x.softmax(-1)),
                ("logSoftmax", x.log_softmax(-1)),
            ] {
                let v = floats(&t.unwrap()).await;
                assert!(
                    v[..n].iter().all(|v| v.is_nan()),
                    "n {n}, host {max}: {what} of a row with +Infinity: {:?}",
                    &v[..3]
                );
                assert!(v[n..2 * n].iter().all(|v| !v.is_nan()), "n {n}: {what}");
                assert!(v[2 * n..].iter().all(|v| v.is_nan()), "n {n}: {what}");
            }
        }
    }
}

/// `floor`, TF.js's: whole numbers down, a float32 whatever the operand,
/// NaN and the infinities as they are, -0 kept, values past 2^31 exact
/// (the TF.js kernels' `floor`, `ceil`, `round` and resizes are built on
/// it; they took `floorDiv(x, 1)`, an int32 since it follows TF.js, and
/// found a NaN 0 and an infinity 2^31 - 1).
pub async fn floor_takes_whole_numbers_down_and_keeps_nan_infinities_and_large_values() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let values = [
        1.5, -1.5, -0.0, 0.25, -0.25, 3e9, -3e9, 8388607.5, inf, -inf, nan,
    ];
    let want: Vec<f32> = values.iter().map(|v: &f32| v.floor()).collect();
    for max in [1024, 0] {
        let gpu = device_with(DeviceOptions {
            host_max_elements: max,
            ..DeviceOptions::default()
        })
        .await;
        let x = gpu.tensor(&values, None).unwrap();
        let y = x.floor().unwrap();
        assert_eq!(y.dtype(), webfusion::DType::Float32);
        assert_eq!(bits(&floats(&y).await), bits(&want), "host {max}");
        let ints = gpu
            .tensor_of(webfusion::Values::int32(&[3, -4]), None)
            .unwrap()
            .floor()
            .unwrap();
        assert_eq!(
            ints.dtype(),
            webfusion::DType::Float32,
            "an int's is a float32"
        );
        assert_eq!(floats(&ints).await, [3.0, -4.0]);
        let g = gpu.grad(|x| x.floor()?.sum(None, false), &x, None).unwrap();
        assert!(
            floats(&g).await.iter().all(|&v| v == 0.0),
            "flat: no gradient"
        );
    }
}

/// `floor` as a user meets it beside other ops: a bool's is a float32 of
/// 0 and 1; in a chain of elementwise ops it is one kernel with them; an
/// injected fault in it rejects the read of what it fed, naming it, while
/// a tensor beside it reads.
pub async fn floor_fuses_with_its_neighbours_takes_bools_and_fails_alone_under_a_fault() {
    let gpu = kernels_only().await;
    let flags = gpu
        .tensor_of(webfusion::Values::bool(&[true, false, true]), None)
        .unwrap();
    let floored = flags.floor().unwrap();
    assert_eq!(floored.dtype(), webfusion::DType::Float32);
    assert_eq!(floats(&floored).await, [1.0, 0.0, 1.0]);
    let x = gpu.tensor(&[0.25, -1.5, 2.75, -0.5], None).unwrap();
    fuses_with_its_neighbours_and_fails_alone(
        &gpu,
        &x,
        "floor",
        Tensor::floor,
        &[0.0, -2.0, 6.0, 0.0],
    )
    .await;
}

/// `tan` as a user meets it beside other ops (the checks a new op owes):
/// an int is refused by name, as `sin`'s is; it is one kernel with the
/// ops around it; a fault in it fails only what it fed.
pub async fn tan_fuses_with_its_neighbours_refuses_ints_and_fails_alone_under_a_fault() {
    let gpu = kernels_only().await;
    let ints = gpu
        .tensor_of(webfusion::Values::int32(&[1, 2]), None)
        .unwrap();
    match ints.tan() {
        Err(refused) => assert!(refused.to_string().contains("tan"), "{refused}"),
        Ok(_) => panic!("an int32's tan is refused"),
    }
    let x = gpu.tensor(&[0.25, -1.5, 0.75, -0.5], None).unwrap();
    // 2 tan(x + 0.5), in float64.
    let want: Vec<f32> = [0.75f64, -1.0, 1.25, 0.0]
        .iter()
        .map(|v| (2.0 * v.tan()) as f32)
        .collect();
    fuses_with_its_neighbours_and_fails_alone(&gpu, &x, "tan", Tensor::tan, &want).await;
}

/// `op` between an `add` and a `mul` on a kernels-only device: `2 op(x +
/// 0.5)` reads `want` (within 1e-5) from one kernel; a fault injected in
/// `op` rejects what it fed, naming it, and a tensor beside it reads.
async fn fuses_with_its_neighbours_and_fails_alone(
    gpu: &Device,
    x: &Tensor,
    name: &str,
    op: fn(&Tensor) -> Result<Tensor, webfusion::RegistrationError>,
    want: &[f32],
) {
    let shifted = x.add(0.5).unwrap();
    let applied = op(&shifted).unwrap();
    let chain = applied.mul(2.0).unwrap();
    let before = gpu.stats().kernels_launched;
    super::engine::close_within(&floats(&chain).await, want, 1e-5);
    assert_eq!(
        gpu.stats().kernels_launched - before,
        1,
        "add, {name} and mul: one kernel"
    );
    gpu.inject_fault(name, 1, webfusion::FaultKind::Validation)
        .unwrap();
    let faulted = op(x).unwrap().add(1.0).unwrap();
    let beside = x.neg().unwrap();
    let error = read_err(&faulted).await;
    assert_eq!(error.failures[0].root.op, name, "{error}");
    assert_eq!(
        error.failures[0].root.kind,
        FailureKind::Injected,
        "{error}"
    );
    let negated: Vec<f32> = floats(x).await.iter().map(|v| -v).collect();
    assert_eq!(floats(&beside).await, negated);
}

/// Found by outside testing: a max pool window wholly in the padding makes
/// -Infinity (TF.js's value) from finite images, and the checks let it
/// through, its bounds taken as the images'. It fails as `non-finite` at
/// `maxPool`, as a max of an empty axis does; a pool with padding but no
/// such window is proven finite and reads.
pub async fn a_max_pool_window_wholly_in_the_padding_fails_with_the_checks_on() {
    use webfusion::Padding;
    // Windows of one over a 2x2 image, padded by rows `[above, below]`.
    async fn pooled(gpu: &Device, rows: [usize; 2], size: usize) -> Tensor {
        let x = gpu
            .tensor(&[1.0, 2.0, 3.0, 4.0], Some(&[1, 2, 2, 1]))
            .unwrap();
        let pad = match size {
            1 => Padding::Explicit([rows, [0, 0]]),
            _ => Padding::Same,
        };
        x.max_pool([size, size], [1, 1], pad).unwrap()
    }
    for (name, gpu) in checking().await {
        // One row of padding above, windows of one: the first row is all pad.
        let padded = pooled(&gpu, [1, 0], 1).await;
        non_finite_at(name, &padded, "maxPool", "-Infinity").await;
        let same = pooled(&gpu, [0, 0], 2).await;
        assert_eq!(floats(&same).await, vec![4.0, 4.0, 4.0, 4.0], "{name}");
        let last = pooled(&gpu, [0, 1], 1).await;
        non_finite_at(name, &last, "maxPool", "-Infinity").await;
    }
    // Without the checks, TF.js's values.
    let padded = pooled(&super::engine::device().await, [1, 0], 1).await;
    let inf = f32::NEG_INFINITY;
    assert_eq!(floats(&padded).await, vec![inf, inf, 1.0, 2.0, 3.0, 4.0]);
}

/// `softmax([3e38, 1e38, -3e38])` failed as `non-finite` at a `sub` with
/// the checks on (found by outside testing). The failing value was the
/// softmax's own `x - logSumExp(x)`: at most 0, and past float32's range
/// -Infinity, which `exp` makes the exact 0. TF.js reads `[1, 0, 0]`. The
/// checks skip that difference (`OpIr::unchecked`), on the host and in
/// kernels, along the last axis (the logSumExp's path, over 8192 the max's
/// and sum's) and along another; the values past it are still checked.
pub async fn a_softmax_whose_shifted_values_pass_the_float_limit_reads_its_exact_zeros_with_the_checks_on()
 {
    for (name, gpu) in checking().await {
        for n in [3usize, 10000] {
            let mut values = vec![0.0f32; n];
            values[0] = 3e38;
            values[1] = 1e38;
            values[2] = -3e38;
            let mut want = vec![0.0f32; n];
            want[0] = 1.0;
            for (axis, shape) in [(-1, [1, n]), (0, [n, 1])] {
                let x = gpu.tensor(&values, Some(&shape)).unwrap();
                let got = floats(&x.softmax(axis).unwrap()).await;
                assert_eq!(got, want, "{name}: softmax of {n} along {axis}");
            }
        }
        // Their gradients too (outside testing's sixth round: the
        // logSumExp's rule took a checked `x - logSumExp(x)`): TF.js's.
        let x = gpu.tensor(&[3e38, 1e38, -3e38], None).unwrap();
        let w = gpu.tensor(&[1.0, 2.0, 3.0], None).unwrap();
        let g = gpu
            .grad(|t| t.softmax(-1)?.mul(&w)?.sum(None, false), &x, None)
            .unwrap();
        assert_eq!(floats(&g).await, [0.0; 3], "{name}: softmax's gradient");
        let spread = gpu.tensor(&[-3e38, 3e38, 0.0], None).unwrap();
        let g = gpu
            .grad(|t| t.log_sum_exp(None, false), &spread, None)
            .unwrap();
        assert_eq!(
            floats(&g).await,
            [0.0, 1.0, 0.0],
            "{name}: logSumExp's gradient"
        );
        // What follows the softmax is checked as before.
        let y = x.softmax(-1).unwrap().mul(1e38).unwrap().mul(1e38).unwrap();
        non_finite_at(name, &y, "mul", "").await;
    }
}
