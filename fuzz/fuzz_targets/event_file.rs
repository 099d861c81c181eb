//! A TensorBoard event file: TFRecord framing (lengths, masked CRC32Cs) and the events
//! with what they carry.
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow::fuzzing::event_file(data));
