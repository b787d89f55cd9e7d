//! The ops layers are made of, beyond convolutions: `moments`, `batchNorm`,
//! `dropout`, `resizeBilinear` and `resizeNearestNeighbor`, against CPU
//! references written from TF.js's definitions, their gradients against
//! finite differences, their bad calls refused.

use webfusion::{Corners, DType, Tensor, Values};

use super::engine::{kernels_only, seeded_values as values};

async fn read(t: &Tensor) -> Vec<f32> {
    t.to_vec().await.expect("the tensor reads")
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: sizes");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (*g as f64 - w).abs() <= 1e-4 * w.abs().max(1.0),
            "{what}: [{i}] = {g}, the reference gives {w}"
        );
    }
}

pub async fn moments_and_batch_norm_match_the_reference_and_normalize_per_channel() {
    let gpu = kernels_only().await;
    let (n, c) = (12, 3);
    // Pixels far from zero: a variance from E[x²] - E[x]² would lose it.
    let x: Vec<f32> = values(n * c, 1).iter().map(|v| 200.0 + v).collect();
    let xt = gpu.tensor(&x, Some(&[n, c])).unwrap();
    let (mean, variance) = xt.moments(Some(&[0]), false).unwrap();
    assert_eq!((mean.shape(), variance.shape()), (&[c][..], &[c][..]));
    let (mut m, mut v) = (vec![0.0f64; c], vec![0.0f64; c]);
    for i in 0..n * c {
        m[i % c] += x[i] as f64 / n as f64;
    }
    for i in 0..n * c {
        v[i % c] += (x[i] as f64 - m[i % c]).powi(2) / n as f64;
    }
    assert_close(&read(&mean).await, &m, "mean");
    assert_close(&read(&variance).await, &v, "variance");
    let (kept, _) = xt.moments(None, true).unwrap();
    assert_eq!(kept.shape(), [1, 1], "keepDims keeps every reduced axis");
    let ints = gpu.tensor_of(Values::int32(&[1, 2, 3, 4]), None).unwrap();
    let (im, iv) = ints.moments(None, false).unwrap();
    assert_eq!(im.dtype(), DType::Float32, "an int32's moments are floats");
    assert_close(&read(&im).await, &[2.5], "int mean");
    assert_close(&read(&iv).await, &[1.25], "int variance");

    let scale = gpu.tensor(&[1.0, 2.0, 0.5], None).unwrap();
    let offset = gpu.tensor(&[0.0, -1.0, 3.0], None).unwrap();
    let y = xt
        .batch_norm(&mean, &variance, Some(&offset), Some(&scale), 0.001)
        .unwrap();
    let want: Vec<f64> = (0..n * c)
        .map(|i| {
            let k = i % c;
            (x[i] as f64 - m[k]) / (v[k] + 0.001).sqrt() * [1.0, 2.0, 0.5][k] + [0.0, -1.0, 3.0][k]
        })
        .collect();
    assert_close(&read(&y).await, &want, "batchNorm");
    let plain = xt.batch_norm(&mean, &variance, None, None, 0.0).unwrap();
    let (pm, pv) = plain.moments(Some(&[0]), false).unwrap();
    assert_close(&read(&pm).await, &[0.0; 3], "normalized mean");
    assert_close(&read(&pv).await, &[1.0; 3], "normalized variance");

    let wide = gpu.tensor(&[1.0; 4], None).unwrap();
    let queued = gpu.stats().ops_registered;
    let cases: [(Result<Tensor, _>, &str); 3] = [
        (
            xt.batch_norm(&wide, &wide, None, None, 0.001),
            "does not broadcast to x",
        ),
        (
            xt.batch_norm(&mean, &kept, None, None, 0.001),
            "the same rank",
        ),
        (
            xt.batch_norm(&mean, &variance, None, None, f32::NAN),
            "varianceEpsilon",
        ),
    ];
    for (result, message) in cases {
        let Err(e) = result else {
            panic!("a bad batchNorm was accepted (expected {message:?})");
        };
        assert_eq!(e.op, "batchNorm");
        assert!(e.reason.contains(message), "{e} (expected {message:?})");
    }
    // A bad axis is moments' own refusal, not the mean's it is made of.
    for axes in [&[5isize][..], &[0, 0]] {
        let Err(e) = xt.moments(Some(axes), false) else {
            panic!("moments over {axes:?} was accepted");
        };
        assert_eq!(e.op, "moments", "{e}");
    }
    assert_eq!(gpu.stats().ops_registered, queued, "nothing queued");
}

