//! The TensorFlow-1-style builder: a [`Scope`] owns a graph under construction; typed op
//! functions add nodes and return their outputs.
use std::cell::RefCell;
use std::rc::Rc;

use ferroflow_graph::{AttrError, Attrs, Graph, GraphError, NodeId, NodeSpec, Output};
use ferroflow_proto::{attr, convert};
use ferroflow_tensor::{DType, Shape, Tensor, TensorError};

use crate::surface::{Applied, Arg, Input, OpCall, OpTarget, RawOps};
use crate::{ArgDTypes, OpRegistry};

/// An error while building a graph.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The graph rejected the node.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A constant could not be built.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// The branches of a `cond` do not match.
    #[error("cond: {0}")]
    Cond(String),
    /// A call's inputs do not fit its op's signature.
    #[error("{op}: {source}")]
    Signature {
        /// The op.
        op: String,
        /// What does not fit.
        source: AttrError,
    },
    /// An op gave another number of outputs than its signature has.
    #[error("{op}: gave {got} outputs, where its signature has one")]
    Outputs {
        /// The op.
        op: String,
        /// How many it gave.
        got: usize,
    },
}

type Result<T> = std::result::Result<T, BuildError>;

/// A place to add ops: the shared graph plus a name scope and a device.
///
/// A `Scope` and its clones share the graph through an `Rc<RefCell<_>>`, so it is `!Send`:
/// a graph is built on one thread (as TensorFlow's Python graph building is). Hand the
/// finished [`ferroflow_graph::Graph`] (which is `Send + Sync`) to a `Session` used from any
/// number of threads.
///
/// ```
/// use ferroflow_ops::{Ops, RawOps, Scope};
/// let s = Scope::new();
/// let a = s.scalar(1.0f32).unwrap();
/// let b = s.scalar(2.0f32).unwrap();
/// let c = s.add_v2(a, b).unwrap();
/// assert_eq!(s.graph().node(c.node).name, "add");
/// ```
#[derive(Clone)]
pub struct Scope {
    graph: Rc<RefCell<Graph>>,
    prefix: String,
    op_name: Option<String>,
    device: String,
    /// Inside a `cond` branch: the branch's pivot, a control input of every op the branch
    /// adds without data inputs (so constants in an untaken branch are dead too).
    pivot: Option<NodeId>,
    /// The next op takes `op_name` as is unless a node already has it (see
    /// [`Scope::with_exact_name`]).
    exact: bool,
}

impl Default for Scope {
    fn default() -> Self {
        Self::new()
    }
}

impl Scope {
    /// A scope over a new, empty graph.
    pub fn new() -> Scope {
        Scope {
            graph: Rc::new(RefCell::new(Graph::new())),
            prefix: String::new(),
            op_name: None,
            device: String::new(),
            pivot: None,
            exact: false,
        }
    }

    /// A scope that adds to an existing graph (e.g. one imported from a GraphDef).
    pub fn from_graph(graph: Graph) -> Scope {
        Scope {
            graph: Rc::new(RefCell::new(graph)),
            prefix: String::new(),
            op_name: None,
            device: String::new(),
            pivot: None,
            exact: false,
        }
    }

    /// A child scope whose nodes are named `name/...` (made unique like TensorFlow's scopes).
    pub fn name_scope(&self, name: &str) -> Scope {
        let unique = self.graph.borrow_mut().unique_name(&format!("{}{name}", self.prefix));
        Scope { prefix: format!("{unique}/"), op_name: None, exact: false, ..self.clone() }
    }

    /// A scope whose nodes are named `name/...` for a full `name` used as is (TensorFlow's
    /// `name_scope("name/")`): re-enters an existing scope or puts children under a node of
    /// that name, e.g. a variable's initializer under `layer/kernel/`.
    pub fn reenter(&self, name: &str) -> Scope {
        Scope { prefix: format!("{}/", name.trim_end_matches('/')), op_name: None, exact: false, ..self.clone() }
    }

    /// The prefix new nodes get (`""` at the root, else `a/b/`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A scope whose next op gets this name (instead of the op's default name).
    pub fn with_name(&self, name: &str) -> Scope {
        Scope { op_name: Some(name.to_string()), exact: false, ..self.clone() }
    }

    /// A scope whose next op is named `name` even if a name scope of that name exists
    /// (uniquified only if a *node* has it): TensorFlow names an op after the scope its
    /// parts live in, e.g. an optimizer's train op `Adam` next to `Adam/update_...`.
    pub fn with_exact_name(&self, name: &str) -> Scope {
        Scope { op_name: Some(name.to_string()), exact: true, ..self.clone() }
    }

