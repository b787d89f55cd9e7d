//! The engine's behaviour, written once and run in both worlds: natively
//! (`tests/native.rs`, wgpu on Vulkan/Metal) and in the browser
//! (`tests/web.rs`, WebGPU in headless Chrome). Values are small and checked
//! by hand; `properties.rs` compares random graphs with a CPU reference.

use webfusion::{DType, Device, DeviceOptions, FailureKind, Tensor};

pub async fn device() -> Device {
    device_with(DeviceOptions::default()).await
}

/// A device that runs every block as a kernel, for tests of what the
/// kernels are (how many, what they allocate and compile) on tensors small
/// enough that a default device would run them on the host.
pub async fn kernels_only() -> Device {
    device_with(DeviceOptions {
        host_max_elements: 0,
        ..DeviceOptions::default()
    })
    .await
}

/// `kernels_only`, its kernels shaped as for a CPU adapter or a GPU
/// (`DeviceOptions::cpu_kernels`) whatever this machine's adapter is.
pub async fn kernels_shaped_for(cpu: bool) -> Device {
    device_with(DeviceOptions {
        host_max_elements: 0,
        cpu_kernels: Some(cpu),
        ..DeviceOptions::default()
    })
    .await
}

pub async fn device_with(options: DeviceOptions) -> Device {
    Device::request(options)
        .await
        .expect("a GPU adapter: natively mesa-vulkan-drivers, in Chrome --enable-unsafe-webgpu")
}

/// A seeded xorshift64 stream: the generated cases' one source of numbers,
/// so a seed that fails reproduces on every path and machine.
pub struct Seeded(u64);

impl Seeded {
    pub fn new(seed: u64) -> Seeded {
        // Any seed, 0 included, starts a stream that never sticks at 0.
        Seeded(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `[0, 1)`, from the top 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `n` seeded values in `[-1, 1)`.
pub fn seeded_values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = Seeded::new(seed);
    (0..n).map(|_| (s.unit() * 2.0 - 1.0) as f32).collect()
}

pub async fn read(t: &Tensor) -> Vec<f32> {
    t.to_vec().await.expect("the tensor reads")
}

/// The error a read of `t` rejects with; panics if it resolves.
pub async fn read_err(t: &webfusion::Tensor) -> webfusion::TensorError {
    match t.to_vec().await {
        Ok(values) => panic!("{} read {values:?}; a failure was expected", t.id()),
        Err(error) => error,
    }
}

fn close(got: &[f32], want: &[f32]) {
    close_within(got, want, 1e-5);
}

/// Each value within `tol`, absolute and relative, of the one wanted.
pub fn close_within(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= tol + tol * w.abs(), "{got:?} vs {want:?}");
    }
}

pub async fn the_first_slice_adds_and_scales_on_the_gpu() {
    let gpu = kernels_only().await;
    let a = gpu.tensor(&[1.0, 2.0, 3.0], None).unwrap();
    let b = gpu.tensor(&[10.0, 20.0, 30.0], None).unwrap();
    let t = a.add(&b).unwrap().mul(2.0).unwrap();
    assert_eq!(t.shape(), &[3]);
    assert_eq!(
        gpu.stats().kernels_launched,
        0,
        "nothing runs before a read"
    );
    assert_eq!(read(&t).await, vec![22.0, 44.0, 66.0]);
    assert_eq!(gpu.stats().kernels_launched, 1, "add and mul, fused");
    assert_eq!(gpu.stats().host_ops, 0);
}

pub async fn a_chain_of_16_elementwise_ops_launches_one_kernel_and_allocates_one_buffer() {
    let gpu = kernels_only().await;
    let x = gpu.tensor(&[0.5, -1.0, 2.0, 0.25], None).unwrap();
    gpu.sync().await.expect("no failure");
    let before = gpu.stats();
    let mut y = x.clone();
    for i in 0..16 {
        y = match i % 4 {
            0 => y.mul(0.9).unwrap(),
            1 => y.tanh().unwrap(),
            2 => y.add(&x).unwrap(),
            _ => y.sigmoid().unwrap(),
        };
    }
    let values = read(&y).await;
    let after = gpu.stats();
    assert_eq!(after.kernels_launched - before.kernels_launched, 1);
    assert_eq!(after.buffers_allocated - before.buffers_allocated, 1);
    assert_eq!(
        after.bytes_written - before.bytes_written,
        16,
        "only the result's 4 floats are written"
    );
    assert_eq!(after.fused_ops - before.fused_ops, 16);
    let mut want = vec![0.5f32, -1.0, 2.0, 0.25];
    let xs = want.clone();
    for i in 0..16 {
        for (w, x) in want.iter_mut().zip(&xs) {
            *w = match i % 4 {
                0 => *w * 0.9,
                1 => w.tanh(),
                2 => *w + x,
                _ => 1.0 / (1.0 + (-*w).exp()),
            };
        }
    }
    close(&values, &want);
}

pub async fn an_intermediate_read_after_the_result_is_computed_inline_by_one_more_kernel() {
    let gpu = kernels_only().await;
    let x = gpu.tensor(&[1.0, 2.0], None).unwrap();
    gpu.sync().await.expect("no failure");
    let before = gpu.stats();
    let e = x.exp().unwrap();
    let y = e.mul(2.0).unwrap().sub(1.0).unwrap();
    gpu.sync().await.expect("no failure");
    assert_eq!(
        gpu.stats().kernels_launched - before.kernels_launched,
        0,
        "held expressions wait for a read"
    );
    assert_eq!(gpu.stats().expressions_held - before.expressions_held, 2);
    close(
        &read(&y).await,
        &[2.0 * 1f32.exp() - 1.0, 2.0 * 2f32.exp() - 1.0],
    );
    assert_eq!(gpu.stats().kernels_launched - before.kernels_launched, 1);
    assert_eq!(
        gpu.stats().bytes_written - before.bytes_written,
        8,
        "y only"
    );
    close(&read(&e).await, &[1f32.exp(), 2f32.exp()]);
    assert_eq!(gpu.stats().kernels_launched - before.kernels_launched, 2);
    assert_eq!(gpu.stats().bytes_written - before.bytes_written, 16);
    assert_eq!(gpu.stats().expressions_held - before.expressions_held, 0);
}

/// A loop of fixed shapes compiles each kernel in its first iteration, a
/// product's text with its sizes written in (`Kernel::sizes`), and nothing
/// after: compiling a sized text only once its sizes came again kept a
/// training loop compiling for three more steps.
pub async fn a_repeated_loop_compiles_pipelines_in_its_first_iteration_only() {
    let gpu = kernels_only().await;
    let mut compiled = Vec::new();
    for step in 0..4 {
        let x = gpu.random_uniform(&[16, 8], -1.0, 1.0, step).unwrap();
        let w = gpu.random_normal(&[8, 4], 0.0, 0.1, 100 + step).unwrap();
        let y = x.matmul(&w).unwrap().relu().unwrap().softmax(-1).unwrap();
        let loss = y.mean(None, false).unwrap().mul(0.5).unwrap();
        read(&loss).await;
        compiled.push(gpu.stats().pipelines_compiled);
    }
    assert!(compiled[0] > 0);
    assert!(compiled.iter().all(|&c| c == compiled[0]), "{compiled:?}");
    assert!(gpu.stats().pipeline_cache_hits > 0);
}

/// A loop's later steps reuse the kernels its first step generated
/// (`codegen::Memo`), and each thing a kernel's key must tell apart gets a
/// kernel of its own that computes its own values: the sign of a zero
/// scalar, which operand of a `sub` comes first, a transposed operand.
pub async fn a_loop_generates_its_kernels_once_and_blocks_that_differ_get_their_own() {
    let gpu = kernels_only().await;
    let xs = [1.0f32, -2.0, 3.0, 0.5, 4.0, -1.5];
    let ws = [0.5f32, -1.0, 2.0, 1.0, -0.5, 0.25];
    // One step: a product and its epilogue, a softmax (a row reduction
    // and its epilogue), a sum, and a scalar's reciprocal by elementwise
    // ops; every intermediate kept, as JS code without `tidy` keeps them.
    let step = |zero: f32, flip: bool, transposed: bool| {
        let x = gpu.tensor(&xs, Some(&[2, 3])).unwrap();
        let w = match transposed {
            false => gpu.tensor(&ws, Some(&[3, 2])).unwrap(),
            true => gpu
                .tensor(&[0.5, 2.0, -0.5, -1.0, 1.0, 0.25], Some(&[2, 3]))
                .unwrap()
                .transpose(None)
                .unwrap(),
        };
        let h = x.matmul(&w).unwrap().add(1.0).unwrap().relu().unwrap();
        let p = h.softmax(-1).unwrap();
        let d = match flip {
            false => h.sub(&p).unwrap(),
            true => p.sub(&h).unwrap(),
        };
        let scaled = x.mul(zero).unwrap();
        let inverse = gpu.ones(&[2, 3]).unwrap().div(&scaled).unwrap();
        (d.sum(Some(&[1]), false).unwrap(), inverse)
    };
    // The same on the host.
    let want = |zero: f32, flip: bool| {
        let mut sums = Vec::new();
        for row in 0..2 {
            let h: Vec<f32> = (0..2)
                .map(|col| {
                    let dot: f32 = (0..3).map(|k| xs[row * 3 + k] * ws[k * 2 + col]).sum();
                    (dot + 1.0).max(0.0)
                })
                .collect();
            let top = h[0].max(h[1]);
            let total: f32 = h.iter().map(|v| (v - top).exp()).sum();
            let d: f32 = h.iter().map(|v| v - (v - top).exp() / total).sum();
            sums.push(if flip { -d } else { d });
        }
        let inverse: Vec<f32> = xs.iter().map(|x| 1.0 / (x * zero)).collect();
        (sums, inverse)
    };
    let mut generated = vec![gpu.stats().kernels_generated];
    for (zero, flip, transposed) in [
        (0.0, false, false),
        (0.0, false, false),
        (-0.0, false, false),
        (0.0, false, false),
        (0.0, true, false),
        (0.0, false, true),
    ] {
        let (sums, inverse) = step(zero, flip, transposed);
        let (want_sums, want_inverse) = want(zero, flip);
        close(&read(&sums).await, &want_sums);
        let got = read(&inverse).await;
        assert_eq!(got, want_inverse, "1 / (x * {zero})");
        generated.push(gpu.stats().kernels_generated);
    }
    let new: Vec<u64> = generated.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(new[0] > 0, "{new:?}");
    assert_eq!(new[1], 0, "a repeated step generates nothing: {new:?}");
    assert_eq!(
        new[3], 0,
        "the first step's kernels are still there: {new:?}"
    );
    for (k, what) in [
        (2, "-0.0"),
        (4, "sub's operands swapped"),
        (5, "a transposed operand"),
    ] {
        assert!(new[k] > 0, "{what} got a kernel of its own: {new:?}");
    }
}

