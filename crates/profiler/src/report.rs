//! The terminal report of `ferroflow profile`: from any XSpace (ferroflow's or TensorFlow's)
//! the top ops by self time, the step-time breakdown, the input-bound verdict with
//! TensorFlow's thresholds (input > 20% of the step: highly, 5–20%: moderately) and concrete
//! recommendations — the answer the overview and input-pipeline pages give, without a browser.
use std::collections::HashMap;
use std::fmt;

use ferroflow_proto::profiler::{x_stat, XSpace};

use crate::xspace::HOST_PLANE;
use crate::ProfileError;

/// Self time and count of one op type, op or pipeline stage.
#[derive(Debug, Clone, PartialEq)]
pub struct Stat {
    /// The op type (`MatMul`), op (`dense/MatMul:MatMul`) or stage (`Iterator::Root::Prefetch`).
    pub name: String,
    /// Executions.
    pub count: u64,
    /// Total self time (children excluded), ns.
    pub self_ns: u64,
}

/// One step's time split.
#[derive(Debug, Clone, PartialEq)]
pub struct StepTime {
    /// The step number.
    pub step: i64,
    /// Wall time, ns.
    pub total_ns: u64,
    /// Waiting for the input pipeline (`IteratorGetNext`), ns.
    pub input_ns: u64,
    /// Op self time inside the step (all threads, at most the step less its input), ns.
    pub compute_ns: u64,
}

impl StepTime {
    /// The rest: framework overhead and idle threads, ns.
    pub fn other_ns(&self) -> u64 {
        self.total_ns.saturating_sub(self.input_ns.saturating_add(self.compute_ns))
    }
}

/// TensorFlow's input-bound classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No step markers: nothing to classify.
    NoSteps,
    /// Input takes more than 20% of the step.
    HighlyInputBound,
    /// Input takes 5–20% of the step.
    ModeratelyInputBound,
    /// Input takes less than 5% of the step.
    NotInputBound,
}

/// What `ferroflow profile` prints.
#[derive(Debug, Clone)]
pub struct Report {
    /// The host names in the file.
    pub hosts: Vec<String>,
    /// Steps in order (xprof drops the first and last when there are more than 5; so does
    /// the average here, see [`Report::counted_steps`]).
    pub steps: Vec<StepTime>,
    /// Op types by self time, largest first.
    pub op_types: Vec<Stat>,
    /// Ops by self time, largest first.
    pub ops: Vec<Stat>,
    /// Input-pipeline stages by self time, largest first.
    pub stages: Vec<Stat>,
    /// The classification.
    pub verdict: Verdict,
    /// What to do, most useful first.
    pub recommendations: Vec<String>,
    /// Threads (lines) in the host plane.
    pub threads: usize,
}

struct Ev {
    start: i64,
    end: i64,
    name: usize,
    step: Option<i64>,
    /// `_p` (producer id) and `_c` (consumer id): links between a step and other threads.
    producer: Option<i64>,
    consumer: Option<i64>,
    self_ns: i64,
}

