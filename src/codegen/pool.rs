//! Pooling (`maxPool`, `avgPool`) and its gradients: one thread per output
//! element, looping over its window (a pool's windows are small). The
//! forward pass reads its elements from memory or computes them by a
//! prologue, as a reduction does; the gradient of each image element loops
//! over the windows that hold it, so nothing is scattered and no atomics
//! are needed.

use std::fmt::Write;

use crate::ir::shape;
use crate::ir::{ConvGeometry, PoolOp};

use super::kernel::*;
use super::reduce::reduce_bindings;

/// Threads per workgroup of a pooling kernel: one per output element.
const POOL_WORKGROUP: u32 = 64;

/// A rank-4 access's strides.
fn strides(access: &Access) -> [usize; 4] {
    let mut s = [0; 4];
    for (to, from) in s.iter_mut().zip(&access.layout.strides) {
        *to = *from;
    }
    s
}

/// A pool's windows as a kernel's parameters: their size, stride and
/// padding, and the images' height and width they lie over.
struct Windows {
    k: [String; 2],
    stride: [String; 2],
    pad: [String; 2],
    image: [String; 2],
}

impl Windows {
    fn new(params: &mut Params, size: [usize; 2], g: &ConvGeometry, image: [usize; 2]) -> Windows {
        Windows {
            k: size.map(|v| params.push(v)),
            stride: g.stride.map(|v| params.push(v)),
            pad: g.pad.map(|v| params.push(v)),
            image: image.map(|v| params.push(v)),
        }
    }

    /// WGSL for the window of the output at (`row`, `col`): where it starts
    /// (`ah`, `aw`, in the padding when negative) and the span of its
    /// positions inside the images, `h0..h1` by `w0..w1`, which is all a
    /// pool's loops visit. A window far larger than the images (TF.js takes
    /// any filter with 'same') is then as quick as one that fits them,
    /// where visiting each of its positions ran 2^62 times for a filter of
    /// 2^31 - 1. Its end is compared before it is added, which could pass
    /// i32's range.
    fn span(&self, indent: &str, row: &str, col: &str) -> String {
        let Windows {
            k: [kh, kw],
            stride: [sh, sw],
            pad: [pt, pl],
            image: [h, w],
        } = self;
        format!(
            "{indent}let ah = i32({row} * {sh}) - i32({pt});\n\
             {indent}let aw = i32({col} * {sw}) - i32({pl});\n\
             {indent}let h0 = max(ah, 0);\n\
             {indent}let w0 = max(aw, 0);\n\
             {indent}let h1 = select(i32({h}), ah + i32({kh}), i32({kh}) < i32({h}) - ah);\n\
             {indent}let w1 = select(i32({w}), aw + i32({kw}), i32({kw}) < i32({w}) - aw);\n"
        )
    }
}

/// A mean window's count: its positions inside the images (`Windows::span`),
/// 1 for a window wholly in the padding.
const COUNT: &str = "f32(max(h1 - h0, 1) * max(w1 - w0, 1))";

/// The kernel of pool `op` of windows `size` placed by `geometry` over
/// `input` (NHWC), writing `out_shape` row-major. With a `prologue` the
/// elements are computed as they are loaded (`input` then describes its
/// row-major result).
pub fn pool(
    op: PoolOp,
    size: [usize; 2],
    geometry: ConvGeometry,
    input: &Access,
    prologue: Option<Group<'_>>,
    out_shape: &[usize],
) -> Kernel {
    let mut params = Params::default();
    let total = params.push(shape::numel(out_shape));
    let mut body =
        format!("    let o = wg * {POOL_WORKGROUP}u + lid;\n    if (o >= {total}) {{ return; }}\n");
    coords(&mut body, &mut params, "o", "c", out_shape);
    let s = strides(input);
    let windows = Windows::new(
        &mut params,
        size,
        &geometry,
        [input.shape[1], input.shape[2]],
    );
    let base = format!(
        "{} + c0 * {} + c3 * {}",
        params.push(input.layout.offset),
        params.push(s[0]),
        params.push(s[3])
    );
    let (row, col) = (params.push(s[1]), params.push(s[2]));
    let at = format!("{base} + u32(ih) * {row} + u32(iw) * {col}");
    let load = match prologue {
        Some(_) => format!("fused({at}, 0.0)"),
        None => format!("in0[{at}]"),
    };
    let (init, count, step) = match op {
        // TF.js's max pool ignores a NaN in its window (its test says so),
        // unlike `maximum` and `max`: only a larger number replaces `acc`.
        PoolOp::Max => ("ninf()", String::new(), "acc = select(acc, x, x > acc);"),
        // Each element is divided by the window's count before it is added,
        // as `mean` does: a window of 3e38s averages to 3e38, where their
        // sum would overflow.
        PoolOp::Avg => (
            "0.0",
            format!("    let count = {COUNT};\n"),
            "acc = acc + x / count;",
        ),
    };
    let _ = write!(
        body,
        "{}{count}    var acc = {init};\n\
         \x20   for (var ih = h0; ih < h1; ih = ih + 1) {{\n\
         \x20       for (var iw = w0; iw < w1; iw = iw + 1) {{\n\
         \x20           let x = {load};\n            {step}\n\
         \x20       }}\n    }}\n\
         \x20   out0[o] = acc;\n",
        windows.span("    ", "c1", "c2")
    );
    let (decls, _) = reduce_bindings(prologue, &mut params, input.dtype, input.dtype, false);
    let groups = (shape::numel(out_shape) as u64).div_ceil(POOL_WORKGROUP as u64);
    params.kernel(&decls, POOL_WORKGROUP, &body, groups)
}

