// Issue 24: what folding with subgroups does to a reduction's kernel time
// on this adapter. Two devices, one folding with subgroups where the
// adapter has them and one without (`DeviceOptions::subgroups`), time the
// same resident reductions from GPU timestamps (`Profile::kernel_ms`),
// alternating, the median of nine; a pass runs every shape once per device
// after a warm-up. Prints a table: shape, ms with, ms without, their ratio.
use webfusion::{Device, DeviceOptions, Tensor};

fn main() {
    let device = |subgroups| {
        pollster::block_on(Device::request(DeviceOptions {
            subgroups,
            ..DeviceOptions::default()
        }))
        .expect("a GPU adapter")
    };
    let (with, without) = (device(true), device(false));
    println!("adapter: {}", with.adapter_info());
    type Case = (&'static str, [usize; 2], fn(&Tensor) -> Tensor);
    let cases: [Case; 7] = [
        ("sum over rows of [1024,4096] (W5)", [1024, 4096], |x| {
            x.sum(Some(&[1]), false).unwrap()
        }),
        ("softmax over rows of [1024,1024] (W7)", [1024, 1024], |x| {
            x.softmax(1).unwrap()
        }),
        ("max over rows of [256,1024]", [256, 1024], |x| {
            x.max(Some(&[1]), false).unwrap()
        }),
        ("logSumExp over rows of [1024,4096]", [1024, 4096], |x| {
            x.log_sum_exp(Some(&[1]), false).unwrap()
        }),
        ("argMax over rows of [1024,4096]", [1024, 4096], |x| {
            x.arg_max(1).unwrap()
        }),
        ("sum of all 2^24", [4096, 4096], |x| {
            x.sum(None, false).unwrap()
        }),
        ("sum over rows of [64,65536]", [64, 65536], |x| {
            x.sum(Some(&[1]), false).unwrap()
        }),
    ];
    for (name, shape, f) in cases {
        let mut times = [Vec::new(), Vec::new()];
        let inputs: Vec<Tensor> = [&with, &without]
            .iter()
            .map(|gpu| {
                gpu.random_uniform(&shape, -1.0, 1.0, 7)
                    .unwrap()
                    .add(0.0)
                    .unwrap()
            })
            .collect();
        for round in 0..10 {
            for (k, gpu) in [&with, &without].into_iter().enumerate() {
                let (_, profile) = gpu.profile(|| f(&inputs[k]));
                if round > 0 {
                    times[k].extend(profile.kernel_ms);
                }
            }
        }
        let median = |t: &mut Vec<f64>| {
            t.sort_by(f64::total_cmp);
            t.get(t.len() / 2).copied()
        };
        match (median(&mut times[0]), median(&mut times[1])) {
            (Some(a), Some(b)) => println!(
                "{name}: {a:.4} ms with subgroups, {b:.4} ms without, {:.2}x",
                a / b
            ),
            _ => println!("{name}: this adapter writes no timestamps"),
        }
    }
}
