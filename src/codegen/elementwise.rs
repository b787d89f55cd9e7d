//! Elementwise kernels: a fused group of ops over one shape (also run as a
//! matmul's epilogue or a reduction's prologue), and strided copies.

use rustc_hash::FxHashMap;
use std::fmt::Write;

use crate::fusion::ElementwiseBlock;
use crate::ir::layout::Layout;
use crate::ir::shape;
use crate::ir::{OpIr, OpKind, TensorId};

use super::kernel::*;

/// The kernel of an elementwise block (without an anchor). `accesses` says
/// how to read each of the block's inputs, in order.
pub fn elementwise(block: &ElementwiseBlock, ops: &[OpIr], accesses: &[Access]) -> Kernel {
    let numel = shape::numel(&block.shape);
    let mut params = Params::default();
    let n = params.push(numel);
    let (decls, function) = fused(block, ops, accesses, &mut params, 1);
    let body = format!(
        "    let idx = wg * {WORKGROUP_SIZE}u + lid;\n    if (idx >= {n}) {{ return; }}\n    _ = fused(idx, 0.0);\n"
    );
    params.kernel(
        &format!("{decls}\n{function}"),
        WORKGROUP_SIZE,
        &body,
        (numel as u64).div_ceil(WORKGROUP_SIZE as u64),
    )
}

/// An elementwise group as a WGSL function `fused(idx, anchor) -> f32`: the
/// values of its ops at flat position `idx` of the block's shape, each
/// output written, `anchor` standing for the anchor's value there. Returns
/// the bindings' declarations (inputs from `first_binding`, then outputs)
/// and the function.
pub(super) fn fused(
    block: &ElementwiseBlock,
    ops: &[OpIr],
    accesses: &[Access],
    params: &mut Params,
    first_binding: usize,
) -> (String, String) {
    let out = &block.shape;
    let mut decls = String::new();
    let mut body = String::new();
    if accesses.iter().any(|a| !a.is_direct(out)) {
        coords(&mut body, params, "idx", "c", out);
    }
    for (j, access) in accesses.iter().enumerate() {
        let _ = writeln!(
            decls,
            "@group(0) @binding({}) var<storage, read> in{}: array<f32>;",
            first_binding + j,
            first_binding - 1 + j
        );
        let index = if access.is_direct(out) {
            "idx".to_string()
        } else {
            strided_index(params, access, out, "c")
        };
        let _ = writeln!(body, "    let x{j} = in{}[{index}];", first_binding - 1 + j);
    }

    // Each op's value, named v{op index}; operands resolve to a loaded input,
    // the anchor's value, or an earlier value of this block.
    let input_index: FxHashMap<TensorId, usize> = block
        .inputs
        .iter()
        .enumerate()
        .map(|(j, &t)| (t, j))
        .collect();
    let producer: FxHashMap<TensorId, usize> =
        block.ops.iter().map(|&i| (ops[i].output, i)).collect();
    let anchor = block.anchor.map(|i| ops[i].output);
    let missing = std::cell::Cell::new(None);
    let value_of = |t: TensorId| -> Value {
        match (input_index.get(&t), producer.get(&t)) {
            _ if Some(t) == anchor => Value::Anchor,
            (Some(&j), _) => Value::Input(j),
            (None, Some(&i)) => Value::Op(i),
            // The planner gives every operand a source.
            (None, None) => {
                missing.set(Some(t));
                Value::Missing
            }
        }
    };
    // One `write!` per op and no intermediate strings: a loop of a thousand
    // small ops generates a thousand lines on every flush.
    for &i in &block.ops {
        let op = &ops[i];
        let arg = |k: usize| value_of(op.inputs[k]);
        let _ = write!(body, "    let v{i} = ");
        let _ = match &op.kind {
            OpKind::Fill(v) => write!(body, "{}", params.push_f32(*v)),
            OpKind::Arange { start, step } => {
                let (start, step) = (params.push_f32(*start), params.push_f32(*step));
                write!(body, "({start} + f32(idx) * {step})")
            }
            OpKind::Unary(u) => unary(&mut body, *u, arg(0)),
            OpKind::Binary(b) => binary(&mut body, *b, arg(0), arg(1)),
            OpKind::BinaryScalar {
                op: b,
                scalar,
                scalar_first,
            } => {
                let s = params.push_f32(*scalar);
                if *scalar_first {
                    binary(&mut body, *b, s, arg(0))
                } else {
                    binary(&mut body, *b, arg(0), s)
                }
            }
            OpKind::Clamp { min, max } => {
                let (lo, hi) = (params.push_f32(*min), params.push_f32(*max));
                write!(body, "min(max({}, {lo}), {hi})", arg(0))
            }
            OpKind::Where => write!(body, "select({}, {}, {} != 0.0)", arg(2), arg(1), arg(0)),
            // The planner puts only elementwise ops in this block.
            other => {
                params.breaks(format!("`{}` is not elementwise", other.name()));
                write!(body, "0.0")
            }
        };
        body.push_str(";\n");
    }
    let first_output = first_binding + accesses.len();
    for (k, &output) in block.outputs.iter().enumerate() {
        let _ = writeln!(
            decls,
            "@group(0) @binding({}) var<storage, read_write> out{k}: array<f32>;",
            first_output + k
        );
        let _ = writeln!(body, "    out{k}[idx] = {};", value_of(output));
    }
    if let Some(t) = missing.get() {
        params.breaks(format!("{t} has no source in the fused block"));
    }
    let last = block
        .ops
        .last()
        .map_or_else(|| "anchor".to_string(), |&i| format!("v{i}"));
    let function =
        format!("fn fused(idx: u32, anchor: f32) -> f32 {{\n{body}    return {last};\n}}\n");
    (decls, function)
}

/// Copies `src` (of `shape`) into the positions `dst` names: materialises a
/// view, or places one input of a `cat`.
pub fn copy(src: &Access, dst: &Layout) -> Kernel {
    let shape = &src.shape;
    let numel = shape::numel(shape);
    let mut params = Params::default();
    let n = params.push(numel);
    let mut body =
        format!("    let idx = wg * {WORKGROUP_SIZE}u + lid;\n    if (idx >= {n}) {{ return; }}\n");
    coords(&mut body, &mut params, "idx", "c", shape);
    let from = strided_index(&mut params, src, shape, "c");
    let to = strided_index(
        &mut params,
        &Access {
            shape: shape.clone(),
            layout: dst.clone(),
        },
        shape,
        "c",
    );
    let _ = writeln!(body, "    out0[{to}] = in0[{from}];");
    let decls = "@group(0) @binding(1) var<storage, read> in0: array<f32>;\n\
                 @group(0) @binding(2) var<storage, read_write> out0: array<f32>;\n";
    params.kernel(
        decls,
        WORKGROUP_SIZE,
        &body,
        (numel as u64).div_ceil(WORKGROUP_SIZE as u64),
    )
}
