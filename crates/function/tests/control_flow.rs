//! `cond` and `while_loop`: what they refuse, what they capture (`traced_functions` are
//! tested in `crates/ferroflow/tests/traced_functions.rs`, AutoGraph's in `crates/ferroflow/tests/autograph.rs`).
use ferroflow_function::{cond, function, while_loop, Traced, Value, Variable};
use ferroflow_ops::{Ops, RawOps};
use ferroflow_runtime::SessionOptions;
use ferroflow_tensor::Tensor;

#[test]
fn branches_must_agree_and_outer_values_are_captured() {
    let f = function("bad_branches", |a| {
        cond(&Traced.greater(&a[0], 0i32)?, &a[..1], |x| Ok(vec![x[0].clone()]), |_| Ok(vec![Value::scalar(1.0f32)]))
    });
    let e = f.call(&[Tensor::scalar(1i32)]).unwrap_err().to_string();
    assert!(e.contains("int32[] after the then branch but float32[] after the else branch"), "{e}");
    // Outer values (and values of a loop around the branch) are captured as extra inputs.
    let g = function("capture", |a| {
        let (x, k) = (a[0].clone(), a[1].clone());
        let out = while_loop(
            |v| Traced.less(&v[0], &k),
            |v| {
                let step = cond(&Traced.greater(&v[0], &x)?, &[], |_| Ok(vec![k.clone()]), |_| Ok(vec![x.clone()]))?;
                Ok(vec![Traced.add_v2(&v[0], 1i32)?, Traced.add_v2(&v[1], &step[0])?])
            },
            &[Value::scalar(0i32), Value::scalar(0i32)],
        )?;
        Ok(vec![out[1].clone()])
    });
    // x = 2, k = 5: i = 0..4 adds x for i <= 2 and k after: 2 + 2 + 2 + 5 + 5.
    let out = g.call(&[Tensor::scalar(2i32), Tensor::scalar(5i32)]).unwrap();
    assert_eq!(out[0].scalar_value::<i32>().unwrap(), 16);
    let graph = g.concrete_function_keyed(&(), &[Tensor::scalar(2i32), Tensor::scalar(5i32)]).unwrap().graph_def();
    let ops: Vec<&str> = graph.node.iter().map(|n| n.op.as_str()).collect();
    assert!(ops.contains(&"StatelessWhile"), "{ops:?}");
    assert_eq!(graph.library.as_ref().unwrap().function.len(), 4, "cond, body, then, else");
}

#[test]
fn an_eager_loop_body_must_keep_its_dtypes() {
    let e = while_loop(|v| Traced.less(&v[0], 3i32), |_| Ok(vec![Value::scalar(1.0f32)]), &[Value::scalar(0i32)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("changes dtype across iterations"), "{e}");
}

#[test]
fn a_traced_loop_variable_must_keep_its_shape_and_a_loop_that_never_ends_stops() {
    let grow = function("grow", |a| {
        let out = while_loop(
            |v| Traced.less(Traced.reduce("Sum", &v[0], &[0], false)?, 10.0f32),
            |v| {
                let twice = ferroflow_function::apply_lists(
                    "ConcatV2",
                    &[vec![&v[0], &v[0]], vec![&Value::scalar(0i32)]],
                    &[true, false],
                    &[],
                )?;
                Ok(twice)
            },
            &a[..1],
        )?;
        Ok(out)
    });
    let e = grow.call(&[Tensor::from_vec(&[2], vec![1.0f32, 1.0]).unwrap()]).unwrap_err().to_string();
    assert!(
        e.contains("changes shape across iterations: float32[2] before the loop, float32[4] after an iteration"),
        "{e}"
    );

    let forever = function("forever", |a| {
        while_loop(|v| Traced.greater(&v[0], 0i32), |v| Ok(vec![Traced.add_v2(&v[0], 1i32)?]), a)
    })
    .session_options(SessionOptions::default().with_max_loop_iterations(1000));
    let e = forever.call(&[Tensor::scalar(1i32)]).unwrap_err().to_string();
    assert!(e.contains("limit set by max_loop_iterations"), "{e}");
}

#[test]
fn captured_variables_are_resources_read_and_updated_in_place() {
    let v = Variable::new("counter", Tensor::scalar(10.0f32));
    let step = function("step", |a| {
        let before = v.value()?;
        v.assign_sub_value(&a[0])?;
        let after = v.value()?;
        Ok(vec![before, after])
    });
    for (i, want) in [(0, 9.0f32), (1, 8.0)] {
        let out = step.call(&[Tensor::scalar(1.0f32)]).unwrap();
        assert_eq!(out[0].scalar_value::<f32>().unwrap(), want + 1.0, "call {i}: the read before the update");
        assert_eq!(out[1].scalar_value::<f32>().unwrap(), want, "call {i}: the read after it");
        assert_eq!(v.read().scalar_value::<f32>().unwrap(), want, "the eager side sees the update");
    }
    assert_eq!(step.trace_count(), 1);
    let cf = step.concrete_function_keyed(&(), &[Tensor::scalar(1.0f32)]).unwrap();
    let ops: Vec<&str> = cf.graph().nodes().iter().map(|n| n.op.as_str()).collect();
    assert!(ops.contains(&"AssignSubVariableOp") && ops.contains(&"ReadVariableOp"), "{ops:?}");
    // An eager assignment is seen by the next call.
    v.assign(Tensor::scalar(100.0f32)).unwrap();
    assert_eq!(step.call(&[Tensor::scalar(1.0f32)]).unwrap()[1].scalar_value::<f32>().unwrap(), 99.0);
}
