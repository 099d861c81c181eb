//! How a session is configured: its threads, optimizer, devices, memory limit, and the
//! cluster of processes it may be one task of.
use ferroflow_optimize::OptimizerOptions;

/// Session configuration.
///
/// `#[non_exhaustive]`: other crates build a `SessionOptions` from `SessionOptions::default()` and its
/// `with_*` setters, so fields can be added without breaking them.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct SessionOptions {
    /// Threads that run independent nodes concurrently (0 = one per core).
    pub inter_op_threads: usize,
    /// Threads a single large kernel (MatMul, big elementwise ops) may split across
    /// (0 = one per core; 1 = kernels stay on the thread that runs them).
    pub intra_op_threads: usize,
    /// Most iterations one `While` may run before the step fails (0 = no limit). A guard
    /// against loops that never end.
    pub max_loop_iterations: u64,
    /// The graph optimizer, run for each (feeds, fetches, targets) signature before its plan
    /// is compiled. On by default; `optimizer.enabled = false` runs the graph as written.
    pub optimizer: OptimizerOptions,
    /// Number of CPU devices (TensorFlow's `device_count={"CPU": n}`; 0 means 1). With more
    /// than one, each signature's graph is placed, partitioned per device with `_Send`/`_Recv`
    /// pairs, and the partitions run concurrently as one step.
    pub cpu_devices: usize,
    /// How nodes are placed when there are several devices.
    pub placement: crate::placer::PlacementOptions,
    /// The most bytes one tensor allocation of a step may ask for (0 = the default: 3/4 of
    /// physical memory, less under a smaller address-space limit). An output whose size comes
    /// from fed values (`Tile`'s multiples, `Fill`'s dims, a broadcast) past it fails its
    /// node with a resource-exhausted error before anything is allocated. (Allocations of at
    /// most 4 KiB, `limit::ALWAYS_ALLOWED`, are not checked.)
    pub memory_limit_bytes: usize,
    /// The cluster this process is one task of (MPI rank r of `mpirun -np N` is task r of
    /// N): the session's devices are `/job:worker/replica:0/task:0..N/device:CPU:0`, nodes
    /// are placed on them by their device requests (task 0 by default), and each rank runs
    /// the partitions of its own task; `_Send`/`_Recv` pairs between tasks go through
    /// `ferroflow_collective::world()`'s point-to-point messages. Every step is the whole
    /// cluster's: every rank runs it with the same feeds, fetches and targets (checked at the
    /// step's start: a mismatch fails on every rank), so every rank optimizes and partitions
    /// the same graph. The fetches must be on task 0 and are returned by rank 0 (the other
    /// ranks return none). With `RunOptions` asking for step stats or partition graphs on
    /// any rank, every rank records them and rank 0's `RunMetadata` holds every task's.
    /// `None`: one process.
    pub cluster: Option<Cluster>,
}

impl SessionOptions {
    /// Sets [`SessionOptions::inter_op_threads`].
    pub fn with_inter_op_threads(mut self, inter_op_threads: usize) -> Self {
        self.inter_op_threads = inter_op_threads;
        self
    }

    /// Sets [`SessionOptions::intra_op_threads`].
    pub fn with_intra_op_threads(mut self, intra_op_threads: usize) -> Self {
        self.intra_op_threads = intra_op_threads;
        self
    }

    /// Sets [`SessionOptions::max_loop_iterations`].
    pub fn with_max_loop_iterations(mut self, max_loop_iterations: u64) -> Self {
        self.max_loop_iterations = max_loop_iterations;
        self
    }

    /// Sets [`SessionOptions::optimizer`].
    pub fn with_optimizer(mut self, optimizer: OptimizerOptions) -> Self {
        self.optimizer = optimizer;
        self
    }

    /// Sets [`SessionOptions::cpu_devices`].
    pub fn with_cpu_devices(mut self, cpu_devices: usize) -> Self {
        self.cpu_devices = cpu_devices;
        self
    }

    /// Sets [`SessionOptions::placement`].
    pub fn with_placement(mut self, placement: crate::placer::PlacementOptions) -> Self {
        self.placement = placement;
        self
    }

    /// Sets [`SessionOptions::memory_limit_bytes`].
    pub fn with_memory_limit_bytes(mut self, memory_limit_bytes: usize) -> Self {
        self.memory_limit_bytes = memory_limit_bytes;
        self
    }

    /// Sets [`SessionOptions::cluster`].
    pub fn with_cluster(mut self, cluster: Option<Cluster>) -> Self {
        self.cluster = cluster;
        self
    }
}

/// A cluster of `tasks` processes, this one being `task` (see [`SessionOptions::cluster`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// The number of tasks (the world's size).
    pub tasks: usize,
    /// This process's task (its rank).
    pub task: usize,
}
