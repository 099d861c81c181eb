//! Slicing along the first dimension and stacking: what sources, `batch` and `unbatch` do to
//! every component.
use ferroflow_tensor::{DType, Tensor};

use crate::{DataError, Result};

/// The number of rows (first dimension) of `t`, or an error naming `what` for a scalar.
pub(crate) fn rows(t: &Tensor, what: &str) -> Result<usize> {
    t.dims().first().copied().ok_or_else(|| DataError::Invalid(format!("{what} is a scalar: it has no rows to slice")))
}

/// Rows `start..start + n` of `t` (a view: one copy of those bytes).
pub(crate) fn slice_rows(t: &Tensor, start: usize, n: usize) -> Result<Tensor> {
    let dims = t.dims();
    let row: usize = dims[1..].iter().product();
    let mut out_dims = dims.to_vec();
    out_dims[0] = n;
    if t.dtype() == DType::String {
        let s = t.as_strings()?;
        return Ok(Tensor::from_strings(&out_dims, s[start * row..(start + n) * row].to_vec())?);
    }
    let size = t.dtype().size().ok_or_else(|| DataError::Invalid(format!("{} tensors cannot be sliced", t.dtype())))?;
    let b = t.as_bytes()?;
    Ok(Tensor::from_bytes(t.dtype(), &out_dims, &b[start * row * size..(start + n) * row * size])?)
}

/// Row `i` of `t`, without its first dimension.
pub(crate) fn row(t: &Tensor, i: usize) -> Result<Tensor> {
    let r = slice_rows(t, i, 1)?;
    Ok(r.reshaped(&t.dims()[1..])?)
}

/// Stacks equal-shaped tensors along a new first dimension. `describe` explains a mismatch
/// (`which`, the first shape, the other shape).
pub(crate) fn stack(parts: &[&Tensor], mismatch: impl Fn(usize, &[usize], &[usize]) -> String) -> Result<Tensor> {
    let first = parts.first().ok_or_else(|| DataError::Invalid("nothing to stack".into()))?;
    let dtype = first.dtype();
    for (i, p) in parts.iter().enumerate().skip(1) {
        if p.dims() != first.dims() {
            return Err(DataError::msg(mismatch(i, first.dims(), p.dims())));
        }
        if p.dtype() != dtype {
            return Err(DataError::msg(format!("element {i} is {} but element 0 is {dtype}", p.dtype())));
        }
    }
    let mut dims = vec![parts.len()];
    dims.extend_from_slice(first.dims());
    if dtype == DType::String {
        let mut all = Vec::with_capacity(parts.len() * first.len());
        for p in parts {
            all.extend_from_slice(p.as_strings()?);
        }
        return Ok(Tensor::from_strings(&dims, all)?);
    }
    let srcs = parts.iter().map(|p| p.as_bytes()).collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(Tensor::from_parts(dtype, &dims, &srcs)?)
}

/// `t` padded with `value` (a scalar of its dtype) to `dims` (each at least `t`'s).
pub(crate) fn pad_to(t: &Tensor, dims: &[usize], value: &Tensor) -> Result<Tensor> {
    if t.dims() == dims {
        return Ok(t.clone());
    }
    let rank = dims.len();
    let src_dims = t.dims();
    // Row-major strides of both shapes.
    let strides = |d: &[usize]| {
        let mut s = vec![1usize; d.len()];
        for i in (0..d.len().saturating_sub(1)).rev() {
            s[i] = s[i + 1] * d[i + 1];
        }
        s
    };
    let (ss, ds) = (strides(src_dims), strides(dims));
    let n = t.len();
    let dst_index = |mut i: usize| {
        let mut o = 0;
        for k in 0..rank {
            o += (i / ss[k]) * ds[k];
            i %= ss[k];
        }
        o
    };
    if t.dtype() == DType::String {
        let fill = value.as_strings()?.first().cloned().unwrap_or_default();
        let mut out = vec![fill; dims.iter().product()];
        for (i, s) in t.as_strings()?.iter().enumerate() {
            out[dst_index(i)] = s.clone();
        }
        return Ok(Tensor::from_strings(dims, out)?);
    }
    let size = t.dtype().size().ok_or_else(|| DataError::Invalid(format!("{} tensors cannot be padded", t.dtype())))?;
    let src = t.as_bytes()?;
    let fill = value.as_bytes()?.to_vec();
    Ok(Tensor::from_fill(t.dtype(), dims, |out| {
        for chunk in out.chunks_exact_mut(size) {
            chunk.copy_from_slice(&fill);
        }
        for i in 0..n {
            let o = dst_index(i);
            out[o * size..(o + 1) * size].copy_from_slice(&src[i * size..(i + 1) * size]);
        }
    })?)
}

/// Bytes held by an element (for RAM budgets).
pub(crate) fn bytes_of(e: &[Tensor]) -> u64 {
    e.iter()
        .map(|t| match t.as_bytes() {
            Ok(b) => b.len() as u64,
            Err(_) => t.as_strings().map_or(0, |s| s.iter().map(|x| x.len() as u64 + 24).sum()),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pad_places_values_in_the_corner() {
        let t = Tensor::from_vec(&[2, 2], vec![1i32, 2, 3, 4]).unwrap();
        let p = pad_to(&t, &[3, 3], &Tensor::scalar(-1i32)).unwrap();
        assert_eq!(p.as_slice::<i32>().unwrap(), &[1, 2, -1, 3, 4, -1, -1, -1, -1]);
        let s = stack(&[&t, &t], |_, _, _| String::new()).unwrap();
        assert_eq!(s.dims(), &[2, 2, 2]);
        assert_eq!(row(&s, 1).unwrap().as_slice::<i32>().unwrap(), &[1, 2, 3, 4]);
    }
}
