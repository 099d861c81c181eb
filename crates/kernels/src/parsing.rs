//! `ParseExampleV2`, `ParseExample` and `ParseSingleExample`: serialized `tf.train.Example`s
//! (a vector, or one scalar whose outputs then have no batch dimension) into the features a
//! parse config asks for, as TensorFlow's `example_proto_fast_parsing.cc`:
//! - dense (`FixedLenFeature`): exactly the shape's element count of values, or the default
//!   where an example lacks the feature (an empty default: the feature is required); a shape
//!   whose first dimension is -1 (`FixedLenSequenceFeature`) takes any multiple of the rest,
//!   padded with the default's one value to the longest example;
//! - sparse (`VarLenFeature`): int64 indices `[n, 2]` (example, position), values `[n]`, the
//!   dense shape `[batch, longest]`;
//! - ragged (`RaggedFeature` without partitions, V2): the values of every example in a row
//!   and row splits `[batch + 1]` (int32 or int64).
//!
//! A `Feature` with no list set counts as missing. Each example is decoded by the bounded
//! decoder (`ferroflow_proto::decode`), so hostile bytes cannot allocate past the memory limit;
//! errors name the example (its name from `names`, or `<unknown>`), its index and the key, in
//! TensorFlow's words.
use std::fmt::Write;

use ferroflow_proto::attr_value::Value;
use ferroflow_proto::{convert, feature, Example, Feature, ProtoError};
use ferroflow_tensor::{DType, Shape, Tensor};

use crate::{
    check_output, invalid, Inputs, KResult, KernelContext, KernelError, KernelRegistry, NodeDesc, OpKernel, Outputs,
};

/// How one dense feature is read.
struct Dense {
    dtype: DType,
    /// The shape of one example's value (without the leading -1 of a variable-length one).
    shape: Vec<usize>,
    /// A `FixedLenSequenceFeature`: any number of `shape`-sized rows, padded.
    variable: bool,
}

/// What a node parses: the features' dtypes and shapes (the keys are inputs, except for
/// `ParseSingleExample`, whose keys are attrs).
struct Config {
    sparse: Vec<DType>,
    dense: Vec<Dense>,
    /// Each ragged feature's value and row-split dtypes.
    ragged: Vec<(DType, DType)>,
}

/// Which op, and so where its inputs are.
enum Form {
    V2,
    V1,
    Single { sparse_keys: Vec<Vec<u8>>, dense_keys: Vec<Vec<u8>> },
}

struct ParseExample {
    form: Form,
    config: Config,
}