/// A product's text launched at ever new sizes compiles one pipeline per
/// size set up to its room of four, then its general text once, which
/// every later size set runs: the compiles a text costs are bounded.
pub async fn a_product_at_ever_new_sizes_compiles_at_most_five_pipelines_and_stays_right() {
    let gpu = kernels_only().await;
    let w = gpu
        .tensor(&[1.0, 2.0, 3.0, -1.0, 0.5, 2.0], Some(&[3, 2]))
        .unwrap();
    read(&w).await;
    let mut compiled = Vec::new();
    for rows in [3usize, 5, 7, 9, 11, 13, 15, 5] {
        let before = gpu.stats().pipelines_compiled;
        let values: Vec<f32> = (0..rows * 3).map(|i| i as f32 * 0.25 - 1.0).collect();
        let x = gpu.tensor(&values, Some(&[rows, 3])).unwrap();
        let y = x.matmul(&w).unwrap();
        let w_rows = [[1.0f32, 2.0], [3.0, -1.0], [0.5, 2.0]];
        let want: Vec<f32> = (0..rows * 2)
            .map(|i| {
                (0..3)
                    .map(|k| values[i / 2 * 3 + k] * w_rows[k][i % 2])
                    .sum()
            })
            .collect();
        close(&read(&y).await, &want);
        compiled.push(gpu.stats().pipelines_compiled - before);
    }
    assert_eq!(
        compiled,
        vec![1, 1, 1, 1, 1, 0, 0, 0],
        "pipelines compiled at each size set"
    );
}

pub async fn a_block_at_another_place_in_a_later_flush_reuses_its_pipeline() {
    let gpu = kernels_only().await;
    let x = gpu.tensor(&[1.0, 2.0], None).unwrap();
    let y = gpu.tensor(&[1.0, 2.0, 3.0], None).unwrap();
    let chain = |x: &Tensor| x.mul(2.0).unwrap().add(1.0).unwrap().tanh().unwrap();
    let other = |y: &Tensor| y.exp().unwrap().neg().unwrap().sum(None, false).unwrap();
    read(&chain(&x)).await;
    read(&other(&y)).await;
    let compiled = gpu.stats().pipelines_compiled;
    assert_eq!(compiled, 2, "the chain's kernel and the sum's");
    let launched = gpu.stats().kernels_launched;
    // Both in one flush, the chain queued after the other work: its ops sit
    // at other places in the flush than the first time.
    let later = other(&y);
    let again = chain(&x);
    read(&later).await;
    read(&again).await;
    assert_eq!(gpu.stats().kernels_launched, launched + 2, "both ran again");
    assert_eq!(gpu.stats().pipelines_compiled, compiled);
}

pub async fn a_loop_whose_scalars_change_compiles_its_kernel_at_most_twice() {
    let gpu = kernels_only().await;
    let x = gpu.tensor(&[1.0, 2.0], None).unwrap();
    read(&x).await;
    let mut compiled = Vec::new();
    for step in 0..4 {
        let scale = 0.5 + step as f32;
        let y = x.mul(scale).unwrap().add(1.0).unwrap();
        assert_eq!(read(&y).await, vec![scale + 1.0, 2.0 * scale + 1.0]);
        compiled.push(gpu.stats().pipelines_compiled);
    }
    // Once with its scalars written in, once reading them as uniforms.
    assert_eq!(compiled, vec![1, 2, 2, 2]);
}

pub async fn scalars_keep_their_exact_bits_including_non_finite_ones() {
    // In a kernel (scalars are uniform words) and on the host alike.
    for (gpu, on_host) in [(kernels_only().await, false), (device().await, true)] {
        let x = gpu.tensor(&[1.0, -2.0, 3e38], None).unwrap();
        let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        let cpu = |f: fn(f32) -> f32| bits([1.0f32, -2.0, 3e38].map(f).to_vec());
        assert_eq!(bits(read(&x.add(0.1).unwrap()).await), cpu(|v| v + 0.1));
        assert_eq!(bits(read(&x.mul(10.0).unwrap()).await), cpu(|v| v * 10.0));
        assert_eq!(bits(read(&x.mul(-0.0).unwrap()).await), cpu(|v| v * -0.0));
        let inf = read(&x.add(f32::INFINITY).unwrap()).await;
        assert!(inf.iter().all(|v| *v == f32::INFINITY), "{inf:?}");
        let nan = read(&x.add(f32::NAN).unwrap()).await;
        assert!(nan.iter().all(|v| v.is_nan()), "{nan:?}");
        let stats = gpu.stats();
        match on_host {
            false => assert_eq!((stats.kernels_launched, stats.host_ops), (5, 0)),
            // The upload is a host op too.
            true => assert_eq!((stats.kernels_launched, stats.host_ops), (0, 6)),
        }
    }
}

pub async fn the_queue_flushes_by_itself_at_its_capacity() {
    let gpu = device_with(DeviceOptions {
        capacity: 4,
        ..Default::default()
    })
    .await;
    let x = gpu.ones(&[2]).unwrap();
    let _y = x.add(1.0).unwrap().add(1.0).unwrap().add(1.0).unwrap();
    assert_eq!(gpu.stats().flushes, 1);
}

pub async fn disposed_tensors_return_their_memory_to_the_pool() {
    let gpu = kernels_only().await;
    let start = gpu.stats().bytes_in_use;
    {
        let a = gpu.ones(&[1000]).unwrap();
        let b = a.exp().unwrap().add(&a).unwrap();
        read(&b).await;
        assert!(gpu.stats().bytes_in_use > start);
    }
    assert_eq!(gpu.stats().bytes_in_use, start);
    let allocated = gpu.stats().buffers_allocated;
    let c = gpu.ones(&[1000]).unwrap().exp().unwrap();
    read(&c).await;
    assert_eq!(
        gpu.stats().buffers_allocated,
        allocated,
        "a pooled buffer was reused"
    );
}

pub async fn creation_ops_fill_arange_and_seeded_random_values() {
    let gpu = device().await;
    assert_eq!(read(&gpu.full(&[2, 2], 7.5).unwrap()).await, vec![7.5; 4]);
    close(
        &read(&gpu.arange(1.0, 2.0, 0.25).unwrap()).await,
        &[1.0, 1.25, 1.5, 1.75],
    );
    assert_eq!(gpu.arange(5.0, 1.0, 1.0).unwrap().shape(), &[0]);
    let u1 = read(&gpu.random_uniform(&[1000], 2.0, 3.0, 42).unwrap()).await;
    let u2 = read(&gpu.random_uniform(&[1000], 2.0, 3.0, 42).unwrap()).await;
    assert_eq!(u1, u2);
    assert!(u1.iter().all(|v| (2.0..3.0).contains(v)));
    let other = read(&gpu.random_uniform(&[1000], 2.0, 3.0, 43).unwrap()).await;
    assert_ne!(u1, other);
}

pub async fn binary_ops_broadcast_numpy_style_with_tensors_and_numbers() {
    let gpu = device().await;
    let a = gpu
        .tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], Some(&[2, 3]))
        .unwrap();
    let col = gpu.tensor(&[10.0, 20.0], Some(&[2, 1])).unwrap();
    assert_eq!(
        read(&a.add(&col).unwrap()).await,
        vec![11.0, 12.0, 13.0, 24.0, 25.0, 26.0]
    );
    assert_eq!(
        read(&a.greater(3.0).unwrap()).await,
        vec![0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    );
    close(
        &read(&gpu.tensor(&[-2.0, 4.0], None).unwrap().pow(3.0).unwrap()).await,
        &[-8.0, 64.0],
    );
    let cond = gpu
        .tensor_of(webfusion::Values::bool(&[true, false, true]), None)
        .unwrap();
    let zero = gpu.zeros(&[2, 1]).unwrap();
    assert_eq!(
        read(&gpu.where_(&cond, &a, &zero).unwrap()).await,
        vec![1.0, 0.0, 3.0, 4.0, 0.0, 6.0]
    );
    assert_eq!(
        read(&a.clamp(2.0, 4.0).unwrap()).await,
        vec![2.0, 2.0, 3.0, 4.0, 4.0, 4.0]
    );
}

pub async fn reductions_over_one_several_or_all_axes() {
    let gpu = device().await;
    let a = gpu
        .arange(0.0, 24.0, 1.0)
        .unwrap()
        .reshape(&[2, 3, 4])
        .unwrap();
    let s = a.sum(Some(&[1]), false).unwrap();
    assert_eq!(s.shape(), &[2, 4]);
    assert_eq!(
        read(&s).await,
        vec![12.0, 15.0, 18.0, 21.0, 48.0, 51.0, 54.0, 57.0]
    );
    let k = a.max(Some(&[0, 2]), true).unwrap();
    assert_eq!(k.shape(), &[1, 3, 1]);
    assert_eq!(read(&k).await, vec![15.0, 19.0, 23.0]);
    assert_eq!(read(&a.mean(None, false).unwrap()).await, vec![11.5]);
    assert_eq!(
        read(&a.min(Some(&[-1]), false).unwrap()).await,
        vec![0.0, 4.0, 8.0, 12.0, 16.0, 20.0]
    );
    let b = gpu
        .tensor(&[1.0, 5.0, 5.0, 0.0, -1.0, -3.0], Some(&[2, 3]))
        .unwrap();
    assert_eq!(
        read(&b.arg_max(1).unwrap()).await,
        vec![1.0, 0.0],
        "the first of equal maxima wins"
    );
}

