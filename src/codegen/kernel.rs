//! What every kernel is made of: the kernel value, how inputs are read
//! (`Access`), the uniform words (`Params`), values inside a fused function,
//! the shader frame and the WGSL helpers every kernel may call.

use std::fmt::Write;

use crate::fusion::ElementwiseBlock;
use crate::ir::TensorId;
use crate::ir::layout::Layout;
use crate::ir::{BinaryOp, DType, OpIr, UnaryOp};

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
    /// Whether its specialised text writes in its sizes and other integer
    /// words, not only its float scalars: a product's (a matmul's, a
    /// convolution's), whose loads divide by sizes for every element they
    /// stage. Each size set then compiles a pipeline of its own (a few per
    /// text, `runtime`'s `Family`), which only a kernel that much faster
    /// for it is worth: an elementwise text serves every shape with one.
    pub sizes: bool,
    /// The checks it makes, by slot: each writes two words into the
    /// `flags` binding (its last), starting at `u32::MAX` for
    /// "none failed" (`Check::of` says what they hold). The one home of
    /// in-kernel checks: a gather's index range, non-finite values.
    pub checks: Vec<Check>,
}

/// One in-kernel check: which op of the block makes it (its position in
/// the block's ops), what it checks, and the shape its flagged position is
/// a flat index into (one kernel can check values of several shapes: a
/// reduction's prologue its input's, the reduction its output's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub op: usize,
    pub of: CheckOf,
    pub shape: Vec<usize>,
}

/// What a check looks at, and what its two words hold once it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckOf {
    /// A gather's index, read from the block's input `input`: the first
    /// flat position holding one outside the table, then the index there
    /// (written by `flag_value`, after the kernel: the flagging threads race,
    /// so only the position is theirs to write).
    Index { input: usize },
    /// The op's value: non-finite while its operands were finite. One word,
    /// the first such flat position times four plus the value's class (0
    /// NaN, 1 +Inf, 2 -Inf), so the one `atomicMin` that picks the first
    /// position also keeps its class (`FINITE_KEY`). Positions past 2^30
    /// are recorded as 2^30 - 1: no binding holds that many floats.
    Finite,
}

impl CheckOf {
    /// `(position, class)` of a failed `Finite` check's first word.
    pub fn finite_key(word: u32) -> (usize, u32) {
        ((word >> 2) as usize, word & 3)
    }
}

/// The WGSL a kernel making `Finite` checks calls (after its `flags`
/// binding is declared): whether a float is NaN or infinite, read from its
/// bits (WGSL lets a compiler assume floats are finite, so `v != v` may be
/// folded away), and the flag of check word `word` at position `idx`.
pub(super) const FINITE_KEY: &str = "\
fn nonfinite(v: f32) -> bool { return (bitcast<u32>(v) & 0x7f800000u) == 0x7f800000u; }
fn flag_nonfinite(word: u32, idx: u32, v: f32) {
    let b = bitcast<u32>(v);
    var c = 0u;
    if ((b & 0x007fffffu) == 0u) { c = select(1u, 2u, (b >> 31u) == 1u); }
    atomicMin(&flags[word], (min(idx, 0x3fffffffu) << 2u) | c);
}
";

impl Kernel {
    /// The words its specialised text writes in: all of them with `sizes`,
    /// else its scalars'. Launches with the same ones share its pipeline.
    pub fn written_words(&self) -> Vec<u32> {
        match self.sizes {
            true => self.params.clone(),
            false => self.scalars.iter().map(|&i| self.params[i]).collect(),
        }
    }

