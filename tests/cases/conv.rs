//! Convolutions: `conv2d` (every padding mode, strides, dilations, odd
//! sizes, NHWC and NCHW), `conv1d` and `conv2dTranspose` against a CPU
//! reference; a convolution with its bias and activation in one kernel; the
//! gradients of both inputs against finite differences; bad calls refused.
//! Pooling: `maxPool` and `avgPool` against a CPU reference, fused with
//! what computes their input, and their gradients.

use webfusion::{DataFormat, Device, Padding, Tensor};

use super::engine::{kernels_only, kernels_shaped_for, seeded_values as values};

/// A case: the images' and the filter's shapes, the strides, the dilations.
type Case = ([usize; 4], [usize; 4], [usize; 2], [usize; 2]);

/// One conv2d's geometry, as the reference computes it.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    x: [usize; 4],
    f: [usize; 4],
    stride: [usize; 2],
    dilation: [usize; 2],
    /// Rows and columns before the images.
    before: [usize; 2],
    out: [usize; 2],
}

/// `conv2d` on the CPU in f64: NHWC images, HWIO filter.
fn reference(x: &[f32], f: &[f32], g: Geometry) -> Vec<f64> {
    let ([n, h, w, c], [kh, kw, _, o], [oh, ow]) = (g.x, g.f, g.out);
    let mut y = vec![0.0f64; n * oh * ow * o];
    for b in 0..n {
        for i in 0..oh {
            for j in 0..ow {
                for p in 0..kh {
                    for q in 0..kw {
                        let ih =
                            (i * g.stride[0] + p * g.dilation[0]) as isize - g.before[0] as isize;
                        let iw =
                            (j * g.stride[1] + q * g.dilation[1]) as isize - g.before[1] as isize;
                        if ih < 0 || iw < 0 || ih >= h as isize || iw >= w as isize {
                            continue;
                        }
                        let (ih, iw) = (ih as usize, iw as usize);
                        for ci in 0..c {
                            let xv = x[((b * h + ih) * w + iw) * c + ci] as f64;
                            for co in 0..o {
                                y[((b * oh + i) * ow + j) * o + co] +=
                                    xv * f[((p * kw + q) * c + ci) * o + co] as f64;
                            }
                        }
                    }
                }
            }
        }
    }
    y
}

async fn read(t: &Tensor) -> Vec<f32> {
    t.to_vec().await.expect("the tensor reads")
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: sizes");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        // Equal infinities (a max of a window wholly in the padding) match.
        assert!(
            *g as f64 == *w || (*g as f64 - w).abs() <= 1e-4 * w.abs().max(1.0),
            "{what}: [{i}] = {g}, the reference gives {w}"
        );
    }
}

/// TF.js's output size and pad before, for one spatial dim.
fn expected(
    size: usize,
    k: usize,
    stride: usize,
    dilation: usize,
    pad: Padding,
    axis: usize,
) -> (usize, usize) {
    let reach = (k - 1) * dilation + 1;
    match pad {
        Padding::Same => {
            let out = size.div_ceil(stride);
            let total = ((out - 1) * stride + reach).saturating_sub(size);
            (out, total / 2)
        }
        Padding::Valid => ((size - reach) / stride + 1, 0),
        Padding::Explicit(p) => (
            (size + p[axis][0] + p[axis][1] - reach) / stride + 1,
            p[axis][0],
        ),
    }
}

fn nchw(x: &[f32], [n, h, w, c]: [usize; 4]) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    for b in 0..n {
        for i in 0..h {
            for j in 0..w {
                for k in 0..c {
                    out[((b * c + k) * h + i) * w + j] = x[((b * h + i) * w + j) * c + k];
                }
            }
        }
    }
    out
}

pub async fn conv2d_matches_the_reference_for_every_padding_stride_dilation_and_format() {
    let gpu = kernels_only().await;
    let pads = [
        Padding::Valid,
        Padding::Same,
        Padding::Explicit([[1, 2], [0, 1]]),
    ];
    let cases: [Case; 6] = [
        ([1, 5, 5, 1], [3, 3, 1, 1], [1, 1], [1, 1]),
        ([2, 7, 6, 3], [3, 2, 3, 4], [2, 2], [1, 1]),
        ([3, 9, 8, 2], [2, 3, 2, 5], [1, 3], [1, 1]),
        ([2, 9, 9, 3], [3, 3, 3, 2], [1, 1], [2, 2]),
        ([1, 11, 10, 5], [5, 5, 5, 17], [1, 1], [1, 1]),
        ([2, 28, 28, 1], [5, 5, 1, 8], [1, 1], [1, 1]),
    ];
    for (seed, (xs, fs, stride, dilation)) in cases.into_iter().enumerate() {
        for pad in pads {
            let (oh, top) = expected(xs[1], fs[0], stride[0], dilation[0], pad, 0);
            let (ow, left) = expected(xs[2], fs[1], stride[1], dilation[1], pad, 1);
            let g = Geometry {
                x: xs,
                f: fs,
                stride,
                dilation,
                before: [top, left],
                out: [oh, ow],
            };
            let x = values(xs.iter().product(), 10 + seed as u64);
            let f = values(fs.iter().product(), 20 + seed as u64);
            let want = reference(&x, &f, g);
            let what = format!("x {xs:?} f {fs:?} stride {stride:?} dilation {dilation:?} {pad:?}");
            let xt = gpu.tensor(&x, Some(&xs)).unwrap();
            let ft = gpu.tensor(&f, Some(&fs)).unwrap();
            let y = xt
                .conv2d(&ft, stride, pad, DataFormat::Nhwc, dilation)
                .unwrap();
            assert_eq!(y.shape(), [xs[0], oh, ow, fs[3]], "{what}");
            assert_close(&read(&y).await, &want, &what);
            // NCHW: the same numbers, channels first on both sides.
            let xc = gpu
                .tensor(&nchw(&x, xs), Some(&[xs[0], xs[3], xs[1], xs[2]]))
                .unwrap();
            let yc = xc
                .conv2d(&ft, stride, pad, DataFormat::Nchw, dilation)
                .unwrap();
            assert_eq!(yc.shape(), [xs[0], fs[3], oh, ow], "{what} NCHW");
            let want32: Vec<f32> = want.iter().map(|&v| v as f32).collect();
            let want_nchw: Vec<f64> = nchw(&want32, [xs[0], oh, ow, fs[3]])
                .into_iter()
                .map(f64::from)
                .collect();
            assert_close(&read(&yc).await, &want_nchw, &format!("{what} NCHW"));
        }
    }
    // One image (rank 3) in, one out.
    let x = gpu.tensor(&values(4 * 4 * 2, 1), Some(&[4, 4, 2])).unwrap();
    let f = gpu
        .tensor(&values(2 * 2 * 2 * 3, 2), Some(&[2, 2, 2, 3]))
        .unwrap();
    let y = x
        .conv2d(&f, [1, 1], Padding::Valid, DataFormat::Nhwc, [1, 1])
        .unwrap();
    assert_eq!(y.shape(), [3, 3, 3]);
}

