//! The tensor handle and registration: validate the arguments, infer the
//! output shape, queue the op. Nothing here touches the GPU.

mod conv;
mod norm;
mod ops;
mod pool;
mod resize;

pub use conv::{DataFormat, Padding};
pub use ops::Split;
pub use resize::Corners;
pub(crate) mod tape;
use crate::ir::shape;

use std::future::Future;
use std::rc::Rc;

use crate::device::Device;
use crate::outlined::Outlined;
use std::cell::RefCell;
use std::panic::Location;

use crate::device::read::ReadStep;
use crate::error::{ErrorClass, RegistrationError, number};
use crate::failure::{Report, TensorError};
use crate::ir::{DType, OpIr, OpKind, TensorId, Values};

/// A tensor on a device. Its shape is known at once; its values are computed
/// when something reads them. Cloning gives another handle to the same
/// tensor; the device frees its memory when the last handle goes.
#[derive(Clone)]
pub struct Tensor {
    handle: Outlined<Rc<Handle>>,
}

/// What a tensor handle holds; the device releases the tensor when the last
/// one is dropped.
struct Handle {
    device: Device,
    id: TensorId,
    shape: Vec<usize>,
    dtype: DType,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.device.drop_handle(self.id);
    }
}

/// The other operand of a binary op: a tensor, or a number broadcast to every
/// element.
pub enum Operand<'a> {
    Tensor(&'a Tensor),
    Scalar(f32),
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Self {
        Operand::Tensor(t)
    }
}

impl From<f32> for Operand<'_> {
    fn from(v: f32) -> Self {
        Operand::Scalar(v)
    }
}

impl Device {
    /// A float32 tensor holding `values` in row-major order. `shape`
    /// defaults to `[values.len()]`. The values are copied: recording is
    /// deferred, and the flush that uploads them comes after the borrow
    /// ends. On a real GPU that copy is what an end-to-end upload costs
    /// above wgpu's own (`write_buffer`'s staging): 0.39 ms of W1's 1.39 on
    /// an H100 (`examples/zero_copy_timing.rs`).
    #[track_caller]
    pub fn tensor(
        &self,
        values: &[f32],
        shape: Option<&[usize]>,
    ) -> Result<Tensor, RegistrationError> {
        self.tensor_of(Values::float32(values), shape)
    }

    /// A tensor of `values`' dtype holding them in row-major order
    /// (`Values::int32(&[1, 2])`). `shape` defaults to `[values.len()]`.
    #[track_caller]
    pub fn tensor_of(
        &self,
        values: Values,
        shape: Option<&[usize]>,
    ) -> Result<Tensor, RegistrationError> {
        let shape = shape.map_or_else(|| vec![values.len()], <[usize]>::to_vec);
        shape::check_size("tensor", &shape)?;
        let numel = shape::numel(&shape);
        if numel != values.len() {
            return Err(RegistrationError::new(
                "tensor",
                ErrorClass::Range,
                format!(
                    "{} values do not fill shape {} ({numel} elements)",
                    values.len(),
                    shape::display(&shape)
                ),
            ));
        }
        let dtype = values.dtype;
        self.record(OpKind::Upload(values), &[], shape, dtype)
    }

    /// A tensor of `shape` filled with 0.
    #[track_caller]
    pub fn zeros(&self, shape: &[usize]) -> Result<Tensor, RegistrationError> {
        self.full(shape, 0.0)
    }

    /// A tensor of `shape` filled with 1.
    #[track_caller]
    pub fn ones(&self, shape: &[usize]) -> Result<Tensor, RegistrationError> {
        self.full(shape, 1.0)
    }

    /// A float32 tensor of `shape` filled with `value`.
    #[track_caller]
    pub fn full(&self, shape: &[usize], value: f32) -> Result<Tensor, RegistrationError> {
        self.fill(shape, value.into(), DType::Float32)
    }

