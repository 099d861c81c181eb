//! TensorFlow's list ops on `variant` tensors holding a [`TensorList`]: what TF2 `while_loop`s
//! (Keras's recurrent layers) read their steps from and write their outputs to. Updates take
//! the list from their input, so a loop's last reader changes it in place instead of copying.
use ferroflow_graph::Attrs;
use ferroflow_tensor::{DType, Tensor, TensorList};

use crate::array::interleave;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, OpKernel, Outputs};

/// An `element_shape` input: `-1` (a scalar) for an unknown rank, else a vector of sizes with
/// `-1` for unknown ones.
fn element_shape(node: &str, t: &Tensor) -> KResult<Option<Vec<i64>>> {
    let v: Vec<i64> = match t.dtype() {
        DType::Int32 => t.as_slice::<i32>()?.iter().map(|&d| d as i64).collect(),
        DType::Int64 => t.as_slice::<i64>()?.to_vec(),
        d => return Err(invalid(format!("node '{node}': element_shape must be int32 or int64, got {d}"))),
    };
    match (t.rank(), &v[..]) {
        (0, [-1]) => Ok(None),
        (1, _) if v.iter().all(|&d| d >= -1) => Ok(Some(v)),
        _ => Err(invalid(format!(
            "node '{node}': element_shape must be -1 or a vector of sizes (-1 for unknown), got {:?} of shape {:?}",
            v,
            t.dims()
        ))),
    }
}

/// The inputs, moved out (an updated list is the input's own when no one else holds it).
fn take_inputs<const N: usize>(node: &str, inputs: &mut Inputs) -> KResult<[Tensor; N]> {
    let got = inputs.len();
    std::mem::take(inputs).try_into().map_err(|_| invalid(format!("node '{node}': expected {N} inputs, got {got}")))
}

fn index(node: &str, t: &Tensor) -> KResult<i64> {
    t.scalar_value::<i32>().map(i64::from).map_err(|e| invalid(format!("node '{node}': index: {e}")))
}

fn list_of<'a>(node: &str, t: &'a Tensor, dtype: DType) -> KResult<&'a TensorList> {
    let l = t.as_list().map_err(|e| invalid(format!("node '{node}': input_handle is not a TensorList ({e})")))?;
    if l.element_dtype != dtype {
        return Err(invalid(format!(
            "node '{node}': the list's elements are {}, the op's element_dtype is {dtype}",
            l.element_dtype
        )));
    }
    Ok(l)
}

/// Zeros of a fully known element shape (an entry reserved but never set).
fn zeros(node: &str, dtype: DType, shape: &Option<Vec<i64>>) -> KResult<Tensor> {
    match shape {
        Some(s) if s.iter().all(|&d| d >= 0) => {
            Ok(Tensor::zeros(dtype, &s.iter().map(|&d| d as usize).collect::<Vec<_>>())?)
        }
        _ => Err(invalid(format!(
            "node '{node}': an element of the list was never set and its shape {} is not fully known, so it cannot be read as zeros",
            shape.as_ref().map(|s| format!("{s:?}")).unwrap_or_else(|| "<unknown rank>".into())
        ))),
    }
}

fn check_item(node: &str, l: &TensorList, item: &Tensor) -> KResult<()> {
    if item.dtype() != l.element_dtype {
        return Err(invalid(format!("node '{node}': item is {}, the list holds {}", item.dtype(), l.element_dtype)));
    }
    if !l.shape_accepts(item.dims()) {
        return Err(invalid(format!(
            "node '{node}': item of shape {:?} does not match the list's element shape {:?}",
            item.dims(),
            l.element_shape
        )));
    }
    Ok(())
}

/// `EmptyTensorList` and `TensorListReserve`: a list of `reserve` unset entries.
struct New {
    node: String,
    dtype: DType,
    reserve: bool,
}
impl OpKernel for New {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let node = &self.node;
        let shape = element_shape(node, &inputs[0])?;
        let n = inputs[1].scalar_value::<i32>().map_err(|e| invalid(format!("node '{node}': {e}")))?;
        let len = if self.reserve {
            usize::try_from(n).map_err(|_| {
                invalid(format!("node '{node}': the num_elements to reserve must be a non negative number, got {n}"))
            })?
        } else {
            0
        };
        check_slots(node, len)?;
        outputs.push(Tensor::list(TensorList {
            element_dtype: self.dtype,
            element_shape: shape,
            elements: vec![None; len],
        }));
        Ok(())
    }
}

