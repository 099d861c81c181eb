//! PNG decoding and encoding with TensorFlow 2.21's pixels: `tf.io.decode_png` / `encode_png`.
//!
//! The `png` crate (pure Rust) delivers the raw samples; the channel and depth conversions are then done here the
//! way TF's `tensorflow/core/lib/png/png_io.cc` asks libpng to do them, in libpng's order: palette / tRNS
//! expansion, alpha strip, RGB -> gray (libpng's fixed-point 0.299/0.587 weights), gray -> RGB, 16 -> 8 bit by
//! dropping the low byte, alpha filler, and 8 -> 16 bit by `v * 257`.
//!
//! Not reproduced: for a colour file with a gAMA (and presumably sRGB) chunk decoded to gray (`channels` 1),
//! libpng converts through linear light with its gamma tables; here the weights apply to the stored values, so
//! such pixels differ from TF's (measured: up to 52 of 255, on 98% of pixels). All other paths are exact.

use crate::CodecError;
use std::io::Cursor;

const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Output sample type (`dtype` of `tf.io.decode_png`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PngDtype {
    /// `uint8` samples.
    #[default]
    U8,
    /// `uint16` samples.
    U16,
}

/// `tf.io.decode_png` attributes, plus a memory bound.
///
/// `#[non_exhaustive]`: other crates build a `PngDecodeOptions` from `PngDecodeOptions::default()` and its
/// `with_*` setters, so fields can be added without breaking them.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PngDecodeOptions {
    /// 0 (as stored; palette -> 3, or 4 with tRNS), 1 (gray), 3 (RGB) or 4 (RGBA).
    pub channels: u8,
    /// Sample type of the output.
    pub dtype: PngDtype,
    /// Largest decoded image (bytes) accepted, checked from the header before allocating.
    pub max_bytes: usize,
    /// Whether to stop early, asked before every row.
    pub stop: Option<crate::Stop>,
}

impl PngDecodeOptions {
    /// Sets [`PngDecodeOptions::channels`].
    pub fn with_channels(mut self, channels: u8) -> Self {
        self.channels = channels;
        self
    }

    /// Sets [`PngDecodeOptions::dtype`].
    pub fn with_dtype(mut self, dtype: PngDtype) -> Self {
        self.dtype = dtype;
        self
    }

    /// Sets [`PngDecodeOptions::max_bytes`].
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Sets [`PngDecodeOptions::stop`].
    pub fn with_stop(mut self, stop: Option<crate::Stop>) -> Self {
        self.stop = stop;
        self
    }
}

impl Default for PngDecodeOptions {
    fn default() -> Self {
        Self { channels: 0, dtype: PngDtype::U8, max_bytes: 1 << 30, stop: None }
    }
}

/// Decoded pixels, HWC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PngPixels {
    /// 8-bit samples.
    U8(Vec<u8>),
    /// 16-bit samples.
    U16(Vec<u16>),
}

