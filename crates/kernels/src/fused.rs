//! Fused kernels made by the optimizer's remapper: `_FusedMatMul` and `_FusedConv2D`
//! (contraction, then bias and activation in one pass over the output while it is still
//! being written), and `_FusedElementwise` (a chain of elementwise ops evaluated block by
//! block, one pass over memory).
//!
//! Every fused kernel computes bit-for-bit what the unfused ops compute: it calls the same
//! scalar functions in the same order (`(x + bias)` then the activation; each elementwise
//! op on the previous op's rounded result).
use ferroflow_proto::attr_value::Value;
use ferroflow_tensor::{broadcast_dims, DType, Element, Tensor};
use rayon::prelude::*;

use crate::elementwise as ew;
use crate::math as m;
use crate::numeric::Float;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// Elements above which fused epilogues and elementwise blocks are split across the pool.
const PARALLEL_MIN: usize = 1 << 15;
/// Elements per block of a fused elementwise program (fits L1 with a few registers).
const BLOCK: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Activation {
    None,
    Relu,
    Relu6,
    Elu,
    LeakyRelu(f64),
    Tanh,
    Sigmoid,
}

fn list_strings(d: &NodeDesc, name: &str) -> Vec<String> {
    match d.def.attr(d.attrs, name).and_then(|v| v.value.as_ref()) {
        Some(Value::List(l)) => l.s.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect(),
        _ => vec![],
    }
}

fn float_attr(d: &NodeDesc, name: &str, default: f64) -> f64 {
    match d.def.attr(d.attrs, name).and_then(|v| v.value.as_ref()) {
        Some(Value::F(f)) => *f as f64,
        _ => default,
    }
}

/// Reads `fused_ops`: `[BiasAdd]` or `[BiasAdd, <activation>]`.
fn epilogue(d: &NodeDesc) -> KResult<Activation> {
    let ops = list_strings(d, "fused_ops");
    let unsupported = || {
        invalid(format!(
            "node '{}': {} with fused_ops {ops:?} is not supported (supported: [BiasAdd] optionally followed by Relu, Relu6, Elu, LeakyRelu, Tanh or Sigmoid)",
            d.name, d.def.name
        ))
    };
    if ops.first().map(String::as_str) != Some("BiasAdd") || ops.len() > 2 {
        return Err(unsupported());
    }
    if d.int("num_args")? != 1 {
        return Err(invalid(format!("node '{}': {} with BiasAdd needs num_args=1", d.name, d.def.name)));
    }
    Ok(match ops.get(1).map(String::as_str) {
        None => Activation::None,
        Some("Relu") => Activation::Relu,
        Some("Relu6") => Activation::Relu6,
        Some("Elu") => Activation::Elu,
        Some("LeakyRelu") => Activation::LeakyRelu(float_attr(d, "leakyrelu_alpha", 0.2)),
        Some("Tanh") => Activation::Tanh,
        Some("Sigmoid") => Activation::Sigmoid,
        Some(_) => return Err(unsupported()),
    })
}

/// A contraction (MatMul or Conv2D kernel) followed by `+ bias` over the last axis and an
/// activation, applied to each output row right after the contraction.
struct FusedContraction<T> {
    inner: Box<dyn OpKernel>,
    act: Activation,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float + Element> OpKernel for FusedContraction<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let bias = inputs.swap_remove(2);
        inputs.truncate(2);
        self.inner.compute(ctx, inputs, outputs)?;
        let out = outputs.last_mut().expect("the contraction pushed its output");
        let c = *out.dims().last().unwrap_or(&0);
        if bias.rank() != 1 || bias.len() != c {
            return Err(invalid(format!(
                "Must provide as many biases as the last dimension of the product: {:?} vs. {:?}",
                bias.dims(),
                out.dims()
            )));
        }
        let b = bias.as_slice::<T>()?;
        let alpha = match self.act {
            Activation::LeakyRelu(a) => T::from_f64(a),
            _ => T::ZERO,
        };
        let v = out.as_mut_slice::<T>()?;
        if c == 0 {
            return Ok(());
        }
        // One monomorphic loop per activation (a function item), so it inlines and vectorises.
        match self.act {
            Activation::None => bias_act(ctx, v, b, |x: T| x),
            Activation::Relu => bias_act(ctx, v, b, ew::relu::<T>),
            Activation::Relu6 => bias_act(ctx, v, b, m::relu6::<T>),
            Activation::Elu => bias_act(ctx, v, b, m::elu::<T>),
            Activation::LeakyRelu(_) => bias_act(ctx, v, b, move |x: T| if x < T::ZERO { x * alpha } else { x }),
            Activation::Tanh => bias_act(ctx, v, b, ew::tanh::<T>),
            Activation::Sigmoid => bias_act(ctx, v, b, ew::sigmoid::<T>),
        }
        Ok(())
    }
}

