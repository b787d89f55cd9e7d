//! The GPU side: the device (`native`: wgpu; `browser`: WebGPU called
//! directly), the buffer pool, the pipeline cache, launches and reads, and
//! `lower` (one planned block into commands).
//! Everything here runs on the caller's thread. A leaf: it runs launches and
//! reads, and keeps no bookkeeping of tensors or failures (that is the
//! device's), so what it is asked to do was already checked.

#[cfg(target_arch = "wasm32")]
mod browser;
pub mod host;
pub mod lower;
#[cfg(not(target_arch = "wasm32"))]
mod native;

pub use backend::{Buffer, Encoder};
use backend::{Pipeline, QuerySet};
#[cfg(target_arch = "wasm32")]
use browser as backend;
#[cfg(not(target_arch = "wasm32"))]
use native as backend;

use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use futures_util::FutureExt;
use futures_util::future::Shared;

use crate::codegen::Kernel;
use crate::error::RequestError;

/// Declares `Stats` once: each counter's field, its JS name and its doc, so
/// the Rust struct and what JS reads (`Stats::named`) cannot drift apart;
/// the TypeScript interface and the API doc are checked against it
/// (`tests/native.rs`).
macro_rules! counters {
    ($( $(#[doc = $doc:literal])* $field:ident => $js:literal, )*) => {
        /// Counters the planner's and the runtime's work is observed through
        /// (`Device::stats`).
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct Stats {
            $( $(#[doc = $doc])* pub $field: u64, )*
        }

        impl Stats {
            /// Each counter under its JS name, in declaration order: what
            /// `stats()` returns in JS.
            pub fn named(&self) -> Vec<(&'static str, u64)> {
                vec![$( ($js, self.$field), )*]
            }
        }
    };
}

counters! {
    ops_registered => "opsRegistered",
    flushes => "flushes",
    kernels_launched => "kernelsLaunched",
    /// Ops that ran inside a kernel together with at least one other op.
    fused_ops => "fusedOps",
    buffers_allocated => "buffersAllocated",
    /// Bytes of the buffers created so far (pool reuse not counted).
    bytes_allocated => "bytesAllocated",
    /// Bytes of the buffers tensors hold now (pooled buffers not counted).
    bytes_in_use => "bytesInUse",
    /// The most `bytes_in_use` has been (`Device::profile` measures its
    /// own from where it starts).
    peak_bytes_in_use => "peakBytesInUse",
    /// Bytes kernels have written: every output and scratch buffer a
    /// launch fills (host uploads not counted). What fusion saves shows here.
    bytes_written => "bytesWritten",
    /// Ops run on the host instead of in a kernel: small elementwise blocks
    /// on values the host holds (`DeviceOptions::host_max_elements`).
    host_ops => "hostOps",
    /// Every GPU buffer created: tensors' storage, the kernels' uniform
    /// arenas and reads' staging buffers. Flat once a loop has warmed up.
    gpu_buffers_created => "gpuBuffersCreated",
    /// Kernels whose text was generated: a launch of a block generated
    /// before on the same shapes (a loop's later steps) reuses its kernel.
    /// Flat once a loop has warmed up.
    kernels_generated => "kernelsGenerated",
    pipelines_compiled => "pipelinesCompiled",
    pipeline_cache_hits => "pipelineCacheHits",
    failures_held => "failuresHeld",
    /// Held tensors kept as expressions: their ops recorded, their bytes
    /// never written (see `device::expressions`).
    expressions_held => "expressionsHeld",
    /// GPU errors no error scope caught. Every GPU call runs checked on the
    /// CPU or inside a scope, so this stays 0; the tests assert it does.
    uncaptured_errors => "uncapturedErrors",
}

/// What an error scope caught: its first error.
#[derive(Debug, Clone)]
pub struct GpuError {
    pub kind: GpuErrorKind,
    pub message: String,
}

/// The filters of WebGPU's error scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuErrorKind {
    OutOfMemory,
    Validation,
    Internal,
}

/// An error scope (a submission's, or a replayed block's), resolved natively
/// at once and in the browser later. Shared, so several reads can wait for
/// the same scope.
pub type Scope = Shared<Pin<Box<dyn Future<Output = Option<GpuError>>>>>;

/// Waits until every one of `scopes` has resolved. In turn, not joined:
/// each resolves on its own (natively at once, in the browser by the GPU's
/// callback, whether or not anything polls it), so this ends when the last
/// does, as a join would, without a join's code (2.8 KB gzip of the module).
pub async fn resolved(scopes: Vec<Scope>) {
    for scope in scopes {
        scope.await;
    }
}

/// The scopes around some GPU work, open until `close`.
pub struct OpenScope(backend::OpenScope);

impl OpenScope {
    pub fn close(self) -> Scope {
        self.0.close().shared()
    }
}

/// What a device is asked to make a buffer for; each backend has its
/// usage bits.
#[derive(Clone, Copy)]
pub enum Usage {
    /// A tensor's storage, or a kernel's scratch: bound, copied from, written.
    Storage,
    /// Bound where a kernel has nothing to bind.
    Placeholder,
    /// A uniform arena (`Uniforms`).
    Uniform,
    /// Where a read's words are copied, to map.
    Read,
    /// Where a profile's timestamps are resolved.
    Timestamps,
}

/// The limits a device is opened with: WebGPU's defaults, the same on
/// every platform, so a program that works here works in any browser;
/// `max_buffer_size` is what the failure reports name.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_buffer_size: u64,
    pub max_storage_buffer_binding_size: u64,
    pub max_storage_buffers_per_shader_stage: u32,
    pub max_compute_workgroups_per_dimension: u32,
}

impl Limits {
    /// The browser asks for no limits and gets these; natively wgpu's
    /// defaults are asked for, the same numbers (`native.rs` tests it).
    pub const WEBGPU_DEFAULTS: Limits = Limits {
        max_buffer_size: 1 << 28,
        max_storage_buffer_binding_size: 1 << 27,
        max_storage_buffers_per_shader_stage: 8,
        max_compute_workgroups_per_dimension: 65535,
    };
}

/// What a backend found out opening a device.
pub struct Adapter {
    /// The adapter's name and backend, for logs.
    pub name: String,
    /// Whether it is a CPU implementation (SwiftShader, lavapipe).
    pub cpu: bool,
    pub subgroups: Option<crate::codegen::Subgroups>,
    /// How many nanoseconds a timestamp tick is, where it writes them.
    pub timestamps: Option<f32>,
    pub limits: Limits,
}

/// A read on its way back from the GPU.
pub type PendingRead =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<u32>, String>>>>;

/// A buffer a tensor holds, and the pool bucket it returns to.
pub struct Allocation {
    pub buffer: Buffer,
    pub bucket: u64,
}

pub struct Gpu {
    pub device: backend::Device,
    pub limits: Limits,
    pub adapter_info: String,
    /// Whether the adapter is a CPU implementation (SwiftShader, lavapipe),
    /// for which some kernels are shaped differently (or as
    /// `DeviceOptions::cpu_kernels` says).
    pub cpu: bool,
    /// The subgroups reductions fold with, where the device has WGSL's
    /// `subgroups` (natively; the browser's device is not asked for them).
    pub subgroups: Option<crate::codegen::Subgroups>,
    /// Bound where a kernel's input or output has no elements: a binding
    /// must exist even when nothing indexes it.
    pub placeholder: Buffer,
    /// Compiled kernels by text (see `Family`).
    pipelines: FxHashMap<String, Family>,
    /// Kernels by what they were generated from (`codegen::Memo`): a loop's
    /// later steps generate no text.
    pub kernels: crate::codegen::Memo,
    /// Pipelines compiled since the current scope opened: when the scope
    /// reports an error they may be invalid, and leave the cache.
    compiled_in_scope: Vec<String>,
    /// While a profile is taken: what each launch records.
    pub traced: Option<Traced>,
    /// Whether the adapter writes timestamps (WebGPU's `timestamp-query`),
    /// and how many nanoseconds one tick is.
    timestamps: Option<f32>,
    /// Launches get their pipelines and record nothing (a warm-up's flush,
    /// `device::warmup`): none counts as launched, nor as a size set's
    /// first run.
    pub compile_only: bool,
    /// Free buffers by bucket size. A bucket is the power of two at or above
    /// the requested size, so a loop whose sizes wobble still reuses.
    pool: FxHashMap<u64, Vec<Buffer>>,
    uniforms: Uniforms,
    /// Free read-staging buffers by size, shared with the reads on their
    /// way (a read gives its buffer back once it has the values).
    staging: Rc<RefCell<FxHashMap<u64, Vec<Buffer>>>>,
}

/// The kernels' uniform words, packed into arenas reused by every submit:
/// each launch binds its own 256-byte-aligned slice, the words are written
/// with one `write_buffer` per arena just before the submit. Reuse is sound
/// because the queue is ordered: a write issued after a submit lands after
/// that submit's kernels have read the previous words.
#[derive(Default)]
struct Uniforms {
    arenas: Vec<Buffer>,
    /// The words staged for the next submit, per arena in use.
    staged: Vec<Vec<u8>>,
}

/// What launches record while a profile is taken: each kernel's text, and
/// where its start and end times were written when the adapter writes
/// timestamps. Times come from the GPU's own clock around each compute
/// pass; the wall clock would time the queue and the round trip too.
#[derive(Default)]
pub struct Traced {
    /// The text of each kernel launched since the block began.
    pub wgsl: Vec<String>,
    /// Each of those launches' times: the read of its query set's
    /// timestamps (an index into `reads`) and the query its start went to
    /// (its end to the next).
    pub stamps: Vec<(usize, u32)>,
    /// The timestamps of each query set a submit wrote, in submit order.
    pub reads: Vec<PendingRead>,
    /// The current submit's query sets, each with how many of its queries
    /// are used: a submit of more launches than one set times takes
    /// another, so every launch of a profile is timed.
    sets: Vec<(QuerySet, u32)>,
}

/// The queries of one set: WebGPU's largest, two per launch.
const QUERIES: u32 = 4096;

impl Traced {
    /// The query set the next launch writes its times to, and the query
    /// its start goes to (its end to the next), recorded for its block.
    fn stamp(&mut self, device: &backend::Device) -> Option<(&QuerySet, u32)> {
        if self.sets.last().is_none_or(|(_, used)| *used + 2 > QUERIES) {
            self.sets.push((device.query_set(QUERIES), 0));
        }
        // Each set of this submit is read in order after those before it.
        let read = self.reads.len() + self.sets.len() - 1;
        let (set, used) = self.sets.last_mut()?;
        let first = *used;
        *used += 2;
        self.stamps.push((read, first));
        Some((set, first))
    }
}

/// Bytes of one uniform arena: the largest uniform binding WebGPU allows.
const ARENA_BYTES: u64 = 65536;
/// Where each launch's words start: WebGPU's default
/// `minUniformBufferOffsetAlignment`.
const UNIFORM_ALIGN: u64 = 256;

/// The compiled forms of one kernel text: the same ops, on any sizes.
///
/// Each new set of written words is compiled specialised, at its first
/// launch, until the family has its room of them; past that the text as
/// is. So a text compiles at most `MAX_SIZED + 1` times (one that writes in
/// only its scalars twice), and a loop of fixed shapes compiles everything
/// in its first step and nothing after. Compiling the general text first
/// and specialising a size set once it came again (as this did before)
/// cost a training step of 135 launches two and three more steps of
/// pipeline compiles on SwiftShader (W9: 6.8 s and 7.7 s against 0.8 s
/// once warm), for the one case it saves: a text launched at more sizes
/// than its room, which now compiles `MAX_SIZED` texts more, once.
#[derive(Default)]
struct Family {
    /// Its text with the words of its first launches written in
    /// (`Kernel::specialized`), by those words (`Kernel::written_words`):
    /// one, or up to `MAX_SIZED` for a text that writes in its sizes (the
    /// layers of one net that share a product's text).
    specialized: Vec<(Vec<u32>, Pipeline)>,
    /// Its text as is (words read as uniforms), compiled once a launch
    /// brings other words than those and the room is full. Every such
    /// launch uses it.
    general: Option<Pipeline>,
}

/// The most size sets a text that writes in its sizes is specialised for.
const MAX_SIZED: usize = 4;

impl Family {
    /// The pipeline `kernel` launches on, and whether it was compiled to
    /// answer it.
    fn pipeline(&mut self, kernel: &Kernel, compiler: &mut Compiler<'_>) -> (Pipeline, bool) {
        let words = kernel.written_words();
        if let Some((_, pipeline)) = self.specialized.iter().find(|(w, _)| *w == words) {
            return (pipeline.clone(), false);
        }
        if let Some(general) = &self.general {
            return (general.clone(), false);
        }
        let room = match kernel.sizes {
            true => MAX_SIZED,
            false => 1,
        };
        if self.specialized.len() < room {
            let pipeline = compiler.now(&kernel.specialized());
            self.specialized.push((words, pipeline.clone()));
            return (pipeline, true);
        }
        (
            self.general.insert(compiler.now(&kernel.wgsl)).clone(),
            true,
        )
    }
}

/// How a family gets a pipeline for a text: compiles on `device`, noting
/// each text compiled now in `compiled` (the texts of the current error
/// scope, named if it reports a compile error).
struct Compiler<'a> {
    device: &'a backend::Device,
    compiled: &'a mut Vec<String>,
    kernel: &'a str,
}

impl Compiler<'_> {
    /// Compiles `text` now: the pipeline is ready to launch.
    fn now(&mut self, text: &str) -> Pipeline {
        self.compiled.push(self.kernel.to_string());
        self.device.compile(text)
    }
}

