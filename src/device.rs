//! The device: one single-threaded cell holding everything a device owns
//! (the queue, the tensors' records, the GPU). No mutex and no thread: wasm in
//! a page has one thread, and natively a `Device` and its tensors are `!Send`,
//! so work runs on the caller's thread at flush time.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::codegen::{self, Access, Kernel, REDUCE_CHUNK, Stage};
use crate::error::RequestError;
use crate::fusion::{self, Block, ElementwiseBlock};
use crate::ir::layout::Layout;
use crate::ir::{Distribution, OpIr, OpKind, Queue, ReduceOp, TensorId};
use crate::runtime::{Allocation, Gpu, Stats};
use crate::tensor::shape;

/// Options for [`Device::request`].
#[derive(Debug, Clone)]
pub struct DeviceOptions {
    /// Ops the queue holds before it flushes by itself.
    pub capacity: usize,
}

impl Default for DeviceOptions {
    fn default() -> Self {
        DeviceOptions { capacity: 1024 }
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
}

pub(crate) struct DeviceState {
    pub gpu: Gpu,
    pub queue: Queue,
    pub records: HashMap<TensorId, Record>,
    pub stats: Stats,
    pub capacity: usize,
    /// Scratch buffers to return to the pool at the next submit.
    retired: Vec<Allocation>,
}

impl Device {
    /// Opens a GPU device: WebGPU in the browser, Vulkan or Metal natively.
    pub async fn request(options: DeviceOptions) -> Result<Device, RequestError> {
        thread_local!(static NEXT: std::cell::Cell<u64> = const { std::cell::Cell::new(1) });
        let gpu = Gpu::request().await?;
        let number = NEXT.with(|n| n.replace(n.get() + 1));
        Ok(Device {
            inner: Rc::new(DeviceCell {
                state: RefCell::new(DeviceState {
                    gpu,
                    queue: Queue::default(),
                    records: HashMap::new(),
                    stats: Stats::default(),
                    capacity: options.capacity.max(1),
                    retired: Vec::new(),
                }),
                dropped: RefCell::new(Vec::new()),
                number,
            }),
        })
    }

    /// Runs `f` on the device state, after releasing handles dropped while it
    /// was busy.
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
        f(&mut state)
    }

    /// Called when the last handle to `id` goes away.
    pub(crate) fn drop_handle(&self, id: TensorId) {
        match self.inner.state.try_borrow_mut() {
            Ok(mut state) => state.release_handle(id),
            Err(_) => self.inner.dropped.borrow_mut().push(id),
        }
    }

    /// Runs everything queued.
    pub fn sync(&self) {
        self.with_state(DeviceState::flush);
    }

