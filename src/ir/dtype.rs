//! What a tensor's elements are, and values as they lie in memory.
//!
//! Every dtype is one 32-bit word per element, on the GPU and on the host
//! alike: a `bool` is the word 0 or 1, an `int32` its two's complement
//! bits, a `float32` its IEEE bits. So moving values (uploads, reads, views,
//! copies, cats) never looks at them, and an integer never passes through a
//! float: the words are interpreted only by the op that computes with them.

use std::rc::Rc;

/// An element type, as TF.js names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    Float32,
    Int32,
    Bool,
}

impl DType {
    pub const ALL: [DType; 3] = [DType::Float32, DType::Int32, DType::Bool];

    pub fn name(self) -> &'static str {
        match self {
            DType::Float32 => "float32",
            DType::Int32 => "int32",
            DType::Bool => "bool",
        }
    }

    /// The dtype TF.js spells `name`.
    pub fn parse(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// TF.js's `upcastType`: float32 wins, then int32; two bools stay bool.
    pub fn upcast(self, other: DType) -> DType {
        match (self, other) {
            (DType::Float32, _) | (_, DType::Float32) => DType::Float32,
            (DType::Int32, _) | (_, DType::Int32) => DType::Int32,
            _ => DType::Bool,
        }
    }

    /// The WGSL type a kernel computes this dtype in: a bool is an `i32` of
    /// 0 or 1 (WGSL's own `bool` cannot sit in a storage buffer).
    pub fn wgsl(self) -> &'static str {
        match self {
            DType::Float32 => "f32",
            DType::Int32 | DType::Bool => "i32",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A tensor's values, row-major, one word per element, with the dtype that
/// says how to read them. Cheap to clone: the words are shared. They are a
/// shared `Vec`, not a shared slice, so that words read back from the GPU
/// become a tensor's values, and those values the `Vec<f32>` a reader gets,
/// without a copy each: at 67 MB a copy into fresh memory costs as much as
/// the transfer itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Values {
    pub dtype: DType,
    pub words: Rc<Vec<u32>>,
}

impl Values {
    pub fn new(dtype: DType, words: Vec<u32>) -> Values {
        Values {
            dtype,
            words: Rc::new(words),
        }
    }

    pub fn float32(values: &[f32]) -> Values {
        Values::new(DType::Float32, values.iter().map(|v| v.to_bits()).collect())
    }

    pub fn int32(values: &[i32]) -> Values {
        Values::new(DType::Int32, values.iter().map(|&v| v as u32).collect())
    }

    pub fn bool(values: &[bool]) -> Values {
        Values::new(DType::Bool, values.iter().map(|&v| u32::from(v)).collect())
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The values as floats: exact for float32 and bool, and for int32
    /// within ±2^24 (TF.js's `dataSync` of an int tensor read as numbers
    /// is exact everywhere; read `to_i32` for that).
    pub fn to_f32(&self) -> Vec<f32> {
        match self.dtype {
            DType::Float32 => self.words.iter().map(|&w| f32::from_bits(w)).collect(),
            DType::Int32 | DType::Bool => self.words.iter().map(|&w| w as i32 as f32).collect(),
        }
    }

    /// `to_f32`, reusing the words' memory when they are float32 and held
    /// nowhere else (a value just read back from the GPU).
    pub fn into_f32(self) -> Vec<f32> {
        match (self.dtype, Rc::try_unwrap(self.words)) {
            (DType::Float32, Ok(words)) => bytemuck::cast_vec(words),
            (dtype, Ok(words)) => Values::new(dtype, words).to_f32(),
            (dtype, Err(words)) => Values { dtype, words }.to_f32(),
        }
    }

    /// The values as integers: exact for int32 and bool; a float truncated
    /// toward zero as `cast` does (saturating, NaN to 0).
    pub fn to_i32(&self) -> Vec<i32> {
        match self.dtype {
            DType::Float32 => self
                .words
                .iter()
                .map(|&w| f32::from_bits(w) as i32)
                .collect(),
            DType::Int32 | DType::Bool => self.words.iter().map(|&w| w as i32).collect(),
        }
    }

    /// Whether every value is finite (by its bits: an integer always is).
    pub fn all_finite(&self) -> bool {
        self.dtype != DType::Float32 || self.words.iter().all(|&w| !non_finite_bits(w))
    }

    /// The values as booleans: whether each is non-zero (a NaN is).
    pub fn to_bool(&self) -> Vec<bool> {
        match self.dtype {
            DType::Float32 => self.words.iter().map(|&w| w & 0x7fff_ffff != 0).collect(),
            DType::Int32 | DType::Bool => self.words.iter().map(|&w| w != 0).collect(),
        }
    }
}

/// Whether the float32 of bits `w` is NaN or infinite (its exponent all
/// ones): the test the numerics checks make, on the host as in WGSL.
pub fn non_finite_bits(w: u32) -> bool {
    w & 0x7f80_0000 == 0x7f80_0000
}
