//! Sources, identities and shape-manipulating kernels: `Const`, `Placeholder*`, `Identity*`,
//! `NoOp`, `BiasAdd`, `Reshape`, `Shape`, `ExpandDims`, `Squeeze`, `Fill`, `ZerosLike`,
//! `OnesLike`, `Pack`, `ConcatV2`, `MatrixBandPart`.
use ferroflow_tensor::{bf16, f16, DType, Tensor};

use crate::numeric::Num;
use crate::reduce::{axis_values, norm_axis};
use crate::{
    check_output, invalid, Factory, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs,
};

struct Const(Tensor);
impl OpKernel for Const {
    fn compute(&self, _: &KernelContext, _: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.push(self.0.clone());
        Ok(())
    }
}

fn k_const(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let t = d.tensor("value")?;
    let want = d.dtype("dtype")?;
    if t.dtype() != want {
        return Err(invalid(format!("value is {} but dtype is {want}", t.dtype())));
    }
    Ok(Box::new(Const(t)))
}

/// A placeholder that was not fed: running it is the user's error, said as TensorFlow says it.
struct Unfed(String);
impl OpKernel for Unfed {
    fn compute(&self, _: &KernelContext, _: &mut Inputs, _: &mut Outputs) -> KResult<()> {
        Err(invalid(self.0.clone()))
    }
}

fn k_placeholder(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let shape = match d.def.attr(d.attrs, "shape").and_then(|v| v.value.as_ref()) {
        Some(ferroflow_proto::attr_value::Value::Shape(s)) => ferroflow_proto::convert::shape_from_proto(s).to_string(),
        _ => "<unknown>".into(),
    };
    Ok(Box::new(Unfed(format!(
        "You must feed a value for placeholder tensor '{}' with dtype {} and shape {shape}",
        d.name,
        d.dtype("dtype")?
    ))))
}

/// Forwards its inputs unchanged (Identity, IdentityN, PlaceholderWithDefault, Snapshot).
struct Forward;
impl OpKernel for Forward {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.append(inputs);
        Ok(())
    }
}

struct NoOp;
impl OpKernel for NoOp {
    fn compute(&self, _: &KernelContext, _: &mut Inputs, _: &mut Outputs) -> KResult<()> {
        Ok(())
    }
}

struct BiasAdd<T> {
    nchw: bool,
    _t: std::marker::PhantomData<T>,
}

impl<T: Num> OpKernel for BiasAdd<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let bias = inputs.pop().expect("two inputs");
        let mut x = inputs.pop().expect("two inputs");
        let dims = x.dims().to_vec();
        if dims.len() < 2 {
            return Err(invalid(format!("Input tensor must be at least 2D: {dims:?}")));
        }
        if bias.rank() != 1 {
            return Err(invalid(format!("Biases must be 1D: {:?}", bias.dims())));
        }
        let c_axis = if self.nchw { 1 } else { dims.len() - 1 };
        let c = dims[c_axis];
        if bias.len() != c {
            return Err(invalid(format!(
                "Must provide as many biases as the channel dimension of the input tensor: {:?} vs. {dims:?}",
                bias.dims()
            )));
        }
        let inner: usize = dims[c_axis + 1..].iter().product();
        let b = bias.as_slice::<T>()?;
        if inner == 0 || c == 0 || x.is_empty() {
            outputs.push(x);
            return Ok(());
        }
        if inner == 1 {
            // Channels last: every row of c values gets the whole bias vector. In place when
            // the input is not shared, else into a fresh output in the same pass (not a copy
            // and then the sum); rows split across the pool when large.
            let add_rows = |dst: &mut [T], src: Option<&[T]>| match src {
                None => dst.chunks_mut(c).for_each(|row| crate::isa::zip_in_place(row, b, |e, bv| e.add_w(bv))),
                Some(src) => (dst.chunks_mut(c).zip(src.chunks(c)))
                    .for_each(|(row, from)| crate::isa::zip(row, from, b, |e, bv| e.add_w(bv))),
            };
            let rows_per_task = (x.len() / c).div_ceil(ctx.threads() * 4).max(1);
            let parallel = x.len() >= 1 << 15 && ctx.threads() > 1;
            if let Some(v) = x.try_mut_slice::<T>() {
                if parallel {
                    ctx.for_each_chunk_mut(v, rows_per_task * c, |_, rows| add_rows(rows, None));
                } else {
                    add_rows(v, None);
                }
                outputs.push(x);
            } else {
                let mut out = Tensor::for_overwrite(T::DTYPE, &dims)?;
                let (src, dst) = (x.as_slice::<T>()?, out.as_mut_slice::<T>()?);
                let step = rows_per_task * c;
                if parallel {
                    ctx.for_each_chunk_mut(dst, step, |i, rows| add_rows(rows, Some(&src[i * step..])));
                } else {
                    add_rows(dst, Some(src));
                }
                outputs.push(out);
            }
            return Ok(());
        }
        let v = x.as_mut_slice::<T>()?;
        for (i, chunk) in v.chunks_mut(inner).enumerate() {
            let bv = b[i % c];
            chunk.iter_mut().for_each(|e| *e = e.add_w(bv));
        }
        outputs.push(x);
        Ok(())
    }
}

