//! The recorded op: what registration leaves behind and the planner consumes.
//!
//! An [`OpIr`] names tensors by [`TensorId`], never by handle, so a queued op
//! does not keep a tensor's handle alive: the device counts the queue's uses of
//! each tensor itself (see `device::Record::uses`), which is what lets the
//! planner know that an intermediate nobody holds need never touch memory.

use std::fmt;
use std::rc::Rc;

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
}

impl UnaryOp {
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
}

impl BinaryOp {
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
        }
    }
}

/// What an op computes. Every kind here is elementwise over its output: the
/// value at one output position depends only on the inputs at the positions
/// broadcasting maps it to. That is the property the planner fuses on.
#[derive(Debug, Clone, PartialEq)]
pub enum OpKind {
    /// Host values copied into a new buffer (`tensor(values)`).
    Upload(Rc<[f32]>),
    /// A constant (`zeros`, `ones`, `full`).
    Fill(f32),
    Unary(UnaryOp),
    /// `inputs[0] op inputs[1]`.
    Binary(BinaryOp),
    /// `inputs[0] op scalar`, or `scalar op inputs[0]` when `scalar_first`.
    BinaryScalar {
        op: BinaryOp,
        scalar: f32,
        scalar_first: bool,
    },
}

impl OpKind {
    /// The op's user-facing name, as reports and errors print it.
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Upload(_) => "tensor",
            OpKind::Fill(v) if *v == 0.0 => "zeros",
            OpKind::Fill(v) if *v == 1.0 => "ones",
            OpKind::Fill(_) => "full",
            OpKind::Unary(op) => op.name(),
            OpKind::Binary(op) | OpKind::BinaryScalar { op, .. } => op.name(),
        }
    }
}

/// One recorded op: it reads `inputs` and writes the new tensor `output`.
#[derive(Debug, Clone)]
pub struct OpIr {
    pub kind: OpKind,
    pub inputs: Vec<TensorId>,
    pub output: TensorId,
    pub shape: Vec<usize>,
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

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
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
