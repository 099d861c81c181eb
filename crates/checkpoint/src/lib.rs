//! TensorFlow's checkpoint V2 "tensor bundle": `PREFIX.index` (a sorted table of
//! `BundleEntryProto`s under tensor names, `BundleHeaderProto` under the empty key) and
//! `PREFIX.data-00000-of-00001` (the tensors' bytes back to back), byte-compatible with what
//! TensorFlow's `SaveV2` writes (shared/reference/tf-formats.md §3).
//!
//! Both files are written under temporary names, synced and renamed into place (data first,
//! so an `.index` never names bytes that are not there). Reading checks the table's block
//! CRCs, every entry's offset and size against the data file, and each tensor's CRC32C.
#![warn(missing_docs)]

pub mod table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ferroflow_proto::{tensor_shape_proto::Dim, BundleEntryProto, BundleHeaderProto, TensorShapeProto, VersionDef};
use ferroflow_summary::crc32c::masked_crc32c;
use ferroflow_tensor::{DType, Tensor};
use prost::Message;

/// An error reading or writing a checkpoint; names the file and, where known, the tensor.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file is malformed.
    #[error("{path}: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong (naming the tensor where one is concerned).
        reason: String,
    },
    /// A tensor that is not in the checkpoint.
    #[error("{path}: no tensor named '{name}' in the checkpoint")]
    NotFound {
        /// The index file.
        path: String,
        /// The tensor.
        name: String,
    },
    /// A tensor that cannot be saved.
    #[error("cannot save tensor '{name}': {reason}")]
    Unsupported {
        /// The tensor.
        name: String,
        /// Why.
        reason: String,
    },
}

type Result<T> = std::result::Result<T, CheckpointError>;

/// `PREFIX.index`.
pub fn index_path(prefix: &Path) -> PathBuf {
    PathBuf::from(format!("{}.index", prefix.display()))
}

/// `PREFIX.data-00000-of-00001` (shard `i` of `n`: `PREFIX.data-0000i-of-0000n`).
pub fn data_path(prefix: &Path, shard: i32, num_shards: i32) -> PathBuf {
    PathBuf::from(format!("{}.data-{shard:05}-of-{num_shards:05}", prefix.display()))
}

fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// CRC32C continued over `data` (`Extend` in TensorFlow's terms).
fn extend(crc: u32, data: &[u8]) -> u32 {
    // crc32c(a || b) from crc32c(a): run over the concatenation incrementally.
    ferroflow_summary::crc32c::crc32c_extend(crc, data)
}

/// A tensor's bytes as stored in the data file, and their masked CRC32C.
fn encode(name: &str, t: &Tensor) -> Result<(Vec<u8>, u32)> {
    if t.dtype() == DType::String {
        let strings =
            t.as_strings().map_err(|e| CheckpointError::Unsupported { name: name.into(), reason: e.to_string() })?;
        let mut out = Vec::new();
        let mut c = 0u32;
        for s in strings {
            let mut v = Vec::new();
            let len = s.len() as u64;
            let mut l = len;
            while l >= 0x80 {
                v.push((l as u8) | 0x80);
                l >>= 7;
            }
            v.push(l as u8);
            out.extend_from_slice(&v);
            c = if len <= u32::MAX as u64 {
                extend(c, &(len as u32).to_le_bytes())
            } else {
                extend(c, &len.to_le_bytes())
            };
        }
        let masked_len = mask(c);
        out.extend_from_slice(&masked_len.to_le_bytes());
        c = extend(c, &masked_len.to_le_bytes());
        for s in strings {
            out.extend_from_slice(s);
            c = extend(c, s);
        }
        return Ok((out, mask(c)));
    }
    let bytes = t.as_bytes().map_err(|e| CheckpointError::Unsupported { name: name.into(), reason: e.to_string() })?;
    Ok((bytes.to_vec(), masked_crc32c(bytes)))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    ferroflow_tensor::npy::write_atomic(path, bytes).map_err(|e| CheckpointError::Io {
        path: path.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    })
}