fn k_bias_add(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let nchw = d.string("data_format")? == "NCHW";
    match d.dtype("T")? {
        DType::Float => Ok(Box::new(BiasAdd::<f32> { nchw, _t: Default::default() })),
        DType::Double => Ok(Box::new(BiasAdd::<f64> { nchw, _t: Default::default() })),
        DType::Int32 => Ok(Box::new(BiasAdd::<i32> { nchw, _t: Default::default() })),
        DType::Int64 => Ok(Box::new(BiasAdd::<i64> { nchw, _t: Default::default() })),
        t => Err(invalid(format!("no BiasAdd kernel for {t}"))),
    }
}

struct Reshape;
impl OpKernel for Reshape {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let target = axis_values(&inputs[1]).map_err(|_| invalid("shape must be int32 or int64"))?;
        if inputs[1].rank() > 1 {
            return Err(invalid(format!("sizes input must be 1-D, not {:?}", inputs[1].dims())));
        }
        let mut dims = Vec::with_capacity(target.len());
        let mut infer = None;
        let mut known = 1usize;
        for (i, &d) in target.iter().enumerate() {
            match d {
                -1 if infer.is_none() => {
                    infer = Some(i);
                    dims.push(1);
                }
                -1 => return Err(invalid("only one input size may be -1, not both")),
                d if d < 0 => return Err(invalid(format!("size {i} must be non-negative, not {d}"))),
                d => {
                    dims.push(d as usize);
                    known = known.checked_mul(d as usize).ok_or_else(|| invalid("requested shape overflows"))?;
                }
            }
        }
        let n = x.len();
        if let Some(i) = infer {
            if known == 0 || !n.is_multiple_of(known) {
                return Err(invalid(format!(
                    "Input to reshape is a tensor with {n} values, but the requested shape requires a multiple of {known}"
                )));
            }
            dims[i] = n / known;
        } else if known != n {
            return Err(invalid(format!(
                "Input to reshape is a tensor with {n} values, but the requested shape has {known}"
            )));
        }
        outputs.push(x.reshaped(&dims)?);
        Ok(())
    }
}

struct Rank;
impl OpKernel for Rank {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.push(Tensor::scalar(inputs[0].rank() as i32));
        Ok(())
    }
}

struct Size(DType);
impl OpKernel for Size {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let n = inputs[0].len();
        outputs.push(match self.0 {
            DType::Int64 => Tensor::scalar(n as i64),
            _ => Tensor::scalar(
                i32::try_from(n).map_err(|_| invalid(format!("size {n} does not fit int32; use out_type=int64")))?,
            ),
        });
        Ok(())
    }
}

struct ShapeOp(DType);

/// The shape `d` as a vector of `dtype` (int32 or int64).
fn shape_vector(dtype: DType, d: &[usize]) -> KResult<Tensor> {
    Ok(match dtype {
        DType::Int64 => Tensor::from_vec(&[d.len()], d.iter().map(|&x| x as i64).collect())?,
        _ => {
            let v: Vec<i32> = d
                .iter()
                .map(|&x| i32::try_from(x))
                .collect::<Result<_, _>>()
                .map_err(|_| invalid(format!("shape {d:?} does not fit int32; use out_type=int64")))?;
            Tensor::from_vec(&[d.len()], v)?
        }
    })
}

