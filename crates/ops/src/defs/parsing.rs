//! `tf.train.Example` parsing: `ParseExampleV2` (what `tf.io.parse_example` writes in
//! TensorFlow 2, and what estimator-style SavedModels' classify and regress signatures run),
//! the older `ParseExample` and `ParseSingleExample`. Their outputs, in order: the sparse
//! features' indices, values and dense shapes, the dense features' values, then (V2) the
//! ragged features' values and row splits. Feature dtypes are float, int64 or string (the
//! kernel checks the `list(type)` attrs).
use ferroflow_graph::ShapeError;
use ferroflow_proto::attr_value::Value;
use ferroflow_tensor::Shape;

use crate::registry::{op, OpDef};
use crate::shape_inference::InferCtx;

const PARSED: &str = "its values are decoded from serialized protos";

/// The parsing ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        op("ParseExampleV2")
            .input("serialized: string")
            .input("names: string")
            .input("sparse_keys: string")
            .input("dense_keys: string")
            .input("ragged_keys: string")
            .input("dense_defaults: Tdense")
            .output("sparse_indices: num_sparse * int64")
            .output("sparse_values: sparse_types")
            .output("sparse_shapes: num_sparse * int64")
            .output("dense_values: Tdense")
            .output("ragged_values: ragged_value_types")
            .output("ragged_row_splits: ragged_split_types")
            .attr("Tdense: list(type) >= 0")
            .attr("num_sparse: int >= 0")
            .attr("sparse_types: list(type) >= 0")
            .attr("ragged_value_types: list(type) >= 0")
            .attr("ragged_split_types: list(type) >= 0")
            .attr("dense_shapes: list(shape) >= 0")
            .shape(|c| {
                let serialized = at_most_vector(&c.inputs[0])?;
                let ragged = list_len(c, "ragged_value_types");
                parsed_shapes(c, &serialized, list_len(c, "sparse_types"), ragged)
            })
            .not_differentiable(PARSED)
            .build(),
        op("ParseExample")
            .input("serialized: string")
            .input("names: string")
            .input("sparse_keys: Nsparse * string")
            .input("dense_keys: Ndense * string")
            .input("dense_defaults: Tdense")
            .output("sparse_indices: Nsparse * int64")
            .output("sparse_values: sparse_types")
            .output("sparse_shapes: Nsparse * int64")
            .output("dense_values: Tdense")
            .attr("Nsparse: int >= 0")
            .attr("Ndense: int >= 0")
            .attr("sparse_types: list(type) >= 0")
            .attr("Tdense: list(type) >= 0")
            .attr("dense_shapes: list(shape) >= 0")
            .shape(|c| {
                let serialized = &c.inputs[0];
                if serialized.rank().is_some_and(|r| r != 1) {
                    return Err(format!("serialized must be a vector, got shape {serialized}").into());
                }
                let serialized = Shape::new(vec![serialized.dims().and_then(|d| d[0])]);
                parsed_shapes(c, &serialized, list_len(c, "sparse_types"), 0)
            })
            .not_differentiable(PARSED)
            .build(),
        op("ParseSingleExample")
            .input("serialized: string")
            .input("dense_defaults: Tdense")
            .output("sparse_indices: num_sparse * int64")
            .output("sparse_values: sparse_types")
            .output("sparse_shapes: num_sparse * int64")
            .output("dense_values: Tdense")
            .attr("num_sparse: int >= 0")
            .attr("sparse_keys: list(string) >= 0")
            .attr("dense_keys: list(string) >= 0")
            .attr("sparse_types: list(type) >= 0")
            .attr("Tdense: list(type) >= 0")
            .attr("dense_shapes: list(shape) >= 0")
            .shape(|c| {
                if c.inputs[0].rank().is_some_and(|r| r != 0) {
                    return Err(format!("serialized must be a scalar, got shape {}", c.inputs[0]).into());
                }
                parsed_shapes(c, &Shape::scalar(), list_len(c, "sparse_types"), 0)
            })
            .not_differentiable(PARSED)
            .build(),
    ]
}

/// The length of a `list(type)` attr (0 when absent).
fn list_len(c: &InferCtx, name: &str) -> usize {
    match c.def.attr(c.attrs, name).and_then(|v| v.value.as_ref()) {
        Some(Value::List(l)) => l.r#type.len(),
        _ => 0,
    }
}

/// `serialized` checked to be a scalar or a vector.
fn at_most_vector(s: &Shape) -> Result<Shape, ShapeError> {
    match s.rank() {
        Some(r) if r > 1 => Err(format!("serialized must be a scalar or a vector, got shape {s}").into()),
        _ => Ok(s.clone()),
    }
}

/// The outputs of a parse of `serialized` (a scalar or a vector; unknown rank is unknown
/// shapes): sparse indices `[?, rank + 1]`, values `[?]`, dense shapes `[rank + 1]`; dense
/// values `serialized`'s shape then the feature's (`?` for a variable-length one's first
/// dimension); ragged values `[?]` and row splits `[batch + 1]`.
fn parsed_shapes(c: &InferCtx, serialized: &Shape, sparse: usize, ragged: usize) -> Result<Vec<Shape>, ShapeError> {
    let dense = c.shapes("dense_shapes");
    if 3 * sparse + dense.len() + 2 * ragged != c.num_outputs {
        let n = c.num_outputs;
        let d = dense.len();
        return Err(
            format!("{n} outputs, but {sparse} sparse, {d} dense (dense_shapes) and {ragged} ragged features").into()
        );
    }
    let batch = serialized.dims();
    let rank = serialized.rank();
    let mut out = Vec::with_capacity(c.num_outputs);
    out.extend((0..sparse).map(|_| Shape::new(vec![None, rank.map(|r| r + 1)])));
    out.extend((0..sparse).map(|_| Shape::new(vec![None])));
    out.extend((0..sparse).map(|_| Shape::new(vec![rank.map(|r| r + 1)])));
    for d in &dense {
        out.push(match (batch, d.dims()) {
            (Some(b), Some(f)) => Shape::new(b.iter().chain(f).copied().collect()),
            _ => Shape::unknown(),
        });
    }
    out.extend((0..ragged).map(|_| Shape::new(vec![None])));
    let splits = match batch {
        Some([b]) => Shape::new(vec![b.map(|b| b + 1)]),
        _ => Shape::new(vec![None]),
    };
    out.extend((0..ragged).map(|_| splits.clone()));
    Ok(out)
}
