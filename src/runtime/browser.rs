//! The GPU in the browser: WebGPU, called directly. What `runtime` asks of
//! a GPU (`native.rs` answers the same through wgpu), each a call into the
//! few lines of JS below.
//!
//! Why not wgpu here too: its WebGPU backend wraps all of WebGPU (textures,
//! render passes, every format and limit) behind its own dispatch, and the
//! package was 21 KB gzip (7%) larger with it (issue 23). The calls here
//! are the ones `runtime` makes, with WebGPU's own objects as handles.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use js_sys::{Array, Promise, Uint32Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use super::{Adapter, GpuError, GpuErrorKind, Limits, PendingRead, Usage};
use crate::error::RequestError;

#[wasm_bindgen(inline_js = r#"
export function request() {
  if (globalThis.navigator?.gpu == null) return Promise.resolve(["webgpu"]);
  return navigator.gpu.requestAdapter({ powerPreference: "high-performance" }).then(
    (adapter) => {
      if (!adapter) return ["adapter", "the browser offered none"];
      const stamps = adapter.features.has("timestamp-query");
      const features = stamps ? ["timestamp-query"] : [];
      return adapter.requestDevice({ label: "webfusion", requiredFeatures: features }).then(
        (device) => {
          device.wfUncaptured = 0;
          device.onuncapturederror = (event) => {
            device.wfUncaptured += 1;
            console.warn(`webfusion: uncaptured GPU error: ${event.error.message}`);
          };
          const info = adapter.info ?? {};
          return ["ok", device, `${info.description ?? ""} (BrowserWebGpu)`, info.isFallbackAdapter === true, stamps];
        },
        (error) => ["device", String(error)],
      );
    },
    (error) => ["adapter", String(error)],
  );
}
export function buffer(device, size, usage, label) {
  return device.createBuffer({ size, usage, label });
}
export function compile(device, code) {
  const module = device.createShaderModule({ code });
  return device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
}
export function encoder(device) {
  return device.createCommandEncoder();
}
export function querySet(device, count) {
  return device.createQuerySet({ type: "timestamp", count, label: "webfusion timestamps" });
}
export function write(device, buffer, bytes) {
  device.queue.writeBuffer(buffer, 0, bytes);
}
export function submit(device, encoder) {
  device.queue.submit([encoder.finish()]);
}
export function dispatch(device, encoder, pipeline, arena, offset, size, buffers, x, y, set, first) {
  const entries = [{ binding: 0, resource: { buffer: arena, offset, size } }];
  buffers.forEach((buffer, i) => entries.push({ binding: i + 1, resource: { buffer } }));
  const bindGroup = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
  const timestampWrites = { querySet: set, beginningOfPassWriteIndex: first, endOfPassWriteIndex: first + 1 };
  const pass = encoder.beginComputePass(set ? { timestampWrites } : {});
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bindGroup);
  pass.dispatchWorkgroups(x, y, 1);
  pass.end();
}
export function copy(encoder, from, offset, to, at, size) {
  encoder.copyBufferToBuffer(from, offset, to, at, size);
}
export function resolve(encoder, set, used, buffer) {
  encoder.resolveQuerySet(set, 0, used, buffer, 0);
}
export function push(device) {
  device.pushErrorScope("out-of-memory");
  device.pushErrorScope("validation");
  device.pushErrorScope("internal");
}
export function pop(device) {
  const scopes = [device.popErrorScope(), device.popErrorScope(), device.popErrorScope()];
  return Promise.all(scopes.map((scope) => scope.catch(() => null))).then((errors) => {
    const error = errors.find((e) => e);
    if (!error) return null;
    if (error instanceof GPUOutOfMemoryError) return [0, "the GPU ran out of memory"];
    return [error instanceof GPUValidationError ? 1 : 2, error.message.trim()];
  });
}
export function mapRead(buffer) {
  return buffer
    .mapAsync(GPUMapMode.READ)
    .then(() => buffer.getMappedRange())
    .catch((error) => `mapping the result failed: ${error}`);
}
export function unmap(buffer) {
  buffer.unmap();
}
export function destroy(object) {
  object.destroy();
}
export function lost(device, note) {
  device.lost.then((info) => note(`${info.message} (${info.reason === "destroyed" ? "Destroyed" : "Unknown"})`));
}
export function uncaptured(device) {
  return device.wfUncaptured;
}
"#)]
extern "C" {
    fn request() -> Promise;
    fn buffer(device: &JsValue, size: f64, usage: u32, label: &str) -> JsValue;
    fn compile(device: &JsValue, code: &str) -> JsValue;
    fn encoder(device: &JsValue) -> JsValue;
    #[wasm_bindgen(js_name = querySet)]
    fn query_set(device: &JsValue, count: u32) -> JsValue;
    fn write(device: &JsValue, buffer: &JsValue, bytes: &[u8]);
    fn submit(device: &JsValue, encoder: &JsValue);
    #[allow(clippy::too_many_arguments)]
    fn dispatch(
        device: &JsValue,
        encoder: &JsValue,
        pipeline: &JsValue,
        arena: &JsValue,
        offset: f64,
        size: f64,
        buffers: &Array,
        x: u32,
        y: u32,
        set: &JsValue,
        first: u32,
    );
    fn copy(encoder: &JsValue, from: &JsValue, offset: f64, to: &JsValue, at: f64, size: f64);
    fn resolve(encoder: &JsValue, set: &JsValue, used: u32, buffer: &JsValue);
    fn push(device: &JsValue);
    fn pop(device: &JsValue) -> Promise;
    #[wasm_bindgen(js_name = mapRead)]
    fn map_read(buffer: &JsValue) -> Promise;
    fn unmap(buffer: &JsValue);
    fn destroy(object: &JsValue);
    fn lost(device: &JsValue, note: &JsValue);
    fn uncaptured(device: &JsValue) -> f64;
}

