//! Indexing: `gather` and `unsortedSegmentSum`, their gradients, and the
//! in-kernel check that fails a gather whose index leaves its table.

use webfusion::{DType, Device, ErrorClass, FailureKind, Tensor, Values};

use super::engine::{device, kernels_only, read_err};

async fn both() -> Vec<(&'static str, Device)> {
    vec![("host", device().await), ("kernels", kernels_only().await)]
}

fn ints(gpu: &Device, v: &[i32], shape: &[usize]) -> Tensor {
    gpu.tensor_of(Values::int32(v), Some(shape)).unwrap()
}

async fn floats(t: &Tensor) -> Vec<f32> {
    t.to_vec().await.expect("the tensor reads")
}

/// `gather` computed on the CPU: `table` (row-major, of `shape`) along
/// `axis` at `idx` (of `idx_shape`), no batch dims.
fn reference(table: &[f32], shape: &[usize], idx: &[i32], axis: usize) -> Vec<f32> {
    let before: usize = shape[..axis].iter().product();
    let after: usize = shape[axis + 1..].iter().product();
    let mut out = Vec::new();
    for p in 0..before {
        for &i in idx {
            let row = p * shape[axis] + i as usize;
            out.extend_from_slice(&table[row * after..(row + 1) * after]);
        }
    }
    out
}

pub async fn gather_reads_slices_along_any_axis_and_batch_dims_as_tf_js_does() {
    let table: Vec<f32> = (0..24).map(|v| v as f32).collect();
    for (name, gpu) in both().await {
        let t = gpu.tensor(&table, Some(&[2, 3, 4])).unwrap();
        for axis in 0..3 {
            let dim = [2, 3, 4][axis];
            let idx: Vec<i32> = vec![dim - 1, 0, dim - 1, 1 % dim];
            let i = ints(&gpu, &idx, &[2, 2]);
            let g = t.gather(&i, axis as isize, 0).unwrap();
            let mut shape = vec![2usize, 3, 4];
            shape.splice(axis..=axis, [2, 2]);
            assert_eq!(g.shape(), shape.as_slice(), "{name}: axis {axis}");
            assert_eq!(
                floats(&g).await,
                reference(&table, &[2, 3, 4], &idx, axis),
                "{name}: axis {axis}"
            );
        }
        // A negative axis counts from the end; a transposed table is read
        // through its layout.
        let i = ints(&gpu, &[3, 0], &[2]);
        let last = t.gather(&i, -1, 0).unwrap();
        assert_eq!(
            floats(&last).await,
            reference(&table, &[2, 3, 4], &[3, 0], 2)
        );
        let tt = t.transpose(Some(&[2, 1, 0])).unwrap();
        let rows = tt.gather(&ints(&gpu, &[1], &[1]), 0, 0).unwrap();
        assert_eq!(
            floats(&rows).await,
            [1.0, 13.0, 5.0, 17.0, 9.0, 21.0],
            "{name}"
        );
        // batchDims 1: each batch picks from its own table.
        let picks = ints(&gpu, &[2, 0, 1, 1], &[2, 2]);
        let batched = t.gather(&picks, 1, 1).unwrap();
        assert_eq!(batched.shape(), &[2, 2, 4]);
        assert_eq!(
            floats(&batched).await,
            [
                8.0, 9.0, 10.0, 11.0, 0.0, 1.0, 2.0, 3.0, // batch 0: rows 2, 0
                16.0, 17.0, 18.0, 19.0, 16.0, 17.0, 18.0, 19.0 // batch 1: rows 1, 1
            ],
            "{name}"
        );
        // An int32 table stays exact.
        let big = ints(&gpu, &[i32::MAX, 16_777_217, -5], &[3]);
        let got = big.gather(&ints(&gpu, &[1, 0, 2, 1], &[4]), 0, 0).unwrap();
        assert_eq!(got.dtype(), DType::Int32);
        assert_eq!(
            got.values().await.unwrap().to_i32(),
            [16_777_217, i32::MAX, -5, 16_777_217],
            "{name}"
        );
    }
}