/// A device folding reductions with subgroups (where it has them:
/// natively, lavapipe's 8 lanes here, NVIDIA's or Apple's 32 on a GPU) gives
/// what the shared-memory fold gives (`DeviceOptions::subgroups` off):
/// every fold, argMax and argMin with ties, an int32 sum, a softmax (the
/// fold's epilogue), on rows one workgroup folds and on rows split over two
/// launches, with NaN and infinities among the values. Both run the GPU's
/// kernels (`cpu_kernels` false), which fold each row across a workgroup.
pub async fn reductions_fold_to_the_same_values_with_and_without_subgroups() {
    let options = |subgroups| DeviceOptions {
        host_max_elements: 0,
        cpu_kernels: Some(false),
        subgroups,
        ..DeviceOptions::default()
    };
    let with = device_with(options(true)).await;
    let without = device_with(options(false)).await;
    for (rows, len) in [(3usize, 1usize), (5, 7), (4, 33), (2, 1000), (2, 9000)] {
        // Ties on purpose (101 distinct values), and in the last row a NaN
        // and both infinities: each device must carry them as the other does.
        let mut values: Vec<f32> = (0..rows * len)
            .map(|i| ((i * 7919) % 101) as f32 / 10.0 - 5.0)
            .collect();
        if len > 2 {
            let last = (rows - 1) * len;
            values[last] = f32::NAN;
            values[rows * len - 1] = f32::INFINITY;
            values[last + 1] = f32::NEG_INFINITY;
        }
        let mut results = Vec::new();
        for gpu in [&with, &without] {
            let x = gpu.tensor(&values, Some(&[rows, len])).unwrap();
            let ints = x.clamp(-5.0, 5.0).unwrap().cast(DType::Int32).unwrap();
            let folds = [
                x.sum(Some(&[1]), false).unwrap(),
                x.mean(Some(&[1]), false).unwrap(),
                x.slice(&[0, 0], &[rows as isize, len.min(7) as isize])
                    .unwrap()
                    .prod(Some(&[1]), false)
                    .unwrap(),
                x.max(Some(&[1]), false).unwrap(),
                x.min(Some(&[1]), false).unwrap(),
                x.log_sum_exp(Some(&[1]), false).unwrap(),
                x.arg_max(1).unwrap(),
                x.arg_min(1).unwrap(),
                ints.sum(Some(&[1]), false).unwrap(),
                x.softmax(1).unwrap(),
            ];
            let mut read_all = Vec::new();
            for f in &folds {
                read_all.push(read(f).await);
            }
            results.push(read_all);
        }
        let names = [
            "sum",
            "mean",
            "prod",
            "max",
            "min",
            "logSumExp",
            "argMax",
            "argMin",
            "int sum",
            "softmax",
        ];
        for (i, name) in names.iter().enumerate() {
            let (a, b) = (&results[0][i], &results[1][i]);
            assert_eq!(a.len(), b.len(), "{name} of {rows}x{len}");
            for (j, (p, q)) in a.iter().zip(b).enumerate() {
                let same = p.to_bits() == q.to_bits()
                    || (p.is_nan() && q.is_nan())
                    || (p - q).abs() <= 1e-5 * (1.0 + q.abs()) * len as f32;
                assert!(
                    same,
                    "{name} of {rows}x{len} at {j}: {p} with subgroups, {q} without"
                );
            }
        }
        // Where no rounding enters, the two are the same bits.
        for exact in [3, 4, 6, 7, 8] {
            let bits = |v: &Vec<f32>| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&results[0][exact]),
                bits(&results[1][exact]),
                "{} of {rows}x{len}",
                names[exact]
            );
        }
    }
    // Natively the device with them folds with them; the other never does.
    let x = with.ones(&[4, 100]).unwrap();
    let (_, profile) = with.profile(|| x.sum(Some(&[1]), false).unwrap());
    let shuffles = |p: &webfusion::Profile| {
        p.kernels
            .iter()
            .flat_map(|k| &k.wgsl)
            .any(|w| w.contains("subgroupShuffleXor"))
    };
    assert_eq!(shuffles(&profile), !cfg!(target_arch = "wasm32"));
    let y = without.ones(&[4, 100]).unwrap();
    let (_, profile) = without.profile(|| y.sum(Some(&[1]), false).unwrap());
    assert!(!shuffles(&profile));
}

pub async fn softmax_and_log_softmax_normalise_along_the_axis() {
    let gpu = device().await;
    let x = gpu
        .tensor(&[1.0, 2.0, 3.0, 1000.0, 1000.0, 1000.0], Some(&[2, 3]))
        .unwrap();
    let e = [1f32.exp(), 2f32.exp(), 3f32.exp()];
    let z: f32 = e.iter().sum();
    let third = 1.0 / 3.0;
    close(
        &read(&x.softmax(-1).unwrap()).await,
        &[e[0] / z, e[1] / z, e[2] / z, third, third, third],
    );
    let ls = read(&x.log_softmax(1).unwrap()).await;
    close(
        &ls[..3],
        &[
            1.0 - 3.0 - (e[0] / e[2] + e[1] / e[2] + 1.0).ln(),
            2.0 - 3.0 - (z / e[2]).ln(),
            -(z / e[2]).ln(),
        ],
    );
    close(&ls[3..], &[-(3f32.ln()); 3]);
}

pub async fn matmul_multiplies_2d_and_broadcast_batches() {
    let gpu = device().await;
    let a = gpu
        .tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], Some(&[2, 3]))
        .unwrap();
    let b = gpu
        .tensor(&[7.0, 8.0, 9.0, 10.0, 11.0, 12.0], Some(&[3, 2]))
        .unwrap();
    assert_eq!(
        read(&a.matmul(&b).unwrap()).await,
        vec![58.0, 64.0, 139.0, 154.0]
    );
    let batch = gpu.stack(&[&a, &a.mul(2.0).unwrap()], 0).unwrap();
    let c = batch.matmul(&b).unwrap();
    assert_eq!(c.shape(), &[2, 2, 2]);
    assert_eq!(
        read(&c).await,
        vec![58.0, 64.0, 139.0, 154.0, 116.0, 128.0, 278.0, 308.0]
    );
    // A transposed operand is read through its strides.
    let t = b
        .transpose(None)
        .unwrap()
        .matmul(&a.transpose(None).unwrap())
        .unwrap();
    assert_eq!(read(&t).await, vec![58.0, 139.0, 64.0, 154.0]);
}

