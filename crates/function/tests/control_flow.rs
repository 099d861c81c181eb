//! `cond` and `while_loop` refuse what they cannot trace (seed 004's functions, written with
//! them, are tested in `crates/ferroflow/tests/seed_004.rs`).
use ferroflow_function::{cond, function, while_loop, Value};
use ferroflow_tensor::Tensor;

#[test]
fn branches_must_agree_and_outer_values_come_through_inputs() {
    let f = function("bad_branches", |a| {
        cond(
            &a[0].greater(&Value::scalar(0i32))?,
            &a[..1],
            |x| Ok(vec![x[0].clone()]),
            |_| Ok(vec![Value::scalar(1.0f32)]),
        )
    });
    let e = f.call(&[Tensor::scalar(1i32)]).unwrap_err().to_string();
    assert!(e.contains("different dtypes"), "{e}");
    let g = function("capture", |a| {
        let outer = a[0].clone();
        cond(&a[0].greater(&Value::scalar(0i32))?, &[], |_| Ok(vec![outer.clone()]), |_| Ok(vec![outer.clone()]))
    });
    let e = g.call(&[Tensor::scalar(1i32)]).unwrap_err().to_string();
    assert!(e.contains("through its inputs"), "{e}");
}

#[test]
fn an_eager_loop_body_must_keep_its_dtypes() {
    let e =
        while_loop(|v| v[0].less(&Value::scalar(3i32)), |_| Ok(vec![Value::scalar(1.0f32)]), &[Value::scalar(0i32)])
            .unwrap_err()
            .to_string();
    assert!(e.contains("the body returns"), "{e}");
}
