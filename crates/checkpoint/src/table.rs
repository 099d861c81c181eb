//! The immutable sorted string table TensorFlow's `.index` files use: LevelDB's SSTable
//! format without filter blocks or compression (shared/reference/tf-formats.md §3.2).
//!
//! Layout: data blocks (prefix-compressed entries + restart array), each followed by a 5-byte
//! trailer (type 0, masked CRC32C of block + type); an empty metaindex block; an index block
//! (restart interval 1) mapping a separator key per data block to its handle; a 48-byte footer
//! with both handles and the magic `0xdb4775248b80fb57`.
use ferroflow_tensor::crc32c::masked_crc32c;

/// TensorFlow's magic number at the end of every table.
pub const MAGIC: u64 = 0xdb47_7524_8b80_fb57;
const FOOTER_LEN: usize = 48;
const TRAILER_LEN: usize = 5;
/// TensorFlow's target data block size.
const BLOCK_SIZE: usize = 256 * 1024;
/// Keys written in full every this many entries (data blocks).
const RESTART_INTERVAL: usize = 16;
/// Reading never builds more key and value bytes than this many times the file's size (at
/// least 1 MiB): prefix compression of real checkpoint names stays far below it.
const MAX_EXPANSION: usize = 16;

/// A malformed table (the caller adds the file name).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TableError(pub String);

/// A table's `(key, value)` rows.
pub type Rows = Vec<(Vec<u8>, Vec<u8>)>;

fn bad(msg: impl Into<String>) -> TableError {
    TableError(msg.into())
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(buf: &[u8], pos: &mut usize, what: &str) -> Result<u64, TableError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or_else(|| bad(format!("truncated varint ({what}) at byte {pos}")))?;
        *pos += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(bad(format!("varint ({what}) longer than 10 bytes")))
}

/// Builds one block: entries with shared key prefixes and a restart array.
#[derive(Default)]
struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    counter: usize,
    last_key: Vec<u8>,
    interval: usize,
}

impl BlockBuilder {
    fn new(interval: usize) -> Self {
        BlockBuilder { restarts: vec![0], interval, ..Default::default() }
    }
    fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.counter < self.interval {
            self.last_key.iter().zip(key).take_while(|(a, b)| a == b).count()
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        };
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, (key.len() - shared) as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key = key.to_vec();
        self.counter += 1;
    }
    fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }
    fn finish(mut self) -> Vec<u8> {
        for r in &self.restarts {
            self.buf.extend_from_slice(&r.to_le_bytes());
        }
        self.buf.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.buf
    }
}

/// Appends `block` and its trailer to `out`; returns its handle (offset, size).
fn write_block(out: &mut Vec<u8>, block: &[u8]) -> (u64, u64) {
    let handle = (out.len() as u64, block.len() as u64);
    out.extend_from_slice(block);
    let mut with_type = Vec::with_capacity(block.len() + 1);
    with_type.extend_from_slice(block);
    with_type.push(0);
    out.push(0);
    out.extend_from_slice(&masked_crc32c(&with_type).to_le_bytes());
    handle
}

fn put_handle(out: &mut Vec<u8>, (offset, size): (u64, u64)) {
    put_varint(out, offset);
    put_varint(out, size);
}

/// TensorFlow's `FindShortSuccessor`: the shortest key ≥ `key` (first non-0xff byte
/// incremented, the rest dropped).
fn short_successor(key: &[u8]) -> Vec<u8> {
    match key.iter().position(|&b| b != 0xff) {
        Some(i) => {
            let mut k = key[..=i].to_vec();
            k[i] += 1;
            k
        }
        None => key.to_vec(),
    }
}

/// TensorFlow's `FindShortestSeparator`: a short key in `[start, limit)`.
fn shortest_separator(start: &[u8], limit: &[u8]) -> Vec<u8> {
    let n = start.iter().zip(limit).take_while(|(a, b)| a == b).count();
    if n < start.len().min(limit.len()) {
        let b = start[n];
        if b < 0xff && b + 1 < limit[n] {
            let mut k = start[..=n].to_vec();
            k[n] += 1;
            return k;
        }
    }
    start.to_vec()
}

