//! `FusedBatchNormV3` (inference and training) and `FusedBatchNormGradV3`, NHWC or NCHW, as
//! TensorFlow's CPU kernels compute them. TensorFlow has `T` in {half, bfloat16, float} with
//! `U = float`; here `T = U = float`, and `T = U = double` as ferroflow's own addition so the
//! gradient can be checked against finite differences in float64.
//!
//! Training mode normalizes with the batch statistics (biased variance), outputs as
//! `batch_mean`/`batch_variance` the moving averages
//! `(1 - f)·old + f·batch` (the variance Bessel-corrected by `n / (n - 1)`; with
//! `exponential_avg_factor` f = 1 just the batch's), and saves the batch mean and biased
//! variance in `reserve_space_1/2` for the gradient. Batch statistics are summed in f64.
use ferroflow_proto::attr_value::Value;
use ferroflow_tensor::{DType, Tensor};

use crate::numeric::Float;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// The layout attrs of both ops: where the channel is.
#[derive(Clone, Copy, Debug)]
struct Layout {
    nchw: bool,
}

impl Layout {
    /// Channels and the stride of the channel index for an `x` of `dims`.
    fn channels(self, dims: &[usize]) -> KResult<(usize, usize)> {
        if dims.len() != 4 {
            return Err(invalid(format!("x must be 4-dimensional, got shape {dims:?}")));
        }
        Ok(if self.nchw { (dims[1], dims[2] * dims[3]) } else { (dims[3], 1) })
    }
}

/// Per-channel statistics over every element of `x` of channel `ch`.
fn per_channel<T: Float + Into<f64>>(x: &[T], c: usize, inner: usize, mut f: impl FnMut(usize, usize, f64)) {
    for (i, v) in x.iter().enumerate() {
        f(i, (i / inner) % c, (*v).into());
    }
}

fn vector<T: Float>(t: &Tensor, name: &str, c: usize) -> KResult<Vec<T>> {
    if t.dims() != [c] {
        return Err(invalid(format!("{name} must have shape [{c}], got {:?}", t.dims())));
    }
    Ok(t.as_slice::<T>()?.to_vec())
}

/// A per-channel vector as f64 (the statistics are computed in f64).
fn vector64<T: Float + Into<f64>>(t: &Tensor, name: &str, c: usize) -> KResult<Vec<f64>> {
    Ok(vector::<T>(t, name, c)?.into_iter().map(Into::into).collect())
}