/// The gradients of `sum(conv2d(x, f) * w)` for the images and the filter,
/// on the CPU in f64: each window tap's product, sent back to both.
fn reference_grads(x: &[f32], f: &[f32], w: &[f32], g: Geometry) -> [Vec<f64>; 2] {
    let ([n, h, wd, c], [kh, kw, _, o], [oh, ow]) = (g.x, g.f, g.out);
    let (mut dx, mut df) = (vec![0.0f64; x.len()], vec![0.0f64; f.len()]);
    for b in 0..n {
        for i in 0..oh {
            for j in 0..ow {
                for p in 0..kh {
                    for q in 0..kw {
                        let ih =
                            (i * g.stride[0] + p * g.dilation[0]) as isize - g.before[0] as isize;
                        let iw =
                            (j * g.stride[1] + q * g.dilation[1]) as isize - g.before[1] as isize;
                        if ih < 0 || iw < 0 || ih >= h as isize || iw >= wd as isize {
                            continue;
                        }
                        let at = ((b * h + ih as usize) * wd + iw as usize) * c;
                        for ci in 0..c {
                            for co in 0..o {
                                let wv = w[((b * oh + i) * ow + j) * o + co] as f64;
                                let fi = ((p * kw + q) * c + ci) * o + co;
                                dx[at + ci] += wv * f[fi] as f64;
                                df[fi] += wv * x[at + ci] as f64;
                            }
                        }
                    }
                }
            }
        }
    }
    [dx, df]
}

/// Convolutions wide enough for the matmul's 64-wide tiles, of channels in
/// fours, and their gradients: each window tap's four channels are loaded
/// as one vector (the images forward and for the filter's gradient, the
/// output gradient and the filter for the images'), and a stored filter
/// (forward) and a stored output gradient (for the filter's) are read as
/// the matrices they are. On both product kernels (64x128 tiles where 4
/// images of 33x33 reach them), with every padding, strides, dilations
/// and ragged edges, and passes of whole tiles that check no edge; and
/// the same numbers where none of it holds: images
/// given channels first (NCHW, each channel strided), and a filter that is
/// a transposed view.
/// Each on a GPU's product kernels and on a CPU's (`DeviceOptions::cpu_kernels`:
/// its small tiles, and its 8x8 kernel past 2^26 multiply-adds).
pub async fn convolutions_of_channels_in_fours_and_their_gradients_match_the_reference() {
    for cpu in [false, true] {
        convolutions_in_fours_match(&kernels_shaped_for(cpu).await).await;
    }
}

