//! The collective world of a multi-process command (`run` and `mnist --distributed` under
//! `mpirun`, `allreduce-bench`).
use anyhow::{bail, Result};
use ferroflow::collective;

/// Starts the collective world for a distributed command: MPI's (a build with the `mpi`
/// feature, under `mpirun` or alone as a 1-rank world), or the 1-rank world of a build
/// without MPI run alone. A build without MPI started by `mpirun -np N` (N > 1) is an error:
/// its ranks could not talk.
fn start() -> Result<Option<ferroflow_mpi::MpiGuard>> {
    if ferroflow_mpi::AVAILABLE {
        return Ok(Some(ferroflow_mpi::init()?));
    }
    match ferroflow_mpi::launched_size() {
        Some(n) if n > 1 => {
            bail!("started as one of {n} ranks, but {}", ferroflow_mpi::MpiError::NotBuilt)
        }
        _ => Ok(None),
    }
}

/// Runs `f` in the world `start` made; on an error, a rank of a multi-rank world ends the
/// whole job (`MPI_Abort`) after printing the error with its rank, so no other rank waits
/// forever in a collective this one will not join.
pub fn run_in_world<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    let guard = start()?;
    let result = f();
    if let (Err(e), Some(g)) = (&result, &guard) {
        let world = collective::world();
        if world.size() > 1 {
            // One write, so mpirun's own abort banner cannot land inside the line.
            use std::io::Write;
            let line = format!("error on rank {} of {}: {}\n", world.rank(), world.size(), crate::one_line(e));
            let _ = std::io::stdout().flush();
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
            g.abort(1);
        }
    }
    result
}
