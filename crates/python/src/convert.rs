//! NumPy arrays to tensors and back, dtype names, and attr values from Python objects.
use ferroflow::proto::{attr, AttrValue};
use ferroflow::tensor::{DType, Element, Shape, Tensor};
use numpy::ndarray::{ArrayViewD, IxDyn};
use numpy::{
    Element as NpElement, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyBool, PyBytes, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::{invalid, to_py, UnimplementedError};
use crate::session::Buffer;

/// The dtype named `name` (TensorFlow's and NumPy's names: `float32`, `int64`, `bool`, `string`, …).
pub(crate) fn dtype_of(name: &str) -> PyResult<DType> {
    let d = match name {
        "float32" | "float" => DType::Float,
        "float64" | "double" => DType::Double,
        "float16" | "half" => DType::Half,
        "bfloat16" => DType::BFloat16,
        "int8" => DType::Int8,
        "int16" => DType::Int16,
        "int32" => DType::Int32,
        "int64" => DType::Int64,
        "uint8" => DType::UInt8,
        "uint16" => DType::UInt16,
        "uint32" => DType::UInt32,
        "uint64" => DType::UInt64,
        "bool" => DType::Bool,
        "string" | "bytes" | "object" => DType::String,
        "complex64" => DType::Complex64,
        "complex128" => DType::Complex128,
        "resource" => DType::Resource,
        "variant" => DType::Variant,
        _ => return Err(invalid(format!("unknown dtype '{name}'"))),
    };
    Ok(d)
}

/// The Python-side name of `d` (NumPy's where it has one).
pub(crate) fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::Float => "float32",
        DType::Double => "float64",
        DType::Half => "float16",
        DType::BFloat16 => "bfloat16",
        DType::Int8 => "int8",
        DType::Int16 => "int16",
        DType::Int32 => "int32",
        DType::Int64 => "int64",
        DType::UInt8 => "uint8",
        DType::UInt16 => "uint16",
        DType::UInt32 => "uint32",
        DType::UInt64 => "uint64",
        DType::Bool => "bool",
        DType::String => "string",
        DType::Complex64 => "complex64",
        DType::Complex128 => "complex128",
        DType::Resource => "resource",
        DType::Variant => "variant",
    }
}

fn copy_in<T: Element + NpElement>(a: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let arr: PyReadonlyArrayDyn<'_, T> = a.extract()?;
    let dims = arr.shape().to_vec();
    let t = match arr.as_slice() {
        Ok(s) => Tensor::from_slice(&dims, s),
        Err(_) => Tensor::from_vec(&dims, arr.as_array().iter().copied().collect()),
    };
    t.map_err(to_py)
}

/// A tensor holding a NumPy array's values (one copy; strides and byte order as NumPy's).
pub(crate) fn tensor_from_numpy(a: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let arr = a.cast::<PyUntypedArray>().map_err(|_| invalid("expected a NumPy array"))?;
    let kind = arr.dtype().kind();
    let size = arr.dtype().itemsize();
    match (kind, size) {
        (b'f', 4) => copy_in::<f32>(a),
        (b'f', 8) => copy_in::<f64>(a),
        (b'f', 2) => copy_in::<half::f16>(a),
        (b'i', 1) => copy_in::<i8>(a),
        (b'i', 2) => copy_in::<i16>(a),
        (b'i', 4) => copy_in::<i32>(a),
        (b'i', 8) => copy_in::<i64>(a),
        (b'u', 1) => copy_in::<u8>(a),
        (b'u', 2) => copy_in::<u16>(a),
        (b'u', 4) => copy_in::<u32>(a),
        (b'u', 8) => copy_in::<u64>(a),
        (b'b', 1) => copy_in::<bool>(a),
        (b'S' | b'O' | b'U', _) => {
            let dims = arr.shape().to_vec();
            let flat = a.call_method1("reshape", (-1,))?;
            let mut strings = Vec::with_capacity(flat.len()?);
            for item in flat.try_iter()? {
                let item = item?;
                let bytes: Vec<u8> = if let Ok(b) = item.cast::<PyBytes>() {
                    b.as_bytes().to_vec()
                } else if let Ok(s) = item.cast::<PyString>() {
                    s.to_cow()?.as_bytes().to_vec()
                } else {
                    return Err(invalid(format!(
                        "a string tensor takes bytes or str elements, got {}",
                        item.get_type().name()?
                    )));
                };
                strings.push(bytes);
            }
            Tensor::from_strings(&dims, strings).map_err(to_py)
        }
        _ => Err(UnimplementedError::new_err(format!(
            "NumPy dtype {} is not supported",
            arr.dtype().str().map(|s| s.to_string()).unwrap_or_default()
        ))),
    }
}

