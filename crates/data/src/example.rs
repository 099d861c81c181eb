//! `tf.train.Example` parsing with `tf.io.parse_single_example` / `parse_example` semantics:
//! fixed-length features become dense tensors (a default fills a missing one; without one it
//! is an error), variable-length features become sparse tensors.
use std::collections::BTreeMap;

use ferroflow_proto::{feature, Example, Feature};
use ferroflow_tensor::{DType, Tensor};

use crate::{DataError, Result};

/// How to parse one feature.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum FeatureSpec {
    /// `tf.io.FixedLenFeature(shape, dtype, default_value)`: exactly `shape`'s element count
    /// of values; `default` (of `shape`, or a scalar repeated) when the feature is missing.
    Fixed {
        /// float32, int64 or string.
        dtype: DType,
        /// The value's shape.
        shape: Vec<usize>,
        /// Used when the example lacks the feature.
        default: Option<Tensor>,
    },
    /// `tf.io.VarLenFeature(dtype)`: any number of values, as a sparse tensor.
    Var {
        /// float32, int64 or string.
        dtype: DType,
    },
}

/// A sparse tensor as TensorFlow returns a `VarLenFeature`: int64 `indices` `[n, rank]`,
/// `values` `[n]`, int64 `dense_shape` `[rank]`.
#[derive(Debug, Clone)]
pub struct SparseTensor {
    /// Positions of the values.
    pub indices: Tensor,
    /// The values.
    pub values: Tensor,
    /// The dense shape.
    pub dense_shape: Tensor,
}

/// A parsed feature.
#[derive(Debug, Clone)]
pub enum Parsed {
    /// From a fixed-length feature.
    Dense(Tensor),
    /// From a variable-length feature.
    Sparse(SparseTensor),
}

impl Parsed {
    /// The dense tensor (an error for a sparse feature).
    pub fn dense(&self) -> Result<&Tensor> {
        match self {
            Parsed::Dense(t) => Ok(t),
            Parsed::Sparse(_) => Err(DataError::Invalid("a VarLenFeature parses to a sparse tensor".into())),
        }
    }
}

/// The values of one feature, typed.
enum Values<'a> {
    Float(&'a [f32]),
    Int(&'a [i64]),
    Bytes(&'a [Vec<u8>]),
}

impl Values<'_> {
    fn len(&self) -> usize {
        match self {
            Values::Float(v) => v.len(),
            Values::Int(v) => v.len(),
            Values::Bytes(v) => v.len(),
        }
    }
    fn dtype(&self) -> DType {
        match self {
            Values::Float(_) => DType::Float,
            Values::Int(_) => DType::Int64,
            Values::Bytes(_) => DType::String,
        }
    }
}

fn values_of(f: &Feature) -> Values<'_> {
    match &f.kind {
        Some(feature::Kind::FloatList(l)) => Values::Float(&l.value),
        Some(feature::Kind::Int64List(l)) => Values::Int(&l.value),
        Some(feature::Kind::BytesList(l)) => Values::Bytes(&l.value),
        // An empty Feature has no type; it reads as no values of the wanted type.
        None => Values::Bytes(&[]),
    }
}

fn check_dtype(name: &str, dtype: DType) -> Result<()> {
    match dtype {
        DType::Float | DType::Int64 | DType::String => Ok(()),
        d => Err(DataError::Invalid(format!("feature '{name}': {d} is not a feature type (float32, int64 or string)"))),
    }
}

fn tensor_of(v: &Values, dims: &[usize]) -> Result<Tensor> {
    Ok(match v {
        Values::Float(x) => Tensor::from_slice(dims, x)?,
        Values::Int(x) => Tensor::from_slice(dims, x)?,
        Values::Bytes(x) => Tensor::from_strings(dims, x.to_vec())?,
    })
}

fn decode(serialized: &[u8], which: &str) -> Result<Example> {
    ferroflow_proto::decode::<Example>(serialized, which)
        .map_err(|e| DataError::with_context(format!("could not parse {which} as a tf.train.Example"), e))
}

/// The values of `name` in `ex` checked against `spec` (`None` when missing).
fn lookup<'a>(ex: &'a Example, name: &str, want: DType, which: &str) -> Result<Option<Values<'a>>> {
    let Some(f) = ex.features.as_ref().and_then(|fs| fs.feature.get(name)) else { return Ok(None) };
    let v = values_of(f);
    if f.kind.is_some() && v.dtype() != want {
        return Err(DataError::msg(format!(
            "{which}: key: {name}. Data types don't match. Data type: {} but expected type: {want}",
            v.dtype()
        )));
    }
    Ok(Some(v))
}

/// Parses one serialized `Example`.
pub fn parse_single_example(
    serialized: &[u8],
    features: &BTreeMap<String, FeatureSpec>,
) -> Result<BTreeMap<String, Parsed>> {
    let batch = Tensor::from_strings(&[1], vec![serialized.to_vec()])?;
    let mut parsed = parse_example(&batch, features)?;
    // Drop the batch dimension.
    for (_, p) in parsed.iter_mut() {
        match p {
            Parsed::Dense(t) => *t = t.reshaped(&t.dims()[1..])?,
            Parsed::Sparse(s) => {
                let idx = s.indices.as_slice::<i64>()?;
                let n = s.values.len();
                let single: Vec<i64> = (0..n).map(|i| idx[i * 2 + 1]).collect();
                let len = s.dense_shape.as_slice::<i64>()?[1];
                *s = SparseTensor {
                    indices: Tensor::from_vec(&[n, 1], single)?,
                    values: s.values.clone(),
                    dense_shape: Tensor::from_vec(&[1], vec![len])?,
                };
            }
        }
    }
    Ok(parsed)
}

