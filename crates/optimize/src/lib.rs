//! The graph optimizer: passes over the Graph IR in the spirit of TensorFlow's Grappler, each
//! of which reports what it did, and none of which changes a numerical result by default.
//!
//! A [`MetaOptimizer`] runs the passes in a fixed order ([`default_passes`]), repeating the
//! whole list up to [`OptimizerOptions::max_rounds`] times while anything changes. The
//! nodes of the [`Item`] (feeds, fetches, targets) and every node with side effects are
//! protected: no pass removes or renames them. Rewrites that change floating-point results
//! (division into multiplication by a reciprocal, involutions that are not exact) only run
//! with [`OptimizerOptions::inexact_float_rewrites`].
#![warn(missing_docs)]

mod arith;
mod cse;
mod deps;
mod fold;
mod fuse;
mod prune;
mod report;
mod util;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ferroflow_graph::{parse_output_name, Graph, GraphError, NodeId};

pub use arith::ArithmeticSimplifier;
pub use cse::CommonSubexpressionElimination;
pub use deps::DependencyOptimizer;
pub use fold::ConstantFolding;
pub use fuse::{ContractionFusion, ElementwiseFusion};
pub use prune::Pruning;
pub use report::{PassReport, Report};

/// What the graph is optimized for: the tensors fed and fetched and the nodes run as targets.
#[derive(Clone, Debug, Default)]
pub struct Item {
    /// Fed tensors (`x:0`); their nodes are kept and never treated as constant.
    pub feeds: Vec<String>,
    /// Fetched tensors (`y:0`); their nodes keep their names (a folded fetch becomes a `Const`
    /// of the same name, as in TensorFlow).
    pub fetches: Vec<String>,
    /// Nodes run for their effects.
    pub targets: Vec<String>,
    /// Further nodes to keep as they are.
    pub keep: Vec<String>,
}

/// Optimizer settings.
///
/// `#[non_exhaustive]`: other crates build a `OptimizerOptions` from `OptimizerOptions::default()` and its
/// `with_*` setters, so fields can be added without breaking them.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OptimizerOptions {
    /// Run the optimizer at all (a session's switch).
    pub enabled: bool,
    /// Most rounds of the whole pass list (stops earlier when a round changes nothing).
    pub max_rounds: usize,
    /// Time one pass may take; a pass past it stops where it is (its changes so far stand).
    pub pass_time_budget: Duration,
    /// Largest constant (bytes) constant folding may create.
    pub max_folded_constant_bytes: usize,
    /// Allow rewrites that change floating-point results (`x / c` into `x * (1/c)`,
    /// `Reciprocal(Reciprocal(x))` into `x`). Off by default.
    pub inexact_float_rewrites: bool,
    /// Fail when a pass fails, instead of switching that pass off, optimizing again without
    /// it and recording the error in the report.
    pub fail_on_pass_error: bool,
    /// Passes to skip, by name.
    pub disabled_passes: Vec<String>,
}

impl OptimizerOptions {
    /// Sets [`OptimizerOptions::enabled`].
    pub fn with_enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Sets [`OptimizerOptions::max_rounds`].
    pub fn with_max_rounds(mut self, max_rounds: usize) -> Self {
        self.max_rounds = max_rounds;
        self
    }

    /// Sets [`OptimizerOptions::pass_time_budget`].
    pub fn with_pass_time_budget(mut self, pass_time_budget: Duration) -> Self {
        self.pass_time_budget = pass_time_budget;
        self
    }

    /// Sets [`OptimizerOptions::max_folded_constant_bytes`].
    pub fn with_max_folded_constant_bytes(mut self, max_folded_constant_bytes: usize) -> Self {
        self.max_folded_constant_bytes = max_folded_constant_bytes;
        self
    }

    /// Sets [`OptimizerOptions::inexact_float_rewrites`].
    pub fn with_inexact_float_rewrites(mut self, inexact_float_rewrites: bool) -> Self {
        self.inexact_float_rewrites = inexact_float_rewrites;
        self
    }

    /// Sets [`OptimizerOptions::fail_on_pass_error`].
    pub fn with_fail_on_pass_error(mut self, fail_on_pass_error: bool) -> Self {
        self.fail_on_pass_error = fail_on_pass_error;
        self
    }

    /// Sets [`OptimizerOptions::disabled_passes`].
    pub fn with_disabled_passes(mut self, disabled_passes: Vec<String>) -> Self {
        self.disabled_passes = disabled_passes;
        self
    }
}

impl Default for OptimizerOptions {
    fn default() -> Self {
        OptimizerOptions {
            enabled: true,
            max_rounds: 3,
            pass_time_budget: Duration::from_secs(10),
            max_folded_constant_bytes: 10 << 20,
            inexact_float_rewrites: false,
            fail_on_pass_error: cfg!(debug_assertions),
            disabled_passes: Vec::new(),
        }
    }
}