pub async fn views_read_through_index_maps_and_copy_only_when_asked_to_reshape_strided_memory() {
    let gpu = device().await;
    let a = gpu.arange(0.0, 6.0, 1.0).unwrap().reshape(&[2, 3]).unwrap();
    let t = a.transpose(None).unwrap();
    assert_eq!(read(&t).await, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_eq!(
        read(&t.reshape(&[-1]).unwrap()).await,
        vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    );
    assert_eq!(
        read(&a.slice(&[0, 1], &[2, -1]).unwrap()).await,
        vec![1.0, 2.0, 4.0, 5.0]
    );
    assert_eq!(
        read(
            &a.slice(&[1, 0], &[1, 2])
                .unwrap()
                .add(&t.slice(&[0, 0], &[1, 2]).unwrap())
                .unwrap()
        )
        .await,
        vec![3.0, 7.0]
    );
    let b = gpu
        .tensor(&[1.0, 2.0], None)
        .unwrap()
        .broadcast_to(&[3, 2])
        .unwrap();
    assert_eq!(read(&b).await, vec![1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
    let e = a.expand_dims(1).unwrap();
    assert_eq!(e.shape(), &[2, 1, 3]);
    assert_eq!(e.squeeze(None).unwrap().shape(), &[2, 3]);
    assert_eq!(
        read(&e.flatten().unwrap()).await,
        vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    );
}

/// TF.js's short forms, which code ported from it uses: a `slice` whose
/// `begin` or `size` names only the leading dims takes the rest whole (it
/// was refused), and `squeeze([])` removes every dim of size 1 (it removed
/// none; both found by outside testing).
pub async fn a_slice_of_short_lists_and_a_squeeze_of_no_axes_read_as_in_tfjs() {
    let gpu = device().await;
    let a = gpu.arange(0.0, 6.0, 1.0).unwrap().reshape(&[2, 3]).unwrap();
    let rows = a.slice(&[1], &[]).unwrap();
    assert_eq!(rows.shape(), &[1, 3]);
    assert_eq!(read(&rows).await, vec![3.0, 4.0, 5.0]);
    let box_ = a.slice(&[0], &[1]).unwrap();
    assert_eq!(box_.shape(), &[1, 3]);
    assert_eq!(read(&box_).await, vec![0.0, 1.0, 2.0]);
    assert!(
        a.slice(&[0, 0, 0], &[1, 1, 1])
            .is_err_and(|e| e.to_string().contains("at most 2 entries"))
    );
    let e = a.reshape(&[2, 1, 3, 1]).unwrap();
    assert_eq!(e.squeeze(Some(&[])).unwrap().shape(), &[2, 3]);
    assert_eq!(e.squeeze(Some(&[-1])).unwrap().shape(), &[2, 1, 3]);
}

pub async fn cat_and_stack_join_tensors_along_an_axis() {
    let gpu = device().await;
    let a = gpu.tensor(&[1.0, 2.0, 3.0, 4.0], Some(&[2, 2])).unwrap();
    let b = gpu.tensor(&[5.0, 6.0], Some(&[2, 1])).unwrap();
    let c = gpu.cat(&[&a, &b], 1).unwrap();
    assert_eq!(c.shape(), &[2, 3]);
    assert_eq!(read(&c).await, vec![1.0, 2.0, 5.0, 3.0, 4.0, 6.0]);
    let s = gpu.stack(&[&a, &a], -1).unwrap();
    assert_eq!(s.shape(), &[2, 2, 2]);
    assert_eq!(read(&s).await, vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]);
}

pub async fn empty_tensors_and_scalars_compute_like_any_other() {
    let gpu = device().await;
    let empty = gpu.zeros(&[3, 0]).unwrap();
    assert_eq!(read(&empty.add(1.0).unwrap()).await, Vec::<f32>::new());
    assert_eq!(
        read(&empty.sum(Some(&[1]), false).unwrap()).await,
        vec![0.0; 3]
    );
    let scalar = gpu.tensor(&[2.5], Some(&[])).unwrap();
    assert_eq!(scalar.shape(), &[] as &[usize]);
    let v = gpu.tensor(&[1.0, 2.0], None).unwrap();
    assert_eq!(read(&v.mul(&scalar).unwrap()).await, vec![2.5, 5.0]);
    assert_eq!(read(&scalar.exp().unwrap().log().unwrap()).await, vec![2.5]);
}

pub async fn a_tensor_of_two_to_the_25_elements_is_computed_with_a_split_dispatch() {
    let gpu = device().await;
    let n = 1usize << 25;
    let x = gpu
        .arange(0.0, n as f32, 1.0)
        .unwrap()
        .mul(0.0)
        .unwrap()
        .add(1.5)
        .unwrap();
    let values = read(&x).await;
    // One launch of 2^17 workgroups, past the 65535 a dimension allows: its
    // grid is two-dimensional, and each workgroup finds its place from both.
    assert_eq!(
        gpu.stats().kernels_launched,
        1,
        "one kernel, split in its grid"
    );
    assert_eq!(values.len(), n);
    let wrong = values.iter().position(|&v| v != 1.5);
    assert_eq!(wrong, None, "the first element not written: {wrong:?}");
    assert_eq!(
        read(&x.sum(None, false).unwrap()).await,
        vec![1.5 * n as f32]
    );
}

pub async fn invalid_registrations_name_the_op_the_operands_and_queue_nothing() {
    let gpu = device().await;
    let a = gpu.zeros(&[2, 3]).unwrap();
    let b = gpu.zeros(&[4, 5]).unwrap();
    let registered = gpu.stats().ops_registered;
    let err = a.matmul(&b).err().unwrap();
    assert_eq!(
        err.to_string(),
        "matmul: inner dimensions differ: [2,3] x [4,5]"
    );
    assert!(a.sum(Some(&[2]), false).is_err());
    assert!(a.transpose(Some(&[0, 0])).is_err());
    assert!(a.reshape(&[4, -1]).is_err());
    assert!(a.slice(&[0, 2], &[1, 2]).is_err());
    assert!(gpu.cat(&[], 0).is_err());
    assert!(gpu.tensor(&[1.0, 2.0], Some(&[3])).is_err());
    assert!(a.squeeze(Some(&[0])).is_err());
    assert_eq!(gpu.stats().ops_registered, registered);
    // The op named is the one called, not the one it is made of: an int32
    // pad's fill value is refused as `pad`'s (it was `fill`'s; outside
    // testing).
    let ints = gpu
        .tensor_of(webfusion::Values::int32(&[1, 2]), None)
        .unwrap();
    let registered_ints = gpu.stats().ops_registered;
    let err = ints.pad(&[(1, 1)], 0.5).err().unwrap();
    assert!(
        err.to_string().starts_with("pad: 0.5 is not an int32"),
        "{err}"
    );
    assert_eq!(gpu.stats().ops_registered, registered_ints);
    assert_eq!(
        read(&a.add(1.0).unwrap()).await,
        vec![1.0; 6],
        "the device works afterwards"
    );
}

pub async fn ops_on_tensors_of_different_devices_are_refused_at_registration() {
    let (one, two) = (device().await, device().await);
    let a = one.ones(&[2]).unwrap();
    let b = two.ones(&[2]).unwrap();
    let err = a.add(&b).err().unwrap();
    assert!(
        err.to_string().contains(&one.label()) && err.to_string().contains(&two.label()),
        "{err}"
    );
    assert!(one.cat(&[&a, &b], 0).is_err());
}

pub async fn a_sum_of_ten_distinct_inputs_is_split_across_kernels_that_fit_the_binding_limit() {
    let gpu = kernels_only().await;
    let inputs: Vec<Tensor> = (0..10)
        .map(|i| {
            gpu.full(&[3], i as f32)
                .unwrap()
                .exp()
                .unwrap()
                .log()
                .unwrap()
        })
        .collect();
    gpu.sync().await.expect("no failure");
    let before = gpu.stats();
    let mut total = inputs[0].clone();
    for t in &inputs[1..] {
        total = total.add(t).unwrap();
    }
    close(&read(&total).await, &[45.0; 3]);
    let kernels = gpu.stats().kernels_launched - before.kernels_launched;
    assert!(
        kernels >= 2,
        "eleven buffers cannot bind in one kernel: {kernels}"
    );
}

/// On a GPU's choice of reduction and on a CPU's
/// (`DeviceOptions::cpu_kernels`): a CPU also gives each of the 300 row
/// sums a thread, a GPU a workgroup.
pub async fn reductions_over_leading_axes_run_one_thread_per_column_and_match_the_cpu() {
    for cpu in [false, true] {
        leading_axes_match_the_cpu(&kernels_shaped_for(cpu).await).await;
    }
}

async fn leading_axes_match_the_cpu(gpu: &Device) {
    let (rows, cols) = (300, 1024);
    let data: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 16.0)
        .collect();
    let x = gpu.tensor(&data, Some(&[rows, cols])).unwrap();
    let per_column = |f: &dyn Fn(&mut dyn Iterator<Item = f32>) -> f32| -> Vec<f32> {
        (0..cols)
            .map(|c| f(&mut (0..rows).map(|r| data[r * cols + c])))
            .collect()
    };
    let kernels = gpu.stats().kernels_launched;
    let sum = read(&x.sum(Some(&[0]), false).unwrap()).await;
    assert_eq!(gpu.stats().kernels_launched - kernels, 1);
    close(&sum, &per_column(&|c| c.sum()));
    close(
        &read(&x.mean(Some(&[0]), false).unwrap()).await,
        &per_column(&|c| c.sum::<f32>() / rows as f32),
    );
    close(
        &read(&x.max(Some(&[0]), false).unwrap()).await,
        &per_column(&|c| c.fold(f32::MIN, f32::max)),
    );
    let first_max = |c: &mut dyn Iterator<Item = f32>| {
        let column: Vec<f32> = c.collect();
        let max = column.iter().copied().fold(f32::MIN, f32::max);
        column.iter().position(|&v| v == max).unwrap_or(0) as f32
    };
    close(&read(&x.arg_max(0).unwrap()).await, &per_column(&first_max));
    // With a prologue, in the same kernel.
    let kernels = gpu.stats().kernels_launched;
    let exp_sum = x
        .mul(0.5)
        .unwrap()
        .exp()
        .unwrap()
        .sum(Some(&[0]), false)
        .unwrap();
    let exp_sum = read(&exp_sum).await;
    assert_eq!(gpu.stats().kernels_launched - kernels, 1);
    close(&exp_sum, &per_column(&|c| c.map(|v| (v * 0.5).exp()).sum()));
    // Two leading axes at once; the last axis of a transposed view.
    let cube = x.reshape(&[4, 75, 1024]).unwrap();
    close(
        &read(&cube.sum(Some(&[0, 1]), false).unwrap()).await,
        &per_column(&|c| c.sum()),
    );
    let rows_of_transpose = x.transpose(None).unwrap().sum(Some(&[1]), false).unwrap();
    close(&read(&rows_of_transpose).await, &per_column(&|c| c.sum()));
    // Along the rows: 300 outputs, each of 1024.
    let row_sums: Vec<f32> = (0..rows)
        .map(|r| data[r * cols..(r + 1) * cols].iter().sum())
        .collect();
    close(&read(&x.sum(Some(&[1]), false).unwrap()).await, &row_sums);
    let row_max: Vec<f32> = (0..rows)
        .map(|r| {
            data[r * cols..(r + 1) * cols]
                .iter()
                .copied()
                .fold(f32::MIN, f32::max)
        })
        .collect();
    close(&read(&x.max(Some(&[1]), false).unwrap()).await, &row_max);
}

pub async fn log_sum_exp_is_stable_for_large_values_and_long_rows() {
    let gpu = device().await;
    let big = gpu
        .tensor(&[1000.0, 1000.0, -1000.0, 0.0], Some(&[2, 2]))
        .unwrap();
    close(
        &read(&big.log_sum_exp(Some(&[-1]), false).unwrap()).await,
        &[1000.0 + 2f32.ln(), 0.0],
    );
    // Longer than one workgroup's chunk: partial results are combined.
    let n = 40_000;
    let long = gpu.zeros(&[2, n]).unwrap();
    let lse = read(&long.log_sum_exp(Some(&[1]), false).unwrap()).await;
    close(&lse, &[(n as f32).ln(); 2]);
    let softmax = read(&long.softmax(-1).unwrap().sum(Some(&[1]), false).unwrap()).await;
    assert!(
        softmax.iter().all(|s| (s - 1.0).abs() < 1e-3),
        "{softmax:?}"
    );
}

pub async fn softmax_runs_in_one_kernel_along_rows_and_log_softmax_in_two() {
    let gpu = device().await;
    let x = gpu.random_uniform(&[64, 128], -3.0, 3.0, 9).unwrap();
    gpu.sync().await.expect("no failure");
    let kernels = |before: u64| gpu.stats().kernels_launched - before;
    let before = gpu.stats().kernels_launched;
    let y = x.softmax(-1).unwrap();
    read(&y).await;
    assert_eq!(kernels(before), 1, "the row's logSumExp, then exp(x - it)");
    let before = gpu.stats().kernels_launched;
    let y = x.log_softmax(-1).unwrap();
    read(&y).await;
    assert_eq!(
        kernels(before),
        2,
        "x - max(x) with the max, then its logSumExp with the subtraction"
    );
    let before = gpu.stats().kernels_launched;
    let y = x.softmax(0).unwrap();
    read(&y).await;
    assert_eq!(
        kernels(before),
        3,
        "a column's reductions anchor nothing: its max, the logSumExp of x - max, then \
         exp of their difference (exp(x - logSumExp(x)) in two would lose float32's precision)"
    );

    // Many rows (a CPU adapter then gives each row one thread), checked
    // against the CPU.
    let (rows, cols) = (512, 40);
    let data: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 29 % 71) as f32 - 35.0) / 7.0)
        .collect();
    let x = gpu.tensor(&data, Some(&[rows, cols])).unwrap();
    let y = x.softmax(-1).unwrap();
    let want: Vec<f32> = data
        .chunks(cols)
        .flat_map(|row| {
            let max = row.iter().copied().fold(f32::MIN, f32::max);
            let sum: f32 = row.iter().map(|v| (v - max).exp()).sum();
            row.iter().map(move |v| (v - max).exp() / sum)
        })
        .collect();
    close(&read(&y).await, &want);
}