/// Parses a vector of serialized `Example`s (a string tensor `[B]`): dense features get a
/// leading batch dimension, sparse ones indices `[batch, position]` and dense shape
/// `[B, longest]`.
pub fn parse_example(
    serialized: &Tensor,
    features: &BTreeMap<String, FeatureSpec>,
) -> Result<BTreeMap<String, Parsed>> {
    let records = serialized
        .as_strings()
        .map_err(|_| DataError::Invalid(format!("parse_example needs a string tensor, got {}", serialized.dtype())))?;
    if serialized.rank() > 1 {
        return Err(DataError::Invalid(format!(
            "parse_example needs a vector of records, got shape {:?}",
            serialized.dims()
        )));
    }
    let examples =
        records.iter().enumerate().map(|(i, r)| decode(r, &format!("example {i}"))).collect::<Result<Vec<_>>>()?;
    let b = examples.len();
    let mut out = BTreeMap::new();
    for (name, spec) in features {
        match spec {
            FeatureSpec::Fixed { dtype, shape, default } => {
                check_dtype(name, *dtype)?;
                let n: usize = shape.iter().product();
                let mut parts = Vec::with_capacity(b);
                for (i, ex) in examples.iter().enumerate() {
                    let which = format!("example {i}");
                    let t = match lookup(ex, name, *dtype, &which)? {
                        Some(v) if v.len() == n => tensor_of(&v, shape)?,
                        Some(v) => {
                            return Err(DataError::msg(format!(
                                "{which}: key: {name}. Can't parse serialized Example: number of {} values != expected; values size: {} but output shape: {shape:?}",
                                dtype,
                                v.len()
                            )))
                        }
                        None => match default {
                            Some(d) if d.len() == n && d.dtype() == *dtype => d.reshaped(shape)?,
                            Some(d) if d.len() == 1 && d.dtype() == *dtype => repeat_scalar(d, shape)?,
                            Some(d) => {
                                return Err(DataError::Invalid(format!(
                                    "feature '{name}': default value of {} {:?} does not fit shape {shape:?} of {dtype}",
                                    d.dtype(),
                                    d.dims()
                                )))
                            }
                            None => {
                                return Err(DataError::msg(format!(
                                    "{which}: feature: {name} (data type: {dtype}) is required but could not be found"
                                )))
                            }
                        },
                    };
                    parts.push(t);
                }
                let mut dims = vec![b];
                dims.extend_from_slice(shape);
                let t = if b == 0 {
                    empty(*dtype, &dims)?
                } else {
                    crate::tensors::stack(&parts.iter().collect::<Vec<_>>(), |_, _, _| String::new())?
                };
                out.insert(name.clone(), Parsed::Dense(t));
            }
            FeatureSpec::Var { dtype } => {
                check_dtype(name, *dtype)?;
                let mut indices = Vec::new();
                let mut longest = 0usize;
                let (mut floats, mut ints, mut bytes) = (Vec::new(), Vec::new(), Vec::new());
                for (i, ex) in examples.iter().enumerate() {
                    let Some(v) = lookup(ex, name, *dtype, &format!("example {i}"))? else { continue };
                    longest = longest.max(v.len());
                    for j in 0..v.len() {
                        indices.extend_from_slice(&[i as i64, j as i64]);
                    }
                    match v {
                        Values::Float(x) => floats.extend_from_slice(x),
                        Values::Int(x) => ints.extend_from_slice(x),
                        Values::Bytes(x) => bytes.extend_from_slice(x),
                    }
                }
                let n = indices.len() / 2;
                let values = match dtype {
                    DType::Float => Tensor::from_vec(&[n], floats)?,
                    DType::Int64 => Tensor::from_vec(&[n], ints)?,
                    _ => Tensor::from_strings(&[n], bytes)?,
                };
                out.insert(
                    name.clone(),
                    Parsed::Sparse(SparseTensor {
                        indices: Tensor::from_vec(&[n, 2], indices)?,
                        values,
                        dense_shape: Tensor::from_vec(&[2], vec![b as i64, longest as i64])?,
                    }),
                );
            }
        }
    }
    Ok(out)
}

/// `d`'s one value repeated to `shape`.
fn repeat_scalar(d: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    if let Ok(s) = d.as_strings() {
        return Ok(Tensor::from_strings(shape, vec![s[0].clone(); n])?);
    }
    let one = d.as_bytes()?.to_vec();
    Ok(Tensor::from_fill(d.dtype(), shape, |out| {
        for c in out.chunks_exact_mut(one.len()) {
            c.copy_from_slice(&one);
        }
    })?)
}

fn empty(dtype: DType, dims: &[usize]) -> Result<Tensor> {
    if dtype == DType::String {
        return Ok(Tensor::from_strings(dims, Vec::new())?);
    }
    Ok(Tensor::zeros(dtype, dims)?)
}

/// Serializes an `Example` with the given features (for writing TFRecords).
pub fn example_bytes(features: &[(&str, &Tensor)]) -> Result<Vec<u8>> {
    use ferroflow_proto::{BytesList, Features, FloatList, Int64List};
    let mut map = BTreeMap::new();
    for (name, t) in features {
        let kind = match t.dtype() {
            DType::Float => feature::Kind::FloatList(FloatList { value: t.as_slice::<f32>()?.to_vec() }),
            DType::Int64 => feature::Kind::Int64List(Int64List { value: t.as_slice::<i64>()?.to_vec() }),
            DType::String => feature::Kind::BytesList(BytesList { value: t.as_strings()?.to_vec() }),
            d => return Err(DataError::Invalid(format!("feature '{name}': {d} is not a feature type"))),
        };
        map.insert(name.to_string(), Feature { kind: Some(kind) });
    }
    Ok(ferroflow_proto::encode(&Example { features: Some(Features { feature: map }) }))
}
