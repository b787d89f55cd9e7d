//! webfusion: a tensor runtime that records ops, runs them fused on the GPU
//! (WebGPU in the browser; Vulkan or Metal natively through wgpu), and
//! keeps execution failures on the tensors they could not write.
//!
//! Data flows one way through the layers, each a folder:
//! `tensor` (validate, infer shapes, register: the one path every op takes)
//! -> `ir` (the recorded op, the queue, shape and layout rules) -> `fusion`
//! (plan blocks, count their bindings, split a block along data dependence)
//! -> `codegen` (WGSL) -> `runtime` (a leaf: the device, WebGPU's own in
//! the browser and wgpu's natively, buffers, pipelines, and `lower`, which
//! records one block's kernels) -> `failure`
//! (the error graph). `device` is the single-threaded cell that owns them
//! all and drives them: a flush plans, decides on the CPU what it can
//! (failed inputs, limits), lowers, submits under error scopes, settles
//! (replaying a failing flush part by part) and lands each block's fate on
//! its outputs; a read asks it whether bytes can be trusted. `autograd`
//! takes gradients over the ops `tensor` tapes, registering the backward
//! pass as ordinary ops; `train` holds variables and optimizers, whose
//! steps replace values through `commit` ops, all or nothing. `web` is the JS API over the same Rust API.
//!
//! Imports run down that list (`device` excepted, which uses every layer
//! below it): `runtime` knows nothing of records or failure bookkeeping, `fusion`
//! nothing of codegen, and `ir` nothing above it.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> { pollster::block_on(async {
//! use webfusion::{Device, DeviceOptions};
//! # let Ok(gpu) = Device::request(DeviceOptions::default()).await else { return Ok(()) };
//! # /*
//! let gpu = Device::request(DeviceOptions::default()).await?;
//! # */
//! let t = gpu.tensor(&[1.0, 2.0, 3.0], None)?.mul(2.0)?;
//! assert_eq!(t.to_vec().await?, vec![2.0, 4.0, 6.0]);
//!
//! // A tensor that cannot exist fails its read, with the chain to the root;
//! // everything else reads normally.
//! let huge = gpu.zeros(&[1 << 18, 1 << 18])?.add(1.0)?;
//! let error = huge.slice(&[0, 0], &[1, 2])?.to_vec().await.unwrap_err();
//! assert_eq!(error.first().unwrap().root.kind, webfusion::FailureKind::Allocation);
//! assert_eq!(t.to_vec().await?, vec![2.0, 4.0, 6.0]);
//! # Ok(()) }) }
//! ```
//!
//! Natively, run futures with any executor (`pollster::block_on` in
//! `examples/basic.rs`; `examples/train.rs` trains a model). In the browser
//! under `wasm-bindgen-test`, Chrome needs WebGPU on: copy this
//! repository's `webdriver.json` (it passes `--enable-unsafe-webgpu`) next
//! to your `Cargo.toml`, or the device request fails with `NoAdapter`;
//! `tests/downstream.rs` is a browser test to copy, with what it needs.

mod autograd;
mod codegen;
mod device;
mod error;
mod failure;
mod fusion;
mod ir;
mod outlined;
mod runtime;
mod tensor;
mod train;
#[cfg(target_arch = "wasm32")]
mod web;

pub use device::{Device, DeviceOptions, FaultKind, Profile, ProfiledKernel, panics_observed};
pub use error::{ErrorClass, RegistrationError, RequestError};
pub use failure::{
    ExecutionError, FailureId, FailureKind, FailureSummary, Report, Root, Skip, TensorError,
};
pub use ir::{DType, TensorId, Values, op_names};
pub use runtime::Stats;
pub use tensor::{Corners, DataFormat, Operand, Padding, Split, Tensor};
pub use train::{Optimizer, Variable, variable_grads};