pub async fn matmul_reads_aligned_operands_four_floats_at_a_time_and_any_others_one_by_one() {
    let gpu = device().await;
    let values = |n: usize, seed: usize| -> Vec<f32> {
        (0..n)
            .map(|i| (((i + seed) * 7 % 13) as f32 - 6.0) / 4.0)
            .collect()
    };
    let product = |a: &[f32], b: &[f32], (m, k, n): (usize, usize, usize)| -> Vec<f32> {
        (0..m * n)
            .map(|e| (0..k).map(|p| a[e / n * k + p] * b[p * n + e % n]).sum())
            .collect()
    };
    // Aligned rows (k and n multiples of four), ragged tile edges.
    let (a, b) = (values(70 * 36, 1), values(36 * 68, 2));
    let got = gpu
        .tensor(&a, Some(&[70, 36]))
        .unwrap()
        .matmul(&gpu.tensor(&b, Some(&[36, 68])).unwrap())
        .unwrap();
    close(&read(&got).await, &product(&a, &b, (70, 36, 68)));
    // Slices of one matrix: at an aligned offset (vector loads) and at an
    // unaligned one (one by one), against the same right operand.
    let full = values(5 * 40, 3);
    let b = values(32 * 8, 4);
    let whole = gpu.tensor(&full, Some(&[5, 40])).unwrap();
    let right = gpu.tensor(&b, Some(&[32, 8])).unwrap();
    for start in [4, 1] {
        let a: Vec<f32> = (0..5 * 32)
            .map(|e| full[e / 32 * 40 + start + e % 32])
            .collect();
        let sliced = whole.slice(&[0, start], &[5, 32]).unwrap();
        let got = read(&sliced.matmul(&right).unwrap()).await;
        close(&got, &product(&a, &b, (5, 32, 8)));
    }
}

pub async fn a_large_matmul_with_ragged_edges_matches_the_cpu() {
    let gpu = device().await;
    let (m, k, n) = (2050, 20, 2049);
    let a: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 4.0)
        .collect();
    let b: Vec<f32> = (0..k * n)
        .map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0)
        .collect();
    let product = gpu
        .tensor(&a, Some(&[m, k]))
        .unwrap()
        .matmul(&gpu.tensor(&b, Some(&[k, n])).unwrap())
        .unwrap();
    let got = read(&product).await;
    for (row, col) in [(0, 0), (2049, 2048), (517, 3), (128, 127), (2000, 1000)] {
        let want: f32 = (0..k).map(|p| a[row * k + p] * b[p * n + col]).sum();
        assert!(
            (got[row * n + col] - want).abs() < 1e-4,
            "({row},{col}): {} vs {want}",
            got[row * n + col]
        );
    }
}

/// The products large enough for 8x8 outputs a thread (a GPU's 64x128
/// tiles of 128 threads, its depths unrolled; a CPU's 64x64 of 64, its
/// outputs written in a loop), with operands loaded four at a time, one by
/// one, and transposed, and an epilogue: every element against the CPU,
/// ragged edges included.
pub async fn a_large_aligned_matmul_and_its_transposed_form_match_the_cpu_everywhere() {
    // Rows and columns past a whole number of tiles; k a multiple of four
    // over several slices, and past a whole number of them.
    let (m, k, n) = (2051, 36, 2056);
    let a: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 4.0)
        .collect();
    let b: Vec<f32> = (0..k * n)
        .map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0)
        .collect();
    let bias: Vec<f32> = (0..n).map(|i| (i % 9) as f32 - 4.0).collect();
    let want: Vec<f32> = (0..m * n)
        .map(|e| {
            let (row, col) = (e / n, e % n);
            let dot: f32 = (0..k).map(|p| a[row * k + p] * b[p * n + col]).sum();
            (dot + bias[col]).max(0.0)
        })
        .collect();
    // The right operand stored transposed: read column by column.
    let b_t: Vec<f32> = (0..n * k).map(|e| b[(e % k) * n + e / k]).collect();
    for cpu in [false, true] {
        let gpu = kernels_shaped_for(cpu).await;
        let left = gpu.tensor(&a, Some(&[m, k])).unwrap();
        let right = gpu.tensor(&b, Some(&[k, n])).unwrap();
        let bias = gpu.tensor(&bias, Some(&[n])).unwrap();
        let right_t = gpu
            .tensor(&b_t, Some(&[n, k]))
            .unwrap()
            .transpose(None)
            .unwrap();
        large_products_match(&want, [&left, &right, &right_t, &bias], n, cpu).await;
    }
}

async fn large_products_match(
    want: &[f32],
    [left, right, right_t, bias]: [&Tensor; 4],
    n: usize,
    cpu: bool,
) {
    for (what, right) in [("as stored", right), ("transposed", right_t)] {
        let got = read(
            &left
                .matmul(right)
                .unwrap()
                .add(bias)
                .unwrap()
                .relu()
                .unwrap(),
        )
        .await;
        assert_eq!(got.len(), want.len());
        for (e, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "{what} (cpu kernels: {cpu}): ({}, {}): {g} vs {w}",
                e / n,
                e % n
            );
        }
    }
}

/// A batch of small products whose tiles together are enough for a GPU's
/// wide 64x128 tiles (32 batches of 2x2 tiles), the left operand broadcast
/// over the batch and the right one transposed per batch, with an
/// epilogue: every element against the CPU, ragged edges included.
pub async fn a_batch_of_products_on_the_wide_tiles_matches_the_cpu_everywhere() {
    let gpu = kernels_shaped_for(false).await;
    let (batches, m, k, n) = (32, 70, 21, 130);
    let a: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 4.0)
        .collect();
    // Stored [batch, n, k]: each batch's right operand transposed.
    let b_t: Vec<f32> = (0..batches * n * k)
        .map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0)
        .collect();
    let left = gpu.tensor(&a, Some(&[m, k])).unwrap();
    let right = gpu
        .tensor(&b_t, Some(&[batches, n, k]))
        .unwrap()
        .transpose(Some(&[0, 2, 1]))
        .unwrap();
    let got = read(&left.matmul(&right).unwrap().mul(2.0).unwrap()).await;
    assert_eq!(got.len(), batches * m * n);
    for (e, g) in got.iter().enumerate() {
        let (batch, row, col) = (e / (m * n), e / n % m, e % n);
        let dot: f32 = (0..k)
            .map(|p| a[row * k + p] * b_t[(batch * n + col) * k + p])
            .sum();
        let want = 2.0 * dot;
        assert!(
            (g - want).abs() <= 1e-4 * (1.0 + want.abs()),
            "({batch}, {row}, {col}): {g} vs {want}"
        );
    }
}

/// Every product kernel: a GPU's (64x64 tiles at 4x4, and the wide 64x128
/// tiles at 8x8 that 128 tiles reach) and a CPU's (32x32 and narrower
/// tiles of 64 threads, and 64x64 at 8x8 from 2^26 multiply-adds, each in
/// 8 or 16 deep slices), each run here through `DeviceOptions::cpu_kernels`,
/// with each operand stored as is or transposed, every dim a multiple of
/// four but one product's: a stored operand is then loaded four at a time
/// along its rows (on 64-wide tiles), a transposed one one by one (in the
/// 8x8 kernel down its columns). Shapes past whole tiles (ragged edges,
/// each fetch or only an edge's checked) and of whole tiles and slices
/// (nothing checked), and of 2048 rows, where a GPU's product copies a
/// transposed right operand first. Every element against the CPU, through
/// an epilogue.
pub async fn products_of_operands_stored_either_way_match_the_cpu_on_every_kernel() {
    for cpu in [false, true] {
        products_match_the_cpu(&kernels_shaped_for(cpu).await, cpu).await;
    }
    // A GPU's product of 2048 rows copies a transposed right operand first:
    // two kernels. A stored one, or one broadcast along a dim (its copy
    // would outgrow the memory it reads), is read in place: one.
    let gpu = kernels_shaped_for(false).await;
    let a = gpu
        .tensor(&vec![0.5; 2050 * 20], Some(&[2050, 20]))
        .unwrap();
    let stored = gpu.tensor(&vec![0.25; 20 * 36], Some(&[20, 36])).unwrap();
    let transposed = gpu
        .tensor(&vec![0.25; 36 * 20], Some(&[36, 20]))
        .unwrap()
        .transpose(None)
        .unwrap();
    let broadcast = gpu
        .tensor(&[0.25; 20], Some(&[20, 1]))
        .unwrap()
        .broadcast_to(&[20, 36])
        .unwrap();
    for (b, kernels) in [(&transposed, 2), (&stored, 1), (&broadcast, 1)] {
        let before = gpu.stats().kernels_launched;
        let product = read(&a.matmul(b).unwrap()).await;
        assert!(product.iter().all(|&v| v == 2.5), "20 * 0.5 * 0.25");
        assert_eq!(
            gpu.stats().kernels_launched - before,
            kernels,
            "{:?}",
            b.shape()
        );
    }
}

