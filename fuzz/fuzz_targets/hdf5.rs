//! An HDF5 file (Keras weights): groups, attributes, datasets, Keras 2's weight lists.
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow::fuzzing::hdf5(data));
