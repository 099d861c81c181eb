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

/// The entries of one block, in order.
fn block_entries(block: &[u8], what: &str) -> Result<Rows, TableError> {
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
    for (_, handle) in block_entries(read_block(file, index, "index")?, "index")? {
        let mut p = 0;
        let h = (get_varint(&handle, &mut p, "block offset")?, get_varint(&handle, &mut p, "block size")?);
        out.extend(block_entries(read_block(file, h, "data")?, "data")?);
    }
    for w in out.windows(2) {
        if w[0].0 >= w[1].0 {
            return Err(bad("keys are not in increasing order"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
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
}
