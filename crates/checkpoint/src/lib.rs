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
use ferroflow_tensor::crc32c::{mask, masked_crc32c};
use ferroflow_tensor::{DType, Tensor};
use prost::Message;

/// An error reading or writing a checkpoint; names the file and, where known, the tensor.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// A tensor that cannot be built (e.g. too large for this machine).
    #[error("{0}")]
    Tensor(#[from] ferroflow_tensor::TensorError),
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

/// An entry's dtype name (`type N` for a number that is no dtype) and dimensions as stored,
/// for listings and messages.
pub fn entry_signature(e: &BundleEntryProto) -> (String, Vec<i64>) {
    let dtype = DType::from_tf(e.dtype).map(|d| d.to_string()).unwrap_or_else(|_| format!("type {}", e.dtype));
    (dtype, e.shape.as_ref().map(|s| s.dim.iter().map(|d| d.size).collect()).unwrap_or_default())
}

/// `PREFIX.index`.
pub fn index_path(prefix: &Path) -> PathBuf {
    PathBuf::from(format!("{}.index", prefix.display()))
}

/// `PREFIX.data-00000-of-00001` (shard `i` of `n`: `PREFIX.data-0000i-of-0000n`).
pub fn data_path(prefix: &Path, shard: i32, num_shards: i32) -> PathBuf {
    PathBuf::from(format!("{}.data-{shard:05}-of-{num_shards:05}", prefix.display()))
}

/// A name from a file as it appears in a message (at most 64 characters).
fn shown(name: &str) -> String {
    ferroflow_tensor::shown::text(name, 64)
}

/// CRC32C continued over `data` (`Extend` in TensorFlow's terms).
fn extend(crc: u32, data: &[u8]) -> u32 {
    // crc32c(a || b) from crc32c(a): run over the concatenation incrementally.
    ferroflow_tensor::crc32c::crc32c_extend(crc, data)
}

/// A string tensor's bytes as stored in the data file (varint lengths, their masked CRC,
/// then the bytes), and the masked CRC32C TensorFlow computes over them.
fn encode_strings(strings: &[Vec<u8>]) -> (Vec<u8>, u32) {
    let mut out = Vec::new();
    let mut c = 0u32;
    for s in strings {
        let len = s.len() as u64;
        let mut l = len;
        while l >= 0x80 {
            out.push((l as u8) | 0x80);
            l >>= 7;
        }
        out.push(l as u8);
        c = if len <= u32::MAX as u64 { extend(c, &(len as u32).to_le_bytes()) } else { extend(c, &len.to_le_bytes()) };
    }
    let masked_len = mask(c);
    out.extend_from_slice(&masked_len.to_le_bytes());
    c = extend(c, &masked_len.to_le_bytes());
    for s in strings {
        out.extend_from_slice(s);
        c = extend(c, s);
    }
    (out, mask(c))
}

fn io_error(path: &Path, e: impl std::fmt::Display) -> CheckpointError {
    CheckpointError::Io { path: path.display().to_string(), source: std::io::Error::other(e.to_string()) }
}

/// Writes `tensors` (name → value; saved in the given order, indexed by name) as the bundle
/// `PREFIX.index` + `PREFIX.data-00000-of-00001`, creating the prefix's directory if needed.
/// Each file is written under a temporary name, synced and renamed; the data file first, so
/// an `.index` never names bytes that are not on disk. Tensor bytes stream from the tensors
/// to the file (no copy of the whole checkpoint in memory).
pub fn write_bundle(prefix: &Path, tensors: &[(String, Tensor)]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for (name, t) in tensors {
        if !seen.insert(name.as_str()) {
            return Err(CheckpointError::Unsupported { name: name.clone(), reason: "saved twice".into() });
        }
        BundleWriter::check(name, t)?;
    }
    let mut w = BundleWriter::create(prefix)?;
    for (name, t) in tensors {
        w.add(name, t)?;
    }
    w.finish()
}

/// Bytes of tensor data checksummed and written at a time (fits the L2 cache).
const WRITE_CHUNK: usize = 256 << 10;

/// A bundle written one tensor at a time (a checkpoint, or a dataset cache filled as an
/// epoch runs): tensor bytes stream to a temporary data file; [`BundleWriter::finish`] renames
/// it into place and then writes the index atomically, so the bundle is complete (its
/// `.index` exists) or absent. Dropped unfinished, it leaves nothing behind.
pub struct BundleWriter {
    prefix: PathBuf,
    data: ferroflow_tensor::fs::AtomicFile,
    offset: u64,
    entries: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl BundleWriter {
    /// Starts the bundle at `prefix`, creating its directory if needed.
    pub fn create(prefix: &Path) -> Result<BundleWriter> {
        if let Some(dir) = prefix.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|source| CheckpointError::Io { path: dir.display().to_string(), source })?;
        }
        let data_file = data_path(prefix, 0, 1);
        let data = ferroflow_tensor::fs::AtomicFile::create(&data_file).map_err(|e| io_error(&data_file, e))?;
        Ok(BundleWriter { prefix: prefix.to_path_buf(), data, offset: 0, entries: BTreeMap::new() })
    }

    fn check(name: &str, t: &Tensor) -> Result<()> {
        let bad = |reason: &str| Err(CheckpointError::Unsupported { name: name.to_string(), reason: reason.into() });
        if name.is_empty() {
            return bad("the empty name is the header's");
        }
        if t.dtype() != DType::String && t.as_bytes().is_err() {
            return bad(&format!("{} tensors cannot be saved", t.dtype()));
        }
        Ok(())
    }

    /// Appends `t` under `name` (each name once).
    pub fn add(&mut self, name: &str, t: &Tensor) -> Result<()> {
        use std::io::Write;
        Self::check(name, t)?;
        if self.entries.contains_key(name.as_bytes()) {
            return Err(CheckpointError::Unsupported { name: name.to_string(), reason: "saved twice".into() });
        }
        let data_file = self.data.path().to_path_buf();
        let w = self.data.writer();
        let (size, crc) = match t.as_strings() {
            Ok(strings) => {
                let (bytes, crc) = encode_strings(strings);
                w.write_all(&bytes).map_err(|e| io_error(&data_file, e))?;
                (bytes.len(), crc)
            }
            Err(_) => {
                // Checksummed chunk by chunk just before each chunk is written, so the write
                // copies bytes the checksum brought into cache (one pass over memory, not two).
                let bytes = t.as_bytes().map_err(|e| io_error(&data_file, e))?;
                let mut crc = 0;
                for chunk in bytes.chunks(WRITE_CHUNK) {
                    crc = extend(crc, chunk);
                    w.write_all(chunk).map_err(|e| io_error(&data_file, e))?;
                }
                (bytes.len(), mask(crc))
            }
        };
        let entry = BundleEntryProto {
            dtype: t.dtype().to_tf(),
            shape: Some(TensorShapeProto {
                dim: t.dims().iter().map(|&d| Dim { size: d as i64, name: String::new() }).collect(),
                unknown_rank: false,
            }),
            shard_id: 0,
            offset: self.offset as i64,
            size: size as i64,
            crc32c: crc,
            slices: vec![],
        };
        self.offset += size as u64;
        self.entries.insert(name.as_bytes().to_vec(), entry.encode_to_vec());
        Ok(())
    }

    /// Bytes of tensor data written so far.
    pub fn data_bytes(&self) -> u64 {
        self.offset
    }

    /// Commits the data file, then writes the index (the bundle exists from this moment).
    pub fn finish(self) -> Result<()> {
        let data_file = self.data.path().to_path_buf();
        self.data.commit().map_err(|e| io_error(&data_file, e))?;
        let header = BundleHeaderProto {
            num_shards: 1,
            endianness: 0,
            version: Some(VersionDef { producer: 1, min_consumer: 0, bad_consumers: vec![] }),
        };
        let mut sorted = vec![(Vec::new(), header.encode_to_vec())];
        sorted.extend(self.entries);
        let index_file = index_path(&self.prefix);
        let index = table::build(&sorted)
            .map_err(|e| CheckpointError::Corrupt { path: index_file.display().to_string(), reason: e.to_string() })?;
        ferroflow_tensor::fs::write_atomic(&index_file, &index).map_err(|e| io_error(&index_file, e))
    }
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
        Self::from_index_bytes(prefix, &bytes)
    }

    /// Parses and checks the bytes of `PREFIX.index` (what [`BundleReader::open`] reads; the
    /// entry point of the table reader's fuzz target, `fuzz/fuzz_targets/bundle_index.rs`).
    pub fn from_index_bytes(prefix: &Path, bytes: &[u8]) -> Result<BundleReader> {
        let p = index_path(prefix).display().to_string();
        let corrupt = |reason: String| CheckpointError::Corrupt { path: p.clone(), reason };
        let rows = table::read(bytes).map_err(|e| corrupt(e.to_string()))?;
        let mut header = None;
        let mut entries = BTreeMap::new();
        for (i, (k, v)) in rows.into_iter().enumerate() {
            let too_large = |e: ferroflow_proto::ProtoError| corrupt(format!("entry {i}: {e}"));
            if k.is_empty() {
                ferroflow_proto::check_decoded_size::<BundleHeaderProto>(&v, "header").map_err(too_large)?;
                header = Some(
                    BundleHeaderProto::decode(v.as_slice())
                        .map_err(|e| corrupt(format!("bad header: {}", ferroflow_proto::decode_reason(&e))))?,
                );
                continue;
            }
            let name = String::from_utf8(k).map_err(|e| {
                corrupt(format!(
                    "entry {i}: the tensor name \"{}\" is not UTF-8",
                    ferroflow_proto::one_line(&e.as_bytes().escape_ascii().to_string(), 80)
                ))
            })?;
            ferroflow_proto::check_decoded_size::<BundleEntryProto>(&v, &format!("tensor '{}'", shown(&name)))
                .map_err(too_large)?;
            let e = BundleEntryProto::decode(v.as_slice()).map_err(|err| {
                let reason = ferroflow_proto::decode_reason(&err);
                corrupt(format!("tensor '{}': bad BundleEntryProto: {reason}", shown(&name)))
            })?;
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
        if e.shard_id < 0 || e.shard_id >= self.header.num_shards {
            return Err(CheckpointError::Corrupt {
                path: index_path(&self.prefix).display().to_string(),
                reason: format!(
                    "tensor '{}': shard_id {} is not below num_shards {}",
                    shown(name),
                    e.shard_id,
                    self.header.num_shards
                ),
            });
        }
        let path = data_path(&self.prefix, e.shard_id, self.header.num_shards);
        let p = path.display().to_string();
        let corrupt = |reason: String| CheckpointError::Corrupt {
            path: p.clone(),
            reason: format!("tensor '{}': {reason}", shown(name)),
        };
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
                return Err(corrupt(format!(
                    "Invalid size in bundle entry: {} bytes for {dtype}{}",
                    e.size,
                    ferroflow_tensor::shown::dims(&dims)
                )));
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
        let io = |source| CheckpointError::Io { path: p.clone(), source };
        f.seek(SeekFrom::Start(e.offset as u64)).map_err(io)?;
        if dtype == DType::String {
            // The bytes, then per string its length and its vector: the bytes bound the count
            // (every string takes at least one length byte).
            let strings = (n as usize).min(e.size as usize);
            let held = (e.size as usize).saturating_add(strings.saturating_mul(8 + std::mem::size_of::<Vec<u8>>()));
            ferroflow_tensor::limit::check(held, || {
                format!("string tensor '{}' {} in {p}", shown(name), ferroflow_tensor::shown::dims(&dims))
            })?;
            let mut bytes = vec![0u8; e.size as usize];
            f.read_exact(&mut bytes).map_err(io)?;
            return decode_strings(&bytes, &dims, n as usize, e.crc32c).map_err(corrupt);
        }
        if dtype.size().is_none() {
            return Err(corrupt(format!("{dtype} tensors cannot be restored")));
        }
        let t = Tensor::read_at(&f, e.offset as u64, dtype, &dims).map_err(|err| match err {
            ferroflow_tensor::TensorError::Io { source, .. } => CheckpointError::Io { path: p.clone(), source },
            other => corrupt(other.to_string()),
        })?;
        let bytes = t.as_bytes()?;
        // Bools were normalised to 0/1 on reading, as TensorFlow writes them; a stored bool
        // byte other than 0/1 therefore fails the CRC (it is not a TensorFlow bundle).
        if masked_crc32c(bytes) != e.crc32c {
            return Err(corrupt("data CRC32C mismatch (the file is corrupted)".into()));
        }
        Ok(t)
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
        let (bytes, crc) = encode_strings(t.as_strings().unwrap());
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

    /// Hostile but well-formed index entries (any dtype number, huge or negative shapes,
    /// offsets and sizes, strings with lying lengths) read as errors naming the tensor, without
    /// panics and without allocating what the entry claims.
    #[test]
    fn hostile_entries_are_errors_not_allocations() {
        let dir = std::env::temp_dir().join(format!("ff_ckpt_hostile_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let prefix = dir.join("h");
        std::fs::write(data_path(&prefix, 0, 1), [7u8; 64]).unwrap();
        let mut rng = table::tests::Rng::new(0x853c_49e6_748f_ea9b);
        let mut next = move || rng.next_u64();
        let pick = |r: u64, v: &[i64]| v[(r % v.len() as u64) as usize];
        let sizes = [0i64, 1, 4, 8, 63, 64, 65, -1, i64::MAX, 1 << 40, i64::MIN];
        let dims = [0i64, 1, 2, 16, -1, 1 << 31, 1 << 62, i64::MAX];
        for _ in 0..3000 {
            let header = BundleHeaderProto { num_shards: 1, endianness: 0, version: None };
            let shape: Vec<Dim> =
                (0..next() % 4).map(|_| Dim { size: pick(next(), &dims), name: String::new() }).collect();
            let e = BundleEntryProto {
                dtype: (next() % 24) as i32,
                shape: Some(TensorShapeProto { dim: shape, unknown_rank: false }),
                shard_id: pick(next(), &[0, 0, 0, 1, -1]) as i32,
                offset: pick(next(), &sizes),
                size: pick(next(), &sizes),
                crc32c: next() as u32,
                slices: vec![],
            };
            let rows = vec![(Vec::new(), header.encode_to_vec()), (b"t".to_vec(), e.encode_to_vec())];
            std::fs::write(index_path(&prefix), table::build(&rows).unwrap()).unwrap();
            let r = BundleReader::open(&prefix).unwrap();
            if let Err(err) = r.read("t") {
                let msg = err.to_string();
                assert!(msg.contains("'t'") || msg.contains("data-0"), "{msg}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
