//! The image ops of the `Tensor` class: TF.js's `conv2d`, `conv1d`,
//! `depthwiseConv2d`, `conv2dTranspose`, `maxPool`, `avgPool`,
//! `resizeBilinear` and `resizeNearestNeighbor`, their arguments read as
//! TF.js reads them.

use wasm_bindgen::prelude::*;

use super::args;
use super::registry::register;
use super::tensor::JsTensor;
use crate::{Corners, DataFormat, Padding, RegistrationError, Tensor};

#[wasm_bindgen(js_class = Tensor)]
impl JsTensor {
    /// `conv2d(filter, strides, pad, dataFormat = 'NHWC', dilations = 1)`:
    /// TF.js's `conv2d(x, filter, ...)` of these images (`[n, h, w, c]`, or
    /// `[n, c, h, w]` for NCHW; rank 3 is one image) and `filter` (`[kh,
    /// kw, c, out]`). TF.js's `dimRoundingMode` is not taken.
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn conv2d(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] filter: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number | [number, number]")] strides: JsValue,
        #[wasm_bindgen(
            unchecked_param_type = "'valid' | 'same' | number | [[number, number], [number, number], [number, number], [number, number]]"
        )]
        pad: JsValue,
        #[wasm_bindgen(js_name = dataFormat, unchecked_optional_param_type = "'NHWC' | 'NCHW'")]
        data_format: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number | [number, number]")]
        dilations: JsValue,
    ) -> Result<JsValue, JsValue> {
        let geometry = [&strides, &pad, &data_format, &dilations];
        conv2d(self, "conv2d", &filter, geometry, Tensor::conv2d)
    }

    /// `depthwiseConv2d(filter, strides, pad, dataFormat = 'NHWC',
    /// dilations = 1)`: TF.js's `depthwiseConv2d(x, filter, ...)`, each of
    /// the `c` channels convolved with its own filters (`filter` `[kh, kw,
    /// c, multiplier]`), giving `c * multiplier` channels.
    #[wasm_bindgen(js_name = depthwiseConv2d, unchecked_return_type = "Tensor")]
    pub fn depthwise_conv2d(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] filter: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number | [number, number]")] strides: JsValue,
        #[wasm_bindgen(
            unchecked_param_type = "'valid' | 'same' | number | [[number, number], [number, number], [number, number], [number, number]]"
        )]
        pad: JsValue,
        #[wasm_bindgen(js_name = dataFormat, unchecked_optional_param_type = "'NHWC' | 'NCHW'")]
        data_format: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number | [number, number]")]
        dilations: JsValue,
    ) -> Result<JsValue, JsValue> {
        let geometry = [&strides, &pad, &data_format, &dilations];
        conv2d(
            self,
            "depthwiseConv2d",
            &filter,
            geometry,
            Tensor::depthwise_conv2d,
        )
    }

    /// `conv1d(filter, stride, pad, dataFormat = 'NWC', dilation = 1)`:
    /// TF.js's `conv1d(x, filter, ...)` of `[n, width, c]` (`[n, c,
    /// width]` for NCW; rank 2 is one signal) and `filter` (`[k, c, out]`).
    #[wasm_bindgen(unchecked_return_type = "Tensor")]
    pub fn conv1d(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] filter: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] stride: JsValue,
        #[wasm_bindgen(unchecked_param_type = "'valid' | 'same' | number")] pad: JsValue,
        #[wasm_bindgen(js_name = dataFormat, unchecked_optional_param_type = "'NWC' | 'NCW'")]
        data_format: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] dilation: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "conv1d";
        let t = self.tensor(op)?;
        let filter = args::tensor(op, " as filter", &filter)?;
        let [stride, _] = args::steps(op, "stride", &stride)?;
        let format = args::data_format(op, &data_format, true)?;
        let pad = args::conv_pad(op, &pad, None)?;
        let [dilation, _] = args::steps_or_one(op, "dilation", &dilation)?;
        register(t.device(), || {
            t.conv1d(&filter, stride, pad, format, dilation)
        })
    }

    /// `conv2dTranspose(filter, outputShape, strides, pad)`: TF.js's
    /// `conv2dTranspose(x, filter, ...)`, the gradient of a `conv2d` of
    /// `outputShape` (NHWC) with that geometry, of these NHWC images
    /// (`[n, h, w, out]`) and `filter` (`[kh, kw, c, out]`).
    #[wasm_bindgen(js_name = conv2dTranspose, unchecked_return_type = "Tensor")]
    pub fn conv2d_transpose(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Tensor")] filter: JsValue,
        #[wasm_bindgen(js_name = outputShape, unchecked_param_type = "number[]")]
        output_shape: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number | [number, number]")] strides: JsValue,
        #[wasm_bindgen(
            unchecked_param_type = "'valid' | 'same' | number | [[number, number], [number, number], [number, number], [number, number]]"
        )]
        pad: JsValue,
    ) -> Result<JsValue, JsValue> {
        let op = "conv2dTranspose";
        let t = self.tensor(op)?;
        let filter = args::tensor(op, " as filter", &filter)?;
        let output_shape = args::shape(op, "outputShape", &output_shape)?;
        let strides = args::steps(op, "strides", &strides)?;
        let pad = args::conv_pad(op, &pad, Some(DataFormat::Nhwc))?;
        register(t.device(), || {
            t.conv2d_transpose(&filter, &output_shape, strides, pad)
        })
    }

    /// `maxPool(filterSize, strides, pad)`: TF.js's `maxPool(x, ...)` of
    /// these NHWC images (rank 3: one image).
    #[wasm_bindgen(js_name = maxPool, unchecked_return_type = "Tensor")]
    pub fn max_pool(
        &self,
        #[wasm_bindgen(js_name = filterSize, unchecked_param_type = "number | [number, number]")]
        filter_size: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number | [number, number]")] strides: JsValue,
        #[wasm_bindgen(
            unchecked_param_type = "'valid' | 'same' | number | [[number, number], [number, number], [number, number], [number, number]]"
        )]
        pad: JsValue,
    ) -> Result<JsValue, JsValue> {
        self.pool(
            "maxPool",
            [filter_size, strides, pad],
            crate::Tensor::max_pool,
        )
    }

    /// `avgPool(filterSize, strides, pad)`: TF.js's `avgPool(x, ...)` of
    /// these NHWC images (rank 3: one image); a window's mean counts only
    /// its positions inside the images.
    #[wasm_bindgen(js_name = avgPool, unchecked_return_type = "Tensor")]
    pub fn avg_pool(
        &self,
        #[wasm_bindgen(js_name = filterSize, unchecked_param_type = "number | [number, number]")]
        filter_size: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number | [number, number]")] strides: JsValue,
        #[wasm_bindgen(
            unchecked_param_type = "'valid' | 'same' | number | [[number, number], [number, number], [number, number], [number, number]]"
        )]
        pad: JsValue,
    ) -> Result<JsValue, JsValue> {
        self.pool(
            "avgPool",
            [filter_size, strides, pad],
            crate::Tensor::avg_pool,
        )
    }

    /// `resizeBilinear(size, alignCorners = false, halfPixelCenters =
    /// false)`: TF.js's `image.resizeBilinear(images, size, ...)` of these
    /// NHWC images (rank 3: one image) to `size` `[height, width]`.
    #[wasm_bindgen(js_name = resizeBilinear, unchecked_return_type = "Tensor")]
    pub fn resize_bilinear(
        &self,
        #[wasm_bindgen(unchecked_param_type = "[number, number]")] size: JsValue,
        #[wasm_bindgen(js_name = alignCorners, unchecked_optional_param_type = "boolean")]
        align_corners: JsValue,
        #[wasm_bindgen(js_name = halfPixelCenters, unchecked_optional_param_type = "boolean")]
        half_pixel_centers: JsValue,
    ) -> Result<JsValue, JsValue> {
        self.resize(
            "resizeBilinear",
            [size, align_corners, half_pixel_centers],
            crate::Tensor::resize_bilinear,
        )
    }

    /// `resizeNearestNeighbor(size, alignCorners = false, halfPixelCenters
    /// = false)`: TF.js's `image.resizeNearestNeighbor(images, size, ...)`.
    #[wasm_bindgen(js_name = resizeNearestNeighbor, unchecked_return_type = "Tensor")]
    pub fn resize_nearest_neighbor(
        &self,
        #[wasm_bindgen(unchecked_param_type = "[number, number]")] size: JsValue,
        #[wasm_bindgen(js_name = alignCorners, unchecked_optional_param_type = "boolean")]
        align_corners: JsValue,
        #[wasm_bindgen(js_name = halfPixelCenters, unchecked_optional_param_type = "boolean")]
        half_pixel_centers: JsValue,
    ) -> Result<JsValue, JsValue> {
        self.resize(
            "resizeNearestNeighbor",
            [size, align_corners, half_pixel_centers],
            crate::Tensor::resize_nearest_neighbor,
        )
    }
}