pub async fn an_index_outside_the_table_fails_its_gather_and_what_reads_it_naming_the_index() {
    for (name, gpu) in both().await {
        let table = gpu
            .tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], Some(&[3, 2]))
            .unwrap();
        let idx = ints(&gpu, &[0, 2, 7, 1, -1], &[5]);
        let rows = table.gather(&idx, 0, 0).unwrap();
        let shifted = rows.add(1.0).unwrap();
        let total = shifted.sum(None, false).unwrap();
        let unrelated = table.mul(2.0).unwrap();
        let error = read_err(&total).await;
        let report = &error.failures[0];
        assert_eq!(report.root.kind, FailureKind::Index, "{name}: {error}");
        assert_eq!(report.root.op, "gather", "{name}: {error}");
        assert!(
            report.root.message.contains("index 7 at [2]")
                && report.root.message.contains("[0, 3)"),
            "{name}: the first offending position and its value: {error}"
        );
        assert!(report.depth >= 1, "{name}: the sum is below the failure");
        for t in [&rows, &shifted] {
            let e = read_err(t).await;
            assert_eq!(e.failures[0].failure, report.failure, "{name}: one failure");
        }
        assert_eq!(
            floats(&unrelated).await,
            [2.0, 4.0, 6.0, 8.0, 10.0, 12.0],
            "{name}: an unrelated tensor reads"
        );
        drop((rows, shifted, total, error));
        assert_eq!(
            gpu.stats().failures_held,
            0,
            "{name}: freed with its carriers"
        );
        // The device keeps working, and a gather in range reads.
        let ok = table.gather(&ints(&gpu, &[2, 0], &[2]), 0, 0).unwrap();
        assert_eq!(floats(&ok).await, [5.0, 6.0, 1.0, 2.0], "{name}");
        let negative = table.gather(&ints(&gpu, &[-1], &[1]), 0, 0).unwrap();
        let e = read_err(&negative).await;
        assert!(
            e.failures[0].root.message.contains("index -1 at [0]"),
            "{name}: {e}"
        );
    }
}

pub async fn a_gather_and_the_elementwise_ops_reading_it_are_one_kernel() {
    let gpu = kernels_only().await;
    // An embedding lookup plus a position embedding, then an activation.
    let vocab = gpu.random_normal(&[50, 16], 0.0, 1.0, 3).unwrap();
    let positions = gpu.random_normal(&[8, 16], 0.0, 1.0, 4).unwrap();
    let tokens = ints(&gpu, &[3, 1, 4, 1, 5, 9, 2, 6], &[8]);
    let (v, p) = (floats(&vocab).await, floats(&positions).await);
    let _ = tokens.values().await.unwrap();
    let before = gpu.stats();
    let x = vocab
        .gather(&tokens, 0, 0)
        .unwrap()
        .add(&positions)
        .unwrap()
        .relu()
        .unwrap();
    let got = floats(&x).await;
    let after = gpu.stats();
    let want: Vec<f32> = [3, 1, 4, 1, 5, 9, 2, 6]
        .iter()
        .enumerate()
        .flat_map(|(r, &t)| (0..16).map(move |c| (r, t as usize, c)))
        .map(|(r, t, c)| (v[t * 16 + c] + p[r * 16 + c]).max(0.0))
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        after.fused_ops - before.fused_ops,
        3,
        "gather+add+relu in one kernel"
    );
    assert_eq!(
        after.kernels_launched - before.kernels_launched,
        2,
        "the fused kernel and its check's one-thread kernel"
    );
    assert_eq!(
        after.buffers_allocated - before.buffers_allocated,
        2,
        "the result and the check's flags: no intermediate"
    );
    // Two lookups summed: the second gather's view of its indices is
    // registered while the first's kernel is open, and still joins it.
    let other = ints(&gpu, &[0, 2, 4, 6, 8, 10, 12, 14], &[8]);
    let _ = other.values().await.unwrap();
    let before = gpu.stats();
    let both = vocab
        .gather(&tokens, 0, 0)
        .unwrap()
        .add(&vocab.gather(&other, 0, 0).unwrap())
        .unwrap();
    let got = floats(&both).await;
    let after = gpu.stats();
    let v = &v;
    let want: Vec<f32> = [3, 1, 4, 1, 5, 9, 2, 6]
        .iter()
        .zip([0, 2, 4, 6, 8, 10, 12, 14])
        .flat_map(|(&t, o)| (0..16).map(move |c| v[t * 16 + c] + v[o * 16 + c]))
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        after.fused_ops - before.fused_ops,
        3,
        "both gathers and the add in one kernel"
    );
    assert_eq!(
        after.kernels_launched - before.kernels_launched,
        3,
        "the fused kernel and each gather's one-thread check"
    );
}

