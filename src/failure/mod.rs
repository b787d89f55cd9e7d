//! The error graph: what failed, what it stopped, and which tensors still
//! carry it.
//!
//! Whether a tensor's bytes can be trusted is a fact about that tensor, so the
//! fact lives on its record: a tensor whose bytes were never written carries
//! the ids of the failures that stopped them (`State::Failed` in `device::state`).
//! What an id *means* lives here, one graph per device: the root error, and
//! the skip records a read walks back from the tensor it asked about to that
//! root.
//!
//! A failure lives exactly as long as some tensor carries it: the graph
//! counts carriers and drops a failure with its last one, so it holds
//! failures if and only if the program holds tainted tensors
//! (`stats().failuresHeld`).

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use std::fmt;
use std::num::NonZeroU64;

use crate::ir::TensorId;

/// The id of one failure. 64 bits, non-zero, never reused: drawn from one
/// counter per thread, so ids stay unique across devices and a failure
/// carried onto another device keeps a name of its own there. Reuse would be
/// unsound: a freshly minted failure has no carriers yet, exactly like one
/// about to be dropped, so a recycled id could let one drop delete another's
/// failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FailureId(NonZeroU64);

impl FailureId {
    pub(crate) fn mint() -> FailureId {
        thread_local!(static MINTED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) });
        MINTED.with(|minted| {
            // 2^64 failures would take centuries at a billion a second.
            let next = minted.get().saturating_add(1);
            minted.set(next);
            FailureId(NonZeroU64::MIN.saturating_add(next - 1))
        })
    }

    pub fn get(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for FailureId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "failure #{}", self.0)
    }
}

/// What kind of error a root is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// A buffer beyond the device's limits, refused before any GPU call.
    Allocation,
    /// Work a kernel cannot index with 32 bits (more than 2^32 - 1
    /// elements to visit or to reach), refused before any GPU call.
    IndexRange,
    /// An index a kernel met outside what it indexes (a `gather` past its
    /// table), flagged by that kernel and read with its outputs.
    Index,
    /// A value an op made that is not finite (NaN, +Inf or -Inf) from
    /// operands that were, flagged by the kernel that computed it while the
    /// device checks numerics (`DeviceOptions::check_numerics`).
    NonFinite,
    /// The GPU rejected the work as invalid.
    Validation,
    /// The GPU ran out of memory.
    OutOfMemory,
    /// The GPU reported an internal error.
    Internal,
    /// A fault the program asked for with `injectFault`.
    Injected,
    /// The device was lost (or destroyed) before the work could finish.
    DeviceLost,
    /// Made inside `Device::warmup`, which compiles a program's kernels
    /// and runs none of them.
    Warmup,
}

impl FailureKind {
    /// The name JS sees (`root.kind`).
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Allocation => "allocation",
            FailureKind::IndexRange => "index-range",
            FailureKind::Index => "index",
            FailureKind::NonFinite => "non-finite",
            FailureKind::Validation => "validation",
            FailureKind::OutOfMemory => "out-of-memory",
            FailureKind::Internal => "internal",
            FailureKind::Injected => "injected",
            FailureKind::DeviceLost => "device-lost",
            FailureKind::Warmup => "warmup",
        }
    }
}

/// The error a failure started from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    pub kind: FailureKind,
    /// The block that failed, by its ops' names (`zeros+add`).
    pub op: String,
    pub message: String,
    /// Where the block's op was registered, when stacks are captured.
    pub registered_at: Option<String>,
}

impl fmt::Display for Root {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.message)
    }
}

/// One op a failure stopped: the op that did not run, the input that stopped
/// it, and what it would have produced (which now carries the failure).
///
/// On the failure rather than on the tensors, because a record stored on a
/// tensor dies with it, and a chain of links would break as soon as an
/// intermediate is freed: the common case in a fused graph, where only the
/// last tensor is kept. Holds ids, never handles, so the record of what a
/// failure stopped never keeps memory alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    pub op: String,
    pub needed: TensorId,
    pub produced: Vec<TensorId>,
}