struct FromTensor {
    node: String,
}
impl OpKernel for FromTensor {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let node = &self.node;
        let t = &inputs[0];
        let shape = element_shape(node, &inputs[1])?;
        let Some((&n, inner)) = t.dims().split_first() else {
            return Err(invalid(format!("node '{node}': tensor must be at least a vector, but saw shape: []")));
        };
        let list = TensorList { element_dtype: t.dtype(), element_shape: shape, elements: Vec::new() };
        if !list.shape_accepts(inner) {
            return Err(invalid(format!(
                "node '{node}': the tensor's element shape {inner:?} does not match element_shape {:?}",
                list.element_shape
            )));
        }
        let per: usize = inner.iter().product();
        let elements: Vec<Option<Tensor>> = if t.dtype() == DType::String {
            let s = t.as_strings()?;
            (0..n)
                .map(|i| -> KResult<_> { Ok(Some(Tensor::from_strings(inner, s[i * per..(i + 1) * per].to_vec())?)) })
                .collect::<KResult<_>>()?
        } else {
            let bytes = t.as_bytes()?;
            let b = per * t.dtype().size().unwrap_or(0);
            (0..n)
                .map(|i| -> KResult<_> {
                    Ok(Some(Tensor::from_fill(t.dtype(), inner, |out| {
                        out.copy_from_slice(&bytes[i * b..(i + 1) * b])
                    })?))
                })
                .collect::<KResult<_>>()?
        };
        outputs.push(Tensor::list(TensorList { elements, ..list }));
        Ok(())
    }
}

struct GetItem {
    node: String,
    dtype: DType,
}
impl OpKernel for GetItem {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let node = &self.node;
        let l = list_of(node, &inputs[0], self.dtype)?;
        let i = index(node, &inputs[1])?;
        let entry = usize::try_from(i).ok().and_then(|i| l.elements.get(i)).ok_or_else(|| {
            invalid(format!("node '{node}': trying to access element {i} in a list with {} elements", l.elements.len()))
        })?;
        outputs.push(match entry {
            Some(t) => t.clone(),
            None => {
                let asked = element_shape(node, &inputs[2])?;
                let shape = l.merged_shape(asked.as_deref()).map_err(|e| invalid(format!("node '{node}': {e}")))?;
                zeros(node, self.dtype, &shape)?
            }
        });
        Ok(())
    }
}

struct SetItem {
    node: String,
    dtype: DType,
    resize: bool,
}
impl OpKernel for SetItem {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let node = &self.node;
        let [list, i, item] = take_inputs(node, inputs)?;
        list_of(node, &list, self.dtype)?;
        let i = index(node, &i)?;
        let mut l = list.into_list()?;
        check_item(node, &l, &item)?;
        let len = l.elements.len();
        let at = usize::try_from(i).ok().filter(|&i| i < len || self.resize).ok_or_else(|| {
            invalid(format!("node '{node}': trying to modify element {i} in a list with {len} elements"))
        })?;
        if at >= len {
            check_slots(node, at + 1)?;
            l.elements.resize(at + 1, None);
        }
        l.elements[at] = Some(item);
        outputs.push(Tensor::list(l));
        Ok(())
    }
}

/// Charges a list of `len` slots (each an empty or held element) against the memory limit
/// before it is allocated: `num_elements` and a resizing index come from the graph's data.
fn check_slots(node: &str, len: usize) -> KResult<()> {
    let bytes = len.saturating_mul(std::mem::size_of::<Option<Tensor>>());
    ferroflow_tensor::limit::check(bytes, || format!("node '{node}': a tensor list of {len} elements"))?;
    Ok(())
}

