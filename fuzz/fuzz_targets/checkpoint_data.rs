//! A checkpoint data file read through a fixed, valid `.index` (TensorFlow's `mixed`
//! fixture): every tensor, with offsets, sizes, CRCs and string lengths against fuzzed bytes.
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow::fuzzing::checkpoint_data(data));