async fn convolutions_in_fours_match(gpu: &Device) {
    let pads = [
        Padding::Valid,
        Padding::Same,
        Padding::Explicit([[1, 2], [0, 1]]),
    ];
    let cases: [Case; 7] = [
        ([2, 13, 11, 8], [3, 3, 8, 68], [1, 1], [1, 1]),
        ([2, 9, 10, 4], [2, 3, 4, 64], [2, 3], [1, 1]),
        ([2, 9, 10, 12], [3, 2, 12, 72], [1, 1], [2, 3]),
        ([2, 9, 8, 64], [3, 3, 64, 68], [2, 1], [1, 1]),
        ([4, 33, 33, 4], [3, 3, 4, 132], [1, 1], [1, 1]),
        // The images' gradient (1024 x 16, 576 deep), and with 'same'
        // padding the forward pass (1024 x 64, 144 deep), are whole tiles
        // and slices: no edge checks.
        ([4, 16, 16, 16], [3, 3, 16, 64], [1, 1], [1, 1]),
        // Past 2^26 multiply-adds, a CPU's 8x8 kernel (but for the forward
        // pass with no padding): forward 1024 x 128, 576 deep; the images'
        // gradient 1024 x 64, 1152 deep; the filter's 576 x 128, 1024 deep.
        ([4, 16, 16, 64], [3, 3, 64, 128], [1, 1], [1, 1]),
    ];
    for (seed, (xs, fs, stride, dilation)) in cases.into_iter().enumerate() {
        let x = values(xs.iter().product(), 30 + seed as u64);
        let f = values(fs.iter().product(), 40 + seed as u64);
        let xt = gpu.tensor(&x, Some(&xs)).unwrap();
        let ft = gpu.tensor(&f, Some(&fs)).unwrap();
        // The filter stored [o, kh, kw, c], viewed as [kh, kw, c, o].
        let stored: Vec<f32> = (0..f.len())
            .map(|e| {
                let (co, rest) = (e / (fs[0] * fs[1] * fs[2]), e % (fs[0] * fs[1] * fs[2]));
                f[rest * fs[3] + co]
            })
            .collect();
        let ft_view = gpu
            .tensor(&stored, Some(&[fs[3], fs[0], fs[1], fs[2]]))
            .unwrap()
            .transpose(Some(&[1, 2, 3, 0]))
            .unwrap();
        let xc = gpu
            .tensor(&nchw(&x, xs), Some(&[xs[0], xs[3], xs[1], xs[2]]))
            .unwrap();
        for pad in pads {
            let (oh, top) = expected(xs[1], fs[0], stride[0], dilation[0], pad, 0);
            let (ow, left) = expected(xs[2], fs[1], stride[1], dilation[1], pad, 1);
            let g = Geometry {
                x: xs,
                f: fs,
                stride,
                dilation,
                before: [top, left],
                out: [oh, ow],
            };
            let want = reference(&x, &f, g);
            let what = format!("x {xs:?} f {fs:?} stride {stride:?} dilation {dilation:?} {pad:?}");
            let w = values(xs[0] * oh * ow * fs[3], 50 + seed as u64);
            let wt = gpu.tensor(&w, Some(&[xs[0], oh, ow, fs[3]])).unwrap();
            let [dx, df] = reference_grads(&x, &f, &w, g);
            for (how, filter) in [("stored", &ft), ("a transposed view", &ft_view)] {
                let what = format!("{what}, filter {how}");
                let y = xt
                    .conv2d(filter, stride, pad, DataFormat::Nhwc, dilation)
                    .unwrap();
                assert_close(&read(&y).await, &want, &what);
                let (_, grads) = gpu
                    .value_and_grads(
                        |v| {
                            v[0].conv2d(&v[1], stride, pad, DataFormat::Nhwc, dilation)?
                                .mul(&wt)?
                                .sum(None, false)
                        },
                        &[xt.clone(), filter.clone()],
                        None,
                    )
                    .unwrap();
                assert_close(&read(&grads[0]).await, &dx, &format!("{what}: d/dx"));
                assert_close(&read(&grads[1]).await, &df, &format!("{what}: d/dfilter"));
            }
            let yc = xc
                .conv2d(&ft, stride, pad, DataFormat::Nchw, dilation)
                .unwrap();
            let want32: Vec<f32> = want.iter().map(|&v| v as f32).collect();
            let want_nchw: Vec<f64> = nchw(&want32, [xs[0], oh, ow, fs[3]])
                .into_iter()
                .map(f64::from)
                .collect();
            assert_close(&read(&yc).await, &want_nchw, &format!("{what} NCHW"));
        }
    }
}

pub async fn a_conv2d_with_its_bias_and_relu_is_one_kernel() {
    let gpu = kernels_only().await;
    let (xs, fs) = ([2, 8, 8, 3], [3, 3, 3, 4]);
    let (x, f, b) = (
        values(2 * 8 * 8 * 3, 3),
        values(3 * 3 * 3 * 4, 4),
        values(4, 5),
    );
    let (xt, ft, bt) = (
        gpu.tensor(&x, Some(&xs)).unwrap(),
        gpu.tensor(&f, Some(&fs)).unwrap(),
        gpu.tensor(&b, None).unwrap(),
    );
    let _ = (read(&xt).await, read(&ft).await, read(&bt).await);
    let before = gpu.stats();
    let y = xt
        .conv2d(&ft, [1, 1], Padding::Same, DataFormat::Nhwc, [1, 1])
        .unwrap()
        .add(&bt)
        .unwrap()
        .relu()
        .unwrap();
    let got = read(&y).await;
    let after = gpu.stats();
    let g = Geometry {
        x: xs,
        f: fs,
        stride: [1, 1],
        dilation: [1, 1],
        before: [1, 1],
        out: [8, 8],
    };
    let want: Vec<f64> = reference(&x, &f, g)
        .iter()
        .enumerate()
        .map(|(i, v)| (v + b[i % 4] as f64).max(0.0))
        .collect();
    assert_close(&got, &want, "conv + bias + relu");
    assert_eq!(
        after.kernels_launched - before.kernels_launched,
        1,
        "one kernel"
    );
    assert_eq!(
        after.fused_ops - before.fused_ops,
        3,
        "conv2d, add and relu"
    );
    assert_eq!(
        after.buffers_allocated - before.buffers_allocated,
        1,
        "the result alone: no im2col buffer, no product written before the epilogue"
    );
}

pub async fn conv1d_and_conv2d_transpose_match_the_reference() {
    let gpu = kernels_only().await;
    // conv1d: [2, 9, 3] with [3, 3, 4], stride 2, same.
    let (x, f) = (values(2 * 9 * 3, 6), values(3 * 3 * 4, 7));
    let y = gpu
        .tensor(&x, Some(&[2, 9, 3]))
        .unwrap()
        .conv1d(
            &gpu.tensor(&f, Some(&[3, 3, 4])).unwrap(),
            2,
            Padding::Same,
            DataFormat::Nhwc,
            1,
        )
        .unwrap();
    assert_eq!(y.shape(), [2, 5, 4]);
    let (out, before) = expected(9, 3, 2, 1, Padding::Same, 1);
    let want = reference(
        &x,
        &f,
        Geometry {
            x: [2, 1, 9, 3],
            f: [1, 3, 3, 4],
            stride: [1, 2],
            dilation: [1, 1],
            before: [0, before],
            out: [1, out],
        },
    );
    assert_close(&read(&y).await, &want, "conv1d");
    // conv2dTranspose: the adjoint of conv2d. For any dy, <conv2d(x, f), dy>
    // equals <x, conv2dTranspose(dy, f)>; checked against the reference's
    // conv2d at every basis image x.
    let (xs, fs) = ([1, 5, 4, 2], [3, 3, 2, 3]);
    let f = values(fs.iter().product(), 8);
    for pad in [Padding::Valid, Padding::Same] {
        let (oh, top) = expected(5, 3, 2, 1, pad, 0);
        let (ow, left) = expected(4, 3, 2, 1, pad, 1);
        let dy = values(oh * ow * 3, 9);
        let g = Geometry {
            x: xs,
            f: fs,
            stride: [2, 2],
            dilation: [1, 1],
            before: [top, left],
            out: [oh, ow],
        };
        let n: usize = xs.iter().product();
        let want: Vec<f64> = (0..n)
            .map(|i| {
                let mut basis = vec![0.0f32; n];
                basis[i] = 1.0;
                reference(&basis, &f, g)
                    .iter()
                    .zip(&dy)
                    .map(|(a, b)| a * *b as f64)
                    .sum()
            })
            .collect();
        let t = gpu
            .tensor(&dy, Some(&[1, oh, ow, 3]))
            .unwrap()
            .conv2d_transpose(&gpu.tensor(&f, Some(&fs)).unwrap(), &xs, [2, 2], pad)
            .unwrap();
        assert_eq!(t.shape(), xs);
        assert_close(&read(&t).await, &want, &format!("conv2dTranspose {pad:?}"));
    }
}

