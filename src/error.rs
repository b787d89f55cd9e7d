//! Errors as values. Each says which op, which operand, which shapes, as
//! fields; the text is rendered from the fields at the edge (`Display`, or the
//! JS `Error` the `web` layer builds), never parsed back.

use std::fmt;

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
