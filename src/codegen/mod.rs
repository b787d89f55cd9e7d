//! WGSL for a planned block. Pure text: nothing here touches the GPU, so the
//! kernels can be read and tested without one.
//!
//! The text depends only on the block's structure (ops, ranks, which inputs
//! broadcast or are strided): every size, stride and scalar is a uniform word.
//! That makes the text itself the kernel cache's key, and a loop that repeats
//! the same ops on new data compiles each kernel once. The runtime may compile
//! a kernel with its scalars written in (`Kernel::specialized`) while they do
//! not change.
//!
//! Every kernel numbers its workgroups linearly (`wid.x + wid.y * groups.x`)
//! so the runtime can fold any count into a 2-D grid that stays within
//! `maxComputeWorkgroupsPerDimension`; a workgroup past the end returns.

use rustc_hash::FxHashMap;
use std::fmt::Write;

use crate::fusion::ElementwiseBlock;
use crate::ir::layout::Layout;
use crate::ir::shape;
use crate::ir::{BinaryOp, OpIr, OpKind, ReduceOp, TensorId, UnaryOp};

/// Threads per workgroup of the elementwise, copy and reduction kernels.
pub const WORKGROUP_SIZE: u32 = 256;

/// A kernel ready to compile and launch.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub wgsl: String,
    /// The uniform words, padded to whole `vec4<u32>`s.
    pub params: Vec<u32>,
    /// Which words are f32 scalars (the others are sizes and strides).
    pub scalars: Vec<usize>,
    /// Workgroups to launch, numbered linearly.
    pub workgroups: u64,
    /// Why this kernel must not launch: an invariant of the planner broke
    /// while generating it (a size past 32 bits, an operand with no source).
    /// The runtime turns it into an `internal` failure on the block's
    /// outputs; a kernel computing zeros in place of a value would be a lie.
    pub broken: Option<String>,
}

impl Kernel {
    /// The bits of this launch's scalars.
    pub fn scalar_bits(&self) -> impl Iterator<Item = u32> + '_ {
        self.scalars.iter().map(|&i| self.params[i])
    }

    /// The text with this launch's finite scalars written in as bit-exact
    /// literals. Some drivers (SwiftShader, the browser's CPU fallback) pay
    /// as much for each uniform load as for the arithmetic around it, so a
    /// chain of scalar ops runs several times faster this way. Non-finite
    /// scalars stay uniform loads: WGSL rejects a non-finite constant.
    pub fn specialized(&self) -> String {
        const MARK: &str = "bitcast<f32>(param(";
        let mut out = String::with_capacity(self.wgsl.len());
        let mut rest = self.wgsl.as_str();
        while let Some(at) = rest.find(MARK) {
            out.push_str(&rest[..at]);
            let tail = &rest[at + MARK.len()..];
            let end = tail.find("u))");
            let bits = end
                .and_then(|e| tail[..e].parse::<usize>().ok())
                .filter(|i| self.scalars.contains(i))
                .map(|i| self.params[i]);
            match (end, bits) {
                (Some(e), Some(bits)) if f32::from_bits(bits).is_finite() => {
                    let _ = write!(out, "bitcast<f32>({bits:#010x}u)");
                    rest = &tail[e + 3..];
                }
                _ => {
                    out.push_str(MARK);
                    rest = tail;
                }
            }
        }
        out.push_str(rest);
        out
    }
}

/// An elementwise group to run inside another kernel (a matmul's epilogue,
/// a reduction's prologue): the block, the flushed ops, and how to read the
/// block's inputs.
pub type Group<'a> = (&'a ElementwiseBlock, &'a [OpIr], &'a [Access]);

/// How a kernel reads one input: its shape and where its elements sit.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    pub shape: Vec<usize>,
    pub layout: Layout,
}

impl Access {
    fn is_direct(&self, out: &[usize]) -> bool {
        self.shape == out && self.layout.offset == 0 && self.layout.is_contiguous(&self.shape)
    }
}

/// The uniform words of one launch, appended as the text is generated.
#[derive(Default)]
struct Params {
    words: Vec<u32>,
    scalars: Vec<usize>,
    broken: Option<String>,
}

impl Params {
    /// Appends `value`, returning the WGSL expression that reads it. Kernels
    /// index with 32 bits; the runtime refuses larger work before codegen
    /// (`index_range`), so a value past that here is a broken invariant.
    fn push(&mut self, value: usize) -> String {
        let word = u32::try_from(value).unwrap_or_else(|_| {
            self.breaks(format!("the size {value} does not fit a 32-bit index"));
            u32::MAX
        });
        self.words.push(word);
        format!("param({}u)", self.words.len() - 1)
    }

    /// Marks the kernel as not to be launched, keeping the first reason.
    fn breaks(&mut self, why: String) {
        debug_assert!(false, "codegen invariant broken: {why}");
        self.broken.get_or_insert(why);
    }

    /// Appends a scalar operand; `Kernel::specialized` recognises the
    /// expression it is written as.
    fn push_f32(&mut self, value: f32) -> Value {
        self.scalars.push(self.words.len());
        self.words.push(value.to_bits());
        Value::Scalar(self.words.len() - 1)
    }

    /// The kernel: the shader around `decls` and `body`, and these words.
    fn kernel(mut self, decls: &str, workgroup: u32, body: &str, workgroups: u64) -> Kernel {
        while !self.words.len().is_multiple_of(4) {
            self.words.push(0);
        }
        Kernel {
            wgsl: shader(&self.words, decls, workgroup, body),
            params: self.words,
            scalars: self.scalars,
            workgroups,
            broken: self.broken,
        }
    }
}

