//! Elementwise kernels: a fused group of ops over one shape (also run as a
//! matmul's epilogue or a reduction's prologue), and strided copies.

use rustc_hash::FxHashMap;
use std::fmt::Write;

use crate::fusion::ElementwiseBlock;
use crate::ir::layout::Layout;
use crate::ir::shape;
use crate::ir::{BinaryOp, DType, OpIr, OpKind, TensorId};

use super::kernel::*;

/// The kernel of an elementwise block (without an anchor). `accesses` says
/// how to read each of the block's inputs, in order.
pub fn elementwise(group: Group<'_>) -> Kernel {
    let block = group.block;
    let numel = shape::numel(&block.shape);
    let mut params = Params::default();
    let n = params.push(numel);
    let (decls, function) = fused(group, &mut params, 1, AnchorParts::One);
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

/// How a kernel hands its anchor's value to `fused`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AnchorParts {
    /// One float: `fused(idx, anchor)`.
    One,
    /// Two floats whose sum is the value, `fused(idx, anchor_hi,
    /// anchor_lo)`: a logSumExp's row max and the log of its sum. A `sub` of
    /// the anchor then subtracts each part in turn, so `x - logSumExp(x)`
    /// (a softmax's exponent) keeps the precision of `x - max`, which is
    /// exact near the max: the rounded sum of a row near 10^4 has an ulp of
    /// 10^-3, which `exp` would turn into a relative error of 10^-3.
    Split,
}

