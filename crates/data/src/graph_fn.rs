//! Graphs in the pipeline, both ways: a map function that is a graph run by ferroflow's
//! executor ([`GraphFunction`], TensorFlow-style graph preprocessing), and a Session graph
//! that pulls a dataset's elements through `IteratorV2` + `IteratorGetNext`
//! ([`Dataset::attach_iterator`]).
use std::hash::Hasher;

use ferroflow_tensor::hash::Fnv1a;
use std::sync::{Arc, Mutex};

use ferroflow_graph::Graph;
use ferroflow_kernels::resource::{handle_key, IteratorSource, ResourceMgr};
use ferroflow_runtime::{ExecutionPlan, Session, SessionOptions};
use prost::Message;

use crate::dataset::ElementIter;
use crate::structure::Structure;
use crate::transform::MapOptions;
use crate::{DataError, Dataset, Element, Result};

/// A graph used as a map function: the element's components are fed to `inputs` (tensor
/// names such as `path:0`, in component order) and the `outputs` become the new element. The
/// graph is optimized and planned once; every call runs the plan (concurrently from parallel
/// map workers, one thread each: the pipeline provides the parallelism).
pub struct GraphFunction {
    session: Session,
    plan: Arc<ExecutionPlan>,
    name: String,
}

impl GraphFunction {
    /// Plans `graph` from `inputs` to `outputs`. Errors name the tensor or node at fault.
    pub fn new(graph: Graph, inputs: &[&str], outputs: &[&str]) -> Result<GraphFunction> {
        let mut h = Fnv1a::default();
        h.write(&graph.to_graph_def().encode_to_vec());
        for n in inputs.iter().chain(outputs) {
            h.write(n.as_bytes());
            h.write(b";");
        }
        let name = format!("graph {:016x} ({} -> {})", h.finish(), inputs.join(", "), outputs.join(", "));
        let options = SessionOptions::default().with_inter_op_threads(1).with_intra_op_threads(1);
        let session = Session::new(graph, options).map_err(|e| DataError::pipeline("map graph", e))?;
        let plan = session.plan(inputs, outputs, &[]).map_err(|e| DataError::pipeline("map graph", e))?;
        Ok(GraphFunction { session, plan, name })
    }

    /// Runs the graph on one element's components.
    pub fn call(&self, components: Element) -> Result<Element> {
        Ok(self.session.run_plan(&self.plan, &components)?)
    }
}

impl<T: Structure> Dataset<T> {
    /// `f` (a graph) applied to every element, run as `options` says (parallel workers each
    /// run the plan); the name in the pipeline's fingerprint is the graph's hash.
    pub fn map_graph<U: Structure>(&self, f: GraphFunction, options: &MapOptions) -> Dataset<U> {
        let name = options.name.clone().unwrap_or_else(|| f.name.clone());
        let f = Arc::new(f);
        self.map_elements(options, Arc::new(move |e: Element| f.call(e)), name)
    }

    /// Attaches a fresh iterator of this dataset to `resources` (a session's,
    /// `Session::resources`) under `shared_name`: each run of an `IteratorGetNext` node whose
    /// `IteratorV2` has that `shared_name` (and an empty `container`) takes the next element;
    /// after the last one it fails with an out-of-range error ("End of sequence"), as
    /// TensorFlow's does. Attaching again starts a new epoch.
    pub fn attach_iterator(&self, resources: &ResourceMgr, shared_name: &str) -> Result<()> {
        if shared_name.is_empty() {
            return Err(DataError::Invalid("attach_iterator: the shared_name must not be empty".into()));
        }
        let it = self.iter()?.into_inner();
        resources.attach_iterator(&handle_key("", shared_name, ""), Arc::new(Attached(Mutex::new(it))));
        Ok(())
    }
}

/// A dataset iterator shared with a session's `IteratorGetNext` kernels.
struct Attached(Mutex<Box<dyn ElementIter>>);

impl IteratorSource for Attached {
    fn get_next(&self) -> std::result::Result<Option<Vec<ferroflow_tensor::Tensor>>, String> {
        let mut it = self.0.lock().unwrap_or_else(|p| p.into_inner());
        it.next().transpose().map_err(|e| e.to_string())
    }
}