/// `v[r, j] = f(v[r, j] + b[j])` over rows of `b.len()`, split across the pool when large.
fn bias_act<T: Float + Element>(ctx: &KernelContext, v: &mut [T], b: &[T], f: impl Fn(T) -> T + Sync + Copy) {
    let c = b.len();
    let rows = |rows: &mut [T]| {
        for row in rows.chunks_mut(c) {
            row.iter_mut().zip(b).for_each(|(e, bv)| *e = f(e.add_w(*bv)));
        }
    };
    if v.len() >= PARALLEL_MIN && ctx.threads() > 1 {
        let per_task = (v.len() / c).div_ceil(ctx.threads() * 4).max(1);
        ctx.install(|| v.par_chunks_mut(per_task * c).for_each(rows));
    } else {
        rows(v);
    }
}

fn k_fused_matmul(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let act = epilogue(d)?;
    let inner = crate::matmul::k_matmul(d)?;
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(FusedContraction::<T> { inner, act, _t: Default::default() }) as Box<dyn OpKernel>))
}

fn k_fused_conv2d(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let act = epilogue(d)?;
    if d.string("data_format")? != "NHWC" || d.string("filter_format").unwrap_or_else(|_| "HWIO".into()) != "HWIO" {
        return Err(invalid(format!("node '{}': _FusedConv2D is supported in NHWC/HWIO layout only", d.name)));
    }
    if d.int("num_host_args").unwrap_or(0) != 0 {
        return Err(invalid(format!("node '{}': _FusedConv2D with host_args is not supported", d.name)));
    }
    let inner = crate::conv::k_conv2d(d)?;
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(FusedContraction::<T> { inner, act, _t: Default::default() }) as Box<dyn OpKernel>))
}

/// The elementwise ops a `_FusedElementwise` program may use (no attrs, float types).
pub const FUSIBLE_UNARY: &[&str] = &[
    "Neg",
    "Abs",
    "Square",
    "Relu",
    "Relu6",
    "Elu",
    "Selu",
    "Sqrt",
    "Rsqrt",
    "Exp",
    "Log",
    "Tanh",
    "Sigmoid",
    "Softplus",
    "Floor",
    "Ceil",
    "Reciprocal",
    "Log1p",
    "Expm1",
    "Sin",
    "Cos",
    "Sign",
];
/// Binary ops a `_FusedElementwise` program may use.
pub const FUSIBLE_BINARY: &[&str] =
    &["Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "SquaredDifference"];

#[derive(Clone, Copy, Debug)]
enum Src {
    Arg(usize),
    Reg(usize),
}

#[derive(Clone, Debug)]
struct Instr {
    op: String,
    srcs: Vec<Src>,
}

/// Parses a program: one instruction per string, `"Op a0 r1"` (operands: argument `aK`,
/// result of instruction `rK`); the last instruction's result is the output.
fn parse_program(d: &NodeDesc, n_args: usize) -> KResult<Vec<Instr>> {
    let lines = list_strings(d, "program");
    if lines.is_empty() {
        return Err(invalid(format!("node '{}': _FusedElementwise needs a non-empty 'program'", d.name)));
    }
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        let bad = |why: String| invalid(format!("node '{}': program line {i} '{line}': {why}", d.name));
        let mut parts = line.split_whitespace();
        let op = parts.next().ok_or_else(|| bad("empty".into()))?.to_string();
        let srcs = parts
            .map(|p| {
                let (kind, num) = p.split_at(1);
                let k: usize = num.parse().map_err(|_| bad(format!("bad operand '{p}'")))?;
                match kind {
                    "a" if k < n_args => Ok(Src::Arg(k)),
                    "r" if k < i => Ok(Src::Reg(k)),
                    _ => Err(bad(format!("operand '{p}' is out of range"))),
                }
            })
            .collect::<KResult<Vec<_>>>()?;
        let arity = if FUSIBLE_UNARY.contains(&op.as_str()) {
            1
        } else if FUSIBLE_BINARY.contains(&op.as_str()) {
            2
        } else {
            return Err(bad(format!("'{op}' is not a fusible elementwise op")));
        };
        if srcs.len() != arity {
            return Err(bad(format!("'{op}' takes {arity} operand(s)")));
        }
        out.push(Instr { op, srcs });
    }
    Ok(out)
}

