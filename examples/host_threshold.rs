//! Where small work is cheaper on the host than as a kernel: the warm time
//! of a chain of elementwise ops on `n` values the program gave, registered
//! and read, on a default device and on one that runs every block as a
//! kernel (`host_max_elements: 0`). What `HOST_MAX_ELEMENTS` and
//! `HOST_MAX_WORK` in `src/device/mod.rs` were chosen from:
//! `cargo run --release --example host_threshold`.

use std::time::Instant;

use webfusion::{Device, DeviceOptions, Tensor};

fn main() {
    pollster::block_on(async {
        let kernels_only = DeviceOptions {
            host_max_elements: 0,
            ..DeviceOptions::default()
        };
        let devices = match (
            Device::request(DeviceOptions::default()).await,
            Device::request(kernels_only).await,
        ) {
            (Ok(host), Ok(kernels)) => [("default", host), ("kernels", kernels)],
            (Err(error), _) | (_, Err(error)) => return eprintln!("no GPU device: {error}"),
        };
        println!("{}", devices[0].1.adapter_info());
        for ops in [16, 1000] {
            for n in [16, 256, 1024, 4096] {
                let mut line = format!("{ops:5} ops on {n:5} values:");
                for (name, gpu) in &devices {
                    match warm_ms(gpu, ops, n).await {
                        Ok(ms) => line += &format!("  {name} {ms:7.3} ms"),
                        Err(error) => line += &format!("  {name} failed: {error}"),
                    }
                }
                println!("{line}");
            }
        }
    });
}

/// The median of 21 warm runs of the chain, in milliseconds.
async fn warm_ms(gpu: &Device, ops: usize, n: usize) -> Result<f64, Box<dyn std::error::Error>> {
    let data: Vec<f32> = (0..n).map(|i| (i % 17) as f32 / 8.0 - 1.0).collect();
    let mut times = Vec::new();
    for run in 0..24 {
        let start = Instant::now();
        let mut y: Tensor = gpu.tensor(&data, None)?;
        for i in 0..ops {
            y = match i % 4 {
                0 => y.add(0.01),
                1 => y.mul(0.999),
                2 => y.sub(0.005),
                _ => y.maximum(-2.0),
            }?;
        }
        y.to_vec().await?;
        if run >= 3 {
            times.push(start.elapsed().as_secs_f64() * 1000.0);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}
