//! The README example natively, then a failure read back with its chain:
//! `cargo run --example basic` (any Vulkan device: lavapipe will do).

use webfusion::{Device, DeviceOptions};

fn main() {
    pollster::block_on(async {
        let gpu = match Device::request(DeviceOptions::default()).await {
            Ok(gpu) => gpu,
            Err(error) => return eprintln!("no GPU device: {error}"),
        };
        println!("{}", gpu.adapter_info());

        let a = gpu.tensor(&[1.0, 2.0, 3.0], None).expect("a valid tensor");
        let b = gpu
            .tensor(&[10.0, 20.0, 30.0], None)
            .expect("a valid tensor");
        let t = a.add(&b).and_then(|s| s.mul(2.0)).expect("matching shapes");
        println!("{:?} -> {:?}", t.shape(), t.to_vec().await);

        // 256 GiB cannot exist: the read rejects with the chain to the root;
        // everything else reads normally.
        let huge = gpu
            .zeros(&[1 << 18, 1 << 18])
            .and_then(|z| z.add(1.0))
            .and_then(|h| h.slice(&[0, 0], &[1, 2]))
            .expect("valid registrations");
        match huge.to_vec().await {
            Ok(values) => println!("unexpected: {values:?}"),
            Err(error) => println!("{error}"),
        }
        println!("{:?}", t.to_vec().await);
    });
}
