//! `GradientTape`: records the eager ops that touch watched tensors, and differentiates them
//! with the same gradient functions as graph autodiff — at `gradient` time the recorded ops
//! become a graph (recorded values fed, not recomputed), `autodiff::gradients` adds the
//! gradient nodes, and those run eagerly op by op.
//!
//! A tensor is known to the tape by its buffer (and dtype and shape): the tape keeps every
//! tensor it recorded alive, so no buffer is reused while it records, and an op whose output
//! shares its input's buffer (`Identity`, `Reshape`) gets a copy, so that each recorded tensor
//! has a buffer of its own.
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::{Rc, Weak};

use ferroflow_graph::{Attrs, NodeId, Output};
use ferroflow_ops::Scope;
use ferroflow_tensor::{Shape, Tensor};

use ferroflow_ops::OpTarget;

use crate::eager::execute;
use crate::error::{FunctionError, OpError};
use crate::value::Value;

/// How a tape knows a tensor: its bytes' address, dtype and dims.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Key(usize, i32, Vec<usize>);

fn key(t: &Tensor) -> Option<Key> {
    let bytes = t.as_bytes().ok().filter(|b| !b.is_empty())?;
    Some(Key(bytes.as_ptr() as usize, t.dtype().to_tf(), t.dims().to_vec()))
}

/// One recorded op.
struct Op {
    op: String,
    attrs: Attrs,
    inputs: Vec<Key>,
    outputs: Vec<Key>,
}

#[derive(Default)]
struct State {
    recording: bool,
    used: bool,
    ops: Vec<Op>,
    /// Every tensor the tape saw, by key (kept alive while the tape lives).
    values: HashMap<Key, Tensor>,
    watched: HashSet<Key>,
    /// Tensors recorded ops produced: (op index, output index).
    produced: HashMap<Key, (usize, usize)>,
}

thread_local! {
    /// The tapes recording on this thread, innermost last.
    static TAPES: RefCell<Vec<Weak<RefCell<State>>>> = const { RefCell::new(Vec::new()) };
}

/// Records eager ops on watched tensors (TensorFlow's `tf.GradientTape`). Recording starts at
/// `new` and ends when the tape is dropped; [`GradientTape::stop_recording`] pauses it.
///
/// `!Send` by design: a tape records the ops of the thread that made it (the recording tapes
/// are thread-local, as in TensorFlow), so it is used and dropped on that thread.
pub struct GradientTape {
    state: Rc<RefCell<State>>,
    persistent: bool,
}

impl Default for GradientTape {
    fn default() -> Self {
        GradientTape::new()
    }
}

impl GradientTape {
    /// A tape whose `gradient` can be asked once.
    pub fn new() -> GradientTape {
        let state = Rc::new(RefCell::new(State { recording: true, ..Default::default() }));
        TAPES.with(|t| t.borrow_mut().push(Rc::downgrade(&state)));
        GradientTape { state, persistent: false }
    }

    /// A tape whose `gradient` can be asked any number of times.
    pub fn persistent() -> GradientTape {
        let mut tape = GradientTape::new();
        tape.persistent = true;
        tape
    }

    /// Watches `t`: ops on it are recorded and it can be a source of `gradient`.
    pub fn watch(&self, t: &Tensor) {
        if let Some(k) = key(t) {
            let mut s = self.state.borrow_mut();
            s.values.insert(k.clone(), t.clone());
            s.watched.insert(k);
        }
    }

    /// Pauses recording until the returned guard is dropped (`with tape.stop_recording():`).
    pub fn stop_recording(&self) -> StopRecording {
        let was = std::mem::replace(&mut self.state.borrow_mut().recording, false);
        StopRecording { state: self.state.clone(), was }
    }

    /// [`GradientTape::gradient`] for [`Value`]s: inside a traced function (symbolic target)
    /// the gradients are graph autodiff on the function's graph (the tape records nothing
    /// there: the graph is the record), so the same step code works eagerly and as a function,
    /// as TensorFlow's tapes do inside `tf.function`.
    pub fn gradient_values(&self, target: &Value, sources: &[&Value]) -> Result<Vec<Option<Value>>, FunctionError> {
        if let Value::Eager(t) = target {
            let tensors: Vec<&Tensor> = sources
                .iter()
                .map(|v| {
                    v.tensor()
                        .ok_or_else(|| tape_error(OpError::Usage("a symbolic source for a concrete target".into())))
                })
                .collect::<Result<_, _>>()?;
            return Ok(self.gradient(t, &tensors)?.into_iter().map(|g| g.map(Value::Eager)).collect());
        }
        crate::traced::symbolic_gradients(target, sources)
    }

