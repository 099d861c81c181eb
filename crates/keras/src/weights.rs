//! Where a model's weights live in Keras's HDF5 layouts.
//!
//! Keras 3 (`model.weights.h5`, `.weights.h5`): `layers/<auto>/vars/<i>`, `<auto>` being the
//! snake-cased class name counted per model in `model.layers` order (`conv2d`, `conv2d_1`), a
//! nested model's layers under `layers/<auto>/layers/...`, `<i>` the creation order; the
//! variables of a layer's sub-layers under their attribute names (`layers/lstm/cell/vars`,
//! `layers/multi_head_attention/query_dense/vars`; see [`sub_groups`]). Keras 2
//! (legacy `.h5`): a group per layer name (under `model_weights` in a whole-model file) whose
//! `weight_names` attribute orders its datasets; a nested model's group lists all its inner
//! weights as `<layer>/<weight>:0`.
//!
//! Reading gives a [`WeightMap`]: each layer's tensors in Keras's order, keyed by the layer's
//! path of names (`efficientnetb0/stem_conv`); building the model checks them against the
//! variables the layers make.
use std::collections::BTreeMap;

use ferroflow_tensor::Tensor;
use serde_json::{Map, Value};

use crate::config::{LayerSpec, ModelSpec};
use crate::h5::{Attr, Group};
use crate::{KerasError, Result};

/// Each layer's weights in Keras's order, by layer path (`outer/inner/layer`).
pub type WeightMap = BTreeMap<String, Vec<Tensor>>;

