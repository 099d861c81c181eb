//! Graphs built node by node from Python (`ferroflow.raw_ops`, `compat.v1`) and the op
//! registry they are built from.
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ferroflow::graph::{Attrs, Output};
use ferroflow::ops::{ArgDTypes, ArgType, OpRegistry, Scope, ShapeTracker};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::convert::{attr_to_py, attr_value, dtype_name};
use crate::errors::{invalid, to_py, NotFoundError, UnimplementedError};

/// Every registered op's signature, by op name: `{"inputs": [(name, is_list)], "outputs":
/// [(name, is_list)], "attrs": [(name, type, default or None, has_default)], "stateful": bool}`.
/// `ferroflow.raw_ops` makes one function per op from it.
#[pyfunction]
pub fn op_defs(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for def in OpRegistry::global().defs() {
        let args = |v: &[ferroflow::ops::ArgDef]| -> PyResult<Bound<'_, PyList>> {
            PyList::new(
                py,
                v.iter().map(|a| (a.name.clone(), matches!(a.ty, ArgType::Number { .. } | ArgType::TypeList(_)))),
            )
        };
        let attrs = PyList::empty(py);
        for a in &def.attrs {
            let default = match &a.default {
                Some(d) => attr_to_py(py, d)?,
                None => py.None().into_bound(py),
            };
            attrs.append((a.name.clone(), a.ty.clone(), default, a.default.is_some()))?;
        }
        let d = PyDict::new(py);
        d.set_item("inputs", args(&def.inputs)?)?;
        d.set_item("outputs", args(&def.outputs)?)?;
        d.set_item("attrs", attrs)?;
        d.set_item("stateful", def.facts.stateful)?;
        out.set_item(&def.name, d)?;
    }
    Ok(out)
}

/// A graph's scopes (the root, then each name scope entered) and its shape cache, behind the
/// graph's mutex.
struct Inner {
    scopes: Vec<Scope>,
    shapes: ShapeTracker,
}

// SAFETY: a `Scope` holds an `Rc<RefCell<..>>` to the graph. Every `Scope` sharing that `Rc`
// lives in this `Inner` and is reached only while its mutex is held; clones made inside a
// method (`with_name`) are dropped before the lock is released. So the reference count and
// the `RefCell` are only ever touched by the one thread holding the lock.
unsafe impl Send for Inner {}

/// A graph under construction (`tf.Graph`): nodes are added by op name with TensorFlow's
/// argument and attr names; type attrs (`T`, `N`, …) are inferred from the inputs where not
/// given. Usable from any thread (one at a time: a mutex); a name scope is a view sharing
/// the graph.
#[pyclass(frozen, module = "ferroflow._native")]
pub struct Graph {
    inner: Arc<Mutex<Inner>>,
    scope: usize,
}

impl Graph {
    fn of(scope: Scope) -> Graph {
        Graph { inner: Arc::new(Mutex::new(Inner { scopes: vec![scope], shapes: ShapeTracker::default() })), scope: 0 }
    }

    /// Runs `f` on this view's scope (and the shape cache) under the graph's lock.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&Scope, &mut ShapeTracker) -> R) -> R {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Inner { scopes, shapes } = &mut *inner;
        f(&scopes[self.scope], shapes)
    }

    /// A copy of the graph as it is now.
    pub(crate) fn snapshot(&self) -> ferroflow::graph::Graph {
        self.with(|s, _| s.graph())
    }

    /// Replaces the whole graph (an import into it); name-scope views made before start over
    /// at the top.
    pub(crate) fn replace(&self, graph: ferroflow::graph::Graph) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let root = Scope::from_graph(graph);
        let n = inner.scopes.len();
        inner.scopes = vec![root.clone(); n];
        inner.shapes = ShapeTracker::default();
    }

    fn output(scope: &Scope, name: &str) -> PyResult<Output> {
        scope.with_graph(|g| g.output_by_name(name)).map_err(|e| NotFoundError::new_err(e.to_string()))
    }
}

