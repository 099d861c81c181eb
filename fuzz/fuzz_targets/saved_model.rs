//! A SavedModel's saved_model.pb: decoded, listed (inspect), signatures read, ops
//! checked, calls inlined, meta graphs imported.
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow::fuzzing::saved_model(data));
