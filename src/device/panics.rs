//! Panics: the library never panics on a failure path (a panic in wasm
//! leaves the module half-alive for the whole page), and counts any panic
//! it sees so the test suites can assert there was none.

/// Whether the panic hook has been installed (once per thread: wasm has one).
pub(crate) fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // A test's own failed assertion is the test's business; anything
            // else (this crate, wgpu, std on its behalf) is a library panic.
            let in_tests = info
                .location()
                .is_some_and(|l| l.file().starts_with("tests/"));
            if !in_tests {
                PANICS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            #[cfg(target_arch = "wasm32")]
            console_error_panic_hook::hook(info);
            previous(info);
        }));
    });
}

/// Panics seen by the hook the library installs, outside test code. The
/// library never panics on a failure path; the test suites assert this stays
/// 0.
static PANICS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many panics the installed hook has seen in this process (or page).
pub fn panics_observed() -> u64 {
    PANICS.load(std::sync::atomic::Ordering::Relaxed)
}
