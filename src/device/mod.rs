//! The device: one single-threaded cell holding everything a device owns (the
//! queue, the tensors' records, the failure graph, the GPU). No mutex and no
//! thread: wasm in a page has one thread, and natively a `Device` and its
//! tensors are `!Send`, so work runs on the caller's thread at flush time.
//!
//! Its files: `state` (each tensor's record and its one state, and every
//! change of it), `taints` (failures on tensors: rooted, skipped, what a
//! tensor carries), then a flush's life: `expressions` (what a flush must
//! compute and write besides the queue), `flush` (plan, decide on the CPU,
//! lower, submit), `settle` (wait for scopes, replay, land failures),
//! `commit` (a step's new values, kept only if all were written), `read`
//! (whether bytes can be trusted, and getting them); and `profile` (what a
//! piece of a program launched), `faults` (injected faults), `loss` (a lost
//! device), `panics` (the hook that counts them). Invariants kept here:
//! - A tensor stays while a handle holds it, a queued op or an expression
//!   reads it, or a view aliases it; a failure stays while a tensor carries
//!   it (`state`). So `failuresHeld` and `bytesInUse` return to their
//!   baseline when the program drops its tensors, whatever temporaries of
//!   theirs the garbage collector has not yet taken: a temporary of an
//!   elementwise chain is an expression, and holds neither bytes nor
//!   failures.
//! - The cell is borrowed only through `Device::with_state`, never across an
//!   `await`, so no callback can find it borrowed.

use std::cell::RefCell;
use std::collections::VecDeque;

use std::rc::Rc;

use crate::error::{ErrorClass, RegistrationError, RequestError};
use crate::failure::FailureSummary;
use crate::failure::{ExecutionError, FailureGraph};
use crate::ir::{Queue, TensorId};
use crate::outlined::Outlined;
use faults::Fault;
pub use faults::FaultKind;
use flush::Submission;
#[cfg(target_arch = "wasm32")]
pub(crate) use profile::Timing;
pub use profile::{Profile, ProfiledKernel};

mod commit;
mod expressions;
mod faults;
mod flush;
mod loss;
mod panics;
mod profile;
pub(crate) mod read;
mod settle;
mod state;
mod taints;
mod warmup;

use crate::runtime::{Allocation, Gpu, Stats};
pub(crate) use panics::install_panic_hook;
pub use panics::panics_observed;
use settle::Settling;
pub(crate) use state::{Bytes, Expr, Record, Records, State, Taint};

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
    /// Check every value a kernel (or the host) computes: an op whose result
    /// is NaN or infinite while its operands were finite fails as
    /// `non-finite`, rooted at that op, and what depends on it fails with
    /// it. Values that were not finite to begin with (an upload's, a
    /// scalar's) pass through unflagged: they are not the op's doing. Off by
    /// default; switchable on a live device (`set_check_numerics`).
    pub check_numerics: bool,
    /// Shape kernels as for a CPU adapter (`Some(true)`) or a GPU
    /// (`Some(false)`), whatever the adapter is; `None` (the default)
    /// follows the adapter (`runtime::Gpu::cpu`: products' tiles,
    /// reductions' threads). This machine's adapters are CPUs: its tests
    /// run the GPU's kernels through this, as a GPU would.
    pub cpu_kernels: Option<bool>,
    /// Fold reductions across a workgroup with subgroup operations where
    /// the device has them (natively: lavapipe, NVIDIA, Apple, Intel; the
    /// browser's device is not asked for them). On by default; off runs the
    /// shared-memory fold every other device runs, so a test can hold the
    /// two to the same values on one adapter.
    pub subgroups: bool,
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
            check_numerics: false,
            cpu_kernels: None,
            subgroups: true,
        }
    }
}

/// A GPU device and everything recorded on it. Cloning gives another handle
/// to the same device.
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Outlined<Rc<DeviceCell>>,
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

/// How many failures `sync()` names; past that it counts them. A program that
/// never calls `sync()` keeps at most this many summaries.
pub(super) const MAX_UNREPORTED: usize = 256;

pub(crate) struct DeviceState {
    pub gpu: Gpu,
    pub queue: Queue,
    pub records: Records,
    pub graph: FailureGraph,
    pub stats: Stats,
    pub capacity: usize,
    pub capture_stacks: bool,
    pub error_scopes: bool,
    pub host_max_elements: usize,
    pub check_numerics: bool,
    pub label: String,
    /// Flushed work whose error scopes have not all resolved, oldest first.
    pub submissions: VecDeque<Submission>,
    /// What settling found for the pending blocks that read it (emptied
    /// once nothing is pending).
    pub settling: Settling,
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
    pub next_submission: u64,
    /// Set once the device is lost; everything on it is then poisoned.
    pub lost: Option<String>,
    /// The profile being taken, if one is (`profile`).
    pub profile: Option<profile::Taking>,
    /// Inside `warmup`: flushes compile and run nothing (`warmup`).
    pub warming: bool,
    /// Whether a task is settling pending submissions as their scopes
    /// resolve (`settle_later`).
    #[cfg(target_arch = "wasm32")]
    pub(super) settler_running: bool,
}