pub async fn the_gradient_of_gather_sums_into_the_rows_it_read() {
    for (name, gpu) in both().await {
        let table: Vec<f32> = (0..15).map(|v| v as f32 * 0.5).collect();
        let t = gpu.tensor(&table, Some(&[5, 3])).unwrap();
        let w = gpu
            .tensor(
                &(0..12).map(|v| v as f32).collect::<Vec<_>>(),
                Some(&[4, 3]),
            )
            .unwrap();
        let idx = ints(&gpu, &[0, 2, 0, 4], &[4]);
        let g = gpu
            .grad(
                |t| t.gather(&idx, 0, 0)?.mul(&w)?.sum(None, false),
                &t,
                None,
            )
            .unwrap();
        let mut want = vec![0.0f32; 15];
        for (r, &i) in [0usize, 2, 0, 4].iter().enumerate() {
            for c in 0..3 {
                want[i * 3 + c] += (r * 3 + c) as f32;
            }
        }
        assert_eq!(floats(&g).await, want, "{name}: axis 0, a row read twice");
        // Along axis 1, batched over the dims before it.
        let t3 = gpu.tensor(&table[..12], Some(&[2, 3, 2])).unwrap();
        let idx = ints(&gpu, &[2, 2, 1], &[3]);
        let g = gpu
            .grad(
                |t| t.gather(&idx, 1, 0)?.square()?.sum(None, false),
                &t3,
                None,
            )
            .unwrap();
        let mut want = vec![0.0f32; 12];
        for b in 0..2 {
            for &i in &[2usize, 2, 1] {
                for c in 0..2 {
                    let k = b * 6 + i * 2 + c;
                    want[k] += 2.0 * table[k];
                }
            }
        }
        assert_eq!(floats(&g).await, want, "{name}: axis 1");
        // batchDims 1: each batch's rows get what its own indices read.
        let idx = ints(&gpu, &[2, 2, 0, 1], &[2, 2]);
        let g = gpu
            .grad(
                |t| t.gather(&idx, 1, 1)?.square()?.sum(None, false),
                &t3,
                None,
            )
            .unwrap();
        let mut want = vec![0.0f32; 12];
        for (b, picks) in [[2usize, 2], [0, 1]].iter().enumerate() {
            for &i in picks {
                for c in 0..2 {
                    let k = b * 6 + i * 2 + c;
                    want[k] += 2.0 * table[k];
                }
            }
        }
        assert_eq!(floats(&g).await, want, "{name}: batchDims 1");
        // batchDims 1 along a later axis, with a dim between them and one
        // after: t4 [2, 2, 3, 2], the indices [2, 2], the output [2, 2, 2, 2].
        let t4 = gpu
            .tensor(
                &(0..24).map(|v| v as f32).collect::<Vec<_>>(),
                Some(&[2, 2, 3, 2]),
            )
            .unwrap();
        let weights = gpu
            .tensor(
                &(0..16).map(|v| v as f32 + 1.0).collect::<Vec<_>>(),
                Some(&[2, 2, 2, 2]),
            )
            .unwrap();
        let picks = [[2usize, 0], [1, 1]];
        let idx = ints(&gpu, &[2, 0, 1, 1], &[2, 2]);
        let g = gpu
            .grad(
                |t| t.gather(&idx, 2, 1)?.mul(&weights)?.sum(None, false),
                &t4,
                None,
            )
            .unwrap();
        let mut want = vec![0.0f32; 24];
        for (b, picked) in picks.iter().enumerate() {
            for i in 0..2 {
                for (k, &r) in picked.iter().enumerate() {
                    for c in 0..2 {
                        want[((b * 2 + i) * 3 + r) * 2 + c] +=
                            (((b * 2 + i) * 2 + k) * 2 + c) as f32 + 1.0;
                    }
                }
            }
        }
        assert_eq!(floats(&g).await, want, "{name}: batchDims 1, axis 2");
    }
}

pub async fn unsorted_segment_sum_adds_slices_by_segment_and_drops_ids_outside() {
    for (name, gpu) in both().await {
        let x = gpu
            .tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], Some(&[4, 2]))
            .unwrap();
        let ids = ints(&gpu, &[2, 0, 2, 5], &[4]);
        let s = x.unsorted_segment_sum(&ids, 3).unwrap();
        assert_eq!(s.shape(), &[3, 2]);
        assert_eq!(
            floats(&s).await,
            [3.0, 4.0, 0.0, 0.0, 6.0, 8.0],
            "{name}: id 5 adds nowhere"
        );
    }
}

