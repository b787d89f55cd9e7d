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
    let (kh, kw) = (params.push(size[0]), params.push(size[1]));
    let [sh, sw] = geometry.stride.map(|v| params.push(v));
    let [pt, pl] = geometry.pad.map(|v| params.push(v));
    let (h, w) = (params.push(input.shape[1]), params.push(input.shape[2]));
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
        // sum would overflow. The count (the window's positions inside the
        // images) is known before the loop, from where the window starts.
        PoolOp::Avg => (
            "0.0",
            format!(
                "    let ah = i32(c1 * {sh}) - i32({pt});\n\
                 \x20   let aw = i32(c2 * {sw}) - i32({pl});\n\
                 \x20   let count = f32(max(min(ah + i32({kh}), i32({h})) - max(ah, 0), 1) \
                 * max(min(aw + i32({kw}), i32({w})) - max(aw, 0), 1));\n"
            ),
            "acc = acc + x / count;",
        ),
    };
    let _ = write!(
        body,
        "{count}    var acc = {init};\n\
         \x20   for (var a = 0u; a < {kh}; a = a + 1u) {{\n\
         \x20       for (var b = 0u; b < {kw}; b = b + 1u) {{\n\
         \x20           let ih = i32(c1 * {sh} + a) - i32({pt});\n\
         \x20           let iw = i32(c2 * {sw} + b) - i32({pl});\n\
         \x20           if (ih >= 0 && iw >= 0 && ih < i32({h}) && iw < i32({w})) {{\n\
         \x20               let x = {load};\n                {step}\n\
         \x20           }}\n        }}\n    }}\n\
         \x20   out0[o] = acc;\n"
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
    let (kh, kw) = (params.push(size[0]), params.push(size[1]));
    let [sh, sw] = geometry.stride.map(|v| params.push(v));
    let [pt, pl] = geometry.pad.map(|v| params.push(v));
    let (h, w) = (params.push(out_shape[1]), params.push(out_shape[2]));
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
    // The window at (oh, ow) of the output, each of its positions (yh, yw)
    // inside the images visited in order.
    let window = |inner: &str| {
        format!(
            "            for (var p = 0u; p < {kh}; p = p + 1u) {{\n\
             \x20               for (var q = 0u; q < {kw}; q = q + 1u) {{\n\
             \x20                   let yh = i32(oh * {sh} + p) - i32({pt});\n\
             \x20                   let yw = i32(ow * {sw} + q) - i32({pl});\n\
             \x20                   if (yh >= 0 && yw >= 0 && yh < i32({h}) && yw < i32({w})) {{ {inner} }}\n\
             \x20               }}\n            }}\n"
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
        PoolOp::Avg => format!(
            "            var count = 0u;\n{}\
             \x20           acc = acc + {grad} / f32(max(count, 1u));\n",
            window("count = count + 1u;")
        ),
    };
    let _ = write!(
        body,
        "    var acc = 0.0;\n\
         \x20   for (var a = 0u; a < {kh}; a = a + 1u) {{\n\
         \x20       for (var b = 0u; b < {kw}; b = b + 1u) {{\n\
         \x20           let ty = i32(c1 + {pt}) - i32(a);\n\
         \x20           let tx = i32(c2 + {pl}) - i32(b);\n\
         \x20           if (ty < 0 || tx < 0 || u32(ty) % {sh} != 0u || u32(tx) % {sw} != 0u) {{ continue; }}\n\
         \x20           let oh = u32(ty) / {sh};\n            let ow = u32(tx) / {sw};\n\
         \x20           if (oh >= {oh} || ow >= {ow}) {{ continue; }}\n\
         {sends}        }}\n    }}\n    out0[i] = acc;\n"
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