    /// A scope whose ops request `device` (a TensorFlow device name).
    pub fn with_device(&self, device: &str) -> Scope {
        Scope { device: device.to_string(), ..self.clone() }
    }

    /// A copy of the graph built so far.
    pub fn graph(&self) -> Graph {
        self.graph.borrow().clone()
    }

    /// Runs `f` with the graph being built (read-only).
    pub fn with_graph<R>(&self, f: impl FnOnce(&Graph) -> R) -> R {
        f(&self.graph.borrow())
    }

    /// Adds `f` to the graph's function library (for `If`/`While` branches and calls); a
    /// function of the same name is replaced.
    pub fn add_function(&self, f: ferroflow_proto::FunctionDef) {
        let mut g = self.graph.borrow_mut();
        let name = f.signature.as_ref().map(|s| s.name.clone()).unwrap_or_default();
        g.library.function.retain(|old| old.signature.as_ref().is_none_or(|s| s.name != name));
        g.library.function.push(f);
    }

    /// Makes node `to` replace node `from` for `from`'s consumers, its first `outputs` outputs
    /// standing for `from`'s (see [`Graph::reroute`]). Returns how many edges moved.
    pub fn reroute(&self, from: NodeId, to: NodeId, outputs: usize) -> usize {
        self.graph.borrow_mut().reroute(from, to, outputs)
    }

    /// The names of the functions in this scope's graph's library.
    pub fn function_names(&self) -> Vec<String> {
        let g = self.graph.borrow();
        g.library.function.iter().filter_map(|f| f.signature.as_ref().map(|s| s.name.clone())).collect()
    }

    /// The dtype of an output in this scope's graph.
    pub fn dtype(&self, o: Output) -> DType {
        self.graph.borrow().output_type(o)
    }

    /// Adds a node of any registered op. `default_name` is used unless the scope was given
    /// a name with [`Scope::with_name`]; either way the name is made unique.
    pub fn add_op(
        &self,
        op: &str,
        default_name: &str,
        inputs: &[Output],
        control: &[NodeId],
        attrs: Attrs,
    ) -> Result<NodeId> {
        let mut g = self.graph.borrow_mut();
        let base = format!("{}{}", self.prefix, self.op_name.as_deref().unwrap_or(default_name));
        let name = if self.exact && g.find(&base).is_none() { base } else { g.unique_name(&base) };
        let mut control_inputs = control.to_vec();
        if let (Some(p), true) = (self.pivot, inputs.is_empty()) {
            if !control_inputs.contains(&p) {
                control_inputs.push(p);
            }
        }
        let spec = NodeSpec {
            name,
            op: op.to_string(),
            inputs: inputs.to_vec(),
            control_inputs,
            attrs,
            device: self.device.clone(),
        };
        Ok(g.add_node(spec, OpRegistry::global())?)
    }

    /// A placeholder to be fed at run time.
    pub fn placeholder(&self, dtype: DType, shape: &Shape) -> Result<Output> {
        let mut a = Attrs::new();
        a.insert("dtype".into(), attr::dtype(dtype));
        a.insert("shape".into(), attr::shape(shape));
        Ok(Output { node: self.add_op("Placeholder", "Placeholder", &[], &[], a)?, index: 0 })
    }

    /// A `NoOp` that runs after `deps` (a grouping target).
    pub fn group(&self, deps: &[NodeId]) -> Result<NodeId> {
        self.add_op("NoOp", "NoOp", &[], deps, Attrs::new())
    }

    /// TensorFlow 1's `tf.cond` (Switch/Merge): `true_fn` and `false_fn` each get `inputs`
    /// switched on `pred` and return their results (same count and dtypes); the merged
    /// results are returned. Only the taken branch runs; the other's values are dead.
    /// Nodes are named like TensorFlow's (`cond/Switch_1`, `cond/switch_t`, `cond/Merge`).
    pub fn cond<E: From<BuildError>>(
        &self,
        pred: Output,
        inputs: &[Output],
        true_fn: impl FnOnce(&Scope, &[Output]) -> std::result::Result<Vec<Output>, E>,
        false_fn: impl FnOnce(&Scope, &[Output]) -> std::result::Result<Vec<Output>, E>,
    ) -> std::result::Result<Vec<Output>, E> {
        let s = self.name_scope_free().name_scope("cond");
        let switched = |x: Output| -> Result<(Output, Output)> {
            let out = s.switch(x, pred)?;
            Ok((out[0], out[1]))
        };
        let (pf, pt) = switched(pred)?;
        let pivot_t = s.with_name("switch_t").identity(pt)?;
        let pivot_f = s.with_name("switch_f").identity(pf)?;
        let mut ins_t = Vec::with_capacity(inputs.len());
        let mut ins_f = Vec::with_capacity(inputs.len());
        for &x in inputs {
            let (f, t) = switched(x)?;
            ins_f.push(f);
            ins_t.push(t);
        }
        let branch = |pivot: Output| Scope { pivot: Some(pivot.node), ..s.clone() };
        let out_t = true_fn(&branch(pivot_t), &ins_t)?;
        let out_f = false_fn(&branch(pivot_f), &ins_f)?;
        if out_t.len() != out_f.len() {
            return Err(E::from(BuildError::Cond(format!(
                "true branch returns {} tensors, false branch {}",
                out_t.len(),
                out_f.len()
            ))));
        }
        let mut merged = Vec::with_capacity(out_t.len());
        for (t, f) in out_t.into_iter().zip(out_f) {
            if s.dtype(t) != s.dtype(f) {
                return Err(E::from(BuildError::Cond(format!(
                    "branches return {} and {} for the same result",
                    s.dtype(t),
                    s.dtype(f)
                ))));
            }
            merged.push(s.merge(&[f, t])?[0]);
        }
        Ok(merged)
    }