/// An elementwise group as a WGSL function `fused(idx, anchor) -> f32`: the
/// values of its ops at flat position `idx` of the block's shape, each
/// output written, `anchor` standing for the anchor's value there (given in
/// two parts with `AnchorParts::Split`). Returns the bindings' declarations
/// (inputs from `first_binding`, then outputs; the checks' flags are the
/// kernel's, `Params::kernel`) and the function.
pub(super) fn fused(
    group: Group<'_>,
    params: &mut Params,
    first_binding: usize,
    parts: AnchorParts,
) -> (String, String) {
    let Group {
        block,
        ops,
        accesses,
        anchor,
        numerics,
    } = group;
    // A check names its op by its place among the block's ops, where an
    // anchor comes first (`Block::op_indices`).
    let first_op = usize::from(anchor.is_some());
    let out = &block.shape;
    let mut decls = String::new();
    let mut body = String::new();
    // Inputs a gather reads as its table are read at the index it computes,
    // not at the block's positions: no load of their own unless another op
    // reads them too.
    let gathers = block
        .ops
        .iter()
        .any(|&i| matches!(ops[i].kind, OpKind::Gather { .. }));
    let table_only: Vec<bool> = block
        .inputs
        .iter()
        .map(|&t| {
            if !gathers {
                return false;
            }
            let reads = block
                .ops
                .iter()
                .map(|&i| &ops[i])
                .filter(|op| op.inputs.contains(&t));
            let mut reads = reads.peekable();
            reads.peek().is_some()
                && reads.all(|op| {
                    matches!(op.kind, OpKind::Gather { .. })
                        && op.inputs[1] != t
                        && op.inputs[0] == t
                })
        })
        .collect();
    if gathers || accesses.iter().any(|a| !a.is_direct(out)) {
        coords(&mut body, params, "idx", "c", out);
    }
    for (j, access) in accesses.iter().enumerate() {
        let _ = writeln!(
            decls,
            "@group(0) @binding({}) var<storage, read> in{}: array<{}>;",
            first_binding + j,
            first_binding - 1 + j,
            access.dtype.wgsl()
        );
        if table_only.get(j) == Some(&true) {
            continue;
        }
        let index = if access.is_direct(out) {
            "idx".to_string()
        } else {
            strided_index(params, access, out, "c")
        };
        let _ = writeln!(body, "    let x{j} = in{}[{index}];", first_binding - 1 + j);
    }

    // Each op's value, named v{its position in the block} (not in the flush:
    // the same block at another place in another flush must have the same
    // text, or its pipeline is compiled again); operands resolve to a
    // loaded input, the anchor's value, or an earlier value of this block.
    let input_index: FxHashMap<TensorId, usize> = block
        .inputs
        .iter()
        .enumerate()
        .map(|(j, &t)| (t, j))
        .collect();
    let producer: FxHashMap<TensorId, usize> = block
        .ops
        .iter()
        .enumerate()
        .map(|(k, &i)| (ops[i].output, k))
        .collect();
    // Each value's dtype: an input's from its access, an op's its own; an
    // anchor is a float (only float32 matmuls and reductions anchor).
    let dtype_of = |t: TensorId| -> DType {
        match (input_index.get(&t), producer.get(&t)) {
            _ if Some(t) == anchor => DType::Float32,
            (Some(&j), _) => accesses.get(j).map_or(DType::Float32, |a| a.dtype),
            (None, Some(&k)) => ops[block.ops[k]].dtype,
            (None, None) => DType::Float32,
        }
    };
    let missing = std::cell::Cell::new(None);
    let value_of = |t: TensorId| -> Value {
        match (input_index.get(&t), producer.get(&t)) {
            _ if Some(t) == anchor => Value::Anchor,
            (Some(&j), _) => Value::Input(j),
            (None, Some(&k)) => Value::Op(k),
            // The planner gives every operand a source.
            (None, None) => {
                missing.set(Some(t));
                Value::Missing
            }
        }
    };
    // One `write!` per op and no intermediate strings: a loop of a thousand
    // small ops generates a thousand lines on every flush.
    // A rolled loop has no place for a check per op.
    let run = match numerics {
        Numerics::Off => periodic_run(block, ops, &input_index),
        _ => None,
    };
    if numerics == Numerics::OpsAndAnchor {
        let slot = params.check(0, CheckOf::Finite, out);
        let _ = writeln!(
            body,
            "    if (nonfinite(anchor)) {{ flag_nonfinite({}u, idx, anchor); }}",
            2 * slot
        );
    }
    let mut k = 0;
    while k < block.ops.len() {
        if let Some(run) = run.as_ref().filter(|r| r.first == k) {
            rolled(&mut body, block, ops, run, params);
            k += run.period * run.count;
            continue;
        }
        let i = block.ops[k];
        let op = &ops[i];
        if let OpKind::Gather { axis, .. } = op.kind {
            let table = input_index.get(&op.inputs[0]).copied();
            let indices = input_index.get(&op.inputs[1]).copied();
            match (table, indices, anchor) {
                (Some(table), Some(indices), None) => {
                    let at = GatherAt {
                        k,
                        op: first_op + k,
                        axis,
                        table,
                        indices,
                        out,
                    };
                    gather(&mut body, params, at, accesses, first_binding);
                }
                // The planner gives a gather operands read from memory, in a
                // kernel with no anchor.
                _ => params.breaks(format!(
                    "gather {} reads an operand the kernel computes",
                    op.output
                )),
            }
            k += 1;
            continue;
        }
        let _ = write!(body, "    let v{k} = ");
        let arg = |n: usize| value_of(op.inputs[n]);
        let arg_dtype = |n: usize| dtype_of(op.inputs[n]);
        let split_sub = parts == AnchorParts::Split
            && matches!(op.kind, OpKind::Binary(BinaryOp::Sub))
            && Some(op.inputs[1]) == anchor;
        if split_sub {
            let _ = write!(body, "(({} - anchor_hi) - anchor_lo)", arg(0));
        } else {
            let _ = expression(
                &mut body,
                op,
                &arg,
                &arg_dtype,
                &mut |p, v| p.push_f32(v),
                params,
            );
        }
        body.push_str(";\n");
        if numerics != Numerics::Off && op.checks_finite() {
            let slot = params.check(first_op + k, CheckOf::Finite, out);
            let operands: Vec<String> = (0..op.inputs.len())
                .filter(|&n| arg_dtype(n) == DType::Float32 && op.kind.finite_check_sees_operands())
                .map(|n| format!(" && !nonfinite({})", arg(n)))
                .collect();
            let _ = writeln!(
                body,
                "    if (nonfinite(v{k}){}) {{ flag_nonfinite({}u, idx, v{k}); }}",
                operands.concat(),
                2 * slot
            );
        }
        k += 1;
    }
    let first_output = first_binding + accesses.len();
    for (k, &output) in block.outputs.iter().enumerate() {
        let _ = writeln!(
            decls,
            "@group(0) @binding({}) var<storage, read_write> out{k}: array<{}>;",
            first_output + k,
            dtype_of(output).wgsl()
        );
        let _ = writeln!(body, "    out{k}[idx] = {};", value_of(output));
    }
    if let Some(t) = missing.get() {
        params.breaks(format!("{t} has no source in the fused block"));
    }
    // The last op's value: what a prologue hands its reduction.
    let (last, ty) = match block.ops.last() {
        None => ("anchor".to_string(), "f32"),
        Some(&i) => (format!("v{}", block.ops.len() - 1), ops[i].dtype.wgsl()),
    };
    let function = match parts {
        AnchorParts::One => {
            format!("fn fused(idx: u32, anchor: f32) -> {ty} {{\n{body}    return {last};\n}}\n")
        }
        AnchorParts::Split => format!(
            "fn fused(idx: u32, anchor_hi: f32, anchor_lo: f32) -> {ty} {{\n\
             \x20   let anchor = anchor_hi + anchor_lo;\n{body}    return {last};\n}}\n"
        ),
    };
    (decls, function)
}

