//! Browser tests: the shared cases on WebGPU in headless Chrome
//! (wasm-bindgen-test; `cargo test --target wasm32-unknown-unknown`).
#![cfg(target_arch = "wasm32")]

mod cases;

use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

macro_rules! browser {
    ($module:ident, $name:ident) => {
        #[wasm_bindgen_test]
        async fn $name() {
            cases::$module::$name().await;
            assert_eq!(webfusion::panics_observed(), 0, "the library panicked");
        }
    };
}

all_cases!(browser);