/// Whether `name` is an op event `name:Type` (TensorFlow's TraceMe convention).
fn op_type(name: &str) -> Option<&str> {
    if name.starts_with("Iterator::") {
        return None;
    }
    let (head, ty) = name.rsplit_once(':')?;
    let mut chars = ty.chars();
    let first = chars.next()?;
    let ok = (first.is_ascii_uppercase() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !head.is_empty()
        && !head.ends_with(':');
    ok.then_some(ty)
}

fn is_input_wait(name: &str) -> bool {
    name.starts_with("IteratorGetNext")
}

/// The stage's kind: the last component of `Iterator::Root::Prefetch::Batch::Map`.
fn stage_kind(name: &str) -> &str {
    name.rsplit("::").next().unwrap_or(name)
}

impl Report {
    /// The steps the averages use: all, or without the first and last when more than 5.
    pub fn counted_steps(&self) -> &[StepTime] {
        if self.steps.len() > 5 {
            &self.steps[1..self.steps.len() - 1]
        } else {
            &self.steps
        }
    }

    /// Average `(total, input, compute, other)` step time in ns.
    pub fn average(&self) -> (f64, f64, f64, f64) {
        let s = self.counted_steps();
        let n = s.len().max(1) as f64;
        let sum = |f: &dyn Fn(&StepTime) -> u64| s.iter().map(|x| f(x) as f64).sum::<f64>() / n;
        (sum(&|x| x.total_ns), sum(&|x| x.input_ns), sum(&|x| x.compute_ns), sum(&|x| x.other_ns()))
    }

    /// Input's share of the average step (0 without steps).
    pub fn input_share(&self) -> f64 {
        let (total, input, _, _) = self.average();
        if total > 0.0 {
            input / total
        } else {
            0.0
        }
    }
}

/// Analyses the host plane of `space`.
pub fn analyze(space: &XSpace) -> Result<Report, ProfileError> {
    let plane =
        space.planes.iter().find(|p| p.name == HOST_PLANE).ok_or_else(|| {
            ProfileError::Invalid(format!("no `{HOST_PLANE}` plane (planes: {})", plane_names(space)))
        })?;
    let names: HashMap<i64, &str> = plane.event_metadata.iter().map(|(k, m)| (*k, m.name.as_str())).collect();
    let stat_name: HashMap<i64, &str> = plane.stat_metadata.iter().map(|(k, m)| (*k, m.name.as_str())).collect();
    let mut interned: Vec<String> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut intern = |s: &str| -> usize {
        if let Some(&i) = index.get(s) {
            return i;
        }
        interned.push(s.to_string());
        index.insert(s.to_string(), interned.len() - 1);
        interned.len() - 1
    };

    let mut lines: Vec<Vec<Ev>> = Vec::new();
    for line in &plane.lines {
        let base = line.timestamp_ns.saturating_mul(1000);
        let mut evs: Vec<Ev> = Vec::with_capacity(line.events.len());
        for e in &line.events {
            let offset = match e.data {
                Some(ferroflow_proto::profiler::x_event::Data::OffsetPs(o)) => o,
                _ => 0,
            };
            let mut name = names.get(&e.metadata_id).copied().unwrap_or("?").to_string();
            let (mut step, mut producer, mut consumer) = (None, None, None);
            for s in &e.stats {
                let int = match s.value {
                    Some(x_stat::Value::Int64Value(v)) => Some(v),
                    Some(x_stat::Value::Uint64Value(v)) => Some(v as i64),
                    _ => None,
                };
                match (stat_name.get(&s.metadata_id).copied(), &s.value) {
                    (Some("step_num"), _) => step = int,
                    (Some("_p"), _) => producer = int,
                    (Some("_c"), _) => consumer = int,
                    (Some("tf_op"), Some(x_stat::Value::StrValue(op))) => name = op.clone(),
                    _ => {}
                }
            }
            let start = base.saturating_add(offset);
            let dur = e.duration_ps.max(0);
            let end = start.saturating_add(dur);
            evs.push(Ev { start, end, name: intern(&name), step, producer, consumer, self_ns: dur });
        }
        // Self time: each event less its direct children on the same line.
        evs.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
        let mut stack: Vec<usize> = Vec::new();
        for i in 0..evs.len() {
            while let Some(&top) = stack.last() {
                if evs[top].end <= evs[i].start {
                    stack.pop();
                } else {
                    break;
                }
            }
            if let Some(&parent) = stack.last() {
                let d = evs[i].end.min(evs[parent].end) - evs[i].start;
                evs[parent].self_ns -= d.max(0);
            }
            stack.push(i);
        }
        for e in &mut evs {
            e.self_ns = e.self_ns.max(0) / 1000;
        }
        lines.push(evs);
    }

    // Per-op, per-type and per-stage statistics.
    let mut ops: HashMap<usize, (u64, u64)> = HashMap::new();
    let mut stages: HashMap<usize, (u64, u64)> = HashMap::new();
    for e in lines.iter().flatten() {
        let name = &interned[e.name];
        let table = if name.starts_with("Iterator::") {
            &mut stages
        } else if op_type(name).is_some() && !is_input_wait(name) {
            &mut ops
        } else {
            continue;
        };
        let s = table.entry(e.name).or_default();
        s.0 += 1;
        s.1 = s.1.saturating_add(e.self_ns as u64);
    }
    let sorted = |m: HashMap<usize, (u64, u64)>, key: &dyn Fn(&str) -> String| -> Vec<Stat> {
        let mut by: HashMap<String, Stat> = HashMap::new();
        for (n, (count, self_ns)) in m {
            let k = key(&interned[n]);
            let s = by.entry(k.clone()).or_insert(Stat { name: k, count: 0, self_ns: 0 });
            s.count = s.count.saturating_add(count);
            s.self_ns = s.self_ns.saturating_add(self_ns);
        }
        let mut v: Vec<Stat> = by.into_values().collect();
        v.sort_by(|a, b| b.self_ns.cmp(&a.self_ns).then(a.name.cmp(&b.name)));
        v
    };
    let op_types = sorted(ops.clone(), &|n| op_type(n).unwrap_or(n).to_string());
    let ops = sorted(ops, &|n| n.to_string());
    let stages = sorted(stages, &|n| n.to_string());

    // Steps: input waits and op time inside each. Each line's events are sorted by start, so
    // the events inside a window are found by binary search (a hostile file with many steps
    // and events stays near-linear).
    let mut steps: Vec<StepTime> = Vec::new();
    let is_op = |x: &Ev| op_type(&interned[x.name]).is_some() && !is_input_wait(&interned[x.name]);
    let within = |evs: &'_ [Ev], from: i64, to: i64| -> std::ops::Range<usize> {
        let lo = evs.partition_point(|x| x.start < from);
        lo..evs.partition_point(|x| x.start <= to).max(lo)
    };
    for (l, e) in lines.iter().enumerate().flat_map(|(l, evs)| evs.iter().map(move |e| (l, e))) {
        let Some(step) = e.step else { continue };
        let inside = |x: &&Ev| x.end <= e.end;
        // The step's work: its own line's events, and on other lines the events inside the
        // ones linked to it (`_c` equal to a `_p` inside the step); without links, every
        // event in the step's time.
        let own = &lines[l][within(&lines[l], e.start, e.end)];
        let producers: std::collections::HashSet<i64> = own.iter().filter(inside).filter_map(|x| x.producer).collect();
        let mut work: Vec<&Ev> = own.iter().filter(inside).collect();
        for (_, other) in lines.iter().enumerate().filter(|(m, _)| *m != l) {
            let in_step = &other[within(other, e.start, e.end)];
            let mut windows: Vec<(i64, i64)> = if producers.is_empty() {
                vec![(e.start, e.end)]
            } else {
                in_step
                    .iter()
                    .filter(|x| x.consumer.is_some_and(|c| producers.contains(&c)))
                    .map(|x| (x.start, x.end))
                    .collect()
            };
            windows.sort_unstable();
            let mut merged: Vec<(i64, i64)> = Vec::with_capacity(windows.len());
            for (a, b) in windows {
                match merged.last_mut() {
                    Some(last) if a <= last.1 => last.1 = last.1.max(b),
                    _ => merged.push((a, b)),
                }
            }
            for (a, b) in merged {
                work.extend(other[within(other, a, b)].iter().filter(|x| x.end <= b).filter(inside));
            }
        }
        let input_ps = work
            .iter()
            .filter(|x| is_input_wait(&interned[x.name]))
            .fold(0i64, |acc, x| acc.saturating_add(x.end - x.start));
        // Compute is the time some op was running (ops on several threads at once count
        // once), outside the input waits.
        let mut spans: Vec<(i64, i64)> = work.iter().filter(|x| is_op(x)).map(|x| (x.start, x.end)).collect();
        spans.sort_unstable();
        let (mut compute_ps, mut reach) = (0i64, i64::MIN);
        for (s0, e0) in spans {
            let s0 = s0.max(reach);
            if e0 > s0 {
                compute_ps = compute_ps.saturating_add(e0.saturating_sub(s0));
                reach = e0;
            }
        }
        let compute_ns = compute_ps / 1000;
        let total_ns = ((e.end - e.start) / 1000) as u64;
        let input_ns = ((input_ps / 1000) as u64).min(total_ns);
        steps.push(StepTime {
            step,
            total_ns,
            input_ns,
            compute_ns: (compute_ns.max(0) as u64).min(total_ns - input_ns),
        });
    }
    steps.sort_by_key(|s| s.step);

    let mut report = Report {
        hosts: space.hostnames.clone(),
        steps,
        op_types,
        ops,
        stages,
        verdict: Verdict::NoSteps,
        recommendations: Vec::new(),
        threads: plane.lines.len(),
    };
    if !report.steps.is_empty() {
        let share = report.input_share();
        report.verdict = if share > 0.20 {
            Verdict::HighlyInputBound
        } else if share >= 0.05 {
            Verdict::ModeratelyInputBound
        } else {
            Verdict::NotInputBound
        };
    }
    report.recommendations = recommend(&report);
    Ok(report)
}