    /// The text with this launch's words written in: its finite scalars as
    /// bit-exact literals, and with `sizes` its sizes and other integers as
    /// `u32` literals.
    /// Some drivers (SwiftShader, the browser's CPU fallback) pay as much
    /// for each uniform load as for the arithmetic around it, so a chain of
    /// scalar ops runs several times faster this way; and a size written in
    /// turns a kernel's index divisions into multiplications (a
    /// convolution's window arithmetic divides by sizes for every element
    /// it loads). Non-finite scalars stay uniform loads: WGSL rejects a
    /// non-finite constant; and so do zeros (see below), float or not (an
    /// integer division by a literal zero is rejected too).
    pub fn specialized(&self) -> String {
        let floats = self.floats_written_in();
        if !self.sizes {
            return floats;
        }
        let mut out = String::with_capacity(floats.len());
        let mut rest = floats.as_str();
        while let Some(at) = rest.find("param(") {
            let (before, tail) = (&rest[..at], &rest[at + "param(".len()..]);
            out.push_str(before);
            let word = tail
                .find("u)")
                .filter(|_| !out.ends_with("bitcast<f32>("))
                .and_then(|e| Some((e, tail[..e].parse::<usize>().ok()?)))
                .filter(|(_, i)| !self.scalars.contains(i))
                .and_then(|(e, i)| Some((e, *self.params.get(i)?)))
                .filter(|&(_, word)| word != 0);
            match word {
                Some((e, word)) => {
                    let _ = write!(out, "{word}u");
                    rest = &tail[e + 2..];
                }
                None => {
                    out.push_str("param(");
                    rest = tail;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// The text with the finite, non-zero scalars written in.
    fn floats_written_in(&self) -> String {
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
                // Zero stays a load too: written in, it lets a compiler fold
                // `x * 0` to 0 and `x / 0` to anything (WGSL lets it assume
                // no infinity or NaN), where an infinite `x` makes NaN.
                (Some(e), Some(bits))
                    if f32::from_bits(bits).is_finite() && bits & 0x7fff_ffff != 0 =>
                {
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

/// An elementwise group as a kernel runs it (on its own, as a matmul's or
/// a row reduction's epilogue, as a reduction's prologue): the block, the
/// flushed ops, and how to read the block's inputs.
#[derive(Clone, Copy)]
pub struct Group<'a> {
    pub block: &'a ElementwiseBlock,
    pub ops: &'a [OpIr],
    pub accesses: &'a [Access],
    /// The tensor whose value the anchoring kernel hands the group (a
    /// matmul's product, a row's reduced value): the ops read it as
    /// `anchor`, not from memory. `None` on its own or as a prologue.
    pub anchor: Option<TensorId>,
    /// Which values the group checks for non-finite results.
    pub numerics: Numerics,
}

/// Which values a group checks (`DeviceOptions::check_numerics`): every
/// float op's, flagged where its operands are finite and it is not; with
/// `OpsAndAnchor` the anchor's too, whose operands the kernel does not see
/// (the lowering asks for it only where they are known finite). A
/// prologue's checks are its reduction kernel's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Numerics {
    Off,
    Ops,
    OpsAndAnchor,
}

/// How a kernel reads one input: its shape, where its elements sit, and
/// what they are.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Access {
    pub shape: Vec<usize>,
    pub layout: Layout,
    pub dtype: DType,
}

impl Access {
    /// Whether it can be read four elements at a time along `dim`: `dim`
    /// is contiguous, and its length, the offset and every other stride
    /// are multiples of four, so `index / 4` is exact and four neighbours
    /// lie in one aligned `vec4` that never reaches past the dim's end into
    /// the next row (or tap, or pixel).
    pub(super) fn in_fours(&self, dim: usize) -> bool {
        let strides = &self.layout.strides;
        self.shape.get(dim).is_some_and(|n| n.is_multiple_of(4))
            && strides.get(dim) == Some(&1)
            && self.layout.offset.is_multiple_of(4)
            && strides
                .iter()
                .enumerate()
                .all(|(d, s)| d == dim || s.is_multiple_of(4))
    }

    pub(super) fn is_direct(&self, out: &[usize]) -> bool {
        self.shape == out && self.layout.offset == 0 && self.layout.is_contiguous(&self.shape)
    }
}

/// The uniform words of one launch, appended as the text is generated.
#[derive(Default)]
pub(super) struct Params {
    words: Vec<u32>,
    scalars: Vec<usize>,
    broken: Option<String>,
    pub(super) checks: Vec<Check>,
    /// Whether its specialised text writes in its sizes (`Kernel::sizes`).
    pub(super) sizes: bool,
}

impl Params {
    /// Appends `value`, returning the WGSL expression that reads it. Kernels
    /// index with 32 bits; larger work is refused before codegen
    /// (`fusion::refusal`), so a value past that here is a broken invariant.
    pub(super) fn push(&mut self, value: usize) -> String {
        let word = u32::try_from(value).unwrap_or_else(|_| {
            self.breaks(format!("the size {value} does not fit a 32-bit index"));
            u32::MAX
        });
        self.words.push(word);
        format!("param({}u)", self.words.len() - 1)
    }

    /// Adds a check made by the block's op `op`, at positions of `shape`;
    /// returns its slot.
    pub(super) fn check(&mut self, op: usize, of: CheckOf, shape: &[usize]) -> usize {
        let shape = shape.to_vec();
        self.checks.push(Check { op, of, shape });
        self.checks.len() - 1
    }

    /// Marks the kernel as not to be launched, keeping the first reason.
    pub(super) fn breaks(&mut self, why: String) {
        debug_assert!(false, "codegen invariant broken: {why}");
        self.broken.get_or_insert(why);
    }

    /// Appends a scalar operand; `Kernel::specialized` recognises the
    /// expression it is written as.
    pub(super) fn push_f32(&mut self, value: f32) -> Value {
        self.scalars.push(self.words.len());
        self.words.push(value.to_bits());
        Value::Scalar(self.words.len() - 1)
    }

    /// Appends an int32 operand (never written in: `specialized` writes
    /// floats only).
    pub(super) fn push_i32(&mut self, value: i32) -> Value {
        self.words.push(value as u32);
        Value::IntScalar(self.words.len() - 1)
    }

    /// Appends `values` as a table a loop reads `per` at a time (never
    /// written into the text: a loop whose scalars change keeps its
    /// pipeline). Each row starts a `vec4`, so an iteration loads whole
    /// vectors and picks components by constant swizzles: a dynamic index
    /// per scalar costs SwiftShader as much as the arithmetic. Returns the
    /// `vec4` index of the first row and the `vec4`s per row.
    pub(super) fn push_table(&mut self, values: &[f32], per: usize) -> (usize, usize) {
        while !self.words.len().is_multiple_of(4) {
            self.words.push(0);
        }
        let first = self.words.len() / 4;
        let stride = per.div_ceil(4).max(1);
        for row in values.chunks(per.max(1)) {
            self.words.extend(row.iter().map(|v| v.to_bits()));
            self.words
                .resize(self.words.len() + 4 * stride - row.len(), 0);
        }
        (first, stride)
    }

    /// The kernel: the shader around `decls` and `body`, and these words.
    /// The one home of the checks' `flags` binding: declared only by a
    /// kernel that makes a check (one whose ops' bounds proved them all
    /// finite is the kernel it is unchecked), after every binding `decls`
    /// declares, which is where the lowering binds it.
    pub(super) fn kernel(
        mut self,
        decls: &str,
        workgroup: u32,
        body: &str,
        workgroups: u64,
    ) -> Kernel {
        while !self.words.len().is_multiple_of(4) {
            self.words.push(0);
        }
        let mut decls = decls.to_string();
        if !self.checks.is_empty() {
            let last = decls
                .match_indices("@binding(")
                .filter_map(|(at, m)| {
                    let rest = &decls[at + m.len()..];
                    rest[..rest.find(')')?].parse::<usize>().ok()
                })
                .max()
                .unwrap_or(0);
            let _ = writeln!(
                decls,
                "@group(0) @binding({}) var<storage, read_write> flags: array<atomic<u32>>;",
                last + 1
            );
        }
        if self.checks.iter().any(|c| c.of == CheckOf::Finite) {
            decls.push_str(FINITE_KEY);
        }
        Kernel {
            wgsl: shader(&self.words, &decls, workgroup, body),
            params: self.words,
            scalars: self.scalars,
            workgroups,
            broken: self.broken,
            checks: self.checks,
            sizes: self.sizes,
        }
    }
}

/// A value inside a fused function, written without allocating.
#[derive(Debug, Clone, Copy)]
pub(super) enum Value {
    /// The anchor's value (a matmul's product, a reduced row's value).
    Anchor,
    /// Input `j`, loaded as `x{j}`.
    Input(usize),
    /// The value of the block's `k`th op, `v{k}`.
    Op(usize),
    /// Uniform word `k` read as a float.
    Scalar(usize),
    /// Uniform word `k` read as an int32.
    IntScalar(usize),
    /// Stands in for an operand with no source, in a kernel marked broken
    /// (never launched).
    Missing,
    /// The value a rolled loop carries from one op to the next, `c`.
    Carried,
    /// The value of the `j`th op of a rolled loop's pattern, `r{j}`.
    Looped(usize),
    /// Scalar `at` of a rolled loop's pattern, in this iteration's row of
    /// the table (loaded as `t0`, `t1`, ...: four scalars each).
    Tabled(usize),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Anchor => f.write_str("anchor"),
            Value::Input(j) => write!(f, "x{j}"),
            Value::Op(i) => write!(f, "v{i}"),
            Value::Scalar(k) => write!(f, "bitcast<f32>(param({k}u))"),
            Value::IntScalar(k) => write!(f, "bitcast<i32>(param({k}u))"),
            Value::Missing => f.write_str("0.0"),
            Value::Carried => f.write_str("c"),
            Value::Looped(j) => write!(f, "r{j}"),
            Value::Tabled(at) => write!(
                f,
                "bitcast<f32>(t{}.{})",
                at / 4,
                ["x", "y", "z", "w"][at % 4]
            ),
        }
    }
}

/// Declares the coordinates `c0..` of flat position `flat` in `shape`
/// (innermost dim last).
pub(super) fn coords(
    body: &mut String,
    params: &mut Params,
    flat: &str,
    prefix: &str,
    shape: &[usize],
) {
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
pub(super) fn strided_index(
    params: &mut Params,
    access: &Access,
    out: &[usize],
    prefix: &str,
) -> String {
    let strides = access.layout.strides_for(&access.shape, out);
    let mut terms = vec![params.push(access.layout.offset)];
    for (d, &s) in strides.iter().enumerate() {
        terms.push(format!("{prefix}{d} * {}", params.push(s)));
    }
    terms.join(" + ")
}

/// The helpers of the int32 ops, the float mod and the float functions whose
/// edges WGSL leaves to the driver, each written into a kernel only when its
/// text calls it: every kernel's text is compiled, and most kernels need
/// none of them. `log`, `sqrt` and `inverseSqrt` take their IEEE values at
/// 0, below 0, at infinity and at NaN from the bits (SwiftShader's `log(0)`
/// is -88.03 and its `log(NaN)` 90.13: a finite lie the numerics checks
/// could not see), and the driver's function everywhere else.
const HELPERS: [(&str, &str); 18] = [
    // WGSL's `max`, `min` and `clamp` may return the other operand for a
    // NaN (IEEE maxNum; SwiftShader does), and SwiftShader's `exp(NaN)` is
    // Infinity: a NaN would vanish into a number. TF.js propagates it, and
    // a NaN that vanished is a silent wrong value, so these test the bits.
    // WGSL leaves the sign of two zeros' max and min to the GPU too; these
    // take it from the bits, as `Math.max` (+0) and `Math.min` (-0) do, and
    // a clamp compares as TF.js's does, so a zero within its bounds keeps
    // its sign.
    (
        "wf_max(",
        r"fn wf_max(a: f32, b: f32) -> f32 {
    let nan = (bitcast<u32>(a) & 0x7fffffffu) > wf_inf_bits || (bitcast<u32>(b) & 0x7fffffffu) > wf_inf_bits;
    let m = select(max(a, b), bitcast<f32>(bitcast<u32>(a) & bitcast<u32>(b)), a == b);
    return select(m, bitcast<f32>(wf_nan_bits), nan);
}
",
    ),
    (
        "wf_min(",
        r"fn wf_min(a: f32, b: f32) -> f32 {
    let nan = (bitcast<u32>(a) & 0x7fffffffu) > wf_inf_bits || (bitcast<u32>(b) & 0x7fffffffu) > wf_inf_bits;
    let m = select(min(a, b), bitcast<f32>(bitcast<u32>(a) | bitcast<u32>(b)), a == b);
    return select(m, bitcast<f32>(wf_nan_bits), nan);
}
",
    ),
    (
        "wf_clamp(",
        r"fn wf_clamp(x: f32, lo: f32, hi: f32) -> f32 {
    return select(select(select(x, lo, x < lo), hi, x > hi), x, (bitcast<u32>(x) & 0x7fffffffu) > wf_inf_bits);
}
",
    ),
    // A float `floorDiv` of `a` and `b`, given `q = a / b` as the device
    // divides and `exact = (a - mod(a, b)) / b`. WGSL's division is within
    // 2.5 ulp, so `floor(q)` was one too low where the quotient is whole
    // (`-21 / 7` read -3.0000002, and -4) or just below a whole number; the
    // remainder is exact, so `exact` is the whole quotient up to rounding,
    // which stays under a half below 2^20. Past that a float32 holds few
    // fractions, and `floor(q)` is all there is; a NaN or an infinity
    // fails the comparison and is `floor(q)` too.
    (
        "wf_floordiv(",
        r"fn wf_floordiv(q: f32, exact: f32) -> f32 {
    if (abs(q) < 1048576.0) { return round(exact); }
    return floor(q);
}
",
    ),
    (
        "wf_floor(",
        r"fn wf_floor(x: f32) -> f32 {
    return select(floor(x), x, (bitcast<u32>(x) & 0x7fffffffu) >= wf_inf_bits);
}
",
    ),
    (
        "wf_exp(",
        r"fn wf_exp(x: f32) -> f32 {
    return select(exp(x), x, (bitcast<u32>(x) & 0x7fffffffu) > wf_inf_bits);
}
",
    ),
    // WGSL allows `sin` and `cos` an absolute error of 2^-11, and
    // SwiftShader's are 1.5e-4 off across [-pi, pi]: a tenfold gradient of
    // `tan` is then off by 1e-2; past [-pi, pi] WGSL promises nothing
    // (SwiftShader's `tan(1e9)` is 1). This is sin (`phase` 0) or cos (1)
    // to 1.2e-7 absolute for every finite x. A quadrant `k` of pi/2 is
    // taken off exactly, then Cephes's `sinf` polynomials run on
    // [-pi/4, pi/4]. Below 1e6 the reduction is Cody and Waite's: pi/2's
    // first two parts have 8 and 11 bits and `k` is split at 2^12, so every
    // product but the last is exact. From 1e6 it is Payne and Hanek's,
    // since there the product k * pi/2 needs more bits than any split
    // keeps: |x| = m * 2^s (m of 24 bits) times the 96 bits of 2/pi that
    // can reach the quadrant (the earlier ones make multiples of 4, the
    // later ones less than 2^-70), in 32-bit pieces (`wf_mul_wide`, as
    // WGSL has no 64-bit integers); the product's two bits above its
    // binary point are `k`, the 62 below it the fraction r / (pi/2).
    (
        "wf_trig(",
        r"fn wf_mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
    let p00 = a0 * b0; let p01 = a0 * b1; let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>((mid << 16u) | (p00 & 0xffffu), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}
fn wf_trig(x: f32, phase: i32) -> f32 {
    var k: i32;
    var r: f32;
    let bits = bitcast<u32>(x) & 0x7fffffffu;
    if (abs(x) < 1e6) {
        let kf = round(x * 0.636619772);
        let kh = trunc(kf * (1.0 / 4096.0)) * 4096.0;
        let kl = kf - kh;
        r = x - kh * 1.5703125;
        r = r - kl * 1.5703125;
        r = r - kh * 4.837512969970703125e-4;
        r = r - kl * 4.837512969970703125e-4;
        r = r - kf * 7.54978995489188216e-8;
        k = i32(kf);
    } else if (bits >= wf_inf_bits) {
        return bitcast<f32>(wf_nan_bits);
    } else {
        var two_over_pi = array<u32, 7>(0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu);
        let m = (bits & 0x7fffffu) | 0x800000u;
        let s = i32(bits >> 23u) - 150;
        let first = u32(max(s - 2, 0));
        let word = first / 32u;
        let o = first % 32u;
        var w: array<u32, 3>;
        for (var i = 0u; i < 3u; i++) {
            w[i] = select(two_over_pi[word + i], (two_over_pi[word + i] << o) | (two_over_pi[word + i + 1u] >> (32u - o)), o != 0u);
        }
        let p0 = wf_mul_wide(m, w[0]);
        let p1 = wf_mul_wide(m, w[1]);
        let p2 = wf_mul_wide(m, w[2]);
        let q1 = p2.y + p1.x;
        let t = p1.y + p0.x;
        let q2 = t + select(0u, 1u, q1 < p1.x);
        let q3 = p0.y + select(0u, 1u, t < p0.x) + select(0u, 1u, q2 < t);
        let d = u32(i32(first) + 2 - s);
        let hi = select(q2, (q3 << (32u - d)) | (q2 >> d), d != 0u);
        let lo = select(q1, (q2 << (32u - d)) | (q1 >> d), d != 0u);
        k = i32(hi >> 30u);
        if ((hi & 0x20000000u) == 0u) {
            r = (f32(hi & 0x3fffffffu) * 9.313225746154785e-10 + f32(lo) * 2.168404344971009e-19) * 1.5707963267948966;
        } else {
            k = k + 1;
            let nhi = (~hi & 0x3fffffffu) + select(0u, 1u, lo == 0u);
            r = -(f32(nhi) * 9.313225746154785e-10 + f32(0u - lo) * 2.168404344971009e-19) * 1.5707963267948966;
        }
        if (x < 0.0) { r = -r; k = -k; }
    }
    let q = (k + phase) & 3;
    let z = r * r;
    let s = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
    let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
    let v = select(s, c, (q & 1) == 1);
    return select(v, -v, q >= 2);
}
",
    ),
    (
        "wf_sigmoid(",
        r"fn wf_sigmoid(x: f32) -> f32 {
    return select(1.0 / (1.0 + exp(-x)), x, (bitcast<u32>(x) & 0x7fffffffu) > wf_inf_bits);
}
",
    ),
    (
        "wf_log(",
        r"fn wf_log(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) == 0u) { return ninf(); }
    if (b >= wf_inf_bits) { return select(bitcast<f32>(wf_nan_bits), x, b == wf_inf_bits); }
    return log(x);
}
",
    ),
    (
        "wf_sqrt(",
        r"fn wf_sqrt(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) == 0u || b == wf_inf_bits) { return x; }
    if (b > wf_inf_bits) { return bitcast<f32>(wf_nan_bits); }
    return sqrt(x);
}
",
    ),
    (
        "wf_div(",
        r"fn wf_div(a: f32, b: f32) -> f32 {
    if ((bitcast<u32>(b) & 0x7fffffffu) != 0u) { return a / b; }
    let m = bitcast<u32>(a) & 0x7fffffffu;
    if (m == 0u || m > wf_inf_bits) { return bitcast<f32>(wf_nan_bits); }
    return bitcast<f32>(((bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u) | wf_inf_bits);
}
",
    ),
    (
        "wf_rsqrt(",
        r"fn wf_rsqrt(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) == 0u) { return select(bitcast<f32>(wf_inf_bits), ninf(), b != 0u); }
    if (b == wf_inf_bits) { return 0.0; }
    if (b > wf_inf_bits) { return bitcast<f32>(wf_nan_bits); }
    return inverseSqrt(x);
}
",
    ),
    (
        "wf_pow_i(",
        r"fn wf_pow_i(a: i32, b: i32) -> i32 {
    if (b < 0) { return select(select(0, 1, a == 1), select(1, -1, (b & 1) != 0), a == -1); }
    var r = 1; var base = a; var e = b;
    loop { if (e == 0) { break; } if ((e & 1) != 0) { r = r * base; } base = base * base; e = e >> 1u; }
    return r;
}
",
    ),
    (
        "wf_f2i(",
        r"fn wf_f2i(x: f32) -> i32 {
    if ((bitcast<u32>(x) & 0x7fffffffu) > wf_inf_bits) { return 0; }
    if (x >= 2147483648.0) { return 2147483647; }
    return i32(max(x, -2147483648.0));
}
",
    ),
    (
        "wf_nonzero(",
        r"fn wf_nonzero(x: f32) -> i32 { return select(0, 1, (bitcast<u32>(x) & 0x7fffffffu) != 0u); }
",
    ),
    (
        "wf_floordiv_i(",
        r"fn wf_floordiv_i(a: i32, b: i32) -> i32 {
    if (b == 0) { return 0; }
    if (b == -1) { return 0 - a; }
    let q = a / b;
    return select(q, q - 1, a % b != 0 && ((a < 0) != (b < 0)));
}
",
    ),
    (
        "wf_mod_i(",
        r"fn wf_mod_i(a: i32, b: i32) -> i32 {
    if (b == 0 || b == -1) { return 0; }
    let r = a % b;
    return select(r, r + b, r != 0 && ((r < 0) != (b < 0)));
}
",
    ),
    (
        "wf_mod(",
        r"fn wf_mod(a: f32, b: f32) -> f32 {
    let ua = bitcast<u32>(a) & 0x7fffffffu;
    let ub = bitcast<u32>(b) & 0x7fffffffu;
    if (ua >= wf_inf_bits || ub > wf_inf_bits || ub == 0u) { return bitcast<f32>(wf_nan_bits); }
    var r = a;
    if (ub != wf_inf_bits && ua >= ub) {
        let eb = max(ub >> 23u, 1u);
        let mb = (ub & 0x7fffffu) | select(0u, 0x800000u, ub >= 0x800000u);
        var m = ((ua & 0x7fffffu) | select(0u, 0x800000u, ua >= 0x800000u)) % mb;
        var n = max(ua >> 23u, 1u) - eb;
        loop { if (n == 0u) { break; } let s = min(n, 8u); m = (m << s) % mb; n = n - s; }
        r = ldexp(f32(m), i32(eb) - 150);
        if (a < 0.0) { r = -r; }
    }
    if (r == 0.0) { return bitcast<f32>(bitcast<u32>(b) & 0x80000000u); }
    return select(r, r + b, (r < 0.0) != (b < 0.0));
}
",
    ),
];

