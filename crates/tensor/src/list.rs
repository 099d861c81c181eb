//! `TensorList`: the value of TensorFlow's list `variant` (`TensorListReserve`,
//! `TensorListFromTensor`, ...), which TF2 `while_loop`s (Keras's recurrent layers) use to
//! read their inputs step by step and collect their outputs.
use crate::{DType, Tensor};

/// A list of tensors of one dtype whose shapes agree with a (partially known) element shape.
/// Entries reserved but not yet set are `None` (TensorFlow's uninitialized tensors): reads
/// of them give zeros of the element shape.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorList {
    /// The dtype every element has.
    pub element_dtype: DType,
    /// The elements' shape: `None` when even its rank is unknown, `-1` for an unknown size.
    pub element_shape: Option<Vec<i64>>,
    /// The elements.
    pub elements: Vec<Option<Tensor>>,
}

impl TensorList {
    /// Whether concrete dims agree with the element shape.
    pub fn shape_accepts(&self, dims: &[usize]) -> bool {
        match &self.element_shape {
            None => true,
            Some(s) => s.len() == dims.len() && s.iter().zip(dims).all(|(&a, &b)| a < 0 || a as usize == b),
        }
    }

    /// The element shape merged with another partial shape (`None`: unknown rank), or `None`
    /// with a reason when they disagree.
    pub fn merged_shape(&self, other: Option<&[i64]>) -> Result<Option<Vec<i64>>, String> {
        merge_shapes(self.element_shape.as_deref(), other)
    }
}

/// Two partial shapes merged (`-1` is an unknown size, `None` an unknown rank).
pub fn merge_shapes(a: Option<&[i64]>, b: Option<&[i64]>) -> Result<Option<Vec<i64>>, String> {
    match (a, b) {
        (None, x) | (x, None) => Ok(x.map(<[i64]>::to_vec)),
        (Some(a), Some(b)) => {
            if a.len() != b.len() {
                return Err(format!("element shapes {a:?} and {b:?} have different ranks"));
            }
            a.iter()
                .zip(b)
                .map(|(&x, &y)| match (x, y) {
                    (x, y) if x < 0 => Ok(y),
                    (x, y) if y < 0 || x == y => Ok(x),
                    _ => Err(format!("element shapes {a:?} and {b:?} are incompatible")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some)
        }
    }
}
