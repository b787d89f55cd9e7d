//! The GPU natively: wgpu on Vulkan or Metal. What `runtime` asks of a GPU
//! (`browser.rs` answers the same in the browser), in wgpu's terms.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{Adapter, GpuError, GpuErrorKind, Limits, PendingRead, Usage};
use crate::error::RequestError;

pub type Buffer = wgpu::Buffer;
pub type Pipeline = wgpu::ComputePipeline;
pub type Encoder = wgpu::CommandEncoder;
pub type QuerySet = wgpu::QuerySet;

/// The device and its queue, and what its callbacks report: a loss and the
/// GPU errors no scope caught. The callbacks only set these; the device
/// notices them when it next looks (`lost`, `uncaptured_errors`).
pub struct Device {
    device: wgpu::Device,
    queue: wgpu::Queue,
    lost: Arc<Mutex<Option<String>>>,
    uncaptured: Arc<AtomicU64>,
}

/// The instance adapters are requested from: one for the process.
///
/// The Vulkan loader loads the driver with the first instance and unloads
/// it with the last. NVIDIA's driver, loaded and unloaded some thirty times
/// in one process, does not load again ("libnvidia-tls.so: cannot allocate
/// memory in static TLS block": each load takes static TLS its unload does
/// not give back), so every later request found no adapter: the native
/// suite on an H100, one test after another, failed from its 28th test on,
/// and hung at times when run in parallel. Kept for the process, the driver
/// is loaded once.
fn instance() -> wgpu::Instance {
    static INSTANCE: std::sync::OnceLock<wgpu::Instance> = std::sync::OnceLock::new();
    INSTANCE
        .get_or_init(|| {
            let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
            desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL;
            wgpu::Instance::new(desc)
        })
        .clone()
}

/// Opens a device with WebGPU's default limits (the same on every
/// platform, so a program that works here works in any browser), and
/// timestamps and subgroups where the adapter has them.
pub async fn open() -> Result<(Device, Adapter), RequestError> {
    let adapter = instance()
        .request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        })
        .await
        .map_err(|e| RequestError::NoAdapter(e.to_string()))?;
    let info = adapter.get_info();
    let wanted = wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::SUBGROUP;
    let features = adapter.features() & wanted;
    let subgroups = features
        .contains(wgpu::Features::SUBGROUP)
        .then(|| {
            crate::codegen::Subgroups::for_adapter(info.subgroup_min_size, info.subgroup_max_size)
        })
        .flatten();
    let (device, queue) = adapter
        .request_device(&wgpu::DeviceDescriptor {
            label: Some("webfusion"),
            required_features: features,
            required_limits: wgpu::Limits::default(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        })
        .await
        .map_err(|e| RequestError::DeviceRefused(e.to_string()))?;
    // wgpu's default handler panics inside the failing call. Every GPU call
    // runs inside an error scope, so anything reaching here is a bug to
    // report, never a reason to abort.
    let uncaptured = Arc::new(AtomicU64::new(0));
    let counter = uncaptured.clone();
    device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
        counter.fetch_add(1, Ordering::Relaxed);
        eprintln!("webfusion: uncaptured GPU error: {error}");
    }));
    let lost = Arc::new(Mutex::new(None));
    let signal = lost.clone();
    device.set_device_lost_callback(move |reason, message| {
        if let Ok(mut lost) = signal.lock() {
            lost.get_or_insert_with(|| format!("{message} ({reason:?})"));
        }
    });
    let timestamps = features
        .contains(wgpu::Features::TIMESTAMP_QUERY)
        .then(|| queue.get_timestamp_period());
    let adapter = Adapter {
        name: format!("{} ({:?})", info.name, info.backend),
        cpu: info.device_type == wgpu::DeviceType::Cpu,
        subgroups,
        timestamps,
        limits: Limits::WEBGPU_DEFAULTS,
    };
    let device = Device {
        device,
        queue,
        lost,
        uncaptured,
    };
    Ok((device, adapter))
}

