//! Kernels that move elements without arithmetic: `Transpose`, `Slice`, `StridedSlice`,
//! `Tile`, `Pad`, `PadV2`, `MirrorPad`, `Unpack`, `Split`, `SplitV`, `GatherV2`, `GatherNd`,
//! `OneHot`, `Where`, `SpaceToBatchND`, `BatchToSpaceND` ([`space_batch`]); plus `Range`,
//! `Cumsum`, `TopKV2`, and the scatters `ScatterNd`, `TensorScatterUpdate/Add/Sub/Max/Min`. All
//! of them work on any dtype (element bytes, or strings) unless they compute with the values.
use ferroflow_tensor::{DType, Tensor};

use crate::numeric::Num;
use crate::reduce::{axis_values, norm_axis};
use crate::{check_output, invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

mod space_batch;

/// A tensor of `dims` whose element `i` is element `pick(i)` of `src`, or `fill` (a
/// one-element tensor of the same dtype) where `pick` gives `None`.
fn gather_elements(
    src: &Tensor,
    dims: &[usize],
    fill: Option<&Tensor>,
    pick: impl Iterator<Item = Option<usize>>,
) -> KResult<Tensor> {
    if src.dtype() == DType::String {
        check_output(src.dtype(), dims)?;
        let s = src.as_strings()?;
        let pad = fill.map(|f| f.as_strings().map(|v| v[0].clone())).transpose()?.unwrap_or_default();
        let v = pick.map(|i| i.map_or_else(|| pad.clone(), |i| s[i].clone())).collect();
        return Ok(Tensor::from_strings(dims, v)?);
    }
    let size = src.dtype().size().ok_or_else(|| invalid(format!("{} tensors cannot be rearranged", src.dtype())))?;
    check_output(src.dtype(), dims)?;
    let bytes = src.as_bytes()?;
    let zero = vec![0u8; size];
    let pad = match fill {
        Some(f) => f.as_bytes()?,
        None => &zero,
    };
    Ok(Tensor::from_fill(src.dtype(), dims, |out| {
        for (o, i) in out.chunks_exact_mut(size).zip(pick) {
            o.copy_from_slice(match i {
                Some(i) => &bytes[i * size..(i + 1) * size],
                None => pad,
            });
        }
    })?)
}

/// A dense copy of a strided view of `src`: shape `dims`, first element at flat `offset`, each
/// axis's flat `steps`. Axes laid out alike are merged first; then contiguous runs are copied
/// whole (slices), a batch of 2-D transposes (the source's contiguous axis second to last in
/// the output: NHWC ⇄ NCHW) runs in cache-sized tiles, anything else element by element in
/// typed loads; split across the pool when large. Strings and odd element sizes go through
/// [`gather_elements`].
fn strided_copy(ctx: &KernelContext, src: &Tensor, dims: &[usize], offset: isize, steps: &[isize]) -> KResult<Tensor> {
    let size = src.dtype().size().unwrap_or(0);
    if src.dtype() == DType::String || !matches!(size, 1 | 2 | 4 | 8) {
        return gather_elements(src, dims, None, strided(dims, offset, steps));
    }
    check_output(src.dtype(), dims)?;
    let mut out = Tensor::for_overwrite(src.dtype(), dims)?;
    if out.is_empty() {
        return Ok(out);
    }
    let (from, to) = (src.as_bytes()?, out.as_mut_bytes()?);
    // SAFETY: reinterpreting bytes as unsigned integers of the element's size is valid for
    // any bytes; `align_to` only yields the aligned middle, checked to be the whole slice
    // (tensor buffers are 64-byte aligned).
    macro_rules! typed {
        ($t:ty) => {{
            let (a, f, b) = unsafe { from.align_to::<$t>() };
            let (c, o, d) = unsafe { to.align_to_mut::<$t>() };
            if a.is_empty() && b.is_empty() && c.is_empty() && d.is_empty() {
                copy_view(ctx, f, o, dims, offset, steps);
                true
            } else {
                false
            }
        }};
    }
    let done = match size {
        1 => typed!(u8),
        2 => typed!(u16),
        4 => typed!(u32),
        _ => typed!(u64),
    };
    if done {
        Ok(out)
    } else {
        gather_elements(src, dims, None, strided(dims, offset, steps))
    }
}

/// Side of the square tiles a transpose copies (16 × 16 four-byte elements: 1 KB, in L1 with
/// the tile's source lines).
const TILE: usize = 16;

/// [`strided_copy`] on typed slices (`out` has `dims`' element count).
fn copy_view<T: Copy + Send + Sync>(
    ctx: &KernelContext,
    src: &[T],
    out: &mut [T],
    dims: &[usize],
    offset: isize,
    steps: &[isize],
) {
    // Merge axes: drop size-1 axes, join an axis into the next where its step spans it.
    let mut axes: Vec<(usize, isize)> = Vec::with_capacity(dims.len());
    for (&d, &s) in dims.iter().zip(steps).filter(|(&d, _)| d != 1) {
        match axes.last_mut() {
            Some(last) if last.1 == s * d as isize => *last = (last.0 * d, s),
            _ => axes.push((d, s)),
        }
    }
    if axes.is_empty() {
        axes.push((1, 1));
    }
    let r = axes.len();
    let (inner, step) = axes[r - 1];
    let transposed = r >= 2 && axes[r - 2].1 == 1 && step != 1 && axes[r - 2].0 >= TILE && inner >= TILE;
    // A unit of work is an output row (a contiguous run or a strided row), or for transposes a
    // whole 2-D block (the last two axes).
    let outer_axes = if transposed { &axes[..r - 2] } else { &axes[..r - 1] };
    let unit = if transposed { axes[r - 2].0 * inner } else { inner };
    let units = out.len() / unit;
    let start_of = |mut u: usize| {
        let mut at = offset;
        for &(d, s) in outer_axes.iter().rev() {
            at += (u % d) as isize * s;
            u /= d;
        }
        at
    };
    let run = |first: usize, chunk: &mut [T]| {
        for (k, o) in chunk.chunks_mut(unit).enumerate() {
            let at = start_of(first + k);
            if transposed {
                let (rows, row_step) = (axes[r - 2].0, step);
                transpose_block(src, o, at, rows, inner, row_step);
            } else if step == 1 {
                let at = at as usize;
                o.copy_from_slice(&src[at..at + inner]);
            } else {
                for (i, v) in o.iter_mut().enumerate() {
                    *v = src[(at + i as isize * step) as usize];
                }
            }
        }
    };
    if out.len() >= 1 << 16 && ctx.threads() > 1 && units > 1 {
        let per = units.div_ceil(ctx.threads() * 4);
        ctx.for_each_chunk_mut(out, per * unit, |i, chunk| run(i * per, chunk));
    } else {
        run(0, out);
    }
}

/// `o[j][i] = src[at + j + i·step]` for a `rows × cols` output block, in [`TILE`]-square tiles:
/// each tile reads `TILE` source runs of `TILE` contiguous elements and writes `TILE` output
/// runs, all in cache.
fn transpose_block<T: Copy>(src: &[T], o: &mut [T], at: isize, rows: usize, cols: usize, step: isize) {
    for j0 in (0..rows).step_by(TILE) {
        let j1 = (j0 + TILE).min(rows);
        for i0 in (0..cols).step_by(TILE) {
            let i1 = (i0 + TILE).min(cols);
            for i in i0..i1 {
                let base = (at + i as isize * step) as usize;
                let run = &src[base + j0..base + j1];
                for (dj, &v) in run.iter().enumerate() {
                    o[(j0 + dj) * cols + i] = v;
                }
            }
        }
    }
}

/// Row-major strides of `dims`.
pub(crate) fn strides_of(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Flat input offsets of a strided view: `offset + Σ idx[a] * steps[a]` over `dims` in
/// row-major order.
fn strided(dims: &[usize], offset: isize, steps: &[isize]) -> impl Iterator<Item = Option<usize>> {
    let n: usize = dims.iter().product();
    let dims = dims.to_vec();
    let steps = steps.to_vec();
    let mut idx = vec![0usize; dims.len()];
    let mut off = offset;
    (0..n).map(move |_| {
        let here = off as usize;
        for a in (0..dims.len()).rev() {
            idx[a] += 1;
            off += steps[a];
            if idx[a] < dims[a] {
                break;
            }
            off -= steps[a] * dims[a] as isize;
            idx[a] = 0;
        }
        Some(here)
    })
}

/// Calls `f` with every multi-index of `dims` in row-major order.
fn each_index(dims: &[usize], mut f: impl FnMut(&[usize]) -> Option<usize>) -> impl Iterator<Item = Option<usize>> {
    let n: usize = dims.iter().product();
    let dims = dims.to_vec();
    let mut idx = vec![0usize; dims.len()];
    (0..n).map(move |_| {
        let r = f(&idx);
        for a in (0..dims.len()).rev() {
            idx[a] += 1;
            if idx[a] < dims[a] {
                break;
            }
            idx[a] = 0;
        }
        r
    })
}

fn vector(t: &Tensor, what: &str, len: usize) -> KResult<Vec<i64>> {
    let v = axis_values(t)?;
    if v.len() != len || t.rank() > 1 {
        return Err(invalid(format!("{what} must be a vector of {len} values, got shape {:?}", t.dims())));
    }
    Ok(v)
}

struct Transpose;
impl OpKernel for Transpose {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let perm = vector(&inputs[1], "perm", x.rank())?;
        let mut seen = vec![false; x.rank()];
        for &p in &perm {
            let p = usize::try_from(p)
                .ok()
                .filter(|&p| p < x.rank())
                .ok_or_else(|| invalid(format!("{perm:?} is not a valid permutation")))?;
            if std::mem::replace(&mut seen[p], true) {
                return Err(invalid(format!("{perm:?} is not a valid permutation")));
            }
        }
        let st = strides_of(x.dims());
        let dims: Vec<usize> = perm.iter().map(|&p| x.dims()[p as usize]).collect();
        let steps: Vec<isize> = perm.iter().map(|&p| st[p as usize] as isize).collect();
        outputs.push(strided_copy(ctx, x, &dims, 0, &steps)?);
        Ok(())
    }
}

struct Slice;
impl OpKernel for Slice {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let begin = vector(&inputs[1], "begin", x.rank())?;
        let size = vector(&inputs[2], "size", x.rank())?;
        let mut dims = Vec::with_capacity(x.rank());
        for (a, (&b, &s)) in begin.iter().zip(&size).enumerate() {
            let d = x.dims()[a] as i64;
            let s = if s == -1 { d - b } else { s };
            if b < 0 || s < 0 || b + s > d {
                return Err(invalid(format!("Expected begin[{a}] = {b} and size[{a}] = {s} to fit dimension {d}")));
            }
            dims.push(s as usize);
        }
        let st = strides_of(x.dims());
        let offset: usize = begin.iter().zip(&st).map(|(&b, &s)| b as usize * s).sum();
        let steps: Vec<isize> = st.iter().map(|&s| s as isize).collect();
        outputs.push(strided_copy(ctx, x, &dims, offset as isize, &steps)?);
        Ok(())
    }
}

