//! `Tensor`: a dtype, a concrete shape and a shared, immutable buffer.
use std::fmt;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::buffer::Buffer;
use crate::{DType, Element, TensorError, TensorList};

/// Concrete dimensions of a tensor (row-major, outermost first).
pub type Dims = SmallVec<[usize; 4]>;

#[derive(Clone)]
enum Storage {
    Bytes(Buffer),
    Strings(Arc<Vec<Vec<u8>>>),
    /// `variant` elements; the kind ferroflow has is TensorFlow's `Optional` (a list of
    /// tensors, or none), which TF2's `cond` uses to hand intermediates to its gradient.
    Optionals(Arc<Vec<Option<Vec<Tensor>>>>),
    /// A scalar `variant` holding a TensorList (TF2 loops' inputs and outputs).
    List(Arc<TensorList>),
}

/// A dense, row-major tensor. Cloning is cheap: the buffer is reference-counted and shared.
/// Mutation goes through [`Tensor::as_mut_slice`], which copies only if the buffer is shared.
#[derive(Clone)]
pub struct Tensor {
    dtype: DType,
    dims: Dims,
    storage: Storage,
}

fn count(dims: &[usize]) -> Result<usize, TensorError> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| TensorError::TooLarge(format!("shape {dims:?} overflows")))
}

impl Tensor {
    /// A zero-filled tensor (empty strings for `String`).
    pub fn zeros(dtype: DType, dims: &[usize]) -> Result<Tensor, TensorError> {
        Self::allocate(dtype, dims, Buffer::alloc_len)
    }

    /// A tensor whose elements are unspecified: zeros, or the values a freed tensor left in
    /// the recycled buffer (never uninitialized memory). For kernels that write every element,
    /// which so skip [`Tensor::zeros`]' fill. `String` tensors hold empty strings, as `zeros`.
    pub fn for_overwrite(dtype: DType, dims: &[usize]) -> Result<Tensor, TensorError> {
        Self::allocate(dtype, dims, Buffer::alloc_for_overwrite)
    }

    fn allocate(dtype: DType, dims: &[usize], alloc: fn(usize) -> Option<Buffer>) -> Result<Tensor, TensorError> {
        let n = count(dims)?;
        let storage = match dtype.size() {
            Some(size) => {
                let bytes = n
                    .checked_mul(size)
                    .filter(|&b| b <= isize::MAX as usize / 2)
                    .ok_or_else(|| TensorError::TooLarge(format!("{dtype} tensor of shape {dims:?}")))?;
                crate::limit::check(bytes, || format!("{dtype} tensor of shape {dims:?}"))?;
                Storage::Bytes(alloc(bytes).ok_or_else(|| TensorError::SystemRefused {
                    what: format!("{dtype} tensor of shape {dims:?}"),
                    bytes,
                })?)
            }
            None if dtype == DType::String => {
                let bytes = n.saturating_mul(std::mem::size_of::<Vec<u8>>());
                crate::limit::check(bytes, || format!("{dtype} tensor of shape {dims:?}"))?;
                Storage::Strings(Arc::new(vec![Vec::new(); n]))
            }
            None => return Err(TensorError::NotDense(dtype)),
        };
        Ok(Tensor { dtype, dims: dims.into(), storage })
    }

    /// A tensor from a vector of elements; `dims` must match its length.
    pub fn from_vec<T: Element>(dims: &[usize], data: Vec<T>) -> Result<Tensor, TensorError> {
        Self::from_slice(dims, &data)
    }