#[derive(Debug)]
struct Failure {
    root: Root,
    /// How many tensors carry this id; the failure lives while this is
    /// non-zero.
    carriers: u32,
    /// Its skip records, oldest first, at most `MAX_SKIPS` (`skipped`
    /// says which go past that).
    skips: VecDeque<Skip>,
    /// Every skip ever recorded, so a report can say how many it lacks.
    skips_total: u64,
}

/// What a read of a tainted tensor learns about one failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub failure: FailureId,
    /// How many tensors still carry the failure.
    pub carriers: u32,
    /// Ops skipped between the root and the tensor read.
    pub depth: usize,
    /// The skip records from the tensor read back toward the root, newest
    /// first.
    pub chain: Vec<Skip>,
    /// Skip records dropped by the cap; the walk may stop short of the root.
    pub dropped: u64,
    pub root: Root,
}

/// Every failure a device still holds.
#[derive(Debug, Default)]
pub struct FailureGraph {
    failures: FxHashMap<FailureId, Failure>,
}

impl FailureGraph {
    /// How many skip records one failure keeps. A read walks from its
    /// tensor back toward the root, hop by hop, so what must stay is the
    /// hops of the tensors still held; the rest go first (`skipped`). A
    /// training step of a small model is 30-40 hops deep and makes about
    /// a hundred records: 256 keep the chains of a few steps queued on a
    /// failed one whole. Sixteen, the newest only, left a step's cost read
    /// after later steps with no hop at all. A walk that reaches a gap
    /// stops there and says so, losing nothing essential: the root is on
    /// the failure itself, never in the list.
    pub const MAX_SKIPS: usize = 256;

    /// A new failure, carried by nothing yet. A caller that taints nothing
    /// with it must `prune` it, or it waits forever for a carrier.
    pub fn insert(&mut self, root: Root) -> FailureId {
        let id = FailureId::mint();
        self.failures.insert(
            id,
            Failure {
                root,
                carriers: 0,
                skips: VecDeque::new(),
                skips_total: 0,
            },
        );
        id
    }

    /// One more tensor carries `failure`. Only the device's taint
    /// bookkeeping calls this, and once per tensor per failure.
    pub fn tag(&mut self, failure: FailureId) {
        if let Some(node) = self.failures.get_mut(&failure) {
            node.carriers += 1;
        }
    }

    /// One fewer tensor carries `failure`; it is dropped with its last
    /// carrier. Saturating: an unbalanced release must drop the failure
    /// rather than pin it (and its error) for the life of the device.
    pub fn untag(&mut self, failure: FailureId) {
        if let Some(node) = self.failures.get_mut(&failure) {
            debug_assert!(
                node.carriers > 0,
                "{failure} was released more often than carried"
            );
            node.carriers = node.carriers.saturating_sub(1);
            if node.carriers == 0 {
                self.failures.remove(&failure);
            }
        }
    }

    /// Drops `failure` if nothing carries it.
    pub fn prune(&mut self, failure: FailureId) {
        if self.failures.get(&failure).is_some_and(|n| n.carriers == 0) {
            self.failures.remove(&failure);
        }
    }

    /// Records an op `failure` stopped, and counts it. Past `MAX_SKIPS`,
    /// one record goes: the oldest that no chain of a tensor still held
    /// (`held`) walks through, else, every one being on such a chain, the
    /// oldest of the newer half (the first are the hops next to the root,
    /// which the most chains share).
    pub fn skipped(&mut self, failure: FailureId, skip: Skip, held: &dyn Fn(TensorId) -> bool) {
        if let Some(node) = self.failures.get_mut(&failure) {
            node.skips_total += 1;
            if node.skips.len() == Self::MAX_SKIPS {
                let gone = unwalked(&node.skips, held).unwrap_or(Self::MAX_SKIPS / 2);
                node.skips.remove(gone);
            }
            node.skips.push_back(skip);
        }
    }

