//! The JS API: `Device` and `Tensor` classes over the Rust API, Promises for
//! reads, and JS errors carrying the same structure as the Rust ones.
//!
//! Malformed input from JS becomes a thrown `TypeError`/`RangeError`/`Error`
//! whose `op` names the method and whose message starts with it, never a
//! panic (a panic kills the module for the whole page). Policy (which
//! shapes fit, whether the device is alive, which operands may meet) stays
//! in the Rust API; this layer only turns JS values into its arguments and
//! its results into JS values.
//!
//! Which file owns what:
//! - `args.rs`: JS values to Rust arguments (shapes, integers, axes,
//!   numbers, options objects, tensor values), and how an error names what
//!   was passed.
//! - `registry.rs`: which JS objects are webfusion's (a brand per object)
//!   and what each holds; disposal; `tidy()` scopes; registering an op and
//!   wrapping its result.
//! - `device.rs`: the `Device` class.
//! - `tensor.rs`: the `Tensor` class and its op families; `conv.rs` its
//!   convolutions.
//! - `errors.rs`: JS errors built from the Rust error values, and the
//!   user's JS frame for reports.
//! - `autograd.rs`: `grad`, `grads`, `valueAndGrad`, `valueAndGrads` and
//!   `variableGrads`.
//! - `train.rs`: the optimizers (`train.sgd`, `momentum`, `adam`).
//! - here: start-up, `panicCount()` and `tidy()`.

use wasm_bindgen::prelude::*;

use crate::ErrorClass;

mod args;
mod autograd;
mod conv;
mod device;
mod errors;
mod registry;
mod tensor;
mod train;

#[wasm_bindgen(start)]
fn start() {
    crate::device::install_panic_hook();
}

/// A `Promise` settled by `future`: every async method's one way to make
/// one. The future is boxed so that `future_to_promise`'s machinery is one
/// body in the module, not a copy per method (five copies were 17 KB of
/// wasm); a promise is made once per call, never per element.
#[inline(never)]
fn promise(
    future: std::pin::Pin<Box<dyn std::future::Future<Output = Result<JsValue, JsValue>>>>,
) -> js_sys::Promise {
    wasm_bindgen_futures::future_to_promise(future)
}

/// How many panics the library's hook has seen in this page: 0, always. A
/// test suite asserts it at the end.
#[wasm_bindgen(js_name = panicCount)]
pub fn panic_count() -> f64 {
    crate::panics_observed() as f64
}

/// The types wasm-bindgen cannot write from the Rust signatures: values
/// nested to any depth, `tidy`'s generic signature, the stats, and the
/// errors a failed read or sync rejects with (`Error`s whose fields these
/// describe). The tests compile typed code against them with `tsc --strict`.
#[wasm_bindgen(typescript_custom_section)]
const TYPES: &'static str = r#"
/** A number, or arrays of them nested to any depth (`[[1, 2], [3, 4]]`). */
export type NestedNumbers = number | NestedNumbers[];

/** Booleans nested to any depth, the values of a `bool` tensor. */
export type NestedBooleans = boolean | NestedBooleans[];

/** A tensor's element type, as TF.js names them. */
export type DataType = 'float32' | 'int32' | 'bool';

/** What `data()` resolves to for each dtype. */
export type TypedValues = Float32Array | Int32Array | Uint8Array;

/**
 * Runs `fn` and disposes every tensor it created, except those it returns
 * (a tensor, or tensors anywhere inside the arrays, plain objects, `Map`s and
 * `Set`s it returns). `fn` must not be async.
 */
export function tidy<T>(fn: () => T): T;

/**
 * TF.js's `grads(f)`: a function of `(xs, dy?)` that runs `f(...xs)` and
 * returns the gradient with respect to each of `xs` (`f` returns a scalar,
 * or, with `dy`, a tensor of `dy`'s shape). Deferred and fused like any work.
 * As in TF.js, the tensors `f` makes are disposed afterwards, all but its result.
 */
export function grads(f: (...xs: Tensor[]) => Tensor): (xs: Tensor[], dy?: Tensor) => Tensor[];

/** `grads`, with `f`'s value: `(xs, dy?) => ({ value, grads })`. */
export function valueAndGrads(f: (...xs: Tensor[]) => Tensor): (xs: Tensor[], dy?: Tensor) => { value: Tensor; grads: Tensor[] };

