//! Optimizers that add TensorFlow's update ops to the graph, as `tf.compat.v1.train`'s do:
//! slots are variables named `<var>/<Optimizer>` (`<var>/Adam`, `<var>/Adam_1`), updates are
//! `ResourceApply*` nodes under `<Optimizer>/update_<var>/`, Adam's `beta1_power` and
//! `beta2_power` are variables updated after every step's updates, and `global_step` is
//! incremented after all of them.
use ferroflow_autodiff::gradients;
use ferroflow_graph::{Attrs, NodeId, Output};
use ferroflow_proto::attr;
use ferroflow_tensor::DType;

use crate::{Builder, Initializer, Result, TrainError, Variable};
use ferroflow_ops::{Ops, RawOps};

/// An update op's name, slot variables, hyper-parameter and gradient inputs, bool attrs.
type UpdateSpec<'a> = (&'a str, Vec<Variable>, Vec<Output>, Vec<(&'a str, bool)>);

/// An optimizer and its hyper-parameters (TensorFlow 1's defaults in the constructors).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Optimizer {
    /// `var -= lr * grad` (`ResourceApplyGradientDescent`).
    GradientDescent {
        /// Learning rate.
        learning_rate: f64,
    },
    /// Momentum (`ResourceApplyMomentum`), optionally Nesterov.
    Momentum {
        /// Learning rate.
        learning_rate: f64,
        /// Momentum.
        momentum: f64,
        /// Nesterov momentum.
        use_nesterov: bool,
    },
    /// Adam (`ResourceApplyAdam`).
    Adam {
        /// Learning rate.
        learning_rate: f64,
        /// First-moment decay.
        beta1: f64,
        /// Second-moment decay.
        beta2: f64,
        /// Added to the denominator.
        epsilon: f64,
    },
    /// RMSProp (`ResourceApplyRMSProp`).
    RmsProp {
        /// Learning rate.
        learning_rate: f64,
        /// Decay of the mean square.
        decay: f64,
        /// Momentum.
        momentum: f64,
        /// Added inside the square root.
        epsilon: f64,
    },
    /// Adagrad (`ResourceApplyAdagrad`).
    Adagrad {
        /// Learning rate.
        learning_rate: f64,
        /// Starting value of the accumulators.
        initial_accumulator_value: f64,
    },
}

impl Optimizer {
    /// `tf.train.GradientDescentOptimizer(lr)`.
    pub fn gradient_descent(learning_rate: f64) -> Optimizer {
        Optimizer::GradientDescent { learning_rate }
    }
    /// `tf.train.MomentumOptimizer(lr, momentum)`.
    pub fn momentum(learning_rate: f64, momentum: f64, use_nesterov: bool) -> Optimizer {
        Optimizer::Momentum { learning_rate, momentum, use_nesterov }
    }
    /// `tf.train.AdamOptimizer(lr)` (beta1 0.9, beta2 0.999, epsilon 1e-8).
    pub fn adam(learning_rate: f64) -> Optimizer {
        Optimizer::Adam { learning_rate, beta1: 0.9, beta2: 0.999, epsilon: 1e-8 }
    }
    /// `tf.train.RMSPropOptimizer(lr)` (decay 0.9, momentum 0, epsilon 1e-10).
    pub fn rms_prop(learning_rate: f64) -> Optimizer {
        Optimizer::RmsProp { learning_rate, decay: 0.9, momentum: 0.0, epsilon: 1e-10 }
    }
    /// `tf.train.AdagradOptimizer(lr)` (initial accumulator 0.1).
    pub fn adagrad(learning_rate: f64) -> Optimizer {
        Optimizer::Adagrad { learning_rate, initial_accumulator_value: 0.1 }
    }