struct StridedSlice {
    begin_mask: i64,
    end_mask: i64,
    ellipsis_mask: i64,
    new_axis_mask: i64,
    shrink_axis_mask: i64,
}

/// The elements a `StridedSlice` takes from an input of shape `in_dims`: the dense slice's
/// `dims`, its first element's flat `offset` and each axis' flat `steps` (for [`strided`]),
/// and the output's shape (new axes added, shrunk axes removed).
struct StridedView {
    dims: Vec<usize>,
    offset: isize,
    steps: Vec<isize>,
    final_dims: Vec<usize>,
}

impl StridedSlice {
    /// The slice spec's masks from a `StridedSlice` or `StridedSliceGrad` node.
    fn of(d: &NodeDesc) -> KResult<StridedSlice> {
        Ok(StridedSlice {
            begin_mask: d.int("begin_mask")?,
            end_mask: d.int("end_mask")?,
            ellipsis_mask: d.int("ellipsis_mask")?,
            new_axis_mask: d.int("new_axis_mask")?,
            shrink_axis_mask: d.int("shrink_axis_mask")?,
        })
    }

    fn view(&self, in_dims: &[usize], begin: &Tensor, end: &Tensor, strides: &Tensor) -> KResult<StridedView> {
        let n = begin.len();
        let (sb, se, ss) = (vector(begin, "begin", n)?, vector(end, "end", n)?, vector(strides, "strides", n)?);
        let rank = in_dims.len();
        let bit = |m: i64, i: usize| i < 63 && (m >> i) & 1 == 1;
        // Expand the sparse spec (with its ellipsis and new axes) to one entry per input dim.
        let mut ellipsis = self.ellipsis_mask;
        let mut sparse_n = n;
        let mut after_ellipsis_new = 0;
        let mut seen = false;
        for i in 0..n {
            if seen && bit(self.new_axis_mask, i) {
                after_ellipsis_new += 1;
            }
            if bit(ellipsis, i) {
                seen = true;
            }
        }
        if !seen {
            ellipsis |= 1 << n;
            sparse_n += 1;
        }
        #[derive(Clone, Copy)]
        enum Final {
            Dim(usize),
            NewAxis,
            Shrink,
        }
        let mut dense = vec![(0i64, 0i64, 1i64, true, true, false); rank]; // begin, end, stride, begin_masked, end_masked, shrink
        let mut finals = Vec::new();
        let mut full = 0usize;
        for i in 0..sparse_n {
            if bit(ellipsis, i) {
                let next = (rank + 1 + after_ellipsis_new).saturating_sub(sparse_n - i).min(rank);
                while full < next {
                    finals.push(Final::Dim(full));
                    full += 1;
                }
            } else if bit(self.new_axis_mask, i) {
                finals.push(Final::NewAxis);
            } else {
                if full >= rank {
                    return Err(invalid(format!(
                        "Index out of range using input dim {full}; input has only {rank} dims"
                    )));
                }
                let shrink = bit(self.shrink_axis_mask, i);
                dense[full] = (sb[i], se[i], ss[i], bit(self.begin_mask, i), bit(self.end_mask, i), shrink);
                finals.push(if shrink { Final::Shrink } else { Final::Dim(full) });
                full += 1;
            }
        }
        let st = strides_of(in_dims);
        let mut offset = 0isize;
        let mut dims = Vec::with_capacity(rank);
        let mut steps = Vec::with_capacity(rank);
        for (a, &(b, e, s, bm, em, shrink)) in dense.iter().enumerate() {
            let d = in_dims[a] as i64;
            if s == 0 {
                return Err(invalid("strides[i] must be non-zero"));
            }
            let (begin, size, stride) = if shrink {
                let b = if b < 0 { b + d } else { b };
                if b < 0 || b >= d {
                    return Err(invalid(format!(
                        "slice index {} of dimension {a} out of bounds.",
                        sb.get(a).copied().unwrap_or(b)
                    )));
                }
                (b, 1, 1)
            } else {
                let canon = |v: i64, masked: bool, is_begin: bool| {
                    if masked {
                        return if s > 0 {
                            if is_begin {
                                0
                            } else {
                                d
                            }
                        } else if is_begin {
                            d - 1
                        } else {
                            -1
                        };
                    }
                    let v = if v < 0 { v + d } else { v };
                    if s > 0 {
                        v.clamp(0, d)
                    } else {
                        v.clamp(-1, d - 1)
                    }
                };
                let (b, e) = (canon(b, bm, true), canon(e, em, false));
                let len = e - b;
                let size =
                    if (len <= 0 && s > 0) || (len >= 0 && s < 0) { 0 } else { len / s + i64::from(len % s != 0) };
                (b, size, s)
            };
            if size > 0 {
                offset += begin as isize * st[a] as isize;
            }
            dims.push(size as usize);
            steps.push(stride as isize * st[a] as isize);
        }
        let final_dims: Vec<usize> = finals
            .iter()
            .filter_map(|f| match *f {
                Final::Dim(a) => Some(dims[a]),
                Final::NewAxis => Some(1),
                Final::Shrink => None,
            })
            .collect();
        Ok(StridedView { dims, offset, steps, final_dims })
    }
}