/// `ShapeN`: each input's shape.
struct ShapeN(DType);
impl OpKernel for ShapeN {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        for x in inputs.iter() {
            outputs.push(shape_vector(self.0, x.dims())?);
        }
        Ok(())
    }
}

impl OpKernel for ShapeOp {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.push(shape_vector(self.0, inputs[0].dims())?);
        Ok(())
    }
}

struct ExpandDims;
impl OpKernel for ExpandDims {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let a = axis_values(&inputs[1])?;
        let [a] = a[..] else {
            return Err(invalid("'dim' must be a tensor with a single value"));
        };
        let r = x.rank() as i64 + 1;
        if a < -r || a >= r {
            return Err(invalid(format!("Tried to expand dim index {a} for tensor with {} dimensions", x.rank())));
        }
        let a = if a < 0 { a + r } else { a } as usize;
        let mut dims = x.dims().to_vec();
        dims.insert(a, 1);
        outputs.push(x.reshaped(&dims)?);
        Ok(())
    }
}

struct Squeeze(Vec<i64>);
impl OpKernel for Squeeze {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let dims = x.dims();
        let mut keep = vec![true; dims.len()];
        if self.0.is_empty() {
            for (k, &d) in keep.iter_mut().zip(dims) {
                *k = d != 1;
            }
        } else {
            for &a in &self.0 {
                let i = norm_axis(a, dims.len())?;
                if dims[i] != 1 {
                    return Err(invalid(format!(
                        "Can not squeeze dim[{i}], expected a dimension of 1, got {}",
                        dims[i]
                    )));
                }
                keep[i] = false;
            }
        }
        let out: Vec<usize> = dims.iter().zip(&keep).filter(|(_, k)| **k).map(|(d, _)| *d).collect();
        outputs.push(x.reshaped(&out)?);
        Ok(())
    }
}

/// Repeats one element's bytes (or string) `n` times into a tensor of `dims`.
fn repeat_element(dtype: DType, dims: &[usize], elem: &Tensor, index: usize) -> KResult<Tensor> {
    let n = check_output(dtype, dims)?;
    if dtype == DType::String {
        return Ok(Tensor::from_strings(dims, vec![elem.as_strings()?[index].clone(); n])?);
    }
    let size = dtype.size().ok_or_else(|| invalid(format!("{dtype} tensors cannot be filled")))?;
    let one = &elem.as_bytes()?[index * size..(index + 1) * size];
    Ok(Tensor::from_fill(dtype, dims, |out| out.chunks_exact_mut(size).for_each(|o| o.copy_from_slice(one)))?)
}

struct Fill;
impl OpKernel for Fill {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (dims_t, value) = (&inputs[0], &inputs[1]);
        if value.len() != 1 || value.rank() != 0 {
            return Err(invalid(format!("value must be a scalar, got shape {:?}", value.dims())));
        }
        let mut dims = Vec::new();
        for d in axis_values(dims_t)? {
            dims.push(usize::try_from(d).map_err(|_| invalid(format!("dims must be non-negative, got {d}")))?);
        }
        outputs.push(repeat_element(value.dtype(), &dims, value, 0)?);
        Ok(())
    }
}

