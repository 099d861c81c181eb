//! Convolutions with a fused epilogue, made by the optimizer's remapper: `_FusedConv2D`
//! (`+ bias` and an activation), `_FusedConv2DElementwise` (an elementwise program, then
//! optionally a max pool) and `_FusedDepthwiseConv2dElementwise`; each runs its epilogue
//! ([`crate::epilogue`]) on blocks of output while they are in cache.
use ferroflow_tensor::{DType, Element, Tensor};

use super::depthwise::{depthwise_m1, Depthwise, Geometry};
use super::pool::max_pool_valid;
use super::{BlockFn, Conv2D, Window};
use crate::elementwise::{visit_unary, UnaryVisitor};
use crate::epilogue::{add_bias, Activation, RowEpilogue};
use crate::matmul::GemmElement;
use crate::numeric::Float;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// Elements per epilogue row of a fused convolution (whole pixels): the per-channel operands
/// are tiled to this length once per run.
const EPILOGUE_ROW: usize = 2048;

/// `_FusedDepthwiseConv2dElementwise`: the depthwise convolution with the node's program run
/// on each output row as soon as it is computed (one filter per channel), or on the whole
/// output after the general kernel (a channel multiplier above 1).
struct FusedDepthwise<T> {
    window: Window,
    epilogue: RowEpilogue<T>,
}

impl<T: Float + Element> OpKernel for FusedDepthwise<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        match self.window.materialized::<T>(inputs)? {
            Some((window, padded)) => {
                inputs[0] = padded;
                self.run(&window, ctx, inputs, outputs)
            }
            None => self.run(&self.window, ctx, inputs, outputs),
        }
    }
}

impl<T: Float + Element> FusedDepthwise<T> {
    fn run(&self, window: &Window, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let Geometry { input: [n, h, w, c], window: [kh, kw], multiplier: m, axes: [ah, aw] } =
            window.depthwise(inputs)?;
        let (oh, ow, oc) = (ah.output, aw.output, c * m);
        let row_len = oc.max(1) * (EPILOGUE_ROW / oc.max(1)).max(1);
        let Some(ops) = self.epilogue.operands(&inputs[2..], &[n, oh, ow, oc], row_len)? else {
            let general = Depthwise::<T> { window: window.clone(), _t: Default::default() };
            let mut conv_out = Outputs::with_capacity(1);
            general.compute(ctx, inputs, &mut conv_out)?;
            return self.epilogue.finish(ctx, conv_out.pop().expect("one output"), &inputs[2..], outputs);
        };
        if m != 1 {
            let general = Depthwise::<T> { window: window.clone(), _t: Default::default() };
            let mut conv_inputs: Inputs = inputs[..2].to_vec();
            let mut conv_out = Outputs::with_capacity(1);
            general.compute(ctx, &mut conv_inputs, &mut conv_out)?;
            let mut out = conv_out.pop().expect("one output");
            let rows = out.as_mut_slice::<T>()?;
            let mut scratch = Vec::new();
            if ow * oc > 0 {
                for (r, row) in rows.chunks_mut(ow * oc).enumerate() {
                    self.epilogue.apply(r * ow * oc, row, &ops, &mut scratch);
                }
            }
            outputs.push(out);
            return Ok(());
        }
        // `depthwise_m1` writes every element.
        let mut out = Tensor::for_overwrite(T::DTYPE, &[n, oh, ow, oc])?;
        let (x, f) = (inputs[0].as_slice::<T>()?, inputs[1].as_slice::<T>()?);
        let apply = |start: usize, row: &mut [T], scratch: &mut Vec<T>| self.epilogue.apply(start, row, &ops, scratch);
        depthwise_m1(ctx, (x, f), [n, h, w, c], [kh, kw], [ah, aw], out.as_mut_slice::<T>()?, Some(&apply));
        outputs.push(out);
        Ok(())
    }
}

/// `_FusedConv2DElementwise`: the convolution with the program run on each block of output
/// rows right after the GEMM wrote it (frozen BatchNormalization, the activation and
/// ResNet's residual `Add` + `Relu`, in cache), and optionally a prologue: a program run on
/// each block of input rows before a pointwise convolution's GEMM reads it (a pre-activation
/// BatchNormalization + ReLU: DenseNet's, ResNetV2's), so the activated input is never
/// written to memory.
struct FusedConv<T> {
    conv: Conv2D<T>,
    /// Attr `program`; `None` when it is empty (a convolution fused only for its prologue).
    epilogue: Option<RowEpilogue<T>>,
    /// Attr `prologue` (over the input as `a0` and the last `prologue_args` of `args`) and
    /// that count.
    prologue: Option<(RowEpilogue<T>, usize)>,
    /// The windows (`[ph, pw]`) of the max pool that follows the epilogue (attr `max_pool`).
    pool: Option<[usize; 2]>,
}