struct FusedElementwise<T> {
    program: Vec<Instr>,
    /// The unfused kernels, for inputs whose shapes need general broadcasting.
    kernels: Vec<Box<dyn OpKernel>>,
    _t: std::marker::PhantomData<T>,
}

#[derive(Clone, Copy)]
enum Operand<'a, T> {
    Slice(&'a [T]),
    Scalar(T),
}

macro_rules! unary_arm {
    ($op:expr, $x:expr, $dst:expr, [$($name:literal => $f:path),*]) => {
        match $op {
            $($name => match $x {
                Operand::Slice(s) => $dst.iter_mut().zip(s).for_each(|(d, v)| *d = $f(*v)),
                Operand::Scalar(v) => { let r = $f(v); $dst.iter_mut().for_each(|d| *d = r) }
            },)*
            _ => unreachable!("checked when the program was parsed"),
        }
    };
}

macro_rules! binary_arm {
    ($op:expr, $a:expr, $b:expr, $dst:expr, [$($name:literal => $f:path),*]) => {
        match $op {
            $($name => match ($a, $b) {
                (Operand::Slice(a), Operand::Slice(b)) => $dst.iter_mut().zip(a).zip(b).for_each(|((d, x), y)| *d = $f(*x, *y)),
                (Operand::Slice(a), Operand::Scalar(y)) => $dst.iter_mut().zip(a).for_each(|(d, x)| *d = $f(*x, y)),
                (Operand::Scalar(x), Operand::Slice(b)) => $dst.iter_mut().zip(b).for_each(|(d, y)| *d = $f(x, *y)),
                (Operand::Scalar(x), Operand::Scalar(y)) => { let r = $f(x, y); $dst.iter_mut().for_each(|d| *d = r) }
            },)*
            _ => unreachable!("checked when the program was parsed"),
        }
    };
}

impl<T: Float + Element> FusedElementwise<T> {
    /// Evaluates the program over elements `[start, start + out.len())` of every operand.
    /// `regs` holds `stride` elements for a copy of the block of the input whose buffer is
    /// being overwritten (`reused`), then `stride` per instruction.
    fn block(&self, args: &[&[T]], reused: Option<usize>, start: usize, out: &mut [T], regs: &mut [T], stride: usize) {
        let len = out.len();
        let last = self.program.len() - 1;
        let (scratch, regs) = regs.split_at_mut(stride);
        if reused.is_some() {
            scratch[..len].copy_from_slice(out);
        }
        let scratch: &[T] = scratch;
        for (i, ins) in self.program.iter().enumerate() {
            let (done, rest) = regs.split_at_mut(i * stride);
            let dst: &mut [T] = if i == last { &mut *out } else { &mut rest[..len] };
            let operand = |s: Src| -> Operand<T> {
                match s {
                    Src::Arg(k) if Some(k) == reused => Operand::Slice(&scratch[..len]),
                    Src::Arg(k) if args[k].len() == 1 => Operand::Scalar(args[k][0]),
                    Src::Arg(k) => Operand::Slice(&args[k][start..start + len]),
                    Src::Reg(k) => Operand::Slice(&done[k * stride..k * stride + len]),
                }
            };
            if ins.srcs.len() == 1 {
                let x = operand(ins.srcs[0]);
                unary_arm!(ins.op.as_str(), x, dst, [
                    "Neg" => ew::neg, "Abs" => ew::abs, "Square" => ew::square, "Relu" => ew::relu,
                    "Relu6" => m::relu6, "Elu" => m::elu, "Selu" => m::selu, "Sqrt" => ew::sqrt,
                    "Rsqrt" => ew::rsqrt, "Exp" => ew::exp, "Log" => ew::log, "Tanh" => ew::tanh,
                    "Sigmoid" => ew::sigmoid, "Softplus" => m::softplus, "Floor" => m::floor, "Ceil" => m::ceil,
                    "Reciprocal" => m::reciprocal, "Log1p" => m::log1p, "Expm1" => m::expm1, "Sin" => m::sin,
                    "Cos" => m::cos, "Sign" => m::sign
                ]);
            } else {
                let (a, b) = (operand(ins.srcs[0]), operand(ins.srcs[1]));
                binary_arm!(ins.op.as_str(), a, b, dst, [
                    "Add" => ew::add, "AddV2" => ew::add, "Sub" => ew::sub, "Mul" => ew::mul, "RealDiv" => ew::div,
                    "Maximum" => ew::maximum, "Minimum" => ew::minimum, "SquaredDifference" => m::squared_difference
                ]);
            }
        }
    }

