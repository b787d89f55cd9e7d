//! The device: one single-threaded cell holding everything a device owns (the
//! queue, the tensors' records, the failure graph, the GPU). No mutex and no
//! thread: wasm in a page has one thread, and natively a `Device` and its
//! tensors are `!Send`, so work runs on the caller's thread at flush time.
//!
//! Its files follow a flush's life: `expressions` (what a flush must
//! compute and write besides the queue), `flush` (plan, decide on the CPU,
//! lower, submit), `settle` (wait for scopes, replay, land failures),
//! `commit` (a step's new values, kept only if all were written),
//! `profile` (what a piece of a program launched), `read`
//! (whether bytes can be trusted, and getting them), `faults` (injected
//! faults). Invariants kept here:
//! - A record's `data` says whether its bytes can be trusted: a tensor
//!   carries failures (`Data::Failed`) exactly when its bytes were never
//!   written because of them, and the failure graph counts each carrier
//!   once. Bytes written by a submission still `pending` are trusted only
//!   once it resolves (a read waits for it). An expression (`Data::Expr`)
//!   has no bytes and carries no failure: its value, and any failure of it,
//!   is found by the flush that computes it. A host value (`Data::Host`)
//!   is never pending and carries no failure: only uploads and blocks run
//!   on the host make one, and those read host values only, so no GPU
//!   error can reach it; it is uploaded, once, for the first kernel that
//!   reads it.
//! - A tensor stays while a handle holds it, a queued op or an expression
//!   reads it, or a view aliases it (`dependents`); a failure stays while a
//!   tensor carries it. So `failuresHeld` and `bytesInUse` return to their
//!   baseline when the program drops its tensors, whatever temporaries of
//!   theirs the garbage collector has not yet taken: a temporary of an
//!   elementwise chain is an expression, and holds neither bytes nor
//!   failures.
//! - The cell is borrowed only through `Device::with_state`, never across an
//!   `await`, so no callback can find it borrowed.

use std::cell::RefCell;
use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use crate::error::{ErrorClass, RegistrationError, RequestError};
use crate::failure::FailureSummary;
use crate::failure::{
    ExecutionError, FailureGraph, FailureId, FailureKind, Root, Skip, TensorError,
};
use crate::ir::layout::Layout;
use crate::ir::{OpIr, Queue, TensorId};
use faults::Fault;
pub use faults::FaultKind;
use flush::Submission;
pub use profile::{Profile, ProfiledKernel};

mod commit;
mod expressions;
mod faults;
mod flush;
mod profile;
pub(crate) mod read;
mod settle;
use crate::runtime::{Allocation, Gpu, Stats};

/// Options for [`Device::request`].
#[derive(Debug, Clone)]
pub struct DeviceOptions {
    /// Ops the queue holds before it flushes by itself (at least 1: a
    /// capacity of 0 is taken as 1).
    pub capacity: usize,
    /// Record where each op was registered, so a failure's report can name
    /// the line that registered its root op. Off by default: it costs a
    /// stack capture per op in the browser.
    pub capture_stacks: bool,
    /// Run each flush's GPU work in error scopes, replaying a flush whose
    /// scope reports an error block by block, so a failing block taints only
    /// what it was to write. On by default; off only to measure what that
    /// costs (a GPU error is then not caught, and independent work submitted
    /// with it is lost).
    pub error_scopes: bool,
    /// The most elements an elementwise block may have to run on the host
    /// when the host holds all its inputs (values given by the program, or
    /// made by another such block), as TF.js forwards small tensors to its
    /// CPU backend; 0 runs every block as a kernel. What it saves is the
    /// GPU's fixed costs: a new pipeline, a launch, a read's round trip
    /// (see `runtime::host`).
    pub host_max_elements: usize,
}

/// The default `host_max_elements`, TF.js's threshold for the same
/// forwarding (1000, rounded up to a power of two).
pub const HOST_MAX_ELEMENTS: usize = 1024;

