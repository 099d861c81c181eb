//! End-to-end workflows built with the Rust API: what the CLI, the demo, the examples and the
//! tests run. [`what_runs`] is a small arithmetic graph to optimize, place on two devices,
//! partition and merge back; [`input_pipeline`] reads class folders of JPEGs (from
//! [`flowers`]) with tf.data-style stages and trains from them; [`mnist_training`] trains an
//! MNIST MLP in a TensorFlow 1-style session, saves it and restores it from its `.meta`;
//! [`traced_functions`] are AutoGraph functions traced per signature; [`fine_tune`] trains a
//! Keras model file on class folders as seed 001 does; [`demo`] runs them all.
pub mod demo;
pub mod fine_tune;
pub mod flowers;
pub mod input_pipeline;
pub mod mnist_training;
pub mod traced_functions;
pub mod what_runs;