/// `MatrixBandPart`: keeps each innermost matrix's band (`num_lower` diagonals below the main
/// one, `num_upper` above; negative keeps the whole triangle) and zeroes the rest. Any
/// fixed-size dtype: each row's band is one contiguous run of bytes.
struct MatrixBandPart;
impl OpKernel for MatrixBandPart {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let dims = x.dims();
        if dims.len() < 2 {
            return Err(invalid(format!("input must be at least rank 2, got shape {dims:?}")));
        }
        let (m, n) = (dims[dims.len() - 2], dims[dims.len() - 1]);
        let mut limits = [0i64; 2];
        for (i, (name, size, what)) in [("num_lower", m, "rows"), ("num_upper", n, "columns")].into_iter().enumerate() {
            let t = &inputs[i + 1];
            let v = axis_values(t).map_err(|_| invalid(format!("{name} must be int32 or int64, got {}", t.dtype())))?;
            if t.rank() != 0 || v.len() != 1 {
                return Err(invalid(format!("{name} must be scalar, got shape {:?}", t.dims())));
            }
            if v[0] > size as i64 {
                return Err(invalid(format!(
                    "{name} must be negative or less or equal to number of {what} ({size}) got: {}",
                    v[0]
                )));
            }
            limits[i] = v[0];
        }
        let [lower, upper] = limits;
        let dtype = x.dtype();
        let size = dtype.size().ok_or_else(|| invalid(format!("MatrixBandPart is not defined for {dtype} tensors")))?;
        let src = x.as_bytes()?;
        let row = n * size;
        let band = |r: usize| {
            let lo = if lower < 0 { 0 } else { r.saturating_sub(lower as usize) };
            let hi = if upper < 0 { n } else { (r + upper as usize + 1).min(n) };
            (lo.min(n), hi)
        };
        let out = Tensor::from_fill(dtype, dims, |out| {
            if row == 0 {
                return;
            }
            for (i, (o, s)) in out.chunks_exact_mut(row).zip(src.chunks_exact(row)).enumerate() {
                let (lo, hi) = band(i % m);
                o[..lo * size].fill(0);
                if lo < hi {
                    o[lo * size..hi * size].copy_from_slice(&s[lo * size..hi * size]);
                }
                o[hi.max(lo) * size..].fill(0);
            }
        })?;
        outputs.push(out);
        Ok(())
    }
}

/// Zeros of the input's shape; for a `TensorList` (a gradient's zero), a list as long with
/// every element unset (read as zeros).
struct ZerosLike;
impl OpKernel for ZerosLike {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        if inputs[0].dtype() == DType::Variant && inputs[0].rank() == 0 {
            let l = inputs[0].as_list().map_err(|e| invalid(format!("ZerosLike of a variant: {e}")))?;
            outputs.push(Tensor::list(ferroflow_tensor::TensorList {
                element_dtype: l.element_dtype,
                element_shape: l.element_shape.clone(),
                elements: vec![None; l.elements.len()],
            }));
            return Ok(());
        }
        outputs.push(Tensor::zeros(inputs[0].dtype(), inputs[0].dims())?);
        Ok(())
    }
}

struct OnesLike;
impl OpKernel for OnesLike {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let one = match x.dtype() {
            DType::Float => Tensor::scalar(1f32),
            DType::Double => Tensor::scalar(1f64),
            DType::Half => Tensor::scalar(f16::ONE),
            DType::BFloat16 => Tensor::scalar(bf16::ONE),
            DType::Int8 => Tensor::scalar(1i8),
            DType::Int16 => Tensor::scalar(1i16),
            DType::Int32 => Tensor::scalar(1i32),
            DType::Int64 => Tensor::scalar(1i64),
            DType::UInt8 => Tensor::scalar(1u8),
            DType::UInt16 => Tensor::scalar(1u16),
            DType::UInt32 => Tensor::scalar(1u32),
            DType::UInt64 => Tensor::scalar(1u64),
            DType::Bool => Tensor::scalar(true),
            d => return Err(invalid(format!("OnesLike is not defined for {d}"))),
        };
        outputs.push(repeat_element(x.dtype(), x.dims(), &one, 0)?);
        Ok(())
    }
}

/// Outputs of at least this many bytes are joined across the intra-op pool.
const PARALLEL_JOIN_BYTES: usize = 1 << 20;