pub async fn batch_norm_gradients_reach_every_input_as_finite_differences_say() {
    let gpu = kernels_only().await;
    let (n, c) = (5, 2);
    let x = values(n * c, 3);
    let w = values(n * c, 4);
    let (off, sc) = (vec![0.3f32, -0.2], vec![1.5f32, 0.7]);
    // loss = sum(batchNorm(x, moments(x)) * w): the statistics depend on
    // x, so its gradient runs through them too.
    let loss = |x: &[f32], off: &[f32], sc: &[f32]| -> f64 {
        let mut m = [0.0f64; 2];
        let mut v = [0.0f64; 2];
        for i in 0..n * c {
            m[i % c] += x[i] as f64 / n as f64;
        }
        for i in 0..n * c {
            v[i % c] += (x[i] as f64 - m[i % c]).powi(2) / n as f64;
        }
        (0..n * c)
            .map(|i| {
                let k = i % c;
                ((x[i] as f64 - m[k]) / (v[k] + 0.01).sqrt() * sc[k] as f64 + off[k] as f64)
                    * w[i] as f64
            })
            .sum()
    };
    let wt = gpu.tensor(&w, Some(&[n, c])).unwrap();
    let inputs = [
        gpu.tensor(&x, Some(&[n, c])).unwrap(),
        gpu.tensor(&off, None).unwrap(),
        gpu.tensor(&sc, None).unwrap(),
    ];
    let (value, grads) = gpu
        .value_and_grads(
            |v| {
                let (mean, variance) = v[0].moments(Some(&[0]), false)?;
                v[0].batch_norm(&mean, &variance, Some(&v[1]), Some(&v[2]), 0.01)?
                    .mul(&wt)?
                    .sum(None, false)
            },
            &inputs,
            None,
        )
        .unwrap();
    assert_close(&read(&value).await, &[loss(&x, &off, &sc)], "loss");
    let h = 1e-3f32;
    for (k, grad) in grads.iter().enumerate() {
        let base = [&x, &off, &sc][k];
        let fd: Vec<f64> = (0..base.len())
            .map(|i| {
                let (mut up, mut down) = (base.clone(), base.clone());
                up[i] += h;
                down[i] -= h;
                let at = |b: &[f32]| match k {
                    0 => loss(b, &off, &sc),
                    1 => loss(&x, b, &sc),
                    _ => loss(&x, &off, b),
                };
                (at(&up) - at(&down)) / (2.0 * h as f64)
            })
            .collect();
        let got = read(grad).await;
        for (i, (g, f)) in got.iter().zip(&fd).enumerate() {
            assert!(
                (*g as f64 - f).abs() <= 2e-2 * f.abs().max(1.0),
                "d/d{}[{i}] = {g}, finite differences give {f}",
                ["x", "offset", "scale"][k]
            );
        }
    }
}