impl Gpu {
    /// Opens a device. Timestamps only time profiles (`Traced`); where the
    /// adapter has none, a profile says so instead of giving a time.
    pub async fn request() -> Result<Gpu, RequestError> {
        let (device, adapter) = backend::open().await?;
        let placeholder = device.buffer(16, Usage::Placeholder, Some("webfusion placeholder"));
        Ok(Gpu {
            placeholder,
            device,
            limits: adapter.limits,
            adapter_info: adapter.name,
            cpu: adapter.cpu,
            subgroups: adapter.subgroups,
            pipelines: FxHashMap::default(),
            kernels: crate::codegen::Memo::default(),
            compiled_in_scope: Vec::new(),
            traced: None,
            timestamps: adapter.timestamps,
            compile_only: false,
            pool: FxHashMap::default(),
            uniforms: Uniforms::default(),
            staging: Rc::default(),
        })
    }

    /// How this device's reductions fold across a workgroup.
    pub fn lanes(&self) -> crate::codegen::Lanes {
        crate::codegen::Lanes::for_device(self.cpu, self.subgroups)
    }

    /// Opens the error scopes GPU work runs in.
    pub fn open_scope(&mut self) -> OpenScope {
        self.compiled_in_scope.clear();
        OpenScope(self.device.open_scope())
    }

