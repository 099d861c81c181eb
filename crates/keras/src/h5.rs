//! HDF5 as Keras uses it, through the pure-Rust `hdf5-pure` crate (no libhdf5): a file is read
//! into an owned [`Group`] tree (attributes, sub-groups, datasets as tensors) and a tree is
//! written back. Reads are bounded: a dataset's declared size is checked against the file's
//! size (HDF5 stores data as written unless filtered) and the memory limit before it is read,
//! nesting is limited, datasets of other types than float and integer are refused, and a
//! panic inside the reader (none was found fuzzing it) becomes an error.
use std::panic::{catch_unwind, AssertUnwindSafe};

use ferroflow_tensor::Tensor;
use hdf5_pure::{AttrValue, DType};

use crate::{KerasError, Result};

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// A scalar string.
    Text(String),
    /// An array of strings.
    Texts(Vec<String>),
    /// Numbers (an empty array is Keras 2's `weight_names` of a weightless layer).
    Numbers(Vec<f64>),
}

impl Attr {
    /// The strings of a string attribute (a scalar gives one); none for numbers.
    pub fn strings(&self) -> Vec<String> {
        match self {
            Attr::Text(s) => vec![s.clone()],
            Attr::Texts(v) => v.clone(),
            Attr::Numbers(_) => Vec::new(),
        }
    }

    /// The text of a scalar string attribute (or a one-element array).
    pub fn text(&self) -> Option<String> {
        match self {
            Attr::Text(s) => Some(s.clone()),
            Attr::Texts(v) if v.len() == 1 => Some(v[0].clone()),
            _ => None,
        }
    }
}

/// A group: attributes, sub-groups, datasets, each in file order.
#[derive(Clone, Debug, Default)]
pub struct Group {
    /// Attributes.
    pub attrs: Vec<(String, Attr)>,
    /// Sub-groups.
    pub groups: Vec<(String, Group)>,
    /// Datasets.
    pub datasets: Vec<(String, Tensor)>,
}

impl Group {
    /// The sub-group `name`.
    pub fn group(&self, name: &str) -> Option<&Group> {
        self.groups.iter().find(|(n, _)| n == name).map(|(_, g)| g)
    }

    /// The group at `path` (`a/b/c`).
    pub fn find(&self, path: &str) -> Option<&Group> {
        path.split('/').filter(|p| !p.is_empty()).try_fold(self, |g, p| g.group(p))
    }

    /// The group at `path`, mutably.
    pub fn find_mut(&mut self, path: &str) -> Option<&mut Group> {
        let mut g = self;
        for p in path.split('/').filter(|p| !p.is_empty()) {
            g = g.groups.iter_mut().find(|(n, _)| n == p).map(|(_, g)| g)?;
        }
        Some(g)
    }

    /// The group at `path`, made (with its parents) where missing.
    pub fn ensure(&mut self, path: &str) -> &mut Group {
        let mut g = self;
        for p in path.split('/').filter(|p| !p.is_empty()) {
            let i = match g.groups.iter().position(|(n, _)| n == p) {
                Some(i) => i,
                None => {
                    g.groups.push((p.to_string(), Group::default()));
                    g.groups.len() - 1
                }
            };
            g = &mut g.groups[i].1;
        }
        g
    }

    /// The dataset at `path` (`group/…/name`).
    pub fn dataset(&self, path: &str) -> Option<&Tensor> {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        self.find(dir)?.datasets.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    /// The attribute `name`.
    pub fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }
}

/// Groups nested deeper than this are refused.
const MAX_DEPTH: usize = 64;

fn h5_err(file: &str, reason: impl Into<String>) -> KerasError {
    KerasError::Hdf5 { path: file.to_string(), reason: reason.into() }
}

/// Reads an HDF5 file's bytes into a tree (`file` names it in errors).
pub fn read(bytes: &[u8], file: &str) -> Result<Group> {
    let owned = bytes.to_vec();
    let budget = Budget { left: (bytes.len() as u64).saturating_mul(16).max(1 << 20) };
    match catch_unwind(AssertUnwindSafe(move || read_inner(owned, file, budget))) {
        Ok(r) => r,
        Err(_) => Err(h5_err(file, "the HDF5 reader failed on this file (damaged or not HDF5 as Keras writes it)")),
    }
}

