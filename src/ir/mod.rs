//! The recorded op: what registration leaves behind and the planner consumes.
//!
//! An [`OpIr`] names tensors by [`TensorId`], never by handle, so a queued op
//! does not keep a tensor's handle alive: the device counts the queue's uses of
//! each tensor itself (`device::Record::dependents`), which is what lets the
//! planner know that an intermediate nobody holds need never touch memory.

use std::fmt;

pub mod bounds;
pub mod dtype;
pub mod layout;
pub mod shape;

pub use dtype::{DType, Values};

/// A tensor's name on its device, and in reports (`tensor #5`).
///
/// Drawn from one counter per thread, so ids are unique across devices as
/// well: a report about a tensor moved between devices can name both ends
/// without ambiguity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(pub u64);

impl TensorId {
    pub(crate) fn next() -> Self {
        thread_local!(static NEXT: std::cell::Cell<u64> = const { std::cell::Cell::new(1) });
        NEXT.with(|next| {
            let id = next.get();
            next.set(id + 1);
            TensorId(id)
        })
    }
}

impl fmt::Display for TensorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tensor #{}", self.0)
    }
}

/// Elementwise functions of one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Abs,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Square,
    Relu,
    Gelu,
    Sigmoid,
    Tanh,
    Sin,
    Cos,
    /// `sin / cos`: in kernels their float32 quotient; on the host the
    /// float64 tangent rounded, TF.js's CPU backend's value (near a pole
    /// the quotient keeps its operands' error, large beside an ulp of
    /// the tangent there).
    Tan,
    /// The largest whole number not above `x`, a float32.
    Floor,
    /// `!x` of a bool.
    LogicalNot,
    /// `x` itself, which the numerics checks look at whatever made it: a
    /// non-finite element fails it even where its operand was not finite
    /// (a value the page gave). The guard `Optimizer::set_skip_non_finite`
    /// puts on each value a step writes; TensorFlow's `check_numerics`.
    CheckNumerics,
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 17] = [
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
        UnaryOp::Tan,
        UnaryOp::Floor,
        UnaryOp::LogicalNot,
        UnaryOp::CheckNumerics,
    ];

    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Square => "square",
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tan => "tan",
            UnaryOp::Floor => "floor",
            UnaryOp::LogicalNot => "logicalNot",
            UnaryOp::CheckNumerics => "checkNumerics",
        }
    }
}

/// Elementwise functions of two values, broadcast NumPy-style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
    Equal,
    Greater,
    GreaterEqual,
    Less,
    LessEqual,
    /// The remainder with the divisor's sign (TF.js's floor-mod).
    Mod,
    /// `floor(a / b)`.
    FloorDiv,
    LogicalAnd,
    LogicalOr,
    LogicalXor,
    /// The bits both int32s have (TF.js's `bitwiseAnd`).
    BitwiseAnd,
}

impl BinaryOp {
    pub const ALL: [BinaryOp; 18] = [
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
        BinaryOp::Mod,
        BinaryOp::FloorDiv,
        BinaryOp::LogicalAnd,
        BinaryOp::LogicalOr,
        BinaryOp::LogicalXor,
        BinaryOp::BitwiseAnd,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Equal => "equal",
            BinaryOp::Greater => "greater",
            BinaryOp::GreaterEqual => "greaterEqual",
            BinaryOp::Less => "less",
            BinaryOp::LessEqual => "lessEqual",
            BinaryOp::Mod => "mod",
            BinaryOp::FloorDiv => "floorDiv",
            BinaryOp::LogicalAnd => "logicalAnd",
            BinaryOp::LogicalOr => "logicalOr",
            BinaryOp::LogicalXor => "logicalXor",
            BinaryOp::BitwiseAnd => "bitwiseAnd",
        }
    }

    /// Whether the op compares its operands: its result is a bool,
    /// whatever theirs are.
    pub fn compares(self) -> bool {
        matches!(
            self,
            BinaryOp::Equal
                | BinaryOp::Greater
                | BinaryOp::GreaterEqual
                | BinaryOp::Less
                | BinaryOp::LessEqual
        )
    }

    /// Whether the op is logical: it takes bools and gives a bool.
    pub fn is_logical(self) -> bool {
        matches!(
            self,
            BinaryOp::LogicalAnd | BinaryOp::LogicalOr | BinaryOp::LogicalXor
        )
    }
}

