//! A `.keras` file: the zip archive, config.json, the HDF5 weights, the model built.
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow::fuzzing::keras_archive(data));
