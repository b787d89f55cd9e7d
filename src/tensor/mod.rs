//! The tensor handle and registration: validate the arguments, infer the
//! output shape, queue the op. Nothing here touches the GPU.

mod ops;
pub mod shape;

use std::rc::Rc;

use crate::device::Device;
use crate::error::{ErrorClass, RegistrationError, TensorError};
use crate::ir::{OpIr, OpKind, TensorId};

/// A tensor on a device. Its shape is known at once; its values are computed
/// when something reads them. Cloning gives another handle to the same
/// tensor; the device frees its memory when the last handle goes.
#[derive(Clone)]
pub struct Tensor {
    handle: Rc<Handle>,
}

/// What a tensor handle holds; the device releases the tensor when the last
/// one is dropped.
pub(crate) struct Handle {
    device: Device,
    id: TensorId,
    shape: Vec<usize>,
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
    /// A tensor holding `values` in row-major order. `shape` defaults to
    /// `[values.len()]`.
    pub fn tensor(
        &self,
        values: &[f32],
        shape: Option<&[usize]>,
    ) -> Result<Tensor, RegistrationError> {
        let shape = shape.map_or_else(|| vec![values.len()], <[usize]>::to_vec);
        let numel = shape::checked_numel("tensor", &shape)?;
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
        Ok(self.record(OpKind::Upload(values.into()), vec![], shape))
    }

    /// A tensor of `shape` filled with 0.
    pub fn zeros(&self, shape: &[usize]) -> Result<Tensor, RegistrationError> {
        self.full(shape, 0.0)
    }

    /// A tensor of `shape` filled with 1.
    pub fn ones(&self, shape: &[usize]) -> Result<Tensor, RegistrationError> {
        self.full(shape, 1.0)
    }

    /// A tensor of `shape` filled with `value`.
    pub fn full(&self, shape: &[usize], value: f32) -> Result<Tensor, RegistrationError> {
        let kind = OpKind::Fill(value);
        shape::checked_numel(kind.name(), shape)?;
        Ok(self.record(kind, vec![], shape.to_vec()))
    }

    /// Queues an op whose arguments were validated, and returns the handle to
    /// its output.
    pub(crate) fn record(&self, kind: OpKind, inputs: Vec<TensorId>, shape: Vec<usize>) -> Tensor {
        let output = TensorId::next();
        self.with_state(|state| {
            state.register(OpIr {
                kind,
                inputs,
                output,
                shape: shape.clone(),
            })
        });
        Tensor {
            handle: Rc::new(Handle {
                device: self.clone(),
                id: output,
                shape,
            }),
        }
    }
}

impl Tensor {
    /// A reference that does not keep the tensor alive (the JS layer's table
    /// of live tensors).
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    pub(crate) fn downgrade(&self) -> std::rc::Weak<Handle> {
        Rc::downgrade(&self.handle)
    }

    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    pub(crate) fn from_handle(handle: Rc<Handle>) -> Tensor {
        Tensor { handle }
    }

    pub fn id(&self) -> TensorId {
        self.handle.id
    }

    pub fn shape(&self) -> &[usize] {
        &self.handle.shape
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

    /// The tensor's values, row-major. Runs whatever is queued first.
    pub async fn to_vec(&self) -> Result<Vec<f32>, TensorError> {
        let fail = |reason: String| TensorError {
            tensor: self.id(),
            shape: self.shape().to_vec(),
            reason,
        };
        let pending = self.device().with_state(|state| state.read(self.id()));
        match pending {
            Some(read) => read.await.map_err(fail),
            None => Err(fail("its bytes were never written".to_string())),
        }
    }
}
