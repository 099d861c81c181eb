//! Elementwise programs: a chain of elementwise ops over a few operands, as the `program`
//! attr writes it (`"Op a0 r1"` per instruction), parsed once into monomorphised steps and
//! evaluated block by block in one pass over memory (operands of the output's shape, single
//! elements, or rows repeated along the leading dimensions), or op by op through the unfused
//! kernels where the shapes need general broadcasting; and [`RowEpilogue`], a program run in
//! place on blocks of a convolution's output.
use ferroflow_ops::{Elementwise, OpRegistry};
use ferroflow_tensor::{broadcast_dims, Element, Tensor};

use super::{list_strings, PARALLEL_MIN};
use crate::elementwise::{visit_binary, visit_unary, BinaryVisitor, UnaryVisitor};
use crate::numeric::Float;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// Elements per block of a fused elementwise program (fits L1 with a few registers).
const BLOCK: usize = 1024;

#[derive(Clone, Copy, Debug)]
enum Src {
    Arg(usize),
    Reg(usize),
}

#[derive(Clone, Copy)]
enum Operand<'a, T> {
    Slice(&'a [T]),
    Scalar(T),
}

/// One step of a program over a block: its scalar function applied to its operands.
type UnaryStep<T> = Box<dyn for<'a> Fn(Operand<'a, T>, &mut [T]) + Send + Sync>;
type BinaryStep<T> = Box<dyn for<'a> Fn(Operand<'a, T>, Operand<'a, T>, &mut [T]) + Send + Sync>;

enum Step<T> {
    Unary(UnaryStep<T>),
    Binary(BinaryStep<T>),
}

/// Makes a program step from a scalar function (monomorphised per function).
struct MakeStep;

impl<T: Float + Element> UnaryVisitor<T> for MakeStep {
    type Out = UnaryStep<T>;
    fn visit<F: Fn(T) -> T + Copy + Send + Sync + 'static>(self, f: F) -> UnaryStep<T> {
        Box::new(move |x: Operand<T>, dst: &mut [T]| match x {
            Operand::Slice(s) => crate::isa::map(dst, s, f),
            Operand::Scalar(v) => {
                let r = f(v);
                dst.iter_mut().for_each(|d| *d = r)
            }
        })
    }
}

impl<T: Float + Element> BinaryVisitor<T> for MakeStep {
    type Out = BinaryStep<T>;
    fn visit<F: Fn(T, T) -> T + Copy + Send + Sync + 'static>(self, f: F) -> BinaryStep<T> {
        // Each loop is compiled for the CPU's widest vectors (the steps run on blocks in L1).
        Box::new(move |a: Operand<T>, b: Operand<T>, dst: &mut [T]| match (a, b) {
            (Operand::Slice(a), Operand::Slice(b)) => crate::isa::zip(dst, a, b, f),
            (Operand::Slice(a), Operand::Scalar(y)) => crate::isa::map(
                dst,
                a,
                #[inline(always)]
                |x| f(x, y),
            ),
            (Operand::Scalar(x), Operand::Slice(b)) => crate::isa::map(
                dst,
                b,
                #[inline(always)]
                |y| f(x, y),
            ),
            (Operand::Scalar(x), Operand::Scalar(y)) => {
                let r = f(x, y);
                dst.iter_mut().for_each(|d| *d = r)
            }
        })
    }
}

/// A step applied in place to the previous step's result (`d = f(d)`, `d = f(d, y)` or, with
/// `swap`, `d = f(y, d)`): a program that is a chain runs this way in short strips, each
/// strip staying in L1 through every step.
type InPlaceUnary<T> = Box<dyn Fn(&mut [T]) + Send + Sync>;
type InPlaceBinary<T> = Box<dyn for<'a> Fn(&mut [T], Operand<'a, T>, bool) + Send + Sync>;

enum InPlace<T> {
    Unary(InPlaceUnary<T>),
    Binary(InPlaceBinary<T>),
}

/// Makes an in-place step from a scalar function (monomorphised per function).
struct MakeInPlace;

impl<T: Float + Element> UnaryVisitor<T> for MakeInPlace {
    type Out = InPlaceUnary<T>;
    fn visit<F: Fn(T) -> T + Copy + Send + Sync + 'static>(self, f: F) -> InPlaceUnary<T> {
        Box::new(move |d: &mut [T]| crate::isa::map_in_place(d, f))
    }
}

