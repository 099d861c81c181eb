//! JPEG decoding and encoding with TensorFlow 2.21's pixels: `tf.io.decode_jpeg`, `extract_jpeg_shape` and
//! `encode_jpeg`.
//!
//! The codec is libjpeg as built by `mozjpeg-sys` (libjpeg-turbo's C sources plus mozjpeg's encoder, compiled
//! with `cc`, always without its nasm SIMD). The portable C alone does not give TF's pixels everywhere: TF's
//! libjpeg-turbo runs its x86-64 SIMD kernels, and its default IFAST IDCT (SSE2) computes in 16-bit lanes that
//! wrap where the C computes in 32 bits, so files whose IDCT overflows 16 bits (quality-100 sharp edges, large
//! DQT entries) decode differently (by up to 255). On x86-64 this crate therefore supplies libjpeg-turbo's
//! `jsimd_*` entry points itself (`crate::jsimd`): ports of the SSE2 IDCTs that wrap as TF's do, and AVX2 colour
//! conversion and fancy upsampling with libjpeg-turbo's integer formulas; TF's pixels on every parity fixture,
//! at about SIMD speed. On other architectures the portable C runs (TF's pixels except where the IFAST IDCT
//! overflows). The decode path follows TF's `tensorflow/core/lib/jpeg/jpeg_mem.cc` and `jpeg_handle.cc` step
//! by step: the same memory source (including its fake-EOI recovery for truncated files), the same colour
//! space choices, TF's own CMYK -> RGB formula, the same size limit and the same partial-read rules.
//!
//! Errors: libjpeg reports a fatal error by calling `error_exit`, which must not return. TF longjmps out; here
//! `error_exit` unwinds with `resume_unwind` (which skips the panic hook) through the C frames, which
//! mozjpeg-sys compiles with `-fexceptions` and declares `"C-unwind"`, up to a `catch_unwind` at this module's
//! boundary, where it becomes an `Err`. This needs `panic = "unwind"` (the default); under `panic = "abort"`
//! every malformed JPEG would abort the process.

#[cfg(feature = "jpeg")]
use mozjpeg_sys as ffi;
#[cfg(feature = "jpeg")]
use std::ffi::{c_int, c_long, c_uint, CStr};
#[cfg(feature = "jpeg")]
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use crate::CodecError;

/// TF rejects images whose `height * width * jpeg_components` reaches 2^29 (`jpeg_mem.cc`).
#[cfg(feature = "jpeg")]
const TF_MAX_ELEMENTS: u64 = 1 << 29;
const JPEG_MAGIC: &[u8] = b"\xff\xd8\xff";
#[cfg(feature = "jpeg")]
const APP14: c_int = 0xEE;

/// IDCT used by the decoder; TF's `dct_method` attribute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DctMethod {
    /// `""` or `"INTEGER_FAST"`: libjpeg's JDCT_IFAST, TF's default.
    #[default]
    IntegerFast,
    /// `"INTEGER_ACCURATE"`: JDCT_ISLOW.
    IntegerAccurate,
}

impl DctMethod {
    /// Parses TF's attribute value.
    pub fn from_tf(name: &str) -> Result<Self, CodecError> {
        match name {
            "" | "INTEGER_FAST" => Ok(Self::IntegerFast),
            "INTEGER_ACCURATE" => Ok(Self::IntegerAccurate),
            _ => Err(CodecError::Argument(format!(
                "dct_method must be one of {{'', 'INTEGER_FAST', 'INTEGER_ACCURATE'}}, got '{name}'"
            ))),
        }
    }
}

/// The most scans a progressive JPEG may have unless the caller says otherwise
/// ([`set_default_max_scans`]). Real files have about ten (one per coefficient band and
/// refinement); thousands of tiny scans only make a small file decode for seconds, so
/// libjpeg-turbo's own tools take a scan limit for the same reason.
pub const DEFAULT_MAX_SCANS: u32 = 1000;

static MAX_SCANS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(DEFAULT_MAX_SCANS);

/// Sets the scan limit of every later decode that takes the default options (0: no limit).
pub fn set_default_max_scans(scans: u32) {
    MAX_SCANS.store(scans, std::sync::atomic::Ordering::Relaxed);
}

/// The scan limit of [`DecodeOptions::default`].
pub fn default_max_scans() -> u32 {
    MAX_SCANS.load(std::sync::atomic::Ordering::Relaxed)
}

pub use crate::Stop;

/// `tf.io.decode_jpeg` attributes, plus a memory bound.
///
/// `#[non_exhaustive]`: other crates build a `DecodeOptions` from `DecodeOptions::default()` and its
/// `with_*` setters, so fields can be added without breaking them.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DecodeOptions {
    /// 0 (as stored: 1 for gray, 3 otherwise, CMYK converted to RGB), 1 (gray) or 3 (RGB).
    pub channels: u8,
    /// DCT-domain downscale: 1, 2, 4 or 8.
    pub ratio: u8,
    /// Smooth (triangle) chroma upsampling; `false` uses libjpeg's merged/box upsampling.
    pub fancy_upscaling: bool,
    /// Decode truncated files, repeating the last row read into the missing ones.
    pub try_recover_truncated: bool,
    /// Smallest fraction of rows that must be read for a damaged file to be accepted.
    pub acceptable_fraction: f32,
    /// The IDCT (`dct_method`: `""`/`INTEGER_FAST` or `INTEGER_ACCURATE`).
    pub dct_method: DctMethod,
    /// Largest decoded image (bytes) accepted; checked from the header, before anything is allocated.
    pub max_bytes: usize,
    /// Most scans of a progressive file (0: no limit); more is an error naming the count.
    pub max_scans: u32,
    /// Whether to stop early, asked as the decode goes.
    pub stop: Option<Stop>,
}