/// How a reduction combines the values along its axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    /// `log(sum(exp(x)))`, computed stably in one pass.
    LogSumExp,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 6] = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Prod,
        ReduceOp::LogSumExp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Prod => "prod",
            ReduceOp::LogSumExp => "logSumExp",
        }
    }

    /// Whether a fold of `dtype` values hands each partial on with flags
    /// besides its value, so that a reduction split in two stages binds a
    /// second output per partial (as an argmax binds its index): a float
    /// product's, which says whether a zero and a non-finite value were
    /// seen (`codegen`'s `Fold::product`). The planner counts that binding
    /// (`fusion::reduction_outputs`), codegen and lowering make it.
    pub fn carries_flags(self, dtype: DType) -> bool {
        self == ReduceOp::Prod && dtype == DType::Float32
    }
}

/// Which product a convolution computes, with `x` the NHWC images
/// `[n, h, w, c]`, `f` the HWIO filter `[kh, kw, c, o]` and `dy` the
/// output's gradient `[n, oh, ow, o]`:
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConvPass {
    /// `conv2d(x, f)`: `[n, oh, ow, o]`.
    Forward,
    /// The gradient for the images, `dy` and `f` to `[n, h, w, c]` (what
    /// `conv2dTranspose` computes of its input).
    Input,
    /// The gradient for the filter, `x` and `dy` to `[kh, kw, c, o]`.
    Filter,
}

impl ConvPass {
    pub const ALL: [ConvPass; 3] = [ConvPass::Forward, ConvPass::Input, ConvPass::Filter];

    /// A pass's op name, of a depthwise convolution's or not.
    pub fn name(self, depthwise: bool) -> &'static str {
        match (self, depthwise) {
            (ConvPass::Forward, false) => "conv2d",
            (ConvPass::Input, false) => "conv2dTranspose",
            (ConvPass::Filter, false) => "conv2dFilterGrad",
            (ConvPass::Forward, true) => "depthwiseConv2d",
            (ConvPass::Input, true) => "depthwiseConv2dInputGrad",
            (ConvPass::Filter, true) => "depthwiseConv2dFilterGrad",
        }
    }
}

/// What a pooling window computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolOp {
    Max,
    Avg,
}

/// Where a convolution's windows sit: an output position `(oh, ow)` reads
/// the images at rows `oh * stride[0] + kh * dilation[0] - pad[0]` (and
/// columns likewise), reading 0 outside them. The pads after the images
/// only decide the output's size, which the shapes hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ConvGeometry {
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    /// The rows above and the columns left of the images.
    pub pad: [usize; 2],
}

/// How a scan combines each element with the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScanOp {
    Sum,
    Prod,
}

/// A seeded distribution for `randomUniform`/`randomNormal`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    Uniform { min: f32, max: f32 },
    Normal { mean: f32, std: f32 },
}

/// A view: a new shape over the same memory, read through an index map.
/// Applied to the input's layout when the flush reaches it, since the input
/// may itself be a view whose layout exists only then.
#[derive(Debug, Clone, PartialEq)]
pub enum ViewOp {
    /// Dims reordered: output dim `i` is input dim `perm[i]`.
    Transpose(Vec<usize>),
    /// A box starting at `begin`; the output shape is its size.
    Slice(Vec<usize>),
    /// Broadcast to the output shape: broadcast dims read with stride 0.
    Broadcast,
    /// The same elements in a new shape. Aliases contiguous memory; a
    /// non-contiguous input is copied first.
    Reshape,
    /// A dim of size 1 inserted at `axis`.
    ExpandDims(usize),
    /// The listed dims (all of size 1) removed.
    Squeeze(Vec<usize>),
}

impl ViewOp {
    pub fn name(&self) -> &'static str {
        match self {
            ViewOp::Transpose(_) => "transpose",
            ViewOp::Slice(_) => "slice",
            ViewOp::Broadcast => "broadcastTo",
            ViewOp::Reshape => "reshape",
            ViewOp::ExpandDims(_) => "expandDims",
            ViewOp::Squeeze(_) => "squeeze",
        }
    }
}

/// What an op computes.
#[derive(Debug, Clone, PartialEq)]
pub enum OpKind {
    // Host sources: values made on the CPU and copied into a new buffer.
    /// Values given by the caller (`tensor(values)`).
    Upload(Values),
    /// Seeded random values, made on the host so the same seed gives the
    /// same bits on every device and in both worlds.
    Random {
        dist: Distribution,
        seed: u64,
    },

