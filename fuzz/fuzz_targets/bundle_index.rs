//! The checkpoint `.index` reader on arbitrary bytes: the SSTable layer (footer, handles,
//! block trailers and CRCs, restart arrays, prefix-compressed entries) and the bundle layer
//! (header, entries). Any input must give Ok or an error, never a panic, hang or huge
//! allocation.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ferroflow_checkpoint::table::read(data);
    let _ = ferroflow_checkpoint::BundleReader::from_index_bytes(std::path::Path::new("fuzz"), data);
});