impl DecodeOptions {
    /// Sets [`DecodeOptions::channels`].
    pub fn with_channels(mut self, channels: u8) -> Self {
        self.channels = channels;
        self
    }

    /// Sets [`DecodeOptions::ratio`].
    pub fn with_ratio(mut self, ratio: u8) -> Self {
        self.ratio = ratio;
        self
    }

    /// Sets [`DecodeOptions::fancy_upscaling`].
    pub fn with_fancy_upscaling(mut self, fancy_upscaling: bool) -> Self {
        self.fancy_upscaling = fancy_upscaling;
        self
    }

    /// Sets [`DecodeOptions::try_recover_truncated`].
    pub fn with_try_recover_truncated(mut self, try_recover_truncated: bool) -> Self {
        self.try_recover_truncated = try_recover_truncated;
        self
    }

    /// Sets [`DecodeOptions::acceptable_fraction`].
    pub fn with_acceptable_fraction(mut self, acceptable_fraction: f32) -> Self {
        self.acceptable_fraction = acceptable_fraction;
        self
    }

    /// Sets [`DecodeOptions::dct_method`].
    pub fn with_dct_method(mut self, dct_method: DctMethod) -> Self {
        self.dct_method = dct_method;
        self
    }

    /// Sets [`DecodeOptions::max_bytes`].
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Sets [`DecodeOptions::max_scans`].
    pub fn with_max_scans(mut self, max_scans: u32) -> Self {
        self.max_scans = max_scans;
        self
    }

    /// Sets [`DecodeOptions::stop`].
    pub fn with_stop(mut self, stop: Option<Stop>) -> Self {
        self.stop = stop;
        self
    }
}

impl Default for DecodeOptions {
    fn default() -> Self {
        Self {
            channels: 0,
            ratio: 1,
            fancy_upscaling: true,
            try_recover_truncated: false,
            acceptable_fraction: 1.0,
            dct_method: DctMethod::IntegerFast,
            max_bytes: 1 << 29,
            max_scans: default_max_scans(),
            stop: None,
        }
    }
}

/// Where [`decode_jpeg_into`] writes pixels: a caller's buffer (a tensor's, so the pixels are
/// written once, straight where they are used).
pub trait PixelBuffer {
    /// The buffer's bytes.
    fn pixels(&mut self) -> &mut [u8];
}

impl PixelBuffer for Vec<u8> {
    fn pixels(&mut self) -> &mut [u8] {
        self
    }
}

/// Decodes a JPEG like `tf.io.decode_jpeg`. Returns HWC `u8` pixels and `[height, width, channels]`.
pub fn decode_jpeg(bytes: &[u8], opts: &DecodeOptions) -> Result<(Vec<u8>, [usize; 3]), CodecError> {
    decode_jpeg_into(bytes, opts, |shape| Ok(vec![0u8; shape.iter().product()]))
}

/// [`decode_jpeg`] into a buffer from `make`, which is given `[height, width, channels]` once
/// the header is read and the size checked, and must return a zero-filled buffer of exactly
/// that many bytes (rows a truncated file lacks stay zero, TensorFlow's black fill).
pub fn decode_jpeg_into<B: PixelBuffer>(
    bytes: &[u8],
    opts: &DecodeOptions,
    make: impl FnOnce([usize; 3]) -> Result<B, CodecError>,
) -> Result<(B, [usize; 3]), CodecError> {
    #[cfg(feature = "jpeg")]
    {
        turbo_decode_jpeg_into(bytes, opts, make)
    }
    #[cfg(not(feature = "jpeg"))]
    {
        let _ = (opts, make);
        check_magic(bytes)?;
        Err(CodecError::NotBuilt("JPEG decoding"))
    }
}

#[cfg(feature = "jpeg")]
fn turbo_decode_jpeg_into<B: PixelBuffer>(
    bytes: &[u8],
    opts: &DecodeOptions,
    make: impl FnOnce([usize; 3]) -> Result<B, CodecError>,
) -> Result<(B, [usize; 3]), CodecError> {
    if !matches!(opts.ratio, 1 | 2 | 4 | 8) {
        return Err(CodecError::Argument(format!("ratio must be 1, 2, 4, or 8, got {}", opts.ratio)));
    }
    if !matches!(opts.channels, 0 | 1 | 3) {
        return Err(CodecError::Argument(format!("JPEG channels must be 0, 1 or 3, got {}", opts.channels)));
    }
    check_magic(bytes)?;
    // Puts the Rust `jsimd_*` functions into every link that decodes (see crate::jsimd).
    #[cfg(target_arch = "x86_64")]
    crate::jsimd::keep_linked();
    // SAFETY: `cinfo` is a live decompressor reading `bytes`; `progress` outlives the decode
    // and is unhooked before it is dropped.
    with_decompressor(bytes, opts.try_recover_truncated, |cinfo| unsafe {
        let mut progress = Progress {
            public: ffi::jpeg_progress_mgr {
                progress_monitor: Some(progress_monitor),
                pass_counter: 0,
                pass_limit: 0,
                completed_passes: 0,
                total_passes: 0,
            },
            max_scans: opts.max_scans,
            stop: opts.stop.clone(),
        };
        cinfo.common.progress = &mut progress.public;
        let result = decode_low(cinfo, opts, make);
        cinfo.common.progress = std::ptr::null_mut();
        result
    })
}