/// Writes `tensors` (name → value; saved in the given order, indexed by name) as the bundle
/// `PREFIX.index` + `PREFIX.data-00000-of-00001`.
pub fn write_bundle(prefix: &Path, tensors: &[(String, Tensor)]) -> Result<()> {
    let mut data = Vec::new();
    let mut entries: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for (name, t) in tensors {
        if name.is_empty() {
            return Err(CheckpointError::Unsupported {
                name: name.clone(),
                reason: "the empty name is the header's".into(),
            });
        }
        let (bytes, crc) = encode(name, t)?;
        let entry = BundleEntryProto {
            dtype: t.dtype().to_tf(),
            shape: Some(TensorShapeProto {
                dim: t.dims().iter().map(|&d| Dim { size: d as i64, name: String::new() }).collect(),
                unknown_rank: false,
            }),
            shard_id: 0,
            offset: data.len() as i64,
            size: bytes.len() as i64,
            crc32c: crc,
            slices: vec![],
        };
        data.extend_from_slice(&bytes);
        if entries.insert(name.as_bytes().to_vec(), entry.encode_to_vec()).is_some() {
            return Err(CheckpointError::Unsupported { name: name.clone(), reason: "saved twice".into() });
        }
    }
    let header = BundleHeaderProto {
        num_shards: 1,
        endianness: 0,
        version: Some(VersionDef { producer: 1, min_consumer: 0, bad_consumers: vec![] }),
    };
    let mut sorted = vec![(Vec::new(), header.encode_to_vec())];
    sorted.extend(entries);
    let index = table::build(&sorted).map_err(|e| CheckpointError::Corrupt {
        path: index_path(prefix).display().to_string(),
        reason: e.to_string(),
    })?;
    write_file(&data_path(prefix, 0, 1), &data)?;
    write_file(&index_path(prefix), &index)
}

/// An opened bundle: its header and entries, by name.
pub struct BundleReader {
    prefix: PathBuf,
    header: BundleHeaderProto,
    entries: BTreeMap<String, BundleEntryProto>,
}

impl BundleReader {
    /// Reads and checks `PREFIX.index`.
    pub fn open(prefix: &Path) -> Result<BundleReader> {
        let path = index_path(prefix);
        let p = path.display().to_string();
        let bytes = std::fs::read(&path).map_err(|source| CheckpointError::Io { path: p.clone(), source })?;
        let corrupt = |reason: String| CheckpointError::Corrupt { path: p.clone(), reason };
        let rows = table::read(&bytes).map_err(|e| corrupt(e.to_string()))?;
        let mut header = None;
        let mut entries = BTreeMap::new();
        for (k, v) in rows {
            if k.is_empty() {
                header =
                    Some(BundleHeaderProto::decode(v.as_slice()).map_err(|e| corrupt(format!("bad header: {e}")))?);
                continue;
            }
            let name = String::from_utf8(k).map_err(|_| corrupt("a tensor name is not UTF-8".into()))?;
            let e = BundleEntryProto::decode(v.as_slice())
                .map_err(|err| corrupt(format!("tensor '{name}': bad BundleEntryProto: {err}")))?;
            entries.insert(name, e);
        }
        let header = header.ok_or_else(|| corrupt("no BundleHeaderProto under the empty key".into()))?;
        if header.endianness != 0 {
            return Err(corrupt("big-endian bundles are not supported".into()));
        }
        if header.num_shards < 1 {
            return Err(corrupt(format!("num_shards {} < 1", header.num_shards)));
        }
        Ok(BundleReader { prefix: prefix.to_path_buf(), header, entries })
    }

    /// The header.
    pub fn header(&self) -> &BundleHeaderProto {
        &self.header
    }

    /// Every tensor's name and entry, sorted by name.
    pub fn entries(&self) -> &BTreeMap<String, BundleEntryProto> {
        &self.entries
    }