/// Serializes sorted `(key, value)` pairs as a table, as TensorFlow's `TableBuilder` does
/// (no compression). Keys must be strictly increasing (bytewise).
pub fn build(entries: &[(Vec<u8>, Vec<u8>)]) -> Result<Vec<u8>, TableError> {
    for w in entries.windows(2) {
        if w[0].0 >= w[1].0 {
            return Err(bad(format!(
                "keys must be strictly increasing: {:?} then {:?}",
                String::from_utf8_lossy(&w[0].0),
                String::from_utf8_lossy(&w[1].0)
            )));
        }
    }
    let mut out = Vec::new();
    let mut index = BlockBuilder::new(1);
    let mut block = BlockBuilder::new(RESTART_INTERVAL);
    let mut pending: Option<(Vec<u8>, (u64, u64))> = None;
    for (key, value) in entries {
        if let Some((last, handle)) = pending.take() {
            let mut h = Vec::new();
            put_handle(&mut h, handle);
            index.add(&shortest_separator(&last, key), &h);
        }
        block.add(key, value);
        if block.estimated_size() >= BLOCK_SIZE {
            let last = block.last_key.clone();
            let full = std::mem::replace(&mut block, BlockBuilder::new(RESTART_INTERVAL));
            pending = Some((last, write_block(&mut out, &full.finish())));
        }
    }
    if block.counter > 0 || block.restarts.len() > 1 {
        let last = block.last_key.clone();
        pending = Some((last, write_block(&mut out, &block.finish())));
    }
    if let Some((last, handle)) = pending.take() {
        let mut h = Vec::new();
        put_handle(&mut h, handle);
        index.add(&short_successor(&last), &h);
    }
    let meta = write_block(&mut out, &BlockBuilder::new(RESTART_INTERVAL).finish());
    let idx = write_block(&mut out, &index.finish());
    let mut footer = Vec::with_capacity(FOOTER_LEN);
    put_handle(&mut footer, meta);
    put_handle(&mut footer, idx);
    footer.resize(40, 0);
    footer.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&footer);
    Ok(out)
}

/// Reads the block at `(offset, size)` and checks its trailer.
fn read_block<'a>(file: &'a [u8], (offset, size): (u64, u64), what: &str) -> Result<&'a [u8], TableError> {
    let end = offset.checked_add(size).and_then(|e| e.checked_add(TRAILER_LEN as u64));
    if end.is_none_or(|e| e > file.len() as u64) {
        return Err(bad(format!(
            "{what} block at {offset}+{size} runs past the end of the file ({} bytes)",
            file.len()
        )));
    }
    let (o, s) = (offset as usize, size as usize);
    let block = &file[o..o + s];
    let trailer = &file[o + s..o + s + TRAILER_LEN];
    if trailer[0] != 0 {
        return Err(bad(format!(
            "{what} block at {offset} is compressed (type {}), which is not supported",
            trailer[0]
        )));
    }
    let want = u32::from_le_bytes(trailer[1..5].try_into().expect("4 bytes"));
    if masked_crc32c(&file[o..o + s + 1]) != want {
        return Err(bad(format!("{what} block at {offset}: block checksum mismatch")));
    }
    Ok(block)
}

