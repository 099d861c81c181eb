//! A PNG: decoded with every channel count, to uint8 and uint16.
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow::fuzzing::png(data));