    /// Reads tensor `name`, checking its entry against the data file and its CRC32C.
    pub fn read(&self, name: &str) -> Result<Tensor> {
        let e = self.entries.get(name).ok_or_else(|| CheckpointError::NotFound {
            path: index_path(&self.prefix).display().to_string(),
            name: name.into(),
        })?;
        let path = data_path(&self.prefix, e.shard_id, self.header.num_shards);
        let p = path.display().to_string();
        let corrupt =
            |reason: String| CheckpointError::Corrupt { path: p.clone(), reason: format!("tensor '{name}': {reason}") };
        let dtype = DType::from_tf(e.dtype).map_err(|err| corrupt(err.to_string()))?;
        let dims: Vec<usize> = e
            .shape
            .as_ref()
            .map(|s| s.dim.iter().map(|d| usize::try_from(d.size)).collect::<std::result::Result<_, _>>())
            .transpose()
            .map_err(|_| corrupt("negative dimension".into()))?
            .unwrap_or_default();
        let n = dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
            .ok_or_else(|| corrupt("shape overflows".into()))?;
        if let Some(size) = dtype.size() {
            if n.checked_mul(size as u64) != Some(e.size as u64) {
                return Err(corrupt(format!("Invalid size in bundle entry: {} bytes for {dtype}{dims:?}", e.size)));
            }
        }
        let mut f = std::fs::File::open(&path).map_err(|source| CheckpointError::Io { path: p.clone(), source })?;
        let len = f.metadata().map_err(|source| CheckpointError::Io { path: p.clone(), source })?.len();
        if e.offset < 0 || e.size < 0 || (e.offset as u64).checked_add(e.size as u64).is_none_or(|end| end > len) {
            return Err(corrupt(format!(
                "entry {}+{} points past the end of the data file ({len} bytes)",
                e.offset, e.size
            )));
        }
        use std::io::{Read, Seek, SeekFrom};
        let mut bytes = vec![0u8; e.size as usize];
        f.seek(SeekFrom::Start(e.offset as u64))
            .and_then(|_| f.read_exact(&mut bytes))
            .map_err(|source| CheckpointError::Io { path: p.clone(), source })?;
        if dtype == DType::String {
            return decode_strings(&bytes, &dims, n as usize, e.crc32c).map_err(corrupt);
        }
        if masked_crc32c(&bytes) != e.crc32c {
            return Err(corrupt("data CRC32C mismatch (the file is corrupted)".into()));
        }
        Tensor::from_bytes(dtype, &dims, &bytes).map_err(|err| corrupt(err.to_string()))
    }
}