pub async fn conv2d_gradients_for_images_and_filter_match_finite_differences() {
    let gpu = kernels_only().await;
    // The first three run every pass directly, the last (16 channels
    // each way) on the matmul's tiles.
    let cases: [(Case, Padding); 4] = [
        (([2, 5, 6, 2], [3, 2, 2, 3], [1, 1], [1, 1]), Padding::Same),
        (
            ([1, 7, 7, 3], [3, 3, 3, 2], [2, 2], [1, 1]),
            Padding::Explicit([[1, 0], [2, 1]]),
        ),
        (([2, 7, 6, 1], [2, 2, 1, 2], [1, 1], [2, 3]), Padding::Valid),
        (
            ([1, 4, 5, 16], [2, 2, 16, 16], [1, 1], [1, 1]),
            Padding::Same,
        ),
    ];
    for (seed, ((xs, fs, stride, dilation), pad)) in cases.into_iter().enumerate() {
        let (oh, top) = expected(xs[1], fs[0], stride[0], dilation[0], pad, 0);
        let (ow, left) = expected(xs[2], fs[1], stride[1], dilation[1], pad, 1);
        let g = Geometry {
            x: xs,
            f: fs,
            stride,
            dilation,
            before: [top, left],
            out: [oh, ow],
        };
        let x = values(xs.iter().product(), 30 + seed as u64);
        let f = values(fs.iter().product(), 40 + seed as u64);
        let w = values(xs[0] * oh * ow * fs[3], 50 + seed as u64);
        // loss = sum(conv2d(x, f) * w): linear in each input, so central
        // differences are exact up to rounding.
        let loss = |x: &[f32], f: &[f32]| -> f64 {
            reference(x, f, g)
                .iter()
                .zip(&w)
                .map(|(y, w)| y * *w as f64)
                .sum()
        };
        let (xt, ft) = (
            gpu.tensor(&x, Some(&xs)).unwrap(),
            gpu.tensor(&f, Some(&fs)).unwrap(),
        );
        let wt = gpu.tensor(&w, Some(&[xs[0], oh, ow, fs[3]])).unwrap();
        let (value, grads) = gpu
            .value_and_grads(
                |v| {
                    v[0].conv2d(&v[1], stride, pad, DataFormat::Nhwc, dilation)?
                        .mul(&wt)?
                        .sum(None, false)
                },
                &[xt, ft],
                None,
            )
            .unwrap();
        let what = format!("x {xs:?} f {fs:?} {stride:?} {dilation:?} {pad:?}");
        assert_close(&read(&value).await, &[loss(&x, &f)], &what);
        for (k, (grad, base)) in grads.iter().zip([&x, &f]).enumerate() {
            let got = read(grad).await;
            let fd: Vec<f64> = (0..base.len())
                .map(|i| {
                    let (mut up, mut down) = (base.clone(), base.clone());
                    up[i] += 0.5;
                    down[i] -= 0.5;
                    let (lu, ld) = match k {
                        0 => (loss(&up, &f), loss(&down, &f)),
                        _ => (loss(&x, &up), loss(&x, &down)),
                    };
                    lu - ld
                })
                .collect();
            assert_close(&got, &fd, &format!("{what}: d/d{}", ["x", "filter"][k]));
        }
    }
}

pub async fn conv2d_refuses_bad_calls_and_queues_nothing() {
    let gpu: Device = kernels_only().await;
    let x = gpu
        .tensor(&values(2 * 5 * 5 * 3, 1), Some(&[2, 5, 5, 3]))
        .unwrap();
    let f = gpu
        .tensor(&values(3 * 3 * 3 * 4, 2), Some(&[3, 3, 3, 4]))
        .unwrap();
    let f2 = gpu
        .tensor(&values(3 * 3 * 2 * 4, 2), Some(&[3, 3, 2, 4]))
        .unwrap();
    let big = gpu
        .tensor(&values(7 * 7 * 3, 3), Some(&[7, 7, 3, 1]))
        .unwrap();
    let flat = gpu.tensor(&values(15, 4), Some(&[5, 3])).unwrap();
    let queued = gpu.stats().ops_registered;
    let cases: [(Result<Tensor, _>, &str); 6] = [
        (
            x.conv2d(&f2, [1, 1], Padding::Valid, DataFormat::Nhwc, [1, 1]),
            "the input has 3 channels but the filter",
        ),
        (
            flat.conv2d(&f, [1, 1], Padding::Valid, DataFormat::Nhwc, [1, 1]),
            "rank 4",
        ),
        (
            x.conv2d(&flat, [1, 1], Padding::Valid, DataFormat::Nhwc, [1, 1]),
            "the filter must be of rank 4",
        ),
        (
            x.conv2d(&f, [0, 1], Padding::Valid, DataFormat::Nhwc, [1, 1]),
            "at least 1",
        ),
        (
            x.conv2d(&f, [2, 1], Padding::Valid, DataFormat::Nhwc, [2, 1]),
            "cannot both be above 1",
        ),
        (
            x.conv2d(&big, [1, 1], Padding::Valid, DataFormat::Nhwc, [1, 1]),
            "larger than the padded input",
        ),
    ];
    for (result, message) in cases {
        let Err(e) = result else {
            panic!("a bad conv2d was accepted (expected {message:?})");
        };
        assert_eq!(e.op, "conv2d");
        assert!(e.reason.contains(message), "{e} (expected {message:?})");
    }
    assert_eq!(gpu.stats().ops_registered, queued, "nothing queued");
}

