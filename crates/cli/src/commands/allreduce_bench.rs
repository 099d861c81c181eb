//! `ferroflow allreduce-bench`: all-reduce bandwidth of ferroflow's collective against raw
//! `MPI_Allreduce`.
use anyhow::{bail, Result};
use clap::Args;
use ferroflow::collective::{self, Communicator, Kind, ReduceOp};
use ferroflow::prelude::*;

use crate::world;

/// Measure all-reduce bandwidth: ferroflow's collective against raw MPI_Allreduce.
///
/// Under `mpirun -np N` (a build with `--features mpi`): the all-reduce (sum) of f32 buffers of
/// each --mb size by ferroflow's collective engine (what `CollectiveReduceV2` runs on), by raw
/// `MPI_Allreduce` and by a session running the `CollectiveReduceV2` op; rank 0 prints one row per
/// size: milliseconds and GB/s (bytes / time) of each and their ratio.
#[derive(Args)]
pub struct AllreduceBenchArgs {
    /// Buffer sizes in MB (1e6 bytes of f32), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4,16,64,200")]
    mb: Vec<f64>,
    /// Timed runs per size (the median is reported).
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// Rank 0 arrives this many microseconds after the others (a busy wait after the
    /// barrier), as in a training step where one rank's backprop ends later; times are
    /// then rank 0's own (the last to arrive): what the all-reduce costs once all are in.
    #[arg(long, value_name = "US", default_value_t = 0)]
    skew_us: u64,
}

/// `ferroflow allreduce-bench`: all-reduce bandwidth of ferroflow's collective (the engine
/// under `CollectiveReduceV2`, and the op run by a session) against raw `MPI_Allreduce` (out
/// of place, into a second buffer) on buffers of the same sizes; rank 0 prints the table. Times are the slowest rank's, the
/// median of `runs` after a barrier each.
pub fn run(args: AllreduceBenchArgs) -> Result<()> {
    let AllreduceBenchArgs { mb: sizes_mb, runs, skew_us } = args;
    if runs == 0 {
        bail!("--runs 0: expected at least one run");
    }
    world::run_in_world(|| {
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
        for &mb in &sizes_mb {
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
