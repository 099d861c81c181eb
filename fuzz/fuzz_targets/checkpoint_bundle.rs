//! A whole checkpoint: 2-byte length, `.index`, data file; every tensor read.
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow::fuzzing::checkpoint_bundle(data));