    /// The counters of this device's work so far.
    pub fn stats(&self) -> Stats {
        self.with_state(|state| state.stats)
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
}

impl DeviceState {
    /// Queues `op`, whose output is a new tensor held by the handle the caller
    /// is about to return. Flushes when the queue is full.
    pub fn register(&mut self, op: OpIr) {
        for &input in &op.inputs {
            if let Some(record) = self.records.get_mut(&input) {
                record.dependents += 1;
            }
        }
        self.records.insert(
            op.output,
            Record {
                shape: op.shape.clone(),
                held: true,
                dependents: 0,
                data: Data::Unwritten,
            },
        );
        self.stats.ops_registered += 1;
        self.queue.push(op);
        if self.queue.len() >= self.capacity {
            self.flush();
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
    fn collect(&mut self, id: TensorId) {
        let unreachable = self
            .records
            .get(&id)
            .is_some_and(|r| !r.held && r.dependents == 0);
        if !unreachable || self.queue.produces(id) {
            return;
        }
        let Some(record) = self.records.remove(&id) else {
            return;
        };
        match record.data {
            Data::Owned(allocation) => self.gpu.release(allocation, &mut self.stats),
            Data::View { base, .. } => self.release_dependent(base),
            Data::Unwritten | Data::Empty => {}
        }
    }

    fn release_dependent(&mut self, id: TensorId) {
        if let Some(record) = self.records.get_mut(&id) {
            record.dependents = record.dependents.saturating_sub(1);
        }
        self.collect(id);
    }

    /// Plans and runs everything queued, in one submit.
    pub fn flush(&mut self) {
        if self.queue.is_empty() {
            return;
        }
        let ops = self.queue.take();
        self.stats.flushes += 1;
        let max_storage = self.gpu.limits.max_storage_buffers_per_shader_stage as usize;
        let blocks = fusion::plan(
            &ops,
            |t| self.records.get(&t).is_some_and(|r| r.held),
            max_storage,
        );
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        for block in &blocks {
            match block {
                Block::Elementwise(block) => self.run_elementwise(&ops, block, &mut encoder),
                Block::Single(i) => self.run_single(&ops[*i], &mut encoder),
            }
        }
        self.submit(encoder);

        // The queue no longer needs anything it read.
        for op in &ops {
            for &input in &op.inputs {
                self.release_dependent(input);
            }
        }
        for op in &ops {
            self.collect(op.output);
        }
    }

    /// The buffer and layout to read `id` through; `None` while unwritten.
    /// An empty tensor reads as the GPU's placeholder buffer (no kernel
    /// indexes into it, but a binding must exist).
    pub fn access(&self, id: TensorId) -> Option<(wgpu::Buffer, Access)> {
        let record = self.records.get(&id)?;
        let (buffer, layout) = match &record.data {
            Data::Unwritten => return None,
            Data::Empty => (
                self.gpu.placeholder.clone(),
                Layout::contiguous(&record.shape),
            ),
            Data::Owned(a) => (a.buffer.clone(), Layout::contiguous(&record.shape)),
            Data::View { base, layout } => match &self.records.get(base)?.data {
                Data::Owned(a) => (a.buffer.clone(), layout.clone()),
                _ => return None,
            },
        };
        Some((
            buffer,
            Access {
                shape: record.shape.clone(),
                layout,
            },
        ))
    }

    fn set_data(&mut self, id: TensorId, data: Data) {
        if let Data::View { base, .. } = &data
            && let Some(record) = self.records.get_mut(base)
        {
            record.dependents += 1;
        }
        match self.records.get_mut(&id) {
            Some(record) => record.data = data,
            // Nobody can read it any more: undo what storing it took.
            None => match data {
                Data::Owned(a) => self.gpu.release(a, &mut self.stats),
                Data::View { base, .. } => self.release_dependent(base),
                Data::Unwritten | Data::Empty => {}
            },
        }
    }

    /// A new buffer for a tensor of `shape`, or `Empty` when it has no
    /// elements.
    fn allocate(&mut self, shape: &[usize]) -> Data {
        match shape::numel(shape) {
            0 => Data::Empty,
            n => Data::Owned(self.gpu.allocate(4 * n as u64, &mut self.stats)),
        }
    }

    /// Launches `kernel` reading `inputs` and writing `outputs`' buffers.
    fn launch(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        kernel: &Kernel,
        inputs: &[wgpu::Buffer],
        outputs: &[&Data],
    ) {
        let placeholder = self.gpu.placeholder.clone();
        let mut buffers: Vec<&wgpu::Buffer> = inputs.iter().collect();
        for data in outputs {
            match data {
                Data::Owned(a) => buffers.push(&a.buffer),
                _ => buffers.push(&placeholder),
            }
        }
        self.gpu.launch(encoder, kernel, &buffers, &mut self.stats);
    }

    /// The buffers of `inputs`, or `None` when one was never written (the
    /// block cannot run).
    fn input_buffers(&self, inputs: &[TensorId]) -> Option<(Vec<wgpu::Buffer>, Vec<Access>)> {
        inputs
            .iter()
            .map(|&t| self.access(t))
            .collect::<Option<Vec<_>>>()
            .map(|v| v.into_iter().unzip())
    }

    fn run_elementwise(
        &mut self,
        ops: &[OpIr],
        block: &ElementwiseBlock,
        encoder: &mut wgpu::CommandEncoder,
    ) {
        if shape::numel(&block.shape) == 0 {
            for &t in &block.outputs {
                self.set_data(t, Data::Empty);
            }
            return;
        }
        let Some((buffers, accesses)) = self.input_buffers(&block.inputs) else {
            return;
        };
        let kernel = codegen::elementwise(block, ops, |t| {
            let j = block
                .inputs
                .iter()
                .position(|&i| i == t)
                .unwrap_or_default();
            accesses[j].clone()
        });
        let outputs: Vec<Data> = block
            .outputs
            .iter()
            .map(|_| self.allocate(&block.shape))
            .collect();
        self.launch(
            encoder,
            &kernel,
            &buffers,
            &outputs.iter().collect::<Vec<_>>(),
        );
        if block.ops.len() > 1 {
            self.stats.fused_ops += block.ops.len() as u64;
        }
        for (&t, data) in block.outputs.iter().zip(outputs) {
            self.set_data(t, data);
        }
    }

    fn run_single(&mut self, op: &OpIr, encoder: &mut wgpu::CommandEncoder) {
        let numel = shape::numel(&op.shape);
        let Some((buffers, accesses)) = self.input_buffers(&op.inputs) else {
            return;
        };
        let data = match &op.kind {
            OpKind::Upload(values) => self.upload(&op.shape, values),
            OpKind::Random { dist, seed } => self.upload(&op.shape, &random(*dist, *seed, numel)),
            OpKind::View(view) => {
                let (base, input) = (op.inputs[0], &accesses[0]);
                if numel == 0 || shape::numel(&input.shape) == 0 {
                    Data::Empty
                } else {
                    match input.layout.view(view, &input.shape, &op.shape) {
                        Some(layout) => Data::View {
                            base: self.owner(base),
                            layout,
                        },
                        // A reshape of strided memory: copy it row-major; the
                        // copy already has the new shape's layout.
                        None => {
                            let out = self.allocate(&op.shape);
                            let kernel = codegen::copy(input, &Layout::contiguous(&input.shape));
                            self.launch(encoder, &kernel, &buffers, &[&out]);
                            out
                        }
                    }
                }
            }
            OpKind::Reduce { op: reduce, axes } => self.reduce(
                encoder,
                &buffers[0],
                &accesses[0],
                axes,
                *reduce,
                false,
                &op.shape,
            ),
            OpKind::Argmax { axis } => self.reduce(
                encoder,
                &buffers[0],
                &accesses[0],
                &[*axis],
                ReduceOp::Max,
                true,
                &op.shape,
            ),
            OpKind::Matmul => {
                let out = self.allocate(&op.shape);
                if numel > 0 {
                    let kernel = codegen::matmul(&accesses[0], &accesses[1], &op.shape);
                    self.launch(encoder, &kernel, &buffers, &[&out]);
                }
                out
            }
            OpKind::Cat { axis } => {
                let out = self.allocate(&op.shape);
                let mut dst = Layout::contiguous(&op.shape);
                for (buffer, access) in buffers.iter().zip(&accesses) {
                    if shape::numel(&access.shape) > 0 {
                        let kernel = codegen::copy(access, &dst);
                        self.launch(encoder, &kernel, std::slice::from_ref(buffer), &[&out]);
                    }
                    dst.offset += access.shape[*axis] * dst.strides[*axis];
                }
                out
            }
            // Elementwise ops always run in an elementwise block.
            _ => return,
        };
        self.set_data(op.output, data);
    }

    /// A reduction of `input` over `axes` into a new tensor of `out_shape`:
    /// one launch, or two when the reduced elements exceed one workgroup's
    /// chunk (partials, then the final values).
    #[allow(clippy::too_many_arguments)]
    fn reduce(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        buffer: &wgpu::Buffer,
        input: &Access,
        axes: &[usize],
        op: ReduceOp,
        argmax: bool,
        out_shape: &[usize],
    ) -> Data {
        let out = self.allocate(out_shape);
        let n_out = shape::numel(out_shape);
        let total: usize = axes.iter().map(|&d| input.shape[d]).product();
        if n_out == 0 {
            return out;
        }
        if total <= REDUCE_CHUNK {
            let kernel = codegen::reduce(input, axes, op, argmax, Stage::Whole);
            self.launch(encoder, &kernel, std::slice::from_ref(buffer), &[&out]);
            return out;
        }
        let splits = total.div_ceil(REDUCE_CHUNK);
        let partial_shape = [n_out, splits];
        let values = self.allocate(&partial_shape);
        let indices = if argmax {
            Some(self.allocate(&partial_shape))
        } else {
            None
        };
        let first = codegen::reduce(input, axes, op, argmax, Stage::First { splits });
        let mut outputs = vec![&values];
        outputs.extend(indices.as_ref());
        self.launch(encoder, &first, std::slice::from_ref(buffer), &outputs);

        let partials = Access {
            shape: partial_shape.to_vec(),
            layout: Layout::contiguous(&partial_shape),
        };
        let last = codegen::reduce(&partials, &[1], op, argmax, Stage::Final { total });
        let mut inputs = Vec::new();
        for data in std::iter::once(values).chain(indices) {
            if let Data::Owned(a) = data {
                inputs.push(a.buffer.clone());
                self.retire(a);
            }
        }
        self.launch(encoder, &last, &inputs, &[&out]);
        out
    }

    /// Returns a scratch buffer to the pool once the work recorded so far is
    /// submitted: an upload later in the same flush writes before the
    /// submitted kernels run, so the pool must not hand the buffer out sooner.
    fn retire(&mut self, allocation: Allocation) {
        self.retired.push(allocation);
    }

    fn submit(&mut self, encoder: wgpu::CommandEncoder) {
        self.gpu.queue.submit([encoder.finish()]);
        for allocation in std::mem::take(&mut self.retired) {
            self.gpu.release(allocation, &mut self.stats);
        }
    }

    fn upload(&mut self, shape: &[usize], values: &[f32]) -> Data {
        let data = self.allocate(shape);
        if let Data::Owned(a) = &data {
            self.gpu
                .queue
                .write_buffer(&a.buffer, 0, bytemuck::cast_slice(values));
        }
        data
    }

    /// The tensor owning `id`'s memory: itself, or the base of its view.
    fn owner(&self, id: TensorId) -> TensorId {
        match self.records.get(&id).map(|r| &r.data) {
            Some(Data::View { base, .. }) => *base,
            _ => id,
        }
    }

    /// Starts reading `id`'s values back: runs what is queued, then copies
    /// its bytes (made row-major first if it is a strided view) to the host.
    pub fn read(&mut self, id: TensorId) -> Option<crate::runtime::PendingRead> {
        self.flush();
        let (buffer, access) = self.access(id)?;
        let numel = shape::numel(&access.shape);
        if numel == 0 {
            return Some(self.gpu.read(&buffer, 0, 0));
        }
        if access.layout.is_contiguous(&access.shape) {
            return Some(
                self.gpu
                    .read(&buffer, 4 * access.layout.offset as u64, 4 * numel as u64),
            );
        }
        let temp = self.allocate(&access.shape);
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        let kernel = codegen::copy(&access, &Layout::contiguous(&access.shape));
        self.launch(&mut encoder, &kernel, &[buffer], &[&temp]);
        self.submit(encoder);
        let Data::Owned(temp) = temp else { return None };
        let read = self.gpu.read(&temp.buffer, 0, 4 * numel as u64);
        // The read's copy is submitted: later work cannot overtake it.
        self.gpu.release(temp, &mut self.stats);
        Some(read)
    }
}

/// `n` seeded values of `dist`, made with a counter-based generator
/// (splitmix64 of seed and position) and `libm`'s portable math, so the bits
/// are the same natively and in wasm, on every device.
fn random(dist: Distribution, seed: u64, n: usize) -> Vec<f32> {
    let bits = |i: u64| {
        let mut z = seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    // A uniform double in [0, 1) from the top 53 bits.
    let unit = |i: u64| (bits(i) >> 11) as f64 / (1u64 << 53) as f64;
    (0..n as u64)
        .map(|i| match dist {
            Distribution::Uniform { min, max } => {
                let v = min as f64 + (max as f64 - min as f64) * unit(i);
                // Rounding to f32 can land on `max`; keep the interval half-open.
                let v = v as f32;
                if v >= max && max > min {
                    libm::nextafterf(max, min)
                } else {
                    v
                }
            }
            Distribution::Normal { mean, std } => {
                // Box-Muller on two independent uniforms of this position.
                let u1 = 1.0 - unit(2 * i + (1 << 62));
                let u2 = unit(2 * i + 1 + (1 << 62));
                let z =
                    libm::sqrt(-2.0 * libm::log(u1)) * libm::cos(2.0 * std::f64::consts::PI * u2);
                (mean as f64 + std as f64 * z) as f32
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_values_and_another_seed_others() {
        let dist = Distribution::Uniform {
            min: -1.0,
            max: 1.0,
        };
        assert_eq!(random(dist, 7, 100), random(dist, 7, 100));
        assert_ne!(random(dist, 7, 100), random(dist, 8, 100));
        assert!(
            random(dist, 7, 1000)
                .iter()
                .all(|v| (-1.0..1.0).contains(v))
        );
    }

    #[test]
    fn normal_values_have_the_asked_mean_and_spread() {
        let values = random(
            Distribution::Normal {
                mean: 3.0,
                std: 2.0,
            },
            1,
            20_000,
        );
        let mean = values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64;
        let var = values
            .iter()
            .map(|&v| (v as f64 - mean).powi(2))
            .sum::<f64>()
            / values.len() as f64;
        assert!((mean - 3.0).abs() < 0.05, "{mean}");
        assert!((var.sqrt() - 2.0).abs() < 0.05, "{}", var.sqrt());
    }
}
