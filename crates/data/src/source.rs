//! Where elements come from: tensors in memory, ranges, generators, files, TFRecords.
use std::hash::Hasher;

use ferroflow_tensor::hash::Fnv1a;
use std::path::PathBuf;
use std::sync::Arc;

use ferroflow_tensor::Tensor;

use crate::dataset::{invalid, Cardinality, Ctx, ElementIter, FnIter, Node};
use crate::structure::Structure;
use crate::tensors::{row, rows};
use crate::{DataError, Dataset, Result};

struct TensorSlices {
    components: Vec<Tensor>,
    n: usize,
}

impl Node for TensorSlices {
    fn kind(&self) -> &'static str {
        "TensorSlice"
    }
    fn describe(&self) -> String {
        let mut h = Fnv1a::default();
        self.components.iter().for_each(|t| h.write_tensor(t));
        format!("{:016x}", h.finish())
    }
    fn cardinality(&self) -> Cardinality {
        Cardinality::Finite(self.n as u64)
    }
    fn iterate(&self, _: &Ctx) -> Result<Box<dyn ElementIter>> {
        let components = self.components.clone();
        let n = self.n;
        let mut i = 0;
        Ok(Box::new(FnIter(move || {
            if i >= n {
                return None;
            }
            i += 1;
            Some(components.iter().map(|t| row(t, i - 1)).collect())
        })))
    }
}

struct Tensors(Vec<Tensor>);

impl Node for Tensors {
    fn kind(&self) -> &'static str {
        "Tensor"
    }
    fn describe(&self) -> String {
        let mut h = Fnv1a::default();
        self.0.iter().for_each(|t| h.write_tensor(t));
        format!("{:016x}", h.finish())
    }
    fn cardinality(&self) -> Cardinality {
        Cardinality::Finite(1)
    }
    fn iterate(&self, _: &Ctx) -> Result<Box<dyn ElementIter>> {
        let mut e = Some(self.0.clone());
        Ok(Box::new(FnIter(move || e.take().map(Ok))))
    }
}

struct Range {
    start: i64,
    stop: i64,
    step: i64,
}

impl Node for Range {
    fn kind(&self) -> &'static str {
        "Range"
    }
    fn describe(&self) -> String {
        format!("{},{},{}", self.start, self.stop, self.step)
    }
    fn cardinality(&self) -> Cardinality {
        let span = if self.step > 0 { self.stop - self.start } else { self.start - self.stop };
        Cardinality::Finite(if span <= 0 { 0 } else { (span as u64).div_ceil(self.step.unsigned_abs()) })
    }
    fn iterate(&self, _: &Ctx) -> Result<Box<dyn ElementIter>> {
        let (mut v, stop, step) = (self.start, self.stop, self.step);
        Ok(Box::new(FnIter(move || {
            if (step > 0 && v >= stop) || (step < 0 && v <= stop) {
                return None;
            }
            v += step;
            Some(Ok(vec![Tensor::scalar(v - step)]))
        })))
    }
}

type GenFn = dyn Fn() -> Box<dyn Iterator<Item = Result<Element>> + Send> + Send + Sync;
type Element = Vec<Tensor>;

struct Generator {
    make: Arc<GenFn>,
    name: String,
}

impl Node for Generator {
    fn kind(&self) -> &'static str {
        "Generator"
    }
    fn describe(&self) -> String {
        self.name.clone()
    }
    fn cardinality(&self) -> Cardinality {
        Cardinality::Unknown
    }
    fn iterate(&self, _: &Ctx) -> Result<Box<dyn ElementIter>> {
        let mut it = (self.make)();
        Ok(Box::new(FnIter(move || it.next())))
    }
}

impl<T: Structure> Dataset<T> {
    /// One element per row of every component (all components must have the same first
    /// dimension), as `tf.data.Dataset.from_tensor_slices`.
    pub fn from_tensor_slices(value: T) -> Result<Dataset<T>> {
        let components = value.flatten();
        if components.is_empty() {
            return invalid("from_tensor_slices needs at least one tensor");
        }
        let n = rows(&components[0], "from_tensor_slices' component 0")?;
        for (i, c) in components.iter().enumerate() {
            let r = rows(c, &format!("from_tensor_slices' component {i}"))?;
            if r != n {
                return invalid(format!(
                    "from_tensor_slices: component {i} has {r} rows (shape {:?}) but component 0 has {n} (shape {:?}); all components need the same first dimension",
                    c.dims(),
                    components[0].dims()
                ));
            }
        }
        Ok(Dataset::from_node(Arc::new(TensorSlices { components, n })))
    }

    /// One element: `value` itself, as `tf.data.Dataset.from_tensors`.
    pub fn from_tensors(value: T) -> Dataset<T> {
        Dataset::from_node(Arc::new(Tensors(value.flatten())))
    }

    /// Elements from a generator, called once per iteration (each epoch gets a fresh
    /// iterator), as `tf.data.Dataset.from_generator`. `name` identifies it in fingerprints.
    pub fn from_generator<I, F>(name: &str, make: F) -> Dataset<T>
    where
        F: Fn() -> I + Send + Sync + 'static,
        I: IntoIterator<Item = T> + 'static,
        I::IntoIter: Send,
    {
        let make: Arc<GenFn> = Arc::new(move || Box::new(make().into_iter().map(|v| Ok(v.flatten()))));
        Dataset::from_node(Arc::new(Generator { make, name: name.to_string() }))
    }
}

impl Dataset<Tensor> {
    /// `start, start + step, …` up to (not including) `stop`, as int64 scalars.
    pub fn range(start: i64, stop: i64, step: i64) -> Result<Dataset<Tensor>> {
        if step == 0 {
            return invalid("range: step must not be 0");
        }
        Ok(Dataset::from_node(Arc::new(Range { start, stop, step })))
    }

    /// The files matching `pattern` (a glob: `*`, `?`, `[abc]`, `**`), as string scalars,
    /// sorted, then shuffled with `seed` when `shuffle` (tf.data's default is to shuffle).
    /// No match is an error naming the pattern.
    pub fn list_files(pattern: &str, shuffle: bool, seed: Option<u64>) -> Result<Dataset<Tensor>> {
        let mut files = glob_files(pattern)?;
        if shuffle {
            let mut rng = ferroflow_tensor::rng::Rng::new(crate::rng::seed_or_random(seed));
            rng.shuffle(&mut files);
        }
        let names: Vec<Vec<u8>> = files.iter().map(|p| p.to_string_lossy().into_owned().into_bytes()).collect();
        let n = names.len();
        Dataset::from_tensor_slices(Tensor::from_strings(&[n], names)?)
    }
}

/// The files matching `pattern`, sorted; an error when none match.
pub fn glob_files(pattern: &str) -> Result<Vec<PathBuf>> {
    let paths = glob::glob(pattern).map_err(|e| DataError::pipeline(format!("bad file pattern '{pattern}'"), e))?;
    let mut files = Vec::new();
    for p in paths {
        let p = p.map_err(|e| {
            let path = e.path().to_path_buf();
            DataError::io(&path, std::io::Error::from(e))
        })?;
        if p.is_file() {
            files.push(p);
        }
    }
    if files.is_empty() {
        return invalid(format!("no files matched pattern: {pattern}"));
    }
    files.sort();
    Ok(files)
}