    /// A tensor of `shape` and `dtype` filled with `value` (TF.js's
    /// `fill`): for an int32, a whole number in its range; for a bool, any
    /// number (true where non-zero).
    #[track_caller]
    pub fn fill(
        &self,
        shape: &[usize],
        value: f64,
        dtype: DType,
    ) -> Result<Tensor, RegistrationError> {
        self.fill_as("fill", shape, value, dtype)
    }

    /// `fill`, a refusal naming `op` (the JS `full`, `zeros`, `ones`).
    #[track_caller]
    pub(crate) fn fill_as(
        &self,
        op: &'static str,
        shape: &[usize],
        value: f64,
        dtype: DType,
    ) -> Result<Tensor, RegistrationError> {
        let value = match dtype {
            DType::Float32 => value as f32 as f64,
            DType::Int32
                if value.fract() == 0.0 && (i32::MIN as f64..=i32::MAX as f64).contains(&value) =>
            {
                value
            }
            DType::Int32 => {
                return Err(RegistrationError::new(
                    op,
                    ErrorClass::Range,
                    format!("{} is not an int32", number(value)),
                ));
            }
            DType::Bool => f64::from(u8::from(value != 0.0)),
        };
        self.record(OpKind::Fill(value), &[], shape.to_vec(), dtype)
    }

    /// Queues an op whose arguments were validated, and returns the handle to
    /// its output. The one registration path, for Rust and JS alike, and the
    /// home of the checks every op shares: each operand must live on this
    /// device (the receiver, not merely each other: `two.cat([a1, b1])` is
    /// refused), the device must not be lost (nothing queued on it could
    /// run), and the output's size must be nameable. Nothing is queued for an
    /// op that fails a check.
    #[track_caller]
    pub(crate) fn record(
        &self,
        kind: OpKind,
        inputs: &[&Tensor],
        shape: Vec<usize>,
        dtype: DType,
    ) -> Result<Tensor, RegistrationError> {
        self.record_op(kind, inputs, shape, dtype, false)
    }

    /// `record`, for a composite op's intermediate the numerics checks
    /// skip (`OpIr::unchecked` says which, and why).
    #[track_caller]
    pub(crate) fn record_unchecked(
        &self,
        kind: OpKind,
        inputs: &[&Tensor],
        shape: Vec<usize>,
        dtype: DType,
    ) -> Result<Tensor, RegistrationError> {
        self.record_op(kind, inputs, shape, dtype, true)
    }

    #[track_caller]
    fn record_op(
        &self,
        kind: OpKind,
        inputs: &[&Tensor],
        shape: Vec<usize>,
        dtype: DType,
        unchecked: bool,
    ) -> Result<Tensor, RegistrationError> {
        let op = kind.name();
        self.admit(op, inputs)?;
        shape::check_size(op, &shape)?;
        let caller = Location::caller();
        let output = TensorId::next();
        // Kept only while a gradient is being taken: a clone per op otherwise.
        let taped = tape::recording().then(|| kind.clone());
        self.with_state(|state| {
            // Counted here, not in `register`: a read's own `copy` is no op
            // the program registered.
            state.stats.ops_registered += 1;
            let site = registration_site(state.capture_stacks, caller);
            state.register(
                OpIr {
                    kind,
                    inputs: inputs.iter().map(|t| t.id()).collect(),
                    output,
                    shape: shape.clone(),
                    dtype,
                    proven_finite: false,
                    unchecked,
                },
                site,
            );
        });
        let output = self.handle(output, shape, dtype);
        if let Some(kind) = taped {
            tape::record(&kind, inputs, &output);
        }
        Ok(output)
    }

