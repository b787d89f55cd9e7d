//! Pooling, registered: TF.js's `maxPool` and `avgPool` over NHWC images,
//! their windows placed as a convolution's (`ConvGeometry`), and the
//! gradient pass the tape registers for them.

use super::conv::{Padding, image_dims, images, output_size, restored, steps};
use super::ops::{float_only, range};
use crate::error::RegistrationError;
use crate::ir::shape;
use crate::ir::{ConvGeometry, DType, OpKind, PoolOp};
use crate::tensor::{DataFormat, Tensor};

type Result<T> = std::result::Result<T, RegistrationError>;

impl Tensor {
    /// TF.js's `maxPool(x, filterSize, strides, pad)`: the largest element
    /// of each `size` window of these NHWC images (rank 3: one image), per
    /// channel. Its gradient goes to each window's first largest element.
    #[track_caller]
    pub fn max_pool(&self, size: [usize; 2], strides: [usize; 2], pad: Padding) -> Result<Tensor> {
        self.pool(PoolOp::Max, size, strides, pad)
    }

    /// TF.js's `avgPool(x, filterSize, strides, pad)`: the mean of each
    /// `size` window's elements inside the images (padding is not counted),
    /// per channel. A window wholly in a pad as wide as it has no element:
    /// its mean is 0 and its max -Infinity, as TF.js's are.
    #[track_caller]
    pub fn avg_pool(&self, size: [usize; 2], strides: [usize; 2], pad: Padding) -> Result<Tensor> {
        self.pool(PoolOp::Avg, size, strides, pad)
    }

    #[track_caller]
    fn pool(
        &self,
        op: PoolOp,
        size: [usize; 2],
        strides: [usize; 2],
        pad: Padding,
    ) -> Result<Tensor> {
        let name = match op {
            PoolOp::Max => "maxPool",
            PoolOp::Avg => "avgPool",
        };
        self.device().admit(name, &[self])?;
        float_only(name, self)?;
        steps(name, strides, [1, 1])?;
        if size.contains(&0) {
            return Err(range(
                name,
                format!("filterSize {size:?} must each be at least 1"),
            ));
        }
        let ([n, h, w, c], single) = image_dims(name, self.shape(), DataFormat::Nhwc)?;
        let (oh, top) = output_size(name, "height", (h, size[0], strides[0], 1), pad, 0)?;
        let (ow, left) = output_size(name, "width", (w, size[1], strides[1], 1), pad, 1)?;
        let shape = vec![n, oh, ow, c];
        shape::check_size(name, &shape)?;
        let geometry = ConvGeometry {
            stride: strides,
            dilation: [1, 1],
            pad: [top, left],
        };
        let x = images(self, DataFormat::Nhwc, single)?;
        let y = self.device().record(
            OpKind::Pool { op, size, geometry },
            &[&x],
            shape,
            DType::Float32,
        )?;
        restored(y, DataFormat::Nhwc, single)
    }

    /// The gradient `g` of a pool of these images sends them: what the tape
    /// registers (a max reads the images, a mean only their shape).
    #[track_caller]
    pub(crate) fn pool_grad(
        &self,
        g: &Tensor,
        op: PoolOp,
        size: [usize; 2],
        geometry: ConvGeometry,
    ) -> Result<Tensor> {
        let inputs = match op {
            PoolOp::Max => vec![self, g],
            PoolOp::Avg => vec![g],
        };
        self.device().record(
            OpKind::PoolGrad { op, size, geometry },
            &inputs,
            self.shape().to_vec(),
            DType::Float32,
        )
    }
}
