//! A profile (`.xplane.pb`): decoded, analysed into `ferroflow profile`'s report and exported
//! as Chrome trace JSON.
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow::fuzzing::xspace(data));