/// The most elements times ops a block runs on the host, whatever
/// `host_max_elements` allows: the host computes about one op on one
/// element per nanosecond in this interpreter, a kernel does the arithmetic
/// for free after a fixed cost. Measured on lavapipe (`cargo run --release
/// --example host_threshold`, warm, registration included): 16 ops on 1024
/// elements take 0.04 ms on the host against 0.17 ms as a kernel, 1000 ops
/// on 16 elements 0.39 ms against 0.54 ms, but without this bound 1000 ops
/// on 256 elements took 0.65 ms against 0.57 ms. 2^16 keeps a host block
/// under ~70 µs, less than a read's round trip on any GPU.
pub(crate) const HOST_MAX_WORK: usize = 1 << 16;

impl Default for DeviceOptions {
    fn default() -> Self {
        DeviceOptions {
            capacity: 1024,
            capture_stacks: false,
            error_scopes: true,
            host_max_elements: HOST_MAX_ELEMENTS,
        }
    }
}

/// A GPU device and everything recorded on it. Cloning gives another handle
/// to the same device.
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Rc<DeviceCell>,
}

pub(crate) struct DeviceCell {
    pub(crate) state: RefCell<DeviceState>,
    /// Handles dropped while `state` was borrowed, released at the next
    /// borrow. A drop can happen anywhere (inside a JS finalizer, say), and a
    /// release that found the cell borrowed must neither panic nor be lost.
    dropped: RefCell<Vec<TensorId>>,
    /// `device #N`, as errors name it.
    number: u64,
}

/// Where a tensor's values are.
pub(crate) enum Data {
    /// Not written yet (its op is queued), or a fused intermediate that never
    /// needed memory.
    Unwritten,
    /// No elements: nothing to store.
    Empty,
    /// Its own buffer, row-major.
    Owned(Allocation),
    /// Another tensor's memory read through `layout`. `base` is always an
    /// owner (views of views are collapsed), and counts this view among its
    /// dependents so it outlives it.
    View { base: TensorId, layout: Layout },
    /// Its bytes were never written: the failures that stopped them. The
    /// record is a carrier of each (see `FailureGraph::tag`).
    Failed(Vec<Taint>),
    /// Values the host holds, row-major: an upload, or what a block run on
    /// the host made (`runtime::host`). No GPU memory until a kernel reads
    /// it: the flush that launches the first such kernel uploads it, and
    /// the host keeps its values, so later host work still reads them and
    /// later kernels the same upload.
    Host {
        values: Rc<[f32]>,
        uploaded: Option<Allocation>,
    },
    /// Held, but nobody has needed its bytes: its value is `op` (elementwise)
    /// applied to its inputs, which it holds as a queued op does (counted
    /// among their dependents). Any later kernel that reads it computes it
    /// inline (see `expressions`).
    Expr(Expr),
}

/// A tensor kept as the op that computes it.
pub(crate) struct Expr {
    pub op: OpIr,
    /// Whether a kernel has computed it inline already: a flush that needs
    /// it again writes it, so no value is recomputed on and on.
    pub inlined: bool,
}

/// One failure a tensor carries, and how many ops were skipped between that
/// failure's root and this tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taint {
    pub failure: FailureId,
    pub depth: usize,
}

/// What the device knows of one tensor.
pub(crate) struct Record {
    pub shape: Vec<usize>,
    /// Whether a handle (Rust `Tensor` or JS object) still refers to it.
    pub held: bool,
    /// Queued ops that read it, plus views that alias its memory. A tensor
    /// nobody holds stays while it has dependents.
    pub dependents: usize,
    pub data: Data,
    /// The submission whose error scopes must resolve before these bytes can
    /// be trusted; `None` once they have.
    pub pending: Option<u64>,
    /// Where the op writing it was registered, when stacks are captured.
    pub site: Option<Rc<str>>,
}

/// How many failures `sync()` names; past that it counts them. A program that
/// never calls `sync()` keeps at most this many summaries.
const MAX_UNREPORTED: usize = 256;

