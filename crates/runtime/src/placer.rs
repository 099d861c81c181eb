//! Placement: gives every node a device of the session's `DeviceSet`, honouring requested
//! devices (full or partial names), colocation groups (`_class: ["loc:@other"]`), a default
//! device, and soft placement (an unsatisfiable request falls back to a device that exists).
use ferroflow_graph::Graph;
use ferroflow_proto::attr::AttrMap;
use ferroflow_proto::attr_value;

use crate::device::{DeviceName, DeviceSet};

/// How to place.
///
/// `#[non_exhaustive]`: other crates build a `PlacementOptions` from `PlacementOptions::default()` and its
/// `with_*` setters, so fields can be added without breaking them.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct PlacementOptions {
    /// Device for nodes that request none (default: the first device).
    pub default_device: Option<String>,
    /// Place nodes whose request matches no device on an existing device instead of failing
    /// (TensorFlow's `allow_soft_placement`).
    pub soft_placement: bool,
}

impl PlacementOptions {
    /// Sets [`PlacementOptions::default_device`].
    pub fn with_default_device(mut self, default_device: Option<String>) -> Self {
        self.default_device = default_device;
        self
    }

    /// Sets [`PlacementOptions::soft_placement`].
    pub fn with_soft_placement(mut self, soft_placement: bool) -> Self {
        self.soft_placement = soft_placement;
        self
    }
}

/// A node that cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot place node '{node}': {reason}")]
pub struct PlacementError {
    /// The node.
    pub node: String,
    /// Why.
    pub reason: String,
}

