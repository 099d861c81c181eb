//! NumPy `.npy` and `.npz` files.
//!
//! Sizes declared in a header are checked against the bytes actually present before anything
//! is allocated, so a hostile header cannot make us allocate unboundedly.
use std::io::{Read, Seek, Write};
use std::path::Path;

use crate::{DType, Tensor, TensorError};

const MAGIC: &[u8] = b"\x93NUMPY";

fn err(what: &str, reason: impl Into<String>) -> TensorError {
    TensorError::Npy { what: what.to_string(), reason: reason.into() }
}

/// How a `descr` string maps to storage.
enum Descr {
    Dense(DType, bool),
    Bytes(usize),
    Unicode(usize, bool),
}

fn parse_descr(descr: &str, what: &str) -> Result<Descr, TensorError> {
    let unsupported = || err(what, format!("unsupported dtype descr '{}'", shown(descr)));
    let mut chars = descr.chars();
    let big = match chars.next() {
        Some('<' | '|' | '=') => false,
        Some('>') => true,
        _ => return Err(unsupported()),
    };
    let code = chars.as_str();
    let dense = |d: DType| Ok(Descr::Dense(d, big && d.size() != Some(1)));
    match code {
        "f4" => dense(DType::Float),
        "f8" => dense(DType::Double),
        "f2" => dense(DType::Half),
        "i1" => dense(DType::Int8),
        "i2" => dense(DType::Int16),
        "i4" => dense(DType::Int32),
        "i8" => dense(DType::Int64),
        "u1" => dense(DType::UInt8),
        "u2" => dense(DType::UInt16),
        "u4" => dense(DType::UInt32),
        "u8" => dense(DType::UInt64),
        "b1" => dense(DType::Bool),
        "c8" => dense(DType::Complex64),
        "c16" => dense(DType::Complex128),
        _ if code.starts_with('S') => {
            code[1..].parse().map(Descr::Bytes).map_err(|_| err(what, format!("bad bytes descr '{}'", shown(descr))))
        }
        _ if code.starts_with('U') => code[1..]
            .parse()
            .map(|n| Descr::Unicode(n, big))
            .map_err(|_| err(what, format!("bad unicode descr '{}'", shown(descr)))),
        _ => Err(err(what, format!("unsupported dtype descr '{}' (object arrays cannot be read)", shown(descr)))),
    }
}

/// Extracts the value text of `'key': value` from a header dict.
fn dict_value<'a>(header: &'a str, key: &str, what: &str) -> Result<&'a str, TensorError> {
    let pat = format!("'{key}':");
    let start = header.find(&pat).ok_or_else(|| err(what, format!("header has no '{key}'")))? + pat.len();
    let rest = header[start..].trim_start();
    let end = if rest.starts_with('(') {
        rest.find(')').map(|i| i + 1)
    } else if let Some(r) = rest.strip_prefix('\'') {
        r.find('\'').map(|i| i + 2)
    } else {
        rest.find([',', '}'])
    };
    end.map(|e| rest[..e].trim()).ok_or_else(|| err(what, format!("header value for '{key}' is malformed")))
}

/// A header value as it appears in an error (at most 40 characters).
fn shown(text: &str) -> String {
    crate::shown::text(text, 40)
}

/// The fixed part of a `.npy` file before its header: magic, version and header length.
/// Returns where the header starts and how long it is; `bytes` holds at least the first 10
/// bytes of the file (12 for versions 2 and 3).
fn prelude(bytes: &[u8], what: &str) -> Result<(usize, usize), TensorError> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(err(what, "not a .npy file (bad magic)"));
    }
    match bytes[6] {
        1 => Ok((10, u16::from_le_bytes([bytes[8], bytes[9]]) as usize)),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(err(what, "truncated header"));
            }
            Ok((12, u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize))
        }
        v => Err(err(what, format!("unsupported .npy version {v}"))),
    }
}

/// A parsed `.npy` header: what the data is and how many bytes it takes.
struct Header {
    descr: Descr,
    descr_text: String,
    fortran: bool,
    dims: Vec<usize>,
    count: usize,
    item: usize,
    /// Bytes of data the header declares (`count * item`).
    need: usize,
}

