//! One module per subcommand: its arguments (`#[derive(Args)]`, whose doc comment is the
//! command's help) and its `run`.
pub mod allreduce_bench;
pub mod benchmark;
pub mod convert;
pub mod demo;
pub mod fit;
pub mod flowers;
pub mod inspect;
pub mod inspect_checkpoint;
pub mod keras;
pub mod keras_app;
pub mod merge_partitions;
pub mod mnist;
pub mod ops;
pub mod optimize;
pub mod pipeline;
pub mod profile;
pub mod run;
pub mod tensorboard;

/// Whether `path` is a SavedModel directory; a directory without `saved_model.pb` is an error
/// saying so (it is neither a SavedModel nor a graph file).
pub(crate) fn is_saved_model(path: &std::path::Path) -> anyhow::Result<bool> {
    if !path.is_dir() {
        return Ok(false);
    }
    if path.join("saved_model.pb").is_file() {
        return Ok(true);
    }
    anyhow::bail!(
        "{}: a directory without saved_model.pb (expected a SavedModel directory or a graph file)",
        path.display()
    )
}
