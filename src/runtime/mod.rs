//! The GPU side: the wgpu device, the buffer pool, the pipeline cache,
//! launches and reads, and `lower` (one planned block into commands).
//! Everything here runs on the caller's thread. A leaf: it runs launches and
//! reads, and keeps no bookkeeping of tensors or failures (that is the
//! device's), so what it is asked to do was already checked.

pub mod host;
pub mod lower;

use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
pub struct OpenScope {
    /// Pushed out-of-memory, validation, internal; popped in reverse.
    guards: [wgpu::ErrorScopeGuard; 3],
}

impl OpenScope {
    pub fn close(self) -> Scope {
        let [oom, validation, internal] = self.guards;
        let internal = internal.pop();
        let validation = validation.pop();
        let oom = oom.pop();
        let caught = async move {
            let errors = [internal.await, validation.await, oom.await];
            errors.into_iter().flatten().next().map(|error| {
                let (kind, message) = match error {
                    wgpu::Error::OutOfMemory { .. } => (
                        GpuErrorKind::OutOfMemory,
                        "the GPU ran out of memory".to_string(),
                    ),
                    wgpu::Error::Validation { description, .. } => {
                        (GpuErrorKind::Validation, description)
                    }
                    wgpu::Error::Internal { description, .. } => {
                        (GpuErrorKind::Internal, description)
                    }
                };
                GpuError {
                    kind,
                    message: message.trim().to_string(),
                }
            })
        };
        let boxed: Pin<Box<dyn Future<Output = Option<GpuError>>>> = Box::pin(caught);
        boxed.shared()
    }
}

/// A read on its way back from the GPU.
pub type PendingRead =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<u32>, String>>>>;

/// A buffer a tensor holds, and the pool bucket it returns to.
#[derive(Debug)]
pub struct Allocation {
    pub buffer: wgpu::Buffer,
    pub bucket: u64,
}

pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub limits: wgpu::Limits,
    pub adapter_info: String,
    /// Whether the adapter is a CPU implementation (SwiftShader, lavapipe),
    /// for which some kernels are shaped differently (or as
    /// `DeviceOptions::cpu_kernels` says).
    pub cpu: bool,
    /// The subgroups reductions fold with, where the device has WGSL's
    /// `subgroups` (natively; wgpu's WebGPU backend does not ask a browser
    /// for them).
    pub subgroups: Option<crate::codegen::Subgroups>,
    /// Bound where a kernel's input or output has no elements: a binding
    /// must exist even when nothing indexes it.
    pub placeholder: wgpu::Buffer,
    /// Compiled kernels by text (see `Family`).
    pipelines: FxHashMap<String, Family>,
    /// Kernels by what they were generated from (`codegen::Memo`): a loop's
    /// later steps generate no text.
    pub kernels: crate::codegen::Memo,
    /// Pipelines compiled since the current scope opened: when the scope
    /// reports an error they may be invalid, and leave the cache.
    compiled_in_scope: Vec<String>,
    /// GPU errors that reached the uncaptured-error handler (`Stats`).
    pub uncaptured: Arc<AtomicU64>,
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
    pool: FxHashMap<u64, Vec<wgpu::Buffer>>,
    uniforms: Uniforms,
    /// Free read-staging buffers by size, shared with the reads on their
    /// way (a read gives its buffer back once it has the values).
    staging: Rc<RefCell<FxHashMap<u64, Vec<wgpu::Buffer>>>>,
}

/// The kernels' uniform words, packed into arenas reused by every submit:
/// each launch binds its own 256-byte-aligned slice, the words are written
/// with one `write_buffer` per arena just before the submit. Reuse is sound
/// because the queue is ordered: a write issued after a submit lands after
/// that submit's kernels have read the previous words.
#[derive(Default)]
struct Uniforms {
    arenas: Vec<wgpu::Buffer>,
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
    /// Each of those launches' times: the read of its submit's timestamps
    /// (an index into `reads`) and the query its start went to (its end
    /// to the next). `None` for a launch past a submit's `QUERIES`.
    pub stamps: Vec<Option<(usize, u32)>>,
    /// The timestamps of each submit that wrote some, in submit order.
    pub reads: Vec<PendingRead>,
    /// The current submit's query set and how many of its queries are used.
    set: Option<(wgpu::QuerySet, u32)>,
}

