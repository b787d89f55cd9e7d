//! Shape arithmetic: broadcasting and sizes at registration, byte counts for
//! the limit checks at planning. Nothing here touches the GPU.

use crate::error::{ErrorClass, RegistrationError};

/// Elements in a tensor of `shape` (1 for a scalar, 0 when any dim is 0).
/// Saturates instead of overflowing: a shape may legally name more elements
/// than memory can hold (on wasm32 `usize` is 32 bits), and such a tensor
/// must fail as too big when it is allocated, never wrap or panic.
pub fn numel(shape: &[usize]) -> usize {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .unwrap_or(if shape.contains(&0) { 0 } else { usize::MAX })
}

/// Bytes of a float32 tensor of `shape`, computed in 64 bits (saturating),
/// for the allocation checks.
pub fn bytes(shape: &[usize]) -> u64 {
    if shape.contains(&0) {
        return 0;
    }
    shape
        .iter()
        .fold(4u64, |acc, &d| acc.saturating_mul(d as u64))
}

/// The coordinates of flat row-major `position` in `shape` (innermost
/// last; a dim of 0 is read as 1).
pub fn coords(position: usize, shape: &[usize]) -> Vec<usize> {
    let mut rem = position;
    let mut coords = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        coords[d] = rem % shape[d].max(1);
        rem /= shape[d].max(1);
    }
    coords
}

/// `[2,3]`, as errors and reports print shapes.
pub fn display(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(","))
}

/// The NumPy broadcast of two shapes: aligned at the right, each pair of dims
/// equal or one of them 1.
pub fn broadcast(
    op: &'static str,
    a: &[usize],
    b: &[usize],
) -> Result<Vec<usize>, RegistrationError> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for (i, slot) in out.iter_mut().enumerate() {
        let da = dim_from_right(a, rank - 1 - i);
        let db = dim_from_right(b, rank - 1 - i);
        *slot = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(RegistrationError::new(
                    op,
                    ErrorClass::Other,
                    format!(
                        "shapes {} and {} cannot be broadcast together",
                        display(a),
                        display(b)
                    ),
                ));
            }
        };
    }
    Ok(out)
}

/// Dim `i` counted from the right; dims missing on the left broadcast as 1.
fn dim_from_right(shape: &[usize], i: usize) -> usize {
    if i < shape.len() {
        shape[shape.len() - 1 - i]
    } else {
        1
    }
}

/// Refuses shapes whose byte count does not fit in 64 bits: such a shape
/// names no tensor any device could be asked for. (A shape too big for this
/// device is legal to register; it fails when it would be allocated.)
pub fn check_size(op: &'static str, shape: &[usize]) -> Result<(), RegistrationError> {
    let fits = shape.contains(&0)
        || shape
            .iter()
            .try_fold(4u64, |acc, &d| acc.checked_mul(d as u64))
            .is_some();
    if fits {
        Ok(())
    } else {
        Err(RegistrationError::new(
            op,
            ErrorClass::Range,
            format!(
                "shape {} has more elements than any device can hold",
                display(shape)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_aligns_shapes_at_the_right() {
        assert_eq!(
            broadcast("add", &[2, 1, 3], &[4, 1]).unwrap(),
            vec![2, 4, 3]
        );
        assert_eq!(broadcast("add", &[], &[5]).unwrap(), vec![5]);
    }

    #[test]
    fn incompatible_shapes_name_both_operands_shapes() {
        let err = broadcast("add", &[2, 3], &[4]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "add: shapes [2,3] and [4] cannot be broadcast together"
        );
    }
}
