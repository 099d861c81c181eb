//! libjpeg-turbo's SIMD entry points (`jsimd_*`), supplied from Rust.
//!
//! mozjpeg-sys is built without `nasm_simd`, so its archive carries `jsimd_none.c`: 66
//! functions through which libjpeg-turbo asks for and calls its SIMD kernels, all answering
//! "no". This module defines the same 66 symbols with the same C signatures. Because the
//! decoder references this module (`keep_linked`), its object is in every link that decodes,
//! the linker resolves libjpeg's references to these definitions and never pulls
//! `jsimd_none.o` out of the archive (if one symbol were missing here it would, and the link
//! would fail on duplicates, so the set must stay complete).
//!
//! What TensorFlow's bundled libjpeg-turbo (2.1, x86-64 SIMD) runs is reproduced bit for bit:
//! - `jsimd_idct_ifast`: TF's default IDCT, an instruction-for-instruction port of
//!   `jidctfst-sse2.asm` (16-bit lanes that wrap, `pmulhw`, saturating packs). The portable C
//!   IDCT computes in 32 bits and gives other pixels wherever the SSE2 kernel overflows.
//! - `jsimd_idct_islow` (`dct_method="INTEGER_ACCURATE"`): a port of `jidctint-sse2.asm`;
//!   `jsimd_idct_4x4` and `jsimd_idct_2x2` (scaled decodes, `ratio` 2, 4, 8): ports of
//!   `jidctred-sse2.asm`.
//! - `jsimd_ycc_rgb_convert`, `jsimd_h2v2_fancy_upsample`, `jsimd_h2v1_fancy_upsample`:
//!   AVX2, computing libjpeg-turbo's integer formulas (which its SIMD kernels match exactly);
//!   without AVX2 their `jsimd_can_*` answer 0 and the C versions run (same pixels).
//!
//! Everything else answers 0 from its `jsimd_can_*`, so libjpeg never calls it; those bodies
//! abort. All 66 functions live in this one module so that they land in one object file.
//!
//! The dequantisation tables (`compptr->dct_table`) are `int` in this build (no `WITH_SIMD`)
//! where TF's are `short`; the IDCTs truncate each entry to 16 bits as TF's table holds it.

use mozjpeg_sys as ffi;
use std::ffi::{c_int, c_void};

mod color;
mod idct_fast;
mod idct_int;
mod idct_red;
mod upsample;

#[cfg(test)]
mod tests;

type Decompress = *mut ffi::jpeg_decompress_struct;
type Compress = *mut ffi::jpeg_compress_struct;
type CompInfo = *mut ffi::jpeg_component_info;
type SampArray = *mut *mut u8;
type SampImage = *mut SampArray;
type CoefPtr = *mut ffi::JCOEF;

// The tables under these functions must be `int`: with `nasm_simd` mozjpeg-sys makes them
// (and DCTELEM) 16 bits, and these kernels would read them wrongly.
const _: () = assert!(
    std::mem::size_of::<ffi::DCTELEM>() == 4,
    "mozjpeg-sys must be built without `nasm_simd` under the Rust jsimd functions"
);

/// `jpeg_component_info` with the fields mozjpeg-sys keeps private (libjpeg 6.2 ABI, the
/// one this crate builds: mozjpeg-sys without `jpeg70_abi`).
#[repr(C)]
struct Component {
    component_id: c_int,
    component_index: c_int,
    h_samp_factor: c_int,
    v_samp_factor: c_int,
    quant_tbl_no: c_int,
    dc_tbl_no: c_int,
    ac_tbl_no: c_int,
    width_in_blocks: ffi::JDIMENSION,
    height_in_blocks: ffi::JDIMENSION,
    dct_scaled_size: c_int,
    downsampled_width: ffi::JDIMENSION,
    downsampled_height: ffi::JDIMENSION,
    component_needed: ffi::boolean,
    mcu_width: c_int,
    mcu_height: c_int,
    mcu_blocks: c_int,
    mcu_sample_width: c_int,
    last_col_width: c_int,
    last_row_height: c_int,
    quant_table: *mut ffi::JQUANT_TBL,
    dct_table: *mut c_void,
}