    // Elementwise: the value at one output position depends only on the
    // inputs at the positions broadcasting maps it to. The planner fuses these.
    /// A constant (`zeros`, `ones`, `full`), in the op's dtype: an `f64`
    /// holds every float32 and every int32 exactly.
    Fill(f64),
    /// `start + i * step` at flat position `i`, computed in the op's dtype.
    Arange {
        start: f64,
        step: f64,
    },
    /// The input converted to the op's dtype: a float to an int truncated
    /// toward zero, saturating, NaN to 0; anything to a bool by whether it
    /// is non-zero (a NaN is).
    Cast,
    Unary(UnaryOp),
    /// `inputs[0] op inputs[1]`.
    Binary(BinaryOp),
    /// `inputs[0] op scalar`, or `scalar op inputs[0]` when `scalar_first`.
    BinaryScalar {
        op: BinaryOp,
        scalar: f32,
        scalar_first: bool,
    },
    Clamp {
        min: f32,
        max: f32,
    },
    /// `inputs[0] ? inputs[1] : inputs[2]`, the condition a bool.
    Where,
    /// `inputs[0]` (the table, read from memory) at the int32 index
    /// `inputs[1]` (the indices, viewed in the output's shape) along
    /// `axis`: TF.js's `gather`. The table's other coordinates are the
    /// output's, those before `axis` and those after the indices' dims. An
    /// index outside `[0, table.shape[axis])` is never read: the kernel
    /// flags it (`codegen`'s checks) and the tensor fails as `index`.
    /// `batch_dims` is kept for the gradient.
    Gather {
        axis: usize,
        batch_dims: usize,
    },
    /// `on` where the int32 `inputs[0]` (the indices, broadcast along the
    /// last dim) equals the position along the last dim, `off` elsewhere:
    /// TF.js's `oneHot`. An index outside `[0, depth)` gives a row of
    /// `off`, as in TensorFlow. `on` and `off` are in the op's dtype.
    OneHot {
        depth: usize,
        on: f64,
        off: f64,
    },

    /// No kernel: the output aliases the input's memory.
    View(ViewOp),

    // Kernels of their own.
    /// Combines the values along `axes` (sorted, distinct); the output holds
    /// one value per position of the other dims.
    Reduce {
        op: ReduceOp,
        axes: Vec<usize>,
    },
    /// The index (an int32) of the largest value along `axis`, or with
    /// `max` false of the smallest; the first on ties.
    ArgReduce {
        axis: usize,
        max: bool,
    },
    /// The running sums (or products) along `axis`, each excluding its own
    /// element when `exclusive`, from the end when `reverse`: TF.js's
    /// `cumsum` and `cumprod`.
    Scan {
        op: ScanOp,
        axis: usize,
        exclusive: bool,
        reverse: bool,
    },
    /// Batched matrix product with broadcast batch dims.
    Matmul,
    /// A 2-D convolution's pass (`conv2d`, its gradients, `conv2dTranspose`)
    /// over NHWC images and HWIO filters, an implicit matrix product on the
    /// matmul's tiles: inputs and shapes in `ConvPass`. A `depthwise` one
    /// (`depthwiseConv2d`) reads `[kh, kw, c, m]` filters, each input
    /// channel its own `m` outputs, and sums a window per output on its own
    /// kernel (`codegen::depthwise`); its passes are each other's
    /// gradients as a convolution's are.
    Conv {
        pass: ConvPass,
        geometry: ConvGeometry,
        depthwise: bool,
    },
    /// A pooling window's max or mean over NHWC images `[n, h, w, c]`,
    /// per channel: `[n, oh, ow, c]` (TF.js's `maxPool`, `avgPool`), the
    /// window of `size` placed as a convolution's (`ConvGeometry`; dilation
    /// 1). A mean counts only the window's positions inside the images.
    Pool {
        op: PoolOp,
        size: [usize; 2],
        geometry: ConvGeometry,
    },
    /// A pool's gradient for its images: of `[x, dy]` for a max (each
    /// window's gradient goes to its first largest element), of `[dy]`
    /// for a mean (shared by the window's positions inside the images);
    /// the images' shape.
    PoolGrad {
        op: PoolOp,
        size: [usize; 2],
        geometry: ConvGeometry,
    },
    /// The inputs joined along `axis`.
    Cat {
        axis: usize,
    },
    /// The input written row-major: what a read of a strided view asks for,
    /// so the copy is planned, checked against the limits and scoped like
    /// any other kernel.
    Copy,
    /// How a training step replaces a value all or nothing: `inputs[1 +
    /// take]` when none of `inputs[1..]` (the step's new values, its guards)
    /// carries a failure, else `inputs[0]` (the value before the step). The
    /// device decides once the guards' fate is known, on the CPU or when
    /// their submission settles (`device::commit`). No kernel: the output
    /// aliases the chosen input's memory.
    Commit {
        take: usize,
    },
    /// `inputs[0]`, failing with `inputs[1..]`: the cost a training step
    /// returns, which must reject when any part of the step failed, even a
    /// part it does not depend on (the backward pass, the update). No
    /// kernel: the output aliases `inputs[0]`'s memory.
    Guard,
}

