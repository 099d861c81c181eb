//! `ferroflow run GRAPH` under `mpirun -np N`.
use anyhow::{bail, Result};
use ferroflow::collective;
use ferroflow::prelude::*;
use ferroflow::runtime::Cancellation;

use super::{print_tensor, RunArgs};
use crate::{load, world};

/// Every rank loads the same graph and feeds, places it on the cluster's tasks
/// (`/job:worker/task:r` is rank r; unplaced nodes go to task 0), optimizes it for the whole
/// step and runs its own task's partitions; `_Send`/`_Recv` pairs between tasks travel as MPI
/// messages. Rank 0 returns the fetches (they must be on task 0), prints them and writes
/// `--output`, and writes what the step recorded of every task (`--partition-graphs`,
/// `--run-metadata`, `--profile`: one host per rank).
pub(super) fn run_cluster(args: &RunArgs, mut options: SessionOptions, cancel: Option<Cancellation>) -> Result<()> {
    let timeout_in_ms = args.timeout_in_ms()?;
    let (fetches, targets) = (&args.fetches, &args.targets);
    world::run_in_world(|| {
        let world = collective::world();
        let (rank, size) = (world.rank(), world.size());
        if fetches.is_empty() && targets.is_empty() {
            bail!("nothing to run: give at least one --fetch NAME or --target NODE");
        }
        if let Some(c) = &args.checkpoint {
            bail!("--checkpoint {}: restoring a checkpoint is not supported under mpirun yet", c.display());
        }
        options.cluster = Some(ferroflow::runtime::Cluster { tasks: size, task: rank });
        let g = load::graph(&args.graph)?;
        let feeds = load::feeds(args.inputs.as_deref(), &args.feeds)?;
        let sess = Session::new(g, options)?;
        let feed_refs: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
        let fetch_refs: Vec<&str> = fetches.iter().map(String::as_str).collect();
        let target_refs: Vec<&str> = targets.iter().map(String::as_str).collect();
        let profile = args.profile.as_deref();
        if let Some(dir) = profile.filter(|_| rank == 0) {
            ferroflow::train::profile::check_writable(dir)?;
        }
        if profile.is_some() {
            ferroflow::profiler::start(&Default::default())?;
        }
        let step = ferroflow::profiler::step("run", 0);
        let run_options = args.run_options(timeout_in_ms);
        let (results, meta) = sess.run_with(&feed_refs, &fetch_refs, &target_refs, &run_options, cancel.as_ref())?;
        drop(step);
        if let Some(dir) = profile {
            let p = ferroflow::profiler::stop()?;
            if let Some(path) = ferroflow::train::profile::gather_profiles(&p, dir, &*world)? {
                out!("wrote the profile of {size} rank(s) (a host each) to {}", path.parent().unwrap_or(dir).display());
            }
        }
        if rank != 0 {
            return Ok(());
        }
        args.write_records(&meta)?;
        for (name, t) in fetches.iter().zip(&results) {
            print_tensor(name, t);
        }
        args.write_output(results)
    })
}
