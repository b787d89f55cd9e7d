//! The GPU against the CPU reference (tests/common/reference.rs): random op
//! graphs from seeds (proptest), then each op family with hand-picked shapes,
//! and edge sizes (empty tensors, scalars, a 2^25-element tensor).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::graphs::{
    ARITH, EXACT, Rng, TRANSCENDENTAL, Tol, Tracked, check_graph, check_graph_with_faults, compare,
    describe_graph,
};
use common::reference::{Ref, broadcast_shapes, broadcast_source, numel, unravel};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use webfusion::{Device, DeviceOptions, FailureKind, Tensor};

fn device_with(host_max_elements: usize) -> Device {
    let options = DeviceOptions {
        host_max_elements,
        ..DeviceOptions::default()
    };
    pollster::block_on(Device::request(options))
        .expect("a native GPU adapter (install mesa-vulkan-drivers)")
}

/// Each check runs twice: on a device that runs every block as a kernel,
/// and on one with the default `host_max_elements`, which runs the small
/// elementwise blocks of these graphs on the host (uploading what a kernel
/// then reads). Both must match the reference.
fn devices() -> [Device; 2] {
    [
        device_with(0),
        device_with(DeviceOptions::default().host_max_elements),
    ]
}

fn read(t: &Tensor) -> Vec<f32> {
    pollster::block_on(t.to_vec()).expect("the tensor reads")
}

/// Deterministic values in `[lo, hi)`.
fn values(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| rng.uniform(lo, hi)).collect()
}

/// The same input on the GPU and on the reference.
fn input(gpu: &Device, shape: &[usize], seed: u64) -> (Tensor, Tracked) {
    input_in(gpu, shape, seed, -2.0, 2.0)
}

fn input_in(gpu: &Device, shape: &[usize], seed: u64, lo: f32, hi: f32) -> (Tensor, Tracked) {
    let v = values(numel(shape), seed, lo, hi);
    let t = gpu.tensor(&v, Some(shape)).unwrap();
    (t, Tracked::exact(Ref::new(v, shape)))
}

/// The GPU tensor has the reference's shape and its values within the
/// tracked bound.
#[track_caller]
fn check(what: &str, t: &Tensor, expected: &Tracked) {
    assert_eq!(t.shape(), expected.shape(), "{what}: shape");
    if let Err(e) = compare(&read(t), expected) {
        panic!("{what}: {e}");
    }
}

/// One op on exact inputs: the op's own rounding `tol`.
#[track_caller]
fn check_op(what: &str, t: &Tensor, expected: Ref, tol: Tol) {
    check(what, t, &Tracked::rounded(expected, tol));
}

fn run_seeds(gpu: &Device, seeds: impl IntoIterator<Item = u64>) {
    for seed in seeds {
        if let Err(e) = pollster::block_on(check_graph(gpu, seed)) {
            panic!("{e}");
        }
    }
}

// ---------------------------------------------------------------------------
// Random graphs

#[test]
fn random_op_graphs_match_the_cpu_reference() {
    for gpu in devices() {
        let mut config = Config {
            failure_persistence: None,
            // A neighbouring seed is an unrelated graph: shrinking would only
            // hide the seed that failed.
            max_shrink_iters: 0,
            ..Config::default()
        };
        if std::env::var("PROPTEST_CASES").is_err() {
            config.cases = 64;
        }
        let mut runner = TestRunner::new(config);
        let result = runner.run(&any::<u64>(), |seed| {
            pollster::block_on(check_graph(&gpu, seed)).map_err(TestCaseError::fail)
        });
        if let Err(e) = result {
            panic!("{e}");
        }
    }
}

/// The fixed seeds' graphs hold every family of op the generator makes, so
/// the graphs above (and the fault-injected ones, built the same way) test
/// them: a family the generator stopped making would pass unnoticed.
#[test]
fn the_fixed_seeds_graphs_hold_every_family_of_op() {
    let gpu = &devices()[1];
    let described: String = (0..48)
        .map(|seed| pollster::block_on(describe_graph(gpu, seed)))
        .collect();
    for family in [
        "matmul(",
        "conv2d(",
        "depthwiseConv2d(",
        "maxPool(",
        "avgPool(",
        "cumsum(",
        "gather(",
        "one_hot(",
        "sum(",
        "softmax(",
        "where_(",
    ] {
        assert!(
            described.contains(family),
            "no {family}..) in the graphs of seeds 0..48"
        );
    }
}

#[test]
fn random_op_graphs_for_fixed_seeds_match_the_cpu_reference() {
    for gpu in devices() {
        run_seeds(&gpu, 0..48);
    }
}

/// The same graphs on devices that check numerics: every kernel kind binds
/// its flags and checks what it computes, and graphs whose values are all
/// finite must read exactly as without the checks (no false `non-finite`).
#[test]
fn random_op_graphs_read_the_same_with_the_numerics_checks_on() {
    for host_max_elements in [0, DeviceOptions::default().host_max_elements] {
        let options = DeviceOptions {
            host_max_elements,
            check_numerics: true,
            ..DeviceOptions::default()
        };
        let gpu = pollster::block_on(Device::request(options)).expect("a native GPU adapter");
        run_seeds(&gpu, 0..48);
    }
}

/// Graphs with an injected fault (and, in some, a branch past the buffer
/// limits): every checked tensor reads its reference value unless it depends
/// on a failed op, and then rejects with a report of each failure it depends
/// on; afterwards the device holds no failure and no more memory than
/// before. Runs every seed and names all that failed. `FAULT_SEED=n` (or
/// `a..b`) runs those seeds only.
#[test]
fn random_graphs_with_injected_faults_fail_exactly_the_dependents_of_the_failed_op() {
    let seeds = seeds_from_env("FAULT_SEED", 0..256);
    let (mut failing, mut injected, mut refused, mut reads, mut rejected) = (0, 0, 0, 0, 0);
    let mut failed = Vec::new();
    let host_max = DeviceOptions::default().host_max_elements;
    // Every seed on a device of kernels only, then on one that runs small
    // blocks on the host: failures there come only from kernels, and the
    // host values a failing kernel reads must upload and read alike.
    let runs = [0, host_max]
        .into_iter()
        .flat_map(|h| seeds.iter().map(move |&s| (h, s)));
    let mut gpu = device_with(0);
    let (mut on, mut on_host) = (0, 0);
    for (host_max_elements, seed) in runs {
        if host_max_elements != on {
            (gpu, on) = (device_with(host_max_elements), host_max_elements);
        }
        let host_before = gpu.stats().host_ops;
        match pollster::block_on(check_graph_with_faults(&gpu, seed)) {
            Ok(run) => {
                on_host += gpu.stats().host_ops - host_before;
                failing += usize::from(!run.injected.is_empty() || run.refused);
                injected += run.injected.len();
                refused += usize::from(run.refused);
                reads += run.reads;
                rejected += run.rejected;
            }
            Err(e) => {
                failed.push((seed, format!("(hostMaxElements {on}) {e}")));
                // A fault that did not fire would go off in the next seed.
                gpu = device_with(on);
            }
        }
    }
    eprintln!(
        "{} runs passed ({failing} with a failure: {injected} injected faults, {refused} \
         refused allocations); {reads} reads checked, {rejected} rejected; {on_host} ops ran on \
         the host; {} run(s) failed",
        2 * seeds.len() - failed.len(),
        failed.len()
    );
    if let Some((_, first)) = failed.first() {
        let each: Vec<&str> = failed
            .iter()
            .map(|(_, e)| e.lines().next().unwrap_or_default())
            .collect();
        panic!(
            "{} seed(s) failed:\n  {}\nthe first in full:\n{first}",
            failed.len(),
            each.join("\n  ")
        );
    }
    assert!(on_host > 0, "no op of any graph ran on the host");
    assert!(
        failing >= 2 * seeds.len() * 9 / 10,
        "only {failing} of {} runs made something fail",
        2 * seeds.len()
    );
    assert_eq!(webfusion::panics_observed(), 0, "the library panicked");
}

// ---------------------------------------------------------------------------
// Random graphs that overflow, against the reference's finiteness

/// A value whose bound keeps it below this in magnitude is finite on any
/// device (6% below f32's largest, 3.4e38): its rounding cannot reach
/// infinity. The margins are narrow because every value carries a bound
/// on what a device may compute (the random graphs' tolerances, carried
/// through each op): they cover only what a bound may miss, and a sum or a
/// difference of two finite values overflows only near f32's largest.
const SURELY_FINITE: f64 = 3.2e38;
/// A true value beyond this in magnitude is infinite in f32 however it is
/// rounded (6% above f32's largest).
const SURELY_OVERFLOWS: f64 = 3.6e38;
/// Nearer 0 than this and not exactly 0, a value may be flushed to 0 (or
/// keep a sign the reference does not): a pole (`log`, `rsqrt`, a divisor,
/// a negative power) must not meet it.
const NEAR_ZERO: f64 = 1e-30;
/// What a device may lose by flushing a subnormal result to 0.
const FLUSH: f64 = 1.2e-37;

/// An op of the overflowing graphs; a scalar operand is held in it.
#[derive(Clone, Debug, PartialEq)]
enum Ov {
    Upload(Vec<f32>),
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Square,
    Tanh,
    Sigmoid,
    Relu,
    Neg,
    Pow(f32),
    AddScalar(f32),
    SubScalar(f32),
    MulScalar(f32),
    DivScalar(f32),
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
    Matmul,
    /// `sum(-1, keep_dims)`.
    SumRows,
    /// `sum()` of every value.
    SumAll,
}

/// What an operand at or near 0 does to an op.
#[derive(Clone, Copy, PartialEq)]
enum Edge {
    None,
    /// NaN below 0, finite at 0 (`sqrt`, `pow(x, 0.5)`).
    NanBelow,
    /// Infinite at 0, NaN below (`log`, `rsqrt`).
    PoleNanBelow,
    /// Infinite at 0 (a divisor, a negative power).
    Pole,
}

