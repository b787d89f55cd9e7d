//! Convolutions, registered: TF.js's `conv2d`, `conv2dTranspose` and
//! `conv1d`, their arguments checked and their geometry (strides,
//! dilations, the pads before the images) fixed here, so every pass the
//! kernels and the gradients run is an `OpKind::Conv` over NHWC images and
//! an HWIO filter. NCHW is a view either side of it (a transpose read
//! through its layout), never a copy.

use super::ops::{float_only, invalid, range};
use crate::error::RegistrationError;
use crate::ir::shape::{self, display};
use crate::ir::{ConvGeometry, ConvPass, DType, OpKind};
use crate::tensor::Tensor;

type Result<T> = std::result::Result<T, RegistrationError>;

/// TF.js's `pad` argument: `'valid'`, `'same'`, or explicit rows and
/// columns before and after (`[[top, bottom], [left, right]]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    Valid,
    /// TensorFlow's rule: the output is `ceil(size / stride)`; the padding
    /// that takes is split with the extra row or column after.
    Same,
    Explicit([[usize; 2]; 2]),
}

/// Where a convolution's channels sit: TF.js's `dataFormat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataFormat {
    Nhwc,
    Nchw,
}

/// One spatial dim's output size and the pad before it, for `size` input
/// elements, a filter of `k` taps `dilation` apart, and `stride`.
pub(super) fn output_size(
    op: &'static str,
    which: &str,
    (size, k, stride, dilation): (usize, usize, usize, usize),
    pad: Padding,
    axis: usize,
) -> Result<(usize, usize)> {
    let reach = (k - 1) * dilation + 1;
    let (out, before) = match pad {
        Padding::Same => {
            let out = size.div_ceil(stride);
            let total = ((out.max(1) - 1) * stride + reach).saturating_sub(size);
            (out, total / 2)
        }
        Padding::Valid | Padding::Explicit(_) => {
            let [before, after] = match pad {
                Padding::Explicit(p) => p[axis],
                _ => [0, 0],
            };
            let padded = size + before + after;
            if reach > padded {
                return Err(range(
                    op,
                    format!(
                        "the filter's {which} ({k} taps, dilation {dilation}: {reach} wide) is larger \
                         than the padded input's ({padded})"
                    ),
                ));
            }
            ((padded - reach) / stride + 1, before)
        }
    };
    Ok((out, before))
}

/// Checks the strides and dilations TF.js's way: each at least 1, and not
/// both above 1.
pub(super) fn steps(op: &'static str, strides: [usize; 2], dilations: [usize; 2]) -> Result<()> {
    if strides.contains(&0) || dilations.contains(&0) {
        return Err(range(
            op,
            format!("strides {strides:?} and dilations {dilations:?} must each be at least 1"),
        ));
    }
    if strides.iter().any(|&s| s > 1) && dilations.iter().any(|&d| d > 1) {
        return Err(range(
            op,
            format!(
                "strides {strides:?} and dilations {dilations:?} cannot both be above 1 (as in TF.js)"
            ),
        ));
    }
    Ok(())
}

/// The NHWC dims of images of `shape` in `format` (rank 3 is one image),
/// and whether it was one image. Only checks: nothing is registered, so a
/// refused call queues nothing.
pub(super) fn image_dims(
    op: &'static str,
    shape: &[usize],
    format: DataFormat,
) -> Result<([usize; 4], bool)> {
    let (single, d) = match shape {
        [a, b, c] => (true, [1, *a, *b, *c]),
        [n, a, b, c] => (false, [*n, *a, *b, *c]),
        _ => {
            return Err(range(
                op,
                format!(
                    "the input must be of rank 4 (or 3: one image), got {}",
                    display(shape)
                ),
            ));
        }
    };
    let [n, a, b, c] = d;
    Ok(match format {
        DataFormat::Nhwc => ([n, a, b, c], single),
        DataFormat::Nchw => ([n, b, c, a], single),
    })
}

/// `t` as NHWC images of rank 4: views, registered once the call is known
/// to be good.
pub(super) fn images(t: &Tensor, format: DataFormat, single: bool) -> Result<Tensor> {
    let batched = if single { t.expand_dims(0)? } else { t.clone() };
    match format {
        DataFormat::Nhwc => Ok(batched),
        DataFormat::Nchw => batched.transpose(Some(&[0, 2, 3, 1])),
    }
}

/// The NHWC result `y` in the caller's format, one image again if it was.
pub(super) fn restored(y: Tensor, format: DataFormat, single: bool) -> Result<Tensor> {
    let y = match format {
        DataFormat::Nhwc => y,
        DataFormat::Nchw => y.transpose(Some(&[0, 3, 1, 2]))?,
    };
    if single { y.squeeze(Some(&[0])) } else { Ok(y) }
}

