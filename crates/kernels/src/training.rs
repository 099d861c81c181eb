//! TensorFlow's optimizer update ops on resource variables, with its update rules:
//! `ResourceApplyGradientDescent`, `ResourceApplyMomentum` (incl. Nesterov),
//! `ResourceApplyAdam` (incl. Nesterov), `ResourceApplyRMSProp`, `ResourceApplyAdagrad`,
//! `ResourceApplyAdagradV2`.
//!
//! Each update locks one variable at a time (slots first, the variable last), so two update
//! ops can never deadlock; the variable's buffer is updated in place unless a value read
//! earlier still shares it (then it is copied first).
use ferroflow_tensor::{DType, Element, Tensor};

use crate::elementwise::FLOATS;
use crate::numeric::Float;
use crate::SendPtr;
use std::sync::{Arc, RwLockWriteGuard};

use crate::resource::{var_from_handle, Variable};
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

#[derive(Clone, Copy, PartialEq)]
enum Rule {
    Sgd,
    Momentum,
    Adam,
    RmsProp,
    Adagrad,
    AdagradV2,
}

impl Rule {
    /// (number of variable handles: var + slots, the scalar hyper-parameters as (name,
    /// input index), the gradient's input index) — TensorFlow's input orders.
    fn layout(self) -> (usize, &'static [(&'static str, usize)], usize) {
        match self {
            Rule::Sgd => (1, &[("alpha", 1)], 2),
            Rule::Momentum => (2, &[("lr", 2), ("momentum", 4)], 3),
            Rule::Adam => {
                (3, &[("beta1_power", 3), ("beta2_power", 4), ("lr", 5), ("beta1", 6), ("beta2", 7), ("epsilon", 8)], 9)
            }
            Rule::RmsProp => (3, &[("lr", 3), ("rho", 4), ("momentum", 5), ("epsilon", 6)], 7),
            Rule::Adagrad => (2, &[("lr", 2)], 3),
            Rule::AdagradV2 => (2, &[("lr", 2), ("epsilon", 3)], 4),
        }
    }
}

struct Apply {
    node: String,
    rule: Rule,
    dtype: DType,
    nesterov: bool,
    update_slots: bool,
}

/// Elements per parallel chunk (and the size below which updates stay on one thread).
const CHUNK: usize = 16 * 1024;

impl Apply {
    /// Updates one range: `w` the variable, `s0`/`s1` its slots (empty when the rule has
    /// none), `g` the gradient, `h` the hyper-parameters in TensorFlow's input order (Adam's
    /// `lr_t` folded into `h[0]`). One loop per rule over plain slices, so it vectorizes.
    fn update<T: Float>(&self, h: &[T], w: &mut [T], s0: &mut [T], s1: &mut [T], g: &[T]) {
        // The loops are plain slices, so the same code compiled for AVX-512 or AVX2 (chosen
        // at run time) vectorizes sqrt and division across 8–16 lanes.
        crate::isa::widest(
            #[inline(always)]
            || self.update_impl(h, w, s0, s1, g),
        )
    }

    #[inline(always)]
    fn update_impl<T: Float>(&self, h: &[T], w: &mut [T], s0: &mut [T], s1: &mut [T], g: &[T]) {
        let one = T::ONE;
        match self.rule {
            Rule::Sgd => w.iter_mut().zip(g).for_each(|(w, &g)| *w = *w - h[0] * g),
            Rule::Momentum => {
                let (lr, m) = (h[0], h[1]);
                let nesterov = self.nesterov;
                for ((w, a), &g) in w.iter_mut().zip(s0.iter_mut()).zip(g) {
                    *a = *a * m + g;
                    *w = if nesterov { *w - (g * lr + *a * m * lr) } else { *w - lr * *a };
                }
            }
            Rule::Adam => {
                let (lr_t, b1, b2, eps) = (h[0], h[3], h[4], h[5]);
                let (c1, c2) = (one - b1, one - b2);
                if self.nesterov {
                    for (((w, m), v), &g) in w.iter_mut().zip(s0.iter_mut()).zip(s1.iter_mut()).zip(g) {
                        *m = *m + (g - *m) * c1;
                        *v = *v + (g * g - *v) * c2;
                        *w = *w - (g * c1 + b1 * *m) * lr_t / (v.sqrt() + eps);
                    }
                } else {
                    for (((w, m), v), &g) in w.iter_mut().zip(s0.iter_mut()).zip(s1.iter_mut()).zip(g) {
                        *m = *m + (g - *m) * c1;
                        *v = *v + (g * g - *v) * c2;
                        *w = *w - *m * lr_t / (v.sqrt() + eps);
                    }
                }
            }
            Rule::RmsProp => {
                let (lr, rho, mom, eps) = (h[0], h[1], h[2], h[3]);
                for (((w, ms), mo), &g) in w.iter_mut().zip(s0.iter_mut()).zip(s1.iter_mut()).zip(g) {
                    *ms = *ms + (g * g - *ms) * (one - rho);
                    *mo = *mo * mom + lr * g / (*ms + eps).sqrt();
                    *w = *w - *mo;
                }
            }
            Rule::Adagrad | Rule::AdagradV2 => {
                let eps = if self.rule == Rule::AdagradV2 { h[1] } else { T::ZERO };
                let upd = self.update_slots;
                for ((w, a), &g) in w.iter_mut().zip(s0.iter_mut()).zip(g) {
                    if upd {
                        *a = *a + g * g;
                    }
                    *w = *w - h[0] * g / (a.sqrt() + eps);
                }
            }
        }
    }