/// `maxPool` (`max`) or `avgPool` on the CPU: NHWC, windows of `k` placed
/// by `stride` and the pads `before`, into `out`; a mean counts only the
/// positions inside the images.
fn pool_reference(
    x: &[f32],
    [n, h, w, c]: [usize; 4],
    k: [usize; 2],
    stride: [usize; 2],
    before: [usize; 2],
    [oh, ow]: [usize; 2],
    max: bool,
) -> Vec<f64> {
    let mut y = Vec::new();
    for b in 0..n {
        for i in 0..oh {
            for j in 0..ow {
                for ch in 0..c {
                    let mut inside = Vec::new();
                    for p in 0..k[0] {
                        for q in 0..k[1] {
                            let ih = (i * stride[0] + p) as isize - before[0] as isize;
                            let iw = (j * stride[1] + q) as isize - before[1] as isize;
                            if ih >= 0 && iw >= 0 && ih < h as isize && iw < w as isize {
                                inside.push(
                                    x[((b * h + ih as usize) * w + iw as usize) * c + ch] as f64,
                                );
                            }
                        }
                    }
                    y.push(match max {
                        true => inside.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                        false => inside.iter().sum::<f64>() / inside.len() as f64,
                    });
                }
            }
        }
    }
    y
}

pub async fn max_pool_and_avg_pool_match_the_reference_for_every_padding_and_stride() {
    let gpu = kernels_only().await;
    let cases: [([usize; 4], [usize; 2], [usize; 2]); 4] = [
        ([1, 4, 4, 1], [2, 2], [2, 2]),
        ([2, 7, 5, 3], [3, 2], [2, 1]),
        ([1, 9, 9, 2], [3, 3], [1, 1]),
        ([3, 28, 28, 8], [2, 2], [2, 2]),
    ];
    let pads = [
        Padding::Valid,
        Padding::Same,
        Padding::Explicit([[1, 1], [0, 1]]),
    ];
    for (seed, (xs, k, stride)) in cases.into_iter().enumerate() {
        let x = values(xs.iter().product(), 60 + seed as u64);
        let t = gpu.tensor(&x, Some(&xs)).unwrap();
        for pad in pads {
            let (oh, top) = expected(xs[1], k[0], stride[0], 1, pad, 0);
            let (ow, left) = expected(xs[2], k[1], stride[1], 1, pad, 1);
            for max in [true, false] {
                let y = match max {
                    true => t.max_pool(k, stride, pad),
                    false => t.avg_pool(k, stride, pad),
                }
                .unwrap();
                let what = format!(
                    "{} x {xs:?} k {k:?} stride {stride:?} {pad:?}",
                    if max { "maxPool" } else { "avgPool" }
                );
                assert_eq!(y.shape(), [xs[0], oh, ow, xs[3]], "{what}");
                let want = pool_reference(&x, xs, k, stride, [top, left], [oh, ow], max);
                assert_close(&read(&y).await, &want, &what);
            }
        }
    }
    // One image in, one out; a window larger than the image refused.
    let one = gpu.tensor(&values(16, 1), Some(&[4, 4, 1])).unwrap();
    assert_eq!(
        one.max_pool([2, 2], [2, 2], Padding::Valid)
            .unwrap()
            .shape(),
        [2, 2, 1]
    );
    let Err(e) = one.max_pool([5, 5], [1, 1], Padding::Valid) else {
        panic!("a window larger than the image was accepted");
    };
    assert!(e.reason.contains("larger than the padded input"), "{e}");
    assert!(one.avg_pool([0, 2], [1, 1], Padding::Valid).is_err());
    // A pad as wide as the window: its windows have no element, and give
    // TF.js's values, 0 for a mean and -Infinity for a max.
    let pad = Padding::Explicit([[2, 0], [0, 0]]);
    let mean = read(&one.avg_pool([2, 2], [1, 1], pad).unwrap()).await;
    assert_eq!(
        mean.len(),
        5 * 3,
        "a row of windows wholly in the padding, then four"
    );
    assert_eq!(mean[..3], [0.0; 3], "{mean:?}");
    let x = values(16, 1);
    for j in 0..3 {
        let inside = (x[j] + x[j + 1]) / 2.0;
        assert!(
            (mean[3 + j] - inside).abs() < 1e-6,
            "the next row counts only the image's: {mean:?}"
        );
    }
    let max = read(&one.max_pool([2, 2], [1, 1], pad).unwrap()).await;
    assert!(max[..3].iter().all(|&v| v == f32::NEG_INFINITY), "{max:?}");
    // A 'same' window far larger than the image (TF.js takes any) covers
    // all of it from every output, and visits only its positions inside:
    // `avgPool(2^31 - 1, 1, 'same')` of a 4x4 image hung (found by outside
    // testing's sixth round), visiting each of 2^62 positions.
    let sum: f32 = x.iter().sum();
    let top = x.iter().cloned().fold(f32::MIN, f32::max);
    for k in [1000, (1 << 31) - 1] {
        let mean = read(&one.avg_pool([k, k], [1, 1], Padding::Same).unwrap()).await;
        assert!(
            mean.iter().all(|&m| (m - sum / 16.0).abs() < 1e-6),
            "{k}: {mean:?}"
        );
        let max = read(&one.max_pool([k, k], [1, 1], Padding::Same).unwrap()).await;
        assert_eq!(max, vec![top; 16], "{k}");
        // Their gradients: each of the 16 windows shares its 1 among the
        // 16 positions, or sends it to the one maximum.
        let sum_of = |max: bool| {
            move |t: &Tensor| {
                match max {
                    true => t.max_pool([k, k], [1, 1], Padding::Same),
                    false => t.avg_pool([k, k], [1, 1], Padding::Same),
                }?
                .sum(None, false)
            }
        };
        let shares = read(&gpu.grad(sum_of(false), &one, None).unwrap()).await;
        assert!(
            shares.iter().all(|&g| (g - 1.0).abs() < 1e-6),
            "{k}: {shares:?}"
        );
        let sent = read(&gpu.grad(sum_of(true), &one, None).unwrap()).await;
        let want: Vec<f32> = x
            .iter()
            .map(|&v| if v == top { 16.0 } else { 0.0 })
            .collect();
        assert_eq!(sent, want, "{k}");
    }
}