pub async fn gather_and_segment_sums_refuse_bad_calls_and_queue_nothing() {
    let gpu = device().await;
    let t = gpu.tensor(&[1.0, 2.0, 3.0, 4.0], Some(&[2, 2])).unwrap();
    let i = ints(&gpu, &[0, 1], &[2]);
    let f = gpu.tensor(&[0.0, 1.0], None).unwrap();
    let before = gpu.stats().ops_registered;
    // A value out of range is a RangeError; operands that do not fit each
    // other an Error, as `add`'s are, and so is a tensor of the wrong dtype
    // (TF.js's "must be int32 tensor").
    let (range, other) = (ErrorClass::Range, ErrorClass::Other);
    let refused = [
        ("gather", t.gather(&f, 0, 0).err(), "int32", other),
        ("gather", t.gather(&i, 2, 0).err(), "axis 2", range),
        ("gather", t.gather(&i, 0, 1).err(), "batchDims", range),
        (
            "gather",
            t.gather(&ints(&gpu, &[0, 1, 0], &[3, 1]), 1, 1).err(),
            "batchDims",
            other,
        ),
        (
            "unsortedSegmentSum",
            t.unsorted_segment_sum(&f, 2).err(),
            "int32",
            other,
        ),
        (
            "unsortedSegmentSum",
            t.unsorted_segment_sum(&i, 0).err(),
            "numSegments",
            range,
        ),
        (
            "unsortedSegmentSum",
            t.unsorted_segment_sum(&ints(&gpu, &[0, 1, 0], &[3]), 2)
                .err(),
            "leading dims",
            other,
        ),
    ];
    // Two tensors were made for cases (the [3, 1] and [3] indices).
    let made = 2;
    for (op, error, says, class) in refused {
        let error = error.unwrap_or_else(|| panic!("{op} was not refused"));
        assert_eq!(error.op, op, "{error}");
        assert!(error.to_string().contains(says), "{error}");
        assert_eq!(error.class, class, "{error}");
    }
    assert_eq!(
        gpu.stats().ops_registered,
        before + made,
        "nothing else queued"
    );
}

pub async fn cumsum_runs_along_any_axis_exclusive_and_reversed_with_its_gradient() {
    let x: Vec<f32> = (1..=12).map(|v| v as f32).collect();
    for (name, gpu) in both().await {
        let t = gpu.tensor(&x, Some(&[3, 4])).unwrap();
        let rows = t.cumsum(1, false, false).unwrap();
        assert_eq!(
            floats(&rows).await,
            [
                1.0, 3.0, 6.0, 10.0, 5.0, 11.0, 18.0, 26.0, 9.0, 19.0, 30.0, 42.0
            ],
            "{name}"
        );
        let exclusive = t.cumsum(1, true, false).unwrap();
        assert_eq!(
            floats(&exclusive).await[..4],
            [0.0, 1.0, 3.0, 6.0],
            "{name}"
        );
        let reverse = t.cumsum(-1, false, true).unwrap();
        assert_eq!(floats(&reverse).await[..4], [10.0, 9.0, 7.0, 4.0], "{name}");
        let both_ways = t.cumsum(0, true, true).unwrap();
        assert_eq!(
            floats(&both_ways).await,
            [
                14.0, 16.0, 18.0, 20.0, 9.0, 10.0, 11.0, 12.0, 0.0, 0.0, 0.0, 0.0
            ],
            "{name}: exclusive and reversed along axis 0"
        );
        // Through a transposed view, and exact for ints past 2^24.
        let tt = t.transpose(None).unwrap().cumsum(1, false, false).unwrap();
        assert_eq!(floats(&tt).await[..3], [1.0, 6.0, 15.0], "{name}");
        let i = ints(&gpu, &[16_777_216, 1, 1, i32::MAX], &[4]);
        let s = i.cumsum(0, false, false).unwrap();
        assert_eq!(s.dtype(), DType::Int32);
        assert_eq!(
            s.values().await.unwrap().to_i32(),
            [
                16_777_216,
                16_777_217,
                16_777_218,
                16_777_218i32.wrapping_add(i32::MAX)
            ],
            "{name}"
        );
        // d/dx_k sum_j w_j * cumsum(x)_j = the sum of w from k on.
        let v = gpu.tensor(&[1.0, 2.0, 3.0, 4.0], None).unwrap();
        let w = gpu.tensor(&[1.0, 10.0, 100.0, 1000.0], None).unwrap();
        let g = gpu
            .grad(
                |v| v.cumsum(0, false, false)?.mul(&w)?.sum(None, false),
                &v,
                None,
            )
            .unwrap();
        assert_eq!(floats(&g).await, [1111.0, 1110.0, 1100.0, 1000.0], "{name}");
    }
}

pub async fn a_scan_computes_the_elementwise_ops_it_reads_in_its_own_kernel() {
    let gpu = kernels_only().await;
    let x = gpu
        .tensor(&[1.0, -2.0, 3.0, -4.0, 5.0, -6.0], Some(&[2, 3]))
        .unwrap();
    let w = gpu.tensor(&[10.0, 20.0, 30.0], None).unwrap();
    let _ = (floats(&x).await, floats(&w).await);
    let before = gpu.stats();
    // relu(x) * w, its running sums along the rows from the end.
    let scanned = x
        .relu()
        .unwrap()
        .mul(&w)
        .unwrap()
        .cumsum(1, false, true)
        .unwrap();
    let got = floats(&scanned).await;
    let after = gpu.stats();
    assert_eq!(got, [100.0, 90.0, 90.0, 100.0, 100.0, 0.0]);
    assert_eq!(
        after.kernels_launched - before.kernels_launched,
        1,
        "one kernel"
    );
    assert_eq!(
        after.fused_ops - before.fused_ops,
        3,
        "relu, mul and cumsum fused"
    );
    assert_eq!(
        after.buffers_allocated - before.buffers_allocated,
        1,
        "the result alone: the product is never written"
    );
    // An int prologue: the products of (x + 1) where x is an int32.
    let i = ints(&gpu, &[1, 2, 3, 4], &[4]);
    let _ = i.values().await.unwrap();
    let p = i
        .add(&ints(&gpu, &[1], &[1]))
        .unwrap()
        .cumprod(0, false, false)
        .unwrap();
    assert_eq!(p.values().await.unwrap().to_i32(), [2, 6, 24, 120]);
}