fn decode_strings(bytes: &[u8], dims: &[usize], n: usize, want: u32) -> std::result::Result<Tensor, String> {
    let mut pos = 0;
    let mut lens = Vec::with_capacity(n.min(bytes.len()));
    let mut c = 0u32;
    for _ in 0..n {
        let mut len = 0u64;
        let mut shift = 0;
        loop {
            let b = *bytes.get(pos).ok_or("truncated string lengths")?;
            pos += 1;
            len |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return Err("bad string length varint".into());
            }
        }
        c = if len <= u32::MAX as u64 { extend(c, &(len as u32).to_le_bytes()) } else { extend(c, &len.to_le_bytes()) };
        lens.push(len);
    }
    let masked = bytes.get(pos..pos + 4).ok_or("truncated length checksum")?;
    if u32::from_le_bytes(masked.try_into().expect("4 bytes")) != mask(c) {
        return Err("string length checksum mismatch".into());
    }
    c = extend(c, masked);
    pos += 4;
    let mut strings = Vec::with_capacity(lens.len());
    for len in lens {
        let end = pos.checked_add(len as usize).filter(|&e| e <= bytes.len()).ok_or("string runs past its entry")?;
        c = extend(c, &bytes[pos..end]);
        strings.push(bytes[pos..end].to_vec());
        pos = end;
    }
    if mask(c) != want {
        return Err("data CRC32C mismatch (the file is corrupted)".into());
    }
    Tensor::from_strings(dims, strings).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tf-formats.md §3.8: TensorFlow 2.21's SaveV2 of `v = [1.0, 2.0]`, byte for byte.
    #[test]
    fn worked_example_is_byte_identical_to_tensorflows() {
        let dir = std::env::temp_dir().join(format!("ff_ckpt_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let prefix = dir.join("model.ckpt");
        write_bundle(&prefix, &[("v".into(), Tensor::from_vec(&[2], vec![1.0f32, 2.0]).unwrap())]).unwrap();
        assert_eq!(std::fs::read(data_path(&prefix, 0, 1)).unwrap(), [0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]);
        let index = std::fs::read(index_path(&prefix)).unwrap();
        let hex = |s: &str| -> Vec<u8> { s.split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap()).collect() };
        let mut want = hex("00 00 06 08 01 1a 02 08 01 00 01 0f 76 08 01 12 04 12 02 08 02 28 08 35 59 3c e5 35");
        want.extend(hex("00 00 00 00 01 00 00 00 00 30 55 93 58"));
        want.extend(hex("00 00 00 00 01 00 00 00 00 c0 f2 a1 b0"));
        want.extend(hex("00 01 02 77 00 24 00 00 00 00 01 00 00 00 00 94 60 b2 cd"));
        want.extend(hex("29 08 36 0e"));
        want.extend([0u8; 36]);
        want.extend(hex("57 fb 80 8b 24 75 47 db"));
        assert_eq!(index.len(), 121);
        assert_eq!(index, want);
        let r = BundleReader::open(&prefix).unwrap();
        assert_eq!(r.read("v").unwrap(), Tensor::from_vec(&[2], vec![1.0f32, 2.0]).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn strings_match_tensorflows_layout() {
        let t = Tensor::from_strings(&[2], vec![b"ab".to_vec(), b"c".to_vec()]).unwrap();
        let (bytes, crc) = encode("s", &t).unwrap();
        assert_eq!(bytes, [0x02, 0x01, 0x03, 0x71, 0x7c, 0x67, 0x61, 0x62, 0x63]);
        assert_eq!(crc, 0x5fd8_30d5);
        assert_eq!(decode_strings(&bytes, &[2], 2, crc).unwrap(), t);
    }

    #[test]
    fn corruption_is_reported_with_file_and_tensor() {
        let dir = std::env::temp_dir().join(format!("ff_ckpt_bad_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let prefix = dir.join("m");
        let tensors = vec![
            ("a".to_string(), Tensor::from_vec(&[3], vec![1i64, 2, 3]).unwrap()),
            ("b".to_string(), Tensor::from_vec(&[2, 2], vec![0.5f64; 4]).unwrap()),
        ];
        write_bundle(&prefix, &tensors).unwrap();
        let data = data_path(&prefix, 0, 1);
        let good = std::fs::read(&data).unwrap();
        let mut flipped = good.clone();
        flipped[30] ^= 1;
        std::fs::write(&data, &flipped).unwrap();
        let e = BundleReader::open(&prefix).unwrap().read("b").unwrap_err().to_string();
        assert!(e.contains("data-00000-of-00001") && e.contains("'b'") && e.contains("CRC32C"), "{e}");
        std::fs::write(&data, &good[..20]).unwrap();
        let e = BundleReader::open(&prefix).unwrap().read("b").unwrap_err().to_string();
        assert!(e.contains("'b'") && e.contains("past the end"), "{e}");
        let idx = index_path(&prefix);
        let mut index = std::fs::read(&idx).unwrap();
        index[5] ^= 0x40;
        std::fs::write(&idx, &index).unwrap();
        let e = BundleReader::open(&prefix).err().unwrap().to_string();
        assert!(e.contains(".index") && e.contains("checksum mismatch"), "{e}");
        std::fs::write(&idx, &index[..30]).unwrap();
        assert!(BundleReader::open(&prefix).err().unwrap().to_string().contains("too short"));
        let e = BundleReader::open(&dir.join("nope")).err().unwrap().to_string();
        assert!(e.contains("nope.index"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