    /// What a read of `tensor` learns about `failure`: the root, and the
    /// chain from `tensor` back toward it, found by walking the skip records
    /// backwards (each hop is the record that produced what the previous one
    /// needed). `depth` comes from the carrier, which knows it exactly even
    /// when records were dropped.
    pub fn report(&self, failure: FailureId, tensor: TensorId, depth: usize) -> Option<Report> {
        let node = self.failures.get(&failure)?;
        let mut chain = Vec::new();
        let mut target = tensor;
        let mut upper = node.skips.len();
        while let Some(found) = node
            .skips
            .range(..upper)
            .rposition(|s| s.produced.contains(&target))
        {
            let skip = &node.skips[found];
            chain.push(skip.clone());
            target = skip.needed;
            upper = found;
        }
        Some(Report {
            failure,
            carriers: node.carriers,
            depth,
            chain,
            dropped: node.skips_total - node.skips.len() as u64,
            root: node.root.clone(),
        })
    }

    /// How many failures are held: the bound the design rests on.
    pub fn len(&self) -> usize {
        self.failures.len()
    }
}

/// The oldest of `skips` that no chain of a tensor `held` walks through. A
/// chain goes from its tensor to the record that produced it, then to the
/// record that produced what that one needed, each older: one pass from
/// the newest marks every record some held tensor's chain reaches.
fn unwalked(skips: &VecDeque<Skip>, held: &dyn Fn(TensorId) -> bool) -> Option<usize> {
    // The chains' frontier: what a walked record needed, not yet found.
    // A tensor is produced once, so a found one leaves it, and it stays as
    // small as the chains being walked at once.
    let mut wanted: Vec<TensorId> = Vec::new();
    let mut walked = vec![false; skips.len()];
    for (i, s) in skips.iter().enumerate().rev() {
        let mut on_a_chain = false;
        for t in &s.produced {
            if let Some(k) = wanted.iter().position(|w| w == t) {
                wanted.swap_remove(k);
                on_a_chain = true;
            }
            on_a_chain |= held(*t);
        }
        if on_a_chain {
            walked[i] = true;
            wanted.push(s.needed);
        }
    }
    walked.iter().position(|&w| !w)
}

/// A read that could not give a tensor's values: its bytes were never
/// written. One report per distinct failure that reached the tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorError {
    pub tensor: TensorId,
    pub shape: Vec<usize>,
    pub failures: Vec<Report>,
    /// Where the read was asked, when known.
    pub asked_at: Option<String>,
}

impl TensorError {
    /// The first (often the only) failure's report.
    pub fn first(&self) -> Option<&Report> {
        self.failures.first()
    }
}

impl fmt::Display for TensorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape = crate::ir::shape::display(&self.shape);
        for (i, report) in self.failures.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            let what = match (report.root.kind, report.depth) {
                (FailureKind::Allocation, 0) => "its buffer was never allocated",
                _ => "its bytes were never written",
            };
            write!(
                f,
                "reading {} {shape} failed: {what} ({}, still carried by {} buffer(s))",
                self.tensor, report.failure, report.carriers
            )?;
            if report.depth > 0 {
                write!(
                    f,
                    "\n  skipped {} operation(s) below a failure",
                    report.depth
                )?;
            }
            for skip in &report.chain {
                write!(
                    f,
                    "\n  skipped `{}`: it needed {}, which carried the failure",
                    skip.op, skip.needed
                )?;
            }
            if report.dropped > 0 && report.chain.len() < report.depth {
                write!(
                    f,
                    "\n  ({} skip record(s) were dropped; the chain stops before the root)",
                    report.dropped
                )?;
            }
            write!(f, "\n  caused by: {}", report.root)?;
            if let Some(site) = &report.root.registered_at {
                write!(f, "\n  registered at {site}")?;
            }
        }
        if let Some(site) = &self.asked_at {
            write!(f, "\n  asked at {site}")?;
        }
        Ok(())
    }
}

