//! MPI as ferroflow's collective world. Built with the `mpi` feature (Open MPI through the
//! `mpi` crate; see `shared/reference/mpi.md` for packages and `mpirun` flags), [`init`]
//! initializes MPI with `MPI_THREAD_MULTIPLE` and installs `MPI_COMM_WORLD` (a duplicate, so
//! no other library's messages mix with ours) as `ferroflow_collective`'s world; rank `r` of
//! `mpirun -np N` is then `/job:worker/replica:0/task:r`. Run without `mpirun` it is a 1-rank
//! world (MPI's singleton mode). Without the feature, [`init`] says how to get it.
//!
//! The all-reduce is one in-place `MPI_Allreduce` per buffer (no copy; `allreduce-bench`
//! measured it 1.1–1.7× the out-of-place call on 4–200 MB). A reduce-scatter plus all-gather
//! (every element combined once, so the same bits everywhere by construction) was 2–4×
//! slower in Debian's Open MPI 4.1 at 2 ranks; Open MPI's all-reduce also gives every rank the
//! same bits for a sum (2 ranks: `a + b == b + a`; the MPI tests check 4), which is what keeps
//! data-parallel replicas bitwise identical.
#![warn(missing_docs)]
#[cfg(feature = "mpi")]
mod world;
#[cfg(feature = "mpi")]
pub use world::{init, Mpi, MpiGuard};

/// Why MPI could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MpiError {
    /// This build has no MPI.
    #[error(
        "this ferroflow was built without MPI: install Open MPI (apt-get install openmpi-bin libopenmpi-dev \
         libclang1-14 libclang-common-14-dev) and build with `cargo build --release -p ferroflow-cli --features mpi`"
    )]
    NotBuilt,
    /// [`init`] was called before.
    #[error("MPI was initialized already (ferroflow_mpi::init called twice)")]
    AlreadyInitialized,
    /// The MPI library lacks what ferroflow needs (its thread level, a known `MPI_IN_PLACE`).
    #[error("{0}")]
    Unsupported(String),
    /// An MPI call failed.
    #[error("{call}: {message}")]
    Call {
        /// The MPI function.
        call: &'static str,
        /// MPI's message for its error code.
        message: String,
    },
}

/// Whether this build has MPI (the `mpi` feature).
pub const AVAILABLE: bool = cfg!(feature = "mpi");

/// What [`init`] returns without the `mpi` feature (never made).
#[cfg(not(feature = "mpi"))]
pub struct MpiGuard(());

#[cfg(not(feature = "mpi"))]
impl MpiGuard {
    /// Exits with `code` (there are no other ranks to end).
    pub fn abort(&self, code: i32) -> ! {
        std::process::exit(code)
    }
}

/// The world size `mpirun` announced to this process in its environment (Open MPI's
/// `OMPI_COMM_WORLD_SIZE`, MPICH's `PMI_SIZE`), if any: how a build without MPI notices it
/// was started as one of several ranks.
pub fn launched_size() -> Option<usize> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"].iter().find_map(|v| std::env::var(v).ok()?.parse().ok())
}

/// Without the `mpi` feature: an error saying how to build with MPI.
#[cfg(not(feature = "mpi"))]
pub fn init() -> Result<MpiGuard, MpiError> {
    Err(MpiError::NotBuilt)
}
