//! One module per subcommand: its arguments (`#[derive(Args)]`, whose doc comment is the
//! command's help) and its `run`.
pub mod allreduce_bench;
pub mod benchmark;
pub mod completions;
pub mod convert;
pub mod demo;
pub mod fit;
pub mod flowers;
pub mod freeze;
pub mod info;
pub mod inspect;
pub mod inspect_checkpoint;
pub mod keras;
pub mod keras_app;
pub mod merge_partitions;
pub mod mnist;
pub mod ops;
pub mod optimize;
pub mod pipeline;
pub mod profile;
pub mod run;
pub mod serve;
pub mod tensorboard;

/// Whether `path` is a SavedModel directory; a directory without `saved_model.pb` is an error
/// saying so (it is neither a SavedModel nor a graph file).
pub(crate) fn is_saved_model(path: &std::path::Path) -> anyhow::Result<bool> {
    if !path.is_dir() {
        return Ok(false);
    }
    if path.join("saved_model.pb").is_file() {
        return Ok(true);
    }
    anyhow::bail!(
        "{}: a directory without saved_model.pb (expected a SavedModel directory or a graph file)",
        path.display()
    )
}

/// Prints `value` as pretty JSON, the output of every `--json`.
pub(crate) fn print_json(value: &serde_json::Value) -> anyhow::Result<()> {
    out!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// The first `limit` values of `t` in row-major order as a JSON array (NaN and infinities are
/// `null`, strings are UTF-8 with invalid bytes replaced; `null` for dtypes without numbers,
/// such as variants), and whether values were left out.
pub(crate) fn values_json(t: &ferroflow::tensor::Tensor, limit: usize) -> (serde_json::Value, bool) {
    use ferroflow::tensor::{bf16, f16, DType};
    use serde_json::Value;
    fn take<T: Copy>(v: &[T], limit: usize, f: impl Fn(T) -> Value) -> Value {
        Value::Array(v.iter().take(limit).map(|x| f(*x)).collect())
    }
    let float = |x: f64| serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number);
    let values = match t.dtype() {
        DType::Float => take(t.as_slice::<f32>().unwrap_or(&[]), limit, |x| float(x.into())),
        DType::Double => take(t.as_slice::<f64>().unwrap_or(&[]), limit, float),
        DType::Half => take(t.as_slice::<f16>().unwrap_or(&[]), limit, |x| float(x.to_f64())),
        DType::BFloat16 => take(t.as_slice::<bf16>().unwrap_or(&[]), limit, |x| float(x.to_f64())),
        DType::Int32 => take(t.as_slice::<i32>().unwrap_or(&[]), limit, Value::from),
        DType::Int64 => take(t.as_slice::<i64>().unwrap_or(&[]), limit, Value::from),
        DType::Int16 => take(t.as_slice::<i16>().unwrap_or(&[]), limit, Value::from),
        DType::Int8 => take(t.as_slice::<i8>().unwrap_or(&[]), limit, Value::from),
        DType::UInt8 => take(t.as_slice::<u8>().unwrap_or(&[]), limit, Value::from),
        DType::UInt16 => take(t.as_slice::<u16>().unwrap_or(&[]), limit, Value::from),
        DType::UInt32 => take(t.as_slice::<u32>().unwrap_or(&[]), limit, Value::from),
        DType::UInt64 => take(t.as_slice::<u64>().unwrap_or(&[]), limit, Value::from),
        DType::Bool => take(t.as_slice::<bool>().unwrap_or(&[]), limit, Value::from),
        DType::String => Value::Array(
            t.as_strings()
                .unwrap_or(&[])
                .iter()
                .take(limit)
                .map(|s| Value::from(String::from_utf8_lossy(s).into_owned()))
                .collect(),
        ),
        _ => return (Value::Null, false),
    };
    (values, t.len() > limit)
}
