//! A binary `.pb` GraphDef, decoded and imported (validation, shape inference) as
//! `ferroflow run`/`optimize` load one.
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow::fuzzing::graph_def_binary(data));