struct Stack {
    node: String,
    dtype: DType,
    num_elements: i64,
}
impl OpKernel for Stack {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let node = &self.node;
        let l = list_of(node, &inputs[0], self.dtype)?;
        let n = l.elements.len();
        if self.num_elements != -1 && self.num_elements != n as i64 {
            return Err(invalid(format!(
                "node '{node}': operation expected a list with {} elements but got a list with {n} elements",
                self.num_elements
            )));
        }
        let asked = element_shape(node, &inputs[1])?;
        let mut shape = l.merged_shape(asked.as_deref()).map_err(|e| invalid(format!("node '{node}': {e}")))?;
        if let Some(t) = l.elements.iter().flatten().next() {
            let dims: Vec<i64> = t.dims().iter().map(|&d| d as i64).collect();
            shape = tensor_shape_merge(node, shape, &dims)?;
        }
        let zero = if l.elements.iter().any(Option::is_none) || n == 0 {
            Some(zeros(node, self.dtype, &shape)?)
        } else {
            None
        };
        let parts: Vec<&Tensor> =
            l.elements.iter().map(|e| e.as_ref().or(zero.as_ref())).collect::<Option<_>>().unwrap_or_default();
        let inner: Vec<usize> = match (parts.first(), &zero) {
            (Some(t), _) => t.dims().to_vec(),
            (None, Some(z)) => z.dims().to_vec(),
            (None, None) => Vec::new(),
        };
        for t in &parts {
            if t.dims() != inner {
                return Err(invalid(format!(
                    "node '{node}': the list's elements have different shapes ({:?} and {inner:?}), so they cannot be stacked",
                    t.dims()
                )));
            }
        }
        let mut dims = vec![n];
        dims.extend_from_slice(&inner);
        if parts.is_empty() {
            outputs.push(Tensor::zeros(self.dtype, &dims)?);
        } else {
            let per: usize = inner.iter().product();
            outputs.push(interleave(ctx, &parts, &vec![per; n], 1, &dims)?);
        }
        Ok(())
    }
}

fn tensor_shape_merge(node: &str, shape: Option<Vec<i64>>, dims: &[i64]) -> KResult<Option<Vec<i64>>> {
    ferroflow_tensor::merge_shapes(shape.as_deref(), Some(dims)).map_err(|e| invalid(format!("node '{node}': {e}")))
}

struct Length {
    node: String,
}
impl OpKernel for Length {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let node = &self.node;
        let l = inputs[0]
            .as_list()
            .map_err(|e| invalid(format!("node '{node}': input_handle is not a TensorList ({e})")))?;
        let n = i32::try_from(l.elements.len()).map_err(|_| invalid(format!("node '{node}': the list is too long")))?;
        outputs.push(Tensor::scalar(n));
        Ok(())
    }
}

struct ElementShape {
    node: String,
    dtype: DType,
}
impl OpKernel for ElementShape {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let node = &self.node;
        let l = inputs[0]
            .as_list()
            .map_err(|e| invalid(format!("node '{node}': input_handle is not a TensorList ({e})")))?;
        let v = l.element_shape.clone();
        outputs.push(match (self.dtype, v) {
            (DType::Int64, None) => Tensor::scalar(-1i64),
            (_, None) => Tensor::scalar(-1i32),
            (DType::Int64, Some(s)) => Tensor::from_vec(&[s.len()], s)?,
            (_, Some(s)) => Tensor::from_vec(&[s.len()], s.iter().map(|&d| d as i32).collect())?,
        });
        Ok(())
    }
}

struct PushBack {
    node: String,
    dtype: DType,
}
impl OpKernel for PushBack {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let node = &self.node;
        let [list, item] = take_inputs(node, inputs)?;
        list_of(node, &list, self.dtype)?;
        let mut l = list.into_list()?;
        check_item(node, &l, &item)?;
        l.elements.push(Some(item));
        outputs.push(Tensor::list(l));
        Ok(())
    }
}