const _: () = assert!(std::mem::size_of::<Component>() == std::mem::size_of::<ffi::jpeg_component_info>());
const _: () = assert!(
    std::mem::offset_of!(Component, quant_table) == std::mem::offset_of!(ffi::jpeg_component_info, quant_table)
);
const _: () = assert!(
    std::mem::offset_of!(Component, width_in_blocks) == std::mem::offset_of!(ffi::jpeg_component_info, width_in_blocks)
);

/// `false` in a measurement build (`RUSTFLAGS="--cfg ferroflow_portable_jpeg"`): every
/// `jsimd_can_*` answers 0 and libjpeg runs its portable C, as `jsimd_none.c` would.
const ON: bool = !cfg!(ferroflow_portable_jpeg);

/// Whether the AVX2 kernels may run (detected once by std, then a relaxed load).
fn avx2() -> bool {
    ON && std::arch::is_x86_feature_detected!("avx2")
}

/// Called by the decoder so that this module's object, with all 66 symbols, is part of every
/// link that decodes JPEGs (see the module docs). Returns the address of one of them.
#[inline(never)]
pub(crate) fn keep_linked() -> usize {
    std::hint::black_box(jsimd_can_idct_ifast as unsafe extern "C" fn() -> c_int) as usize
}

/// Which jsimd paths are active on this CPU, e.g. for `ferroflow info`.
pub(crate) fn report() -> String {
    let mut cpu = Vec::new();
    macro_rules! feat {
        ($($f:tt),*) => {$(
            if std::arch::is_x86_feature_detected!($f) {
                cpu.push($f);
            }
        )*};
    }
    feat!("sse2", "ssse3", "sse4.1", "avx", "avx2", "fma", "avx512f", "avx512bw");
    let cpu = cpu.join(" ");
    if !ON {
        return format!(
            "jpeg: libjpeg-turbo 2.x portable C (mozjpeg-sys 2.2.3), Rust SIMD disabled by \
             --cfg ferroflow_portable_jpeg (IFAST pixels may differ from TensorFlow's); cpu: {cpu}"
        );
    }
    let wide = if avx2() { "avx2" } else { "C (no avx2)" };
    format!(
        "jpeg: libjpeg-turbo 2.x C (mozjpeg-sys 2.2.3) + Rust SIMD (idct_ifast sse2, idct_islow sse2, \
         idct_4x4/2x2 sse2, ycc_rgb {wide}, h2v2/h2v1 fancy upsample {wide}); cpu: {cpu}"
    )
}

/// Ends the process: libjpeg called a `jsimd_*` function whose `jsimd_can_*` answered 0.
#[cold]
fn unsupported(name: &str) -> ! {
    eprintln!("ferroflow-codec: libjpeg called {name}, which this build does not provide");
    std::process::abort()
}

// ---------------------------------------------------------------------------------------------
// The 66 functions of jsimd_none.c. Signatures: jsimd.h, jsimddct.h (DCTELEM is `int`,
// FAST_FLOAT `float`, UJCOEF `unsigned short`).

// Colour conversion.

#[no_mangle]
pub extern "C" fn jsimd_can_rgb_ycc() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn jsimd_can_rgb_gray() -> c_int {
    0
}

/// YCbCr -> any RGB layout libjpeg asks for (jdcolor.c calls this for JCS_RGB and all
/// JCS_EXT_* spaces when the source is YCbCr).
#[no_mangle]
pub extern "C" fn jsimd_can_ycc_rgb() -> c_int {
    avx2() as c_int
}

#[no_mangle]
pub extern "C" fn jsimd_can_ycc_rgb565() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn jsimd_c_can_null_convert() -> c_int {
    0
}

/// # Safety
/// Never called (`jsimd_can_rgb_ycc` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_rgb_ycc_convert(
    _cinfo: Compress,
    _input_buf: SampArray,
    _output_buf: SampImage,
    _output_row: ffi::JDIMENSION,
    _num_rows: c_int,
) {
    unsupported("jsimd_rgb_ycc_convert")
}

/// # Safety
/// Never called (`jsimd_can_rgb_gray` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_rgb_gray_convert(
    _cinfo: Compress,
    _input_buf: SampArray,
    _output_buf: SampImage,
    _output_row: ffi::JDIMENSION,
    _num_rows: c_int,
) {
    unsupported("jsimd_rgb_gray_convert")
}

