//! Native integration tests: the shared cases on wgpu (lavapipe here, any
//! Vulkan or Metal device elsewhere).
#![cfg(not(target_arch = "wasm32"))]

mod cases;

macro_rules! native {
    ($name:ident) => {
        #[test]
        fn $name() {
            pollster::block_on(cases::engine::$name());
        }
    };
}

engine_cases!(native);