/// libjpeg's progress monitor with what it checks: called for every row read and, in a
/// progressive file, for every row of every scan as it is absorbed.
#[cfg(feature = "jpeg")]
#[repr(C)]
struct Progress {
    public: ffi::jpeg_progress_mgr, // must be first: libjpeg sees a `jpeg_progress_mgr*`
    max_scans: u32,
    stop: Option<Stop>,
}

/// `error_exit`'s code for a file over the scan limit (libjpeg's own codes are positive).
#[cfg(feature = "jpeg")]
const TOO_MANY_SCANS: c_int = -1;
/// `error_exit`'s code for a decode stopped by its caller.
#[cfg(feature = "jpeg")]
const STOPPED: c_int = -2;

#[cfg(feature = "jpeg")]
unsafe extern "C-unwind" fn progress_monitor(cinfo: &mut ffi::jpeg_common_struct) {
    // SAFETY: set by decode_jpeg_into to a Progress that outlives the decode.
    let progress = &*(cinfo.progress as *const Progress);
    if cinfo.is_decompressor != 0 && progress.max_scans > 0 {
        let scans = (*(cinfo as *mut ffi::jpeg_common_struct as *mut ffi::jpeg_decompress_struct)).input_scan_number;
        if scans > progress.max_scans as c_int {
            resume_unwind(Box::new(LibjpegError {
                code: TOO_MANY_SCANS,
                message: format!(
                    "progressive JPEG has more than {} scans (the scan limit; scan {scans} reached)",
                    progress.max_scans
                ),
            }));
        }
    }
    if progress.stop.as_ref().is_some_and(|s| (s.0)()) {
        resume_unwind(Box::new(LibjpegError { code: STOPPED, message: String::new() }));
    }
}

/// `tf.io.extract_jpeg_shape`: `[height, width, components]` from the header (CMYK/YCCK files report 4).
///
/// Only the headers are parsed; TF also runs `jpeg_start_decompress`, which for progressive files reads every
/// scan, so a progressive file damaged after its header fails there and succeeds here.
pub fn jpeg_shape(bytes: &[u8]) -> Result<[usize; 3], CodecError> {
    check_magic(bytes)?;
    #[cfg(not(feature = "jpeg"))]
    return Err(CodecError::NotBuilt("JPEG header parsing"));
    #[cfg(feature = "jpeg")]
    // SAFETY: `cinfo` is a live decompressor reading `bytes`.
    with_decompressor(bytes, false, |cinfo| unsafe {
        read_header(cinfo)?;
        ffi::jpeg_calc_output_dimensions(cinfo);
        Ok([cinfo.output_height as usize, cinfo.output_width as usize, cinfo.out_color_components as usize])
    })
}

fn check_magic(bytes: &[u8]) -> Result<(), CodecError> {
    if bytes.is_empty() {
        return Err(CodecError::NotFormat("empty JPEG input".into()));
    }
    if !bytes.starts_with(JPEG_MAGIC) {
        let head: Vec<String> = bytes.iter().take(4).map(|b| format!("{b:02x}")).collect();
        return Err(CodecError::NotFormat(format!(
            "not a JPEG file: starts with {} (expected ff d8 ff)",
            head.join(" ")
        )));
    }
    Ok(())
}