/// What datasets may still take: the file holds its data unfiltered (Keras's files) or
/// compressed; either way a dataset cannot hold more than a small multiple of the file.
struct Budget {
    left: u64,
}

fn read_inner(bytes: Vec<u8>, file: &str, mut budget: Budget) -> Result<Group> {
    if !bytes.starts_with(b"\x89HDF\r\n\x1a\n") {
        return Err(h5_err(file, "not an HDF5 file (no HDF5 signature)"));
    }
    let f = hdf5_pure::File::from_bytes(bytes).map_err(|e| h5_err(file, e.to_string()))?;
    let root = f.root();
    walk(&root, "/", file, 0, &mut budget)
}

fn strip(s: &str) -> String {
    s.trim_end_matches('\0').to_string()
}

fn attr_of(v: &AttrValue) -> Option<Attr> {
    if let Some(ss) = v.as_strings() {
        let scalar = matches!(
            v,
            AttrValue::String(_)
                | AttrValue::StringSized { .. }
                | AttrValue::AsciiString(_)
                | AttrValue::AsciiStringSized { .. }
                | AttrValue::VarLenString(_)
                | AttrValue::VarLenAsciiString(_)
        );
        let ss: Vec<String> = ss.iter().map(|s| strip(s)).collect();
        return Some(if scalar && ss.len() == 1 { Attr::Text(ss[0].clone()) } else { Attr::Texts(ss) });
    }
    v.to_f64s().or_else(|| v.to_i64s().map(|i| i.into_iter().map(|x| x as f64).collect())).map(Attr::Numbers)
}

