//! Convolutions as implicit matrix products on the matmul's tiles: each
//! pass names its operands' elements by where they sit in the windows, and
//! the tile staging reads them there (zero where a window leaves the
//! images). No im2col matrix, no transposed copy of the filter or of the
//! gradient: the three passes differ only in these reads. Each read is one
//! template (`Loader`) written one element at a time and four (a `vec4`
//! of neighbouring channels, where they are contiguous and aligned); the
//! product takes the four where its tile is wide enough, and fetches
//! them a slice ahead like a matrix's. On SwiftShader a 3x3 convolution of
//! 32 to 64 channels took 0.80x the time with them, and a step training
//! its filter 0.78x.

use super::elementwise::{AnchorParts, fused};
use super::kernel::*;
use super::matmul::{NARROWEST_TILE, Operand, Vectors, product};
use crate::ir::layout::Layout;
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

/// Pass `pass` as an implicit product on the matmul's tiles: its
/// operands' elements read where they sit in the windows, four
/// neighbouring channels at a time where they lie contiguous and aligned
/// (`Access::in_fours`), and an operand that is a plain matrix (a stored filter
/// forward, a stored gradient for the filter's) read as one.
fn tiled(
    pass: ConvPass,
    geometry: ConvGeometry,
    first: &Access,
    second: &Access,
    shape: &[usize],
    epilogue: Group<'_>,
    cpu: bool,
) -> Kernel {
    let mut params = Params::default();
    // An operand that is a plain matrix, where one is.
    let matrix: Access;
    let [sh, sw, dh, dw, pt, pl] = window_words(&mut params, geometry);
    let mut p = |v: usize| params.push(v);
    // The images' row and column under a window tap (`oh`, `kh`, `ow`,
    // `kw` in scope) for images `h` by `w` high and wide; zero outside them.
    let window = |h: String, w: String| {
        format!(
            "    let ih = i32(oh * {sh} + kh * {dh}) - i32({pt});\n\
             \x20   let iw = i32(ow * {sw} + kw * {dw}) - i32({pl});\n\
             \x20   if (ih < 0 || iw < 0 || ih >= i32({h}) || iw >= i32({w})) {{ return ZERO; }}\n"
        )
    };
    let (first_operand, second_loader, out, k) = match pass {
        ConvPass::Forward => {
            // [n, oh*ow, o] = windows of x [n, h, w, c] times f [kh*kw*c, o].
            let ([n, h, w, c], xs) = dims(first);
            let ([kh, kw, _, o], fs) = dims(second);
            let (oh, ow) = (shape[1], shape[2]);
            let (p_ow, p_kwc, p_c, p_kw) = (p(ow), p(kw * c), p(c), p(kw));
            let taps = format!(
                "    let kh = k / {p_kwc}; let kw = (k / {p_c}) % {p_kw}; let ci = k % {p_c};\n"
            );
            let a = Loader {
                body: format!(
                    "    let oh = r / {p_ow}; let ow = r % {p_ow};\n{taps}{}",
                    window(p(h), p(w))
                ),
                index: format!(
                    "base + u32(ih) * {} + u32(iw) * {} + ci * {}",
                    p(xs[1]),
                    p(xs[2]),
                    p(xs[3])
                ),
            };
            let b = Loader {
                body: taps,
                index: format!(
                    "base + kh * {} + kw * {} + ci * {} + col * {}",
                    p(fs[0]),
                    p(fs[1]),
                    p(fs[2]),
                    p(fs[3])
                ),
            };
            let fours = first.in_fours(3).then_some(Vectors::Rows);
            let images = a.operand(0, first, xs[0], fours);
            // A filter stored as laid out is the matrix [kh*kw*c, o].
            if second.layout.is_contiguous(&second.shape) {
                matrix = plain(second, [kh * kw * c, o]);
                let operands = [images, Operand::Matrix(&matrix)];
                return product(
                    params,
                    operands,
                    &[n, oh * ow, o],
                    kh * kw * c,
                    epilogue,
                    cpu,
                );
            }
            (images, (b, None), vec![n, oh * ow, o], kh * kw * c)
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
            let a = Loader {
                body: format!(
                    "    let ih = r / {p_w}; let iw = r % {p_w};\n{taps}\
                     \x20   let ty = i32(ih + {pt}) - i32(kh * {dh});\n\
                     \x20   let tx = i32(iw + {pl}) - i32(kw * {dw});\n\
                     \x20   if (ty < 0 || tx < 0) {{ return ZERO; }}\n\
                     \x20   let oh = u32(ty) / {sh}; let ow = u32(tx) / {sw};\n\
                     \x20   if (u32(ty) % {sh} != 0u || u32(tx) % {sw} != 0u || oh >= {} || ow >= {}) {{ return ZERO; }}\n",
                    p(oh),
                    p(ow),
                ),
                index: format!(
                    "base + oh * {} + ow * {} + co * {}",
                    p(ds[1]),
                    p(ds[2]),
                    p(ds[3])
                ),
            };
            let b = Loader {
                body: taps,
                index: format!(
                    "base + kh * {} + kw * {} + col * {} + co * {}",
                    p(fs[0]),
                    p(fs[1]),
                    p(fs[2]),
                    p(fs[3])
                ),
            };
            // Four output channels of one tap, of the gradient and of the
            // filter: along the product's depth for both.
            let fours = first.in_fours(3).then_some(Vectors::Rows);
            let gradient = a.operand(0, first, ds[0], fours);
            let fours = second.in_fours(3).then_some(Vectors::Columns);
            (gradient, (b, fours), vec![n, h * w, c], kh * kw * o)
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
            let a = Loader {
                body: format!(
                    "    let kh = r / {p_kwc}; let kw = (r / {p_c}) % {p_kw}; let ci = r % {p_c};\n{positions}{}",
                    window(p(h), p(w))
                ),
                index: format!(
                    "base + img * {} + u32(ih) * {} + u32(iw) * {} + ci * {}",
                    p(xs[0]),
                    p(xs[1]),
                    p(xs[2]),
                    p(xs[3])
                ),
            };
            let b = Loader {
                body: positions,
                index: format!(
                    "base + img * {} + oh * {} + ow * {} + col * {}",
                    p(ds[0]),
                    p(ds[1]),
                    p(ds[2]),
                    p(ds[3])
                ),
            };
            // Four input channels of one tap: along the product's rows.
            let fours = first.in_fours(3).then_some(Vectors::Columns);
            let images = a.operand(0, first, 0, fours);
            // A gradient stored as laid out is the matrix [n*oh*ow, o].
            if second.layout.is_contiguous(&second.shape) {
                matrix = plain(second, [n * oh * ow, o]);
                let operands = [images, Operand::Matrix(&matrix)];
                return product(
                    params,
                    operands,
                    &[kh * kw * c, o],
                    n * oh * ow,
                    epilogue,
                    cpu,
                );
            }
            (images, (b, None), vec![kh * kw * c, o], n * oh * ow)
        }
    };
    let (loader, fours) = second_loader;
    let second = loader.operand(1, second, 0, fours);
    product(params, [first_operand, second], &out, k, epilogue, cpu)
}

