//! Browser tests: the shared cases on WebGPU in headless Chrome
//! (wasm-bindgen-test; `cargo test --target wasm32-unknown-unknown`).
#![cfg(target_arch = "wasm32")]

mod cases;
mod common;

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

/// A seeded subset of `tests/properties.rs`: random op graphs against the CPU
/// reference, on WebGPU.
#[wasm_bindgen_test]
async fn random_op_graphs_match_the_cpu_reference_in_the_browser() {
    let gpu = cases::engine::device().await;
    for seed in 0..24u64 {
        let seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        if let Err(e) = common::graphs::check_graph(&gpu, seed).await {
            panic!("{e}");
        }
    }
    assert_eq!(webfusion::panics_observed(), 0, "the library panicked");
}

/// A seeded subset of the native property
/// `random_graphs_with_injected_faults_fail_exactly_the_dependents_of_the_failed_op`:
/// random graphs with injected faults (some with a branch past the buffer
/// limits) fail exactly the tensors that depend on a failed op, on WebGPU.
#[wasm_bindgen_test]
async fn random_graphs_with_injected_faults_fail_only_the_failed_ops_dependents_in_the_browser() {
    let mut gpu = cases::engine::device().await;
    let (mut failing, mut failed) = (0, Vec::new());
    for k in 0..16u64 {
        let seed = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let result = common::graphs::check_graph_with_faults(&gpu, seed).await;
        match result {
            Ok(run) => failing += usize::from(!run.injected.is_empty() || run.refused),
            Err(e) => {
                failed.push(e);
                // A fault that did not fire would go off in the next seed.
                gpu = cases::engine::device().await;
            }
        }
    }
    if let Some(first) = failed.first() {
        let each: Vec<&str> = failed
            .iter()
            .map(|e| e.lines().next().unwrap_or_default())
            .collect();
        panic!(
            "{} seed(s) failed:\n  {}\nthe first in full:\n{first}",
            failed.len(),
            each.join("\n  ")
        );
    }
    assert!(
        failing >= 14,
        "most seeds make something fail ({failing} of 16)"
    );
    assert_eq!(webfusion::panics_observed(), 0, "the library panicked");
}
