//! Graph functions: one concrete function per signature (`traced_functions`' `cube`), the same results
//! as the eager body, input signatures with unknown dimensions, keyed non-tensor arguments,
//! and retracing explained.
use ferroflow_function::{function, Traced};
use ferroflow_ops::{Ops, RawOps};
use ferroflow_tensor::{DType, Tensor};

#[test]
fn cube_traces_once_per_dtype_and_the_body_stays_callable_eagerly() {
    let cube = function("cube", |a| Ok(vec![Traced.mul(Traced.mul(&a[0], &a[0])?, &a[0])?]));
    let i = cube.call(&[Tensor::scalar(2i32)]).unwrap().remove(0);
    assert_eq!((i.dtype(), i.scalar_value::<i32>().unwrap()), (DType::Int32, 8));
    let f = cube.call(&[Tensor::scalar(2.0f32)]).unwrap().remove(0);
    assert_eq!((f.dtype(), f.scalar_value::<f32>().unwrap()), (DType::Float, 8.0));
    cube.call(&[Tensor::scalar(5i32)]).unwrap();
    assert_eq!((cube.concrete_functions(), cube.trace_count()), (2, 2));
    assert_eq!(cube.call_eagerly(&[Tensor::scalar(3i32)]).unwrap()[0].scalar_value::<i32>().unwrap(), 27);
    assert_eq!(cube.trace_count(), 2, "an eager call does not trace");
    let c = cube.concrete_function_keyed(&(), &[Tensor::scalar(2i32)]).unwrap();
    let ops: Vec<&str> = c.graph().nodes().iter().map(|n| n.op.as_str()).collect();
    assert_eq!(ops.iter().filter(|o| **o == "Mul").count(), 2, "{ops:?}");
}

#[test]
fn graph_results_equal_eager_results() {
    let dense = function("dense", |a| {
        let h = Traced.unary("Relu", Traced.mat_mul(&a[0], &a[1])?)?;
        Ok(vec![Traced.reduce("Sum", &h, &[1], false)?, h])
    });
    let x = Tensor::from_vec(&[3, 4], (0..12).map(|i| i as f32 / 7.0 - 0.5).collect()).unwrap();
    let w = Tensor::from_vec(&[4, 2], (0..8).map(|i| 0.25 - i as f32 / 9.0).collect()).unwrap();
    let graph = dense.call(&[x.clone(), w.clone()]).unwrap();
    let eager = dense.call_eagerly(&[x, w]).unwrap();
    for (g, e) in graph.iter().zip(&eager) {
        assert_eq!(g.dims(), e.dims());
        assert_eq!(g.as_slice::<f32>().unwrap(), e.as_slice::<f32>().unwrap());
    }
}

#[test]
fn retracing_is_counted_explained_and_avoided_with_an_input_signature() {
    let square = function("square", |a| Ok(vec![Traced.mul(&a[0], &a[0])?]));
    square.call(&[Tensor::from_vec(&[2], vec![1.0f32, 2.0]).unwrap()]).unwrap();
    assert_eq!(square.explain_last_trace(), None);
    square.call(&[Tensor::from_vec(&[3], vec![1.0f32, 2.0, 3.0]).unwrap()]).unwrap();
    assert_eq!(square.trace_count(), 2);
    let why = square.explain_last_trace().unwrap();
    assert!(why.contains("arg 0: float32[2] → float32[3]"), "{why}");
    square.call_keyed(&"mode b", &[Tensor::from_vec(&[3], vec![1.0f32, 2.0, 3.0]).unwrap()]).unwrap();
    assert!(square.explain_last_trace().unwrap().contains("key"));

    let any_length =
        function("any_length", |a| Ok(vec![Traced.mul(&a[0], 2.0f32)?])).input_signature(&[(DType::Float, &[None])]);
    for n in 1..5 {
        let out = any_length.call(&[Tensor::from_vec(&[n], vec![1.5f32; n]).unwrap()]).unwrap().remove(0);
        assert_eq!(out.as_slice::<f32>().unwrap(), vec![3.0f32; n].as_slice());
    }
    assert_eq!(any_length.trace_count(), 1);
    let e = any_length.call(&[Tensor::from_vec(&[2], vec![1i32, 2]).unwrap()]).unwrap_err().to_string();
    assert!(e.contains("int32[2]") && e.contains("float32[?]") && e.contains("input signature"), "{e}");
}