impl<T: GemmElement + Float + Element> OpKernel for FusedConv<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        // The prologue's operands are the last inputs.
        let pro_args: Vec<Tensor> = match &self.prologue {
            Some((_, m)) if inputs.len() >= 2 + m => inputs.drain(inputs.len() - m..).collect(),
            Some((_, m)) => {
                return Err(invalid(format!("a prologue of {m} operands needs {} inputs, got {}", 2 + m, inputs.len())))
            }
            None => Vec::new(),
        };
        let mut pro_ops = None;
        if let Some((pro, _)) = &self.prologue {
            let dims = inputs[0].dims().to_vec();
            let c = dims.last().copied().unwrap_or(0).max(1);
            let ops = match dims.len() == 4 && self.conv.pointwise_gemm(inputs)? {
                true => pro.operands(&pro_args, &dims, c * (EPILOGUE_ROW / c).max(1))?,
                false => None,
            };
            match ops {
                Some(ops) => pro_ops = Some((pro, ops)),
                None => {
                    // Not a pointwise GEMM (or operands of other shapes): the prologue on the
                    // whole input first, as the unfused graph computes it.
                    let mut o = Outputs::with_capacity(1);
                    pro.finish(ctx, inputs[0].clone(), &pro_args, &mut o)?;
                    inputs[0] = o.pop().expect("the prologue's output");
                }
            }
        }
        let inputs: &Inputs = inputs;
        let prologue_fn = pro_ops.as_ref().map(|(pro, ops)| {
            move |start: usize, block: &mut [T], scratch: &mut Vec<T>| pro.apply(start, block, ops, scratch)
        });
        let prologue: Option<BlockFn<T>> = prologue_fn.as_ref().map(|f| f as BlockFn<T>);
        let conv = |epilogue: Option<BlockFn<T>>| match prologue {
            Some(p) => self.conv.run_with_prologue(ctx, inputs, epilogue, p),
            None => self.conv.run(ctx, inputs, epilogue),
        };
        let pooled = |epilogue: Option<BlockFn<T>>, pool: [usize; 2]| -> KResult<Tensor> {
            let direct = match prologue {
                Some(_) => None,
                None => self.conv.run_pooled(ctx, inputs, epilogue, pool)?,
            };
            match direct {
                Some(out) => Ok(out),
                None => max_pool_valid::<T>(&conv(epilogue)?, pool),
            }
        };
        let dims = self.conv.output_dims(inputs)?;
        let oc = dims[3].max(1);
        let row_len = oc * (EPILOGUE_ROW / oc).max(1);
        let epilogue = match &self.epilogue {
            Some(e) => Some((e, e.operands(&inputs[2..], &dims, row_len)?)),
            None => None,
        };
        match epilogue {
            Some((e, Some(ops))) => {
                let apply = |start: usize, block: &mut [T], scratch: &mut Vec<T>| e.apply(start, block, &ops, scratch);
                outputs.push(match self.pool {
                    Some(pool) => pooled(Some(&apply), pool)?,
                    None => conv(Some(&apply))?,
                });
                Ok(())
            }
            Some((e, None)) => {
                e.finish(ctx, conv(None)?, &inputs[2..], outputs)?;
                if let Some(pool) = self.pool {
                    let out = outputs.pop().expect("the epilogue's output");
                    outputs.push(max_pool_valid::<T>(&out, pool)?);
                }
                Ok(())
            }
            None => {
                outputs.push(match self.pool {
                    Some(pool) => pooled(None, pool)?,
                    None => conv(None)?,
                });
                Ok(())
            }
        }
    }
}

/// `_FusedConv2D`: the convolution, with `+ bias` and the activation applied to each block of
/// output rows right after the GEMM wrote it (in cache).
struct FusedConvBias<T> {
    conv: Conv2D<T>,
    act: Activation,
}

/// Runs a [`FusedConvBias`] with a given activation.
struct ConvBias<'a, T> {
    conv: &'a Conv2D<T>,
    ctx: &'a KernelContext<'a>,
    inputs: &'a Inputs,
    b: &'a [T],
}

impl<T: Float + Element + GemmElement> UnaryVisitor<T> for ConvBias<'_, T> {
    type Out = KResult<Tensor>;
    fn visit<F: Fn(T) -> T + Copy + Send + Sync + 'static>(self, f: F) -> KResult<Tensor> {
        let b = self.b;
        self.conv.run(self.ctx, self.inputs, Some(&move |_, block: &mut [T], _: &mut Vec<T>| add_bias(block, b, f)))
    }
}