impl OpKernel for StridedSlice {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let v = self.view(x.dims(), &inputs[1], &inputs[2], &inputs[3])?;
        let values = strided_copy(ctx, x, &v.dims, v.offset, &v.steps)?;
        outputs.push(values.reshaped(&v.final_dims)?);
        Ok(())
    }
}

/// `StridedSliceGrad(shape, begin, end, strides, dy)`: zeros of `shape` with `dy` written
/// where `StridedSlice` of the same spec reads (the slice's elements are distinct, so each
/// position is written once).
struct StridedSliceGrad {
    spec: StridedSlice,
    node: String,
}

impl OpKernel for StridedSliceGrad {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let shape = crate::random::shape_input(&inputs[0], &self.node)?;
        let v = self.spec.view(&shape, &inputs[1], &inputs[2], &inputs[3])?;
        let dy = &inputs[4];
        if dy.dims() != v.final_dims.as_slice() {
            return Err(invalid(format!(
                "dy has shape {:?}, but the slice of shape {shape:?} has shape {:?}",
                dy.dims(),
                v.final_dims
            )));
        }
        let size = dy.dtype().size().ok_or_else(|| invalid(format!("{} gradients are not supported", dy.dtype())))?;
        check_output(dy.dtype(), &shape)?;
        let src = dy.as_bytes()?;
        outputs.push(Tensor::from_fill(dy.dtype(), &shape, |out| {
            out.fill(0);
            for (k, at) in strided(&v.dims, v.offset, &v.steps).enumerate() {
                if let Some(at) = at {
                    out[at * size..(at + 1) * size].copy_from_slice(&src[k * size..(k + 1) * size]);
                }
            }
        })?);
        Ok(())
    }
}

struct Tile;
impl OpKernel for Tile {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let m = vector(&inputs[1], "multiples", x.rank())?;
        if m.iter().any(|&v| v < 0) {
            return Err(invalid(format!("Expected multiples to be non-negative, got {m:?}")));
        }
        let dims: Vec<usize> = x.dims().iter().zip(&m).map(|(&d, &k)| d.saturating_mul(k as usize)).collect();
        check_output(x.dtype(), &dims)?;
        let (xd, st) = (x.dims().to_vec(), strides_of(x.dims()));
        let pick = each_index(&dims, |i| Some(i.iter().enumerate().map(|(a, &v)| (v % xd[a]) * st[a]).sum()));
        outputs.push(gather_elements(x, &dims, None, pick)?);
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq)]
enum PadMode {
    Constant,
    Reflect,
    Symmetric,
}

struct Pad(PadMode);
impl OpKernel for Pad {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let p = axis_values(&inputs[1])?;
        if inputs[1].dims() != [x.rank(), 2] {
            return Err(invalid(format!(
                "paddings must be a matrix of shape [{}, 2], got {:?}",
                x.rank(),
                inputs[1].dims()
            )));
        }
        let fill = inputs.get(2);
        if fill.is_some_and(|f| f.len() != 1) {
            return Err(invalid("constant_values must be a scalar"));
        }
        let mode = self.0;
        let xd = x.dims().to_vec();
        let mut dims = Vec::with_capacity(xd.len());
        for (a, &d) in xd.iter().enumerate() {
            let (b, e) = (p[2 * a], p[2 * a + 1]);
            let limit = match mode {
                PadMode::Constant => i64::MAX,
                PadMode::Reflect => d as i64 - 1,
                PadMode::Symmetric => d as i64,
            };
            if b < 0 || e < 0 || b > limit || e > limit {
                return Err(invalid(format!(
                    "paddings {b}, {e} must be non-negative and fit dimension {a} of size {d}"
                )));
            }
            dims.push(d.saturating_add(b.saturating_add(e) as usize));
        }
        check_output(x.dtype(), &dims)?;
        if matches!(mode, PadMode::Constant) && x.dtype() != DType::String {
            outputs.push(pad_constant(ctx, x, &dims, &p, fill)?);
            return Ok(());
        }
        let st = strides_of(&xd);
        let pick = each_index(&dims, |i| {
            let mut off = 0;
            for (a, &v) in i.iter().enumerate() {
                let (n, pos) = (xd[a] as i64, v as i64 - p[2 * a]);
                let src = match mode {
                    _ if (0..n).contains(&pos) => pos,
                    PadMode::Constant => return None,
                    PadMode::Reflect if pos < 0 => -pos,
                    PadMode::Reflect => 2 * n - 2 - pos,
                    PadMode::Symmetric if pos < 0 => -pos - 1,
                    PadMode::Symmetric => 2 * n - 1 - pos,
                };
                off += src as usize * st[a];
            }
            Some(off)
        });
        outputs.push(gather_elements(x, &dims, fill, pick)?);
        Ok(())
    }
}