/// # Safety
/// libjpeg's contract: `cinfo` is a decompressor in its output pass whose colour converter
/// chose this function; `input_buf[0..3][input_row..input_row + num_rows]` are rows of at
/// least `output_width` samples and `output_buf[0..num_rows]` rows of `output_width` pixels.
#[no_mangle]
pub unsafe extern "C" fn jsimd_ycc_rgb_convert(
    cinfo: Decompress,
    input_buf: SampImage,
    input_row: ffi::JDIMENSION,
    output_buf: SampArray,
    num_rows: c_int,
) {
    // SAFETY: the caller's contract above; `jsimd_can_ycc_rgb` answered 1, so AVX2 is present.
    unsafe {
        let cinfo = &*cinfo;
        let Some(layout) = color::Layout::of(cinfo.out_color_space) else {
            unsupported("jsimd_ycc_rgb_convert for this out_color_space")
        };
        let width = cinfo.output_width as usize;
        for r in 0..num_rows.max(0) as usize {
            let row = input_row as usize + r;
            let y = *(*input_buf.add(0)).add(row);
            let cb = *(*input_buf.add(1)).add(row);
            let cr = *(*input_buf.add(2)).add(row);
            color::ycc_rgb_row_avx2(width, y, cb, cr, *output_buf.add(r), layout);
        }
    }
}

/// # Safety
/// Never called (`jsimd_can_ycc_rgb565` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_ycc_rgb565_convert(
    _cinfo: Decompress,
    _input_buf: SampImage,
    _input_row: ffi::JDIMENSION,
    _output_buf: SampArray,
    _num_rows: c_int,
) {
    unsupported("jsimd_ycc_rgb565_convert")
}

/// # Safety
/// Never called (`jsimd_c_can_null_convert` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_c_null_convert(
    _cinfo: Compress,
    _input_buf: SampArray,
    _output_buf: SampImage,
    _output_row: ffi::JDIMENSION,
    _num_rows: c_int,
) {
    unsupported("jsimd_c_null_convert")
}

// Downsampling (encoder).

#[no_mangle]
pub extern "C" fn jsimd_can_h2v2_downsample() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn jsimd_can_h2v1_downsample() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn jsimd_can_h2v2_smooth_downsample() -> c_int {
    0
}

/// # Safety
/// Never called (`jsimd_can_h2v2_downsample` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_h2v2_downsample(
    _cinfo: Compress,
    _compptr: CompInfo,
    _input_data: SampArray,
    _output_data: SampArray,
) {
    unsupported("jsimd_h2v2_downsample")
}

/// # Safety
/// Never called (`jsimd_can_h2v2_smooth_downsample` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_h2v2_smooth_downsample(
    _cinfo: Compress,
    _compptr: CompInfo,
    _input_data: SampArray,
    _output_data: SampArray,
) {
    unsupported("jsimd_h2v2_smooth_downsample")
}

/// # Safety
/// Never called (`jsimd_can_h2v1_downsample` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_h2v1_downsample(
    _cinfo: Compress,
    _compptr: CompInfo,
    _input_data: SampArray,
    _output_data: SampArray,
) {
    unsupported("jsimd_h2v1_downsample")
}

// Upsampling.

#[no_mangle]
pub extern "C" fn jsimd_can_h2v2_upsample() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn jsimd_can_h2v1_upsample() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn jsimd_can_int_upsample() -> c_int {
    0
}

/// # Safety
/// Never called (`jsimd_can_int_upsample` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_int_upsample(
    _cinfo: Decompress,
    _compptr: CompInfo,
    _input_data: SampArray,
    _output_data_ptr: *mut SampArray,
) {
    unsupported("jsimd_int_upsample")
}

/// # Safety
/// Never called (`jsimd_can_h2v2_upsample` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_h2v2_upsample(
    _cinfo: Decompress,
    _compptr: CompInfo,
    _input_data: SampArray,
    _output_data_ptr: *mut SampArray,
) {
    unsupported("jsimd_h2v2_upsample")
}

/// # Safety
/// Never called (`jsimd_can_h2v1_upsample` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_h2v1_upsample(
    _cinfo: Decompress,
    _compptr: CompInfo,
    _input_data: SampArray,
    _output_data_ptr: *mut SampArray,
) {
    unsupported("jsimd_h2v1_upsample")
}

#[no_mangle]
pub extern "C" fn jsimd_can_h2v2_fancy_upsample() -> c_int {
    avx2() as c_int
}

