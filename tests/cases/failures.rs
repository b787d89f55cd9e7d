//! Failures stay on the tensors they could not write (docs/design.md §2, items
//! 3-9), in both worlds: a read of a tainted tensor fails with the whole
//! chain back to the root, everything else reads normally, `sync()` tells
//! the truth, and nothing panics.

use webfusion::{DeviceOptions, FailureKind, FaultKind};

use super::engine::{device, device_with, kernels_only, read, read_err};

const HUGE: [usize; 2] = [1 << 18, 1 << 18];

pub async fn the_seed_scenario_fails_only_the_huge_tensor_and_says_why() {
    let gpu = device().await;
    let huge = gpu.zeros(&HUGE).unwrap().add(1.0).unwrap();
    assert_eq!(huge.shape(), &HUGE, "the shape is known at once");
    let small = gpu.tensor(&[1.0, 2.0], None).unwrap().mul(2.0).unwrap();
    assert_eq!(read(&small).await, vec![2.0, 4.0]);
    gpu.sync()
        .await
        .expect("nothing ran has failed: `huge` is an expression nobody read");
    assert_eq!(gpu.stats().expressions_held, 1, "huge");
    assert_eq!(gpu.stats().failures_held, 0);

    // A slice is a view: it needs `huge` in memory, which cannot be.
    let sliced = huge.slice(&[0, 0], &[1, 2]).unwrap();
    let error = read_err(&sliced).await;
    let report = error.first().expect("one report");
    assert_eq!(error.failures.len(), 1);
    assert_eq!(report.root.kind, FailureKind::Allocation);
    assert_eq!(report.root.op, "zeros+add");
    assert_eq!(
        report.root.message,
        "274877906944 bytes exceeds maxBufferSize (268435456)"
    );
    assert_eq!(report.depth, 1);
    assert_eq!(report.chain.len(), 1);
    assert_eq!(report.chain[0].op, "slice");
    assert_eq!(report.chain[0].needed, huge.id());
    assert_eq!(report.carriers, 2, "huge and the slice carry it");
    let sync = gpu.sync().await.expect_err("sync tells the truth");
    assert_eq!(sync.failures.len(), 1, "{sync}");
    assert_eq!(sync.failures[0].root.kind, FailureKind::Allocation);
    gpu.sync()
        .await
        .expect("no new failure: the second sync resolves");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "reading {} [1,2] failed: its bytes were never written",
            sliced.id()
        )),
        "{text}"
    );
    assert!(
        text.contains("skipped 1 operation(s) below a failure"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "skipped `slice`: it needed {}, which carried the failure",
            huge.id()
        )),
        "{text}"
    );
    assert!(
        text.contains("caused by: zeros+add: 274877906944 bytes exceeds maxBufferSize (268435456)"),
        "{text}"
    );

    let direct = read_err(&huge).await;
    assert!(
        direct
            .to_string()
            .contains("its buffer was never allocated"),
        "{direct}"
    );
    assert_eq!(
        read(&small).await,
        vec![2.0, 4.0],
        "the unrelated tensor still reads"
    );
}

pub async fn a_gpu_reported_failure_leaves_independent_work_of_the_same_flush_intact() {
    let gpu = device().await;
    let x = gpu.tensor(&[1.0, 2.0, 3.0, 4.0], Some(&[2, 2])).unwrap();
    gpu.inject_fault("matmul", 1, FaultKind::Validation)
        .unwrap();
    let product = x.matmul(&x).unwrap();
    let below = product.exp().unwrap();
    let independent = x.add(10.0).unwrap();
    let reduced = x.sum(None, false).unwrap();
    assert_eq!(read(&independent).await, vec![11.0, 12.0, 13.0, 14.0]);
    assert_eq!(read(&reduced).await, vec![10.0]);

    let error = read_err(&product).await;
    let report = error.first().unwrap();
    assert_eq!(report.root.kind, FailureKind::Injected);
    assert_eq!(
        report.root.op, "matmul",
        "rooted at the op the fault was injected into, though the exp ran as its epilogue"
    );
    assert!(
        report.root.message.contains("injected validation fault"),
        "{}",
        report.root.message
    );
    assert_eq!(report.depth, 0);
    let below = read_err(&below).await;
    assert_eq!(
        below.first().unwrap().depth,
        1,
        "reported as if unfused, though written by the same kernel"
    );
    assert_eq!(below.first().unwrap().chain[0].op, "exp");
    assert_eq!(below.first().unwrap().chain[0].needed, product.id());
    let later = read_err(&product.neg().unwrap()).await;
    assert_eq!(later.first().unwrap().depth, 1);
    assert_eq!(later.first().unwrap().chain[0].op, "neg");

    let sync = gpu
        .sync()
        .await
        .expect_err("the injected failure is reported");
    assert_eq!(sync.failures.len(), 1);
    let again = x.matmul(&x).unwrap();
    assert_eq!(
        read(&again).await,
        vec![7.0, 10.0, 15.0, 22.0],
        "only the nth block failed"
    );
}

