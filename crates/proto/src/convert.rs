//! Conversions between [`TensorProto`]/[`TensorShapeProto`] and ferroflow tensors and shapes.
use ferroflow_tensor::{DType, Shape, Tensor, TensorError};

use crate::{tensor_shape_proto, TensorProto, TensorShapeProto};

/// The largest tensor a `TensorProto` may expand to (the repeat-last rule lets a few bytes
/// describe a huge tensor); anything larger is rejected before allocation.
pub const MAX_TENSOR_BYTES: usize = 1 << 34;

/// An error converting a `TensorProto`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// The proto names an unsupported dtype or has inconsistent contents.
    #[error("{0}")]
    Invalid(String),
    /// The tensor could not be built.
    #[error(transparent)]
    Tensor(#[from] TensorError),
}

/// A `TensorShapeProto` as a (possibly partial) [`Shape`].
pub fn shape_from_proto(p: &TensorShapeProto) -> Shape {
    if p.unknown_rank {
        return Shape::unknown();
    }
    let dims: Vec<i64> = p.dim.iter().map(|d| d.size).collect();
    Shape::from_tf(Some(&dims))
}

/// A [`Shape`] as a `TensorShapeProto` (-1 for unknown dimensions).
pub fn shape_to_proto(s: &Shape) -> TensorShapeProto {
    match s.dims() {
        None => TensorShapeProto { dim: vec![], unknown_rank: true },
        Some(d) => TensorShapeProto {
            dim: d
                .iter()
                .map(|x| tensor_shape_proto::Dim { size: x.map_or(-1, |v| v as i64), name: String::new() })
                .collect(),
            unknown_rank: false,
        },
    }
}

/// Concrete dimensions as a `TensorShapeProto`.
pub fn dims_to_proto(dims: &[usize]) -> TensorShapeProto {
    TensorShapeProto {
        dim: dims.iter().map(|&d| tensor_shape_proto::Dim { size: d as i64, name: String::new() }).collect(),
        unknown_rank: false,
    }
}

/// Decodes a `TensorProto`, applying TensorFlow's rules: `tensor_content` wins; otherwise the
/// typed `*_val` field, with the last value repeated to fill the shape (zeros if empty).
pub fn tensor_from_proto(p: &TensorProto) -> Result<Tensor, ConvertError> {
    let dtype = DType::from_tf(p.dtype)?;
    let shape = p.tensor_shape.clone().unwrap_or_default();
    if shape.unknown_rank {
        return Err(ConvertError::Invalid("tensor has unknown rank".into()));
    }
    let mut dims = Vec::with_capacity(shape.dim.len());
    for d in &shape.dim {
        dims.push(
            usize::try_from(d.size)
                .map_err(|_| ConvertError::Invalid(format!("tensor has negative dimension {}", d.size)))?,
        );
    }
    let n = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| ConvertError::Invalid(format!("tensor shape {dims:?} overflows")))?;
    let elem = dtype.size().unwrap_or(1);
    if n.saturating_mul(elem) > MAX_TENSOR_BYTES {
        return Err(ConvertError::Invalid(format!("tensor of shape {dims:?} exceeds {MAX_TENSOR_BYTES} bytes")));
    }
    // The repeat-last rule expands a few values to `n` elements, through a vector of the
    // proto's value type (up to 8 bytes, 24 for a string) before the tensor's own copy.
    let expanded = if dtype == DType::String { std::mem::size_of::<Vec<u8>>() } else { elem.max(8) };
    ferroflow_tensor::limit::check(n.saturating_mul(expanded), || format!("{dtype} tensor of shape {dims:?}"))?;
    if dtype == DType::String {
        return Ok(Tensor::from_strings(&dims, fill(&p.string_val, n, "string_val")?)?);
    }
    if !p.tensor_content.is_empty() {
        return Ok(Tensor::from_bytes(dtype, &dims, &p.tensor_content)?);
    }
    macro_rules! typed {
        ($vals:expr, $t:ty, $conv:expr) => {{
            let v: Vec<$t> = fill(&$vals, n, stringify!($vals))?.into_iter().map($conv).collect();
            Tensor::from_vec(&dims, v)?
        }};
    }
    Ok(match dtype {
        DType::Float => typed!(p.float_val, f32, |x| x),
        DType::Double => typed!(p.double_val, f64, |x| x),
        DType::Int32 => typed!(p.int_val, i32, |x| x),
        DType::Int16 => typed!(p.int_val, i16, |x| x as i16),
        DType::Int8 => typed!(p.int_val, i8, |x| x as i8),
        DType::UInt8 => typed!(p.int_val, u8, |x| x as u8),
        DType::UInt16 => typed!(p.int_val, u16, |x| x as u16),
        DType::Int64 => typed!(p.int64_val, i64, |x| x),
        DType::UInt32 => typed!(p.uint32_val, u32, |x| x),
        DType::UInt64 => typed!(p.uint64_val, u64, |x| x),
        DType::Bool => typed!(p.bool_val, bool, |x| x),
        DType::Half => typed!(p.half_val, ferroflow_tensor::f16, |x| { ferroflow_tensor::f16::from_bits(x as u16) }),
        DType::BFloat16 => {
            let vals = if p.half_val.is_empty() { &p.int_val } else { &p.half_val };
            typed!(vals, ferroflow_tensor::bf16, |x| { ferroflow_tensor::bf16::from_bits(x as u16) })
        }
        DType::Complex64 => {
            let v = fill_pairs(&p.scomplex_val, n)?;
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            Tensor::from_bytes(dtype, &dims, &bytes)?
        }
        DType::Complex128 => {
            let v = fill_pairs(&p.dcomplex_val, n)?;
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            Tensor::from_bytes(dtype, &dims, &bytes)?
        }
        d => return Err(ConvertError::Invalid(format!("{d} tensors cannot be decoded from a TensorProto"))),
    })
}