/// Why a device stopped: set by wgpu's device-lost callback (which must be
/// `Send`, hence the one mutex in the crate: it guards this string and
/// nothing else) or by `destroy`.
type LostSignal = Arc<Mutex<Option<String>>>;

pub(crate) struct DeviceState {
    pub gpu: Gpu,
    pub queue: Queue,
    pub records: FxHashMap<TensorId, Record>,
    pub graph: FailureGraph,
    pub stats: Stats,
    pub capacity: usize,
    pub capture_stacks: bool,
    pub error_scopes: bool,
    pub host_max_elements: usize,
    pub label: String,
    /// Flushed work whose error scopes have not all resolved, oldest first.
    pub submissions: VecDeque<Submission>,
    /// Tensors found tainted while settling submissions, so later pending
    /// blocks that read them (and ran on garbage) are tainted too. Emptied
    /// once nothing is pending.
    pub late_taints: FxHashMap<TensorId, Vec<Taint>>,
    /// Commits decided against while settling, for the pending blocks that
    /// read them first. Emptied once nothing is pending.
    pub stale: Vec<commit::Stale>,
    /// Buffers of collected tensors whose submission is still pending: if
    /// its scope fails they may be invalid and must not reach the pool.
    pub quarantine: Vec<(u64, Allocation)>,
    /// Scratch buffers to return to the pool at the next submit.
    pub retired: Vec<Allocation>,
    /// Failures since the last `sync()`, for it to report: the first
    /// `MAX_UNREPORTED`, and a count of the rest.
    pub unreported: Vec<FailureSummary>,
    pub unreported_omitted: u64,
    /// Faults asked for with `inject_fault`, not yet triggered.
    pub faults: Vec<Fault>,
    /// Tensors whose bytes a read asked for: the next flush writes them,
    /// expressions included.
    pub wanted: Vec<TensorId>,
    pub next_submission: u64,
    /// Set once the device is lost; everything on it is then poisoned.
    pub lost: Option<String>,
    /// The profile being taken, if one is (`profile`).
    pub profile: Option<profile::Taking>,
    lost_signal: LostSignal,
}

/// Whether the panic hook has been installed (once per thread: wasm has one).
pub(crate) fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // A test's own failed assertion is the test's business; anything
            // else (this crate, wgpu, std on its behalf) is a library panic.
            let in_tests = info
                .location()
                .is_some_and(|l| l.file().starts_with("tests/"));
            if !in_tests {
                PANICS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            #[cfg(target_arch = "wasm32")]
            console_error_panic_hook::hook(info);
            previous(info);
        }));
    });
}

/// Panics seen by the hook the library installs, outside test code. The
/// library never panics on a failure path; the test suites assert this stays
/// 0.
static PANICS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many panics the installed hook has seen in this process (or page).
pub fn panics_observed() -> u64 {
    PANICS.load(std::sync::atomic::Ordering::Relaxed)
}

impl Device {
    /// Opens a GPU device: WebGPU in the browser, Vulkan or Metal natively.
    pub async fn request(options: DeviceOptions) -> Result<Device, RequestError> {
        thread_local!(static NEXT: std::cell::Cell<u64> = const { std::cell::Cell::new(1) });
        install_panic_hook();
        let gpu = Gpu::request().await?;
        let lost_signal: LostSignal = Arc::new(Mutex::new(None));
        let signal = lost_signal.clone();
        gpu.device.set_device_lost_callback(move |reason, message| {
            if let Ok(mut lost) = signal.lock() {
                lost.get_or_insert_with(|| format!("{message} ({reason:?})"));
            }
        });
        let number = NEXT.with(|n| n.replace(n.get() + 1));
        Ok(Device {
            inner: Rc::new(DeviceCell {
                state: RefCell::new(DeviceState {
                    gpu,
                    queue: Queue::default(),
                    records: FxHashMap::default(),
                    graph: FailureGraph::default(),
                    stats: Stats::default(),
                    capacity: options.capacity.max(1),
                    capture_stacks: options.capture_stacks,
                    error_scopes: options.error_scopes,
                    host_max_elements: options.host_max_elements,
                    label: format!("device #{number}"),
                    submissions: VecDeque::new(),
                    late_taints: FxHashMap::default(),
                    stale: Vec::new(),
                    quarantine: Vec::new(),
                    retired: Vec::new(),
                    unreported: Vec::new(),
                    unreported_omitted: 0,
                    faults: Vec::new(),
                    wanted: Vec::new(),
                    next_submission: 1,
                    lost: None,
                    profile: None,
                    lost_signal,
                }),
                dropped: RefCell::new(Vec::new()),
                number,
            }),
        })
    }

