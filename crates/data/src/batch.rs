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
    fn input(&self) -> Option<&Arc<dyn Node>> {
        Some(&self.input)
    }
    fn describe(&self) -> String {
        format!("{},{},{:?}", self.size, self.drop_remainder, self.padded.as_ref().map(|p| &p.shapes))
    }
    fn cardinality(&self) -> Cardinality {
        let (size, drop) = (self.size as u64, self.drop_remainder);
        self.input.cardinality().map(|n| if drop { n / size } else { n.div_ceil(size) })
    }
    fn iterate(&self, ctx: &Ctx) -> Result<Box<dyn ElementIter>> {
        if self.padded.is_none() {
            // A parallel map below copies its elements straight into the batches
            // (tf.data's map_and_batch fusion).
            let child = ctx.child(self.input.kind());
            if let Some(fused) = self.input.iterate_batched(&child, self.size, self.drop_remainder, &ctx.path) {
                return Ok(crate::dataset::traced(fused?, child.path));
            }
        }
        let mut input = iterate_input(&self.input, ctx)?;
        let (size, drop_remainder) = (self.size, self.drop_remainder);
        let padded = self.padded.clone();
        let path = ctx.path.clone();
        let mut seen = 0u64;
        Ok(Box::new(FnIter(move || {
            let first = seen;
            let Some(padded) = padded.as_ref() else {
                // Each element goes into its row as it arrives (once, while in cache).
                let (mut builder, mut error, mut n) = (None, None, 0usize);
                while n < size {
                    match input.next() {
                        Some(Ok(e)) => {
                            if error.is_none() {
                                match BatchBuilder::add(&mut builder, first + n as u64, first, size, e) {
                                    // SAFETY: rows from `add` on the live builder; row n is new.
                                    Ok(Some((rows, e))) => unsafe { BatchBuilder::write_row(&rows, n, &e) },
                                    Ok(None) => {}
                                    Err(err) => error = Some(err),
                                }
                            }
                            n += 1;
                        }
                        Some(Err(err)) => return Some(Err(err)),
                        None => break,
                    }
                }
                seen += n as u64;
                if n == 0 || (drop_remainder && n < size) {
                    return None;
                }
                let batch = match (error, builder) {
                    (Some(e), _) => Err(e),
                    // SAFETY: rows 0..n were each written above (or kept whole).
                    (None, Some(b)) => unsafe { b.finish(n) },
                    (None, None) => Err(DataError::msg("a batch without elements")),
                };
                return Some(batch.map_err(|e| e.in_stage(&path)));
            };
            let mut elems: Vec<Element> = Vec::with_capacity(size);
            while elems.len() < size {
                match input.next() {
                    Some(Ok(e)) => elems.push(e),
                    Some(Err(err)) => return Some(Err(err)),
                    None => break,
                }
            }
            seen += elems.len() as u64;
            if elems.is_empty() || (drop_remainder && elems.len() < size) {
                return None;
            }
            Some(batch_elements(&elems, first, Some(padded)).map_err(|e| e.in_stage(&path)))
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

/// A raw destination row in a batch tensor being built.
#[derive(Clone, Copy)]
pub(crate) struct RowPtr(*mut u8);
// SAFETY: each row is written by exactly one thread, and the batch is read only after every
// writer has finished (the parallel map counts them under its state lock, which orders the
// writes before the hand-over).
unsafe impl Send for RowPtr {}

/// Where an element's components go: per component, the batch's first byte and a row's size.
pub(crate) type Rows = Vec<(RowPtr, usize)>;

/// A batch built row by row as its elements arrive, so each element is copied once, while
/// it is still in cache (not all together after the last one arrives).
pub(crate) enum BatchBuilder {
    /// Dense components: the batch tensors, their rows, and the element (sequence number)
    /// whose shapes the batch takes.
    Dense { tensors: Vec<Tensor>, rows: Rows, first: u64 },
    /// Some component is not dense (strings): elements kept by row and stacked at the end;
    /// `start` is the batch's first sequence number.
    Parts { elems: std::collections::BTreeMap<usize, Element>, start: u64 },
}

impl BatchBuilder {
    /// A batch of `size` rows shaped like element `seq`; `start` is its first row's sequence
    /// number.
    pub(crate) fn new(e: &Element, seq: u64, start: u64, size: usize) -> Result<BatchBuilder> {
        if !e.iter().all(|t| t.as_bytes().is_ok()) {
            return Ok(BatchBuilder::Parts { elems: Default::default(), start });
        }
        let mut tensors = Vec::with_capacity(e.len());
        let mut rows = Vec::with_capacity(e.len());
        for t in e {
            let mut dims = vec![size];
            dims.extend_from_slice(t.dims());
            let each = t.as_bytes().map_or(0, |b| b.len());
            let mut begin = RowPtr(std::ptr::null_mut());
            // SAFETY: every row is written (write_row) before the batch is read, and a batch
            // with unwritten rows is only copied out by its written rows (finish) or dropped.
            let batch =
                unsafe { Tensor::from_uninit_bytes(t.dtype(), &dims, |s| begin = RowPtr(s.as_mut_ptr().cast())) }?;
            tensors.push(batch);
            rows.push((begin, each));
        }
        Ok(BatchBuilder::Dense { tensors, rows, first: seq })
    }

    /// [`BatchBuilder::place`] into the batch in `slot`, made from this element if there is
    /// none yet.
    pub(crate) fn add(
        slot: &mut Option<BatchBuilder>,
        seq: u64,
        start: u64,
        size: usize,
        e: Element,
    ) -> Result<Option<(Rows, Element)>> {
        let row = (seq - start) as usize;
        match slot {
            Some(b) => b.place(seq, row, e),
            None => {
                let mut b = BatchBuilder::new(&e, seq, start, size)?;
                let placed = b.place(seq, row, e);
                *slot = Some(b);
                placed
            }
        }
    }

    /// Checks element `seq` against the batch: a dense batch returns where its components go
    /// (for [`BatchBuilder::write_row`]); other batches keep it. A shape, dtype or arity
    /// unlike the batch's is an error naming both elements.
    pub(crate) fn place(&mut self, seq: u64, row: usize, e: Element) -> Result<Option<(Rows, Element)>> {
        match self {
            BatchBuilder::Dense { tensors, rows, first } => {
                if e.len() != tensors.len() {
                    return Err(DataError::msg(format!(
                        "element {seq} has {} components but element {first} has {}",
                        e.len(),
                        tensors.len()
                    )));
                }
                for (c, (t, b)) in e.iter().zip(tensors.iter()).enumerate() {
                    if t.dims() != &b.dims()[1..] {
                        return Err(DataError::msg(format!(
                            "cannot batch element {seq} with element {first}: component {c} has shape {:?} there and {:?} in element {first}; make them one size (e.g. map a resize) or use padded_batch",
                            t.dims(),
                            &b.dims()[1..]
                        )));
                    }
                    if t.dtype() != b.dtype() {
                        return Err(DataError::msg(format!(
                            "cannot batch element {seq} with element {first}: component {c} is {} there and {} in element {first}",
                            t.dtype(),
                            b.dtype()
                        )));
                    }
                }
                Ok(Some((rows.clone(), e)))
            }
            BatchBuilder::Parts { elems, .. } => {
                elems.insert(row, e);
                Ok(None)
            }
        }
    }

    /// Copies `e`'s components into row `row` of the batch `rows` point into.
    ///
    /// # Safety
    /// `rows` came from [`BatchBuilder::place`] for `e` on a builder that is still alive,
    /// `row` is below the batch size, and no other thread writes or reads that row meanwhile.
    pub(crate) unsafe fn write_row(rows: &Rows, row: usize, e: &Element) {
        for ((dst, each), t) in rows.iter().zip(e) {
            if let Ok(src) = t.as_bytes() {
                // SAFETY: `place` checked that the component has the batch row's shape and
                // dtype, so it is `each` bytes; row `row` lies inside the batch tensor.
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.0.add(row * each), *each) };
            }
        }
    }

    /// The batch of its first `count` rows (a short last batch is copied out).
    ///
    /// # Safety
    /// Rows `0..count` were all written ([`BatchBuilder::write_row`]) and no writer is left.
    pub(crate) unsafe fn finish(self, count: usize) -> Result<Element> {
        match self {
            BatchBuilder::Dense { tensors, rows, .. } => tensors
                .into_iter()
                .zip(rows)
                .map(|(t, (begin, each))| {
                    if count == t.dims()[0] {
                        return Ok(t);
                    }
                    let mut dims = t.dims().to_vec();
                    dims[0] = count;
                    // SAFETY: rows 0..count were all written (the caller's contract).
                    let written = unsafe { std::slice::from_raw_parts(begin.0, count * each) };
                    Ok(Tensor::from_parts(t.dtype(), &dims, &[written])?)
                })
                .collect(),
            BatchBuilder::Parts { elems, start } => {
                let elems: Vec<Element> = elems.into_values().collect();
                batch_elements(&elems, start, None)
            }
        }
    }
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
