//! A [`Profile`] as TensorFlow's XSpace, the file TensorBoard's profile plugin (xprof) reads
//! from `<logdir>/plugins/profile/<run>/<host>.xplane.pb`, following what xprof needs to see
//! steps, ops and the input pipeline (`shared/reference/xspace-minimal.md`):
//!
//! - one plane `/host:CPU`, one line per thread (`id` = thread id, `name` = thread name),
//!   line timestamps 0 and event offsets in ps since the profile's start (epoch ns overflow
//!   xprof's ps arithmetic);
//! - events sorted by start, enclosing events first; never partially overlapping on a line;
//! - a step is an event with stats `step_num` (int64) and `_r` = 1 that encloses work on its
//!   line; work on other threads is linked to it by `_pt`/`_p` on an event inside the step
//!   and `_ct`/`_c` on an `ExecutorState::Process` event enclosing that thread's ops of the
//!   step (added here, from the ops' times);
//! - ops are named `name:Type` (`display_name` = `Type`); input waits `IteratorGetNext`;
//!   pipeline stages `Iterator::Root::...`;
//! - a `Task Environment` plane with `profile_start_time`/`profile_stop_time`.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ferroflow_proto::profiler::{x_stat, XEvent, XEventMetadata, XLine, XPlane, XSpace, XStat, XStatMetadata};
use prost::Message;

use crate::collect::{Event, Kind, Profile};
use crate::ProfileError;

/// The plane xprof reads host threads from.
pub const HOST_PLANE: &str = "/host:CPU";

const STEP_NUM: i64 = 1;
const ROOT: i64 = 2;
const PRODUCER_TYPE: i64 = 3;
const PRODUCER_ID: i64 = 4;
const CONSUMER_TYPE: i64 = 5;
const CONSUMER_ID: i64 = 6;
const START_TIME: i64 = 7;
const STOP_TIME: i64 = 8;
/// The context type TensorFlow uses between a step and its executor threads.
const CONTEXT_TYPE: i64 = 2;
/// Name of the synthesized event that links a thread's ops to their step.
pub const PROCESS_EVENT: &str = "ExecutorState::Process";

fn stat(id: i64, v: i64) -> XStat {
    XStat { metadata_id: id, value: Some(x_stat::Value::Int64Value(v)) }
}

/// An event being placed on a line: its interval, metadata, stats, and its order among
/// events that start and end together (lower first: enclosing first).
struct Placed {
    start: u64,
    end: u64,
    rank: u8,
    metadata: i64,
    stats: Vec<XStat>,
}

/// Whether any event in `events` partially overlaps `[lo, hi]`.
fn partially_overlaps(events: &[Event], lo: u64, hi: u64) -> bool {
    events.iter().any(|e| {
        let (s, t) = (e.start_ns, e.end_ns());
        let disjoint = t <= lo || s >= hi;
        let inside = s >= lo && t <= hi;
        let encloses = s <= lo && t >= hi;
        !(disjoint || inside || encloses)
    })
}