/// How an operand's function finds its element: `body` computes the
/// indices (returning `ZERO` for an element outside the images), `index`
/// is the element's place in the binding.
struct Loader {
    body: String,
    index: String,
}

impl Loader {
    /// Operand `which` (0 or 1) as this loader reads it, its batches
    /// `batch_stride` apart: one
    /// element at a time, and four (`vector`'s dim) where it says so. The
    /// vector's dim has stride 1 (`Access::in_fours`), so the four are one
    /// `vec4<f32>` of the binding at `index / 4`.
    fn operand<'a>(
        self,
        which: usize,
        access: &Access,
        batch_stride: usize,
        vector: Option<Vectors>,
    ) -> Operand<'a> {
        // The first operand's function reads (r, k), the second's (k, col).
        let (name, args, binding) = match which {
            0 => ("a", "r: u32, k: u32", "in0"),
            _ => ("b", "k: u32, col: u32", "in1"),
        };
        let text = |ty: &str, zero: &str, at: String| {
            format!(
                "fn load_{name}(base: u32, {args}) -> {ty} {{\n{}    return {binding}[{at}];\n}}\n",
                self.body.replace("ZERO", zero)
            )
        };
        Operand::Loaded {
            offset: access.layout.offset,
            batch_stride,
            function: text("f32", "0.0", self.index.clone()),
            vector: vector.map(|v| {
                (
                    v,
                    text(
                        "vec4<f32>",
                        "vec4<f32>(0.0)",
                        format!("({}) / 4u", self.index),
                    ),
                )
            }),
        }
    }
}

/// A stored operand as the plain matrix `[rows, cols]` it is.
fn plain(access: &Access, [rows, cols]: [usize; 2]) -> Access {
    Access {
        shape: vec![rows, cols],
        layout: Layout {
            offset: access.layout.offset,
            strides: vec![cols, 1],
        },
        dtype: access.dtype,
    }
}

/// Threads per workgroup of a direct pass: one per output element.
const DIRECT_WORKGROUP: u32 = 64;