/** `grads` of a function of one tensor: `(x, dy?) => Tensor`. */
export function grad(f: (x: Tensor) => Tensor): (x: Tensor, dy?: Tensor) => Tensor;

/** `grad`, with `f`'s value: `(x, dy?) => ({ value, grad })`. */
export function valueAndGrad(f: (x: Tensor) => Tensor): (x: Tensor, dy?: Tensor) => { value: Tensor; grad: Tensor };

/**
 * TF.js's `variableGrads`: the gradients of `f()` (a scalar) with respect to
 * the trainable variables of `varList` (by default every trainable float32
 * variable of every device not lost) that it depends on, keyed by variable
 * name. A variable of another device than the value's is one it does not
 * depend on.
 */
export function variableGrads(f: () => Tensor, varList?: Variable[]): { value: Tensor; grads: Record<string, Tensor> };

/** A tensor a program replaces between steps: `device.variable(initial)`. */
export interface Variable extends Tensor {
    /** Unique among its device's variables. */
    readonly name: string;
    readonly trainable: boolean;
    /** Its value becomes a copy of `value` (same shape, same device). */
    assign(value: Tensor): void;
}

/**
 * An optimizer. A step fails whole: when any op of its forward pass,
 * backward pass or update fails, no variable and no optimizer state
 * changes, and the cost rejects with the failure's chain.
 */
export interface Optimizer {
    /** One step on the gradients of `f()`; the cost when `returnCost`. */
    minimize(f: () => Tensor, returnCost: true | { returnCost: true; varList?: Variable[] }, varList?: Variable[]): Tensor;
    minimize(f: () => Tensor, returnCost?: false | { returnCost?: false; varList?: Variable[] }, varList?: Variable[]): null;
    /** One step on given gradients, keyed by variable name. */
    applyGradients(grads: Record<string, Tensor> | { name: string; tensor: Tensor }[]): void;
    /** Settable between steps. */
    learningRate: number;
    /** Sets `learningRate` (TF.js's name for it). */
    setLearningRate(learningRate: number): void;
    /**
     * With `true`, each step turns its device's `checkNumerics` on (and it
     * stays on): a step that would write a NaN or an infinity changes
     * nothing, and its cost rejects naming the op that made the first one.
     */
    skipNonFinite: boolean;
    /** `'sgd'`, `'momentum'` or `'adam'`. */
    readonly name: string;
    /** Releases its state (moments); using it afterwards throws. */
    dispose(): void;
}

/** TF.js's optimizers. */
export class train {
    private constructor();
    static sgd(learningRate: number): Optimizer;
    static momentum(learningRate: number, momentum: number, useNesterov?: boolean): Optimizer;
    static adam(learningRate?: number, beta1?: number, beta2?: number, epsilon?: number): Optimizer;
}

/** `device.stats()`: the counters of a device's work so far. */
export interface Stats {
    opsRegistered: number;
    flushes: number;
    kernelsLaunched: number;
    fusedOps: number;
    buffersAllocated: number;
    bytesAllocated: number;
    bytesInUse: number;
    /** The most `bytesInUse` has been (a `profile` measures its own). */
    peakBytesInUse: number;
    /** Bytes kernels wrote (uploads not counted). */
    bytesWritten: number;
    /** Ops run in wasm instead of a kernel: small elementwise work on values
     * the page gave (`Device.request({ hostMaxElements })`). */
    hostOps: number;
    /** Every GPU buffer created: storage, uniforms, read staging. */
    gpuBuffersCreated: number;
    /** Kernel texts generated: a loop's later steps reuse its first's. */
    kernelsGenerated: number;
    pipelinesCompiled: number;
    pipelineCacheHits: number;
    failuresHeld: number;
    /** Held tensors kept as expressions: ops recorded, bytes never written. */
    expressionsHeld: number;
    /** GPU errors no error scope caught: 0, unless `debug.errorScopes` is off (then what their submissions wrote is wrong). */
    uncapturedErrors: number;
    /** Tensor objects of this device JS holds undisposed (TF.js's numTensors). */
    tensorsHeld: number;
}

