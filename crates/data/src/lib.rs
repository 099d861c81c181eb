//! The input pipeline (tf.data for Rust): lazy [`Dataset`]s of typed elements (tensors,
//! tuples of tensors, or user structs — see [`Structure`]), built from tensors, ranges,
//! generators, files and TFRecords, and transformed by `map` (sequential or on worker
//! threads), `filter`, `flat_map`, `interleave`, `zip`, `concatenate`, `shuffle`, `repeat`,
//! `batch`, `padded_batch`, `unbatch`, `take`, `skip`, `shard`, `enumerate`, `cache` (memory
//! or file), `prefetch` and `ignore_errors`. Iterating is a Rust `Iterator`. Parallelism and
//! buffer sizes can be [`AUTOTUNE`]: chosen at run time within a CPU and RAM [`Budget`],
//! and reported ([`Dataset::autotune_report`]).
//!
//! ```
//! use ferroflow_data::{Dataset, AUTOTUNE};
//! use ferroflow_tensor::Tensor;
//!
//! let xs = Tensor::from_vec(&[6], vec![1f32, 2., 3., 4., 5., 6.]).unwrap();
//! let ys = Tensor::from_vec(&[6], vec![0i32, 1, 0, 1, 0, 1]).unwrap();
//! let ds = Dataset::from_tensor_slices((xs, ys)).unwrap()
//!     .map_parallel(AUTOTUNE, |(x, y): (Tensor, Tensor)| {
//!         let v = x.scalar_value::<f32>()? * 2.0;
//!         Ok((Tensor::scalar(v), y))
//!     })
//!     .batch(4, false).unwrap()
//!     .prefetch(AUTOTUNE);
//! let batches: Vec<(Tensor, Tensor)> = ds.iter().unwrap().collect::<Result<_, _>>().unwrap();
//! assert_eq!(batches.len(), 2);
//! assert_eq!(batches[0].0.as_slice::<f32>().unwrap(), &[2., 4., 6., 8.]);
//! ```
#![warn(missing_docs)]

pub mod autotune;
mod batch;
mod cache;
mod dataset;
mod error;
pub mod example;
mod graph_fn;
pub mod image;
mod parallel;
mod rng;
mod shuffle;
mod source;
mod structure;
mod tensors;
mod tfrecord;
mod transform;

pub use autotune::{Budget, KnobKind, TunedStage, AUTOTUNE};
pub use batch::PaddedShape;
pub use dataset::{Cardinality, Dataset, DatasetIter, Element};
pub use error::{DataError, ElementCause, Result, SharedError};
pub use graph_fn::GraphFunction;
pub use source::glob_files;
pub use structure::Structure;
pub use tfrecord::TFRecordWriter;
pub use transform::MapOptions;

impl<T: Structure> Dataset<T> {
    /// A buffer of `buffer_size` elements (or [`AUTOTUNE`]) filled ahead of the consumer by a
    /// background thread, so producing the next element overlaps using this one.
    pub fn prefetch(&self, buffer_size: i64) -> Dataset<T> {
        self.then(parallel::Prefetch::new(self.node.clone(), buffer_size))
    }
}