pub async fn a_pool_computes_the_elementwise_ops_it_reads_in_its_own_kernel() {
    let gpu = kernels_only().await;
    let x = values(2 * 6 * 6 * 4, 70);
    let b = values(4, 71);
    let (t, bt) = (
        gpu.tensor(&x, Some(&[2, 6, 6, 4])).unwrap(),
        gpu.tensor(&b, None).unwrap(),
    );
    let _ = (read(&t).await, read(&bt).await);
    let before = gpu.stats();
    let y = t
        .add(&bt)
        .unwrap()
        .relu()
        .unwrap()
        .max_pool([2, 2], [2, 2], Padding::Valid)
        .unwrap();
    let got = read(&y).await;
    let after = gpu.stats();
    let shifted: Vec<f32> = x
        .iter()
        .enumerate()
        .map(|(i, v)| (v + b[i % 4]).max(0.0))
        .collect();
    let want = pool_reference(&shifted, [2, 6, 6, 4], [2, 2], [2, 2], [0, 0], [3, 3], true);
    assert_close(&got, &want, "maxPool(relu(x + b))");
    assert_eq!(
        after.kernels_launched - before.kernels_launched,
        1,
        "one kernel"
    );
    assert_eq!(
        after.fused_ops - before.fused_ops,
        3,
        "add, relu and maxPool"
    );
    assert_eq!(
        after.buffers_allocated - before.buffers_allocated,
        1,
        "the result alone"
    );
}

pub async fn pool_gradients_go_to_the_first_maximum_and_share_the_mean() {
    let gpu = kernels_only().await;
    // A 4x4 image with ties in its first window: the first maximum (in
    // row-major order) takes the gradient, as in TF.js.
    let x = [
        5.0, 5.0, 1.0, 2.0, //
        5.0, 0.0, 3.0, 3.0, //
        -1.0, -2.0, 7.0, 0.0, //
        -3.0, -1.0, 0.0, 7.0,
    ];
    let t = gpu.tensor(&x, Some(&[1, 4, 4, 1])).unwrap();
    let w = gpu
        .tensor(&[1.0, 2.0, 3.0, 4.0], Some(&[1, 2, 2, 1]))
        .unwrap();
    let g = gpu
        .grad(
            |v| {
                v.max_pool([2, 2], [2, 2], Padding::Valid)?
                    .mul(&w)?
                    .sum(None, false)
            },
            &t,
            None,
        )
        .unwrap();
    assert_eq!(
        read(&g).await,
        [
            1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 3.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0
        ]
    );
    // Overlapping windows (3x3, stride 1, same; 3x2, stride 2, padded
    // unevenly): each element sums what the windows holding it send; the
    // gradients against finite differences.
    let xs = [2, 5, 4, 3];
    let x = values(xs.iter().product(), 80);
    let configs = [
        ([3, 3], [1, 1], Padding::Same),
        ([3, 2], [2, 2], Padding::Explicit([[1, 0], [0, 1]])),
    ];
    for (k, stride, pad) in configs {
        let (oh, top) = expected(5, k[0], stride[0], 1, pad, 0);
        let (ow, left) = expected(4, k[1], stride[1], 1, pad, 1);
        let wv = values(2 * oh * ow * 3, 81);
        let wt = gpu.tensor(&wv, Some(&[2, oh, ow, 3])).unwrap();
        for max in [true, false] {
            let t = gpu.tensor(&x, Some(&xs)).unwrap();
            let g = gpu
                .grad(
                    |v| {
                        let y = match max {
                            true => v.max_pool(k, stride, pad)?,
                            false => v.avg_pool(k, stride, pad)?,
                        };
                        y.mul(&wt)?.sum(None, false)
                    },
                    &t,
                    None,
                )
                .unwrap();
            let loss = |x: &[f32]| -> f64 {
                pool_reference(x, xs, k, stride, [top, left], [oh, ow], max)
                    .iter()
                    .zip(&wv)
                    .map(|(y, w)| y * *w as f64)
                    .sum()
            };
            // Small steps: a max is linear only until another element overtakes.
            let fd: Vec<f64> = (0..x.len())
                .map(|i| {
                    let (mut up, mut down) = (x.clone(), x.clone());
                    up[i] += 1e-3;
                    down[i] -= 1e-3;
                    (loss(&up) - loss(&down)) / 2e-3
                })
                .collect();
            let got = read(&g).await;
            for (i, (a, b)) in got.iter().zip(&fd).enumerate() {
                assert!(
                    (*a as f64 - b).abs() < 1e-2,
                    "{k:?} {stride:?} {pad:?} max {max}: d/dx[{i}] = {a}, finite differences {b}"
                );
            }
        }
    }
}