/// Where a gather sits in a fused block: its value `v{k}`, its axis, the
/// inputs holding its table and its indices, the block's shape.
struct GatherAt<'a> {
    k: usize,
    /// Its place among the block's ops (`k` after the anchor, if any).
    op: usize,
    axis: usize,
    table: usize,
    indices: usize,
    out: &'a [usize],
}

/// Writes gather `at` as statements: its index (the indices' value here)
/// checked against the table's axis, the first position of an index outside
/// it flagged (`atomicMin` of the flat position into its check's slot, so
/// the first in row-major order wins whatever the threads' order) and read
/// as 0 instead; then `v{k}`, the table read at the output's coordinates
/// with the axis replaced by the index. The slot is the gather's place
/// among the kernel's checks (`Kernel::checks`).
fn gather(
    body: &mut String,
    params: &mut Params,
    at: GatherAt<'_>,
    accesses: &[Access],
    first_binding: usize,
) {
    let GatherAt {
        k,
        op,
        axis,
        table,
        indices,
        out,
    } = at;
    let Some(t) = accesses.get(table) else {
        params.breaks(format!("gather {k} has no table access"));
        return;
    };
    let slot = params.check(op, CheckOf::Index { input: indices }, out);
    let dim = params.push(t.shape.get(axis).copied().unwrap_or(0));
    let _ = writeln!(
        body,
        "    var g{k} = x{indices};\n    if (g{k} < 0 || g{k} >= i32({dim})) {{ atomicMin(&flags[{}u], idx); g{k} = 0; }}",
        2 * slot
    );
    // The table's dims: those before the axis are the output's, those
    // after it come after the indices' dims.
    let j = out.len() + 1 - t.shape.len();
    let mut terms = vec![params.push(t.layout.offset)];
    for (d, &stride) in t.layout.strides.iter().enumerate() {
        let stride = params.push(stride);
        terms.push(match d {
            _ if d < axis => format!("c{d} * {stride}"),
            _ if d == axis => format!("u32(g{k}) * {stride}"),
            _ => format!("c{} * {stride}", d + j - 1),
        });
    }
    let _ = writeln!(
        body,
        "    let v{k} = in{}[{}];",
        first_binding - 1 + table,
        terms.join(" + ")
    );
}

/// The kernel that completes check `slot` of a kernel whose block has
/// shape `out`: the value of the indices (read through `indices`) at the
/// position the check flagged, beside it. One thread, after the checking
/// kernel in the same submit: the flagging threads race, so only the
/// position is theirs to write.
pub fn flag_value(indices: &Access, out: &[usize], slot: usize) -> Kernel {
    let mut params = Params::default();
    let mut body = format!(
        "    let p = atomicLoad(&flags[{}u]);\n    if (wg > 0u || p == 0xffffffffu) {{ return; }}\n",
        2 * slot
    );
    coords(&mut body, &mut params, "p", "c", out);
    let at = strided_index(&mut params, indices, out, "c");
    let _ = writeln!(
        body,
        "    atomicStore(&flags[{}u], bitcast<u32>(in0[{at}]));",
        2 * slot + 1
    );
    let decls = "@group(0) @binding(1) var<storage, read> in0: array<i32>;\n\
                 @group(0) @binding(2) var<storage, read_write> flags: array<atomic<u32>>;\n";
    // Not `Params::kernel`'s flags: this kernel completes another's checks
    // and makes none of its own.
    params.kernel(decls, 1, &body, 1)
}