pub async fn cumprod_and_prod_multiply_in_order_and_prod_s_gradient_is_exact_at_zeros() {
    for (name, gpu) in both().await {
        let t = gpu
            .tensor(&[2.0, 0.0, 3.0, 4.0, 5.0, -1.0], Some(&[2, 3]))
            .unwrap();
        let rows = t.cumprod(1, false, false).unwrap();
        assert_eq!(
            floats(&rows).await,
            [2.0, 0.0, 0.0, 4.0, 20.0, -20.0],
            "{name}"
        );
        let exclusive_reversed = t.cumprod(-1, true, true).unwrap();
        assert_eq!(
            floats(&exclusive_reversed).await,
            [0.0, 3.0, 1.0, -5.0, -1.0, 1.0],
            "{name}"
        );
        let columns = t.prod(Some(&[0]), false).unwrap();
        assert_eq!(floats(&columns).await, [8.0, 0.0, -3.0], "{name}");
        let all = t.prod(None, true).unwrap();
        assert_eq!(all.shape(), [1, 1]);
        assert_eq!(floats(&all).await, [0.0], "{name}");
        // An int32's products are exact and wrap; a bool's are int32s.
        let i = ints(&gpu, &[65_536, 65_536, 3, 7], &[4]);
        let p = i.prod(None, false).unwrap();
        assert_eq!(p.dtype(), DType::Int32);
        assert_eq!(
            p.values().await.unwrap().to_i32(),
            [0],
            "{name}: 2^32 wraps to 0"
        );
        let c = i.cumprod(0, false, false).unwrap();
        assert_eq!(
            c.values().await.unwrap().to_i32(),
            [65_536, 0, 0, 0],
            "{name}"
        );
        let b = gpu
            .tensor_of(Values::bool(&[true, true, false]), None)
            .unwrap();
        let bp = b.prod(None, false).unwrap();
        assert_eq!(bp.dtype(), DType::Int32);
        assert_eq!(bp.values().await.unwrap().to_i32(), [0], "{name}");
        // Each element's gradient is the product of the others, zero or
        // not: no division by the element.
        let g = gpu
            .grad(|v| v.prod(Some(&[1]), false)?.sum(None, false), &t, None)
            .unwrap();
        assert_eq!(
            floats(&g).await,
            [0.0, 6.0, 0.0, -5.0, -4.0, 20.0],
            "{name}"
        );
        let Err(refused) = gpu.grad(|v| v.cumprod(0, false, false)?.sum(None, false), &t, None)
        else {
            panic!("{name}: cumprod's gradient was taken");
        };
        assert!(
            refused.reason.contains("cumprod has no gradient"),
            "{refused}"
        );
    }
}

pub async fn multinomial_draws_classes_by_their_probabilities_reproducibly() {
    let gpu = device().await;
    let probs = [0.1f32, 0.0, 0.6, 0.3];
    let logits: Vec<f32> = probs.iter().map(|p| p.ln()).collect();
    let rows = gpu
        .tensor(&[logits.clone(), logits].concat(), Some(&[2, 4]))
        .unwrap();
    let n = 4000;
    let draws = rows.multinomial(n, 7, false).unwrap();
    assert_eq!(draws.shape(), &[2, n]);
    assert_eq!(draws.dtype(), DType::Int32);
    let got = draws.values().await.unwrap().to_i32();
    let mut counts = [0usize; 4];
    for &c in &got {
        counts[c as usize] += 1;
    }
    assert_eq!(counts[1], 0, "a class of probability 0 is never drawn");
    for (k, &p) in probs.iter().enumerate() {
        let f = counts[k] as f32 / (2 * n) as f32;
        assert!(
            (f - p).abs() < 0.03,
            "class {k}: {f} drawn, {p} expected ({counts:?})"
        );
    }
    let again = rows.multinomial(n, 7, false).unwrap();
    assert_eq!(
        again.values().await.unwrap().to_i32(),
        got,
        "the same seed draws the same"
    );
    let normalized = gpu
        .tensor(&probs, None)
        .unwrap()
        .multinomial(5, 1, true)
        .unwrap();
    assert_eq!(normalized.shape(), &[5]);
    let refused = gpu
        .tensor(&[1.0; 8], Some(&[2, 2, 2]))
        .unwrap()
        .multinomial(3, 0, false)
        .err()
        .expect("refused");
    assert!(refused.to_string().contains("rank 1 or 2"), "{refused}");
}