/// The profile as an XSpace for host `host`.
pub fn to_xspace(profile: &Profile, host: &str) -> XSpace {
    let mut plane = XPlane { id: 1, name: HOST_PLANE.into(), ..Default::default() };
    for (id, name) in [
        (STEP_NUM, "step_num"),
        (ROOT, "_r"),
        (PRODUCER_TYPE, "_pt"),
        (PRODUCER_ID, "_p"),
        (CONSUMER_TYPE, "_ct"),
        (CONSUMER_ID, "_c"),
    ] {
        plane.stat_metadata.insert(id, XStatMetadata { id, name: name.into(), description: String::new() });
    }
    let mut metadata: HashMap<String, i64> = HashMap::new();
    let mut md = |plane: &mut XPlane, name: &str, kind: Option<Kind>| -> i64 {
        if let Some(&id) = metadata.get(name) {
            return id;
        }
        let id = metadata.len() as i64 + 1;
        metadata.insert(name.to_string(), id);
        // An op's display name is its type (`Relu` for `dense/Relu:Relu`).
        let display_name = match (kind, name.rsplit_once(':')) {
            (Some(Kind::Op), Some((_, ty))) => ty.to_string(),
            _ => String::new(),
        };
        plane.event_metadata.insert(id, XEventMetadata { id, name: name.into(), display_name, ..Default::default() });
        id
    };
    let process = md(&mut plane, PROCESS_EVENT, None);

    // Steps in time order, each with its link id.
    let mut steps: Vec<(u32, Event)> = profile
        .threads
        .iter()
        .flat_map(|t| t.events.iter().filter(|e| e.kind == Kind::Step).map(move |e| (t.id, *e)))
        .collect();
    steps.sort_by_key(|(_, e)| e.start_ns);
    // The session runs inside each step (their op events carry the run's id); empty when the
    // step has none, and then every op inside the step's time is its work.
    let step_runs: Vec<Vec<i64>> = steps
        .iter()
        .map(|(tid, s)| {
            let line = profile.threads.iter().find(|t| t.id == *tid);
            line.map(|t| {
                t.events
                    .iter()
                    .filter(|e| {
                        e.kind == Kind::Region && e.arg != 0 && e.start_ns >= s.start_ns && e.end_ns() <= s.end_ns()
                    })
                    .map(|e| e.arg)
                    .collect()
            })
            .unwrap_or_default()
        })
        .collect();

    let mut lines = Vec::new();
    for t in &profile.threads {
        let mut placed: Vec<Placed> = Vec::with_capacity(t.events.len());
        for e in &t.events {
            let mut stats = Vec::new();
            if e.kind == Kind::Step {
                stats.push(stat(STEP_NUM, e.arg));
                stats.push(stat(ROOT, 1));
            }
            let metadata = md(&mut plane, profile.name(e.name), Some(e.kind));
            let rank = if e.kind == Kind::Step { 0 } else { 2 };
            placed.push(Placed { start: e.start_ns, end: e.end_ns(), rank, metadata, stats });
        }
        for (link, (step_thread, step)) in steps.iter().enumerate() {
            let link = link as i64 + 1;
            let (lo, hi) = (step.start_ns, step.end_ns());
            if *step_thread == t.id {
                // The producer side: the first region inside the step, else the step itself.
                let inner = placed
                    .iter_mut()
                    .enumerate()
                    .filter(|(_, p)| p.rank == 2)
                    .find(|(i, p)| p.start >= lo && p.end <= hi && t.events[*i].kind == Kind::Region);
                let target = match inner {
                    Some((_, p)) => p,
                    None => match placed.iter_mut().find(|p| p.rank == 0 && p.start == lo && p.end == hi) {
                        Some(p) => p,
                        None => continue,
                    },
                };
                target.stats.push(stat(PRODUCER_TYPE, CONTEXT_TYPE));
                target.stats.push(stat(PRODUCER_ID, link));
                continue;
            }
            // The consumer side: this thread's ops inside the step, under one Process event
            // (or one per op where a longer one would cut through another event).
            let runs = &step_runs[link as usize - 1];
            let ops: Vec<&Event> = t
                .events
                .iter()
                .filter(|e| e.kind == Kind::Op && e.start_ns >= lo && e.end_ns() <= hi)
                .filter(|e| runs.is_empty() || runs.contains(&e.arg))
                .collect();
            let (Some(first), Some(last)) =
                (ops.iter().map(|e| e.start_ns).min(), ops.iter().map(|e| e.end_ns()).max())
            else {
                continue;
            };
            let spans: Vec<(u64, u64)> = if partially_overlaps(&t.events, first, last) {
                ops.iter().map(|e| (e.start_ns, e.end_ns())).collect()
            } else {
                vec![(first, last)]
            };
            for (s, e) in spans {
                let stats = vec![stat(CONSUMER_TYPE, CONTEXT_TYPE), stat(CONSUMER_ID, link)];
                placed.push(Placed { start: s, end: e, rank: 1, metadata: process, stats });
            }
        }
        // Start order; at equal starts the longer (enclosing) event first.
        placed.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)).then(a.rank.cmp(&b.rank)));
        let events = placed
            .into_iter()
            .map(|p| XEvent {
                metadata_id: p.metadata,
                data: Some(ferroflow_proto::profiler::x_event::Data::OffsetPs(p.start as i64 * 1000)),
                duration_ps: (p.end - p.start) as i64 * 1000,
                stats: p.stats,
            })
            .collect();
        lines.push(XLine {
            id: t.id as i64,
            display_id: t.id as i64,
            name: t.name.clone(),
            timestamp_ns: 0,
            duration_ps: profile.duration_ns as i64 * 1000,
            events,
            ..Default::default()
        });
    }
    plane.lines = lines;

    let mut env = XPlane { id: 2, name: "Task Environment".into(), ..Default::default() };
    for (id, name) in [(START_TIME, "profile_start_time"), (STOP_TIME, "profile_stop_time")] {
        env.stat_metadata.insert(id, XStatMetadata { id, name: name.into(), description: String::new() });
    }
    let start = profile.start_unix_ns.max(0) as u64;
    env.stats = vec![
        XStat { metadata_id: START_TIME, value: Some(x_stat::Value::Uint64Value(start)) },
        XStat { metadata_id: STOP_TIME, value: Some(x_stat::Value::Uint64Value(start + profile.duration_ns)) },
    ];
    let warnings = if profile.dropped > 0 {
        vec![format!("{} events were dropped: the profile's event budget was spent", profile.dropped)]
    } else {
        Vec::new()
    };
    XSpace { planes: vec![plane, env], errors: Vec::new(), warnings, hostnames: vec![host.to_string()] }
}