/// The kernel that looks at `n` float values another kernel wrote (a
/// reduction's, a scan's, a pool's: kernels with no elementwise group to
/// check in), flagging the first non-finite one as a `Finite` check of the
/// block's op `op` at positions of `shape`. Binds the values, then the
/// flags.
pub fn finite_scan(shape: &[usize], op: usize) -> Kernel {
    let n = shape::numel(shape);
    let mut params = Params::default();
    let count = params.push(n);
    let slot = params.check(op, CheckOf::Finite, shape);
    let body = format!(
        "    let idx = wg * {WORKGROUP_SIZE}u + lid;\n    if (idx >= {count}) {{ return; }}\n\
         \x20   let v = in0[idx];\n    if (nonfinite(v)) {{ flag_nonfinite({}u, idx, v); }}\n",
        2 * slot
    );
    params.kernel(
        "@group(0) @binding(1) var<storage, read> in0: array<f32>;\n",
        WORKGROUP_SIZE,
        &body,
        (n as u64).div_ceil(WORKGROUP_SIZE as u64),
    )
}

/// Writes the WGSL expression of elementwise `op`, its operands given by
/// `arg` (of dtypes `arg_dtype`) and each float scalar it takes by
/// `scalar`. The one place each op's arithmetic is spelled, whether it is
/// written out or runs in a loop. An op computes in its operands' dtype
/// (registration made them agree), so only a cast looks at two dtypes.
fn expression(
    body: &mut String,
    op: &OpIr,
    arg: &dyn Fn(usize) -> Value,
    arg_dtype: &dyn Fn(usize) -> DType,
    scalar: &mut dyn FnMut(&mut Params, f32) -> Value,
    params: &mut Params,
) -> std::fmt::Result {
    let int = op.dtype != DType::Float32;
    match &op.kind {
        // An int's scalars are exact words: `Fill` checked they fit.
        OpKind::Fill(v) if int => write!(body, "{}", params.push_i32(*v as i32)),
        OpKind::Fill(v) => write!(body, "{}", scalar(params, *v as f32)),
        OpKind::Arange { start, step } if int => {
            let (start, step) = (
                params.push_i32(*start as i32),
                params.push_i32(*step as i32),
            );
            write!(body, "({start} + i32(idx) * {step})")
        }
        OpKind::Arange { start, step } => {
            let (start, step) = (scalar(params, *start as f32), scalar(params, *step as f32));
            write!(body, "({start} + f32(idx) * {step})")
        }
        OpKind::Cast => cast(body, arg_dtype(0), op.dtype, arg(0)),
        OpKind::Unary(u) => unary(body, *u, op.dtype, arg(0)),
        OpKind::Binary(b) => binary(body, *b, arg_dtype(0), arg(0), arg(1)),
        OpKind::BinaryScalar {
            op: b,
            scalar: value,
            scalar_first,
        } => {
            let s = scalar(params, *value);
            if *scalar_first {
                binary(body, *b, DType::Float32, s, arg(0))
            } else {
                binary(body, *b, DType::Float32, arg(0), s)
            }
        }
        OpKind::Clamp { min, max } if int => {
            let (lo, hi) = int_bounds(*min, *max);
            let (lo, hi) = (params.push_i32(lo), params.push_i32(hi));
            write!(body, "min(max({}, {lo}), {hi})", arg(0))
        }
        OpKind::Clamp { min, max } => {
            let (lo, hi) = (scalar(params, *min), scalar(params, *max));
            write!(body, "wf_clamp({}, {lo}, {hi})", arg(0))
        }
        OpKind::Where => write!(body, "select({}, {}, {} != 0)", arg(2), arg(1), arg(0)),
        // `idx` is the flat position: along the last dim, `idx % depth`.
        OpKind::OneHot { depth, on, off } => {
            let depth = params.push(*depth);
            let (on, off) = match int {
                true => (params.push_i32(*on as i32), params.push_i32(*off as i32)),
                false => (scalar(params, *on as f32), scalar(params, *off as f32)),
            };
            write!(
                body,
                "select({off}, {on}, {} == i32(idx % {depth}))",
                arg(0)
            )
        }
        other => {
            params.breaks(format!("`{}` is not elementwise", other.name()));
            write!(body, "0.0")
        }
    }
}

