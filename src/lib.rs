//! webfusion: a tensor runtime that records ops, runs them fused on the GPU
//! (WebGPU in the browser; Vulkan, Metal or DX12 natively through wgpu), and
//! keeps execution failures on the tensors they could not write.
//!
//! Data flows one way through the layers, each a folder:
//! `tensor` (validate, infer shapes) -> `ir` (the queue) -> `fusion` (plan
//! blocks) -> `codegen` (WGSL) -> `runtime` (allocate, launch, read). The
//! `runtime` records what failed in `failure`, which reads consult. The
//! `device` module is the single-threaded cell that owns them all; `web` is
//! the JS API over the same Rust API.

mod codegen;
mod device;
mod error;
mod failure;
mod fusion;
mod ir;
mod runtime;
mod tensor;
#[cfg(target_arch = "wasm32")]
mod web;

pub use device::{Device, DeviceOptions, FaultKind, panics_observed};
pub use error::{ErrorClass, RegistrationError, RequestError};
pub use failure::{
    ExecutionError, FailureId, FailureKind, FailureSummary, Report, Root, Skip, TensorError,
};
pub use ir::TensorId;
pub use runtime::Stats;
pub use tensor::{Operand, Tensor};
