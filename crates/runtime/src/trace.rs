//! Step statistics (`RunOptions.trace_level` above NO_TRACE): one `NodeExecStats` per executed
//! node, as TensorFlow's `StepStatsCollector` fills it — absolute start in µs and ns, op start /
//! end and node end relative to it, thread id, output dtypes, shapes and bytes, allocator
//! memory, and the `timeline_label` `name = Op(inputs)` that `timeline.py` parses.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use std::fmt::Write;

use ferroflow_graph::{Graph, NodeId};
use ferroflow_ops::Transfer;
use ferroflow_proto::{
    convert, AllocationDescription, AllocatorMemoryUsed, DeviceStepStats, NodeExecStats, NodeOutput, StepStats,
    TensorDescription,
};
use ferroflow_tensor::{DType, Tensor};
use smallvec::SmallVec;

/// The allocator name reported for CPU memory.
const ALLOCATOR: &str = "cpu";

/// The names of the threads that ever recorded, by their small id.
static THREAD_NAMES: Mutex<BTreeMap<u32, String>> = Mutex::new(BTreeMap::new());

/// This thread's small id (its name is registered in [`THREAD_NAMES`] the first time).
fn thread_id() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    thread_local! {
        static ID: u32 = {
            let id = NEXT.fetch_add(1, Ordering::Relaxed);
            let name = std::thread::current().name().map_or_else(|| format!("thread-{id}"), str::to_string);
            THREAD_NAMES.lock().unwrap_or_else(|p| p.into_inner()).insert(id, name);
            id
        };
    }
    ID.with(|i| *i)
}

/// What the hot path records for one node; turned into a `NodeExecStats` at the end.
pub(crate) struct Record {
    node: NodeId,
    timing: Timing,
    thread: u32,
    outputs: SmallVec<[(DType, SmallVec<[usize; 4]>); 1]>,
}

/// One thread's records of a step, kept by the executor task that runs them and handed to
/// the [`Tracer`] in one locked append when the task ends ([`Tracer::absorb`]), so recording
/// a node takes no lock.
#[derive(Default)]
pub(crate) struct LocalRecords {
    records: Vec<Record>,
    /// The recording thread's small id (0 until the first record).
    thread: u32,
    /// The clock reading at which the previous node this task ran back to back ended.
    chain: Option<i64>,
}

impl LocalRecords {
    /// When the node about to run starts: where the previous node run back to back on this
    /// thread ended (the executor's bookkeeping in between, reading inputs and readying
    /// successors, counts in this node's scheduling time, as TensorFlow's `all_start`
    /// precedes its input handling), else now.
    #[inline]
    pub(crate) fn start(&mut self) -> i64 {
        self.chain.take().unwrap_or_else(|| ferroflow_profiler::clock::ticks() as i64)
    }

    /// Records node `id`, which started at `start` (from [`LocalRecords::start`]) and whose
    /// kernel ran from `op_start` to now, producing `outputs`.
    #[inline]
    pub(crate) fn record(&mut self, id: NodeId, start: i64, op_start: i64, outputs: &[Tensor]) {
        let end = ferroflow_profiler::clock::ticks() as i64;
        if self.thread == 0 {
            self.thread = thread_id();
        }
        let mut metas = SmallVec::new();
        for o in outputs {
            metas.push((o.dtype(), SmallVec::from_slice(o.dims())));
        }
        let timing = Timing { start, op_start, op_end: end, end };
        self.records.push(Record { node: id, timing, thread: self.thread, outputs: metas });
        self.chain = Some(end);
    }

    /// Ends a run of back-to-back nodes (the thread goes idle or to other work).
    pub(crate) fn break_chain(&mut self) {
        self.chain = None;
    }
}

/// Collects the stats of one step. Recording a node costs two or three reads of the
/// profiler's clock (the TSC) and a push onto its thread's [`LocalRecords`]; times, names,
/// labels and protos are made once, at the end.
pub(crate) struct Tracer {
    wall_ns: i64,
    origin: u64,
    records: Mutex<Vec<Record>>,
}

