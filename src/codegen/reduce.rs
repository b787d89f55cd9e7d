//! Reductions: how a reduction folds (`Fold`), in one thread per output, one
//! workgroup per output, or two stages (partials, then the final values),
//! with a fused prologue or epilogue.

use std::fmt::Write;

use crate::ir::shape;
use crate::ir::{DType, ReduceOp};

use super::elementwise::{AnchorParts, fused};
use super::kernel::*;

/// A reduction's bindings up to its first output `out0`, and `out0`'s
/// binding: the input (or the prologue's inputs and its function), and for a
/// final stage that carries `aux` (`Reducer::carries_aux`) the partials'.
pub(super) fn reduce_bindings(
    prologue: Option<Group<'_>>,
    params: &mut Params,
    element: DType,
    out: DType,
    final_aux: bool,
) -> (String, usize) {
    let (mut decls, mut binding) = match prologue {
        Some(group) => {
            let (bindings, function) = fused(group, params, 1, AnchorParts::One);
            (format!("{bindings}{function}"), 1 + group.accesses.len())
        }
        None => (
            format!(
                "@group(0) @binding(1) var<storage, read> in0: array<{}>;\n",
                element.wgsl()
            ),
            2,
        ),
    };
    if final_aux {
        decls += "@group(0) @binding(2) var<storage, read> in1: array<u32>;\n";
        binding = 3;
    }
    let _ = writeln!(
        decls,
        "@group(0) @binding({binding}) var<storage, read_write> out0: array<{}>;",
        out.wgsl()
    );
    (decls, binding)
}

/// The most elements one reduction workgroup combines. A longer reduction is
/// split across workgroups and finished by a second launch: a single
/// workgroup looping over millions of elements leaves the GPU idle (and
/// lavapipe was seen returning wrong sums for one workgroup looping over 2^24).
pub const REDUCE_CHUNK: usize = 8192;

/// The subgroups a device has (WGSL's `subgroups` extension): each has
/// `min..=max` lanes, a power of two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Subgroups {
    pub min: u32,
    pub max: u32,
    /// A browser never has them (wgpu's WebGPU backend does not ask for
    /// them), so in wasm this type has no value: the compiler drops every
    /// subgroup branch, and the download carries none of their text.
    #[cfg(target_arch = "wasm32")]
    never: std::convert::Infallible,
}

impl Subgroups {
    #[cfg(not(target_arch = "wasm32"))]
    pub fn for_adapter(min: u32, max: u32) -> Option<Subgroups> {
        (min > 0 && max.is_power_of_two() && min <= max).then_some(Subgroups { min, max })
    }
}

/// How a device's reductions fold across a workgroup: the most threads a
/// workgroup has (fewer where it has fewer elements: `fold_elements`), and
/// the subgroups they may fold with (`Fold::across_workgroup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lanes {
    pub threads: u32,
    pub subgroups: Option<Subgroups>,
}

impl Lanes {
    /// A CPU adapter's workgroups are 32 threads: it runs a barrier by
    /// switching between its invocations, and each halving of the tree is
    /// one. A GPU's are up to 256: at 32 a row of [1024, 4096] summed at a
    /// quarter of an H100's bandwidth, too few loads in flight; 256 took
    /// 0.47x the time there, a logSumExp 0.29x, a softmax 0.66x (128 was
    /// as good for the softmax, worse for the rest; `examples/reduce_timing`
    /// with the width varied).
    pub fn for_device(cpu: bool, subgroups: Option<Subgroups>) -> Lanes {
        let threads = match cpu {
            true => 32,
            false => 256,
        };
        Lanes { threads, subgroups }
    }
}

/// Which launch of a reduction a kernel is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The whole reduction in one launch: writes the final values.
    Whole,
    /// Partial results over `splits` chunks per output: writes raw partials
    /// (and, where the reducer carries `aux`, theirs into a second output).
    First { splits: usize },
    /// Finishes partials laid out `[outputs, splits]`; a reducer that
    /// carries `aux` reads the partials' from a second input.
    Final,
    /// One thread per output value, looping over all its elements (see
    /// `reduces_per_thread`): no shared memory, no barriers.
    PerThread,
}