/// The entries of one block, in order. Keys are prefix-compressed, so a hostile block could
/// make each 3-byte entry repeat a long key; `budget` (bytes of keys and values still
/// allowed, shared by the table's blocks) bounds what is built.
fn block_entries(block: &[u8], what: &str, budget: &mut usize) -> Result<Rows, TableError> {
    if block.len() < 4 {
        return Err(bad(format!("{what} block is shorter than its restart count")));
    }
    let n = u32::from_le_bytes(block[block.len() - 4..].try_into().expect("4 bytes")) as usize;
    let restarts_at = block
        .len()
        .checked_sub(4 + 4 * n)
        .ok_or_else(|| bad(format!("{what} block: {n} restarts do not fit in {} bytes", block.len())))?;
    let data = &block[..restarts_at];
    let mut out = Vec::new();
    let mut pos = 0;
    let mut key: Vec<u8> = Vec::new();
    while pos < data.len() {
        let shared = get_varint(data, &mut pos, "shared key length")? as usize;
        let unshared = get_varint(data, &mut pos, "key length")? as usize;
        let vlen = get_varint(data, &mut pos, "value length")? as usize;
        if shared > key.len() {
            return Err(bad(format!("{what} block: entry shares {shared} bytes of a {}-byte key", key.len())));
        }
        let end = pos.checked_add(unshared).and_then(|e| e.checked_add(vlen)).filter(|&e| e <= data.len());
        let Some(end) = end else {
            return Err(bad(format!("{what} block: entry at byte {pos} runs past the block")));
        };
        key.truncate(shared);
        key.extend_from_slice(&data[pos..pos + unshared]);
        *budget = budget.checked_sub(key.len() + vlen).ok_or_else(|| {
            bad(format!("{what} block: keys expand past {MAX_EXPANSION}x the file's size (a hostile table?)"))
        })?;
        out.push((key.clone(), data[pos + unshared..end].to_vec()));
        pos = end;
    }
    Ok(out)
}