/// Constant padding by slabs: the axes from `inner` on have no padding, so the output is
/// slabs of axis `inner - 1` (an NHWC image padded in H and W: one output row of W×C values
/// per slab); a slab whose outer index falls in the padding is all pad value, any other is
/// its leading pad, a copy of the input's slab and its trailing pad. Every output byte is
/// written once (no zero fill of the whole output first: ResNet50's 106 MB `pool1_pad` at
/// batch 32 took 33 ms filling, zeroing and copying), slabs split across the intra-op pool.
fn pad_constant(ctx: &KernelContext, x: &Tensor, dims: &[usize], p: &[i64], fill: Option<&Tensor>) -> KResult<Tensor> {
    let size = x.dtype().size().ok_or_else(|| invalid(format!("{} tensors cannot be padded", x.dtype())))?;
    let xd = x.dims();
    let bytes = x.as_bytes()?;
    let pad: Vec<u8> = match fill {
        Some(f) => f.as_bytes()?.to_vec(),
        None => vec![0u8; size],
    };
    let zero = pad.iter().all(|&b| b == 0);
    let fill_with = |dst: &mut [u8]| {
        if zero {
            dst.fill(0);
        } else {
            for o in dst.chunks_exact_mut(size) {
                o.copy_from_slice(&pad);
            }
        }
    };
    let mut out = Tensor::for_overwrite(x.dtype(), dims)?;
    let o = out.as_mut_bytes()?;
    if o.is_empty() {
        return Ok(out);
    }
    let rank = xd.len();
    let mut inner = rank;
    while inner > 0 && p[2 * (inner - 1)] == 0 && p[2 * (inner - 1) + 1] == 0 {
        inner -= 1;
    }
    if inner == 0 {
        o.copy_from_slice(bytes);
        return Ok(out);
    }
    let run: usize = xd[inner..].iter().product::<usize>() * size;
    let axis = inner - 1;
    let (before, after) = (p[2 * axis] as usize * run, p[2 * axis + 1] as usize * run);
    let (slab, in_slab) = (dims[axis] * run, xd[axis] * run);
    let outer = &dims[..axis];
    // The input slab an output slab's outer index reads, if it is inside the input.
    let source = |mut i: usize| -> Option<usize> {
        let (mut at, mut stride) = (0, in_slab);
        for a in (0..axis).rev() {
            let pos = (i % outer[a]) as i64 - p[2 * a];
            i /= outer[a];
            if pos < 0 || pos >= xd[a] as i64 {
                return None;
            }
            at += pos as usize * stride;
            stride *= xd[a];
        }
        Some(at)
    };
    let write = |(i, dst): (usize, &mut [u8])| match source(i) {
        Some(src) if in_slab > 0 => {
            fill_with(&mut dst[..before]);
            dst[before..before + in_slab].copy_from_slice(&bytes[src..src + in_slab]);
            fill_with(&mut dst[before + in_slab..before + in_slab + after]);
        }
        _ => fill_with(dst),
    };
    if ctx.threads() > 1 && o.len() >= PARALLEL_PAD_BYTES && o.len() > slab {
        use rayon::prelude::*;
        ctx.install(|| o.par_chunks_mut(slab).enumerate().for_each(write));
    } else {
        o.chunks_mut(slab).enumerate().for_each(write);
    }
    Ok(out)
}

/// Output bytes from which a constant pad splits its slabs across the intra-op pool.
const PARALLEL_PAD_BYTES: usize = 1 << 20;

/// Splits `x` along `axis` into pieces of the given sizes.
fn split(x: &Tensor, axis: usize, sizes: &[usize], outputs: &mut Outputs) -> KResult<()> {
    if let Some(size) = x.dtype().size() {
        // Each part is `outer` contiguous blocks of the input: one copy per block, not one
        // per element (a data-parallel step splits a fused 1 MB gradient buffer into the
        // layers' gradients: 1.3 ms element by element).
        let (bytes, dims) = (x.as_bytes()?, x.dims());
        let outer: usize = dims[..axis].iter().product();
        let inner = dims[axis + 1..].iter().product::<usize>() * size;
        let mut start = 0;
        for &part in sizes {
            let mut out_dims = dims.to_vec();
            out_dims[axis] = part;
            check_output(x.dtype(), &out_dims)?;
            let block = part * inner;
            outputs.push(Tensor::from_fill(x.dtype(), &out_dims, |out| {
                for (o, dst) in out.chunks_exact_mut(block.max(1)).enumerate().take(outer) {
                    let from = (o * dims[axis] + start) * inner;
                    dst.copy_from_slice(&bytes[from..from + block]);
                }
            })?);
            start += part;
        }
        return Ok(());
    }
    let st = strides_of(x.dims());
    let steps: Vec<isize> = st.iter().map(|&s| s as isize).collect();
    let mut start = 0;
    for &size in sizes {
        let mut dims = x.dims().to_vec();
        dims[axis] = size;
        outputs.push(gather_elements(x, &dims, None, strided(&dims, (start * st[axis]) as isize, &steps))?);
        start += size;
    }
    Ok(())
}

struct Unpack {
    num: usize,
    axis: i64,
}
impl OpKernel for Unpack {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let axis = norm_axis(self.axis, x.rank())?;
        if x.dims()[axis] != self.num {
            return Err(invalid(format!("Input shape axis {axis} must equal {}, got shape {:?}", self.num, x.dims())));
        }
        split(x, axis, &vec![1; self.num], outputs)?;
        let mut dims = x.dims().to_vec();
        dims.remove(axis);
        for t in outputs.iter_mut() {
            *t = t.reshaped(&dims)?;
        }
        Ok(())
    }
}

struct Split {
    num: usize,
    v2: bool,
}
impl OpKernel for Split {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (x, axis_t) = if self.v2 { (&inputs[0], &inputs[2]) } else { (&inputs[1], &inputs[0]) };
        let a = axis_values(axis_t)?;
        let [a] = a[..] else { return Err(invalid("axis must be a scalar")) };
        let axis = norm_axis(a, x.rank())?;
        let d = x.dims()[axis];
        let sizes: Vec<usize> = if self.v2 {
            let mut s = vector(&inputs[1], "size_splits", self.num)?;
            if let Some(i) = s.iter().position(|&v| v == -1) {
                let known: i64 = s.iter().filter(|&&v| v != -1).sum();
                s[i] = d as i64 - known;
            }
            if s.iter().any(|&v| v < 0) || s.iter().sum::<i64>() != d as i64 {
                return Err(invalid(format!(
                    "size_splits {s:?} must be non-negative and sum to dimension {axis} of size {d}"
                )));
            }
            s.iter().map(|&v| v as usize).collect()
        } else {
            if d % self.num != 0 {
                return Err(invalid(format!("Number of ways to split should evenly divide the split dimension, but got split_dim {axis} (size = {d}) and num_split {}", self.num)));
            }
            vec![d / self.num; self.num]
        };
        split(x, axis, &sizes, outputs)
    }
}