/// A value inside a fused function, written without allocating.
#[derive(Debug, Clone, Copy)]
enum Value {
    /// The anchor's value (a matmul's product, a reduced row's value).
    Anchor,
    /// Input `j`, loaded as `x{j}`.
    Input(usize),
    /// The value of op `i` of the flush, `v{i}`.
    Op(usize),
    /// Uniform word `k` read as a float.
    Scalar(usize),
    /// Stands in for an operand with no source, in a kernel marked broken
    /// (never launched).
    Missing,
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Anchor => f.write_str("anchor"),
            Value::Input(j) => write!(f, "x{j}"),
            Value::Op(i) => write!(f, "v{i}"),
            Value::Scalar(k) => write!(f, "bitcast<f32>(param({k}u))"),
            Value::Missing => f.write_str("0.0"),
        }
    }
}

/// Declares the coordinates `c0..` of flat position `flat` in `shape`
/// (innermost dim last).
fn coords(body: &mut String, params: &mut Params, flat: &str, prefix: &str, shape: &[usize]) {
    let _ = writeln!(body, "    var {prefix}rem = {flat};");
    for d in (0..shape.len()).rev() {
        let dim = params.push(shape[d]);
        let _ = writeln!(
            body,
            "    let {prefix}{d} = {prefix}rem % {dim}; {prefix}rem = {prefix}rem / {dim};"
        );
    }
}

/// The element index of `access` read at coordinates `c0..` of `out`.
fn strided_index(params: &mut Params, access: &Access, out: &[usize], prefix: &str) -> String {
    let strides = access.layout.strides_for(&access.shape, out);
    let mut terms = vec![params.push(access.layout.offset)];
    for (d, &s) in strides.iter().enumerate() {
        terms.push(format!("{prefix}{d} * {}", params.push(s)));
    }
    terms.join(" + ")
}

fn shader(params: &[u32], decls: &str, workgroup: u32, body: &str) -> String {
    format!(
        "{PRELUDE}@group(0) @binding(0) var<uniform> params: array<vec4<u32>, {words}>;\n{decls}\n\
         fn param(i: u32) -> u32 {{ return params[i / 4u][i % 4u]; }}\n\n\
         @compute @workgroup_size({workgroup})\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, \
         @builtin(local_invocation_index) lid: u32) {{\n\
         \x20   let wg = wid.x + wid.y * groups.x;\n{body}}}\n",
        words = params.len() / 4,
    )
}

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
fn fused(
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

/// A reduction's bindings up to its first output `out0`, and `out0`'s
/// binding: the input (or the prologue's inputs and its function), and for a
/// final argmax stage the partials' indices.
fn reduce_bindings(
    prologue: Option<Group<'_>>,
    params: &mut Params,
    final_argmax: bool,
) -> (String, usize) {
    let (mut decls, mut binding) = match prologue {
        Some((block, ops, accesses)) => {
            let (bindings, function) = fused(block, ops, accesses, params, 1);
            (format!("{bindings}{function}"), 1 + accesses.len())
        }
        None => (
            "@group(0) @binding(1) var<storage, read> in0: array<f32>;\n".to_string(),
            2,
        ),
    };
    if final_argmax {
        decls += "@group(0) @binding(2) var<storage, read> in1: array<u32>;\n";
        binding = 3;
    }
    let _ = writeln!(
        decls,
        "@group(0) @binding({binding}) var<storage, read_write> out0: array<f32>;"
    );
    (decls, binding)
}

/// The most elements one reduction workgroup combines. A longer reduction is
/// split across workgroups and finished by a second launch: a single
/// workgroup looping over millions of elements leaves the GPU idle (and
/// lavapipe was seen returning wrong sums for one workgroup looping over 2^24).
pub const REDUCE_CHUNK: usize = 256 * REDUCE_WORKGROUP as usize;

/// Threads per reduction workgroup. Fewer than the elementwise kernels use:
/// each halving of the tree is a barrier, and barriers are what a reduction
/// spends its time on when rows are short.
const REDUCE_WORKGROUP: u32 = 32;

/// Which launch of a reduction a kernel is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The whole reduction in one launch: writes the final values.
    Whole,
    /// Partial results over `splits` chunks per output: writes raw partials
    /// (and, for argmax, their indices into a second output).
    First { splits: usize },
    /// Finishes partials laid out `[outputs, splits]`: `total` elements were
    /// reduced in all (the mean's divisor); argmax reads the partials'
    /// indices from a second input.
    Final { total: usize },
    /// One thread per output value, looping over all its elements (see
    /// `reduces_per_thread`): no shared memory, no barriers.
    PerThread,
}

/// Threads per workgroup of a `PerThread` reduction.
const REDUCE_PER_THREAD: u32 = 64;