pub async fn work_flushed_before_a_failing_submit_resolves_reads_what_its_replay_wrote() {
    // A queue of three flushes by itself: in the browser the second flush is
    // submitted before the first one's error scope has answered.
    let gpu = device_with(DeviceOptions {
        capacity: 3,
        ..Default::default()
    })
    .await;
    gpu.inject_fault("exp", 1, FaultKind::Validation).unwrap();
    let x = gpu.tensor(&[1.0, 2.0, 3.0, 4.0], None).unwrap();
    let failed = x.exp();
    let total = x.sum(None, false).unwrap();
    assert_eq!(gpu.stats().flushes, 1, "upload, exp and sum in one submit");
    let from_total = total.mul(2.0).unwrap().add(1.0).unwrap();
    let from_failed = failed.unwrap().neg().unwrap();
    assert_eq!(gpu.stats().flushes, 2);

    assert_eq!(
        read(&from_total).await,
        vec![21.0],
        "the voided submit's sum was written again, and what read it too"
    );
    assert_eq!(read(&total).await, vec![10.0]);
    let error = read_err(&from_failed).await;
    let report = error.first().unwrap();
    assert_eq!(report.root.kind, FailureKind::Injected);
    assert_eq!(report.root.op, "exp");
    assert_eq!(report.depth, 1);
    assert_eq!(report.chain[0].op, "neg");
    let sync = gpu
        .sync()
        .await
        .expect_err("the injected failure is reported");
    assert_eq!(sync.failures.len(), 1);
}

pub async fn a_fused_kernel_still_writes_the_outputs_that_do_not_depend_on_a_failure() {
    let gpu = device().await;
    let v = gpu.tensor(&[1.0, 2.0], None).unwrap();
    gpu.inject_fault("exp", 1, FaultKind::OutOfMemory).unwrap();
    let e = v.exp();
    let _ = gpu.sync().await;
    let w = gpu.tensor(&[5.0, 6.0], None).unwrap();
    gpu.sync().await.expect("nothing new failed");
    let tainted = e.unwrap().add(1.0).unwrap();
    let clean = w.mul(2.0).unwrap();
    assert_eq!(read(&clean).await, vec![10.0, 12.0]);
    let error = read_err(&tainted).await;
    assert_eq!(error.first().unwrap().depth, 1);
    assert!(
        error
            .first()
            .unwrap()
            .root
            .message
            .contains("injected out-of-memory fault (raised on the GPU as a validation error")
    );
}

pub async fn a_chain_of_ten_ops_below_a_failure_reports_depth_ten() {
    let gpu = device().await;
    let mut t = gpu.zeros(&HUGE).unwrap().add(1.0).unwrap();
    read_err(&t).await; // the root runs alone; the chain below is skipped
    for _ in 0..10 {
        t = t.exp().unwrap();
    }
    let error = read_err(&t).await;
    let report = error.first().unwrap();
    assert_eq!(report.depth, 10);
    assert_eq!(report.chain.len(), 10);
    assert!(report.chain.iter().all(|s| s.op == "exp"));
    assert_eq!(report.dropped, 0);
    assert!(
        error
            .to_string()
            .contains("skipped 10 operation(s) below a failure")
    );
}

