//! The interpreter: one kernel, compiled when the device is requested, that
//! runs any small fused elementwise block from a program in its uniform
//! words. So the first launch of a new small chain compiles nothing.
//!
//! Why: compiling a new pipeline has a floor (about 10 ms on SwiftShader, the
//! browser's CPU fallback, for a 20-line shader), and a program's first
//! iteration pays it for every new kernel. On a few thousand elements the
//! interpreter's dispatch per op costs less than that floor ever saves.
//! Larger blocks, and blocks past the interpreter's limits (inputs, outputs,
//! registers), are compiled as before.
//!
//! Each op's arithmetic is written by the same functions as the compiled
//! kernels' (`unary`, `binary`, `elementwise::expression`'s spelling of
//! clamp and where), so both compute the same values.

use rustc_hash::FxHashMap;
use std::fmt::Write;

use super::kernel::*;
use crate::fusion::ElementwiseBlock;
use crate::ir::shape;
use crate::ir::{BinaryOp, OpIr, OpKind, TensorId, UnaryOp};

/// Blocks of at most this many elements run interpreted.
pub const MAX_ELEMENTS: usize = 4096;
/// Input and output bindings: unused ones are bound to placeholders.
pub const INPUTS: usize = 4;
pub const OUTPUTS: usize = 2;
/// The most ops a program holds: a 1000-op chain fits.
const MAX_OPS: usize = 1024;
const MAX_RANK: usize = 8;
const REGISTERS: usize = 16;
/// `vec4`s before the code: the sizes, the output registers, and each
/// input's offset and strides.
const HEADER: usize = 4 + 3 * INPUTS;

const UNARY: [UnaryOp; 13] = [
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Sqrt,
    UnaryOp::Rsqrt,
    UnaryOp::Square,
    UnaryOp::Relu,
    UnaryOp::Gelu,
    UnaryOp::Sigmoid,
    UnaryOp::Tanh,
    UnaryOp::Sin,
    UnaryOp::Cos,
];
const BINARY: [BinaryOp; 12] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Pow,
    BinaryOp::Maximum,
    BinaryOp::Minimum,
    BinaryOp::Equal,
    BinaryOp::Greater,
    BinaryOp::GreaterEqual,
    BinaryOp::Less,
    BinaryOp::LessEqual,
];
const FILL: u32 = 0;
const ARANGE: u32 = 1;
const FIRST_UNARY: u32 = 2;
const FIRST_BINARY: u32 = FIRST_UNARY + UNARY.len() as u32;
const CLAMP: u32 = FIRST_BINARY + BINARY.len() as u32;
const WHERE: u32 = CLAMP + 1;