struct PopBack {
    node: String,
    dtype: DType,
}
impl OpKernel for PopBack {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let node = &self.node;
        let [list, shape] = take_inputs(node, inputs)?;
        list_of(node, &list, self.dtype)?;
        let asked = element_shape(node, &shape)?;
        let mut l = list.into_list()?;
        let Some(last) = l.elements.pop() else {
            return Err(invalid(format!("node '{node}': trying to pop from an empty list")));
        };
        let item = match last {
            Some(t) => t,
            None => {
                let shape = l.merged_shape(asked.as_deref()).map_err(|e| invalid(format!("node '{node}': {e}")))?;
                zeros(node, self.dtype, &shape)?
            }
        };
        outputs.push(Tensor::list(l));
        outputs.push(item);
        Ok(())
    }
}

/// `AddN` of lists (gradients of a list read more than once): the element-wise sums, an entry
/// unset in every list staying unset.
struct AddLists {
    node: String,
}
impl OpKernel for AddLists {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let node = &self.node;
        let lists = inputs
            .iter()
            .map(|t| {
                t.as_list().map_err(|e| invalid(format!("node '{node}': AddN of variants needs TensorLists ({e})")))
            })
            .collect::<KResult<Vec<_>>>()?;
        let first = lists[0];
        let mut sum = TensorList {
            element_dtype: first.element_dtype,
            element_shape: first.element_shape.clone(),
            elements: Vec::with_capacity(first.elements.len()),
        };
        for l in &lists[1..] {
            if l.element_dtype != first.element_dtype || l.elements.len() != first.elements.len() {
                return Err(invalid(format!(
                    "node '{node}': trying to add lists of {} {} and {} {} elements",
                    first.elements.len(),
                    first.element_dtype,
                    l.elements.len(),
                    l.element_dtype
                )));
            }
        }
        let mut add = Attrs::new();
        add.insert("T".into(), ferroflow_proto::attr::dtype(first.element_dtype));
        for i in 0..first.elements.len() {
            let set: Vec<Tensor> = lists.iter().filter_map(|l| l.elements[i].clone()).collect();
            sum.elements.push(match set.len() {
                0 => None,
                1 => set.into_iter().next(),
                n => {
                    add.insert("N".into(), ferroflow_proto::attr::int(n as i64));
                    crate::run_op("AddN", &add, set, ctx)
                        .map_err(|e| invalid(format!("node '{node}': element {i}: {e}")))?
                        .pop()
                }
            });
        }
        outputs.push(Tensor::list(sum));
        Ok(())
    }
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("AddN", "T", &[DType::Variant], |d| Ok(Box::new(AddLists { node: d.name.into() })));
    r.register("EmptyTensorList", "", &[], |d| {
        Ok(Box::new(New { node: d.name.into(), dtype: d.dtype("element_dtype")?, reserve: false }))
    });
    r.register("TensorListReserve", "", &[], |d| {
        Ok(Box::new(New { node: d.name.into(), dtype: d.dtype("element_dtype")?, reserve: true }))
    });
    r.register("TensorListFromTensor", "", &[], |d| Ok(Box::new(FromTensor { node: d.name.into() })));
    r.register("TensorListGetItem", "", &[], |d| {
        Ok(Box::new(GetItem { node: d.name.into(), dtype: d.dtype("element_dtype")? }))
    });
    r.register("TensorListSetItem", "", &[], |d| {
        Ok(Box::new(SetItem {
            node: d.name.into(),
            dtype: d.dtype("element_dtype")?,
            resize: d.bool("resize_if_index_out_of_bounds").unwrap_or(false),
        }))
    });
    r.register("TensorListStack", "", &[], |d| {
        Ok(Box::new(Stack {
            node: d.name.into(),
            dtype: d.dtype("element_dtype")?,
            num_elements: d.int("num_elements")?,
        }))
    });
    r.register("TensorListLength", "", &[], |d| Ok(Box::new(Length { node: d.name.into() })));
    r.register("TensorListElementShape", "", &[], |d| {
        Ok(Box::new(ElementShape { node: d.name.into(), dtype: d.dtype("shape_type")? }))
    });
    r.register("TensorListPushBack", "", &[], |d| {
        Ok(Box::new(PushBack { node: d.name.into(), dtype: d.dtype("element_dtype")? }))
    });
    r.register("TensorListPopBack", "", &[], |d| {
        Ok(Box::new(PopBack { node: d.name.into(), dtype: d.dtype("element_dtype")? }))
    });
}