struct FusedBatchNorm<T> {
    epsilon: f32,
    exponential_avg_factor: f32,
    training: bool,
    layout: Layout,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float + Into<f64>> OpKernel for FusedBatchNorm<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let dims = inputs[0].dims().to_vec();
        let (c, inner) = self.layout.channels(&dims)?;
        let scale = vector::<T>(&inputs[1], "scale", c)?;
        let offset = vector::<T>(&inputs[2], "offset", c)?;
        let stat = |v: &[T]| Tensor::from_slice(&[c], v);
        if !self.training {
            let (mean, var) = (vector::<T>(&inputs[3], "mean", c)?, vector::<T>(&inputs[4], "variance", c)?);
            // The optimizer's inference rewrite (optimize::arith) computes these same two
            // factors, rounding after each step.
            let eps = T::from_f64(self.epsilon as f64);
            let mul: Vec<T> = (0..c).map(|i| scale[i] / (var[i] + eps).sqrt()).collect();
            let add: Vec<T> = (0..c).map(|i| offset[i] - mean[i] * mul[i]).collect();
            let mut y = inputs.swap_remove(0);
            for (i, v) in y.as_mut_slice::<T>()?.iter_mut().enumerate() {
                let ch = (i / inner) % c;
                *v = *v * mul[ch] + add[ch];
            }
            outputs.push(y);
            outputs.push(stat(&mean)?);
            outputs.push(stat(&var)?);
            outputs.push(stat(&mean)?);
            outputs.push(stat(&var)?);
            outputs.push(Tensor::zeros(T::DTYPE, &[])?);
            return Ok(());
        }
        let factor = self.exponential_avg_factor as f64;
        // The running statistics are read only when they are blended in.
        let old = if factor != 1.0 {
            Some((vector64::<T>(&inputs[3], "mean", c)?, vector64::<T>(&inputs[4], "variance", c)?))
        } else {
            None
        };
        let (scale, offset) = (to64(&scale), to64(&offset));
        let x = inputs[0].as_slice::<T>()?;
        let rest = x.len().checked_div(c).unwrap_or(0);
        let mut sum = vec![0f64; c];
        per_channel(x, c, inner, |_, ch, v| sum[ch] += v);
        let mean: Vec<f64> = sum.iter().map(|s| s / rest as f64).collect();
        let mut sq = vec![0f64; c];
        per_channel(x, c, inner, |_, ch, v| sq[ch] += (v - mean[ch]) * (v - mean[ch]));
        let var: Vec<f64> = sq.iter().map(|s| s / rest as f64).collect();
        let eps = self.epsilon as f64;
        let factor_of: Vec<f64> = (0..c).map(|i| scale[i] / (var[i] + eps).sqrt()).collect();
        let mut y = Tensor::zeros(T::DTYPE, &dims)?;
        let ys = y.as_mut_slice::<T>()?;
        per_channel(x, c, inner, |i, ch, v| {
            ys[i] = T::from_f64((v - mean[ch]) * factor_of[ch] + offset[ch]);
        });
        let adjust = rest as f64 / rest.saturating_sub(1).max(1) as f64;
        let (new_mean, new_var): (Vec<T>, Vec<T>) = match &old {
            None => {
                (mean.iter().map(|&m| T::from_f64(m)).collect(), var.iter().map(|&v| T::from_f64(v * adjust)).collect())
            }
            Some((om, ov)) => (
                (0..c).map(|i| T::from_f64((1.0 - factor) * om[i] + factor * mean[i])).collect(),
                (0..c).map(|i| T::from_f64((1.0 - factor) * ov[i] + factor * adjust * var[i])).collect(),
            ),
        };
        let saved_mean: Vec<T> = mean.iter().map(|&m| T::from_f64(m)).collect();
        let saved_var: Vec<T> = var.iter().map(|&v| T::from_f64(v)).collect();
        outputs.push(y);
        outputs.push(stat(&new_mean)?);
        outputs.push(stat(&new_var)?);
        outputs.push(stat(&saved_mean)?);
        outputs.push(stat(&saved_var)?);
        outputs.push(Tensor::zeros(T::DTYPE, &[])?);
        Ok(())
    }
}

