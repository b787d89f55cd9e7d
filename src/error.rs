//! Errors as values. Each says which op, which operand, which shapes, as
//! fields; the text is rendered from the fields at the edge (`Display`, or the
//! JS `Error` the `web` layer builds), never parsed back.

use std::fmt;

/// A number as a message shows it: as JavaScript writes it (`0`, `2.5`,
/// `1e+30`, `NaN`), the way a user's program wrote it. On the web JS's own
/// `Number.prototype.toString` writes it, so the module carries no float
/// formatting of its own (core's is about 20 KB of wasm, 8 KB gzip);
/// natively Rust's, in JS's style (`js_style`), so messages read the
/// same in both worlds.
/// Every float in a message goes through here: one `{}` of a float
/// anywhere else brings core's formatting back into the module.
pub fn number(v: f64) -> String {
    #[cfg(target_arch = "wasm32")]
    {
        js_sys::Number::from(v)
            .to_string_with_radix(10)
            .map_or_else(|_| String::from("a number"), String::from)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        js_style(format!("{v}"), format!("{v:e}"), v.abs())
    }
}

/// JS's choice between `plain` and `exponent` (Rust's `{}` and `{:e}` of
/// a value of `magnitude`): the exponent form from 1e21 and below 1e-6,
/// its exponent signed (`1e+30`); infinities as `Infinity`.
#[cfg(not(target_arch = "wasm32"))]
fn js_style(plain: String, exponent: String, magnitude: f64) -> String {
    if magnitude.is_infinite() {
        return plain.replace("inf", "Infinity");
    }
    if magnitude == 0.0 || magnitude.is_nan() || (1e-6..1e21).contains(&magnitude) {
        return plain;
    }
    match exponent.split_once('e') {
        Some((digits, power)) if !power.starts_with('-') => format!("{digits}e+{power}"),
        _ => exponent,
    }
}

/// An f32 as `number` writes it, with the fewest digits that give back
/// the same f32 (`0.1`, not the `0.10000000149011612` its f64 is): what
/// the user wrote, where they wrote an f32's worth of digits.
pub fn number_f32(v: f32) -> String {
    #[cfg(target_arch = "wasm32")]
    {
        number(shortest(v))
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        js_style(format!("{v}"), format!("{v:e}"), f64::from(v).abs())
    }
}

/// The JS number of fewest significant digits that is `v` as a float32:
/// `0.05` for `0.05f32`, not `0.05000000074505806`, as a user who set 0.05
/// expects to read it back.
#[cfg(target_arch = "wasm32")]
pub fn shortest(v: f32) -> f64 {
    let wide = js_sys::Number::from(f64::from(v));
    for digits in 1..=9 {
        let Ok(text) = wide.to_precision(digits) else {
            break;
        };
        let back = js_sys::Number::parse_float(&String::from(text));
        if back as f32 == v {
            return back;
        }
    }
    f64::from(v)
}

/// Which JS error class a registration error maps to, following the JS
/// convention: a wrong type of argument is a `TypeError`, a value out of its
/// allowed range (an axis, a dimension, a length) a `RangeError`, anything
/// else (shapes that do not fit together, a disposed tensor) a plain `Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    Type,
    Range,
    Other,
}

/// An op rejected at registration: nothing was queued for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrationError {
    /// The op's user-facing name (`matmul`, `add`, `tensor`).
    pub op: &'static str,
    pub class: ErrorClass,
    /// What was wrong, naming the operand and the shapes.
    pub reason: String,
}

impl RegistrationError {
    /// Called, not inlined: an error is built at some hundred and fifty places,
    /// none of them on the way of an op that succeeds (0.6 KB gzip).
    #[inline(never)]
    pub(crate) fn new(op: &'static str, class: ErrorClass, reason: impl Into<String>) -> Self {
        RegistrationError {
            op,
            class,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for RegistrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.reason)
    }
}

impl std::error::Error for RegistrationError {}

/// Why no device could be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// The platform has no WebGPU (`navigator.gpu` is missing).
    NoWebGpu,
    /// WebGPU (or the native API) exists but offered no adapter.
    NoAdapter(String),
    /// The adapter refused to open a device.
    DeviceRefused(String),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::NoWebGpu => write!(
                f,
                "WebGPU is not available here (navigator.gpu is missing). Use a browser with \
                 WebGPU enabled: Chrome/Edge 113+ on Windows, macOS and ChromeOS; on Linux start \
                 Chrome with --enable-unsafe-webgpu (and --enable-features=Vulkan)"
            ),
            RequestError::NoAdapter(why) => write!(
                f,
                "no GPU adapter was found ({why}). In Chrome on Linux WebGPU needs the flag \
                 --enable-unsafe-webgpu; natively, install a Vulkan driver (e.g. Mesa's \
                 lavapipe: apt-get install mesa-vulkan-drivers) or run on macOS (Metal)"
            ),
            RequestError::DeviceRefused(why) => {
                write!(f, "the GPU adapter refused to open a device: {why}")
            }
        }
    }
}

impl std::error::Error for RequestError {}