/// A tensor reading a NumPy array's memory in place (no copy) when its layout allows: a
/// C-contiguous, aligned, native-byte-order array of a fixed-size dtype. The tensor keeps the
/// array alive; kernels never write it (one that would update its input takes a copy) and a
/// variable assigned from it copies it. Other arrays are copied as [`tensor_from_numpy`] does.
/// For values used during one step (feeds, signature inputs), not ones kept (dataset elements).
pub(crate) fn tensor_in_place(a: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let Ok(arr) = a.cast::<PyUntypedArray>() else { return tensor_from_numpy(a) };
    let descr = arr.dtype();
    let dtype = match (descr.kind(), descr.itemsize()) {
        (b'f', 4) => DType::Float,
        (b'f', 8) => DType::Double,
        (b'f', 2) => DType::Half,
        (b'i', 1) => DType::Int8,
        (b'i', 2) => DType::Int16,
        (b'i', 4) => DType::Int32,
        (b'i', 8) => DType::Int64,
        (b'u', 1) => DType::UInt8,
        (b'u', 2) => DType::UInt16,
        (b'u', 4) => DType::UInt32,
        (b'u', 8) => DType::UInt64,
        (b'b', 1) => DType::Bool,
        _ => return tensor_from_numpy(a),
    };
    let native =
        matches!(descr.byteorder(), b'=' | b'|') || (descr.byteorder() == b'<') == cfg!(target_endian = "little");
    // SAFETY: `arr` is a live ndarray; its object struct is read, not written.
    let data = unsafe { (*arr.as_array_ptr()).fields.data } as *mut u8;
    let dims = arr.shape().to_vec();
    let len = arr.len().checked_mul(descr.itemsize());
    let (Some(ptr), Some(len), true, true) = (std::ptr::NonNull::new(data), len, arr.is_c_contiguous(), native) else {
        return tensor_from_numpy(a);
    };
    if !(ptr.as_ptr() as usize).is_multiple_of(dtype.size().unwrap_or(1).min(8)) {
        return tensor_from_numpy(a);
    }
    let owner: Py<PyAny> = a.clone().unbind();
    // SAFETY: the array's `len` data bytes are initialized and stay allocated while the array
    // object lives, which `owner` ensures; ferroflow never writes them (a foreign buffer is
    // never unique). Python code may write the array while a step reads it, as with
    // TensorFlow's fed arrays: the step then sees some mix of old and new values.
    let buffer = unsafe { ferroflow::tensor::buffer::Buffer::from_foreign(ptr, len, Box::new(owner)) };
    Tensor::from_foreign(dtype, &dims, buffer).map_err(to_py)
}

fn view_out<'py, T: Element + NpElement>(t: &Tensor, base: Bound<'py, Buffer>) -> PyResult<Bound<'py, PyAny>> {
    let data = t.as_slice::<T>().map_err(to_py)?;
    let view = ArrayViewD::from_shape(IxDyn(t.dims()), data).map_err(|e| invalid(e.to_string()))?;
    // SAFETY: `base` owns a clone of the tensor, so the buffer outlives the array; the array is
    // made read-only (the buffer may be shared with the session's other tensors).
    let a: Bound<'py, PyArrayDyn<T>> = unsafe { PyArrayDyn::borrow_from_array(&view, base.into_any()) };
    a.readwrite().make_nonwriteable();
    Ok(a.into_any())
}

/// A NumPy array over a tensor's buffer (no copy; read-only), or for strings an object array
/// of `bytes`.
pub(crate) fn tensor_to_numpy<'py>(py: Python<'py>, t: Tensor) -> PyResult<Bound<'py, PyAny>> {
    let d = t.dtype();
    if d == DType::String {
        let strings = t.as_strings().map_err(to_py)?;
        let items: Vec<Bound<'py, PyBytes>> = strings.iter().map(|s| PyBytes::new(py, s)).collect();
        let np = py.import("numpy")?;
        let list = PyList::new(py, items)?;
        let arr = np.call_method("array", (list,), Some(&[("dtype", "object")].into_py_dict(py)?))?;
        return arr.call_method1("reshape", (PyTuple::new(py, t.dims())?,));
    }
    let base = Bound::new(py, Buffer { tensor: t.clone() })?;
    match d {
        DType::Float => view_out::<f32>(&t, base),
        DType::Double => view_out::<f64>(&t, base),
        DType::Half => view_out::<half::f16>(&t, base),
        DType::Int8 => view_out::<i8>(&t, base),
        DType::Int16 => view_out::<i16>(&t, base),
        DType::Int32 => view_out::<i32>(&t, base),
        DType::Int64 => view_out::<i64>(&t, base),
        DType::UInt8 => view_out::<u8>(&t, base),
        DType::UInt16 => view_out::<u16>(&t, base),
        DType::UInt32 => view_out::<u32>(&t, base),
        DType::UInt64 => view_out::<u64>(&t, base),
        DType::Bool => view_out::<bool>(&t, base),
        other => Err(UnimplementedError::new_err(format!("a {} tensor has no NumPy form", dtype_name(other)))),
    }
}

