//! TFRecord framing: `u64 length`, `u32 masked crc(length)`, `data`, `u32 masked crc(data)`,
//! little-endian, no file header.
use std::io::{Read, Write};

use crate::crc32c::masked_crc32c;
use crate::SummaryError;

/// Writes one record.
pub fn write_record(w: &mut impl Write, data: &[u8]) -> std::io::Result<()> {
    let len = (data.len() as u64).to_le_bytes();
    w.write_all(&len)?;
    w.write_all(&masked_crc32c(&len).to_le_bytes())?;
    w.write_all(data)?;
    w.write_all(&masked_crc32c(data).to_le_bytes())
}

/// Reads records one at a time. `what` names the source in errors; errors give the byte
/// offset of the bad record. A record's declared length is checked against the bytes that
/// remain (when known) and the memory limit ([`ferroflow_tensor::limit`]) before anything is
/// allocated for it, and read through a bounded reader.
pub struct RecordReader<R> {
    inner: R,
    what: String,
    offset: u64,
    remaining: Option<u64>,
}

impl<R: Read> RecordReader<R> {
    /// A reader over `inner`; `len` is the total size when known (a file).
    pub fn new(inner: R, what: impl Into<String>, len: Option<u64>) -> Self {
        RecordReader { inner, what: what.into(), offset: 0, remaining: len }
    }

    /// The byte offset of the next record.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn corrupt(&self, reason: String) -> SummaryError {
        SummaryError::Corrupt { file: self.what.clone(), offset: self.offset, reason }
    }

    /// Reads exactly `buf.len()` bytes; `Ok(false)` at a clean end of input (no bytes).
    fn fill(&mut self, buf: &mut [u8]) -> Result<bool, SummaryError> {
        let mut got = 0;
        while got < buf.len() {
            match self.inner.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(SummaryError::Io { file: self.what.clone(), source: e }),
            }
        }
        if got == 0 {
            return Ok(false);
        }
        if got < buf.len() {
            return Err(self.corrupt(format!("truncated record: needed {} more bytes, found {got}", buf.len())));
        }
        Ok(true)
    }

    /// The next record's data, `None` at the end.
    pub fn next_record(&mut self) -> Result<Option<Vec<u8>>, SummaryError> {
        let mut header = [0u8; 12];
        if !self.fill(&mut header)? {
            return Ok(None);
        }
        let len_bytes: [u8; 8] = header[..8].try_into().expect("8 bytes");
        let stored = u32::from_le_bytes(header[8..].try_into().expect("4 bytes"));
        if masked_crc32c(&len_bytes) != stored {
            return Err(self.corrupt("length CRC mismatch".into()));
        }
        let len = u64::from_le_bytes(len_bytes);
        if let Some(rem) = self.remaining {
            if len.saturating_add(16) > rem {
                return Err(
                    self.corrupt(format!("record of {len} bytes, but only {} bytes remain", rem.saturating_sub(16)))
                );
            }
        }
        // The record is held in memory whole: its length must fit the memory limit (a stream
        // of unknown size has no other bound).
        ferroflow_tensor::limit::check(usize::try_from(len).unwrap_or(usize::MAX), || "record".into())
            .map_err(|e| self.corrupt(e.to_string()))?;
        // Read through `take` so a lying length on a stream of unknown size cannot make us
        // allocate more than what is actually there.
        let mut data = Vec::new();
        (&mut self.inner)
            .take(len)
            .read_to_end(&mut data)
            .map_err(|e| SummaryError::Io { file: self.what.clone(), source: e })?;
        if (data.len() as u64) < len {
            return Err(self.corrupt(format!("truncated record: {len} bytes declared, {} present", data.len())));
        }
        let mut crc = [0u8; 4];
        if !self.fill(&mut crc)? {
            return Err(self.corrupt("truncated record: the data CRC is missing".into()));
        }
        if masked_crc32c(&data) != u32::from_le_bytes(crc) {
            return Err(self.corrupt("data CRC mismatch".into()));
        }
        self.offset += len + 16;
        if let Some(rem) = &mut self.remaining {
            *rem -= len + 16;
        }
        Ok(Some(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record header declaring `len` bytes.
    fn header(len: u64) -> Vec<u8> {
        let len = len.to_le_bytes();
        let mut b = len.to_vec();
        b.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
        b
    }

    #[test]
    fn a_record_longer_than_the_memory_limit_is_refused_before_reading() {
        // A stream of unknown size that really holds the 32 MiB it declares: under a 16 MiB
        // limit it is refused before any of it is read (it used to be read whole).
        let len = 32u64 << 20;
        let stream = std::io::Cursor::new(header(len)).chain(std::io::repeat(0).take(len + 4));
        let _limit = ferroflow_tensor::limit::scoped(16 << 20);
        let mut r = RecordReader::new(stream, "stream", None);
        let e = r.next_record().unwrap_err().to_string();
        assert!(e.contains("stream") && e.contains("at byte 0") && e.contains("33554432 bytes"), "{e}");
        assert!(e.contains("memory limit of 16777216"), "{e}");
        // A file's remaining size is checked first.
        let mut r = RecordReader::new(std::io::Cursor::new(header(1 << 40)), "file", Some(12));
        let e = r.next_record().unwrap_err().to_string();
        assert!(e.contains("file") && e.contains("only 0 bytes remain"), "{e}");
    }
}