fn fill<T: Clone + Default>(vals: &[T], n: usize, field: &str) -> Result<Vec<T>, ConvertError> {
    if vals.len() > n {
        return Err(ConvertError::Invalid(format!("{field} has {} values for {n} elements", vals.len())));
    }
    let mut out = vals.to_vec();
    let last = vals.last().cloned().unwrap_or_default();
    out.resize(n, last);
    Ok(out)
}

fn fill_pairs<T: Copy + Default>(vals: &[T], n: usize) -> Result<Vec<T>, ConvertError> {
    if !vals.len().is_multiple_of(2) || vals.len() / 2 > n {
        return Err(ConvertError::Invalid(format!("complex values field has {} numbers for {n} elements", vals.len())));
    }
    let mut out = vals.to_vec();
    let (re, im) =
        if vals.len() >= 2 { (vals[vals.len() - 2], vals[vals.len() - 1]) } else { (T::default(), T::default()) };
    while out.len() < 2 * n {
        out.push(re);
        out.push(im);
    }
    Ok(out)
}

/// Encodes a tensor as a `TensorProto`: numeric data in `tensor_content`, strings in
/// `string_val` (what TensorFlow's `make_tensor_proto` writes for arrays).
pub fn tensor_to_proto(t: &Tensor) -> TensorProto {
    let mut p =
        TensorProto { dtype: t.dtype().to_tf(), tensor_shape: Some(dims_to_proto(t.dims())), ..Default::default() };
    match t.as_strings() {
        Ok(s) => p.string_val = s.to_vec(),
        Err(_) => p.tensor_content = t.as_bytes().map(<[u8]>::to_vec).unwrap_or_default(),
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeat_last_and_content() {
        let p = TensorProto {
            dtype: 1,
            tensor_shape: Some(dims_to_proto(&[3])),
            float_val: vec![1.0, 2.0],
            ..Default::default()
        };
        assert_eq!(tensor_from_proto(&p).unwrap().as_slice::<f32>().unwrap(), &[1.0, 2.0, 2.0]);
        let p = TensorProto { dtype: 3, tensor_shape: Some(dims_to_proto(&[2])), ..Default::default() };
        assert_eq!(tensor_from_proto(&p).unwrap().as_slice::<i32>().unwrap(), &[0, 0]);
        let t = Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(tensor_from_proto(&tensor_to_proto(&t)).unwrap(), t);
        let s = Tensor::from_strings(&[1], vec![b"hi".to_vec()]).unwrap();
        assert_eq!(tensor_from_proto(&tensor_to_proto(&s)).unwrap(), s);
    }

    #[test]
    fn hostile_protos_are_rejected_without_allocating() {
        let huge = TensorProto {
            dtype: 1,
            tensor_shape: Some(dims_to_proto(&[1 << 40, 1 << 20])),
            float_val: vec![1.0],
            ..Default::default()
        };
        assert!(tensor_from_proto(&huge).unwrap_err().to_string().contains("exceeds"));
        // Under the 16 GiB cap but over the memory limit: refused before the values are
        // expanded (a 10-byte proto used to become a 4 GiB vector).
        let big = TensorProto {
            dtype: 1,
            tensor_shape: Some(dims_to_proto(&[1 << 30])),
            float_val: vec![1.0],
            ..Default::default()
        };
        let _limit = ferroflow_tensor::limit::scoped(1 << 30);
        let e = tensor_from_proto(&big).unwrap_err().to_string();
        assert!(e.contains("resource exhausted") && e.contains("[1073741824]"), "{e}");
        let strings = TensorProto {
            dtype: 7,
            tensor_shape: Some(dims_to_proto(&[1 << 28])),
            string_val: vec![b"s".to_vec()],
            ..Default::default()
        };
        assert!(tensor_from_proto(&strings).unwrap_err().to_string().contains("resource exhausted"));
        let bad = TensorProto {
            dtype: 1,
            tensor_shape: Some(dims_to_proto(&[2])),
            tensor_content: vec![0; 7],
            ..Default::default()
        };
        assert!(tensor_from_proto(&bad).is_err());
        let unk = TensorProto { dtype: 77, ..Default::default() };
        assert!(tensor_from_proto(&unk).is_err());
    }
}