/// A kernel's whole text. `main` uses `params` once whatever its body
/// reads: a specialised text may read no word (all written in), and a
/// pipeline's derived layout would then leave out the binding every launch
/// binds.
pub(super) fn shader(params: &[u32], decls: &str, workgroup: u32, body: &str) -> String {
    let helpers: String = HELPERS
        .iter()
        .filter(|(call, _)| body.contains(call) || decls.contains(call))
        .map(|(_, text)| *text)
        .collect();
    // A body that folds across a subgroup (`Fold::across_workgroup`) reads
    // its size, its lane, which it is and how many there are. Naga takes
    // subgroup operations where the device has the feature, and refuses
    // WGSL's `enable subgroups;` as not yet implemented: only native devices
    // ask for subgroups, so none is written (and the browser's build carries
    // no subgroup text: `Subgroups`).
    #[cfg(not(target_arch = "wasm32"))]
    let lanes = match body.contains("subgroup") {
        true => {
            ", @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) sg_lane: u32, \
             @builtin(subgroup_id) sg_id: u32, @builtin(num_subgroups) n_sg: u32"
        }
        false => "",
    };
    #[cfg(target_arch = "wasm32")]
    let lanes = "";
    format!(
        "{PRELUDE}{helpers}@group(0) @binding(0) var<uniform> params: array<vec4<u32>, {words}>;\n{decls}\n\
         fn param(i: u32) -> u32 {{ return params[i / 4u][i % 4u]; }}\n\n\
         @compute @workgroup_size({workgroup})\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, \
         @builtin(local_invocation_index) lid: u32{lanes}) {{\n\
         \x20   let wg = wid.x + wid.y * groups.x;\n\
         \x20   _ = params[0];\n{body}}}\n",
        words = params.len() / 4,
    )
}