#[no_mangle]
pub extern "C" fn jsimd_can_h2v1_fancy_upsample() -> c_int {
    avx2() as c_int
}

#[no_mangle]
pub extern "C" fn jsimd_can_h1v2_fancy_upsample() -> c_int {
    0
}

/// # Safety
/// libjpeg's contract (jdsample.c): `input_data[-1..=max_v_samp_factor / 2]` are rows of
/// `downsampled_width` samples (context rows included) and `(*output_data_ptr)[0..max_v]`
/// rows of at least `2 * downsampled_width` samples.
#[no_mangle]
pub unsafe extern "C" fn jsimd_h2v2_fancy_upsample(
    cinfo: Decompress,
    compptr: CompInfo,
    input_data: SampArray,
    output_data_ptr: *mut SampArray,
) {
    // SAFETY: the caller's contract above; `jsimd_can_h2v2_fancy_upsample` answered 1 (AVX2).
    unsafe {
        let width = (*(compptr as *const Component)).downsampled_width as usize;
        let output = *output_data_ptr;
        let max_v = (*cinfo).max_v_samp_factor.max(0) as usize;
        let (mut inrow, mut outrow) = (0isize, 0usize);
        while outrow < max_v {
            let near = *input_data.offset(inrow);
            upsample::h2v2_fancy_row_avx2(width, near, *input_data.offset(inrow - 1), *output.add(outrow));
            upsample::h2v2_fancy_row_avx2(width, near, *input_data.offset(inrow + 1), *output.add(outrow + 1));
            inrow += 1;
            outrow += 2;
        }
    }
}

/// # Safety
/// libjpeg's contract (jdsample.c): `input_data[0..max_v_samp_factor]` are rows of
/// `downsampled_width` samples and `(*output_data_ptr)[0..max_v]` rows of at least
/// `2 * downsampled_width` samples.
#[no_mangle]
pub unsafe extern "C" fn jsimd_h2v1_fancy_upsample(
    cinfo: Decompress,
    compptr: CompInfo,
    input_data: SampArray,
    output_data_ptr: *mut SampArray,
) {
    // SAFETY: the caller's contract above; `jsimd_can_h2v1_fancy_upsample` answered 1 (AVX2).
    unsafe {
        let width = (*(compptr as *const Component)).downsampled_width as usize;
        let output = *output_data_ptr;
        for row in 0..(*cinfo).max_v_samp_factor.max(0) as usize {
            upsample::h2v1_fancy_row_avx2(width, *input_data.add(row), *output.add(row));
        }
    }
}

/// # Safety
/// Never called (`jsimd_can_h1v2_fancy_upsample` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_h1v2_fancy_upsample(
    _cinfo: Decompress,
    _compptr: CompInfo,
    _input_data: SampArray,
    _output_data_ptr: *mut SampArray,
) {
    unsupported("jsimd_h1v2_fancy_upsample")
}

#[no_mangle]
pub extern "C" fn jsimd_can_h2v2_merged_upsample() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn jsimd_can_h2v1_merged_upsample() -> c_int {
    0
}

/// # Safety
/// Never called (`jsimd_can_h2v2_merged_upsample` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_h2v2_merged_upsample(
    _cinfo: Decompress,
    _input_buf: SampImage,
    _in_row_group_ctr: ffi::JDIMENSION,
    _output_buf: SampArray,
) {
    unsupported("jsimd_h2v2_merged_upsample")
}

/// # Safety
/// Never called (`jsimd_can_h2v1_merged_upsample` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_h2v1_merged_upsample(
    _cinfo: Decompress,
    _input_buf: SampImage,
    _in_row_group_ctr: ffi::JDIMENSION,
    _output_buf: SampArray,
) {
    unsupported("jsimd_h2v1_merged_upsample")
}

// Forward DCT and quantisation (encoder).

#[no_mangle]
pub extern "C" fn jsimd_can_convsamp() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn jsimd_can_convsamp_float() -> c_int {
    0
}

/// # Safety
/// Never called (`jsimd_can_convsamp` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_convsamp(
    _sample_data: SampArray,
    _start_col: ffi::JDIMENSION,
    _workspace: *mut ffi::DCTELEM,
) {
    unsupported("jsimd_convsamp")
}