/// The interpreter's text: the same for every program (so it is compiled
/// once, and is the pipeline cache's key for every interpreted launch).
pub fn interpreter() -> String {
    let mut arms = String::new();
    let (a, b, c) = (Value::Named("a"), Value::Named("b"), Value::Named("c"));
    let _ = writeln!(arms, "        case {FILL}u: {{ v = a; }}");
    let _ = writeln!(arms, "        case {ARANGE}u: {{ v = a + f32(idx) * b; }}");
    for (k, &op) in UNARY.iter().enumerate() {
        let _ = write!(arms, "        case {}u: {{ v = ", FIRST_UNARY + k as u32);
        let _ = unary(&mut arms, op, a);
        arms.push_str("; }\n");
    }
    for (k, &op) in BINARY.iter().enumerate() {
        let _ = write!(arms, "        case {}u: {{ v = ", FIRST_BINARY + k as u32);
        let _ = binary(&mut arms, op, a, b);
        arms.push_str("; }\n");
    }
    let _ = writeln!(
        arms,
        "        case {CLAMP}u: {{ v = min(max({a}, {b}), {c}); }}"
    );
    let _ = writeln!(
        arms,
        "        case {WHERE}u: {{ v = select({c}, {b}, {a} != 0.0); }}"
    );
    let words = HEADER + MAX_OPS;
    let mut decls = String::new();
    for j in 0..INPUTS {
        let _ = writeln!(
            decls,
            "@group(0) @binding({}) var<storage, read> in{j}: array<f32>;",
            1 + j
        );
    }
    for k in 0..OUTPUTS {
        let _ = writeln!(
            decls,
            "@group(0) @binding({}) var<storage, read_write> out{k}: array<f32>;",
            1 + INPUTS + k
        );
    }
    let loads: String = (0..INPUTS)
        .map(|j| format!("        case {j}u: {{ return in{j}[at]; }}\n"))
        .collect();
    let first_code = HEADER;
    format!(
        "{PRELUDE}@group(0) @binding(0) var<uniform> params: array<vec4<u32>, {words}>;\n{decls}
fn dim(d: u32) -> u32 {{ return params[1u + d / 4u][d % 4u]; }}
fn stride(j: u32, d: u32) -> u32 {{ return params[4u + 3u * j + (d + 1u) / 4u][(d + 1u) % 4u]; }}

fn load(j: u32, idx: u32) -> f32 {{
    let head = params[4u + 3u * j];
    var at = idx;
    if (head.x != 0xffffffffu) {{
        at = head.x;
        var rem = idx;
        for (var d = params[0].z; d > 0u; d = d - 1u) {{
            let size = dim(d - 1u);
            at = at + (rem % size) * stride(j, d - 1u);
            rem = rem / size;
        }}
    }}
    switch j {{
{loads}        default: {{ return 0.0; }}
    }}
}}

@compute @workgroup_size({WORKGROUP_SIZE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, \
@builtin(local_invocation_index) lid: u32) {{
    let idx = (wid.x + wid.y * groups.x) * {WORKGROUP_SIZE}u + lid;
    let head = params[0];
    if (idx >= head.x) {{ return; }}
    var r: array<f32, {REGISTERS}>;
    for (var j = 0u; j < head.w; j = j + 1u) {{ r[j] = load(j, idx); }}
    for (var i = 0u; i < head.y; i = i + 1u) {{
        let ins = params[{first_code}u + i];
        let flags = ins.x >> 16u;
        let a = select(r[ins.y % {REGISTERS}u], bitcast<f32>(ins.y), (flags & 1u) != 0u);
        let b = select(r[ins.z % {REGISTERS}u], bitcast<f32>(ins.z), (flags & 2u) != 0u);
        let c = select(r[ins.w % {REGISTERS}u], bitcast<f32>(ins.w), (flags & 4u) != 0u);
        var v = 0.0;
        switch ins.x & 255u {{
{arms}        default: {{ v = 0.0; }}
        }}
        r[(ins.x >> 8u) % {REGISTERS}u] = v;
    }}
    let outs = params[3];
    out0[idx] = r[outs.x % {REGISTERS}u];
    if (outs.z > 1u) {{ out1[idx] = r[outs.y % {REGISTERS}u]; }}
}}
"
    )
}

/// One operand of an instruction: a register or a scalar.
#[derive(Clone, Copy)]
enum Operand {
    Reg(u32),
    Scalar(f32),
    Unused,
}

/// The program running `block` in the interpreter, as a kernel whose
/// inputs and outputs are bound to fixed slots; `None` when the block is
/// not one it runs (then it is compiled).
pub fn interpreted(block: &ElementwiseBlock, ops: &[OpIr], accesses: &[Access]) -> Option<Kernel> {
    let out = &block.shape;
    let numel = shape::numel(out);
    let eligible = block.anchor.is_none()
        && numel <= MAX_ELEMENTS
        && block.inputs.len() <= INPUTS
        && (1..=OUTPUTS).contains(&block.outputs.len())
        && block.ops.len() <= MAX_OPS
        && out.len() <= MAX_RANK
        && accesses.len() == block.inputs.len();
    if !eligible {
        return None;
    }
    // Registers: each input's first, then each op's value, a register freed
    // after the last op that reads it (outputs are kept to the end).
    let mut last_use: FxHashMap<TensorId, usize> = FxHashMap::default();
    for (k, &i) in block.ops.iter().enumerate() {
        for &t in &ops[i].inputs {
            last_use.insert(t, k);
        }
    }
    for &t in &block.outputs {
        last_use.insert(t, usize::MAX);
    }
    let mut reg: FxHashMap<TensorId, u32> = FxHashMap::default();
    let mut free: Vec<u32> = (block.inputs.len() as u32..REGISTERS as u32)
        .rev()
        .collect();
    for (j, &t) in block.inputs.iter().enumerate() {
        reg.insert(t, j as u32);
    }
    let mut code: Vec<[u32; 4]> = Vec::with_capacity(block.ops.len());
    for (k, &i) in block.ops.iter().enumerate() {
        let op = &ops[i];
        let arg = |n: usize| {
            op.inputs
                .get(n)
                .and_then(|t| reg.get(t))
                .map(|&r| Operand::Reg(r))
        };
        let (opcode, operands) = match &op.kind {
            OpKind::Fill(v) => (
                FILL,
                [Operand::Scalar(*v), Operand::Unused, Operand::Unused],
            ),
            OpKind::Arange { start, step } => (
                ARANGE,
                [
                    Operand::Scalar(*start),
                    Operand::Scalar(*step),
                    Operand::Unused,
                ],
            ),
            OpKind::Unary(u) => (
                FIRST_UNARY + UNARY.iter().position(|x| x == u)? as u32,
                [arg(0)?, Operand::Unused, Operand::Unused],
            ),
            OpKind::Binary(b) => (
                FIRST_BINARY + BINARY.iter().position(|x| x == b)? as u32,
                [arg(0)?, arg(1)?, Operand::Unused],
            ),
            OpKind::BinaryScalar {
                op: b,
                scalar,
                scalar_first,
            } => {
                let (x, s) = (arg(0)?, Operand::Scalar(*scalar));
                let (a, b2) = if *scalar_first { (s, x) } else { (x, s) };
                (
                    FIRST_BINARY + BINARY.iter().position(|y| y == b)? as u32,
                    [a, b2, Operand::Unused],
                )
            }
            OpKind::Clamp { min, max } => (
                CLAMP,
                [arg(0)?, Operand::Scalar(*min), Operand::Scalar(*max)],
            ),
            OpKind::Where => (WHERE, [arg(0)?, arg(1)?, arg(2)?]),
            _ => return None,
        };
        // Operands read, their registers freed if this was their last use.
        for t in crate::fusion::distinct(&op.inputs) {
            if last_use.get(&t) == Some(&k)
                && let Some(r) = reg.remove(&t)
            {
                free.push(r);
            }
        }
        let dst = free.pop()?;
        reg.insert(op.output, dst);
        if !last_use.contains_key(&op.output) {
            // Read by nothing: its register is free again at once.
            reg.remove(&op.output);
            free.push(dst);
        }
        let mut words = [opcode | (dst << 8), 0, 0, 0];
        for (n, operand) in operands.iter().enumerate() {
            words[1 + n] = match operand {
                Operand::Reg(r) => *r,
                Operand::Scalar(v) => {
                    words[0] |= 1 << (16 + n);
                    v.to_bits()
                }
                Operand::Unused => 0,
            };
        }
        code.push(words);
    }

    let mut params: Vec<u32> = vec![0; 4 * (HEADER + MAX_OPS)];
    let head = [numel, code.len(), out.len(), block.inputs.len()];
    for (w, v) in head.iter().enumerate() {
        params[w] = u32::try_from(*v).ok()?;
    }
    for (d, &size) in out.iter().enumerate() {
        params[4 + d] = u32::try_from(size).ok()?;
    }
    for (k, t) in block.outputs.iter().enumerate() {
        params[12 + k] = *reg.get(t)?;
    }
    params[14] = block.outputs.len() as u32;
    for (j, access) in accesses.iter().enumerate() {
        let at = 4 * (4 + 3 * j);
        if access.is_direct(out) {
            params[at] = u32::MAX;
            continue;
        }
        params[at] = u32::try_from(access.layout.offset).ok()?;
        for (d, s) in access
            .layout
            .strides_for(&access.shape, out)
            .iter()
            .enumerate()
        {
            params[at + 1 + d] = u32::try_from(*s).ok()?;
        }
    }
    for (k, words) in code.iter().enumerate() {
        params[4 * (HEADER + k)..4 * (HEADER + k + 1)].copy_from_slice(words);
    }
    Some(Kernel {
        wgsl: interpreter(),
        params,
        scalars: Vec::new(),
        workgroups: (numel as u64).div_ceil(WORKGROUP_SIZE as u64),
        broken: None,
        slots: Some((INPUTS, OUTPUTS)),
    })
}