/// A draw is a class whose interval `[cdf[i - 1], cdf[i])` holds the
/// uniform value, so a class of probability 0 (an empty interval) is never
/// drawn, a first class included: counting the classes strictly below the
/// value drew class 0 of `[0, 1, 0]` whenever the value was exactly 0, as
/// seed 0's first is (found by outside testing).
pub async fn a_class_of_probability_zero_is_never_drawn_even_first_or_at_seed_0() {
    for gpu in [device().await, kernels_only().await] {
        for seed in 0..4 {
            let one = gpu.tensor(&[0.0, 1.0, 0.0], None).unwrap();
            let drawn = one.multinomial(8, seed, true).unwrap();
            assert_eq!(
                drawn.values().await.unwrap().to_i32(),
                [1; 8],
                "seed {seed}"
            );
            let rows = gpu
                .tensor(&[0.0, 0.0, 1.0, 0.0, 1.0, 0.0], Some(&[2, 3]))
                .unwrap();
            let drawn = rows.multinomial(4, seed, true).unwrap();
            assert_eq!(
                drawn.values().await.unwrap().to_i32(),
                [2, 2, 2, 2, 1, 1, 1, 1],
                "seed {seed}"
            );
            let logits = gpu.tensor(&[-1e4, 0.0, -1e4], None).unwrap();
            let drawn = logits.multinomial(8, seed, false).unwrap();
            assert_eq!(
                drawn.values().await.unwrap().to_i32(),
                [1; 8],
                "seed {seed}"
            );
        }
    }
}

pub async fn top_k_gives_the_largest_values_first_with_their_indices_and_gradient() {
    for (name, gpu) in both().await {
        let x = gpu
            .tensor(
                &[
                    3.0,
                    1.0,
                    4.0,
                    1.0,
                    5.0,
                    f32::NEG_INFINITY,
                    f32::NEG_INFINITY,
                    2.0,
                    0.0,
                    2.0,
                ],
                Some(&[2, 5]),
            )
            .unwrap();
        let (values, indices) = x.top_k(3).unwrap();
        assert_eq!(values.shape(), &[2, 3]);
        assert_eq!(indices.dtype(), DType::Int32);
        assert_eq!(
            floats(&values).await,
            [5.0, 4.0, 3.0, 2.0, 2.0, 0.0],
            "{name}"
        );
        assert_eq!(
            indices.values().await.unwrap().to_i32(),
            [4, 2, 0, 2, 4, 3],
            "{name}: the lower index first among equal values"
        );
        // Every element, -inf included, each picked once.
        let (_, all) = x.top_k(5).unwrap();
        assert_eq!(
            all.values().await.unwrap().to_i32()[5..],
            [2, 4, 3, 0, 1],
            "{name}"
        );
        let g = gpu
            .grad(|x| x.top_k(2)?.0.sum(None, false), &x, None)
            .unwrap();
        assert_eq!(
            floats(&g).await,
            [0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0],
            "{name}: the gradient reaches the picked elements"
        );
        assert!(x.top_k(6).is_err());
        // An int32's, exact past 2^24 and with the smallest int itself
        // among the values (the mask's own value): each position once.
        let i = ints(
            &gpu,
            &[i32::MIN, 16_777_217, i32::MIN, 16_777_216, -5, i32::MAX],
            &[2, 3],
        );
        let (values, indices) = i.top_k(3).unwrap();
        assert_eq!(values.dtype(), DType::Int32);
        assert_eq!(
            values.values().await.unwrap().to_i32(),
            [16_777_217, i32::MIN, i32::MIN, i32::MAX, 16_777_216, -5],
            "{name}"
        );
        assert_eq!(
            indices.values().await.unwrap().to_i32(),
            [1, 0, 2, 2, 0, 1],
            "{name}: every position once, the lower first among equals"
        );
        let b = gpu
            .tensor_of(Values::bool(&[false, true, false, true]), None)
            .unwrap();
        let (values, indices) = b.top_k(4).unwrap();
        assert_eq!(values.dtype(), DType::Bool);
        assert_eq!(
            values.values().await.unwrap().to_i32(),
            [1, 1, 0, 0],
            "{name}"
        );
        assert_eq!(
            indices.values().await.unwrap().to_i32(),
            [1, 3, 0, 2],
            "{name}"
        );
    }
}