    /// Runs `f` on the device state, after releasing handles dropped while it
    /// was busy and noticing a loss.
    ///
    /// Every entry point borrows through here and never across an `await`,
    /// so the borrow cannot be held by anyone else (the cell is !Sync and no
    /// callback re-enters it).
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut DeviceState) -> R) -> R {
        let mut state = self.inner.state.borrow_mut();
        let dropped = std::mem::take(&mut *self.inner.dropped.borrow_mut());
        for id in dropped {
            state.release_handle(id);
        }
        state.notice_loss();
        f(&mut state)
    }

    /// Called when the last handle to `id` goes away.
    pub(crate) fn drop_handle(&self, id: TensorId) {
        match self.inner.state.try_borrow_mut() {
            Ok(mut state) => state.release_handle(id),
            Err(_) => self.inner.dropped.borrow_mut().push(id),
        }
    }

    /// The counters of this device's work so far.
    pub fn stats(&self) -> Stats {
        self.with_state(|state| Stats {
            failures_held: state.graph.len() as u64,
            expressions_held: state.expressions_held(),
            uncaptured_errors: state
                .gpu
                .uncaptured
                .load(std::sync::atomic::Ordering::Relaxed),
            ..state.stats
        })
    }

    /// Runs everything queued and waits for it. Rejects when any work
    /// flushed since the last `sync()` failed, naming each failure once;
    /// tainted tensors stay tainted, nothing else is affected, and the device
    /// keeps working. Held tensors kept as expressions are not computed: a
    /// sync is not a read, and writing them would undo the fusion of code
    /// that syncs every step.
    pub async fn sync(&self) -> Result<(), ExecutionError> {
        loop {
            let waiting = self.with_state(|state| {
                state.flush();
                state.settle()
            });
            if waiting.is_empty() {
                break;
            }
            futures_util::future::join_all(waiting).await;
        }
        let (failures, omitted) = self.with_state(|state| {
            let omitted = std::mem::take(&mut state.unreported_omitted);
            (std::mem::take(&mut state.unreported), omitted)
        });
        if failures.is_empty() {
            Ok(())
        } else {
            Err(ExecutionError { failures, omitted })
        }
    }

    /// Makes the `nth` kernel that computes `op` (an op's name, as reports
    /// print it: `exp`, `matmul`, `sum`) fail through a genuine GPU error,
    /// caught by the same error-scope path as a real one; its root names
    /// that op and says it was injected. For testing a program's own error
    /// handling. Refuses an op name no op has, an `nth` of 0, and a lost
    /// device: a fault that could never fire would make a test pass for the
    /// wrong reason.
    pub fn inject_fault(
        &self,
        op: &str,
        nth: usize,
        kind: FaultKind,
    ) -> Result<(), RegistrationError> {
        let name = "injectFault";
        if !crate::ir::OP_NAMES.contains(&op) {
            return Err(RegistrationError::new(
                name,
                ErrorClass::Range,
                format!(
                    "no op is named '{op}'; faults go into one of: {}",
                    crate::ir::OP_NAMES.join(", ")
                ),
            ));
        }
        if nth == 0 {
            return Err(RegistrationError::new(
                name,
                ErrorClass::Range,
                "nth counts from 1".to_string(),
            ));
        }
        self.with_state(|state| {
            state.check_alive(name)?;
            state.faults.push(Fault::new(op.to_string(), nth, kind));
            Ok(())
        })
    }

    /// Whether ops record their registration site (`capture_stacks`).
    pub fn captures_stacks(&self) -> bool {
        self.with_state(|state| state.capture_stacks)
    }

    /// Whether two handles name the same device.
    pub fn same(&self, other: &Device) -> bool {
        Rc::ptr_eq(&self.inner, &other.inner)
    }

    /// `device #N`: how errors and reports name this device.
    pub fn label(&self) -> String {
        format!("device #{}", self.inner.number)
    }

    /// The adapter's name and backend, for logs.
    pub fn adapter_info(&self) -> String {
        self.with_state(|state| state.gpu.adapter_info.clone())
    }

    /// Destroys the GPU device. Every tensor on it then rejects reads with
    /// kind `device-lost`, and registration throws; request a new device.
    pub fn destroy(&self) {
        self.with_state(|state| {
            state.lose("the device was destroyed with destroy()".to_string());
            state.gpu.device.destroy();
        });
    }

    /// Whether the device was lost (or destroyed), and why.
    pub fn lost_reason(&self) -> Option<String> {
        self.with_state(|state| state.lost.clone())
    }
}