type Resize =
    fn(&crate::Tensor, [usize; 2], Corners) -> Result<crate::Tensor, crate::RegistrationError>;

type Pool = fn(
    &crate::Tensor,
    [usize; 2],
    [usize; 2],
    crate::Padding,
) -> Result<crate::Tensor, crate::RegistrationError>;

impl JsTensor {
    /// `maxPool` or `avgPool` (`pool`) with JS's `(filterSize, strides, pad)`.
    fn pool(
        &self,
        op: &'static str,
        [size, strides, pad]: [JsValue; 3],
        pool: Pool,
    ) -> Result<JsValue, JsValue> {
        let t = self.tensor(op)?;
        let size = args::steps(op, "filterSize", &size)?;
        let strides = args::steps(op, "strides", &strides)?;
        let pad = args::conv_pad(op, &pad, Some(DataFormat::Nhwc))?;
        register(t.device(), || pool(&t, size, strides, pad))
    }

    /// A resize (`resize`) with JS's `(size, alignCorners,
    /// halfPixelCenters)`.
    fn resize(
        &self,
        op: &'static str,
        [size, align, half]: [JsValue; 3],
        resize: Resize,
    ) -> Result<JsValue, JsValue> {
        let t = self.tensor(op)?;
        let dims = args::shape(op, "size", &size)?;
        let [h, w] = dims[..] else {
            return Err(args::range_error(
                op,
                format!("size must be [height, width], got {dims:?}"),
            ));
        };
        let corners = Corners {
            align_corners: args::boolean_or(op, "alignCorners", &align, false)?,
            half_pixel_centers: args::boolean_or(op, "halfPixelCenters", &half, false)?,
        };
        register(t.device(), || resize(&t, [h, w], corners))
    }
}

/// `Tensor::conv2d` or `Tensor::depthwise_conv2d`.
type Conv2d = fn(
    &Tensor,
    &Tensor,
    [usize; 2],
    Padding,
    DataFormat,
    [usize; 2],
) -> Result<Tensor, RegistrationError>;

/// `conv2d` and `depthwiseConv2d`: one body for both (not inlined into
/// each), their arguments read alike.
#[inline(never)]
fn conv2d(
    this: &JsTensor,
    op: &'static str,
    filter: &JsValue,
    [strides, pad, data_format, dilations]: [&JsValue; 4],
    f: Conv2d,
) -> Result<JsValue, JsValue> {
    let t = this.tensor(op)?;
    let filter = args::tensor(op, " as filter", filter)?;
    let strides = args::steps(op, "strides", strides)?;
    let format = args::data_format(op, data_format, false)?;
    let pad = args::conv_pad(op, pad, Some(format))?;
    let dilations = args::steps_or_one(op, "dilations", dilations)?;
    register(t.device(), || {
        f(&t, &filter, strides, pad, format, dilations)
    })
}