/// A NaN is the largest value, as in a sort, and the indices are always a
/// selection of distinct positions: an input's NaN was taken for a picked
/// one, never picked itself, and the last pick repeated index 0 (found by
/// outside testing).
pub async fn top_k_takes_a_nan_as_the_largest_and_never_repeats_an_index() {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    for gpu in [device().await, kernels_only().await] {
        // (input, k, values, indices)
        type Case<'a> = (&'a [f32], usize, &'a [f32], &'a [i32]);
        let cases: [Case; 3] = [
            (
                &[1.0, nan, 3.0, -inf],
                4,
                &[nan, 3.0, 1.0, -inf],
                &[1, 2, 0, 3],
            ),
            (&[nan, 2.0, 1.0], 2, &[nan, 2.0], &[0, 1]),
            (
                &[-inf, -inf, 5.0, nan, nan],
                5,
                &[nan, nan, 5.0, -inf, -inf],
                &[3, 4, 2, 0, 1],
            ),
        ];
        for (input, k, want, at) in cases {
            let (values, indices) = gpu.tensor(input, None).unwrap().top_k(k).unwrap();
            let got = values.to_vec().await.unwrap();
            let bits = |v: &[f32]| {
                v.iter()
                    .map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() })
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(&got), bits(want), "{input:?}: {got:?}");
            assert_eq!(indices.values().await.unwrap().to_i32(), at, "{input:?}");
        }
    }
}

pub async fn gather_reads_computed_tables_and_indices_of_any_shape_a_flush_makes() {
    for (name, gpu) in both().await {
        let t: Vec<f32> = (0..16).map(|v| v as f32).collect();
        let table = gpu.tensor(&t, Some(&[4, 4])).unwrap();
        let base = ints(&gpu, &[0, 1, 1, 0], &[4]);
        // The table computed in the same flush, of the output's own shape:
        // the gather must read it from memory, not fuse with it.
        let doubled = table.mul(2.0).unwrap();
        // The indices computed too (an int expression, read through a view).
        let idx = base
            .add(&base)
            .unwrap()
            .add(&ints(&gpu, &[1], &[1]))
            .unwrap();
        let g = doubled.gather(&idx, 0, 0).unwrap().add(1.0).unwrap();
        let want: Vec<f32> = [1usize, 3, 3, 1]
            .iter()
            .flat_map(|&r| (0..4).map(move |c| 2.0 * (r * 4 + c) as f32 + 1.0))
            .collect();
        assert_eq!(floats(&g).await, want, "{name}");
        // Empty indices, and a scalar index (the axis removed).
        let none = table.gather(&ints(&gpu, &[], &[0]), 0, 0).unwrap();
        assert_eq!(none.shape(), &[0, 4]);
        assert_eq!(floats(&none).await, Vec::<f32>::new(), "{name}");
        let one = table.gather(&ints(&gpu, &[2], &[]), 1, 0).unwrap();
        assert_eq!(one.shape(), &[4]);
        assert_eq!(floats(&one).await, [2.0, 6.0, 10.0, 14.0], "{name}");
        // A held gather read after what was computed from it.
        let rows = table.gather(&ints(&gpu, &[3, 0], &[2]), 0, 0).unwrap();
        let total = rows.sum(None, false).unwrap();
        assert_eq!(floats(&total).await, [60.0], "{name}");
        assert_eq!(
            floats(&rows).await,
            [12.0, 13.0, 14.0, 15.0, 0.0, 1.0, 2.0, 3.0],
            "{name}"
        );
    }
}

/// Found by TF.js's own op tests: the ops built on a one-hot (a gather's
/// gradient, a segment sum, `topk`) refused an axis of one class, because
/// they went through `oneHot`'s public rule (depth at least 2).
pub async fn a_gather_from_an_axis_of_length_one_has_a_gradient_and_one_segment_or_one_value_works()
{
    for (name, gpu) in both().await {
        let t = gpu.tensor(&[1.0, 2.0, 3.0], Some(&[3, 1])).unwrap();
        let idx = ints(&gpu, &[0, 0], &[2]);
        let g = gpu
            .grad(|t| t.gather(&idx, 1, 0)?.sum(None, false), &t, None)
            .unwrap();
        assert_eq!(
            floats(&g).await,
            [2.0, 2.0, 2.0],
            "{name}: gather along a dim of 1"
        );
        let x = gpu.tensor(&[1.0, 2.0, 4.0], Some(&[3])).unwrap();
        let ids = ints(&gpu, &[0, 0, 0], &[3]);
        let s = x.unsorted_segment_sum(&ids, 1).unwrap();
        assert_eq!(floats(&s).await, [7.0], "{name}: one segment");
        let one = gpu.tensor(&[5.0], Some(&[1])).unwrap();
        let (values, indices) = one.top_k(1).unwrap();
        assert_eq!(floats(&values).await, [5.0], "{name}: topk of one value");
        assert_eq!(
            indices.values().await.unwrap().to_i32(),
            [0],
            "{name}: its index"
        );
    }
}