/// # Safety
/// Never called (`jsimd_can_convsamp_float` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_convsamp_float(
    _sample_data: SampArray,
    _start_col: ffi::JDIMENSION,
    _workspace: *mut f32,
) {
    unsupported("jsimd_convsamp_float")
}

#[no_mangle]
pub extern "C" fn jsimd_can_fdct_islow() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn jsimd_can_fdct_ifast() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn jsimd_can_fdct_float() -> c_int {
    0
}

/// # Safety
/// Never called (`jsimd_can_fdct_islow` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_fdct_islow(_data: *mut ffi::DCTELEM) {
    unsupported("jsimd_fdct_islow")
}

/// # Safety
/// Never called (`jsimd_can_fdct_ifast` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_fdct_ifast(_data: *mut ffi::DCTELEM) {
    unsupported("jsimd_fdct_ifast")
}

/// # Safety
/// Never called (`jsimd_can_fdct_float` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_fdct_float(_data: *mut f32) {
    unsupported("jsimd_fdct_float")
}

#[no_mangle]
pub extern "C" fn jsimd_can_quantize() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn jsimd_can_quantize_float() -> c_int {
    0
}

/// # Safety
/// Never called (`jsimd_can_quantize` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_quantize(
    _coef_block: CoefPtr,
    _divisors: *mut ffi::DCTELEM,
    _workspace: *mut ffi::DCTELEM,
) {
    unsupported("jsimd_quantize")
}

/// # Safety
/// Never called (`jsimd_can_quantize_float` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_quantize_float(_coef_block: CoefPtr, _divisors: *mut f32, _workspace: *mut f32) {
    unsupported("jsimd_quantize_float")
}

// Inverse DCTs.

/// SSE2 is part of x86-64.
#[no_mangle]
pub extern "C" fn jsimd_can_idct_2x2() -> c_int {
    ON as c_int
}

/// SSE2 is part of x86-64.
#[no_mangle]
pub extern "C" fn jsimd_can_idct_4x4() -> c_int {
    ON as c_int
}

#[no_mangle]
pub extern "C" fn jsimd_can_idct_6x6() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn jsimd_can_idct_12x12() -> c_int {
    0
}

/// # Safety
/// libjpeg's contract (jddctmgr.c): `compptr->dct_table` holds the component's 64 `int`
/// ISLOW multipliers, `coef_block` 64 coefficients and `output_buf[0..2]` rows with at least
/// `output_col + 2` samples.
#[no_mangle]
pub unsafe extern "C" fn jsimd_idct_2x2(
    _cinfo: Decompress,
    compptr: CompInfo,
    coef_block: CoefPtr,
    output_buf: SampArray,
    output_col: ffi::JDIMENSION,
) {
    // SAFETY: the caller's contract above; SSE2 is baseline on x86-64.
    unsafe {
        let table = (*(compptr as *const Component)).dct_table as *const i32;
        idct_red::idct_2x2_sse2(table, coef_block, output_buf, output_col as usize)
    }
}

/// # Safety
/// libjpeg's contract (jddctmgr.c): `compptr->dct_table` holds the component's 64 `int`
/// ISLOW multipliers, `coef_block` 64 coefficients and `output_buf[0..4]` rows with at least
/// `output_col + 4` samples.
#[no_mangle]
pub unsafe extern "C" fn jsimd_idct_4x4(
    _cinfo: Decompress,
    compptr: CompInfo,
    coef_block: CoefPtr,
    output_buf: SampArray,
    output_col: ffi::JDIMENSION,
) {
    // SAFETY: the caller's contract above; SSE2 is baseline on x86-64.
    unsafe {
        let table = (*(compptr as *const Component)).dct_table as *const i32;
        idct_red::idct_4x4_sse2(table, coef_block, output_buf, output_col as usize)
    }
}

/// # Safety
/// Never called (`jsimd_can_idct_6x6` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_idct_6x6(
    _cinfo: Decompress,
    _compptr: CompInfo,
    _coef_block: CoefPtr,
    _output_buf: SampArray,
    _output_col: ffi::JDIMENSION,
) {
    unsupported("jsimd_idct_6x6")
}

/// # Safety
/// Never called (`jsimd_can_idct_12x12` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_idct_12x12(
    _cinfo: Decompress,
    _compptr: CompInfo,
    _coef_block: CoefPtr,
    _output_buf: SampArray,
    _output_col: ffi::JDIMENSION,
) {
    unsupported("jsimd_idct_12x12")
}