/// This machine's host name (for the file name), `localhost` when unknown.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && !s.contains('/'))
        .unwrap_or_else(|| "localhost".into())
}

/// `YYYY_MM_DD_HH_MM_SS` (UTC) of a Unix time in seconds, TensorFlow's run directory name.
pub fn run_name(unix_secs: i64) -> String {
    let (days, secs) = (unix_secs.div_euclid(86_400), unix_secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}_{m:02}_{d:02}_{:02}_{:02}_{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

/// Writes the profile to `<logdir>/plugins/profile/<run>/<host>.xplane.pb` in a new run
/// directory (TensorBoard caches per run directory, so every capture gets its own) and
/// returns the file's path.
pub fn write_to_logdir(profile: &Profile, logdir: &Path) -> Result<PathBuf, ProfileError> {
    let host = host_name();
    let space = to_xspace(profile, &host);
    let mut written = write_hosts_to_logdir(profile.start_unix_ns, &[(host, space)], logdir)?;
    Ok(written.remove(0))
}

/// Writes one capture of several hosts (the ranks of a distributed run) into one new run
/// directory, `<logdir>/plugins/profile/<run>/<host>.xplane.pb` each, as TensorFlow's
/// multi-worker capture does: TensorBoard's profile plugin lists the run's hosts. `start_unix_ns`
/// names the run; returns the files' paths in the order given.
pub fn write_hosts_to_logdir(
    start_unix_ns: i64,
    hosts: &[(String, XSpace)],
    logdir: &Path,
) -> Result<Vec<PathBuf>, ProfileError> {
    if let Some((host, _)) = hosts.iter().find(|(h, _)| h.is_empty() || h.contains(['/', '\\']) || h.starts_with('.')) {
        return Err(ProfileError::Write {
            path: logdir.to_path_buf(),
            reason: format!("host name '{host}' cannot be a file name"),
        });
    }
    let base = run_name(start_unix_ns.div_euclid(1_000_000_000));
    let root = logdir.join("plugins").join("profile");
    std::fs::create_dir_all(&root).map_err(|e| ProfileError::io(&root, e))?;
    let mut dir = root.join(&base);
    let mut n = 1;
    while let Err(e) = std::fs::create_dir(&dir) {
        if e.kind() != std::io::ErrorKind::AlreadyExists || n > 1000 {
            return Err(ProfileError::io(&dir, e));
        }
        dir = root.join(format!("{base}_{n}"));
        n += 1;
    }
    let mut written = Vec::with_capacity(hosts.len());
    for (host, space) in hosts {
        let path = dir.join(format!("{host}.xplane.pb"));
        write_xspace(space, &path)?;
        written.push(path);
    }
    Ok(written)
}

/// Writes an XSpace file atomically.
pub fn write_xspace(space: &XSpace, path: &Path) -> Result<(), ProfileError> {
    ferroflow_tensor::fs::write_atomic(path, &space.encode_to_vec())
        .map_err(|e| ProfileError::Write { path: path.to_path_buf(), reason: e.to_string() })
}

/// Reads an `.xplane.pb` file.
pub fn read_xspace(path: &Path) -> Result<XSpace, ProfileError> {
    let bytes = std::fs::read(path).map_err(|e| ProfileError::io(path, e))?;
    decode_xspace(&bytes, path)
}

/// Decodes the bytes of an `.xplane.pb`; errors name `path` and where the bytes are damaged.
pub fn decode_xspace(bytes: &[u8], path: &Path) -> Result<XSpace, ProfileError> {
    ferroflow_proto::check_decoded_size::<XSpace>(bytes, &path.display().to_string())?;
    XSpace::decode(bytes).map_err(|e| ProfileError::Decode {
        path: path.to_path_buf(),
        len: bytes.len() as u64,
        at: crate::wire::first_damage(bytes),
        reason: ferroflow_proto::decode_reason(&e),
    })
}

#[cfg(test)]
mod tests {
    use super::run_name;

    #[test]
    fn run_names_are_tensorflow_s_format() {
        assert_eq!(run_name(0), "1970_01_01_00_00_00");
        // 2026-11-29 15:08:13 UTC.
        assert_eq!(run_name(1_795_964_893), "2026_11_29_15_08_13");
        assert_eq!(run_name(951_782_400), "2000_02_29_00_00_00");
    }
}