/// Threads per workgroup of a `PerThread` reduction.
pub(super) const REDUCE_PER_THREAD: u32 = 64;

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
    /// kernel). Only for a reduction of the last axis in one launch
    /// (`Whole` or `PerThread`). With `true`
    /// the reduced values are written too (binding `reduced`, the last).
    Epilogue(Group<'a>, bool),
}

/// How a reduction folds elements, as WGSL statements over its state `acc`
/// (and `aux`: for argmax the index, for logSumExp the sum of exp(x - acc),
/// for a float product its flags).
pub(super) struct Fold {
    /// What the elements, and `acc`, are.
    ty: DType,
    /// What the result is.
    out: DType,
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
    /// The fold of `reducer` over elements of `element`. A mean and a
    /// logSumExp fold floats only (registration casts an int to a float for
    /// them); an int's sum wraps, as its `add` does.
    pub(super) fn new(reducer: Reducer, stage: Stage, divisor: &str, element: DType) -> Fold {
        let op = match reducer {
            Reducer::Fold(op) => op,
            Reducer::Arg { max } => return Fold::arg(stage, max, element),
        };
        let int = element != DType::Float32;
        let plain = |init, step: &str| Fold {
            ty: element,
            out: element,
            init,
            aux: None,
            element: step.to_string(),
            merge: step.to_string(),
            finish: "acc".to_string(),
        };
        match op {
            ReduceOp::Sum if int => plain("0", "acc = acc + x;"),
            ReduceOp::Sum => plain("0.0", "acc = acc + x;"),
            ReduceOp::Prod if int => plain("1", "acc = acc * x;"),
            ReduceOp::Prod => Fold::product(stage),
            // Each element is divided before it is added, as TF.js's `mean`
            // does: a sum first would overflow where the mean is a float32
            // (two 3e38s), and a partial sum of quotients stays within the
            // largest element, up to rounding. The cost, as TF.js's: a
            // quotient below 2^-126 is subnormal, which GPUs may flush to 0
            // (a mean of a million values near 1e-32). Partials are sums of
            // quotients already.
            ReduceOp::Mean => Fold {
                element: match stage {
                    Stage::Final => "acc = acc + x;".to_string(),
                    _ => format!("acc = acc + x / f32({divisor});"),
                },
                ..plain("0.0", "acc = acc + x;")
            },
            ReduceOp::Max if int => plain(I32_MIN, "acc = max(acc, x);"),
            ReduceOp::Min if int => plain(I32_MAX, "acc = min(acc, x);"),
            ReduceOp::Max => plain("ninf()", "acc = wf_max(acc, x);"),
            ReduceOp::Min => plain("-ninf()", "acc = wf_min(acc, x);"),
            // log(sum(exp(x))) in one pass: `acc` is the running max and
            // `aux` the sum of exp(x - acc), rescaled when the max grows. A
            // partial result is itself a logSumExp, so the final stage folds
            // partials exactly like elements. A NaN element (or partial)
            // makes `acc` NaN for good: no later `x > acc` holds, and the
            // result is NaN, as TF.js's is. So does a +Infinity element:
            // TF.js's `max + log(sum(exp(x - max)))` is NaN there, and the
            // limit, +Infinity, made a softmax `[NaN, 0, 0]`, neither NaN
            // throughout (TF.js's, and our logSoftmax's) nor the limit. No
            // partial is +Infinity then: a finite `acc` plus the log of a
            // count stays finite.
            ReduceOp::LogSumExp => Fold {
                ty: element,
                out: element,
                init: "ninf()",
                aux: Some(("f32", "0.0")),
                element: "if ((bitcast<u32>(x) & 0x7fffffffu) > wf_inf_bits || bitcast<u32>(x) == wf_inf_bits) { acc = bitcast<f32>(wf_nan_bits); } else if (x > acc) { aux = aux * exp(acc - x) + 1.0; acc = x; } else if (x > ninf()) { aux = aux + exp(x - acc); }".to_string(),
                merge: "if ((bitcast<u32>(x) & 0x7fffffffu) > wf_inf_bits) { acc = x; } else if (x > acc) { aux = aux * exp(acc - x) + r; acc = x; } else if (x > ninf()) { aux = aux + r * exp(x - acc); }".to_string(),
                finish: "acc + log(aux)".to_string(),
            },
        }
    }

