//! The device: one single-threaded cell holding everything a device owns
//! (the queue, the tensors' records, the GPU). No mutex and no thread: wasm in
//! a page has one thread, and natively a `Device` and its tensors are `!Send`,
//! so work runs on the caller's thread at flush time.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::codegen;
use crate::error::RequestError;
use crate::fusion::{self, Block};
use crate::ir::{OpIr, OpKind, Queue, TensorId};
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
}

/// What the device knows of one tensor.
pub(crate) struct Record {
    pub shape: Vec<usize>,
    /// Whether a handle (Rust `Tensor` or JS object) still refers to it.
    pub held: bool,
    /// Queued ops that read it. A tensor nobody holds stays while the queue
    /// still needs it.
    pub uses: usize,
    /// Its bytes, once a block has written them; `None` before, and for a
    /// fused intermediate that never needed memory.
    pub storage: Option<Allocation>,
}

pub(crate) struct DeviceState {
    pub gpu: Gpu,
    pub queue: Queue,
    pub records: HashMap<TensorId, Record>,
    pub stats: Stats,
    pub capacity: usize,
}

impl Device {
    /// Opens a GPU device: WebGPU in the browser, Vulkan or Metal natively.
    pub async fn request(options: DeviceOptions) -> Result<Device, RequestError> {
        let gpu = Gpu::request().await?;
        Ok(Device {
            inner: Rc::new(DeviceCell {
                state: RefCell::new(DeviceState {
                    gpu,
                    queue: Queue::default(),
                    records: HashMap::new(),
                    stats: Stats::default(),
                    capacity: options.capacity.max(1),
                }),
                dropped: RefCell::new(Vec::new()),
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
                record.uses += 1;
            }
        }
        self.records.insert(
            op.output,
            Record {
                shape: op.shape.clone(),
                held: true,
                uses: 0,
                storage: None,
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

    /// Forgets `id` once nothing can read it: no handle, no queued use.
    fn collect(&mut self, id: TensorId) {
        let unreachable = self
            .records
            .get(&id)
            .is_some_and(|r| !r.held && r.uses == 0);
        // A tensor whose producing op is still queued keeps its record until
        // the flush: the planner must see that nobody holds it.
        let pending = self.queue_produces(id);
        if unreachable
            && !pending
            && let Some(record) = self.records.remove(&id)
            && let Some(allocation) = record.storage
        {
            self.gpu.release(allocation, &mut self.stats);
        }
    }

    fn queue_produces(&self, id: TensorId) -> bool {
        // Records of queued outputs have no storage yet; a written tensor is
        // never pending.
        self.records.get(&id).is_some_and(|r| r.storage.is_none()) && self.queue.produces(id)
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
            self.run(&ops, block, &mut encoder);
        }
        self.gpu.queue.submit([encoder.finish()]);

        // The queue no longer needs anything it read or wrote.
        for op in &ops {
            for &input in &op.inputs {
                if let Some(record) = self.records.get_mut(&input) {
                    record.uses = record.uses.saturating_sub(1);
                }
            }
        }
        for op in &ops {
            for &t in op.inputs.iter().chain([&op.output]) {
                self.collect(t);
            }
        }
    }

    fn run(&mut self, ops: &[OpIr], block: &Block, encoder: &mut wgpu::CommandEncoder) {
        match block {
            Block::Upload { op } => {
                let op = &ops[*op];
                let OpKind::Upload(values) = &op.kind else {
                    return;
                };
                if values.is_empty() {
                    return;
                }
                let allocation = self.gpu.allocate(4 * values.len() as u64, &mut self.stats);
                self.gpu
                    .queue
                    .write_buffer(&allocation.buffer, 0, bytemuck::cast_slice(values));
                self.store(op.output, allocation);
            }
            Block::Elementwise(block) => {
                let numel = shape::numel(&block.shape) as u64;
                if numel == 0 {
                    return;
                }
                let kernel = codegen::elementwise(block, ops, |t| {
                    self.records
                        .get(&t)
                        .map(|r| r.shape.clone())
                        .unwrap_or_default()
                });
                let mut buffers: Vec<wgpu::Buffer> = Vec::new();
                for input in &block.inputs {
                    match self.records.get(input).and_then(|r| r.storage.as_ref()) {
                        Some(a) => buffers.push(a.buffer.clone()),
                        None => return,
                    }
                }
                let outputs: Vec<Allocation> = block
                    .outputs
                    .iter()
                    .map(|_| self.gpu.allocate(4 * numel, &mut self.stats))
                    .collect();
                buffers.extend(outputs.iter().map(|a| a.buffer.clone()));
                let refs: Vec<&wgpu::Buffer> = buffers.iter().collect();
                self.gpu.launch(encoder, &kernel, &refs, &mut self.stats);
                if block.ops.len() > 1 {
                    self.stats.fused_ops += block.ops.len() as u64;
                }
                for (&t, allocation) in block.outputs.iter().zip(outputs) {
                    self.store(t, allocation);
                }
            }
        }
    }

    fn store(&mut self, id: TensorId, allocation: Allocation) {
        match self.records.get_mut(&id) {
            Some(record) => {
                if let Some(old) = record.storage.replace(allocation) {
                    self.gpu.release(old, &mut self.stats);
                }
            }
            None => self.gpu.release(allocation, &mut self.stats),
        }
    }
}
