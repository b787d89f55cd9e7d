//! Small elementwise work on values the host holds runs on the host
//! (`DeviceOptions::host_max_elements`), and what a kernel then reads is
//! uploaded: the same values, the same failures, no GPU cost for work that
//! never needed the GPU.

use webfusion::{DType, Device, DeviceOptions, FailureKind, FaultKind, Tensor, Values};

use super::engine::{Seeded, close_within, device, device_with, kernels_only, read, read_err};
use super::expressions::{w6_chain, w6_on_cpu};

pub async fn a_thousand_ops_on_sixteen_given_values_run_on_the_host_without_a_kernel_a_buffer_or_a_pipeline()
 {
    let gpu = device().await;
    let data: Vec<f32> = (0..16).map(|i| i as f32 / 8.0 - 1.0).collect();
    let want: Vec<f32> = data.iter().map(|&v| w6_on_cpu(v, 1000)).collect();
    for iteration in 0..2 {
        let before = gpu.stats();
        let kept = w6_chain(gpu.tensor(&data, None).unwrap());
        let got = read(kept.last().unwrap()).await;
        close_within(&got, &want, 1e-4);
        // The host kept each intermediate it computed as a value (no
        // expression to compute again): a read of one runs nothing.
        let half = read(&kept[500]).await;
        assert!((half[0] - w6_on_cpu(data[0], 500)).abs() < 1e-4, "{half:?}");
        let after = gpu.stats();
        assert_eq!(
            after.kernels_launched, before.kernels_launched,
            "iteration {iteration}"
        );
        assert_eq!(after.gpu_buffers_created, before.gpu_buffers_created);
        assert_eq!(after.pipelines_compiled, 0);
        assert_eq!(
            after.bytes_in_use, 0,
            "the host's values take no GPU memory"
        );
        assert_eq!(after.expressions_held, 0);
        // The upload and the 1000 ops, once.
        assert_eq!(after.host_ops - before.host_ops, 1 + 1000);
        drop(kept);
        assert_eq!(gpu.stats().expressions_held, 0);
    }
}

pub async fn a_value_the_host_made_is_uploaded_once_when_a_kernel_reads_it() {
    let gpu = device().await;
    let x = gpu.tensor(&[1.0, 2.0, 3.0, 4.0], Some(&[2, 2])).unwrap();
    let y = x.mul(2.0).unwrap();
    assert_eq!(read(&y).await, vec![2.0, 4.0, 6.0, 8.0]);
    let start = gpu.stats();
    assert_eq!(start.kernels_launched, 0);
    assert_eq!(start.bytes_in_use, 0);
    // A matmul is a kernel: it reads `y`, which is uploaded for it.
    let p = y.matmul(&y).unwrap();
    assert_eq!(read(&p).await, vec![28.0, 40.0, 60.0, 88.0]);
    let after = gpu.stats();
    assert_eq!(after.kernels_launched - start.kernels_launched, 1);
    assert_eq!(after.bytes_in_use, 2 * 16, "y uploaded, and the product");
    // A second kernel reads the copy already in GPU memory.
    let q = y.matmul(&p).unwrap().add(&y).unwrap();
    assert_eq!(read(&q).await, vec![298.0, 436.0, 654.0, 952.0]);
    let last = gpu.stats();
    assert_eq!(last.kernels_launched - after.kernels_launched, 1);
    assert_eq!(
        last.buffers_allocated - after.buffers_allocated,
        1,
        "q's only"
    );
    drop((p, q));
    assert_eq!(gpu.stats().bytes_in_use, 16, "y's upload stays with y");
}

