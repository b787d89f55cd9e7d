//! Convolutions as implicit matrix products on the matmul's tiles: each
//! pass names its operands' elements by where they sit in the windows, and
//! the tile staging reads them there (zero where a window leaves the
//! images). No im2col matrix, no transposed copy of the filter or of the
//! gradient: the three passes differ only in these reads.

use super::kernel::*;
use super::matmul::{Operand, product};
use crate::ir::{ConvGeometry, ConvPass};

/// A rank-4 access's dims and strides.
fn dims(access: &Access) -> ([usize; 4], [usize; 4]) {
    let (mut d, mut s) = ([0; 4], [0; 4]);
    for i in 0..4 {
        d[i] = access.shape.get(i).copied().unwrap_or(1);
        s[i] = access.layout.strides.get(i).copied().unwrap_or(0);
    }
    (d, s)
}

/// The kernel of convolution pass `pass` of `geometry` (see `ConvPass`)
/// of `first` and `second`, writing `shape` row-major through `epilogue`.
pub fn conv(
    pass: ConvPass,
    geometry: ConvGeometry,
    first: &Access,
    second: &Access,
    shape: &[usize],
    epilogue: Group<'_>,
) -> Kernel {
    let mut params = Params::default();
    let mut p = |v: usize| params.push(v);
    let ConvGeometry {
        stride: [sh, sw],
        dilation: [dh, dw],
        pad: [pt, pl],
    } = geometry;
    let (sh, sw, dh, dw, pt, pl) = (p(sh), p(sw), p(dh), p(dw), p(pt), p(pl));
    // The images' row and column under a window tap (`oh`, `kh`, `ow`,
    // `kw` in scope) for images `h` by `w` high and wide; 0 outside them.
    let window = |h: String, w: String| {
        format!(
            "    let ih = i32(oh * {sh} + kh * {dh}) - i32({pt});\n\
             \x20   let iw = i32(ow * {sw} + kw * {dw}) - i32({pl});\n\
             \x20   if (ih < 0 || iw < 0 || ih >= i32({h}) || iw >= i32({w})) {{ return 0.0; }}\n"
        )
    };
    let (operands, out, k) = match pass {
        ConvPass::Forward => {
            // [n, oh*ow, o] = windows of x [n, h, w, c] times f [kh*kw*c, o].
            let ([n, h, w, c], xs) = dims(first);
            let ([kh, kw, _, o], fs) = dims(second);
            let (oh, ow) = (shape[1], shape[2]);
            let (p_ow, p_kwc, p_c, p_kw) = (p(ow), p(kw * c), p(c), p(kw));
            let taps = format!(
                "    let kh = k / {p_kwc}; let kw = (k / {p_c}) % {p_kw}; let ci = k % {p_c};\n"
            );
            let a = format!(
                "fn load_a(base: u32, r: u32, k: u32) -> f32 {{\n\
                 \x20   let oh = r / {p_ow}; let ow = r % {p_ow};\n{taps}{}\
                 \x20   return in0[base + u32(ih) * {} + u32(iw) * {} + ci * {}];\n}}\n",
                window(p(h), p(w)),
                p(xs[1]),
                p(xs[2]),
                p(xs[3]),
            );
            let b = format!(
                "fn load_b(base: u32, k: u32, col: u32) -> f32 {{\n{taps}\
                 \x20   return in1[base + kh * {} + kw * {} + ci * {} + col * {}];\n}}\n",
                p(fs[0]),
                p(fs[1]),
                p(fs[2]),
                p(fs[3]),
            );
            let batched = (first.layout.offset, xs[0], a);
            (
                [batched, (second.layout.offset, 0, b)],
                vec![n, oh * ow, o],
                kh * kw * c,
            )
        }
        ConvPass::Input => {
            // [n, h*w, c] = dy [n, oh, ow, o] at the outputs whose windows
            // hold each pixel, times f [kh, kw, c, o] read as [kh*kw*o, c].
            let ([n, oh, ow, o], ds) = dims(first);
            let ([kh, kw, c, _], fs) = dims(second);
            let (h, w) = (shape[1], shape[2]);
            let (p_w, p_kwo, p_o, p_kw) = (p(w), p(kw * o), p(o), p(kw));
            let taps = format!(
                "    let kh = k / {p_kwo}; let kw = (k / {p_o}) % {p_kw}; let co = k % {p_o};\n"
            );
            let a = format!(
                "fn load_a(base: u32, r: u32, k: u32) -> f32 {{\n\
                 \x20   let ih = r / {p_w}; let iw = r % {p_w};\n{taps}\
                 \x20   let ty = i32(ih + {pt}) - i32(kh * {dh});\n\
                 \x20   let tx = i32(iw + {pl}) - i32(kw * {dw});\n\
                 \x20   if (ty < 0 || tx < 0) {{ return 0.0; }}\n\
                 \x20   let oh = u32(ty) / {sh}; let ow = u32(tx) / {sw};\n\
                 \x20   if (u32(ty) % {sh} != 0u || u32(tx) % {sw} != 0u || oh >= {} || ow >= {}) {{ return 0.0; }}\n\
                 \x20   return in0[base + oh * {} + ow * {} + co * {}];\n}}\n",
                p(oh),
                p(ow),
                p(ds[1]),
                p(ds[2]),
                p(ds[3]),
            );
            let b = format!(
                "fn load_b(base: u32, k: u32, col: u32) -> f32 {{\n{taps}\
                 \x20   return in1[base + kh * {} + kw * {} + col * {} + co * {}];\n}}\n",
                p(fs[0]),
                p(fs[1]),
                p(fs[2]),
                p(fs[3]),
            );
            let batched = (first.layout.offset, ds[0], a);
            (
                [batched, (second.layout.offset, 0, b)],
                vec![n, h * w, c],
                kh * kw * o,
            )
        }
        ConvPass::Filter => {
            // [kh*kw*c, o] = the taps of x [n, h, w, c] over every output
            // position, times dy [n*oh*ow, o].
            let ([_, h, w, c], xs) = dims(first);
            let ([n, oh, ow, o], ds) = dims(second);
            let (kh, kw) = (shape[0], shape[1]);
            let (p_kwc, p_c, p_kw) = (p(kw * c), p(c), p(kw));
            let (p_ohow, p_ow, p_oh) = (p(oh * ow), p(ow), p(oh));
            let positions = format!(
                "    let img = k / {p_ohow}; let oh = (k / {p_ow}) % {p_oh}; let ow = k % {p_ow};\n"
            );
            let a = format!(
                "fn load_a(base: u32, r: u32, k: u32) -> f32 {{\n\
                 \x20   let kh = r / {p_kwc}; let kw = (r / {p_c}) % {p_kw}; let ci = r % {p_c};\n\
                 {positions}{}\
                 \x20   return in0[base + img * {} + u32(ih) * {} + u32(iw) * {} + ci * {}];\n}}\n",
                window(p(h), p(w)),
                p(xs[0]),
                p(xs[1]),
                p(xs[2]),
                p(xs[3]),
            );
            let b = format!(
                "fn load_b(base: u32, k: u32, col: u32) -> f32 {{\n{positions}\
                 \x20   return in1[base + img * {} + oh * {} + ow * {} + col * {}];\n}}\n",
                p(ds[0]),
                p(ds[1]),
                p(ds[2]),
                p(ds[3]),
            );
            let operands = [(first.layout.offset, 0, a), (second.layout.offset, 0, b)];
            (operands, vec![kh * kw * c, o], n * oh * ow)
        }
    };
    let [a, b] = operands.map(|(offset, batch_stride, function)| Operand::Loaded {
        offset,
        batch_stride,
        function,
    });
    product(params, [a, b], &out, k, epilogue)
}
