//! Kernels remembered by what they were generated from, so a loop's second
//! step generates no text: the same block on the same shapes gets the
//! kernel its first step got.
//!
//! Generating a kernel is the CPU's largest share of a flush on a real GPU:
//! a product's unrolled text is 26 KB, and natively on this machine W4's
//! training step spent 0.31 of its 1.0-1.3 ms of host time per flush
//! generating text (codegen timed inside `Lowering::block`).
//!
//! A key holds everything the generator reads, with tensor ids renamed to
//! where they first appear in the group: codegen compares ids, never reads
//! their values (but in a broken kernel's reason, which is not remembered),
//! so two groups equal up to that renaming generate the same text, words
//! and checks. It is those parts' bytes as `Hash` writes them, not a
//! struct of them: a struct's derived hash and comparison, inlined at each
//! call, cost about 9 KB of wasm. Floats are held as their bits, so `-0.0` and
//! `0.0` (and NaNs of different payloads) are different keys. A group
//! holding an op no key describes gets none, and its kernel is generated
//! every time: a missing key costs time, a wrong one would cost values.

use std::hash::{Hash, Hasher};
use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::ir::{BinaryOp, OpKind, TensorId, UnaryOp};

use super::kernel::{Access, Group, Kernel};
use super::reduce::{Fused, Lanes, OutputCheck, Reducer, Stage};

/// How many kernels are remembered. A program whose shapes keep changing
/// (a batch of every length) would otherwise grow the map without end. Past
/// this many, each new kernel takes the place of one the map holds (an
/// arbitrary one: the map keeps no order); emptying it instead would make a
/// loop of more kernels than this miss every time. W4's training step
/// launches 21.
const CAPACITY: usize = 256;

/// The kernels generated so far, by key.
#[derive(Default)]
pub struct Memo {
    kernels: FxHashMap<Key, Rc<Kernel>>,
}

// Neither method is generic, nor inlined into the generic code that calls
// both around its generator (`Lowering::generate`): one copy of the map's
// code serves every call site.
impl Memo {
    /// The kernel generated before for `key`.
    #[inline(never)]
    pub fn get(&self, key: Option<&Key>) -> Option<Rc<Kernel>> {
        self.kernels.get(key?).cloned()
    }

    /// Remembers `kernel` as `key`'s (with a key). A broken kernel is not
    /// remembered: its reason may name the tensors of the block it was
    /// generated for, and another block of the same key should name its own.
    #[inline(never)]
    pub fn insert(&mut self, key: Option<Key>, kernel: &Rc<Kernel>) {
        let Some(key) = key.filter(|_| kernel.broken.is_none()) else {
            return;
        };
        if self.kernels.len() >= CAPACITY {
            let evicted = self.kernels.keys().next().map(|k| Key(k.0.clone()));
            if let Some(evicted) = evicted {
                self.kernels.remove(&evicted);
            }
        }
        self.kernels.insert(key, kernel.clone());
    }
}

/// The generator a key is for: each reads its own arguments.
#[derive(Debug, Clone, Copy, Hash)]
pub enum Generator {
    Elementwise,
    /// `matmul`, or with its pass `conv`.
    Product,
    Reduce,
    Pool,
    PoolGrad,
    Scan,
    Copy,
    FiniteScan,
    FlagValue,
}

/// What one generator call reads, as the bytes `Hash` feeds a hasher: the
/// derived `Hash` of every part writes each field, a collection's length
/// before its items and an enum's variant before its fields, so two
/// different calls write different bytes, and the key compares them all
/// (a hash alone could collide).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Key(Vec<u8>);

/// A `Hasher` that keeps what it is fed (`Key`); it is never asked to
/// finish.
#[derive(Default)]
struct Record(Vec<u8>);

impl Hasher for Record {
    /// Not inlined: every field of every kernel's arguments is hashed
    /// through it, and a copy of the append in each was 8 KB of the module.
    #[inline(never)]
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        0
    }
}