/// Whether a reduction of `input` over `axes` runs as `Stage::PerThread`,
/// given whether the adapter is a CPU implementation. There must be enough
/// outputs to keep the device busy with one thread each, and few enough
/// elements per output for one thread to loop over. On a GPU, neighbouring
/// outputs must also read neighbouring elements (the innermost kept axis is
/// contiguous: `x.sum(0)`, or a transposed view summed over its last axis),
/// or the loads would not coalesce. A CPU adapter (SwiftShader, lavapipe)
/// runs a workgroup's barriers by switching between its invocations, which
/// costs more than any load pattern: there every reduction with enough
/// outputs runs this way (a sum over rows of 1024: 18 -> 6 ms on
/// SwiftShader).
pub fn reduces_per_thread(input: &Access, axes: &[usize], cpu: bool) -> bool {
    let n_red: usize = axes.iter().map(|&d| input.shape[d]).product();
    let n_out = shape::numel(&input.shape) / n_red.max(1);
    let innermost_kept = (0..input.shape.len()).rev().find(|d| !axes.contains(d));
    let side_by_side = innermost_kept.is_some_and(|d| input.layout.strides[d] == 1);
    n_red <= REDUCE_CHUNK
        && match cpu {
            true => n_out >= 256,
            false => side_by_side && n_out >= 1024,
        }
}

