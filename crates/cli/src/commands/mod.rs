//! One module per subcommand: its arguments (`#[derive(Args)]`, whose doc comment is the
//! command's help) and its `run`.
pub mod allreduce_bench;
pub mod benchmark;
pub mod convert;
pub mod demo;
pub mod flowers;
pub mod inspect;
pub mod inspect_checkpoint;
pub mod merge_partitions;
pub mod mnist;
pub mod ops;
pub mod optimize;
pub mod pipeline;
pub mod profile;
pub mod run;
pub mod tensorboard;