/// The body of TF's `UncompressLow` + `Uncompress` (without crop, stride or RGBA output, which decode_jpeg never
/// uses).
#[cfg(feature = "jpeg")]
unsafe fn decode_low<B: PixelBuffer>(
    cinfo: &mut ffi::jpeg_decompress_struct,
    opts: &DecodeOptions,
    make: impl FnOnce([usize; 3]) -> Result<B, CodecError>,
) -> Result<(B, [usize; 3]), CodecError> {
    // Keep APP14 markers to learn whether an Adobe marker was seen (libjpeg's flag is private in mozjpeg-sys).
    ffi::jpeg_save_markers(cinfo, APP14, 0xFFFF);
    read_header(cinfo)?;

    let is_cmyk = matches!(cinfo.jpeg_color_space, ffi::JCS_CMYK | ffi::JCS_YCCK);
    let components = match opts.channels {
        0 => cinfo.num_components.min(3) as usize,
        c => c as usize,
    };
    cinfo.out_color_space = match (components, is_cmyk) {
        (1, _) => ffi::JCS_GRAYSCALE,
        // libjpeg decodes CMYK/YCCK to CMYK; TF converts to RGB itself, below.
        (_, true) => ffi::JCS_CMYK,
        _ => ffi::JCS_RGB,
    };
    cinfo.do_fancy_upsampling = opts.fancy_upscaling as ffi::boolean;
    cinfo.scale_num = 1;
    cinfo.scale_denom = opts.ratio as c_uint;
    cinfo.dct_method = match opts.dct_method {
        DctMethod::IntegerFast => ffi::J_DCT_METHOD::JDCT_IFAST,
        DctMethod::IntegerAccurate => ffi::J_DCT_METHOD::JDCT_ISLOW,
    };

    // Size checks before libjpeg or we allocate anything image-sized.
    ffi::jpeg_calc_output_dimensions(cinfo);
    let (h, w) = (cinfo.output_height as usize, cinfo.output_width as usize);
    if h == 0 || w == 0 {
        return Err(CodecError::Invalid(format!("invalid JPEG: image size {w}x{h}")));
    }
    let elements = h as u64 * w as u64 * cinfo.num_components as u64;
    if elements >= TF_MAX_ELEMENTS {
        return Err(CodecError::TooLarge(format!(
            "JPEG too large: {h}x{w}x{} reaches TensorFlow's limit of 2^29 values",
            cinfo.num_components
        )));
    }
    let stride = w * components;
    let out_bytes = h * stride;
    if out_bytes > opts.max_bytes {
        return Err(CodecError::TooLarge(format!(
            "JPEG too large: {h}x{w}x{components} is {out_bytes} bytes, limit {}",
            opts.max_bytes
        )));
    }

    ffi::jpeg_start_decompress(cinfo);
    let use_cmyk = cinfo.out_color_space == ffi::JCS_CMYK;
    let adobe = use_cmyk && saw_adobe_marker(cinfo);
    // Zeroed, so rows that are never read are already TF's black fill.
    let mut sink = make([h, w, components])?;
    let out = sink.pixels();
    if out.len() != out_bytes {
        return Err(CodecError::Argument(format!(
            "pixel buffer of {} bytes for a {h}x{w}x{components} image",
            out.len()
        )));
    }
    let mut cmyk_row = vec![0u8; if use_cmyk { w * 4 } else { 0 }];
    let mut rows_read = h;
    let mut truncated = false;
    let mut row = 0;
    while (cinfo.output_scanline as usize) < h {
        let n = if use_cmyk {
            let n = read_row(cinfo, &mut cmyk_row);
            if n > 0 {
                cmyk_to_rgb(&cmyk_row, &mut out[row * stride..(row + 1) * stride], adobe);
            }
            n
        } else {
            read_row(cinfo, &mut out[row * stride..(row + 1) * stride])
        };
        if n == 0 {
            // Only reachable when the source suspends; mirrors TF.
            if opts.try_recover_truncated {
                for line in cinfo.output_scanline as usize..h {
                    if line > 0 {
                        out.copy_within((line - 1) * stride..line * stride, line * stride);
                    }
                }
                cinfo.output_scanline = h as ffi::JDIMENSION;
            } else {
                rows_read = cinfo.output_scanline as usize;
                truncated = true;
            }
            break;
        }
        row += 1;
    }
    if truncated {
        ffi::jpeg_abort_decompress(cinfo);
    } else {
        ffi::jpeg_finish_decompress(cinfo);
    }
    if (rows_read as f32 / h as f32) < opts.acceptable_fraction.min(1.0) {
        return Err(CodecError::Truncated(format!(
            "truncated JPEG: read {rows_read} of {h} rows, acceptable_fraction is {}",
            opts.acceptable_fraction
        )));
    }
    Ok((sink, [h, w, components]))
}

/// TF's CMYK -> RGB conversion (`jpeg_mem.cc`): Adobe files store inverted CMYK.
#[cfg(feature = "jpeg")]
fn cmyk_to_rgb(cmyk: &[u8], rgb: &mut [u8], adobe: bool) {
    for (src, dst) in cmyk.chunks_exact(4).zip(rgb.chunks_exact_mut(3)) {
        let k = src[3] as u32;
        for i in 0..3 {
            let c = src[i] as u32;
            dst[i] = if adobe { k * c / 255 } else { (255 - k) * (255 - c) / 255 } as u8;
        }
    }
}

/// libjpeg sets `saw_Adobe_marker` for an APP14 segment of at least 12 bytes starting with "Adobe".
#[cfg(feature = "jpeg")]
unsafe fn saw_adobe_marker(cinfo: &ffi::jpeg_decompress_struct) -> bool {
    let mut m = cinfo.marker_list;
    while let Some(marker) = m.as_ref() {
        if c_int::from(marker.marker) == APP14 && marker.data_length >= 12 {
            let data = std::slice::from_raw_parts(marker.data, 5);
            if data == b"Adobe" {
                return true;
            }
        }
        m = marker.next;
    }
    false
}

#[cfg(feature = "jpeg")]
unsafe fn read_header(cinfo: &mut ffi::jpeg_decompress_struct) -> Result<(), CodecError> {
    // JPEG_HEADER_OK == 1; the source never suspends in the header, but guard anyway.
    if ffi::jpeg_read_header(cinfo, 1) != 1 {
        return Err(CodecError::Truncated("truncated JPEG: header incomplete".into()));
    }
    Ok(())
}

#[cfg(feature = "jpeg")]
unsafe fn read_row(cinfo: &mut ffi::jpeg_decompress_struct, row: &mut [u8]) -> usize {
    let mut ptr = row.as_mut_ptr();
    ffi::jpeg_read_scanlines(cinfo, &mut ptr, 1) as usize
}