    fn run<T: Element + Float>(&self, ctx: &KernelContext, inputs: &Inputs) -> KResult<()> {
        let (nvars, hyper, gi) = self.rule.layout();
        let node = self.node.as_str();
        let scalar = |i: usize, name: &str| -> KResult<T> {
            inputs[i]
                .scalar_value::<T>()
                .map_err(|e| invalid(format!("node '{node}': input '{name}' must be a scalar: {e}")))
        };
        let mut h = Vec::with_capacity(hyper.len());
        for &(name, i) in hyper {
            h.push(scalar(i, name)?);
        }
        if self.rule == Rule::Adam {
            let (p1, p2, lr) = (h[0], h[1], h[2]);
            h[0] = lr * (T::ONE - p2).sqrt() / (T::ONE - p1);
        }
        let grad_t = &inputs[gi];
        let g = grad_t.as_slice::<T>()?;
        let dims = grad_t.dims();
        let vars: Vec<Arc<Variable>> =
            (0..nvars).map(|i| var_from_handle(ctx, node, &inputs[i], self.dtype)).collect::<KResult<_>>()?;
        for i in 0..nvars {
            for j in i + 1..nvars {
                if Arc::ptr_eq(&vars[i], &vars[j]) {
                    return Err(invalid(format!("node '{node}': inputs {i} and {j} are the same variable")));
                }
            }
        }
        // Lock every variable, in address order (no deadlock between update ops).
        let mut order: Vec<usize> = (0..nvars).collect();
        order.sort_by_key(|&i| Arc::as_ptr(&vars[i]) as usize);
        let mut guards: Vec<Option<RwLockWriteGuard<Option<Tensor>>>> = (0..nvars).map(|_| None).collect();
        for &i in &order {
            guards[i] = Some(vars[i].lock());
        }
        let mut ptrs: Vec<SendPtr<T>> = Vec::with_capacity(3);
        for (i, guard) in guards.iter_mut().enumerate() {
            let key = inputs[i].resource_key().unwrap_or("?");
            let t = guard.as_mut().expect("locked").as_mut().ok_or_else(|| {
                invalid(format!("node '{node}': variable '{key}' is uninitialized (run its initializer first)"))
            })?;
            if t.dims() != dims {
                return Err(invalid(format!(
                    "node '{node}': variable '{key}' has shape {:?} but the gradient has shape {dims:?}",
                    t.dims()
                )));
            }
            // Copies first if a value read earlier in the step still shares the buffer.
            ptrs.push(SendPtr(t.as_mut_slice::<T>()?.as_mut_ptr()));
        }
        let n = g.len();
        let (w, s0, s1) = (ptrs[0], ptrs.get(1).copied(), ptrs.get(2).copied());
        let gp = SendPtr(g.as_ptr() as *mut T);
        let h = &h;
        let range = |lo: usize, hi: usize| {
            let len = hi - lo;
            // SAFETY: [lo, hi) is within every buffer (all have n elements, checked above), the
            // buffers are exclusively ours under the write locks, distinct variables (checked),
            // and ranges given to different threads never overlap.
            unsafe {
                let slot = |p: Option<SendPtr<T>>| match p {
                    Some(p) => std::slice::from_raw_parts_mut(p.get().add(lo), len),
                    None => &mut [][..],
                };
                self.update(
                    h,
                    std::slice::from_raw_parts_mut(w.get().add(lo), len),
                    slot(s0),
                    slot(s1),
                    std::slice::from_raw_parts(gp.get().add(lo), len),
                );
            }
        };
        if n >= 2 * CHUNK && ctx.threads() > 1 {
            ctx.for_each_part(n.div_ceil(CHUNK), |c| range(c * CHUNK, ((c + 1) * CHUNK).min(n)));
        } else {
            range(0, n);
        }
        Ok(())
    }
}

impl OpKernel for Apply {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, _: &mut Outputs) -> KResult<()> {
        match self.dtype {
            DType::Float => self.run::<f32>(ctx, inputs),
            DType::Double => self.run::<f64>(ctx, inputs),
            d => Err(invalid(format!("no update kernel for {d}"))),
        }
    }
}

fn factory(d: &NodeDesc, rule: Rule) -> KResult<Box<dyn OpKernel>> {
    let has = |a: &str| d.def.attr_def(a).is_some();
    Ok(Box::new(Apply {
        node: d.name.to_string(),
        rule,
        dtype: d.dtype("T")?,
        nesterov: if has("use_nesterov") { d.bool("use_nesterov")? } else { false },
        update_slots: if has("update_slots") { d.bool("update_slots")? } else { true },
    }))
}
macro_rules! factories {
    ($($f:ident => $rule:ident),*) => {$(
        fn $f(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> { factory(d, Rule::$rule) }
    )*};
}
factories!(k_sgd => Sgd, k_momentum => Momentum, k_adam => Adam, k_rms => RmsProp, k_adagrad => Adagrad, k_adagrad2 => AdagradV2);

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("ResourceApplyGradientDescent", "T", FLOATS, k_sgd);
    r.register("ResourceApplyMomentum", "T", FLOATS, k_momentum);
    r.register("ResourceApplyAdam", "T", FLOATS, k_adam);
    r.register("ResourceApplyRMSProp", "T", FLOATS, k_rms);
    r.register("ResourceApplyAdagrad", "T", FLOATS, k_adagrad);
    r.register("ResourceApplyAdagradV2", "T", FLOATS, k_adagrad2);
}