fn attrs(map: std::collections::HashMap<String, AttrValue>) -> Vec<(String, Attr)> {
    let mut v: Vec<(String, Attr)> = map.iter().filter_map(|(k, a)| attr_of(a).map(|a| (k.clone(), a))).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn walk(g: &hdf5_pure::Group, path: &str, file: &str, depth: usize, budget: &mut Budget) -> Result<Group> {
    if depth > MAX_DEPTH {
        return Err(h5_err(file, format!("groups nested deeper than {MAX_DEPTH} at {path}")));
    }
    let e = |what: &str, err: hdf5_pure::Error| h5_err(file, format!("{what} {path}: {err}"));
    let mut out = Group { attrs: attrs(g.attrs().map_err(|err| e("attributes of", err))?), ..Group::default() };
    let child = |n: &str| format!("{}/{n}", path.trim_end_matches('/'));
    for (name, d) in g.iter_datasets().map_err(|err| e("datasets of", err))? {
        let p = child(&name);
        let shape = d.shape().map_err(|err| h5_err(file, format!("dataset {p}: {err}")))?;
        let dtype = d.dtype().map_err(|err| h5_err(file, format!("dataset {p}: {err}")))?;
        let esize = d.element_size().map_err(|err| h5_err(file, format!("dataset {p}: {err}")))?;
        let count = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let bytes = count.and_then(|c| c.checked_mul(esize));
        let Some(bytes) = bytes.filter(|&b| b <= budget.left) else {
            return Err(h5_err(
                file,
                format!("dataset {p} declares shape {shape:?} of {esize}-byte elements, more data than the file holds"),
            ));
        };
        budget.left -= bytes;
        let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
        let n = count.unwrap_or(0) as usize;
        ferroflow_tensor::limit::check(n * 4, || format!("dataset {p} of {file}"))?;
        let t = match dtype {
            DType::F32 | DType::F64 => {
                let v = d.read_f32().map_err(|err| h5_err(file, format!("dataset {p}: {err}")))?;
                if v.len() != n {
                    return Err(h5_err(file, format!("dataset {p}: read {} values for shape {shape:?}", v.len())));
                }
                Tensor::from_vec(&dims, v)?
            }
            DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U16 | DType::U32 => {
                let v = d.read_i64().map_err(|err| h5_err(file, format!("dataset {p}: {err}")))?;
                if v.len() != n {
                    return Err(h5_err(file, format!("dataset {p}: read {} values for shape {shape:?}", v.len())));
                }
                Tensor::from_vec(&dims, v)?
            }
            other => return Err(h5_err(file, format!("dataset {p} holds {other:?} values, not numbers"))),
        };
        out.datasets.push((name, t));
    }
    for (name, sub) in g.iter_groups().map_err(|err| e("groups of", err))? {
        let p = child(&name);
        out.groups.push((name, walk(&sub, &p, file, depth + 1, budget)?));
    }
    Ok(out)
}

fn attr_value(a: &Attr) -> AttrValue {
    match a {
        Attr::Text(s) => AttrValue::VarLenString(s.clone()),
        Attr::Texts(v) => AttrValue::VarLenStringArray(v.clone()),
        Attr::Numbers(v) => AttrValue::F64Array(v.clone()),
    }
}

fn dataset(b: &mut hdf5_pure::DatasetBuilder, t: &Tensor, file: &str, name: &str) -> Result<()> {
    let shape: Vec<u64> = t.dims().iter().map(|&d| d as u64).collect();
    match t.dtype() {
        ferroflow_tensor::DType::Float => b.with_f32_data(t.as_slice::<f32>()?),
        ferroflow_tensor::DType::Int64 => b.with_i64_data(t.as_slice::<i64>()?),
        d => return Err(h5_err(file, format!("dataset {name}: cannot write {d} values"))),
    };
    b.with_shape(&shape);
    Ok(())
}

fn build_group(g: &Group, b: &mut hdf5_pure::GroupBuilder, file: &str) -> Result<()> {
    for (k, a) in &g.attrs {
        b.set_attr(k, attr_value(a));
    }
    for (name, t) in &g.datasets {
        dataset(b.create_dataset(name), t, file, name)?;
    }
    for (name, sub) in &g.groups {
        let mut sb = b.create_group(name);
        build_group(sub, &mut sb, file)?;
        b.add_group(sb.finish());
    }
    Ok(())
}

/// Writes a tree as an HDF5 file's bytes (`file` names it in errors). Strings are written as
/// h5py writes them (variable-length UTF-8).
pub fn write(root: &Group, file: &str) -> Result<Vec<u8>> {
    let mut fb = hdf5_pure::FileBuilder::new();
    for (k, a) in &root.attrs {
        fb.set_attr(k, attr_value(a));
    }
    for (name, t) in &root.datasets {
        dataset(fb.create_dataset(name), t, file, name)?;
    }
    for (name, sub) in &root.groups {
        let mut gb = fb.create_group(name);
        build_group(sub, &mut gb, file)?;
        fb.add_group(gb.finish());
    }
    fb.finish().map_err(|e| h5_err(file, format!("cannot write: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_survives_writing_and_reading() {
        let mut root = Group::default();
        let vars = root.ensure("layers/dense/vars");
        vars.attrs.push(("name".into(), Attr::Text("head".into())));
        vars.datasets.push(("0".into(), Tensor::from_vec(&[3, 2], vec![1f32, 2., 3., 4., 5., 6.]).unwrap()));
        vars.datasets.push(("1".into(), Tensor::scalar(7i64)));
        root.attrs.push(("names".into(), Attr::Texts(vec!["a".into(), "bb".into()])));
        let bytes = write(&root, "t.h5").unwrap();
        let back = read(&bytes, "t.h5").unwrap();
        let v = back.find("layers/dense/vars").unwrap();
        assert_eq!(v.attr("name"), Some(&Attr::Text("head".into())));
        assert_eq!(back.dataset("layers/dense/vars/0").unwrap().as_slice::<f32>().unwrap(), &[1., 2., 3., 4., 5., 6.]);
        assert_eq!(back.dataset("layers/dense/vars/0").unwrap().dims(), &[3, 2]);
        assert_eq!(back.dataset("layers/dense/vars/1").unwrap().scalar_value::<i64>().unwrap(), 7);
        assert_eq!(back.attr("names").unwrap().strings(), ["a", "bb"]);
    }

    #[test]
    fn damaged_files_are_errors() {
        let mut root = Group::default();
        root.ensure("g").datasets.push(("d".into(), Tensor::from_vec(&[64], vec![1f32; 64]).unwrap()));
        let bytes = write(&root, "t.h5").unwrap();
        assert!(read(&bytes[..bytes.len() / 2], "t.h5").is_err());
        assert!(read(b"not hdf5", "t.h5").unwrap_err().to_string().contains("signature"));
        for i in (0..bytes.len()).step_by(7) {
            let mut b = bytes.clone();
            b[i] ^= 0xA5;
            let _ = read(&b, "t.h5"); // an error or a tree, never a panic or an abort
        }
    }
}
