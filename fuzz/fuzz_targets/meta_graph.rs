//! A `.meta` MetaGraphDef (binary, or text as a fallback), read and imported, then
//! imported again under a scope into the result, with its saver and collections.
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow::fuzzing::meta_graph(data));