    /// The pipelines compiled in the scope about to close.
    pub fn take_compiled_in_scope(&mut self) -> Vec<String> {
        std::mem::take(&mut self.compiled_in_scope)
    }

    /// Raises a genuine validation error on the GPU, caught by the open
    /// scope: an invalid command in the block's encoder (a copy into a
    /// buffer that is no copy destination), which voids the whole submit it
    /// is in, as a real failure would.
    pub fn provoke_validation_error(&self, encoder: &mut Encoder) {
        let placeholder = (&self.placeholder, 0);
        self.device.copy(encoder, placeholder, placeholder, 4);
    }

    /// Drops pipelines that may be invalid, so later blocks compile anew.
    pub fn forget_pipelines(&mut self, keys: &[String]) {
        for key in keys {
            self.pipelines.remove(key);
        }
    }

    /// Drops a tensor's buffer instead of pooling it: it may be invalid.
    pub fn forget(&mut self, allocation: Allocation, stats: &mut Stats) {
        stats.bytes_in_use = stats.bytes_in_use.saturating_sub(allocation.bucket);
        allocation.buffer.destroy();
    }

    /// Drops every pooled buffer (a lost device's are of no use).
    pub fn forget_buffers(&mut self) {
        self.pool.clear();
        self.staging.borrow_mut().clear();
        self.uniforms = Uniforms::default();
    }