impl Device {
    pub fn buffer(&self, size: u64, usage: Usage, label: Option<&str>) -> Buffer {
        use wgpu::BufferUsages as U;
        let usage = match usage {
            Usage::Storage => U::STORAGE | U::COPY_SRC | U::COPY_DST,
            Usage::Placeholder => U::STORAGE | U::COPY_SRC,
            Usage::Uniform => U::UNIFORM | U::COPY_DST,
            Usage::Read => U::MAP_READ | U::COPY_DST,
            Usage::Timestamps => U::QUERY_RESOLVE | U::COPY_SRC,
        };
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label,
            size,
            usage,
            mapped_at_creation: false,
        })
    }

    /// Compiles `text` now: the pipeline is ready to launch.
    ///
    /// Bounds checks stay on; wgpu's forced loop bounding (a second counter
    /// and branch in every iteration of every loop, so a driver may not
    /// assume a loop ends) is off: on an H200 it cost a 4096 product 10%
    /// and a 1024 one more, all of it in the inner loop over a staged slice.
    pub fn compile(&self, text: &str) -> Pipeline {
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

    pub fn encoder(&self) -> Encoder {
        self.device.create_command_encoder(&Default::default())
    }

    pub fn query_set(&self, count: u32) -> QuerySet {
        self.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("webfusion timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count,
        })
    }

    /// Writes `bytes` at the start of `buffer` before the next submit's
    /// commands run.
    pub fn write(&self, buffer: &Buffer, bytes: &[u8]) {
        self.queue.write_buffer(buffer, 0, bytes);
    }

    pub fn submit(&self, encoder: Encoder) {
        self.queue.submit([encoder.finish()]);
    }

    /// Records one launch of `pipeline` on a grid of `x` by `y` workgroups:
    /// binding 0 is the slice `uniforms` of a uniform arena, the `buffers`
    /// follow in order; with `stamps`, the pass writes its start and end
    /// times at that query and the next.
    pub fn dispatch(
        &self,
        encoder: &mut Encoder,
        pipeline: &Pipeline,
        uniforms: (&Buffer, u64, u64),
        buffers: &[&Buffer],
        (x, y): (u32, u32),
        stamps: Option<(&QuerySet, u32)>,
    ) {
        let (arena, offset, size) = uniforms;
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: arena,
                offset,
                size: wgpu::BufferSize::new(size),
            }),
        }];
        for (binding, buffer) in (1..).zip(buffers) {
            entries.push(wgpu::BindGroupEntry {
                binding,
                resource: buffer.as_entire_binding(),
            });
        }
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        let timestamp_writes = stamps.map(|(query_set, first)| wgpu::ComputePassTimestampWrites {
            query_set,
            beginning_of_pass_write_index: Some(first),
            end_of_pass_write_index: Some(first + 1),
        });
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: None,
            timestamp_writes,
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(x, y, 1);
    }

    /// Records a copy of `bytes` (a multiple of 4) from `from` at `offset`
    /// into `to` at `at`.
    pub fn copy(
        &self,
        encoder: &mut Encoder,
        from: (&Buffer, u64),
        to: (&Buffer, u64),
        bytes: u64,
    ) {
        encoder.copy_buffer_to_buffer(from.0, from.1, to.0, to.1, Some(bytes));
    }

    /// Records the resolve of `set`'s first `used` timestamps into `buffer`.
    pub fn resolve(&self, encoder: &mut Encoder, set: &QuerySet, used: u32, buffer: &Buffer) {
        encoder.resolve_query_set(set, 0..used, buffer, 0);
    }

    /// Opens the scopes GPU work runs in: out of memory, validation,
    /// internal; `OpenScope::close` pops them in reverse.
    pub fn open_scope(&self) -> OpenScope {
        OpenScope {
            guards: [
                self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory),
                self.device.push_error_scope(wgpu::ErrorFilter::Validation),
                self.device.push_error_scope(wgpu::ErrorFilter::Internal),
            ],
        }
    }

    /// Maps `staging` (after the submit that filled it) and copies its
    /// first `bytes` out as words, then unmaps it. The map completes only
    /// when the device is polled, which is done here, before the future is
    /// returned.
    pub fn map_read(&self, staging: &Buffer, bytes: u64) -> PendingRead {
        let (sender, receiver) = futures_channel::oneshot::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |result| {
            let _ = sender.send(result);
        });
        let polled = self.device.poll(wgpu::PollType::wait_indefinitely());
        let staging = staging.clone();
        Box::pin(async move {
            polled.map_err(|e| format!("waiting for the GPU failed: {e}"))?;
            match receiver.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(format!("mapping the result failed: {e}")),
                Err(_) => return Err("the GPU dropped the read before it finished".to_string()),
            }
            let words = {
                let view = staging
                    .get_mapped_range(..bytes)
                    .map_err(|e| format!("mapping the result failed: {e}"))?;
                // The range is host memory, aligned as a buffer is: its
                // words are copied once, into memory not zeroed first
                // (`pod_collect_to_vec` zeroes, then copies).
                match bytemuck::try_cast_slice::<u8, u32>(&view) {
                    Ok(words) => words.to_vec(),
                    Err(_) => bytemuck::pod_collect_to_vec::<u8, u32>(&view),
                }
            };
            staging.unmap();
            Ok(words)
        })
    }

    /// Why the device was lost, once its callback has said.
    pub fn lost(&self) -> Option<String> {
        self.lost.lock().ok().and_then(|lost| lost.clone())
    }

    pub fn uncaptured_errors(&self) -> u64 {
        self.uncaptured.load(Ordering::Relaxed)
    }

    pub fn destroy(&self) {
        self.device.destroy();
    }
}

/// The scopes around some GPU work, open until `close`.
pub struct OpenScope {
    /// Pushed out-of-memory, validation, internal; popped in reverse.
    guards: [wgpu::ErrorScopeGuard; 3],
}

impl OpenScope {
    /// The first error the scopes caught, once they resolve: natively at
    /// once.
    pub fn close(self) -> Pin<Box<dyn Future<Output = Option<GpuError>>>> {
        let [oom, validation, internal] = self.guards;
        let internal = internal.pop();
        let validation = validation.pop();
        let oom = oom.pop();
        Box::pin(async move {
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
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limits_wgpu_opens_a_device_with_are_the_ones_the_planner_keeps_to() {
        let opened = wgpu::Limits::default();
        let kept = Limits::WEBGPU_DEFAULTS;
        assert_eq!(opened.max_buffer_size, kept.max_buffer_size);
        assert_eq!(
            opened.max_storage_buffer_binding_size,
            kept.max_storage_buffer_binding_size
        );
        assert_eq!(
            opened.max_storage_buffers_per_shader_stage,
            kept.max_storage_buffers_per_shader_stage
        );
        assert_eq!(
            opened.max_compute_workgroups_per_dimension,
            kept.max_compute_workgroups_per_dimension
        );
    }
}