/// The values of one feature of one example, typed.
#[derive(Clone, Copy)]
enum Values<'a> {
    Float(&'a [f32]),
    Int(&'a [i64]),
    Bytes(&'a [Vec<u8>]),
}

impl<'a> Values<'a> {
    fn of(f: &'a Feature) -> Option<Values<'a>> {
        Some(match f.kind.as_ref()? {
            feature::Kind::FloatList(l) => Values::Float(&l.value),
            feature::Kind::Int64List(l) => Values::Int(&l.value),
            feature::Kind::BytesList(l) => Values::Bytes(&l.value),
        })
    }
    fn of_tensor(t: &'a Tensor) -> KResult<Values<'a>> {
        Ok(match t.dtype() {
            DType::Float => Values::Float(t.as_slice()?),
            DType::Int64 => Values::Int(t.as_slice()?),
            DType::String => Values::Bytes(t.as_strings()?),
            d => return Err(invalid(format!("a feature's value is {d}, not float, int64 or string"))),
        })
    }
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
    /// TensorFlow's word for the list's values in a count error.
    fn kind_word(dtype: DType) -> &'static str {
        match dtype {
            DType::Float => "float",
            DType::Int64 => "int64",
            _ => "bytes",
        }
    }
}

/// An output's values as they are gathered.
enum Column {
    Float(Vec<f32>),
    Int(Vec<i64>),
    Bytes(Vec<Vec<u8>>),
}

impl Column {
    /// An empty column for `dims`, checked against the memory limit first.
    fn for_output(dtype: DType, dims: &[usize]) -> KResult<Column> {
        let n = check_output(dtype, dims)?;
        Ok(match dtype {
            DType::Float => Column::Float(Vec::with_capacity(n)),
            DType::Int64 => Column::Int(Vec::with_capacity(n)),
            DType::String => Column::Bytes(Vec::with_capacity(n)),
            d => return Err(invalid(format!("a feature's value is {d}, not float, int64 or string"))),
        })
    }
    /// Appends `v` (of the column's dtype: checked by the caller).
    fn extend(&mut self, v: Values) {
        match (self, v) {
            (Column::Float(c), Values::Float(v)) => c.extend_from_slice(v),
            (Column::Int(c), Values::Int(v)) => c.extend_from_slice(v),
            (Column::Bytes(c), Values::Bytes(v)) => c.extend_from_slice(v),
            _ => unreachable!("values are checked against the column's dtype first"),
        }
    }
    /// Appends `n` copies of `v`'s first value.
    fn pad(&mut self, v: Values, n: usize) {
        match (self, v) {
            (Column::Float(c), Values::Float(v)) => c.resize(c.len() + n, v[0]),
            (Column::Int(c), Values::Int(v)) => c.resize(c.len() + n, v[0]),
            (Column::Bytes(c), Values::Bytes(v)) => c.resize(c.len() + n, v[0].clone()),
            _ => unreachable!("values are checked against the column's dtype first"),
        }
    }
    fn into_tensor(self, dims: &[usize]) -> KResult<Tensor> {
        Ok(match self {
            Column::Float(v) => Tensor::from_vec(dims, v)?,
            Column::Int(v) => Tensor::from_vec(dims, v)?,
            Column::Bytes(v) => Tensor::from_strings(dims, v)?,
        })
    }
}

/// `bytes` as text for a message: escaped, at most `max` bytes of them.
fn shown_bytes(bytes: &[u8], max: usize) -> String {
    let mut s: String = bytes.iter().take(max).flat_map(|&b| std::ascii::escape_default(b)).map(char::from).collect();
    if bytes.len() > max {
        let _ = write!(s, "… ({} bytes)", bytes.len());
    }
    s
}

/// A key as it appears in messages.
fn shown_key(key: &[u8]) -> String {
    ferroflow_tensor::shown::text(&String::from_utf8_lossy(key), 100)
}

/// TensorFlow's shape text (`[2,3]`, `[?,2]`).
fn shape_text(variable: bool, shape: &[usize]) -> String {
    let dims = variable.then(|| "?".to_string()).into_iter().chain(shape.iter().map(usize::to_string));
    format!("[{}]", dims.collect::<Vec<_>>().join(","))
}

/// The batch being parsed: its decoded examples and what names them in errors.
struct Batch<'a> {
    examples: Vec<Example>,
    /// Empty, or one name per example.
    names: &'a [Vec<u8>],
    /// A scalar `serialized`: outputs have no batch dimension.
    scalar: bool,
}

impl Batch<'_> {
    fn name(&self, i: usize) -> String {
        match self.names.get(i) {
            Some(n) => ferroflow_tensor::shown::text(&String::from_utf8_lossy(n), 100),
            None => "<unknown>".into(),
        }
    }
    /// An error about feature `key` of example `i`, as TensorFlow words it.
    fn error(&self, i: usize, key: &[u8], what: impl std::fmt::Display) -> KernelError {
        invalid(format!("Name: {}, Key: {}, Index: {i}.  {what}", self.name(i), shown_key(key)))
    }
    /// The values of `key` in example `i` (`None` when it is missing or has no list set).
    fn get(&self, i: usize, key: &[u8]) -> Option<Values<'_>> {
        let key = std::str::from_utf8(key).ok()?;
        Values::of(self.examples[i].features.as_ref()?.feature.get(key)?)
    }
    /// The output's dims: the batch's (none for a scalar), then `rest`.
    fn dims(&self, rest: &[usize]) -> Vec<usize> {
        let batch = (!self.scalar).then_some(self.examples.len());
        batch.into_iter().chain(rest.iter().copied()).collect()
    }
}