// ---------------------------------------------------------------------------------------------------------------
// libjpeg plumbing: error manager, memory source (TF's jpeg_handle.cc), destination into a Vec.

/// Payload of the unwind started by `error_exit`.
#[cfg(feature = "jpeg")]
struct LibjpegError {
    code: c_int,
    message: String,
}

#[cfg(feature = "jpeg")]
impl LibjpegError {
    fn into_error(self) -> CodecError {
        match self.code {
            ffi::JERR_FILE_READ | ffi::JERR_INPUT_EOF => {
                CodecError::Truncated("truncated JPEG: data ends before the image is complete".into())
            }
            ffi::JERR_INPUT_EMPTY => CodecError::NotFormat("empty JPEG input".into()),
            TOO_MANY_SCANS => CodecError::TooLarge(self.message),
            STOPPED => CodecError::Stopped,
            _ => CodecError::Invalid(format!("invalid JPEG: {}", self.message)),
        }
    }
}

#[cfg(feature = "jpeg")]
unsafe extern "C-unwind" fn error_exit(cinfo: &mut ffi::jpeg_common_struct) {
    let err = &mut *cinfo.err;
    let mut buf = [0u8; 80];
    if let Some(format) = err.format_message {
        // mozjpeg-sys types the output buffer as `&[u8; 80]`; libjpeg writes into it, so pass it as `*mut`.
        let format: unsafe extern "C-unwind" fn(*mut ffi::jpeg_common_struct, *mut u8) = std::mem::transmute(format);
        format(cinfo, buf.as_mut_ptr());
    }
    let message = CStr::from_bytes_until_nul(&buf).map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    resume_unwind(Box::new(LibjpegError { code: err.msg_code, message }));
}

/// Warnings are counted (as libjpeg's default does) but not printed.
#[cfg(feature = "jpeg")]
unsafe extern "C-unwind" fn emit_message(cinfo: &mut ffi::jpeg_common_struct, level: c_int) {
    if level < 0 {
        (*cinfo.err).num_warnings += 1;
    }
}

#[cfg(feature = "jpeg")]
fn new_error_mgr() -> Box<ffi::jpeg_error_mgr> {
    // SAFETY: an all-zero jpeg_error_mgr (null pointers, `None` callbacks, zero ints) is valid;
    // jpeg_std_error fills it in.
    unsafe {
        let mut err: Box<ffi::jpeg_error_mgr> = Box::new(std::mem::zeroed());
        ffi::jpeg_std_error(&mut err);
        err.error_exit = Some(error_exit);
        err.emit_message = Some(emit_message);
        err
    }
}

/// Runs `f` with a fresh decompressor reading `bytes`; turns libjpeg's fatal errors into `Err`.
#[cfg(feature = "jpeg")]
fn with_decompressor<T>(
    bytes: &[u8],
    try_recover_truncated: bool,
    f: impl FnOnce(&mut ffi::jpeg_decompress_struct) -> Result<T, CodecError>,
) -> Result<T, CodecError> {
    struct Decompressor {
        cinfo: Box<ffi::jpeg_decompress_struct>,
        _err: Box<ffi::jpeg_error_mgr>,
        _src: Box<MemSource>,
    }
    impl Drop for Decompressor {
        fn drop(&mut self) {
            // SAFETY: a no-op on a zeroed struct (no memory manager yet); frees libjpeg's pools otherwise.
            unsafe { ffi::jpeg_destroy_decompress(&mut self.cinfo) }
        }
    }
    let mut err = new_error_mgr();
    let mut src = Box::new(MemSource::new(bytes, try_recover_truncated));
    // SAFETY: all-zero is a valid "not yet created" decompress struct (jpeg_destroy accepts it).
    let mut cinfo: Box<ffi::jpeg_decompress_struct> = Box::new(unsafe { std::mem::zeroed() });
    cinfo.common.err = &mut *err;
    let src_ptr: *mut ffi::jpeg_source_mgr = &mut src.public;
    let mut d = Decompressor { cinfo, _err: err, _src: src };
    // SAFETY: the error manager and source live in `d` as long as the decompressor; libjpeg's
    // fatal errors unwind out of the C frames (compiled with -fexceptions) to this catch_unwind.
    let result = catch_unwind(AssertUnwindSafe(|| unsafe {
        // jpeg_CreateDecompress zeroes the struct but keeps `err`.
        ffi::jpeg_create_decompress(&mut *d.cinfo);
        d.cinfo.src = src_ptr;
        f(&mut d.cinfo)
    }));
    match result {
        Ok(r) => r,
        Err(payload) => match payload.downcast::<LibjpegError>() {
            Ok(e) => Err(e.into_error()),
            // A Rust panic inside this module is a bug, not bad input: let it propagate.
            Err(other) => resume_unwind(other),
        },
    }
}

/// TF's `MemSourceMgr`: the whole file in memory; at its end either a fatal error or, with
/// `try_recover_truncated`, a warning and a fake EOI marker.
#[cfg(feature = "jpeg")]
#[repr(C)]
struct MemSource {
    public: ffi::jpeg_source_mgr, // must be first: libjpeg sees a `jpeg_source_mgr*`
    data: *const u8,
    len: usize,
    try_recover_truncated: bool,
    /// Refills answered without new data (see `MAX_END_REFILLS`).
    end_refills: u32,
}