/// Past a failure's 256 skip records, those no held tensor's chain walks
/// through go first. A tensor made soon after the failure, read after
/// three hundred more ops were skipped on top of it, gets its whole chain
/// (found by outside testing: a step's cost, read after two more steps were
/// queued, had none); the last, whose intermediates nobody holds, gets the
/// newest hops the cap leaves beside the early one's three, and says the
/// rest were dropped.
pub async fn three_hundred_skips_leave_an_early_tensor_its_whole_chain_and_name_the_dropped_records()
 {
    let gpu = device().await;
    let mut t = gpu.zeros(&HUGE).unwrap().add(1.0).unwrap();
    read_err(&t).await;
    let mut early = None;
    for i in 0..300 {
        t = t.neg().unwrap();
        if i == 2 {
            early = Some(t.clone());
        }
    }
    let error = read_err(&t).await;
    let report = error.first().unwrap();
    assert_eq!(report.depth, 300);
    assert_eq!(report.chain.len(), 256 - 3);
    assert_eq!(report.dropped, 44);
    let text = error.to_string();
    assert!(
        text.contains("44 skip record(s) were dropped; the chain stops before the root"),
        "{text}"
    );
    assert!(
        text.contains("caused by: zeros+add: 274877906944 bytes"),
        "{text}"
    );
    let error = read_err(&early.unwrap()).await;
    let report = error.first().unwrap();
    assert_eq!((report.depth, report.chain.len()), (3, 3), "{error}");
    assert!(!error.to_string().contains("dropped"), "{error}");
}

pub async fn two_failures_reaching_one_tensor_are_each_reported_once() {
    let gpu = device().await;
    let a = gpu.zeros(&HUGE).unwrap().add(1.0).unwrap();
    read_err(&a).await;
    let b = gpu.full(&HUGE, 2.0).unwrap().mul(3.0).unwrap();
    read_err(&b).await;
    let c = a.add(&b).unwrap().sub(&a).unwrap();
    let error = read_err(&c).await;
    assert_eq!(error.failures.len(), 2, "{error}");
    assert_ne!(error.failures[0].failure, error.failures[1].failure);
    let ops: Vec<&str> = error.failures.iter().map(|r| r.root.op.as_str()).collect();
    assert!(
        ops.contains(&"zeros+add") && ops.contains(&"full+mul"),
        "{ops:?}"
    );
    assert!(error.failures.iter().all(|r| r.depth == 2), "{error}");
}

pub async fn disposing_every_tainted_tensor_releases_every_failure_and_every_byte() {
    let gpu = kernels_only().await;
    let start = gpu.stats();
    {
        let huge = gpu.zeros(&HUGE).unwrap().add(1.0).unwrap();
        let below = huge.slice(&[0, 0], &[2, 2]).unwrap().exp();
        let fine = gpu.ones(&[64]).unwrap().mul(3.0).unwrap();
        read(&fine).await;
        assert!(below.unwrap().to_vec().await.is_err());
        assert!(gpu.stats().failures_held > 0);
        assert!(gpu.stats().bytes_in_use > start.bytes_in_use);
    }
    assert_eq!(gpu.stats().failures_held, 0, "released without a sync");
    let _ = gpu.sync().await;
    assert_eq!(gpu.stats().failures_held, 0);
    assert_eq!(gpu.stats().bytes_in_use, start.bytes_in_use);
}