    /// The same scope without a pending op name (for helper constants).
    fn name_scope_free(&self) -> Scope {
        Scope { op_name: None, ..self.clone() }
    }
}

impl Input<Scope> for Output {
    fn into_input(self, _: &Scope) -> Result<Output> {
        Ok(self)
    }
}

impl Input<Scope> for &Output {
    fn into_input(self, _: &Scope) -> Result<Output> {
        Ok(*self)
    }
}

impl Input<Scope> for &Tensor {
    fn into_input(self, s: &Scope) -> Result<Output> {
        s.constant_input(self)
    }
}

impl OpTarget for Scope {
    type Tensor = Output;
    type Node = NodeId;
    type Error = BuildError;

    fn apply(&self, call: OpCall<'_, Output>) -> Result<Applied<Output, NodeId>> {
        let mut inputs = Vec::new();
        let mut args = Vec::with_capacity(call.inputs.len());
        for a in call.inputs {
            match a {
                Arg::One(o) => {
                    args.push(ArgDTypes::One(self.dtype(o)));
                    inputs.push(o);
                }
                Arg::List(os) => {
                    args.push(ArgDTypes::List(os.iter().map(|o| self.dtype(*o)).collect()));
                    inputs.extend(os);
                }
            }
        }
        let mut attrs: Attrs = call.attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        if let Some(def) = OpRegistry::global().get(call.op) {
            def.infer_type_attrs(&args, &mut attrs)
                .map_err(|source| BuildError::Signature { op: call.op.to_string(), source })?;
        }
        let node = self.add_op(call.op, call.name, &inputs, &[], attrs)?;
        let n = self.graph.borrow().node(node).num_outputs();
        Ok(Applied { outputs: (0..n).map(|index| Output { node, index }).collect(), node })
    }

    /// A `Const` node (named as the scope says).
    fn constant(&self, value: &Tensor) -> Result<Output> {
        let mut a = Attrs::new();
        a.insert("dtype".into(), attr::dtype(value.dtype()));
        a.insert("value".into(), attr::tensor(convert::tensor_to_proto(value)));
        Ok(Output { node: self.add_op("Const", "Const", &[], &[], a)?, index: 0 })
    }

    /// A `Const` node for a Rust value given as an op's input: named `Const`, not after the
    /// op the scope names.
    fn constant_input(&self, value: &Tensor) -> Result<Output> {
        self.name_scope_free().constant(value)
    }

    fn output_count_error(&self, op: &str, got: usize) -> BuildError {
        BuildError::Outputs { op: op.to_string(), got }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ops;

    #[test]
    fn what_runs_gets_tensorflows_names() {
        let s = Scope::new();
        let a = s.scalar(1.0f32).unwrap();
        let b = s.scalar(2.0f32).unwrap();
        let c = s.add_v2(a, b).unwrap();
        let d = s.add_v2(a, b).unwrap();
        let out = s.mul(c, d).unwrap();
        let g = s.graph();
        let names: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["Const", "Const_1", "add", "add_1", "mul"]);
        assert_eq!(g.node(out.node).op, "Mul");
        let layer = s.name_scope("dense");
        let r = layer.with_name("act").relu(out).unwrap();
        assert_eq!(s.graph().node(r.node).name, "dense/act");
    }

    #[test]
    fn type_errors_name_the_node() {
        let s = Scope::new();
        let a = s.scalar(1.0f32).unwrap();
        let b = s.scalar(2i32).unwrap();
        let e = s.with_name("bad").add_v2(a, b).unwrap_err().to_string();
        assert!(e.contains("node 'bad'") && e.contains("int32"), "{e}");
    }
}