pub async fn a_fault_injected_into_a_small_block_fails_its_kernel_and_the_rest_runs_on_the_host() {
    let gpu = device().await;
    gpu.inject_fault("exp", 1, FaultKind::Validation).unwrap();
    let x = gpu.tensor(&[0.0, 1.0, 2.0], None).unwrap();
    let e = x.exp().unwrap().add(1.0).unwrap();
    let s = x.mul(3.0).unwrap();
    let error = read_err(&e).await;
    let root = &error.failures[0].root;
    assert_eq!(root.kind, FailureKind::Injected);
    assert_eq!(root.op, "exp");
    assert_eq!(read(&s).await, vec![0.0, 3.0, 6.0]);
    let stats = gpu.stats();
    assert_eq!(
        stats.kernels_launched, 2,
        "the faulted block, launched, then replayed alone"
    );
    assert_eq!(stats.host_ops, 2, "the upload and the mul");
    // The fault is used up: the same block runs on the host now, reading
    // the values the host kept after uploading them for the kernel.
    let again = x.exp().unwrap();
    close_within(
        &read(&again).await,
        &[1.0, 1.0f32.exp(), 2.0f32.exp()],
        1e-6,
    );
    assert_eq!(gpu.stats().kernels_launched, 2);
    assert_eq!(gpu.stats().host_ops, 3);
    drop((e, x, s, again));
    assert_eq!(gpu.stats().failures_held, 0);
}

/// Every elementwise op on values that reach its edges (a negative base,
/// ±0, huge arguments to tanh, exp and gelu), on both devices. Each op
/// stays on the domain WGSL defines it on: the log of a negative number,
/// say, is NaN on the host and lavapipe but `log(|x|)` on SwiftShader.
fn every_elementwise_op(x: &Tensor, y: &Tensor) -> Vec<(&'static str, Tensor)> {
    let positive = x.abs().unwrap().add(0.5).unwrap();
    let mut out: Vec<(&'static str, Tensor)> = vec![
        ("neg", x.neg().unwrap()),
        ("abs", x.abs().unwrap()),
        ("exp", x.exp().unwrap()),
        ("log", positive.log().unwrap()),
        ("sqrt", positive.sqrt().unwrap()),
        ("rsqrt", positive.rsqrt().unwrap()),
        ("square", x.square().unwrap()),
        ("relu", x.relu().unwrap()),
        ("gelu", x.gelu().unwrap()),
        ("sigmoid", x.sigmoid().unwrap()),
        ("tanh", x.tanh().unwrap()),
        // WGSL bounds their error on [-pi, pi] only.
        ("sin", x.clamp(-3.0, 3.0).unwrap().sin().unwrap()),
        ("cos", x.clamp(-3.0, 3.0).unwrap().cos().unwrap()),
        // Away from the poles, where the kernels' quotient is within 1e-5.
        ("tan", x.clamp(-1.4, 1.4).unwrap().tan().unwrap()),
        ("floor", x.floor().unwrap()),
        ("add", x.add(y).unwrap()),
        ("sub", x.sub(y).unwrap()),
        ("mul", x.mul(y).unwrap()),
        ("div", x.div(y).unwrap()),
        ("pow", x.pow(y).unwrap()),
        ("maximum", x.maximum(y).unwrap()),
        ("minimum", x.minimum(y).unwrap()),
        ("equal", x.equal(y).unwrap()),
        ("greater", x.greater(y).unwrap()),
        ("greaterEqual", x.greater_equal(y).unwrap()),
        ("less", x.less(y).unwrap()),
        ("lessEqual", x.less_equal(y).unwrap()),
        ("clamp", x.clamp(-1.5, 2.5).unwrap()),
        ("pow scalar", x.pow(3.0).unwrap()),
    ];
    let gpu = x.device();
    let positive = x.greater(0.0).unwrap();
    out.push(("where", gpu.where_(&positive, x, y).unwrap()));
    let arange = gpu
        .arange(-2.0, 6.0, 0.5)
        .unwrap()
        .reshape(&[4, 4])
        .unwrap();
    out.push(("arange", arange.add(x).unwrap()));
    out.push(("full", gpu.full(&[4, 4], 0.25).unwrap().mul(x).unwrap()));
    out
}