    /// The name TensorFlow gives its ops and slots.
    pub fn name(&self) -> &'static str {
        match self {
            Optimizer::GradientDescent { .. } => "GradientDescent",
            Optimizer::Momentum { .. } => "Momentum",
            Optimizer::Adam { .. } => "Adam",
            Optimizer::RmsProp { .. } => "RMSProp",
            Optimizer::Adagrad { .. } => "Adagrad",
        }
    }

    /// Gradients of `loss` for each variable (trainable ones by default), built as graph
    /// nodes; `None` where the loss does not depend on the variable.
    pub fn compute_gradients(
        &self,
        b: &Builder,
        loss: Output,
        var_list: Option<&[Variable]>,
    ) -> Result<Vec<(Option<Output>, Variable)>> {
        let vars = var_list.map_or_else(|| b.trainable_variables(), <[Variable]>::to_vec);
        if vars.is_empty() {
            return Err(TrainError::Invalid("no variables to optimize".into()));
        }
        let xs: Vec<Output> = vars.iter().map(|v| v.handle).collect();
        let gs = gradients(b.scope(), &[loss], &xs, None)?;
        Ok(gs.into_iter().zip(vars).collect())
    }

    /// Adds the update of every variable with a gradient, then (for Adam) the beta powers,
    /// then `global_step += 1`; returns the train op (a `NoOp` named after the optimizer).
    pub fn apply_gradients(
        &self,
        b: &Builder,
        grads_and_vars: &[(Option<Output>, Variable)],
        global_step: Option<&Variable>,
    ) -> Result<NodeId> {
        let root = b.scope();
        let present: Vec<(Output, &Variable)> = grads_and_vars.iter().filter_map(|(g, v)| Some(((*g)?, v))).collect();
        if present.is_empty() {
            let names: Vec<&str> = grads_and_vars.iter().map(|(_, v)| v.name.as_str()).collect();
            return Err(TrainError::Invalid(format!("no gradients for any variable: {names:?}")));
        }
        let dtype = present[0].1.dtype;
        // Non-slot variables (Adam's beta powers) live at the root, as in TensorFlow.
        let powers = match self {
            Optimizer::Adam { beta1, beta2, .. } => Some((
                b.variable(root, "beta1_power", &[], dtype, &Initializer::Constant(*beta1), false)?,
                b.variable(root, "beta2_power", &[], dtype, &Initializer::Constant(*beta2), false)?,
            )),
            _ => None,
        };
        let scope = root.name_scope(self.name());
        let c = |name: &str, v: f64| Builder::scalar(&scope.with_name(name), dtype, v);
        let hyper: Vec<Output> = match *self {
            Optimizer::GradientDescent { learning_rate } => vec![c("learning_rate", learning_rate)?],
            Optimizer::Momentum { learning_rate, momentum, .. } => {
                vec![c("learning_rate", learning_rate)?, c("momentum", momentum)?]
            }
            Optimizer::Adam { learning_rate, beta1, beta2, epsilon } => {
                let (p1, p2) = powers.as_ref().expect("adam has powers");
                vec![
                    b.read(&scope, p1)?,
                    b.read(&scope, p2)?,
                    c("learning_rate", learning_rate)?,
                    c("beta1", beta1)?,
                    c("beta2", beta2)?,
                    c("epsilon", epsilon)?,
                ]
            }
            Optimizer::RmsProp { learning_rate, decay, momentum, epsilon } => {
                vec![
                    c("learning_rate", learning_rate)?,
                    c("decay", decay)?,
                    c("momentum", momentum)?,
                    c("epsilon", epsilon)?,
                ]
            }
            Optimizer::Adagrad { learning_rate, .. } => vec![c("learning_rate", learning_rate)?],
        };
        let mut updates = Vec::with_capacity(present.len());
        for (g, v) in &present {
            if v.dtype != dtype {
                return Err(TrainError::Invalid(format!(
                    "variable '{}' is {}, but '{}' is {dtype}: one optimizer call needs one dtype",
                    v.name, v.dtype, present[0].1.name
                )));
            }
            let var_scope = b.scope().reenter(&v.name);
            let slot = |suffix: &str, init: Initializer| {
                let name = format!("{}{suffix}", self.name());
                b.variable(&var_scope, &name, &v.shape, dtype, &init, false)
            };
            let (op, slots, mut args, mut extra): UpdateSpec = match *self {
                Optimizer::GradientDescent { .. } => {
                    ("ResourceApplyGradientDescent", vec![], vec![hyper[0], *g], vec![])
                }
                Optimizer::Momentum { use_nesterov, .. } => (
                    "ResourceApplyMomentum",
                    vec![slot("", Initializer::Zeros)?],
                    vec![hyper[0], *g, hyper[1]],
                    vec![("use_nesterov", use_nesterov)],
                ),
                Optimizer::Adam { .. } => (
                    "ResourceApplyAdam",
                    vec![slot("", Initializer::Zeros)?, slot("_1", Initializer::Zeros)?],
                    vec![hyper[0], hyper[1], hyper[2], hyper[3], hyper[4], hyper[5], *g],
                    vec![("use_nesterov", false)],
                ),
                Optimizer::RmsProp { .. } => (
                    "ResourceApplyRMSProp",
                    vec![slot("", Initializer::Ones)?, slot("_1", Initializer::Zeros)?],
                    vec![hyper[0], hyper[1], hyper[2], hyper[3], *g],
                    vec![],
                ),
                Optimizer::Adagrad { initial_accumulator_value, .. } => (
                    "ResourceApplyAdagrad",
                    vec![slot("", Initializer::Constant(initial_accumulator_value))?],
                    vec![hyper[0], *g],
                    vec![("update_slots", true)],
                ),
            };
            let mut inputs = vec![v.handle];
            inputs.extend(slots.iter().map(|s| s.handle));
            inputs.append(&mut args);
            let mut a = Attrs::new();
            a.insert("T".into(), attr::dtype(dtype));
            a.insert("use_locking".into(), attr::boolean(false));
            for (k, val) in extra.drain(..) {
                a.insert(k.into(), attr::boolean(val));
            }
            let up = scope.name_scope(&format!("update_{}", v.name));
            updates.push(up.add_op(op, op, &inputs, &[], a)?);
        }
        if let (Some((p1, p2)), Optimizer::Adam { .. }) = (&powers, self) {
            let mut finish = Vec::new();
            for (p, k) in [(p1, 3usize), (p2, 4)] {
                let next = scope.mul(hyper[k - 3], hyper[k])?;
                let mut a = Attrs::new();
                a.insert("dtype".into(), attr::dtype(dtype));
                finish.push(scope.add_op("AssignVariableOp", "AssignVariableOp", &[p.handle, next], &updates, a)?);
            }
            updates.extend(finish);
        }
        let update = scope.with_name("update").group(&updates)?;
        let last = match global_step {
            Some(gs) => {
                let one = scope.with_name("Const").scalar(1i64)?;
                let mut a = Attrs::new();
                a.insert("dtype".into(), attr::dtype(DType::Int64));
                scope.add_op("AssignAddVariableOp", "AssignAddVariableOp", &[gs.handle, one], &[update], a)?
            }
            None => update,
        };
        let op = root.with_exact_name(self.name()).group(&[last])?;
        b.add_to_collection("train_op", &b.scope().with_graph(|g| g.node(op).name.clone()));
        Ok(op)
    }

    /// `compute_gradients` then `apply_gradients`: the train op.
    pub fn minimize(
        &self,
        b: &Builder,
        loss: Output,
        var_list: Option<&[Variable]>,
        global_step: Option<&Variable>,
    ) -> Result<NodeId> {
        let gv = self.compute_gradients(b, loss, var_list)?;
        self.apply_gradients(b, &gv, global_step)
    }

    /// [`Optimizer::minimize`], then the ops of the [`crate::layers::UPDATE_OPS`] collection
    /// (batch normalization's moving statistics) run with it: the train op is a `NoOp`
    /// `train_with_updates` depending on both when there are updates.
    pub fn minimize_with_updates(
        &self,
        b: &Builder,
        loss: Output,
        var_list: Option<&[Variable]>,
        global_step: Option<&Variable>,
    ) -> Result<NodeId> {
        let train = self.minimize(b, loss, var_list, global_step)?;
        let s = b.scope();
        let updates: Vec<NodeId> = b
            .collections()
            .get(crate::layers::UPDATE_OPS)
            .map(|names| s.with_graph(|g| names.iter().filter_map(|n| g.find(n)).collect()))
            .unwrap_or_default();
        if updates.is_empty() {
            return Ok(train);
        }
        let mut deps = vec![train];
        deps.extend(updates);
        Ok(s.with_name("train_with_updates").group(&deps)?)
    }
}
