//! `traced_functions` against TensorFlow: cube, collatz and sum_squares_until as traced functions give
//! `tf.function`'s values (fixtures/function/seed_004.npz, scripts/make_function_fixtures.py),
//! the same as their eager runs; the loops are `StatelessWhile` nodes with library functions
//! (an `if` inside the collatz body is a `StatelessIf`), not unrolled; the exported GraphDef
//! runs in a fresh Session to the same values.
use std::collections::HashMap;
use std::path::Path;

use ferroflow::prelude::*;
use ferroflow::tensor::npy;
use ferroflow::workflows::traced_functions;

fn fixture() -> HashMap<String, Tensor> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/function/seed_004.npz");
    npy::read_npz(&path).unwrap().into_iter().collect()
}

#[test]
fn traced_functions_equal_tensorflow_s_and_keep_their_loops() {
    let want = fixture();
    let (cube, collatz, sum_squares_until) = traced_functions::functions();
    let i = cube.call(&[Tensor::scalar(2i32)]).unwrap().remove(0);
    assert_eq!((i.dtype(), i.scalar_value::<i32>().unwrap()), (want["cube_int"].dtype(), 8));
    assert_eq!(i.as_slice::<i32>().unwrap(), want["cube_int"].as_slice::<i32>().unwrap());
    let f = cube.call(&[Tensor::scalar(2.0f32)]).unwrap().remove(0);
    assert_eq!(f.dtype(), want["cube_float"].dtype());
    assert_eq!(f.as_slice::<f32>().unwrap(), want["cube_float"].as_slice::<f32>().unwrap());
    assert_eq!(cube.concrete_functions() as i64, want["concrete_functions"].scalar_value::<i64>().unwrap());

    for n in [27, 97] {
        let args = [Tensor::scalar(n)];
        let expected = want[&format!("collatz_{n}")].scalar_value::<i32>().unwrap();
        assert_eq!(collatz.call(&args).unwrap()[0].scalar_value::<i32>().unwrap(), expected, "collatz({n})");
        assert_eq!(collatz.call_eagerly(&args).unwrap()[0].scalar_value::<i32>().unwrap(), expected);
    }
    assert_eq!(collatz.trace_count(), 1);
    let x = Tensor::from_vec(&[5], vec![0.5f32, 1.5, 2.0, 3.0, 4.0]).unwrap();
    let args = [x, Tensor::scalar(6.0f32)];
    for out in [sum_squares_until.call(&args).unwrap(), sum_squares_until.call_eagerly(&args).unwrap()] {
        assert_eq!(out[0].as_slice::<f32>().unwrap(), want["sum_total"].as_slice::<f32>().unwrap());
        assert_eq!(out[1].as_slice::<i32>().unwrap(), want["sum_count"].as_slice::<i32>().unwrap());
    }

    // Loops, not unrolled; the exported GraphDef (with its library) runs in a fresh session.
    let c = collatz.concrete_function_keyed(&(), &[Tensor::scalar(27i32)]).unwrap();
    let def = c.graph_def();
    assert!(def.node.iter().any(|n| n.op == "StatelessWhile"));
    let body_ops: Vec<&str> =
        def.library.as_ref().unwrap().function.iter().flat_map(|f| &f.node_def).map(|n| n.op.as_str()).collect();
    assert!(body_ops.contains(&"StatelessIf"), "{body_ops:?}");
    let g = ferroflow::ops::import_graph_def(&def).unwrap();
    let sess = Session::new(g, SessionOptions::default()).unwrap();
    let (inputs, outputs) = c.names();
    let got = sess.run(&[(inputs[0].as_str(), Tensor::scalar(97i32))], &[outputs[0].as_str()], &[]).unwrap();
    assert_eq!(got[0].scalar_value::<i32>().unwrap(), want["collatz_97"].scalar_value::<i32>().unwrap());
}