impl DeviceState {
    /// Fails registration on a lost device: nothing it queued could run.
    pub fn check_alive(&self, op: &'static str) -> Result<(), RegistrationError> {
        match &self.lost {
            None => Ok(()),
            Some(reason) => Err(RegistrationError::new(
                op,
                ErrorClass::Other,
                format!("{} was lost ({reason}); request a new device", self.label),
            )),
        }
    }

    pub fn release_handle(&mut self, id: TensorId) {
        if let Some(record) = self.records.get_mut(&id) {
            record.held = false;
        }
        self.collect(id);
    }

    /// Forgets `id` once nothing can read it: no handle, no dependent, and no
    /// queued op still to write it (the planner must see that nobody holds
    /// it, so its record stays until the flush).
    pub fn collect(&mut self, id: TensorId) {
        let unreachable = self
            .records
            .get(&id)
            .is_some_and(|r| !r.held && r.dependents == 0);
        if !unreachable || self.queue.produces(id) {
            return;
        }
        if let Some(record) = self.records.remove(&id) {
            self.discard(record.data, record.pending);
        }
    }

    /// Undoes what holding `data` took: a buffer back to the pool (or to
    /// quarantine while its submission is pending), a view's hold on its
    /// base, a carrier's hold on its failures.
    pub fn discard(&mut self, data: Data, pending: Option<u64>) {
        match data {
            Data::Owned(allocation) => match pending {
                Some(seq) => self.quarantine.push((seq, allocation)),
                None => self.gpu.release(allocation, &mut self.stats),
            },
            Data::View { base, .. } => self.release_dependent(base),
            Data::Expr(expr) => {
                for input in expr.op.inputs {
                    self.release_dependent(input);
                }
            }
            Data::Failed(taints) => {
                for taint in taints {
                    self.graph.untag(taint.failure);
                }
            }
            Data::Host {
                uploaded: Some(allocation),
                ..
            } => self.gpu.release(allocation, &mut self.stats),
            Data::Unwritten | Data::Empty | Data::Host { .. } => {}
        }
    }

    /// Counts one more dependent of each of `inputs` (an op reading them:
    /// queued, or kept as an expression); `release_dependent` undoes it.
    pub fn hold(&mut self, inputs: &[TensorId]) {
        for input in inputs {
            if let Some(record) = self.records.get_mut(input) {
                record.dependents += 1;
            }
        }
    }

    pub fn release_dependent(&mut self, id: TensorId) {
        if let Some(record) = self.records.get_mut(&id) {
            record.dependents = record.dependents.saturating_sub(1);
        }
        self.collect(id);
    }