impl OpKind {
    /// The op's user-facing name, as reports and errors print it.
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Upload(_) => "tensor",
            OpKind::Random {
                dist: Distribution::Uniform { .. },
                ..
            } => "randomUniform",
            OpKind::Random {
                dist: Distribution::Normal { .. },
                ..
            } => "randomNormal",
            OpKind::Fill(v) if *v == 0.0 => "zeros",
            OpKind::Fill(v) if *v == 1.0 => "ones",
            OpKind::Fill(_) => "full",
            OpKind::Arange { .. } => "arange",
            OpKind::Cast => "cast",
            OpKind::Unary(op) => op.name(),
            OpKind::Binary(op) | OpKind::BinaryScalar { op, .. } => op.name(),
            OpKind::Clamp { .. } => "clamp",
            OpKind::Where => "where",
            OpKind::OneHot { .. } => "oneHot",
            OpKind::Gather { .. } => "gather",
            OpKind::View(view) => view.name(),
            OpKind::Reduce { op, .. } => op.name(),
            OpKind::ArgReduce { max: true, .. } => "argMax",
            OpKind::ArgReduce { max: false, .. } => "argMin",
            OpKind::Scan {
                op: ScanOp::Sum, ..
            } => "cumsum",
            OpKind::Scan {
                op: ScanOp::Prod, ..
            } => "cumprod",
            OpKind::Matmul => "matmul",
            OpKind::Conv {
                pass, depthwise, ..
            } => pass.name(*depthwise),
            OpKind::Pool {
                op: PoolOp::Max, ..
            } => "maxPool",
            OpKind::Pool {
                op: PoolOp::Avg, ..
            } => "avgPool",
            OpKind::PoolGrad {
                op: PoolOp::Max, ..
            } => "maxPoolGrad",
            OpKind::PoolGrad {
                op: PoolOp::Avg, ..
            } => "avgPoolGrad",
            OpKind::Cat { .. } => "cat",
            OpKind::Copy => "copy",
            OpKind::Commit { .. } => "commit",
            OpKind::Guard => "guard",
        }
    }

    /// Whether every value it brings of its own is finite: an upload's
    /// values, a constant, a scalar operand. One that brings a NaN or an
    /// infinity makes a value a numerics check must not blame on the ops
    /// that meet it (`DeviceOptions::check_numerics`).
    pub fn adds_only_finite(&self) -> bool {
        match self {
            OpKind::Upload(values) => values.all_finite(),
            OpKind::Fill(v) => v.is_finite(),
            OpKind::BinaryScalar { scalar, .. } => scalar.is_finite(),
            OpKind::OneHot { on, off, .. } => on.is_finite() && off.is_finite(),
            _ => true,
        }
    }

    /// Whether it can make a non-finite value from finite operands: what
    /// the numerics checks look at (an op that cannot, as `tanh`, `max` or
    /// a `mul` by a scalar within [-1, 1], is not checked: each check costs
    /// a software adapter about as much as a cheap op). Elementwise ops
    /// only; the others (products, reductions) are checked where they
    /// anchor or write.
    pub fn can_make_non_finite(&self) -> bool {
        match self {
            OpKind::Unary(op) => matches!(
                op,
                UnaryOp::Exp
                    | UnaryOp::Log
                    | UnaryOp::Sqrt
                    | UnaryOp::Rsqrt
                    | UnaryOp::Square
                    // Finite for every float32 with exact sin and cos,
                    // but its size is 1/cos's: checked, so that a
                    // reduction error at a pole is seen, not read.
                    | UnaryOp::Tan
                    | UnaryOp::CheckNumerics
            ),
            OpKind::BinaryScalar {
                op: BinaryOp::Mul,
                scalar,
                ..
            } => scalar.abs() > 1.0,
            OpKind::BinaryScalar {
                op: BinaryOp::Div,
                scalar,
                scalar_first: false,
            } => scalar.abs() < 1.0,
            OpKind::Binary(op) | OpKind::BinaryScalar { op, .. } => matches!(
                op,
                BinaryOp::Add
                    | BinaryOp::Sub
                    | BinaryOp::Mul
                    | BinaryOp::Div
                    | BinaryOp::Pow
                    | BinaryOp::Mod
                    | BinaryOp::FloorDiv
            ),
            _ => false,
        }
    }

    /// Whether it is a product on the matmul's tiles (a matmul or a
    /// convolution's pass), which anchors the elementwise ops that follow.
    pub fn is_product(&self) -> bool {
        matches!(self, OpKind::Matmul | OpKind::Conv { .. })
    }

    /// Whether its numerics check looks at its operands: an elementwise op
    /// flags only a non-finite value it made from finite operands, so its
    /// flag is its own wherever it stands in a block. A `checkNumerics`
    /// flags any non-finite value, as an anchor's or a reduction's check
    /// does, so a flag of an op before it in its block is the cause.
    pub fn finite_check_sees_operands(&self) -> bool {
        self.is_elementwise() && !matches!(self, OpKind::Unary(UnaryOp::CheckNumerics))
    }

    /// Whether the planner may fuse this op into an elementwise kernel.
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            OpKind::Fill(_)
                | OpKind::Arange { .. }
                | OpKind::Cast
                | OpKind::Unary(_)
                | OpKind::Binary(_)
                | OpKind::BinaryScalar { .. }
                | OpKind::Clamp { .. }
                | OpKind::Where
                | OpKind::OneHot { .. }
                | OpKind::Gather { .. }
        )
    }
}