fn parse_header(header: &[u8], what: &str) -> Result<Header, TensorError> {
    let header = std::str::from_utf8(header).map_err(|_| err(what, "header is not text"))?;
    let descr_text = dict_value(header, "descr", what)?;
    let descr_text = descr_text.trim_matches('\'');
    let fortran = match dict_value(header, "fortran_order", what)? {
        "True" => true,
        "False" => false,
        v => return Err(err(what, format!("fortran_order must be True or False, got '{}'", shown(v)))),
    };
    let shape_text = dict_value(header, "shape", what)?;
    let inner = shape_text
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| err(what, format!("shape must be a tuple, got '{}'", shown(shape_text))))?;
    let dims: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L')
                .parse::<usize>()
                .map_err(|_| err(what, format!("bad dimension '{}' in shape", shown(s))))
        })
        .collect::<Result<_, _>>()?;
    let count = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| err(what, "shape overflows"))?;
    let descr = parse_descr(descr_text, what)?;
    let item = match descr {
        Descr::Dense(d, _) => d.size().expect("dense dtypes have a size"),
        Descr::Bytes(n) => n,
        Descr::Unicode(n, _) => n.checked_mul(4).ok_or_else(|| err(what, "descr too large"))?,
    };
    let need = count.checked_mul(item).ok_or_else(|| err(what, "data size overflows"))?;
    if matches!(descr, Descr::Bytes(_) | Descr::Unicode(..)) {
        // One vector per element besides the bytes: `S0` holds any count of empty strings
        // in no bytes at all.
        let held = count.saturating_mul(std::mem::size_of::<Vec<u8>>()).saturating_add(need);
        crate::limit::check(held, || format!("string array of shape {} read from {what}", crate::shown::dims(&dims)))?;
    }
    Ok(Header { descr, descr_text: shown(descr_text), fortran, dims, count, item, need })
}

impl Header {
    fn truncated(&self, what: &str, have: u64) -> TensorError {
        err(
            what,
            format!(
                "truncated data: shape {} of '{}' needs {} bytes, file has {have}",
                crate::shown::dims(&self.dims),
                self.descr_text,
                self.need
            ),
        )
    }
}

/// Parses a `.npy` file's bytes; `what` names the file in errors.
pub fn read_npy_bytes(bytes: &[u8], what: &str) -> Result<Tensor, TensorError> {
    let (hstart, hlen) = prelude(bytes, what)?;
    let data_start =
        hstart.checked_add(hlen).filter(|&e| e <= bytes.len()).ok_or_else(|| err(what, "truncated header"))?;
    let h = parse_header(&bytes[hstart..data_start], what)?;
    let data = &bytes[data_start..];
    if data.len() < h.need {
        return Err(h.truncated(what, data.len() as u64));
    }
    decode(&h, &data[..h.need], what)
}

/// Reads a `.npy` file from a stream holding `len` bytes where known (an archive member's
/// declared size). The header is read first and the data size it declares is checked against
/// `len` and the memory limit ([`crate::limit`]) before the data is read, through a bounded
/// reader: a lying header fails without reading (or allocating) more than is really there.
pub fn read_npy_from(mut reader: impl Read, what: &str, len: Option<u64>) -> Result<Tensor, TensorError> {
    let io = |e: std::io::Error| err(what, format!("cannot read: {e}"));
    let mut head = [0u8; 12];
    let mut got = fill(&mut reader, &mut head[..10]).map_err(io)?;
    if got == 10 && matches!(head[6], 2 | 3) {
        got += fill(&mut reader, &mut head[10..]).map_err(io)?;
    }
    let (hstart, hlen) = prelude(&head[..got], what)?;
    let data_start = (hstart as u64).saturating_add(hlen as u64);
    if len.is_some_and(|len| data_start > len) {
        return Err(err(what, "truncated header"));
    }
    let mut header = Vec::new();
    (&mut reader).take(hlen as u64).read_to_end(&mut header).map_err(io)?;
    if header.len() < hlen {
        return Err(err(what, "truncated header"));
    }
    let h = parse_header(&header, what)?;
    if let Some(len) = len {
        let have = len - data_start;
        if (h.need as u64) > have {
            return Err(h.truncated(what, have));
        }
    }
    crate::limit::check(h.need, || {
        format!("'{}' array of shape {} read from {what}", h.descr_text, crate::shown::dims(&h.dims))
    })?;
    let mut data = Vec::new();
    reader.take(h.need as u64).read_to_end(&mut data).map_err(io)?;
    if data.len() < h.need {
        return Err(h.truncated(what, data.len() as u64));
    }
    decode(&h, &data, what)
}