    /// A float's product, exact at a zero: `acc` folds the values that are
    /// not zero, and `aux` records a zero in bit 0, a non-finite value in
    /// bit 1, and the parity of every value's sign in bit 2 (a zero's sign
    /// is that, not `acc`'s, which is NaN where an overflowed partial met
    /// an underflowed one). A zero among finite values gives ±0 however
    /// far the others' product overflowed: folded in, `[0, 1e4 x 20]` made
    /// `0 * Infinity`, NaN, where the product is 0 (found by outside
    /// testing; TF.js's CPU multiplies in float64). With an infinity or a
    /// NaN a zero gives NaN, IEEE's `Infinity * 0`. The flags are not in a
    /// partial's value, so a `First` stage writes them too and the `Final`
    /// stage merges them (`Reducer::carries_aux`).
    fn product(stage: Stage) -> Fold {
        let merge = "aux = ((aux | r) & 3u) | ((aux ^ r) & 4u); acc = acc * x;";
        let element = match stage {
            Stage::Final => format!("let r = in1[at]; {merge}"),
            _ => "let xb = bitcast<u32>(x); aux = aux ^ ((xb >> 29u) & 4u); if ((xb & 0x7fffffffu) == 0u) { aux = aux | 1u; } else { if ((xb & 0x7fffffffu) >= wf_inf_bits) { aux = aux | 2u; } acc = acc * x; }".to_string(),
        };
        Fold {
            ty: DType::Float32,
            out: DType::Float32,
            init: "1.0",
            aux: Some(("u32", "0u")),
            element,
            merge: merge.to_string(),
            finish: "select(acc, select(bitcast<f32>((aux & 4u) << 29u), bitcast<f32>(wf_nan_bits), (aux & 2u) != 0u), (aux & 1u) != 0u)".to_string(),
        }
    }

    /// The index of the largest value (or with `max` false the smallest),
    /// carried in `aux`; the first on ties. A row of NaNs alone has none,
    /// and gives 0, as a row of equal values does.
    fn arg(stage: Stage, max: bool, element: DType) -> Fold {
        let better = if max { ">" } else { "<" };
        let pick = format!("if (x {better} acc || (x == acc && r < aux)) {{ acc = x; aux = r; }}");
        let r = match stage {
            Stage::Final => "in1[at]",
            _ => "i",
        };
        let init = match (element, max) {
            (DType::Float32, true) => "ninf()",
            (DType::Float32, false) => "-ninf()",
            (_, true) => I32_MIN,
            (_, false) => I32_MAX,
        };
        Fold {
            ty: element,
            out: DType::Int32,
            init,
            aux: Some(("u32", "0xffffffffu")),
            element: format!("let r = {r}; {pick}"),
            merge: pick,
            finish: "i32(select(aux, 0u, aux == 0xffffffffu))".to_string(),
        }
    }

    /// A call of `row_value` (an epilogue's function computing `finish`) on
    /// the state held in `acc` and `aux`.
    pub(super) fn row_value(&self, acc: &str, aux: &str) -> String {
        match self.aux {
            Some(_) => format!("row_value({acc}, {aux})"),
            None => format!("row_value({acc})"),
        }
    }