/// Decodes each serialized example (in parallel on the intra-op pool for big batches); the
/// first bad one (in order) is the error.
fn decode_all(ctx: &KernelContext, records: &[Vec<u8>], names: &[Vec<u8>]) -> KResult<Vec<Example>> {
    use rayon::prelude::*;
    let decode = |(i, r): (usize, &Vec<u8>)| -> KResult<Example> {
        ferroflow_proto::decode::<Example>(r, &format!("serialized[{i}]")).map_err(|e| match e {
            ProtoError::TooLarge { source, .. } => KernelError::Tensor(*source),
            e => {
                let name = names.get(i).map_or("<unknown>".into(), |n| shown_key(n));
                invalid(format!(
                    "Name: {name}, Index: {i}.  Could not parse example input, value: '{}' ({e})",
                    shown_bytes(r, 64)
                ))
            }
        })
    };
    let decoded: Vec<KResult<Example>> = if records.len() >= 16 {
        ctx.install(|| records.par_iter().enumerate().map(decode).collect())
    } else {
        records.iter().enumerate().map(decode).collect()
    };
    decoded.into_iter().collect()
}

/// The keys in a string tensor that must hold `n` of them.
fn keys(t: &Tensor, n: usize, what: &str) -> KResult<Vec<Vec<u8>>> {
    let k = t.as_strings()?;
    if k.len() != n || t.rank() > 1 {
        return Err(invalid(format!("Expected len({what}) == {n}, got shape {:?}", t.dims())));
    }
    Ok(k.to_vec())
}

/// The keys of `Nsparse`/`Ndense` scalar inputs (`ParseExample`).
fn scalar_keys(ts: &[Tensor], what: &str) -> KResult<Vec<Vec<u8>>> {
    ts.iter()
        .enumerate()
        .map(|(i, t)| match t.as_strings()? {
            [k] if t.rank() == 0 => Ok(k.clone()),
            _ => Err(invalid(format!("Expected {what}[{i}] to be a scalar, got shape {:?}", t.dims()))),
        })
        .collect()
}

impl OpKernel for ParseExample {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let c = &self.config;
        let (ns, nd, nr) = (c.sparse.len(), c.dense.len(), c.ragged.len());
        let want = match self.form {
            Form::V2 => 5 + nd,
            Form::V1 => 2 + ns + 2 * nd,
            Form::Single { .. } => 1 + nd,
        };
        if inputs.len() != want {
            return Err(invalid(format!("{} inputs, expected {want}", inputs.len())));
        }
        let serialized = &inputs[0];
        let (names, sparse_keys, dense_keys, ragged_keys, defaults): (&[Vec<u8>], _, _, _, &[Tensor]) = match &self.form
        {
            Form::V2 => (
                inputs[1].as_strings()?,
                keys(&inputs[2], ns, "sparse_keys")?,
                keys(&inputs[3], nd, "dense_keys")?,
                keys(&inputs[4], nr, "ragged_keys")?,
                &inputs[5..],
            ),
            Form::V1 => {
                if serialized.rank() != 1 {
                    return Err(invalid(format!(
                        "Expected serialized to be a vector, got shape {:?}",
                        serialized.dims()
                    )));
                }
                (
                    inputs[1].as_strings()?,
                    scalar_keys(&inputs[2..2 + ns], "sparse_keys")?,
                    scalar_keys(&inputs[2 + ns..2 + ns + nd], "dense_keys")?,
                    Vec::new(),
                    &inputs[2 + ns + nd..],
                )
            }
            Form::Single { sparse_keys, dense_keys } => {
                if serialized.rank() != 0 {
                    return Err(invalid(format!(
                        "Expected serialized to be a scalar, got shape {:?}",
                        serialized.dims()
                    )));
                }
                (&[], sparse_keys.clone(), dense_keys.clone(), Vec::new(), &inputs[1..])
            }
        };
        if serialized.rank() > 1 {
            return Err(invalid(format!(
                "Expected serialized to be a scalar or vector, got shape {:?}",
                serialized.dims()
            )));
        }
        let records = serialized.as_strings()?;
        if !names.is_empty() && names.len() != records.len() {
            return Err(invalid(format!(
                "Expected len(names) == len(serialized) or 0, got {} names for {} examples",
                names.len(),
                records.len()
            )));
        }
        if defaults.len() != nd {
            return Err(invalid(format!("{} dense_defaults for {nd} dense features", defaults.len())));
        }
        for (d, (spec, def)) in c.dense.iter().zip(defaults).enumerate() {
            check_default(d, spec, def)?;
        }
        let batch = Batch { examples: decode_all(ctx, records, names)?, names, scalar: serialized.rank() == 0 };