pub async fn the_gradient_of_a_gather_past_its_table_fails_as_index_and_a_step_on_it_changes_nothing()
 {
    for (name, gpu) in both().await {
        let table = gpu
            .tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], Some(&[3, 2]))
            .unwrap();
        let outside = ints(&gpu, &[0, 3], &[2]);
        // A loss linear in the gathered rows: its gradient never reads them,
        // only the indices.
        let g = gpu
            .grad(|t| t.gather(&outside, 0, 0)?.sum(None, false), &table, None)
            .unwrap();
        let error = read_err(&g).await;
        assert_eq!(
            error.failures[0].root.kind,
            FailureKind::Index,
            "{name}: {error}"
        );
        assert_eq!(error.failures[0].root.op, "gather", "{name}: {error}");
        assert!(
            error.failures[0].root.message.contains("index 3"),
            "{name}: names the index: {error}"
        );
        // Scaled first, and with batch dims (a [2, 3, 2] table, index 5 of 3).
        let w = gpu.tensor(&[2.0; 4], Some(&[2, 2])).unwrap();
        let g = gpu
            .grad(
                |t| t.gather(&outside, 0, 0)?.mul(&w)?.sum(None, false),
                &table,
                None,
            )
            .unwrap();
        assert_eq!(
            read_err(&g).await.failures[0].root.kind,
            FailureKind::Index,
            "{name}: scaled"
        );
        let t3 = gpu
            .tensor(
                &(0..12).map(|v| v as f32).collect::<Vec<_>>(),
                Some(&[2, 3, 2]),
            )
            .unwrap();
        let batched = ints(&gpu, &[0, 5, 1, 2], &[2, 2]);
        let g = gpu
            .grad(|t| t.gather(&batched, 1, 1)?.sum(None, false), &t3, None)
            .unwrap();
        assert_eq!(
            read_err(&g).await.failures[0].root.kind,
            FailureKind::Index,
            "{name}: batched"
        );
        // An in-range gradient of the same table still reads.
        let inside = ints(&gpu, &[2, 2], &[2]);
        let g = gpu
            .grad(|t| t.gather(&inside, 0, 0)?.sum(None, false), &table, None)
            .unwrap();
        assert_eq!(floats(&g).await, [0.0, 0.0, 0.0, 0.0, 2.0, 2.0], "{name}");
        // A step on the failed gradient changes no variable.
        let v = gpu
            .variable(&table, true, Some(&format!("emb-{name}")))
            .unwrap();
        let (cost, grads) = webfusion::variable_grads(
            || v.value().gather(&outside, 0, 0)?.sum(None, false),
            Some(std::slice::from_ref(&v)),
        )
        .unwrap();
        let mut sgd = webfusion::Optimizer::sgd(1.0).unwrap();
        sgd.apply_gradients(&grads).unwrap();
        assert_eq!(
            read_err(&cost).await.failures[0].root.kind,
            FailureKind::Index
        );
        assert_eq!(
            floats(&v.value()).await,
            [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            "{name}: the variable is as it was"
        );
    }
}

pub async fn a_gather_s_gradient_and_a_segment_sum_whose_one_hot_passes_a_binding_sum_in_slices() {
    // 4097 ids into 8193 rows: their one-hot is 134,266,884 bytes, past the
    // 128 MiB every device binds (the forward gather never makes it).
    let (rows, n) = (8193usize, 4097usize);
    let ids: Vec<i32> = (0..n).map(|i| ((i * 7919) % rows) as i32).collect();
    let weights: Vec<f32> = (0..n).map(|i| (i % 13) as f32).collect();
    let mut want = vec![0.0f32; rows];
    for (&i, &w) in ids.iter().zip(&weights) {
        want[i as usize] += w;
    }
    // Ids that repeat: every id twice, at positions in both slices.
    let twice: Vec<i32> = ids.iter().chain(&ids).copied().collect();
    let gpu = kernels_only().await;
    let table = gpu.tensor(&vec![0.5; rows], Some(&[rows, 1])).unwrap();
    let idx = ints(&gpu, &ids, &[n]);
    let dy = gpu.tensor(&weights, Some(&[n, 1])).unwrap();
    let g = gpu
        .grad(|t| t.gather(&idx, 0, 0), &table, Some(&dy))
        .unwrap();
    assert_eq!(floats(&g).await, want, "the gather's gradient");
    let x = gpu.tensor(&weights.repeat(2), Some(&[2 * n, 1])).unwrap();
    let s = x
        .unsorted_segment_sum(&ints(&gpu, &twice, &[2 * n]), rows)
        .unwrap();
    let doubled: Vec<f32> = want.iter().map(|w| w * 2.0).collect();
    assert_eq!(floats(&s).await, doubled, "the segment sum");
}
