//! Variables (TensorFlow 2's `tf.Variable`): a named value that ops read and updates replace.
//! Eagerly, [`Variable::read`] gives the value and [`Variable::assign`] replaces it; reading a
//! trainable variable while tapes record watches it on each of them, as TensorFlow's tapes
//! watch trainable variables by default.
//!
//! Inside a traced function, [`Variable::value`] and [`Variable::assign_value`] capture the
//! variable as a resource, as TensorFlow 2 does: the concrete function's graph gets a
//! `resource` placeholder fed with the variable's handle, `ReadVariableOp` /
//! `AssignVariableOp` nodes on it (ordered per variable in program order, TensorFlow's
//! automatic control dependencies), and each call reads and updates the same storage the
//! eager side sees.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ferroflow_graph::Output;
use ferroflow_kernels::resource::Variable as Storage;
use ferroflow_proto::attr;
use ferroflow_tensor::{DType, Shape, Tensor};

use ferroflow_ops::RawOps;

use crate::context::{current, output_in, with_function_frame, Frame};
use crate::eager::Eager;
use crate::error::{FunctionError, OpError};
use crate::value::Value;

/// A mutable, named tensor.
pub struct Variable {
    name: String,
    /// The key its handle carries (unique per variable).
    key: String,
    storage: Arc<Storage>,
    dims: Vec<usize>,
    trainable: bool,
}

impl Variable {
    /// A trainable variable holding `initial`.
    pub fn new(name: &str, initial: Tensor) -> Variable {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let key = format!("eager/{name}_{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let dims = initial.dims().to_vec();
        let storage = Arc::new(Storage::new(initial.dtype(), Some(initial)));
        Variable { name: name.to_string(), key, storage, dims, trainable: true }
    }

    /// A variable the tapes do not watch by themselves (`trainable=False`).
    pub fn non_trainable(name: &str, initial: Tensor) -> Variable {
        Variable { trainable: false, ..Variable::new(name, initial) }
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.storage.dtype()
    }

    /// The current value (shared, not copied: a later assignment replaces the variable's value,
    /// it does not change this one).
    pub fn read(&self) -> Tensor {
        let t = self.storage.read().expect("an eager variable always holds a value");
        if self.trainable {
            crate::tape::watch_on_recording_tapes(&t);
        }
        t
    }

    /// Replaces the value; `value` must keep the variable's dtype and shape.
    pub fn assign(&self, value: Tensor) -> Result<(), FunctionError> {
        self.check(value.dtype(), &Shape::known(value.dims()))?;
        self.storage.assign(value);
        Ok(())
    }

    /// `self -= delta` (`AssignSubVariableOp`), computed eagerly.
    pub fn assign_sub(&self, delta: &Tensor) -> Result<(), FunctionError> {
        self.assign(Eager.sub(self.read(), delta)?)
    }

    fn check(&self, dtype: DType, shape: &Shape) -> Result<(), FunctionError> {
        let fits = dtype == self.dtype() && (shape.dims().is_none() || shape.is_compatible_with(&self.dims));
        if fits {
            return Ok(());
        }
        Err(FunctionError::Op {
            op: "AssignVariableOp".into(),
            inputs: format!("{} {}{:?}", self.name, self.dtype(), self.dims),
            source: OpError::Signature(format!("cannot assign a {dtype}{:?} value", shape.dims().unwrap_or(&[]))),
        })
    }

    /// The value as a [`Value`]: the tensor eagerly; inside a traced function, a
    /// `ReadVariableOp` of the captured variable (in the function's own graph, so a branch or
    /// loop body that uses it captures the value read before the statement).
    pub fn value(&self) -> Result<Value, FunctionError> {
        if current().is_none() {
            return Ok(Value::Eager(self.read()));
        }
        self.stateful("ReadVariableOp", None)
    }

    /// Assigns `value` (eagerly, or as an `AssignVariableOp` of the traced function).
    pub fn assign_value(&self, value: &Value) -> Result<(), FunctionError> {
        match value {
            Value::Eager(t) if current().is_none() => self.assign(t.clone()),
            v => self.stateful("AssignVariableOp", Some(v)).map(drop),
        }
    }

    /// `self -= delta` (eagerly, or as an `AssignSubVariableOp` of the traced function).
    pub fn assign_sub_value(&self, delta: &Value) -> Result<(), FunctionError> {
        match delta {
            Value::Eager(t) if current().is_none() => self.assign_sub(t),
            v => self.stateful("AssignSubVariableOp", Some(v)).map(drop),
        }
    }

    /// Adds `op` on this variable's handle to the function being traced; updates must be
    /// made in the function's own graph (not inside a tensor branch or loop body).
    fn stateful(&self, op: &str, value: Option<&Value>) -> Result<Value, FunctionError> {
        let in_function = current().map(|(_, id)| id) == with_function_frame(|f| f.id);
        if !in_function && value.is_some() {
            return Err(FunctionError::usage(
                op,
                format!(
                    "variable '{}' is assigned inside a tensor `if` or loop: assign it in the function's body, \
                     from a value the statement computes",
                    self.name
                ),
            ));
        }
        let made = with_function_frame(|frame| -> Result<Value, FunctionError> {
            let handle = self.handle(frame)?;
            let scope = frame.scope.clone();
            // Program order per variable: after the previous op on it.
            let previous: Vec<_> = frame
                .stateful
                .iter()
                .copied()
                .filter(|&n| scope.with_graph(|g| g.node(n).inputs.first() == Some(&handle)))
                .collect();
            let err = |e: ferroflow_ops::BuildError| FunctionError::traced(op, e);
            let mut inputs = vec![handle];
            let mut attrs = ferroflow_graph::Attrs::new();
            attrs.insert("dtype".into(), attr::dtype(self.dtype()));
            if let Some(v) = value {
                self.check(v.dtype(), &Shape::unknown())?;
                inputs.push(output_in(&scope, frame.id, v, op)?);
            }
            let node = scope.add_op(op, op, &inputs, &previous, attrs).map_err(err)?;
            frame.stateful.push(node);
            Ok(Value::Symbolic(Output { node, index: 0 }, self.dtype(), frame.id))
        });
        made.unwrap_or_else(|| Err(FunctionError::usage(op, "no function is being traced")))
    }

    /// The placeholder for this variable's handle in the function `frame` (added on first use).
    fn handle(&self, frame: &mut Frame) -> Result<Output, FunctionError> {
        if let Some((_, o, _)) = frame.resources.iter().find(|(k, ..)| *k == self.key) {
            return Ok(*o);
        }
        let o = frame
            .scope
            .with_name(&format!("{}_handle", self.name))
            .placeholder(DType::Resource, &Shape::scalar())
            .map_err(|e| FunctionError::traced("ReadVariableOp", e))?;
        frame.resources.push((self.key.clone(), o, self.storage.clone()));
        Ok(o)
    }
}