        let mut indices = Vec::with_capacity(ns);
        let mut values = Vec::with_capacity(ns);
        let mut shapes = Vec::with_capacity(ns);
        for (key, &dtype) in sparse_keys.iter().zip(&c.sparse) {
            let [i, v, s] = sparse(&batch, key, dtype)?;
            indices.push(i);
            values.push(v);
            shapes.push(s);
        }
        outputs.extend(indices.into_iter().chain(values).chain(shapes));
        for ((key, spec), def) in dense_keys.iter().zip(&c.dense).zip(defaults) {
            outputs.push(dense(&batch, key, spec, def)?);
        }
        let mut splits = Vec::with_capacity(nr);
        for (key, &(dtype, split)) in ragged_keys.iter().zip(&c.ragged) {
            let (v, s) = ragged(&batch, key, dtype, split)?;
            outputs.push(v);
            splits.push(s);
        }
        outputs.extend(splits);
        Ok(())
    }
}

/// A dense feature's default: empty (required), else the feature's shape (a variable-length
/// one: its one padding value), of its dtype.
fn check_default(d: usize, spec: &Dense, def: &Tensor) -> KResult<()> {
    if def.dtype() != spec.dtype {
        return Err(invalid(format!("dense_defaults[{d}] is {}, the feature is {}", def.dtype(), spec.dtype)));
    }
    if spec.variable {
        if def.len() != 1 {
            return Err(invalid(format!(
                "dense_shapes[{d}] is a variable length shape: {}, therefore def_value[{d}] must contain a single \
                 element (the padding element).  But its shape is: {:?}",
                shape_text(true, &spec.shape),
                def.dims()
            )));
        }
    } else if !def.is_empty() && def.dims() != spec.shape {
        return Err(invalid(format!(
            "def_value[{d}].shape() == {:?} is not compatible with dense_shapes_[{d}] == {}",
            def.dims(),
            shape_text(false, &spec.shape)
        )));
    }
    Ok(())
}

/// A dense feature over the batch.
fn dense(b: &Batch, key: &[u8], spec: &Dense, def: &Tensor) -> KResult<Tensor> {
    let default = Values::of_tensor(def)?;
    let stride: usize = spec.shape.iter().product();
    let n = b.examples.len();
    // Each example's values, checked (and for a variable-length feature, its row count).
    let mut found = Vec::with_capacity(n);
    let mut longest = 0;
    for i in 0..n {
        let v = b.get(i, key);
        if let Some(v) = v {
            if v.dtype() != spec.dtype {
                return Err(b.error(
                    i,
                    key,
                    format!("Data types don't match. Data type: {} but expected type: {}", v.dtype(), spec.dtype),
                ));
            }
            let word = Values::kind_word(spec.dtype);
            if spec.variable {
                if (stride == 0 && v.len() != 0) || (stride != 0 && v.len() % stride != 0) {
                    return Err(b.error(
                        i,
                        key,
                        format!(
                            "Number of {word} values is not a multiple of stride length. Saw {} values but output \
                             shape is: {}",
                            v.len(),
                            shape_text(true, &spec.shape)
                        ),
                    ));
                }
                longest = longest.max(v.len().checked_div(stride).unwrap_or(0));
            } else if v.len() != stride {
                return Err(b.error(
                    i,
                    key,
                    format!(
                        "Number of {word} values != expected.  Values size: {} but output shape: {}",
                        v.len(),
                        shape_text(false, &spec.shape)
                    ),
                ));
            }
        } else if !spec.variable && def.is_empty() {
            return Err(invalid(format!(
                "Name: {}, Index: {i}, Feature: {} (data type: {}) is required but could not be found.",
                b.name(i),
                shown_key(key),
                spec.dtype
            )));
        }
        found.push(v);
    }
    let mut one = Vec::with_capacity(spec.shape.len() + 1);
    if spec.variable {
        one.push(longest);
    }
    one.extend_from_slice(&spec.shape);
    let dims = b.dims(&one);
    let mut col = Column::for_output(spec.dtype, &dims)?;
    let row = longest * stride;
    for v in found {
        match (v, spec.variable) {
            (Some(v), false) => col.extend(v),
            (None, false) => col.extend(default),
            (v, true) => {
                let len = v.map_or(0, |v| v.len());
                if let Some(v) = v {
                    col.extend(v);
                }
                col.pad(default, row - len);
            }
        }
    }
    col.into_tensor(&dims)
}

