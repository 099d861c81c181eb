//! A TFRecord file of tf.train.Examples: read and parsed.
//! Any input must give Ok or an error, never a panic, hang or huge allocation
//! (`ferroflow::fuzzing`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ferroflow::fuzzing::tfrecord_examples(data));
