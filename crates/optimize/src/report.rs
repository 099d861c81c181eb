//! What each pass did, by node name, and how long it took.
use std::fmt::Write;
use std::time::Duration;

/// The changes one pass made in one round.
#[derive(Clone, Debug, Default)]
pub struct PassReport {
    /// The pass.
    pub pass: String,
    /// The round (from 1).
    pub round: usize,
    /// Node count before and after.
    pub nodes_before: usize,
    /// Node count after the pass.
    pub nodes_after: usize,
    /// Nodes removed.
    pub removed: Vec<String>,
    /// Nodes added.
    pub added: Vec<String>,
    /// Nodes replaced by a constant (`name`).
    pub folded: Vec<String>,
    /// Duplicates merged: (removed node, the node that now stands for it).
    pub merged: Vec<(String, String)>,
    /// Fusions: (fused node, the nodes it absorbed, the fused op).
    pub fused: Vec<(String, Vec<String>, String)>,
    /// Other rewrites: (node, what was done).
    pub rewritten: Vec<(String, String)>,
    /// Control edges removed.
    pub control_edges_removed: usize,
    /// Wall time of the pass.
    pub time: Duration,
    /// True if the pass stopped at its time budget.
    pub timed_out: bool,
    /// The error of a failed pass (its changes were undone).
    pub error: Option<String>,
}

impl PassReport {
    /// True if the pass changed the graph.
    pub fn changed(&self) -> bool {
        !(self.removed.is_empty()
            && self.added.is_empty()
            && self.folded.is_empty()
            && self.merged.is_empty()
            && self.fused.is_empty()
            && self.rewritten.is_empty()
            && self.control_edges_removed == 0)
    }
}

/// The report of a whole optimization.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// One entry per pass run, in order.
    pub passes: Vec<PassReport>,
    /// Rounds run.
    pub rounds: usize,
    /// Node count of the input graph.
    pub nodes_before: usize,
    /// Node count of the result.
    pub nodes_after: usize,
    /// Total wall time.
    pub time: Duration,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl Report {
    /// A table: one line per pass with node counts, changes and time.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<5} {:<32} {:>7} {:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>8} {:>9}",
            "round", "pass", "before", "after", "removed", "added", "folded", "merged", "fused", "rewrites", "time_ms"
        );
        for p in &self.passes {
            let mut note = String::new();
            if p.timed_out {
                note.push_str("  (stopped at its time budget)");
            }
            if let Some(e) = &p.error {
                let _ = write!(note, "  FAILED: {e}");
            }
            let _ = writeln!(
                s,
                "{:<5} {:<32} {:>7} {:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>8} {:>9.3}{note}",
                p.round,
                p.pass,
                p.nodes_before,
                p.nodes_after,
                p.removed.len(),
                p.added.len(),
                p.folded.len(),
                p.merged.len(),
                p.fused.len(),
                p.rewritten.len() + p.control_edges_removed,
                ms(p.time),
            );
        }
        let _ = writeln!(
            s,
            "total: {} -> {} nodes in {} round(s), {:.3} ms",
            self.nodes_before,
            self.nodes_after,
            self.rounds,
            ms(self.time)
        );
        s
    }

    /// The table followed by every change, by node name.
    pub fn details(&self) -> String {
        let mut s = self.table();
        for p in self.passes.iter().filter(|p| p.changed()) {
            let _ = writeln!(s, "\nround {} {}:", p.round, p.pass);
            for (dup, rep) in &p.merged {
                let _ = writeln!(s, "  merged   {dup} into {rep}");
            }
            for n in &p.folded {
                let _ = writeln!(s, "  folded   {n} (now a Const)");
            }
            for (n, absorbed, op) in &p.fused {
                let _ = writeln!(s, "  fused    {n} = {op} of [{}]", absorbed.join(", "));
            }
            for (n, what) in &p.rewritten {
                let _ = writeln!(s, "  rewrote  {n}: {what}");
            }
            if p.control_edges_removed > 0 {
                let _ = writeln!(s, "  removed  {} control edge(s)", p.control_edges_removed);
            }
            for n in &p.added {
                let _ = writeln!(s, "  added    {n}");
            }
            for n in &p.removed {
                let _ = writeln!(s, "  removed  {n}");
            }
        }
        s
    }

    /// The passes that changed the node named `node` (merged it, folded it, fused it,
    /// rewrote it or removed it), as `(round, pass)`.
    pub fn passes_touching(&self, node: &str) -> Vec<(usize, String)> {
        self.passes
            .iter()
            .filter(|p| {
                p.removed.iter().any(|n| n == node)
                    || p.folded.iter().any(|n| n == node)
                    || p.merged.iter().any(|(a, b)| a == node || b == node)
                    || p.fused.iter().any(|(n, abs, _)| n == node || abs.iter().any(|a| a == node))
                    || p.rewritten.iter().any(|(n, _)| n == node)
            })
            .map(|p| (p.round, p.pass.clone()))
            .collect()
    }
}
