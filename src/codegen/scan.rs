//! Running sums and products (`cumsum`, `cumprod`): one thread per line
//! along the axis, folding in order, so each output is the exact sequence
//! of additions (or multiplications) the op names (an int32's wraps as its
//! `add` and `mul` do). Lines are independent; a line of
//! millions of elements is one thread's loop, slow but right: a parallel
//! scan is the next step where it matters.

use std::fmt::Write;

use crate::ir::layout::Layout;
use crate::ir::shape;
use crate::ir::{DType, ScanOp};

use super::kernel::*;
use super::reduce::reduce_bindings;

/// Threads per workgroup of a scan: one per line.
const SCAN_WORKGROUP: u32 = 64;

/// The kernel of `cumsum` (or `cumprod`) of `input` along `axis`
/// (`exclusive`: each leaves its own element out; `reverse`: from the end),
/// written row-major. With a `prologue` the elements are computed as they
/// are loaded (`input` then describes its row-major result), as a
/// reduction's are.
pub fn scan(
    input: &Access,
    prologue: Option<Group<'_>>,
    op: ScanOp,
    axis: usize,
    exclusive: bool,
    reverse: bool,
) -> Kernel {
    let shape = &input.shape;
    let lines_shape: Vec<usize> = (0..shape.len())
        .filter(|&d| d != axis)
        .map(|d| shape[d])
        .collect();
    let out = Layout::contiguous(shape);
    let mut params = Params::default();
    let lines = params.push(shape::numel(&lines_shape));
    let n = params.push(shape.get(axis).copied().unwrap_or(1));
    let mut body =
        format!("    let r = wg * {SCAN_WORKGROUP}u + lid;\n    if (r >= {lines}) {{ return; }}\n");
    coords(&mut body, &mut params, "r", "c", &lines_shape);
    // Where the line starts in the input (through its layout) and in the
    // row-major output, and the step along the axis in each.
    let (mut from, mut to) = (params.push(input.layout.offset), "0u".to_string());
    for (k, d) in (0..shape.len()).filter(|&d| d != axis).enumerate() {
        from = format!("{from} + c{k} * {}", params.push(input.layout.strides[d]));
        to = format!("{to} + c{k} * {}", params.push(out.strides[d]));
    }
    let (step_in, step_out) = (
        params.push(input.layout.strides[axis]),
        params.push(out.strides[axis]),
    );
    // A float's running product is ±0 from a zero on, however far it had
    // overflowed before: `0 * Infinity` made NaN of every product after
    // the zero in `[1e4 x 20, 0, 2]`, where they are 0 (TF.js's CPU
    // multiplies in float64). `nf` says a value was not finite, whose
    // product with a zero is NaN, IEEE's, as before.
    let (init, state, combine) = match (op, input.dtype) {
        (ScanOp::Sum, DType::Float32) => ("0.0", "", "acc = acc + x;"),
        (ScanOp::Sum, _) => ("0", "", "acc = acc + x;"),
        (ScanOp::Prod, DType::Float32) => (
            "1.0",
            "    var nf = false;\n",
            "let xb = bitcast<u32>(x); if ((xb & 0x7fffffffu) == 0u && !nf) { acc = bitcast<f32>((bitcast<u32>(acc) ^ xb) & 0x80000000u); } else { nf = nf || (xb & 0x7fffffffu) >= wf_inf_bits; acc = acc * x; }",
        ),
        (ScanOp::Prod, _) => ("1", "", "acc = acc * x;"),
    };
    let at = if reverse {
        format!("{n} - 1u - k")
    } else {
        "k".to_string()
    };
    let store = if exclusive {
        format!("out0[o] = acc; {combine}")
    } else {
        format!("{combine} out0[o] = acc;")
    };
    let load = if prologue.is_some() {
        format!("fused(src + a * {step_in}, 0.0)")
    } else {
        format!("in0[src + a * {step_in}]")
    };
    let _ = write!(
        body,
        "    let src = {from};\n    let dst = {to};\n    var acc = {init};\n{state}\
         \x20   for (var k = 0u; k < {n}; k = k + 1u) {{\n\
         \x20       let a = {at};\n        let x = {load};\n\
         \x20       let o = dst + a * {step_out};\n        {store}\n    }}\n"
    );
    let (decls, _) = reduce_bindings(prologue, &mut params, input.dtype, input.dtype, false);
    let groups = (shape::numel(&lines_shape) as u64).div_ceil(SCAN_WORKGROUP as u64);
    params.kernel(&decls, SCAN_WORKGROUP, &body, groups)
}
