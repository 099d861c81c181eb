//! Profiling a window of training batches, as Keras's `TensorBoard(profile_batch='A,B')`:
//! the profiler starts at the beginning of global batch `A` (1-based, counted across epochs)
//! and stops at the end of batch `B`; the capture is written as
//! `<log_dir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb`, which TensorBoard's
//! profile plugin lists, with steps that its overview page detects (Keras 3's own callback
//! writes its step markers without the `_r` stat, and the overview finds none).
use std::path::{Path, PathBuf};

use crate::{Result, TrainError};

/// Which batches to profile and where the capture goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileBatches {
    /// The run directory (`<log_dir>/plugins/profile/...` is written below it).
    pub log_dir: PathBuf,
    /// First batch profiled (1-based, across epochs).
    pub first: u64,
    /// Last batch profiled (inclusive).
    pub last: u64,
    /// In a world of several ranks (data-parallel training), every rank profiles the same
    /// batches and rank 0 writes every rank's capture into one run directory, a host each
    /// (`<host>-rank<r>.xplane.pb`); every rank must profile with this set.
    pub gather: bool,
}

impl ProfileBatches {
    /// Parses Keras's `profile_batch`: `"A,B"` (a range) or `"A"` (one batch); checks that
    /// `log_dir` can be written now rather than after the profiled batches.
    pub fn parse(log_dir: &Path, spec: &str) -> Result<ProfileBatches> {
        let bad = || {
            TrainError::Invalid(format!(
                "profile_batch must be a positive batch number or a range 'START,STOP' with 0 < START <= STOP, got '{spec}'"
            ))
        };
        let parts: Vec<&str> = spec.split(',').map(str::trim).collect();
        let nums: Vec<u64> = parts.iter().map(|p| p.parse::<u64>().map_err(|_| bad())).collect::<Result<_>>()?;
        let (first, last) = match nums[..] {
            [a] => (a, a),
            [a, b] => (a, b),
            _ => return Err(bad()),
        };
        if first == 0 || last < first {
            return Err(bad());
        }
        check_writable(log_dir)?;
        Ok(ProfileBatches { log_dir: log_dir.to_path_buf(), first, last, gather: false })
    }
}

/// Fails now, naming the directory, when `dir` cannot be created or written.
pub fn check_writable(dir: &Path) -> Result<()> {
    let fail = |e: std::io::Error| TrainError::Io {
        context: format!("log directory {}: not writable", dir.display()),
        source: e,
    };
    std::fs::create_dir_all(dir).map_err(fail)?;
    let probe = dir.join(format!(".ferroflow-write-check-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(fail)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The profiler around a window of batches (one per training run).
pub(crate) struct ProfileWindow {
    spec: ProfileBatches,
    running: bool,
    done: bool,
    /// Where the capture was written.
    pub(crate) written: Option<PathBuf>,
}

impl ProfileWindow {
    pub(crate) fn new(spec: &ProfileBatches) -> ProfileWindow {
        ProfileWindow { spec: spec.clone(), running: false, done: false, written: None }
    }

    /// Gathers every rank's capture to rank 0 ([`ProfileBatches::gather`]).
    pub(crate) fn gather(&mut self) {
        self.spec.gather = true;
    }

    /// The first and last batch profiled (1-based).
    pub(crate) fn batches(&self) -> (u64, u64) {
        (self.spec.first, self.spec.last)
    }

    /// Before global batch `batch` (1-based).
    pub(crate) fn batch_begin(&mut self, batch: u64) -> Result<()> {
        if !self.running && !self.done && batch >= self.spec.first && batch <= self.spec.last {
            ferroflow_profiler::start(&Default::default()).map_err(profile_batch_error)?;
            self.running = true;
        }
        Ok(())
    }

    /// After global batch `batch`; stops and writes the capture after the last one.
    pub(crate) fn batch_end(&mut self, batch: u64) -> Result<()> {
        if self.running && batch >= self.spec.last {
            self.finish()?;
        }
        Ok(())
    }

    /// Stops a capture still running (training ended inside the window) and writes it.
    pub(crate) fn finish(&mut self) -> Result<()> {
        if !self.running {
            return Ok(());
        }
        self.running = false;
        self.done = true;
        let profile = ferroflow_profiler::stop().map_err(profile_batch_error)?;
        let world = ferroflow_collective::world();
        if self.spec.gather && world.size() > 1 {
            self.written = gather_profiles(&profile, &self.spec.log_dir, &*world)?;
            return Ok(());
        }
        let path =
            ferroflow_profiler::xspace::write_to_logdir(&profile, &self.spec.log_dir).map_err(profile_batch_error)?;
        self.written = Some(path);
        Ok(())
    }
}

fn profile_batch_error(source: ferroflow_profiler::ProfileError) -> TrainError {
    TrainError::Profile { context: "profile_batch".into(), source }
}

/// Every rank's capture, gathered to rank 0 and written there into one run directory as a
/// host each (`<host>-rank<r>`); returns rank 0's file on rank 0, `None` elsewhere. The run is
/// named after rank 0's start. Every rank of `world` must call it.
pub fn gather_profiles(
    profile: &ferroflow_profiler::Profile,
    log_dir: &Path,
    world: &dyn ferroflow_collective::Communicator,
) -> Result<Option<PathBuf>> {
    use ferroflow_profiler::xspace;
    let context = || format!("profile of {} ranks", world.size());
    let collective = |source| TrainError::Collective { context: context(), source };
    let profiler = |source| TrainError::Profile { context: context(), source };
    let host = format!("{}-rank{}", xspace::host_name(), world.rank());
    let mine = ferroflow_proto::Message::encode_to_vec(&xspace::to_xspace(profile, &host));
    let all = ferroflow_collective::all_gather_varied(world, &mine).map_err(collective)?;
    let mut start = [profile.start_unix_ns];
    ferroflow_collective::broadcast(world, &mut start, 0).map_err(collective)?;
    if world.rank() != 0 {
        return Ok(None);
    }
    let mut hosts = Vec::with_capacity(all.len());
    for (rank, bytes) in all.iter().enumerate() {
        let space = xspace::decode_xspace(bytes, Path::new(&format!("<rank {rank}'s capture>"))).map_err(profiler)?;
        let name = space.hostnames.first().cloned().unwrap_or_else(|| format!("rank{rank}"));
        hosts.push((name, space));
    }
    let written = xspace::write_hosts_to_logdir(start[0], &hosts, log_dir).map_err(profiler)?;
    Ok(written.into_iter().next())
}

impl Drop for ProfileWindow {
    fn drop(&mut self) {
        // An error ended training inside the window: stop the process-wide profiler.
        if self.running {
            let _ = ferroflow_profiler::stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ProfileBatches;
    use crate::TrainError;

    #[test]
    fn keras_profile_batch_specs() {
        let d = tempfile::tempdir().unwrap();
        let p = ProfileBatches::parse(d.path(), "110,120").unwrap();
        assert_eq!((p.first, p.last), (110, 120));
        assert_eq!(ProfileBatches::parse(d.path(), "5").unwrap().last, 5);
        for bad in ["0,3", "4,2", "a", "1,2,3", ""] {
            let e = ProfileBatches::parse(d.path(), bad).unwrap_err().to_string();
            assert!(e.contains("profile_batch") && e.contains(bad), "{e}");
        }
        let e = ProfileBatches::parse(std::path::Path::new("/proc/no/such"), "1,2").unwrap_err();
        assert!(matches!(e, TrainError::Io { .. }), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("/proc/no/such") && e.contains("not writable"), "{e}");
    }
}
