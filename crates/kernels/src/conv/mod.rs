//! Convolutions and friends, NHWC. This module chooses `Conv2D`'s algorithm from the shapes
//! and holds what every window op shares (padding, strides and dilations as [`Axis`] and
//! [`Window`]; the epilogue callback [`BlockFn`]); the algorithms, the other kernels and their
//! registrations are in the submodules: im2col + GEMM ([`gemm`]), the direct convolution
//! ([`direct`], with the implicit GEMM of `implicit` on AVX-512), Winograd ([`winograd`]),
//! `DepthwiseConv2dNative` ([`depthwise`]), `MaxPool` / `AvgPool` ([`pool`]), the gradients
//! ([`backprop`]), the convolutions with a fused epilogue ([`fused`]),
//! `FusedBatchNormV3` / `FusedBatchNormGradV3` ([`batch_norm`]), the 3-D convolutions and
//! pools ([`conv3d`]), and the scratch buffers the algorithms share ([`scratch`]).
mod backprop;
mod batch_norm;
mod conv3d;
mod depthwise;
mod direct;
mod fused;
mod gemm;
#[cfg(target_arch = "x86_64")]
mod implicit;
mod pool;
mod scratch;
mod winograd;

use ferroflow_ops::defs::conv::conv_output_size;
use ferroflow_tensor::{DType, Tensor};

use crate::matmul::GemmElement;
use crate::numeric::Float;
use crate::packed;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// Output size and leading padding of one spatial dimension.
#[derive(Clone, Copy, Debug)]
struct Axis {
    input: usize,
    output: usize,
    window: usize,
    stride: usize,
    dilation: usize,
    pad_before: usize,
}

impl Axis {
    fn new(input: usize, window: usize, stride: usize, dilation: usize, padding: &Padding, i: usize) -> KResult<Axis> {
        let explicit = match padding {
            Padding::Explicit(p) => p[i],
            _ => (0, 0),
        };
        let name = match padding {
            Padding::Same => "SAME",
            Padding::Valid => "VALID",
            Padding::Explicit(_) => "EXPLICIT",
        };
        let output = conv_output_size(input, window, stride, dilation, name, explicit).map_err(invalid)?;
        let eff = (window - 1) * dilation + 1;
        let pad_before = match padding {
            Padding::Valid => 0,
            Padding::Same => ((output.saturating_sub(1)) * stride + eff).saturating_sub(input) / 2,
            Padding::Explicit(_) => explicit.0,
        };
        Ok(Axis { input, output, window, stride, dilation, pad_before })
    }

    /// The input position read by output `o`, window tap `k` (None in the padding).
    #[inline]
    fn source(&self, o: usize, k: usize) -> Option<usize> {
        (o * self.stride + k * self.dilation).checked_sub(self.pad_before).filter(|&p| p < self.input)
    }
}

#[derive(Clone, Debug)]
enum Padding {
    Same,
    Valid,
    Explicit([(usize, usize); 2]),
}

/// The attrs every NHWC window op shares.
#[derive(Clone, Debug)]
struct Window {
    strides: [usize; 2],
    dilations: [usize; 2],
    padding: Padding,
}

fn four(d: &NodeDesc, name: &str, default: i64) -> KResult<[usize; 2]> {
    let v = d.ints(name);
    let v = if v.is_empty() { vec![default; 4] } else { v };
    if v.len() != 4 || v.iter().any(|&x| x < 1) {
        return Err(invalid(format!("{name} must be 4 positive values, got {v:?}")));
    }
    if v[0] != 1 || v[3] != 1 {
        return Err(invalid(format!("{name} in the batch and depth dimensions must be 1, got {v:?}")));
    }
    Ok([v[1] as usize, v[2] as usize])
}