/// SSE2 is part of x86-64.
#[no_mangle]
pub extern "C" fn jsimd_can_idct_islow() -> c_int {
    ON as c_int
}

/// SSE2 is part of x86-64.
#[no_mangle]
pub extern "C" fn jsimd_can_idct_ifast() -> c_int {
    ON as c_int
}

#[no_mangle]
pub extern "C" fn jsimd_can_idct_float() -> c_int {
    0
}

/// # Safety
/// libjpeg's contract (jddctmgr.c): `compptr->dct_table` holds the component's 64 `int`
/// ISLOW multipliers, `coef_block` 64 coefficients and `output_buf[0..8]` rows with at least
/// `output_col + 8` samples.
#[no_mangle]
pub unsafe extern "C" fn jsimd_idct_islow(
    _cinfo: Decompress,
    compptr: CompInfo,
    coef_block: CoefPtr,
    output_buf: SampArray,
    output_col: ffi::JDIMENSION,
) {
    // SAFETY: the caller's contract above; SSE2 is baseline on x86-64.
    unsafe {
        let table = (*(compptr as *const Component)).dct_table as *const i32;
        idct_int::idct_islow_sse2(table, coef_block, output_buf, output_col as usize)
    }
}

/// # Safety
/// libjpeg's contract (jddctmgr.c): `compptr->dct_table` holds the component's 64 `int`
/// IFAST multipliers, `coef_block` 64 coefficients and `output_buf[0..8]` rows with at least
/// `output_col + 8` samples.
#[no_mangle]
pub unsafe extern "C" fn jsimd_idct_ifast(
    _cinfo: Decompress,
    compptr: CompInfo,
    coef_block: CoefPtr,
    output_buf: SampArray,
    output_col: ffi::JDIMENSION,
) {
    // SAFETY: the caller's contract above; SSE2 is baseline on x86-64.
    unsafe {
        let table = (*(compptr as *const Component)).dct_table as *const i32;
        idct_fast::idct_ifast_sse2(table, coef_block, output_buf, output_col as usize)
    }
}

/// # Safety
/// Never called (`jsimd_can_idct_float` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_idct_float(
    _cinfo: Decompress,
    _compptr: CompInfo,
    _coef_block: CoefPtr,
    _output_buf: SampArray,
    _output_col: ffi::JDIMENSION,
) {
    unsupported("jsimd_idct_float")
}

// Huffman encoding helpers (encoder).

#[no_mangle]
pub extern "C" fn jsimd_can_huff_encode_one_block() -> c_int {
    0
}

/// # Safety
/// Never called (`jsimd_can_huff_encode_one_block` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_huff_encode_one_block(
    _state: *mut c_void,
    _buffer: *mut u8,
    _block: CoefPtr,
    _last_dc_val: c_int,
    _dctbl: *mut c_void,
    _actbl: *mut c_void,
) -> *mut u8 {
    unsupported("jsimd_huff_encode_one_block")
}

#[no_mangle]
pub extern "C" fn jsimd_can_encode_mcu_AC_first_prepare() -> c_int {
    0
}

/// # Safety
/// Never called (`jsimd_can_encode_mcu_AC_first_prepare` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_encode_mcu_AC_first_prepare(
    _block: *const ffi::JCOEF,
    _jpeg_natural_order_start: *const c_int,
    _sl: c_int,
    _al: c_int,
    _values: *mut u16,
    _zerobits: *mut usize,
) {
    unsupported("jsimd_encode_mcu_AC_first_prepare")
}

#[no_mangle]
pub extern "C" fn jsimd_can_encode_mcu_AC_refine_prepare() -> c_int {
    0
}

/// # Safety
/// Never called (`jsimd_can_encode_mcu_AC_refine_prepare` is 0).
#[no_mangle]
pub unsafe extern "C" fn jsimd_encode_mcu_AC_refine_prepare(
    _block: *const ffi::JCOEF,
    _jpeg_natural_order_start: *const c_int,
    _sl: c_int,
    _al: c_int,
    _absvalues: *mut u16,
    _bits: *mut usize,
) -> c_int {
    unsupported("jsimd_encode_mcu_AC_refine_prepare")
}