pub async fn a_convolution_past_the_buffer_limits_fails_as_allocation_naming_it_and_nothing_else() {
    let gpu = kernels_only().await;
    // A broadcast image (a view of four numbers: no big upload) whose
    // convolution would be 64 * 1024 * 1024 * 64 floats.
    let x = gpu
        .tensor(&[1.0, 2.0, 3.0, 4.0], Some(&[1, 1, 1, 4]))
        .unwrap()
        .broadcast_to(&[64, 1024, 1024, 4])
        .unwrap();
    let f = gpu
        .tensor(&values(4 * 64, 1), Some(&[1, 1, 4, 64]))
        .unwrap();
    let y = x
        .conv2d(&f, [1, 1], Padding::Valid, DataFormat::Nhwc, [1, 1])
        .unwrap()
        .relu()
        .unwrap();
    let fine = f.sum(None, false).unwrap();
    let error = super::engine::read_err(&y).await;
    let report = error.first().expect("one report");
    assert_eq!(report.root.kind, webfusion::FailureKind::Allocation);
    assert_eq!(report.root.op, "conv2d+relu");
    assert!(
        report.root.message.contains("exceeds maxBufferSize"),
        "{}",
        report.root.message
    );
    let want: f64 = values(4 * 64, 1).iter().map(|&v| v as f64).sum();
    assert_close(&read(&fine).await, &[want], "an unrelated tensor reads");
}

/// A depthwise filter `[kh, kw, c, m]` as the `conv2d` filter `[kh, kw, c,
/// c * m]` that computes the same: zero but where output channel `c * m +
/// j` reads input channel `c`.
fn block_diagonal(f: &[f32], [kh, kw, c, m]: [usize; 4]) -> Vec<f32> {
    let mut out = vec![0.0; kh * kw * c * c * m];
    for tap in 0..kh * kw {
        for ci in 0..c {
            for j in 0..m {
                out[(tap * c + ci) * c * m + ci * m + j] = f[(tap * c + ci) * m + j];
            }
        }
    }
    out
}

pub async fn depthwise_conv2d_matches_the_reference_for_every_padding_stride_dilation_and_format() {
    let gpu = kernels_only().await;
    let pads = [
        Padding::Valid,
        Padding::Same,
        Padding::Explicit([[2, 0], [1, 1]]),
    ];
    let cases: [Case; 5] = [
        ([1, 5, 5, 1], [3, 3, 1, 1], [1, 1], [1, 1]),
        ([2, 7, 6, 3], [3, 2, 3, 2], [2, 2], [1, 1]),
        ([3, 9, 8, 2], [2, 3, 2, 3], [1, 3], [1, 1]),
        ([2, 9, 9, 4], [3, 3, 4, 1], [1, 1], [2, 2]),
        ([1, 11, 10, 5], [5, 5, 5, 2], [3, 2], [1, 1]),
    ];
    for (seed, (xs, fs, stride, dilation)) in cases.into_iter().enumerate() {
        let full = [fs[0], fs[1], fs[2], fs[2] * fs[3]];
        for pad in pads {
            let (oh, top) = expected(xs[1], fs[0], stride[0], dilation[0], pad, 0);
            let (ow, left) = expected(xs[2], fs[1], stride[1], dilation[1], pad, 1);
            let g = Geometry {
                x: xs,
                f: full,
                stride,
                dilation,
                before: [top, left],
                out: [oh, ow],
            };
            let x = values(xs.iter().product(), 60 + seed as u64);
            let f = values(fs.iter().product(), 70 + seed as u64);
            let want = reference(&x, &block_diagonal(&f, fs), g);
            let what = format!("x {xs:?} f {fs:?} stride {stride:?} dilation {dilation:?} {pad:?}");
            let xt = gpu.tensor(&x, Some(&xs)).unwrap();
            let ft = gpu.tensor(&f, Some(&fs)).unwrap();
            let y = xt
                .depthwise_conv2d(&ft, stride, pad, DataFormat::Nhwc, dilation)
                .unwrap();
            assert_eq!(y.shape(), [xs[0], oh, ow, full[3]], "{what}");
            assert_close(&read(&y).await, &want, &what);
            let xc = gpu
                .tensor(&nchw(&x, xs), Some(&[xs[0], xs[3], xs[1], xs[2]]))
                .unwrap();
            let yc = xc
                .depthwise_conv2d(&ft, stride, pad, DataFormat::Nchw, dilation)
                .unwrap();
            let want32: Vec<f32> = want.iter().map(|&v| v as f32).collect();
            let want_nchw: Vec<f64> = nchw(&want32, [xs[0], oh, ow, full[3]])
                .into_iter()
                .map(f64::from)
                .collect();
            assert_close(&read(&yc).await, &want_nchw, &format!("{what} NCHW"));
        }
    }
    let x = gpu.tensor(&values(4 * 4 * 2, 1), Some(&[4, 4, 2])).unwrap();
    let f = gpu
        .tensor(&values(2 * 2 * 2, 2), Some(&[2, 2, 2, 1]))
        .unwrap();
    let one = x
        .depthwise_conv2d(&f, [1, 1], Padding::Valid, DataFormat::Nhwc, [1, 1])
        .unwrap();
    assert_eq!(one.shape(), [3, 3, 2], "one image in, one out");
    let bad = gpu
        .tensor(&values(2 * 2 * 3, 2), Some(&[2, 2, 3, 1]))
        .unwrap();
    let queued = gpu.stats().ops_registered;
    let Err(e) = x.depthwise_conv2d(&bad, [1, 1], Padding::Valid, DataFormat::Nhwc, [1, 1]) else {
        panic!("a filter for 3 channels was accepted for images of 2");
    };
    assert_eq!(e.op, "depthwiseConv2d");
    assert!(e.reason.contains("the input has 2 channels"), "{e}");
    assert_eq!(gpu.stats().ops_registered, queued, "nothing queued");
}

