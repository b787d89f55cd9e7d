//! WGSL for a planned block. Pure text: nothing here touches the GPU, so the
//! kernels can be read and tested without one.
//!
//! The text depends only on the block's structure (ops, ranks, which inputs
//! broadcast or are strided): every size, stride and scalar is a uniform word.
//! That makes the text itself the kernel cache's key, and a loop that repeats
//! the same ops on new data compiles each kernel once. The runtime may compile
//! a kernel with its scalars written in (`Kernel::specialized`) while they do
//! not change. Generating a text is itself remembered (`memo`), so a loop's
//! later steps generate none.
//!
//! Every kernel numbers its workgroups linearly (`wid.x + wid.y * groups.x`)
//! so the runtime can fold any count into a 2-D grid that stays within
//! `maxComputeWorkgroupsPerDimension`; a workgroup past the end returns.

mod conv;
mod elementwise;
mod kernel;
mod matmul;
mod memo;
mod pool;
mod reduce;
mod scan;

pub use conv::conv;
pub use elementwise::{copy, elementwise, finite_scan, flag_value, int_bounds};
pub use kernel::{Access, Check, CheckOf, Group, Kernel, Numerics};
pub use matmul::{copies_right_operand, matmul};
pub use memo::{Generator, Key, Memo};
pub use pool::{pool, pool_grad};
pub use reduce::{
    Fused, Lanes, OutputCheck, REDUCE_CHUNK, Reducer, Stage, Subgroups, reduce, reduces_per_thread,
};
pub use scan::scan;

#[cfg(test)]
mod tests {
    use super::kernel::*;
    use super::reduce::*;
    use super::*;
    use crate::fusion::ElementwiseBlock;

