//! Which JS objects are webfusion's, and what each one holds.
//!
//! An object JS gets (a `Tensor` or a `Device`) holds a key, and the key
//! names its entry in this table while it is live. Each object gets its own
//! key, even when two objects stand for one tensor (`t.to(sameDevice)`), so
//! disposing one leaves the other working. Keys come from one counter for
//! both classes and are never reused, so a key names one object's entry or
//! nothing, never another's.
//!
//! An argument is recognised by its brand: a private field (`#key`) this
//! module stamped on the object when it made it. Not by its class name (a
//! minifier renames it, and any class can be named `Tensor`), and not by a
//! public field (any object can have an `id`, and a spread `{...t}` copies
//! fields and symbols): a private field is invisible to reflection, never
//! copied, and only the class that declares it can add or read it. It lives
//! on the object, so it never keeps one alive. A `WeakMap` did the same job
//! at ten times the cost per object: every op made from JS paid it twice,
//! once to brand its result and once to check its `this`.

use std::cell::{Cell, RefCell};
use std::thread::LocalKey;

use js_sys::{Array, Map, Object, Reflect, Set, Symbol};
use rustc_hash::{FxHashMap, FxHashSet};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use crate::ir::Values;
use crate::tensor::with_site;
use crate::{Device, ErrorClass, RegistrationError, Tensor, TensorId, Variable};

use super::device::JsDevice;
use super::errors;
use super::tensor::JsTensor;

pub type Key = u64;

/// What every object JS gets holds: its key and, a tensor object's, the
/// tensor it stood for when made (the id a use after `dispose()` names:
/// the table forgets a disposed key at once). One type for both classes:
/// wasm-bindgen reads a method's `this` as the method's own class without
/// checking, and `guard_this` refuses the other class only for methods read
/// off the prototype after it ran, so one class's struct read as the
/// other's must still be valid, and a device's says it is no tensor.
#[derive(Clone, Copy)]
pub struct Handle {
    pub key: Key,
    pub tensor: Option<TensorId>,
}

/// What an object (or a key) stands for.
pub enum Found {
    Tensor(Tensor),
    /// A tensor object whose tensor was disposed (by `dispose()`, `free()`,
    /// `Symbol.dispose` or the `tidy()` that made it), with the id it stood
    /// for. Only `find` tells it: a disposed key names nothing in the
    /// table, and the id is the object's.
    Disposed(TensorId),
    Device(Device),
    /// Not an object this module made; from `held`, also the key of a
    /// disposed tensor object (the table forgot it).
    Foreign,
}

/// A tensor object's entry: what it stands for, and the values its last
/// `data()` or `array()` brought back, with the id of the tensor they are
/// of (a variable's changes at `assign`). Those values are what
/// `dataSync()` answers for bytes on the GPU, as TF.js's WebGPU backend
/// answers from the values its last read kept. They are kept here, not as
/// the JS array the read gave: that array is the caller's to write into,
/// and a second JS copy would cost every read a copy it may never use.
/// Boxed: an entry never read grows by a pointer, not by the values'
/// length, capacity and id.
struct Entry {
    value: Value,
    read: Option<Box<(TensorId, Values)>>,
}

impl From<Value> for Entry {
    fn from(value: Value) -> Entry {
        Entry { value, read: None }
    }
}

/// What a tensor object stands for: a tensor, or a variable (whose tensor
/// is its current value).
enum Value {
    Tensor(Tensor),
    Variable(Variable),
}

impl Value {
    fn tensor(&self) -> Tensor {
        match self {
            Value::Tensor(t) => t.clone(),
            Value::Variable(v) => v.value(),
        }
    }
}

#[derive(Default)]
struct Table {
    next: Key,
    /// What each tensor object not disposed stands for. A disposed one
    /// leaves the table at once: its object keeps the id its error names
    /// (`JsTensor::id`, and the brand's). Kept until the collector took
    /// them, disposed entries outnumbered the live ones: a loop of small
    /// ops disposes a thousand objects a step, and the map spent its time
    /// on their cache misses and rehashing (W6 in Chromium: 1.25 -> 0.95
    /// ms a step once they left).
    tensors: FxHashMap<Key, Entry>,
    devices: FxHashMap<Key, Device>,
    /// The JS object of each variable not yet disposed, by the variable's
    /// id: kept until disposed, as TF.js keeps its variables
    /// (`trainableVariables` returns these very objects). Which variables
    /// exist, and in what order, is the one registry's (`train::alive`):
    /// this only maps them to their objects.
    variables: FxHashMap<u64, (Key, JsValue)>,
    /// The open `tidy()` scopes, innermost last: the tensor keys each made.
    scopes: Vec<Vec<Key>>,
}