/// A shape from Python: `None` (unknown rank) or a sequence of ints and `None`s.
pub(crate) fn shape_of(v: &Bound<'_, PyAny>) -> PyResult<Shape> {
    if v.is_none() {
        return Ok(Shape::unknown());
    }
    let mut dims = Vec::new();
    for d in v.try_iter()? {
        let d = d?;
        dims.push(if d.is_none() {
            None
        } else {
            let n: i64 = d.extract()?;
            if n < 0 {
                None
            } else {
                Some(n as usize)
            }
        });
    }
    Ok(Shape::new(dims))
}

/// An attr value of TensorFlow type `ty` (`int`, `list(type)`, `tensor`, …) from a Python value.
pub(crate) fn attr_value(ty: &str, v: &Bound<'_, PyAny>) -> PyResult<AttrValue> {
    let dtype = |x: &Bound<'_, PyAny>| -> PyResult<DType> {
        match x.extract::<String>() {
            Ok(s) => dtype_of(&s),
            Err(_) => dtype_of(&x.getattr("name")?.extract::<String>()?),
        }
    };
    Ok(match ty {
        "int" => attr::int(v.extract()?),
        "float" => attr::float(v.extract()?),
        "bool" => attr::boolean(v.extract()?),
        "string" => match v.cast::<PyBytes>() {
            Ok(b) => {
                let mut a = attr::string("");
                if let Some(ferroflow::proto::attr_value::Value::S(s)) = a.value.as_mut() {
                    *s = b.as_bytes().to_vec();
                }
                a
            }
            Err(_) => attr::string(&v.extract::<String>()?),
        },
        "type" => attr::dtype(dtype(v)?),
        "shape" => attr::shape(&shape_of(v)?),
        "func" => attr::func(&v.extract::<String>()?),
        "tensor" => {
            let t = tensor_from_numpy(v)?;
            attr::tensor(ferroflow::proto::convert::tensor_to_proto(&t))
        }
        "list(int)" => attr::ints(&v.extract::<Vec<i64>>()?),
        "list(float)" => attr::floats(&v.extract::<Vec<f32>>()?),
        "list(bool)" => attr::booleans(&v.extract::<Vec<bool>>()?),
        "list(string)" => attr::strings(&v.extract::<Vec<String>>()?),
        "list(type)" => {
            let mut ds = Vec::new();
            for x in v.try_iter()? {
                ds.push(dtype(&x?)?);
            }
            attr::dtypes(&ds)
        }
        "list(shape)" => {
            let mut ss = Vec::new();
            for x in v.try_iter()? {
                ss.push(shape_of(&x?)?);
            }
            attr::shapes(&ss)
        }
        other => {
            // An attr of a type not listed takes what Python gives by its own type.
            if v.is_instance_of::<PyBool>() {
                attr::boolean(v.extract()?)
            } else if v.is_instance_of::<PyInt>() {
                attr::int(v.extract()?)
            } else if v.is_instance_of::<PyFloat>() {
                attr::float(v.extract()?)
            } else if let Ok(s) = v.extract::<String>() {
                attr::string(&s)
            } else {
                return Err(invalid(format!("attr of type '{other}' cannot take {}", v.get_type().name()?)));
            }
        }
    })
}

/// A Python value for an attr (an op def's default), or `None` for a kind not shown.
pub(crate) fn attr_to_py<'py>(py: Python<'py>, a: &AttrValue) -> PyResult<Bound<'py, PyAny>> {
    use ferroflow::proto::attr_value::Value;
    Ok(match a.value.as_ref() {
        Some(Value::I(i)) => i.into_pyobject(py)?.into_any(),
        Some(Value::F(f)) => f.into_pyobject(py)?.into_any(),
        Some(Value::B(b)) => PyBool::new(py, *b).to_owned().into_any(),
        Some(Value::S(s)) => match std::str::from_utf8(s) {
            Ok(s) => PyString::new(py, s).into_any(),
            Err(_) => PyBytes::new(py, s).into_any(),
        },
        Some(Value::Type(t)) => match DType::from_tf(*t) {
            Ok(d) => PyString::new(py, dtype_name(d)).into_any(),
            Err(_) => py.None().into_bound(py),
        },
        Some(Value::List(l)) => {
            if !l.i.is_empty() {
                PyList::new(py, &l.i)?.into_any()
            } else if !l.f.is_empty() {
                PyList::new(py, &l.f)?.into_any()
            } else if !l.s.is_empty() {
                PyList::new(py, l.s.iter().map(|s| String::from_utf8_lossy(s).into_owned()))?.into_any()
            } else if !l.b.is_empty() {
                PyList::new(py, &l.b)?.into_any()
            } else if !l.r#type.is_empty() {
                PyList::new(py, l.r#type.iter().filter_map(|t| DType::from_tf(*t).ok()).map(dtype_name))?.into_any()
            } else {
                PyList::empty(py).into_any()
            }
        }
        _ => py.None().into_bound(py),
    })
}