/// `GatherV2` with `batch_dims` leading dimensions shared by `params` and `indices`: each
/// batch element gathers from its own `params` slice with its own indices.
struct GatherV2 {
    batch_dims: i64,
}
impl OpKernel for GatherV2 {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (params, idx) = (&inputs[0], axis_values(&inputs[1])?);
        let a = axis_values(&inputs[2])?;
        let [a] = a[..] else { return Err(invalid("axis must be a scalar")) };
        let (pd, id) = (params.dims(), inputs[1].dims());
        let b = if self.batch_dims < 0 { self.batch_dims + id.len() as i64 } else { self.batch_dims };
        if b < 0 || b as usize > id.len() {
            return Err(invalid(format!("batch_dims {} does not fit indices of rank {}", self.batch_dims, id.len())));
        }
        let b = b as usize;
        let axis = norm_axis(a, params.rank())?;
        if axis < b {
            return Err(invalid(format!("axis {a} must not be less than batch_dims {b}")));
        }
        if pd[..b] != id[..b] {
            return Err(invalid(format!(
                "params and indices must agree on the {b} batch dimensions: {:?} and {:?}",
                &pd[..b],
                &id[..b]
            )));
        }
        let batch: usize = pd[..b].iter().product();
        let (mid, n, inner) =
            (pd[b..axis].iter().product::<usize>(), pd[axis], pd[axis + 1..].iter().product::<usize>());
        if let Some(bad) = idx.iter().find(|&&i| i < 0 || i as usize >= n) {
            return Err(invalid(format!("indices contains {bad}, which is not in [0, {n})")));
        }
        let per = id[b..].iter().product::<usize>();
        let mut dims = pd[..axis].to_vec();
        dims.extend_from_slice(&id[b..]);
        dims.extend_from_slice(&pd[axis + 1..]);
        check_output(params.dtype(), &dims)?;
        let idx = &idx;
        let pick = (0..batch).flat_map(move |bi| {
            (0..mid).flat_map(move |m| {
                idx[bi * per..(bi + 1) * per]
                    .iter()
                    .flat_map(move |&i| (0..inner).map(move |j| Some(((bi * mid + m) * n + i as usize) * inner + j)))
            })
        });
        outputs.push(gather_elements(params, &dims, None, pick)?);
        Ok(())
    }
}

struct GatherNd;
impl OpKernel for GatherNd {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (params, indices) = (&inputs[0], &inputs[1]);
        let idx = axis_values(indices)?;
        let depth = *indices.dims().last().ok_or_else(|| invalid("indices must be at least a vector"))?;
        let pd = params.dims();
        if depth > pd.len() {
            return Err(invalid(format!("index depth {depth} exceeds params rank {}", pd.len())));
        }
        let st = strides_of(pd);
        let inner: usize = pd[depth..].iter().product();
        let mut starts = Vec::new();
        for (r, row) in idx.chunks(depth.max(1)).enumerate().take(indices.len() / depth.max(1)) {
            let mut off = 0;
            for (a, &v) in row.iter().enumerate().take(depth) {
                if v < 0 || v as usize >= pd[a] {
                    return Err(invalid(format!("indices[{r}] = {row:?} does not index into param shape {pd:?}")));
                }
                off += v as usize * st[a];
            }
            starts.push(off);
        }
        if depth == 0 {
            starts = vec![0; indices.len()];
        }
        let mut dims = indices.dims()[..indices.rank() - 1].to_vec();
        dims.extend_from_slice(&pd[depth..]);
        check_output(params.dtype(), &dims)?;
        let pick = starts.into_iter().flat_map(|s| (0..inner).map(move |j| Some(s + j)));
        outputs.push(gather_elements(params, &dims, None, pick)?);
        Ok(())
    }
}

struct OneHot(i64);
impl OpKernel for OneHot {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let idx = axis_values(&inputs[0]).or_else(|_| match inputs[0].dtype() {
            DType::UInt8 => Ok(inputs[0].as_slice::<u8>()?.iter().map(|&v| v as i64).collect()),
            DType::Int8 => Ok(inputs[0].as_slice::<i8>()?.iter().map(|&v| v as i64).collect()),
            d => Err(invalid(format!("OneHot indices of type {d}"))),
        })?;
        let depth = inputs[1].scalar_value::<i32>()?;
        if depth < 0 {
            return Err(invalid(format!("depth must be non-negative, got: {depth}")));
        }
        let depth = depth as usize;
        let rank = inputs[0].rank();
        let axis = if self.0 == -1 {
            rank
        } else {
            usize::try_from(self.0)
                .ok()
                .filter(|&a| a <= rank)
                .ok_or_else(|| invalid(format!("Expected axis to be -1 or between [0, {rank}], got {}", self.0)))?
        };
        let mut dims = inputs[0].dims().to_vec();
        dims.insert(axis, depth);
        check_output(inputs[2].dtype(), &dims)?;
        let (outer, inner): (usize, usize) = (dims[..axis].iter().product(), dims[axis + 1..].iter().product());
        let (on, off) = (&inputs[2], &inputs[3]);
        let both = concat_scalars(on, off)?;
        let pick = (0..outer)
            .flat_map(|o| (0..depth).flat_map(move |d| (0..inner).map(move |i| (o, d, i))))
            .map(|(o, d, i)| Some(if idx[o * inner + i] == d as i64 { 0 } else { 1 }));
        outputs.push(gather_elements(&both, &dims, None, pick)?);
        Ok(())
    }
}

/// A two-element vector [a, b] of two scalars of one dtype.
fn concat_scalars(a: &Tensor, b: &Tensor) -> KResult<Tensor> {
    if a.len() != 1 || b.len() != 1 {
        return Err(invalid("on_value and off_value must be scalars"));
    }
    if a.dtype() == DType::String {
        return Ok(Tensor::from_strings(&[2], vec![a.as_strings()?[0].clone(), b.as_strings()?[0].clone()])?);
    }
    let mut bytes = a.as_bytes()?.to_vec();
    bytes.extend_from_slice(b.as_bytes()?);
    Ok(Tensor::from_bytes(a.dtype(), &[2], &bytes)?)
}

