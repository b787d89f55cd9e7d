//! int32 and bool tensors: exact end to end, TF.js's dtype rules at
//! registration, and the same values on the host and in kernels. Each case
//! runs on a default device (small work on the host) and on a kernels-only
//! device, since the two compute separately.

use webfusion::{DType, Device, FaultKind, Tensor, Values};

use super::engine::{Seeded, device, kernels_only, read_err};

/// A default device and a kernels-only one, each named for messages.
async fn both() -> Vec<(&'static str, Device)> {
    vec![("host", device().await), ("kernels", kernels_only().await)]
}

async fn values(t: &Tensor) -> Values {
    t.values().await.expect("the tensor reads")
}

async fn ints(t: &Tensor) -> Vec<i32> {
    let v = values(t).await;
    assert_eq!(v.dtype, t.dtype(), "a read keeps the dtype");
    v.to_i32()
}

async fn bools(t: &Tensor) -> Vec<bool> {
    assert_eq!(t.dtype(), DType::Bool);
    values(t).await.to_bool()
}

fn int_tensor(gpu: &Device, v: &[i32], shape: Option<&[usize]>) -> Tensor {
    gpu.tensor_of(Values::int32(v), shape).unwrap()
}

pub async fn int32_values_are_exact_end_to_end_through_uploads_views_cat_and_reads() {
    // Past float32's 2^24 and at both ends of int32: a detour through a
    // float anywhere would round them.
    let big = [i32::MAX, i32::MIN, 16_777_217, -16_777_219, 7, -1];
    for (name, gpu) in both().await {
        let t = int_tensor(&gpu, &big, Some(&[2, 3]));
        assert_eq!(t.dtype(), DType::Int32);
        assert_eq!(ints(&t).await, big, "{name}: an upload");
        let tr = t.transpose(None).unwrap();
        assert_eq!(
            ints(&tr).await,
            [i32::MAX, -16_777_219, i32::MIN, 7, 16_777_217, -1],
            "{name}: a transposed view (a strided read, copied)"
        );
        let row = t.slice(&[1, 0], &[1, -1]).unwrap();
        assert_eq!(ints(&row).await, [-16_777_219, 7, -1], "{name}: a slice");
        let joined = gpu.cat(&[&t, &t.neg().unwrap()], 0).unwrap();
        assert_eq!(joined.dtype(), DType::Int32);
        assert_eq!(
            ints(&joined).await,
            [
                i32::MAX,
                i32::MIN,
                16_777_217,
                -16_777_219,
                7,
                -1,
                -i32::MAX,
                i32::MIN,
                -16_777_217,
                16_777_219,
                -7,
                1
            ],
            "{name}: a cat with a computed int (neg of MIN wraps to MIN)"
        );
        let moved = t.to(&gpu).unwrap().await.unwrap();
        assert_eq!(ints(&moved).await, big);
        let flags = gpu
            .tensor_of(Values::bool(&[true, false, true]), None)
            .unwrap();
        assert_eq!(bools(&flags).await, [true, false, true], "{name}");
    }
}