/// The queries of one submit's set: WebGPU's largest, two per launch.
const QUERIES: u32 = 4096;

impl Traced {
    /// The query the next launch's start goes to (its end to the next),
    /// recorded for its block; `None` once the submit's set is full.
    fn stamp(&mut self, device: &wgpu::Device) -> Option<u32> {
        let (_, used) = self.set.get_or_insert_with(|| {
            let set = device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("webfusion timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: QUERIES,
            });
            (set, 0)
        });
        let first = (*used + 2 <= QUERIES).then_some(*used);
        if first.is_some() {
            *used += 2;
        }
        self.stamps.push(first.map(|q| (self.reads.len(), q)));
        first
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
    specialized: Vec<(Vec<u32>, wgpu::ComputePipeline)>,
    /// Its text as is (words read as uniforms), compiled once a launch
    /// brings other words than those and the room is full. Every such
    /// launch uses it.
    general: Option<wgpu::ComputePipeline>,
}

/// The most size sets a text that writes in its sizes is specialised for.
const MAX_SIZED: usize = 4;

impl Family {
    /// The pipeline `kernel` launches on, and whether it was compiled to
    /// answer it.
    fn pipeline(
        &mut self,
        kernel: &Kernel,
        compiler: &mut Compiler<'_>,
    ) -> (wgpu::ComputePipeline, bool) {
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
    device: &'a wgpu::Device,
    compiled: &'a mut Vec<String>,
    kernel: &'a str,
}

impl Compiler<'_> {
    /// Compiles `text` now: the pipeline is ready to launch.
    ///
    /// Bounds checks stay on; wgpu's forced loop bounding (a second counter
    /// and branch in every iteration of every loop, so a driver may not
    /// assume a loop ends) is off: on an H200 it cost a 4096 product 10%
    /// and a 1024 one more, all of it in the inner loop over a staged slice.
    fn now(&mut self, text: &str) -> wgpu::ComputePipeline {
        self.compiled.push(self.kernel.to_string());
        let checks = wgpu::ShaderRuntimeChecks {
            force_loop_bounding: false,
            ..wgpu::ShaderRuntimeChecks::checked()
        };
        // SAFETY: `force_loop_bounding` is only needed for a loop that may
        // not end. Every loop codegen writes is counted: its counter steps
        // by a positive constant towards a bound from the block's sizes,
        // which planning keeps under 2^31 (`fusion::limits::MAX_INDEX`), so
        // it cannot wrap; or it halves a workgroup size to 0; or, in `wf_pow_i`,
        // shifts a non-negative exponent to 0. Every other check is kept.
        let module = unsafe {
            self.device.create_shader_module_trusted(
                wgpu::ShaderModuleDescriptor {
                    label: None,
                    source: wgpu::ShaderSource::Wgsl(text.into()),
                },
                checks,
            )
        };
        self.device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: None,
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            })
    }
}

/// The instance adapters are requested from: natively one for the process.
///
/// The Vulkan loader loads the driver with the first instance and unloads
/// it with the last. NVIDIA's driver, loaded and unloaded some thirty times
/// in one process, does not load again ("libnvidia-tls.so: cannot allocate
/// memory in static TLS block": each load takes static TLS its unload does
/// not give back), so every later request found no adapter: the native
/// suite on an H100, one test after another, failed from its 28th test on,
/// and hung at times when run in parallel. Kept for the process, the driver
/// is loaded once. In the browser an instance stands for `navigator.gpu`,
/// and making one costs nothing.
fn instance() -> wgpu::Instance {
    let make = || {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = if cfg!(target_arch = "wasm32") {
            wgpu::Backends::BROWSER_WEBGPU
        } else {
            wgpu::Backends::VULKAN | wgpu::Backends::METAL
        };
        wgpu::Instance::new(desc)
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        static INSTANCE: std::sync::OnceLock<wgpu::Instance> = std::sync::OnceLock::new();
        INSTANCE.get_or_init(make).clone()
    }
    #[cfg(target_arch = "wasm32")]
    make()
}