#[pymethods]
impl Graph {
    /// An empty graph.
    #[new]
    fn new() -> Graph {
        Graph::of(Scope::new())
    }

    /// A graph read from a file: a GraphDef (`.pb`, `.pbtxt`) or a meta graph (`.meta`).
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Graph> {
        let is_meta = path.extension().is_some_and(|e| e == "meta");
        let graph = if is_meta {
            ferroflow::train::meta_graph::import_meta_graph_file(&path, None, "").map_err(to_py)?.graph
        } else {
            ferroflow::load_graph(&path).map_err(to_py)?
        };
        Ok(Graph::of(Scope::from_graph(graph)))
    }

    /// A graph from a serialized GraphDef.
    #[staticmethod]
    fn from_graph_def(bytes: &[u8]) -> PyResult<Graph> {
        let def: ferroflow::proto::GraphDef = ferroflow::proto::decode(bytes, "GraphDef").map_err(to_py)?;
        let graph = ferroflow::ops::import_graph_def(&def).map_err(to_py)?;
        Ok(Graph::of(Scope::from_graph(graph)))
    }

    /// Adds a node of op `op_type`: `inputs` one entry per input argument of the op (a tensor
    /// name, or a list of them for a list argument), `attrs` by name (Python values; dtypes as
    /// names), `name` the node's name (made unique as TensorFlow does; the op's default name
    /// when `None`). Returns the node's name and its outputs as `(tensor name, dtype)`.
    #[pyo3(signature = (op_type, inputs, attrs, name=None, control_inputs=Vec::new()))]
    fn add_op(
        &self,
        op_type: &str,
        inputs: Vec<Bound<'_, PyAny>>,
        attrs: &Bound<'_, PyDict>,
        name: Option<&str>,
        control_inputs: Vec<String>,
    ) -> PyResult<(String, Vec<(String, &'static str)>)> {
        let def = OpRegistry::global()
            .get(op_type)
            .ok_or_else(|| UnimplementedError::new_err(format!("no op named '{op_type}' is registered")))?;
        if inputs.len() != def.inputs.len() {
            return Err(invalid(format!(
                "{op_type} takes {} inputs ({}), got {}",
                def.inputs.len(),
                def.inputs.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", "),
                inputs.len()
            )));
        }
        self.with(|scope, _| {
            let mut flat = Vec::new();
            let mut types = Vec::new();
            for (arg, v) in def.inputs.iter().zip(&inputs) {
                let list = matches!(arg.ty, ArgType::Number { .. } | ArgType::TypeList(_));
                if list {
                    let names: Vec<String> = v
                        .extract()
                        .map_err(|_| invalid(format!("{op_type}'s input '{}' takes a list of tensors", arg.name)))?;
                    let mut ds = Vec::new();
                    for n in names {
                        let o = Graph::output(scope, &n)?;
                        ds.push(scope.dtype(o));
                        flat.push(o);
                    }
                    types.push(ArgDTypes::List(ds));
                } else {
                    let n: String = v
                        .extract()
                        .map_err(|_| invalid(format!("{op_type}'s input '{}' takes one tensor", arg.name)))?;
                    let o = Graph::output(scope, &n)?;
                    types.push(ArgDTypes::One(scope.dtype(o)));
                    flat.push(o);
                }
            }
            let mut a = Attrs::new();
            for (k, v) in attrs.iter() {
                let k: String = k.extract()?;
                if v.is_none() {
                    continue;
                }
                let ty = def.attr_def(&k).map(|d| d.ty.clone()).unwrap_or_default();
                a.insert(k.clone(), attr_value(&ty, &v).map_err(|e| invalid(format!("{op_type} attr '{k}': {e}")))?);
            }
            def.infer_type_attrs(&types, &mut a).map_err(|e| invalid(format!("{op_type}: {e}")))?;
            let mut ctrl = Vec::new();
            for c in &control_inputs {
                let c = c.trim_start_matches('^');
                let c = c.split(':').next().unwrap_or(c);
                ctrl.push(
                    scope
                        .with_graph(|g| g.find(c))
                        .ok_or_else(|| NotFoundError::new_err(format!("no node named '{c}' for a control input")))?,
                );
            }
            let named = match name {
                Some(n) => scope.with_name(n),
                None => scope.clone(),
            };
            let default = def.default_node_name.unwrap_or(op_type);
            let id = named.add_op(op_type, default, &flat, &ctrl, a).map_err(to_py)?;
            drop(named);
            Ok(scope.with_graph(|g| {
                let n = g.node(id);
                let outs = (0..n.num_outputs())
                    .map(|i| {
                        let o = Output { node: id, index: i };
                        (g.output_name(o), dtype_name(g.output_type(o)))
                    })
                    .collect();
                (n.name.clone(), outs)
            }))
        })
    }