pub async fn dropout_zeroes_at_the_rate_scales_the_rest_and_repeats_with_its_seed() {
    let gpu = kernels_only().await;
    let n = 4096;
    let x = gpu.tensor(&vec![1.0; n], Some(&[64, 64])).unwrap();
    let a = read(&x.dropout(0.25, None, Some(7)).unwrap()).await;
    let b = read(&x.dropout(0.25, None, Some(7)).unwrap()).await;
    assert!(a == b, "the same seed drops the same elements");
    let kept = a.iter().filter(|&&v| v != 0.0).count();
    assert!(
        a.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6),
        "kept elements are scaled by 1 / (1 - rate)"
    );
    let rate = 1.0 - kept as f64 / n as f64;
    assert!(
        (rate - 0.25).abs() < 0.03,
        "dropped {rate} of them, not 0.25"
    );
    // Left without a seed, two calls draw two masks.
    let c = read(&x.dropout(0.25, None, None).unwrap()).await;
    let d = read(&x.dropout(0.25, None, None).unwrap()).await;
    assert!(c != d, "without a seed each call draws its own mask");
    // A noise shape of [64, 1] drops whole rows.
    let rows = read(&x.dropout(0.5, Some(&[64, 1]), Some(3)).unwrap()).await;
    for row in rows.chunks(64) {
        assert!(
            row.iter().all(|&v| v == row[0]),
            "a row is kept or dropped whole"
        );
    }
    let none = read(&x.dropout(0.0, None, None).unwrap()).await;
    assert!(
        none.iter().all(|&v| v == 1.0),
        "a rate of 0 keeps everything"
    );
    // Its gradient is the mask, scaled.
    let (y, g) = gpu
        .value_and_grads(
            |v| v[0].dropout(0.5, None, Some(11))?.sum(None, false),
            std::slice::from_ref(&x),
            None,
        )
        .unwrap();
    let mask = read(&x.dropout(0.5, None, Some(11)).unwrap()).await;
    assert!(
        read(&g[0]).await == mask,
        "the gradient passes the kept elements"
    );
    assert_close(
        &read(&y).await,
        &[mask.iter().map(|&v| v as f64).sum()],
        "value",
    );

    let ints = gpu.tensor_of(Values::int32(&[1, 2]), None).unwrap();
    let queued = gpu.stats().ops_registered;
    let cases: [(Result<Tensor, _>, &str); 4] = [
        (x.dropout(1.0, None, None), "rate must be in [0, 1), got 1"),
        (
            x.dropout(-0.1, None, None),
            "rate must be in [0, 1), got -0.1",
        ),
        (x.dropout(0.5, Some(&[64]), None), "noiseShape"),
        (ints.dropout(0.5, None, None), "must be a float32"),
    ];
    for (result, message) in cases {
        let Err(e) = result else {
            panic!("a bad dropout was accepted (expected {message:?})");
        };
        assert_eq!(e.op, "dropout");
        assert!(e.reason.contains(message), "{e} (expected {message:?})");
    }
    assert_eq!(gpu.stats().ops_registered, queued, "nothing queued");
}

/// TF.js's resize on the CPU (NHWC, f64), as its CPU backend defines it.
fn resize_reference(
    x: &[f32],
    [n, h, w, c]: [usize; 4],
    [oh, ow]: [usize; 2],
    corners: Corners,
    bilinear: bool,
) -> Vec<f64> {
    let ratio = |i: usize, o: usize| match corners.align_corners && o > 1 {
        true => (i - 1) as f64 / (o - 1) as f64,
        false => i as f64 / o as f64,
    };
    let (rh, rw) = (ratio(h, oh), ratio(w, ow));
    let at = |b: usize, i: usize, j: usize, k: usize| x[((b * h + i) * w + j) * c + k] as f64;
    let mut y = Vec::with_capacity(n * oh * ow * c);
    for b in 0..n {
        for r in 0..oh {
            for q in 0..ow {
                for k in 0..c {
                    let half = corners.half_pixel_centers;
                    if bilinear {
                        let src = |o: usize, ratio: f64| match half {
                            true => ratio * (o as f64 + 0.5) - 0.5,
                            false => ratio * o as f64,
                        };
                        let (sr, sc) = (src(r, rh), src(q, rw));
                        let (r0, c0) = (sr.floor().max(0.0), sc.floor().max(0.0));
                        let (r1, c1) =
                            (sr.ceil().min((h - 1) as f64), sc.ceil().min((w - 1) as f64));
                        let (fr, fc) = (sr - r0, sc - c0);
                        let (r0, r1, c0, c1) = (r0 as usize, r1 as usize, c0 as usize, c1 as usize);
                        let top = at(b, r0, c0, k) + (at(b, r0, c1, k) - at(b, r0, c0, k)) * fc;
                        let bot = at(b, r1, c0, k) + (at(b, r1, c1, k) - at(b, r1, c0, k)) * fc;
                        y.push(top + (bot - top) * fr);
                    } else {
                        let near = |o: usize, ratio: f64, size: usize| {
                            let s = if half {
                                ratio * (o as f64 + 0.5)
                            } else {
                                ratio * o as f64
                            };
                            let s = if corners.align_corners {
                                s.round()
                            } else {
                                s.floor()
                            };
                            (s.min((size - 1) as f64)).max(0.0) as usize
                        };
                        y.push(at(b, near(r, rh, h), near(q, rw, w), k));
                    }
                }
            }
        }
    }
    y
}