/// Helpers every kernel may call. WGSL's own `pow` is undefined for a negative
/// base, a NaN or an infinity (SwiftShader gave pow(NaN, 2) = infinity), and
/// its `tanh` overflows to NaN on some drivers for large inputs; `wf_pow`
/// follows JS's `Math.pow` (TF.js's CPU backend: NaN for 1 to an infinite
/// power) and NumPy's for a negative base, `wf_tanh` NumPy's. WGSL's float
/// `%` is `a - b * trunc(a / b)`, wrong by multiples of `b` once the quotient
/// passes 2^24 (1e8 mod 3 gave 0): `wf_mod` takes C's `fmod` exactly, by
/// the integer remainder of the significands, then the divisor's sign, as
/// TF.js's CPU backend does in doubles. The integer ones follow TF.js
/// (`floorDiv` and `mod` round toward negative infinity) and never trap: a
/// division by zero gives 0, as TF.js's int32 result of an infinite
/// quotient does. NaN and infinity come from variables because WGSL
/// rejects non-finite constant expressions. A signed zero is chosen by its
/// bits: NVIDIA's compiler takes `0.0` and `-0.0` for the same constant,
/// and `select(0.0, -0.0, odd)` gave `pow(0, 2)` = -0 on an H100.
pub(super) const PRELUDE: &str = "\
var<private> wf_nan_bits: u32 = 0x7fc00000u;
var<private> wf_inf_bits: u32 = 0x7f800000u;
fn ninf() -> f32 { return -bitcast<f32>(wf_inf_bits); }
fn wf_tanh(x: f32) -> f32 { return select(tanh(clamp(x, -15.0, 15.0)), x, (bitcast<u32>(x) & 0x7fffffffu) > wf_inf_bits); }
fn wf_pow(a: f32, b: f32) -> f32 {
    let ua = bitcast<u32>(a) & 0x7fffffffu;
    let ub = bitcast<u32>(b) & 0x7fffffffu;
    if (ub == 0u) { return 1.0; }
    if (ua > wf_inf_bits || ub > wf_inf_bits) { return bitcast<f32>(wf_nan_bits); }
    if (ub == wf_inf_bits) {
        if (ua == 0x3f800000u) { return bitcast<f32>(wf_nan_bits); }
        return select(0.0, bitcast<f32>(wf_inf_bits), (ua > 0x3f800000u) == (b > 0.0));
    }
    let odd = fract(b) == 0.0 && fract(b * 0.5) != 0.0 && (bitcast<u32>(a) >> 31u) == 1u;
    if (ua == 0u || ua == wf_inf_bits) {
        let big = (ua == 0u) == (b < 0.0);
        return bitcast<f32>(select(0u, 0x80000000u, odd) | select(0u, wf_inf_bits, big));
    }
    if (a > 0.0) { return pow(a, b); }
    if (fract(b) != 0.0) { return bitcast<f32>(wf_nan_bits); }
    let m = pow(-a, b);
    return select(m, -m, odd);
}
";