#[cfg(feature = "jpeg")]
static FAKE_EOI: [u8; 2] = [0xFF, 0xD9];

/// With `try_recover_truncated`, TF answers every refill at the end of the data with "ok" (re-serving bytes that
/// libjpeg has not yet synced, or another fake EOI). libjpeg's marker scanner can then re-read the same 0xFF byte
/// forever: TF 2.21 hangs on such files (e.g. one cut right after a 0xFF). Decodes that end need a handful of these
/// refills; after this many we fail instead.
#[cfg(feature = "jpeg")]
const MAX_END_REFILLS: u32 = 1 << 20;

#[cfg(feature = "jpeg")]
impl MemSource {
    fn new(bytes: &[u8], try_recover_truncated: bool) -> Self {
        MemSource {
            public: ffi::jpeg_source_mgr {
                next_input_byte: std::ptr::null(),
                bytes_in_buffer: 0,
                init_source: Some(mem_init_source),
                fill_input_buffer: Some(mem_fill_input_buffer),
                skip_input_data: Some(mem_skip_input_data),
                resync_to_restart: Some(ffi::jpeg_resync_to_restart),
                term_source: Some(mem_term_source),
            },
            data: bytes.as_ptr(),
            len: bytes.len(),
            try_recover_truncated,
            end_refills: 0,
        }
    }
}

#[cfg(feature = "jpeg")]
unsafe fn mem_source(cinfo: &mut ffi::jpeg_decompress_struct) -> &mut MemSource {
    &mut *(cinfo.src as *mut MemSource)
}

#[cfg(feature = "jpeg")]
unsafe fn fail(cinfo: &mut ffi::jpeg_decompress_struct, code: c_int) -> ! {
    (*cinfo.common.err).msg_code = code;
    error_exit(&mut cinfo.common);
    unreachable!("error_exit unwinds")
}

#[cfg(feature = "jpeg")]
unsafe extern "C-unwind" fn mem_init_source(cinfo: &mut ffi::jpeg_decompress_struct) {
    let src = mem_source(cinfo);
    src.public.next_input_byte = src.data;
    src.public.bytes_in_buffer = src.len;
}

#[cfg(feature = "jpeg")]
unsafe extern "C-unwind" fn mem_fill_input_buffer(cinfo: &mut ffi::jpeg_decompress_struct) -> ffi::boolean {
    let src = mem_source(cinfo);
    if src.public.bytes_in_buffer == 0 && src.public.next_input_byte == src.data {
        fail(cinfo, ffi::JERR_INPUT_EMPTY)
    }
    if src.try_recover_truncated {
        src.end_refills += 1;
        if src.end_refills > MAX_END_REFILLS {
            fail(cinfo, ffi::JERR_FILE_READ)
        }
    }
    if src.public.bytes_in_buffer != 0 {
        // Data left that libjpeg has not consumed yet: TF treats it as corrupt and lets libjpeg go on.
        src.try_recover_truncated as ffi::boolean
    } else if src.public.next_input_byte != FAKE_EOI.as_ptr() && src.try_recover_truncated {
        src.public.next_input_byte = FAKE_EOI.as_ptr();
        src.public.bytes_in_buffer = 2;
        (*cinfo.common.err).msg_code = ffi::JWRN_JPEG_EOF;
        emit_message(&mut cinfo.common, -1);
        1
    } else {
        fail(cinfo, ffi::JERR_FILE_READ)
    }
}

#[cfg(feature = "jpeg")]
unsafe extern "C-unwind" fn mem_skip_input_data(cinfo: &mut ffi::jpeg_decompress_struct, jump: c_long) {
    let src = mem_source(cinfo);
    if jump < 0 {
        return;
    }
    if jump as usize > src.public.bytes_in_buffer {
        src.public.bytes_in_buffer = 0;
        mem_fill_input_buffer(cinfo);
    } else {
        src.public.bytes_in_buffer -= jump as usize;
        src.public.next_input_byte = src.public.next_input_byte.add(jump as usize);
    }
}

#[cfg(feature = "jpeg")]
unsafe extern "C-unwind" fn mem_term_source(_cinfo: &mut ffi::jpeg_decompress_struct) {}

// ---------------------------------------------------------------------------------------------------------------
// Encoding

/// `format` attribute of `tf.io.encode_jpeg`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JpegFormat {
    /// `""`: from the channel count (1 -> grayscale, 3 -> RGB).
    #[default]
    Auto,
    /// `"grayscale"`: one channel.
    Grayscale,
    /// `"rgb"`: three channels.
    Rgb,
}

/// `density_unit` attribute: `"in"` or `"cm"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DensityUnit {
    /// `"in"`: dots per inch.
    #[default]
    Inch,
    /// `"cm"`: dots per centimetre.
    Centimeter,
}

/// `tf.io.encode_jpeg` attributes with TF's defaults.
///
/// `#[non_exhaustive]`: other crates build a `EncodeOptions` from `EncodeOptions::default()` and its
/// `with_*` setters, so fields can be added without breaking them.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EncodeOptions {
    /// `format`: the pixels' layout.
    pub format: JpegFormat,
    /// 0..=100.
    pub quality: u8,
    /// `progressive`: write a progressive JPEG.
    pub progressive: bool,
    /// `optimize_size`: optimal Huffman tables (slower, smaller).
    pub optimize_size: bool,
    /// 4:2:0 chroma when true, 4:4:4 when false.
    pub chroma_downsampling: bool,
    /// `density_unit` of the JFIF header.
    pub density_unit: DensityUnit,
    /// `x_density`: horizontal pixels per density unit.
    pub x_density: u16,
    /// `y_density`: vertical pixels per density unit.
    pub y_density: u16,
    /// Written as an APP1 XMP packet when not empty.
    pub xmp_metadata: Vec<u8>,
}