/// Interleaves blocks: for each of `outer` rows, copies `blocks[i]` elements from part `i`.
/// Large outputs are filled by the pool's threads, each a range of whole rows (or, for one
/// row, a range of its bytes), every byte written once (no zero fill first).
pub(crate) fn interleave(
    ctx: &KernelContext,
    parts: &[&Tensor],
    blocks: &[usize],
    outer: usize,
    dims: &[usize],
) -> KResult<Tensor> {
    let dtype = parts[0].dtype();
    if dtype == DType::String {
        let mut out = Vec::new();
        for o in 0..outer {
            for (p, &b) in parts.iter().zip(blocks) {
                out.extend_from_slice(&p.as_strings()?[o * b..(o + 1) * b]);
            }
        }
        return Ok(Tensor::from_strings(dims, out)?);
    }
    let size = dtype.size().ok_or_else(|| invalid(format!("{dtype} tensors cannot be joined")))?;
    for p in parts {
        p.as_bytes()?;
    }
    let blocks: Vec<usize> = blocks.iter().map(|b| b * size).collect();
    let row: usize = blocks.iter().sum();
    // Every byte is written below (the rows cover the output).
    let mut t = Tensor::for_overwrite(dtype, dims)?;
    let out = t.as_mut_bytes()?;
    if out.is_empty() || row == 0 {
        return Ok(t);
    }
    // Equal blocks (every Pack, most concats) of a common tiny size: fixed-size moves with
    // the size known to the compiler, not a `memcpy` call per block.
    let tiny = blocks.iter().all(|&b| b == blocks[0]) && matches!(blocks[0], 1 | 2 | 4 | 8 | 16);
    let fill = |chunk: &mut [u8], start: usize| match blocks[0] {
        _ if !tiny => fill_bytes(chunk, start, parts, &blocks, row),
        1 => copy_equal::<1>(chunk, parts, start / row),
        2 => copy_equal::<2>(chunk, parts, start / row),
        4 => copy_equal::<4>(chunk, parts, start / row),
        8 => copy_equal::<8>(chunk, parts, start / row),
        _ => copy_equal::<16>(chunk, parts, start / row),
    };
    let threads = ctx.threads();
    if out.len() < PARALLEL_JOIN_BYTES || threads < 2 {
        fill(out, 0);
        return Ok(t);
    }
    // Pieces of whole rows where there are rows enough (the tiny copies need them), else of
    // bytes; a few per thread, so a thread held up elsewhere delays little.
    let pieces = threads * 4;
    let chunk = if outer >= pieces || tiny { outer.div_ceil(pieces) * row } else { out.len().div_ceil(pieces) };
    ctx.for_each_chunk_mut(out, chunk, |i, piece| fill(piece, i * chunk));
    Ok(t)
}

/// Writes bytes `start..start + out.len()` of the interleaved rows (each row the parts'
/// blocks of `blocks[i]` bytes in turn, `row` bytes in all) into `out`.
fn fill_bytes(out: &mut [u8], start: usize, parts: &[&Tensor], blocks: &[usize], row: usize) {
    let (mut o, mut within) = (start / row, start % row);
    let mut i = 0;
    while within >= blocks[i] {
        within -= blocks[i];
        i += 1;
    }
    let mut at = 0;
    while at < out.len() {
        let b = blocks[i];
        let n = (b - within).min(out.len() - at);
        out[at..at + n].copy_from_slice(&bytes(parts[i])[o * b + within..][..n]);
        at += n;
        within += n;
        if within == b {
            within = 0;
            i += 1;
            if i == parts.len() {
                i = 0;
                o += 1;
            }
        }
    }
}

/// A dense tensor's bytes (checked dense by the caller).
fn bytes(p: &Tensor) -> &[u8] {
    p.as_bytes().unwrap_or_default()
}

/// [`interleave`]'s rows from row `first` on, of blocks of `N` bytes each, into `out` (whole
/// rows).
fn copy_equal<const N: usize>(out: &mut [u8], parts: &[&Tensor], first: usize) {
    let rows = out.len() / (N * parts.len());
    let mut dst = out.chunks_exact_mut(N);
    for o in first..first + rows {
        for p in parts {
            let s: &[u8; N] = bytes(p)[o * N..(o + 1) * N].try_into().expect("N bytes");
            let d: &mut [u8; N] = dst.next().expect("output holds every block").try_into().expect("N bytes");
            *d = *s;
        }
    }
}

struct Pack(i64);
impl OpKernel for Pack {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let first = inputs[0].dims();
        for (i, t) in inputs.iter().enumerate() {
            if t.dims() != first {
                return Err(invalid(format!(
                    "Shapes of all inputs must match: values[0].shape = {first:?} != values[{i}].shape = {:?}",
                    t.dims()
                )));
            }
        }
        let r = first.len() as i64 + 1;
        if self.0 < -r || self.0 >= r {
            return Err(invalid(format!("axis = {} not in [{}, {r})", self.0, -r)));
        }
        let axis = if self.0 < 0 { self.0 + r } else { self.0 } as usize;
        let mut dims = first.to_vec();
        dims.insert(axis, inputs.len());
        let outer: usize = first[..axis].iter().product();
        let inner: usize = first[axis..].iter().product();
        let parts: Vec<&Tensor> = inputs.iter().collect();
        outputs.push(interleave(ctx, &parts, &vec![inner; parts.len()], outer, &dims)?);
        Ok(())
    }
}