struct Where;
impl OpKernel for Where {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let truth: Vec<bool> = match x.dtype() {
            DType::Bool => x.as_slice::<bool>()?.to_vec(),
            DType::Float => x.as_slice::<f32>()?.iter().map(|&v| v != 0.0).collect(),
            DType::Double => x.as_slice::<f64>()?.iter().map(|&v| v != 0.0).collect(),
            DType::Int32 => x.as_slice::<i32>()?.iter().map(|&v| v != 0).collect(),
            DType::Int64 => x.as_slice::<i64>()?.iter().map(|&v| v != 0).collect(),
            d => return Err(invalid(format!("Where is not defined for {d}"))),
        };
        let st = strides_of(x.dims());
        let mut coords = Vec::new();
        for (i, _) in truth.iter().enumerate().filter(|(_, t)| **t) {
            coords.extend(st.iter().zip(x.dims()).map(|(&s, &d)| ((i / s) % d) as i64));
        }
        let n = coords.len() / x.rank().max(1);
        let n = if x.rank() == 0 { truth.iter().filter(|t| **t).count() } else { n };
        outputs.push(Tensor::from_vec(&[n, x.rank()], coords)?);
        Ok(())
    }
}

struct Range;
impl OpKernel for Range {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        fn make<T: Num + Into<f64>>(inputs: &Inputs) -> KResult<Tensor> {
            let (s, l, d) =
                (inputs[0].scalar_value::<T>()?, inputs[1].scalar_value::<T>()?, inputs[2].scalar_value::<T>()?);
            let (sf, lf, df): (f64, f64, f64) = (s.into(), l.into(), d.into());
            if df == 0.0 {
                return Err(invalid("Requires delta != 0"));
            }
            if (df > 0.0 && sf > lf) || (df < 0.0 && sf < lf) {
                return Err(invalid(format!("Requires start <= limit when delta > 0: {sf}/{lf}")));
            }
            let n = ((lf - sf) / df).abs().ceil() as usize;
            if n > 1 << 31 {
                return Err(invalid(format!("Range of {n} elements is too large")));
            }
            check_output(T::DTYPE, &[n])?;
            let mut v = Vec::with_capacity(n);
            let mut x = s;
            for _ in 0..n {
                v.push(x);
                x = x.add_w(d);
            }
            Ok(Tensor::from_vec(&[n], v)?)
        }
        let t = match inputs[0].dtype() {
            DType::Int32 => make::<i32>(inputs)?,
            DType::Float => make::<f32>(inputs)?,
            DType::Double => make::<f64>(inputs)?,
            DType::Int64 => {
                let v = [0, 1, 2].map(|i| inputs[i].scalar_value::<i64>());
                let (s, l, d) = (
                    v[0].as_ref().copied().map_err(|e| invalid(e.to_string()))?,
                    v[1].as_ref().copied().map_err(|e| invalid(e.to_string()))?,
                    v[2].as_ref().copied().map_err(|e| invalid(e.to_string()))?,
                );
                if d == 0 || (d > 0 && s > l) || (d < 0 && s < l) {
                    return Err(invalid(format!("Requires delta != 0 and start/limit ordered by delta: {s}/{l}/{d}")));
                }
                let n = ((l - s) as i128).unsigned_abs().div_ceil(d.unsigned_abs() as u128) as usize;
                if n > 1 << 31 {
                    return Err(invalid(format!("Range of {n} elements is too large")));
                }
                check_output(DType::Int64, &[n])?;
                Tensor::from_vec(&[n], (0..n as i64).map(|i| s + i * d).collect())?
            }
            dt => return Err(invalid(format!("Range is not defined for {dt}"))),
        };
        outputs.push(t);
        Ok(())
    }
}

/// `Cumsum` and `Cumprod`: running sums or products along an axis, forwards or reversed,
/// inclusive or exclusive (each element gets the total before it, exactly: no subtraction).
struct Cumulative<T> {
    exclusive: bool,
    reverse: bool,
    product: bool,
    _t: std::marker::PhantomData<T>,
}
impl<T: Num> OpKernel for Cumulative<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let a = axis_values(&inputs[1])?;
        let [a] = a[..] else { return Err(invalid("axis must be a scalar")) };
        let mut x = inputs.swap_remove(0);
        let axis = norm_axis(a, x.rank())?;
        let d = x.dims();
        let (outer, n, inner) = (d[..axis].iter().product::<usize>(), d[axis], d[axis + 1..].iter().product::<usize>());
        let (ex, rev, product) = (self.exclusive, self.reverse, self.product);
        let v = x.as_mut_slice::<T>()?;
        for o in 0..outer {
            for i in 0..inner {
                let mut acc = if product { T::ONE } else { T::ZERO };
                for k in 0..n {
                    let k = if rev { n - 1 - k } else { k };
                    let e = &mut v[(o * n + k) * inner + i];
                    let cur = *e;
                    let next = if product { acc.mul_w(cur) } else { acc.add_w(cur) };
                    *e = if ex { acc } else { next };
                    acc = next;
                }
            }
        }
        outputs.push(x);
        Ok(())
    }
}

struct TopK<T> {
    index: DType,
    _t: std::marker::PhantomData<T>,
}
impl<T: Num> OpKernel for TopK<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        let k = axis_values(&inputs[1])?;
        let [k] = k[..] else { return Err(invalid("k must be a scalar")) };
        let n = *x.dims().last().ok_or_else(|| invalid("input must be at least 1-D"))?;
        if k < 0 || k as usize > n {
            return Err(invalid(format!("input must have at least k={k} columns, has {n}")));
        }
        if self.index == DType::Int16 && n > i16::MAX as usize {
            return Err(invalid(format!("int16 indices cannot index {n} columns")));
        }
        let k = k as usize;
        let rows = x.len().checked_div(n).unwrap_or(0);
        let src = x.as_slice::<T>()?;
        let (mut vals, mut idx) = (Vec::with_capacity(rows * k), Vec::with_capacity(rows * k));
        let mut order: Vec<usize> = Vec::with_capacity(n);
        for r in 0..rows {
            let row = &src[r * n..(r + 1) * n];
            // Larger first; ties keep the lower index first, as TensorFlow does: a total order,
            // so selecting the k first (O(n)) and sorting only them gives the full sort's.
            let before = |&a: &usize, &b: &usize| {
                row[b].partial_cmp(&row[a]).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
            };
            order.clear();
            // `sorted=False` gives the sorted order too: TensorFlow leaves the order unspecified
            // (its CPU kernel's is a heap's).
            order.extend(0..n);
            if k > 0 && k < n {
                order.select_nth_unstable_by(k - 1, before);
            }
            order[..k].sort_unstable_by(before);
            for &i in &order[..k] {
                vals.push(row[i]);
                idx.push(i as i64);
            }
        }
        let mut dims = x.dims().to_vec();
        *dims.last_mut().expect("rank >= 1") = k;
        outputs.push(Tensor::from_vec(&dims, vals)?);
        outputs.push(match self.index {
            DType::Int64 => Tensor::from_vec(&dims, idx)?,
            DType::Int16 => Tensor::from_vec(&dims, idx.into_iter().map(|i| i as i16).collect())?,
            _ => Tensor::from_vec(&dims, idx.into_iter().map(|i| i as i32).collect())?,
        });
        Ok(())
    }
}