/// Refuses a filter that is not `[height, width, in, out]`, or that has no
/// tap (a window of no element has no output to give).
fn filter_rank(op: &'static str, filter: &[usize]) -> Result<()> {
    if filter.len() != 4 {
        return Err(range(
            op,
            format!(
                "the filter must be of rank 4 ([height, width, inChannels, outChannels]), got {}",
                display(filter)
            ),
        ));
    }
    if filter[0] == 0 || filter[1] == 0 {
        return Err(range(
            op,
            format!(
                "the filter {} must be at least 1 high and 1 wide",
                display(filter)
            ),
        ));
    }
    Ok(())
}

/// A `conv2d`'s output shape and geometry for NHWC images of dims `x` and
/// a filter of `filter` (its rank checked here); refuses what TF.js
/// refuses. Only checks.
fn forward(
    op: &'static str,
    [n, h, w, c]: [usize; 4],
    filter: &[usize],
    strides: [usize; 2],
    pad: Padding,
    dilations: [usize; 2],
) -> Result<(Vec<usize>, ConvGeometry)> {
    filter_rank(op, filter)?;
    steps(op, strides, dilations)?;
    let [kh, kw, fc, o] = dims(filter);
    if fc != c {
        return Err(invalid(
            op,
            format!(
                "the input has {c} channels but the filter {} takes {fc}",
                display(filter)
            ),
        ));
    }
    let (oh, top) = output_size(op, "height", (h, kh, strides[0], dilations[0]), pad, 0)?;
    let (ow, left) = output_size(op, "width", (w, kw, strides[1], dilations[1]), pad, 1)?;
    let shape = vec![n, oh, ow, o];
    shape::check_size(op, &shape)?;
    let geometry = ConvGeometry {
        stride: strides,
        dilation: dilations,
        pad: [top, left],
    };
    Ok((shape, geometry))
}

impl Tensor {
    /// TF.js's `conv2d(x, filter, strides, pad, dataFormat, dilations)`:
    /// these images (`[n, h, w, c]`, or `[n, c, h, w]` for NCHW; rank 3 is
    /// one image) convolved with `filter` (`[kh, kw, c, out]`). An implicit
    /// matrix product on the matmul's tiles: the windows are read where
    /// they lie (no im2col buffer), and the elementwise ops that follow (a
    /// bias, an activation, a residual add) run in its kernel.
    #[track_caller]
    pub fn conv2d(
        &self,
        filter: &Tensor,
        strides: [usize; 2],
        pad: Padding,
        format: DataFormat,
        dilations: [usize; 2],
    ) -> Result<Tensor> {
        let op = "conv2d";
        self.device().admit(op, &[self, filter])?;
        float_only(op, self)?;
        float_only(op, filter)?;
        let (x, single) = image_dims(op, self.shape(), format)?;
        let (shape, geometry) = forward(op, x, filter.shape(), strides, pad, dilations)?;
        let y = images(self, format, single)?.conv_pass(
            ConvPass::Forward,
            (geometry, false),
            filter,
            shape,
        )?;
        restored(y, format, single)
    }

    /// TF.js's `depthwiseConv2d(x, filter, strides, pad, dataFormat,
    /// dilations)`: each input channel convolved with its own `mult`
    /// filters (`filter` `[kh, kw, c, mult]`), output channel `c * mult +
    /// m`. A kernel of its own (`codegen::depthwise`), one thread per
    /// output summing its window's taps: with one input channel per output
    /// there is no product to tile on the matmul's. Like a convolution it
    /// anchors what follows it (`.add(bias).relu()` is the same kernel),
    /// and its gradients are its other two passes, kernels of their own.
    #[track_caller]
    pub fn depthwise_conv2d(
        &self,
        filter: &Tensor,
        strides: [usize; 2],
        pad: Padding,
        format: DataFormat,
        dilations: [usize; 2],
    ) -> Result<Tensor> {
        let op = "depthwiseConv2d";
        self.device().admit(op, &[self, filter])?;
        float_only(op, self)?;
        float_only(op, filter)?;
        filter_rank(op, filter.shape())?;
        let ([n, h, w, c], single) = image_dims(op, self.shape(), format)?;
        let [kh, kw, fc, mult] = dims(filter.shape());
        let Some(out_channels) = fc.checked_mul(mult) else {
            return Err(range(
                op,
                format!("{fc} x {mult} output channels are too many"),
            ));
        };
        let (shape, geometry) = forward(
            op,
            [n, h, w, c],
            &[kh, kw, fc, out_channels],
            strides,
            pad,
            dilations,
        )?;
        let x = images(self, format, single)?;
        let y = x.conv_pass(ConvPass::Forward, (geometry, true), filter, shape)?;
        restored(y, format, single)
    }

