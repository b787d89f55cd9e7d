//! Native integration tests: the shared cases on wgpu (lavapipe here, any
//! Vulkan or Metal device elsewhere).
#![cfg(not(target_arch = "wasm32"))]

mod cases;
mod common;

macro_rules! native {
    ($module:ident, $name:ident) => {
        #[test]
        fn $name() {
            pollster::block_on(cases::$module::$name());
            assert_eq!(webfusion::panics_observed(), 0, "the library panicked");
        }
    };
}

all_cases!(native);