impl EncodeOptions {
    /// Sets [`EncodeOptions::format`].
    pub fn with_format(mut self, format: JpegFormat) -> Self {
        self.format = format;
        self
    }

    /// Sets [`EncodeOptions::quality`].
    pub fn with_quality(mut self, quality: u8) -> Self {
        self.quality = quality;
        self
    }

    /// Sets [`EncodeOptions::progressive`].
    pub fn with_progressive(mut self, progressive: bool) -> Self {
        self.progressive = progressive;
        self
    }

    /// Sets [`EncodeOptions::optimize_size`].
    pub fn with_optimize_size(mut self, optimize_size: bool) -> Self {
        self.optimize_size = optimize_size;
        self
    }

    /// Sets [`EncodeOptions::chroma_downsampling`].
    pub fn with_chroma_downsampling(mut self, chroma_downsampling: bool) -> Self {
        self.chroma_downsampling = chroma_downsampling;
        self
    }

    /// Sets [`EncodeOptions::density_unit`].
    pub fn with_density_unit(mut self, density_unit: DensityUnit) -> Self {
        self.density_unit = density_unit;
        self
    }

    /// Sets [`EncodeOptions::x_density`].
    pub fn with_x_density(mut self, x_density: u16) -> Self {
        self.x_density = x_density;
        self
    }

    /// Sets [`EncodeOptions::y_density`].
    pub fn with_y_density(mut self, y_density: u16) -> Self {
        self.y_density = y_density;
        self
    }

    /// Sets [`EncodeOptions::xmp_metadata`].
    pub fn with_xmp_metadata(mut self, xmp_metadata: Vec<u8>) -> Self {
        self.xmp_metadata = xmp_metadata;
        self
    }
}

impl Default for EncodeOptions {
    fn default() -> Self {
        Self {
            format: JpegFormat::Auto,
            quality: 95,
            progressive: false,
            optimize_size: false,
            chroma_downsampling: true,
            density_unit: DensityUnit::Inch,
            x_density: 300,
            y_density: 300,
            xmp_metadata: Vec::new(),
        }
    }
}

/// Encodes HWC `u8` pixels (`channels` 1 or 3) like `tf.io.encode_jpeg` (TF's `CompressInternal` with
/// libjpeg-turbo's default settings, not mozjpeg's).
pub fn encode_jpeg(
    pixels: &[u8],
    height: usize,
    width: usize,
    channels: usize,
    opts: &EncodeOptions,
) -> Result<Vec<u8>, CodecError> {
    #[cfg(feature = "jpeg")]
    {
        turbo_encode_jpeg(pixels, height, width, channels, opts)
    }
    #[cfg(not(feature = "jpeg"))]
    {
        let _ = (pixels, height, width, channels, opts);
        Err(CodecError::NotBuilt("JPEG encoding"))
    }
}

