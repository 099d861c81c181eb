//! A REST classify/regress body: `context` and `examples` as serialized tf.Examples.
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow_serve::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow_serve::fuzzing::serve_examples_json(data));
