//! Chrome trace JSON (`chrome://tracing`, Perfetto) from an XSpace — ferroflow's or
//! TensorFlow's: one process per plane, one thread per line, complete events (`ph: "X"`,
//! µs) with their int and string stats as args.
use std::path::Path;

use ferroflow_proto::profiler::{x_event, x_stat, XSpace};
use serde_json::{json, Map, Value};

use crate::collect::Profile;
use crate::ProfileError;

/// Calls `f` with each event of `space`'s Chrome trace, in order: each plane's
/// `process_name`, each line's `thread_name`, then the line's complete events.
fn for_each_event<E>(space: &XSpace, mut f: impl FnMut(Value) -> Result<(), E>) -> Result<(), E> {
    for (pid, plane) in space.planes.iter().enumerate().filter(|(_, p)| !p.lines.is_empty()) {
        f(json!({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": plane.name}}))?;
        for line in &plane.lines {
            f(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": line.id, "args": {"name": line.name}}))?;
            let base_ps = line.timestamp_ns as f64 * 1e3;
            for e in &line.events {
                let offset = match e.data {
                    Some(x_event::Data::OffsetPs(o)) => o as f64,
                    _ => 0.0,
                };
                let name = plane.event_metadata.get(&e.metadata_id).map_or("?", |m| m.name.as_str());
                let mut args = Map::new();
                for s in &e.stats {
                    let Some(key) = plane.stat_metadata.get(&s.metadata_id).map(|m| m.name.clone()) else { continue };
                    let v = match &s.value {
                        Some(x_stat::Value::Int64Value(v)) => json!(v),
                        Some(x_stat::Value::Uint64Value(v)) => json!(v),
                        Some(x_stat::Value::DoubleValue(v)) => json!(v),
                        Some(x_stat::Value::StrValue(v)) => json!(v),
                        _ => continue,
                    };
                    args.insert(key, v);
                }
                f(json!({
                    "ph": "X",
                    "name": name,
                    "pid": pid,
                    "tid": line.id,
                    "ts": (base_ps + offset) / 1e6,
                    "dur": e.duration_ps as f64 / 1e6,
                    "args": args,
                }))?;
            }
        }
    }
    Ok(())
}

/// An XSpace as a Chrome trace document (in memory: for large captures,
/// [`write_xspace_chrome_trace`] streams the same JSON).
pub fn xspace_to_chrome_trace(space: &XSpace) -> Value {
    let mut events = Vec::new();
    let _ = for_each_event::<()>(space, |e| {
        events.push(e);
        Ok(())
    });
    json!({"traceEvents": events, "displayTimeUnit": "ms"})
}

/// Writes `space`'s Chrome trace JSON to `out` event by event, so memory stays that of one
/// event (a document tree of a 300,000-event capture took 160 times the file's size).
pub fn write_xspace_chrome_trace(space: &XSpace, out: &mut impl std::io::Write) -> std::io::Result<()> {
    out.write_all(b"{\"traceEvents\":[")?;
    let mut first = true;
    for_each_event(space, |e| {
        if !std::mem::take(&mut first) {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, &e).map_err(std::io::Error::from)
    })?;
    out.write_all(b"],\"displayTimeUnit\":\"ms\"}")
}

/// Writes `space`'s Chrome trace JSON to `path` atomically, streamed
/// ([`write_xspace_chrome_trace`]).
pub fn write_xspace_chrome_trace_file(space: &XSpace, path: &Path) -> Result<(), ProfileError> {
    ferroflow_tensor::fs::write_atomic_with(path, |w| write_xspace_chrome_trace(space, w))
        .map_err(|e| ProfileError::Write { path: path.to_path_buf(), reason: e.to_string() })
}

/// A profile as a Chrome trace document (through its XSpace, so both show the same events).
pub fn to_chrome_trace(profile: &Profile) -> Value {
    xspace_to_chrome_trace(&crate::xspace::to_xspace(profile, &crate::xspace::host_name()))
}

/// Writes a profile's Chrome trace JSON atomically.
pub fn write_chrome_trace(profile: &Profile, path: &Path) -> Result<(), ProfileError> {
    write_xspace_chrome_trace_file(&crate::xspace::to_xspace(profile, &crate::xspace::host_name()), path)
}