impl Window {
    fn from_node(d: &NodeDesc, dilations: bool) -> KResult<Window> {
        if d.string("data_format")? != "NHWC" {
            return Err(invalid("the CPU kernel supports only data_format NHWC"));
        }
        let padding = match d.string("padding")?.as_str() {
            "SAME" => Padding::Same,
            "VALID" => Padding::Valid,
            "EXPLICIT" => {
                let p = d.ints("explicit_paddings");
                if p.len() != 8 || p.iter().any(|&x| x < 0) {
                    return Err(invalid(format!(
                        "node '{}': explicit_paddings must be 8 non-negative values, got {p:?}",
                        d.name
                    )));
                }
                Padding::Explicit([(p[2] as usize, p[3] as usize), (p[4] as usize, p[5] as usize)])
            }
            p => return Err(invalid(format!("node '{}': unknown padding '{p}'", d.name))),
        };
        let dilations = if dilations { four(d, "dilations", 1)? } else { [1, 1] };
        Ok(Window { strides: four(d, "strides", 1)?, dilations, padding })
    }

    fn axes(&self, h: usize, w: usize, kh: usize, kw: usize) -> KResult<[Axis; 2]> {
        Ok([
            Axis::new(h, kh, self.strides[0], self.dilations[0], &self.padding, 0)?,
            Axis::new(w, kw, self.strides[1], self.dilations[1], &self.padding, 1)?,
        ])
    }
}

impl Window {
    /// Where the kernels' explicit padding would differ from TensorFlow's: an `EXPLICIT`
    /// padding and a filter with a non-finite value. The kernels skip a padding tap, where
    /// TensorFlow (which pads the input, then runs a `VALID` convolution) adds `0 * w`: the
    /// same sum for every finite `w` (a sum started from +0 is never -0, so adding a zero
    /// leaves it unchanged), NaN for an infinite or NaN one. There, the input padded with
    /// zeros and the `VALID` window, so the optimizer may fold a `Pad` into any convolution.
    fn materialized<T: Float>(&self, inputs: &Inputs) -> KResult<Option<(Window, Tensor)>> {
        let Padding::Explicit([(t, b), (l, r)]) = self.padding else { return Ok(None) };
        #[allow(clippy::eq_op)] // `w - w` is 0 for a finite `w`, NaN otherwise.
        let finite = |f: &[T]| f.iter().all(|&w| w - w == T::ZERO);
        if t + b + l + r == 0 || finite(inputs[1].as_slice::<T>()?) {
            return Ok(None);
        }
        let [n, h, w, c] = nhwc(&inputs[0], "input")?;
        let (ph, pw) = (h + t + b, w + l + r);
        let mut padded = Tensor::zeros(T::DTYPE, &[n, ph, pw, c])?;
        let (x, dst) = (inputs[0].as_slice::<T>()?, padded.as_mut_slice::<T>()?);
        if w * c > 0 {
            for (i, row) in x.chunks_exact(w * c).enumerate() {
                let (img, y) = (i / h, i % h);
                let at = ((img * ph + y + t) * pw + l) * c;
                dst[at..at + w * c].copy_from_slice(row);
            }
        }
        Ok(Some((Window { padding: Padding::Valid, ..self.clone() }, padded)))
    }
}

fn nhwc(t: &Tensor, what: &str) -> KResult<[usize; 4]> {
    match t.dims() {
        &[a, b, c, d] => Ok([a, b, c, d]),
        d => Err(invalid(format!("{what} must be 4-dimensional, got shape {d:?}"))),
    }
}

/// What runs on each block of output rows right after the GEMM wrote it, while it is in cache:
/// the block's offset (in elements) into the output, the block, and a scratch buffer reused by
/// the thread.
type BlockFn<'a, T> = &'a (dyn Fn(usize, &mut [T], &mut Vec<T>) + Sync);

/// `Conv2D`, by the algorithm its shapes call for (chosen per run in `run_into`): Winograd
/// ([`winograd`]) for 3×3 stride-1 windows on enough channels and tiles, the direct
/// convolution ([`direct`]) for few input channels, im2col + GEMM ([`gemm`]) otherwise.
struct Conv2D<T> {
    window: Window,
    winograd_filter: winograd::FilterCache<T>,
    /// The filter packed for [`packed::product`] (f32 on AVX-512).
    packed_filter: packed::Derived<packed::Packed<T>>,
}