async fn elementwise_values(gpu: &Device) -> Vec<(&'static str, Vec<f32>)> {
    let x = [
        -3.0, -2.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0, 20.0, -20.0, 88.0, -1e30, 1e30, 7.0,
    ];
    let y = [
        2.0, 0.5, -3.0, 2.0, 0.0, -1.0, 0.5, 1.0, 3.0, -2.0, 0.25, 20.0, 2.0, 1e30, -1.5, 7.0,
    ];
    let x = gpu.tensor(&x, Some(&[4, 4])).unwrap();
    let y = gpu.tensor(&y, Some(&[4, 4])).unwrap();
    let mut values = Vec::new();
    for (name, t) in every_elementwise_op(&x, &y) {
        values.push((name, read(&t).await));
    }
    values
}

pub async fn the_host_computes_every_elementwise_op_as_the_kernels_do() {
    let (host, kernels) = (device().await, kernels_only().await);
    let on_host = elementwise_values(&host).await;
    let on_gpu = elementwise_values(&kernels).await;
    assert_eq!(kernels.stats().host_ops, 0);
    let stats = host.stats();
    assert!(stats.host_ops >= on_host.len() as u64, "{stats:?}");
    assert_eq!(stats.kernels_launched, 0, "{stats:?}");
    // Within the kernels' own accuracy: WGSL allows `exp` 3 + 2|x| ulp,
    // and `sin` and `cos` an absolute 2^-11 (SwiftShader uses about half of
    // it); a value the GPU flushed to zero as a denormal differs by 1e-45.
    let mut differ = Vec::new();
    for ((name, h), (_, g)) in on_host.iter().zip(&on_gpu) {
        let absolute = match *name {
            "sin" | "cos" => 1.0 / 2048.0,
            _ => 1e-6,
        };
        for (i, (a, b)) in h.iter().zip(g).enumerate() {
            let same = (a.is_nan() && b.is_nan())
                || a == b
                || (a - b).abs() <= absolute + 5e-5 * a.abs().max(b.abs());
            if !same {
                differ.push(format!("{name} at {i}: host {a}, kernel {b}"));
            }
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

pub async fn a_value_the_host_holds_rejects_with_the_loss_once_its_device_is_lost() {
    let gpu = device().await;
    let x = gpu.tensor(&[1.0, 2.0], None).unwrap();
    let y = x.add(1.0).unwrap();
    assert_eq!(read(&y).await, vec![2.0, 3.0]);
    gpu.destroy();
    for t in [&x, &y] {
        let error = read_err(t).await;
        assert_eq!(error.failures[0].root.kind, FailureKind::DeviceLost);
    }
}

pub async fn a_long_chain_on_hundreds_of_values_runs_as_a_kernel_past_the_hosts_work_bound() {
    let gpu = device().await;
    let data: Vec<f32> = (0..256).map(|i| i as f32 / 128.0 - 1.0).collect();
    let short = read(&w6_chain(gpu.tensor(&data, None).unwrap())[16]).await;
    assert_eq!(
        gpu.stats().kernels_launched,
        0,
        "16 ops on 256 values: the host's"
    );
    let want: Vec<f32> = data.iter().map(|&v| w6_on_cpu(v, 16)).collect();
    close_within(&short, &want, 1e-5);
    let before = gpu.stats();
    let kept = w6_chain(gpu.tensor(&data, None).unwrap());
    let got = read(kept.last().unwrap()).await;
    let want: Vec<f32> = data.iter().map(|&v| w6_on_cpu(v, 1000)).collect();
    close_within(&got, &want, 1e-4);
    let after = gpu.stats();
    assert_eq!(after.kernels_launched - before.kernels_launched, 1);
    assert_eq!(after.host_ops - before.host_ops, 1, "only the upload");
}

/// Two devices, as a page with a second one writes it: a value the host
/// holds on one moves to the other as values the host holds there, works
/// with a kernel there, and an op mixing the two devices' tensors is still
/// refused at registration.
pub async fn a_host_value_moves_to_a_second_device_and_mixing_devices_is_still_refused() {
    let (one, two) = (device().await, device().await);
    let x = one.tensor(&[1.0, 2.0, 3.0, 4.0], Some(&[2, 2])).unwrap();
    let y = x.mul(2.0).unwrap();
    let moved = y.to(&two).unwrap().await.unwrap();
    assert_eq!(read(&moved).await, vec![2.0, 4.0, 6.0, 8.0]);
    assert_eq!(two.stats().kernels_launched, 0);
    assert_eq!(two.stats().host_ops, 1, "the upload of the moved values");
    let product = moved.matmul(&moved).unwrap();
    assert_eq!(read(&product).await, vec![28.0, 40.0, 60.0, 88.0]);
    assert!(y.add(&moved).is_err(), "operands on two devices");
    assert_eq!(one.stats().kernels_launched, 0);
}

/// A graph model's shape arithmetic, as TF.js's converter runs it before a
/// `Reshape` (`Shape`, `StridedSlice`, `Prod`, `Pack`), on a tensor's shape
/// the program gave: every step runs on the host, so the result reads
/// synchronously (the converter reads it with `dataSync()`) and no kernel
/// is launched. A kernels-only device computes the same values on the GPU,
/// and a synchronous read there answers nothing.
pub async fn a_shape_computed_from_given_values_reads_synchronously_without_a_kernel() {
    let shape_arithmetic = |gpu: &Device| {
        let shape = gpu.tensor_of(Values::int32(&[8, 3, 4, 5]), None).unwrap();
        let batch = shape.slice(&[0], &[1]).unwrap().reshape(&[]).unwrap();
        let features = shape.slice(&[1], &[3]).unwrap().prod(None, false).unwrap();
        let packed = gpu.stack(&[&batch, &features], 0).unwrap();
        let joined = gpu
            .cat(&[&packed, &shape.max(None, true).unwrap()], 0)
            .unwrap();
        let widest = shape.slice(&[1], &[3]).unwrap().arg_max(0).unwrap();
        (joined, widest)
    };
    let gpu = device().await;
    let (joined, widest) = shape_arithmetic(&gpu);
    let got = joined.values_now().expect("the host holds it").unwrap();
    assert_eq!(got, Values::int32(&[8, 60, 8]));
    let got = widest.values_now().expect("the host holds it").unwrap();
    assert_eq!(got, Values::int32(&[2]));
    assert_eq!(gpu.stats().kernels_launched, 0);

    let kernels = kernels_only().await;
    let (joined, widest) = shape_arithmetic(&kernels);
    assert!(joined.values_now().is_none(), "a kernel wrote it");
    assert_eq!(joined.values().await.unwrap(), Values::int32(&[8, 60, 8]));
    assert_eq!(widest.values().await.unwrap(), Values::int32(&[2]));
    assert!(kernels.stats().kernels_launched > 0);
}

/// A synchronous read of what the GPU computes (a float's sum, whose order
/// of summation is the kernel's; anything past `host_max_elements`)
/// answers `None` and starts no read, and the asynchronous read after it
/// gets the values.
pub async fn a_synchronous_read_of_gpu_work_answers_nothing_and_a_read_after_it_gets_the_values() {
    let gpu = device().await;
    let small = gpu.tensor(&[1.0, 2.0, 3.0], None).unwrap();
    let sum = small.sum(None, false).unwrap();
    assert!(sum.values_now().is_none());
    assert_eq!(read(&sum).await, vec![6.0]);
    let large: Vec<f32> = (0..4096).map(|i| (i % 7) as f32).collect();
    let large = gpu.tensor(&large, Some(&[64, 64])).unwrap();
    let doubled = large.mul(2.0).unwrap();
    assert!(doubled.values_now().is_none());
    assert!(
        doubled.values_now().is_none(),
        "asking twice starts nothing either"
    );
    let got = read(&doubled).await;
    assert_eq!(got[..8], [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 0.0]);
}

/// A tensor that failed on the host (a checked op went non-finite there)
/// answers a synchronous read with its failure, the one an asynchronous
/// read rejects with.
pub async fn a_synchronous_read_of_a_tensor_that_failed_on_the_host_gives_its_failure() {
    let gpu = device_with(DeviceOptions {
        check_numerics: true,
        ..DeviceOptions::default()
    })
    .await;
    let x = gpu.tensor(&[1.0, -1.0], None).unwrap();
    let logged = x.log().unwrap().add(1.0).unwrap();
    let error = logged
        .values_now()
        .expect("it failed on the host")
        .unwrap_err();
    assert_eq!(error.failures[0].root.kind, FailureKind::NonFinite);
    assert_eq!(error.failures[0].root.op, "log");
    assert_eq!(
        read_err(&logged).await.failures[0].root,
        error.failures[0].root
    );
    assert_eq!(gpu.stats().kernels_launched, 0);
}

/// Seeded int32 values in `[-50, 50)`, a few at the ends of the range.
fn ints(n: usize, seed: u64) -> Vec<i32> {
    let mut s = Seeded::new(seed);
    (0..n)
        .map(|i| {
            let v = s.below(100) as i32 - 50;
            match i % 37 {
                5 => i32::MAX,
                11 => i32::MIN,
                _ => v,
            }
        })
        .collect()
}

/// Joins and folds on the host against the kernels, generated: random
/// shapes of rank 1 to 3, each fold over a random set of axes (a sum or a
/// product that wraps, a max, a min, an argmax and an argmin, of ints, of
/// bools and of floats with NaNs and infinities) and a join along each
/// axis, read from a default device (the host) and a kernels-only one (the
/// GPU): the same values, bit for bit but for which NaN.
pub async fn joins_and_folds_on_the_host_match_the_kernels() {
    let host = device().await;
    let kernels = kernels_only().await;
    let program = |gpu: &Device, seed: u64| -> Vec<Tensor> {
        let rank = 1 + (seed % 3) as usize;
        let dims: Vec<usize> = (0..rank)
            .map(|d| 1 + ((seed >> (4 * d)) % 5) as usize)
            .collect();
        let n: usize = dims.iter().product();
        let x = gpu
            .tensor_of(Values::int32(&ints(n, seed)), Some(&dims))
            .unwrap();
        let flags = x.greater(0.0).unwrap();
        let floats: Vec<f32> = ints(n, seed)
            .iter()
            .enumerate()
            .map(|(i, &v)| match i % 23 {
                3 => f32::NAN,
                7 => f32::NEG_INFINITY,
                13 => f32::INFINITY,
                _ => v as f32 / 7.0,
            })
            .collect();
        let xf = gpu.tensor(&floats, Some(&dims)).unwrap();
        let axes: Vec<isize> = (0..rank as isize)
            .filter(|d| (seed >> (8 + d)) & 1 == 1)
            .collect();
        let axis = (seed % rank as u64) as isize;
        let mut out = Vec::new();
        for t in [&x, &flags, &xf] {
            out.push(t.max(Some(&axes), seed & 1 == 0).unwrap());
            out.push(t.min(Some(&axes), false).unwrap());
            out.push(t.arg_max(axis).unwrap());
            out.push(t.arg_min(axis).unwrap());
        }
        out.push(x.sum(Some(&axes), false).unwrap());
        out.push(x.prod(Some(&axes), true).unwrap());
        out.push(gpu.cat(&[&x, &x.neg().unwrap(), &x], axis).unwrap());
        out.push(
            gpu.stack(&[&flags, &flags.logical_not().unwrap()], axis)
                .unwrap(),
        );
        out
    };
    for seed in 1..=40u64 {
        let on_host = program(&host, seed);
        let on_gpu = program(&kernels, seed);
        for (i, (h, k)) in on_host.iter().zip(&on_gpu).enumerate() {
            let answered = h
                .values_now()
                .unwrap_or_else(|| panic!("seed {seed}, output {i}: not on the host"));
            let (answered, want) = (answered.unwrap(), k.values().await.unwrap());
            let float = want.dtype == DType::Float32;
            let nan = |w: &u32| float && f32::from_bits(*w).is_nan();
            let same = |(a, b): (&u32, &u32)| a == b || (nan(a) && nan(b));
            assert!(
                answered.dtype == want.dtype
                    && answered.words.len() == want.words.len()
                    && answered.words.iter().zip(want.words.iter()).all(same),
                "seed {seed}, output {i}: {answered:?} on the host, {want:?} from the kernels"
            );
        }
    }
    assert_eq!(host.stats().kernels_launched, 0);
}