    /// Adds `taints` to what `id` carries: a tensor already failed keeps its
    /// failures and gains the new ones (each failure once), a written one
    /// is unwritten and fails.
    pub fn add_taints(&mut self, id: TensorId, taints: Vec<Taint>) {
        let mut merged = match self.records.get(&id).map(|r| &r.data) {
            Some(Data::Failed(carried)) => carried.clone(),
            Some(_) => Vec::new(),
            None => return,
        };
        let before = merged.len();
        for taint in taints {
            if !merged.iter().any(|t| t.failure == taint.failure) {
                merged.push(taint);
            }
        }
        if before > 0 && merged.len() == before {
            return;
        }
        if let Some(record) = self.records.get_mut(&id)
            && matches!(record.data, Data::Owned(_))
        {
            record.pending = None;
            if let Data::Owned(allocation) = std::mem::replace(&mut record.data, Data::Unwritten) {
                // Written by work that read garbage: it may be invalid.
                self.gpu.forget(allocation, &mut self.stats);
            }
        }
        self.set_data(id, Data::Failed(merged), None);
    }

    /// Replaces `id`'s data, undoing what the old data held. A tensor nobody
    /// can read any more takes nothing: what the new data would hold is
    /// returned at once.
    pub fn set_data(&mut self, id: TensorId, data: Data, pending: Option<u64>) {
        if !self.records.contains_key(&id) {
            if let Data::Owned(allocation) = data {
                self.discard(Data::Owned(allocation), pending);
            }
            return;
        }
        if let Data::View { base, .. } = &data
            && let Some(record) = self.records.get_mut(base)
        {
            record.dependents += 1;
        }
        if let Data::Expr(expr) = &data {
            self.hold(&expr.op.inputs);
        }
        if let Data::Failed(taints) = &data {
            let carried = match self.records.get(&id).map(|r| &r.data) {
                Some(Data::Failed(old)) => old.iter().map(|t| t.failure).collect(),
                _ => Vec::new(),
            };
            for taint in taints {
                self.graph.tag(taint.failure);
                if carried.contains(&taint.failure) {
                    continue;
                }
                if let Some(u) = self
                    .unreported
                    .iter_mut()
                    .find(|u| u.failure == taint.failure)
                {
                    u.tainted += 1;
                }
            }
        }
        if let Some(record) = self.records.get_mut(&id) {
            let old_pending = std::mem::replace(&mut record.pending, pending);
            let old = std::mem::replace(&mut record.data, data);
            self.discard(old, old_pending);
        }
    }

    /// A record for `id`, held by the handle about to be returned, not yet
    /// written.
    fn insert_record(&mut self, id: TensorId, shape: Vec<usize>, site: Option<Rc<str>>) {
        let record = Record {
            shape,
            held: true,
            dependents: 0,
            data: Data::Unwritten,
            pending: None,
            site,
        };
        self.records.insert(id, record);
    }

    /// Queues `op`, whose output is a new tensor held by the handle the caller
    /// is about to return. Flushes when the queue is full.
    pub fn register(&mut self, op: OpIr, site: Option<Rc<str>>) {
        self.hold(&op.inputs);
        self.insert_record(op.output, op.shape.clone(), site);
        self.queue.push(op);
        if self.queue.len() >= self.capacity {
            self.flush();
        }
    }

    /// A tensor moved here from another device while tainted. Each failure
    /// it carried there becomes one here with the same root (its message
    /// naming the device it came from), the source's chain copied, and one
    /// hop more: the move itself. Not reported by this device's `sync()`: no
    /// work of this device failed.
    pub fn adopt_failures(
        &mut self,
        id: TensorId,
        shape: Vec<usize>,
        error: &TensorError,
        from: &str,
    ) {
        self.insert_record(id, shape, None);
        let mut taints = Vec::new();
        for report in &error.failures {
            let failure = self.graph.insert(Root {
                message: format!("{} (on {from}; carried here by `to`)", report.root.message),
                ..report.root.clone()
            });
            for hop in report.chain.iter().rev() {
                self.graph.skipped(failure, hop.clone());
            }
            self.graph.skipped(
                failure,
                Skip {
                    op: "to".to_string(),
                    needed: error.tensor,
                    produced: vec![id],
                },
            );
            taints.push(Taint {
                failure,
                depth: report.depth + 1,
            });
        }
        self.set_data(id, Data::Failed(taints), None);
    }