pub async fn int32_arithmetic_wraps_and_divides_as_tf_js_does() {
    for (name, gpu) in both().await {
        let a = int_tensor(&gpu, &[i32::MAX, 7, -7, 7, -7, 5, i32::MIN, 9], None);
        let b = int_tensor(&gpu, &[1, 2, 2, -2, -2, 0, -1, 3], None);
        let sum = a.add(&b).unwrap();
        assert_eq!(sum.dtype(), DType::Int32);
        assert_eq!(
            ints(&sum).await,
            [i32::MIN, 9, -5, 5, -9, 5, i32::MAX, 12],
            "{name}: add wraps"
        );
        // TF.js: an int32 `div` is a floor division; by 0 it gives 0.
        let quotient = a.div(&b).unwrap();
        assert_eq!(quotient.dtype(), DType::Int32);
        assert_eq!(
            ints(&quotient).await,
            [i32::MAX, 3, -4, -4, 3, 0, i32::MIN, 3],
            "{name}: div floors"
        );
        assert_eq!(ints(&a.floor_div(&b).unwrap()).await, ints(&quotient).await);
        assert_eq!(
            ints(&a.mod_(&b).unwrap()).await,
            [0, 1, 1, -1, -1, 0, 0, 0],
            "{name}: mod takes the divisor's sign"
        );
        assert_eq!(
            ints(&a.mul(&b).unwrap()).await,
            [i32::MAX, 14, -14, -14, 14, 0, i32::MIN, 27],
            "{name}: mul wraps (MIN * -1 is MIN)"
        );
        let base = int_tensor(&gpu, &[2, -3, 2, 1, -1, 0], None);
        let exp = int_tensor(&gpu, &[10, 3, -1, -5, -3, 0], None);
        assert_eq!(
            ints(&base.pow(&exp).unwrap()).await,
            [1024, -27, 0, 1, -1, 1],
            "{name}: pow of ints"
        );
        assert_eq!(
            ints(&a.maximum(&b).unwrap()).await,
            [i32::MAX, 7, 2, 7, -2, 5, -1, 9]
        );
        assert_eq!(
            ints(&a.abs().unwrap()).await,
            [i32::MAX, 7, 7, 7, 7, 5, i32::MIN, 9]
        );
        assert_eq!(
            ints(&a.relu().unwrap()).await,
            [i32::MAX, 7, 0, 7, 0, 5, 0, 9]
        );
        assert_eq!(
            ints(&a.clamp(-6.5, 6.5).unwrap()).await,
            [6, 6, -6, 6, -6, 5, -6, 6],
            "{name}: an int clamped to the bounds' whole parts"
        );
        // TF.js's CPU clamps an int as a float and stores it in an
        // Int32Array, truncating: a bound's whole part, toward zero, even
        // where no int lies within the bounds (this clamp gave -3 for
        // clamp(-2.5, -2.5), below its min: found by outside testing).
        let few = int_tensor(&gpu, &[-4, -3, 0, 3], None);
        for (min, max, want) in [
            (0.5, 2.5, [0, 0, 0, 2]),
            (-2.5, -2.5, [-2, -2, -2, -2]),
            (-2.5, -1.5, [-2, -2, -1, -1]),
        ] {
            assert_eq!(
                ints(&few.clamp(min, max).unwrap()).await,
                want,
                "{name}: clamp({min}, {max}) of an int, as TF.js's CPU gives it"
            );
        }
        // Two's complement bits, the sign's included.
        let and = a.bitwise_and(&b).unwrap();
        assert_eq!(and.dtype(), DType::Int32);
        assert_eq!(
            ints(&and).await,
            [1, 2, 0, 6, -8, 0, i32::MIN, 1],
            "{name}: bitwiseAnd"
        );
        let other = int_tensor(&gpu, &[1, 2, 3, 4], Some(&[4, 1]));
        let error = a.bitwise_and(&other).err().expect("refused");
        assert!(error.to_string().contains("one shape"), "{name}: {error}");
        assert_eq!(
            error.class,
            webfusion::ErrorClass::Other,
            "{name}: operands that cannot work together are an Error, as add's are"
        );
    }
}

pub async fn float_mod_and_floor_div_round_toward_negative_infinity() {
    for (name, gpu) in both().await {
        let a = gpu.tensor(&[7.5, -7.5, 7.5, -7.5, 1.0], None).unwrap();
        let b = gpu.tensor(&[2.0, 2.0, -2.0, -2.0, 0.0], None).unwrap();
        let m = read_f32(&a.mod_(&b).unwrap()).await;
        assert_eq!(&m[..4], [1.5, 0.5, -0.5, -1.5], "{name}");
        assert!(m[4].is_nan(), "{name}: a float mod 0 is NaN: {m:?}");
        // An int32, as in TF.js (code indexing with it runs unchanged); a
        // quotient past int32, a division by 0's, saturates.
        let q = a.floor_div(&b).unwrap();
        assert_eq!(q.dtype(), DType::Int32, "{name}");
        assert_eq!(ints(&q).await, [3, -4, -4, 3, i32::MAX], "{name}");
        let halves = a.floor_div(0.5).unwrap();
        assert_eq!(halves.dtype(), DType::Int32, "{name}: a number divisor too");
        assert_eq!(ints(&halves).await, [15, -15, 15, -15, 2], "{name}");
        let x = gpu.tensor(&[1.0, -2.0, 0.0], None).unwrap();
        assert_eq!(
            ints(&x.floor_div(0.0).unwrap()).await,
            [i32::MAX, i32::MIN, 0],
            "{name}: infinities saturate, a NaN is 0"
        );
    }
}

