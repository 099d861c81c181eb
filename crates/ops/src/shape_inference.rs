//! Graph-time shape inference: each op's shape function (declared with the op in
//! [`crate::defs`]), run over a graph in topological order. Besides shapes, inference carries
//! what it knows of some values ([`Known`]): small constants, tensors that hold a shape
//! (`Shape(x)`), and the shapes of variables behind resource handles; each op says what it
//! knows of its output through its [`KnownFn`].
use ferroflow_graph::{Attrs, Graph, GraphError, ShapeError};
use ferroflow_proto::{attr, attr_value};
use ferroflow_tensor::{DType, Shape, Tensor};

use crate::{OpDef, OpRegistry};

/// Computes an op's output shapes from its input shapes (and what is known of their values).
pub type ShapeFn = fn(&InferCtx) -> Result<Vec<Shape>, ShapeError>;

/// What an op's shape inference can tell about the value of its output 0.
pub type KnownFn = fn(&InferCtx) -> Option<Known>;

/// What inference knows of a tensor's value.
#[derive(Clone, Debug)]
pub enum Known {
    /// The value itself (a small constant).
    Value(Tensor),
    /// A 1-D integer tensor that holds this (partially known) shape, as `Shape(x)` does (and
    /// `Pack`/`ConcatV2` of dimensions and shapes, and `StridedSlice` of a shape).
    Shape(Shape),
    /// An integer scalar that is one dimension of a shape, known or not (`StridedSlice` of
    /// `Shape(x)` with its axis shrunk: Keras's `tf.shape(x)[0]`).
    Dim(Option<usize>),
    /// A resource handle to a variable of this shape (TensorFlow's "handle data").
    Handle(Shape),
}

/// What a shape function sees of a node.
pub struct InferCtx<'a> {
    /// The op definition.
    pub def: &'a OpDef,
    /// The node's attrs.
    pub attrs: &'a Attrs,
    /// Shapes of the data inputs.
    pub inputs: &'a [Shape],
    /// What is known of the data inputs' values.
    pub known: &'a [Option<Known>],
    /// Number of outputs.
    pub num_outputs: usize,
}

impl InferCtx<'_> {
    fn value(&self, name: &str) -> Option<&attr_value::Value> {
        self.def.attr(self.attrs, name).and_then(|v| v.value.as_ref())
    }
    /// A `list(shape)` attr (empty when absent).
    pub fn shapes(&self, name: &str) -> Vec<Shape> {
        match self.value(name) {
            Some(attr_value::Value::List(l)) => {
                l.shape.iter().map(ferroflow_proto::convert::shape_from_proto).collect()
            }
            _ => Vec::new(),
        }
    }
    /// An int attr (or its default).
    pub fn int(&self, name: &str) -> Option<i64> {
        self.value(name).and_then(attr::int_of)
    }
    /// A bool attr (or its default); false when absent.
    pub fn bool(&self, name: &str) -> bool {
        self.value(name).and_then(attr::bool_of).unwrap_or(false)
    }
    /// A `list(int)` attr (or its default); empty when absent.
    pub fn ints(&self, name: &str) -> Vec<i64> {
        self.value(name).and_then(attr::ints_of).map(<[i64]>::to_vec).unwrap_or_default()
    }
    /// A string attr (or its default); empty when absent.
    pub fn string(&self, name: &str) -> String {
        self.value(name).and_then(attr::string_of).unwrap_or_default()
    }
    /// The value of input `i`, when it is a known constant.
    pub fn constant(&self, i: usize) -> Option<&Tensor> {
        match self.known.get(i)? {
            Some(Known::Value(t)) => Some(t),
            _ => None,
        }
    }
    /// A constant input's values as i64.
    pub fn const_ints(&self, i: usize) -> Option<Vec<i64>> {
        int_values(self.constant(i)?)
    }
    /// Input `i` read as a shape (a constant vector of sizes, `-1` for unknown ones, or the
    /// output of `Shape`); unknown otherwise.
    pub fn shape_value(&self, i: usize) -> Shape {
        match self.known.get(i) {
            Some(Some(Known::Value(t))) => match int_values(t) {
                Some(v) if t.rank() == 1 => Shape::new(v.iter().map(|&d| usize::try_from(d).ok()).collect()),
                _ => Shape::unknown(),
            },
            Some(Some(Known::Shape(s))) => s.clone(),
            _ => Shape::unknown(),
        }
    }
    /// Input `i` read as one dimension: a known scalar, a [`Known::Dim`], or unknown (`None`);
    /// negative values are unknown.
    pub fn dim_value(&self, i: usize) -> Option<usize> {
        match self.known.get(i)? {
            Some(Known::Value(t)) if t.rank() == 0 => int_values(t)?.first().and_then(|&d| usize::try_from(d).ok()),
            Some(Known::Dim(d)) => *d,
            _ => None,
        }
    }
    /// The shape of the variable behind resource input `i`, when known.
    pub fn handle_shape(&self, i: usize) -> Option<&Shape> {
        match self.known.get(i)? {
            Some(Known::Handle(s)) => Some(s),
            _ => None,
        }
    }
}