    /// General broadcasting: the unfused kernels, one op at a time.
    fn op_by_op(&self, ctx: &KernelContext, args: Vec<Tensor>, outputs: &mut Outputs) -> KResult<()> {
        let mut regs: Vec<Tensor> = Vec::with_capacity(self.program.len());
        for (ins, k) in self.program.iter().zip(&self.kernels) {
            let mut inputs: Inputs = ins
                .srcs
                .iter()
                .map(|s| match *s {
                    Src::Arg(i) => args[i].clone(),
                    Src::Reg(i) => regs[i].clone(),
                })
                .collect();
            let mut out = Outputs::with_capacity(1);
            k.compute(ctx, &mut inputs, &mut out)?;
            regs.push(out.pop().ok_or_else(|| invalid(format!("{} produced no output", ins.op)))?);
        }
        outputs.push(regs.pop().expect("a non-empty program"));
        Ok(())
    }
}

impl<T: Float + Element> OpKernel for FusedElementwise<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let mut dims: Vec<usize> = vec![];
        for t in inputs.iter() {
            dims = broadcast_dims(&dims, t.dims())
                .ok_or_else(|| invalid(format!("Incompatible shapes: {dims:?} vs. {:?}", t.dims())))?;
        }
        // One pass when every operand is the output's shape or a single element.
        let simple = inputs.iter().all(|t| t.dims() == dims.as_slice() || (t.len() == 1 && t.rank() <= dims.len()));
        if !simple {
            let args = std::mem::take(inputs);
            return self.op_by_op(ctx, args, outputs);
        }
        let n: usize = dims.iter().product();
        // Write into an input's buffer when no one else holds it (as the unfused kernels do):
        // each block of it is copied aside before the block is overwritten.
        let reused = inputs.iter_mut().position(|t| t.dims() == dims.as_slice() && t.try_mut_slice::<T>().is_some());
        let mut out = match reused {
            Some(k) => std::mem::replace(&mut inputs[k], Tensor::scalar(T::ZERO)),
            None => Tensor::zeros(T::DTYPE, &dims)?,
        };
        let args: Vec<&[T]> = inputs.iter().map(|t| t.as_slice::<T>()).collect::<Result<_, _>>()?;
        let o = out.as_mut_slice::<T>()?;
        let stride = BLOCK.min(n.max(1));
        let regs_len = (self.program.len() + 1) * stride;
        if n >= PARALLEL_MIN && ctx.threads() > 1 {
            let per_task = n.div_ceil(ctx.threads() * 4).div_ceil(BLOCK) * BLOCK;
            ctx.install(|| {
                o.par_chunks_mut(per_task).enumerate().for_each(|(t, chunk)| {
                    let mut regs = vec![T::ZERO; regs_len];
                    for (b, blk) in chunk.chunks_mut(stride).enumerate() {
                        self.block(&args, reused, t * per_task + b * stride, blk, &mut regs, stride);
                    }
                })
            });
        } else {
            let mut regs = vec![T::ZERO; regs_len];
            for (b, blk) in o.chunks_mut(stride).enumerate() {
                self.block(&args, reused, b * stride, blk, &mut regs, stride);
            }
        }
        inputs.clear();
        outputs.push(out);
        Ok(())
    }
}

fn k_fused_elementwise(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let n_args = d.types.inputs.len();
    let program = parse_program(d, n_args)?;
    let t = d.dtype("T")?;
    let mut attrs = ferroflow_graph::Attrs::new();
    attrs.insert("T".into(), ferroflow_proto::AttrValue { value: Some(Value::Type(t.to_tf())) });
    let reg = ferroflow_ops::OpRegistry::global();
    let mut kernels = Vec::with_capacity(program.len());
    for ins in &program {
        let def = reg.get(&ins.op).ok_or_else(|| invalid(format!("unknown op '{}'", ins.op)))?;
        let types = def.resolve_types(&attrs).map_err(|e| invalid(format!("node '{}': {}: {e}", d.name, ins.op)))?;
        kernels.push(KernelRegistry::global().create(&NodeDesc { name: d.name, def, attrs: &attrs, types: &types })?);
    }
    dispatch!(t, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(FusedElementwise::<T> { program, kernels, _t: Default::default() }) as Box<dyn OpKernel>))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("_FusedMatMul", "T", &[DType::Float, DType::Double], k_fused_matmul);
    r.register("_FusedConv2D", "T", &[DType::Float, DType::Double], k_fused_conv2d);
    r.register("_FusedElementwise", "T", &[DType::Float, DType::Double], k_fused_elementwise);
}