async fn products_match_the_cpu(gpu: &Device, cpu: bool) {
    let shapes = [
        (1, 100, 40, 132),
        (16, 132, 40, 260),
        (1, 128, 48, 192),
        (16, 128, 32, 512),
        (2, 37, 21, 13),
        // 2^26 multiply-adds and more: a CPU's 8x8 kernel, ragged and whole.
        (1, 520, 260, 500),
        (1, 512, 256, 512),
        // 2048 rows and more: a GPU's product copies a transposed right
        // operand row-major first (`codegen::copies_right_operand`).
        (2, 2050, 20, 36),
    ];
    for (batches, m, k, n) in shapes {
        let a: Vec<f32> = (0..batches * m * k)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) / 4.0)
            .collect();
        let b: Vec<f32> = (0..batches * k * n)
            .map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0)
            .collect();
        // `values` ([batch, rows, cols]) as a tensor stored as is, or
        // stored transposed and transposed back (a column-major view).
        let operand = |values: &[f32], rows: usize, cols: usize, transposed: bool| {
            if !transposed {
                return gpu.tensor(values, Some(&[batches, rows, cols])).unwrap();
            }
            let stored: Vec<f32> = (0..values.len())
                .map(|e| {
                    let (batch, col, row) = (e / (rows * cols), e / rows % cols, e % rows);
                    values[(batch * rows + row) * cols + col]
                })
                .collect();
            gpu.tensor(&stored, Some(&[batches, cols, rows]))
                .unwrap()
                .transpose(Some(&[0, 2, 1]))
                .unwrap()
        };
        for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
            let left = operand(&a, m, k, a_t);
            let right = operand(&b, k, n, b_t);
            let got = read(&left.matmul(&right).unwrap().sub(1.0).unwrap()).await;
            assert_eq!(got.len(), batches * m * n);
            for (e, g) in got.iter().enumerate() {
                let (batch, row, col) = (e / (m * n), e / n % m, e % n);
                let dot: f32 = (0..k)
                    .map(|p| a[(batch * m + row) * k + p] * b[(batch * k + p) * n + col])
                    .sum();
                let want = dot - 1.0;
                assert!(
                    (g - want).abs() <= 1e-4 * (1.0 + want.abs()),
                    "{batches}x{m}x{k}x{n} (cpu kernels: {cpu}), left transposed {a_t}, \
                     right {b_t}: ({batch}, {row}, {col}): {g} vs {want}"
                );
            }
        }
    }
}

/// A number in a message reads as JS writes it, natively as in the
/// browser (where JS itself writes it): an f32 with the fewest digits that
/// give it back, the exponent form from 1e21 and below 1e-6, signed.
pub async fn messages_write_numbers_as_javascript_does_in_both_worlds() {
    let gpu = device().await;
    let reason = |r: Result<Tensor, webfusion::RegistrationError>| match r {
        Ok(_) => panic!("a bad call was accepted"),
        Err(e) => e.reason,
    };
    let cases = [
        (
            reason(gpu.random_uniform(&[2], 0.1, -0.1, 0)),
            "needs finite min <= max, got 0.1, -0.1",
        ),
        (
            reason(gpu.random_uniform(&[2], 1e30, 3.5e-7, 0)),
            "needs finite min <= max, got 1e+30, 3.5e-7",
        ),
        (
            reason(gpu.random_normal(&[2], f32::INFINITY, 1.0, 0)),
            "needs a finite mean and std >= 0, got Infinity, 1",
        ),
        (
            reason(gpu.range(0.5, 4.0, 1.0, DType::Int32)),
            "an int32 range takes whole int32 bounds and step, got 0.5, 4, 1",
        ),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
}

pub async fn an_mlp_layer_is_one_matmul_kernel_with_its_bias_and_activation_as_epilogue() {
    let gpu = kernels_only().await;
    let x = gpu.random_uniform(&[32, 24], -1.0, 1.0, 1).unwrap();
    let w = gpu.random_uniform(&[24, 16], -1.0, 1.0, 2).unwrap();
    let b = gpu.random_uniform(&[16], -1.0, 1.0, 3).unwrap();
    gpu.sync().await.expect("no failure");
    let before = gpu.stats();
    let h = x.matmul(&w).unwrap().add(&b).unwrap().relu().unwrap();
    let values = read(&h).await;
    let after = gpu.stats();
    assert_eq!(after.kernels_launched - before.kernels_launched, 1);
    assert_eq!(
        after.buffers_allocated - before.buffers_allocated,
        1,
        "the product itself is never written"
    );
    let (xs, ws, bs) = (read(&x).await, read(&w).await, read(&b).await);
    for (r, c) in [(0, 0), (31, 15), (7, 9)] {
        let z: f32 = (0..24)
            .map(|k| xs[r * 24 + k] * ws[k * 16 + c])
            .sum::<f32>()
            + bs[c];
        close(&[values[r * 16 + c]], &[z.max(0.0)]);
    }
}

pub async fn a_transposed_matmul_operand_is_read_in_place_and_allocates_nothing() {
    let gpu = kernels_only().await;
    let a = gpu.random_uniform(&[24, 32], -1.0, 1.0, 4).unwrap();
    let b = gpu.random_uniform(&[24, 16], -1.0, 1.0, 5).unwrap();
    gpu.sync().await.expect("no failure");
    let before = gpu.stats();
    let product = a.transpose(None).unwrap().matmul(&b).unwrap();
    let values = read(&product).await;
    let after = gpu.stats();
    assert_eq!(after.kernels_launched - before.kernels_launched, 1);
    assert_eq!(
        after.buffers_allocated - before.buffers_allocated,
        1,
        "only the product's buffer"
    );
    let (av, bv) = (read(&a).await, read(&b).await);
    let want: f32 = (0..24).map(|k| av[k * 32 + 5] * bv[k * 16 + 7]).sum();
    close(&[values[5 * 16 + 7]], &[want]);
}

pub async fn a_reduction_of_an_elementwise_chain_is_one_kernel() {
    let gpu = kernels_only().await;
    let x = gpu
        .tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], Some(&[2, 3]))
        .unwrap();
    let m = gpu.tensor(&[1.0, 4.0], Some(&[2, 1])).unwrap();
    gpu.sync().await.expect("no failure");
    let before = gpu.stats();
    let s = x
        .sub(&m)
        .unwrap()
        .exp()
        .unwrap()
        .sum(Some(&[1]), false)
        .unwrap();
    let values = read(&s).await;
    let after = gpu.stats();
    assert_eq!(after.kernels_launched - before.kernels_launched, 1);
    assert_eq!(
        after.buffers_allocated - before.buffers_allocated,
        1,
        "only the sums are written"
    );
    let e = |v: f32| v.exp();
    close(
        &values,
        &[e(0.0) + e(1.0) + e(2.0), e(0.0) + e(1.0) + e(2.0)],
    );
    // Held intermediates are written, so the chain runs as its own kernel.
    let t = x.mul(2.0).unwrap();
    let total = t.sum(None, false).unwrap();
    assert_eq!(read(&total).await, vec![42.0]);
    assert_eq!(read(&t).await, vec![2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
    // Long rows: the prologue runs in the first of two launches.
    let long = gpu
        .ones(&[3, 20_000])
        .unwrap()
        .mul(0.5)
        .unwrap()
        .arg_max(1)
        .unwrap();
    assert_eq!(read(&long).await, vec![0.0; 3]);
    let mean = gpu
        .arange(0.0, 40_000.0, 1.0)
        .unwrap()
        .mul(2.0)
        .unwrap()
        .mean(None, false)
        .unwrap();
    close(&read(&mean).await, &[39_999.0]);
}

pub async fn a_repeated_loop_creates_no_gpu_buffer_after_its_first_iteration_uniforms_and_staging_included()
 {
    let gpu = device().await;
    let x = gpu.random_uniform(&[64, 32], -1.0, 1.0, 1).unwrap();
    let w = gpu.random_normal(&[32, 16], 0.0, 0.1, 2).unwrap();
    let mut created = Vec::new();
    for step in 0..5 {
        // Kernels of every kind: a fused chain, a matmul with an epilogue, a
        // split reduction, a softmax; reads of a result and of a view.
        let h = x
            .matmul(&w)
            .unwrap()
            .add(step as f32)
            .unwrap()
            .tanh()
            .unwrap();
        let p = h.softmax(-1).unwrap();
        let wide = x.broadcast_to(&[300, 64, 32]).unwrap().mul(0.5).unwrap();
        let total = wide.sum(None, false).unwrap();
        read(&p).await;
        read(&total).await;
        read(&h.transpose(None).unwrap()).await;
        created.push(gpu.stats().gpu_buffers_created);
    }
    assert!(created[0] > 0);
    assert!(
        created.iter().all(|&c| c == created[0]),
        "GPU buffers created after each iteration: {created:?}"
    );
}

pub async fn a_profile_lists_each_kernel_with_its_fused_ops_tensors_and_wgsl() {
    let gpu = device().await;
    let x = gpu.tensor(&[1.0, -2.0, 3.0, 4.0], Some(&[2, 2])).unwrap();
    let w = gpu.tensor(&[0.5, 1.0, -1.0, 2.0], Some(&[2, 2])).unwrap();
    let b = gpu.tensor(&[0.25, -0.25], None).unwrap();
    gpu.sync().await.unwrap();
    let (layer, profile) = gpu.profile(|| x.matmul(&w).unwrap().add(&b).unwrap().relu().unwrap());
    assert_eq!(profile.kernels.len(), 1, "{profile:?}");
    let kernel = &profile.kernels[0];
    assert_eq!(kernel.ops, vec!["matmul", "add", "relu"]);
    let ids: Vec<_> = kernel.inputs.iter().map(|(t, _)| *t).collect();
    assert_eq!(ids, vec![x.id(), w.id(), b.id()]);
    assert_eq!(kernel.outputs, vec![(layer.id(), vec![2, 2])]);
    assert_eq!(kernel.wgsl.len(), 1);
    assert!(kernel.wgsl[0].contains("fn main"), "{}", kernel.wgsl[0]);
    assert!(profile.new_bytes >= 16, "{profile:?}");
    assert!(
        profile.peak_bytes >= gpu.stats().bytes_in_use,
        "{profile:?}"
    );
    assert_eq!(read(&layer).await, vec![2.75, 0.0, 0.0, 10.75]);
    // Nothing queued, nothing launched.
    let ((), empty) = gpu.profile(|| ());
    assert!(empty.kernels.is_empty());
}

pub async fn softmax_of_large_inputs_is_exact_to_float32_along_every_axis() {
    // ONNX's test_softmax_large_number: rows near 0 and near 10^4, whose
    // logSumExp has an ulp of 10^-3 as one float.
    let gpu = kernels_only().await;
    let rows: [[f32; 4]; 2] = [[0.0, 1.0, 2.0, 3.0], [10000.0, 10001.0, 10002.0, 10003.0]];
    let want: Vec<f32> = rows
        .iter()
        .flat_map(|row| {
            let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let sum: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
            row.iter()
                .map(move |&v| ((v as f64 - m).exp() / sum) as f32)
                .collect::<Vec<_>>()
        })
        .collect();
    let close = |got: &[f32], what: &str| {
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-6 + 1e-5 * w.abs(),
                "{what}: got {got:?}, want {want:?}"
            );
        }
    };
    let flat: Vec<f32> = rows.iter().flatten().copied().collect();
    let x = gpu.tensor(&flat, Some(&[2, 4])).unwrap();
    close(
        &read(&x.softmax(-1).unwrap()).await,
        "along rows, one kernel",
    );
    // Along the first axis of the transpose: the same values, by columns.
    let columns = x.transpose(None).unwrap().softmax(0).unwrap();
    let back = columns.transpose(None).unwrap();
    close(&read(&back).await, "along columns");
    // Rows longer than one workgroup reduces (8192): no epilogue there.
    let n = 10_000;
    let mut long = vec![-1.0e4f32; 2 * n];
    for (r, row) in rows.iter().enumerate() {
        long[r * n..r * n + 4].copy_from_slice(row);
    }
    let long = gpu
        .tensor(&long, Some(&[2, n]))
        .unwrap()
        .softmax(-1)
        .unwrap();
    let got = read(&long).await;
    let heads: Vec<f32> = (0..2)
        .flat_map(|r| got[r * n..r * n + 4].to_vec())
        .collect();
    // The padding is exp(-2 * 10^4) from the row's max: nothing.
    close(&heads, "along rows longer than a workgroup reduces");
}