/// `InvertPermutation`: `y[x[i]] = i`; `x` must be a permutation of `0..n`.
struct InvertPermutation;
impl OpKernel for InvertPermutation {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = &inputs[0];
        if x.rank() != 1 {
            return Err(invalid(format!("x must be a vector, got shape {:?}", x.dims())));
        }
        let v = axis_values(x)?;
        let n = v.len();
        let mut y = vec![-1i64; n];
        for (i, &p) in v.iter().enumerate() {
            if p < 0 || p as usize >= n || y[p as usize] >= 0 {
                return Err(invalid(format!("{p} is out of range [0, {n}) or repeated: x is not a permutation")));
            }
            y[p as usize] = i as i64;
        }
        outputs.push(match x.dtype() {
            DType::Int64 => Tensor::from_vec(&[n], y)?,
            _ => Tensor::from_vec(&[n], y.into_iter().map(|i| i as i32).collect())?,
        });
        Ok(())
    }
}

/// `ListDiff` (`tf.compat.v1.setdiff1d`): the values of `x` not in `y`, in order, with their
/// positions in `x`. Values are compared by bit pattern: exact for the integer index lists it
/// meets (TensorFlow's gradients); for floats, -0.0 and 0.0 differ and equal NaNs match.
struct ListDiff {
    out_idx: DType,
}
impl OpKernel for ListDiff {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (x, y) = (&inputs[0], &inputs[1]);
        if x.rank() != 1 || y.rank() != 1 || x.dtype() != y.dtype() {
            return Err(invalid(format!(
                "x and y must be vectors of one dtype, got {} {:?} and {} {:?}",
                x.dtype(),
                x.dims(),
                y.dtype(),
                y.dims()
            )));
        }
        let size = x.dtype().size().ok_or_else(|| invalid(format!("ListDiff of {} values", x.dtype())))?;
        let (xb, yb) = (x.as_bytes()?, y.as_bytes()?);
        let drop: std::collections::HashSet<&[u8]> = yb.chunks(size).collect();
        let keep: Vec<usize> = (0..x.len()).filter(|&i| !drop.contains(&xb[i * size..(i + 1) * size])).collect();
        let bytes: Vec<u8> = keep.iter().flat_map(|&i| xb[i * size..(i + 1) * size].iter().copied()).collect();
        outputs.push(Tensor::from_bytes(x.dtype(), &[keep.len()], &bytes)?);
        outputs.push(match self.out_idx {
            DType::Int64 => Tensor::from_vec(&[keep.len()], keep.iter().map(|&i| i as i64).collect())?,
            _ => Tensor::from_vec(&[keep.len()], keep.iter().map(|&i| i as i32).collect())?,
        });
        Ok(())
    }
}

fn k_cumulative(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let (exclusive, reverse, product) = (d.bool("exclusive")?, d.bool("reverse")?, d.def.name == "Cumprod");
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64],
        |T| Ok(Box::new(Cumulative::<T> { exclusive, reverse, product, _t: Default::default() }) as Box<dyn OpKernel>))
}

fn k_topk(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let index = d.dtype("index_type").unwrap_or(DType::Int32);
    if !matches!(index, DType::Int16 | DType::Int32 | DType::Int64) {
        return Err(invalid(format!("TopKV2's index_type must be int16, int32 or int64, got {index}")));
    }
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64],
        |T| Ok(Box::new(TopK::<T> { index, _t: Default::default() }) as Box<dyn OpKernel>))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    const NUM: &[DType] = &[DType::Float, DType::Double, DType::Int32, DType::Int64];
    space_batch::register(r);
    r.register("Transpose", "", &[], |_| Ok(Box::new(Transpose)));
    r.register("Slice", "", &[], |_| Ok(Box::new(Slice)));
    r.register("StridedSlice", "", &[], |d| Ok(Box::new(StridedSlice::of(d)?)));
    r.register("StridedSliceGrad", "", &[], |d| {
        Ok(Box::new(StridedSliceGrad { spec: StridedSlice::of(d)?, node: d.name.to_string() }))
    });
    r.register("Tile", "", &[], |_| Ok(Box::new(Tile)));
    r.register("Pad", "", &[], |_| Ok(Box::new(Pad(PadMode::Constant))));
    r.register("PadV2", "", &[], |_| Ok(Box::new(Pad(PadMode::Constant))));
    r.register("MirrorPad", "", &[], |d| {
        Ok(Box::new(Pad(if d.string("mode")? == "REFLECT" { PadMode::Reflect } else { PadMode::Symmetric })))
    });
    r.register("Unpack", "", &[], |d| {
        Ok(Box::new(Unpack { num: d.int("num")?.max(0) as usize, axis: d.int("axis")? }))
    });
    r.register("Split", "", &[], |d| Ok(Box::new(Split { num: d.int("num_split")?.max(1) as usize, v2: false })));
    r.register("SplitV", "", &[], |d| Ok(Box::new(Split { num: d.int("num_split")?.max(1) as usize, v2: true })));
    r.register("GatherV2", "", &[], |d| Ok(Box::new(GatherV2 { batch_dims: d.int("batch_dims").unwrap_or(0) })));
    r.register("GatherNd", "", &[], |_| Ok(Box::new(GatherNd)));
    r.register("OneHot", "", &[], |d| Ok(Box::new(OneHot(d.int("axis")?))));
    r.register("Where", "", &[], |_| Ok(Box::new(Where)));
    r.register("Range", "Tidx", &[DType::Int32, DType::Int64, DType::Float, DType::Double], |_| Ok(Box::new(Range)));
    r.register("Cumsum", "T", NUM, k_cumulative);
    r.register("Cumprod", "T", NUM, k_cumulative);
    r.register("InvertPermutation", "T", &[DType::Int32, DType::Int64], |_| Ok(Box::new(InvertPermutation)));
    r.register("ListDiff", "", &[], |d| Ok(Box::new(ListDiff { out_idx: d.dtype("out_idx").unwrap_or(DType::Int32) })));
    r.register("TopKV2", "T", NUM, k_topk);
    register_scatter(r);
}