/// An integer tensor's values.
pub(crate) fn int_values(t: &Tensor) -> Option<Vec<i64>> {
    match t.dtype() {
        DType::Int32 => Some(t.as_slice::<i32>().ok()?.iter().map(|&v| v as i64).collect()),
        DType::Int64 => Some(t.as_slice::<i64>().ok()?.to_vec()),
        _ => None,
    }
}

/// An axis in `[-rank, rank)` as an index.
pub(crate) fn norm_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    if axis < -r || axis >= r.max(1) {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}

/// Every output of unknown shape.
pub fn unknown(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    Ok(vec![Shape::unknown(); c.num_outputs])
}

/// The output has the shape of input 0.
pub fn unchanged(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    Ok(vec![c.inputs[0].clone()])
}

/// Every output has the shape of the matching input.
pub fn pass_through(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    Ok(c.inputs.to_vec())
}

/// The NumPy broadcast of inputs 0 and 1.
pub fn broadcast(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let s = c.inputs[0]
        .broadcast(&c.inputs[1])
        .ok_or_else(|| format!("shapes {} and {} are incompatible for broadcasting", c.inputs[0], c.inputs[1]))?;
    Ok(vec![s])
}

/// The NumPy broadcast of all inputs.
pub fn broadcast_all(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    let mut s = Shape::scalar();
    for i in c.inputs {
        s = s.broadcast(i).ok_or_else(|| format!("shapes {s} and {i} are incompatible for broadcasting"))?;
    }
    Ok(vec![s])
}

/// The shape held by input 0 (random ops, `AvgPoolGrad`'s `orig_input_shape`).
pub fn shape_of_input0_value(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    Ok(vec![c.shape_value(0)])
}

/// A scalar output.
pub fn scalar(_: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    Ok(vec![Shape::scalar()])
}

/// Nothing.
pub fn no_outputs(_: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    Ok(vec![])
}

/// The shape in the `shape` attr.
pub fn shape_attr(c: &InferCtx) -> Result<Vec<Shape>, ShapeError> {
    match c.value("shape") {
        Some(attr_value::Value::Shape(s)) => Ok(vec![ferroflow_proto::convert::shape_from_proto(s)]),
        _ => Ok(vec![Shape::unknown()]),
    }
}

/// Infers the output shapes of every node of `graph`; errors name the node.
pub fn infer_shapes(graph: &Graph) -> Result<Vec<Vec<Shape>>, GraphError> {
    let mut t = ShapeTracker::default();
    for id in graph.topological_order()? {
        t.infer(graph, id)?;
    }
    Ok(t.shapes)
}

/// Shapes of a graph that is still growing, inferred once per node: a builder that asks for
/// the shape of what it just added (a Keras model's layers, one after another) pays for the
/// new nodes only, where [`infer_shapes`] walks the whole graph each time.
#[derive(Default)]
pub struct ShapeTracker {
    shapes: Vec<Vec<Shape>>,
    known: Vec<Option<Known>>,
    done: Vec<bool>,
}

impl ShapeTracker {
    /// The shape of `o`, inferring every node added since the last call (a node's inputs are
    /// added before it, so node order is a topological order of the new nodes).
    pub fn shape(&mut self, graph: &Graph, o: ferroflow_graph::Output) -> Result<Shape, GraphError> {
        for id in self.done.len()..graph.len() {
            self.infer(graph, id)?;
        }
        Ok(self.shapes.get(o.node).and_then(|s| s.get(o.index)).cloned().unwrap_or_else(Shape::unknown))
    }

    fn infer(&mut self, graph: &Graph, id: usize) -> Result<(), GraphError> {
        if self.shapes.len() < graph.len() {
            self.shapes.resize(graph.len(), Vec::new());
            self.known.resize(graph.len(), None);
            self.done.resize(graph.len(), false);
        }
        let node = graph.node(id);
        self.done[id] = true;
        let Some(def) = OpRegistry::global().get(&node.op) else {
            self.shapes[id] = vec![Shape::unknown(); node.num_outputs()];
            return Ok(());
        };
        let inputs: Vec<Shape> = node
            .inputs
            .iter()
            .map(|o| self.shapes[o.node].get(o.index).cloned().unwrap_or_else(Shape::unknown))
            .collect();
        let vals: Vec<Option<Known>> =
            node.inputs.iter().map(|o| if o.index == 0 { self.known[o.node].clone() } else { None }).collect();
        let ctx = InferCtx { def, attrs: &node.attrs, inputs: &inputs, known: &vals, num_outputs: node.num_outputs() };
        self.shapes[id] = (def.shape_fn)(&ctx).map_err(|source| GraphError::Shape {
            node: node.name.clone(),
            op: node.op.clone(),
            source,
        })?;
        self.known[id] = def.known_fn.and_then(|f| f(&ctx));
        Ok(())
    }
}

/// The output shapes of one op from its inputs' shapes and known values (what constant
/// folding asks before it runs a kernel whose output could be large).
pub fn infer_node(
    def: &OpDef,
    attrs: &Attrs,
    inputs: &[Shape],
    known: &[Option<Known>],
) -> Result<Vec<Shape>, ShapeError> {
    let num_outputs = def.resolve_types(attrs)?.outputs.len();
    (def.shape_fn)(&InferCtx { def, attrs, inputs, known, num_outputs })
}