    /// `block` as a kernel of its own reads it.
    fn alone<'a>(
        block: &'a ElementwiseBlock,
        ops: &'a [OpIr],
        accesses: &'a [Access],
    ) -> Group<'a> {
        Group {
            block,
            ops,
            accesses,
            anchor: None,
            numerics: Numerics::Off,
        }
    }
    use crate::ir::layout::Layout;
    use crate::ir::{BinaryOp, DType, OpIr, OpKind, ReduceOp, TensorId, UnaryOp};

    fn contiguous(shape: &[usize]) -> Access {
        Access {
            shape: shape.to_vec(),
            layout: Layout::contiguous(shape),
            dtype: DType::Float32,
        }
    }

    fn exp_block(n: usize) -> (ElementwiseBlock, Vec<OpIr>) {
        let ops = vec![OpIr {
            kind: OpKind::Unary(UnaryOp::Exp),
            inputs: vec![TensorId(1)],
            output: TensorId(2),
            shape: vec![n],
            dtype: DType::Float32,
            proven_finite: false,
            unchecked: false,
        }];
        let block = ElementwiseBlock {
            ops: vec![0],
            inputs: vec![TensorId(1)],
            outputs: vec![TensorId(2)],
            shape: vec![n],
        };
        (block, ops)
    }

    /// A chain of `n` ops on input 1 (ids from 2): `add s`, `mul s`, then
    /// `maximum` with input 1 (a tensor operand), scalars changing by op.
    fn periodic_chain(n: usize) -> (ElementwiseBlock, Vec<OpIr>) {
        let ops: Vec<OpIr> = (0..n)
            .map(|k| {
                let (kind, inputs) = match k % 3 {
                    2 => (
                        OpKind::Binary(BinaryOp::Maximum),
                        vec![TensorId(k as u64 + 1), TensorId(1)],
                    ),
                    r => (
                        OpKind::BinaryScalar {
                            op: if r == 0 { BinaryOp::Add } else { BinaryOp::Mul },
                            scalar: k as f32 * 0.5,
                            scalar_first: false,
                        },
                        vec![TensorId(k as u64 + 1)],
                    ),
                };
                OpIr {
                    kind,
                    inputs,
                    output: TensorId(k as u64 + 2),
                    shape: vec![16],
                    dtype: DType::Float32,
                    proven_finite: false,
                    unchecked: false,
                }
            })
            .collect();
        let block = ElementwiseBlock {
            ops: (0..n).collect(),
            inputs: vec![TensorId(1)],
            outputs: vec![TensorId(n as u64 + 1)],
            shape: vec![16],
        };
        (block, ops)
    }

    #[test]
    fn a_long_periodic_chain_is_written_once_as_a_loop_over_a_table_of_scalars() {
        let text = |n: usize| {
            let (block, ops) = periodic_chain(n);
            elementwise(alone(&block, &ops, &[contiguous(&[16])]))
        };
        let (short, long) = (text(12), text(999));
        assert!(
            !short.wgsl.contains("for (var it"),
            "12 ops stay written out"
        );
        assert!(
            long.wgsl.contains("for (var it = 0u; it < 332u;"),
            "{}",
            long.wgsl
        );
        assert!(long.wgsl.len() < 4000, "{} bytes", long.wgsl.len());
        // The scalars live in the words, not in the text, written in or not.
        let (block, mut ops) = periodic_chain(999);
        ops[501].kind = OpKind::BinaryScalar {
            op: BinaryOp::Add,
            scalar: -7.0,
            scalar_first: false,
        };
        let other = elementwise(alone(&block, &ops, &[contiguous(&[16])]));
        assert_eq!(other.wgsl, long.wgsl);
        assert_eq!(other.specialized(), long.specialized());
        assert_ne!(other.params, long.params);
        assert!(long.broken.is_none());
    }

    #[test]
    fn the_kernel_text_does_not_depend_on_sizes() {
        let make = |n: usize| {
            let (block, ops) = exp_block(n);
            elementwise(alone(&block, &ops, &[contiguous(&[n])]))
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
                dtype: DType::Float32,
                proven_finite: false,
                unchecked: false,
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
                dtype: DType::Float32,
                proven_finite: false,
                unchecked: false,
            },
        ];
        let block = ElementwiseBlock {
            ops: vec![0, 1],
            inputs: vec![TensorId(1)],
            outputs: vec![TensorId(3)],
            shape: vec![4],
        };
        let kernel = elementwise(alone(&block, &ops, &[contiguous(&[4])]));
        let text = kernel.specialized();
        assert!(text.contains("bitcast<f32>(0x3dcccccdu)"), "{text}");
        assert!(
            !text.contains("0x7f800000u)"),
            "infinity stays a uniform: {text}"
        );
        assert_eq!(text.matches("bitcast<f32>(param(").count(), 1, "{text}");
        assert!(text.contains("param(0u)"), "sizes stay uniforms: {text}");
        assert_eq!(
            kernel.written_words(),
            [0.1f32.to_bits(), f32::INFINITY.to_bits()]
        );
    }

    #[test]
    fn a_products_specialised_text_writes_in_its_sizes_and_still_reads_the_params() {
        let (block, ops) = exp_block(0);
        let epilogue = Group {
            block: &block,
            ops: &ops,
            accesses: &[],
            anchor: Some(ops[0].output),
            numerics: Numerics::Off,
        };
        let (a, b) = (contiguous(&[40, 12]), contiguous(&[12, 24]));
        let kernel = matmul(&a, &b, &[40, 24], epilogue, false);
        let text = kernel.specialized();
        assert!(!text.contains("param(0u)"), "{text}");
        assert!(text.contains("_ = params[0];"), "{text}");
        assert_eq!(kernel.written_words(), kernel.params);
        // Another size set: the same text, other words.
        let other = matmul(
            &contiguous(&[40, 16]),
            &contiguous(&[16, 24]),
            &[40, 24],
            epilogue,
            false,
        );
        assert_eq!(other.wgsl, kernel.wgsl);
        assert_ne!(other.written_words(), kernel.written_words());
    }

    #[test]
    fn matmul_loads_an_operand_by_vectors_only_along_its_aligned_contiguous_dim() {
        let (block, ops) = exp_block(0);
        let epilogue = Group {
            block: &block,
            ops: &ops,
            accesses: &[],
            anchor: Some(ops[0].output),
            numerics: Numerics::Off,
        };
        let declared = |a: &Access, b: &Access, out: &[usize]| {
            let text = matmul(a, b, out, epilogue, false).wgsl;
            (
                text.contains("in0: array<vec4<f32>>"),
                text.contains("in1: array<vec4<f32>>"),
            )
        };
        // Products 64 wide each way (the square tile, whose slices hold
        // whole vectors for every thread).
        assert_eq!(
            declared(&contiguous(&[64, 12]), &contiguous(&[12, 64]), &[64, 64]),
            (true, true)
        );
        // k = 6: a's rows are not 16-byte aligned; b's (n = 64) are.
        assert_eq!(
            declared(&contiguous(&[64, 6]), &contiguous(&[6, 64]), &[64, 64]),
            (false, true)
        );
        // A transposed left operand is loaded four at a time down its
        // columns (along the tile) in either kernel where m is a multiple
        // of four, else one by one; a transposed right one four at a time
        // down its columns in a GPU's 8x8 kernel (1024 square) where k is
        // a multiple of four, else one by one; the other operand four at a
        // time along its rows.
        let transposed = |k: usize, n: usize| Access {
            shape: vec![k, n],
            layout: Layout {
                offset: 0,
                strides: vec![1, k],
            },
            dtype: DType::Float32,
        };
        let large = [1024, 1024];
        assert_eq!(
            declared(&contiguous(&[1024, 12]), &transposed(12, 1024), &large),
            (true, true)
        );
        assert_eq!(
            declared(&contiguous(&[1024, 6]), &transposed(6, 1024), &large),
            (false, false)
        );
        assert_eq!(
            declared(&transposed(1024, 12), &contiguous(&[12, 1024]), &large),
            (true, true)
        );
        assert_eq!(
            declared(
                &transposed(1026, 12),
                &contiguous(&[12, 1024]),
                &[1026, 1024]
            ),
            (false, true)
        );
        assert_eq!(
            declared(&transposed(64, 12), &contiguous(&[12, 64]), &[64, 64]),
            (true, true)
        );
        assert_eq!(
            declared(&contiguous(&[64, 12]), &transposed(12, 64), &[64, 64]),
            (true, false)
        );
        // A tile narrower than 64 stages one element at a time.
        assert_eq!(
            declared(&contiguous(&[8, 12]), &contiguous(&[12, 16]), &[8, 16]),
            (false, false)
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
            dtype: DType::Float32,
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
            dtype: DType::Float32,
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
            Reducer::Fold(ReduceOp::Sum),
            Stage::PerThread,
            Fused::None,
            None,
            Lanes::for_device(false, None),
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
            dtype: DType::Float32,
        };
        let kernel = elementwise(alone(&block, &ops, std::slice::from_ref(&transposed)));
        assert!(kernel.wgsl.contains("c0 * param"), "{}", kernel.wgsl);
        assert_ne!(
            kernel.wgsl,
            elementwise(alone(&block, &ops, &[contiguous(&[2, 3])])).wgsl
        );
    }

    #[test]
    fn a_reduction_launches_one_workgroup_per_output_value() {
        let kernel = reduce(
            &contiguous(&[4, 5, 6]),
            &[1],
            Reducer::Fold(ReduceOp::Sum),
            Stage::Whole,
            Fused::None,
            None,
            Lanes::for_device(false, None),
        );
        assert_eq!(kernel.workgroups, 24);
    }

    #[test]
    fn a_gpu_s_reduction_workgroup_has_no_more_threads_than_elements_down_to_32() {
        let width = |rows: usize, cpu: bool| {
            let kernel = reduce(
                &contiguous(&[3, rows]),
                &[1],
                Reducer::Fold(ReduceOp::Sum),
                Stage::Whole,
                Fused::None,
                None,
                Lanes::for_device(cpu, None),
            );
            let at = kernel
                .wgsl
                .find("@workgroup_size(")
                .expect("a workgroup size");
            let rest = &kernel.wgsl[at + 16..];
            rest[..rest.find(')').expect("closed")].to_string()
        };
        assert_eq!(width(10, false), "32");
        assert_eq!(width(33, false), "64");
        assert_eq!(width(200, false), "256");
        assert_eq!(width(8192, false), "256");
        assert_eq!(width(8192, true), "32", "a CPU adapter's stay at 32");
    }

    #[test]
    fn a_checked_reduction_checks_each_value_it_writes_and_binds_its_flags_after_its_output() {
        let out = [4, 6];
        let checked = Some(OutputCheck { op: 2, shape: &out });
        for stage in [Stage::Whole, Stage::PerThread, Stage::Final] {
            let kernel = reduce(
                &contiguous(&[4, 5, 6]),
                &[1],
                Reducer::Fold(ReduceOp::Sum),
                stage,
                Fused::None,
                checked,
                Lanes::for_device(false, None),
            );
            assert_eq!(bindings(&kernel.wgsl), [0, 1, 2, 3], "{}", kernel.wgsl);
            assert!(kernel.wgsl.contains("flags: array<atomic<u32>>"));
            assert!(
                kernel.wgsl.contains("if (nonfinite(done))"),
                "{}",
                kernel.wgsl
            );
            assert_eq!(
                kernel.checks,
                [Check {
                    op: 2,
                    of: CheckOf::Finite,
                    shape: out.to_vec(),
                }]
            );
        }
        // A first stage writes partials, not values: nothing to check yet.
        let first = reduce(
            &contiguous(&[4, 5, 6]),
            &[1],
            Reducer::Fold(ReduceOp::Sum),
            Stage::First { splits: 2 },
            Fused::None,
            checked,
            Lanes::for_device(false, None),
        );
        assert!(first.checks.is_empty());
        assert!(!first.wgsl.contains("flags"), "{}", first.wgsl);
    }

    #[test]
    fn matmul_launches_one_workgroup_per_output_tile_and_batch() {
        // 64x64 tiles: 100 rows take 2, 70 columns take 2.
        let product = OpIr {
            kind: OpKind::Matmul,
            inputs: vec![TensorId(1), TensorId(2)],
            output: TensorId(3),
            shape: vec![3, 100, 70],
            dtype: DType::Float32,
            proven_finite: false,
            unchecked: false,
        };
        let block = ElementwiseBlock {
            ops: vec![],
            inputs: vec![],
            outputs: vec![TensorId(3)],
            shape: vec![3, 100, 70],
        };
        let kernel = matmul(
            &contiguous(&[3, 100, 8]),
            &contiguous(&[8, 70]),
            &[3, 100, 70],
            Group {
                block: &block,
                ops: std::slice::from_ref(&product),
                accesses: &[],
                anchor: Some(product.output),
                numerics: Numerics::Off,
            },
            false,
        );
        assert_eq!(kernel.workgroups, 3 * 2 * 2);
    }

    /// The `@binding(N)` numbers a kernel's text declares, in order.
    fn bindings(wgsl: &str) -> Vec<usize> {
        wgsl.match_indices("@binding(")
            .map(|(at, m)| {
                let rest = &wgsl[at + m.len()..];
                rest[..rest.find(')').unwrap()].parse().unwrap()
            })
            .collect()
    }

    #[test]
    fn a_checked_group_declares_its_flags_after_every_other_binding_and_checks_each_float_op() {
        let (block, ops) = exp_block(8);
        let accesses = [contiguous(&[8])];
        let checked = |numerics| Group {
            numerics,
            ..alone(&block, &ops, &accesses)
        };
        let kernel = elementwise(checked(Numerics::Ops));
        assert_eq!(bindings(&kernel.wgsl), [0, 1, 2, 3], "{}", kernel.wgsl);
        assert!(
            kernel.wgsl.contains("flags: array<atomic<u32>>"),
            "{}",
            kernel.wgsl
        );
        assert_eq!(
            kernel.checks,
            [Check {
                op: 0,
                of: CheckOf::Finite,
                shape: vec![8],
            }]
        );
        assert!(
            kernel.wgsl.contains("if (nonfinite(v0) && !nonfinite(x0))"),
            "{}",
            kernel.wgsl
        );
        assert!(elementwise(checked(Numerics::Off)).checks.is_empty());
        // A row reduction that writes its value binds it after the
        // epilogue's outputs: the flags come after that, and the anchor
        // (the block's first op) is checked too.
        let reduced = OpIr {
            kind: OpKind::Reduce {
                op: ReduceOp::Sum,
                axes: vec![1],
            },
            inputs: vec![TensorId(10)],
            output: TensorId(1),
            shape: vec![4, 1],
            dtype: DType::Float32,
            proven_finite: false,
            unchecked: false,
        };
        let mut all = ops.clone();
        all[0].shape = vec![4, 2];
        all.push(reduced);
        let rows = ElementwiseBlock {
            shape: vec![4, 2],
            inputs: vec![],
            ..block.clone()
        };
        let group = Group {
            block: &rows,
            ops: &all,
            accesses: &[],
            anchor: Some(TensorId(1)),
            numerics: Numerics::OpsAndAnchor,
        };
        let kernel = reduce(
            &contiguous(&[4, 2]),
            &[1],
            Reducer::Fold(ReduceOp::Sum),
            Stage::Whole,
            Fused::Epilogue(group, true),
            None,
            Lanes::for_device(false, None),
        );
        let declared = bindings(&kernel.wgsl);
        let mut distinct = declared.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), declared.len(), "{}", kernel.wgsl);
        let flags = kernel.wgsl.find("var<storage, read_write> flags").unwrap();
        let last = kernel.wgsl[..flags].rfind("@binding(").unwrap();
        assert_eq!(bindings(&kernel.wgsl[last..])[0], *distinct.last().unwrap());
        assert_eq!(
            kernel.checks.first().map(|c| c.op),
            Some(0),
            "the anchor first"
        );
        assert_eq!(kernel.checks.len(), 2, "the anchor and the exp");
    }
}