    /// The gradients of `target` (summed over its elements) with respect to each source;
    /// `None` for a source the target does not depend on through recorded ops.
    pub fn gradient(&self, target: &Tensor, sources: &[&Tensor]) -> Result<Vec<Option<Tensor>>, FunctionError> {
        let fail = |reason: String| tape_error(OpError::Usage(reason));
        let mut s = self.state.borrow_mut();
        if s.used && !self.persistent {
            return Err(fail(
                "a non-persistent tape's gradient can be asked once (use GradientTape::persistent)".into(),
            ));
        }
        s.used = true;
        let target_key = key(target).ok_or_else(|| fail("the target is empty or not numeric".into()))?;
        let scope = Scope::new();
        let mut outputs: HashMap<Key, Output> = HashMap::new();
        let mut fed: HashMap<NodeId, Tensor> = HashMap::new();
        let mut known: HashMap<(NodeId, usize), Tensor> = HashMap::new();
        let mut placeholder = |k: &Key, outputs: &mut HashMap<Key, Output>| -> Result<Output, FunctionError> {
            if let Some(o) = outputs.get(k) {
                return Ok(*o);
            }
            // Inputs are fed, except small integer tensors, which become constants so that
            // gradient functions see values such as reduction axes and shapes.
            let t = &s.values[k];
            let small_int = t.dtype().is_integer() && t.len() <= 64;
            let o = if s.watched.contains(k) || !small_int {
                let o = scope
                    .with_name("tape_input")
                    .placeholder(t.dtype(), &Shape::known(t.dims()))
                    .map_err(|e| tape_error(e.into()))?;
                fed.insert(o.node, t.clone());
                o
            } else {
                scope.with_name("tape_constant").constant(t).map_err(|e| tape_error(e.into()))?
            };
            outputs.insert(k.clone(), o);
            Ok(o)
        };
        for (i, op) in s.ops.iter().enumerate() {
            let mut inputs = Vec::with_capacity(op.inputs.len());
            for k in &op.inputs {
                inputs.push(placeholder(k, &mut outputs)?);
            }
            let node = scope
                .add_op(&op.op, &format!("tape_op_{i}"), &inputs, &[], op.attrs.clone())
                .map_err(|e| fail(format!("recording {}: {e}", op.op)))?;
            for (j, k) in op.outputs.iter().enumerate() {
                let o = Output { node, index: j };
                outputs.insert(k.clone(), o);
                known.insert((node, j), s.values[k].clone());
            }
        }
        let target_out =
            *outputs.get(&target_key).ok_or_else(|| fail("the target was not computed on this tape".into()))?;
        let mut xs = Vec::with_capacity(sources.len());
        for src in sources {
            let k = key(src).ok_or_else(|| fail("a source is empty or not numeric".into()))?;
            let tracked = s.watched.contains(&k) || s.produced.contains_key(&k);
            xs.push(outputs.get(&k).copied().filter(|_| tracked));
        }
        let present: Vec<Output> = xs.iter().flatten().copied().collect();
        let grads =
            ferroflow_autodiff::gradients(&scope, &[target_out], &present, None).map_err(|e| tape_error(e.into()))?;
        for (node, t) in fed {
            known.insert((node, 0), t);
        }
        if !self.persistent {
            // What a second call would need is gone: free it now.
            (s.ops, s.values, s.produced) = Default::default();
        }
        // The gradient ops run with this tape paused (outer tapes record them: gradients of
        // gradients).
        let was = std::mem::replace(&mut s.recording, false);
        drop(s);
        let graph = scope.graph();
        let mut values = Evaluator { graph: &graph, known };
        let mut grads = grads.into_iter();
        let mut out = Vec::with_capacity(sources.len());
        let mut result = Ok(());
        for x in xs {
            let g = if x.is_some() { grads.next().flatten() } else { None };
            match g.map(|g| values.value(g)).transpose() {
                Ok(v) => out.push(v),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.state.borrow_mut().recording = was;
        result.map(|_| out)
    }
}

/// An error of [`GradientTape::gradient`].
fn tape_error(source: OpError) -> FunctionError {
    FunctionError::Op { op: "GradientTape::gradient".into(), inputs: String::new(), source }
}

impl Drop for GradientTape {
    fn drop(&mut self) {
        let me = Rc::downgrade(&self.state);
        let _ = TAPES.try_with(|t| t.borrow_mut().retain(|w| !w.ptr_eq(&me) && w.strong_count() > 0));
    }
}

/// Resumes recording when dropped.
pub struct StopRecording {
    state: Rc<RefCell<State>>,
    was: bool,
}

impl Drop for StopRecording {
    fn drop(&mut self) {
        self.state.borrow_mut().recording = self.was;
    }
}

/// Computes gradient-graph values on demand, eagerly, from the recorded ones.
struct Evaluator<'g> {
    graph: &'g ferroflow_graph::Graph,
    known: HashMap<(NodeId, usize), Tensor>,
}

impl Evaluator<'_> {
    fn value(&mut self, o: Output) -> Result<Tensor, FunctionError> {
        if let Some(t) = self.known.get(&(o.node, o.index)) {
            return Ok(t.clone());
        }
        // Depth-first over the missing inputs, without recursion.
        let mut stack = vec![(o.node, false)];
        while let Some((id, expanded)) = stack.pop() {
            if self.known.contains_key(&(id, 0)) {
                continue;
            }
            let n = self.graph.node(id);
            if !expanded {
                stack.push((id, true));
                stack.extend(
                    n.inputs.iter().filter(|i| !self.known.contains_key(&(i.node, i.index))).map(|i| (i.node, false)),
                );
                continue;
            }
            let inputs: Vec<&Tensor> = n.inputs.iter().map(|i| &self.known[&(i.node, i.index)]).collect();
            let outs = execute(&n.op, &n.attrs, &inputs)?;
            for (j, t) in outs.into_iter().enumerate() {
                self.known.insert((id, j), t);
            }
        }
        Ok(self.known[&(o.node, o.index)].clone())
    }
}