/// Elementwise work that runs inside a reduction's kernel.
#[derive(Clone, Copy)]
pub enum Fused<'a> {
    None,
    /// Computes the elements the reduction folds (`x.sub(m).exp().sum(1)`).
    Prologue(Group<'a>),
    /// Runs over each reduced row once its value is known, reading it as the
    /// group's anchor (`x.sub(x.logSumExp(-1, true)).exp()`: a softmax in one
    /// kernel). Only for a `Whole` reduction of the last axis. With `true`
    /// the reduced values are written too (binding `reduced`, the last).
    Epilogue(Group<'a>, bool),
}

/// How a reduction folds elements, as WGSL statements over its state `acc`
/// (and `aux`: for argmax the index, for logSumExp the sum of exp(x - acc)).
struct Fold {
    init: &'static str,
    /// `aux`'s type and initial value, when there is one.
    aux: Option<(&'static str, &'static str)>,
    /// Folds element `x` (at position `i`) into the state.
    element: String,
    /// Folds another thread's state (`x`, `r`) into this one.
    merge: String,
    /// The result, from the final state.
    finish: String,
}

impl Fold {
    fn new(op: ReduceOp, argmax: bool, stage: Stage, divisor: &str) -> Fold {
        if argmax {
            let pick = "if (x > acc || (x == acc && r < aux)) { acc = x; aux = r; }";
            let r = match stage {
                Stage::Final { .. } => "in1[at]",
                _ => "i",
            };
            return Fold {
                init: "ninf()",
                aux: Some(("u32", "0xffffffffu")),
                element: format!("let r = {r}; {pick}"),
                merge: pick.to_string(),
                finish: "f32(aux)".to_string(),
            };
        }
        let plain = |init, step: &str| Fold {
            init,
            aux: None,
            element: step.to_string(),
            merge: step.to_string(),
            finish: "acc".to_string(),
        };
        match op {
            ReduceOp::Sum => plain("0.0", "acc = acc + x;"),
            // Partials of a mean are raw sums.
            ReduceOp::Mean => Fold {
                finish: match stage {
                    Stage::First { .. } => "acc".to_string(),
                    _ => format!("acc / f32({divisor})"),
                },
                ..plain("0.0", "acc = acc + x;")
            },
            ReduceOp::Max => plain("ninf()", "acc = max(acc, x);"),
            ReduceOp::Min => plain("-ninf()", "acc = min(acc, x);"),
            // log(sum(exp(x))) in one pass: `acc` is the running max and
            // `aux` the sum of exp(x - acc), rescaled when the max grows. A
            // partial result is itself a logSumExp, so the final stage folds
            // partials exactly like elements.
            ReduceOp::LogSumExp => Fold {
                init: "ninf()",
                aux: Some(("f32", "0.0")),
                element: "if (x > acc) { aux = aux * exp(acc - x) + 1.0; acc = x; } else if (x > ninf()) { aux = aux + exp(x - acc); }".to_string(),
                merge: "if (x > acc) { aux = aux * exp(acc - x) + r; acc = x; } else if (x > ninf()) { aux = aux + r * exp(x - acc); }".to_string(),
                finish: "acc + log(aux)".to_string(),
            },
        }
    }

    /// A call of `row_value` (an epilogue's function computing `finish`) on
    /// the state held in `acc` and `aux`.
    fn row_value(&self, acc: &str, aux: &str) -> String {
        match self.aux {
            Some(_) => format!("row_value({acc}, {aux})"),
            None => format!("row_value({acc})"),
        }
    }

    /// Folds the workgroup's per-thread states pairwise in shared memory:
    /// afterwards `part[0]` (and `part_aux[0]`) hold the whole state, and
    /// every thread can read them.
    fn across_workgroup(&self) -> String {
        let aux = self.aux.is_some();
        let save = if aux { "part_aux[lid] = aux;" } else { "" };
        let load_aux = if aux {
            "let r = part_aux[lid + s];\n            var aux = part_aux[lid];"
        } else {
            ""
        };
        format!(
            "    part[lid] = acc;\n    {save}\n    workgroupBarrier();\n\
             \x20   for (var s = {half}u; s > 0u; s = s >> 1u) {{\n\
             \x20       if (lid < s) {{\n\
             \x20           let x = part[lid + s];\n            var acc = part[lid];\n            {load_aux}\n\
             \x20           {merge}\n\
             \x20           part[lid] = acc;\n            {save}\n\
             \x20       }}\n        workgroupBarrier();\n    }}\n",
            half = REDUCE_WORKGROUP / 2,
            merge = self.merge,
        )
    }

    /// The shared memory `across_workgroup` uses.
    fn workgroup_memory(&self, decls: &mut String) {
        let _ = writeln!(
            decls,
            "var<workgroup> part: array<f32, {REDUCE_WORKGROUP}>;"
        );
        if let Some((ty, _)) = self.aux {
            let _ = writeln!(
                decls,
                "var<workgroup> part_aux: array<{ty}, {REDUCE_WORKGROUP}>;"
            );
        }
    }
}

/// One workgroup per output value (per chunk of it, in a `First` stage):
/// its threads stride over the reduced elements, then combine their partial
/// results in shared memory; or, in a `PerThread` stage, one thread per
/// output. `argmax` carries the index with the value (`op` is then ignored).
pub fn reduce(
    input: &Access,
    axes: &[usize],
    op: ReduceOp,
    argmax: bool,
    stage: Stage,
    fused_work: Fused<'_>,
) -> Kernel {
    let prologue = match fused_work {
        Fused::Prologue(group) => Some(group),
        _ => None,
    };
    let epilogue = match fused_work {
        Fused::Epilogue(group, write)
            if matches!(stage, Stage::Whole | Stage::PerThread) && axes.len() == 1 =>
        {
            Some((group, write))
        }
        _ => None,
    };
    let kept: Vec<usize> = (0..input.shape.len())
        .filter(|d| !axes.contains(d))
        .collect();
    let kept_shape: Vec<usize> = kept.iter().map(|&d| input.shape[d]).collect();
    let red_shape: Vec<usize> = axes.iter().map(|&d| input.shape[d]).collect();
    let n_out = shape::numel(&kept_shape);
    let n_red = shape::numel(&red_shape);
    let splits = match stage {
        Stage::First { splits } => splits,
        _ => 1,
    };

    let mut params = Params::default();
    let n = params.push(n_out * splits);
    let p_splits = params.push(splits);
    let chunk = params.push(n_red.div_ceil(splits));
    let count = params.push(n_red);
    let divisor = params.push(match stage {
        Stage::Final { total } => total,
        _ => n_red,
    });
    let offset = params.push(input.layout.offset);
    let fold = Fold::new(op, argmax, stage, &divisor);
    let per_thread = stage == Stage::PerThread;
    // Output `o` and the range of its elements this thread folds.
    let mut body = if per_thread {
        format!(
            "    let o = wg * {REDUCE_PER_THREAD}u + lid;\n    if (o >= {n}) {{ return; }}\n\
             \x20   let start = 0u;\n    let end = {count};\n    var base = {offset};\n"
        )
    } else {
        format!(
            "    // Every thread of a workgroup has the same `wg`: the return is uniform.\n\
             \x20   if (wg >= {n}) {{ return; }}\n\
             \x20   let o = wg / {p_splits};\n    let start = (wg % {p_splits}) * {chunk};\n\
             \x20   let end = min(start + {chunk}, {count});\n    var base = {offset};\n"
        )
    };
    coords(&mut body, &mut params, "o", "k", &kept_shape);
    for (i, &d) in kept.iter().enumerate() {
        let stride = params.push(input.layout.strides[d]);
        let _ = writeln!(body, "    base = base + k{i} * {stride};");
    }
    // The reduced axes' sizes and strides, read once rather than per
    // element (a uniform load is not free everywhere).
    for (j, &d) in axes.iter().enumerate() {
        let (dim, stride) = (
            params.push(input.shape[d]),
            params.push(input.layout.strides[d]),
        );
        let _ = writeln!(body, "    let rd{j} = {dim};\n    let rs{j} = {stride};");
    }
    let (first, step) = if per_thread {
        ("start", "1u".to_string())
    } else {
        ("start + lid", format!("{REDUCE_WORKGROUP}u"))
    };
    let _ = writeln!(
        body,
        "    var acc = {};\n{}\
         \x20   for (var i = {first}; i < end; i = i + {step}) {{",
        fold.init,
        fold.aux.map_or(String::new(), |(ty, v)| format!(
            "    var aux: {ty} = {v};\n"
        ))
    );
    if axes.len() == 1 {
        // `i` never reaches the axis' size: no need to split it.
        body += "        let at = base + i * rs0;\n";
    } else {
        body += "        var at = base;\n        var rrem = i;\n";
        for j in (0..axes.len()).rev() {
            let _ = writeln!(
                body,
                "        at = at + (rrem % rd{j}) * rs{j}; rrem = rrem / rd{j};"
            );
        }
    }
    // With a prologue the element is computed, not loaded: `input` then
    // describes the prologue's (row-major) result, so `at` is its flat index.
    let load = if prologue.is_some() {
        "fused(at, 0.0)"
    } else {
        "in0[at]"
    };
    let _ = writeln!(
        body,
        "        let x = {load};\n        {}\n    }}",
        fold.element
    );
    let per_thread_groups = n_out.div_ceil(REDUCE_PER_THREAD as usize) as u64;

    if let Some((group, write)) = epilogue {
        // The row's value, then the epilogue at each element of the row: by
        // this thread alone, or (after the workgroup's fold, which ends on a
        // barrier) by every thread at its share of the row.
        let (row, red, first, step) = if per_thread {
            ("o", fold.row_value("acc", "aux"), "0u", "1u".to_string())
        } else {
            body += &fold.across_workgroup();
            let step = format!("{REDUCE_WORKGROUP}u");
            ("wg", fold.row_value("part[0]", "part_aux[0]"), "lid", step)
        };
        let _ = writeln!(body, "    let red = {red};");
        if write {
            let lead = if per_thread { "" } else { "if (lid == 0u) " };
            let _ = writeln!(body, "    {lead}{{ reduced[{row}] = red; }}");
        }
        let _ = writeln!(
            body,
            "    for (var i = {first}; i < {count}; i = i + {step}) {{ _ = fused({row} * {count} + i, red); }}"
        );
        // The reduction's input, the epilogue's inputs and outputs, and last
        // the reduced values when they are written. The row's value comes
        // from a function of its own: `acc` and `aux` are the loop's names.
        let (block, ops, accesses) = group;
        let (bindings, function) = fused(block, ops, accesses, &mut params, 2);
        let aux_param = fold
            .aux
            .map_or(String::new(), |(ty, _)| format!(", aux: {ty}"));
        let mut decls = format!(
            "@group(0) @binding(1) var<storage, read> in0: array<f32>;\n{bindings}{function}\
             fn row_value(acc: f32{aux_param}) -> f32 {{ return {}; }}\n",
            fold.finish
        );
        if write {
            let _ = writeln!(
                decls,
                "@group(0) @binding({}) var<storage, read_write> reduced: array<f32>;",
                2 + accesses.len() + block.outputs.len()
            );
        }
        return if per_thread {
            params.kernel(&decls, REDUCE_PER_THREAD, &body, per_thread_groups)
        } else {
            fold.workgroup_memory(&mut decls);
            params.kernel(&decls, REDUCE_WORKGROUP, &body, n_out as u64)
        };
    }
    if per_thread {
        let _ = writeln!(body, "    out0[o] = {};", fold.finish);
        let (decls, _) = reduce_bindings(prologue, &mut params, false);
        return params.kernel(&decls, REDUCE_PER_THREAD, &body, per_thread_groups);
    }
    body += &fold.across_workgroup();
    body += "    if (lid == 0u) {\n        let acc = part[0];\n";
    if fold.aux.is_some() {
        body += "        let aux = part_aux[0];\n";
    }
    let final_argmax = argmax && matches!(stage, Stage::Final { .. });
    let (mut decls, binding) = reduce_bindings(prologue, &mut params, final_argmax);
    match stage {
        Stage::First { .. } if argmax => {
            let _ = writeln!(
                decls,
                "@group(0) @binding({}) var<storage, read_write> out1: array<u32>;",
                binding + 1
            );
            body += "        out0[wg] = acc;\n        out1[wg] = aux;\n";
        }
        _ => {
            let _ = writeln!(body, "        out0[wg] = {};", fold.finish);
        }
    }
    body += "    }\n";
    fold.workgroup_memory(&mut decls);
    params.kernel(&decls, REDUCE_WORKGROUP, &body, (n_out * splits) as u64)
}

/// The depth of one shared-memory stage of the matmul.
const TILE_K: usize = 16;

/// Whether a matmul operand can be loaded four floats at a time along its
/// last dim (of length `inner`): that dim is contiguous and every row, batch
/// and the offset start on a 16-byte boundary, so `index / 4` is exact and
/// a row's last vector never reaches into the next row.
fn loads_by_four(operand: &Access, inner: usize) -> bool {
    let strides = &operand.layout.strides;
    let r = strides.len();
    inner.is_multiple_of(4)
        && strides[r - 1] == 1
        && operand.layout.offset.is_multiple_of(4)
        && strides[..r - 1].iter().all(|s| s.is_multiple_of(4))
}

/// Batched `a @ b` with broadcast batch dims, and its epilogue: output tiles
/// staged through shared memory, each of the 16x16 threads holding an r x r
/// block of outputs in registers (rows `ty + 16i`, columns `tx + 16j`), each
/// output then passed through the elementwise ops that follow the product
/// (`epilogue`: the anchored block, the ops, how to read its inputs). Operands
/// are read through their layouts, so a transposed operand is never copied.
/// Writes `[batch.., m, n]` row-major.
pub fn matmul(a: &Access, b: &Access, out_shape: &[usize], epilogue: Group<'_>) -> Kernel {
    // Large products get 8x8 outputs per thread (128x128 tiles: more reuse
    // of each staged value: 15 -> 22 TFLOP/s at 4096 on an H200); smaller
    // ones 4x4, so there are enough workgroups to fill the GPU.
    let r = if out_shape[out_shape.len() - 2] >= 2048 && out_shape[out_shape.len() - 1] >= 2048 {
        8
    } else {
        4
    };
    let tile = 16 * r;
    let rank = out_shape.len();
    let batch_shape = &out_shape[..rank - 2];
    let (m, n) = (out_shape[rank - 2], out_shape[rank - 1]);
    let k = a.shape[a.shape.len() - 1];
    let (tiles_m, tiles_n) = (m.div_ceil(tile), n.div_ceil(tile));
    let batches = shape::numel(batch_shape);

    let mut params = Params::default();
    let p_m = params.push(m);
    let p_n = params.push(n);
    let p_k = params.push(k);
    let p_tm = params.push(tiles_m);
    let p_tn = params.push(tiles_n);
    let p_batches = params.push(batches);
    let mut body = format!(
        "    // Every thread of a workgroup has the same `wg`: the return is uniform.\n\
         \x20   let tile_n = wg % {p_tn};\n    let tile_m = (wg / {p_tn}) % {p_tm};\n    let batch = wg / ({p_tn} * {p_tm});\n\
         \x20   if (batch >= {p_batches}) {{ return; }}\n\
         \x20   let ty = lid / 16u;\n    let tx = lid % 16u;\n\
         \x20   let row0 = tile_m * {tile}u;\n    let col0 = tile_n * {tile}u;\n"
    );
    coords(&mut body, &mut params, "batch", "b", batch_shape);
    let operand = |params: &mut Params, access: &Access, name: &str| {
        // The batch dims of this operand, read at the output's batch position.
        let r = access.shape.len();
        let batch = Access {
            shape: access.shape[..r - 2].to_vec(),
            layout: Layout {
                offset: access.layout.offset,
                strides: access.layout.strides[..r - 2].to_vec(),
            },
        };
        let base = strided_index(params, &batch, batch_shape, "b");
        let (rows, cols) = (
            params.push(access.layout.strides[r - 2]),
            params.push(access.layout.strides[r - 1]),
        );
        format!(
            "    let {name}_base = {base};\n    let {name}_rows = {rows};\n    let {name}_cols = {cols};\n"
        )
    };
    body += &operand(&mut params, a, "a");
    body += &operand(&mut params, b, "b");
    for i in 0..r {
        for j in 0..r {
            let _ = writeln!(body, "    var acc{i}_{j} = 0.0;");
        }
    }
    let _ = writeln!(
        body,
        "    for (var t = 0u; t < {p_k}; t = t + {TILE_K}u) {{"
    );
    // Each thread stages r elements of each operand's tile: one at a time,
    // or four at a time from an operand whose tile rows are contiguous and
    // 16-byte aligned.
    let (wide_a, wide_b) = (loads_by_four(a, k), loads_by_four(b, n));
    for q in 0..r {
        let off = q * 256;
        if !wide_a {
            let _ = writeln!(
                body,
                "        {{\n            let e = lid + {off}u;\n\
                 \x20           let am = e / {TILE_K}u; let ak = e % {TILE_K}u;\n\
                 \x20           let ar = row0 + am; let ac = t + ak;\n\
                 \x20           ta[ak][am] = select(0.0, in0[a_base + ar * a_rows + ac * a_cols], ar < {p_m} && ac < {p_k});\n\
                 \x20       }}"
            );
        } else if q < r / 4 {
            let _ = writeln!(
                body,
                "        {{\n            let e = lid + {off}u;\n\
                 \x20           let am = e / {per_row}u; let ak = (e % {per_row}u) * 4u;\n\
                 \x20           let ar = row0 + am; let ac = t + ak;\n\
                 \x20           let v = select(vec4<f32>(0.0), in0[(a_base + ar * a_rows + ac) / 4u], ar < {p_m} && ac < {p_k});\n\
                 \x20           ta[ak][am] = v.x; ta[ak + 1u][am] = v.y; ta[ak + 2u][am] = v.z; ta[ak + 3u][am] = v.w;\n\
                 \x20       }}",
                per_row = TILE_K / 4,
            );
        }
        if !wide_b {
            let _ = writeln!(
                body,
                "        {{\n            let e = lid + {off}u;\n\
                 \x20           let bk = e / {tile}u; let bn = e % {tile}u;\n\
                 \x20           let br = t + bk; let bc = col0 + bn;\n\
                 \x20           tb[bk][bn] = select(0.0, in1[b_base + br * b_rows + bc * b_cols], br < {p_k} && bc < {p_n});\n\
                 \x20       }}"
            );
        } else if q < r / 4 {
            let _ = writeln!(
                body,
                "        {{\n            let e = lid + {off}u;\n\
                 \x20           let bk = e / {per_row}u; let bn = (e % {per_row}u) * 4u;\n\
                 \x20           let br = t + bk; let bc = col0 + bn;\n\
                 \x20           let v = select(vec4<f32>(0.0), in1[(b_base + br * b_rows + bc) / 4u], br < {p_k} && bc < {p_n});\n\
                 \x20           tb[bk][bn] = v.x; tb[bk][bn + 1u] = v.y; tb[bk][bn + 2u] = v.z; tb[bk][bn + 3u] = v.w;\n\
                 \x20       }}",
                per_row = tile / 4,
            );
        }
    }
    body += "        workgroupBarrier();\n";
    let _ = writeln!(
        body,
        "        for (var kk = 0u; kk < {TILE_K}u; kk = kk + 1u) {{"
    );
    for i in 0..r {
        let _ = writeln!(body, "            let a{i} = ta[kk][ty + {}u];", 16 * i);
    }
    for j in 0..r {
        let _ = writeln!(body, "            let b{j} = tb[kk][tx + {}u];", 16 * j);
    }
    for i in 0..r {
        for j in 0..r {
            let _ = writeln!(body, "            acc{i}_{j} = acc{i}_{j} + a{i} * b{j};");
        }
    }
    body += "        }\n        workgroupBarrier();\n    }\n";
    // Each output goes through the epilogue, which writes what the block
    // writes (the product itself only when it is an output).
    for i in 0..r {
        for j in 0..r {
            let _ = writeln!(
                body,
                "    {{\n        let row = row0 + ty + {ri}u; let col = col0 + tx + {cj}u;\n\
                 \x20       if (row < {p_m} && col < {p_n}) {{ _ = fused((batch * {p_m} + row) * {p_n} + col, acc{i}_{j}); }}\n    }}",
                ri = 16 * i,
                cj = 16 * j,
            );
        }
    }
    let element = |wide: bool| if wide { "vec4<f32>" } else { "f32" };
    let mut decls = format!(
        "@group(0) @binding(1) var<storage, read> in0: array<{}>;\n\
         @group(0) @binding(2) var<storage, read> in1: array<{}>;\n\
         var<workgroup> ta: array<array<f32, {tile}>, {TILE_K}>;\n\
         var<workgroup> tb: array<array<f32, {tile}>, {TILE_K}>;\n",
        element(wide_a),
        element(wide_b),
    );
    let (block, ops, accesses) = epilogue;
    let (bindings, function) = fused(block, ops, accesses, &mut params, 3);
    decls += &bindings;
    decls += &function;
    params.kernel(&decls, 256, &body, (batches * tiles_m * tiles_n) as u64)
}

/// Helpers every kernel may call. WGSL's own `pow` is undefined for a negative
/// base and its `tanh` overflows to NaN on some drivers for large inputs;
/// these follow NumPy instead. NaN and infinity come from variables because
/// WGSL rejects non-finite constant expressions.
const PRELUDE: &str = "\
var<private> wf_nan_bits: u32 = 0x7fc00000u;
var<private> wf_inf_bits: u32 = 0x7f800000u;
fn ninf() -> f32 { return -bitcast<f32>(wf_inf_bits); }
fn wf_tanh(x: f32) -> f32 { return tanh(clamp(x, -15.0, 15.0)); }
fn wf_pow(a: f32, b: f32) -> f32 {
    if (b == 0.0) { return 1.0; }
    if (a >= 0.0) { return pow(a, b); }
    if (fract(b) != 0.0) { return bitcast<f32>(wf_nan_bits); }
    let m = pow(-a, b);
    return select(m, -m, fract(b * 0.5) != 0.0);
}

";

fn unary(out: &mut String, op: UnaryOp, x: Value) -> std::fmt::Result {
    match op {
        UnaryOp::Neg => write!(out, "-({x})"),
        UnaryOp::Abs => write!(out, "abs({x})"),
        UnaryOp::Exp => write!(out, "exp({x})"),
        UnaryOp::Log => write!(out, "log({x})"),
        UnaryOp::Sqrt => write!(out, "sqrt({x})"),
        UnaryOp::Rsqrt => write!(out, "inverseSqrt({x})"),
        UnaryOp::Square => write!(out, "({x} * {x})"),
        UnaryOp::Relu => write!(out, "max({x}, 0.0)"),
        UnaryOp::Gelu => write!(
            out,
            "(0.5 * {x} * (1.0 + wf_tanh(0.7978845608 * ({x} + 0.044715 * {x} * {x} * {x}))))"
        ),
        UnaryOp::Sigmoid => write!(out, "(1.0 / (1.0 + exp(-({x}))))"),
        UnaryOp::Tanh => write!(out, "wf_tanh({x})"),
        UnaryOp::Sin => write!(out, "sin({x})"),
        UnaryOp::Cos => write!(out, "cos({x})"),
    }
}

fn binary(out: &mut String, op: BinaryOp, a: Value, b: Value) -> std::fmt::Result {
    let (open, sym, close) = match op {
        BinaryOp::Add => ("(", " + ", ")"),
        BinaryOp::Sub => ("(", " - ", ")"),
        BinaryOp::Mul => ("(", " * ", ")"),
        BinaryOp::Div => ("(", " / ", ")"),
        BinaryOp::Pow => ("wf_pow(", ", ", ")"),
        BinaryOp::Maximum => ("max(", ", ", ")"),
        BinaryOp::Minimum => ("min(", ", ", ")"),
        BinaryOp::Equal => ("select(0.0, 1.0, ", " == ", ")"),
        BinaryOp::Greater => ("select(0.0, 1.0, ", " > ", ")"),
        BinaryOp::GreaterEqual => ("select(0.0, 1.0, ", " >= ", ")"),
        BinaryOp::Less => ("select(0.0, 1.0, ", " < ", ")"),
        BinaryOp::LessEqual => ("select(0.0, 1.0, ", " <= ", ")"),
    };
    write!(out, "{open}{a}{sym}{b}{close}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contiguous(shape: &[usize]) -> Access {
        Access {
            shape: shape.to_vec(),
            layout: Layout::contiguous(shape),
        }
    }

    fn exp_block(n: usize) -> (ElementwiseBlock, Vec<OpIr>) {
        let ops = vec![OpIr {
            kind: OpKind::Unary(UnaryOp::Exp),
            inputs: vec![TensorId(1)],
            output: TensorId(2),
            shape: vec![n],
        }];
        let block = ElementwiseBlock {
            anchor: None,
            ops: vec![0],
            inputs: vec![TensorId(1)],
            outputs: vec![TensorId(2)],
            shape: vec![n],
        };
        (block, ops)
    }

    #[test]
    fn the_kernel_text_does_not_depend_on_sizes() {
        let make = |n: usize| {
            let (block, ops) = exp_block(n);
            elementwise(&block, &ops, &[contiguous(&[n])])
        };
        let (small, large) = (make(3), make(3_000_000));
        assert_eq!(small.wgsl, large.wgsl);
        assert_ne!(small.params, large.params);
    }

    #[test]
    fn a_specialised_kernel_writes_in_its_finite_scalars_bit_exactly() {
        let ops = vec![
            OpIr {
                kind: OpKind::BinaryScalar {
                    op: BinaryOp::Add,
                    scalar: 0.1,
                    scalar_first: false,
                },
                inputs: vec![TensorId(1)],
                output: TensorId(2),
                shape: vec![4],
            },
            OpIr {
                kind: OpKind::BinaryScalar {
                    op: BinaryOp::Mul,
                    scalar: f32::INFINITY,
                    scalar_first: false,
                },
                inputs: vec![TensorId(2)],
                output: TensorId(3),
                shape: vec![4],
            },
        ];
        let block = ElementwiseBlock {
            anchor: None,
            ops: vec![0, 1],
            inputs: vec![TensorId(1)],
            outputs: vec![TensorId(3)],
            shape: vec![4],
        };
        let kernel = elementwise(&block, &ops, &[contiguous(&[4])]);
        assert_eq!(
            kernel.scalar_bits().collect::<Vec<_>>(),
            vec![0.1f32.to_bits(), f32::INFINITY.to_bits()]
        );
        let text = kernel.specialized();
        assert!(text.contains("bitcast<f32>(0x3dcccccdu)"), "{text}");
        assert!(
            !text.contains("0x7f800000u)"),
            "infinity stays a uniform: {text}"
        );
        assert_eq!(text.matches("bitcast<f32>(param(").count(), 1, "{text}");
        assert!(text.contains("param(0u)"), "sizes stay uniforms: {text}");
    }

    #[test]
    fn matmul_loads_an_operand_by_vectors_only_where_its_rows_are_aligned() {
        let (block, ops) = exp_block(0);
        let epilogue: Group<'_> = (&block, &ops, &[]);
        let declared = |a: &Access, b: &Access, out: &[usize]| {
            let text = matmul(a, b, out, epilogue).wgsl;
            (
                text.contains("in0: array<vec4<f32>>"),
                text.contains("in1: array<vec4<f32>>"),
            )
        };
        assert_eq!(
            declared(&contiguous(&[8, 12]), &contiguous(&[12, 16]), &[8, 16]),
            (true, true)
        );
        // k = 6: a's rows are not 16-byte aligned; b's (n = 16) are.
        assert_eq!(
            declared(&contiguous(&[8, 6]), &contiguous(&[6, 16]), &[8, 16]),
            (false, true)
        );
        // A transposed right operand is strided along n.
        let transposed = Access {
            shape: vec![12, 16],
            layout: Layout {
                offset: 0,
                strides: vec![1, 12],
            },
        };
        assert_eq!(
            declared(&contiguous(&[8, 12]), &transposed, &[8, 16]),
            (true, false)
        );
    }

    #[test]
    fn a_gpu_reduces_side_by_side_columns_per_thread_and_a_cpu_any_many_outputs() {
        let wide = contiguous(&[300, 1024]);
        assert!(reduces_per_thread(&wide, &[0], false));
        assert!(
            !reduces_per_thread(&wide, &[1], false),
            "rows reduce in workgroups"
        );
        assert!(
            !reduces_per_thread(&contiguous(&[300, 16]), &[0], false),
            "too few outputs"
        );
        let transposed = Access {
            shape: vec![300, 1024],
            layout: Layout {
                offset: 0,
                strides: vec![1, 300],
            },
        };
        assert!(
            !reduces_per_thread(&transposed, &[0], false),
            "columns not side by side"
        );
        let rows_of_a_transpose = Access {
            shape: vec![1024, 300],
            layout: Layout {
                offset: 0,
                strides: vec![1, 1024],
            },
        };
        assert!(reduces_per_thread(&rows_of_a_transpose, &[1], false));
        // A CPU adapter: rows too, once there are enough of them.
        assert!(reduces_per_thread(&wide, &[1], true));
        assert!(!reduces_per_thread(&contiguous(&[16, 1024]), &[1], true));
        assert!(
            !reduces_per_thread(&contiguous(&[300, 100_000]), &[1], true),
            "rows too long"
        );
        let kernel = reduce(
            &wide,
            &[0],
            ReduceOp::Sum,
            false,
            Stage::PerThread,
            Fused::None,
        );
        assert_eq!(kernel.workgroups, 1024 / REDUCE_PER_THREAD as u64);
        assert!(!kernel.wgsl.contains("workgroupBarrier"), "{}", kernel.wgsl);
    }

    #[test]
    fn a_strided_input_is_loaded_through_its_layout() {
        let (block, ops) = exp_block(6);
        let mut block = block;
        block.shape = vec![2, 3];
        let transposed = Access {
            shape: vec![2, 3],
            layout: Layout {
                offset: 0,
                strides: vec![1, 2],
            },
        };
        let kernel = elementwise(&block, &ops, std::slice::from_ref(&transposed));
        assert!(kernel.wgsl.contains("c0 * param"), "{}", kernel.wgsl);
        assert_ne!(
            kernel.wgsl,
            elementwise(&block, &ops, &[contiguous(&[2, 3])]).wgsl
        );
    }

    #[test]
    fn a_reduction_launches_one_workgroup_per_output_value() {
        let kernel = reduce(
            &contiguous(&[4, 5, 6]),
            &[1],
            ReduceOp::Sum,
            false,
            Stage::Whole,
            Fused::None,
        );
        assert_eq!(kernel.workgroups, 24);
    }

    #[test]
    fn matmul_launches_one_workgroup_per_output_tile_and_batch() {
        // 64x64 tiles: 100 rows take 2, 70 columns take 2.
        let product = OpIr {
            kind: OpKind::Matmul,
            inputs: vec![TensorId(1), TensorId(2)],
            output: TensorId(3),
            shape: vec![3, 100, 70],
        };
        let block = ElementwiseBlock {
            anchor: Some(0),
            ops: vec![],
            inputs: vec![],
            outputs: vec![TensorId(3)],
            shape: vec![3, 100, 70],
        };
        let kernel = matmul(
            &contiguous(&[3, 100, 8]),
            &contiguous(&[8, 70]),
            &[3, 100, 70],
            (&block, &[product], &[]),
        );
        assert_eq!(kernel.workgroups, 3 * 2 * 2);
    }
}