/// WGSL's float `%` is `a - b * trunc(a / b)`, wrong by multiples of `b`
/// once the quotient passes 2^24: `1e8 mod 3` read 0, and some remainders
/// left the divisor's range and sign (found by outside testing). Every
/// path now gives the exact floor mod, as TF.js's CPU backend computes it
/// in doubles, a zero with the divisor's sign.
pub async fn float_mod_is_exact_at_any_quotient_and_stays_within_the_divisor() {
    let exact = |a: f32, b: f32| -> f32 {
        let (a, b) = (f64::from(a), f64::from(b));
        let r = a % b;
        match r == 0.0 {
            true => 0.0f32.copysign(b as f32),
            false if (r < 0.0) != (b < 0.0) => (r + b) as f32,
            false => r as f32,
        }
    };
    let mut pairs = vec![
        (1e8, 3.0),
        (-1e8, 3.0),
        (30637786.0, 1.8152912),
        (5e9, 0.7),
        (1e30, 1e-30),
        (-1e30, 7.0),
        (16777217.0, -2.5),
        (-6.0, 3.0),
        (6.0, -3.0),
    ];
    // Seeded pairs across 140 binary orders of quotient, either sign; no
    // subnormal remainder (some adapters flush those to zero).
    let mut seeded = Seeded::new(0x9E37_79B9);
    let mut next = move || (seeded.next() >> 32) as u32;
    let mut float = |low: i32, span: u32| {
        let bits = next();
        let exponent = (low + (bits % span) as i32 + 127) as u32;
        f32::from_bits((bits & 0x8000_0000) | (exponent << 23) | (next() & 0x7f_ffff))
    };
    for _ in 0..400 {
        let a = float(-20, 80);
        let b = float(-60, 60);
        pairs.push((a, b));
    }
    let (a, b): (Vec<f32>, Vec<f32>) = pairs.iter().copied().unzip();
    let want: Vec<u32> = pairs.iter().map(|&(a, b)| exact(a, b).to_bits()).collect();
    for (name, gpu) in both().await {
        let (ta, tb) = (gpu.tensor(&a, None).unwrap(), gpu.tensor(&b, None).unwrap());
        let got = read_f32(&ta.mod_(&tb).unwrap()).await;
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w,
                "{name}: {} mod {} read {g}, exactly {}",
                a[i],
                b[i],
                f32::from_bits(w)
            );
        }
    }
    // A number divisor, and an int32 dividend made float32 by it.
    for (name, gpu) in both().await {
        let ints = int_tensor(&gpu, &[100_000_000, -100_000_000], None);
        assert_eq!(
            read_f32(&ints.mod_(3.0).unwrap()).await,
            [1.0, 2.0],
            "{name}"
        );
    }
}

async fn read_f32(t: &Tensor) -> Vec<f32> {
    assert_eq!(t.dtype(), DType::Float32);
    t.to_vec().await.expect("the tensor reads")
}

pub async fn comparisons_give_bools_and_logical_ops_and_where_take_them() {
    for (name, gpu) in both().await {
        let x = gpu.tensor(&[1.0, -2.0, 3.0, f32::NAN], None).unwrap();
        let positive = x.greater(0.0).unwrap();
        assert_eq!(positive.dtype(), DType::Bool);
        assert_eq!(bools(&positive).await, [true, false, true, false], "{name}");
        let small = x.less(&gpu.tensor(&[2.0], None).unwrap()).unwrap();
        assert_eq!(bools(&small).await, [true, true, false, false]);
        assert_eq!(
            bools(&positive.logical_and(&small).unwrap()).await,
            [true, false, false, false]
        );
        assert_eq!(
            bools(&positive.logical_or(&small).unwrap()).await,
            [true, true, true, false]
        );
        assert_eq!(
            bools(&positive.logical_xor(&small).unwrap()).await,
            [false, true, true, false]
        );
        assert_eq!(
            bools(&positive.logical_not().unwrap()).await,
            [false, true, false, true]
        );
        let tens = int_tensor(&gpu, &[10, 20, 30, 40], None);
        let picked = gpu.where_(&positive, &tens, &tens.neg().unwrap()).unwrap();
        assert_eq!(picked.dtype(), DType::Int32);
        assert_eq!(ints(&picked).await, [10, -20, 30, -40], "{name}");
        // An int and a float branch upcast to a float.
        let mixed = gpu.where_(&positive, &tens, &x).unwrap();
        assert_eq!(mixed.dtype(), DType::Float32);
        let m = read_f32(&mixed).await;
        assert_eq!(&m[..3], [10.0, -2.0, 30.0]);
        assert!(m[3].is_nan());
    }
}