    /// Folds the `threads` per-thread states of a workgroup into one:
    /// afterwards every thread's `acc` (and `aux`) hold the whole
    /// workgroup's state, the same in every thread (an epilogue's threads
    /// must all see one row value).
    ///
    /// Pairwise in shared memory, a barrier per halving; or, for a fold
    /// with no `aux` where the device has subgroups, a butterfly of
    /// shuffles within each subgroup first. Where one subgroup spans the
    /// workgroup that is all, and lane 0's state is broadcast so every
    /// lane's copy is the same whatever the merge's rounding; elsewhere
    /// each subgroup's lane 0 puts its state in its subgroup's slot, and
    /// after one barrier every thread folds the slots in the same order.
    ///
    /// Subgroups are used only where they split the workgroup evenly: the
    /// butterfly reads lanes up to half a subgroup away, and in a subgroup
    /// wider than the workgroup some of those run no thread of it and hold
    /// nothing WebGPU defines. On an H100 at 256 threads that took
    /// 0.95-0.96x the time of the tree for sums and maxima, but 1.02-1.12x
    /// for folds with an `aux` (argMax, logSumExp, a softmax; a float
    /// product's has one too, and keeps the tree with them), whose merges
    /// shuffle twice and call `exp`: those keep the tree
    /// (`examples/reduce_timing`).
    pub(super) fn across_workgroup(&self, threads: u32, subgroups: Option<Subgroups>) -> String {
        let aux = self.aux.is_some();
        let save = if aux { "part_aux[lid] = aux;" } else { "" };
        let even = |s: &Subgroups| threads.is_multiple_of(s.max);
        if let Some(Subgroups { min, .. }) = subgroups.filter(|s| !aux && even(s)) {
            let mut text = format!(
                "    for (var s = sg_size >> 1u; s > 0u; s = s >> 1u) {{\n\
                 \x20       let x = subgroupShuffleXor(acc, s);\n        {merge}\n    }}\n",
                merge = self.merge,
            );
            let _ = match min < threads {
                false => writeln!(text, "    acc = subgroupBroadcast(acc, 0u);"),
                true => write!(
                    text,
                    "    if (sg_lane == 0u) {{ part[sg_id] = acc; }}\n\
                     \x20   workgroupBarrier();\n    acc = part[0];\n\
                     \x20   for (var j = 1u; j < n_sg; j = j + 1u) {{\n\
                     \x20       let x = part[j];\n        {merge}\n    }}\n",
                    merge = self.merge,
                ),
            };
            return text;
        }
        let (load_aux, take_aux) = if aux {
            (
                "let r = part_aux[lid + s];\n            var aux = part_aux[lid];",
                "aux = part_aux[0];",
            )
        } else {
            ("", "")
        };
        format!(
            "    part[lid] = acc;\n    {save}\n    workgroupBarrier();\n\
             \x20   for (var s = {half}u; s > 0u; s = s >> 1u) {{\n\
             \x20       if (lid < s) {{\n\
             \x20           let x = part[lid + s];\n            var acc = part[lid];\n            {load_aux}\n\
             \x20           {merge}\n\
             \x20           part[lid] = acc;\n            {save}\n\
             \x20       }}\n        workgroupBarrier();\n    }}\n\
             \x20   acc = part[0];\n    {take_aux}\n",
            half = threads / 2,
            merge = self.merge,
        )
    }

    /// The shared memory `across_workgroup` uses.
    pub(super) fn workgroup_memory(&self, threads: u32, decls: &mut String) {
        let _ = writeln!(
            decls,
            "var<workgroup> part: array<{}, {threads}>;",
            self.ty.wgsl()
        );
        if let Some((ty, _)) = self.aux {
            let _ = writeln!(decls, "var<workgroup> part_aux: array<{ty}, {threads}>;");
        }
    }
}

/// What a reduction kernel computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reducer {
    /// A fold of the values along its axes.
    Fold(ReduceOp),
    /// The index of the largest value (with `max` false the smallest; the
    /// first on ties), carried with the value.
    Arg { max: bool },
}

/// An int32's extremes, as WGSL writes them (a literal of -2^31 is not one).
const I32_MIN: &str = "bitcast<i32>(0x80000000u)";
const I32_MAX: &str = "2147483647";

impl Reducer {
    /// Whether a two-stage reduction of `element`s carries each partial's
    /// `aux` to its final stage, in a second buffer of `u32`s: an argmax's
    /// index, and a fold's flags (`ReduceOp::carries_flags`), which the
    /// partial's value alone does not hold.
    pub fn carries_aux(self, element: DType) -> bool {
        match self {
            Reducer::Arg { .. } => true,
            Reducer::Fold(op) => op.carries_flags(element),
        }
    }

    /// Its result as two parts whose sum it is, where one float would lose
    /// what an epilogue needs (see `AnchorParts::Split`): a logSumExp's max
    /// and the log of its sum, from the fold's state `acc` and `aux`.
    fn split(self, acc: &str, aux: &str) -> Option<(String, String)> {
        (self == Reducer::Fold(ReduceOp::LogSumExp))
            .then(|| (acc.to_string(), format!("log({aux})")))
    }
}