/// The kernel of the gradient of pool `op` for its images (`out_shape`,
/// NHWC): of `[x, dy]` for a max, of `[dy]` for a mean. Each image element
/// sums what the windows holding it send it: a max window all of its
/// gradient to its first largest element, a mean window an equal share to
/// each of its positions inside the images.
pub fn pool_grad(
    op: PoolOp,
    size: [usize; 2],
    geometry: ConvGeometry,
    inputs: &[Access],
    out_shape: &[usize],
) -> Kernel {
    let mut params = Params::default();
    let total = params.push(shape::numel(out_shape));
    let mut body =
        format!("    let i = wg * {POOL_WORKGROUP}u + lid;\n    if (i >= {total}) {{ return; }}\n");
    coords(&mut body, &mut params, "i", "c", out_shape);
    let dy = &inputs[inputs.len() - 1];
    let windows = Windows::new(&mut params, size, &geometry, [out_shape[1], out_shape[2]]);
    let (oh, ow) = (params.push(dy.shape[1]), params.push(dy.shape[2]));
    let d = strides(dy);
    let buffer = if op == PoolOp::Max { "in1" } else { "in0" };
    let grad = format!(
        "{buffer}[{} + c0 * {} + oh * {} + ow * {} + c3 * {}]",
        params.push(dy.layout.offset),
        params.push(d[0]),
        params.push(d[1]),
        params.push(d[2]),
        params.push(d[3])
    );
    // The window at (oh, ow) of the output, its positions (yh, yw) inside
    // the images visited in order.
    let window = |inner: &str| {
        format!(
            "            for (var yh = h0; yh < h1; yh = yh + 1) {{\n\
             \x20               for (var yw = w0; yw < w1; yw = yw + 1) {{ {inner} }}\n\
             \x20           }}\n"
        )
    };
    let sends = match op {
        PoolOp::Max => {
            let x = &inputs[0];
            let xs = strides(x);
            let value = format!(
                "in0[{} + c0 * {} + u32(yh) * {} + u32(yw) * {} + c3 * {}]",
                params.push(x.layout.offset),
                params.push(xs[0]),
                params.push(xs[1]),
                params.push(xs[2]),
                params.push(xs[3])
            );
            format!(
                "            var best = 0.0; var bh = -1; var bw = -1;\n{}\
                 \x20           if (bh == i32(c1) && bw == i32(c2)) {{ acc = acc + {grad}; }}\n",
                window(&format!(
                    "let v = {value}; if (bh < 0 || v > best) {{ best = v; bh = yh; bw = yw; }}"
                ))
            )
        }
        PoolOp::Avg => format!("            acc = acc + {grad} / {COUNT};\n"),
    };
    // The windows holding this element are those whose start lies within
    // a window's size before it: offsets `a` into them from
    // `c1 + pt - (oh - 1) * sh` (the last output's start) to `c1 + pt`,
    // within the window. Visiting every offset of a window far larger than
    // the images ran 2^62 times for a filter of 2^31 - 1.
    let Windows {
        k: [kh, kw],
        stride: [sh, sw],
        pad: [pt, pl],
        ..
    } = &windows;
    let span = windows.span("            ", "oh", "ow");
    let _ = write!(
        body,
        "    var acc = 0.0;\n\
         \x20   let eh = i32(c1 + {pt});\n\
         \x20   let ew = i32(c2 + {pl});\n\
         \x20   let a1 = select(i32({kh}), eh + 1, eh + 1 < i32({kh}));\n\
         \x20   let b1 = select(i32({kw}), ew + 1, ew + 1 < i32({kw}));\n\
         \x20   for (var a = max(eh - i32(({oh} - 1u) * {sh}), 0); a < a1; a = a + 1) {{\n\
         \x20       for (var b = max(ew - i32(({ow} - 1u) * {sw}), 0); b < b1; b = b + 1) {{\n\
         \x20           let ty = eh - a;\n\
         \x20           let tx = ew - b;\n\
         \x20           if (u32(ty) % {sh} != 0u || u32(tx) % {sw} != 0u) {{ continue; }}\n\
         \x20           let oh = u32(ty) / {sh};\n            let ow = u32(tx) / {sw};\n\
         {span}{sends}        }}\n    }}\n    out0[i] = acc;\n"
    );
    let mut decls = String::new();
    for (k, _) in inputs.iter().enumerate() {
        let _ = writeln!(
            decls,
            "@group(0) @binding({}) var<storage, read> in{k}: array<f32>;",
            k + 1
        );
    }
    let _ = writeln!(
        decls,
        "@group(0) @binding({}) var<storage, read_write> out0: array<f32>;",
        inputs.len() + 1
    );
    let groups = (shape::numel(out_shape) as u64).div_ceil(POOL_WORKGROUP as u64);
    params.kernel(&decls, POOL_WORKGROUP, &body, groups)
}
