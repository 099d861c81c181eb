//! Files and image codecs: `ReadFile`, `WriteFile`, `DecodeJpeg`, `DecodePng`, `DecodeImage`,
//! `EncodeJpeg`, `EncodePng`, `ExtractJpegShape` (pixels identical to TensorFlow's, see
//! `ferroflow-codec`). Every image size is checked against the memory limit from the file's
//! header before anything image-sized is allocated.
use std::path::Path;

use ferroflow_codec::jpeg::{self, DctMethod, DecodeOptions, DensityUnit, EncodeOptions, JpegFormat};
use ferroflow_codec::png::{self, PngDecodeOptions, PngDtype, PngPixels};
use ferroflow_codec::{CodecError, Format};
use ferroflow_tensor::{DType, Tensor};

use crate::step::Interrupt;
use crate::{invalid, Inputs, KResult, KernelContext, KernelError, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// The bytes of a scalar string input.
fn scalar_bytes<'a>(t: &'a Tensor, what: &str) -> KResult<&'a [u8]> {
    let s = t.as_strings()?;
    if t.rank() != 0 || s.len() != 1 {
        return Err(invalid(format!("{what} must be a scalar string, got shape {:?}", t.dims())));
    }
    Ok(&s[0])
}

fn path_of(t: &Tensor) -> KResult<String> {
    let b = scalar_bytes(t, "filename")?;
    String::from_utf8(b.to_vec()).map_err(|_| invalid("filename is not UTF-8"))
}

fn string_scalar(bytes: Vec<u8>) -> KResult<Tensor> {
    Ok(Tensor::from_strings(&[], vec![bytes])?)
}

struct ReadFile;
impl OpKernel for ReadFile {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let path = path_of(&inputs[0])?;
        outputs.push(string_scalar(read_file(Path::new(&path))?)?);
        Ok(())
    }
}

/// A whole file, its size checked against the memory limit first.
pub fn read_file(path: &Path) -> KResult<Vec<u8>> {
    use std::io::Read;
    let shown = path.display();
    let mut f = std::fs::File::open(path).map_err(|e| invalid(format!("{shown}: {e}")))?;
    let len = f.metadata().map_err(|e| invalid(format!("{shown}: {e}")))?.len();
    if f.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(invalid(format!("{shown}: is a directory")));
    }
    ferroflow_tensor::limit::check(len as usize, || format!("contents of {shown}"))?;
    let mut out = Vec::with_capacity(len as usize);
    f.by_ref().take(len).read_to_end(&mut out).map_err(|e| invalid(format!("{shown}: {e}")))?;
    Ok(out)
}

struct WriteFile;
impl OpKernel for WriteFile {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, _: &mut Outputs) -> KResult<()> {
        let path = path_of(&inputs[0])?;
        let contents = scalar_bytes(&inputs[1], "contents")?;
        let path = Path::new(&path);
        // As TensorFlow: the directory is created when missing.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| invalid(format!("{}: {e}", dir.display())))?;
        }
        ferroflow_tensor::fs::write_atomic(path, contents)?;
        Ok(())
    }
}

/// `DecodeJpeg`'s attrs.
fn jpeg_options(d: &NodeDesc) -> KResult<DecodeOptions> {
    let channels = d.int("channels")?;
    let ratio = d.int("ratio")?;
    Ok(DecodeOptions::default()
        .with_channels(
            u8::try_from(channels).map_err(|_| invalid(format!("channels must be 0, 1 or 3, got {channels}")))?,
        )
        .with_ratio(u8::try_from(ratio).map_err(|_| invalid(format!("ratio must be 1, 2, 4 or 8, got {ratio}")))?)
        .with_fancy_upscaling(d.bool("fancy_upscaling")?)
        .with_try_recover_truncated(d.bool("try_recover_truncated")?)
        .with_acceptable_fraction(d.float("acceptable_fraction")?)
        .with_dct_method(DctMethod::from_tf(&d.string("dct_method")?)?))
}