/// The kernel of convolution pass `pass` of `geometry` of `first` and
/// `second` (see `ConvPass`; a `depthwise` filter `[kh, kw, c, m]` makes
/// output channel `ci * m + mi` from input channel `ci` alone), writing
/// `shape` row-major through `epilogue`. A depthwise pass, and a pass whose
/// product would be narrower than the narrowest tile, runs `direct`; the
/// others are implicit products on the matmul's tiles (`tiled`), shaped
/// for a CPU adapter where `cpu` says it is one.
pub fn conv(
    pass: ConvPass,
    geometry: ConvGeometry,
    depthwise: bool,
    [first, second]: [&Access; 2],
    shape: &[usize],
    epilogue: Group<'_>,
    cpu: bool,
) -> Kernel {
    // Every pass writes its product's columns last: the forward pass's and
    // the filter's gradient's output channels, the images' gradient's
    // input channels.
    let columns = shape.last().copied().unwrap_or(1);
    if depthwise || columns < NARROWEST_TILE {
        direct(pass, geometry, depthwise, first, second, shape, epilogue)
    } else {
        tiled(pass, geometry, first, second, shape, epilogue, cpu)
    }
}

/// One thread per output element, looping over what it sums: no
/// workgroup memory and no barriers, so nothing is computed past an edge
/// and nothing waits. The matmul's tiles are at least `NARROWEST_TILE`
/// wide: a product of 8 channels (W8's first convolution, and the
/// gradient of its images through the second) computed half its tile for
/// nothing, and the filter's gradient of few taps was one workgroup on one
/// core; directly they ran 2-5x faster on lavapipe (`examples/conv_timing`).
/// A depthwise pass sums only a window's taps (times `m` for the images'
/// gradient), too few to tile at all. Nothing is scattered:
/// - `Forward` (`x`, `f`): the window's taps, of every input channel (of
///   its own, depthwise);
/// - `Input` (`dy`, `f`): the windows holding its position, found from the
///   position (a tap whose row is not a whole stride away holds none), and
///   each output channel made from its channel;
/// - `Filter` (`x`, `dy`): every window position of every image, its tap's
///   element of the images times the gradient there: long loops over few
///   threads (a 3x3 filter of 32 channels is 288), which a split over
///   workgroups would shorten for large batches.
fn direct(
    pass: ConvPass,
    geometry: ConvGeometry,
    depthwise: bool,
    first: &Access,
    second: &Access,
    shape: &[usize],
    epilogue: Group<'_>,
) -> Kernel {
    let mut params = Params::default();
    let total: usize = shape.iter().product();
    let p_total = params.push(total);
    let mut body = format!(
        "    let o = wg * {DIRECT_WORKGROUP}u + lid;\n    if (o >= {p_total}) {{ return; }}\n"
    );
    coords(&mut body, &mut params, "o", "c", shape);
    let [sh, sw, dh, dw, pt, pl] = window_words(&mut params, geometry);
    let mut p = |v: usize| params.push(v);
    let loops = match pass {
        ConvPass::Forward => {
            let ([_, h, w, c], _) = dims(first);
            let ([kh, kw, _, m], _) = dims(second);
            let (h, w, kh, kw) = (p(h), p(w), p(kh), p(kw));
            // The input channels an output channel sums, and its filter's.
            let (channels, filter) = match depthwise {
                true => {
                    let m = p(m);
                    (format!("c3 / {m}, c3 / {m} + 1u"), format!("c3 % {m}"))
                }
                false => (format!("0u, {}", p(c)), "c3".to_string()),
            };
            let x = element(&mut params, 0, first, ["c0", "u32(ih)", "u32(iw)", "ci"]);
            let f = element(&mut params, 1, second, ["a", "b", "ci", &filter]);
            format!(
                "    let channels = vec2<u32>({channels});\n\
                 \x20   for (var a = 0u; a < {kh}; a = a + 1u) {{\n\
                 \x20       let ih = i32(c1 * {sh} + a * {dh}) - i32({pt});\n\
                 \x20       if (ih < 0 || ih >= i32({h})) {{ continue; }}\n\
                 \x20       for (var b = 0u; b < {kw}; b = b + 1u) {{\n\
                 \x20           let iw = i32(c2 * {sw} + b * {dw}) - i32({pl});\n\
                 \x20           if (iw < 0 || iw >= i32({w})) {{ continue; }}\n\
                 \x20           for (var ci = channels.x; ci < channels.y; ci = ci + 1u) {{\n\
                 \x20               acc = acc + {x} * {f};\n\
                 \x20           }}\n        }}\n    }}\n"
            )
        }
        ConvPass::Input => {
            let ([_, oh, ow, o], _) = dims(first);
            let ([kh, kw, _, m], _) = dims(second);
            let (oh, ow, kh, kw) = (p(oh), p(ow), p(kh), p(kw));
            // The output channels made from this input channel (the
            // filter's `[.., c3, mi]`), and which of the gradient's each is.
            let (count, channel) = match depthwise {
                true => {
                    let m = p(m);
                    (m.clone(), format!("c3 * {m} + mi"))
                }
                false => (p(o), "mi".to_string()),
            };
            let g = element(&mut params, 0, first, ["c0", "yh", "yw", &channel]);
            let f = element(&mut params, 1, second, ["a", "b", "c3", "mi"]);
            format!(
                "    for (var a = 0u; a < {kh}; a = a + 1u) {{\n\
                 \x20       let th = i32(c1 + {pt}) - i32(a * {dh});\n\
                 \x20       if (th < 0 || u32(th) % {sh} != 0u || u32(th) / {sh} >= {oh}) {{ continue; }}\n\
                 \x20       let yh = u32(th) / {sh};\n\
                 \x20       for (var b = 0u; b < {kw}; b = b + 1u) {{\n\
                 \x20           let tw = i32(c2 + {pl}) - i32(b * {dw});\n\
                 \x20           if (tw < 0 || u32(tw) % {sw} != 0u || u32(tw) / {sw} >= {ow}) {{ continue; }}\n\
                 \x20           let yw = u32(tw) / {sw};\n\
                 \x20           for (var mi = 0u; mi < {count}; mi = mi + 1u) {{\n\
                 \x20               acc = acc + {g} * {f};\n\
                 \x20           }}\n        }}\n    }}\n"
            )
        }
        ConvPass::Filter => {
            let ([n, h, w, _], _) = dims(first);
            let ([_, oh, ow, _], _) = dims(second);
            let m = shape.get(3).copied().unwrap_or(1);
            let (n, h, w, oh, ow) = (p(n), p(h), p(w), p(oh), p(ow));
            // The gradient's channel this filter element made.
            let channel = match depthwise {
                true => format!("c2 * {} + c3", p(m)),
                false => "c3".to_string(),
            };
            let x = element(&mut params, 0, first, ["e", "u32(ih)", "u32(iw)", "c2"]);
            let g = element(&mut params, 1, second, ["e", "yh", "yw", &channel]);
            format!(
                "    for (var e = 0u; e < {n}; e = e + 1u) {{\n\
                 \x20       for (var yh = 0u; yh < {oh}; yh = yh + 1u) {{\n\
                 \x20           let ih = i32(yh * {sh} + c0 * {dh}) - i32({pt});\n\
                 \x20           if (ih < 0 || ih >= i32({h})) {{ continue; }}\n\
                 \x20           for (var yw = 0u; yw < {ow}; yw = yw + 1u) {{\n\
                 \x20               let iw = i32(yw * {sw} + c1 * {dw}) - i32({pl});\n\
                 \x20               if (iw < 0 || iw >= i32({w})) {{ continue; }}\n\
                 \x20               acc = acc + {x} * {g};\n\
                 \x20           }}\n        }}\n    }}\n"
            )
        }
    };
    body += "    var acc = 0.0;\n";
    body += &loops;
    body += "    _ = fused(o, acc);\n";
    let mut decls = "@group(0) @binding(1) var<storage, read> in0: array<f32>;\n\
                     @group(0) @binding(2) var<storage, read> in1: array<f32>;\n"
        .to_string();
    let (bindings, function) = fused(epilogue, &mut params, 3, AnchorParts::One);
    decls += &bindings;
    decls += &function;
    let groups = (total as u64).div_ceil(DIRECT_WORKGROUP as u64);
    params.sizes = true;
    params.kernel(&decls, DIRECT_WORKGROUP, &body, groups)
}

/// Element `[i0, i1, i2, i3]` of binding `in{b}`, read through `access`.
fn element(params: &mut Params, b: usize, access: &Access, i: [&str; 4]) -> String {
    let (_, s) = dims(access);
    let mut index = params.push(access.layout.offset);
    for (i, s) in i.iter().zip(s) {
        index = format!("{index} + {i} * {}", params.push(s));
    }
    format!("in{b}[{index}]")
}

/// Where the windows sit, as uniform words: the strides, the dilations and
/// the pads above and left, in that order.
fn window_words(params: &mut Params, geometry: ConvGeometry) -> [String; 6] {
    let ConvGeometry {
        stride: [sh, sw],
        dilation: [dh, dw],
        pad: [pt, pl],
    } = geometry;
    [sh, sw, dh, dw, pt, pl].map(|v| params.push(v))
}