    /// A buffer of `bytes` (not 0) holding `words`, row-major: the queue
    /// writes it before the commands of the next submit run.
    pub fn upload(&mut self, words: &[u32], bytes: u64, stats: &mut Stats) -> Allocation {
        let allocation = self.allocate(bytes, stats);
        self.device
            .write(&allocation.buffer, bytemuck::cast_slice(words));
        allocation
    }

    /// A storage buffer of at least `bytes`, from the pool when one is free.
    pub fn allocate(&mut self, bytes: u64, stats: &mut Stats) -> Allocation {
        let bucket = self.bucket(bytes);
        stats.bytes_in_use += bucket;
        stats.peak_bytes_in_use = stats.peak_bytes_in_use.max(stats.bytes_in_use);
        if let Some(buffer) = self.pool.get_mut(&bucket).and_then(Vec::pop) {
            return Allocation { buffer, bucket };
        }
        stats.buffers_allocated += 1;
        stats.gpu_buffers_created += 1;
        stats.bytes_allocated += bucket;
        let buffer = self.device.buffer(bucket, Usage::Storage, None);
        Allocation { buffer, bucket }
    }

    /// Returns a tensor's buffer to the pool.
    pub fn release(&mut self, allocation: Allocation, stats: &mut Stats) {
        stats.bytes_in_use = stats.bytes_in_use.saturating_sub(allocation.bucket);
        self.pool
            .entry(allocation.bucket)
            .or_default()
            .push(allocation.buffer);
    }