impl Gpu {
    pub async fn request() -> Result<Gpu, RequestError> {
        #[cfg(target_arch = "wasm32")]
        if !browser_has_webgpu() {
            return Err(RequestError::NoWebGpu);
        }
        let adapter = instance()
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|e| RequestError::NoAdapter(e.to_string()))?;
        let info = adapter.get_info();
        // The WebGPU defaults, the same on every platform, so a program that
        // works here works in any browser; `maxBufferSize` is what the
        // failure reports name.
        let limits = wgpu::Limits::default();
        // Timestamps only time profiles (`Traced`); where the adapter has
        // none, a profile says so instead of giving a time.
        let wanted = wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::SUBGROUP;
        let features = adapter.features() & wanted;
        #[cfg(not(target_arch = "wasm32"))]
        let subgroups = features
            .contains(wgpu::Features::SUBGROUP)
            .then(|| {
                crate::codegen::Subgroups::for_adapter(
                    info.subgroup_min_size,
                    info.subgroup_max_size,
                )
            })
            .flatten();
        #[cfg(target_arch = "wasm32")]
        let subgroups = None;
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("webfusion"),
                required_features: features,
                required_limits: limits.clone(),
                experimental_features: wgpu::ExperimentalFeatures::disabled(),
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| RequestError::DeviceRefused(e.to_string()))?;
        // wgpu's native default handler panics inside the failing call. Every
        // GPU call runs inside an error scope, so anything reaching here is a
        // bug to report, never a reason to abort.
        let uncaptured = Arc::new(AtomicU64::new(0));
        let counter = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            counter.fetch_add(1, Ordering::Relaxed);
            log(&format!("webfusion: uncaptured GPU error: {error}"));
        }));
        let timestamps = features
            .contains(wgpu::Features::TIMESTAMP_QUERY)
            .then(|| queue.get_timestamp_period());
        let placeholder = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("webfusion placeholder"),
            size: 16,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        Ok(Gpu {
            placeholder,
            device,
            queue,
            limits,
            adapter_info: format!("{} ({:?})", info.name, info.backend),
            cpu: info.device_type == wgpu::DeviceType::Cpu,
            subgroups,
            pipelines: FxHashMap::default(),
            kernels: crate::codegen::Memo::default(),
            compiled_in_scope: Vec::new(),
            traced: None,
            timestamps,
            compile_only: false,
            pool: FxHashMap::default(),
            uncaptured,
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
        OpenScope {
            guards: [
                self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory),
                self.device.push_error_scope(wgpu::ErrorFilter::Validation),
                self.device.push_error_scope(wgpu::ErrorFilter::Internal),
            ],
        }
    }

    /// The pipelines compiled in the scope about to close.
    pub fn take_compiled_in_scope(&mut self) -> Vec<String> {
        std::mem::take(&mut self.compiled_in_scope)
    }

    /// Raises a genuine validation error on the GPU, caught by the open
    /// scope: an invalid command in the block's encoder (a copy into a
    /// buffer that is no copy destination), which voids the whole submit it
    /// is in, as a real failure would.
    pub fn provoke_validation_error(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.copy_buffer_to_buffer(&self.placeholder, 0, &self.placeholder, 0, Some(4));
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
        self.queue
            .write_buffer(&allocation.buffer, 0, bytemuck::cast_slice(words));
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
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bucket,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
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
        encoder: &mut wgpu::CommandEncoder,
        kernel: &Kernel,
        buffers: &[&wgpu::Buffer],
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
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.uniforms.arenas[arena],
                offset,
                size: wgpu::BufferSize::new(size),
            }),
        }];
        for (i, buffer) in buffers.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: buffer.as_entire_binding(),
            });
        }
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        let (x, y) = self.grid(kernel.workgroups);
        let stamp = match (&mut self.traced, self.timestamps) {
            (Some(traced), Some(_)) => traced.stamp(&self.device),
            _ => None,
        };
        let set = self.traced.as_ref().and_then(|t| t.set.as_ref());
        let timestamp_writes =
            stamp
                .zip(set)
                .map(|(first, (query_set, _))| wgpu::ComputePassTimestampWrites {
                    query_set,
                    beginning_of_pass_write_index: Some(first),
                    end_of_pass_write_index: Some(first + 1),
                });
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: None,
            timestamp_writes,
        });
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(x, y, 1);
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
                    u.arenas
                        .push(self.device.create_buffer(&wgpu::BufferDescriptor {
                            label: Some("webfusion uniforms"),
                            size: ARENA_BYTES,
                            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                            mapped_at_creation: false,
                        }));
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
    pub fn submit(&mut self, mut encoder: wgpu::CommandEncoder) {
        for (arena, staged) in self
            .uniforms
            .arenas
            .iter()
            .zip(self.uniforms.staged.drain(..))
        {
            if !staged.is_empty() {
                self.queue.write_buffer(arena, 0, &staged);
            }
        }
        // The timestamps this submit's launches wrote are resolved at its
        // end and read back after it (`Traced`).
        let stamped = self.traced.as_mut().and_then(|t| t.set.take());
        let resolved = stamped.map(|(set, used)| {
            let bytes = u64::from(used) * 8;
            let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("webfusion timestamps"),
                size: bytes,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            encoder.resolve_query_set(&set, 0..used, &buffer, 0);
            (buffer, bytes)
        });
        self.queue.submit([encoder.finish()]);
        if let Some((buffer, bytes)) = resolved {
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
        buffer: &wgpu::Buffer,
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
        ranges: &[(&wgpu::Buffer, u64, u64)],
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
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("webfusion read"),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        let mut at = 0;
        for &(buffer, offset, bytes) in ranges {
            if bytes > 0 {
                encoder.copy_buffer_to_buffer(buffer, offset, &staging, at, bytes);
            }
            at += bytes;
        }
        self.submit(encoder);
        let (sender, receiver) = futures_channel::oneshot::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |result| {
            let _ = sender.send(result);
        });
        // Natively the map completes only when the device is polled; in the
        // browser this is a no-op and the callback comes from the event loop.
        let polled = self.device.poll(wgpu::PollType::wait_indefinitely());
        let pool = self.staging.clone();
        Box::pin(async move {
            polled.map_err(|e| format!("waiting for the GPU failed: {e}"))?;
            match receiver.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(format!("mapping the result failed: {e}")),
                Err(_) => return Err("the GPU dropped the read before it finished".to_string()),
            }
            let values = {
                let view = staging
                    .get_mapped_range(..bytes)
                    .map_err(|e| format!("mapping the result failed: {e}"))?;
                // In the browser the mapped range is a JS array: its words
                // are copied into wasm memory once, where reading `view` as
                // a slice would first copy it into a temporary of wgpu's.
                // The room is asked for fallibly: a page whose wasm memory
                // cannot grow by a read's size gets that read's failure, not
                // an abort of the module.
                #[cfg(target_arch = "wasm32")]
                let words = {
                    let bytes = view.as_uint8array();
                    let length = bytes.length() / 4;
                    let mut words = Vec::new();
                    words.try_reserve_exact(length as usize).map_err(|_| {
                        format!("wasm memory has no room for the {} bytes read", length * 4)
                    })?;
                    words.resize(length as usize, 0);
                    js_sys::Uint32Array::new_with_byte_offset_and_length(
                        &bytes.buffer(),
                        bytes.byte_offset(),
                        length,
                    )
                    .copy_to(&mut words);
                    words
                };
                // Natively the range is host memory, aligned as a buffer is:
                // its words are copied once, into memory not zeroed first
                // (`pod_collect_to_vec` zeroes, then copies).
                #[cfg(not(target_arch = "wasm32"))]
                let words = match bytemuck::try_cast_slice::<u8, u32>(&view) {
                    Ok(words) => words.to_vec(),
                    Err(_) => bytemuck::pod_collect_to_vec::<u8, u32>(&view),
                };
                words
            };
            staging.unmap();
            // Unmapped, it serves the next read of this size.
            pool.borrow_mut().entry(size).or_default().push(staging);
            Ok(values)
        })
    }
}

#[cfg(target_arch = "wasm32")]
fn browser_has_webgpu() -> bool {
    let global = js_sys::global();
    js_sys::Reflect::get(&global, &"navigator".into())
        .ok()
        .filter(|n| !n.is_undefined() && !n.is_null())
        .and_then(|navigator| js_sys::Reflect::get(&navigator, &"gpu".into()).ok())
        .is_some_and(|gpu| !gpu.is_undefined() && !gpu.is_null())
}

fn log(message: &str) {
    #[cfg(target_arch = "wasm32")]
    web_sys::console::warn_1(&message.into());
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("{message}");
}
