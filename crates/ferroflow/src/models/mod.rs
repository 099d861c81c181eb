//! The seed articles' models, built with the Rust API: what the CLI, the demo, the examples
//! and the tests run.
pub mod flowers;
pub mod seed_000;
pub mod seed_001;
pub mod seed_003;
pub mod seed_004;