pub async fn resizes_match_tfjs_for_every_corner_mode_up_and_down() {
    let gpu = kernels_only().await;
    let modes = [
        Corners::default(),
        Corners {
            align_corners: true,
            half_pixel_centers: false,
        },
        Corners {
            align_corners: false,
            half_pixel_centers: true,
        },
    ];
    let cases = [
        ([1, 2, 2, 1], [3, 3]),
        ([2, 3, 5, 2], [7, 4]),
        ([1, 8, 6, 3], [3, 2]),
        ([1, 4, 4, 1], [1, 1]),
        ([2, 1, 3, 2], [4, 9]),
    ];
    for (seed, (xs, size)) in cases.into_iter().enumerate() {
        let x = values(xs.iter().product(), 20 + seed as u64);
        let xt = gpu.tensor(&x, Some(&xs)).unwrap();
        for corners in modes {
            let what = format!("{xs:?} to {size:?} {corners:?}");
            let y = xt.resize_bilinear(size, corners).unwrap();
            assert_eq!(y.shape(), [xs[0], size[0], size[1], xs[3]], "{what}");
            let want = resize_reference(&x, xs, size, corners, true);
            assert_close(&read(&y).await, &want, &format!("bilinear {what}"));
            if !(corners.align_corners && corners.half_pixel_centers) {
                let y = xt.resize_nearest_neighbor(size, corners).unwrap();
                let want = resize_reference(&x, xs, size, corners, false);
                assert_close(&read(&y).await, &want, &format!("nearest {what}"));
            }
        }
    }
    // TF.js's own example: [2, 2, 4, 4] up to 3x3.
    let small = gpu.tensor(&[2.0, 2.0, 4.0, 4.0], Some(&[2, 2, 1])).unwrap();
    let up = small.resize_bilinear([3, 3], Corners::default()).unwrap();
    let third = 10.0 / 3.0;
    assert_close(
        &read(&up).await,
        &[2.0, 2.0, 2.0, third, third, third, 4.0, 4.0, 4.0],
        "TF.js's example",
    );
    // Nearest keeps an int32 exact and its dtype.
    let ints = gpu
        .tensor_of(Values::int32(&[16_777_217, 2, 3, 4]), Some(&[1, 2, 2, 1]))
        .unwrap();
    let near = ints
        .resize_nearest_neighbor([4, 4], Corners::default())
        .unwrap();
    assert_eq!(near.dtype(), DType::Int32);
    assert_eq!(near.values().await.unwrap().to_i32()[0], 16_777_217);

    let flat = gpu.tensor(&[1.0; 4], None).unwrap();
    let image = gpu.tensor(&[1.0; 4], Some(&[1, 2, 2, 1])).unwrap();
    let both = Corners {
        align_corners: true,
        half_pixel_centers: true,
    };
    let queued = gpu.stats().ops_registered;
    let cases: [(Result<Tensor, _>, &str, &str); 3] = [
        (
            flat.resize_bilinear([2, 2], Corners::default()),
            "resizeBilinear",
            "rank 4",
        ),
        (
            image.resize_bilinear([0, 2], Corners::default()),
            "resizeBilinear",
            "at least 1",
        ),
        (
            image.resize_nearest_neighbor([2, 2], both),
            "resizeNearestNeighbor",
            "cannot both",
        ),
    ];
    for (result, op, message) in cases {
        let Err(e) = result else {
            panic!("a bad {op} was accepted (expected {message:?})");
        };
        assert_eq!(e.op, op);
        assert!(e.reason.contains(message), "{e} (expected {message:?})");
    }
    assert_eq!(gpu.stats().ops_registered, queued, "nothing queued");
}

