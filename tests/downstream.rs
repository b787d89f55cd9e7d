//! A browser test as a crate that depends on webfusion writes one: only
//! the public API, nothing shared with this repository's other tests. To
//! copy it: put it in your `tests/`, this repository's `webdriver.json`
//! (it turns WebGPU on: without it the device request fails with
//! `NoAdapter`) next to your `Cargo.toml`, and in `.cargo/config.toml`
//!
//! ```toml
//! [target.wasm32-unknown-unknown]
//! runner = "wasm-bindgen-test-runner"
//! ```
//!
//! then run `cargo test --target wasm32-unknown-unknown` with
//! `wasm-bindgen-cli` (of the crate's `wasm-bindgen` version) and a
//! ChromeDriver installed.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use webfusion::{Device, DeviceOptions, FailureKind, Optimizer};

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
async fn a_downstream_test_computes_trains_and_reads_a_failure_on_webgpu() {
    let gpu = Device::request(DeviceOptions::default())
        .await
        .expect("WebGPU is on (webdriver.json)");
    let t = gpu
        .tensor(&[1.0, 2.0, 3.0], None)
        .unwrap()
        .mul(2.0)
        .unwrap();
    assert_eq!(t.to_vec().await.unwrap(), vec![2.0, 4.0, 6.0]);

    let w = gpu
        .variable(&gpu.tensor(&[3.0, -2.0], None).unwrap(), true, None)
        .unwrap();
    let mut sgd = Optimizer::sgd(0.25).unwrap();
    sgd.minimize(|| w.value().square()?.sum(None, false), false, None)
        .unwrap();
    assert_eq!(w.value().to_vec().await.unwrap(), vec![1.5, -1.0]);

    let huge = gpu.zeros(&[1 << 18, 1 << 18]).unwrap().add(1.0).unwrap();
    let error = huge.to_vec().await.unwrap_err();
    assert_eq!(error.first().unwrap().root.kind, FailureKind::Allocation);
}