/// A sparse feature: indices, values and dense shape.
fn sparse(b: &Batch, key: &[u8], dtype: DType) -> KResult<[Tensor; 3]> {
    let (found, total, longest) = gathered(b, key, dtype)?;
    let rank = if b.scalar { 1 } else { 2 };
    check_output(DType::Int64, &[total, rank])?;
    let mut indices = Vec::with_capacity(total * rank);
    let mut col = Column::for_output(dtype, &[total])?;
    for (i, v) in found.into_iter().enumerate() {
        let Some(v) = v else { continue };
        for j in 0..v.len() {
            if !b.scalar {
                indices.push(i as i64);
            }
            indices.push(j as i64);
        }
        col.extend(v);
    }
    let shape: Vec<i64> = b.dims(&[longest]).into_iter().map(|d| d as i64).collect();
    Ok([Tensor::from_vec(&[total, rank], indices)?, col.into_tensor(&[total])?, Tensor::from_vec(&[rank], shape)?])
}

/// A ragged feature: its values and row splits.
fn ragged(b: &Batch, key: &[u8], dtype: DType, split: DType) -> KResult<(Tensor, Tensor)> {
    let (found, total, _) = gathered(b, key, dtype)?;
    let mut col = Column::for_output(dtype, &[total])?;
    let mut splits = Vec::with_capacity(if b.scalar { 0 } else { found.len() + 1 });
    if !b.scalar {
        splits.push(0i64);
    }
    let mut end = 0;
    for v in found {
        if let Some(v) = v {
            end += v.len();
            col.extend(v);
        }
        if !b.scalar {
            splits.push(end as i64);
        }
    }
    let n = splits.len();
    let splits = match split {
        DType::Int64 => Tensor::from_vec(&[n], splits)?,
        _ => {
            let narrow = splits.iter().map(|&s| i32::try_from(s)).collect::<Result<Vec<i32>, _>>().map_err(|_| {
                invalid(format!("ragged feature {}: {total} values do not fit int32 row splits", shown_key(key)))
            })?;
            Tensor::from_vec(&[n], narrow)?
        }
    };
    Ok((col.into_tensor(&[total])?, splits))
}

/// Each example's values of a sparse or ragged feature, checked against `dtype`; their total
/// count and the longest.
fn gathered<'a>(b: &'a Batch, key: &[u8], dtype: DType) -> KResult<(Vec<Option<Values<'a>>>, usize, usize)> {
    let mut found = Vec::with_capacity(b.examples.len());
    let (mut total, mut longest) = (0, 0);
    for i in 0..b.examples.len() {
        let v = b.get(i, key);
        if let Some(v) = v {
            if v.dtype() != dtype {
                return Err(b.error(
                    i,
                    key,
                    format!("Data types don't match. Expected type: {dtype}, Actual type: {}", v.dtype()),
                ));
            }
            total += v.len();
            longest = longest.max(v.len());
        }
        found.push(v);
    }
    Ok((found, total, longest))
}

