//! Browser tests: the same Rust API on WebGPU in headless Chrome
//! (wasm-bindgen-test; `cargo test --target wasm32-unknown-unknown`).
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::*;
use webfusion::{Device, DeviceOptions};

wasm_bindgen_test_configure!(run_in_browser);

async fn device() -> Device {
    Device::request(DeviceOptions::default())
        .await
        .expect("WebGPU in headless Chrome (--enable-unsafe-webgpu)")
}

#[wasm_bindgen_test]
async fn the_first_slice_adds_and_scales_on_webgpu() {
    let gpu = device().await;
    let a = gpu.tensor(&[1.0, 2.0, 3.0], None).unwrap();
    let b = gpu.tensor(&[10.0, 20.0, 30.0], None).unwrap();
    let t = a.add(&b).unwrap().mul(2.0).unwrap();
    assert_eq!(t.shape(), &[3]);
    assert_eq!(
        gpu.stats().kernels_launched,
        0,
        "nothing runs before a read"
    );
    assert_eq!(t.to_vec().await.unwrap(), vec![22.0, 44.0, 66.0]);
}