impl Key {
    /// The key of `generator` called on `args` (all it reads but its
    /// elementwise groups) and `groups`; `None` where a group holds an op no
    /// key describes.
    pub fn of(
        generator: Generator,
        args: &impl Hash,
        groups: &[Option<&Group<'_>>],
    ) -> Option<Key> {
        let mut record = Record::default();
        generator.hash(&mut record);
        args.hash(&mut record);
        Key::with_groups(record, groups)
    }

    /// The rest of `of`, the same for every type of `args`.
    #[inline(never)]
    fn with_groups(mut record: Record, groups: &[Option<&Group<'_>>]) -> Option<Key> {
        groups.len().hash(&mut record);
        for group in groups {
            match group {
                None => 0u8.hash(&mut record),
                Some(group) => {
                    1u8.hash(&mut record);
                    renamed(group, &mut record)?;
                }
            }
        }
        Some(Key(record.0))
    }

    /// `of` for `codegen::reduce`, whose fused group may be a prologue or
    /// an epilogue.
    pub fn reduce(
        input: &Access,
        axes: &[usize],
        reducer: Reducer,
        stage: Stage,
        fused: &Fused<'_>,
        checked: Option<&OutputCheck<'_>>,
        lanes: Lanes,
    ) -> Option<Key> {
        let (how, group) = match fused {
            Fused::None => ((0u8, false), None),
            Fused::Prologue(group) => ((1, false), Some(group)),
            Fused::Epilogue(group, write) => ((2, *write), Some(group)),
        };
        let checked = checked.map(|c| (c.op, c.shape));
        let args = (input, axes, reducer, stage, how, checked, lanes);
        Key::of(Generator::Reduce, &args, &[group])
    }
}

/// Writes `group` with its tensor ids renamed: each id is the number of
/// distinct ids seen before its first appearance, walking the anchor, the
/// inputs, then each op's inputs and output, then the outputs. The
/// renaming keeps which places hold the same tensor, which is all the
/// generator asks of ids.
fn renamed(group: &Group<'_>, record: &mut Record) -> Option<()> {
    // A group reads tens of tensors: a search costs less code than a map.
    let mut seen: Vec<TensorId> = Vec::new();
    let mut ids = |ts: &[TensorId], record: &mut Record| {
        ts.len().hash(record);
        for &t in ts {
            let name = seen.iter().position(|&s| s == t).unwrap_or_else(|| {
                seen.push(t);
                seen.len() - 1
            });
            name.hash(record);
        }
    };
    let block = group.block;
    ids(group.anchor.as_slice(), record);
    ids(&block.inputs, record);
    group.accesses.hash(record);
    block.ops.len().hash(record);
    for &i in &block.ops {
        let op = group.ops.get(i)?;
        KindKey::of(&op.kind)?.hash(record);
        ids(&op.inputs, record);
        ids(std::slice::from_ref(&op.output), record);
        (&op.shape, op.dtype, op.proven_finite, op.unchecked).hash(record);
    }
    ids(&block.outputs, record);
    (&block.shape, group.numerics).hash(record);
    Some(())
}

/// The elementwise op kinds, floats as bits. Every kind a group can hold
/// is listed in `KindKey::of`, without a wildcard: a new kind does not
/// compile until it is keyed or refused a key there.
#[derive(Debug, PartialEq, Eq, Hash)]
enum KindKey {
    Fill(u64),
    Arange(u64, u64),
    Cast,
    Unary(UnaryOp),
    Binary(BinaryOp),
    BinaryScalar(BinaryOp, u32, bool),
    Clamp(u32, u32),
    Where,
    Gather(usize, usize),
    OneHot(usize, u64, u64),
}

impl KindKey {
    fn of(kind: &OpKind) -> Option<KindKey> {
        Some(match *kind {
            OpKind::Fill(value) => KindKey::Fill(value.to_bits()),
            OpKind::Arange { start, step } => KindKey::Arange(start.to_bits(), step.to_bits()),
            OpKind::Cast => KindKey::Cast,
            OpKind::Unary(op) => KindKey::Unary(op),
            OpKind::Binary(op) => KindKey::Binary(op),
            OpKind::BinaryScalar {
                op,
                scalar,
                scalar_first,
            } => KindKey::BinaryScalar(op, scalar.to_bits(), scalar_first),
            OpKind::Clamp { min, max } => KindKey::Clamp(min.to_bits(), max.to_bits()),
            OpKind::Where => KindKey::Where,
            OpKind::Gather { axis, batch_dims } => KindKey::Gather(axis, batch_dims),
            OpKind::OneHot { depth, on, off } => {
                KindKey::OneHot(depth, on.to_bits(), off.to_bits())
            }
            // Not elementwise: never in a group, and never keyed.
            OpKind::Upload(_)
            | OpKind::Random { .. }
            | OpKind::View(_)
            | OpKind::Reduce { .. }
            | OpKind::ArgReduce { .. }
            | OpKind::Scan { .. }
            | OpKind::Matmul
            | OpKind::Conv { .. }
            | OpKind::Pool { .. }
            | OpKind::PoolGrad { .. }
            | OpKind::Cat { .. }
            | OpKind::Copy
            | OpKind::Commit { .. }
            | OpKind::Guard => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::kernel::Numerics;
    use crate::fusion::ElementwiseBlock;
    use crate::ir::layout::Layout;
    use crate::ir::{DType, OpIr};

    /// `mul` of the block's inputs `a` and `b` (ids), writing `out`.
    fn product_of(a: u64, b: u64, out: u64) -> (ElementwiseBlock, Vec<OpIr>) {
        let inputs: Vec<TensorId> = crate::fusion::distinct(&[TensorId(a), TensorId(b)]).collect();
        let ops = vec![OpIr {
            kind: OpKind::Binary(BinaryOp::Mul),
            inputs: vec![TensorId(a), TensorId(b)],
            output: TensorId(out),
            shape: vec![4],
            dtype: DType::Float32,
            proven_finite: false,
            unchecked: false,
        }];
        let block = ElementwiseBlock {
            ops: vec![0],
            inputs,
            outputs: vec![TensorId(out)],
            shape: vec![4],
        };
        (block, ops)
    }

    fn key_of(block: &ElementwiseBlock, ops: &[OpIr]) -> Option<Key> {
        let access = Access {
            shape: vec![4],
            layout: Layout::contiguous(&[4]),
            dtype: DType::Float32,
        };
        let accesses = vec![access; block.inputs.len()];
        let group = Group {
            block,
            ops,
            accesses: &accesses,
            anchor: None,
            numerics: Numerics::Off,
        };
        Key::of(Generator::Elementwise, &(), &[Some(&group)])
    }

    #[test]
    fn groups_equal_but_for_their_tensor_ids_share_a_key_and_a_repeated_operand_does_not() {
        let (block, ops) = product_of(1, 2, 3);
        let (renamed, renamed_ops) = product_of(70, 40, 90);
        let (square, square_ops) = product_of(5, 5, 6);
        let key = key_of(&block, &ops);
        assert!(key.is_some());
        assert_eq!(key, key_of(&renamed, &renamed_ops));
        assert_ne!(key, key_of(&square, &square_ops), "x * x is not x * y");
    }

    fn kernel(broken: Option<&str>) -> Rc<Kernel> {
        Rc::new(Kernel {
            wgsl: String::new(),
            params: Vec::new(),
            scalars: Vec::new(),
            workgroups: 1,
            broken: broken.map(str::to_string),
            sizes: false,
            checks: Vec::new(),
        })
    }

    fn scan_key(n: usize) -> Option<Key> {
        Key::of(Generator::FiniteScan, &(vec![n], 0usize), &[])
    }

    #[test]
    fn a_full_memo_makes_room_one_kernel_at_a_time_and_keeps_no_broken_kernel() {
        let mut memo = Memo::default();
        for n in 0..CAPACITY + 10 {
            memo.insert(scan_key(n), &kernel(None));
            assert!(
                memo.get(scan_key(n).as_ref()).is_some(),
                "{n} was just remembered"
            );
        }
        assert_eq!(memo.kernels.len(), CAPACITY);
        let kept = (0..CAPACITY + 10)
            .filter(|&n| memo.get(scan_key(n).as_ref()).is_some())
            .count();
        assert_eq!(kept, CAPACITY, "ten were evicted, not all");
        memo.insert(
            scan_key(1_000_000),
            &kernel(Some("tensor #7 has no source")),
        );
        assert!(memo.get(scan_key(1_000_000).as_ref()).is_none());
    }

    #[test]
    fn a_group_holding_an_op_that_is_not_elementwise_has_no_key() {
        let (block, mut ops) = product_of(1, 2, 3);
        ops[0].kind = OpKind::Matmul;
        assert_eq!(key_of(&block, &ops), None);
    }
}