/// Watches `t` on every tape recording on this thread (a trainable variable's read).
pub(crate) fn watch_on_recording_tapes(t: &Tensor) {
    TAPES.with(|tapes| {
        for s in tapes.borrow().iter().filter_map(Weak::upgrade) {
            let mut s = s.borrow_mut();
            if let (true, Some(k)) = (s.recording, key(t)) {
                s.values.insert(k.clone(), t.clone());
                s.watched.insert(k);
            }
        }
    });
}

/// Called by every eager call: records `op` on each recording tape that watches or produced
/// one of `inputs`, giving outputs that share an input's buffer a copy of their own.
pub(crate) fn record(op: &str, attrs: &Attrs, inputs: &[&Tensor], outputs: &mut [Tensor]) {
    let active = TAPES.with(|t| {
        let t = t.borrow();
        if t.is_empty() {
            return Vec::new();
        }
        t.iter().filter_map(Weak::upgrade).filter(|s| s.borrow().recording).collect::<Vec<_>>()
    });
    if active.is_empty() {
        return;
    }
    let input_keys: Vec<Option<Key>> = inputs.iter().map(|t| key(t)).collect();
    let touches = |s: &State| input_keys.iter().flatten().any(|k| s.watched.contains(k) || s.produced.contains_key(k));
    if !active.iter().any(|s| touches(&s.borrow())) {
        return;
    }
    for out in outputs.iter_mut() {
        if key(out).is_some_and(|k| input_keys.iter().flatten().any(|i| i.0 == k.0)) {
            if let Ok(copy) = out.as_bytes().and_then(|b| Tensor::from_bytes(out.dtype(), out.dims(), b)) {
                *out = copy;
            }
        }
    }
    let output_keys: Vec<Option<Key>> = outputs.iter().map(key).collect();
    for s in active {
        let mut s = s.borrow_mut();
        if !touches(&s) || input_keys.iter().any(Option::is_none) || output_keys.iter().any(Option::is_none) {
            continue;
        }
        let index = s.ops.len();
        for (k, t) in input_keys.iter().flatten().zip(inputs) {
            s.values.entry(k.clone()).or_insert_with(|| (*t).clone());
        }
        for (j, (k, t)) in output_keys.iter().flatten().zip(outputs.iter()).enumerate() {
            s.values.insert(k.clone(), t.clone());
            s.produced.insert(k.clone(), (index, j));
        }
        s.ops.push(Op {
            op: op.to_string(),
            attrs: attrs.clone(),
            inputs: input_keys.iter().flatten().cloned().collect(),
            outputs: output_keys.iter().flatten().cloned().collect(),
        });
    }
}