/// Writes unary `op` of `x`, computed in `dtype` (an int's only unary ops
/// are those TF.js keeps ints for: neg, abs, square, relu, and `!` of a
/// bool; registration casts or refuses the rest).
pub(super) fn unary(out: &mut String, op: UnaryOp, dtype: DType, x: Value) -> std::fmt::Result {
    match op {
        UnaryOp::Neg => write!(out, "-({x})"),
        UnaryOp::Abs => write!(out, "abs({x})"),
        UnaryOp::Exp => write!(out, "wf_exp({x})"),
        UnaryOp::Log => write!(out, "wf_log({x})"),
        UnaryOp::Sqrt => write!(out, "wf_sqrt({x})"),
        UnaryOp::Rsqrt => write!(out, "wf_rsqrt({x})"),
        UnaryOp::Square => write!(out, "({x} * {x})"),
        UnaryOp::Relu if dtype == DType::Float32 => write!(out, "wf_max({x}, 0.0)"),
        UnaryOp::Relu => write!(out, "max({x}, 0)"),
        UnaryOp::Gelu => write!(
            out,
            "(0.5 * {x} * (1.0 + wf_tanh(0.7978845608 * ({x} + 0.044715 * {x} * {x} * {x}))))"
        ),
        UnaryOp::Sigmoid => write!(out, "wf_sigmoid({x})"),
        UnaryOp::Tanh => write!(out, "wf_tanh({x})"),
        UnaryOp::Sin => write!(out, "wf_trig({x}, 0)"),
        UnaryOp::Cos => write!(out, "wf_trig({x}, 1)"),
        UnaryOp::Tan => write!(out, "wf_div(wf_trig({x}, 0), wf_trig({x}, 1))"),
        UnaryOp::Floor => write!(out, "wf_floor({x})"),
        UnaryOp::LogicalNot => write!(out, "(1 ^ {x})"),
        UnaryOp::CheckNumerics => write!(out, "{x}"),
    }
}