/// Decodes a JPEG into a `uint8` `[height, width, channels]` tensor under the memory limit.
pub fn decode_jpeg(bytes: &[u8], opts: &DecodeOptions) -> KResult<Tensor> {
    let opts = opts.clone().with_max_bytes(ferroflow_tensor::limit::current());
    let make = |shape: [usize; 3]| Tensor::zeros(DType::UInt8, &shape).map(PixelTensor).map_err(CodecError::buffer);
    let (PixelTensor(t), _) = jpeg::decode_jpeg_into(bytes, &opts, make)?;
    Ok(t)
}

/// A fresh uint8 tensor the JPEG decoder writes its pixels into (no copy afterwards).
struct PixelTensor(Tensor);
impl jpeg::PixelBuffer for PixelTensor {
    fn pixels(&mut self) -> &mut [u8] {
        // A fresh tensor is its buffer's only owner, so this never copies; a dtype mismatch
        // cannot happen (made as uint8), and an empty slice would be refused by the decoder.
        self.0.as_mut_slice::<u8>().unwrap_or_default()
    }
}

/// The decoder's [`jpeg::Stop`] for a running step: its cancellation and deadline, asked
/// row by row, so a file that decodes for seconds stops within milliseconds.
fn stop_for(ctx: &KernelContext) -> Option<jpeg::Stop> {
    let step = ctx.step.filter(|s| s.is_bounded())?.clone();
    Some(jpeg::Stop(std::sync::Arc::new(move || step.check().is_err())))
}

/// A decode stopped by its step becomes the step's own interruption (cancelled, or which
/// deadline); other errors stay the codec's.
fn interrupted(ctx: &KernelContext, e: KernelError) -> KernelError {
    match e {
        KernelError::Codec(CodecError::Stopped) => {
            KernelError::Interrupted(ctx.step.and_then(|s| s.check().err()).unwrap_or(Interrupt::Cancelled))
        }
        e => e,
    }
}

/// `DecodeJpeg` as TensorFlow 2.21's kernel runs it: the format is decided by the bytes'
/// signature, so a PNG given to `DecodeJpeg` decodes (to uint8) as it does there.
struct DecodeJpeg(DecodeOptions);
impl OpKernel for DecodeJpeg {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let bytes = scalar_bytes(&inputs[0], "contents")?;
        let t = match ferroflow_codec::sniff(bytes) {
            Some(Format::Png) => {
                decode_png(bytes, self.0.channels, DType::UInt8, stop_for(ctx)).map_err(|e| interrupted(ctx, e))?
            }
            _ => {
                let opts = self.0.clone().with_stop(stop_for(ctx));
                decode_jpeg(bytes, &opts).map_err(|e| interrupted(ctx, e))?
            }
        };
        outputs.push(t);
        Ok(())
    }
}

/// Decodes a PNG into a `dtype` (uint8 or uint16) `[height, width, channels]` tensor,
/// asking `stop` before each row.
pub fn decode_png(bytes: &[u8], channels: u8, dtype: DType, stop: Option<jpeg::Stop>) -> KResult<Tensor> {
    let opts = PngDecodeOptions::default()
        .with_channels(channels)
        .with_dtype(if dtype == DType::UInt16 { PngDtype::U16 } else { PngDtype::U8 })
        .with_max_bytes(ferroflow_tensor::limit::current())
        .with_stop(stop);
    let (pixels, shape) = png::decode_png(bytes, &opts)?;
    Ok(match pixels {
        PngPixels::U8(v) => Tensor::from_vec(&shape, v)?,
        PngPixels::U16(v) => Tensor::from_vec(&shape, v)?,
    })
}

fn channels_attr(d: &NodeDesc, allowed: &[i64]) -> KResult<u8> {
    let c = d.int("channels")?;
    if !allowed.contains(&c) {
        return Err(invalid(format!("channels must be one of {allowed:?}, got {c}")));
    }
    Ok(c as u8)
}