impl Ov {
    /// The name a failure's root gives it.
    fn name(&self) -> &'static str {
        match self {
            Ov::Upload(_) => "upload",
            Ov::Exp => "exp",
            Ov::Log => "log",
            Ov::Sqrt => "sqrt",
            Ov::Rsqrt => "rsqrt",
            Ov::Square => "square",
            Ov::Tanh => "tanh",
            Ov::Sigmoid => "sigmoid",
            Ov::Relu => "relu",
            Ov::Neg => "neg",
            Ov::Pow(_) => "pow",
            Ov::AddScalar(_) | Ov::Add => "add",
            Ov::MulScalar(_) | Ov::Mul => "mul",
            Ov::DivScalar(_) | Ov::Div => "div",
            Ov::SubScalar(_) | Ov::Sub => "sub",
            Ov::Maximum => "maximum",
            Ov::Matmul => "matmul",
            Ov::SumRows | Ov::SumAll => "sum",
        }
    }

    /// The op in f64 of its tensor operands (`b` unused by one of one).
    fn f(&self, a: f64, b: f64) -> f64 {
        match *self {
            Ov::Exp => a.exp(),
            Ov::Log => a.ln(),
            Ov::Sqrt => a.sqrt(),
            Ov::Rsqrt => 1.0 / a.sqrt(),
            Ov::Square => a * a,
            Ov::Tanh => a.tanh(),
            Ov::Sigmoid => 1.0 / (1.0 + (-a).exp()),
            Ov::Relu => a.max(0.0),
            Ov::Neg => -a,
            Ov::Pow(p) => a.powf(p as f64),
            Ov::AddScalar(s) => a + s as f64,
            Ov::SubScalar(s) => a - s as f64,
            Ov::MulScalar(s) => a * s as f64,
            Ov::DivScalar(s) => a / s as f64,
            Ov::Add => a + b,
            Ov::Sub => a - b,
            Ov::Mul => a * b,
            Ov::Div => a / b,
            Ov::Maximum => a.max(b),
            _ => unreachable!("{self:?} is not elementwise"),
        }
    }

    /// Its own rounding, relative and absolute (the tolerances of the
    /// random graphs; `FLUSH` where an op's error is relative); 0 for an
    /// exact op.
    fn rounding(&self) -> (f64, f64) {
        match *self {
            Ov::Relu | Ov::Neg | Ov::Maximum => (0.0, 0.0),
            Ov::MulScalar(s) if s == 0.0 || s.abs() == 1.0 => (0.0, 0.0),
            Ov::Exp | Ov::Sqrt | Ov::Rsqrt => (1e-4, FLUSH),
            Ov::Log | Ov::Pow(_) | Ov::Tanh | Ov::Sigmoid => (1e-4, 1e-5),
            _ => (1e-5, FLUSH),
        }
    }

    /// Whether a 0 it computes from exact operands is exactly 0 on any
    /// device (correctly rounded arithmetic).
    fn zero_is_exact(&self) -> bool {
        matches!(
            self,
            Ov::Square
                | Ov::AddScalar(_)
                | Ov::SubScalar(_)
                | Ov::MulScalar(_)
                | Ov::DivScalar(_)
                | Ov::Add
                | Ov::Sub
                | Ov::Mul
                | Ov::Div
        )
    }

    /// What 0 does to it, and which operand it looks at.
    fn edge(&self) -> (Edge, usize) {
        match *self {
            Ov::Sqrt => (Edge::NanBelow, 0),
            Ov::Pow(0.5) => (Edge::NanBelow, 0),
            Ov::Log | Ov::Rsqrt => (Edge::PoleNanBelow, 0),
            Ov::Pow(p) if p < 0.0 => (Edge::Pole, 0),
            Ov::Div => (Edge::Pole, 1),
            _ => (Edge::None, 0),
        }
    }

    /// Registers it on `ins`, as user code does.
    fn register(&self, gpu: &Device, shape: &[usize], ins: &[&Tensor]) -> Tensor {
        let x = || ins[0];
        match self {
            Ov::Upload(values) => gpu.tensor(values, Some(shape)),
            Ov::Exp => x().exp(),
            Ov::Log => x().log(),
            Ov::Sqrt => x().sqrt(),
            Ov::Rsqrt => x().rsqrt(),
            Ov::Square => x().square(),
            Ov::Tanh => x().tanh(),
            Ov::Sigmoid => x().sigmoid(),
            Ov::Relu => x().relu(),
            Ov::Neg => x().neg(),
            Ov::Pow(p) => x().pow(*p),
            Ov::AddScalar(s) => x().add(*s),
            Ov::SubScalar(s) => x().sub(*s),
            Ov::MulScalar(s) => x().mul(*s),
            Ov::DivScalar(s) => x().div(*s),
            Ov::Add => x().add(ins[1]),
            Ov::Sub => x().sub(ins[1]),
            Ov::Mul => x().mul(ins[1]),
            Ov::Div => x().div(ins[1]),
            Ov::Maximum => x().maximum(ins[1]),
            Ov::Matmul => x().matmul(ins[1]),
            Ov::SumRows => x().sum(Some(&[-1]), true),
            Ov::SumAll => x().sum(None, false),
        }
        .unwrap_or_else(|e| panic!("{self:?} registers: {e}"))
    }
}

/// One element of an op's reference value.
enum Elem {
    /// Finite on any device: the reference value and how far a device's
    /// may be from it.
    Finite(f64, f64),
    /// Made non-finite from finite operands, by a wide margin.
    NonFinite(f64),
    /// An operand is already non-finite here.
    Poisoned(f64),
    /// Too near an edge (f32's largest, a pole) to say: the generator
    /// does not make it.
    Ambiguous,
}

/// An elementwise op at one position, its operands given as (reference
/// value, bound): the values a device may compute are those of `op` over
/// the box of its operands' bounds (every op here is monotone in each
/// operand there, or convex), plus its own rounding.
fn overflow_elem(op: &Ov, a: (f64, f64), b: (f64, f64)) -> Elem {
    let y = op.f(a.0, b.0);
    let val = y as f32 as f64;
    if !a.0.is_finite() || !b.0.is_finite() {
        return Elem::Poisoned(val);
    }
    if *op == Ov::DivScalar(0.0) {
        return Elem::NonFinite(val);
    }
    let (edge, which) = op.edge();
    let (v, e) = if which == 0 { a } else { b };
    let (lo, hi) = (v - e, v + e);
    let zero = v == 0.0 && e == 0.0;
    match edge {
        Edge::None => {}
        Edge::NanBelow if hi < -NEAR_ZERO => return Elem::NonFinite(val),
        Edge::NanBelow if !(zero || lo >= 0.0) => return Elem::Ambiguous,
        Edge::PoleNanBelow if zero || hi < -NEAR_ZERO => return Elem::NonFinite(val),
        Edge::PoleNanBelow if lo <= NEAR_ZERO => return Elem::Ambiguous,
        Edge::Pole if zero => return Elem::NonFinite(val),
        Edge::Pole if !(lo > NEAR_ZERO || hi < -NEAR_ZERO) => return Elem::Ambiguous,
        _ => {}
    }
    let mut corners = Vec::with_capacity(4);
    for x in [a.0 - a.1, a.0 + a.1] {
        for z in [b.0 - b.1, b.0 + b.1] {
            corners.push(op.f(x, z));
        }
    }
    if corners.iter().any(|c| c.is_nan()) {
        return Elem::Ambiguous;
    }
    let mut low = corners.iter().copied().fold(f64::INFINITY, f64::min);
    let high = corners.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let even = matches!(op, Ov::Square) || *op == Ov::Pow(2.0);
    if even && a.0 - a.1 < 0.0 && a.0 + a.1 > 0.0 {
        low = 0.0;
    }
    if low > SURELY_OVERFLOWS || high < -SURELY_OVERFLOWS {
        return Elem::NonFinite(val);
    }
    let (rel, abs) = op.rounding();
    if low.abs().max(high.abs()) * (1.0 + rel) + abs >= SURELY_FINITE {
        return Elem::Ambiguous;
    }
    let err = if a.1 == 0.0 && b.1 == 0.0 && y == 0.0 && op.zero_is_exact() {
        0.0
    } else {
        let spread = corners.iter().fold(0.0f64, |m, c| m.max((c - val).abs()));
        spread + rel * val.abs() + abs
    };
    Elem::Finite(val, err)
}

/// A sum of `terms` (each a reference value and its bound), in any order
/// in f32: finite if the magnitudes add up below f32's largest, infinite
/// (or NaN) if the sum is beyond it with no cancellation that rounding
/// could undo.
fn overflow_sum(terms: &[(f64, f64)]) -> Elem {
    let k = terms.len() as f64;
    let sum: f64 = terms.iter().map(|t| t.0).sum();
    let magnitude: f64 = terms.iter().map(|t| t.0.abs()).sum();
    let bound: f64 = terms.iter().map(|t| t.1).sum();
    let val = sum as f32 as f64;
    let rounding = k * f64::powi(2.0, -23) * (magnitude + bound) + k * FLUSH;
    if magnitude + bound + rounding < SURELY_FINITE {
        Elem::Finite(val, bound + rounding + (val - sum).abs())
    } else if sum.abs() - bound - rounding > SURELY_OVERFLOWS {
        Elem::NonFinite(val)
    } else {
        Elem::Ambiguous
    }
}

/// A tensor of an overflowing graph, with its reference.
struct OvNode {
    op: Ov,
    inputs: Vec<usize>,
    shape: Vec<usize>,
    /// The reference value (each op rounded to f32) and, where finite, how
    /// far a device's may be from it.
    val: Vec<f64>,
    err: Vec<f64>,
    /// The first position where the op made a non-finite value from
    /// finite operands: where a check of it fails.
    first_bad: Option<usize>,
    /// It made a non-finite value and none of its inputs depends on one:
    /// a root every tensor computed from it must report.
    root: bool,
    /// It depends on a root (or is one): its read must reject.
    tainted: bool,
}

impl OvNode {
    /// Where its check fails, as a failure's message writes it.
    fn bad_at(&self) -> Option<String> {
        self.first_bad
            .map(|i| format!("{:?}", unravel(i, &self.shape)))
    }
}

