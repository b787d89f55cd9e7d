use std::time::Instant;
use webfusion::{Device, DeviceOptions};
fn main() {
    let gpu = pollster::block_on(Device::request(DeviceOptions::default())).unwrap();
    let data: Vec<f32> = (0..16).map(|i| i as f32 / 8.0 - 1.0).collect();
    for round in 0..5 {
        for kept_mode in [std::env::var("KEPT").is_ok()] {
            let t0 = Instant::now();
            let n = 200;
            for _ in 0..n {
                let x = gpu.tensor(&data, None).unwrap();
                let mut kept = Vec::new();
                let mut y = x.clone();
                for i in 0..1000 {
                    let next = match i % 4 {
                        0 => y.add(0.01),
                        1 => y.mul(0.999),
                        2 => y.sub(0.005),
                        _ => y.maximum(-2.0),
                    }
                    .unwrap();
                    if kept_mode {
                        kept.push(y);
                    }
                    y = next;
                }
                let _v = pollster::block_on(y.to_vec()).unwrap();
                drop(kept);
            }
            println!(
                "round {round} kept {kept_mode}: {:.3} ms/iter",
                t0.elapsed().as_secs_f64() * 1000.0 / n as f64
            );
        }
    }
}