impl Table {
    fn key(&mut self) -> Key {
        self.next += 1;
        self.next
    }
}

thread_local! {
    static TABLE: RefCell<Table> = RefCell::default();
    static TENSOR_CLASS_READY: Cell<bool> = const { Cell::new(false) };
    static DEVICE_CLASS_READY: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` on the table. `f` never calls into JS nor drops a `Tensor`, so
/// the borrow cannot be re-entered (a JS getter or finalizer could call back
/// in) and a `Tensor`'s release never runs inside it.
fn table<R>(f: impl FnOnce(&mut Table) -> R) -> R {
    TABLE.with(|t| f(&mut t.borrow_mut()))
}

/// The object JS gets for a new tensor: branded, and counted in the
/// innermost `tidy()` scope.
pub fn wrap_tensor(tensor: Tensor) -> JsValue {
    let id = tensor.id();
    let key = table(|t| {
        let key = t.key();
        t.tensors.insert(key, Value::Tensor(tensor).into());
        if let Some(scope) = t.scopes.last_mut() {
            scope.push(key);
        }
        key
    });
    brand(
        JsValue::from(JsTensor::new(key, id)),
        (key, Some(id)),
        ("Tensor", &TENSOR_CLASS_READY),
        "dispose",
    )
}

/// The object JS gets for a new variable: a `Tensor` object standing for
/// the variable's current value. Not counted in any `tidy()` scope (TF.js
/// leaves variables to `dispose()`), and kept until disposed.
pub fn wrap_variable(variable: Variable) -> JsValue {
    let id = variable.value().id();
    let variable_id = variable.id();
    let key = table(|t| {
        let key = t.key();
        t.tensors.insert(key, Value::Variable(variable).into());
        key
    });
    let object = brand(
        JsValue::from(JsTensor::new(key, id)),
        (key, Some(id)),
        ("Tensor", &TENSOR_CLASS_READY),
        "dispose",
    );
    table(|t| t.variables.insert(variable_id, (key, object.clone())));
    object
}

/// The variable the object with `key` stands for, if it is one and not
/// disposed.
pub fn variable(key: Key) -> Option<Variable> {
    table(|t| match &t.tensors.get(&key)?.value {
        Value::Variable(v) => Some(v.clone()),
        Value::Tensor(_) => None,
    })
}

/// The variable `value` stands for, if it is a variable's object and not
/// disposed.
pub fn find_variable(value: &JsValue) -> Option<Variable> {
    variable(brand_of(value)? as Key)
}

/// Disposes the tensor objects among `keys`, leaving variables alone.
pub fn dispose_tensors(keys: &FxHashSet<Key>) {
    for &key in keys {
        if variable(key).is_none() {
            dispose(key);
        }
    }
}

/// The variables not disposed, oldest first, with their objects.
pub fn variables() -> Vec<(JsValue, Variable)> {
    let alive = crate::train::alive();
    table(|t| {
        alive
            .into_iter()
            .filter_map(|v| {
                let (key, object) = t.variables.get(&v.id())?;
                t.tensors.get(key)?;
                Some((object.clone(), v))
            })
            .collect()
    })
}

/// The object JS gets for a new device.
pub fn wrap_device(device: Device) -> JsValue {
    let key = table(|t| {
        let key = t.key();
        t.devices.insert(key, device);
        key
    });
    brand(
        JsValue::from(JsDevice::new(key)),
        (key, None),
        ("Device", &DEVICE_CLASS_READY),
        "destroy",
    )
}

/// Brands `object` with its key, its class and (a tensor's) its id; at the
/// class's first object, guards its methods and redirects its `free()`.
/// Guarded first, so that the redirected `free()` and `Symbol.dispose`
/// are the guarded release, refusing the other class's object as `this`
/// like every other method.
fn brand(
    object: JsValue,
    (key, id): (Key, Option<TensorId>),
    (class, class_ready): (&str, &'static LocalKey<Cell<bool>>),
    release: &str,
) -> JsValue {
    stamp(&object, key as f64, id.map(|id| id.0 as f64));
    if !class_ready.with(|ready| ready.replace(true)) {
        if let Ok(proto) = Reflect::get_prototype_of(&object) {
            guard_this(&proto, class);
        }
        redirect_free(&object, release);
    }
    object
}

#[wasm_bindgen(inline_js = r#"
// The brand (see the module's docs). Extending a function that returns its
// argument makes `super(o)` return `o` itself, so the constructor adds the
// private field to an object made elsewhere (wasm-bindgen's `__wrap`).
class Brand extends function (o) { return o; } {
  #key;
  #kind;
  #id;
  // A tensor object carries its tensor's id; a device object has none.
  constructor(o, key, id) { super(o); this.#key = key; this.#kind = id === undefined ? 'Device' : 'Tensor'; this.#id = id; }
  static is(o) { return o !== null && typeof o === 'object' && #key in o; }
  static of(o) { return Brand.is(o) ? o.#key : undefined; }
  static kind(o) { return Brand.is(o) ? o.#kind : undefined; }
  static id(o) { return Brand.is(o) ? o.#id : undefined; }
}

export function stamp(o, key, id) { new Brand(o, key, id); }

export function brand_of(o) { return Brand.of(o); }

export function brand_id(o) { return Brand.id(o); }

// The guarded method running now: the library's entry point, below which
// every frame of the stack is the user's.
let active = null;

// The user's frames of the current stack: those below the library's entry
// point. By function, not by file name: in a bundle the library and the
// user's code share a file. `undefined` where the engine cannot cut a stack
// at a function, or outside a guarded method.
export function user_stack() {
  if (active === null || typeof Error.captureStackTrace !== 'function') return undefined;
  const holder = new Error();
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 100;
  Error.captureStackTrace(holder, active);
  Error.stackTraceLimit = limit;
  return holder.stack;
}

export function guard_this(proto, className) {
  const describe = (v) => (v === null ? 'null' : typeof v === 'object' ? 'an object' : String(v));
  for (const name of Object.getOwnPropertyNames(proto)) {
    if (name === 'constructor') continue;
    const d = Object.getOwnPropertyDescriptor(proto, name);
    // TF.js's reads are async functions: their refusals reject, and so do
    // these, a wrong `this`'s included.
    const rejects = name === 'data' || name === 'array';
    const check = (self) => {
      const how = self !== null && typeof self === 'object'
        ? `called on an object that is not a webfusion ${className}`
        : `called on ${describe(self)}, not a webfusion ${className}: call it on one (a method taken off its object loses it)`;
      const e = new TypeError(`${name}: ${how}`);
      e.op = name;
      if (rejects) return Promise.reject(e);
      throw e;
    };
    if (typeof d.value === 'function') {
      const f = d.value;
      // Fixed arity (no method takes more than five arguments: `conv2d`
      // and `conv1d` take five): a rest parameter and `apply` would cost
      // every op registered from JS.
      const guarded = { [name](a, b, c, e, h) { if (Brand.kind(this) !== className) return check(this); active = guarded; return f.call(this, a, b, c, e, h); } }[name];
      d.value = guarded;
    } else if (d.get) {
      const g = d.get;
      const guarded = function () { if (Brand.kind(this) !== className) check(this); active = guarded; return g.call(this); };
      d.get = guarded;
    } else {
      continue;
    }
    Object.defineProperty(proto, name, d);
  }
}
"#)]
extern "C" {
    /// Makes every method and getter of the class check its `this` first.
    ///
    /// wasm-bindgen's generated method reads `this.__wbg_ptr` before any Rust
    /// runs: a method taken off its object (`const f = t.add; f(x)`) or
    /// called on a foreign object fails inside the glue ("reading
    /// '__wbg_ptr'", "null pointer passed to rust") with nothing naming the
    /// op. Checked against the brand, its class included, it throws a
    /// `TypeError` with `op` instead (`data()` and `array()` reject with
    /// it, as every refusal of theirs does); and no Rust method reads one
    /// class's struct from the other's object. On the prototype, once, at
    /// the class's first object, before `redirect_free`.
    fn guard_this(proto: &JsValue, class_name: &str);

    /// Brands `object`, made by this module, with its table key and, a
    /// tensor object, the id of the tensor it stands for (its class is
    /// `Tensor` with an id, `Device` without: a string passed from here
    /// would be decoded at every object).
    fn stamp(object: &JsValue, key: f64, id: Option<f64>);

    /// The key `object` was branded with, if this module made it.
    fn brand_of(object: &JsValue) -> Option<f64>;

    /// The tensor id `object` was branded with, if it is a tensor object.
    fn brand_id(object: &JsValue) -> Option<f64>;

    /// The stack below the guarded method running now (`user_stack`).
    pub fn user_stack() -> Option<String>;
}

/// Makes the class's `free()` and `[Symbol.dispose]()` its own release
/// (`dispose` for a tensor, `destroy` for a device).
///
/// wasm-bindgen's `free()` frees the Rust struct at once and zeroes the
/// object's pointer, and its `Symbol.dispose` calls `free()`: the object
/// then fails every later use with "null pointer passed to rust", naming
/// neither the op nor the object. Redirected, the object stays valid, its
/// resource is released, and a later use throws the clear error (`was
/// disposed`, `was lost`). The Rust struct is still freed when the object is
/// collected: wasm-bindgen's `FinalizationRegistry` calls the wasm free
/// export directly, never the JS method. Done on the prototype, once, at
/// the class's first object: the class is not reachable from Rust before.
fn redirect_free(object: &JsValue, release: &str) {
    let Ok(proto) = Reflect::get_prototype_of(object) else {
        return;
    };
    let Ok(release) = Reflect::get(&proto, &release.into()) else {
        return;
    };
    let _ = Reflect::set(&proto, &"free".into(), &release);
    let dispose = JsValue::from(Symbol::dispose());
    if !dispose.is_undefined() {
        let _ = Reflect::set(&proto, &dispose, &release);
    }
}

/// What `value` stands for, by its brand.
pub fn find(value: &JsValue) -> Found {
    let Some(key) = brand_of(value) else {
        return Found::Foreign;
    };
    match held(key as Key) {
        Found::Foreign => {
            brand_id(value).map_or(Found::Foreign, |id| Found::Disposed(TensorId(id as u64)))
        }
        found => found,
    }
}

/// What `key` stands for. A disposed tensor object's key names nothing
/// (`Foreign`): the object itself has the id its error names.
pub fn held(key: Key) -> Found {
    table(|t| {
        if let Some(entry) = t.tensors.get(&key) {
            Found::Tensor(entry.value.tensor())
        } else if let Some(device) = t.devices.get(&key) {
            Found::Device(device.clone())
        } else {
            Found::Foreign
        }
    })
}

/// How many tensor objects of `device` JS holds undisposed: TF.js's
/// `numTensors`, the number a leak shows in.
pub fn tensors_held(device: &Device) -> usize {
    table(|t| {
        t.tensors
            .values()
            .filter(|entry| entry.value.tensor().device().same(device))
            .count()
    })
}

/// The error for using a disposed tensor in `op`.
pub fn disposed(op: &'static str, id: TensorId) -> JsValue {
    errors::op_error(op, ErrorClass::Other, format!("{id} was disposed"))
}

/// Releases the tensor of the object with `key`; the object stays, and
/// throws `was disposed` when used.
pub fn dispose(key: Key) {
    let released = table(|t| {
        t.variables.retain(|_, (k, _)| *k != key);
        t.tensors.remove(&key)
    });
    drop(released);
}

/// Keeps `values`, which a read of tensor `id` through the object with
/// `key` brought back, for `dataSync()`; unless the object was disposed
/// while the read was on its way.
pub fn keep_read(key: Key, id: TensorId, values: Values) {
    table(|t| {
        if let Some(entry) = t.tensors.get_mut(&key) {
            entry.read = Some(Box::new((id, values)));
        }
    });
}

/// The values a read through the object with `key` kept, if they are of
/// tensor `id` (the object's tensor now).
pub fn kept_read(key: Key, id: TensorId) -> Option<Values> {
    table(|t| {
        let (of, values) = t.tensors.get(&key)?.read.as_deref()?;
        (*of == id).then(|| values.clone())
    })
}

/// Forgets `key`: its object was collected.
pub fn forget(key: Key) {
    // The finalizer runs in a task of its own, never inside a call into
    // this module, so the table is free; should that ever change, the
    // entry is left rather than a panic raised (a panic kills the module).
    let released = TABLE.with(|t| {
        t.try_borrow_mut()
            .ok()
            .map(|mut t| (t.tensors.remove(&key), t.devices.remove(&key)))
    });
    drop(released);
}

/// Registers an op on `device` through `f` and hands JS its result. The
/// user's JS frame becomes the op's registration site only when the device
/// records sites: capturing a JS stack costs more than registering the op.
pub fn register(
    device: &Device,
    f: impl FnOnce() -> Result<Tensor, RegistrationError>,
) -> Result<JsValue, JsValue> {
    registered(with_site(errors::site_if_captured(device), f))
}

/// What JS gets for a registration's result. Not inlined into each of the
/// entry points that call `register` (see `with_site`).
#[inline(never)]
fn registered(result: Result<Tensor, RegistrationError>) -> Result<JsValue, JsValue> {
    result
        .map(wrap_tensor)
        .map_err(|e| errors::registration(&e))
}

/// `register` for an op that gives two tensors (`topk`, `moments`): JS
/// gets them as one object under `keys`.
pub fn register_pair(
    device: &Device,
    keys: [&str; 2],
    f: impl FnOnce() -> Result<(Tensor, Tensor), RegistrationError>,
) -> Result<JsValue, JsValue> {
    let (a, b) =
        with_site(errors::site_if_captured(device), f).map_err(|e| errors::registration(&e))?;
    let pair = js_sys::Object::new();
    for (key, tensor) in keys.into_iter().zip([a, b]) {
        js_sys::Reflect::set(&pair, &key.into(), &wrap_tensor(tensor))?;
    }
    Ok(pair.into())
}

/// Opens a `tidy()` scope: the tensors made until it closes belong to it.
pub fn open_scope() {
    table(|t| t.scopes.push(Vec::new()));
}

/// Closes the innermost scope, disposing what it made except `kept`, which
/// from then on belongs to the enclosing scope, if any.
pub fn close_scope(kept: &FxHashSet<Key>) {
    let released: Vec<Entry> = table(|t| {
        let made = t.scopes.pop().unwrap_or_default();
        let (keep, release): (Vec<Key>, Vec<Key>) =
            made.into_iter().partition(|key| kept.contains(key));
        if let Some(outer) = t.scopes.last_mut() {
            outer.extend(keep);
        }
        release
            .iter()
            .filter_map(|key| t.tensors.remove(key))
            .collect()
    });
    drop(released);
}

/// The keys of the tensor objects anywhere inside `value`: itself, or
/// inside arrays, plain objects, `Map`s (keys and values) and `Set`s, at any
/// depth. Each object is visited once, so cycles end. Class instances other
/// than these are not entered: their fields are theirs, and a typed array's
/// numbers hold no tensors. Iterative, so deep nesting cannot exhaust the
/// wasm stack.
pub fn tensors_in(value: &JsValue) -> FxHashSet<Key> {
    let mut found = FxHashSet::default();
    let seen = Set::new(&JsValue::UNDEFINED);
    let mut pending = vec![value.clone()];
    while let Some(item) = pending.pop() {
        if !item.is_object() || seen.has(&item) {
            continue;
        }
        seen.add(&item);
        if let Some(key) = brand_of(&item) {
            found.insert(key as Key);
        } else if Array::is_array(&item) {
            pending.extend(item.unchecked_ref::<Array>().iter());
        } else if let Some(map) = item.dyn_ref::<Map>() {
            map.for_each(&mut |value, key| {
                pending.push(key);
                pending.push(value);
            });
        } else if let Some(set) = item.dyn_ref::<Set>() {
            set.for_each(&mut |value, _, _| pending.push(value));
        } else if is_plain(&item) {
            pending.extend(Object::values(item.unchecked_ref()).iter());
        }
    }
    found
}

/// An object literal's kind: its prototype is `Object.prototype` or null.
fn is_plain(value: &JsValue) -> bool {
    match Reflect::get_prototype_of(value) {
        Ok(proto) => {
            proto.is_null() || Reflect::get_prototype_of(&proto).is_ok_and(|p| p.is_null())
        }
        Err(_) => false,
    }
}
