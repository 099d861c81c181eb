//! Eager variables (TensorFlow 2's `tf.Variable` outside functions): a named value that ops
//! read and updates replace. Reading a trainable variable while tapes record watches it on
//! each of them, as TensorFlow's tapes watch trainable variables by default.
use std::cell::RefCell;

use ferroflow_tensor::Tensor;

use crate::eager::{Eager, EagerError};

/// A mutable, named tensor.
pub struct Variable {
    name: String,
    value: RefCell<Tensor>,
    trainable: bool,
}

impl Variable {
    /// A trainable variable holding `initial`.
    pub fn new(name: &str, initial: Tensor) -> Variable {
        Variable { name: name.to_string(), value: RefCell::new(initial), trainable: true }
    }

    /// A variable the tapes do not watch by themselves (`trainable=False`).
    pub fn non_trainable(name: &str, initial: Tensor) -> Variable {
        Variable { trainable: false, ..Variable::new(name, initial) }
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The current value (shared, not copied: a later assignment replaces the variable's value,
    /// it does not change this one).
    pub fn read(&self) -> Tensor {
        let t = self.value.borrow().clone();
        if self.trainable {
            crate::tape::watch_on_recording_tapes(&t);
        }
        t
    }

    /// Replaces the value; `value` must keep the variable's dtype and shape.
    pub fn assign(&self, value: Tensor) -> Result<(), EagerError> {
        let mut slot = self.value.borrow_mut();
        if value.dtype() != slot.dtype() || value.dims() != slot.dims() {
            return Err(EagerError {
                op: "AssignVariableOp".into(),
                inputs: format!("{} {}{:?}", self.name, slot.dtype(), slot.dims()),
                reason: format!("cannot assign a {}{:?} value", value.dtype(), value.dims()),
            });
        }
        *slot = value;
        Ok(())
    }

    /// `self -= delta` (`AssignSubVariableOp`), computed eagerly.
    pub fn assign_sub(&self, delta: &Tensor) -> Result<(), EagerError> {
        let current = self.value.borrow().clone();
        self.assign(current.sub(delta)?)
    }
}