struct Concat;
impl OpKernel for Concat {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (values, axis_t) = inputs.split_at(inputs.len() - 1);
        let a = axis_values(&axis_t[0])?;
        let [a] = a[..] else {
            return Err(invalid("axis must be a scalar"));
        };
        let first = values[0].dims();
        let rank = first.len();
        if rank == 0 {
            return Err(invalid("Can't concatenate scalars (use tf.stack instead)"));
        }
        let r = rank as i64;
        if a < -r || a >= r {
            return Err(invalid(format!(
                "ConcatOp : Expected concatenating dimensions in the range [{}, {r}), but got {a}",
                -r
            )));
        }
        let axis = if a < 0 { a + r } else { a } as usize;
        let mut dims = first.to_vec();
        dims[axis] = 0;
        for (i, t) in values.iter().enumerate() {
            let d = t.dims();
            let same = d.len() == rank && d.iter().zip(first).enumerate().all(|(j, (x, y))| j == axis || x == y);
            if !same || t.dtype() != values[0].dtype() {
                return Err(invalid(format!(
                    "ConcatOp : Dimension mismatch: values[0].shape = {first:?} vs. values[{i}].shape = {d:?}"
                )));
            }
            dims[axis] += d[axis];
        }
        let outer: usize = first[..axis].iter().product();
        let inner: usize = first[axis + 1..].iter().product();
        let parts: Vec<&Tensor> = values.iter().collect();
        let blocks: Vec<usize> = values.iter().map(|t| t.dims()[axis] * inner).collect();
        outputs.push(interleave(ctx, &parts, &blocks, outer, &dims)?);
        Ok(())
    }
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("Const", "", &[], k_const);
    r.register("Placeholder", "", &[], k_placeholder);
    // Ops whose outputs are their inputs (at run time: their gradients differ).
    let forward: Factory = |_| Ok(Box::new(Forward));
    r.register("Identity", "", &[], forward);
    r.register("IdentityN", "", &[], forward);
    r.register("PlaceholderWithDefault", "", &[], forward);
    r.register("Snapshot", "", &[], forward);
    r.register("StopGradient", "", &[], forward);
    r.register("PreventGradient", "", &[], forward);
    r.register("NoOp", "", &[], |_| Ok(Box::new(NoOp)));
    r.register("BiasAdd", "T", &[DType::Float, DType::Double, DType::Int32, DType::Int64], k_bias_add);
    r.register("Reshape", "", &[], |_| Ok(Box::new(Reshape)));
    r.register("Rank", "", &[], |_| Ok(Box::new(Rank)));
    r.register("Size", "", &[], |d| Ok(Box::new(Size(d.dtype("out_type")?))));
    r.register("Shape", "", &[], |d| Ok(Box::new(ShapeOp(d.dtype("out_type")?))));
    r.register("ShapeN", "", &[], |d| Ok(Box::new(ShapeN(d.dtype("out_type")?))));
    r.register("ExpandDims", "", &[], |_| Ok(Box::new(ExpandDims)));
    r.register("Squeeze", "", &[], |d| Ok(Box::new(Squeeze(d.ints("squeeze_dims")))));
    r.register("Fill", "", &[], |_| Ok(Box::new(Fill)));
    r.register("ZerosLike", "", &[], |_| Ok(Box::new(ZerosLike)));
    r.register("OnesLike", "", &[], |_| Ok(Box::new(OnesLike)));
    r.register("Pack", "", &[], |d| Ok(Box::new(Pack(d.int("axis")?))));
    r.register("ConcatV2", "", &[], |_| Ok(Box::new(Concat)));
    r.register("MatrixBandPart", "", &[], |_| Ok(Box::new(MatrixBandPart)));
}