    /// The failures `id` carries (empty when its bytes are, or will be,
    /// written), including those found while settling pending work.
    ///
    /// A view whose base was found tainted while the view's own submission
    /// is still pending carries its base's failures one op deeper: the view
    /// op stands between them (its skip is recorded when that submission
    /// resolves).
    pub fn taints_of(&self, id: TensorId) -> Vec<Taint> {
        match self.records.get(&id).map(|r| &r.data) {
            Some(Data::Failed(taints)) => taints.clone(),
            Some(Data::View { base, .. }) => match self.records.get(base).map(|r| &r.data) {
                Some(Data::Failed(taints)) => taints
                    .iter()
                    .map(|t| Taint {
                        failure: t.failure,
                        depth: t.depth + 1,
                    })
                    .collect(),
                _ => self.late_taints.get(&id).cloned().unwrap_or_default(),
            },
            _ => self.late_taints.get(&id).cloned().unwrap_or_default(),
        }
    }

    /// A new failure rooted at `root`, reported to the next `sync()`.
    pub fn new_failure(&mut self, root: Root) -> FailureId {
        let failure = self.graph.insert(root.clone());
        if self.unreported.len() >= MAX_UNREPORTED {
            // A program that never calls `sync()` must not grow this list.
            self.unreported_omitted += 1;
            return failure;
        }
        self.unreported.push(FailureSummary {
            failure,
            root,
            tainted: 0,
        });
        failure
    }

    /// Records that `op` did not run because `needed` carried `taints`;
    /// returns what its output carries instead (one op deeper).
    pub fn skip(
        &mut self,
        op: &str,
        needed: TensorId,
        produced: TensorId,
        taints: &[Taint],
    ) -> Vec<Taint> {
        taints
            .iter()
            .map(|taint| {
                self.graph.skipped(
                    taint.failure,
                    Skip {
                        op: op.to_string(),
                        needed,
                        produced: vec![produced],
                    },
                );
                Taint {
                    failure: taint.failure,
                    depth: taint.depth + 1,
                }
            })
            .collect()
    }

    fn notice_loss(&mut self) {
        if self.lost.is_some() {
            return;
        }
        let reason = self.lost_signal.lock().ok().and_then(|lost| lost.clone());
        if let Some(reason) = reason {
            self.lose(reason);
        }
    }

    /// Poisons everything on this device: each tensor carries one
    /// `device-lost` failure, buffers are dropped (not pooled), pending work
    /// is forgotten.
    pub fn lose(&mut self, reason: String) {
        if self.lost.is_some() {
            return;
        }
        let message = format!("{} was lost: {reason}", self.label);
        self.lost = Some(reason);
        let failure = self.new_failure(Root {
            kind: FailureKind::DeviceLost,
            op: "device".to_string(),
            message,
            registered_at: None,
        });
        self.late_taints.clear();
        self.stale.clear();
        self.retired.clear();
        let ids: Vec<TensorId> = self.records.keys().copied().collect();
        for id in ids {
            let already = matches!(
                self.records.get(&id).map(|r| &r.data),
                Some(Data::Failed(_))
            );
            if !already {
                let taint = Data::Failed(vec![Taint { failure, depth: 0 }]);
                self.set_data(id, taint, None);
            }
        }
        self.abandon_submissions();
        // Buffers of a lost device are of no use: drop them, pooled or not.
        for (_, allocation) in std::mem::take(&mut self.quarantine) {
            self.gpu.forget(allocation, &mut self.stats);
        }
        self.gpu.forget_buffers();
        self.graph.prune(failure);
    }
}