pub async fn mixing_dtypes_upcasts_as_tf_js_does() {
    let gpu = device().await;
    let i = int_tensor(&gpu, &[1, 2], None);
    let f = gpu.tensor(&[0.5, 0.25], None).unwrap();
    let b = gpu.tensor_of(Values::bool(&[true, false]), None).unwrap();
    let cases: [(&str, Tensor, DType); 7] = [
        ("int + float", i.add(&f).unwrap(), DType::Float32),
        ("int + number", i.add(1.0).unwrap(), DType::Float32),
        ("int + bool", i.add(&b).unwrap(), DType::Int32),
        ("bool + bool", b.add(&b).unwrap(), DType::Int32),
        ("bool * float", b.mul(&f).unwrap(), DType::Float32),
        (
            "cat(int, float)",
            gpu.cat(&[&i, &f], 0).unwrap(),
            DType::Float32,
        ),
        ("int / int", i.div(&i).unwrap(), DType::Int32),
    ];
    for (what, t, want) in &cases {
        assert_eq!(t.dtype(), *want, "{what}");
    }
    assert_eq!(
        cases[0].1.to_vec().await.unwrap(),
        [1.5, 2.25],
        "int + float"
    );
    assert_eq!(ints(&cases[3].1).await, [2, 0], "bool + bool counts");
    assert_eq!(cases[4].1.to_vec().await.unwrap(), [0.5, 0.0]);
    assert_eq!(
        i.exp().unwrap().dtype(),
        DType::Float32,
        "exp makes a float"
    );
    assert_eq!(b.neg().unwrap().dtype(), DType::Int32, "neg of a bool");
}

pub async fn casts_truncate_saturate_and_map_nan_to_zero() {
    let floats = [1.7, -1.7, f32::NAN, 3e9, -3e9, f32::INFINITY, -0.0, 0.0];
    for (name, gpu) in both().await {
        let x = gpu.tensor(&floats, None).unwrap();
        let as_int = x.cast(DType::Int32).unwrap();
        assert_eq!(
            ints(&as_int).await,
            [1, -1, 0, i32::MAX, i32::MIN, i32::MAX, 0, 0],
            "{name}"
        );
        let as_bool = x.cast(DType::Bool).unwrap();
        assert_eq!(
            bools(&as_bool).await,
            [true, true, true, true, true, true, false, false],
            "{name}: non-zero, a NaN included, and -0 is zero"
        );
        let back = as_int.cast(DType::Float32).unwrap();
        assert_eq!(
            read_f32(&back).await,
            [
                1.0,
                -1.0,
                0.0,
                2_147_483_648.0,
                -2_147_483_648.0,
                2_147_483_648.0,
                0.0,
                0.0
            ]
        );
        let counted = as_bool.cast(DType::Int32).unwrap();
        assert_eq!(ints(&counted).await, [1, 1, 1, 1, 1, 1, 0, 0]);
        assert_eq!(
            x.cast(DType::Float32).unwrap().id(),
            x.id(),
            "a cast to its own dtype is itself"
        );
    }
}

