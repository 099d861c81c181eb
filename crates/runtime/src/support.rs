//! Which ops of a graph ferroflow can run: a node's op must be in the registry and, unless the
//! executor, the function runtime or the rendezvous runs it, have a CPU kernel. A graph's
//! library functions are looked into as well (a SavedModel's main graph is a few
//! `StatefulPartitionedCall`s; its ops live in the functions), so every missing op is named
//! before anything runs.
use std::collections::{BTreeMap, BTreeSet};

use ferroflow_kernels::KernelRegistry;
use ferroflow_ops::{facts::Execution, OpRegistry};
use ferroflow_proto::{attr_value::Value, FunctionDef, GraphDef, NodeDef};

/// An op the graph uses that ferroflow cannot run, and where it is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingOp {
    /// The op type (`BesselI0e`).
    pub op: String,
    /// Whether the registry knows the op at all (true: defined, but without a CPU kernel).
    pub defined: bool,
    /// Up to three places: `node 'x'` or `function 'f', node 'y'`.
    pub places: Vec<String>,
    /// How many nodes use it in all.
    pub uses: usize,
}

impl std::fmt::Display for MissingOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}", self.op, self.places.join("; "))?;
        if self.uses > self.places.len() {
            write!(f, "; {} more", self.uses - self.places.len())?;
        }
        write!(f, ")")
    }
}

/// True when ferroflow runs `op`: a registered op with a kernel, or one the executor,
/// the function runtime or the rendezvous runs (a TensorFlow 1 ref op runs as its
/// resource form).
pub fn can_run(op: &str) -> bool {
    let reg = OpRegistry::global();
    let op = reg.ref_form(op).map_or(op, |(resource, _)| resource);
    match reg.get(op) {
        None => false,
        Some(def) => match def.facts.execution {
            Execution::Kernel => KernelRegistry::global().has_op(op),
            _ => true,
        },
    }
}

/// Every op ferroflow cannot run among the nodes of `def` (except those named in `skip`) and
/// the library functions they reach (called as ops, or named by a function attr such as a
/// `While`'s body), sorted by op name.
pub fn missing_ops(def: &GraphDef, skip: &[&str]) -> Vec<MissingOp> {
    let mut w = Walk {
        library: def
            .library
            .iter()
            .flat_map(|l| &l.function)
            .filter_map(|f| Some((f.signature.as_ref()?.name.as_str(), f)))
            .collect(),
        found: BTreeMap::new(),
        queue: Vec::new(),
    };
    for n in def.node.iter().filter(|n| !skip.contains(&n.name.as_str())) {
        w.visit(n, None);
    }
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    while let Some(f) = w.queue.pop() {
        if seen.insert(f) {
            for n in &w.library[f].node_def {
                w.visit(n, Some(f));
            }
        }
    }
    w.found.into_values().collect()
}

struct Walk<'a> {
    library: BTreeMap<&'a str, &'a FunctionDef>,
    found: BTreeMap<String, MissingOp>,
    queue: Vec<&'a str>,
}

impl<'a> Walk<'a> {
    fn function(&self, name: &str) -> Option<&'a str> {
        self.library.get_key_value(name).map(|(k, _)| *k)
    }

    fn visit(&mut self, n: &'a NodeDef, function: Option<&str>) {
        if let Some(f) = self.function(&n.op) {
            self.queue.push(f);
        } else if !can_run(&n.op) {
            let m = self.found.entry(n.op.clone()).or_insert_with(|| MissingOp {
                op: n.op.clone(),
                defined: OpRegistry::global().get(&n.op).is_some(),
                places: Vec::new(),
                uses: 0,
            });
            m.uses += 1;
            if m.places.len() < 3 {
                m.places.push(match function {
                    Some(f) => format!("function '{f}', node '{}'", n.name),
                    None => format!("node '{}'", n.name),
                });
            }
        }
        for v in n.attr.values() {
            match &v.value {
                Some(Value::Func(f)) => self.queue.extend(self.function(&f.name)),
                Some(Value::List(l)) => {
                    for f in &l.func {
                        self.queue.extend(self.function(&f.name));
                    }
                }
                _ => {}
            }
        }
    }
}
