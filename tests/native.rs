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

/// Natively a profile comes back with the GPU's time running each kernel,
/// from the timestamps written around its launches (lavapipe writes them),
/// and the profile's time is their sum. In the browser `profile()` awaits
/// them (a page test).
#[test]
fn a_profile_gives_each_kernel_the_gpus_time_from_its_timestamps() {
    pollster::block_on(async {
        let gpu = cases::engine::kernels_only().await;
        let a = gpu.random_uniform(&[256, 256], -1.0, 1.0, 1).unwrap();
        let b = gpu.random_uniform(&[256, 256], -1.0, 1.0, 2).unwrap();
        gpu.sync().await.unwrap();
        let (y, profile) = gpu.profile(|| {
            let p = a.matmul(&b).unwrap().relu().unwrap();
            let s = p.sum(None, false).unwrap();
            (p, s)
        });
        assert_eq!(profile.kernels.len(), 2, "{profile:?}");
        let times: Vec<f64> = profile
            .kernels
            .iter()
            .map(|k| k.kernel_ms.expect("each kernel's time"))
            .collect();
        assert!(times[0] > 0.0, "a 256 x 256 product takes time: {times:?}");
        let total = profile.kernel_ms.expect("the profile's time");
        assert!(
            (total - times.iter().sum::<f64>()).abs() < 1e-9,
            "{total} {times:?}"
        );
        // Nothing launched, nothing timed: a time of 0, not a missing one.
        let ((), empty) = gpu.profile(|| ());
        assert_eq!(empty.kernel_ms, Some(0.0));
        drop(y);
    });
    assert_eq!(webfusion::panics_observed(), 0, "the library panicked");
}

/// A submit of more launches than one query set has room for (2048, two
/// timestamps each) takes another set: found by outside testing, every
/// launch past the first 2048 of a flush had no time, and so the profile
/// had none.
#[test]
fn a_profile_of_more_launches_than_one_query_set_holds_times_every_one() {
    pollster::block_on(async {
        let gpu = cases::engine::device_with(webfusion::DeviceOptions {
            host_max_elements: 0,
            capacity: 10_000,
            ..webfusion::DeviceOptions::default()
        })
        .await;
        let x = gpu.random_uniform(&[64], -1.0, 1.0, 1).unwrap();
        gpu.sync().await.unwrap();
        let (maxima, profile) = gpu.profile(|| {
            (0..2100)
                .map(|k| x.add(k as f32).unwrap().arg_max(0).unwrap())
                .collect::<Vec<_>>()
        });
        assert!(profile.kernels.len() >= 2100, "{}", profile.kernels.len());
        let untimed = profile
            .kernels
            .iter()
            .filter(|k| k.kernel_ms.is_none())
            .count();
        assert_eq!(untimed, 0, "every launch is timed");
        assert!(profile.kernel_ms.is_some(), "and so is the profile");
        drop(maxima);
    });
    assert_eq!(webfusion::panics_observed(), 0, "the library panicked");
}

/// Natively every device shares one wgpu instance (`runtime::instance`):
/// NVIDIA's Vulkan driver, loaded and unloaded with an instance of its own
/// per device, stopped loading after some thirty devices in one process,
/// and each request after found no adapter. Here, as in the suite, each
/// device is requested on a thread of its own and dropped with it.
#[test]
fn fifty_devices_requested_one_after_another_each_find_an_adapter_and_compute() {
    for i in 0..50u16 {
        let value = f32::from(i);
        let read = std::thread::spawn(move || {
            pollster::block_on(async {
                let gpu = cases::engine::kernels_only().await;
                let t = gpu.tensor(&[value], None).unwrap().add(1.0).unwrap();
                cases::engine::read(&t).await
            })
        })
        .join()
        .expect("the request's thread");
        assert_eq!(read, vec![value + 1.0], "device {i}");
    }
}