/// When a 3×3 stride-1 convolution runs as Winograd (F(2×2, 3×3) or F(4×4, 3×3): see
/// [`winograd_tile`]): at least this many channels in and out, and this many 2×2 output tiles
/// in all. Measured on ResNet50 (2-core AMD EPYC),
/// per layer: batch 1's 3×3 layers of 49–784 tiles 20–40% faster than im2col + GEMM (with
/// the phased schedule on 2 threads, see `run_winograd`), batch 32's 14×14 and 7×7 layers
/// 10–40% faster; batch 1's 7×7 layers (16 tiles, K = 4,608) no faster: their transformed
/// filter, 16/9 the filter's size, is read for only 16 tiles.
const WINOGRAD_MIN_CHANNELS: usize = 16;
const WINOGRAD_MIN_TILES: usize = 32;

/// Whether F(4×4, 3×3) may run at all: off, for accuracy. On ResNet101's 3×3 layers at batch 1
/// its error against the float64 convolution was 5.8–6.8× TensorFlow's (oneDNN's direct
/// convolution), and over the 101 layers the logits' error 2.2× TensorFlow's (1.0e-4 against
/// 4.7e-5 of the largest logit), past the zoo's tolerance; F(2×2)'s is TensorFlow's order.
/// Interpolation points that keep F(4×4)'s terms smaller (±1/2 instead of ±2) are the way
/// back to its speed.
const WINOGRAD_F4: bool = false;

/// Winograd's output tile side for a convolution of `n` images of `out` pixels with at least
/// `channels` channels in and out: F(4×4, 3×3) (α² = 36 GEMMs of 2.25 multiplies per output
/// instead of F(2×2)'s 16 of 4) where both the channels and the 4×4 tiles are many enough to
/// pay for its larger transforms and transformed filter (2.25× F(2×2)'s, read from memory by
/// every block), F(2×2, 3×3) otherwise. Measured per layer on ResNet50 (2-core AMD EPYC):
/// at batch 32, F(4×4) took 10–40% less time on every 3×3 layer (the 7×7×512 ones 40%); at
/// batch 1 (49–196 tiles of 4×4) as long as F(2×2); on the small CNN's 14×14 layer of 32 and
/// 64 channels it was slower. Its rounding error is a few times F(2×2)'s (more additions
/// of larger terms): ResNet50's logits differ from TensorFlow's by 3.9e-6 against 3.6e-6.
fn winograd_tile(n: usize, [oh, ow]: [usize; 2], channels: usize) -> usize {
    if WINOGRAD_F4 && channels >= 64 && n * oh.div_ceil(4) * ow.div_ceil(4) >= 48 {
        4
    } else {
        2
    }
}

/// Direct convolution where the input has at most this many channels and a window at most
/// this many taps in all (`kh·kw·c`): a first layer on gray or RGB images. im2col + GEMM there
/// multiplies matrices of K = 9–27, too short for the GEMM's packing to pay; the small CNN's
/// 3×3 layer on 28×28×1 at batch 32 took 0.71 ms that way (20 GFLOP/s).
const DIRECT_MAX_CHANNELS: usize = 4;
const DIRECT_MAX_K: usize = 36;

/// Whether the implicit GEMM ([`implicit`]) runs the convolution (few input channels, a
/// large window, f32 on AVX-512F).
fn implicit_applies<T: 'static>(c: usize, k: usize, oc: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    return implicit::applies::<T>(c, k, oc);
    #[cfg(not(target_arch = "x86_64"))]
    false
}

impl<T: GemmElement + Float> Conv2D<T> {
    fn new(d: &NodeDesc) -> KResult<Conv2D<T>> {
        Ok(Conv2D {
            window: Window::from_node(d, true)?,
            winograd_filter: Default::default(),
            packed_filter: Default::default(),
        })
    }

    /// The shape of the convolution's output.
    fn output_dims(&self, inputs: &Inputs) -> KResult<[usize; 4]> {
        let [n, h, w, _] = nhwc(&inputs[0], "input")?;
        let [kh, kw, _, oc] = nhwc(&inputs[1], "filter")?;
        let [ah, aw] = self.window.axes(h, w, kh, kw)?;
        Ok([n, ah.output, aw.output, oc])
    }