pub async fn resize_gradients_are_the_adjoint_of_the_resize() {
    let gpu = kernels_only().await;
    let (xs, size) = ([1, 3, 4, 2], [5, 7]);
    let x = values(24, 5);
    let w = values(5 * 7 * 2, 6);
    for corners in [
        Corners::default(),
        Corners {
            align_corners: false,
            half_pixel_centers: true,
        },
    ] {
        for bilinear in [true, false] {
            let xt = gpu.tensor(&x, Some(&xs)).unwrap();
            let wt = gpu.tensor(&w, Some(&[1, 5, 7, 2])).unwrap();
            let (_, g) = gpu
                .value_and_grads(
                    |v| {
                        let y = match bilinear {
                            true => v[0].resize_bilinear(size, corners)?,
                            false => v[0].resize_nearest_neighbor(size, corners)?,
                        };
                        y.mul(&wt)?.sum(None, false)
                    },
                    &[xt],
                    None,
                )
                .unwrap();
            // The loss is linear in x: d loss / d x[i] = loss(e_i).
            let want: Vec<f64> = (0..x.len())
                .map(|i| {
                    let mut e = vec![0.0; x.len()];
                    e[i] = 1.0;
                    resize_reference(&e, xs, size, corners, bilinear)
                        .iter()
                        .zip(&w)
                        .map(|(y, w)| y * *w as f64)
                        .sum()
                })
                .collect();
            assert_close(
                &read(&g[0]).await,
                &want,
                &format!("{corners:?} bilinear {bilinear}"),
            );
        }
    }
}

/// `resizeNearestNeighbor(images, [2147483648, 2], true)` panicked in the
/// browser (found by outside testing): the table of each output row's
/// source, made on the host before anything is queued, was past what an
/// allocation can ask for in wasm, and a failed allocation aborts the
/// module (so did 10^9 rows, past what it could get). A table past the
/// largest buffer a kernel binds, which could never run, is refused now,
/// with a `RangeError` naming the size, by both resizes; the device goes
/// on.
pub async fn a_resize_past_what_the_host_can_index_is_refused_and_the_device_goes_on() {
    let gpu = kernels_only().await;
    let x = gpu
        .tensor(&[1.0, 2.0, 3.0, 4.0], Some(&[1, 2, 2, 1]))
        .unwrap();
    // A table of this many 4-byte words is past `isize::MAX` bytes, on
    // wasm32 (2^29 rows) and natively (2^61) alike.
    let rows = isize::MAX as usize / 4 + 1;
    for (op, made) in [
        (
            "resizeNearestNeighbor",
            x.resize_nearest_neighbor([rows, 1], Corners::default()),
        ),
        (
            "resizeBilinear",
            x.resize_bilinear([1, rows], Corners::default()),
        ),
    ] {
        let Err(e) = made else {
            panic!("{op} of {rows} positions was not refused");
        };
        assert_eq!(e.op, op);
        assert_eq!(e.class, webfusion::ErrorClass::Range, "{e}");
        assert!(e.reason.contains(&format!("{rows} positions")), "{e}");
    }
    let y = x
        .resize_nearest_neighbor([4, 4], Corners::default())
        .unwrap();
    assert_eq!(read(&y).await.len(), 16);
}