pub async fn reductions_of_ints_stay_ints_and_mean_is_a_float() {
    for (name, gpu) in both().await {
        // Sums past 2^24 that a float would round.
        let t = int_tensor(&gpu, &[16_777_216, 1, 1, -5, 3, 2], Some(&[2, 3]));
        let rows = t.sum(Some(&[1]), false).unwrap();
        assert_eq!(rows.dtype(), DType::Int32);
        assert_eq!(ints(&rows).await, [16_777_218, 0], "{name}");
        assert_eq!(ints(&t.sum(None, false).unwrap()).await, [16_777_218]);
        assert_eq!(
            ints(&t.max(Some(&[0]), false).unwrap()).await,
            [16_777_216, 3, 2]
        );
        assert_eq!(ints(&t.min(Some(&[1]), true).unwrap()).await, [1, -5]);
        let mean = t.mean(Some(&[0]), false).unwrap();
        assert_eq!(mean.dtype(), DType::Float32);
        assert_eq!(read_f32(&mean).await, [8_388_605.5, 2.0, 1.5]);
        let flags = gpu
            .tensor_of(Values::bool(&[true, false, true, true]), None)
            .unwrap();
        let count = flags.sum(None, false).unwrap();
        assert_eq!(count.dtype(), DType::Int32, "a sum of bools counts");
        assert_eq!(ints(&count).await, [3]);
        // Long enough to be reduced in two stages.
        let n = 20_000;
        let long: Vec<i32> = (0..n).map(|i| i * 1000).collect();
        let total = int_tensor(&gpu, &long, None).sum(None, false).unwrap();
        let want = long.iter().fold(0i32, |a, &b| a.wrapping_add(b));
        assert_eq!(
            ints(&total).await,
            [want],
            "{name}: a split int sum wraps exactly"
        );
    }
}

pub async fn arg_max_and_arg_min_give_int32_indices_the_first_on_ties() {
    for (name, gpu) in both().await {
        let x = gpu
            .tensor(&[1.0, 3.0, 3.0, -1.0, 0.0, -1.0], Some(&[2, 3]))
            .unwrap();
        let max = x.arg_max(1).unwrap();
        assert_eq!(max.dtype(), DType::Int32);
        assert_eq!(ints(&max).await, [1, 1], "{name}");
        assert_eq!(ints(&x.arg_min(1).unwrap()).await, [0, 0]);
        assert_eq!(ints(&x.arg_min(0).unwrap()).await, [1, 1, 1]);
        let i = int_tensor(&gpu, &[i32::MIN, 5, i32::MAX, i32::MAX], None);
        assert_eq!(ints(&i.arg_max(0).unwrap()).await, [2]);
        assert_eq!(ints(&i.arg_min(0).unwrap()).await, [0]);
        // A long axis: partials, then their indices.
        let n = 20_000;
        let mut long = vec![0.0f32; n];
        long[12_345] = -9.0;
        long[17_000] = 9.0;
        let long = gpu.tensor(&long, None).unwrap();
        assert_eq!(ints(&long.arg_max(0).unwrap()).await, [17_000], "{name}");
        assert_eq!(ints(&long.arg_min(0).unwrap()).await, [12_345], "{name}");
    }
}

pub async fn float_only_ops_and_logical_ops_refuse_the_wrong_dtype_and_queue_nothing() {
    let gpu = device().await;
    let i = int_tensor(&gpu, &[1, 2, 3, 4], Some(&[2, 2]));
    let f = gpu.tensor(&[1.0, 2.0, 3.0, 4.0], Some(&[2, 2])).unwrap();
    let before = gpu.stats().ops_registered;
    let refused = [
        ("log", i.log().err()),
        ("sqrt", i.sqrt().err()),
        ("sigmoid", i.sigmoid().err()),
        ("matmul", i.matmul(&f).err()),
        ("matmul", f.matmul_transposed(&i, true, false).err()),
        ("softmax", i.softmax(-1).err()),
        ("logicalAnd", f.logical_and(&f).err()),
        ("bitwiseAnd", f.bitwise_and(&f).err()),
        ("bitwiseAnd", i.bitwise_and(3.0).err()),
        ("logicalNot", i.logical_not().err()),
        ("where", gpu.where_(&f, &f, &f).err()),
        ("argMax", gpu.zeros(&[0]).unwrap().arg_max(0).err()),
    ];
    let after_zeros = before + 1;
    for (op, error) in refused {
        let error = error.unwrap_or_else(|| panic!("{op} was not refused"));
        assert_eq!(error.op, op, "{error}");
        assert!(
            error.to_string().contains("int32")
                || error.to_string().contains("bool")
                || error.to_string().contains("empty"),
            "{error}"
        );
    }
    assert_eq!(
        gpu.stats().ops_registered,
        after_zeros,
        "nothing else was queued"
    );
    let range = gpu
        .range(0.0, 3.5, 1.0, DType::Int32)
        .err()
        .expect("refused");
    assert!(range.to_string().contains("whole"), "{range}");
    let fill = gpu.fill(&[2], 0.5, DType::Int32).err().expect("refused");
    assert!(fill.to_string().contains("not an int32"), "{fill}");
}