    fn bucket(&self, bytes: u64) -> u64 {
        let bytes = bytes.max(4);
        match bytes.checked_next_power_of_two() {
            Some(p) if p <= self.limits.max_storage_buffer_binding_size => p,
            _ => bytes.div_ceil(4) * 4,
        }
    }

    /// How many nanoseconds a timestamp tick is, where the adapter writes
    /// timestamps.
    pub fn timestamp_period(&self) -> Option<f32> {
        self.timestamps
    }

    /// Records `kernel` into `encoder`, compiling its pipeline on first use.
    pub fn launch(
        &mut self,
        encoder: &mut Encoder,
        kernel: &Kernel,
        buffers: &[&Buffer],
        stats: &mut Stats,
    ) {
        if let Some(traced) = &mut self.traced {
            traced.wgsl.push(kernel.wgsl.clone());
        }
        let mut compiler = Compiler {
            device: &self.device,
            compiled: &mut self.compiled_in_scope,
            kernel: &kernel.wgsl,
        };
        // Looked up by reference: the text is cloned only for a new family,
        // not on every launch.
        let (pipeline, compiled) = match self.pipelines.get_mut(&kernel.wgsl) {
            Some(family) => family.pipeline(kernel, &mut compiler),
            None => {
                let mut family = Family::default();
                let found = family.pipeline(kernel, &mut compiler);
                self.pipelines.insert(kernel.wgsl.clone(), family);
                found
            }
        };
        stats.pipelines_compiled += u64::from(compiled);
        stats.pipeline_cache_hits += u64::from(!compiled);
        if self.compile_only {
            return;
        }
        let (arena, offset, size) = self.uniform_slice(&kernel.params, stats);
        let grid = self.grid(kernel.workgroups);
        let stamps = match (&mut self.traced, self.timestamps) {
            (Some(traced), Some(_)) => traced.stamp(&self.device),
            _ => None,
        };
        self.device.dispatch(
            encoder,
            &pipeline,
            (&self.uniforms.arenas[arena], offset, size),
            buffers,
            grid,
            stamps,
        );
        stats.kernels_launched += 1;
    }

    /// A slice of a uniform arena holding `words` for the launch being
    /// recorded: (arena, offset, size). Staged here, written at `submit`.
    fn uniform_slice(&mut self, words: &[u32], stats: &mut Stats) -> (usize, u64, u64) {
        let bytes: &[u8] = bytemuck::cast_slice(words);
        let size = (bytes.len() as u64).max(16);
        let u = &mut self.uniforms;
        let fits = |staged: &Vec<u8>| {
            (staged.len() as u64).next_multiple_of(UNIFORM_ALIGN) + size <= ARENA_BYTES
        };
        let arena = match u.staged.iter().position(fits) {
            Some(k) => k,
            None => {
                if u.staged.len() == u.arenas.len() {
                    stats.gpu_buffers_created += 1;
                    u.arenas.push(self.device.buffer(
                        ARENA_BYTES,
                        Usage::Uniform,
                        Some("webfusion uniforms"),
                    ));
                }
                u.staged.push(Vec::new());
                u.staged.len() - 1
            }
        };
        let staged = &mut u.staged[arena];
        let offset = (staged.len() as u64).next_multiple_of(UNIFORM_ALIGN);
        staged.resize(offset as usize, 0);
        staged.extend_from_slice(bytes);
        staged.resize((offset + size) as usize, 0);
        (arena, offset, size)
    }