/// A `GPUBuffer`.
#[derive(Clone)]
pub struct Buffer(JsValue);
/// A `GPUComputePipeline`.
#[derive(Clone)]
pub struct Pipeline(JsValue);
/// A `GPUCommandEncoder`.
pub struct Encoder(JsValue);
/// A `GPUQuerySet`.
pub struct QuerySet(JsValue);
/// A `GPUDevice`, and why it was lost once its `lost` promise says. The
/// uncaptured-error callback counts on the device object itself
/// (`uncaptured_errors`).
pub struct Device {
    device: JsValue,
    /// Set by the `lost` promise's callback. Looked at on every use of the
    /// device (`DeviceState::notice_loss`), so a look reads a cell: a call
    /// into JS there made 1000 small ops about 5% slower, a poll of the
    /// promise's future about 1%.
    lost: Rc<RefCell<Option<String>>>,
}

/// A size or offset as the JS number WebGPU takes. Exact: every one is
/// within the device's limits (256 MiB), far below 2^53.
fn number(n: u64) -> f64 {
    n as f64
}

/// WebGPU's `GPUBufferUsage` bits.
fn usage_bits(usage: Usage) -> u32 {
    const MAP_READ: u32 = 0x1;
    const COPY_SRC: u32 = 0x4;
    const COPY_DST: u32 = 0x8;
    const UNIFORM: u32 = 0x40;
    const STORAGE: u32 = 0x80;
    const QUERY_RESOLVE: u32 = 0x200;
    match usage {
        Usage::Storage => STORAGE | COPY_SRC | COPY_DST,
        Usage::Placeholder => STORAGE | COPY_SRC,
        Usage::Uniform => UNIFORM | COPY_DST,
        Usage::Read => MAP_READ | COPY_DST,
        Usage::Timestamps => QUERY_RESOLVE | COPY_SRC,
    }
}

/// Opens a device with WebGPU's default limits, and timestamps where the
/// adapter has them; a platform without `navigator.gpu` is told so. No subgroups: reductions fold through workgroup
/// memory in the browser.
pub async fn open() -> Result<(Device, Adapter), RequestError> {
    let opened = JsFuture::from(request())
        .await
        .map(|opened| Array::from(&opened))
        .map_err(|_| RequestError::NoAdapter("the adapter request failed".to_string()))?;
    let text = |i: u32| opened.get(i).as_string().unwrap_or_default();
    match text(0).as_str() {
        "ok" => {}
        "webgpu" => return Err(RequestError::NoWebGpu),
        "device" => return Err(RequestError::DeviceRefused(text(1))),
        _ => return Err(RequestError::NoAdapter(text(1))),
    }
    let adapter = Adapter {
        name: text(2),
        cpu: opened.get(3).is_truthy(),
        subgroups: None,
        // WebGPU's timestamps count nanoseconds.
        timestamps: opened.get(4).is_truthy().then_some(1.0),
        limits: Limits::WEBGPU_DEFAULTS,
    };
    let device = opened.get(1);
    let reason: Rc<RefCell<Option<String>>> = Rc::default();
    let noted = reason.clone();
    // Owned by JS from here: freed once called, or with the promise.
    let note = Closure::once_into_js(move |said: JsValue| *noted.borrow_mut() = said.as_string());
    lost(&device, &note);
    Ok((
        Device {
            device,
            lost: reason,
        },
        adapter,
    ))
}

impl Device {
    pub fn buffer(&self, size: u64, usage: Usage, label: Option<&str>) -> Buffer {
        Buffer(buffer(
            &self.device,
            number(size),
            usage_bits(usage),
            label.unwrap_or_default(),
        ))
    }