/// Decodes a PNG like `tf.io.decode_png`; returns pixels and `[height, width, channels]`.
pub fn decode_png(bytes: &[u8], opts: &PngDecodeOptions) -> Result<(PngPixels, [usize; 3]), CodecError> {
    if !matches!(opts.channels, 0 | 1 | 3 | 4) {
        return Err(CodecError::Argument(format!("PNG channels must be 0, 1, 3 or 4, got {}", opts.channels)));
    }
    if !bytes.starts_with(PNG_MAGIC) {
        let head: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
        return Err(CodecError::NotFormat(format!("not a PNG file: starts with {}", head.join(" "))));
    }
    let limits = png::Limits { bytes: opts.max_bytes.max(64 << 20) };
    let decoder = png::Decoder::new_with_limits(Cursor::new(bytes), limits);
    let mut reader = decoder.read_info().map_err(png_error)?;
    let info = reader.info();
    let (w, h) = (info.width as usize, info.height as usize);
    // TF's limits (decode_image_op.cc).
    if w == 0 || h == 0 || w >= 1 << 27 || h >= 1 << 27 || (w as u64 * h as u64) >= 1 << 29 {
        return Err(CodecError::TooLarge(format!("PNG size too large for int: {w} by {h}")));
    }
    let src = Source::new(info)?;
    let out16 = opts.dtype == PngDtype::U16;
    let channels = match opts.channels {
        0 if src.color == png::ColorType::Indexed => 3 + src.trns.is_some() as usize,
        0 => src.color.samples(),
        c => c as usize,
    };
    let out_bytes = h * w * channels * if out16 { 2 } else { 1 };
    let raw_len =
        reader.output_buffer_size().ok_or_else(|| CodecError::TooLarge("PNG too large for this machine".into()))?;
    if out_bytes > opts.max_bytes || raw_len > opts.max_bytes {
        return Err(CodecError::TooLarge(format!(
            "PNG too large: {h}x{w}x{channels} needs {} bytes, limit {}",
            out_bytes.max(raw_len),
            opts.max_bytes
        )));
    }
    let mut raw = vec![0u8; raw_len];
    // Row by row (as `next_frame` does it), asking `stop` before each.
    let (color, depth) = reader.output_color_type();
    let stride = raw_len / h;
    if reader.info().interlaced {
        let bits_per_pixel = color.samples() as u8 * depth as u8;
        loop {
            crate::Stop::check(&opts.stop)?;
            let Some(row) = reader.next_interlaced_row().map_err(png_error)? else { break };
            if let png::InterlaceInfo::Adam7(pass) = row.interlace() {
                png::expand_interlaced_row(&mut raw, stride, row.data(), pass, bits_per_pixel);
            }
        }
    } else {
        for row in raw.chunks_exact_mut(stride) {
            crate::Stop::check(&opts.stop)?;
            reader.read_row(row).map_err(png_error)?;
        }
    }
    reader.finish().map_err(png_error)?;

    let raw_row = raw_len / h;
    let conv = Conversion::new(&src, channels, out16);
    let mut px = [0u16; 4];
    let pixels = if out16 {
        let mut out = Vec::with_capacity(h * w * channels);
        for row in raw.chunks_exact(raw_row) {
            for x in 0..w {
                out.extend_from_slice(&conv.pixel(&src, row, x, &mut px)[..channels]);
            }
        }
        PngPixels::U16(out)
    } else {
        let mut out = Vec::with_capacity(h * w * channels);
        for row in raw.chunks_exact(raw_row) {
            for x in 0..w {
                out.extend(conv.pixel(&src, row, x, &mut px)[..channels].iter().map(|&v| v as u8));
            }
        }
        PngPixels::U8(out)
    };
    Ok((pixels, [h, w, channels]))
}

fn png_error(e: png::DecodingError) -> CodecError {
    match e {
        png::DecodingError::IoError(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            CodecError::Truncated("truncated PNG: data ends before the image is complete".into())
        }
        png::DecodingError::LimitsExceeded => {
            CodecError::TooLarge("PNG too large: decoder memory limit exceeded".into())
        }
        e => CodecError::Invalid(format!("invalid PNG: {e}")),
    }
}

/// What the file stores.
struct Source {
    color: png::ColorType,
    depth: u8,
    palette: Vec<[u8; 3]>,
    /// tRNS: per-index alpha (palette) or the transparent sample values (gray: 1, RGB: 3).
    trns: Option<Vec<u16>>,
}

impl Source {
    fn new(info: &png::Info) -> Result<Self, CodecError> {
        let color = info.color_type;
        let depth = info.bit_depth as u8;
        let palette: Vec<[u8; 3]> =
            info.palette.as_deref().unwrap_or(&[]).chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
        let trns: Option<Vec<u16>> = info.trns.as_deref().map(|t| match color {
            png::ColorType::Indexed => t.iter().map(|&a| a as u16).collect(),
            // Gray/RGB: the png crate keeps 16-bit values big-endian and, below 16 bits, only each value's low
            // byte; libpng compares only the sample's bits.
            _ if depth == 16 => t.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect(),
            _ => t.iter().map(|&v| v as u16 & ((1u16 << depth) - 1)).collect(),
        });
        // A tRNS too short for its colour type is ignored, as libpng does.
        let needed = match color {
            png::ColorType::Grayscale => 1,
            png::ColorType::Rgb => 3,
            _ => 0,
        };
        let trns = trns.filter(|t| t.len() >= needed);
        if color == png::ColorType::Indexed && palette.is_empty() {
            return Err(CodecError::Invalid("invalid PNG: palette image without PLTE".into()));
        }
        Ok(Source { color, depth, palette, trns })
    }