/// Writes binary `op` of `a` and `b`, both of dtype `dtype` (a comparison
/// or logical op gives a bool, 0 or 1, whatever they are).
pub(super) fn binary(
    out: &mut String,
    op: BinaryOp,
    dtype: DType,
    a: Value,
    b: Value,
) -> std::fmt::Result {
    let int = dtype != DType::Float32;
    if op == BinaryOp::FloorDiv && !int {
        // The device's quotient, and the exact remainder's (`wf_floordiv`).
        return write!(
            out,
            "wf_floordiv(wf_div({a}, {b}), wf_div(({a}) - wf_mod({a}, {b}), {b}))"
        );
    }
    let (open, sym, close) = match op {
        BinaryOp::Add => ("(", " + ", ")"),
        BinaryOp::Sub => ("(", " - ", ")"),
        BinaryOp::Mul => ("(", " * ", ")"),
        // An int's `div` is registered as `floorDiv` (TF.js's rule). A
        // float's quotient by zero is made from the bits (`wf_div`): WGSL
        // lets a compiler that folds a zero divisor (`y - y`) give 0.
        BinaryOp::Div => ("wf_div(", ", ", ")"),
        BinaryOp::Pow if int => ("wf_pow_i(", ", ", ")"),
        BinaryOp::Pow => ("wf_pow(", ", ", ")"),
        BinaryOp::Maximum if int => ("max(", ", ", ")"),
        BinaryOp::Minimum if int => ("min(", ", ", ")"),
        BinaryOp::Maximum => ("wf_max(", ", ", ")"),
        BinaryOp::Minimum => ("wf_min(", ", ", ")"),
        BinaryOp::Equal => ("select(0, 1, ", " == ", ")"),
        BinaryOp::Greater => ("select(0, 1, ", " > ", ")"),
        BinaryOp::GreaterEqual => ("select(0, 1, ", " >= ", ")"),
        BinaryOp::Less => ("select(0, 1, ", " < ", ")"),
        BinaryOp::LessEqual => ("select(0, 1, ", " <= ", ")"),
        BinaryOp::Mod if int => ("wf_mod_i(", ", ", ")"),
        BinaryOp::Mod => ("wf_mod(", ", ", ")"),
        // A float's is written above.
        BinaryOp::FloorDiv => ("wf_floordiv_i(", ", ", ")"),
        BinaryOp::LogicalAnd => ("(", " & ", ")"),
        BinaryOp::LogicalOr => ("(", " | ", ")"),
        BinaryOp::LogicalXor => ("(", " ^ ", ")"),
        BinaryOp::BitwiseAnd => ("(", " & ", ")"),
    };
    write!(out, "{open}{a}{sym}{b}{close}")
}
