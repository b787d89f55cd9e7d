//! Browser tests: the shared cases on WebGPU in headless Chrome
//! (wasm-bindgen-test; `cargo test --target wasm32-unknown-unknown`).
#![cfg(target_arch = "wasm32")]

mod cases;

use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

macro_rules! browser {
    ($name:ident) => {
        #[wasm_bindgen_test]
        async fn $name() {
            cases::engine::$name().await;
        }
    };
}

engine_cases!(browser);