/** A tensor a profiled kernel reads or writes. */
export interface ProfiledTensor {
    id: number;
    shape: number[];
    bytes: number;
}

/** One kernel a profile saw: the ops fused into it, what it read and wrote, its WGSL. */
export interface ProfiledKernel {
    /** Its ops joined by `+` (`matmul+add+relu`). */
    name: string;
    ops: string[];
    inputs: ProfiledTensor[];
    outputs: ProfiledTensor[];
    /** One text per launch (a reduction split in two passes has two). */
    wgsl: string[];
    /** The GPU's time running it, from its timestamps; undefined where the adapter writes none. */
    kernelMs: number | undefined;
}

/** What `device.profile(fn)` resolves to (TF.js's `tf.profile`). */
export interface Profile {
    kernels: ProfiledKernel[];
    kernelNames: string[];
    /** The GPU's time running every kernel; undefined where the adapter writes no timestamps. */
    kernelMs: number | undefined;
    /** `bytesInUse` at the end less at the start. */
    newBytes: number;
    /** The most bytes tensors held at once while it ran. */
    peakBytes: number;
    /** What `fn` returned (resolved, if it returned a promise). */
    result: unknown;
}

/** What failed first. */
export interface FailureRoot {
    kind: 'allocation' | 'index-range' | 'index' | 'non-finite' | 'validation' | 'out-of-memory' | 'internal' | 'injected' | 'device-lost' | 'warmup';
    /** The op (or fused ops, `zeros+add`) whose work failed. */
    op: string;
    message: string;
}

/** One op that did not run because an input carried the failure. */
export interface SkippedOp {
    op: string;
    /** The input that carried it (`tensor #5`). */
    needed: string;
    produced: string[];
}

/** One failure a tensor carries, as a read reports it. */
export interface FailureReport {
    failureId: number;
    /** Ops skipped between the root and the tensor read. */
    depth: number;
    /** Tensors still carrying the failure. */
    carriers: number;
    /** Newest first. */
    chain: SkippedOp[];
    droppedSkips: number;
    root: FailureRoot;
    /** The line that registered the root op, with `debug.captureStacks`. */
    registeredAt: string | null;
}

/**
 * What a read of a tensor whose bytes were never written rejects with: the
 * first failure's fields, every failure in `failures`. An `Error`; test it
 * with `e instanceof TensorError`.
 */
export class TensorError extends Error {
    private constructor();
    name: 'TensorError';
    /** The id of the tensor read. */
    tensor: number;
    failures: FailureReport[];
    /** The line that asked for the read, with `debug.captureStacks`. */
    askedAt: string | null;
    /** An `Error` for the first failure's root, so consoles print the chain. */
    cause?: Error;
}
/** The first failure's fields. */
export interface TensorError extends FailureReport {}

/** What `sync()` rejects with: each failure since the last sync, once. */
export class ExecutionError extends Error {
    private constructor();
    name: 'ExecutionError';
    failures: { failureId: number; root: FailureRoot; tainted: number }[];
    /** Failures past the first 256, counted only. */
    omitted: number;
}
"#;

/// `tidy(fn)`: runs `fn` and disposes every tensor it created, except those
/// it returns (a tensor, or tensors anywhere inside the arrays, plain
/// objects, `Map`s and `Set`s it returns). Tensors nobody holds can then
/// fuse: a JS object keeps its tensor alive until it is disposed or
/// collected, and collection comes late.
#[wasm_bindgen(skip_typescript)]
pub fn tidy(#[wasm_bindgen(js_name = fn)] f: JsValue) -> Result<JsValue, JsValue> {
    let op = "tidy";
    let f = args::function(op, "fn", &f)?;
    registry::open_scope();
    let result = f.call0(&JsValue::UNDEFINED);
    // An async fn's tensors are made after tidy returns, outside its scope:
    // refused, rather than leaving them to the enclosing scope unseen.
    let promise = result
        .as_ref()
        .is_ok_and(|v| v.is_instance_of::<js_sys::Promise>());
    let kept = match &result {
        Ok(value) if !promise => registry::tensors_in(value),
        _ => Default::default(),
    };
    registry::close_scope(&kept);
    if promise {
        return Err(errors::op_error(
            op,
            ErrorClass::Type,
            "fn must not be async (it returned a Promise)",
        ));
    }
    result
}