/// What [`MetaOptimizer::optimize_with_dump`] calls with each pass's graph: `(round, pass,
/// graph)`; an error stops the optimization.
pub type DumpFn<'a> = dyn FnMut(usize, &str, &Graph) -> Result<(), Box<dyn std::error::Error + Send + Sync>> + 'a;

/// An optimizer error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OptimizeError {
    /// The item names a tensor or node the graph lacks.
    #[error("{what} '{name}': {source}")]
    BadItem {
        /// `feed`, `fetch`, `target` or `keep`.
        what: &'static str,
        /// The name.
        name: String,
        /// Why it does not resolve.
        source: Box<GraphError>,
    },
    /// A pass failed (only returned with `fail_on_pass_error`).
    #[error("optimizer pass '{pass}' failed: {source}")]
    Pass {
        /// The pass.
        pass: String,
        /// What went wrong.
        source: Box<OptimizeError>,
    },
    /// The caller's dump of a pass's graph failed.
    #[error("optimizer pass 'dump' failed: {source}")]
    Dump {
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A tensor a pass builds.
    #[error(transparent)]
    Tensor(#[from] ferroflow_tensor::TensorError),
    /// The graph itself is invalid.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

/// What a pass sees besides the graph: the protected nodes, options, its deadline, and the
/// report it fills in.
pub struct PassContext<'a> {
    protected: HashSet<String>,
    fed: HashSet<String>,
    /// True if the item names a fetch or target (so what is needed is known).
    pub has_fetches_or_targets: bool,
    /// The optimizer options.
    pub options: &'a OptimizerOptions,
    deadline: Instant,
    /// What this pass did.
    pub report: PassReport,
    /// The function library's facts (which ops are calls, which have side effects).
    pub library: &'a util::LibraryFacts,
}

impl PassContext<'_> {
    /// True if no pass may remove, rename or fold `node` (feeds, fetches, targets, kept
    /// nodes, and nodes with side effects).
    pub fn is_protected(&self, graph: &Graph, node: NodeId) -> bool {
        let n = graph.node(node);
        self.protected.contains(&n.name) || self.library.has_side_effects(&n.op)
    }

    /// True if `node` is named in the item (feed, fetch, target or keep).
    pub fn is_named_in_item(&self, name: &str) -> bool {
        self.protected.contains(name)
    }

    /// True if output `index` of `node` is fed (so its value is not known when optimizing).
    pub fn is_fed(&self, graph: &Graph, node: NodeId) -> bool {
        self.fed.contains(&graph.node(node).name)
    }

    /// True once the pass has used up its time budget; passes check it in their loops and
    /// stop with a consistent graph.
    pub fn out_of_time(&mut self) -> bool {
        if Instant::now() > self.deadline {
            self.report.timed_out = true;
            true
        } else {
            false
        }
    }
}

/// One optimization pass.
pub trait Pass: Send + Sync {
    /// Short name used in reports and dumps (`pruning`, `constant_folding`, ...).
    fn name(&self) -> &'static str;
    /// Rewrites `graph`, recording every change in `ctx.report`.
    fn run(&self, graph: &mut Graph, ctx: &mut PassContext) -> Result<(), OptimizeError>;
}

/// The default passes, in the order they run in each round.
pub fn default_passes() -> Vec<Box<dyn Pass>> {
    vec![
        Box::new(Pruning),
        Box::new(CommonSubexpressionElimination),
        Box::new(ConstantFolding),
        Box::new(ArithmeticSimplifier),
        Box::new(ContractionFusion),
        Box::new(ElementwiseFusion),
        Box::new(DependencyOptimizer),
    ]
}

/// Runs passes in rounds over a graph.
pub struct MetaOptimizer {
    passes: Vec<Box<dyn Pass>>,
    options: OptimizerOptions,
}

/// The result of optimizing: the new graph and what each pass did.
pub struct Optimized {
    /// The optimized graph.
    pub graph: Graph,
    /// One entry per pass run.
    pub report: Report,
}

impl MetaOptimizer {
    /// The default passes with `options`.
    pub fn new(options: OptimizerOptions) -> MetaOptimizer {
        MetaOptimizer { passes: default_passes(), options }
    }

    /// Custom passes, in the given order.
    pub fn with_passes(passes: Vec<Box<dyn Pass>>, options: OptimizerOptions) -> MetaOptimizer {
        MetaOptimizer { passes, options }
    }

    /// Optimizes a copy of `graph` for `item`.
    pub fn optimize(&self, graph: &Graph, item: &Item) -> Result<Optimized, OptimizeError> {
        self.optimize_with_dump(graph, item, &mut |_, _, _| Ok(()))
    }