/// The planes' names for an error message: at most five, each cut to 60 characters.
fn plane_names(space: &XSpace) -> String {
    let mut v: Vec<String> = space.planes.iter().take(5).map(|p| p.name.chars().take(60).collect()).collect();
    if space.planes.len() > 5 {
        v.push(format!("{} more", space.planes.len() - 5));
    }
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ").replace(['\n', '\r'], " ")
    }
}

fn ms(ns: f64) -> String {
    format!("{:.2} ms", ns / 1e6)
}

fn recommend(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    match r.verdict {
        Verdict::NoSteps => {
            out.push(
                "no step markers: record steps (fit's TensorBoard callback with profile_batch, or \
                 `profiler::step(\"train\", n)` around each step) to get the step-time breakdown"
                    .into(),
            );
            return out;
        }
        Verdict::NotInputBound => {
            if let Some(top) = r.op_types.first() {
                out.push(format!(
                    "the step is compute-bound: {} takes the most op time ({} in {} runs); speed up or fuse it",
                    top.name,
                    ms(top.self_ns as f64),
                    top.count
                ));
            }
            return out;
        }
        _ => {}
    }
    let (_, input, compute, _) = r.average();
    let n_steps = r.steps.len().max(1) as f64;
    let kinds: Vec<&str> = r.stages.iter().map(|s| stage_kind(&s.name)).collect();
    if r.stages.is_empty() {
        out.push(
            "the step waits for its input, but the profile has no input-pipeline stages: feed it from a \
             Dataset so its stages are traced"
                .into(),
        );
    }
    if !r.stages.is_empty() && !r.stages.iter().any(|s| s.name.contains("Prefetch")) {
        out.push(format!(
            "add `.prefetch(AUTOTUNE)` as the last stage: the step waits {} per step for input while \
             its ops take {}; with prefetch the next batch is prepared during the step",
            ms(input),
            ms(compute)
        ));
    }
    if let Some(map) = r.stages.iter().find(|s| stage_kind(&s.name) == "Map") {
        let per_step = map.self_ns as f64 / n_steps;
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let want = ((per_step / compute.max(1.0)).ceil() as usize).clamp(2, cores.max(2));
        out.push(format!(
            "run `{}` in parallel (`map_parallel(AUTOTUNE)`, num_parallel_calls): it takes {} per step \
             on one thread; {want} workers would cover a step's compute of {} (this machine has {cores} cores)",
            map.name,
            ms(per_step),
            ms(compute)
        ));
    }
    if let Some(slow) = r.stages.first() {
        let total = r.stages.iter().fold(0u64, |t, s| t.saturating_add(s.self_ns));
        out.push(format!(
            "slowest stage: `{}`, {} per step ({:.0}% of the pipeline's time)",
            slow.name,
            ms(slow.self_ns as f64 / n_steps),
            100.0 * slow.self_ns as f64 / total.max(1) as f64
        ));
        let source = matches!(
            stage_kind(&slow.name),
            "TFRecord" | "TFRecordDataset" | "FromTensorSlices" | "ListFiles" | "Map" | "ParallelMap" | "Interleave"
        );
        if source && !kinds.contains(&"Cache") {
            out.push(
                "the data fits in memory or on local disk: `.cache()` (or `.cache(filename)`) after the \
                 decode stops repeating the reads and decoding every epoch"
                    .into(),
            );
        }
    }
    out
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hosts = if self.hosts.is_empty() { "unknown host".to_string() } else { self.hosts.join(", ") };
        writeln!(f, "host {hosts}: {} threads, {} steps", self.threads, self.steps.len())?;
        if !self.steps.is_empty() {
            let (total, input, compute, other) = self.average();
            let counted = self.counted_steps().len();
            let note = if counted < self.steps.len() { " (first and last left out)" } else { "" };
            writeln!(f, "\nStep-time breakdown, average of {counted} steps{note}: {}", ms(total))?;
            for (what, v) in [("input", input), ("compute", compute), ("other/idle", other)] {
                writeln!(f, "  {what:<11} {:>11}  {:>5.1}%", ms(v), 100.0 * v / total.max(1.0))?;
            }
            let share = 100.0 * self.input_share();
            let verdict = match self.verdict {
                Verdict::HighlyInputBound => {
                    format!("HIGHLY input-bound: {share:.1}% of the step waits for input (> 20%)")
                }
                Verdict::ModeratelyInputBound => {
                    format!("MODERATELY input-bound: {share:.1}% of the step waits for input (5-20%)")
                }
                _ => format!("not input-bound: {share:.1}% of the step waits for input (< 5%)"),
            };
            writeln!(f, "Verdict: {verdict}")?;
        }
        if !self.op_types.is_empty() {
            let step_total: f64 = self.steps.iter().map(|s| s.total_ns as f64).sum();
            writeln!(f, "\nTop op types by self time:")?;
            writeln!(f, "  {:<36} {:>8} {:>12} {:>12} {:>10}", "type", "count", "total", "average", "% of steps")?;
            for s in self.op_types.iter().take(15) {
                let pct = if step_total > 0.0 {
                    format!("{:.1}%", 100.0 * s.self_ns as f64 / step_total)
                } else {
                    "-".into()
                };
                writeln!(
                    f,
                    "  {:<36} {:>8} {:>12} {:>9.1} us {:>10}",
                    s.name,
                    s.count,
                    ms(s.self_ns as f64),
                    s.self_ns as f64 / 1e3 / s.count.max(1) as f64,
                    pct
                )?;
            }
        }
        if !self.stages.is_empty() {
            writeln!(f, "\nInput-pipeline stages by self time:")?;
            for s in self.stages.iter().take(10) {
                writeln!(
                    f,
                    "  {:<56} {:>8} {:>12} {:>9.1} us",
                    s.name,
                    s.count,
                    ms(s.self_ns as f64),
                    s.self_ns as f64 / 1e3 / s.count.max(1) as f64
                )?;
            }
        }
        if !self.recommendations.is_empty() {
            writeln!(f, "\nRecommendations:")?;
            for (i, r) in self.recommendations.iter().enumerate() {
                writeln!(f, "  {}. {r}", i + 1)?;
            }
        }
        Ok(())
    }
}

/// How `after` changed against `before` (the same workload, e.g. without and with
/// prefetch): the step time, its input share and the gain.
pub fn compare(before: &Report, after: &Report) -> String {
    let (b, bi, _, _) = before.average();
    let (a, ai, _, _) = after.average();
    if b <= 0.0 || a <= 0.0 {
        return "no steps to compare".into();
    }
    format!(
        "step time {} -> {} ({:.2}x faster); input share {:.1}% -> {:.1}%; input wait per step {} -> {}",
        ms(b),
        ms(a),
        b / a,
        100.0 * bi / b,
        100.0 * ai / a,
        ms(bi),
        ms(ai)
    )
}

#[cfg(test)]
mod tests {
    use super::op_type;

    #[test]
    fn op_names_are_name_colon_type() {
        assert_eq!(op_type("dense/MatMul:MatMul"), Some("MatMul"));
        assert_eq!(op_type("a:_FusedMatMul"), Some("_FusedMatMul"));
        assert_eq!(op_type("Iterator::Root::Prefetch"), None);
        assert_eq!(op_type("train"), None);
        assert_eq!(op_type("x:lower"), None);
        assert_eq!(op_type(":Relu"), None);
    }
}