impl<T: Float + Element> BinaryVisitor<T> for MakeInPlace {
    type Out = InPlaceBinary<T>;
    fn visit<F: Fn(T, T) -> T + Copy + Send + Sync + 'static>(self, f: F) -> InPlaceBinary<T> {
        Box::new(move |d: &mut [T], y: Operand<T>, swap: bool| match (y, swap) {
            (Operand::Slice(y), false) => crate::isa::zip_in_place(d, y, f),
            (Operand::Slice(y), true) => crate::isa::zip_in_place(
                d,
                y,
                #[inline(always)]
                |d, y| f(y, d),
            ),
            (Operand::Scalar(y), false) => crate::isa::map_in_place(
                d,
                #[inline(always)]
                |d| f(d, y),
            ),
            (Operand::Scalar(y), true) => crate::isa::map_in_place(
                d,
                #[inline(always)]
                |d| f(y, d),
            ),
        })
    }
}

struct Instr<T> {
    op: String,
    step: Step<T>,
    srcs: Vec<Src>,
    in_place: InPlace<T>,
}

/// Parses a program: one instruction per string, `"Op a0 r1"` (operands: argument `aK`,
/// result of instruction `rK`); the last instruction's result is the output. Each op must be
/// one the registry declares elementwise.
fn parse_program<T: Float + Element>(d: &NodeDesc, attr: &str, n_args: usize) -> KResult<Vec<Instr<T>>> {
    let lines = list_strings(d, attr);
    if lines.is_empty() {
        return Err(invalid(format!("node '{}': {} needs a non-empty '{attr}'", d.name, d.def.name)));
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
        let e = OpRegistry::global()
            .facts(&op)
            .and_then(|f| f.elementwise)
            .ok_or_else(|| bad(format!("'{op}' is not a fusible elementwise op")))?;
        if srcs.len() != e.arity() {
            return Err(bad(format!("'{op}' takes {} operand(s)", e.arity())));
        }
        let (step, in_place) = match e {
            Elementwise::Unary(f) => {
                (Step::Unary(visit_unary::<T, _>(f, MakeStep)), InPlace::Unary(visit_unary::<T, _>(f, MakeInPlace)))
            }
            Elementwise::Binary(f) => {
                (Step::Binary(visit_binary::<T, _>(f, MakeStep)), InPlace::Binary(visit_binary::<T, _>(f, MakeInPlace)))
            }
        };
        out.push(Instr { op, step, srcs, in_place });
    }
    Ok(out)
}