    /// Sample `i` of a raw row (packed for depths below 8, big-endian for 16).
    #[inline]
    fn sample(&self, row: &[u8], i: usize) -> u16 {
        match self.depth {
            8 => row[i] as u16,
            16 => u16::from_be_bytes([row[2 * i], row[2 * i + 1]]),
            d => {
                let bit = i * d as usize;
                let shift = 8 - d as usize - bit % 8;
                ((row[bit / 8] >> shift) as u16) & ((1 << d) - 1)
            }
        }
    }
}

/// TF's libpng settings for one file, resolved once.
struct Conversion {
    want_alpha: bool,
    want_gray: bool,
    /// Alpha from tRNS (libpng `png_set_tRNS_to_alpha`).
    trns_alpha: bool,
    /// Alpha value added when there is none (libpng `png_set_add_alpha`, after 16 -> 8 stripping).
    filler: u16,
    strip16: bool,
    widen16: bool,
}

impl Conversion {
    fn new(src: &Source, channels: usize, out16: bool) -> Self {
        let want_alpha = matches!(channels, 2 | 4);
        let has_alpha = matches!(src.color, png::ColorType::GrayscaleAlpha | png::ColorType::Rgba);
        // TF passes (1 << bit_depth) - 1; libpng keeps its low byte for 8-bit rows (so 1-bit gray gets alpha 1).
        let filler = ((1u32 << src.depth) - 1) as u16;
        let src16 = src.depth == 16;
        Conversion {
            want_alpha,
            want_gray: channels < 3,
            trns_alpha: want_alpha && !has_alpha && src.trns.is_some(),
            filler: if src16 && out16 { filler } else { filler & 0xFF },
            strip16: src16 && !out16,
            widen16: !src16 && out16,
        }
    }

    /// Converts pixel `x` of a raw row into `px` (gray[, alpha] or r, g, b[, alpha]), at the output depth.
    #[inline]
    fn pixel<'a>(&self, src: &Source, row: &[u8], x: usize, px: &'a mut [u16; 4]) -> &'a [u16; 4] {
        use png::ColorType::*;
        let max = if src.depth == 16 { 0xFFFF } else { 0xFF };
        // 1. Expand to 8/16-bit samples: palette lookup, low-bit gray scaled to 8 bits; alpha if any.
        let (mut rgb, is_gray, mut alpha) = match src.color {
            Indexed => {
                let i = src.sample(row, x) as usize;
                // libpng's palette is 256 entries, zero-filled past PLTE; tRNS alpha defaults to opaque.
                let c = src.palette.get(i).copied().unwrap_or([0; 3]);
                let a = src.trns.as_ref().map(|t| t.get(i).copied().unwrap_or(0xFF));
                ([c[0] as u16, c[1] as u16, c[2] as u16], false, a)
            }
            Grayscale => {
                let v = src.sample(row, x);
                let a = self.trns_alpha.then(|| if v == src.trns.as_ref().unwrap()[0] { 0 } else { max });
                let v = if src.depth < 8 { v * (0xFF / ((1 << src.depth) - 1)) } else { v };
                ([v, v, v], true, a)
            }
            GrayscaleAlpha => {
                let v = src.sample(row, 2 * x);
                ([v, v, v], true, Some(src.sample(row, 2 * x + 1)))
            }
            Rgb => {
                let c = [src.sample(row, 3 * x), src.sample(row, 3 * x + 1), src.sample(row, 3 * x + 2)];
                let a = self.trns_alpha.then(|| if c[..] == src.trns.as_ref().unwrap()[..3] { 0 } else { max });
                (c, false, a)
            }
            Rgba => {
                let c = [src.sample(row, 4 * x), src.sample(row, 4 * x + 1), src.sample(row, 4 * x + 2)];
                (c, false, Some(src.sample(row, 4 * x + 3)))
            }
        };
        if !self.want_alpha {
            alpha = None;
        }
        // 2. RGB -> gray, libpng's png_do_rgb_to_gray without gamma: 8-bit truncates, 16-bit rounds.
        if self.want_gray && !is_gray {
            let [r, g, b] = rgb.map(|v| v as u32);
            let v = if r == g && r == b {
                r
            } else if src.depth == 16 {
                (RC * r + GC * g + BC * b + 16384) >> 15
            } else {
                (RC * r + GC * g + BC * b) >> 15
            };
            rgb = [v as u16; 3];
        }
        // 3. 16 -> 8 (high byte), filler, 8 -> 16 (v * 257).
        let adjust = |v: u16| {
            if self.strip16 {
                v >> 8
            } else if self.widen16 {
                v * 257
            } else {
                v
            }
        };
        let a = match alpha {
            Some(a) => adjust(a),
            None if self.widen16 => self.filler * 257,
            None => self.filler,
        };
        if self.want_gray {
            *px = [adjust(rgb[0]), a, 0, 0];
        } else {
            *px = [adjust(rgb[0]), adjust(rgb[1]), adjust(rgb[2]), a];
        }
        px
    }
}