/// The step stats one traced step recorded, not yet made into TensorFlow's protos: what
/// [`crate::Session::run_plan_traced`] returns, so a caller that traces many steps pays for the
/// protos only for the steps it looks at, and outside the steps. `RunOptions` with
/// `FULL_TRACE` returns the same stats already made into `RunMetadata.step_stats`.
pub struct StepTrace {
    pub(crate) graph: std::sync::Arc<Graph>,
    pub(crate) labels: std::sync::Arc<[String]>,
    pub(crate) tracer: Tracer,
}

impl StepTrace {
    /// How many node executions the step recorded.
    pub fn len(&self) -> usize {
        self.tracer.records.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether the step recorded no node.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// TensorFlow's `StepStats`: a `DeviceStepStats` per device with a `NodeExecStats` per
    /// executed node, in start order (as `RunMetadata.step_stats` under `FULL_TRACE`).
    pub fn into_step_stats(self) -> StepStats {
        self.tracer.finish(&self.graph, &self.labels, crate::device::CPU0)
    }
}

/// The moments of one node's execution, in clock ticks while recording.
pub(crate) struct Timing {
    pub start: i64,
    pub op_start: i64,
    pub op_end: i64,
    pub end: i64,
}

impl Tracer {
    /// A tracer for a step (its records grow in the threads' [`LocalRecords`]).
    pub(crate) fn new() -> Tracer {
        // Calibrated once per process, before the step's first reading.
        let _ = ferroflow_profiler::clock::ns_per_tick();
        let origin = ferroflow_profiler::clock::ticks();
        let wall_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64);
        Tracer { wall_ns, origin, records: Mutex::new(Vec::new()) }
    }

    /// Now, in clock ticks (turned into ns since the epoch by `finish`).
    #[inline]
    pub(crate) fn now(&self) -> i64 {
        ferroflow_profiler::clock::ticks() as i64
    }

    /// Takes a task's records (leaving its buffer empty, its capacity kept).
    pub(crate) fn absorb(&self, local: &mut LocalRecords) {
        local.chain = None;
        if !local.records.is_empty() {
            let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
            if records.is_empty() {
                std::mem::swap(&mut *records, &mut local.records);
            } else {
                records.append(&mut local.records);
            }
        }
    }

    /// Records one executed node.
    pub(crate) fn record(&self, id: NodeId, timing: Timing, outputs: &[Tensor]) {
        let thread = thread_id();
        let outputs = outputs.iter().map(|o| (o.dtype(), o.dims().iter().copied().collect())).collect();
        self.records.lock().unwrap_or_else(|p| p.into_inner()).push(Record { node: id, timing, thread, outputs });
    }

    /// The step's stats for `device`, nodes in start order; `labels` are the graph's timeline
    /// labels by node ([`labels`], built once per plan).
    pub(crate) fn finish(self, graph: &Graph, labels: &[String], device: &str) -> StepStats {
        let mut records = self.records.into_inner().unwrap_or_else(|p| p.into_inner());
        records.sort_by_key(|r| r.timing.start);
        let scale = ferroflow_profiler::clock::ns_per_tick();
        let (origin, wall) = (self.origin as i64, self.wall_ns);
        let ns = |t: i64| wall + ((t - origin) as f64 * scale) as i64;
        for r in &mut records {
            let t = &mut r.timing;
            (t.start, t.op_start, t.op_end, t.end) = (ns(t.start), ns(t.op_start), ns(t.op_end), ns(t.end));
        }
        let registered = THREAD_NAMES.lock().unwrap_or_else(|p| p.into_inner());
        let mut thread_names: BTreeMap<u32, String> = BTreeMap::new();
        for r in &records {
            thread_names.entry(r.thread).or_insert_with(|| {
                registered.get(&r.thread).cloned().unwrap_or_else(|| format!("thread-{}", r.thread))
            });
        }
        drop(registered);
        // One DeviceStepStats per device the nodes ran on (`device` for unplaced nodes).
        let mut by_device: BTreeMap<&str, Vec<NodeExecStats>> = BTreeMap::new();
        let count = records.len();
        for r in records {
            let d = graph.node(r.node).device.as_str();
            let d = if d.is_empty() { device } else { d };
            let label = labels[r.node].clone();
            by_device.entry(d).or_insert_with(|| Vec::with_capacity(count)).push(stats(graph, r, label));
        }
        let dev_stats = by_device
            .into_iter()
            .map(|(device, node_stats)| DeviceStepStats {
                device: device.to_string(),
                node_stats,
                thread_names: thread_names.clone(),
            })
            .collect();
        StepStats { dev_stats }
    }
}