/// The int32 bounds a clamp of an int tensor applies: each bound's whole
/// part, toward zero (`as` saturates). TF.js's CPU clamps an int as a
/// float and stores the value in an `Int32Array`, which truncates; for
/// an int that is this clamp. (The ints within `[min, max]` are not:
/// there may be none, `clamp(-2.5, -2.5)`.)
pub fn int_bounds(min: f32, max: f32) -> (i32, i32) {
    (min.trunc() as i32, max.trunc() as i32)
}

/// Writes `x` (of dtype `from`) converted to `to`: the rules `OpKind::Cast`
/// names, a float tested by its bits (WGSL lets a compiler assume floats are
/// finite, so `x != x` tests nothing).
fn cast(body: &mut String, from: DType, to: DType, x: Value) -> std::fmt::Result {
    match (from, to) {
        (DType::Float32, DType::Int32) => write!(body, "wf_f2i({x})"),
        (DType::Float32, DType::Bool) => write!(body, "wf_nonzero({x})"),
        (DType::Int32 | DType::Bool, DType::Float32) => write!(body, "f32({x})"),
        (DType::Int32, DType::Bool) => write!(body, "select(0, 1, {x} != 0)"),
        _ => write!(body, "{x}"),
    }
}

/// Ops in a fused chain that repeat a pattern are written once, in a loop
/// (`for it < count { r0 = ..c..; r1 = ..r0..; c = r1; }`), their scalars
/// read from a table in the uniform words. What it saves is compile time,
/// which grows with the text: on SwiftShader a 1000-op chain written out
/// took 60 to 100 ms to compile, the same chain rolled a few.
const MIN_ROLLED_OPS: usize = 32;
/// The longest pattern looked for.
const MAX_PERIOD: usize = 8;

/// A run of a block's ops that repeats a pattern: `count` times the
/// `period` ops from position `first` of `block.ops`. Each op reads the one
/// before it (the value the loop carries, used by nothing else) and
/// otherwise only the block's inputs and scalars; op `k + period` is op `k`
/// with other scalars.
#[derive(Debug, Clone, PartialEq)]
struct Run {
    first: usize,
    period: usize,
    count: usize,
    /// How each op of the pattern reads each of its operands.
    roles: Vec<Vec<Role>>,
}

/// How an operand of a chained op is read.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    /// The previous op's value.
    Carried,
    /// Input `j` of the block.
    Input(usize),
}

/// The longest periodic run of `block` worth rolling, if there is one.
fn periodic_run(
    block: &ElementwiseBlock,
    ops: &[OpIr],
    input_index: &FxHashMap<TensorId, usize>,
) -> Option<Run> {
    let n = block.ops.len();
    if n < MIN_ROLLED_OPS {
        return None;
    }
    // Uses of each value inside the block (once per reading op), and as an
    // output.
    let mut uses: FxHashMap<TensorId, usize> = FxHashMap::default();
    for &i in &block.ops {
        for t in crate::fusion::distinct(&ops[i].inputs) {
            *uses.entry(t).or_default() += 1;
        }
    }
    for &t in &block.outputs {
        *uses.entry(t).or_default() += 1;
    }
    // The roles of op `k`'s operands, if it reads the op before it (and
    // that op's value nothing else) and otherwise only the block's inputs.
    let roles: Vec<Option<Vec<Role>>> = (0..n)
        .map(|k| {
            let op = &ops[block.ops[k]];
            let previous = &ops[*block.ops.get(k.checked_sub(1)?)?];
            // Floats only: the loop's carried value and scalar table are.
            let chainable = matches!(
                op.kind,
                OpKind::Unary(_)
                    | OpKind::Binary(_)
                    | OpKind::BinaryScalar { .. }
                    | OpKind::Clamp { .. }
                    | OpKind::Where
            ) && op.dtype == DType::Float32
                && previous.dtype == DType::Float32;
            let previous = previous.output;
            if !chainable || uses.get(&previous) != Some(&1) {
                return None;
            }
            let roles: Option<Vec<Role>> = op
                .inputs
                .iter()
                .map(|t| match input_index.get(t) {
                    _ if *t == previous => Some(Role::Carried),
                    Some(&j) => Some(Role::Input(j)),
                    None => None,
                })
                .collect();
            roles.filter(|r| r.contains(&Role::Carried))
        })
        .collect();
    let same = |a: usize, b: usize| {
        roles[a].is_some()
            && roles[a] == roles[b]
            && same_but_scalars(&ops[block.ops[a]].kind, &ops[block.ops[b]].kind)
    };
    let mut best: Option<Run> = None;
    for period in 1..=MAX_PERIOD {
        let mut k = 0;
        while k < n {
            if roles[k].is_none() {
                k += 1;
                continue;
            }
            let first = k;
            let mut end = k + 1;
            while end < n
                && roles[end].is_some()
                && (end < first + period || same(end, end - period))
            {
                end += 1;
            }
            let count = (end - first) / period;
            let covered = count * period;
            if count >= 2
                && covered >= MIN_ROLLED_OPS
                && best.as_ref().is_none_or(|b| covered > b.period * b.count)
            {
                best = Some(Run {
                    first,
                    period,
                    count,
                    roles: roles[first..first + period]
                        .iter()
                        .flatten()
                        .cloned()
                        .collect(),
                });
            }
            k = end.max(k + 1);
        }
    }
    best
}