    /// TF.js's `conv1d(x, filter, stride, pad, dataFormat, dilation)`: of
    /// `[n, width, c]` (or `[n, c, width]` for NCW; rank 2 is one signal)
    /// with `filter` `[k, c, out]`, a `conv2d` of images one row high.
    #[track_caller]
    pub fn conv1d(
        &self,
        filter: &Tensor,
        stride: usize,
        pad: Padding,
        format: DataFormat,
        dilation: usize,
    ) -> Result<Tensor> {
        let op = "conv1d";
        self.device().admit(op, &[self, filter])?;
        float_only(op, self)?;
        float_only(op, filter)?;
        let (rank, frank) = (self.rank(), filter.rank());
        if !(rank == 2 || rank == 3) || frank != 3 {
            return Err(range(
                op,
                format!(
                    "the input must be of rank 3 (or 2: one signal) and the filter [width, inChannels, \
                     outChannels], got {} and {}",
                    display(self.shape()),
                    display(filter.shape())
                ),
            ));
        }
        // One row high: a height dim of 1 before the width (after the
        // channels in NCW, which conv2d's NCHW reads the same way).
        let row_axis = match format {
            DataFormat::Nhwc => rank - 2,
            DataFormat::Nchw => rank - 1,
        };
        let mut rows = self.shape().to_vec();
        rows.insert(row_axis, 1);
        let mut taps = filter.shape().to_vec();
        taps.insert(0, 1);
        let pad = match pad {
            Padding::Explicit([p, _]) => Padding::Explicit([[0, 0], p]),
            other => other,
        };
        let (x, single) = image_dims(op, &rows, format)?;
        let (shape, geometry) = forward(op, x, &taps, [1, stride], pad, [1, dilation])?;
        let images2d = images(&self.expand_dims(row_axis as isize)?, format, single)?;
        let y = images2d.conv_pass(
            ConvPass::Forward,
            (geometry, false),
            &filter.expand_dims(0)?,
            shape,
        )?;
        restored(y, format, single)?.squeeze(Some(&[row_axis as isize]))
    }

    /// TF.js's `conv2dTranspose(x, filter, outputShape, strides, pad)`:
    /// the gradient of a `conv2d` with that geometry for its images, of
    /// these images `[n, h, w, out]` (rank 3: one) and `filter` `[kh, kw,
    /// c, out]`, giving `output_shape` (`[n, oh, ow, c]`, NHWC). The
    /// geometry must be one a `conv2d` of `output_shape` gives these
    /// images' size with.
    #[track_caller]
    pub fn conv2d_transpose(
        &self,
        filter: &Tensor,
        output_shape: &[usize],
        strides: [usize; 2],
        pad: Padding,
    ) -> Result<Tensor> {
        let op = "conv2dTranspose";
        self.device().admit(op, &[self, filter])?;
        float_only(op, self)?;
        float_only(op, filter)?;
        filter_rank(op, filter.shape())?;
        steps(op, strides, [1, 1])?;
        let ([n, h, w, o], single) = image_dims(op, self.shape(), DataFormat::Nhwc)?;
        let out: Vec<usize> = match (single, output_shape.len()) {
            (true, 3) => [&[1], output_shape].concat(),
            (_, 4) => output_shape.to_vec(),
            _ => {
                return Err(range(
                    op,
                    format!(
                        "outputShape {output_shape:?} must be of rank {}",
                        if single { 3 } else { 4 }
                    ),
                ));
            }
        };
        let [kh, kw, c, fo] = dims(filter.shape());
        let (oh, top) = output_size(op, "height", (out[1], kh, strides[0], 1), pad, 0)?;
        let (ow, left) = output_size(op, "width", (out[2], kw, strides[1], 1), pad, 1)?;
        if fo != o || out[0] != n || out[3] != c || (oh, ow) != (h, w) {
            return Err(invalid(
                op,
                format!(
                    "outputShape {output_shape:?} and the filter {} do not fit the input {}: a conv2d of \
                     outputShape with this geometry gives [{}, {oh}, {ow}, {fo}]",
                    display(filter.shape()),
                    display(self.shape()),
                    out[0]
                ),
            ));
        }
        shape::check_size(op, &out)?;
        let geometry = ConvGeometry {
            stride: strides,
            dilation: [1, 1],
            pad: [top, left],
        };
        let dy = images(self, DataFormat::Nhwc, single)?;
        let y = dy.conv_pass(ConvPass::Input, (geometry, false), filter, out)?;
        restored(y, DataFormat::Nhwc, single)
    }

    /// Pass `pass` of a convolution of `geometry`, this tensor its first
    /// input and `other` its second (see `ConvPass`), giving `shape`. What
    /// the gradients register: their operands were checked by the forward
    /// pass.
    #[track_caller]
    pub(crate) fn conv_pass(
        &self,
        pass: ConvPass,
        (geometry, depthwise): (ConvGeometry, bool),
        other: &Tensor,
        shape: Vec<usize>,
    ) -> Result<Tensor> {
        self.device().record(
            OpKind::Conv {
                pass,
                geometry,
                depthwise,
            },
            &[self, other],
            shape,
            DType::Float32,
        )
    }
}

/// A rank-4 shape's dims (its rank was checked).
fn dims(shape: &[usize]) -> [usize; 4] {
    let mut d = [0; 4];
    for (to, from) in d.iter_mut().zip(shape) {
        *to = *from;
    }
    d
}