/// Every node's timeline label (what `finish` needs; a plan builds them once).
pub(crate) fn labels(graph: &Graph) -> std::sync::Arc<[String]> {
    graph.nodes().iter().map(|n| label(graph, n)).collect()
}

fn stats(graph: &Graph, r: Record, timeline_label: String) -> NodeExecStats {
    let n = graph.node(r.node);
    let t = r.timing;
    let mut total = 0i64;
    let output = r
        .outputs
        .iter()
        .enumerate()
        .map(|(slot, (dtype, dims))| {
            let bytes = (dims.iter().product::<usize>() * dtype.size().unwrap_or(0)) as i64;
            total += bytes;
            NodeOutput {
                slot: slot as i32,
                tensor_description: Some(TensorDescription {
                    dtype: dtype.to_tf(),
                    shape: Some(convert::dims_to_proto(dims)),
                    allocation_description: Some(AllocationDescription {
                        requested_bytes: bytes,
                        allocated_bytes: bytes,
                        allocator_name: ALLOCATOR.into(),
                        ..Default::default()
                    }),
                }),
            }
        })
        .collect();
    NodeExecStats {
        node_name: n.name.clone(),
        all_start_micros: t.start / 1000,
        op_start_rel_micros: (t.op_start - t.start) / 1000,
        op_end_rel_micros: (t.op_end - t.start) / 1000,
        all_end_rel_micros: (t.end - t.start) / 1000,
        memory: vec![AllocatorMemoryUsed {
            allocator_name: ALLOCATOR.into(),
            total_bytes: total,
            peak_bytes: total,
            live_bytes: total,
            ..Default::default()
        }],
        output,
        timeline_label,
        scheduled_micros: t.start / 1000,
        thread_id: r.thread,
        all_start_nanos: t.start,
        op_start_rel_nanos: t.op_start - t.start,
        op_end_rel_nanos: t.op_end - t.start,
        all_end_rel_nanos: t.end - t.start,
        scheduled_nanos: t.start,
        ..Default::default()
    }
}

/// `name = Op(in0, in1, ^ctrl)`, built in one string; transfers as TensorFlow labels them:
/// `name = _Send(tensor_name @recv_device)`, `name = _Recv(tensor_name @send_device)`.
fn label(graph: &Graph, n: &ferroflow_graph::Node) -> String {
    let attr = |k: &str| match n.attrs.get(k).and_then(|a| a.value.as_ref()) {
        Some(ferroflow_proto::attr_value::Value::S(v)) => String::from_utf8_lossy(v).into_owned(),
        _ => String::new(),
    };
    match ferroflow_ops::OpRegistry::global().facts(&n.op).and_then(|f| f.transfer()) {
        Some(Transfer::Send) => {
            return format!("{} = {}({} @{})", n.name, n.op, attr("tensor_name"), attr("recv_device"))
        }
        Some(Transfer::Recv) => {
            return format!("{} = {}({} @{})", n.name, n.op, attr("tensor_name"), attr("send_device"))
        }
        _ => {}
    }
    let mut label =
        String::with_capacity(n.name.len() + n.op.len() + 8 + 16 * (n.inputs.len() + n.control_inputs.len()));
    label.push_str(&n.name);
    label.push_str(" = ");
    label.push_str(&n.op);
    label.push('(');
    for (i, o) in n.inputs.iter().enumerate() {
        if i > 0 {
            label.push_str(", ");
        }
        label.push_str(&graph.node(o.node).name);
        if o.index > 0 {
            let _ = write!(label, ":{}", o.index);
        }
    }
    for (i, &c) in n.control_inputs.iter().enumerate() {
        if i > 0 || !n.inputs.is_empty() {
            label.push_str(", ");
        }
        label.push('^');
        label.push_str(&graph.node(c).name);
    }
    label.push(')');
    label
}