impl std::error::Error for TensorError {}

/// One failure `sync()` reports: its root and how many tensors it tainted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureSummary {
    pub failure: FailureId,
    pub root: Root,
    pub tainted: usize,
}

/// `sync()`'s answer when work it flushed (or work flushed since the last
/// `sync()`) failed: one entry per distinct failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionError {
    pub failures: Vec<FailureSummary>,
    /// Failures past the first 256 since the last `sync()`, counted only.
    pub omitted: u64,
}

impl fmt::Display for ExecutionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sync: {} failure(s) in the flushed work",
            self.failures.len() as u64 + self.omitted
        )?;
        if self.omitted > 0 {
            write!(f, " ({} not listed)", self.omitted)?;
        }
        for s in &self.failures {
            write!(
                f,
                "\n  {} (tainted {} tensor(s)): {}",
                s.failure, s.tainted, s.root
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for ExecutionError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(message: &str) -> Root {
        Root {
            kind: FailureKind::Allocation,
            op: "zeros+add".to_string(),
            message: message.to_string(),
            registered_at: None,
        }
    }

    fn skip(op: &str, needed: u64, produced: u64) -> Skip {
        Skip {
            op: op.to_string(),
            needed: TensorId(needed),
            produced: vec![TensorId(produced)],
        }
    }

    #[test]
    fn a_failure_lives_while_something_carries_it_and_no_longer() {
        let mut graph = FailureGraph::default();
        let failure = graph.insert(root("too big"));
        graph.tag(failure);
        graph.tag(failure);
        graph.untag(failure);
        assert_eq!(graph.len(), 1, "one carrier remains");
        graph.untag(failure);
        assert_eq!(graph.len(), 0, "nothing carries it, so it is gone");
    }

    #[test]
    fn a_failure_that_tainted_nothing_is_dropped_at_once() {
        let mut graph = FailureGraph::default();
        let failure = graph.insert(root("too big"));
        graph.prune(failure);
        assert_eq!(graph.len(), 0);
    }

    #[test]
    fn pruning_leaves_a_carried_failure_alone() {
        let mut graph = FailureGraph::default();
        let failure = graph.insert(root("too big"));
        graph.tag(failure);
        graph.prune(failure);
        assert_eq!(graph.len(), 1);
    }

    #[test]
    fn failure_ids_are_never_reused() {
        let mut graph = FailureGraph::default();
        let first = graph.insert(root("a"));
        graph.prune(first);
        let second = graph.insert(root("b"));
        assert!(second > first);
    }

    #[test]
    fn a_report_walks_the_skip_chain_newest_first_back_to_the_root() {
        let mut graph = FailureGraph::default();
        let failure = graph.insert(root("274877906944 bytes exceeds maxBufferSize (268435456)"));
        graph.tag(failure);
        graph.skipped(failure, skip("slice", 2, 5), &|_| true);
        graph.skipped(failure, skip("exp", 5, 6), &|_| true);
        graph.skipped(failure, skip("neg", 9, 10), &|_| true); // another branch
        let report = graph.report(failure, TensorId(6), 2).unwrap();
        let ops: Vec<&str> = report.chain.iter().map(|s| s.op.as_str()).collect();
        assert_eq!(ops, ["exp", "slice"]);
        assert_eq!(
            report.root.message,
            "274877906944 bytes exceeds maxBufferSize (268435456)"
        );

        let root_only = graph.report(failure, TensorId(2), 0).unwrap();
        assert!(
            root_only.chain.is_empty(),
            "the tensor the failing block wrote has no skips"
        );
    }

    #[test]
    fn past_the_cap_the_records_no_held_tensor_walks_through_go_first() {
        let mut graph = FailureGraph::default();
        let failure = graph.insert(root("root"));
        graph.tag(failure);
        // A step's cost: two hops from the root, held.
        let held = |t: TensorId| t == TensorId(2);
        graph.skipped(failure, skip("mul", 0, 1), &held);
        graph.skipped(failure, skip("sum", 1, 2), &held);
        // More later ops on the root than the cap, all let go but the last.
        let later = FailureGraph::MAX_SKIPS as u64 + 8;
        let held = |t: TensorId| held(t) || t == TensorId(100 + later - 1);
        for i in 0..later {
            graph.skipped(failure, skip("exp", 0, 100 + i), &held);
        }
        let cost = graph.report(failure, TensorId(2), 2).unwrap();
        assert_eq!(cost.chain.len(), 2, "the held cost's chain is whole");
        assert_eq!(cost.chain[1].needed, TensorId(0));
        let last = graph.report(failure, TensorId(100 + later - 1), 1).unwrap();
        assert_eq!(last.chain.len(), 1);
        assert_eq!(last.dropped, 10);
    }

    #[test]
    fn the_skip_cap_keeps_the_first_and_the_newest_records_and_counts_the_dropped_ones() {
        let mut graph = FailureGraph::default();
        let failure = graph.insert(root("root"));
        graph.tag(failure);
        let n = FailureGraph::MAX_SKIPS as u64 + 8;
        for i in 0..n {
            graph.skipped(failure, skip("exp", i, i + 1), &|_| true);
        }
        let half = FailureGraph::MAX_SKIPS / 2;
        let report = graph.report(failure, TensorId(n), n as usize).unwrap();
        assert_eq!(report.chain.len(), half, "the newest, back to the gap");
        assert_eq!(
            report.chain[0].produced,
            vec![TensorId(n)],
            "the newest hop first"
        );
        assert_eq!(report.dropped, 8);
        let early = graph.report(failure, TensorId(5), 5).unwrap();
        assert_eq!(early.chain.len(), 5, "an early tensor's chain is whole");
        assert_eq!(early.chain[4].needed, TensorId(0), "back to the root");
        let error = TensorError {
            tensor: TensorId(n),
            shape: vec![2],
            failures: vec![report],
            asked_at: None,
        };
        let text = error.to_string();
        assert!(
            text.contains("8 skip record(s) were dropped; the chain stops before the root"),
            "{text}"
        );
        let whole = TensorError {
            tensor: TensorId(5),
            shape: vec![2],
            failures: vec![early],
            asked_at: None,
        };
        assert!(!whole.to_string().contains("dropped"), "{whole}");
        assert!(
            text.contains("caused by: zeros+add: root"),
            "the root is always named: {text}"
        );
        assert!(
            text.contains(&format!("skipped {n} operation(s) below a failure")),
            "{text}"
        );
    }

    #[test]
    fn the_text_names_the_tensor_the_failure_its_carriers_the_chain_and_the_root() {
        let mut graph = FailureGraph::default();
        let failure = graph.insert(Root {
            registered_at: Some("main.js:3:34".to_string()),
            ..root("274877906944 bytes exceeds maxBufferSize (268435456)")
        });
        graph.tag(failure);
        graph.tag(failure);
        graph.skipped(failure, skip("slice", 2, 5), &|_| true);
        let error = TensorError {
            tensor: TensorId(5),
            shape: vec![1, 2],
            failures: vec![graph.report(failure, TensorId(5), 1).unwrap()],
            asked_at: Some("main.js:9:1".to_string()),
        };
        let n = failure.get();
        assert_eq!(
            error.to_string(),
            format!(
                "reading tensor #5 [1,2] failed: its bytes were never written (failure #{n}, still carried by 2 buffer(s))\n  \
                 skipped 1 operation(s) below a failure\n  \
                 skipped `slice`: it needed tensor #2, which carried the failure\n  \
                 caused by: zeros+add: 274877906944 bytes exceeds maxBufferSize (268435456)\n  \
                 registered at main.js:3:34\n  \
                 asked at main.js:9:1"
            )
        );
    }
}