struct DecodePng(u8, DType);
impl OpKernel for DecodePng {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let bytes = scalar_bytes(&inputs[0], "contents")?;
        outputs.push(decode_png(bytes, self.0, self.1, stop_for(ctx)).map_err(|e| interrupted(ctx, e))?);
        Ok(())
    }
}

/// `tf.io.decode_image`: JPEG or PNG by signature, then converted to `dtype` as
/// `convert_image_dtype` does (uint8 → uint16 ×257, → float32 scaled to [0, 1]); `stop` is
/// asked as the decode goes.
pub fn decode_image(bytes: &[u8], channels: u8, dtype: DType, stop: Option<jpeg::Stop>) -> KResult<Tensor> {
    let decoded = match ferroflow_codec::sniff(bytes) {
        Some(Format::Jpeg) => {
            if channels == 4 {
                return Err(invalid("channels=4 is not supported for JPEG images"));
            }
            decode_jpeg(bytes, &DecodeOptions::default().with_channels(channels).with_stop(stop))?
        }
        Some(Format::Png) => {
            decode_png(bytes, channels, if dtype == DType::UInt8 { DType::UInt8 } else { DType::UInt16 }, stop)?
        }
        Some(f) => return Err(invalid(format!("{f:?} images are not supported yet (JPEG and PNG are)"))),
        None => {
            let head: Vec<String> = bytes.iter().take(4).map(|b| format!("{b:02x}")).collect();
            return Err(invalid(format!(
                "unknown image file format: starts with {}; one of JPEG, PNG, GIF, BMP is required",
                head.join(" ")
            )));
        }
    };
    convert_image_dtype(&decoded, dtype)
}

/// `tf.image.convert_image_dtype` between the integer image types and float32.
fn convert_image_dtype(t: &Tensor, to: DType) -> KResult<Tensor> {
    if t.dtype() == to {
        return Ok(t.clone());
    }
    match (t.dtype(), to) {
        (DType::UInt8, DType::UInt16) => {
            Ok(Tensor::from_vec(t.dims(), t.as_slice::<u8>()?.iter().map(|&v| v as u16 * 257).collect())?)
        }
        (DType::UInt8, DType::Float) => {
            let scale = 1.0f32 / 255.0;
            Ok(Tensor::from_vec(t.dims(), t.as_slice::<u8>()?.iter().map(|&v| v as f32 * scale).collect())?)
        }
        (DType::UInt16, DType::Float) => {
            let scale = 1.0f32 / 65535.0;
            Ok(Tensor::from_vec(t.dims(), t.as_slice::<u16>()?.iter().map(|&v| v as f32 * scale).collect())?)
        }
        (from, to) => Err(invalid(format!("cannot convert a {from} image to {to}"))),
    }
}

struct DecodeImage(u8, DType);
impl OpKernel for DecodeImage {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let bytes = scalar_bytes(&inputs[0], "contents")?;
        outputs.push(decode_image(bytes, self.0, self.1, stop_for(ctx)).map_err(|e| interrupted(ctx, e))?);
        Ok(())
    }
}

struct ExtractJpegShape(DType);
impl OpKernel for ExtractJpegShape {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let s = jpeg::jpeg_shape(scalar_bytes(&inputs[0], "contents")?)?;
        outputs.push(match self.0 {
            DType::Int64 => Tensor::from_vec(&[3], s.iter().map(|&v| v as i64).collect())?,
            _ => Tensor::from_vec(&[3], s.iter().map(|&v| v as i32).collect())?,
        });
        Ok(())
    }
}

/// The `[height, width, channels]` of an image input.
fn hwc(t: &Tensor) -> KResult<(usize, usize, usize)> {
    match *t.dims() {
        [h, w, c] => Ok((h, w, c)),
        ref d => Err(invalid(format!("image must be 3-dimensional [height, width, channels], got shape {d:?}"))),
    }
}

