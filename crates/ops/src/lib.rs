//! Op definitions for ferroflow: one registry where each op is defined once — signature,
//! attrs with defaults, shape inference, gradient, and its facts (side effects, control-flow
//! role, fusion, algebra) — by family in [`defs`], and the TensorFlow-1-style graph builder
//! [`Scope`].
#![warn(missing_docs)]

pub mod defs;
pub mod facts;
pub mod functions;
pub mod gradient;
pub mod ref_vars;
#[rustfmt::skip]
mod generated;
mod registry;
mod scope;
pub mod shape_inference;
pub mod surface;

pub use facts::{
    BinaryFn, CallKind, ControlFlow, Elementwise, Execution, Gradient, Involution, Neutral, OpFacts, Side, Transfer,
    UnaryFn,
};
pub use gradient::{GradCtx, GradError, GradFn};
pub use registry::{
    op, tensorflow_has_op, tensorflow_op_names, ArgDTypes, ArgDef, ArgType, AttrDef, OpBuilder, OpDef, OpRegistry,
};
pub use scope::{BuildError, Scope};
pub use shape_inference::{infer_node, infer_shapes, InferCtx, Known, ShapeFn, ShapeTracker};
pub use surface::{attrs, Applied, Arg, Input, OpCall, OpTarget, Ops, RawOps};

use ferroflow_graph::{AttrError, Attrs, Graph, GraphError, NodeTypes, OpSignatures};
use ferroflow_proto::{attr_value, FunctionDef, FunctionDefLibrary, GraphDef};
use ferroflow_tensor::DType;

/// Imports a GraphDef against the global op registry and the GraphDef's own function
/// library, validating it (see [`Graph::from_graph_def`]) and running shape inference.
/// TensorFlow 1 ref variables (`VariableV2`, `Assign`, `ApplyAdam`, ...) are rewritten into
/// resource variables first ([`ref_vars::lower_ref_variables`]).
pub fn import_graph_def(def: &GraphDef) -> Result<Graph, GraphError> {
    if ref_vars::has_ref_variables(def) {
        return import_graph_def(&ref_vars::lower_ref_variables(def)?);
    }
    let library = def.library.clone().unwrap_or_default();
    let g = Graph::from_graph_def(def, &LibraryOps { library: &library })?;
    infer_shapes(&g)?;
    Ok(g)
}

/// Op signatures from the registry, plus the functions of a library (a node whose op is a
/// function name calls that function).
pub struct LibraryOps<'a> {
    /// The function library.
    pub library: &'a FunctionDefLibrary,
}

impl<'a> LibraryOps<'a> {
    /// The function named `name`.
    pub fn function(&self, name: &str) -> Option<&'a FunctionDef> {
        self.library.function.iter().find(|f| f.signature.as_ref().is_some_and(|s| s.name == name))
    }
}

/// The dtypes of a function's arguments, from fixed types or the call's type attrs.
pub fn function_types(f: &FunctionDef, attrs: &Attrs) -> Result<NodeTypes, AttrError> {
    let sig = f.signature.clone().unwrap_or_default();
    let resolve = |args: &[ferroflow_proto::op_def::ArgDef]| -> Result<Vec<DType>, AttrError> {
        args.iter()
            .map(|a| {
                if a.r#type != 0 {
                    return DType::from_tf(a.r#type).map_err(|e| format!("argument '{}': {e}", a.name).into());
                }
                match attrs.get(&a.type_attr).and_then(|v| v.value.as_ref()) {
                    Some(attr_value::Value::Type(t)) => {
                        DType::from_tf(*t).map_err(|e| format!("argument '{}': {e}", a.name).into())
                    }
                    _ => Err(format!("argument '{}' of function '{}' has no concrete type", a.name, sig.name).into()),
                }
            })
            .collect()
    };
    Ok(NodeTypes { inputs: resolve(&sig.input_arg)?, outputs: resolve(&sig.output_arg)? })
}

impl OpSignatures for LibraryOps<'_> {
    fn resolve(&self, op: &str, attrs: &Attrs) -> Result<Option<NodeTypes>, AttrError> {
        if let Some(t) = OpRegistry::global().resolve(op, attrs)? {
            return Ok(Some(t));
        }
        match self.function(op) {
            Some(f) => function_types(f, attrs).map(Some),
            None => Ok(None),
        }
    }

    fn unknown_op_hint(&self, op: &str) -> ferroflow_graph::UnknownOpHint {
        OpRegistry::global().unknown_op_hint(op)
    }
}