/// Reads until `buf` is full or the input ends; the number of bytes read.
fn fill(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Builds the tensor from exactly `h.need` bytes of data.
fn decode(h: &Header, data: &[u8], what: &str) -> Result<Tensor, TensorError> {
    let (dims, item, count, fortran) = (&h.dims[..], h.item, h.count, h.fortran);
    let tensor = match h.descr {
        Descr::Dense(dtype, big_endian) => {
            let mut owned;
            let mut raw = data;
            if big_endian {
                let half = if matches!(dtype, DType::Complex64 | DType::Complex128) { 2 } else { 1 };
                let w = item / half;
                owned = data.to_vec();
                for chunk in owned.chunks_mut(w) {
                    chunk.reverse();
                }
                raw = &owned;
            }
            if fortran && dims.len() > 1 {
                owned = fortran_to_c(raw, dims, item);
                raw = &owned;
            }
            Tensor::from_bytes(dtype, dims, raw)?
        }
        Descr::Bytes(n) => {
            let strings = (0..count)
                .map(|i| {
                    let s = &data[i * n..(i + 1) * n];
                    let end = s.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
                    s[..end].to_vec()
                })
                .collect();
            reorder_strings(Tensor::from_strings(dims, strings)?, fortran)?
        }
        Descr::Unicode(n, big) => {
            let mut strings = Vec::with_capacity(count);
            for i in 0..count {
                let mut s = String::new();
                for c in data[i * n * 4..(i + 1) * n * 4].chunks(4) {
                    let arr = [c[0], c[1], c[2], c[3]];
                    let cp = if big { u32::from_be_bytes(arr) } else { u32::from_le_bytes(arr) };
                    if cp == 0 {
                        break;
                    }
                    s.push(char::from_u32(cp).ok_or_else(|| err(what, format!("invalid code point {cp:#x}")))?);
                }
                strings.push(s.into_bytes());
            }
            reorder_strings(Tensor::from_strings(dims, strings)?, fortran)?
        }
    };
    Ok(tensor)
}

fn reorder_strings(t: Tensor, fortran: bool) -> Result<Tensor, TensorError> {
    if !fortran || t.rank() < 2 {
        return Ok(t);
    }
    let dims = t.dims().to_vec();
    let src = t.as_strings()?;
    let order = fortran_order_indices(&dims);
    Tensor::from_strings(&dims, order.into_iter().map(|i| src[i].clone()).collect())
}

/// For each C-order position, the index of that element in Fortran-order storage.
fn fortran_order_indices(dims: &[usize]) -> Vec<usize> {
    let n: usize = dims.iter().product();
    let mut fstride = vec![1usize; dims.len()];
    for i in 1..dims.len() {
        fstride[i] = fstride[i - 1] * dims[i - 1];
    }
    (0..n)
        .map(|mut c| {
            let mut f = 0;
            for ax in (0..dims.len()).rev() {
                f += (c % dims[ax]) * fstride[ax];
                c /= dims[ax];
            }
            f
        })
        .collect()
}

fn fortran_to_c(raw: &[u8], dims: &[usize], item: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    for f in fortran_order_indices(dims) {
        out.extend_from_slice(&raw[f * item..(f + 1) * item]);
    }
    out
}

fn descr_of(t: &Tensor) -> Result<String, TensorError> {
    Ok(match t.dtype() {
        DType::Float => "<f4".into(),
        DType::Double => "<f8".into(),
        DType::Half => "<f2".into(),
        DType::Int8 => "|i1".into(),
        DType::Int16 => "<i2".into(),
        DType::Int32 => "<i4".into(),
        DType::Int64 => "<i8".into(),
        DType::UInt8 => "|u1".into(),
        DType::UInt16 => "<u2".into(),
        DType::UInt32 => "<u4".into(),
        DType::UInt64 => "<u8".into(),
        DType::Bool => "|b1".into(),
        DType::Complex64 => "<c8".into(),
        DType::Complex128 => "<c16".into(),
        DType::String => format!("|S{}", t.as_strings()?.iter().map(Vec::len).max().unwrap_or(0).max(1)),
        d => return Err(TensorError::Npy { what: "tensor".into(), reason: format!("{d} has no .npy representation") }),
    })
}

/// Encodes a tensor as `.npy` bytes (format version 1.0, C order).
pub fn write_npy_bytes(t: &Tensor) -> Result<Vec<u8>, TensorError> {
    let descr = descr_of(t)?;
    let shape = match t.dims() {
        [d] => format!("({d},)"),
        dims => format!("({})", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + t.as_bytes().map_or(0, <[u8]>::len));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    if t.dtype() == DType::String {
        let width: usize = descr[2..].parse().expect("descr_of writes |S<width>");
        for s in t.as_strings()? {
            out.extend_from_slice(s);
            out.resize(out.len() + width - s.len(), 0);
        }
    } else {
        out.extend_from_slice(t.as_bytes()?);
    }
    Ok(out)
}

/// Reads a `.npy` file.
pub fn read_npy(path: &Path) -> Result<Tensor, TensorError> {
    let what = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| TensorError::Io { path: what.clone(), source: e })?;
    read_npy_bytes(&bytes, &what)
}

/// Writes a `.npy` file atomically (temporary file, then rename).
pub fn write_npy(path: &Path, t: &Tensor) -> Result<(), TensorError> {
    crate::fs::write_atomic(path, &write_npy_bytes(t)?)
}

/// Reads every array of an `.npz` archive, in archive order, keyed by name without `.npy`.
pub fn read_npz(path: &Path) -> Result<Vec<(String, Tensor)>, TensorError> {
    let what = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| TensorError::Io { path: what.clone(), source: e })?;
    read_npz_from(file, &what)
}

