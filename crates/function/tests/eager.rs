//! Eager calls give what the same ops give in a session graph, broadcast as TensorFlow does,
//! and refuse bad calls naming the op, the inputs' dtypes and shapes, and the reason.
use ferroflow_function::eager::{self, Eager};
use ferroflow_function::{FunctionError, OpError};
use ferroflow_ops::{OpTarget, Ops, RawOps, Scope};
use ferroflow_proto::attr;
use ferroflow_runtime::{Session, SessionOptions};
use ferroflow_tensor::{DType, Tensor};

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8) % 1000) as f32 / 250.0 - 2.0)
        .collect()
}

#[test]
fn a_dense_layer_eagerly_equals_the_graph_bit_for_bit() {
    let x = Tensor::from_vec(&[4, 3], values(12, 1)).unwrap();
    let w = Tensor::from_vec(&[3, 5], values(15, 2)).unwrap();
    let b = Tensor::from_vec(&[5], values(5, 3)).unwrap();
    let y = Eager.add_v2(Eager.mat_mul(&x, &w).unwrap(), &b).unwrap();
    let eager = Eager.reduce("Sum", Eager.relu(y).unwrap(), &[1], false).unwrap();

    let s = Scope::new();
    let (xo, wo, bo) = (s.constant(&x).unwrap(), s.constant(&w).unwrap(), s.constant(&b).unwrap());
    let y = s.matmul(xo, wo, false, false).unwrap();
    let y = s.relu(s.add_v2(y, bo).unwrap()).unwrap();
    let y = s.with_name("out").reduce("Sum", y, &[1], false).unwrap();
    let mut options = SessionOptions::default();
    options.optimizer.enabled = false;
    let sess = Session::new(s.graph(), options).unwrap();
    let name = format!("{}:0", sess.graph().node(y.node).name);
    let graph = sess.run(&[], &[&name], &[]).unwrap().remove(0);
    assert_eq!(eager.dims(), &[4]);
    assert_eq!(eager.as_slice::<f32>().unwrap(), graph.as_slice::<f32>().unwrap());
}

#[test]
fn broadcasting_lists_casts_and_integer_ops() {
    let a = Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let row = Tensor::from_vec(&[3], vec![10.0f32, 20.0, 30.0]).unwrap();
    let sum = Eager.add_v2(&a, &row).unwrap();
    assert_eq!(sum.as_slice::<f32>().unwrap(), &[11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
    let both = eager::op("ConcatV2").inputs(&[a.clone(), sum]).input(&Tensor::scalar(0i32)).run1().unwrap();
    assert_eq!(both.dims(), &[4, 3]);
    let n = Tensor::scalar(27i32);
    assert_eq!(Eager.floor_div(&n, 2i32).unwrap().scalar_value::<i32>().unwrap(), 13);
    assert_eq!(Eager.cast(&n, DType::Float).unwrap().scalar_value::<f32>().unwrap(), 27.0);
    let r = Eager.reshape(&a, &[3i64, -1]).unwrap();
    assert_eq!(r.dims(), &[3, 2]);
    let m = eager::op("MatMul").input(&a).input(&a).attr("transpose_b", attr::boolean(true)).run1().unwrap();
    assert_eq!(m.dims(), &[2, 2]);
    assert_eq!(m.as_slice::<f32>().unwrap()[0], 14.0);
    let cube = Eager.pow(Tensor::scalar(2i32), 3i32).unwrap();
    assert_eq!((cube.dtype(), cube.scalar_value::<i32>().unwrap()), (DType::Int32, 8));
}

#[test]
fn bad_calls_name_the_op_the_inputs_and_the_reason() {
    let a = Tensor::from_vec(&[2, 3], vec![0.0f32; 6]).unwrap();
    let b = Tensor::from_vec(&[4, 5], vec![0.0f32; 20]).unwrap();
    let e = Eager.mat_mul(&a, &b).unwrap_err();
    assert!(matches!(e, FunctionError::Op { source: OpError::Shape(_), .. }), "{e:?}");
    let e = e.to_string();
    assert!(e.starts_with("MatMul(float[2, 3], float[4, 5]): "), "{e}");
    let e = Eager.add_v2(&a, Tensor::from_vec(&[2], vec![1i32, 2]).unwrap()).unwrap_err();
    assert!(matches!(e, FunctionError::Op { source: OpError::Signature(_), .. }), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("AddV2(float[2, 3], int32[2])") && e.contains("Cast"), "{e}");
    let e = Eager.add_v2(&a, Tensor::from_vec(&[4], vec![0.0f32; 4]).unwrap()).unwrap_err().to_string();
    assert!(e.contains("AddV2(float[2, 3], float[4])"), "{e}");
    let e = eager::op("NoSuchOp").input(&a).run().unwrap_err();
    assert!(matches!(e, FunctionError::Op { source: OpError::UnknownOp, .. }), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("NoSuchOp") && e.contains("registry"), "{e}");
    let e = eager::op("ConcatV2").input(&a).input(&Tensor::scalar(0i32)).run().unwrap_err().to_string();
    assert!(e.contains("values") && e.contains(".inputs"), "{e}");
    let e = eager::op("Relu").run().unwrap_err().to_string();
    assert!(e.contains("takes 1 arguments (features), got 0"), "{e}");
    let e = Eager.reshape(&a, &[5i64, -1]).unwrap_err().to_string();
    assert!(e.starts_with("Reshape(float[2, 3], int64[2])"), "{e}");
}