    /// The checks every registration shares, under the name of the op the
    /// caller asked for: each operand lives on this device (the receiver,
    /// not merely each other), and the device is not lost. `record` runs
    /// them for every op; an op built from others (`stack`, `softmax`,
    /// `flatten`) runs them first under its own name, so a refused call
    /// names what was called and queues nothing.
    pub(crate) fn admit(
        &self,
        op: &'static str,
        inputs: &[&Tensor],
    ) -> Result<(), RegistrationError> {
        for (position, input) in inputs.iter().enumerate() {
            if !input.device().same(self) {
                return Err(RegistrationError::new(
                    op,
                    ErrorClass::Other,
                    format!(
                        "operand {position} ({}) lives on {}, but the op runs on {}; move it \
                         with to()",
                        input.id(),
                        input.device().label(),
                        self.label()
                    ),
                ));
            }
        }
        self.with_state(|state| state.check_alive(op))
    }

    fn handle(&self, id: TensorId, shape: Vec<usize>, dtype: DType) -> Tensor {
        Tensor {
            handle: Outlined::new(Rc::new(Handle {
                device: self.clone(),
                id,
                shape,
                dtype,
            })),
        }
    }
}

thread_local! {
    /// The registration site the JS layer hands over (the user's JS frame)
    /// for the ops registered inside one call of its API (`with_site`).
    static SITE: RefCell<Option<Rc<str>>> = const { RefCell::new(None) };
}

/// Runs `f` with `site` as the registration site of every op it registers
/// (a JS call may register several: `softmax` is three ops), and restores
/// the site before it afterwards whether `f` succeeded or not, so no later
/// op can inherit it. Restored, not cleared: a call that runs the user's
/// code (`minimize(f)`) registers ops after `f`'s own calls returned.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) fn with_site<R>(site: Option<String>, f: impl FnOnce() -> R) -> R {
    let before = enter_site(site);
    let result = f();
    leave_site(before);
    result
}

/// Sets the handed-over site, returning the one before. This and
/// `leave_site` are not inlined: each of the JS layer's two hundred entry
/// points calls `with_site`, and a copy of them in each (the string made
/// shared, the one restored dropped) was 12 KB of the module, for no speed.
#[inline(never)]
fn enter_site(site: Option<String>) -> Option<Rc<str>> {
    SITE.with(|s| s.replace(site.map(Rc::from)))
}

/// Restores the site `enter_site` replaced.
#[inline(never)]
fn leave_site(before: Option<Rc<str>>) {
    SITE.with(|s| s.replace(before));
}

/// Where an op is being registered: the site the JS layer handed over, or
/// the Rust caller, when stacks are captured.
fn registration_site(capture: bool, caller: &Location<'_>) -> Option<Rc<str>> {
    if !capture {
        return None;
    }
    let handed = SITE.with(|s| s.borrow().clone());
    handed.or_else(|| Some(Rc::from(caller.to_string())))
}

impl Tensor {
    pub fn id(&self) -> TensorId {
        self.handle.id
    }

    pub fn shape(&self) -> &[usize] {
        &self.handle.shape
    }

    pub fn dtype(&self) -> DType {
        self.handle.dtype
    }

    pub fn rank(&self) -> usize {
        self.handle.shape.len()
    }

    pub fn size(&self) -> usize {
        shape::numel(&self.handle.shape)
    }

    pub fn device(&self) -> &Device {
        &self.handle.device
    }