/// `failuresHeld` returns to 0 when every tensor carrying a failure is
/// disposed, with no `sync()`: a failed tensor read before a tensor that
/// reads it left one record per loop until the next `sync()` (found by
/// outside testing), so a loop that never syncs would grow without bound.
/// For a flagged non-finite value and an injected fault, on the host and
/// in kernels.
pub async fn a_loop_that_reads_a_failed_tensor_and_what_reads_it_holds_no_failure_once_both_are_disposed()
 {
    for (name, max) in [("host", 1024), ("kernels", 0)] {
        let gpu = device_with(DeviceOptions {
            host_max_elements: max,
            check_numerics: true,
            ..DeviceOptions::default()
        })
        .await;
        for injected in [false, true] {
            for i in 0..3 {
                {
                    let b = gpu.tensor(&[1.0, 2.0, 3.0, 4.0], Some(&[4, 1])).unwrap();
                    let z = b.sub(&b).unwrap();
                    let q = match injected {
                        true => {
                            gpu.inject_fault("div", 1, FaultKind::Validation).unwrap();
                            b.div(&b).unwrap()
                        }
                        false => b.div(&z).unwrap(),
                    };
                    let c = q.cos().unwrap();
                    assert!(q.to_vec().await.is_err(), "{name}: q fails");
                    assert!(c.to_vec().await.is_err(), "{name}: c fails");
                    // In the order a page disposes them, first made first.
                    drop((b, z, q, c));
                }
                let stats = gpu.stats();
                assert_eq!(
                    (stats.failures_held, stats.expressions_held),
                    (0, 0),
                    "{name}, injected {injected}, loop {i}"
                );
            }
        }
    }
}

/// The README's failure, each tensor named and disposed: a refused block
/// and the view and op that read it hold no failure once disposed, with no
/// `sync()`. The refusal is decided before the block touches the GPU: the
/// flush opened an error scope for it, and in the browser that empty
/// scope's pending result held the failure until the next sync (found by
/// outside testing).
pub async fn a_refused_block_and_what_reads_it_hold_no_failure_once_disposed_without_a_sync() {
    let gpu = device().await;
    for i in 0..2 {
        {
            let zeros = gpu.zeros(&HUGE).unwrap();
            let huge = zeros.add(1.0).unwrap();
            let slice = huge.slice(&[0, 0], &[1, 2]).unwrap();
            let y = slice.exp().unwrap();
            let error = read_err(&y).await;
            assert_eq!(error.first().unwrap().root.kind, FailureKind::Allocation);
            drop((y, slice, huge, zeros));
        }
        let stats = gpu.stats();
        assert_eq!(
            (stats.failures_held, stats.expressions_held),
            (0, 0),
            "loop {i}"
        );
    }
}

pub async fn a_lost_device_fails_every_read_and_registration_and_a_new_device_works() {
    let gpu = device().await;
    let done = gpu.tensor(&[1.0, 2.0], None).unwrap().add(1.0).unwrap();
    read(&done).await;
    let queued = done.mul(2.0).unwrap();
    gpu.destroy();
    for t in [&done, &queued] {
        let error = read_err(t).await;
        assert_eq!(
            error.first().unwrap().root.kind,
            FailureKind::DeviceLost,
            "{error}"
        );
        assert!(error.to_string().contains("destroy()"), "{error}");
    }
    let refused = done
        .add(1.0)
        .err()
        .expect("registration on a lost device throws");
    assert!(refused.to_string().contains("was lost"), "{refused}");
    let fresh = device().await;
    assert_eq!(
        read(&fresh.tensor(&[3.0], None).unwrap().neg().unwrap()).await,
        vec![-3.0]
    );
}

pub async fn moving_a_tainted_tensor_carries_its_failure_to_the_other_device() {
    let (one, two) = (device().await, device().await);
    let a = one.ones(&[2]).unwrap();
    let b = two.ones(&[2]).unwrap();
    let refused = a
        .add(&b)
        .err()
        .expect("cross-device ops throw at registration");
    assert!(
        refused.to_string().contains(&one.label()) && refused.to_string().contains(&two.label())
    );

    let moved = a.add(1.0).unwrap().to(&two).unwrap().await.unwrap();
    assert_eq!(read(&moved.add(&b).unwrap()).await, vec![3.0, 3.0]);

    let huge = one.zeros(&HUGE).unwrap().add(1.0).unwrap();
    let tainted = huge.slice(&[0, 0], &[1, 2]).unwrap();
    let carried = tainted
        .to(&two)
        .unwrap()
        .await
        .expect("moving a tainted tensor is no error");
    let error = read_err(&carried.exp().unwrap()).await;
    let report = error.first().unwrap();
    assert_eq!(report.root.kind, FailureKind::Allocation);
    assert!(
        report.root.message.contains(&one.label()),
        "{}",
        report.root.message
    );
    assert_eq!(report.depth, 3, "slice, to, exp");
    let ops: Vec<&str> = report.chain.iter().map(|s| s.op.as_str()).collect();
    assert_eq!(ops, ["exp", "to", "slice"]);
}