    /// As [`MetaOptimizer::optimize`], calling `dump(round, pass, graph)` after every pass
    /// (round 0, pass `original` first).
    pub fn optimize_with_dump(
        &self,
        graph: &Graph,
        item: &Item,
        dump: &mut DumpFn<'_>,
    ) -> Result<Optimized, OptimizeError> {
        let start = Instant::now();
        let (protected, fed) = resolve_item(graph, item)?;
        let library = util::LibraryFacts::of(graph);
        let original = graph;
        let mut report = Report { nodes_before: graph.len(), ..Default::default() };
        dump(0, "original", graph).map_err(|source| OptimizeError::Dump { source })?;
        // A failing pass (an error, or a graph that no longer checks out) is switched off and
        // the whole optimization restarts from the original graph without it; its failure
        // stays in the report. (Cheaper than snapshotting the graph before every pass.)
        let mut failed: Vec<&'static str> = Vec::new();
        'attempt: loop {
            let mut graph = original.clone();
            for round in 1..=self.options.max_rounds.max(1) {
                let mut changed = false;
                for pass in &self.passes {
                    if self.options.disabled_passes.iter().any(|p| p == pass.name()) || failed.contains(&pass.name()) {
                        continue;
                    }
                    let mut ctx = PassContext {
                        protected: protected.clone(),
                        fed: fed.clone(),
                        has_fetches_or_targets: !item.fetches.is_empty() || !item.targets.is_empty(),
                        options: &self.options,
                        deadline: Instant::now() + self.options.pass_time_budget,
                        report: PassReport { pass: pass.name().to_string(), round, ..Default::default() },
                        library: &library,
                    };
                    ctx.report.nodes_before = graph.len();
                    let t = Instant::now();
                    let result = pass.run(&mut graph, &mut ctx).and_then(|()| util::check(&graph).map_err(Into::into));
                    ctx.report.time = t.elapsed();
                    ctx.report.nodes_after = graph.len();
                    if let Err(e) = result {
                        if self.options.fail_on_pass_error {
                            return Err(OptimizeError::Pass { pass: pass.name().to_string(), source: Box::new(e) });
                        }
                        failed.push(pass.name());
                        report.passes.push(PassReport {
                            pass: pass.name().to_string(),
                            round,
                            error: Some(format!("{e} (pass switched off; optimization restarted without it)")),
                            nodes_before: ctx.report.nodes_before,
                            nodes_after: ctx.report.nodes_before,
                            time: t.elapsed(),
                            ..Default::default()
                        });
                        continue 'attempt;
                    }
                    changed |= ctx.report.changed();
                    dump(round, pass.name(), &graph).map_err(|source| OptimizeError::Dump { source })?;
                    report.passes.push(ctx.report);
                }
                report.rounds = round;
                if !changed {
                    break;
                }
            }
            util::drop_dangling_colocation(&mut graph);
            report.nodes_after = graph.len();
            report.time = start.elapsed();
            return Ok(Optimized { graph, report });
        }
    }
}

/// Optimizes `graph` for `item` with the default passes.
pub fn optimize(graph: &Graph, item: &Item, options: &OptimizerOptions) -> Result<Optimized, OptimizeError> {
    MetaOptimizer::new(options.clone()).optimize(graph, item)
}

/// The protected node names and the fed node names of an item, checked against the graph.
fn resolve_item(graph: &Graph, item: &Item) -> Result<(HashSet<String>, HashSet<String>), OptimizeError> {
    let mut protected = HashSet::new();
    let mut fed = HashSet::new();
    let tensor = |what: &'static str, t: &str| -> Result<String, OptimizeError> {
        let o = graph.output_by_name(t).map_err(|e| OptimizeError::BadItem {
            what,
            name: t.to_string(),
            source: Box::new(e),
        })?;
        Ok(graph.node(o.node).name.clone())
    };
    for f in &item.feeds {
        let n = tensor("feed", f)?;
        fed.insert(n.clone());
        protected.insert(n);
    }
    for f in &item.fetches {
        protected.insert(tensor("fetch", f)?);
    }
    for (what, list) in [("target", &item.targets), ("keep", &item.keep)] {
        for t in list {
            let name = t.strip_prefix('^').unwrap_or(t);
            let name = parse_output_name(name).map_or(name, |(n, _)| n);
            if graph.find(name).is_none() {
                return Err(OptimizeError::BadItem {
                    what,
                    name: t.clone(),
                    source: Box::new(GraphError::NoSuchNode(name.to_string())),
                });
            }
            protected.insert(name.to_string());
        }
    }
    Ok((protected, fed))
}