struct EncodeJpeg(EncodeOptions);
impl OpKernel for EncodeJpeg {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (h, w, c) = hwc(&inputs[0])?;
        let bytes = jpeg::encode_jpeg(inputs[0].as_slice::<u8>()?, h, w, c, &self.0)?;
        outputs.push(string_scalar(bytes)?);
        Ok(())
    }
}

fn k_encode_jpeg(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let quality = d.int("quality")?;
    let density = |name: &str| -> KResult<u16> {
        let v = d.int(name)?;
        u16::try_from(v).map_err(|_| invalid(format!("{name} must be in 0..=65535, got {v}")))
    };
    Ok(Box::new(EncodeJpeg(
        EncodeOptions::default()
            .with_format(match d.string("format")?.as_str() {
                "" => JpegFormat::Auto,
                "grayscale" => JpegFormat::Grayscale,
                "rgb" => JpegFormat::Rgb,
                f => return Err(invalid(format!("format must be '', 'grayscale' or 'rgb', got '{f}'"))),
            })
            .with_quality(
                u8::try_from(quality)
                    .ok()
                    .filter(|q| *q <= 100)
                    .ok_or_else(|| invalid(format!("quality must be in [0, 100], got {quality}")))?,
            )
            .with_progressive(d.bool("progressive")?)
            .with_optimize_size(d.bool("optimize_size")?)
            .with_chroma_downsampling(d.bool("chroma_downsampling")?)
            .with_density_unit(match d.string("density_unit")?.as_str() {
                "cm" => DensityUnit::Centimeter,
                _ => DensityUnit::Inch,
            })
            .with_x_density(density("x_density")?)
            .with_y_density(density("y_density")?)
            .with_xmp_metadata(d.string("xmp_metadata")?.into_bytes()),
    )))
}

struct EncodePng(i32);
impl OpKernel for EncodePng {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (h, w, c) = hwc(&inputs[0])?;
        let pixels = match inputs[0].dtype() {
            DType::UInt16 => PngPixels::U16(inputs[0].as_slice::<u16>()?.to_vec()),
            _ => PngPixels::U8(inputs[0].as_slice::<u8>()?.to_vec()),
        };
        outputs.push(string_scalar(png::encode_png(&pixels, h, w, c, self.0)?)?);
        Ok(())
    }
}

pub(super) fn register(r: &mut KernelRegistry) {
    r.register("ReadFile", "", &[], |_| Ok(Box::new(ReadFile)));
    r.register("WriteFile", "", &[], |_| Ok(Box::new(WriteFile)));
    r.register("DecodeJpeg", "", &[], |d| Ok(Box::new(DecodeJpeg(jpeg_options(d)?))));
    r.register("DecodePng", "dtype", &[DType::UInt8, DType::UInt16], |d| {
        Ok(Box::new(DecodePng(channels_attr(d, &[0, 1, 3, 4])?, d.dtype("dtype")?)))
    });
    r.register("DecodeImage", "dtype", &[DType::UInt8, DType::UInt16, DType::Float], |d| {
        Ok(Box::new(DecodeImage(channels_attr(d, &[0, 1, 3, 4])?, d.dtype("dtype")?)))
    });
    r.register("ExtractJpegShape", "output_type", &[DType::Int32, DType::Int64], |d| {
        Ok(Box::new(ExtractJpegShape(d.dtype("output_type")?)))
    });
    r.register("EncodeJpeg", "", &[], k_encode_jpeg);
    r.register("EncodePng", "T", &[DType::UInt8, DType::UInt16], |d| {
        let c = d.int("compression")?;
        if !(-1..=9).contains(&c) {
            return Err(invalid(format!("compression must be in [-1, 9], got {c}")));
        }
        Ok(Box::new(EncodePng(c as i32)))
    });
}