/// An operand as a block sees it.
enum View<'a, T> {
    /// The output's shape: the block's own elements.
    Full(&'a [T]),
    /// One element for all.
    Scalar(T),
    /// The same row for every row: tiled to one block (blocks start at whole rows).
    Tiled(&'a [T]),
}

/// A parsed program and the unfused kernels of its ops.
pub(crate) struct Program<T> {
    instrs: Vec<Instr<T>>,
    /// The unfused kernels, for inputs whose shapes need general broadcasting.
    kernels: Vec<Box<dyn OpKernel>>,
}

impl<T: Float + Element> Program<T> {
    /// The program of node `d` (attr `program`) over `n_args` operands.
    pub(crate) fn new(d: &NodeDesc, n_args: usize) -> KResult<Program<T>> {
        Self::from_attr(d, "program", n_args)
    }

    /// The program in node `d`'s attr `attr` over `n_args` operands.
    pub(crate) fn from_attr(d: &NodeDesc, attr: &str, n_args: usize) -> KResult<Program<T>> {
        let instrs = parse_program::<T>(d, attr, n_args)?;
        let mut attrs = ferroflow_graph::Attrs::new();
        attrs.insert("T".into(), ferroflow_proto::attr::dtype(T::DTYPE));
        let reg = OpRegistry::global();
        let mut kernels = Vec::with_capacity(instrs.len());
        for ins in &instrs {
            let def = reg.get(&ins.op).ok_or_else(|| invalid(format!("unknown op '{}'", ins.op)))?;
            let types =
                def.resolve_types(&attrs).map_err(|e| invalid(format!("node '{}': {}: {e}", d.name, ins.op)))?;
            kernels.push(KernelRegistry::global().create(&NodeDesc {
                name: d.name,
                def,
                attrs: &attrs,
                types: &types,
            })?);
        }
        Ok(Program { instrs, kernels })
    }

    /// Evaluates the program over elements `[start, start + out.len())` of every operand.
    /// `regs` holds `stride` elements for a copy of the block of the input whose buffer is
    /// being overwritten (`reused`), then `stride` per instruction. Only the last instruction
    /// writes `out`, so the others read the reused input from it in place; the copy is made
    /// only when the last instruction reads that input too.
    fn block(
        &self,
        args: &[View<T>],
        reused: Option<usize>,
        start: usize,
        out: &mut [T],
        regs: &mut [T],
        stride: usize,
    ) {
        let len = out.len();
        let last = self.instrs.len() - 1;
        let (scratch, regs) = regs.split_at_mut(stride);
        let reads_reused = |ins: &Instr<T>| ins.srcs.iter().any(|s| matches!(*s, Src::Arg(k) if Some(k) == reused));
        if reads_reused(&self.instrs[last]) {
            scratch[..len].copy_from_slice(out);
        }
        let scratch: &[T] = scratch;
        for (i, ins) in self.instrs.iter().enumerate() {
            let (done, rest) = regs.split_at_mut(i * stride);
            let (dst, own): (&mut [T], &[T]) =
                if i == last { (&mut *out, &scratch[..len]) } else { (&mut rest[..len], &out[..]) };
            let operand = |s: Src| -> Operand<T> {
                match s {
                    Src::Arg(k) if Some(k) == reused => Operand::Slice(own),
                    Src::Arg(k) => match &args[k] {
                        View::Full(a) => Operand::Slice(&a[start..start + len]),
                        View::Scalar(v) => Operand::Scalar(*v),
                        View::Tiled(a) => Operand::Slice(&a[..len]),
                    },
                    Src::Reg(k) => Operand::Slice(&done[k * stride..k * stride + len]),
                }
            };
            match &ins.step {
                Step::Unary(f) => f(operand(ins.srcs[0]), dst),
                Step::Binary(f) => f(operand(ins.srcs[0]), operand(ins.srcs[1]), dst),
            }
        }
    }

    /// General broadcasting: the unfused kernels, one op at a time.
    fn op_by_op(&self, ctx: &KernelContext, args: Vec<Tensor>, outputs: &mut Outputs) -> KResult<()> {
        let mut regs: Vec<Tensor> = Vec::with_capacity(self.instrs.len());
        for (ins, k) in self.instrs.iter().zip(&self.kernels) {
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

    /// The program over `inputs` (each the output's shape, or broadcast to it): the output
    /// pushed to `outputs`, written into an input's buffer when no one else holds it.
    pub(crate) fn run(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let mut dims: Vec<usize> = vec![];
        for t in inputs.iter() {
            dims = broadcast_dims(&dims, t.dims())
                .ok_or_else(|| invalid(format!("Incompatible shapes: {dims:?} vs. {:?}", t.dims())))?;
        }
        // One pass when every operand is the output's shape, a single element, or the same
        // for every row of trailing dims (a per-channel vector against NHWC: `[C]`,
        // `[1, 1, 1, C]`), whose period then divides the blocks.
        let n: usize = dims.iter().product();
        let mut period = 1usize;
        for t in inputs.iter() {
            if t.dims() == dims.as_slice() || (t.len() == 1 && t.rank() <= dims.len()) {
                continue;
            }
            let trailing = t.dims().iter().skip_while(|&&d| d == 1).copied().collect::<Vec<_>>();
            let fits = t.rank() <= dims.len() && dims.ends_with(&trailing) && !t.is_empty();
            if !fits || (period != 1 && period != t.len()) {
                let args = std::mem::take(inputs);
                return self.op_by_op(ctx, args, outputs);
            }
            period = t.len();
        }
        // Write into an input's buffer when no one else holds it (as the unfused kernels do):
        // each block of it is copied aside before the block is overwritten.
        let reused = inputs.iter_mut().position(|t| t.dims() == dims.as_slice() && t.try_mut_slice::<T>().is_some());
        let mut out = match reused {
            Some(k) => std::mem::replace(&mut inputs[k], Tensor::scalar(T::ZERO)),
            None => Tensor::zeros(T::DTYPE, &dims)?,
        };
        // Blocks are whole periods; a row-periodic operand is tiled to one block once.
        let stride = if period > 1 { (BLOCK / period).max(1) * period } else { BLOCK.min(n.max(1)) };
        let mut tiles: Vec<Vec<T>> = Vec::new();
        for t in inputs.iter() {
            if t.dims() != dims.as_slice() && t.len() > 1 {
                let v = t.as_slice::<T>()?;
                tiles.push(v.iter().copied().cycle().take(stride).collect());
            }
        }
        let mut tile = tiles.iter();
        let args: Vec<View<T>> = inputs
            .iter()
            .map(|t| {
                let v = t.as_slice::<T>()?;
                Ok(if t.dims() == dims.as_slice() {
                    View::Full(v)
                } else if t.len() == 1 {
                    View::Scalar(v[0])
                } else {
                    View::Tiled(tile.next().expect("one tile per periodic operand"))
                })
            })
            .collect::<KResult<_>>()?;
        let o = out.as_mut_slice::<T>()?;
        let regs_len = (self.instrs.len() + 1) * stride;
        if n >= PARALLEL_MIN && ctx.threads() > 1 {
            let per_task = n.div_ceil(ctx.threads() * 4).div_ceil(stride) * stride;
            ctx.for_each_chunk_mut(o, per_task, |t, chunk| {
                let mut regs = vec![T::ZERO; regs_len];
                for (b, blk) in chunk.chunks_mut(stride).enumerate() {
                    self.block(&args, reused, t * per_task + b * stride, blk, &mut regs, stride);
                }
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

/// A program applied in place to blocks of a convolution's output, the output being operand
/// `a0` and each other operand a per-channel vector, a scalar or a tensor of the output's
/// shape (`_FusedDepthwiseConv2dElementwise`'s and `_FusedConv2DElementwise`'s epilogue).
pub(crate) struct RowEpilogue<T> {
    program: Program<T>,
    /// When every instruction reads the previous one's result (the first: `a0`) once and at
    /// most one other argument: that argument (`None` for a unary step) and whether it comes
    /// first. The program then runs in place, strip by strip.
    chain: Option<Vec<Option<(usize, bool)>>>,
}

/// Elements per strip of a chain program run in place (a few KB: the strip and its operands
/// stay in L1 through every step).
const STRIP: usize = 512;

/// The chain form of a program over `a0` (see [`RowEpilogue::chain`]), or `None`.
fn chain_of<T>(program: &[Instr<T>]) -> Option<Vec<Option<(usize, bool)>>> {
    program
        .iter()
        .enumerate()
        .map(|(i, ins)| {
            let carried = |s: &Src| match *s {
                Src::Arg(0) => i == 0,
                Src::Reg(k) => k + 1 == i,
                Src::Arg(_) => false,
            };
            let other = |s: &Src| match *s {
                Src::Arg(k) if k > 0 => Some(k),
                _ => None,
            };
            match ins.srcs.as_slice() {
                [a] if carried(a) => Some(None),
                [a, b] if carried(a) => other(b).map(|k| Some((k, false))),
                [a, b] if carried(b) => other(a).map(|k| Some((k, true))),
                _ => None,
            }
        })
        .collect()
}

/// One operand of a [`RowEpilogue`] as its blocks see it.
enum RowOperand<'a, T> {
    /// A per-channel vector tiled to one row.
    Tile(Vec<T>),
    Scalar(T),
    /// The output's shape: the block's own elements.
    Full(&'a [T]),
    /// A vector of the channels per image (`[N, 1, 1, C]`: a squeeze-and-excite scale), each
    /// image's tiled to one row.
    PerImage(Vec<Vec<T>>),
}

/// The operands of a [`RowEpilogue`] for one output, in rows of one length.
pub(crate) struct RowOperands<'a, T> {
    args: Vec<RowOperand<'a, T>>,
    row_len: usize,
    /// Elements per image where an operand is [`RowOperand::PerImage`] (strips then stop at
    /// image boundaries), else `usize::MAX`.
    image_len: usize,
}

impl<T: Float + Element> RowEpilogue<T> {
    /// The program of node `d` over `1 + n_args` operands.
    pub(crate) fn new(d: &NodeDesc, n_args: usize) -> KResult<RowEpilogue<T>> {
        Self::from_attr(d, "program", n_args)
    }

    /// The program in node `d`'s attr `attr` over `1 + n_args` operands.
    pub(crate) fn from_attr(d: &NodeDesc, attr: &str, n_args: usize) -> KResult<RowEpilogue<T>> {
        let program = Program::from_attr(d, attr, 1 + n_args)?;
        let chain = chain_of(&program.instrs);
        Ok(RowEpilogue { program, chain })
    }

    /// The operands for an output of shape `out` (NHWC) processed in rows of `row_len`
    /// elements (a multiple of the channels): each of `args` a scalar, a vector of the
    /// channels (`[C]`, `[1, 1, 1, C]`), of the output's shape, or (for a chain program) a
    /// vector of the channels per image (`[N, 1, 1, C]`). `None` when one is anything else
    /// (the caller then runs the program after the convolution: [`RowEpilogue::finish`]).
    pub(crate) fn operands<'a>(
        &self,
        args: &'a [Tensor],
        out: &[usize],
        row_len: usize,
    ) -> KResult<Option<RowOperands<'a, T>>> {
        let channels = out.last().copied().unwrap_or(0);
        let mut ops = Vec::with_capacity(args.len());
        let mut image_len = usize::MAX;
        for t in args {
            let v = t.as_slice::<T>()?;
            let trailing: Vec<usize> = t.dims().iter().skip_while(|&&d| d == 1).copied().collect();
            ops.push(if t.len() == 1 {
                RowOperand::Scalar(v[0])
            } else if t.dims() == out {
                RowOperand::Full(v)
            } else if trailing == [channels] {
                RowOperand::Tile(v.iter().copied().cycle().take(row_len).collect())
            } else if let ([n, h, w, c], [tn, 1, 1, tc], Some(_)) = (out, t.dims(), &self.chain) {
                if (tn, tc) != (n, c) || *c == 0 || h * w * c == 0 {
                    return Ok(None);
                }
                image_len = h * w * c;
                RowOperand::PerImage(
                    v.chunks_exact(*c).map(|i| i.iter().copied().cycle().take(row_len).collect()).collect(),
                )
            } else {
                return Ok(None);
            });
        }
        Ok(Some(RowOperands { args: ops, row_len, image_len }))
    }

    /// Runs the program in place over `block`, elements `start..` of the output (whole
    /// channel groups); `scratch` is reused between calls.
    pub(crate) fn apply(&self, start: usize, block: &mut [T], ops: &RowOperands<T>, scratch: &mut Vec<T>) {
        if let Some(chain) = &self.chain {
            return self.apply_chain(chain, start, block, ops);
        }
        let len = block.len().min(ops.row_len);
        let mut views = Vec::with_capacity(1 + ops.args.len());
        views.push(View::Scalar(T::ZERO)); // a0: the block itself (`reused`)
        views.extend(ops.args.iter().map(|a| match a {
            RowOperand::Tile(t) => View::Tiled(t),
            RowOperand::Scalar(v) => View::Scalar(*v),
            RowOperand::Full(v) => View::Full(v),
            RowOperand::PerImage(_) => unreachable!("operands() gives per-image operands to chains only"),
        }));
        scratch.resize((self.program.instrs.len() + 1) * len, T::ZERO);
        for (i, chunk) in block.chunks_mut(len.max(1)).enumerate() {
            self.program.block(&views, Some(0), start + i * len, chunk, scratch, len);
        }
    }

    /// [`RowEpilogue::apply`] for a chain: each strip of the block goes through every step in
    /// place. The same scalar functions on the same operands in the same order as the
    /// general path, so the same bits.
    fn apply_chain(&self, chain: &[Option<(usize, bool)>], start: usize, block: &mut [T], ops: &RowOperands<T>) {
        // Blocks start at a pixel, so each row of `row_len` starts where the tiles do; a
        // strip ends at an image's end (per-image operands), which is a pixel's.
        let row = ops.row_len.max(1);
        for (r, elems) in block.chunks_mut(row).enumerate() {
            let mut at = 0;
            while at < elems.len() {
                let whole = start + r * row + at;
                let image = whole / ops.image_len;
                let len = STRIP.min(elems.len() - at).min(ops.image_len - whole % ops.image_len);
                let strip = &mut elems[at..at + len];
                for (ins, arg) in self.program.instrs.iter().zip(chain) {
                    match (&ins.in_place, arg) {
                        (InPlace::Unary(f), _) => f(strip),
                        (InPlace::Binary(f), Some((k, swap))) => {
                            let y = match &ops.args[k - 1] {
                                RowOperand::Scalar(v) => Operand::Scalar(*v),
                                RowOperand::Full(v) => Operand::Slice(&v[whole..whole + len]),
                                RowOperand::Tile(t) => Operand::Slice(&t[at..at + len]),
                                RowOperand::PerImage(t) => Operand::Slice(&t[image][at..at + len]),
                            };
                            f(strip, y, *swap)
                        }
                        (InPlace::Binary(_), None) => unreachable!("chain_of gives binary steps an operand"),
                    }
                }
                at += len;
            }
        }
    }

    /// The program over the convolution's output `out` and `args` with general broadcasting
    /// (when [`RowEpilogue::operands`] declined them).
    pub(crate) fn finish(
        &self,
        ctx: &KernelContext,
        out: Tensor,
        args: &[Tensor],
        outputs: &mut Outputs,
    ) -> KResult<()> {
        let mut inputs: Inputs = std::iter::once(out).chain(args.iter().cloned()).collect();
        self.program.run(ctx, &mut inputs, outputs)
    }
}
