//! The benchmark workloads natively, on criterion: wgpu on Vulkan (lavapipe
//! here; a real GPU where there is one), Metal or DX12. The same workloads
//! as `npm run bench` in the browser, minus the peers. Every iteration
//! uploads its input, computes and reads the result back.
//!
//! `WF_BENCH_MATMUL=4096` adds a square matmul of that size (the real-GPU
//! figure); `WF_BENCH_RESNET=1` adds a convolution of a ResNet layer (batch
//! 32, 56x56x64 images, 3x3x64x64 filter, same padding), far too large for a
//! CPU adapter, against `bench/torch_conv.py`; `WF_BENCH_QUICK=1` shortens every measurement. Criterion's filter
//! argument (`cargo bench --bench workloads -- matmul`) picks workloads. The
//! matmul group's throughput is in elements per second where an element is
//! one floating-point operation: criterion's `Gelem/s` reads as GFLOP/s.

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::time::Duration;

    use criterion::measurement::WallTime;
    use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};
    use webfusion::{Device, DeviceOptions, Tensor};

    fn seeded(n: usize, seed: u32, lo: f32, hi: f32) -> Vec<f32> {
        let mut a = seed;
        (0..n)
            .map(|_| {
                a = a.wrapping_add(0x6d2b_79f5);
                let mut t = a;
                t = (t ^ (t >> 15)).wrapping_mul(t | 1);
                t ^= t.wrapping_add((t ^ (t >> 7)).wrapping_mul(t | 61));
                lo + (hi - lo) * (((t ^ (t >> 14)) as f64) / 4_294_967_296.0) as f32
            })
            .collect()
    }

    fn read(t: &Tensor) -> Vec<f32> {
        pollster::block_on(t.to_vec()).expect("the benchmark tensor reads")
    }

    const MLP: [usize; 4] = [784, 512, 512, 10];
    const BATCH: usize = 256;

    struct Layer {
        w: Tensor,
        b: Tensor,
    }

    fn mlp(gpu: &Device) -> Vec<Layer> {
        (0..3)
            .map(|l| Layer {
                w: gpu
                    .tensor(
                        &seeded(MLP[l] * MLP[l + 1], 100 + l as u32, -0.05, 0.05),
                        Some(&[MLP[l], MLP[l + 1]]),
                    )
                    .unwrap(),
                b: gpu
                    .tensor(&seeded(MLP[l + 1], 200 + l as u32, -0.01, 0.01), None)
                    .unwrap(),
            })
            .collect()
    }

    fn forward(layers: &[Layer], x: &Tensor) -> (Vec<Tensor>, Vec<Tensor>) {
        let mut acts = vec![x.clone()];
        let mut pre = Vec::new();
        for (i, layer) in layers.iter().enumerate() {
            let z = acts[i].matmul(&layer.w).unwrap().add(&layer.b).unwrap();
            let h = if i < 2 { z.relu().unwrap() } else { z.clone() };
            pre.push(z);
            acts.push(h);
        }
        (acts, pre)
    }

    /// A group of workloads, each timed in flat samples (the same number of
    /// iterations per sample: an iteration takes milliseconds to seconds).
    fn flat_group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
        let quick = std::env::var_os("WF_BENCH_QUICK").is_some();
        let mut group = c.benchmark_group(name);
        group
            .sampling_mode(SamplingMode::Flat)
            .sample_size(10)
            .warm_up_time(Duration::from_millis(if quick { 300 } else { 2000 }))
            .measurement_time(Duration::from_millis(if quick { 1500 } else { 5000 }));
        group
    }

    pub fn workloads(c: &mut Criterion) {
        let gpu =
            pollster::block_on(Device::request(DeviceOptions::default())).expect("a GPU adapter");
        eprintln!("adapter: {}", gpu.adapter_info());

        let mut group = flat_group(c, "workloads");
        let w1 = seeded(1 << 20, 1, -1.0, 1.0);
        group.bench_function("W1 16 elementwise ops on 2^20", |b| {
            b.iter(|| {
                let x = gpu.tensor(&w1, None).unwrap();
                let mut y = x
                    .mul(0.5)
                    .unwrap()
                    .add(0.1)
                    .unwrap()
                    .exp()
                    .unwrap()
                    .mul(&x)
                    .unwrap()
                    .tanh()
                    .unwrap();
                y = y
                    .sub(0.2)
                    .unwrap()
                    .sigmoid()
                    .unwrap()
                    .add(&x)
                    .unwrap()
                    .mul(1.5)
                    .unwrap()
                    .tanh()
                    .unwrap();
                y = y
                    .add(&x)
                    .unwrap()
                    .sigmoid()
                    .unwrap()
                    .mul(0.9)
                    .unwrap()
                    .exp()
                    .unwrap()
                    .sub(&x)
                    .unwrap()
                    .tanh()
                    .unwrap();
                read(&y)
            })
        });

        group.finish();

        let mut group = flat_group(c, "matmul");
        let mut sizes = vec![256, 512, 1024];
        if let Some(n) = std::env::var("WF_BENCH_MATMUL")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            sizes.push(n);
        }
        for n in sizes {
            let a = seeded(n * n, 2, -1.0, 1.0);
            let b = gpu
                .tensor(&seeded(n * n, 3, -1.0, 1.0), Some(&[n, n]))
                .unwrap();
            group.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
            group.bench_function(format!("W2 matmul {n}"), |bench| {
                bench.iter(|| read(&gpu.tensor(&a, Some(&[n, n])).unwrap().matmul(&b).unwrap()))
            });
        }
        // The kernel's own throughput: operands resident, one element read back
        // (the read waits for the product to finish).
        let large = std::env::var("WF_BENCH_MATMUL")
            .ok()
            .and_then(|v| v.parse().ok());
        for n in std::iter::once(1024).chain(large.filter(|&n: &usize| n > 1024)) {
            let a = gpu.random_uniform(&[n, n], -1.0, 1.0, 12).unwrap();
            let b = gpu.random_uniform(&[n, n], -1.0, 1.0, 13).unwrap();
            group.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
            group.bench_function(format!("W2 matmul {n} resident"), |bench| {
                bench.iter(|| read(&a.matmul(&b).unwrap().slice(&[0, 0], &[1, 1]).unwrap()))
            });
        }
        // Ten products between two reads (each a kernel, each kept until
        // the read): the kernels' throughput with the read's round trip
        // spread over ten, as PyTorch's figure (bench/torch_matmul.py) is
        // timed over launches back to back.
        for n in std::iter::once(1024).chain(large.filter(|&n: &usize| n > 1024)) {
            let a = gpu.random_uniform(&[n, n], -1.0, 1.0, 12).unwrap();
            let b = gpu.random_uniform(&[n, n], -1.0, 1.0, 13).unwrap();
            group.throughput(Throughput::Elements(10 * 2 * (n as u64).pow(3)));
            group.bench_function(format!("W2 matmul {n} resident x10"), |bench| {
                bench.iter(|| {
                    let products: Vec<Tensor> = (0..10).map(|_| a.matmul(&b).unwrap()).collect();
                    read(&products[9].slice(&[0, 0], &[1, 1]).unwrap())
                })
            });
        }
        group.finish();

        if std::env::var_os("WF_BENCH_RESNET").is_some() {
            // Operands resident, one element read back, as the resident matmul.
            let mut group = flat_group(c, "conv");
            let x = gpu
                .random_uniform(&[32, 56, 56, 64], -1.0, 1.0, 14)
                .unwrap();
            let f = gpu.random_uniform(&[3, 3, 64, 64], -0.1, 0.1, 15).unwrap();
            let dy = gpu
                .random_uniform(&[32, 56, 56, 64], -1.0, 1.0, 16)
                .unwrap();
            group.throughput(Throughput::Elements(2 * 32 * 56 * 56 * 64 * 64 * 9));
            let same = webfusion::Padding::Same;
            let nhwc = webfusion::DataFormat::Nhwc;
            let corner = |t: Tensor| read(&t.slice(&[0, 0, 0, 0], &[1, 1, 1, 1]).unwrap());
            group.bench_function("conv2d resnet layer resident", |bench| {
                bench.iter(|| corner(x.conv2d(&f, [1, 1], same, nhwc, [1, 1]).unwrap()))
            });
            group.bench_function("conv2d resnet layer input grad resident", |bench| {
                bench.iter(|| {
                    corner(
                        dy.conv2d_transpose(&f, &[32, 56, 56, 64], [1, 1], same)
                            .unwrap(),
                    )
                })
            });
            group.finish();
        }

        let mut group = flat_group(c, "workloads");
        let layers = mlp(&gpu);
        let x = seeded(BATCH * MLP[0], 4, -1.0, 1.0);
        group.bench_function("W3 MLP forward", |b| {
            b.iter(|| {
                let input = gpu.tensor(&x, Some(&[BATCH, MLP[0]])).unwrap();
                let (acts, _) = forward(&layers, &input);
                read(&acts[3].softmax(-1).unwrap())
            })
        });

        let mut layers = mlp(&gpu);
        let labels: Vec<f32> = {
            let picks = seeded(BATCH, 5, 0.0, 10.0);
            let mut y = vec![0.0; BATCH * 10];
            for (i, p) in picks.iter().enumerate() {
                y[i * 10 + *p as usize] = 1.0;
            }
            y
        };
        group.bench_function("W4 MLP SGD training step", |b| {
            b.iter(|| {
                let input = gpu.tensor(&x, Some(&[BATCH, MLP[0]])).unwrap();
                let y = gpu.tensor(&labels, Some(&[BATCH, 10])).unwrap();
                let (acts, pre) = forward(&layers, &input);
                let logp = acts[3].log_softmax(-1).unwrap();
                let loss = y
                    .mul(&logp)
                    .unwrap()
                    .sum(None, false)
                    .unwrap()
                    .neg()
                    .unwrap()
                    .div(BATCH as f32)
                    .unwrap();
                let mut grad = logp
                    .exp()
                    .unwrap()
                    .sub(&y)
                    .unwrap()
                    .div(BATCH as f32)
                    .unwrap();
                let mut next = Vec::new();
                for i in (0..3).rev() {
                    let layer = &layers[i];
                    let dw = acts[i].transpose(None).unwrap().matmul(&grad).unwrap();
                    let db = grad.sum(Some(&[0]), false).unwrap();
                    next.push(Layer {
                        w: layer.w.sub(&dw.mul(0.01).unwrap()).unwrap(),
                        b: layer.b.sub(&db.mul(0.01).unwrap()).unwrap(),
                    });
                    if i > 0 {
                        let back = grad.matmul(&layer.w.transpose(None).unwrap()).unwrap();
                        grad = back.mul(&pre[i - 1].greater(0.0).unwrap()).unwrap();
                    }
                }
                next.reverse();
                let values = read(&loss);
                layers = next;
                values
            })
        });

        let w5 = seeded(1024 * 4096, 6, -1.0, 1.0);
        group.bench_function("W5 sum over last axis of [1024,4096]", |b| {
            b.iter(|| {
                read(
                    &gpu.tensor(&w5, Some(&[1024, 4096]))
                        .unwrap()
                        .sum(Some(&[-1]), false)
                        .unwrap(),
                )
            })
        });

        let w6 = seeded(16, 7, -1.0, 1.0);
        group.bench_function("W6 1000 small ops on 16 elements", |b| {
            b.iter(|| {
                let mut y = gpu.tensor(&w6, None).unwrap();
                for i in 0..1000 {
                    y = match i % 4 {
                        0 => y.add(0.01),
                        1 => y.mul(0.999),
                        2 => y.sub(0.005),
                        _ => y.maximum(-2.0),
                    }
                    .unwrap();
                }
                read(&y)
            })
        });

        let w7 = seeded(1024 * 1024, 8, -1.0, 1.0);
        group.bench_function("W7 softmax over last axis of [1024,1024]", |b| {
            b.iter(|| {
                read(
                    &gpu.tensor(&w7, Some(&[1024, 1024]))
                        .unwrap()
                        .softmax(-1)
                        .unwrap(),
                )
            })
        });
        group.finish();
    }
}

#[cfg(not(target_arch = "wasm32"))]
criterion::criterion_group!(benches, native::workloads);
#[cfg(not(target_arch = "wasm32"))]
criterion::criterion_main!(benches);

/// Native only: the browser's benchmark is `npm run bench`.
#[cfg(target_arch = "wasm32")]
fn main() {}