    /// The convolution of `inputs[0]` by `inputs[1]`, with `epilogue` run on each block of
    /// output rows.
    fn run(&self, ctx: &KernelContext, inputs: &Inputs, epilogue: Option<BlockFn<T>>) -> KResult<Tensor> {
        Ok(self.run_into(ctx, inputs, epilogue, None)?.expect("an unpooled convolution always runs"))
    }

    /// The convolution, its epilogue, then a max pool of `[ph, pw]` windows (VALID, strides
    /// equal to the window) on each block while it is in cache: the convolution's own output
    /// is never written to memory. `None` where the algorithm's blocks cannot be whole pooled
    /// rows (the caller pools the whole output instead): only the Winograd blocks with tiles
    /// of whole windows and the direct convolution pool block by block, on outputs whose
    /// sides the window divides.
    fn run_pooled(
        &self,
        ctx: &KernelContext,
        inputs: &Inputs,
        epilogue: Option<BlockFn<T>>,
        pool: [usize; 2],
    ) -> KResult<Option<Tensor>> {
        self.run_into(ctx, inputs, epilogue, Some(pool))
    }

    fn run_into(
        &self,
        ctx: &KernelContext,
        inputs: &Inputs,
        epilogue: Option<BlockFn<T>>,
        pool: Option<[usize; 2]>,
    ) -> KResult<Option<Tensor>> {
        if let Some((window, padded)) = self.window.materialized::<T>(inputs)? {
            let valid = Conv2D::<T> { window, winograd_filter: Default::default(), packed_filter: Default::default() };
            return valid.run_into(ctx, &vec![padded, inputs[1].clone()], epilogue, pool);
        }
        let [n, h, w, c] = nhwc(&inputs[0], "input")?;
        let [kh, kw, fc, oc] = nhwc(&inputs[1], "filter")?;
        if fc != c {
            if fc == 0 || c == 0 || c % fc != 0 || oc % (c / fc) != 0 {
                return Err(invalid(format!(
                    "input depth {c} must be a multiple of filter depth {fc}, and the output depth {oc} of their ratio (the groups)"
                )));
            }
            // A pooled grouped convolution is pooled whole by the caller.
            return match pool {
                Some(_) => Ok(None),
                // One input channel per group: a depthwise convolution (Keras 3's
                // `DepthwiseConv2D` as a grouped `Conv2D`, ConvNeXt's 7×7 layers).
                None if fc == 1 => self.run_as_depthwise(ctx, inputs, epilogue).map(Some),
                None => self.run_grouped(ctx, inputs, epilogue).map(Some),
            };
        }
        let [ah, aw] = self.window.axes(h, w, kh, kw)?;
        let rows = n * ah.output * aw.output;
        let k = kh * kw * c;
        let (x, f) = (inputs[0].as_slice::<T>()?, inputs[1].as_slice::<T>()?);
        let winograd = (kh == 3
            && kw == 3
            && [ah.stride, aw.stride, ah.dilation, aw.dilation] == [1; 4]
            && c.min(oc) >= WINOGRAD_MIN_CHANNELS
            && n * ah.output.div_ceil(2) * aw.output.div_ceil(2) >= WINOGRAD_MIN_TILES)
            .then(|| winograd::Plan {
                n,
                h,
                w,
                c,
                k: oc,
                axes: [ah, aw],
                m: winograd_tile(n, [ah.output, aw.output], c.min(oc)),
            });
        let direct = (c <= DIRECT_MAX_CHANNELS && k <= DIRECT_MAX_K) || implicit_applies::<T>(c, k, oc);
        if let Some([ph, pw]) = pool {
            // Blocks of whole pooled rows: the window divides the output's sides (and
            // Winograd's tiles), and neither side is empty.
            let divides = ph > 0
                && pw > 0
                && ah.output.is_multiple_of(ph)
                && aw.output.is_multiple_of(pw)
                && rows > 0
                && oc > 0
                && match &winograd {
                    Some(p) => ah.output.is_multiple_of(p.m) && p.m.is_multiple_of(ph),
                    None => direct,
                };
            if !divides {
                return Ok(None);
            }
            let mut out = Tensor::for_overwrite(T::DTYPE, &[n, ah.output / ph, aw.output / pw, oc])?;
            let o = out.as_mut_slice::<T>()?;
            let done = match &winograd {
                Some(plan) => self.run_winograd(ctx, plan, x, &inputs[1], (o, pool), epilogue)?,
                None => {
                    self.run_direct(ctx, (x, [n, h, w, c], [ah, aw]), (f, kh, kw, oc), o, epilogue, pool);
                    true
                }
            };
            return Ok(done.then_some(out));
        }
        // Every element is written (by the GEMM, Winograd's output transform).
        let mut out = Tensor::for_overwrite(T::DTYPE, &[n, ah.output, aw.output, oc])?;
        let o = out.as_mut_slice::<T>()?;
        if rows == 0 || oc == 0 {
            return Ok(Some(out));
        }
        if let Some(plan) = winograd {
            self.run_winograd(ctx, &plan, x, &inputs[1], (o, None), epilogue)?;
            return Ok(Some(out));
        }
        if direct {
            self.run_direct(ctx, (x, [n, h, w, c], [ah, aw]), (f, kh, kw, oc), o, epilogue, None);
            return Ok(Some(out));
        }
        self.run_gemm(ctx, (x, [n, h, w, c], [ah, aw]), (&inputs[1], kh, kw, oc), o, epilogue, None)?;
        Ok(Some(out))
    }