pub async fn matmul_reads_transposed_operands_in_place_with_their_gradients() {
    let gpu = kernels_only().await;
    // a [k=24, m=8] and b [n=16, k=24], each read transposed: a^T @ b^T.
    let a = gpu.random_uniform(&[24, 8], -1.0, 1.0, 14).unwrap();
    let b = gpu.random_uniform(&[16, 24], -1.0, 1.0, 15).unwrap();
    gpu.sync().await.expect("no failure");
    let before = gpu.stats();
    let product = a.matmul_transposed(&b, true, true).unwrap();
    assert_eq!(product.shape(), &[8, 16]);
    let values = read(&product).await;
    let after = gpu.stats();
    assert_eq!(after.kernels_launched - before.kernels_launched, 1);
    assert_eq!(
        after.buffers_allocated - before.buffers_allocated,
        1,
        "only the product's buffer: neither operand is copied"
    );
    let (av, bv) = (read(&a).await, read(&b).await);
    let want: Vec<f32> = (0..8 * 16)
        .map(|i| {
            (0..24)
                .map(|k| av[k * 8 + i / 16] * bv[(i % 16) * 24 + k])
                .sum()
        })
        .collect();
    close_within(&values, &want, 1e-5);
    // One flag at a time, batched, and matmul(b) itself.
    let batched = gpu.random_uniform(&[3, 24, 8], -1.0, 1.0, 16).unwrap();
    let t = batched.matmul_transposed(&a, true, false).unwrap();
    assert_eq!(t.shape(), &[3, 8, 8]);
    let plain = batched
        .transpose(Some(&[0, 2, 1]))
        .unwrap()
        .matmul(&a)
        .unwrap();
    close_within(&read(&t).await, &read(&plain).await, 1e-6);
    // d/da sum(a^T @ c) for c [24, 5]: each a[k][m] gets sum_n c[k][n].
    let c = gpu.random_uniform(&[24, 5], -1.0, 1.0, 17).unwrap();
    let grad = gpu
        .grad(
            |x| x.matmul_transposed(&c, true, false)?.sum(None, false),
            &a,
            None,
        )
        .unwrap();
    let cv = read(&c).await;
    let want: Vec<f32> = (0..24 * 8)
        .map(|i| (0..5).map(|n| cv[(i / 8) * 5 + n]).sum())
        .collect();
    close_within(&read(&grad).await, &want, 1e-5);
    // Refused at once, naming the shapes as multiplied, queuing nothing.
    let ops = gpu.stats().ops_registered;
    let Err(wrong) = a.matmul_transposed(&b, false, false) else {
        panic!("inner dims that differ are refused")
    };
    assert!(
        wrong
            .to_string()
            .contains("inner dimensions differ: [24,8] x [16,24]"),
        "{wrong}"
    );
    let flat = gpu.tensor(&[1.0, 2.0], None).unwrap();
    let Err(rank) = flat.matmul_transposed(&a, true, false) else {
        panic!("a 1-D operand is refused")
    };
    assert!(rank.to_string().contains("rank >= 2"), "{rank}");
    assert_eq!(
        gpu.stats().ops_registered,
        ops + 1,
        "only the tensor() above"
    );
}

pub async fn split_cuts_an_axis_into_views_by_count_or_sizes_and_refuses_what_does_not_fit() {
    use webfusion::Split;
    let gpu = kernels_only().await;
    let values: Vec<f32> = (0..24).map(|v| v as f32).collect();
    let x = gpu.tensor(&values, Some(&[2, 12])).unwrap();
    gpu.sync().await.expect("no failure");
    let before = gpu.stats();
    let thirds = x.split(&Split::Count(3), 1).unwrap();
    let rows = x.split(&Split::Count(2), 0).unwrap();
    gpu.sync().await.expect("no failure");
    let after = gpu.stats();
    assert_eq!(
        (after.kernels_launched, after.buffers_allocated),
        (before.kernels_launched, before.buffers_allocated),
        "the pieces are views of x: no kernel, no buffer"
    );
    let shapes: Vec<&[usize]> = thirds.iter().map(Tensor::shape).collect();
    assert_eq!(shapes, vec![&[2, 4][..]; 3]);
    assert_eq!(
        read(&thirds[1]).await,
        vec![4.0, 5.0, 6.0, 7.0, 16.0, 17.0, 18.0, 19.0]
    );
    let sized = x.split(&Split::Sizes(vec![2, -1, 3]), -1).unwrap();
    let shapes: Vec<&[usize]> = sized.iter().map(Tensor::shape).collect();
    assert_eq!(shapes, vec![&[2, 2][..], &[2, 7], &[2, 3]]);
    assert_eq!(
        read(&sized[2]).await,
        vec![9.0, 10.0, 11.0, 21.0, 22.0, 23.0]
    );
    assert_eq!(read(&rows[1]).await, values[12..].to_vec());
    // The gradient of a piece is its place in the whole.
    let grad = gpu
        .grad(
            |t| t.split(&Split::Sizes(vec![5, 7]), 1)?[1].sum(None, false),
            &x,
            None,
        )
        .unwrap();
    let want: Vec<f32> = (0..24)
        .map(|i| if i % 12 >= 5 { 1.0 } else { 0.0 })
        .collect();
    assert_eq!(read(&grad).await, want);
    // Refused at once, queuing nothing.
    let ops = gpu.stats().ops_registered;
    for (parts, axis, says) in [
        (
            Split::Count(5),
            1,
            "5 pieces do not divide an axis of size 12",
        ),
        (Split::Count(0), 1, "at least 1"),
        (
            Split::Sizes(vec![5, 5]),
            1,
            "do not add up to the axis' size 12",
        ),
        (Split::Sizes(vec![-1, -1]), 1, "at most one -1"),
        (Split::Sizes(vec![13, -1]), 1, "do not add up"),
        (Split::Sizes(vec![-2, 14]), 1, "non-negative"),
        (Split::Count(2), 2, "axis 2 is out of range for rank 2"),
    ] {
        let Err(error) = x.split(&parts, axis) else {
            panic!("{parts:?} along {axis} is refused")
        };
        assert!(error.to_string().contains(says), "{parts:?}: {error}");
    }
    assert_eq!(gpu.stats().ops_registered, ops);
    // An empty axis takes any count, as in TF.js (its pieces empty), up to
    // 2^16 pieces: 2^31 of them panicked in wasm (found by outside testing's
    // sixth round); a count past it is refused.
    let empty = gpu.zeros(&[2, 0]).unwrap();
    let pieces = empty.split(&Split::Count(3), 1).unwrap();
    assert_eq!(
        pieces.iter().map(Tensor::shape).collect::<Vec<_>>(),
        vec![&[2, 0][..]; 3]
    );
    assert_eq!(
        empty.split(&Split::Count(1 << 16), 1).unwrap().len(),
        1 << 16
    );
    for many in [(1 << 16) + 1, 1 << 31] {
        let Err(error) = empty.split(&Split::Count(many), 1) else {
            panic!("{many} pieces are refused")
        };
        assert!(error.to_string().contains("at most 65536"), "{error}");
    }
}