/// Every name `OpKind::name` gives an op a kernel can compute (not `commit`
/// or `guard`, which only alias memory), in a stable order: the names a
/// user may give (`injectFault({ op })`). Made from the kinds themselves,
/// so each name is spelled once, in `name`.
pub fn op_names() -> Vec<&'static str> {
    let uniform = Distribution::Uniform { min: 0.0, max: 1.0 };
    let normal = Distribution::Normal {
        mean: 0.0,
        std: 1.0,
    };
    let mut kinds = vec![
        OpKind::Upload(Values::float32(&[])),
        OpKind::Random {
            dist: uniform,
            seed: 0,
        },
        OpKind::Random {
            dist: normal,
            seed: 0,
        },
        OpKind::Fill(0.0),
        OpKind::Fill(1.0),
        OpKind::Fill(2.0),
        OpKind::Arange {
            start: 0.0,
            step: 1.0,
        },
        OpKind::Cast,
    ];
    kinds.extend(UnaryOp::ALL.map(OpKind::Unary));
    kinds.extend(BinaryOp::ALL.map(OpKind::Binary));
    kinds.push(OpKind::Clamp { min: 0.0, max: 1.0 });
    kinds.push(OpKind::Where);
    kinds.push(OpKind::OneHot {
        depth: 2,
        on: 1.0,
        off: 0.0,
    });
    kinds.push(OpKind::Gather {
        axis: 0,
        batch_dims: 0,
    });
    kinds.extend(
        [
            ViewOp::Transpose(Vec::new()),
            ViewOp::Slice(Vec::new()),
            ViewOp::Broadcast,
            ViewOp::Reshape,
            ViewOp::ExpandDims(0),
            ViewOp::Squeeze(Vec::new()),
        ]
        .map(OpKind::View),
    );
    kinds.extend(ReduceOp::ALL.map(|op| OpKind::Reduce {
        op,
        axes: Vec::new(),
    }));
    kinds.extend([
        OpKind::ArgReduce { axis: 0, max: true },
        OpKind::ArgReduce {
            axis: 0,
            max: false,
        },
        OpKind::Scan {
            op: ScanOp::Sum,
            axis: 0,
            exclusive: false,
            reverse: false,
        },
        OpKind::Scan {
            op: ScanOp::Prod,
            axis: 0,
            exclusive: false,
            reverse: false,
        },
        OpKind::Matmul,
    ]);
    for depthwise in [false, true] {
        kinds.extend(ConvPass::ALL.map(|pass| OpKind::Conv {
            pass,
            geometry: ConvGeometry::default(),
            depthwise,
        }));
    }
    for op in [PoolOp::Max, PoolOp::Avg] {
        let (size, geometry) = ([1, 1], ConvGeometry::default());
        kinds.push(OpKind::Pool { op, size, geometry });
        kinds.push(OpKind::PoolGrad { op, size, geometry });
    }
    kinds.extend([OpKind::Cat { axis: 0 }, OpKind::Copy]);
    kinds.iter().map(OpKind::name).collect()
}