/// Reads an `.npz` archive from any seekable reader.
///
/// Each member's declared uncompressed size is checked against the memory limit
/// ([`crate::limit`]) before it is read, and its `.npy` header's shape × dtype size against
/// that declared size and the limit before its data is read; the data is read through a
/// bounded reader. A zip bomb or a lying header fails naming the member and the sizes, having
/// read no more than the header.
pub fn read_npz_from<R: Read + Seek>(reader: R, what: &str) -> Result<Vec<(String, Tensor)>, TensorError> {
    let mut zip =
        zip::ZipArchive::new(reader).map_err(|e| err(what, format!("not a valid .npz (zip) archive: {e}")))?;
    let mut out = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).map_err(|e| err(what, format!("bad archive member {i}: {e}")))?;
        let name = entry.name().to_string();
        let key = name.strip_suffix(".npy").unwrap_or(&name).to_string();
        let member = format!("{what}[{}]", shown(&name));
        let declared = entry.size();
        let compressed = entry.compressed_size();
        crate::limit::check(usize::try_from(declared).unwrap_or(usize::MAX), || {
            format!("member of {declared} bytes ({compressed} compressed) read from {member}")
        })?;
        let t = read_npy_from(&mut entry, &member, Some(declared))?;
        // Read to the member's end (nothing is kept) so that the archive checks its CRC.
        std::io::copy(&mut (&mut entry).take(declared), &mut std::io::sink())
            .map_err(|e| err(&member, format!("cannot read: {e}")))?;
        out.push((key, t));
    }
    Ok(out)
}