/// libpng's fixed-point weights for png_set_rgb_to_gray(1, 0.299, 0.587): floor(x * 32768), blue the rest.
const RC: u32 = 9797;
const GC: u32 = 19234;
const BC: u32 = 32768 - RC - GC;

/// Encodes HWC pixels (`channels` 1..=4) like `tf.io.encode_png`; `compression` is -1 (zlib default) or 0..=9.
pub fn encode_png(
    pixels: &PngPixels,
    height: usize,
    width: usize,
    channels: usize,
    compression: i32,
) -> Result<Vec<u8>, CodecError> {
    let color = match channels {
        1 => png::ColorType::Grayscale,
        2 => png::ColorType::GrayscaleAlpha,
        3 => png::ColorType::Rgb,
        4 => png::ColorType::Rgba,
        _ => return Err(CodecError::Argument(format!("PNG channels must be 1..4, got {channels}"))),
    };
    if !(-1..=9).contains(&compression) {
        return Err(CodecError::Argument(format!("compression must be in [-1, 9], got {compression}")));
    }
    if height == 0 || width == 0 || height > u32::MAX as usize || width > u32::MAX as usize {
        return Err(CodecError::Argument(format!("invalid image size {width}x{height}")));
    }
    let n = height * width * channels;
    let (data, depth) = match pixels {
        PngPixels::U8(p) if p.len() == n => (std::borrow::Cow::Borrowed(&p[..]), png::BitDepth::Eight),
        PngPixels::U16(p) if p.len() == n => {
            (std::borrow::Cow::Owned(p.iter().flat_map(|v| v.to_be_bytes()).collect()), png::BitDepth::Sixteen)
        }
        _ => {
            return Err(CodecError::Argument(format!("pixel buffer does not hold {height}x{width}x{channels} samples")))
        }
    };
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, width as u32, height as u32);
    enc.set_color(color);
    enc.set_depth(depth);
    enc.set_deflate_compression(match compression {
        0 => png::DeflateCompression::NoCompression,
        -1 => png::DeflateCompression::Level(6),
        l => png::DeflateCompression::Level(l as u8),
    });
    if compression != 0 {
        enc.set_filter(png::Filter::Adaptive);
    }
    let failed = |e: png::EncodingError| CodecError::Encode(format!("PNG encoding failed: {e}"));
    let mut writer = enc.write_header().map_err(failed)?;
    writer.write_image_data(&data).map_err(failed)?;
    writer.finish().map_err(failed)?;
    Ok(out)
}