/// Every `(key, value)` of a table file, in key order; trailers (CRCs), handles and the
/// footer magic are checked, and nothing is allocated beyond the file's own size.
pub fn read(file: &[u8]) -> Result<Rows, TableError> {
    if file.len() < FOOTER_LEN {
        return Err(bad(format!("{} bytes is too short for a table (48-byte footer)", file.len())));
    }
    let footer = &file[file.len() - FOOTER_LEN..];
    if u64::from_le_bytes(footer[40..48].try_into().expect("8 bytes")) != MAGIC {
        return Err(bad("not an sstable (bad magic number)"));
    }
    let mut pos = 0;
    let _meta = (get_varint(footer, &mut pos, "metaindex offset")?, get_varint(footer, &mut pos, "metaindex size")?);
    let index = (get_varint(footer, &mut pos, "index offset")?, get_varint(footer, &mut pos, "index size")?);
    let mut out = Vec::new();
    let mut budget = file.len().saturating_mul(MAX_EXPANSION).max(1 << 20);
    for (_, handle) in block_entries(read_block(file, index, "index")?, "index", &mut budget)? {
        let mut p = 0;
        let h = (get_varint(&handle, &mut p, "block offset")?, get_varint(&handle, &mut p, "block size")?);
        out.extend(block_entries(read_block(file, h, "data")?, "data", &mut budget)?);
    }
    for w in out.windows(2) {
        if w[0].0 >= w[1].0 {
            return Err(bad("keys are not in increasing order"));
        }
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn separators_follow_leveldb() {
        assert_eq!(short_successor(b"v"), b"w");
        assert_eq!(short_successor(b"\xff\xffa"), b"\xff\xffb");
        assert_eq!(shortest_separator(b"abcd", b"abzz"), b"abd");
        assert_eq!(shortest_separator(b"abc", b"abd"), b"abc");
    }

    #[test]
    fn many_entries_round_trip_across_blocks() {
        let entries: Vec<(Vec<u8>, Vec<u8>)> =
            (0..5000).map(|i| (format!("layer_{i:05}/kernel").into_bytes(), vec![(i % 251) as u8; 100])).collect();
        let bytes = build(&entries).unwrap();
        assert!(bytes.len() > BLOCK_SIZE, "several data blocks");
        assert_eq!(read(&bytes).unwrap(), entries);
    }

    /// Deterministic "random" mutations (the crate's fuzz-style tests share it).
    pub(crate) use ferroflow_tensor::rng::Rng;

    /// Re-seals every block of `file` whose handle the valid layout `blocks` gives, so
    /// mutations inside blocks get past the CRCs into the parsers.
    fn reseal(file: &mut [u8], blocks: &[(usize, usize)]) {
        for &(o, s) in blocks {
            if o + s + TRAILER_LEN <= file.len() {
                let crc = masked_crc32c(&file[o..o + s + 1]);
                file[o + s + 1..o + s + 5].copy_from_slice(&crc.to_le_bytes());
            }
        }
    }

    /// Fuzz-style: 30,000 mutated tables (bit flips, byte writes, 0xff runs, truncations,
    /// insertions; half of them with block CRCs recomputed so the block and entry parsers
    /// see the damage) and 20,000 random blocks. Reading returns Ok or Err, never panics,
    /// and builds nothing larger than MAX_EXPANSION x the input.
    #[test]
    fn mutated_tables_never_panic() {
        let entries: Vec<(Vec<u8>, Vec<u8>)> =
            (0..60).map(|i| (format!("layer_{i:03}/kernel/Adam").into_bytes(), vec![i as u8; i % 7])).collect();
        let good = build(&entries).unwrap();
        // The valid layout: footer → index block → its one data block.
        let footer = &good[good.len() - FOOTER_LEN..];
        let mut pos = 0;
        let mut h = || get_varint(footer, &mut pos, "").unwrap() as usize;
        let (meta, index) = ((h(), h()), (h(), h()));
        let mut budget = usize::MAX;
        let idx = block_entries(read_block(&good, (index.0 as u64, index.1 as u64), "").unwrap(), "", &mut budget);
        let mut blocks = vec![meta, index];
        for (_, handle) in idx.unwrap() {
            let mut p = 0;
            blocks.push((
                get_varint(&handle, &mut p, "").unwrap() as usize,
                get_varint(&handle, &mut p, "").unwrap() as usize,
            ));
        }
        let mut rng = Rng::new(0x2545_f491_4f6c_dd1d);
        let (mut ok, mut errs) = (0, 0);
        for i in 0..30_000 {
            let mut f = good.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(f.len());
                match rng.below(6) {
                    0 => f[at] ^= 1 << rng.below(8),
                    1 => f[at] = rng.next_u64() as u8,
                    2 => {
                        let end = (at + 1 + rng.below(10)).min(f.len());
                        f[at..end].fill(0xff)
                    }
                    3 => f.truncate(at),
                    4 => {
                        let junk: Vec<u8> = (0..1 + rng.below(20)).map(|_| rng.next_u64() as u8).collect();
                        f.splice(at..at, junk);
                    }
                    _ => f[at] = f[at].wrapping_add(1),
                }
                if f.is_empty() {
                    break;
                }
            }
            if i % 2 == 0 {
                reseal(&mut f, &blocks);
            }
            match read(&f) {
                Ok(rows) => {
                    ok += 1;
                    assert!(rows.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() <= (f.len() * 16).max(1 << 20));
                }
                Err(_) => errs += 1,
            }
        }
        assert!(errs > 10_000 && ok > 0, "ok {ok}, errors {errs}");
        for _ in 0..20_000 {
            let block: Vec<u8> = (0..rng.below(64)).map(|_| rng.next_u64() as u8).collect();
            let mut budget = 1 << 16;
            let _ = block_entries(&block, "fuzz", &mut budget);
        }
    }

    /// A hostile block whose 3-byte entries each repeat a 60 KiB key is refused, not expanded
    /// into gigabytes.
    #[test]
    fn prefix_bombs_are_refused() {
        let mut data = Vec::new();
        put_varint(&mut data, 0);
        put_varint(&mut data, 60_000);
        put_varint(&mut data, 0);
        data.extend(std::iter::repeat_n(b'k', 60_000));
        for _ in 0..100_000 {
            data.extend_from_slice(&[0xe0, 0xd4, 0x03][..]); // shared = 60000 (varint) ...
            data.extend_from_slice(&[0, 0]); // ... no new key bytes, empty value
        }
        data.extend_from_slice(&0u32.to_le_bytes());
        let mut budget = data.len() * MAX_EXPANSION;
        let e = block_entries(&data, "data", &mut budget).unwrap_err();
        assert!(e.0.contains("expand"), "{}", e.0);
    }
}