/// Keras's `to_snake_case` of a class name (`BatchNormalization` → `batch_normalization`,
/// `PReLU` → `p_re_lu`, `Conv2D` → `conv2d`).
pub fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().filter(|c| c.is_alphanumeric() || *c == '_').collect();
    // (.)([A-Z][a-z]+) → \1_\2
    let mut a: Vec<char> = Vec::with_capacity(chars.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if i > 0 && c.is_ascii_uppercase() && chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase()) {
            a.push('_');
        }
        a.push(c);
        i += 1;
    }
    // ([a-z])([A-Z]) → \1_\2, then lower
    let mut out = String::with_capacity(a.len() + 8);
    for (i, &c) in a.iter().enumerate() {
        if i > 0 && c.is_ascii_uppercase() && a[i - 1].is_ascii_lowercase() {
            out.push('_');
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// Whether a config entry is a layer of `model.layers` (Keras ops in a functional model are
/// operations, not layers, and have no place in the weights file).
fn is_layer(l: &LayerSpec) -> bool {
    !l.module.as_deref().is_some_and(|m| m.starts_with("keras.src.ops"))
}

/// `(layer path, HDF5 group path)` for every layer of `spec` in Keras 3's layout, nested
/// models' layers included.
pub fn keras3_groups(spec: &ModelSpec) -> Vec<(String, String)> {
    keras3_layers(spec).into_iter().map(|(p, g, _)| (p, g)).collect()
}

/// [`keras3_groups`] with each layer's spec.
fn keras3_layers(spec: &ModelSpec) -> Vec<(String, String, &LayerSpec)> {
    let mut out = Vec::new();
    walk(spec, "", "", &mut out);
    out
}

fn walk<'a>(spec: &'a ModelSpec, path: &str, group: &str, out: &mut Vec<(String, String, &'a LayerSpec)>) {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let sequential = spec.class == "Sequential";
    for l in &spec.layers {
        if !is_layer(l) || (sequential && l.class == "InputLayer") {
            continue;
        }
        let base = snake_case(&l.class);
        let n = counts.entry(base.clone()).or_insert(0);
        let auto = if *n == 0 { base } else { format!("{base}_{n}") };
        *n += 1;
        let lpath = if path.is_empty() { l.name.clone() } else { format!("{path}/{}", l.name) };
        let g = format!("{group}layers/{auto}");
        if let Some(inner) = &l.model {
            walk(inner, &lpath, &format!("{g}/"), out);
        }
        out.push((lpath, g, l));
    }
}

/// A sub-layer whose variables Keras 3 stores in a group of its own under its layer's group
/// (`layers/lstm/cell/vars`): its path under the layer's group, the name Keras writes on its
/// `vars` group, and how many variables it holds (0 for the groups Keras writes empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubGroup {
    /// Path under the layer's group (`cell`, `forward_layer/cell`, `query_dense`).
    pub path: String,
    /// The sub-layer's name (the `name` attribute of its `vars`).
    pub name: String,
    /// Its variables' count.
    pub count: usize,
}

/// The sub-layer groups of a layer of `class` with `config`, in the order its weights list
/// them (the order Keras creates them, which is also `layer.weights`' and the legacy `.h5`
/// `weight_names` order): a layer's weights are its own `vars`, then each of these groups'
/// `vars` in turn. Empty for layers that keep all their variables in their own `vars`.
pub fn sub_groups(class: &str, config: &Map<String, Value>) -> Vec<SubGroup> {
    let flag = |k: &str, d: bool| config.get(k).and_then(Value::as_bool).unwrap_or(d);
    let sub = |path: &str, name: &str, count: usize| SubGroup { path: path.into(), name: name.into(), count };
    match class {
        "LSTM" | "GRU" | "SimpleRNN" => {
            vec![sub("cell", &format!("{}_cell", snake_case(class)), 2 + usize::from(flag("use_bias", true)))]
        }
        "Bidirectional" => {
            let inner = |key: &str| {
                let o = config.get(key).and_then(Value::as_object)?;
                let class = o.get("class_name").and_then(Value::as_str)?;
                let cfg = o.get("config").and_then(Value::as_object)?;
                Some((class.to_string(), cfg.clone()))
            };
            let Some((fclass, fcfg)) = inner("layer") else { return Vec::new() };
            let (bclass, bcfg) = inner("backward_layer").unwrap_or_else(|| (fclass.clone(), fcfg.clone()));
            let name = |c: &Map<String, Value>, d: &str| c.get("name").and_then(Value::as_str).unwrap_or(d).to_string();
            let mut out = Vec::new();
            for (dir, class, cfg) in [("forward_layer", &fclass, &fcfg), ("backward_layer", &bclass, &bcfg)] {
                out.push(sub(dir, &name(cfg, dir), 0));
                for g in sub_groups(class, cfg) {
                    out.push(SubGroup { path: format!("{dir}/{}", g.path), ..g });
                }
            }
            out
        }
        "MultiHeadAttention" => {
            let n = 1 + usize::from(flag("use_bias", true));
            let mut out = vec![
                sub("query_dense", "query", n),
                sub("key_dense", "key", n),
                sub("value_dense", "value", n),
                sub("output_dense", "attention_output", n),
            ];
            out.push(sub("_dropout_layer", "dropout", 0));
            out.push(sub("_softmax", "softmax", 0));
            out
        }
        _ => Vec::new(),
    }
}

fn numbered(g: &Group) -> Vec<(usize, &Tensor)> {
    let mut v: Vec<(usize, &Tensor)> =
        g.datasets.iter().filter_map(|(n, t)| n.parse::<usize>().ok().map(|i| (i, t))).collect();
    v.sort_by_key(|(i, _)| *i);
    v
}

/// Reads Keras 3's layout (`file` names the file in errors).
pub fn read_keras3(root: &Group, spec: &ModelSpec, file: &str) -> Result<WeightMap> {
    if root.group("layers").is_none() {
        return Err(KerasError::Hdf5 {
            path: file.to_string(),
            reason: "no 'layers' group: not a Keras 3 weights file".into(),
        });
    }
    let mut map = WeightMap::new();
    for (lpath, gpath, l) in keras3_layers(spec) {
        let mut groups = vec![format!("{gpath}/vars")];
        groups.extend(sub_groups(&l.class, &l.config).into_iter().map(|g| format!("{gpath}/{}/vars", g.path)));
        let mut all = Vec::new();
        for vpath in groups {
            let Some(vars) = root.find(&vpath) else { continue };
            let values = numbered(vars);
            for (k, (i, _)) in values.iter().enumerate() {
                if *i != k {
                    return Err(KerasError::Weights {
                        layer: lpath,
                        reason: format!("its variables in '{vpath}' are not numbered 0..{}", values.len()),
                        path: file.to_string(),
                    });
                }
            }
            all.extend(values.into_iter().map(|(_, t)| t.clone()));
        }
        if !all.is_empty() {
            map.insert(lpath, all);
        }
    }
    Ok(map)
}

/// Writes Keras 3's layout for `spec` with `weights` (by layer path): every layer gets its
/// `vars` group (empty for weightless ones), as Keras writes it.
pub fn write_keras3(spec: &ModelSpec, weights: &WeightMap) -> Group {
    let mut root = Group::default();
    for (lpath, gpath, l) in keras3_layers(spec) {
        let subs = sub_groups(&l.class, &l.config);
        let values: &[Tensor] = weights.get(&lpath).map_or(&[], Vec::as_slice);
        // The layer's own variables first, then each sub-layer's (their counts from the
        // config; a list of another length keeps all of them in the layer's own group).
        let in_subs: usize = subs.iter().map(|g| g.count).sum();
        let (own, mut rest) =
            if in_subs <= values.len() { values.split_at(values.len() - in_subs) } else { (values, &[][..]) };
        let name = lpath.rsplit('/').next().unwrap_or(&lpath).to_string();
        let g = root.ensure(&gpath);
        let vars = g.ensure("vars");
        vars.attrs.push(("name".into(), Attr::Text(name)));
        for (i, t) in own.iter().enumerate() {
            vars.datasets.push((i.to_string(), t.clone()));
        }
        for sub in &subs {
            let take = if in_subs <= values.len() { sub.count } else { 0 };
            let (mine, later) = rest.split_at(take);
            rest = later;
            let vars = g.ensure(&format!("{}/vars", sub.path));
            vars.attrs.push(("name".into(), Attr::Text(sub.name.clone())));
            for (i, t) in mine.iter().enumerate() {
                vars.datasets.push((i.to_string(), t.clone()));
            }
        }
    }
    for (_, gpath) in keras3_groups(spec) {
        // A nested model's own (empty) vars group, as Keras writes it.
        if let Some(g) = root.find_mut(&gpath) {
            if g.group("layers").is_some() && g.group("vars").is_none() {
                g.ensure("vars");
            }
        }
    }
    root.ensure("vars");
    root
}

/// The strings of attribute `name` (Keras 2 splits long lists into `name0`, `name1`, ...).
fn strings(g: &Group, name: &str) -> Option<Vec<String>> {
    if let Some(a) = g.attr(name) {
        return Some(a.strings());
    }
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(a) = g.attr(&format!("{name}{i}")) {
        out.extend(a.strings());
        i += 1;
    }
    (i > 0).then_some(out)
}

/// Reads Keras 2's layout (the root of a weights-only `.h5`, or `model_weights` of a whole
/// model). Layers are matched by name, as `load_weights(by_name=True)`; a nested model's
/// weights by their `<layer>/<weight>` names.
pub fn read_legacy(root: &Group, spec: &ModelSpec, file: &str) -> Result<WeightMap> {
    let names = strings(root, "layer_names").ok_or_else(|| KerasError::Hdf5 {
        path: file.to_string(),
        reason: "no 'layer_names' attribute: not a Keras weights file".into(),
    })?;
    let mut map = WeightMap::new();
    for name in names {
        let g = root.group(&name).ok_or_else(|| KerasError::Hdf5 {
            path: file.to_string(),
            reason: format!("layer_names lists '{name}' but there is no such group"),
        })?;
        let weight_names = strings(g, "weight_names").unwrap_or_default();
        if weight_names.is_empty() {
            continue;
        }
        let Some(layer) = spec.layer(&name) else {
            return Err(KerasError::Weights {
                layer: name,
                reason: "the file has weights for it but the model has no such layer".into(),
                path: file.to_string(),
            });
        };
        let mut tensors = Vec::with_capacity(weight_names.len());
        for wn in &weight_names {
            let t = g.dataset(wn).ok_or_else(|| KerasError::Hdf5 {
                path: file.to_string(),
                reason: format!("layer '{name}' lists weight '{wn}' but has no such dataset"),
            })?;
            tensors.push((wn.clone(), t.clone()));
        }
        match &layer.model {
            None => {
                map.insert(name, tensors.into_iter().map(|(_, t)| t).collect());
            }
            Some(inner) => {
                // `<layer>/<weight>:0` (Keras 3's legacy writer: `<layer>/<weight>`), grouped
                // per inner layer in file order: kernel before bias, gamma/beta before the
                // moving statistics.
                for (wn, t) in tensors {
                    let trimmed = wn.strip_prefix(&format!("{name}/")).unwrap_or(&wn);
                    let parts: Vec<&str> = trimmed.split('/').collect();
                    if parts.len() < 2 {
                        return Err(KerasError::Weights {
                            layer: name.clone(),
                            reason: format!("weight '{wn}' does not name its inner layer"),
                            path: file.to_string(),
                        });
                    }
                    let inner_path =
                        nested_path(inner, &parts[..parts.len() - 1]).ok_or_else(|| KerasError::Weights {
                            layer: name.clone(),
                            reason: format!("weight '{wn}' names no layer of nested model '{}'", inner.name),
                            path: file.to_string(),
                        })?;
                    map.entry(format!("{name}/{inner_path}")).or_default().push(t);
                }
            }
        }
    }
    Ok(map)
}

/// The path of the layer `parts` names inside `m` (the last part that is a layer name, or a
/// nested path).
fn nested_path(m: &ModelSpec, parts: &[&str]) -> Option<String> {
    for start in 0..parts.len() {
        let name = parts[start];
        if let Some(l) = m.layer(name) {
            if start + 1 == parts.len() {
                return Some(name.to_string());
            }
            match &l.model {
                Some(inner) => return nested_path(inner, &parts[start + 1..]).map(|p| format!("{name}/{p}")),
                // A layer's sub-layer weight (`lstm/lstm_cell/kernel`) is the layer's.
                None => return Some(name.to_string()),
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_snake_case_as_keras() {
        for (c, s) in [
            ("Conv2D", "conv2d"),
            ("BatchNormalization", "batch_normalization"),
            ("PReLU", "p_re_lu"),
            ("UpSampling2D", "up_sampling2d"),
            ("DepthwiseConv2D", "depthwise_conv2d"),
            ("GlobalAveragePooling2D", "global_average_pooling2d"),
            ("InputLayer", "input_layer"),
            ("Functional", "functional"),
            ("LSTM", "lstm"),
            ("MultiHeadAttention", "multi_head_attention"),
        ] {
            assert_eq!(snake_case(c), s, "{c}");
        }
    }
}
