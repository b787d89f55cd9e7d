//! WGSL for a planned block. Pure text: nothing here touches the GPU, so the
//! kernels can be read and tested without one.
//!
//! The text depends only on the block's structure (ops, ranks, which inputs
//! broadcast): every size is a uniform. That makes the text itself the kernel
//! cache's key, and a loop that repeats the same ops on new data compiles each
//! kernel once.

use std::fmt::Write;

use crate::fusion::ElementwiseBlock;
use crate::ir::{BinaryOp, OpIr, OpKind, TensorId, UnaryOp};
use crate::tensor::shape;

/// Threads per workgroup of every generated kernel.
pub const WORKGROUP_SIZE: u32 = 256;

/// A kernel ready to compile and launch.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub wgsl: String,
    /// The uniform words, padded to whole `vec4<u32>`s.
    pub params: Vec<u32>,
    /// Threads to launch, one per output element.
    pub threads: u64,
}

/// The kernel of an elementwise block. `shape_of` gives the shape of an input
/// read from memory.
pub fn elementwise(
    block: &ElementwiseBlock,
    ops: &[OpIr],
    shape_of: impl Fn(TensorId) -> Vec<usize>,
) -> Kernel {
    let rank = block.shape.len();
    let mut params: Vec<u32> = vec![shape::numel(&block.shape) as u32];
    params.extend(block.shape.iter().map(|&d| d as u32));

    let mut decls = String::new();
    let mut body = String::new();
    let mut binding = 1;

    // Coordinates of this thread's output element, innermost dim last.
    let any_broadcast = block.inputs.iter().any(|&t| shape_of(t) != block.shape);
    if any_broadcast {
        body.push_str("    var rem = idx;\n");
        for d in (0..rank).rev() {
            let _ = writeln!(
                body,
                "    let c{d} = rem % param({}u); rem = rem / param({}u);",
                1 + d,
                1 + d
            );
        }
    }

    for (j, &input) in block.inputs.iter().enumerate() {
        let _ = writeln!(
            decls,
            "@group(0) @binding({binding}) var<storage, read> in{j}: array<f32>;"
        );
        binding += 1;
        let input_shape = shape_of(input);
        if input_shape == block.shape {
            let _ = writeln!(body, "    let x{j} = in{j}[idx];");
        } else {
            let strides = shape::broadcast_strides(&input_shape, &block.shape);
            let base = params.len();
            params.extend(strides.iter().map(|&s| s as u32));
            let terms: Vec<String> = (0..rank)
                .map(|d| format!("c{d} * param({}u)", base + d))
                .collect();
            let index = if terms.is_empty() {
                "0u".to_string()
            } else {
                terms.join(" + ")
            };
            let _ = writeln!(body, "    let x{j} = in{j}[{index}];");
        }
    }

    // Each op's value, named v{op index}; operands resolved to a loaded input
    // or an earlier value of this block.
    let value_of = |t: TensorId| -> String {
        if let Some(j) = block.inputs.iter().position(|&i| i == t) {
            format!("x{j}")
        } else {
            let producer = block
                .ops
                .iter()
                .find(|&&i| ops[i].output == t)
                .copied()
                .unwrap_or(0);
            format!("v{producer}")
        }
    };
    for &i in &block.ops {
        let op = &ops[i];
        let expr = match &op.kind {
            OpKind::Fill(v) => scalar_param(&mut params, *v),
            OpKind::Unary(u) => unary(*u, &value_of(op.inputs[0])),
            OpKind::Binary(b) => binary(*b, &value_of(op.inputs[0]), &value_of(op.inputs[1])),
            OpKind::BinaryScalar {
                op: b,
                scalar,
                scalar_first,
            } => {
                let (x, s) = (value_of(op.inputs[0]), scalar_param(&mut params, *scalar));
                if *scalar_first {
                    binary(*b, &s, &x)
                } else {
                    binary(*b, &x, &s)
                }
            }
            // The planner never puts an upload in an elementwise block.
            OpKind::Upload(_) => "0.0".to_string(),
        };
        let _ = writeln!(body, "    let v{i} = {expr};");
    }
    for (k, &output) in block.outputs.iter().enumerate() {
        let _ = writeln!(
            decls,
            "@group(0) @binding({binding}) var<storage, read_write> out{k}: array<f32>;"
        );
        binding += 1;
        let _ = writeln!(body, "    out{k}[idx] = {};", value_of(output));
    }

    while !params.len().is_multiple_of(4) {
        params.push(0);
    }
    let wgsl = format!(
        "{PRELUDE}@group(0) @binding(0) var<uniform> params: array<vec4<u32>, {words}>;\n{decls}\n\
         fn param(i: u32) -> u32 {{ return params[i / 4u][i % 4u]; }}\n\n\
         @compute @workgroup_size({WORKGROUP_SIZE})\n\
         fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{\n\
         \x20   let idx = gid.x + gid.y * groups.x * {WORKGROUP_SIZE}u;\n\
         \x20   if (idx >= param(0u)) {{ return; }}\n{body}}}\n",
        words = params.len() / 4,
    );
    Kernel {
        wgsl,
        threads: shape::numel(&block.shape) as u64,
        params,
    }
}