/// `FusedBatchNormGradV3`. Training mode (`reserve_space_1/2` the batch mean and biased
/// variance): `dx = scale·rsqrt(var+ε)·(dy − mean(dy) − (x−μ)·mean(dy·(x−μ))/(var+ε))`;
/// inference mode (the population statistics): `dx = dy·scale·rsqrt(var+ε)`. Both:
/// `dscale = Σ dy·(x−μ)·rsqrt(var+ε)`, `doffset = Σ dy`.
struct FusedBatchNormGrad<T> {
    epsilon: f32,
    training: bool,
    layout: Layout,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float + Into<f64>> OpKernel for FusedBatchNormGrad<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let dims = inputs[1].dims().to_vec();
        if inputs[0].dims() != dims.as_slice() {
            return Err(invalid(format!(
                "y_backprop has shape {:?} but x has shape {dims:?}; they must be equal",
                inputs[0].dims()
            )));
        }
        let (c, inner) = self.layout.channels(&dims)?;
        let scale = vector64::<T>(&inputs[2], "scale", c)?;
        let mean = vector64::<T>(&inputs[3], "reserve_space_1 (mean)", c)?;
        let var = vector64::<T>(&inputs[4], "reserve_space_2 (variance)", c)?;
        let (dy, x) = (inputs[0].as_slice::<T>()?, inputs[1].as_slice::<T>()?);
        let eps = self.epsilon as f64;
        let inv: Vec<f64> = var.iter().map(|&v| 1.0 / (v + eps).sqrt()).collect();
        let (mut sum_dy, mut sum_dy_xc) = (vec![0f64; c], vec![0f64; c]);
        per_channel(dy, c, inner, |i, ch, g| {
            sum_dy[ch] += g;
            sum_dy_xc[ch] += g * (Into::<f64>::into(x[i]) - mean[ch]);
        });
        let rest = x.len().checked_div(c).unwrap_or(0) as f64;
        let mut dx = Tensor::zeros(T::DTYPE, &dims)?;
        let dxs = dx.as_mut_slice::<T>()?;
        per_channel(dy, c, inner, |i, ch, g| {
            let k = scale[ch] * inv[ch];
            dxs[i] = T::from_f64(if self.training {
                let xc = Into::<f64>::into(x[i]) - mean[ch];
                k * (g - sum_dy[ch] / rest - xc * sum_dy_xc[ch] / rest * inv[ch] * inv[ch])
            } else {
                g * k
            });
        });
        let dscale: Vec<T> = (0..c).map(|i| T::from_f64(sum_dy_xc[i] * inv[i])).collect();
        let doffset: Vec<T> = sum_dy.iter().map(|&s| T::from_f64(s)).collect();
        outputs.push(dx);
        outputs.push(Tensor::from_slice(&[c], &dscale)?);
        outputs.push(Tensor::from_slice(&[c], &doffset)?);
        outputs.push(Tensor::zeros(T::DTYPE, &[0])?);
        outputs.push(Tensor::zeros(T::DTYPE, &[0])?);
        Ok(())
    }
}

fn to64<T: Float + Into<f64>>(v: &[T]) -> Vec<f64> {
    v.iter().map(|&x| x.into()).collect()
}

fn float_attr(d: &NodeDesc, name: &str, default: f32) -> f32 {
    match d.def.attr(d.attrs, name).and_then(|v| v.value.as_ref()) {
        Some(Value::F(f)) => *f,
        _ => default,
    }
}

/// The layout and the checked `T == U` of either op.
fn common(d: &NodeDesc) -> KResult<(DType, Layout)> {
    let (t, u) = (d.dtype("T")?, d.dtype("U")?);
    if t != u {
        return Err(invalid(format!(
            "node '{}': {} with T={t} and U={u} is not supported; the CPU kernels need T = U (float, or double)",
            d.name, d.def.name
        )));
    }
    let layout = match d.string("data_format")?.as_str() {
        "NHWC" => Layout { nchw: false },
        "NCHW" => Layout { nchw: true },
        f => return Err(invalid(format!("node '{}': data_format {f} is not supported (NHWC or NCHW)", d.name))),
    };
    Ok((t, layout))
}

fn k_batch_norm(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let (t, layout) = common(d)?;
    let epsilon = float_attr(d, "epsilon", 1e-4);
    let exponential_avg_factor = float_attr(d, "exponential_avg_factor", 1.0);
    let training = d.bool("is_training")?;
    dispatch!(t, d.def.name, [Float => f32, Double => f64], |T| Ok(Box::new(FusedBatchNorm::<T> {
        epsilon,
        exponential_avg_factor,
        training,
        layout,
        _t: Default::default()
    }) as Box<dyn OpKernel>))
}

fn k_batch_norm_grad(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let (t, layout) = common(d)?;
    let epsilon = float_attr(d, "epsilon", 1e-4);
    let training = d.bool("is_training")?;
    dispatch!(t, d.def.name, [Float => f32, Double => f64], |T| Ok(Box::new(FusedBatchNormGrad::<T> {
        epsilon,
        training,
        layout,
        _t: Default::default()
    }) as Box<dyn OpKernel>))
}

pub(super) fn register(r: &mut KernelRegistry) {
    const F: &[DType] = &[DType::Float, DType::Double];
    r.register("FusedBatchNormV3", "T", F, k_batch_norm);
    r.register("FusedBatchNormGradV3", "T", F, k_batch_norm_grad);
}
