//! Image resizing, registered: TF.js's `resizeBilinear` and
//! `resizeNearestNeighbor` over NHWC images. Which source rows and columns
//! each output reads, and with what weight, depends on the sizes alone, so
//! it is worked out here, once, in float64 as TF.js's CPU backend does; the
//! device then runs `gather`s along the height and the width and a lerp
//! between them, which fuse with what surrounds them, and whose gradient
//! (the gathers' sums into the rows they read) is the resize's exact
//! adjoint.

use std::alloc::Layout;

use super::conv::{image_dims, images, restored};
use super::ops::{invalid, range};
use crate::error::RegistrationError;
use crate::ir::shape;
use crate::ir::{DType, Values};
use crate::tensor::{DataFormat, Tensor};

type Result<T> = std::result::Result<T, RegistrationError>;

/// How output positions map onto the input: TF.js's `alignCorners` and
/// `halfPixelCenters`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Corners {
    /// The first and last output pixels sit on the first and last input
    /// pixels.
    pub align_corners: bool,
    /// Pixels are sampled at their centres (`+ 0.5`), as most image
    /// libraries (and ONNX's default) do.
    pub half_pixel_centers: bool,
}

/// One axis of a resize: `out` positions over `size` input positions.
struct Axis {
    size: usize,
    out: usize,
    corners: Corners,
}

impl Axis {
    /// TF.js's ratio of input to output spacing.
    fn ratio(&self) -> f64 {
        let aligned = self.corners.align_corners && self.out > 1;
        let (i, o) = match aligned {
            true => (self.size - 1, self.out - 1),
            false => (self.size, self.out),
        };
        i as f64 / o as f64
    }

    /// Each output position's source position before rounding.
    fn sources(&self, offset: f64) -> impl Iterator<Item = f64> + '_ {
        let (ratio, half) = (self.ratio(), self.corners.half_pixel_centers);
        (0..self.out).map(move |o| match half {
            true => ratio * (o as f64 + 0.5) - offset,
            false => ratio * o as f64,
        })
    }

    /// The nearest source of each output position (TF.js rounds when the
    /// corners are aligned and floors otherwise).
    fn nearest(&self) -> Vec<i32> {
        let last = (self.size - 1) as f64;
        self.sources(0.0)
            .map(|s| {
                let s = if self.corners.align_corners {
                    s.round()
                } else {
                    s.floor()
                };
                s.max(0.0).min(last) as i32
            })
            .collect()
    }

    /// Each output position's two sources and the weight of the second.
    fn linear(&self) -> (Vec<i32>, Vec<i32>, Vec<f32>) {
        let last = (self.size - 1) as f64;
        let (mut lo, mut hi, mut frac) = (vec![], vec![], vec![]);
        for s in self.sources(0.5) {
            let floor = s.floor().max(0.0);
            lo.push(floor.min(last) as i32);
            hi.push(s.ceil().max(0.0).min(last) as i32);
            frac.push((s - floor) as f32);
        }
        (lo, hi, frac)
    }
}

impl Tensor {
    /// TF.js's `image.resizeBilinear(images, size, alignCorners,
    /// halfPixelCenters)`: these NHWC images (rank 3: one image) resized to
    /// `size` (`[height, width]`), each output the lerp of its four nearest
    /// inputs, horizontally first as TF.js computes it. float32 out.
    #[track_caller]
    pub fn resize_bilinear(&self, size: [usize; 2], corners: Corners) -> Result<Tensor> {
        let op = "resizeBilinear";
        let (axes, single) = self.resizing(op, size, corners)?;
        let x = images(&self.as_dtype(DType::Float32)?, DataFormat::Nhwc, single)?;
        let [rows, cols] = axes;
        // Across: the left and right columns, lerped; then the top and
        // bottom rows of that, lerped.
        let across = lerp(&x, &cols, 2)?;
        let y = lerp(&across, &rows, 1)?;
        restored(y, DataFormat::Nhwc, single)
    }

    /// TF.js's `image.resizeNearestNeighbor(images, size, alignCorners,
    /// halfPixelCenters)`: each output the input pixel nearest it, of any
    /// dtype (an int32's stays exact).
    #[track_caller]
    pub fn resize_nearest_neighbor(&self, size: [usize; 2], corners: Corners) -> Result<Tensor> {
        let op = "resizeNearestNeighbor";
        let (axes, single) = self.resizing(op, size, corners)?;
        let x = images(self, DataFormat::Nhwc, single)?;
        let [rows, cols] = axes;
        let device = self.device();
        let across = x.gather(
            &device.tensor_of(Values::int32(&cols.nearest()), None)?,
            2,
            0,
        )?;
        let y = across.gather(
            &device.tensor_of(Values::int32(&rows.nearest()), None)?,
            1,
            0,
        )?;
        restored(y, DataFormat::Nhwc, single)
    }

    /// Checks a resize's call; the height and width axes and whether the
    /// input was one image. Registers nothing.
    fn resizing(
        &self,
        op: &'static str,
        size: [usize; 2],
        corners: Corners,
    ) -> Result<([Axis; 2], bool)> {
        self.device().admit(op, &[self])?;
        if corners.align_corners && corners.half_pixel_centers {
            return Err(invalid(
                op,
                "alignCorners and halfPixelCenters cannot both be true (as in TF.js)".into(),
            ));
        }
        let ([n, h, w, c], single) = image_dims(op, self.shape(), DataFormat::Nhwc)?;
        if size.contains(&0) {
            return Err(range(op, format!("size {size:?} must each be at least 1")));
        }
        if h == 0 || w == 0 {
            return Err(range(
                op,
                format!("images of height {h} and width {w} have no pixel to resize from"),
            ));
        }
        shape::check_size(op, &[n, size[0], size[1], c])?;
        // Each output axis's table of sources is made here, on the host, for
        // a kernel to bind (`Axis::nearest`, `Axis::linear`): one past the
        // largest binding could never run, and one past what the host can
        // allocate (2^31 rows, or a few hundred million, in wasm) would
        // abort the module before anything is queued.
        let bound = self.device().with_state(|s| s.max_binding_size());
        let too_many = |&&out: &&usize| {
            let bytes = Layout::array::<u32>(out)
                .ok()
                .and_then(|t| u64::try_from(t.size()).ok());
            bytes.is_none_or(|bytes| bytes > bound)
        };
        if let Some(&out) = size.iter().find(too_many) {
            return Err(range(
                op,
                format!(
                    "an output axis of {out} positions needs a table of its sources larger than this device binds ({bound} bytes)"
                ),
            ));
        }
        let axis = |size, out| Axis { size, out, corners };
        Ok(([axis(h, size[0]), axis(w, size[1])], single))
    }
}

/// `x` resized along `dim` (1: rows, 2: columns) by lerping the two
/// sources `axis` gives each output position.
#[track_caller]
fn lerp(x: &Tensor, axis: &Axis, dim: usize) -> Result<Tensor> {
    let device = x.device();
    let (lo, hi, frac) = axis.linear();
    let lo = x.gather(
        &device.tensor_of(Values::int32(&lo), None)?,
        dim as isize,
        0,
    )?;
    let hi = x.gather(
        &device.tensor_of(Values::int32(&hi), None)?,
        dim as isize,
        0,
    )?;
    // The weights run along `dim`: [out, 1] for columns, [out, 1, 1] for rows.
    let mut weights = vec![axis.out];
    weights.resize(4 - dim, 1);
    let frac = device.tensor_of(Values::float32(&frac), Some(&weights))?;
    lo.add(&hi.sub(&lo)?.mul(&frac)?)
}