/// Where each slice of a scatter goes: the flat offset in the output of each index row
/// (`indices[..., :depth]` into `shape`) and the number of elements a slice holds; checks
/// that `updates` is `indices.shape[:-1] + shape[depth:]`, as TensorFlow's scatter kernels do.
fn scatter_offsets(indices: &Tensor, updates_dims: &[usize], shape: &[usize]) -> KResult<(Vec<usize>, usize)> {
    let idx = axis_values(indices)?;
    let id = indices.dims();
    let depth = *id.last().ok_or_else(|| invalid("indices must be at least a vector"))?;
    if depth > shape.len() {
        return Err(invalid(format!(
            "the last dimension of indices ({depth}) must not exceed the output's rank ({})",
            shape.len()
        )));
    }
    let outer = &id[..id.len() - 1];
    let mut want = outer.to_vec();
    want.extend_from_slice(&shape[depth..]);
    if updates_dims != want.as_slice() {
        return Err(invalid(format!(
            "updates must have shape indices.shape[:-1] + shape[{depth}:] = {want:?}, got {updates_dims:?}"
        )));
    }
    let st = strides_of(shape);
    let slice: usize = shape[depth..].iter().product();
    let rows: usize = outer.iter().product();
    let mut offsets = Vec::with_capacity(rows);
    for r in 0..rows {
        let row = &idx[r * depth..(r + 1) * depth];
        let mut off = 0;
        for (a, &v) in row.iter().enumerate() {
            if v < 0 || v as usize >= shape[a] {
                return Err(invalid(format!("indices[{r}] = {row:?} does not index into shape {shape:?}")));
            }
            off += v as usize * st[a];
        }
        offsets.push(off);
    }
    Ok((offsets, slice))
}

/// How a scatter combines an update with the element it lands on.
#[derive(Clone, Copy, PartialEq)]
enum Combine {
    Update,
    Add,
    Sub,
    Max,
    Min,
}

impl Combine {
    #[inline]
    fn apply<T: Num>(self, out: &mut [T], upd: &[T]) {
        match self {
            Combine::Update => out.copy_from_slice(upd),
            Combine::Add => out.iter_mut().zip(upd).for_each(|(o, &u)| *o = o.add_w(u)),
            Combine::Sub => out.iter_mut().zip(upd).for_each(|(o, &u)| *o = o.sub_w(u)),
            // std::max / std::min as Eigen's cwiseMax / cwiseMin apply them.
            Combine::Max => out.iter_mut().zip(upd).for_each(|(o, &u)| *o = if *o < u { u } else { *o }),
            Combine::Min => out.iter_mut().zip(upd).for_each(|(o, &u)| *o = if u < *o { u } else { *o }),
        }
    }
}

/// `out` with each update slice combined into its place, in index order (so a repeated
/// index sums, or keeps its last update, as TensorFlow's CPU kernels do).
fn scatter_into<T: Num>(out: &mut [T], upd: &[T], offsets: &[usize], slice: usize, how: Combine) {
    if slice == 0 {
        return;
    }
    for (u, &off) in upd.chunks_exact(slice).zip(offsets) {
        how.apply(&mut out[off..off + slice], u);
    }
}

/// `ScatterNd(indices, updates, shape)`: zeros of `shape` with the updates summed in.
struct ScatterNd<T>(std::marker::PhantomData<T>);
impl<T: Num> OpKernel for ScatterNd<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let shape = axis_values(&inputs[2])?;
        if inputs[2].rank() != 1 {
            return Err(invalid(format!("shape must be a vector, got shape {:?}", inputs[2].dims())));
        }
        let shape = shape
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| invalid(format!("shape {shape:?} has a negative dimension"))))
            .collect::<KResult<Vec<_>>>()?;
        if shape.is_empty() {
            return Err(invalid("shape must have at least one dimension"));
        }
        let (offsets, slice) = scatter_offsets(&inputs[0], inputs[1].dims(), &shape)?;
        check_output(T::DTYPE, &shape)?;
        let mut out = vec![T::ZERO; shape.iter().product()];
        scatter_into(&mut out, inputs[1].as_slice::<T>()?, &offsets, slice, Combine::Add);
        outputs.push(Tensor::from_vec(&shape, out)?);
        Ok(())
    }
}

/// `TensorScatterUpdate/Add/Sub/Max/Min(tensor, indices, updates)`.
struct TensorScatter<T> {
    how: Combine,
    _t: std::marker::PhantomData<T>,
}
impl<T: Num> OpKernel for TensorScatter<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let shape = inputs[0].dims().to_vec();
        if shape.is_empty() {
            return Err(invalid("tensor must have at least one dimension"));
        }
        let (offsets, slice) = scatter_offsets(&inputs[1], inputs[2].dims(), &shape)?;
        let updates = inputs.swap_remove(2);
        let mut t = inputs.swap_remove(0);
        scatter_into(t.as_mut_slice::<T>()?, updates.as_slice::<T>()?, &offsets, slice, self.how);
        outputs.push(t);
        Ok(())
    }
}

/// `TensorScatterUpdate` on any dtype with fixed-size elements: update slices copied as bytes.
struct TensorScatterBytes;
impl OpKernel for TensorScatterBytes {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let shape = inputs[0].dims().to_vec();
        if shape.is_empty() {
            return Err(invalid("tensor must have at least one dimension"));
        }
        let (offsets, slice) = scatter_offsets(&inputs[1], inputs[2].dims(), &shape)?;
        let dt = inputs[0].dtype();
        let size = dt.size().ok_or_else(|| invalid(format!("TensorScatterUpdate of {dt} tensors is not supported")))?;
        let updates = inputs.swap_remove(2);
        let mut t = inputs.swap_remove(0);
        let upd = updates.as_bytes()?;
        let out = t.as_mut_bytes()?;
        if slice > 0 {
            for (u, &off) in upd.chunks_exact(slice * size).zip(&offsets) {
                out[off * size..(off + slice) * size].copy_from_slice(u);
            }
        }
        outputs.push(t);
        Ok(())
    }
}

fn k_tensor_scatter(d: &NodeDesc, how: Combine) -> KResult<Box<dyn OpKernel>> {
    let t = d.dtype("T")?;
    if how == Combine::Update && !matches!(t, DType::Float | DType::Double | DType::Int32 | DType::Int64) {
        return Ok(Box::new(TensorScatterBytes));
    }
    dispatch!(t, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64],
        |T| Ok(Box::new(TensorScatter::<T> { how, _t: Default::default() }) as Box<dyn OpKernel>))
}

pub(crate) fn register_scatter(r: &mut KernelRegistry) {
    const NUM: &[DType] = &[DType::Float, DType::Double, DType::Int32, DType::Int64];
    r.register("ScatterNd", "T", NUM, |d| {
        dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64],
            |T| Ok(Box::new(ScatterNd::<T>(Default::default())) as Box<dyn OpKernel>))
    });
    r.register("TensorScatterUpdate", "", &[], |d| k_tensor_scatter(d, Combine::Update));
    r.register("TensorScatterAdd", "T", NUM, |d| k_tensor_scatter(d, Combine::Add));
    r.register("TensorScatterSub", "T", NUM, |d| k_tensor_scatter(d, Combine::Sub));
    r.register("TensorScatterMax", "T", NUM, |d| k_tensor_scatter(d, Combine::Max));
    r.register("TensorScatterMin", "T", NUM, |d| k_tensor_scatter(d, Combine::Min));
}
