//! Optimizer updates of resource variables (`ResourceApply*`). TensorFlow 1's `Apply*` ops
//! on ref variables are declared as their ref forms.
use crate::registry::{op, OpDef};
use crate::shape_inference as s;

/// One update op: variables `vars` (resources), then arguments `args` of type `T`.
fn apply(name: &str, tf1: &'static str, vars: &[&str], args: &[&str], extra: &[&str]) -> OpDef {
    let mut b = op(name);
    for a in vars {
        b = b.input(&format!("{a}: resource"));
    }
    for a in args {
        b = b.input(&format!("{a}: T"));
    }
    b.attr("T: {half, bfloat16, float, double}")
        .attr("use_locking: bool = false")
        .attrs(extra)
        .stateful()
        .shape(s::no_outputs)
        .ref_form(tf1, vars.len())
        .optimizer_update()
        .not_differentiable("it has no outputs: it updates variables")
        .build()
}

/// The optimizer update ops.
pub fn defs() -> Vec<OpDef> {
    vec![
        apply("ResourceApplyGradientDescent", "ApplyGradientDescent", &["var"], &["alpha", "delta"], &[]),
        apply(
            "ResourceApplyMomentum",
            "ApplyMomentum",
            &["var", "accum"],
            &["lr", "grad", "momentum"],
            &["use_nesterov: bool = false"],
        ),
        apply(
            "ResourceApplyAdam",
            "ApplyAdam",
            &["var", "m", "v"],
            &["beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"],
            &["use_nesterov: bool = false"],
        ),
        apply(
            "ResourceApplyRMSProp",
            "ApplyRMSProp",
            &["var", "ms", "mom"],
            &["lr", "rho", "momentum", "epsilon", "grad"],
            &[],
        ),
        apply(
            "ResourceApplyAdagrad",
            "ApplyAdagrad",
            &["var", "accum"],
            &["lr", "grad"],
            &["update_slots: bool = true"],
        ),
        apply(
            "ResourceApplyAdagradV2",
            "ApplyAdagradV2",
            &["var", "accum"],
            &["lr", "epsilon", "grad"],
            &["update_slots: bool = true"],
        ),
    ]
}