#[cfg(feature = "jpeg")]
fn turbo_encode_jpeg(
    pixels: &[u8],
    height: usize,
    width: usize,
    channels: usize,
    opts: &EncodeOptions,
) -> Result<Vec<u8>, CodecError> {
    let want = match opts.format {
        JpegFormat::Auto if channels == 1 || channels == 3 => channels,
        JpegFormat::Auto => {
            return Err(CodecError::Argument(format!("image must have 1 or 3 channels, got {channels}")))
        }
        JpegFormat::Grayscale => 1,
        JpegFormat::Rgb => 3,
    };
    if channels != want {
        return Err(CodecError::Argument(format!("format {:?} expects {want} channels, got {channels}", opts.format)));
    }
    if opts.quality > 100 {
        return Err(CodecError::Argument(format!("quality must be in [0,100], got {}", opts.quality)));
    }
    if height == 0 || width == 0 {
        return Err(CodecError::Argument(format!("invalid image size {width}x{height}")));
    }
    if (height as u64) * (width as u64) >= TF_MAX_ELEMENTS || height > 65500 || width > 65500 {
        return Err(CodecError::Argument(format!("image too large to encode: {height}x{width}")));
    }
    let row_len = width * channels;
    if pixels.len() != height * row_len {
        return Err(CodecError::Argument(format!(
            "pixel buffer has {} bytes, expected {height}x{width}x{channels}",
            pixels.len()
        )));
    }

    struct Compressor {
        cinfo: Box<ffi::jpeg_compress_struct>,
        _err: Box<ffi::jpeg_error_mgr>,
        dest: Box<VecDest>,
    }
    impl Drop for Compressor {
        fn drop(&mut self) {
            // SAFETY: as for the decompressor.
            unsafe { ffi::jpeg_destroy_compress(&mut self.cinfo) }
        }
    }
    let mut err = new_error_mgr();
    // SAFETY: all-zero is a valid "not yet created" compress struct.
    let mut cinfo: Box<ffi::jpeg_compress_struct> = Box::new(unsafe { std::mem::zeroed() });
    cinfo.common.err = &mut *err;
    let guess = (height * row_len / 4).clamp(1024, 1 << 20);
    let mut c = Compressor { cinfo, _err: err, dest: Box::new(VecDest::new(guess)) };
    // SAFETY: the error manager and destination live in `c` as long as the compressor; rows
    // handed to libjpeg are `row_len` bytes of `pixels`; fatal errors unwind to this catch_unwind.
    let result = catch_unwind(AssertUnwindSafe(|| unsafe {
        let cinfo = &mut *c.cinfo;
        ffi::jpeg_create_compress(cinfo);
        cinfo.dest = &mut c.dest.public;
        cinfo.image_width = width as ffi::JDIMENSION;
        cinfo.image_height = height as ffi::JDIMENSION;
        cinfo.input_components = channels as c_int;
        cinfo.in_color_space = if channels == 1 { ffi::JCS_GRAYSCALE } else { ffi::JCS_RGB };
        // libjpeg-turbo's defaults (no trellis quantisation, Annex K tables, standard scan script).
        ffi::jpeg_c_set_int_param(cinfo, ffi::JINT_COMPRESS_PROFILE, ffi::JCP_FASTEST as c_int);
        ffi::jpeg_set_defaults(cinfo);
        if opts.optimize_size {
            cinfo.optimize_coding = 1;
        }
        cinfo.density_unit = match opts.density_unit {
            DensityUnit::Inch => 1,
            DensityUnit::Centimeter => 2,
        };
        cinfo.X_density = opts.x_density;
        cinfo.Y_density = opts.y_density;
        ffi::jpeg_set_quality(cinfo, opts.quality as c_int, 1);
        if opts.progressive {
            ffi::jpeg_simple_progression(cinfo);
        }
        if !opts.chroma_downsampling {
            for i in 0..cinfo.num_components as usize {
                let comp = &mut *cinfo.comp_info.add(i);
                comp.h_samp_factor = 1;
                comp.v_samp_factor = 1;
            }
        }
        ffi::jpeg_start_compress(cinfo, 1);
        if !opts.xmp_metadata.is_empty() {
            let mut packet = b"http://ns.adobe.com/xap/1.0/\0".to_vec();
            packet.extend_from_slice(&opts.xmp_metadata);
            if packet.len() > 65533 {
                return Err(CodecError::Argument(format!(
                    "xmp_metadata too long for one APP1 segment: {} bytes",
                    opts.xmp_metadata.len()
                )));
            }
            ffi::jpeg_write_marker(cinfo, 0xE1, packet.as_ptr(), packet.len() as c_uint);
        }
        for row in pixels.chunks_exact(row_len) {
            let ptr = row.as_ptr();
            ffi::jpeg_write_scanlines(cinfo, &ptr, 1);
        }
        ffi::jpeg_finish_compress(cinfo);
        Ok(std::mem::take(&mut c.dest.buf))
    }));
    match result {
        Ok(r) => r,
        Err(payload) => match payload.downcast::<LibjpegError>() {
            Ok(e) => Err(CodecError::Encode(format!("JPEG encoding failed: {}", e.message))),
            Err(other) => resume_unwind(other),
        },
    }
}

/// Destination manager that grows a `Vec<u8>`.
#[cfg(feature = "jpeg")]
#[repr(C)]
struct VecDest {
    public: ffi::jpeg_destination_mgr, // must be first
    buf: Vec<u8>,
}

#[cfg(feature = "jpeg")]
impl VecDest {
    fn new(initial: usize) -> Self {
        VecDest {
            public: ffi::jpeg_destination_mgr {
                next_output_byte: std::ptr::null_mut(),
                free_in_buffer: 0,
                init_destination: Some(dest_init),
                empty_output_buffer: Some(dest_empty),
                term_destination: Some(dest_term),
            },
            buf: Vec::with_capacity(initial),
        }
    }
}

#[cfg(feature = "jpeg")]
unsafe fn vec_dest(cinfo: &mut ffi::jpeg_compress_struct) -> &mut VecDest {
    &mut *(cinfo.dest as *mut VecDest)
}

#[cfg(feature = "jpeg")]
unsafe extern "C-unwind" fn dest_init(cinfo: &mut ffi::jpeg_compress_struct) {
    let d = vec_dest(cinfo);
    let cap = d.buf.capacity().max(1024);
    d.buf.clear();
    d.buf.resize(cap, 0);
    d.public.next_output_byte = d.buf.as_mut_ptr();
    d.public.free_in_buffer = d.buf.len();
}

/// Called when the buffer is full: double it and continue after the bytes already written.
#[cfg(feature = "jpeg")]
unsafe extern "C-unwind" fn dest_empty(cinfo: &mut ffi::jpeg_compress_struct) -> ffi::boolean {
    let d = vec_dest(cinfo);
    let used = d.buf.len();
    d.buf.resize(used * 2, 0);
    d.public.next_output_byte = d.buf.as_mut_ptr().add(used);
    d.public.free_in_buffer = used;
    1
}

#[cfg(feature = "jpeg")]
unsafe extern "C-unwind" fn dest_term(cinfo: &mut ffi::jpeg_compress_struct) {
    let d = vec_dest(cinfo);
    let len = d.buf.len() - d.public.free_in_buffer;
    d.buf.truncate(len);
}