    /// Writes the staged uniform words, then submits `encoder`.
    pub fn submit(&mut self, mut encoder: Encoder) {
        for (arena, staged) in self
            .uniforms
            .arenas
            .iter()
            .zip(self.uniforms.staged.drain(..))
        {
            if !staged.is_empty() {
                self.device.write(arena, &staged);
            }
        }
        // The timestamps this submit's launches wrote are resolved at its
        // end and read back after it (`Traced`), a read per query set.
        let stamped = self
            .traced
            .as_mut()
            .map(|t| std::mem::take(&mut t.sets))
            .unwrap_or_default();
        let resolved: Vec<(Buffer, u64)> = stamped
            .into_iter()
            .map(|(set, used)| {
                let bytes = u64::from(used) * 8;
                let buffer =
                    self.device
                        .buffer(bytes, Usage::Timestamps, Some("webfusion timestamps"));
                self.device.resolve(&mut encoder, &set, used, &buffer);
                (buffer, bytes)
            })
            .collect();
        self.device.submit(encoder);
        for (buffer, bytes) in resolved {
            // Profiling's own buffers are not the program's: not counted.
            let read = self.read(&buffer, 0, bytes, &mut Stats::default());
            if let Some(traced) = &mut self.traced {
                traced.reads.push(read);
            }
        }
    }

    /// A 2-D grid of `workgroups`: each dimension stays within
    /// `maxComputeWorkgroupsPerDimension`, and the kernels fold `y` back into
    /// a linear workgroup index.
    fn grid(&self, workgroups: u64) -> (u32, u32) {
        let groups = workgroups.max(1);
        let max = self.limits.max_compute_workgroups_per_dimension as u64;
        if groups <= max {
            (groups as u32, 1)
        } else {
            (max as u32, groups.div_ceil(max) as u32)
        }
    }

    /// Copies `bytes` of `buffer` from `offset` back to the host. The
    /// returned future owns everything it needs, so no device borrow is held
    /// while it waits.
    pub fn read(
        &mut self,
        buffer: &Buffer,
        offset: u64,
        bytes: u64,
        stats: &mut Stats,
    ) -> PendingRead {
        self.read_ranges(&[(buffer, offset, bytes)], stats)
    }

    /// Copies each `(buffer, offset, bytes)` range back to the host, one
    /// after the other in one staging buffer: one submit and one map for
    /// them all, where a read each would wait on the GPU once each (a
    /// checked step reads every kernel's flags). Each range's `offset` and
    /// `bytes` are multiples of 4, as a copy requires.
    pub fn read_ranges(
        &mut self,
        ranges: &[(&Buffer, u64, u64)],
        stats: &mut Stats,
    ) -> PendingRead {
        let bytes: u64 = ranges.iter().map(|&(_, _, b)| b).sum();
        if bytes == 0 {
            return Box::pin(async { Ok(Vec::new()) });
        }
        let size = bytes.next_multiple_of(4);
        let pooled = self.staging.borrow_mut().get_mut(&size).and_then(Vec::pop);
        let staging = pooled.unwrap_or_else(|| {
            stats.gpu_buffers_created += 1;
            self.device
                .buffer(size, Usage::Read, Some("webfusion read"))
        });
        let mut encoder = self.device.encoder();
        let mut at = 0;
        for &(buffer, offset, bytes) in ranges {
            if bytes > 0 {
                self.device
                    .copy(&mut encoder, (buffer, offset), (&staging, at), bytes);
            }
            at += bytes;
        }
        self.submit(encoder);
        let mapped = self.device.map_read(&staging, bytes);
        let pool = self.staging.clone();
        Box::pin(async move {
            let values = mapped.await?;
            // Unmapped, it serves the next read of this size.
            pool.borrow_mut().entry(size).or_default().push(staging);
            Ok(values)
        })
    }
}
