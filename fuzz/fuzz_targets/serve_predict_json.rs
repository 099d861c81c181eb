//! A REST predict body: the direct reader and the JSON tree, which must agree.
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow_serve::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow_serve::fuzzing::serve_predict_json(data));