pub async fn pad_and_tile_match_the_cpu_pass_their_gradients_and_refuse_what_does_not_fit() {
    let gpu = kernels_only().await;
    let values: Vec<f32> = (1..=6).map(|v| v as f32).collect();
    let x = gpu.tensor(&values, Some(&[2, 3])).unwrap();
    // pad: one row above, two columns after, of -1.
    let padded = x.pad(&[(1, 0), (0, 2)], -1.0).unwrap();
    assert_eq!(padded.shape(), &[3, 5]);
    #[rustfmt::skip]
    let want = vec![
        -1.0, -1.0, -1.0, -1.0, -1.0,
        1.0, 2.0, 3.0, -1.0, -1.0,
        4.0, 5.0, 6.0, -1.0, -1.0,
    ];
    assert_eq!(read(&padded).await, want);
    assert_eq!(read(&x.pad(&[(0, 0), (0, 0)], 9.0).unwrap()).await, values);
    // tile: twice down, three times across, and a rep of 0 empties a dim.
    let tiled = x.tile(&[2, 3]).unwrap();
    assert_eq!(tiled.shape(), &[4, 9]);
    let got = read(&tiled).await;
    for r in 0..4 {
        for c in 0..9 {
            assert_eq!(got[r * 9 + c], values[(r % 2) * 3 + c % 3], "at [{r}, {c}]");
        }
    }
    let none = x.tile(&[0, 2]).unwrap();
    assert_eq!(none.shape(), &[0, 6]);
    assert_eq!(read(&none).await, Vec::<f32>::new());
    // Gradients: a padded element's is its own, a tiled one's the number
    // of its copies.
    let pad_grad = gpu
        .grad(
            |t| t.pad(&[(2, 1), (1, 1)], 0.0)?.mul(3.0)?.sum(None, false),
            &x,
            None,
        )
        .unwrap();
    assert_eq!(read(&pad_grad).await, vec![3.0; 6]);
    let tile_grad = gpu
        .grad(|t| t.tile(&[2, 3])?.sum(None, false), &x, None)
        .unwrap();
    assert_eq!(read(&tile_grad).await, vec![6.0; 6]);
    // Refused at once, queuing nothing.
    let ops = gpu.stats().ops_registered;
    let refused = [
        (
            x.pad(&[(1, 1)], 0.0).err(),
            "paddings has 1 pairs for [2,3]",
        ),
        (x.pad(&[(0, 0), (usize::MAX, 1)], 0.0).err(), "overflow"),
        (x.tile(&[2]).err(), "reps [2] has 1 entries for [2,3]"),
        (x.tile(&[usize::MAX, 2]).err(), "overflow"),
    ];
    for (error, says) in refused {
        let error = error.expect("refused");
        assert!(error.to_string().contains(says), "{error}");
    }
    assert_eq!(gpu.stats().ops_registered, ops);
    // A shape that can be named but not held registers, and fails where
    // every such tensor fails: as an allocation, on the tensors that need it.
    let huge = x.pad(&[(0, 0), (1 << 28, 0)], 0.0).unwrap();
    let error = read_err(&huge).await;
    assert_eq!(
        error.first().unwrap().root.kind,
        FailureKind::Allocation,
        "{error}"
    );
    assert_eq!(read(&x).await, values);
}

pub async fn band_part_keeps_the_band_of_each_matrix_with_its_gradient() {
    let gpu = kernels_only().await;
    let values: Vec<f32> = (1..=24).map(|v| v as f32).collect();
    let x = gpu.tensor(&values, Some(&[2, 3, 4])).unwrap();
    gpu.sync().await.expect("no failure");
    let kept = |lower: isize, upper: isize, i: usize, j: usize| {
        (lower < 0 || i as isize - j as isize <= lower)
            && (upper < 0 || j as isize - i as isize <= upper)
    };
    // Small: on a device that runs small work on the host too.
    let host = device().await;
    let on_host = host.tensor(&values, Some(&[2, 3, 4])).unwrap();
    for (lower, upper) in [(-1, 0), (0, -1), (1, 2), (0, 0), (-1, -1), (5, 5)] {
        let got = read(&x.band_part(lower, upper).unwrap()).await;
        let small = read(&on_host.band_part(lower, upper).unwrap()).await;
        assert_eq!(got, small, "bandPart({lower}, {upper}) on the host");
        let want: Vec<f32> = (0..24)
            .map(|e| {
                let (i, j) = ((e % 12) / 4, e % 4);
                if kept(lower, upper, i, j) {
                    values[e]
                } else {
                    0.0
                }
            })
            .collect();
        assert_eq!(got, want, "bandPart({lower}, {upper})");
    }
    // Outside the band is 0 whatever was there, NaN included.
    let nan = gpu
        .tensor(&[f32::NAN, f32::NAN, f32::NAN, f32::NAN], Some(&[2, 2]))
        .unwrap();
    let causal = read(&nan.band_part(-1, 0).unwrap()).await;
    assert!(causal[0].is_nan() && causal[1] == 0.0 && causal[2].is_nan() && causal[3].is_nan());
    // The gradient passes inside the band only.
    let grad = gpu
        .grad(|t| t.band_part(-1, 0)?.sum(None, false), &x, None)
        .unwrap();
    let want: Vec<f32> = (0..24)
        .map(|e| f32::from(u8::from(kept(-1, 0, (e % 12) / 4, e % 4))))
        .collect();
    assert_eq!(read(&grad).await, want);
    // A vector is refused at once, queuing nothing.
    let ops = gpu.stats().ops_registered;
    let Err(error) = gpu.tensor(&[1.0], None).unwrap().band_part(0, 0) else {
        panic!("a vector has no band");
    };
    assert!(
        error
            .to_string()
            .contains("needs a matrix (rank >= 2), got [1]"),
        "{error}"
    );
    assert_eq!(
        gpu.stats().ops_registered,
        ops + 1,
        "only the tensor() above"
    );
}

pub async fn the_new_shape_ops_fail_only_their_dependents_and_refuse_a_second_devices_operand() {
    use webfusion::{FaultKind, Split};
    // Written as users write it: intermediates in variables, no tidy.
    let gpu = device().await;
    let x = gpu.tensor(&[1.0, 2.0, 3.0, 4.0], Some(&[2, 2])).unwrap();
    let other = gpu.tensor(&[5.0, 6.0], None).unwrap().add(1.0).unwrap();
    gpu.inject_fault("cat", 1, FaultKind::Validation).unwrap();
    let padded = x.pad(&[(1, 0), (0, 0)], 0.0).unwrap();
    let tiled = x.tile(&[1, 2]).unwrap();
    let product = padded.matmul_transposed(&x, false, true).unwrap();
    let error = read_err(&product).await;
    let report = error.first().expect("a report");
    assert_eq!(report.root.kind, FailureKind::Injected);
    assert_eq!(report.root.op, "cat");
    assert_eq!(
        read_err(&padded).await.first().unwrap().failure,
        report.failure
    );
    // What does not read the failed cat reads normally.
    assert_eq!(
        read(&tiled).await,
        vec![1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0]
    );
    let pieces = x.split(&Split::Count(2), 0).unwrap();
    assert_eq!(read(&pieces[1]).await, vec![3.0, 4.0]);
    assert_eq!(read(&other).await, vec![6.0, 7.0]);
    assert_eq!(
        read(&x.band_part(0, 0).unwrap()).await,
        vec![1.0, 0.0, 0.0, 4.0]
    );
    // An operand of another device is refused at once, naming it.
    let second = device().await;
    let there = second.tensor(&[1.0, 0.0, 0.0, 1.0], Some(&[2, 2])).unwrap();
    let Err(refused) = x.matmul_transposed(&there, true, false) else {
        panic!("mixing devices is refused")
    };
    assert!(refused.to_string().contains("lives on"), "{refused}");
    drop((padded, product));
    let _ = gpu.sync().await;
    assert_eq!(gpu.stats().failures_held, 0, "freed with its carriers");
}

/// A warm-up fails only what its function made: work queued before runs
/// for real (what the function reads of it included), a held expression
/// it reads is written for real first (its
/// flush would otherwise have written it, and failed it), a pending
/// injected fault waits for a kernel that runs, and a function that fails
/// part way returns its error and leaves nothing to run later.
pub async fn a_warmup_fails_only_what_its_function_made_and_consumes_no_fault() {
    let gpu = kernels_only().await;
    let x = gpu.tensor(&[0.0, 1.0, 2.0], None).unwrap();
    let expression = x.exp().unwrap();
    // Computed inline by this read's kernel: left an expression.
    read(&expression.add(1.0).unwrap()).await;
    let queued = x.add(5.0).unwrap();
    // Queued, and read only inside (found by outside testing: it was left
    // an expression, which the warm-up's flush then wrote, and failed).
    let queued_read = x.sqrt().unwrap();
    gpu.inject_fault("mul", 1, webfusion::FaultKind::Validation)
        .unwrap();
    let launched = gpu.stats().kernels_launched;
    let mut made = None;
    gpu.warmup(|| {
        // A product reads its operands from memory: `queued_read` is
        // written by the warm-up's flush unless it was written before.
        let dot = queued_read.reshape(&[1, 3])?.matmul(&x.reshape(&[3, 1])?)?;
        let y = expression.mul(3.0)?.sub(&x)?.add(&dot.reshape(&[1])?)?;
        made = Some(y.clone());
        Ok(vec![y])
    })
    .unwrap();
    let ran = gpu.stats().kernels_launched - launched;
    assert!(ran <= 2, "only the earlier work ran ({ran} kernels)");
    assert!(gpu.sync().await.is_ok(), "a warm-up reports no failure");
    close(&read(&queued).await, &[5.0, 6.0, 7.0]);
    close(&read(&queued_read).await, &[0.0, 1.0, 2.0f32.sqrt()]);
    close(&read(&expression).await, &[1.0, 1.0f32.exp(), 2.0f32.exp()]);
    let error = read_err(&made.unwrap()).await;
    let root = &error.first().unwrap().root;
    assert_eq!(root.kind, FailureKind::Warmup);
    assert!(root.message.contains("runs none"), "{}", root.message);
    // The fault fires on the first `mul` that runs.
    let failed = read_err(&x.mul(4.0).unwrap()).await;
    assert_eq!(failed.first().unwrap().root.kind, FailureKind::Injected);
    assert!(gpu.sync().await.is_err(), "the fault is reported");
    // A function that fails part way: its error, and nothing left to run.
    let launched = gpu.stats().kernels_launched;
    let refused = gpu.warmup(|| {
        let _half = x.neg()?;
        x.reshape(&[4])?;
        Ok(vec![])
    });
    assert!(refused.is_err());
    gpu.sync().await.unwrap();
    assert_eq!(gpu.stats().kernels_launched, launched);
}