pub async fn captured_stacks_name_the_line_that_registered_the_root_op() {
    let gpu = device_with(DeviceOptions {
        capture_stacks: true,
        ..Default::default()
    })
    .await;
    let huge = gpu.zeros(&HUGE).unwrap().add(1.0).unwrap();
    let error = read_err(&huge.exp().unwrap()).await;
    let site = error
        .first()
        .unwrap()
        .root
        .registered_at
        .clone()
        .expect("captured");
    assert!(site.contains("failures.rs"), "{site}");
    assert!(error.to_string().contains(&format!("registered at {site}")));

    // Fused with smaller ops after it, the op that asked for the size is
    // the one named: the `full` of 2^36 elements, not the last op.
    let line = line!() + 1;
    let made = gpu.full(&HUGE, 2.0).unwrap();
    let fused = made.mul(3.0).unwrap().add(1.0).unwrap();
    let error = read_err(&fused).await;
    let site = error.first().unwrap().root.registered_at.clone();
    assert_eq!(
        site.as_deref().and_then(|s| s.split(':').nth(1)),
        Some(line.to_string().as_str()),
        "{error}"
    );

    let plain = device().await;
    let huge = plain.zeros(&HUGE).unwrap().add(1.0).unwrap();
    assert_eq!(
        read_err(&huge).await.first().unwrap().root.registered_at,
        None,
        "off by default"
    );
}

pub async fn the_tensor_of_a_failed_op_rejects_after_its_failure_was_reported_downstream() {
    // The user's code: intermediates kept in variables, never read, and a
    // fault in the op in the middle. The kernel computes `a` and `d` inline
    // for `b`; once `b`'s read names `sigmoid` as the root, `a` and what is
    // computed from it carry that failure, not values computed again.
    let gpu = device().await;
    let x = gpu.tensor(&[0.5, 1.0, 2.0], None).unwrap();
    let y = gpu.tensor(&[1.0, 1.0, 1.0], None).unwrap();
    gpu.inject_fault("sigmoid", 1, FaultKind::Validation)
        .unwrap();
    let m = x.mul(2.0).unwrap();
    let a = m.sigmoid().unwrap();
    let d = a.mul(3.0).unwrap();
    let b = d.sub(&y).unwrap();

    let below = read_err(&b).await;
    let report = below.first().expect("one report");
    assert_eq!(report.root.kind, FailureKind::Injected);
    assert_eq!(report.root.op, "sigmoid");
    assert_eq!(report.depth, 2, "mul, then sub, below sigmoid");

    let own = read_err(&a).await;
    assert_eq!(own.failures.len(), 1, "{own}");
    assert_eq!(own.failures[0].failure, report.failure, "the same failure");
    assert_eq!(own.failures[0].depth, 0, "sigmoid's own tensor");
    let between = read_err(&d).await;
    assert_eq!(between.failures[0].failure, report.failure);
    assert_eq!(between.failures[0].depth, 1);
    // Anything computed from it later fails as well, one op deeper.
    let later = a.add(1.0).unwrap();
    let error = read_err(&later).await;
    assert_eq!(error.failures[0].failure, report.failure);
    assert_eq!(error.failures[0].depth, 1);
    // What sigmoid read, and everything else, reads normally.
    assert_eq!(read(&m).await, vec![1.0, 2.0, 4.0]);
    assert_eq!(read(&y).await, vec![1.0, 1.0, 1.0]);
    let sync = gpu.sync().await.expect_err("the failure, once");
    assert_eq!(sync.failures.len(), 1, "{sync}");
    drop((a, d, b, later));
    assert_eq!(gpu.stats().failures_held, 0, "freed with its carriers");
}