impl<T: Float + Element + GemmElement> OpKernel for FusedConvBias<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let bias = inputs.swap_remove(2);
        inputs.truncate(2);
        let c = inputs[1].dims().last().copied().unwrap_or(0);
        if bias.rank() != 1 || bias.len() != c {
            return Err(invalid(format!(
                "Must provide as many biases as the last dimension of the product: {:?} vs. {:?}",
                bias.dims(),
                inputs[1].dims()
            )));
        }
        let b = bias.as_slice::<T>()?;
        let run = ConvBias { conv: &self.conv, ctx, inputs, b };
        let out = match self.act {
            Activation::None => run.visit(|x: T| x)?,
            Activation::Unary(f) => visit_unary::<T, _>(f, run)?,
            Activation::LeakyRelu(a) => {
                let alpha = T::from_f64(a);
                let leaky = move |x: T| if x < T::ZERO { x * alpha } else { x };
                self.conv.run(
                    ctx,
                    inputs,
                    Some(&move |_, block: &mut [T], _: &mut Vec<T>| add_bias(block, b, leaky)),
                )?
            }
        };
        outputs.push(out);
        Ok(())
    }
}

fn k_fused_conv2d(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let act = Activation::from_fused_ops(d)?;
    if d.string("data_format")? != "NHWC" || d.string("filter_format").unwrap_or_else(|_| "HWIO".into()) != "HWIO" {
        return Err(invalid(format!("node '{}': _FusedConv2D is supported in NHWC/HWIO layout only", d.name)));
    }
    if d.int("num_host_args").unwrap_or(0) != 0 {
        return Err(invalid(format!("node '{}': _FusedConv2D with host_args is not supported", d.name)));
    }
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(FusedConvBias::<T> { conv: Conv2D::new(d)?, act }) as Box<dyn OpKernel>))
}

/// `_FusedDepthwiseConv2dElementwise`'s kernel.
fn k_fused_depthwise(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let window = Window::from_node(d, true)?;
    let n_args = d.int("N")?;
    let n_args = usize::try_from(n_args).map_err(|_| invalid(format!("attr 'N' is {n_args}")))?;
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(FusedDepthwise::<T> { window, epilogue: RowEpilogue::new(d, n_args)? }) as Box<dyn OpKernel>))
}

/// `_FusedConv2DElementwise`'s kernel.
fn k_fused_conv(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let pool = match d.ints("max_pool")[..] {
        [] => None,
        [ph, pw] if ph >= 1 && pw >= 1 => Some([ph as usize, pw as usize]),
        ref v => return Err(invalid(format!("attr 'max_pool' must be empty or 2 positive window sizes, got {v:?}"))),
    };
    let n_args = d.int("N")?;
    let n_args = usize::try_from(n_args).map_err(|_| invalid(format!("attr 'N' is {n_args}")))?;
    let pro_args = d.int("prologue_args").unwrap_or(0);
    let pro_args = usize::try_from(pro_args)
        .ok()
        .filter(|&m| m <= n_args)
        .ok_or_else(|| invalid(format!("node '{}': attr 'prologue_args' is {pro_args}, N is {n_args}", d.name)))?;
    let has = |attr: &str| {
        matches!(d.def.attr(d.attrs, attr).and_then(|v| v.value.as_ref()),
        Some(ferroflow_proto::attr_value::Value::List(l)) if !l.s.is_empty())
    };
    if !has("prologue") && pro_args > 0 {
        return Err(invalid(format!("node '{}': 'prologue_args' is {pro_args} without a 'prologue'", d.name)));
    }
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64], |T| {
        let epilogue = match has("program") {
            true => Some(RowEpilogue::<T>::new(d, n_args - pro_args)?),
            false => None,
        };
        let prologue = match has("prologue") {
            true => Some((RowEpilogue::<T>::from_attr(d, "prologue", pro_args)?, pro_args)),
            false => None,
        };
        Ok(Box::new(FusedConv::<T> { conv: Conv2D::new(d)?, epilogue, prologue, pool }) as Box<dyn OpKernel>)
    })
}

pub(super) fn register(r: &mut KernelRegistry) {
    const F: &[DType] = &[DType::Float, DType::Double];
    r.register("_FusedConv2D", "T", F, k_fused_conv2d);
    r.register("_FusedDepthwiseConv2dElementwise", "T", F, k_fused_depthwise);
    r.register("_FusedConv2DElementwise", "T", F, k_fused_conv);
}
