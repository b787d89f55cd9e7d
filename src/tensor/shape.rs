//! Shape arithmetic done at registration: nothing here touches the GPU.

use crate::error::{ErrorClass, RegistrationError};

/// Elements in a tensor of `shape` (1 for a scalar, 0 when any dim is 0).
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
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

/// The element count of `shape`, refusing shapes whose count overflows (a
/// shape like `[2**40, 2**40]` is legal to ask for; it must fail as too big,
/// not wrap around).
pub fn checked_numel(op: &'static str, shape: &[usize]) -> Result<usize, RegistrationError> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|n| n.checked_mul(4).is_some())
        .ok_or_else(|| {
            RegistrationError::new(
                op,
                ErrorClass::Range,
                format!(
                    "shape {} has more elements than memory can address",
                    display(shape)
                ),
            )
        })
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