/// A `list(type)` attr, each a feature dtype (float, int64, string) or, for row splits,
/// int32 or int64.
fn types(d: &NodeDesc, name: &str, allowed: &[DType]) -> KResult<Vec<DType>> {
    let list = match d.def.attr(d.attrs, name).and_then(|v| v.value.as_ref()) {
        Some(Value::List(l)) => &l.r#type,
        None => return Ok(Vec::new()),
        Some(_) => return Err(invalid(format!("attr '{name}' must be a list(type)"))),
    };
    list.iter()
        .map(|&t| {
            let t = DType::from_tf(t)?;
            if !allowed.contains(&t) {
                let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
                return Err(invalid(format!("attr '{name}' holds {t}, which is not one of {{{}}}", names.join(", "))));
            }
            Ok(t)
        })
        .collect()
}

/// A `list(string)` attr (`ParseSingleExample`'s keys).
fn strings(d: &NodeDesc, name: &str) -> Vec<Vec<u8>> {
    match d.def.attr(d.attrs, name).and_then(|v| v.value.as_ref()) {
        Some(Value::List(l)) => l.s.clone(),
        _ => Vec::new(),
    }
}

const FEATURE_TYPES: &[DType] = &[DType::Float, DType::Int64, DType::String];

fn config(d: &NodeDesc, ragged: bool) -> KResult<Config> {
    let sparse = types(d, "sparse_types", FEATURE_TYPES)?;
    let dense_types = types(d, "Tdense", FEATURE_TYPES)?;
    let shapes: Vec<Shape> = match d.def.attr(d.attrs, "dense_shapes").and_then(|v| v.value.as_ref()) {
        Some(Value::List(l)) => l.shape.iter().map(convert::shape_from_proto).collect(),
        _ => Vec::new(),
    };
    if shapes.len() != dense_types.len() {
        return Err(invalid(format!("{} dense_shapes for {} Tdense", shapes.len(), dense_types.len())));
    }
    let mut dense = Vec::with_capacity(shapes.len());
    for (i, (s, dtype)) in shapes.iter().zip(dense_types).enumerate() {
        let unknown = || invalid(format!("dense_shapes[{i}] ({s}) has unknown rank or unknown inner dimensions"));
        let dims = s.dims().ok_or_else(unknown)?;
        let variable = dims.first().is_some_and(Option::is_none);
        let shape = dims[usize::from(variable)..].iter().map(|d| d.ok_or_else(unknown)).collect::<KResult<_>>()?;
        dense.push(Dense { dtype, shape, variable });
    }
    let ragged = if ragged {
        let values = types(d, "ragged_value_types", FEATURE_TYPES)?;
        let splits = types(d, "ragged_split_types", &[DType::Int32, DType::Int64])?;
        if values.len() != splits.len() {
            return Err(invalid(format!(
                "{} ragged_value_types but {} ragged_split_types",
                values.len(),
                splits.len()
            )));
        }
        values.into_iter().zip(splits).collect()
    } else {
        Vec::new()
    };
    // The count attrs (those the op has) agree with the type lists.
    let (ns, nd) = (sparse.len(), dense.len());
    for (attr, list, len) in
        [("num_sparse", "sparse_types", ns), ("Nsparse", "sparse_types", ns), ("Ndense", "Tdense", nd)]
    {
        if let Ok(n) = d.int(attr) {
            if n != len as i64 {
                return Err(invalid(format!("{attr} is {n} but {list} has {len} types")));
            }
        }
    }
    Ok(Config { sparse, dense, ragged })
}

fn k_v2(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(ParseExample { form: Form::V2, config: config(d, true)? }))
}

fn k_v1(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(ParseExample { form: Form::V1, config: config(d, false)? }))
}

fn k_single(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let config = config(d, false)?;
    let (sparse_keys, dense_keys) = (strings(d, "sparse_keys"), strings(d, "dense_keys"));
    if sparse_keys.len() != config.sparse.len() || dense_keys.len() != config.dense.len() {
        return Err(invalid(format!(
            "{} sparse_keys for {} sparse_types, {} dense_keys for {} Tdense",
            sparse_keys.len(),
            config.sparse.len(),
            dense_keys.len(),
            config.dense.len()
        )));
    }
    Ok(Box::new(ParseExample { form: Form::Single { sparse_keys, dense_keys }, config }))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("ParseExampleV2", "", &[], k_v2);
    r.register("ParseExample", "", &[], k_v1);
    r.register("ParseSingleExample", "", &[], k_single);
}
