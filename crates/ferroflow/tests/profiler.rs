//! The profiler end to end: `input_pipeline`'s small CNN trained from the flowers pipeline with
//! `profile_batch`, the `.xplane.pb` it writes (structure xprof needs: one `/host:CPU` plane,
//! steps with `step_num` and `_r`, ops `name:Type`, stages `Iterator::...`, sorted and
//! never partially overlapping events, step ↔ thread links), the report, Chrome trace, and
//! damaged files.
use std::collections::HashMap;

use ferroflow::profiler::report::{analyze, Verdict};
use ferroflow::profiler::{self, xspace, Kind};
use ferroflow::proto::profiler::{x_event, x_stat, XSpace};
use ferroflow::workflows::flowers::{self, FlowersOptions};
use ferroflow::workflows::input_pipeline::{self, PipelineOptions};

fn stat_ids(space: &XSpace) -> HashMap<String, i64> {
    space.planes[0].stat_metadata.iter().map(|(k, m)| (m.name.clone(), *k)).collect()
}

/// Every line's events sorted by start (enclosing first) and never partially overlapping.
fn check_lines(space: &XSpace) {
    for line in &space.planes[0].lines {
        let spans: Vec<(i64, i64)> = line
            .events
            .iter()
            .map(|e| match e.data {
                Some(x_event::Data::OffsetPs(o)) => (o, o + e.duration_ps),
                _ => panic!("event without offset"),
            })
            .collect();
        for w in spans.windows(2) {
            assert!(w[0].0 <= w[1].0, "line {}: events out of order", line.name);
        }
        let mut stack: Vec<(i64, i64)> = Vec::new();
        for &(s, e) in &spans {
            while stack.last().is_some_and(|&(_, end)| end <= s) {
                stack.pop();
            }
            if let Some(&(_, end)) = stack.last() {
                assert!(e <= end, "line {}: [{s}, {e}] partially overlaps an event ending at {end}", line.name);
            }
            stack.push((s, e));
        }
    }
}

#[test]
fn profiled_training_writes_an_xspace_that_xprof_can_read_and_a_report() {
    let _only = profiler::exclusive();
    let data = tempfile::tempdir().unwrap();
    let options = FlowersOptions { per_class: 4, size: Some((64, 48)), ..Default::default() };
    flowers::generate(data.path(), &options).unwrap();
    let logdir = tempfile::tempdir().unwrap();
    let pipeline = PipelineOptions { size: 32, batch: 4, ..Default::default() };
    let h = input_pipeline::train_profiled_cnn(data.path(), &pipeline, 8, logdir.path(), "3,6").unwrap();
    assert_eq!(h.history.steps, 8);
    let path = h.profile.expect("a profile was written");
    let rel = path.strip_prefix(logdir.path()).unwrap().to_string_lossy().into_owned();
    let parts: Vec<&str> = rel.split('/').collect();
    assert_eq!(parts[..2], ["plugins", "profile"], "{rel}");
    assert_eq!(parts[2].len(), 19, "run directory YYYY_MM_DD_HH_MM_SS: {rel}");
    assert!(parts[3].ends_with(".xplane.pb"), "{rel}");

    let space = xspace::read_xspace(&path).unwrap();
    assert_eq!(space.planes[0].name, "/host:CPU");
    check_lines(&space);
    let ids = stat_ids(&space);
    let plane = &space.planes[0];
    let names: HashMap<i64, &str> = plane.event_metadata.iter().map(|(k, m)| (*k, m.name.as_str())).collect();
    let int = |e: &ferroflow::proto::profiler::XEvent, stat: &str| {
        e.stats.iter().find(|s| Some(&s.metadata_id) == ids.get(stat)).and_then(|s| match s.value {
            Some(x_stat::Value::Int64Value(v)) => Some(v),
            _ => None,
        })
    };
    let events: Vec<&ferroflow::proto::profiler::XEvent> = plane.lines.iter().flat_map(|l| &l.events).collect();
    let steps: Vec<i64> = events.iter().filter_map(|e| int(e, "step_num")).collect();
    assert_eq!(steps, vec![3, 4, 5, 6], "profiled batches 3 to 6");
    assert!(events.iter().filter(|e| int(e, "step_num").is_some()).all(|e| int(e, "_r") == Some(1)));
    // Every consumer link names a producer inside a step.
    let producers: Vec<i64> = events.iter().filter_map(|e| int(e, "_p")).collect();
    let consumers: Vec<i64> = events.iter().filter_map(|e| int(e, "_c")).collect();
    assert!(consumers.iter().all(|c| producers.contains(c)), "{consumers:?} vs {producers:?}");
    let all_names: Vec<&str> = events.iter().map(|e| names[&e.metadata_id]).collect();
    assert!(
        all_names.iter().any(|n| n.starts_with("Iterator::Root::") && n.ends_with("::Batch::Map")),
        "{all_names:?}"
    );
    assert!(all_names.contains(&"IteratorGetNext"));
    assert!(all_names.contains(&"Session::run"));

    let report = analyze(&space).unwrap();
    assert_eq!(report.steps.len(), 4);
    for s in &report.steps {
        assert!(s.input_ns > 0 && s.compute_ns > 0 && s.input_ns + s.compute_ns <= s.total_ns, "{s:?}");
    }
    let types: Vec<&str> = report.op_types.iter().map(|s| s.name.as_str()).collect();
    assert!(types.iter().any(|t| t.contains("Conv2D")), "{types:?}");
    assert!(types.iter().any(|t| t.contains("Adam")), "the optimizer's update ops: {types:?}");
    assert!(report.stages.iter().any(|s| s.name.ends_with("::Map")));
    assert_ne!(report.verdict, Verdict::NoSteps);
    let text = report.to_string();
    assert!(text.contains("Step-time breakdown") && text.contains("Verdict:"), "{text}");
    if report.verdict == Verdict::HighlyInputBound {
        // No prefetch and a serial map: both are named.
        assert!(text.contains("prefetch") && text.contains("map_parallel"), "{text}");
    }
}

