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

/// `Stats` is declared once, in Rust; the TypeScript interface JS code is
/// typed by, and the API doc, are written by hand, so each is held to it:
/// every counter JS reads, and nothing else.
#[test]
fn the_typescript_stats_interface_and_the_api_doc_name_every_counter() {
    let mut named: Vec<&str> = webfusion::Stats::default()
        .named()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    named.push("tensorsHeld");
    let web = include_str!("../src/web/mod.rs");
    let start = web
        .find("export interface Stats {")
        .expect("the Stats interface");
    let body = &web[start..start + web[start..].find("\n}").expect("its end")];
    let members: Vec<&str> = body
        .lines()
        .filter_map(|l| l.trim().strip_suffix(": number;"))
        .collect();
    assert_eq!(members, named, "the TypeScript Stats interface");
    let api = include_str!("../docs/api.md");
    let row = api
        .lines()
        .find(|l| l.starts_with("| `stats()`"))
        .expect("stats() in docs/api.md");
    for name in &named {
        assert!(
            row.contains(&format!("`{name}`")),
            "docs/api.md's stats() row lacks `{name}`"
        );
    }
}