    /// The dtype (a name) and static shape (`None` for an unknown rank, else a list of ints
    /// and `None`s) of the tensor `name` (`node:index`).
    fn tensor_info<'py>(&self, py: Python<'py>, name: &str) -> PyResult<(&'static str, Bound<'py, PyAny>)> {
        let (dtype, shape) = self.with(|scope, shapes| -> PyResult<_> {
            let o = Graph::output(scope, name)?;
            let shape = scope.with_graph(|g| shapes.shape(g, o)).map_err(to_py)?;
            Ok((dtype_name(scope.dtype(o)), shape))
        })?;
        let shape = match shape.dims() {
            None => py.None().into_bound(py),
            Some(d) => PyList::new(py, d.iter().map(|x| x.map(|v| v as i64)))?.into_any(),
        };
        Ok((dtype, shape))
    }

    /// The outputs of node `name` as `(tensor name, dtype)`, or `NotFoundError`.
    fn node_outputs(&self, name: &str) -> PyResult<Vec<(String, &'static str)>> {
        self.with(|scope, _| {
            scope.with_graph(|g| {
                let id = g.find(name).ok_or_else(|| NotFoundError::new_err(format!("no node named '{name}'")))?;
                Ok((0..g.node(id).num_outputs())
                    .map(|i| {
                        let o = Output { node: id, index: i };
                        (g.output_name(o), dtype_name(g.output_type(o)))
                    })
                    .collect())
            })
        })
    }

    /// The op of node `name`.
    fn op_type(&self, name: &str) -> PyResult<String> {
        self.with(|scope, _| {
            scope.with_graph(|g| {
                g.find(name)
                    .map(|id| g.node(id).op.clone())
                    .ok_or_else(|| NotFoundError::new_err(format!("no node named '{name}'")))
            })
        })
    }

    /// Every node's name, in the order added.
    fn node_names(&self) -> Vec<String> {
        self.with(|scope, _| scope.with_graph(|g| g.nodes().iter().map(|n| n.name.clone()).collect()))
    }

    /// The number of nodes (what a session compares to see the graph grew).
    fn __len__(&self) -> usize {
        self.with(|scope, _| scope.with_graph(|g| g.len()))
    }

    /// The graph as a serialized TensorFlow GraphDef.
    fn as_graph_def<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let def = self.with(|scope, _| scope.with_graph(|g| g.to_graph_def()));
        PyBytes::new(py, &ferroflow::proto::encode(&def))
    }

    /// Enters a name scope: ops added through the returned graph view are named under it.
    fn name_scope(&self, name: &str) -> Graph {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let scope = inner.scopes[self.scope].name_scope(name);
        inner.scopes.push(scope);
        Graph { inner: self.inner.clone(), scope: inner.scopes.len() - 1 }
    }

    /// The current name-scope prefix (`""` at the top).
    fn prefix(&self) -> String {
        self.with(|scope, _| scope.prefix().to_string())
    }

    fn __repr__(&self) -> String {
        format!("<ferroflow Graph of {} nodes>", self.__len__())
    }
}
