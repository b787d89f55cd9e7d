//! Native integration tests: the Rust API on wgpu (lavapipe here, any
//! Vulkan or Metal device elsewhere).
#![cfg(not(target_arch = "wasm32"))]

use webfusion::{Device, DeviceOptions};

fn device() -> Device {
    pollster::block_on(Device::request(DeviceOptions::default()))
        .expect("a native GPU adapter (install mesa-vulkan-drivers)")
}

fn read(t: &webfusion::Tensor) -> Vec<f32> {
    pollster::block_on(t.to_vec()).expect("the tensor reads")
}

#[test]
fn the_first_slice_adds_and_scales_on_the_gpu() {
    let gpu = device();
    let a = gpu.tensor(&[1.0, 2.0, 3.0], None).unwrap();
    let b = gpu.tensor(&[10.0, 20.0, 30.0], None).unwrap();
    let t = a.add(&b).unwrap().mul(2.0).unwrap();
    assert_eq!(t.shape(), &[3]);
    assert_eq!(
        gpu.stats().kernels_launched,
        0,
        "nothing runs before a read"
    );
    assert_eq!(read(&t), vec![22.0, 44.0, 66.0]);
}