    /// A tensor holding a copy of `data`.
    pub fn from_slice<T: Element>(dims: &[usize], data: &[T]) -> Result<Tensor, TensorError> {
        let n = count(dims)?;
        if n != data.len() {
            return Err(TensorError::ShapeMismatch { expected: n, got: data.len(), dims: dims.to_vec() });
        }
        // SAFETY: T is plain data (Element's contract); viewing its memory as bytes is sound.
        let bytes = unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data)) };
        Ok(Tensor { dtype: T::DTYPE, dims: dims.into(), storage: Storage::Bytes(Buffer::from_bytes(bytes)) })
    }

    /// A tensor of a fixed-size dtype whose bytes `fill` writes (they start zeroed); the size
    /// is checked against the memory limit before anything is allocated. Bool bytes other than
    /// 0/1 are normalised to 1.
    pub fn from_fill(dtype: DType, dims: &[usize], fill: impl FnOnce(&mut [u8])) -> Result<Tensor, TensorError> {
        let mut t = Self::zeros(dtype, dims)?;
        let Storage::Bytes(b) = &mut t.storage else { return Err(TensorError::NotDense(dtype)) };
        let bytes = b.make_mut();
        fill(bytes);
        if dtype == DType::Bool {
            bytes.iter_mut().for_each(|b| *b = (*b != 0) as u8);
        }
        Ok(t)
    }

    /// A tensor over foreign memory (a NumPy array's) without copying it: `buffer` from
    /// [`Buffer::from_foreign`] must hold exactly the elements of `dims`, aligned for `dtype`.
    /// Kernels read it in place; one that would update it takes a copy, and
    /// [`Tensor::into_owned`] copies it before it is kept beyond a step.
    pub fn from_foreign(dtype: DType, dims: &[usize], buffer: Buffer) -> Result<Tensor, TensorError> {
        let size = dtype.size().ok_or(TensorError::NotDense(dtype))?;
        let n = count(dims)?;
        if n.checked_mul(size) != Some(buffer.len()) {
            return Err(TensorError::ByteLength { dtype, dims: dims.to_vec(), got: buffer.len() });
        }
        let align = match dtype {
            DType::Complex64 => 4,
            DType::Complex128 => 8,
            _ => size,
        };
        if !(buffer.as_ptr() as usize).is_multiple_of(align) {
            return Err(TensorError::Misaligned { dtype, address: buffer.as_ptr() as usize, align });
        }
        Ok(Tensor { dtype, dims: dims.into(), storage: Storage::Bytes(buffer) })
    }

    /// True when the elements live in foreign memory ([`Tensor::from_foreign`]).
    pub fn is_foreign(&self) -> bool {
        matches!(&self.storage, Storage::Bytes(b) if b.is_foreign())
    }

    /// This tensor, with foreign elements copied into memory of its own: for values kept
    /// after a step (a variable's), which must not change when their owner writes them later.
    pub fn into_owned(self) -> Tensor {
        match self.storage {
            Storage::Bytes(b) if b.is_foreign() => {
                Tensor { dtype: self.dtype, dims: self.dims, storage: Storage::Bytes(b.into_owned()) }
            }
            _ => self,
        }
    }

    /// A scalar.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        Self::from_slice(&[], &[value]).expect("a scalar has one element")
    }

    /// A tensor from raw little-endian element bytes (as in `tensor_content` or .npy data).
    /// Bool bytes other than 0/1 are normalised to 1.
    pub fn from_bytes(dtype: DType, dims: &[usize], bytes: &[u8]) -> Result<Tensor, TensorError> {
        let size = dtype.size().ok_or(TensorError::NotDense(dtype))?;
        let n = count(dims)?;
        if n.checked_mul(size) != Some(bytes.len()) {
            return Err(TensorError::ByteLength { dtype, dims: dims.to_vec(), got: bytes.len() });
        }
        let mut buf = Buffer::from_bytes(bytes);
        if dtype == DType::Bool {
            for b in buf.make_mut() {
                *b = (*b != 0) as u8;
            }
        }
        Ok(Tensor { dtype, dims: dims.into(), storage: Storage::Bytes(buf) })
    }

    /// A dense tensor of `T` whose elements `fill` writes, with no zero fill first (for
    /// kernels that write every output element anyway); the size is checked against the
    /// memory limit before anything is allocated.
    ///
    /// # Safety
    /// Every element must be initialized before the tensor is read, cloned or shared: by
    /// `fill`, or later through a pointer `fill` kept (writes from other threads must then
    /// happen-before the first read). A tensor some of whose elements were never written may
    /// only be dropped.
    pub unsafe fn from_uninit<T: Element>(
        dims: &[usize],
        fill: impl FnOnce(&mut [std::mem::MaybeUninit<T>]),
    ) -> Result<Tensor, TensorError> {
        let n = count(dims)?;
        let bytes = n
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b <= isize::MAX as usize / 2)
            .ok_or_else(|| TensorError::TooLarge(format!("{} tensor of shape {dims:?}", T::DTYPE)))?;
        // SAFETY: the block is 64-byte aligned (enough for any element) and `bytes` long, so
        // it holds exactly `n` elements; the caller's `fill` initializes all of them.
        let buf = unsafe {
            Buffer::try_alloc_with(bytes, |p| {
                fill(std::slice::from_raw_parts_mut(p as *mut std::mem::MaybeUninit<T>, n))
            })
        }?;
        Ok(Tensor { dtype: T::DTYPE, dims: dims.into(), storage: Storage::Bytes(buf) })
    }

    /// [`Tensor::from_uninit`] by dtype: a dense tensor of `dtype` whose bytes `fill` (or a
    /// writer it hands the pointer to) writes, with no zero fill first.
    ///
    /// # Safety
    /// As [`Tensor::from_uninit`], for every byte; bool bytes must be 0 or 1.
    pub unsafe fn from_uninit_bytes(
        dtype: DType,
        dims: &[usize],
        fill: impl FnOnce(&mut [std::mem::MaybeUninit<u8>]),
    ) -> Result<Tensor, TensorError> {
        let size = dtype.size().ok_or(TensorError::NotDense(dtype))?;
        let bytes = count(dims)?
            .checked_mul(size)
            .filter(|&b| b <= isize::MAX as usize / 2)
            .ok_or_else(|| TensorError::TooLarge(format!("{dtype} tensor of shape {dims:?}")))?;
        // SAFETY: the block is `bytes` long; the caller initializes every byte.
        let buf = unsafe {
            Buffer::try_alloc_with(bytes, |p| {
                fill(std::slice::from_raw_parts_mut(p as *mut std::mem::MaybeUninit<u8>, bytes))
            })
        }?;
        Ok(Tensor { dtype, dims: dims.into(), storage: Storage::Bytes(buf) })
    }

    /// A dense tensor whose bytes are `parts` one after another (as when stacking equal
    /// tensors): written once, without a zero fill; the total must be the shape's byte size
    /// and fit the memory limit. Bool bytes other than 0/1 are normalised to 1.
    pub fn from_parts(dtype: DType, dims: &[usize], parts: &[&[u8]]) -> Result<Tensor, TensorError> {
        let size = dtype.size().ok_or(TensorError::NotDense(dtype))?;
        let n = count(dims)?;
        let got = parts.iter().map(|p| p.len()).fold(0usize, usize::saturating_add);
        if n.checked_mul(size) != Some(got) {
            return Err(TensorError::ByteLength { dtype, dims: dims.to_vec(), got });
        }
        let mut buf = Buffer::try_concat(parts)?;
        if dtype == DType::Bool {
            for b in buf.make_mut() {
                *b = (*b != 0) as u8;
            }
        }
        Ok(Tensor { dtype, dims: dims.into(), storage: Storage::Bytes(buf) })
    }

    /// A dense tensor of `dtype` and `dims` whose bytes are read from `file` at `offset`
    /// (straight into the tensor's buffer). Bool bytes other than 0/1 are normalised to 1.
    pub fn read_at(file: &std::fs::File, offset: u64, dtype: DType, dims: &[usize]) -> Result<Tensor, TensorError> {
        let size = dtype.size().ok_or(TensorError::NotDense(dtype))?;
        let bytes = count(dims)?
            .checked_mul(size)
            .filter(|&b| b <= isize::MAX as usize / 2)
            .ok_or_else(|| TensorError::TooLarge(format!("{dtype} tensor of shape {dims:?}")))?;
        let mut buf = Buffer::read_at(file, offset, bytes)
            .map_err(|source| TensorError::Io { path: format!("byte {offset} of a file"), source })?;
        if dtype == DType::Bool {
            for b in buf.make_mut() {
                *b = (*b != 0) as u8;
            }
        }
        Ok(Tensor { dtype, dims: dims.into(), storage: Storage::Bytes(buf) })
    }

    /// A string tensor.
    pub fn from_strings(dims: &[usize], strings: Vec<Vec<u8>>) -> Result<Tensor, TensorError> {
        let n = count(dims)?;
        if n != strings.len() {
            return Err(TensorError::ShapeMismatch { expected: n, got: strings.len(), dims: dims.to_vec() });
        }
        Ok(Tensor { dtype: DType::String, dims: dims.into(), storage: Storage::Strings(Arc::new(strings)) })
    }

    /// A scalar `variant` tensor holding an `Optional`: `Some(components)` or none
    /// (TensorFlow's `OptionalFromValue` / `OptionalNone`).
    pub fn optional(value: Option<Vec<Tensor>>) -> Tensor {
        Tensor { dtype: DType::Variant, dims: Dims::new(), storage: Storage::Optionals(Arc::new(vec![value])) }
    }

    /// The `Optional` held by a scalar `variant` tensor.
    pub fn as_optional(&self) -> Result<&Option<Vec<Tensor>>, TensorError> {
        match &self.storage {
            Storage::Optionals(v) if v.len() == 1 => Ok(&v[0]),
            _ => Err(TensorError::WrongDType { expected: DType::Variant, got: self.dtype }),
        }
    }

    /// A scalar `variant` tensor holding a TensorList.
    pub fn list(list: TensorList) -> Tensor {
        Tensor { dtype: DType::Variant, dims: Dims::new(), storage: Storage::List(Arc::new(list)) }
    }

    /// The TensorList held by a scalar `variant` tensor.
    pub fn as_list(&self) -> Result<&TensorList, TensorError> {
        match &self.storage {
            Storage::List(l) => Ok(l),
            _ => Err(TensorError::WrongDType { expected: DType::Variant, got: self.dtype }),
        }
    }

    /// The TensorList held by a scalar `variant` tensor, taken without a copy when no other
    /// tensor shares it (a loop's last reader updates its list in place).
    pub fn into_list(self) -> Result<TensorList, TensorError> {
        match self.storage {
            Storage::List(l) => Ok(Arc::try_unwrap(l).unwrap_or_else(|l| (*l).clone())),
            _ => Err(TensorError::WrongDType { expected: DType::Variant, got: self.dtype }),
        }
    }

    /// A scalar `resource` tensor: a handle naming a resource (a variable, a random
    /// generator's state) in a session's resource manager.
    pub fn resource_handle(key: &str) -> Tensor {
        Tensor {
            dtype: DType::Resource,
            dims: Dims::new(),
            storage: Storage::Strings(Arc::new(vec![key.as_bytes().to_vec()])),
        }
    }

    /// The key of a scalar `resource` tensor made by [`Tensor::resource_handle`].
    pub fn resource_key(&self) -> Result<&str, TensorError> {
        match (&self.storage, self.dtype) {
            (Storage::Strings(s), DType::Resource) if s.len() == 1 => {
                std::str::from_utf8(&s[0]).map_err(|_| TensorError::NotDense(DType::Resource))
            }
            _ => Err(TensorError::WrongDType { expected: DType::Resource, got: self.dtype }),
        }
    }

    /// The element type.
    #[inline]
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The dimensions.
    #[inline]
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// The rank (number of dimensions).
    #[inline]
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// The number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    /// True when the tensor has no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The same buffer viewed with new dimensions holding the same number of elements.
    pub fn reshaped(&self, dims: &[usize]) -> Result<Tensor, TensorError> {
        let n = count(dims)?;
        if n != self.len() {
            return Err(TensorError::ShapeMismatch { expected: self.len(), got: n, dims: dims.to_vec() });
        }
        Ok(Tensor { dtype: self.dtype, dims: dims.into(), storage: self.storage.clone() })
    }

    /// The raw little-endian bytes of a fixed-size dtype.
    #[inline]
    pub fn as_bytes(&self) -> Result<&[u8], TensorError> {
        match &self.storage {
            Storage::Bytes(b) => Ok(b.as_slice()),
            Storage::Strings(_) | Storage::Optionals(_) | Storage::List(_) => Err(TensorError::NotDense(self.dtype)),
        }
    }

    /// The raw bytes of a fixed-size dtype, mutably (copied first if another tensor shares
    /// the buffer): for transports that fill a tensor with another's bytes (collectives).
    /// Writers must keep each element a valid value of the dtype (`Bool` bytes 0 or 1).
    pub fn as_mut_bytes(&mut self) -> Result<&mut [u8], TensorError> {
        match &mut self.storage {
            Storage::Bytes(b) => Ok(b.make_mut()),
            Storage::Strings(_) | Storage::Optionals(_) | Storage::List(_) => Err(TensorError::NotDense(self.dtype)),
        }
    }

    /// The strings of a `String` tensor.
    pub fn as_strings(&self) -> Result<&[Vec<u8>], TensorError> {
        match &self.storage {
            Storage::Strings(s) => Ok(s),
            Storage::Bytes(_) | Storage::Optionals(_) | Storage::List(_) => {
                Err(TensorError::WrongDType { expected: DType::String, got: self.dtype })
            }
        }
    }

    /// The elements as a typed slice; the dtype must be `T::DTYPE`.
    pub fn as_slice<T: Element>(&self) -> Result<&[T], TensorError> {
        if self.dtype != T::DTYPE {
            return Err(TensorError::WrongDType { expected: T::DTYPE, got: self.dtype });
        }
        let bytes = self.as_bytes()?;
        // SAFETY: the buffer is 64-byte aligned, holds len() elements of T::DTYPE whose size is
        // size_of::<T>() and whose bit patterns are valid T (Element's contract).
        Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const T, self.len()) })
    }

    /// The elements, mutably. Copies the buffer first if another tensor shares it.
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T], TensorError> {
        if self.dtype != T::DTYPE {
            return Err(TensorError::WrongDType { expected: T::DTYPE, got: self.dtype });
        }
        let len = self.len();
        match &mut self.storage {
            Storage::Bytes(b) => {
                // SAFETY: as in as_slice; make_mut gave exclusive access.
                Ok(unsafe { std::slice::from_raw_parts_mut(b.make_mut().as_mut_ptr() as *mut T, len) })
            }
            Storage::Strings(_) | Storage::Optionals(_) | Storage::List(_) => Err(TensorError::NotDense(self.dtype)),
        }
    }

    /// The elements, mutably, only if no other tensor shares the buffer (no copy).
    /// Kernels use this to reuse an input's buffer for their output.
    pub fn try_mut_slice<T: Element>(&mut self) -> Option<&mut [T]> {
        if self.dtype != T::DTYPE {
            return None;
        }
        let len = self.len();
        match &mut self.storage {
            Storage::Bytes(b) => {
                // SAFETY: as in as_slice; get_mut proved exclusive access.
                Some(unsafe { std::slice::from_raw_parts_mut(b.get_mut()?.as_mut_ptr() as *mut T, len) })
            }
            Storage::Strings(_) | Storage::Optionals(_) | Storage::List(_) => None,
        }
    }

    /// The single element of a one-element tensor.
    pub fn scalar_value<T: Element>(&self) -> Result<T, TensorError> {
        let s = self.as_slice::<T>()?;
        match s {
            [v] => Ok(*v),
            _ => Err(TensorError::ShapeMismatch { expected: 1, got: s.len(), dims: self.dims.to_vec() }),
        }
    }

    /// A short human-readable rendering of the first `max` values.
    pub fn preview(&self, max: usize) -> String {
        fn join<T: fmt::Debug>(v: &[T], max: usize) -> String {
            let mut s: Vec<String> = v.iter().take(max).map(|x| format!("{x:?}")).collect();
            if v.len() > max {
                s.push("...".into());
            }
            s.join(", ")
        }
        let body = match self.dtype {
            DType::Float => join(self.as_slice::<f32>().unwrap_or(&[]), max),
            DType::Double => join(self.as_slice::<f64>().unwrap_or(&[]), max),
            DType::Int32 => join(self.as_slice::<i32>().unwrap_or(&[]), max),
            DType::Int64 => join(self.as_slice::<i64>().unwrap_or(&[]), max),
            DType::Bool => join(self.as_slice::<bool>().unwrap_or(&[]), max),
            DType::UInt8 => join(self.as_slice::<u8>().unwrap_or(&[]), max),
            DType::Int8 => join(self.as_slice::<i8>().unwrap_or(&[]), max),
            DType::Int16 => join(self.as_slice::<i16>().unwrap_or(&[]), max),
            DType::UInt16 => join(self.as_slice::<u16>().unwrap_or(&[]), max),
            DType::UInt32 => join(self.as_slice::<u32>().unwrap_or(&[]), max),
            DType::UInt64 => join(self.as_slice::<u64>().unwrap_or(&[]), max),
            DType::Half => join(self.as_slice::<half::f16>().unwrap_or(&[]), max),
            DType::BFloat16 => join(self.as_slice::<half::bf16>().unwrap_or(&[]), max),
            DType::String => {
                let v: Vec<String> =
                    self.as_strings().unwrap_or(&[]).iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect();
                join(&v, max)
            }
            DType::Variant => match (self.as_optional(), self.as_list()) {
                (Ok(Some(v)), _) => format!("Optional({} tensors)", v.len()),
                (Ok(None), _) => "Optional(none)".into(),
                (_, Ok(l)) => format!("TensorList({} {} elements)", l.elements.len(), l.element_dtype),
                _ => "variant".into(),
            },
            _ => format!("<{} bytes>", self.as_bytes().map(|b| b.len()).unwrap_or(0)),
        };
        format!("[{body}]")
    }
}