/// `op` on `ins`: the reference node, or `None` if some element is too near
/// an edge to say what a device makes of it.
fn overflow_node(op: Ov, inputs: Vec<usize>, ins: &[&OvNode]) -> Option<OvNode> {
    let elems: Vec<Elem>;
    let shape: Vec<usize>;
    let at = |n: &OvNode, i: usize| (n.val[i], n.err[i]);
    match &op {
        Ov::Upload(_) => unreachable!("uploads are made by overflow_upload"),
        Ov::Matmul => {
            let (a, b) = (ins[0], ins[1]);
            let (m, k, n) = (a.shape[0], a.shape[1], b.shape[1]);
            shape = vec![m, n];
            elems = (0..m * n)
                .map(|o| {
                    let (i, j) = (o / n, o % n);
                    let pairs: Vec<_> = (0..k)
                        .map(|p| (at(a, i * k + p), at(b, p * n + j)))
                        .collect();
                    if pairs
                        .iter()
                        .any(|((x, _), (y, _))| !x.is_finite() || !y.is_finite())
                    {
                        let poisoned: f64 = pairs.iter().map(|((x, _), (y, _))| x * y).sum();
                        return Elem::Poisoned(poisoned as f32 as f64);
                    }
                    let terms: Vec<_> = pairs
                        .iter()
                        .map(|&((x, ex), (y, ey))| (x * y, x.abs() * ey + ex * y.abs() + ex * ey))
                        .collect();
                    overflow_sum(&terms)
                })
                .collect();
        }
        Ov::SumRows | Ov::SumAll => {
            let x = ins[0];
            let lines: Vec<Vec<usize>> = if op == Ov::SumAll {
                shape = vec![];
                vec![(0..x.val.len()).collect()]
            } else {
                let (r, c) = (x.shape[0], x.shape[1]);
                shape = vec![r, 1];
                (0..r).map(|i| (i * c..(i + 1) * c).collect()).collect()
            };
            elems = lines
                .iter()
                .map(|line| {
                    let terms: Vec<_> = line.iter().map(|&i| at(x, i)).collect();
                    if terms.iter().any(|t| !t.0.is_finite()) {
                        let poisoned: f64 = terms.iter().map(|t| t.0).sum();
                        return Elem::Poisoned(poisoned as f32 as f64);
                    }
                    overflow_sum(&terms)
                })
                .collect();
        }
        _ => {
            let a = ins[0];
            shape = match ins.get(1) {
                Some(b) => broadcast_shapes(&a.shape, &b.shape),
                None => a.shape.clone(),
            };
            elems = (0..numel(&shape))
                .map(|i| {
                    let idx = unravel(i, &shape);
                    let x = at(a, broadcast_source(&idx, &a.shape));
                    let y = ins
                        .get(1)
                        .map_or((0.0, 0.0), |b| at(b, broadcast_source(&idx, &b.shape)));
                    overflow_elem(&op, x, y)
                })
                .collect();
        }
    }
    let mut val = Vec::with_capacity(elems.len());
    let mut err = Vec::with_capacity(elems.len());
    let mut first_bad = None;
    for (i, e) in elems.into_iter().enumerate() {
        let (v, bound) = match e {
            Elem::Ambiguous => return None,
            Elem::Finite(v, bound) => (v, bound),
            Elem::NonFinite(v) => {
                assert!(
                    !v.is_finite(),
                    "{op:?}: a sure overflow is {v} in the reference"
                );
                first_bad.get_or_insert(i);
                (v, f64::INFINITY)
            }
            Elem::Poisoned(v) => (v, f64::INFINITY),
        };
        val.push(v);
        err.push(bound);
    }
    let inherited = ins.iter().any(|n| n.tainted);
    Some(OvNode {
        root: first_bad.is_some() && !inherited,
        tainted: first_bad.is_some() || inherited,
        op,
        inputs,
        shape,
        val,
        err,
        first_bad,
    })
}

/// Upload values spanning wide ranges: some tensors near 1 only, others
/// mixing values near 1, up to a few hundred (`exp` overflows), up to 1e20
/// (products overflow), tiny positive ones (their reciprocals and
/// negative powers overflow), near f32's largest (sums overflow) and
/// zeros; any of them negative.
fn overflow_upload(rng: &mut Rng, shape: &[usize]) -> OvNode {
    const TIERS: usize = 6;
    let tiers: Vec<usize> = match rng.below(21) {
        0..=5 => vec![0],
        6..=8 => vec![0, 0, TIERS - 1],
        9..=11 => vec![4],
        _ => (0..rng.range(1, 3)).map(|_| rng.below(TIERS)).collect(),
    };
    // All of one sign, or either: sums and differences of values near
    // f32's largest overflow without cancelling.
    let negative = rng.pick(&[0.0, 0.35, 0.35, 1.0]);
    let values: Vec<f32> = (0..numel(shape))
        .map(|_| {
            let sign = if rng.chance(negative) { -1.0 } else { 1.0 };
            match rng.pick(&tiers) {
                0 => sign * rng.uniform(0.5, 2.0),
                1 => sign * rng.uniform(5.0, 300.0),
                2 => sign * 10f32.powf(rng.uniform(15.0, 20.0)),
                3 => 10f32.powf(rng.uniform(-20.0, -15.0)),
                4 => sign * rng.uniform(1.9e38, 3.1e38),
                _ => 0.0,
            }
        })
        .collect();
    OvNode {
        val: values.iter().map(|&v| v as f64).collect(),
        err: vec![0.0; values.len()],
        op: Ov::Upload(values),
        inputs: vec![],
        shape: shape.to_vec(),
        first_bad: None,
        root: false,
        tainted: false,
    }
}

/// A random graph whose values overflow: uploads, then float ops each kept
/// in a variable, some that can make a non-finite value from finite
/// operands, some that cannot; reads while it is built.
struct OvGraph {
    seed: u64,
    nodes: Vec<OvNode>,
    /// After registering node `i`, read these.
    reads_after: Vec<Vec<usize>>,
    /// Each node's ancestors, itself included.
    ancestors: Vec<Vec<usize>>,
}

impl OvGraph {
    fn describe(&self, i: usize) -> String {
        let n = &self.nodes[i];
        let args: Vec<String> = n.inputs.iter().map(|j| format!("t{j}")).collect();
        let op = match &n.op {
            Ov::Upload(values) => format!("upload {values:?}"),
            Ov::Pow(s)
            | Ov::AddScalar(s)
            | Ov::SubScalar(s)
            | Ov::MulScalar(s)
            | Ov::DivScalar(s) => {
                format!("{}({}, {s:e})", n.op.name(), args.join(", "))
            }
            Ov::SumRows => format!("sum({}, -1, keep_dims)", args.join(", ")),
            op => format!("{}({})", op.name(), args.join(", ")),
        };
        let what = match (n.root, n.tainted) {
            (true, _) => format!("root: non-finite first at {}", n.bad_at().unwrap()),
            (false, true) => match n.bad_at() {
                Some(at) => format!("tainted, and non-finite from finite operands first at {at}"),
                None => "tainted".to_string(),
            },
            _ => "finite".to_string(),
        };
        format!("t{i} = {op} {:?}  ({what})", n.shape)
    }

    fn describe_all(&self) -> String {
        (0..self.nodes.len())
            .map(|i| format!("\n  {}", self.describe(i)))
            .collect()
    }
}

fn overflow_graph(seed: u64) -> OvGraph {
    let mut rng = Rng::new(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x0f10_0f10);
    let n = rng.range(2, 4);
    let square = vec![n, n];
    let upload_shape = |rng: &mut Rng| match rng.below(6) {
        0 => vec![1, n],
        1 => vec![n, 1],
        _ => square.clone(),
    };
    let mut nodes: Vec<OvNode> = Vec::new();
    for _ in 0..rng.range(2, 4) {
        let shape = upload_shape(&mut rng);
        nodes.push(overflow_upload(&mut rng, &shape));
    }
    let mut reads_after: Vec<Vec<usize>> = vec![vec![]; nodes.len()];
    let target = rng.range(8, 16);
    let (mut made, mut tries) = (0, 0);
    while made < target && tries < 500 {
        tries += 1;
        if rng.chance(0.06) {
            let shape = upload_shape(&mut rng);
            nodes.push(overflow_upload(&mut rng, &shape));
            reads_after.push(vec![]);
            continue;
        }
        // Recent tensors more often (chains as well as a wide graph), and
        // finite ones often enough that roots are made all along.
        let finite: Vec<usize> = (0..nodes.len()).filter(|&i| !nodes[i].tainted).collect();
        let pick = |rng: &mut Rng| {
            let len = nodes.len();
            match rng.below(10) {
                0..=4 => len - 1 - rng.below(len.min(3)),
                5..=7 => rng.pick(&finite),
                _ => rng.below(len),
            }
        };
        let a = pick(&mut rng);
        let op = match rng.below(32) {
            0..=1 => Ov::Exp,
            2..=3 => Ov::Log,
            4 => Ov::Sqrt,
            5 => Ov::Rsqrt,
            6..=7 => Ov::Square,
            8..=9 => Ov::Pow(rng.pick(&[2.0, 3.0, 0.5, -1.0, -2.0])),
            10 => {
                let s = rng.pick(&[1.5, -2.5, 2.5e38, -2.5e38]);
                if rng.chance(0.5) {
                    Ov::AddScalar(s)
                } else {
                    Ov::SubScalar(s)
                }
            }
            11 => Ov::MulScalar(rng.pick(&[3.0, -4.0, 1e20])),
            12 => Ov::DivScalar(rng.pick(&[3.0, -0.5, 1e-20, 0.0])),
            13..=14 => Ov::Add,
            15..=16 => Ov::Sub,
            17..=18 => Ov::Mul,
            19..=20 => Ov::Div,
            21..=23 => Ov::Matmul,
            24..=25 => {
                if rng.chance(0.5) {
                    Ov::SumRows
                } else {
                    Ov::SumAll
                }
            }
            // Ops that cannot make a non-finite value from finite ones.
            26 => Ov::Tanh,
            27 => Ov::Sigmoid,
            28 => Ov::Relu,
            29 => {
                if rng.chance(0.5) {
                    Ov::Neg
                } else {
                    Ov::Maximum
                }
            }
            _ => Ov::MulScalar(rng.pick(&[0.5, -0.75, 0.0, 1.0, -1.0, 1e-10])),
        };
        let inputs = match op {
            // The same tensor twice at times: `a + a` doubles, `a - a`
            // is exactly 0 and `a / a` divides 0 by 0 where `a` is 0.
            Ov::Add | Ov::Sub | Ov::Mul | Ov::Div | Ov::Maximum if rng.chance(0.25) => {
                vec![a, a]
            }
            Ov::Add | Ov::Sub | Ov::Mul | Ov::Div | Ov::Maximum => vec![a, pick(&mut rng)],
            Ov::Matmul => {
                let k = nodes[a].shape.get(1).copied();
                let fits: Vec<usize> = (0..nodes.len())
                    .filter(|&j| nodes[j].shape.len() == 2 && Some(nodes[j].shape[0]) == k)
                    .collect();
                if nodes[a].shape.len() != 2 || fits.is_empty() {
                    continue;
                }
                vec![a, rng.pick(&fits)]
            }
            Ov::SumRows if nodes[a].shape.len() != 2 => continue,
            Ov::SumAll if nodes[a].shape.is_empty() => continue,
            _ => vec![a],
        };
        let ins: Vec<&OvNode> = inputs.iter().map(|&j| &nodes[j]).collect();
        let Some(node) = overflow_node(op, inputs.clone(), &ins) else {
            continue;
        };
        nodes.push(node);
        made += 1;
        let mut reads = vec![];
        if rng.chance(0.12) {
            reads.push(rng.below(nodes.len()));
        }
        reads_after.push(reads);
    }
    let mut ancestors: Vec<Vec<usize>> = Vec::with_capacity(nodes.len());
    for (i, node) in nodes.iter().enumerate() {
        let mut mine: Vec<usize> = node
            .inputs
            .iter()
            .flat_map(|&j| ancestors[j].iter().copied())
            .chain([i])
            .collect();
        mine.sort_unstable();
        mine.dedup();
        ancestors.push(mine);
    }
    OvGraph {
        seed,
        nodes,
        reads_after,
        ancestors,
    }
}