#[test]
fn threads_record_into_their_own_buffers_and_the_budget_holds() {
    let _only = profiler::exclusive();
    profiler::start(&profiler::ProfilerOptions::default().with_max_events(50_000)).unwrap();
    assert!(matches!(profiler::start(&Default::default()), Err(profiler::ProfileError::AlreadyRunning)));
    let name = profiler::intern("work:Work");
    std::thread::scope(|s| {
        for t in 0..4 {
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn_scoped(s, move || {
                    for i in 0..20_000u64 {
                        let t0 = profiler::clock::ticks();
                        profiler::record(name, Kind::Op, t0, t0 + i % 7, 0);
                    }
                })
                .unwrap();
        }
    });
    let p = profiler::stop().unwrap();
    let kept: usize = p.threads.iter().map(|t| t.events.len()).sum();
    let per: Vec<(String, usize)> = p.threads.iter().map(|t| (t.name.clone(), t.events.len())).collect();
    assert!(kept <= 50_000 && p.dropped > 0, "kept {kept} {per:?} dropped {}", p.dropped);
    assert_eq!(kept as u64 + p.dropped, 80_000);
    assert!(per.iter().all(|(n, _)| n.starts_with("worker-")), "{per:?}");
    let space = xspace::to_xspace(&p, "h");
    assert!(space.warnings[0].contains("dropped"));
    // Off again: nothing is recorded.
    profiler::record(name, Kind::Op, 0, 1, 0);
    assert!(matches!(profiler::stop(), Err(profiler::ProfileError::NotRunning)));
}

#[test]
fn chrome_trace_and_damaged_files() {
    let _only = profiler::exclusive();
    profiler::start(&Default::default()).unwrap();
    {
        let _step = profiler::step("train", 7);
        let _op = profiler::span_kind("dense/MatMul:MatMul", Kind::Op, 0);
    }
    let p = profiler::stop().unwrap();
    let json = profiler::chrome::to_chrome_trace(&p);
    let events = json["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| e["ph"] == "X" && e["name"] == "dense/MatMul:MatMul"));
    assert!(events.iter().any(|e| e["ph"] == "X" && e["args"]["step_num"] == 7));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cut.xplane.pb");
    let bytes = prost::Message::encode_to_vec(&xspace::to_xspace(&p, "h"));
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let e = xspace::read_xspace(&file).unwrap_err().to_string();
    assert!(e.contains("cut.xplane.pb") && e.contains("byte offset"), "{e}");
    let e = xspace::read_xspace(&dir.path().join("missing.xplane.pb")).unwrap_err().to_string();
    assert!(e.contains("missing.xplane.pb"), "{e}");
}

/// TensorFlow's own profile of a Keras `fit` (`scripts/make_profile_fixtures.py`): the report
/// finds its three steps, its ops and its tf.data stages; events with hostile durations and
/// offsets do not overflow the sums.
#[test]
fn tensorflow_s_profile_is_reported_and_hostile_times_saturate() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/profile/tf_keras_fit.xplane.pb");
    let mut space = xspace::read_xspace(&path).unwrap();
    let report = analyze(&space).unwrap();
    assert_eq!(report.steps.len(), 3, "profile_batch='3,5'");
    assert!(report.steps.iter().all(|s| s.total_ns > 0 && s.compute_ns > 0 && s.compute_ns <= s.total_ns));
    let types: Vec<&str> = report.op_types.iter().map(|s| s.name.as_str()).collect();
    assert!(types.contains(&"_FusedMatMul") && types.contains(&"MatMul"), "{types:?}");
    assert!(report.stages.iter().any(|s| s.name.starts_with("Iterator::Root::")), "{:?}", report.stages);
    assert_ne!(report.verdict, Verdict::NoSteps);

    for plane in &mut space.planes {
        for line in &mut plane.lines {
            line.timestamp_ns = i64::MIN / 2;
            for (i, e) in line.events.iter_mut().enumerate() {
                e.duration_ps = if i % 2 == 0 { i64::MAX } else { -5 };
                e.data = Some(x_event::Data::OffsetPs(if i % 3 == 0 { i64::MAX } else { i64::MIN }));
            }
        }
    }
    let report = analyze(&space).unwrap();
    assert!(report.steps.iter().all(|s| s.input_ns.saturating_add(s.compute_ns) <= s.total_ns));
    let _ = report.to_string();
}