    /// Whether the convolution runs as a pointwise GEMM (1×1 window, stride 1, no padding,
    /// ungrouped, too many channels for the direct convolution): the convolutions that take a
    /// prologue ([`Conv2D::run_with_prologue`]).
    fn pointwise_gemm(&self, inputs: &Inputs) -> KResult<bool> {
        let [_, h, w, c] = nhwc(&inputs[0], "input")?;
        let [kh, kw, fc, oc] = nhwc(&inputs[1], "filter")?;
        if fc != c || kh != 1 || kw != 1 {
            return Ok(false);
        }
        let [ah, aw] = self.window.axes(h, w, kh, kw)?;
        let pointwise =
            [ah.stride, aw.stride, ah.pad_before, aw.pad_before] == [1, 1, 0, 0] && ah.output == h && aw.output == w;
        let direct = c <= DIRECT_MAX_CHANNELS || implicit_applies::<T>(c, c, oc); // k = c: within DIRECT_MAX_K
        Ok(pointwise && !direct)
    }

    /// The convolution with `prologue` run on each block of input rows before the GEMM reads
    /// it (and `epilogue` on each block of output rows); only where
    /// [`Conv2D::pointwise_gemm`] holds.
    fn run_with_prologue(
        &self,
        ctx: &KernelContext,
        inputs: &Inputs,
        epilogue: Option<BlockFn<T>>,
        prologue: BlockFn<T>,
    ) -> KResult<Tensor> {
        if !self.pointwise_gemm(inputs)? {
            return Err(invalid("a convolution prologue needs a pointwise (1x1, stride 1, unpadded) convolution"));
        }
        let [n, h, w, c] = nhwc(&inputs[0], "input")?;
        let oc = nhwc(&inputs[1], "filter")?[3];
        let axes = self.window.axes(h, w, 1, 1)?;
        // Every element is written by the GEMM.
        let mut out = Tensor::for_overwrite(T::DTYPE, &[n, h, w, oc])?;
        if n * h * w == 0 || oc == 0 {
            return Ok(out);
        }
        let (x, o) = (inputs[0].as_slice::<T>()?, out.as_mut_slice::<T>()?);
        self.run_gemm(ctx, (x, [n, h, w, c], axes), (&inputs[1], 1, 1, oc), o, epilogue, Some(prologue))?;
        Ok(out)
    }
}