/// Reads that matched and reads that rejected as they should.
#[derive(Default)]
struct OvTally {
    matched: usize,
    rejected: usize,
}

/// Where a `non-finite` failure's message says its op's check failed
/// (`... at [1, 0] of its ...`).
fn failed_at(message: &str) -> Option<&str> {
    let start = message.find(" at [")? + 4;
    let end = start + message[start..].find(']')? + 1;
    Some(&message[start..end])
}

/// Reads `t`, node `i` of `graph`: finite in the reference with all it
/// depends on, it reads within the bound; depending on a root, it rejects
/// with `non-finite` failures only, each rooted where the reference made a
/// non-finite value from finite operands.
fn check_overflow_read(
    graph: &OvGraph,
    i: usize,
    t: &Tensor,
    tally: &mut OvTally,
) -> Result<(), String> {
    let node = &graph.nodes[i];
    let what = graph.describe(i);
    if t.shape() != node.shape.as_slice() {
        return Err(format!("{what}: shape {:?}", t.shape()));
    }
    let roots: Vec<usize> = graph.ancestors[i]
        .iter()
        .copied()
        .filter(|&j| graph.nodes[j].root)
        .collect();
    match (pollster::block_on(t.to_vec()), node.tainted) {
        (Ok(got), false) => {
            for (k, &g) in got.iter().enumerate() {
                let (v, e, g) = (node.val[k], node.err[k], g as f64);
                if !g.is_finite() || (g - v).abs() > e * 1.0001 {
                    return Err(format!(
                        "{what}: read {g:e} at {:?}, the reference {v:e} (within {e:e}); \
                         read {got:?}",
                        unravel(k, &node.shape)
                    ));
                }
            }
            tally.matched += 1;
            Ok(())
        }
        (Ok(got), true) => Err(format!(
            "{what}: read {got:?}, but it depends on {}, where the reference made a \
             non-finite value from finite operands: its read must reject",
            roots
                .iter()
                .map(|r| format!("t{r}"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        (Err(error), false) => Err(format!(
            "{what}: rejected, though the reference finds it and all it depends on finite:\n{error}"
        )),
        (Err(error), true) => {
            let key = |j: usize| {
                let n = &graph.nodes[j];
                (n.op.name().to_string(), n.bad_at().unwrap_or_default())
            };
            // Where a check may fail: an op that made a non-finite value
            // from finite operands (a root, or one below a root whose
            // other values it computed in the same kernel).
            let may: Vec<(String, String)> = graph.ancestors[i]
                .iter()
                .copied()
                .filter(|&j| graph.nodes[j].first_bad.is_some())
                .map(key)
                .collect();
            let mut got = Vec::new();
            for report in &error.failures {
                let root = &report.root;
                if root.kind != FailureKind::NonFinite {
                    return Err(format!(
                        "{what}: a root of kind {}:\n{error}",
                        root.kind.name()
                    ));
                }
                let at = failed_at(&root.message)
                    .unwrap_or("(no position)")
                    .to_string();
                let k = (root.op.clone(), at);
                if !may.contains(&k) {
                    return Err(format!(
                        "{what}: rooted at {} {}, where the reference makes no non-finite \
                         value from finite operands (it may be rooted at {may:?}):\n{error}",
                        k.0, k.1
                    ));
                }
                got.push(k);
            }
            // Each root it reports is one of those; not necessarily all: an
            // op skipped because one of its inputs already carried a failure
            // computes none of the others, so a root among them that no read
            // needed is not found (docs/design.md, "Numerics checks").
            if got.is_empty() {
                return Err(format!("{what}: rejected with no failure:\n{error}"));
            }
            tally.rejected += 1;
            Ok(())
        }
    }
}

/// Builds `graph` on `gpu` (reading what it says while building), reads
/// every tensor (in registration order, or shuffled), then a tensor
/// registered after the failures that depends on none; then drops them
/// all and the device holds no failure.
fn run_overflow_graph(
    gpu: &Device,
    graph: &OvGraph,
    shuffled: bool,
    tally: &mut OvTally,
) -> Result<(), String> {
    let mut ts: Vec<Tensor> = Vec::with_capacity(graph.nodes.len());
    for (i, node) in graph.nodes.iter().enumerate() {
        let ins: Vec<&Tensor> = node.inputs.iter().map(|&j| &ts[j]).collect();
        let t = node.op.register(gpu, &node.shape, &ins);
        ts.push(t);
        for &j in &graph.reads_after[i] {
            check_overflow_read(graph, j, &ts[j], tally)
                .map_err(|e| format!("read while building, after t{i}: {e}"))?;
        }
    }
    let mut order: Vec<usize> = (0..ts.len()).collect();
    if shuffled {
        Rng::new(graph.seed ^ 0x5eed).shuffle(&mut order);
    }
    for &i in &order {
        check_overflow_read(graph, i, &ts[i], tally)?;
    }
    // The last finite tensor, through one more op registered after the
    // failures were read.
    let last = (0..ts.len()).rev().find(|&i| !graph.nodes[i].tainted);
    let last = last.expect("the uploads are finite");
    let node = overflow_node(Ov::Tanh, vec![last], &[&graph.nodes[last]]).expect("tanh is finite");
    let unrelated = ts[last].tanh().unwrap();
    let got = pollster::block_on(unrelated.to_vec())
        .map_err(|e| format!("tanh(t{last}), registered after the failures, rejected:\n{e}"))?;
    for (k, &g) in got.iter().enumerate() {
        let (v, e) = (node.val[k], node.err[k]);
        if (g as f64 - v).abs() > e * 1.0001 {
            return Err(format!(
                "tanh(t{last}), registered after the failures: read {got:?}, the reference {:?}",
                node.val
            ));
        }
    }
    drop((ts, unrelated));
    let _ = pollster::block_on(gpu.sync());
    match gpu.stats().failures_held {
        0 => Ok(()),
        held => Err(format!(
            "{held} failure(s) held after every tensor was dropped"
        )),
    }
}

/// Seeds from `var` (`n` or `a..b`), else `default`.
fn seeds_from_env(var: &str, default: std::ops::Range<u64>) -> Vec<u64> {
    match std::env::var(var) {
        Ok(seeds) => match seeds.split_once("..") {
            Some((a, b)) => {
                let bound = |x: &str| x.parse::<u64>().unwrap_or_else(|_| panic!("{var}=a..b"));
                (bound(a)..bound(b)).collect()
            }
            None => vec![
                seeds
                    .parse()
                    .unwrap_or_else(|_| panic!("{var} is a number")),
            ],
        },
        Err(_) => default.collect(),
    }
}

/// Random graphs of float ops on uploads spanning wide ranges, every
/// intermediate held, on two checking devices (kernels only; small work
/// on the host), each tensor read in registration order on one and
/// shuffled on the other: a tensor the reference (each op in f64, rounded
/// to f32, with bounds on what a device may compute) finds finite with all
/// it depends on reads its values; one that depends on an op that made a
/// non-finite value from finite operands rejects with `non-finite`
/// failures rooted at such ops (by name and position). Then a tensor registered after the failures
/// reads, and with every tensor dropped the device holds no failure. The
/// generator makes no value near an edge (f32's largest, or a pole at 0)
/// where rounding could decide. Runs every seed and names all that failed;
/// `NUMERICS_SEED=n` (or `a..b`) runs those only.
#[test]
fn random_graphs_that_overflow_fail_exactly_where_the_reference_is_non_finite() {
    let seeds = seeds_from_env("NUMERICS_SEED", 0..64);
    let checking = |host_max_elements| {
        let options = DeviceOptions {
            host_max_elements,
            check_numerics: true,
            ..DeviceOptions::default()
        };
        pollster::block_on(Device::request(options)).expect("a native GPU adapter")
    };
    let host_max = DeviceOptions::default().host_max_elements;
    let mut devices = [
        ("kernels", 0, checking(0)),
        ("host", host_max, checking(host_max)),
    ];
    let mut tally = OvTally::default();
    let mut roots: std::collections::BTreeMap<&str, usize> = Default::default();
    let (mut tensors, mut tainted, mut on_host, mut failed) = (0, 0, 0, Vec::new());
    for &seed in &seeds {
        let graph = overflow_graph(seed);
        tensors += graph.nodes.len();
        tainted += graph.nodes.iter().filter(|n| n.tainted).count();
        for n in graph.nodes.iter().filter(|n| n.root) {
            *roots.entry(n.op.name()).or_default() += 1;
        }
        for (d, (name, max, gpu)) in devices.iter_mut().enumerate() {
            let shuffled = (seed as usize + d).is_multiple_of(2);
            let order = if shuffled { "shuffled" } else { "in order" };
            let host_before = gpu.stats().host_ops;
            let run = run_overflow_graph(gpu, &graph, shuffled, &mut tally);
            on_host += gpu.stats().host_ops - host_before;
            if let Err(e) = run {
                failed.push(format!(
                    "seed {seed} (NUMERICS_SEED={seed}), {name} device, read {order}: {e}\n\
                     the graph:{}",
                    graph.describe_all()
                ));
                // What failed may leave work behind: the next seed starts
                // on a fresh device.
                *gpu = checking(*max);
            }
        }
    }
    eprintln!(
        "{} seeds: {tensors} tensors, {tainted} depending on a root; roots {roots:?}; \
         {} reads matched, {} rejected; {on_host} ops ran on the host; {} run(s) failed",
        seeds.len(),
        tally.matched,
        tally.rejected,
        failed.len()
    );
    if let Some(first) = failed.first() {
        let each: Vec<&str> = failed
            .iter()
            .map(|e| e.lines().next().unwrap_or_default())
            .collect();
        panic!(
            "{} run(s) failed:\n  {}\nthe first in full:\n{first}",
            failed.len(),
            each.join("\n  ")
        );
    }
    assert_eq!(webfusion::panics_observed(), 0, "the library panicked");
    if std::env::var("NUMERICS_SEED").is_err() {
        // The fixed seeds make every kind of root, and both outcomes.
        for name in [
            "exp", "log", "sqrt", "rsqrt", "square", "pow", "add", "sub", "mul", "div", "matmul",
            "sum",
        ] {
            assert!(
                roots.contains_key(name),
                "no {name} root in the graphs: {roots:?}"
            );
        }
        assert!(
            tally.matched > 0 && tally.rejected > 0,
            "reads of one outcome only"
        );
        assert!(on_host > 0, "no op of any graph ran on the host");
    }
}

// ---------------------------------------------------------------------------
// The oracle itself

#[test]
fn the_reference_interpreter_agrees_with_hand_computed_values() {
    let a = Ref::new(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let col = Ref::new(vec![10.0, 20.0], &[2, 1]);
    assert_eq!(a.add(&col).data, vec![11.0, 12.0, 13.0, 24.0, 25.0, 26.0]);
    assert_eq!(a.sum(Some(&[-1]), false), Ref::new(vec![6.0, 15.0], &[2]));
    assert_eq!(
        a.max(Some(&[0]), true),
        Ref::new(vec![4.0, 5.0, 6.0], &[1, 3])
    );
    assert_eq!(a.sum(None, false), Ref::scalar(21.0));
    assert_eq!(a.transpose(None).data, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(a.slice(&[1, 1], &[-1, 2]).data, vec![5.0, 6.0]);
    let id = Ref::new(vec![1.0, 0.0, 0.0, 1.0, 0.0, 0.0], &[3, 2]);
    assert_eq!(a.matmul(&id), Ref::new(vec![1.0, 2.0, 4.0, 5.0], &[2, 2]));
    assert_eq!(
        Ref::cat(&[&a, &col], 1).data,
        vec![1.0, 2.0, 3.0, 10.0, 4.0, 5.0, 6.0, 20.0]
    );
    assert_eq!(Ref::stack(&[&col, &col], -1).shape, vec![2, 1, 2]);
    let ties = Ref::new(vec![3.0, 1.0, 3.0], &[3]);
    assert_eq!(ties.argmax(0), Ref::scalar(0.0));
    assert_eq!(Ref::arange(0.0, 1.0, 0.25).data, vec![0.0, 0.25, 0.5, 0.75]);
    assert_eq!(Ref::arange(3.0, 0.0, -1.0).data, vec![3.0, 2.0, 1.0]);
    assert_eq!(a.reshape(&[3, -1]).shape, vec![3, 2]);
    assert_eq!(a.expand_dims(-1).shape, vec![2, 3, 1]);
    assert_eq!(a.expand_dims(-1).squeeze(None).shape, vec![2, 3]);
    let sm = Ref::new(vec![0.0, 0.0], &[2]).softmax(0);
    assert_eq!(sm.data, vec![0.5, 0.5]);
    assert_eq!(Ref::scalar(-2.0).pow(2.0).data, vec![4.0]);
    assert!(Ref::scalar(-2.0).pow(0.5).data[0].is_nan());
}

// ---------------------------------------------------------------------------
// Elementwise

#[test]
fn binary_ops_broadcast_both_operands_like_numpy() {
    for gpu in devices() {
        let (a, ra) = input(&gpu, &[2, 1, 3], 1);
        let (b, rb) = input(&gpu, &[4, 1], 2);
        check_op("add", &a.add(&b).unwrap(), ra.val.add(&rb.val), ARITH);
        check_op("sub", &a.sub(&b).unwrap(), ra.val.sub(&rb.val), ARITH);
        check_op("mul", &a.mul(&b).unwrap(), ra.val.mul(&rb.val), ARITH);
        check_op(
            "maximum",
            &a.maximum(&b).unwrap(),
            ra.val.maximum(&rb.val),
            EXACT,
        );
        check_op(
            "minimum",
            &a.minimum(&b).unwrap(),
            ra.val.minimum(&rb.val),
            EXACT,
        );
        let (pos, rpos) = input_in(&gpu, &[4, 1], 3, 0.5, 3.0);
        check_op("div", &a.div(&pos).unwrap(), ra.val.div(&rpos.val), ARITH);
        check_op(
            "pow",
            &pos.pow(&a).unwrap(),
            rpos.val.pow(&ra.val),
            TRANSCENDENTAL,
        );
        // The lower-rank operand on the left.
        check_op("sub", &b.sub(&a).unwrap(), rb.val.sub(&ra.val), ARITH);
        assert_eq!(a.add(&b).unwrap().shape(), &[2, 4, 3]);
    }
}

#[test]
fn binary_ops_with_a_scalar_operand_match_the_reference() {
    for gpu in devices() {
        let (a, ra) = input(&gpu, &[3, 5], 4);
        let r = &ra.val;
        check_op("add", &a.add(1.5).unwrap(), r.add(1.5), ARITH);
        check_op("sub", &a.sub(-0.25).unwrap(), r.sub(-0.25), ARITH);
        check_op("mul", &a.mul(3.0).unwrap(), r.mul(3.0), ARITH);
        check_op("div", &a.div(-4.0).unwrap(), r.div(-4.0), ARITH);
        check_op("maximum", &a.maximum(0.1).unwrap(), r.maximum(0.1), EXACT);
        check_op("minimum", &a.minimum(0.1).unwrap(), r.minimum(0.1), EXACT);
        let p = a.abs().unwrap().add(0.5).unwrap();
        let rp = r.abs().add(0.5);
        for e in [2.0, 3.0, 0.5, -1.0, -0.5, 0.0] {
            check_op(
                &format!("pow {e}"),
                &p.pow(e).unwrap(),
                rp.pow(e),
                TRANSCENDENTAL,
            );
        }
    }
}

#[test]
fn pow_of_a_negative_base_follows_numpy() {
    for gpu in devices() {
        let base = gpu.tensor(&[-2.0, -3.0, -0.5, 2.0], None).unwrap();
        let rb = Ref::tensor(&[-2.0, -3.0, -0.5, 2.0], None);
        check_op(
            "pow 2",
            &base.pow(2.0).unwrap(),
            rb.pow(2.0),
            TRANSCENDENTAL,
        );
        check_op(
            "pow 3",
            &base.pow(3.0).unwrap(),
            rb.pow(3.0),
            TRANSCENDENTAL,
        );
        check_op(
            "pow -1",
            &base.pow(-1.0).unwrap(),
            rb.pow(-1.0),
            TRANSCENDENTAL,
        );
        let got = read(&base.pow(0.5).unwrap());
        assert!(
            got[..3].iter().all(|v| v.is_nan()),
            "a negative base to a fractional power is NaN, got {got:?}"
        );
    }
}

#[test]
fn comparisons_give_one_where_true_and_zero_where_false_including_ties() {
    for gpu in devices() {
        let xs = [-1.0, 0.0, 0.5, 2.0, 2.0, -3.0];
        let ys = [0.0, 0.0, 1.0, 2.0, 1.0, -3.0];
        let (x, y) = (
            gpu.tensor(&xs, None).unwrap(),
            gpu.tensor(&ys, None).unwrap(),
        );
        let (rx, ry) = (Ref::tensor(&xs, None), Ref::tensor(&ys, None));
        check_op("equal", &x.equal(&y).unwrap(), rx.equal(&ry), EXACT);
        check_op("greater", &x.greater(&y).unwrap(), rx.greater(&ry), EXACT);
        check_op(
            "greater_equal",
            &x.greater_equal(&y).unwrap(),
            rx.greater_equal(&ry),
            EXACT,
        );
        check_op("less", &x.less(&y).unwrap(), rx.less(&ry), EXACT);
        check_op(
            "less_equal",
            &x.less_equal(&y).unwrap(),
            rx.less_equal(&ry),
            EXACT,
        );
        check_op("equal 2", &x.equal(2.0).unwrap(), rx.equal(2.0), EXACT);
        check_op(
            "greater 0",
            &x.greater(0.0).unwrap(),
            rx.greater(0.0),
            EXACT,
        );
        assert_eq!(
            read(&x.less_equal(&y).unwrap()),
            vec![1.0, 1.0, 1.0, 1.0, 0.0, 1.0]
        );
    }
}

#[test]
fn unary_ops_match_the_reference_on_their_domains() {
    for gpu in devices() {
        let (a, ra) = input_in(&gpu, &[4, 33], 5, -3.0, 3.0);
        let (p, rp) = input_in(&gpu, &[4, 33], 6, 0.05, 9.0);
        let r = &ra.val;
        check_op("neg", &a.neg().unwrap(), r.neg(), EXACT);
        check_op("abs", &a.abs().unwrap(), r.abs(), EXACT);
        check_op("relu", &a.relu().unwrap(), r.relu(), EXACT);
        check_op("square", &a.square().unwrap(), r.square(), ARITH);
        check_op("exp", &a.exp().unwrap(), r.exp(), TRANSCENDENTAL);
        check_op("log", &p.log().unwrap(), rp.val.log(), TRANSCENDENTAL);
        check_op("sqrt", &p.sqrt().unwrap(), rp.val.sqrt(), TRANSCENDENTAL);
        check_op("rsqrt", &p.rsqrt().unwrap(), rp.val.rsqrt(), TRANSCENDENTAL);
        check_op("gelu", &a.gelu().unwrap(), r.gelu(), TRANSCENDENTAL);
        check_op(
            "sigmoid",
            &a.sigmoid().unwrap(),
            r.sigmoid(),
            TRANSCENDENTAL,
        );
        check_op("tanh", &a.tanh().unwrap(), r.tanh(), TRANSCENDENTAL);
        check_op("sin", &a.sin().unwrap(), r.sin(), common::graphs::SIN_COS);
        check_op("cos", &a.cos().unwrap(), r.cos(), common::graphs::SIN_COS);
    }
}

#[test]
fn tanh_sigmoid_and_gelu_stay_finite_for_large_inputs() {
    for gpu in devices() {
        let xs = [-90.0, -50.0, -20.0, 20.0, 50.0, 90.0];
        let x = gpu.tensor(&xs, None).unwrap();
        let r = Ref::tensor(&xs, None);
        check_op("tanh", &x.tanh().unwrap(), r.tanh(), TRANSCENDENTAL);
        check_op(
            "sigmoid",
            &x.sigmoid().unwrap(),
            r.sigmoid(),
            TRANSCENDENTAL,
        );
        check_op("gelu", &x.gelu().unwrap(), r.gelu(), TRANSCENDENTAL);
    }
}

#[test]
fn clamp_limits_values_to_the_given_range() {
    for gpu in devices() {
        let (a, ra) = input(&gpu, &[50], 7);
        check_op(
            "clamp",
            &a.clamp(-0.5, 1.0).unwrap(),
            ra.val.clamp(-0.5, 1.0),
            EXACT,
        );
        let got = read(&a.clamp(-0.5, 1.0).unwrap());
        assert!(got.iter().all(|v| (-0.5..=1.0).contains(v)));
    }
}

#[test]
fn a_chain_of_elementwise_ops_on_views_matches_the_reference() {
    for gpu in devices() {
        let (a, ra) = input(&gpu, &[3, 4, 5], 8);
        let (b, rb) = input(&gpu, &[5, 4], 9);
        let t = a
            .transpose(Some(&[0, 2, 1]))
            .unwrap()
            .slice(&[1, 0, 1], &[-1, 5, 3])
            .unwrap()
            .mul(&b.slice(&[0, 1], &[5, 3]).unwrap())
            .unwrap()
            .add(0.5)
            .unwrap()
            .tanh()
            .unwrap();
        let r = ra
            .view(|v| v.transpose(Some(&[0, 2, 1])).slice(&[1, 0, 1], &[-1, 5, 3]))
            .binary(
                &rb.view(|v| v.slice(&[0, 1], &[5, 3])),
                ra.val
                    .transpose(Some(&[0, 2, 1]))
                    .slice(&[1, 0, 1], &[-1, 5, 3])
                    .mul(&rb.val.slice(&[0, 1], &[5, 3])),
                |x, y| x * y,
                common::graphs::Rule::Corners,
                ARITH,
            );
        let r = r.binary(
            &Tracked::exact(Ref::scalar(0.5)),
            r.val.add(0.5),
            |x, y| x + y,
            common::graphs::Rule::Corners,
            ARITH,
        );
        let r = r.unary(
            r.val.tanh(),
            f64::tanh,
            common::graphs::Rule::Corners,
            TRANSCENDENTAL,
        );
        check("chain", &t, &r);
    }
}

// ---------------------------------------------------------------------------
// Reductions

#[test]
fn sum_mean_max_and_min_over_one_several_and_all_axes_match_the_reference() {
    for gpu in devices() {
        let (a, ra) = input(&gpu, &[3, 4, 5, 2], 10);
        let axes_cases: [Option<&[isize]>; 7] = [
            None,
            Some(&[0]),
            Some(&[-1]),
            Some(&[1, 3]),
            Some(&[-2, 0]),
            Some(&[0, 1, 2]),
            Some(&[3, 2, 1, 0]),
        ];
        for axes in axes_cases {
            for keep in [false, true] {
                let what = |op: &str| format!("{op}({axes:?}, keep_dims={keep})");
                check(
                    &what("sum"),
                    &a.sum(axes, keep).unwrap(),
                    &ra.sum(axes, keep),
                );
                check(
                    &what("mean"),
                    &a.mean(axes, keep).unwrap(),
                    &ra.mean(axes, keep),
                );
                check(
                    &what("max"),
                    &a.max(axes, keep).unwrap(),
                    &ra.max(axes, keep),
                );
                check(
                    &what("min"),
                    &a.min(axes, keep).unwrap(),
                    &ra.min(axes, keep),
                );
            }
        }
    }
}

#[test]
fn reductions_over_long_axes_match_the_reference() {
    for gpu in devices() {
        let (a, ra) = input(&gpu, &[3, 100_003], 11);
        for axes in [None, Some(&[1isize][..]), Some(&[0isize][..])] {
            check("sum", &a.sum(axes, false).unwrap(), &ra.sum(axes, false));
            check("mean", &a.mean(axes, true).unwrap(), &ra.mean(axes, true));
            check("max", &a.max(axes, false).unwrap(), &ra.max(axes, false));
            check("min", &a.min(axes, false).unwrap(), &ra.min(axes, false));
        }
    }
}

#[test]
fn a_reduction_of_fused_elementwise_ops_matches_the_reference() {
    for gpu in devices() {
        let (a, ra) = input(&gpu, &[6, 7], 12);
        let (b, rb) = input(&gpu, &[7], 13);
        let t = a
            .mul(&b)
            .unwrap()
            .add(1.0)
            .unwrap()
            .sum(Some(&[1]), false)
            .unwrap();
        let prod = ra.binary(
            &rb,
            ra.val.mul(&rb.val),
            |x, y| x * y,
            common::graphs::Rule::Corners,
            ARITH,
        );
        let plus = prod.binary(
            &Tracked::exact(Ref::scalar(1.0)),
            prod.val.add(1.0),
            |x, y| x + y,
            common::graphs::Rule::Corners,
            ARITH,
        );
        check("sum of mul+add", &t, &plus.sum(Some(&[1]), false));
    }
}

#[test]
fn argmax_picks_the_first_of_tied_maxima() {
    for gpu in devices() {
        let xs = [
            1.0, 5.0, 5.0, 0.0, 7.0, 7.0, 7.0, -1.0, -2.0, -2.0, -3.0, -2.0,
        ];
        let t = gpu.tensor(&xs, Some(&[3, 4])).unwrap();
        let r = Ref::tensor(&xs, Some(&[3, 4]));
        assert_eq!(read(&t.arg_max(1).unwrap()), vec![1.0, 0.0, 0.0]);
        check_op("argmax -1", &t.arg_max(-1).unwrap(), r.argmax(-1), EXACT);
        check_op("argmax 0", &t.arg_max(0).unwrap(), r.argmax(0), EXACT);
        let (a, ra) = input(&gpu, &[4, 9, 3], 14);
        for axis in [0, 1, 2, -1, -3] {
            check_op(
                &format!("argmax {axis}"),
                &a.arg_max(axis).unwrap(),
                ra.val.argmax(axis),
                EXACT,
            );
        }
    }
}

#[test]
fn softmax_and_log_softmax_match_the_reference_along_every_axis() {
    for gpu in devices() {
        let (a, ra) = input_in(&gpu, &[3, 4, 5], 15, -8.0, 8.0);
        for axis in [0, 1, 2, -1, -2] {
            check(
                &format!("softmax {axis}"),
                &a.softmax(axis).unwrap(),
                &ra.softmax(axis),
            );
            check(
                &format!("log_softmax {axis}"),
                &a.log_softmax(axis).unwrap(),
                &ra.log_softmax(axis),
            );
        }
        let (long, rl) = input_in(&gpu, &[2, 3000], 16, -20.0, 20.0);
        check("softmax long", &long.softmax(-1).unwrap(), &rl.softmax(-1));
        check(
            "log_softmax long",
            &long.log_softmax(1).unwrap(),
            &rl.log_softmax(1),
        );
    }
}

#[test]
fn softmax_rows_sum_to_one() {
    for gpu in devices() {
        let (a, _) = input_in(&gpu, &[5, 17], 17, -30.0, 30.0);
        let sums = read(&a.softmax(1).unwrap().sum(Some(&[1]), false).unwrap());
        assert!(sums.iter().all(|s| (s - 1.0).abs() < 1e-4), "{sums:?}");
    }
}

// ---------------------------------------------------------------------------
// Linear algebra

#[test]
fn matmul_of_two_matrices_matches_the_reference() {
    for gpu in devices() {
        for (i, &(m, k, n)) in [(1, 1, 1), (2, 3, 4), (7, 1, 5), (33, 17, 65), (64, 129, 70)]
            .iter()
            .enumerate()
        {
            let (a, ra) = input(&gpu, &[m, k], 20 + i as u64);
            let (b, rb) = input(&gpu, &[k, n], 40 + i as u64);
            check(
                &format!("matmul {m}x{k}x{n}"),
                &a.matmul(&b).unwrap(),
                &ra.matmul(&rb),
            );
        }
    }
}

#[test]
fn matmul_with_broadcast_batch_dims_matches_the_reference() {
    for gpu in devices() {
        let cases: [(&[usize], &[usize]); 5] = [
            (&[2, 1, 3, 4], &[5, 4, 2]),
            (&[3, 4], &[6, 4, 5]),
            (&[6, 3, 4], &[4, 5]),
            (&[2, 3, 1, 7], &[1, 1, 7, 2]),
            (&[1, 5, 2, 3], &[4, 1, 3, 3]),
        ];
        for (i, (sa, sb)) in cases.iter().enumerate() {
            let (a, ra) = input(&gpu, sa, 60 + i as u64);
            let (b, rb) = input(&gpu, sb, 70 + i as u64);
            let what = format!("matmul {sa:?} @ {sb:?}");
            check(&what, &a.matmul(&b).unwrap(), &ra.matmul(&rb));
        }
    }
}

#[test]
fn matmul_with_a_bias_and_activation_epilogue_matches_the_reference() {
    for gpu in devices() {
        let (x, rx) = input(&gpu, &[8, 12], 80);
        let (w, rw) = input(&gpu, &[12, 6], 81);
        let (bias, rbias) = input(&gpu, &[6], 82);
        let t = x.matmul(&w).unwrap().add(&bias).unwrap().relu().unwrap();
        let mm = rx.matmul(&rw);
        let plus = mm.binary(
            &rbias,
            mm.val.add(&rbias.val),
            |a, b| a + b,
            common::graphs::Rule::Corners,
            ARITH,
        );
        let out = plus.unary(
            plus.val.relu(),
            |v| v.max(0.0),
            common::graphs::Rule::Corners,
            EXACT,
        );
        check("relu(x @ w + b)", &t, &out);
    }
}

#[test]
fn matmul_of_transposed_views_matches_the_reference() {
    for gpu in devices() {
        let (a, ra) = input(&gpu, &[5, 3], 83);
        let (b, rb) = input(&gpu, &[4, 5], 84);
        let t = a
            .transpose(None)
            .unwrap()
            .matmul(&b.transpose(None).unwrap())
            .unwrap();
        let r = ra
            .view(|v| v.transpose(None))
            .matmul(&rb.view(|v| v.transpose(None)));
        check("aT @ bT", &t, &r);
    }
}

#[test]
fn transpose_with_and_without_a_permutation_matches_the_reference() {
    for gpu in devices() {
        let (a, ra) = input(&gpu, &[2, 3, 4, 5], 90);
        let r = &ra.val;
        check_op(
            "reverse",
            &a.transpose(None).unwrap(),
            r.transpose(None),
            EXACT,
        );
        for perm in [[0, 1, 2, 3], [3, 1, 0, 2], [1, 0, 3, 2], [2, 3, 1, 0]] {
            let what = format!("transpose {perm:?}");
            check_op(
                &what,
                &a.transpose(Some(&perm)).unwrap(),
                r.transpose(Some(&perm)),
                EXACT,
            );
        }
        let twice = a
            .transpose(Some(&[3, 1, 0, 2]))
            .unwrap()
            .transpose(Some(&[2, 1, 3, 0]))
            .unwrap();
        check_op("transpose twice", &twice, r.clone(), EXACT);
    }
}

// ---------------------------------------------------------------------------
// Shape ops

#[test]
fn slice_reshape_and_flatten_match_the_reference() {
    for gpu in devices() {
        let (a, ra) = input(&gpu, &[4, 5, 6], 91);
        let r = &ra.val;
        check_op(
            "slice",
            &a.slice(&[1, 2, 0], &[2, -1, 3]).unwrap(),
            r.slice(&[1, 2, 0], &[2, -1, 3]),
            EXACT,
        );
        check_op(
            "slice all",
            &a.slice(&[0, 0, 0], &[-1, -1, -1]).unwrap(),
            r.clone(),
            EXACT,
        );
        check_op(
            "reshape",
            &a.reshape(&[6, -1, 2]).unwrap(),
            r.reshape(&[6, -1, 2]),
            EXACT,
        );
        check_op(
            "reshape 1d",
            &a.reshape(&[-1]).unwrap(),
            r.reshape(&[-1]),
            EXACT,
        );
        check_op("flatten", &a.flatten().unwrap(), r.flatten(), EXACT);
        let sliced_then_reshaped = a
            .slice(&[0, 1, 2], &[4, 3, 2])
            .unwrap()
            .reshape(&[2, 12])
            .unwrap();
        check_op(
            "slice then reshape",
            &sliced_then_reshaped,
            r.slice(&[0, 1, 2], &[4, 3, 2]).reshape(&[2, 12]),
            EXACT,
        );
        let transposed_then_flattened = a.transpose(None).unwrap().flatten().unwrap();
        check_op(
            "transpose then flatten",
            &transposed_then_flattened,
            r.transpose(None).flatten(),
            EXACT,
        );
    }
}

#[test]
fn broadcast_to_expand_dims_and_squeeze_match_the_reference() {
    for gpu in devices() {
        let (a, ra) = input(&gpu, &[3, 1, 2], 92);
        let r = &ra.val;
        check_op(
            "broadcast_to",
            &a.broadcast_to(&[4, 3, 5, 2]).unwrap(),
            r.broadcast_to(&[4, 3, 5, 2]),
            EXACT,
        );
        check_op(
            "expand_dims 0",
            &a.expand_dims(0).unwrap(),
            r.expand_dims(0),
            EXACT,
        );
        check_op(
            "expand_dims -1",
            &a.expand_dims(-1).unwrap(),
            r.expand_dims(-1),
            EXACT,
        );
        check_op(
            "expand_dims 2",
            &a.expand_dims(2).unwrap(),
            r.expand_dims(2),
            EXACT,
        );
        check_op(
            "squeeze all",
            &a.squeeze(None).unwrap(),
            r.squeeze(None),
            EXACT,
        );
        check_op(
            "squeeze -2",
            &a.squeeze(Some(&[-2])).unwrap(),
            r.squeeze(Some(&[-2])),
            EXACT,
        );
        assert_eq!(a.expand_dims(-1).unwrap().shape(), &[3, 1, 2, 1]);
        let b = a.broadcast_to(&[3, 4, 2]).unwrap().add(1.0).unwrap();
        check_op(
            "broadcast then add",
            &b,
            r.broadcast_to(&[3, 4, 2]).add(1.0),
            ARITH,
        );
    }
}

#[test]
fn cat_and_stack_along_positive_and_negative_axes_match_the_reference() {
    for gpu in devices() {
        let (a, ra) = input(&gpu, &[2, 3, 4], 93);
        let (b, rb) = input(&gpu, &[2, 5, 4], 94);
        let (c, rc) = input(&gpu, &[2, 3, 4], 95);
        let (a, b, c) = (&a, &b, &c);
        let (ra, rb, rc) = (&ra.val, &rb.val, &rc.val);
        check_op(
            "cat 1",
            &gpu.cat(&[a, b], 1).unwrap(),
            Ref::cat(&[ra, rb], 1),
            EXACT,
        );
        check_op(
            "cat -2",
            &gpu.cat(&[b, a, b], -2).unwrap(),
            Ref::cat(&[rb, ra, rb], -2),
            EXACT,
        );
        check_op(
            "cat 0",
            &gpu.cat(&[a, c], 0).unwrap(),
            Ref::cat(&[ra, rc], 0),
            EXACT,
        );
        check_op(
            "cat -1",
            &gpu.cat(&[a, c, a], -1).unwrap(),
            Ref::cat(&[ra, rc, ra], -1),
            EXACT,
        );
        for axis in [0, 1, 2, 3, -1, -4] {
            let what = format!("stack {axis}");
            check_op(
                &what,
                &gpu.stack(&[a, c], axis).unwrap(),
                Ref::stack(&[ra, rc], axis),
                EXACT,
            );
        }
        let mixed = gpu
            .cat(
                &[
                    &a.mul(2.0).unwrap(),
                    &a.transpose(Some(&[0, 1, 2])).unwrap(),
                ],
                0,
            )
            .unwrap();
        check_op(
            "cat of computed",
            &mixed,
            Ref::cat(&[&ra.mul(2.0), ra], 0),
            ARITH,
        );
    }
}

#[test]
fn where_broadcasts_its_condition_and_both_branches() {
    for gpu in devices() {
        let cond_values = [1.0, 0.0, 0.5, 0.0, -1.0, 0.0];
        let cond = gpu
            .tensor(&cond_values, Some(&[2, 3, 1]))
            .unwrap()
            .cast(webfusion::DType::Bool)
            .unwrap();
        let rcond = Ref::tensor(&cond_values, Some(&[2, 3, 1]));
        let (a, ra) = input(&gpu, &[4], 96);
        let (b, rb) = input(&gpu, &[3, 1], 97);
        let t = gpu.where_(&cond, &a, &b).unwrap();
        assert_eq!(t.shape(), &[2, 3, 4]);
        check_op("where", &t, Ref::where_(&rcond, &ra.val, &rb.val), EXACT);
        let scalar = gpu.tensor(&[9.0], Some(&[])).unwrap();
        let t = gpu.where_(&a.greater(0.0).unwrap(), &a, &scalar).unwrap();
        check_op(
            "where(a > 0, a, 9)",
            &t,
            Ref::where_(&ra.val.greater(0.0), &ra.val, &Ref::scalar(9.0)),
            EXACT,
        );
    }
}

// ---------------------------------------------------------------------------
// Creation

#[test]
fn full_zeros_ones_and_arange_create_the_reference_values() {
    for gpu in devices() {
        check_op(
            "full",
            &gpu.full(&[2, 3], -1.25).unwrap(),
            Ref::full(&[2, 3], -1.25),
            EXACT,
        );
        check_op("zeros", &gpu.zeros(&[4]).unwrap(), Ref::zeros(&[4]), EXACT);
        check_op(
            "ones",
            &gpu.ones(&[1, 2, 3]).unwrap(),
            Ref::ones(&[1, 2, 3]),
            EXACT,
        );
        check_op(
            "tensor",
            &gpu.tensor(&[1.0, 2.0], None).unwrap(),
            Ref::tensor(&[1.0, 2.0], None),
            EXACT,
        );
        for (start, stop, step) in [
            (0.0, 5.0, 1.0),
            (0.0, 1.0, 0.25),
            (3.0, -2.0, -1.0),
            (-1.0, 2.5, 0.5),
            (0.0, 7.0, 2.0),
            (0.0, 0.0, 1.0),
            (5.0, 0.0, 1.0),
            (1.0, 1000.0, 3.0),
        ] {
            let what = format!("arange({start}, {stop}, {step})");
            check_op(
                &what,
                &gpu.arange(start, stop, step).unwrap(),
                Ref::arange(start, stop, step),
                ARITH,
            );
        }
    }
}

#[test]
fn random_uniform_stays_in_its_range_and_its_seed_reproduces_it() {
    for gpu in devices() {
        let a = read(&gpu.random_uniform(&[256, 256], -0.5, 2.0, 7).unwrap());
        let again = read(&gpu.random_uniform(&[256, 256], -0.5, 2.0, 7).unwrap());
        let other = read(&gpu.random_uniform(&[256, 256], -0.5, 2.0, 8).unwrap());
        assert!(
            a.iter().all(|v| (-0.5..=2.0).contains(v)),
            "a value outside [-0.5, 2]"
        );
        assert_eq!(a, again, "the same seed gives the same values");
        assert_ne!(a, other, "another seed gives other values");
        let mean = a.iter().map(|&v| v as f64).sum::<f64>() / a.len() as f64;
        assert!((mean - 0.75).abs() < 0.05, "mean {mean}");
        let low = a.iter().filter(|&&v| v < 0.75).count() as f64 / a.len() as f64;
        assert!(
            (low - 0.5).abs() < 0.03,
            "fraction below the midpoint {low}"
        );
    }
}

#[test]
fn random_normal_has_the_requested_mean_and_standard_deviation() {
    for gpu in devices() {
        let v = read(&gpu.random_normal(&[1 << 16], 0.5, 2.0, 3).unwrap());
        assert!(v.iter().all(|x| x.is_finite()));
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        assert!((mean - 0.5).abs() < 0.05, "mean {mean}");
        assert!((var.sqrt() - 2.0).abs() < 0.05, "std {}", var.sqrt());
        let within_one_std = v.iter().filter(|&&x| (x as f64 - 0.5).abs() < 2.0).count() as f64 / n;
        assert!((within_one_std - 0.6827).abs() < 0.02, "{within_one_std}");
    }
}

// ---------------------------------------------------------------------------
// Edge sizes

#[test]
fn ops_on_tensors_with_a_zero_sized_dim_give_empty_or_zero_results() {
    for gpu in devices() {
        let e = gpu.zeros(&[3, 0, 2]).unwrap();
        let re = Ref::zeros(&[3, 0, 2]);
        check_op("add", &e.add(1.0).unwrap(), re.add(1.0), ARITH);
        check_op("exp", &e.exp().unwrap(), re.exp(), EXACT);
        check_op(
            "sum axis 1",
            &e.sum(Some(&[1]), false).unwrap(),
            re.sum(Some(&[1]), false),
            EXACT,
        );
        check_op(
            "sum all",
            &e.sum(None, false).unwrap(),
            Ref::scalar(0.0),
            EXACT,
        );
        check_op(
            "sum keep",
            &e.sum(Some(&[0, 1]), true).unwrap(),
            Ref::zeros(&[1, 1, 2]),
            EXACT,
        );
        check_op(
            "max axis 2",
            &e.max(Some(&[2]), false).unwrap(),
            re.max(Some(&[2]), false),
            EXACT,
        );
        check_op(
            "transpose",
            &e.transpose(None).unwrap(),
            re.transpose(None),
            EXACT,
        );
        check_op(
            "reshape",
            &e.reshape(&[0, 5]).unwrap(),
            re.reshape(&[0, 5]),
            EXACT,
        );
        check_op("softmax", &e.softmax(1).unwrap(), re.softmax(1), EXACT);
        let (x, rx) = input(&gpu, &[3, 2, 2], 100);
        check_op(
            "cat with empty",
            &gpu.cat(&[&e, &x], 1).unwrap(),
            Ref::cat(&[&re, &rx.val], 1),
            EXACT,
        );
        let (a, ra) = input(&gpu, &[2, 0], 101);
        let (b, rb) = input(&gpu, &[0, 3], 102);
        check_op(
            "matmul k=0",
            &a.matmul(&b).unwrap(),
            ra.val.matmul(&rb.val),
            EXACT,
        );
        check_op(
            "matmul m=0",
            &b.matmul(&gpu.ones(&[3, 4]).unwrap()).unwrap(),
            Ref::zeros(&[0, 4]),
            EXACT,
        );
        check_op(
            "broadcast empty",
            &e.add(&x.slice(&[0, 0, 0], &[1, 1, 2]).unwrap()).unwrap(),
            Ref::zeros(&[3, 0, 2]),
            EXACT,
        );
        assert_eq!(e.size(), 0);
        assert_eq!(read(&e), Vec::<f32>::new());
    }
}

#[test]
fn ops_on_scalar_tensors_match_the_reference() {
    for gpu in devices() {
        let s = gpu.tensor(&[2.5], Some(&[])).unwrap();
        let rs = Ref::new(vec![2.5], &[]);
        assert_eq!(s.shape(), &[] as &[usize]);
        assert_eq!(s.rank(), 0);
        assert_eq!(s.size(), 1);
        check_op("add", &s.add(1.0).unwrap(), rs.add(1.0), ARITH);
        check_op("exp", &s.exp().unwrap(), rs.exp(), TRANSCENDENTAL);
        let (v, rv) = input(&gpu, &[3, 2], 103);
        check_op(
            "scalar * tensor",
            &s.mul(&v).unwrap(),
            rs.mul(&rv.val),
            ARITH,
        );
        check_op(
            "tensor - scalar",
            &v.sub(&s).unwrap(),
            rv.val.sub(&rs),
            ARITH,
        );
        check_op("sum", &s.sum(None, false).unwrap(), rs.clone(), ARITH);
        check_op("mean keep", &s.mean(None, true).unwrap(), rs.clone(), ARITH);
        check_op("max", &s.max(None, false).unwrap(), rs.clone(), EXACT);
        check_op(
            "expand_dims",
            &s.expand_dims(0).unwrap(),
            rs.expand_dims(0),
            EXACT,
        );
        check_op(
            "reshape",
            &s.reshape(&[1, 1]).unwrap(),
            rs.reshape(&[1, 1]),
            EXACT,
        );
        check_op(
            "broadcast_to",
            &s.broadcast_to(&[2, 2]).unwrap(),
            rs.broadcast_to(&[2, 2]),
            EXACT,
        );
        check_op("transpose", &s.transpose(None).unwrap(), rs.clone(), EXACT);
        check_op(
            "flatten",
            &s.flatten().unwrap(),
            Ref::new(vec![2.5], &[1]),
            EXACT,
        );
        check_op(
            "stack",
            &gpu.stack(&[&s, &s.neg().unwrap()], 0).unwrap(),
            Ref::tensor(&[2.5, -2.5], None),
            EXACT,
        );
        let all = v.sum(None, false).unwrap();
        assert_eq!(all.shape(), &[] as &[usize]);
        check("sum of a matrix", &all, &rv.sum(None, false));
        let one = gpu.tensor(&[4.0], Some(&[1, 1, 1])).unwrap();
        check_op(
            "squeeze to a scalar",
            &one.squeeze(None).unwrap(),
            Ref::scalar(4.0),
            EXACT,
        );
        check_op(
            "full of []",
            &gpu.full(&[], 3.0).unwrap(),
            Ref::scalar(3.0),
            EXACT,
        );
    }
}

#[test]
fn a_tensor_of_two_to_the_25_elements_adds_and_sums_correctly() {
    for gpu in devices() {
        let n = 1usize << 25;
        let t = gpu.full(&[n], 1.5).unwrap().add(1.0).unwrap();
        let total = t.sum(None, false).unwrap();
        let biggest = t.max(None, false).unwrap();
        let v = read(&t);
        assert_eq!(v.len(), n);
        for i in [0, 1, 12_345, n / 2, n - 257, n - 1] {
            assert_eq!(v[i], 2.5, "element {i}");
        }
        assert!(v.iter().all(|&x| x == 2.5), "every element is 2.5");
        let s = read(&total)[0] as f64;
        let want = 2.5 * n as f64;
        assert!(
            (s - want).abs() <= 1e-4 * want,
            "sum of 2^25 values of 2.5: expected {want}, got {s}"
        );
        assert_eq!(read(&biggest), vec![2.5]);
    }
}

// ---------------------------------------------------------------------------
// Many inputs (WebGPU allows 8 storage buffers per shader stage by default)

#[test]
fn a_fused_sum_of_twelve_distinct_inputs_matches_the_reference() {
    for gpu in devices() {
        let inputs: Vec<(Tensor, Tracked)> =
            (0..12).map(|i| input(&gpu, &[3, 5], 200 + i)).collect();
        let mut t = inputs[0].0.clone();
        let mut r = inputs[0].1.clone();
        for (x, rx) in &inputs[1..] {
            t = t.add(x).unwrap();
            let val = r.val.add(&rx.val);
            r = r.binary(rx, val, |a, b| a + b, common::graphs::Rule::Corners, ARITH);
        }
        check("x0 + x1 + ... + x11", &t, &r);
    }
}

#[test]
fn cat_and_stack_of_twelve_tensors_match_the_reference() {
    for gpu in devices() {
        let inputs: Vec<(Tensor, Tracked)> = (0..12)
            .map(|i| input(&gpu, &[2, 1 + i as usize % 3], 300 + i))
            .collect();
        let gs: Vec<&Tensor> = inputs.iter().map(|(g, _)| g).collect();
        let rs: Vec<&Ref> = inputs.iter().map(|(_, r)| &r.val).collect();
        check_op(
            "cat of 12",
            &gpu.cat(&gs, 1).unwrap(),
            Ref::cat(&rs, 1),
            EXACT,
        );
        let same: Vec<(Tensor, Tracked)> = (0..12).map(|i| input(&gpu, &[2, 3], 400 + i)).collect();
        let gs: Vec<&Tensor> = same.iter().map(|(g, _)| g).collect();
        let rs: Vec<&Ref> = same.iter().map(|(_, r)| &r.val).collect();
        check_op(
            "stack of 12",
            &gpu.stack(&gs, -1).unwrap(),
            Ref::stack(&rs, -1),
            EXACT,
        );
    }
}