/// The name of ops computed together, as reports name a kernel or a part
/// of one: their names joined by `+` (`zeros+add`).
pub fn fused_name<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names.into_iter().collect::<Vec<_>>().join("+")
}

/// One recorded op: it reads `inputs` and writes the new tensor `output`.
#[derive(Debug, Clone)]
pub struct OpIr {
    pub kind: OpKind,
    pub inputs: Vec<TensorId>,
    pub output: TensorId,
    pub shape: Vec<usize>,
    /// The output's dtype. An op's operands were given the dtypes it
    /// computes in at registration (`tensor::ops`: a cast is registered
    /// where TF.js would upcast), so codegen and the host read each value's
    /// type from the op that made it.
    pub dtype: DType,
    /// Its operands' bounds keep it from making a non-finite value
    /// (`bounds::derive`, at registration): the numerics checks skip it.
    pub proven_finite: bool,
    /// An intermediate of a composite op whose one non-finite value the
    /// op after it maps exactly to a finite one: the numerics checks skip
    /// it. Softmax's `x - logSumExp(x)` is at most 0 and, past float32's
    /// range, -Infinity, which `exp` makes the exact 0; a check there
    /// failed `softmax([3e38, 1e38, -3e38])`, whose value is `[1, 0, 0]`.
    /// Set once, at registration (`Device::record_unchecked`), and apart
    /// from `proven_finite`, which registration and the checks' switch
    /// recompute.
    pub unchecked: bool,
}

/// The ops registered on one device and not yet run, in registration order.
///
/// Registration order is a valid execution order (an op's inputs are always
/// registered before it), which the planner relies on.
#[derive(Debug, Default)]
pub struct Queue {
    ops: Vec<OpIr>,
}

impl Queue {
    pub fn push(&mut self, op: OpIr) {
        self.ops.push(op);
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// The queued ops, in registration order.
    pub fn ops(&self) -> &[OpIr] {
        &self.ops
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Marks the `i`th queued op proven finite or not: its operands'
    /// bounds, looked at again when the numerics checks switch on.
    pub fn set_proven_finite(&mut self, i: usize, proven: bool) {
        if let Some(op) = self.ops.get_mut(i) {
            op.proven_finite = proven;
        }
    }

    /// Everything queued, leaving the queue empty for the next registration.
    pub fn take(&mut self) -> Vec<OpIr> {
        std::mem::take(&mut self.ops)
    }
}

impl Queue {
    /// Whether a queued op writes `id`.
    pub fn produces(&self, id: TensorId) -> bool {
        self.ops.iter().any(|op| op.output == id)
    }
}

impl OpIr {
    /// Whether the numerics checks look at its value: a float that it can
    /// make non-finite from finite operands, with no non-finite value of
    /// the program's own among them, whose operands' bounds do not prove
    /// it finite, and that no composite op marked `unchecked`. The one
    /// rule codegen, the planner and the host check by.
    pub fn checks_finite(&self) -> bool {
        self.dtype == DType::Float32
            && !self.proven_finite
            && !self.unchecked
            && self.kind.can_make_non_finite()
            && self.kind.adds_only_finite()
    }
}

#[cfg(test)]
impl OpIr {
    /// An op for unit tests, its tensors named by number: `kind` reading
    /// `inputs` into `output`, of `shape`, a float32.
    pub fn of(kind: OpKind, inputs: &[u64], output: u64, shape: &[usize]) -> OpIr {
        OpIr {
            kind,
            inputs: inputs.iter().map(|&i| TensorId(i)).collect(),
            output: TensorId(output),
            shape: shape.to_vec(),
            dtype: DType::Float32,
            proven_finite: false,
            unchecked: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names_name_each_kernel_op_once_and_no_alias() {
        let names = op_names();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert_eq!(names.len(), 76, "every op a kernel computes: {names:?}");
        for name in [
            "tensor",
            "zeros",
            "sigmoid",
            "lessEqual",
            "squeeze",
            "logSumExp",
            "cumprod",
            "conv2d",
            "conv2dTranspose",
            "depthwiseConv2d",
            "maxPool",
            "avgPoolGrad",
            "copy",
        ] {
            assert!(names.contains(&name), "{name}");
        }
        assert!(!names.contains(&"commit") && !names.contains(&"guard"));
    }
}
