//! A JPEG: shape, decodes with several option sets, and decode_image.
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow::fuzzing::jpeg(data));
