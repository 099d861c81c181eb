//! Typed elements: a dataset's elements are tuples (or user structs) of tensors, kept in the
//! pipeline as a flat list of components.
use ferroflow_tensor::Tensor;

use crate::{DataError, Result};

/// A value a dataset can hold: it flattens into tensors (its components) and back.
/// Implemented for `Tensor`, tuples of up to four, and `Vec<Tensor>` (any number, as the
/// last or only part); a struct implements it by listing its tensors in a fixed order.
pub trait Structure: Sized + Send + 'static {
    /// How many components, when fixed by the type (`None` for `Vec<Tensor>`).
    const ARITY: Option<usize>;
    /// The components, in order.
    fn into_components(self, out: &mut Vec<Tensor>);
    /// Rebuilds the value from components taken from the front of `c`.
    fn from_components(c: &mut std::vec::IntoIter<Tensor>) -> Result<Self>;

    /// The components of `self` as a vector.
    fn flatten(self) -> Vec<Tensor> {
        let mut out = Vec::with_capacity(Self::ARITY.unwrap_or(4));
        self.into_components(&mut out);
        out
    }

    /// The value made of exactly `c`.
    fn unflatten(c: Vec<Tensor>) -> Result<Self> {
        let n = c.len();
        if let Some(a) = Self::ARITY {
            if a != n {
                return Err(DataError::Invalid(format!(
                    "an element of {n} components cannot be read as {} (which has {a})",
                    std::any::type_name::<Self>()
                )));
            }
        }
        let mut it = c.into_iter();
        Self::from_components(&mut it)
    }
}

impl Structure for Tensor {
    const ARITY: Option<usize> = Some(1);
    fn into_components(self, out: &mut Vec<Tensor>) {
        out.push(self)
    }
    fn from_components(c: &mut std::vec::IntoIter<Tensor>) -> Result<Self> {
        c.next().ok_or_else(|| DataError::Invalid("an element has fewer components than its type".into()))
    }
}

impl Structure for Vec<Tensor> {
    const ARITY: Option<usize> = None;
    fn into_components(self, out: &mut Vec<Tensor>) {
        out.extend(self)
    }
    fn from_components(c: &mut std::vec::IntoIter<Tensor>) -> Result<Self> {
        Ok(c.collect())
    }
}

macro_rules! tuple_structure {
    ($($t:ident),+) => {
        impl<$($t: Structure),+> Structure for ($($t,)+) {
            const ARITY: Option<usize> = {
                let mut n = Some(0usize);
                $(n = match (n, $t::ARITY) { (Some(a), Some(b)) => Some(a + b), _ => None };)+
                n
            };
            #[allow(non_snake_case)]
            fn into_components(self, out: &mut Vec<Tensor>) {
                let ($($t,)+) = self;
                $($t.into_components(out);)+
            }
            fn from_components(c: &mut std::vec::IntoIter<Tensor>) -> Result<Self> {
                Ok(($($t::from_components(c)?,)+))
            }
        }
    };
}
tuple_structure!(A);
tuple_structure!(A, B);
tuple_structure!(A, B, C);
tuple_structure!(A, B, C, D);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuples_flatten_and_rebuild() {
        let v = (Tensor::scalar(1i32), (Tensor::scalar(2f32), Tensor::scalar(3i64)));
        let c = v.flatten();
        assert_eq!(c.len(), 3);
        let (a, (b, d)) = <(Tensor, (Tensor, Tensor))>::unflatten(c).unwrap();
        assert_eq!(a.scalar_value::<i32>().unwrap(), 1);
        assert_eq!(b.scalar_value::<f32>().unwrap(), 2.0);
        assert_eq!(d.scalar_value::<i64>().unwrap(), 3);
        let err = <(Tensor, Tensor)>::unflatten(vec![Tensor::scalar(1i32)]).unwrap_err();
        assert!(err.to_string().contains("1 components"), "{err}");
    }
}