/// One workgroup per output value (per chunk of it, in a `First` stage):
/// its threads stride over the reduced elements, then combine their partial
/// results in shared memory; or, in a `PerThread` stage, one thread per
/// output. Its elements are loaded, or computed by a prologue; an epilogue
/// runs over each row once its value is known.
///
/// With `checked`, a stage that writes the final values looks at each as
/// it writes it: a non-finite one is flagged as a `Finite` check of that
/// op (the reduction's place among the block's ops) at its flat position
/// in the output's shape. A kernel of its own reading them back would be
/// one more launch per reduction.
pub fn reduce(
    input: &Access,
    axes: &[usize],
    reducer: Reducer,
    stage: Stage,
    fused_work: Fused<'_>,
    checked: Option<OutputCheck<'_>>,
    lanes: Lanes,
) -> Kernel {
    let prologue = match fused_work {
        Fused::Prologue(group) => Some(group),
        _ => None,
    };
    let mut params = Params::default();
    let folded = fold_elements(
        input,
        axes,
        reducer,
        stage,
        prologue.is_some(),
        lanes.threads,
        &mut params,
    );
    match fused_work {
        Fused::Epilogue(group, write)
            if matches!(stage, Stage::Whole | Stage::PerThread) && axes.len() == 1 =>
        {
            with_epilogue(folded, reducer, stage, group, write, lanes, params)
        }
        _ => written(folded, reducer, stage, prologue, checked, lanes, params),
    }
}

/// Which op a reduction's final values are checked as, and the output's
/// shape (`reduce`).
#[derive(Debug, Clone, Copy)]
pub struct OutputCheck<'a> {
    pub op: usize,
    pub shape: &'a [usize],
}

/// The statement writing final value `value` to `out0[at]`, checked first
/// with `checked`.
fn write_final(
    body: &mut String,
    params: &mut Params,
    indent: &str,
    (at, value): (&str, &str),
    checked: Option<OutputCheck<'_>>,
) {
    match checked {
        None => {
            let _ = writeln!(body, "{indent}out0[{at}] = {value};");
        }
        Some(OutputCheck { op, shape }) => {
            let slot = params.check(op, CheckOf::Finite, shape);
            let _ = writeln!(
                body,
                "{indent}let done = {value};\n{indent}if (nonfinite(done)) {{ flag_nonfinite({}u, {at}, done); }}\n{indent}out0[{at}] = done;",
                2 * slot
            );
        }
    }
}

/// A reduction's kernel up to its fold: each thread's share of an output's
/// elements folded into `acc` (and `aux`).
struct Folded {
    body: String,
    /// Threads per workgroup (`Lanes::threads`, or fewer for fewer
    /// elements).
    threads: u32,
    fold: Fold,
    n_out: usize,
    splits: usize,
    /// The uniform holding the reduced elements per output.
    count: String,
}

/// The body that finds this thread's output (`o`), walks its share of the
/// reduced elements and folds each into the state.
fn fold_elements(
    input: &Access,
    axes: &[usize],
    reducer: Reducer,
    stage: Stage,
    prologue: bool,
    threads: u32,
    params: &mut Params,
) -> Folded {
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
    let n = params.push(n_out * splits);
    let p_splits = params.push(splits);
    let chunk = params.push(n_red.div_ceil(splits));
    let count = params.push(n_red);
    let offset = params.push(input.layout.offset);
    let fold = Fold::new(reducer, stage, &count, input.dtype);
    let per_thread = stage == Stage::PerThread;
    // No more threads than a workgroup has elements, down to 32: a row of
    // 10 (W3's softmax) would leave 246 of 256 idle through eight barriers.
    let each = n_red.div_ceil(splits).next_power_of_two().max(32);
    let threads = u32::try_from(each).map_or(threads, |each| each.min(threads));
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
    coords(&mut body, params, "o", "k", &kept_shape);
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
        ("start + lid", format!("{threads}u"))
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
    let load = if prologue {
        "fused(at, 0.0)"
    } else {
        "in0[at]"
    };
    let _ = writeln!(
        body,
        "        let x = {load};\n        {}\n    }}",
        fold.element
    );
    Folded {
        body,
        threads,
        fold,
        n_out,
        splits,
        count,
    }
}

/// Workgroups a `PerThread` launch of `n_out` outputs takes.
fn per_thread_groups(n_out: usize) -> u64 {
    n_out.div_ceil(REDUCE_PER_THREAD as usize) as u64
}