/// Writes an `.npz` archive (stored, like `numpy.savez`) atomically.
pub fn write_npz(path: &Path, arrays: &[(String, Tensor)]) -> Result<(), TensorError> {
    let mut cursor = std::io::Cursor::new(Vec::new());
    {
        let mut zip = zip::ZipWriter::new(&mut cursor);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(true);
        for (name, t) in arrays {
            zip.start_file(format!("{name}.npy"), opts).map_err(|e| err(&path.display().to_string(), e.to_string()))?;
            zip.write_all(&write_npy_bytes(t)?)
                .map_err(|e| TensorError::Io { path: path.display().to_string(), source: e })?;
        }
        zip.finish().map_err(|e| err(&path.display().to_string(), e.to_string()))?;
    }
    crate::fs::write_atomic(path, &cursor.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_all_dense_types() {
        let ts = vec![
            Tensor::from_vec(&[2, 3], vec![1.5f32, -2.0, 3.0, 4.0, 5.0, 6.0]).unwrap(),
            Tensor::from_vec(&[3], vec![1i64, -2, 3]).unwrap(),
            Tensor::from_vec(&[], vec![true]).unwrap(),
            Tensor::from_vec(&[0, 4], Vec::<f64>::new()).unwrap(),
            Tensor::from_strings(&[2], vec![b"ab".to_vec(), b"".to_vec()]).unwrap(),
        ];
        for t in ts {
            let bytes = write_npy_bytes(&t).unwrap();
            if let Ok(data) = t.as_bytes() {
                // numpy pads the header so the data starts 64-byte aligned.
                assert!((bytes.len() - data.len()).is_multiple_of(64));
            }
            assert_eq!(read_npy_bytes(&bytes, "t").unwrap(), t);
        }
    }

    #[test]
    fn fortran_order_and_big_endian() {
        // np.asfortranarray([[1,2,3],[4,5,6]], dtype='>i4')
        let header = "{'descr': '>i4', 'fortran_order': True, 'shape': (2, 3), }";
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[1, 0]);
        b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        for v in [1i32, 4, 2, 5, 3, 6] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        let t = read_npy_bytes(&b, "t").unwrap();
        assert_eq!(t.as_slice::<i32>().unwrap(), &[1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn malformed_files_are_errors() {
        let good = write_npy_bytes(&Tensor::from_vec(&[4], vec![1.0f32; 4]).unwrap()).unwrap();
        for cut in [0, 5, 9, 20, good.len() - 1] {
            let e = read_npy_bytes(&good[..cut], "x.npy").unwrap_err().to_string();
            assert!(e.contains("x.npy"), "{e}");
        }
        let mut huge = good.clone();
        let s = String::from_utf8_lossy(&huge[10..]).replace("(4,)", "(9999999999999,)");
        huge.truncate(10);
        huge.extend_from_slice(s.as_bytes());
        let e = read_npy_bytes(&huge, "x.npy").unwrap_err().to_string();
        assert!(e.contains("truncated") || e.contains("header"), "{e}");
        let mut obj = good.clone();
        let at = obj.windows(3).position(|w| w == b"<f4").unwrap();
        obj[at..at + 3].copy_from_slice(b"|O8");
        let e = read_npy_bytes(&obj, "x.npy").unwrap_err().to_string();
        assert!(e.contains("|O8"), "{e}");
    }

    #[test]
    fn a_descr_with_non_ascii_characters_is_an_error() {
        // Found by libFuzzer: splitting the descr inside a UTF-8 sequence panicked.
        for descr in ["\u{e9}f4", "<\u{e9}", "\u{1F600}", ""] {
            let header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (1,), }}");
            let mut b = MAGIC.to_vec();
            b.extend_from_slice(&[1, 0]);
            b.extend_from_slice(&(header.len() as u16).to_le_bytes());
            b.extend_from_slice(header.as_bytes());
            b.extend_from_slice(&[0; 8]);
            let e = read_npy_bytes(&b, "x.npy").unwrap_err().to_string();
            assert!(e.contains("x.npy") && e.contains("descr"), "{e}");
        }
    }

    #[test]
    fn npz_round_trip() {
        let dir = std::env::temp_dir().join(format!("ff-npz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.npz");
        let arrays = vec![
            ("x:0".to_string(), Tensor::from_vec(&[2], vec![1.0f32, 2.0]).unwrap()),
            ("Identity:0".to_string(), Tensor::scalar(3i32)),
        ];
        write_npz(&p, &arrays).unwrap();
        assert_eq!(read_npz(&p).unwrap(), arrays);
        std::fs::write(&p, b"PK\x03\x04garbage").unwrap();
        assert!(read_npz(&p).unwrap_err().to_string().contains("a.npz"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An `.npz` holding one member `name` with `bytes`, stored or deflated.
    fn npz_with(name: &str, bytes: &[u8], method: zip::CompressionMethod) -> Vec<u8> {
        let mut cursor = std::io::Cursor::new(Vec::new());
        let mut zip = zip::ZipWriter::new(&mut cursor);
        zip.start_file(name, zip::write::SimpleFileOptions::default().compression_method(method)).unwrap();
        zip.write_all(bytes).unwrap();
        zip.finish().unwrap();
        cursor.into_inner()
    }

    /// A `.npy` header declaring `shape` of `descr`, followed by `data` bytes of zeros.
    fn npy_with(descr: &str, shape: &str, data: usize) -> Vec<u8> {
        let header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[1, 0]);
        b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        b.resize(b.len() + data, 0);
        b
    }

    #[test]
    fn an_npz_bomb_is_refused_before_it_is_inflated() {
        // 32 MiB of zeros deflate to ~32 KB; under a 16 MiB limit the member's declared size
        // is refused before anything is inflated (it used to be read whole, then copied).
        let npy = npy_with("<f4", "(8388608,)", 32 << 20);
        let npz = npz_with("x.npy", &npy, zip::CompressionMethod::Deflated);
        assert!(npz.len() < 1 << 20, "{}", npz.len());
        let _limit = crate::limit::scoped(16 << 20);
        let e = read_npz_from(std::io::Cursor::new(&npz), "bomb.npz").unwrap_err().to_string();
        assert!(e.contains("resource exhausted") && e.contains("bomb.npz[x.npy]"), "{e}");
        assert!(e.contains(&format!("{} bytes", npy.len())) && e.contains("16777216"), "{e}");
        // Where the limit allows it, the same archive reads.
        let _limit = crate::limit::scoped(64 << 20);
        let t = read_npz_from(std::io::Cursor::new(&npz), "bomb.npz").unwrap();
        assert_eq!(t[0].1.dims(), [8388608]);
    }

    #[test]
    fn npz_members_that_lie_about_their_size_are_refused_before_reading() {
        // A stored member whose directory entries declare 4 GiB (a 4 KB file).
        let npy = npy_with("<f4", "(4,)", 16);
        let mut npz = npz_with("x.npy", &npy, zip::CompressionMethod::Stored);
        let huge = 0xffff_ff00u32.to_le_bytes();
        let local = npz.windows(4).position(|w| w == b"PK\x03\x04").unwrap();
        npz[local + 22..local + 26].copy_from_slice(&huge);
        let central = npz.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
        npz[central + 24..central + 28].copy_from_slice(&huge);
        let _limit = crate::limit::scoped(1 << 30);
        let e = read_npz_from(std::io::Cursor::new(&npz), "lie.npz").unwrap_err().to_string();
        assert!(e.contains("lie.npz[x.npy]") && e.contains("4294967040 bytes") && e.contains("1073741824"), "{e}");
        // An honest member whose .npy header declares 1 GiB of data but holds 16 bytes: an
        // error before any data is read.
        let npy = npy_with("<f4", "(268435456,)", 16);
        let npz = npz_with("y.npy", &npy, zip::CompressionMethod::Deflated);
        let e = read_npz_from(std::io::Cursor::new(&npz), "short.npz").unwrap_err().to_string();
        assert!(e.contains("short.npz[y.npy]") && e.contains("needs 1073741824 bytes, file has 16"), "{e}");
        // Over the limit: named with its shape.
        let npy = npy_with("<f4", "(268435456,)", 16);
        let _limit = crate::limit::scoped(1 << 20);
        let e = read_npy_from(std::io::Cursor::new(&npy), "big.npy", None).unwrap_err().to_string();
        assert!(e.contains("big.npy") && e.contains("[268435456]") && e.contains("1073741824 bytes"), "{e}");
        // `S0` holds any number of empty strings in no bytes: refused by the limit.
        let npy = npy_with("|S0", "(1000000000000,)", 0);
        let e = read_npy_bytes(&npy, "s0.npy").unwrap_err().to_string();
        assert!(e.contains("s0.npy") && e.contains("resource exhausted"), "{e}");
    }

    #[test]
    fn streamed_npy_matches_the_bytes_reader() {
        let good = write_npy_bytes(&Tensor::from_vec(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0]).unwrap()).unwrap();
        for cut in 0..=good.len() {
            let a = read_npy_bytes(&good[..cut], "x.npy").map_err(|e| e.to_string());
            let b = read_npy_from(std::io::Cursor::new(&good[..cut]), "x.npy", None).map_err(|e| e.to_string());
            let c =
                read_npy_from(std::io::Cursor::new(&good[..cut]), "x.npy", Some(cut as u64)).map_err(|e| e.to_string());
            assert_eq!(a, b, "cut {cut}");
            assert_eq!(a, c, "cut {cut}");
        }
    }
}
