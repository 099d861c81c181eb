//! Graph-time shapes: unknown rank, unknown dimensions, broadcasting.
use std::fmt;

/// A possibly partial shape, as known while building or importing a graph.
///
/// `dims == None` is an unknown rank; a dimension of `None` is unknown size (TensorFlow's -1).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Shape {
    dims: Option<Vec<Option<usize>>>,
}

impl Shape {
    /// A shape of unknown rank.
    pub fn unknown() -> Shape {
        Shape { dims: None }
    }

    /// A shape of known rank with possibly unknown dimensions.
    pub fn new(dims: Vec<Option<usize>>) -> Shape {
        Shape { dims: Some(dims) }
    }

    /// A fully known shape.
    pub fn known(dims: &[usize]) -> Shape {
        Shape { dims: Some(dims.iter().map(|&d| Some(d)).collect()) }
    }

    /// A scalar (rank 0).
    pub fn scalar() -> Shape {
        Shape { dims: Some(Vec::new()) }
    }

    /// From TensorFlow's convention: `None` rank or `-1` dims are unknown.
    pub fn from_tf(dims: Option<&[i64]>) -> Shape {
        Shape { dims: dims.map(|d| d.iter().map(|&x| usize::try_from(x).ok()).collect()) }
    }

    /// The rank, if known.
    pub fn rank(&self) -> Option<usize> {
        self.dims.as_ref().map(Vec::len)
    }

    /// The dimensions, if the rank is known.
    pub fn dims(&self) -> Option<&[Option<usize>]> {
        self.dims.as_deref()
    }

    /// The dimensions, if every one is known.
    pub fn as_known(&self) -> Option<Vec<usize>> {
        self.dims.as_ref()?.iter().copied().collect()
    }

    /// The number of elements, if the shape is fully known (`usize::MAX` when the product
    /// overflows: such a tensor could never be allocated).
    pub fn num_elements(&self) -> Option<usize> {
        self.as_known().map(|d| d.iter().try_fold(1usize, |n, &x| n.checked_mul(x)).unwrap_or(usize::MAX))
    }

    /// True when a tensor of concrete shape `dims` fits this (partial) shape.
    pub fn is_compatible_with(&self, dims: &[usize]) -> bool {
        match &self.dims {
            None => true,
            Some(mine) => mine.len() == dims.len() && mine.iter().zip(dims).all(|(m, d)| m.is_none_or(|m| m == *d)),
        }
    }

    /// The NumPy broadcast of two partial shapes, or `None` if they can never broadcast.
    pub fn broadcast(&self, other: &Shape) -> Option<Shape> {
        let (Some(a), Some(b)) = (&self.dims, &other.dims) else {
            return Some(Shape::unknown());
        };
        let n = a.len().max(b.len());
        let mut out = vec![None; n];
        for (i, o) in out.iter_mut().enumerate() {
            let da = if i + a.len() >= n { a[i + a.len() - n] } else { Some(1) };
            let db = if i + b.len() >= n { b[i + b.len() - n] } else { Some(1) };
            *o = match (da, db) {
                (Some(1), d) | (d, Some(1)) => d,
                (Some(x), Some(y)) if x == y => Some(x),
                (Some(_), Some(_)) => return None,
                (Some(x), None) | (None, Some(x)) => Some(x),
                (None, None) => None,
            };
        }
        Some(Shape::new(out))
    }
}

impl Shape {
    /// A tensor spec as Python's TensorFlow writes one in messages: `float32[2, ?]`, or
    /// `float32[?..]` for an unknown rank.
    pub fn spec(&self, dtype: crate::DType) -> String {
        let name = dtype.python_name();
        match &self.dims {
            None => format!("{name}[?..]"),
            Some(dims) => {
                let dims: Vec<String> = dims.iter().map(|d| d.map_or("?".into(), |d| d.to_string())).collect();
                format!("{name}[{}]", dims.join(", "))
            }
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.dims {
            None => f.write_str("<unknown>"),
            Some(d) => {
                f.write_str("[")?;
                for (i, x) in d.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    match x {
                        Some(v) => write!(f, "{v}")?,
                        None => f.write_str("?")?,
                    }
                }
                f.write_str("]")
            }
        }
    }
}

/// The NumPy broadcast of two concrete shapes, or `None` if incompatible.
pub fn broadcast_dims(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out.push(match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting() {
        assert_eq!(broadcast_dims(&[2, 3], &[3]), Some(vec![2, 3]));
        assert_eq!(broadcast_dims(&[2, 1], &[1, 4]), Some(vec![2, 4]));
        assert_eq!(broadcast_dims(&[], &[5]), Some(vec![5]));
        assert_eq!(broadcast_dims(&[2, 3], &[4]), None);
        let s = Shape::new(vec![None, Some(3)]).broadcast(&Shape::known(&[3])).unwrap();
        assert_eq!(s, Shape::new(vec![None, Some(3)]));
        assert!(Shape::known(&[2]).broadcast(&Shape::known(&[3])).is_none());
    }

    #[test]
    fn compatibility() {
        let s = Shape::new(vec![None, Some(4)]);
        assert!(s.is_compatible_with(&[7, 4]));
        assert!(!s.is_compatible_with(&[7, 5]));
        assert!(!s.is_compatible_with(&[4]));
        assert!(Shape::unknown().is_compatible_with(&[1, 2, 3]));
        assert_eq!(s.to_string(), "[?,4]");
    }
}