/// The fold finished by an epilogue: the row's value, then the epilogue at
/// each element of the row, by this thread alone, or (after the
/// workgroup's fold, which ends on a barrier) by every thread at its share
/// of the row. With `write` the row's value is written too.
fn with_epilogue(
    folded: Folded,
    reducer: Reducer,
    stage: Stage,
    group: Group<'_>,
    write: bool,
    lanes: Lanes,
    mut params: Params,
) -> Kernel {
    let Folded {
        mut body,
        threads,
        fold,
        n_out,
        count,
        ..
    } = folded;
    let per_thread = stage == Stage::PerThread;
    let (row, (acc, aux), first, step) = if per_thread {
        ("o", ("acc", "aux"), "0u", "1u".to_string())
    } else {
        body += &fold.across_workgroup(threads, lanes.subgroups);
        let step = format!("{threads}u");
        ("wg", ("acc", "aux"), "lid", step)
    };
    let (parts, anchor) = match reducer.split(acc, aux) {
        Some((hi, lo)) => {
            let _ = writeln!(
                body,
                "    let red_hi = {hi};\n    let red_lo = {lo};\n    let red = red_hi + red_lo;"
            );
            (AnchorParts::Split, "red_hi, red_lo")
        }
        None => {
            let _ = writeln!(body, "    let red = {};", fold.row_value(acc, aux));
            (AnchorParts::One, "red")
        }
    };
    if write {
        let lead = if per_thread { "" } else { "if (lid == 0u) " };
        let _ = writeln!(body, "    {lead}{{ reduced[{row}] = red; }}");
    }
    let _ = writeln!(
        body,
        "    for (var i = {first}; i < {count}; i = i + {step}) {{ _ = fused({row} * {count} + i, {anchor}); }}"
    );
    // The reduction's input, the epilogue's inputs and outputs, and last
    // the reduced values when they are written. The row's value comes from
    // a function of its own: `acc` and `aux` are the loop's names.
    let (bindings, function) = fused(group, &mut params, 2, parts);
    let (block, accesses) = (group.block, group.accesses);
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
    if per_thread {
        params.kernel(&decls, REDUCE_PER_THREAD, &body, per_thread_groups(n_out))
    } else {
        fold.workgroup_memory(threads, &mut decls);
        params.kernel(&decls, threads, &body, n_out as u64)
    }
}

/// The fold finished by writing its result: per output, or, in a `First`
/// stage, per partial (a carried `aux` into a second output).
fn written(
    folded: Folded,
    reducer: Reducer,
    stage: Stage,
    prologue: Option<Group<'_>>,
    checked: Option<OutputCheck<'_>>,
    lanes: Lanes,
    mut params: Params,
) -> Kernel {
    let Folded {
        mut body,
        threads,
        fold,
        n_out,
        splits,
        ..
    } = folded;
    let carried = reducer.carries_aux(fold.ty);
    if stage == Stage::PerThread {
        write_final(&mut body, &mut params, "    ", ("o", &fold.finish), checked);
        let (decls, _) = reduce_bindings(prologue, &mut params, fold.ty, fold.out, false);
        return params.kernel(&decls, REDUCE_PER_THREAD, &body, per_thread_groups(n_out));
    }
    body += &fold.across_workgroup(threads, lanes.subgroups);
    body += "    if (lid == 0u) {\n";
    let final_aux = carried && matches!(stage, Stage::Final);
    // A first stage writes raw partials, of the elements' dtype.
    let out = match stage {
        Stage::First { .. } => fold.ty,
        _ => fold.out,
    };
    let (mut decls, binding) = reduce_bindings(prologue, &mut params, fold.ty, out, final_aux);
    match stage {
        Stage::First { .. } if carried => {
            let _ = writeln!(
                decls,
                "@group(0) @binding({}) var<storage, read_write> out1: array<u32>;",
                binding + 1
            );
            body += "        out0[wg] = acc;\n        out1[wg] = aux;\n";
        }
        Stage::First { .. } => {
            let _ = writeln!(body, "        out0[wg] = {};", fold.finish);
        }
        _ => write_final(
            &mut body,
            &mut params,
            "        ",
            ("wg", &fold.finish),
            checked,
        ),
    }
    body += "    }\n";
    fold.workgroup_memory(threads, &mut decls);
    params.kernel(&decls, threads, &body, (n_out * splits) as u64)
}
