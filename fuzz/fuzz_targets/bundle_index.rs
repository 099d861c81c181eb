//! The checkpoint `.index` reader on arbitrary bytes: the SSTable layer (footer, handles,
//! block trailers and CRCs, restart arrays, prefix-compressed entries) and the bundle layer
//! (header, entries).
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow::fuzzing::bundle_index(data));
