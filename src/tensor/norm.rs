//! Normalization, registered: TF.js's `moments` and `batchNorm`, written in
//! the ops they are made of. Nothing here is a kernel of its own: a mean,
//! a squared difference and a scale fuse like any other expression, and
//! their gradients are the tape's, exact for every input.

use super::ops::{axes_indices, invalid, range, signed};
use crate::error::{RegistrationError, number_f32};
use crate::ir::DType;
use crate::ir::shape::{self, display};
use crate::tensor::Tensor;

type Result<T> = std::result::Result<T, RegistrationError>;

impl Tensor {
    /// TF.js's `moments(x, axis, keepDims)`: the mean and the (biased,
    /// divided by the count) variance over `axes` (all of them when
    /// `None`). An int or bool tensor is cast to float32 first, as TF.js
    /// does. The variance is the mean of squared differences from the
    /// mean, not `E[x²] - E[x]²`: that difference cancels catastrophically
    /// for values far from zero (pixels of 0-255 lose every digit of a
    /// variance near 1).
    #[track_caller]
    pub fn moments(&self, axes: Option<&[isize]>, keep_dims: bool) -> Result<(Tensor, Tensor)> {
        self.device().admit("moments", &[self])?;
        // Checked here, so a bad axis is refused as `moments`'s, not `mean`'s.
        axes_indices("moments", axes, self.rank())?;
        let x = self.as_dtype(DType::Float32)?;
        let kept = x.mean(axes, true)?;
        let variance = x.sub(&kept)?.square()?.mean(axes, keep_dims)?;
        // The kept mean is a kernel's output: the reshape aliases it.
        let mean = kept.reshape(&signed("moments", variance.shape())?)?;
        Ok((mean, variance))
    }

    /// TF.js's `batchNorm(x, mean, variance, offset, scale,
    /// varianceEpsilon)`: `(x - mean) * rsqrt(variance + epsilon) * scale +
    /// offset`, the statistics broadcast against `x` (a per-channel `[c]`
    /// for NHWC images, or `moments(..., keepDims = true)`'s output). Each
    /// must broadcast to `x`'s own shape: a statistic that would grow the
    /// result is a mistake in its axes, refused here rather than computed.
    #[track_caller]
    pub fn batch_norm(
        &self,
        mean: &Tensor,
        variance: &Tensor,
        offset: Option<&Tensor>,
        scale: Option<&Tensor>,
        epsilon: f32,
    ) -> Result<Tensor> {
        let op = "batchNorm";
        let mut operands = vec![self, mean, variance];
        operands.extend(offset);
        operands.extend(scale);
        self.device().admit(op, &operands)?;
        if !(epsilon.is_finite() && epsilon >= 0.0) {
            return Err(range(
                op,
                format!(
                    "varianceEpsilon must be finite and at least 0, got {}",
                    number_f32(epsilon)
                ),
            ));
        }
        if mean.rank() != variance.rank() {
            return Err(invalid(
                op,
                format!(
                    "mean {} and variance {} must have the same rank",
                    display(mean.shape()),
                    display(variance.shape())
                ),
            ));
        }
        let named = [
            ("mean", Some(mean)),
            ("variance", Some(variance)),
            ("offset", offset),
            ("scale", scale),
        ];
        for (what, t) in named {
            let Some(t) = t else { continue };
            let fits =
                shape::broadcast(op, t.shape(), self.shape()).is_ok_and(|b| b == self.shape());
            if !fits {
                return Err(invalid(
                    op,
                    format!(
                        "{what} {} does not broadcast to x {}",
                        display(t.shape()),
                        display(self.shape())
                    ),
                ));
            }
        }
        let float = |t: &Tensor| t.as_dtype(DType::Float32);
        let mut y = float(self)?
            .sub(&float(mean)?)?
            .mul(&float(variance)?.add(epsilon)?.rsqrt()?)?;
        if let Some(scale) = scale {
            y = y.mul(&float(scale)?)?;
        }
        if let Some(offset) = offset {
            y = y.add(&float(offset)?)?;
        }
        Ok(y)
    }
}