pub async fn gradients_pass_through_casts_from_floats_and_never_reach_an_int() {
    let gpu = device().await;
    let x = gpu.tensor(&[1.0, -2.0, 3.0], None).unwrap();
    let i = int_tensor(&gpu, &[1, 2, 3], None);
    // The mask is a bool, the count an int: neither carries a gradient,
    // and the path through the float product does.
    let g = gpu
        .grad(
            |x| {
                let mask = x.greater(0.0)?;
                x.mul(&mask)?.mul(&i)?.sum(None, false)
            },
            &x,
            None,
        )
        .unwrap();
    assert_eq!(g.to_vec().await.unwrap(), [1.0, 0.0, 3.0]);
    let refused = gpu
        .grad(|i| i.sum(None, false), &i, None)
        .err()
        .expect("refused");
    assert!(refused.to_string().contains("int32"), "{refused}");
}

pub async fn an_int_chain_fused_with_float_ops_is_one_kernel() {
    let gpu = kernels_only().await;
    let idx = gpu.range(0.0, 1024.0, 1.0, DType::Int32).unwrap();
    let x = gpu.tensor(&vec![0.5; 1024], None).unwrap();
    let _ = x.to_vec().await.unwrap();
    let before = gpu.stats().kernels_launched;
    let y = idx
        .mod_(&int_tensor(&gpu, &[3], None))
        .unwrap()
        .cast(DType::Float32)
        .unwrap()
        .mul(&x)
        .unwrap()
        .add(1.0)
        .unwrap();
    let out = y.to_vec().await.unwrap();
    assert_eq!(gpu.stats().kernels_launched - before, 1, "one kernel");
    let want: Vec<f32> = (0..1024).map(|i| (i % 3) as f32 * 0.5 + 1.0).collect();
    assert_eq!(out, want);
}

pub async fn a_fault_in_a_cast_fails_only_what_reads_it() {
    for (name, gpu) in both().await {
        let x = gpu.tensor(&[1.5, 2.5, -3.5], None).unwrap();
        let i = int_tensor(&gpu, &[4, 5, 6], None);
        gpu.inject_fault("cast", 1, FaultKind::Validation).unwrap();
        let truncated = x.cast(DType::Int32).unwrap();
        let sum = truncated.add(&i).unwrap();
        let unrelated = i.mul(&i).unwrap();
        let error = read_err(&sum).await;
        assert_eq!(error.failures[0].root.op, "cast", "{name}: {error}");
        read_err(&truncated).await;
        assert_eq!(ints(&unrelated).await, [16, 25, 36], "{name}");
        drop((truncated, sum, error));
        assert_eq!(gpu.stats().failures_held, 0, "{name}");
    }
}

