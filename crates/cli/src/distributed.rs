//! Multi-process runs: the MPI world for `mnist --distributed`, and `allreduce-bench`.
use anyhow::{bail, Result};
use ferroflow::collective::{self, Communicator, Kind, ReduceOp};
use ferroflow::prelude::*;

/// Starts the collective world for a distributed command: MPI's (a build with the `mpi`
/// feature, under `mpirun` or alone as a 1-rank world), or the 1-rank world of a build
/// without MPI run alone. A build without MPI started by `mpirun -np N` (N > 1) is an error:
/// its ranks could not talk.
pub(crate) fn start() -> Result<Option<ferroflow_mpi::MpiGuard>> {
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
pub(crate) fn run_in_world<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
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

/// `ferroflow allreduce-bench`: all-reduce bandwidth of ferroflow's collective (the engine
/// under `CollectiveReduceV2`, and the op run by a session) against raw `MPI_Allreduce` (out
/// of place, into a second buffer) on buffers of the same sizes; rank 0 prints the table. Times are the slowest rank's, the
/// median of `runs` after a barrier each.
pub(crate) fn allreduce_bench(sizes_mb: &[f64], runs: usize, skew_us: u64) -> Result<()> {
    if runs == 0 {
        bail!("--runs 0: expected at least one run");
    }
    run_in_world(|| {
        let world = collective::world();
        let (rank, size) = (world.rank(), world.size());
        if rank == 0 {
            let whose = if skew_us > 0 {
                format!("rank 0's, arriving {skew_us} us after the others")
            } else {
                "slowest rank".to_string()
            };
            out!(
                "all-reduce (sum) of f32 buffers across {size} rank(s), {} backend; median of {runs}, {whose}",
                world.backend()
            );
            out!(
                "{:>9} {:>12} {:>10} {:>12} {:>10} {:>7} {:>12} {:>10}",
                "MB",
                "ferroflow_ms",
                "GB/s",
                "MPI_ms",
                "GB/s",
                "ratio",
                "op_ms",
                "GB/s"
            );
        }
        for &mb in sizes_mb {
            let n = ((mb * 1e6) / 4.0).round().max(1.0) as usize;
            let bytes = (n * 4) as f64;
            let mut buf: Vec<f32> = (0..n).map(|i| ((i % 1000) as f32) * 1e-3 + rank as f32).collect();
            let ours = time(&*world, (runs, skew_us), || {
                collective::all_reduce(&*world, &mut buf, ReduceOp::Sum).map_err(Into::into)
            })?;
            let mut sum = vec![0f32; n];
            let raw = time(&*world, (runs, skew_us), || {
                world
                    .all_reduce_native(bytes_of(&buf), bytes_of_mut(&mut sum), Kind::F32, ReduceOp::Sum)
                    .map_err(Into::into)
            })?;
            let op = op_time(&*world, n, (runs, skew_us))?;
            if rank == 0 {
                let gbs = |ms: f64| bytes / (ms * 1e-3) / 1e9;
                out!(
                    "{mb:>9.1} {ours:>12.2} {:>10.2} {raw:>12.2} {:>10.2} {:>7.2} {op:>12.2} {:>10.2}",
                    gbs(ours),
                    gbs(raw),
                    raw / ours,
                    gbs(op)
                );
            }
        }
        Ok(())
    })
}

fn bytes_of(v: &[f32]) -> &[u8] {
    // SAFETY: f32 has no padding; any initialized memory is valid as u8.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

fn bytes_of_mut(v: &mut [f32]) -> &mut [u8] {
    // SAFETY: as `bytes_of`; every byte pattern is a valid f32.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}

/// The median over `runs` of the slowest rank's time for `f` (ms), each run after a barrier.
/// With a skew, rank 0 busy-waits that long after the barrier and the time is rank 0's own,
/// from its late arrival.
fn time(world: &dyn Communicator, (runs, skew_us): (usize, u64), mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    let mut ms = Vec::with_capacity(runs);
    for _ in 0..runs {
        world.barrier()?;
        if skew_us > 0 && world.rank() == 0 {
            let until = std::time::Instant::now() + std::time::Duration::from_micros(skew_us);
            while std::time::Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        let t0 = std::time::Instant::now();
        f()?;
        let own = t0.elapsed().as_secs_f64() * 1e3;
        let mut t = [if skew_us > 0 && world.rank() != 0 { 0.0 } else { own }];
        collective::all_reduce(world, &mut t, ReduceOp::Max)?;
        ms.push(t[0]);
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}

/// [`time`] of a session running `CollectiveReduceV2` on a fed `[n]` f32 tensor.
fn op_time(world: &dyn Communicator, n: usize, runs: (usize, u64)) -> Result<f64> {
    use ferroflow::proto::attr;
    let s = Scope::new();
    let x = s.with_name("x").placeholder(DType::Float, &Shape::known(&[n]))?;
    let size = s.scalar(world.size() as i32)?;
    let key = s.scalar(1i32)?;
    let mut a = ferroflow::graph::Attrs::new();
    a.insert("T".into(), attr::dtype(DType::Float));
    a.insert("merge_op".into(), attr::string("Add"));
    a.insert("final_op".into(), attr::string("Id"));
    s.with_name("reduced").add_op("CollectiveReduceV2", "CollectiveReduceV2", &[x, size, key, key], &[], a)?;
    let sess = Session::new(s.graph(), SessionOptions::default())?;
    let plan = sess.plan(&["x:0"], &["reduced:0"], &[])?;
    let value = Tensor::from_vec(&[n], vec![1.0f32; n])?;
    time(world, runs, || {
        sess.run_plan(&plan, std::slice::from_ref(&value))?;
        Ok(())
    })
}

/// `ferroflow run GRAPH` under `mpirun -np N`: every rank loads the same graph and feeds,
/// places it on the cluster's tasks (`/job:worker/task:r` is rank r; unplaced nodes go to
/// task 0), optimizes it for the whole step and runs its own task's partitions; `_Send`/`_Recv`
/// pairs between tasks travel as MPI messages. Rank 0 returns the fetches (they must be on
/// task 0), prints them and writes `--output`, and writes what the step recorded of every
/// task (`--partition-graphs`, `--run-metadata`, `--profile`: one host per rank).
pub(crate) fn run_cluster(
    graph: &std::path::Path,
    files: crate::RunFiles,
    crate::Names { feeds, fetches, targets }: crate::Names,
    mut options: SessionOptions,
    records: crate::Records,
    crate::StepLimits { timeout_ms, cancel }: crate::StepLimits,
) -> Result<()> {
    let timeout_in_ms = crate::timeout_in_ms(timeout_ms)?;
    run_in_world(|| {
        let world = collective::world();
        let (rank, size) = (world.rank(), world.size());
        if fetches.is_empty() && targets.is_empty() {
            bail!("nothing to run: give at least one --fetch NAME or --target NODE");
        }
        if let Some(c) = files.checkpoint {
            bail!("--checkpoint {}: restoring a checkpoint is not supported under mpirun yet", c.display());
        }
        options.cluster = Some(ferroflow::runtime::Cluster { tasks: size, task: rank });
        let g = crate::load(graph)?;
        let feeds = crate::read_feeds(files.inputs, feeds)?;
        let sess = Session::new(g, options)?;
        let feed_refs: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
        let fetch_refs: Vec<&str> = fetches.iter().map(String::as_str).collect();
        let target_refs: Vec<&str> = targets.iter().map(String::as_str).collect();
        if let Some(dir) = files.profile.filter(|_| rank == 0) {
            ferroflow::train::profile::check_writable(dir)?;
        }
        if files.profile.is_some() {
            ferroflow::profiler::start(&Default::default())?;
        }
        let step = ferroflow::profiler::step("run", 0);
        let run_options = records.options(timeout_in_ms);
        let (results, meta) = sess.run_with(&feed_refs, &fetch_refs, &target_refs, &run_options, cancel.as_ref())?;
        drop(step);
        if let Some(dir) = files.profile {
            let p = ferroflow::profiler::stop()?;
            if let Some(path) = ferroflow::train::profile::gather_profiles(&p, dir, &*world)? {
                out!("wrote the profile of {size} rank(s) (a host each) to {}", path.parent().unwrap_or(dir).display());
            }
        }
        if rank != 0 {
            return Ok(());
        }
        records.write(&meta)?;
        for (name, t) in fetches.iter().zip(&results) {
            crate::print_tensor(name, t);
        }
        if let Some(out) = files.output {
            let arrays: Vec<(String, Tensor)> = fetches.iter().cloned().zip(results).collect();
            ferroflow::tensor::npy::write_npz(out, &arrays)?;
            out!("wrote {} tensor(s) to {}", arrays.len(), out.display());
        }
        Ok(())
    })
}