/// Whether two ops compute the same function of their operands, their
/// scalar values aside.
fn same_but_scalars(a: &OpKind, b: &OpKind) -> bool {
    match (a, b) {
        (
            OpKind::BinaryScalar {
                op: x,
                scalar_first: fx,
                ..
            },
            OpKind::BinaryScalar {
                op: y,
                scalar_first: fy,
                ..
            },
        ) => x == y && fx == fy,
        (OpKind::Clamp { .. }, OpKind::Clamp { .. }) => true,
        (a, b) => a == b,
    }
}

/// Writes `run` as a loop: the value before it carried in `c`, the last
/// op's value named as usual (`v{k}`) after it.
fn rolled(
    body: &mut String,
    block: &ElementwiseBlock,
    ops: &[OpIr],
    run: &Run,
    params: &mut Params,
) {
    let region = &block.ops[run.first..run.first + run.period * run.count];
    let pattern = &region[..run.period];
    let scalars: Vec<f32> = region
        .iter()
        .flat_map(|&i| scalars_of(&ops[i].kind))
        .collect();
    let per = scalars.len() / run.count;
    let (table, stride) = params.push_table(&scalars, per);
    let _ = writeln!(body, "    var c = v{};", run.first - 1);
    let _ = writeln!(
        body,
        "    for (var it = 0u; it < {}u; it = it + 1u) {{",
        run.count
    );
    for v in 0..per.div_ceil(4) {
        let _ = writeln!(
            body,
            "        let t{v} = params[{table}u + it * {stride}u + {v}u];"
        );
    }
    let mut next = 0;
    for (j, (&i, roles)) in pattern.iter().zip(&run.roles).enumerate() {
        let op = &ops[i];
        let carried = if j == 0 {
            Value::Carried
        } else {
            Value::Looped(j - 1)
        };
        let arg = |n: usize| match roles[n] {
            Role::Carried => carried,
            Role::Input(x) => Value::Input(x),
        };
        let _ = write!(body, "        let r{j} = ");
        let mut scalar = |_: &mut Params, _: f32| {
            next += 1;
            Value::Tabled(next - 1)
        };
        // A chained op and the one before it are floats; a `where`'s
        // condition, a loaded input, is the one bool.
        let arg_dtype = |n: usize| match (&op.kind, n) {
            (OpKind::Where, 0) => DType::Bool,
            _ => DType::Float32,
        };
        let _ = expression(body, op, &arg, &arg_dtype, &mut scalar, params);
        body.push_str(";\n");
    }
    let _ = writeln!(body, "        c = r{};\n    }}", run.period - 1);
    let _ = writeln!(body, "    let v{} = c;", run.first + region.len() - 1);
}

/// The scalars an op takes, in the order `expression` asks for them.
fn scalars_of(kind: &OpKind) -> Vec<f32> {
    match kind {
        OpKind::BinaryScalar { scalar, .. } => vec![*scalar],
        OpKind::Clamp { min, max } => vec![*min, *max],
        _ => Vec::new(),
    }
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
            dtype: src.dtype,
        },
        shape,
        "c",
    );
    let _ = writeln!(body, "    out0[{to}] = in0[{from}];");
    // Words, whatever the dtype: a copy moves bits, never values.
    let decls = "@group(0) @binding(1) var<storage, read> in0: array<u32>;\n\
                 @group(0) @binding(2) var<storage, read_write> out0: array<u32>;\n";
    params.kernel(
        decls,
        WORKGROUP_SIZE,
        &body,
        (numel as u64).div_ceil(WORKGROUP_SIZE as u64),
    )
}