pub async fn one_hot_encodes_int32_indices_as_tf_js_does_and_fuses_with_what_reads_it() {
    for (name, gpu) in both().await {
        let labels = int_tensor(&gpu, &[0, 2, -1, 3, 1, 7], Some(&[2, 3]));
        let hot = labels.one_hot(4, 1.0, 0.0, DType::Int32).unwrap();
        assert_eq!(hot.shape(), &[2, 3, 4]);
        assert_eq!(hot.dtype(), DType::Int32, "TF.js's default dtype");
        assert_eq!(
            ints(&hot).await,
            [
                1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, // -1: a row of off
                0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, // 7: past depth
            ],
            "{name}"
        );
        let smooth = labels.one_hot(4, 0.9, 0.05, DType::Float32).unwrap();
        let v = read_f32(&smooth).await;
        assert_eq!(&v[..4], [0.9, 0.05, 0.05, 0.05], "{name}");
        let flags = labels.one_hot(4, 1.0, 0.0, DType::Bool).unwrap();
        assert_eq!(bools(&flags).await[..4], [true, false, false, false]);
    }
    // As a cross-entropy reads it: one kernel for the encoding, the product
    // and the row sums.
    let gpu = kernels_only().await;
    let labels = int_tensor(&gpu, &[1, 0, 2, 1], None);
    let logp = gpu
        .tensor(
            &[
                -0.1, -2.0, -3.0, -0.5, -1.0, -2.5, -3.0, -2.0, -0.2, -1.5, -0.3, -2.0,
            ],
            Some(&[4, 3]),
        )
        .unwrap();
    let _ = logp.to_vec().await.unwrap();
    let _ = labels.to_vec().await.unwrap();
    let before = gpu.stats().kernels_launched;
    let picked = labels
        .one_hot(3, 1.0, 0.0, DType::Float32)
        .unwrap()
        .mul(&logp)
        .unwrap()
        .sum(Some(&[1]), false)
        .unwrap();
    assert_eq!(read_f32(&picked).await, [-2.0, -0.5, -0.2, -0.3]);
    assert_eq!(gpu.stats().kernels_launched - before, 1, "one kernel");
    let float = gpu.tensor(&[0.0, 1.0], None).unwrap();
    let refused = float
        .one_hot(2, 1.0, 0.0, DType::Int32)
        .err()
        .expect("refused");
    assert!(refused.to_string().contains("int32"), "{refused}");
    let shallow = labels
        .one_hot(1, 1.0, 0.0, DType::Int32)
        .err()
        .expect("refused");
    assert!(shallow.to_string().contains("at least 2"), "{shallow}");
    let huge = labels
        .one_hot(usize::MAX, 1.0, 0.0, DType::Int32)
        .err()
        .expect("refused");
    assert_eq!(huge.op, "oneHot", "{huge}");
}

/// A float `floorDiv` in a kernel was one too low at negative exact
/// multiples (`-21 / 7` read -4; found by outside testing): WGSL's
/// division is within 2.5 ulp, `-21 / 7` may read -3.0000002, and a
/// divisor the kernel had written in as a constant became a reciprocal's
/// product, so the first such kernel of a device erred and a remembered
/// one did not. The quotient is now `(a - mod(a, b)) / b` rounded, the
/// remainder exact: whole multiples and near ones give `floor` of the true
/// quotient on every path, whatever ran before.
pub async fn a_float_floor_div_is_exact_at_multiples_on_a_fresh_device() {
    let a: Vec<f32> = (0..2000).map(|i| -((i + 1) * 7) as f32).collect();
    let mut near: Vec<(f32, f32)> = Vec::new();
    let mut seeded = Seeded::new(0x2545_F491);
    let mut next = || (seeded.next() >> 32) as u32;
    for _ in 0..2000 {
        let b = (next() % 2000) as f32 / 16.0 + 0.0625;
        let q = (next() % 2_000_000) as f32 - 1_000_000.0;
        // A multiple of `b`, or a float either side of it.
        let m = q * b;
        let a = match next() % 3 {
            0 => m,
            1 => f32::from_bits(m.to_bits() + 1),
            _ => f32::from_bits(m.to_bits().saturating_sub(1)),
        };
        near.push((a, b));
    }
    let want = |a: f32, b: f32| (f64::from(a) / f64::from(b)).floor() as i32;
    for max in [1usize << 20, 0] {
        let gpu = super::engine::device_with(webfusion::DeviceOptions {
            host_max_elements: max,
            ..webfusion::DeviceOptions::default()
        })
        .await;
        let x = gpu.tensor(&a, None).unwrap();
        let sevens = gpu.full(&[a.len()], 7.0).unwrap();
        for (what, q) in [
            ("by a tensor of 7s", x.floor_div(&sevens).unwrap()),
            ("by the number 7", x.floor_div(7.0).unwrap()),
        ] {
            let got = ints(&q).await;
            let wrong = (0..a.len()).filter(|&i| got[i] != -(i as i32 + 1)).count();
            assert_eq!(wrong, 0, "host {max}, {what}: {:?}", &got[..4]);
        }
        let (xs, ys): (Vec<f32>, Vec<f32>) = near.iter().copied().unzip();
        let q = gpu
            .tensor(&xs, None)
            .unwrap()
            .floor_div(&gpu.tensor(&ys, None).unwrap())
            .unwrap();
        let got = ints(&q).await;
        let wrong: Vec<_> = near
            .iter()
            .zip(&got)
            .filter(|((a, b), g)| want(*a, *b) != **g)
            .take(3)
            .collect();
        assert!(wrong.is_empty(), "host {max}: near multiples: {wrong:?}");
    }
}