/// Helpers every kernel may call. WGSL's own `pow` is undefined for a negative
/// base and its `tanh` overflows to NaN on some drivers for large inputs;
/// these follow NumPy instead. NaN comes from a variable because WGSL
/// rejects a NaN constant expression.
const PRELUDE: &str = "\
var<private> wf_nan_bits: u32 = 0x7fc00000u;
fn wf_tanh(x: f32) -> f32 { return tanh(clamp(x, -15.0, 15.0)); }
fn wf_pow(a: f32, b: f32) -> f32 {
    if (b == 0.0) { return 1.0; }
    if (a >= 0.0) { return pow(a, b); }
    if (fract(b) != 0.0) { return bitcast<f32>(wf_nan_bits); }
    let m = pow(-a, b);
    return select(m, -m, fract(b * 0.5) != 0.0);
}

";

/// A scalar operand, passed as a uniform word: a loop whose learning rate
/// changes reuses its kernel, and NaN or infinity (which WGSL constant
/// expressions reject) pass through unchanged.
fn scalar_param(params: &mut Vec<u32>, v: f32) -> String {
    params.push(v.to_bits());
    format!("bitcast<f32>(param({}u))", params.len() - 1)
}

fn unary(op: UnaryOp, x: &str) -> String {
    match op {
        UnaryOp::Neg => format!("-({x})"),
        UnaryOp::Abs => format!("abs({x})"),
        UnaryOp::Exp => format!("exp({x})"),
        UnaryOp::Log => format!("log({x})"),
        UnaryOp::Sqrt => format!("sqrt({x})"),
        UnaryOp::Rsqrt => format!("inverseSqrt({x})"),
        UnaryOp::Square => format!("({x} * {x})"),
        UnaryOp::Relu => format!("max({x}, 0.0)"),
        // The tanh approximation (as in PyTorch's `gelu(approximate='tanh')`).
        UnaryOp::Gelu => format!(
            "(0.5 * {x} * (1.0 + wf_tanh(0.7978845608 * ({x} + 0.044715 * {x} * {x} * {x}))))"
        ),
        UnaryOp::Sigmoid => format!("(1.0 / (1.0 + exp(-({x}))))"),
        UnaryOp::Tanh => format!("wf_tanh({x})"),
        UnaryOp::Sin => format!("sin({x})"),
        UnaryOp::Cos => format!("cos({x})"),
    }
}

fn binary(op: BinaryOp, a: &str, b: &str) -> String {
    let compare = |sym: &str| format!("select(0.0, 1.0, {a} {sym} {b})");
    match op {
        BinaryOp::Add => format!("({a} + {b})"),
        BinaryOp::Sub => format!("({a} - {b})"),
        BinaryOp::Mul => format!("({a} * {b})"),
        BinaryOp::Div => format!("({a} / {b})"),
        BinaryOp::Pow => format!("wf_pow({a}, {b})"),
        BinaryOp::Maximum => format!("max({a}, {b})"),
        BinaryOp::Minimum => format!("min({a}, {b})"),
        BinaryOp::Equal => compare("=="),
        BinaryOp::Greater => compare(">"),
        BinaryOp::GreaterEqual => compare(">="),
        BinaryOp::Less => compare("<"),
        BinaryOp::LessEqual => compare("<="),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_of(ops: &[OpIr], shape: &[usize]) -> ElementwiseBlock {
        ElementwiseBlock {
            ops: (1..ops.len()).collect(),
            inputs: vec![TensorId(1)],
            outputs: vec![ops[ops.len() - 1].output],
            shape: shape.to_vec(),
        }
    }

    #[test]
    fn the_kernel_text_does_not_depend_on_sizes() {
        let make = |n: usize| {
            let ops = vec![
                OpIr {
                    kind: OpKind::Fill(0.0),
                    inputs: vec![],
                    output: TensorId(1),
                    shape: vec![n],
                },
                OpIr {
                    kind: OpKind::Unary(UnaryOp::Exp),
                    inputs: vec![TensorId(1)],
                    output: TensorId(2),
                    shape: vec![n],
                },
            ];
            elementwise(&block_of(&ops, &[n]), &ops, |_| vec![n])
        };
        let (small, large) = (make(3), make(3_000_000));
        assert_eq!(small.wgsl, large.wgsl);
        assert_ne!(small.params, large.params);
    }

    #[test]
    fn a_broadcast_input_is_loaded_through_its_strides() {
        let ops = vec![
            OpIr {
                kind: OpKind::Fill(0.0),
                inputs: vec![],
                output: TensorId(1),
                shape: vec![3],
            },
            OpIr {
                kind: OpKind::BinaryScalar {
                    op: BinaryOp::Mul,
                    scalar: 2.0,
                    scalar_first: false,
                },
                inputs: vec![TensorId(1)],
                output: TensorId(2),
                shape: vec![2, 3],
            },
        ];
        let kernel = elementwise(&block_of(&ops, &[2, 3]), &ops, |_| vec![3]);
        assert!(kernel.wgsl.contains("c0 * param"), "{}", kernel.wgsl);
        assert_eq!(&kernel.params[..5], &[6, 2, 3, 0, 1]);
    }
}