impl<T: GemmElement + Float> Conv2D<T> {
    /// A grouped convolution with one input channel per group, as the depthwise kernel: its
    /// `[kh, kw, 1, c·m]` filter is, element for element, the depthwise `[kh, kw, c, m]` one
    /// (output channel `i·m + j` is group `i`'s `j`-th). The epilogue runs on each output row
    /// in cache (one filter per channel) or on the whole output.
    fn run_as_depthwise(&self, ctx: &KernelContext, inputs: &Inputs, epilogue: Option<BlockFn<T>>) -> KResult<Tensor> {
        let [kh, kw, _, oc] = nhwc(&inputs[1], "filter")?;
        let c = nhwc(&inputs[0], "input")?[3];
        let mut dw: Inputs = vec![inputs[0].clone(), inputs[1].reshaped(&[kh, kw, c, oc / c])?];
        let depthwise::Geometry { input: [n, h, w, _], multiplier: m, axes: [ah, aw], .. } =
            self.window.depthwise(&dw)?;
        if m == 1 {
            // `depthwise_m1` writes every element.
            let mut out = Tensor::for_overwrite(T::DTYPE, &[n, ah.output, aw.output, oc])?;
            let (x, f) = (dw[0].as_slice::<T>()?, dw[1].as_slice::<T>()?);
            depthwise::depthwise_m1(ctx, (x, f), [n, h, w, c], [kh, kw], [ah, aw], out.as_mut_slice::<T>()?, epilogue);
            return Ok(out);
        }
        let general = depthwise::Depthwise::<T> { window: self.window.clone(), _t: Default::default() };
        let mut outs = Outputs::with_capacity(1);
        general.compute(ctx, &mut dw, &mut outs)?;
        let mut out = outs.pop().ok_or_else(|| invalid("the depthwise convolution gave no output"))?;
        if let Some(e) = epilogue {
            let mut scratch = Vec::new();
            e(0, out.as_mut_slice::<T>()?, &mut scratch);
        }
        Ok(out)
    }

    /// A grouped convolution (TensorFlow's `Conv2D` whose input depth is a multiple `g` of the
    /// filter's): each group of input channels convolved by its slice of the filter's output
    /// channels, as an ungrouped convolution of its own, written to its slice of the output;
    /// then the epilogue on the whole output.
    fn run_grouped(&self, ctx: &KernelContext, inputs: &Inputs, epilogue: Option<BlockFn<T>>) -> KResult<Tensor> {
        let [n, h, w, c] = nhwc(&inputs[0], "input")?;
        let [kh, kw, fc, oc] = nhwc(&inputs[1], "filter")?;
        let groups = c / fc;
        let og = oc / groups;
        let (x, f) = (inputs[0].as_slice::<T>()?, inputs[1].as_slice::<T>()?);
        let mut out: Option<Tensor> = None;
        for g in 0..groups {
            let xg: Vec<T> = x.chunks(c).flat_map(|px| &px[g * fc..(g + 1) * fc]).copied().collect();
            let fg: Vec<T> = f.chunks(oc).flat_map(|row| &row[g * og..(g + 1) * og]).copied().collect();
            let group = vec![Tensor::from_vec(&[n, h, w, fc], xg)?, Tensor::from_vec(&[kh, kw, fc, og], fg)?];
            let conv = Conv2D::<T> {
                window: self.window.clone(),
                winograd_filter: Default::default(),
                packed_filter: Default::default(),
            };
            let y = conv.run(ctx, &group, None)?;
            let all = match &mut out {
                Some(o) => o,
                None => out.insert(Tensor::zeros(T::DTYPE, &[y.dims()[0], y.dims()[1], y.dims()[2], oc])?),
            };
            let dst = all.as_mut_slice::<T>()?;
            for (d, s) in dst.chunks_mut(oc).zip(y.as_slice::<T>()?.chunks(og.max(1))) {
                d[g * og..(g + 1) * og].copy_from_slice(s);
            }
        }
        let mut out = out.ok_or_else(|| invalid("a grouped convolution needs at least one group"))?;
        if let Some(e) = epilogue {
            let o = out.as_mut_slice::<T>()?;
            let mut scratch = Vec::new();
            e(0, o, &mut scratch);
        }
        Ok(out)
    }
}

impl<T: GemmElement + Float> OpKernel for Conv2D<T> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.push(self.run(ctx, inputs, None)?);
        Ok(())
    }
}

fn k_conv2d(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64],
        |T| Ok(Box::new(Conv2D::<T>::new(d)?) as Box<dyn OpKernel>))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    const F: &[DType] = &[DType::Float, DType::Double];
    r.register("Conv2D", "T", F, k_conv2d);
    depthwise::register(r);
    pool::register(r);
    backprop::register(r);
    batch_norm::register(r);
    conv3d::register(r);
    fused::register(r);
}
