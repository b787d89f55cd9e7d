//! The benchmark workloads natively: wgpu on Vulkan (lavapipe here; a real
//! GPU where there is one), Metal or DX12. The same workloads as `npm run
//! bench` in the browser, minus the peers. Every iteration uploads its input,
//! computes and reads the result back.
//!
//! `WF_BENCH_MATMUL=4096` adds a square matmul of that size (the real-GPU
//! figure); `WF_BENCH_QUICK=1` shortens every measurement. A filter argument
//! (`cargo bench --bench workloads -- matmul`) runs the workloads whose name
//! contains it.
//!
//! A small harness of its own rather than criterion: criterion builds C code
//! (its `alloca` dependency), which cannot be type-checked for macOS without
//! the macOS SDK, and the Metal path's check covers every target.

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::time::{Duration, Instant};
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
            let h = if i < 2 { z.relu() } else { z.clone() };
            pre.push(z);
            acts.push(h);
        }
        (acts, pre)
    }

    /// Times `f`: a warm-up, then runs until the time budget is spent (at
    /// least 3), and prints the median and the fastest run, with the FLOP
    /// rate when `flop` is given.
    struct Bench {
        filter: Option<String>,
        budget: Duration,
    }

    impl Bench {
        fn run<R>(&self, name: &str, flop: Option<u64>, mut f: impl FnMut() -> R) {
            if self
                .filter
                .as_deref()
                .is_some_and(|filter| !name.contains(filter))
            {
                return;
            }
            std::hint::black_box(f());
            let mut samples = Vec::new();
            let start = Instant::now();
            while samples.len() < 3 || (start.elapsed() < self.budget && samples.len() < 50) {
                let t = Instant::now();
                std::hint::black_box(f());
                samples.push(t.elapsed().as_secs_f64());
            }
            samples.sort_by(f64::total_cmp);
            let median = samples[samples.len() / 2];
            let rate = flop.map_or(String::new(), |flop| {
                format!("  {:.1} GFLOP/s", flop as f64 / median / 1e9)
            });
            println!(
                "{name:<48} median {:>10.3} ms  min {:>10.3} ms  ({} runs){rate}",
                median * 1e3,
                samples[0] * 1e3,
                samples.len()
            );
        }
    }

    pub fn workloads() {
        let gpu =
            pollster::block_on(Device::request(DeviceOptions::default())).expect("a GPU adapter");
        eprintln!("adapter: {}", gpu.adapter_info());
        let quick = std::env::var_os("WF_BENCH_QUICK").is_some();
        let group = Bench {
            filter: std::env::args().skip(1).find(|a| !a.starts_with('-')),
            budget: Duration::from_millis(if quick { 1500 } else { 5000 }),
        };

        let w1 = seeded(1 << 20, 1, -1.0, 1.0);
        group.run("W1 16 elementwise ops on 2^20", None, || {
            let x = gpu.tensor(&w1, None).unwrap();
            let mut y = x
                .mul(0.5)
                .unwrap()
                .add(0.1)
                .unwrap()
                .exp()
                .mul(&x)
                .unwrap()
                .tanh();
            y = y
                .sub(0.2)
                .unwrap()
                .sigmoid()
                .add(&x)
                .unwrap()
                .mul(1.5)
                .unwrap()
                .tanh();
            y = y
                .add(&x)
                .unwrap()
                .sigmoid()
                .mul(0.9)
                .unwrap()
                .exp()
                .sub(&x)
                .unwrap()
                .tanh();
            read(&y)
        });

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
            group.run(
                &format!("W2 matmul {n}"),
                Some(2 * (n as u64).pow(3)),
                || read(&gpu.tensor(&a, Some(&[n, n])).unwrap().matmul(&b).unwrap()),
            );
        }
        // The kernel's own throughput: operands resident, one element read back
        // (the read waits for the product to finish).
        let large = std::env::var("WF_BENCH_MATMUL")
            .ok()
            .and_then(|v| v.parse().ok());
        for n in std::iter::once(1024).chain(large.filter(|&n: &usize| n > 1024)) {
            let a = gpu.random_uniform(&[n, n], -1.0, 1.0, 12).unwrap();
            let b = gpu.random_uniform(&[n, n], -1.0, 1.0, 13).unwrap();
            group.run(
                &format!("W2 matmul {n} resident"),
                Some(2 * (n as u64).pow(3)),
                || read(&a.matmul(&b).unwrap().slice(&[0, 0], &[1, 1]).unwrap()),
            );
        }

        let layers = mlp(&gpu);
        let x = seeded(BATCH * MLP[0], 4, -1.0, 1.0);
        group.run("W3 MLP forward", None, || {
            let input = gpu.tensor(&x, Some(&[BATCH, MLP[0]])).unwrap();
            let (acts, _) = forward(&layers, &input);
            read(&acts[3].softmax(-1).unwrap())
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
        group.run("W4 MLP SGD training step", None, || {
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
                .div(BATCH as f32)
                .unwrap();
            let mut grad = logp.exp().sub(&y).unwrap().div(BATCH as f32).unwrap();
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
        });

        let w5 = seeded(1024 * 4096, 6, -1.0, 1.0);
        group.run("W5 sum over last axis of [1024,4096]", None, || {
            read(
                &gpu.tensor(&w5, Some(&[1024, 4096]))
                    .unwrap()
                    .sum(Some(&[-1]), false)
                    .unwrap(),
            )
        });

        let w6 = seeded(16, 7, -1.0, 1.0);
        group.run("W6 1000 small ops on 16 elements", None, || {
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
        });

        let w7 = seeded(1024 * 1024, 8, -1.0, 1.0);
        group.run("W7 softmax over last axis of [1024,1024]", None, || {
            read(
                &gpu.tensor(&w7, Some(&[1024, 1024]))
                    .unwrap()
                    .softmax(-1)
                    .unwrap(),
            )
        });
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    native::workloads();
}

/// Native only: the browser's benchmark is `npm run bench`.
#[cfg(target_arch = "wasm32")]
fn main() {}
