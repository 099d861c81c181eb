//! `batch` and `padded_batch`: consecutive elements stacked along a new first dimension.
use std::sync::Arc;

use ferroflow_tensor::{DType, Tensor};

use crate::dataset::{invalid, iterate_input, Cardinality, Ctx, Element, ElementIter, FnIter, Node};
use crate::structure::Structure;
use crate::tensors::{pad_to, stack};
use crate::{DataError, Dataset, Result};

/// How `padded_batch` pads one component: each dimension to a size, or (`None`) to the
/// largest in the batch.
pub type PaddedShape = Vec<Option<usize>>;

/// `padded_batch`'s per-component target shapes and padding values.
#[derive(Clone)]
struct Padding {
    shapes: Vec<Option<PaddedShape>>,
    values: Vec<Option<Tensor>>,
}

struct Batch {
    input: Arc<dyn Node>,
    size: usize,
    drop_remainder: bool,
    /// `padded_batch`: per component the target shape (`None`: every dimension to the
    /// batch's largest) and the padding value (`None`: zero / empty string).
    padded: Option<Padding>,
}

impl Node for Batch {
    fn kind(&self) -> &'static str {
        if self.padded.is_some() {
            "PaddedBatch"
        } else {
            "Batch"
        }
    }
    fn inputs(&self) -> Vec<Arc<dyn Node>> {
        vec![self.input.clone()]
    }
    fn describe(&self) -> String {
        format!("{},{},{:?}", self.size, self.drop_remainder, self.padded.as_ref().map(|p| &p.shapes))
    }
    fn cardinality(&self) -> Cardinality {
        let (size, drop) = (self.size as u64, self.drop_remainder);
        self.input.cardinality().map(|n| if drop { n / size } else { n.div_ceil(size) })
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        let mut input = iterate_input(&self.input, ctx)?;
        let (size, drop_remainder) = (self.size, self.drop_remainder);
        let padded = self.padded.clone();
        let path = ctx.path.clone();
        let mut seen = 0u64;
        Ok(Box::new(FnIter(move || {
            let mut elems: Vec<Element> = Vec::with_capacity(size);
            while elems.len() < size {
                match input.next() {
                    Some(Ok(e)) => elems.push(e),
                    Some(Err(err)) => return Some(Err(err)),
                    None => break,
                }
            }
            let first = seen;
            seen += elems.len() as u64;
            if elems.is_empty() || (drop_remainder && elems.len() < size) {
                return None;
            }
            Some(batch_elements(&elems, first, padded.as_ref()).map_err(|e| e.in_stage(&path)))
        })))
    }
}

fn batch_elements(elems: &[Element], first: u64, padded: Option<&Padding>) -> Result<Element> {
    let arity = elems[0].len();
    if let Some((i, e)) = elems.iter().enumerate().find(|(_, e)| e.len() != arity) {
        return Err(DataError::msg(format!(
            "element {} has {} components but element {first} has {arity}",
            first + i as u64,
            e.len()
        )));
    }
    (0..arity)
        .map(|c| {
            let parts: Vec<&Tensor> = elems.iter().map(|e| &e[c]).collect();
            match padded {
                None => stack(&parts, |i, a, b| {
                    format!(
                        "cannot batch element {} with element {first}: component {c} has shape {b:?} there and {a:?} in element {first}; make them one size (e.g. map a resize) or use padded_batch",
                        first + i as u64
                    )
                }),
                Some(Padding { shapes, values }) => {
                    let rank = parts[0].rank();
                    if let Some(p) = parts.iter().find(|p| p.rank() != rank) {
                        return Err(DataError::msg(format!(
                            "padded_batch: component {c} has rank {} in one element and {rank} in element {first}",
                            p.rank()
                        )));
                    }
                    let mut dims: Vec<usize> = (0..rank).map(|d| parts.iter().map(|p| p.dims()[d]).max().unwrap_or(0)).collect();
                    if let Some(Some(shape)) = shapes.get(c) {
                        if shape.len() != rank {
                            return Err(DataError::Invalid(format!(
                                "padded_batch: padded shape {shape:?} for component {c} has rank {}, the component has rank {rank}",
                                shape.len()
                            )));
                        }
                        for (d, s) in shape.iter().enumerate() {
                            if let Some(s) = *s {
                                if dims[d] > s {
                                    return Err(DataError::msg(format!(
                                        "padded_batch: component {c} has size {} in dimension {d}, larger than the padded shape's {s}",
                                        dims[d]
                                    )));
                                }
                                dims[d] = s;
                            }
                        }
                    }
                    let dtype = parts[0].dtype();
                    let value = match values.get(c).cloned().flatten() {
                        Some(v) => v,
                        None => zero_of(dtype)?,
                    };
                    let padded = parts.iter().map(|p| pad_to(p, &dims, &value)).collect::<Result<Vec<_>>>()?;
                    stack(&padded.iter().collect::<Vec<_>>(), |_, _, _| String::new())
                }
            }
        })
        .collect()
}

fn zero_of(dtype: DType) -> Result<Tensor> {
    if dtype == DType::String {
        return Ok(Tensor::from_strings(&[], vec![Vec::new()])?);
    }
    Ok(Tensor::zeros(dtype, &[])?)
}

impl<T: Structure> Dataset<T> {
    /// Consecutive elements stacked into batches of `batch_size` (the last may be short
    /// unless `drop_remainder`). Elements of different shapes are an error naming both.
    pub fn batch(&self, batch_size: usize, drop_remainder: bool) -> Result<Dataset<T>> {
        if batch_size == 0 {
            return invalid("batch: batch_size must be at least 1");
        }
        Ok(self.then(Batch { input: self.node.clone(), size: batch_size, drop_remainder, padded: None }))
    }

    /// Batches whose components are padded to `padded_shapes` (per component; `None` for a
    /// component or a dimension: the batch's largest) with `padding_values` (default zero
    /// or the empty string).
    pub fn padded_batch(
        &self,
        batch_size: usize,
        padded_shapes: Vec<Option<PaddedShape>>,
        padding_values: Vec<Option<Tensor>>,
        drop_remainder: bool,
    ) -> Result<Dataset<T>> {
        if batch_size == 0 {
            return invalid("padded_batch: batch_size must be at least 1");
        }
        Ok(self.then(Batch {
            input: self.node.clone(),
            size: batch_size,
            drop_remainder,
            padded: Some(Padding { shapes: padded_shapes, values: padding_values }),
        }))
    }
}