    /// Compiles `text`: the pipeline can be launched at once (the browser
    /// finishes compiling it before the launch runs).
    pub fn compile(&self, text: &str) -> Pipeline {
        Pipeline(compile(&self.device, text))
    }

    pub fn encoder(&self) -> Encoder {
        Encoder(encoder(&self.device))
    }

    pub fn query_set(&self, count: u32) -> QuerySet {
        QuerySet(query_set(&self.device, count))
    }

    /// Writes `bytes` at the start of `buffer` before the next submit's
    /// commands run.
    pub fn write(&self, buffer: &Buffer, bytes: &[u8]) {
        write(&self.device, &buffer.0, bytes);
    }

    pub fn submit(&self, encoder: Encoder) {
        submit(&self.device, &encoder.0);
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
        let bound = Array::new();
        for buffer in buffers {
            bound.push(&buffer.0);
        }
        let (arena, offset, size) = uniforms;
        let (set, first) = match stamps {
            Some((set, first)) => (&set.0, first),
            None => (&JsValue::UNDEFINED, 0),
        };
        dispatch(
            &self.device,
            &encoder.0,
            &pipeline.0,
            &arena.0,
            number(offset),
            number(size),
            &bound,
            x,
            y,
            set,
            first,
        );
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
        copy(
            &encoder.0,
            &from.0.0,
            number(from.1),
            &to.0.0,
            number(to.1),
            number(bytes),
        );
    }

    /// Records the resolve of `set`'s first `used` timestamps into `buffer`.
    pub fn resolve(&self, encoder: &mut Encoder, set: &QuerySet, used: u32, buffer: &Buffer) {
        resolve(&encoder.0, &set.0, used, &buffer.0);
    }

    /// Opens the scopes GPU work runs in: out of memory, validation,
    /// internal; `OpenScope::close` pops them in reverse.
    pub fn open_scope(&self) -> OpenScope {
        push(&self.device);
        OpenScope(self.device.clone())
    }

    /// Maps `staging` (after the submit that filled it) and copies its
    /// first `bytes` out as words, then unmaps it.
    pub fn map_read(&self, staging: &Buffer, bytes: u64) -> PendingRead {
        let staging = staging.clone();
        let mapped = JsFuture::from(map_read(&staging.0));
        Box::pin(async move {
            let range = mapped
                .await
                .map_err(|_| "mapping the result failed".to_string())?;
            if let Some(message) = range.as_string() {
                return Err(message);
            }
            // The words are copied into wasm memory once. The room is asked
            // for fallibly: a page whose wasm memory cannot grow by a read's
            // size gets that read's failure, not an abort of the module.
            let length = bytes / 4;
            let mut words = Vec::new();
            let room = usize::try_from(length)
                .ok()
                .filter(|&n| words.try_reserve_exact(n).is_ok());
            let Some(length) = room else {
                unmap(&staging.0);
                return Err(format!(
                    "wasm memory has no room for the {bytes} bytes read"
                ));
            };
            words.resize(length, 0);
            // `length` fits in u32: it came from a `usize` of wasm32.
            Uint32Array::new_with_byte_offset_and_length(&range, 0, length as u32)
                .copy_to(&mut words);
            unmap(&staging.0);
            Ok(words)
        })
    }

    /// Why the device was lost, once its `lost` promise has said.
    pub fn lost(&self) -> Option<String> {
        self.lost.borrow().clone()
    }

    pub fn uncaptured_errors(&self) -> u64 {
        // A count of events, a whole number far below 2^53.
        uncaptured(&self.device) as u64
    }

    pub fn destroy(&self) {
        destroy(&self.device);
    }
}

impl Buffer {
    pub fn destroy(&self) {
        destroy(&self.0);
    }
}

/// The scopes around some GPU work, open until `close`.
pub struct OpenScope(JsValue);

impl OpenScope {
    /// The first error the scopes caught, once they resolve. The scopes are
    /// popped now; the promise stores their result when the GPU answers,
    /// whether or not anything polls the future.
    pub fn close(self) -> Pin<Box<dyn Future<Output = Option<GpuError>>>> {
        let caught = JsFuture::from(pop(&self.0));
        Box::pin(async move {
            let caught = caught.await.ok().filter(|c| !c.is_null())?;
            let caught = Array::from(&caught);
            let kind = match caught.get(0).as_f64() {
                Some(0.0) => GpuErrorKind::OutOfMemory,
                Some(1.0) => GpuErrorKind::Validation,
                _ => GpuErrorKind::Internal,
            };
            Some(GpuError {
                kind,
                message: caught.get(1).as_string().unwrap_or_default(),
            })
        })
    }
}