impl Device {
    /// Opens a GPU device: WebGPU in the browser, Vulkan or Metal natively.
    pub async fn request(options: DeviceOptions) -> Result<Device, RequestError> {
        thread_local!(static NEXT: std::cell::Cell<u64> = const { std::cell::Cell::new(1) });
        install_panic_hook();
        let mut gpu = Gpu::request().await?;
        gpu.cpu = options.cpu_kernels.unwrap_or(gpu.cpu);
        gpu.subgroups = gpu.subgroups.filter(|_| options.subgroups);
        let number = NEXT.with(|n| n.replace(n.get() + 1));
        Ok(Device {
            inner: Outlined::new(Rc::new(DeviceCell {
                state: RefCell::new(DeviceState {
                    gpu,
                    queue: Queue::default(),
                    records: Records::default(),
                    graph: FailureGraph::default(),
                    stats: Stats::default(),
                    capacity: options.capacity.max(1),
                    capture_stacks: options.capture_stacks,
                    error_scopes: options.error_scopes,
                    host_max_elements: options.host_max_elements,
                    check_numerics: options.check_numerics,
                    label: format!("device #{number}"),
                    submissions: VecDeque::new(),
                    settling: Settling::default(),
                    #[cfg(target_arch = "wasm32")]
                    settler_running: false,
                    quarantine: Vec::new(),
                    retired: Vec::new(),
                    unreported: Vec::new(),
                    unreported_omitted: 0,
                    faults: Vec::new(),
                    next_submission: 1,
                    lost: None,
                    profile: None,
                    warming: false,
                }),
                dropped: RefCell::new(Vec::new()),
                number,
            })),
        })
    }

    /// Runs `f` on the device state, after releasing handles dropped while it
    /// was busy and noticing a loss.
    ///
    /// Every entry point borrows through here and never across an `await`,
    /// so the borrow cannot be held by anyone else (the cell is !Sync and no
    /// callback re-enters it).
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut DeviceState) -> R) -> R {
        let mut state = self.state();
        let result = f(&mut state);
        self.release(state);
        result
    }

    /// Lets go of the state `with_state` borrowed. In the browser, work
    /// left pending (a flush whose error scopes have not resolved) gets a
    /// task that settles it once they do: settled only at the next read,
    /// `sync()` or flush, its buffers (and the inputs it holds for a
    /// replay) stayed held while the page idled, and a loop that never
    /// reads grew without bound (found by outside testing). Natively a
    /// scope resolves at once, and a flush settles what it submits.
    #[cfg_attr(target_arch = "wasm32", inline(never))]
    fn release(&self, state: std::cell::RefMut<'_, DeviceState>) {
        #[cfg(target_arch = "wasm32")]
        {
            let mut state = state;
            if !state.settler_running && !state.submissions.is_empty() {
                state.settler_running = true;
                drop(state);
                settle_later(Rc::downgrade(&self.inner));
            }
        }
        #[cfg(not(target_arch = "wasm32"))]
        drop(state);
    }

    /// The state, borrowed, with the handles dropped meanwhile released
    /// and a loss noticed: `with_state`'s one body, not copied into each
    /// of its callers.
    #[inline(never)]
    fn state(&self) -> std::cell::RefMut<'_, DeviceState> {
        let mut state = self.inner.state.borrow_mut();
        let dropped = std::mem::take(&mut *self.inner.dropped.borrow_mut());
        for id in dropped {
            state.release_handle(id);
        }
        state.notice_loss();
        state
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
            uncaptured_errors: state.gpu.device.uncaptured_errors(),
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
            crate::runtime::resolved(waiting).await;
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
        let names = crate::ir::op_names();
        if !names.contains(&op) {
            return Err(RegistrationError::new(
                name,
                ErrorClass::Range,
                format!(
                    "no op is named '{op}'; faults go into one of: {}",
                    names.join(", ")
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

    /// Turns the numerics checks (`DeviceOptions::check_numerics`) on or
    /// off for the work flushed from now on, what is queued included.
    /// Turned on, it looks at what it can (the values the host holds, the
    /// uploads still queued); other tensors made while the checks were off
    /// are taken as finite (a product of them is checked).
    pub fn set_check_numerics(&self, on: bool) {
        self.with_state(|state| {
            state.check_numerics = on;
            if on {
                state.look_at_values();
            }
        });
    }

    /// Whether the device checks numerics (`check_numerics`).
    pub fn checks_numerics(&self) -> bool {
        self.with_state(|state| state.check_numerics)
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

/// Settles `cell`'s pending submissions as their scopes resolve, until
/// none is pending (`Device::release`). Holds the device weakly: a
/// device dropped meanwhile ends the task. Runs between the page's tasks,
/// never inside a borrow of the state.
#[cfg(target_arch = "wasm32")]
fn settle_later(cell: std::rc::Weak<DeviceCell>) {
    wasm_bindgen_futures::spawn_local(async move {
        loop {
            let Some(inner) = cell.upgrade() else {
                return;
            };
            let waiting = Device {
                inner: Outlined::new(inner),
            }
            .with_state(|state| {
                let waiting = state.settle();
                state.settler_running = !waiting.is_empty();
                waiting
            });
            if waiting.is_empty() {
                return;
            }
            crate::runtime::resolved(waiting).await;
        }
    });
}