pub async fn depthwise_conv2d_gradients_for_images_and_filter_match_finite_differences() {
    let gpu = kernels_only().await;
    let cases: [(Case, Padding); 3] = [
        (([2, 5, 6, 2], [3, 2, 2, 2], [1, 1], [1, 1]), Padding::Same),
        (
            ([1, 7, 7, 3], [3, 3, 3, 1], [2, 2], [1, 1]),
            Padding::Explicit([[1, 0], [2, 1]]),
        ),
        (([2, 6, 7, 2], [2, 3, 2, 2], [1, 1], [2, 1]), Padding::Valid),
    ];
    for (seed, ((xs, fs, stride, dilation), pad)) in cases.into_iter().enumerate() {
        let full = [fs[0], fs[1], fs[2], fs[2] * fs[3]];
        let (oh, top) = expected(xs[1], fs[0], stride[0], dilation[0], pad, 0);
        let (ow, left) = expected(xs[2], fs[1], stride[1], dilation[1], pad, 1);
        let g = Geometry {
            x: xs,
            f: full,
            stride,
            dilation,
            before: [top, left],
            out: [oh, ow],
        };
        let x = values(xs.iter().product(), 80 + seed as u64);
        let f = values(fs.iter().product(), 90 + seed as u64);
        let w = values(xs[0] * oh * ow * full[3], 95 + seed as u64);
        let loss = |x: &[f32], f: &[f32]| -> f64 {
            reference(x, &block_diagonal(f, fs), g)
                .iter()
                .zip(&w)
                .map(|(y, w)| y * *w as f64)
                .sum()
        };
        let (xt, ft) = (
            gpu.tensor(&x, Some(&xs)).unwrap(),
            gpu.tensor(&f, Some(&fs)).unwrap(),
        );
        let wt = gpu.tensor(&w, Some(&[xs[0], oh, ow, full[3]])).unwrap();
        let (value, grads) = gpu
            .value_and_grads(
                |v| {
                    v[0].depthwise_conv2d(&v[1], stride, pad, DataFormat::Nhwc, dilation)?
                        .mul(&wt)?
                        .sum(None, false)
                },
                &[xt, ft],
                None,
            )
            .unwrap();
        let what = format!("x {xs:?} f {fs:?} {stride:?} {pad:?}");
        assert_close(&read(&value).await, &[loss(&x, &f)], &what);
        for (k, (grad, base)) in grads.iter().zip([&x, &f]).enumerate() {
            let got = read(grad).await;
            let fd: Vec<f64> = (0..base.len())
                .map(|i| {
                    let (mut up, mut down) = (base.clone(), base.clone());
                    up[i] += 0.5;
                    down[i] -= 0.5;
                    match k {
                        0 => loss(&up, &f) - loss(&down, &f),
                        _ => loss(&x, &up) - loss(&x, &down),
                    }
                })
                .collect();
            assert_close(&got, &fd, &format!("{what}: d/d{}", ["x", "filter"][k]));
        }
    }
}

/// A depthwise convolution is a kernel of its own that anchors what
/// follows it as a convolution does: with its bias and relu one kernel,
/// one buffer; and its two gradients are one kernel each.
pub async fn a_depthwise_conv2d_with_its_bias_and_relu_is_one_kernel_and_each_gradient_another() {
    let gpu = kernels_only().await;
    let (xs, fs) = ([2, 6, 5, 3], [3, 3, 3, 2]);
    let full = [3, 3, 3, 6];
    let (x, f, b) = (
        values(2 * 6 * 5 * 3, 13),
        values(3 * 3 * 3 * 2, 14),
        values(6, 15),
    );
    let (xt, ft, bt) = (
        gpu.tensor(&x, Some(&xs)).unwrap(),
        gpu.tensor(&f, Some(&fs)).unwrap(),
        gpu.tensor(&b, None).unwrap(),
    );
    let _ = (read(&xt).await, read(&ft).await, read(&bt).await);
    let before = gpu.stats();
    let y = xt
        .depthwise_conv2d(&ft, [2, 1], Padding::Same, DataFormat::Nhwc, [1, 1])
        .unwrap()
        .add(&bt)
        .unwrap()
        .relu()
        .unwrap();
    let got = read(&y).await;
    let after = gpu.stats();
    let (oh, top) = expected(6, 3, 2, 1, Padding::Same, 0);
    let (ow, left) = expected(5, 3, 1, 1, Padding::Same, 1);
    let g = Geometry {
        x: xs,
        f: full,
        stride: [2, 1],
        dilation: [1, 1],
        before: [top, left],
        out: [oh, ow],
    };
    let want: Vec<f64> = reference(&x, &block_diagonal(&f, fs), g)
        .iter()
        .enumerate()
        .map(|(i, v)| (v + b[i % 6] as f64).max(0.0))
        .collect();
    assert_close(&got, &want, "depthwise + bias + relu");
    let launched = after.kernels_launched - before.kernels_launched;
    assert_eq!(launched, 1, "one kernel");
    let fused = after.fused_ops - before.fused_ops;
    assert_eq!(fused, 3, "depthwiseConv2d, add and relu");
    let buffers = after.buffers_allocated - before.buffers_allocated;
    assert_eq!(buffers, 1, "one output");
    // The gradients of a sum of it: each pass one kernel (the ones that
    // seed the gradient and the sum aside).
    let (_, profile) = gpu.profile(|| {
        gpu.value_and_grads(
            |v| {
                v[0].depthwise_conv2d(&v[1], [2, 1], Padding::Same, DataFormat::Nhwc, [1, 1])?
                    .sum(None, false)
            },
            &[xt.clone(), ft.clone()],
            None,
        )
        .unwrap()
    });
    let names: Vec<String> = profile.kernels.iter().flat_map(|k| k.ops.clone()).collect();
    for pass in ["depthwiseConv2dInputGrad", "depthwiseConv2dFilterGrad"] {
        let blocks: Vec<_> = profile
            .kernels
            .iter()
            .filter(|k| k.ops.iter().any(|o| o == pass))
            .collect();
        assert_eq!(blocks.len(), 1, "{pass} in one block: {names:?}");
        assert_eq!(blocks[0].wgsl.len(), 1, "{pass}: one kernel");
    }
}