    /// The tensor's values, row-major, as floats (an int32 is exact within
    /// ±2^24; `values` reads every dtype exactly). Runs whatever is queued
    /// first. Fails with the whole chain back to the root when its bytes
    /// were never written.
    #[track_caller]
    pub fn to_vec(
        &self,
    ) -> impl std::future::Future<Output = Result<Vec<f32>, TensorError>> + 'static {
        let asked_at = Location::caller().to_string();
        let tensor = self.clone();
        async move { Ok(tensor.read(Some(asked_at)).await?.into_f32()) }
    }

    /// The tensor's values, row-major, in its dtype: `to_vec` without the
    /// conversion to floats.
    #[track_caller]
    pub fn values(
        &self,
    ) -> impl std::future::Future<Output = Result<Values, TensorError>> + 'static {
        let asked_at = Location::caller().to_string();
        let tensor = self.clone();
        async move { tensor.read(Some(asked_at)).await }
    }

    /// The tensor's values now, when the host can answer without the GPU:
    /// `Some` of its values or of its failure when small work on values
    /// the program gave computed it (or its failure is final), `None` when
    /// its bytes are on the GPU, whose reads are asynchronous. Runs
    /// whatever it depends on first, as a read does.
    #[track_caller]
    pub fn values_now(&self) -> Option<Result<Values, TensorError>> {
        let asked_at = Some(Location::caller().to_string());
        self.values_on_host(asked_at)
    }

    pub(crate) fn values_on_host(
        &self,
        asked_at: Option<String>,
    ) -> Option<Result<Values, TensorError>> {
        match self
            .device()
            .with_state(|state| state.read_on_host(self.id()))?
        {
            ReadStep::Ready(values) => Some(Ok(values)),
            ReadStep::Failed(failures) => Some(Err(self.read_error(failures, asked_at))),
            _ => None,
        }
    }

    fn read_error(&self, failures: Vec<Report>, asked_at: Option<String>) -> TensorError {
        TensorError {
            tensor: self.id(),
            shape: self.shape().to_vec(),
            failures,
            asked_at,
        }
    }

    pub(crate) async fn read(&self, asked_at: Option<String>) -> Result<Values, TensorError> {
        let fail = |failures| self.read_error(failures, asked_at.clone());
        // The tensor whose bytes are read: this one, or its row-major copy
        // (a handle, so the copy is released however the read ends).
        let mut copy: Option<Tensor> = None;
        let mut target = self.id();
        let mut step = self.device().with_state(|state| state.read(target));
        loop {
            step = match step {
                ReadStep::Wait(scopes) => {
                    crate::runtime::resolved(scopes).await;
                    self.device().with_state(|state| state.reread(target))
                }
                ReadStep::Via(id) => {
                    target = id;
                    copy = Some(
                        self.device()
                            .handle(id, self.shape().to_vec(), self.dtype()),
                    );
                    self.device().with_state(|state| state.reread(target))
                }
                ReadStep::Failed(reports) => return Err(fail(reports)),
                ReadStep::Ready(values) => return Ok(values),
                ReadStep::Go(pending) => {
                    let words = pending.await;
                    drop(copy);
                    return match words {
                        Ok(words) => Ok(Values::new(self.dtype(), words)),
                        Err(why) => {
                            let report = self
                                .device()
                                .with_state(|state| state.internal_report(self.id(), &why));
                            Err(fail(vec![report]))
                        }
                    };
                }
            };
        }
    }

    /// This tensor on `device`. A tainted tensor arrives tainted: the copy
    /// carries each of its failures onto `device`, the report naming the
    /// device it came from. Refused at once (like any registration) when
    /// `device` is lost; the move itself waits for this tensor's values.
    pub fn to(
        &self,
        device: &Device,
    ) -> Result<impl Future<Output = Result<Tensor, RegistrationError>> + 'static, RegistrationError>
    {
        device.admit("to", &[])?;
        let (tensor, device) = (self.clone(), device.clone());
        Ok(async move {
            if tensor.device().same(&device) {
                return Ok(tensor);
            }
            match tensor.read(None).await {
                Ok(values) => device.tensor_of(values, Some(tensor.shape())),
                Err(error) => {
                    let id = TensorId::next();
                    let from = tensor.device().label();
                    device.with_state(|state| {
                        state.adopt_failures(
                            id,
                            tensor.shape().to_vec(),
                            tensor.dtype(),
                            &error,
                            &from,
                        )
                    });
                    Ok(device.handle(id, tensor.shape().to_vec(), tensor.dtype()))
                }
            }
        })
    }
}
