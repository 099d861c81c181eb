//! A `--batching_parameters_file` (text-format BatchingParameters).
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow_serve::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow_serve::fuzzing::serve_batching_parameters(data));