impl PartialEq for Tensor {
    /// Bitwise equality of dtype, shape and contents.
    fn eq(&self, other: &Tensor) -> bool {
        self.dtype == other.dtype
            && self.dims == other.dims
            && match (&self.storage, &other.storage) {
                (Storage::Bytes(a), Storage::Bytes(b)) => a.as_slice() == b.as_slice(),
                (Storage::Strings(a), Storage::Strings(b)) => a == b,
                (Storage::Optionals(a), Storage::Optionals(b)) => a == b,
                (Storage::List(a), Storage::List(b)) => a == b,
                _ => false,
            }
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor<{}{:?}>{}", self.dtype, self.dims.as_slice(), self.preview(8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn construct_and_view() {
        let t = Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(t.as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        assert!(t.as_slice::<i32>().is_err());
        assert!(Tensor::from_vec(&[3], vec![1.0f32]).is_err());
        let r = t.reshaped(&[4]).unwrap();
        assert_eq!(r.dims(), &[4]);
        assert!(t.reshaped(&[3]).is_err());
    }

    #[test]
    fn from_parts_concatenates_and_checks_the_length() {
        let (a, b) = ([1u8, 2], [3u8, 4, 5, 6]);
        let t = Tensor::from_parts(DType::UInt8, &[3, 2], &[&a, &b]).unwrap();
        assert_eq!(t.as_slice::<u8>().unwrap(), &[1, 2, 3, 4, 5, 6]);
        let e = Tensor::from_parts(DType::UInt8, &[4, 2], &[&a, &b]).unwrap_err();
        assert!(matches!(e, TensorError::ByteLength { got: 6, .. }), "{e}");
        let t = Tensor::from_parts(DType::Bool, &[2], &[&[0u8, 7]]).unwrap();
        assert_eq!(t.as_bytes().unwrap(), &[0, 1]);
        assert!(Tensor::from_parts(DType::String, &[1], &[&a]).is_err());
        assert_eq!(Tensor::from_parts(DType::Float, &[0, 3], &[]).unwrap().dims(), &[0, 3]);
    }

    #[test]
    fn copy_on_write() {
        let a = Tensor::from_vec(&[2], vec![1i32, 2]).unwrap();
        let mut b = a.clone();
        assert!(b.try_mut_slice::<i32>().is_none());
        b.as_mut_slice::<i32>().unwrap()[0] = 9;
        assert_eq!(a.as_slice::<i32>().unwrap(), &[1, 2]);
        assert_eq!(b.as_slice::<i32>().unwrap(), &[9, 2]);
        assert!(b.try_mut_slice::<i32>().is_some());
    }

    #[test]
    fn bools_are_normalised_and_sizes_checked() {
        let t = Tensor::from_bytes(DType::Bool, &[3], &[0, 2, 1]).unwrap();
        assert_eq!(t.as_slice::<bool>().unwrap(), &[false, true, true]);
        assert!(Tensor::from_bytes(DType::Float, &[3], &[0; 11]).is_err());
        assert!(Tensor::zeros(DType::Float, &[usize::MAX, 2]).is_err());
    }
}