fn find(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

/// The `loc:@name` entries of a node's `_class` attr.
fn colocated_with(graph: &Graph, id: usize) -> Vec<String> {
    match graph.node(id).attrs.attr_value("_class") {
        Some(attr_value::Value::List(l)) => {
            l.s.iter().filter_map(|s| std::str::from_utf8(s).ok()?.strip_prefix("loc:@").map(str::to_string)).collect()
        }
        _ => vec![],
    }
}

/// Sets every node's `device` to the full name of the device it runs on.
pub fn place(graph: &mut Graph, devices: &DeviceSet, options: &PlacementOptions) -> Result<(), PlacementError> {
    let n = graph.len();
    let mut parent: Vec<usize> = (0..n).collect();
    for id in 0..n {
        for other in colocated_with(graph, id) {
            let o = graph.find(&other).ok_or_else(|| PlacementError {
                node: graph.node(id).name.clone(),
                reason: format!("it is colocated with '{other}' (_class loc:@{other}), which is not in the graph"),
            })?;
            let (a, b) = (find(&mut parent, id), find(&mut parent, o));
            parent[a] = b;
        }
    }
    let default = match &options.default_device {
        Some(d) => DeviceName::parse(d)
            .map_err(|e| PlacementError { node: "<default device>".into(), reason: e.to_string() })?,
        None => DeviceName::default(),
    };
    // The merged request of each colocation group, and which member set each part.
    let mut group_spec: Vec<Option<(DeviceName, String)>> = vec![None; n];
    for id in 0..n {
        let node = graph.node(id);
        let spec = DeviceName::parse(&node.device)
            .map_err(|e| PlacementError { node: node.name.clone(), reason: e.to_string() })?;
        let root = find(&mut parent, id);
        match &group_spec[root] {
            None => group_spec[root] = Some((spec, node.name.clone())),
            Some((g, who)) => match g.merge(&spec) {
                Some(m) => group_spec[root] = Some((m, who.clone())),
                None if options.soft_placement => {}
                None => {
                    return Err(PlacementError {
                        node: node.name.clone(),
                        reason: format!(
                            "it requests '{}' but is colocated with '{who}', which requests '{g}'",
                            node.device
                        ),
                    })
                }
            },
        }
    }
    let mut assigned: Vec<Option<String>> = vec![None; n];
    for id in 0..n {
        let root = find(&mut parent, id);
        if assigned[root].is_none() {
            let (spec, who) = group_spec[root].clone().unwrap_or_default();
            let wanted = if spec == DeviceName::default() {
                default.clone()
            } else {
                spec.merge(&default).unwrap_or(spec.clone())
            };
            let device = devices
                .find(&wanted)
                .or_else(|| devices.find(&spec))
                .or_else(|| if options.soft_placement { devices.devices().first().map(|d| d.as_ref()) } else { None })
                .ok_or_else(|| PlacementError {
                    node: if who.is_empty() { graph.node(id).name.clone() } else { who.clone() },
                    reason: format!(
                        "requested device '{wanted}' matches none of this session's devices ({})",
                        devices.names()
                    ),
                })?;
            assigned[root] = Some(device.name().to_string());
        }
        let d = assigned[root].clone().expect("assigned above");
        graph.node_mut(id).device = d;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroflow_ops::Scope;
    use ferroflow_ops::{Ops, RawOps};
    use ferroflow_proto::{attr_value::ListValue, AttrValue};

    fn colocate(graph: &mut Graph, node: &str, with: &str) {
        let id = graph.find(node).unwrap();
        graph.node_mut(id).attrs.insert(
            "_class".into(),
            AttrValue {
                value: Some(attr_value::Value::List(Box::new(ListValue {
                    s: vec![format!("loc:@{with}").into_bytes()],
                    ..Default::default()
                }))),
            },
        );
    }

    fn graph() -> Graph {
        let s = Scope::new();
        let a = s.with_name("a").scalar(1.0f32).unwrap();
        let b = s.with_device("/cpu:1").with_name("b").scalar(2.0f32).unwrap();
        let c = s.with_name("c").add_v2(a, b).unwrap();
        s.with_device("/device:CPU:0").with_name("d").mul(c, c).unwrap();
        s.graph()
    }

    #[test]
    fn requested_default_and_colocated_devices() {
        let devices = DeviceSet::cpus(2);
        let mut g = graph();
        colocate(&mut g, "c", "b");
        place(&mut g, &devices, &PlacementOptions::default()).unwrap();
        let dev = |n: &str| g.node(g.find(n).unwrap()).device.clone();
        assert_eq!(dev("a"), "/job:localhost/replica:0/task:0/device:CPU:0");
        assert_eq!(dev("b"), "/job:localhost/replica:0/task:0/device:CPU:1");
        assert_eq!(dev("c"), "/job:localhost/replica:0/task:0/device:CPU:1", "colocated with b");
        assert_eq!(dev("d"), "/job:localhost/replica:0/task:0/device:CPU:0");
        let mut g = graph();
        let opts = PlacementOptions { default_device: Some("/cpu:1".into()), ..Default::default() };
        place(&mut g, &devices, &opts).unwrap();
        assert_eq!(g.node(g.find("a").unwrap()).device, "/job:localhost/replica:0/task:0/device:CPU:1");
    }

    #[test]
    fn impossible_requests_name_the_node_and_device() {
        let devices = DeviceSet::cpus(2);
        let mut g = graph();
        let b = g.find("b").unwrap();
        g.node_mut(b).device = "/gpu:0".into();
        let e = place(&mut g.clone(), &devices, &PlacementOptions::default()).unwrap_err().to_string();
        assert!(e.contains("'b'") && e.contains("/device:GPU:0") && e.contains("CPU:1"), "{e}");
        // Soft placement puts it on a device that exists.
        place(&mut g, &devices, &PlacementOptions { soft_placement: true, ..Default::default() }).unwrap();
        assert!(g.node(b).device.ends_with("CPU:0"));
        // Colocation with a node that requests another device.
        let mut g = graph();
        colocate(&mut g, "d", "b");
        let e = place(&mut g, &devices, &PlacementOptions::default()).unwrap_err().to_string();
        assert!(e.contains("colocated with") && e.contains("'b'") && e.contains("'d'"), "{e}");
        // Colocation with a missing node; an unparsable device.
        let mut g = graph();
        colocate(&mut g, "a", "nowhere");
        assert!(place(&mut g, &devices, &PlacementOptions::default()).unwrap_err().to_string().contains("nowhere"));
        let mut g = graph();
        let a = g.find("a").unwrap();
        g.node_mut(a).device = "/bogus:1".into();
        let e = place(&mut g, &devices, &PlacementOptions::default()).unwrap_err().to_string();
        assert!(e.contains("'a'") && e.contains("/bogus:1"), "{e}");
    }
}
