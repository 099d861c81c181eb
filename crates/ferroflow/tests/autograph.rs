//! `#[ferroflow::function]` (AutoGraph for Rust): the same Rust function runs eagerly as
//! written and traces into `StatelessWhile` / `StatelessIf` graphs over tensor conditions;
//! `break`, `continue`, early `return`, `if` as an expression, `else if`, `range(n)` on a
//! tensor, Rust conditions left as Rust, and the errors for what cannot be traced.
use ferroflow::function::{function, EagerError, Function, Value};
use ferroflow::prelude::*;

/// The first element of `x` above `t`, or -1.
#[ferroflow::function]
fn first_above(x: Value, t: Value) -> Result<Value, EagerError> {
    for v in x {
        if v > t {
            return Ok(v);
        }
    }
    Ok(Value::scalar(-1.0f32))
}

/// The sum of the odd numbers below `n`.
#[ferroflow::function]
fn sum_odd_below(n: Value) -> Result<Value, EagerError> {
    let mut s = Value::scalar(0i32);
    for i in range(n) {
        if i % 2 == 0 {
            continue;
        }
        s += i;
    }
    Ok(s)
}

/// `|x|` clipped at 10, with `if` as an expression and `else if`.
#[ferroflow::function]
fn clipped_abs(x: Value) -> Result<Value, EagerError> {
    let y = if x < 0.0 {
        -x
    } else if x > 10.0 {
        Value::scalar(10.0f32)
    } else {
        x
    };
    Ok(y)
}

/// `x` clamped below at -10: a negative literal compared with a value.
#[ferroflow::function]
fn clamp_below(x: Value) -> Result<Value, EagerError> {
    let y = if x < -10.0 { Value::scalar(-10.0f32) } else { x };
    Ok(y)
}

/// Pairs `(i, j)` with `i < j < n` and `i + j` below `limit`, with a `break` in an inner loop.
#[ferroflow::function]
fn pairs_below(n: Value, limit: Value) -> Result<Value, EagerError> {
    let mut count = Value::scalar(0i32);
    let mut i = Value::scalar(0i32);
    while i < n {
        let mut j = i + 1;
        while j < n {
            if i + j >= limit {
                break;
            }
            count += 1;
            j += 1;
        }
        i += 1;
    }
    Ok(count)
}

/// `x ** k` for a Rust `k`: the loop is Rust, unrolled when traced (as AutoGraph leaves a
/// Python `range` alone).
#[ferroflow::function]
fn power(x: Value, k: u32) -> Result<Value, EagerError> {
    let mut y = x.clone();
    for _ in 1..k {
        y = y * x;
    }
    Ok(y)
}

fn ops_of(f: &Function, args: &[Tensor]) -> (Vec<String>, usize) {
    let c = f.concrete_function_keyed(&(), args).unwrap();
    let def = c.graph_def();
    let library = def.library.as_ref().map_or(0, |l| l.function.len());
    (def.node.iter().map(|n| n.op.clone()).collect(), library)
}

fn vector(v: &[f32]) -> Tensor {
    Tensor::from_vec(&[v.len()], v.to_vec()).unwrap()
}

#[test]
fn early_return_in_a_tensor_loop() {
    let f = first_above_function();
    for (x, t, want) in [(vec![1.0f32, 5.0, 7.0], 4.0f32, 5.0f32), (vec![1.0, 2.0], 4.0, -1.0), (vec![9.0], 0.0, 9.0)] {
        let args = [vector(&x), Tensor::scalar(t)];
        assert_eq!(f.call(&args).unwrap()[0].scalar_value::<f32>().unwrap(), want, "traced {x:?} {t}");
        assert_eq!(f.call_eagerly(&args).unwrap()[0].scalar_value::<f32>().unwrap(), want, "eager {x:?} {t}");
        // The Rust function itself runs eagerly on concrete values.
        let direct = first_above(Value::Eager(vector(&x)), Value::scalar(t)).unwrap();
        assert_eq!(direct.tensor().unwrap().scalar_value::<f32>().unwrap(), want);
    }
    // Shapes [3], [2], [1]: three traces of one function, each a While (not unrolled).
    assert_eq!(f.trace_count(), 3);
    let why = f.explain_last_trace().unwrap();
    assert!(why.contains("x: float32[") && why.contains("] → float32[1]"), "{why}");
    let (ops, library) = ops_of(&f, &[vector(&[1.0, 2.0]), Tensor::scalar(0.0f32)]);
    assert!(ops.iter().any(|o| o == "StatelessWhile") && ops.iter().any(|o| o == "StatelessIf"), "{ops:?}");
    assert!(library >= 4, "{library} library functions");
}

#[test]
fn continue_over_a_tensor_range() {
    let f = sum_odd_below_function();
    for n in [0, 1, 7, 10] {
        let want: i32 = (0..n).filter(|i| i % 2 == 1).sum();
        assert_eq!(f.call(&[Tensor::scalar(n)]).unwrap()[0].scalar_value::<i32>().unwrap(), want, "n = {n}");
        assert_eq!(f.call_eagerly(&[Tensor::scalar(n)]).unwrap()[0].scalar_value::<i32>().unwrap(), want);
    }
    assert_eq!(f.trace_count(), 1);
    let (ops, _) = ops_of(&f, &[Tensor::scalar(3i32)]);
    assert!(ops.iter().any(|o| o == "Range") && ops.iter().any(|o| o == "StatelessWhile"), "{ops:?}");
}

#[test]
fn if_as_an_expression_with_else_if() {
    let f = clipped_abs_function();
    for (x, want) in [(-3.0f32, 3.0f32), (4.5, 4.5), (12.0, 10.0)] {
        assert_eq!(f.call(&[Tensor::scalar(x)]).unwrap()[0].scalar_value::<f32>().unwrap(), want, "x = {x}");
    }
    let (ops, library) = ops_of(&f, &[Tensor::scalar(1.0f32)]);
    assert_eq!(ops.iter().filter(|o| *o == "StatelessIf").count(), 1, "{ops:?}");
    assert_eq!(library, 4, "two branches, the else holding the inner if's two");
}

#[test]
fn negative_literals() {
    let f = clamp_below_function();
    for (x, want) in [(-20.0f32, -10.0f32), (3.0, 3.0)] {
        assert_eq!(f.call(&[Tensor::scalar(x)]).unwrap(), vec![Tensor::scalar(want)], "traced {x}");
        assert_eq!(clamp_below(Value::scalar(x)).unwrap().tensor().unwrap(), &Tensor::scalar(want), "eager {x}");
    }
}

#[test]
fn break_in_a_nested_tensor_loop() {
    let f = pairs_below_function();
    for (n, limit) in [(5, 6), (6, 100), (4, 0)] {
        let want = (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).filter(|(i, j)| i + j < limit).count();
        let got = f.call(&[Tensor::scalar(n), Tensor::scalar(limit)]).unwrap();
        assert_eq!(got[0].scalar_value::<i32>().unwrap() as usize, want, "n = {n}, limit = {limit}");
    }
}

#[test]
fn rust_conditions_stay_rust() {
    let f = function("power", |a| Ok(vec![power(a[0].clone(), 4)?]));
    let out = f.call(&[Tensor::scalar(3.0f32)]).unwrap();
    assert_eq!(out[0].scalar_value::<f32>().unwrap(), 81.0);
    let (ops, library) = ops_of(&f, &[Tensor::scalar(3.0f32)]);
    assert_eq!(ops.iter().filter(|o| *o == "Mul").count(), 3, "unrolled: {ops:?}");
    assert_eq!(library, 0);
}

/// `if x > 0` on a vector: not a scalar condition.
#[ferroflow::function]
fn positive_part(x: Value) -> Result<Value, EagerError> {
    let mut y = x.clone();
    if x > 0.0 {
        y = x * 2.0;
    }
    Ok(y)
}

/// A loop variable whose shape grows.
#[ferroflow::function]
fn grows(x: Value) -> Result<Value, EagerError> {
    let mut y = Value::scalar(1.0f32);
    let mut k = Value::scalar(0i32);
    while k < 3 {
        y = y * x;
        k += 1;
    }
    Ok(y)
}

/// A loop variable whose dtype changes.
#[ferroflow::function]
fn retyped(n: Value) -> Result<Value, EagerError> {
    let mut acc = Value::scalar(0i32);
    let mut k = Value::scalar(0i32);
    while k < n {
        acc = (acc + k).cast(DType::Float)?;
        k += 1;
    }
    Ok(acc)
}

/// Never ends for positive `n`.
#[ferroflow::function]
fn forever(mut n: Value) -> Result<Value, EagerError> {
    while n > 0 {
        n += 1;
    }
    Ok(n)
}

/// A Rust counter assigned under a tensor condition.
#[ferroflow::function]
fn counts(x: Value) -> Result<Value, EagerError> {
    let mut hits = 0i32;
    if x > 0.0 {
        hits += 1;
    }
    Ok(Value::scalar(hits))
}

/// A tensor `break` inside a Rust loop.
#[ferroflow::function]
fn rust_loop_tensor_break(x: Value) -> Result<Value, EagerError> {
    let mut y = x.clone();
    for _ in 0..3 {
        if y > 100.0 {
            break;
        }
        y = y * 2.0;
    }
    Ok(y)
}

#[test]
fn errors_name_the_function_the_statement_and_the_variable() {
    let e = positive_part_function().call(&[vector(&[1.0, -1.0, 2.0])]).unwrap_err().to_string();
    assert!(e.contains("positive_part(if x > 0.0)") && e.contains("must be a scalar, it is bool[3]"), "{e}");
    // Eagerly the same condition is refused too.
    let e = positive_part(Value::Eager(vector(&[1.0, 2.0]))).unwrap_err().to_string();
    assert!(e.contains("must be a scalar"), "{e}");

    let e = grows_function().call(&[vector(&[1.0, 2.0, 3.0])]).unwrap_err().to_string();
    assert!(
        e.contains("grows(while k < 3)")
            && e.contains("loop variable `y` changes shape across iterations: float32[] before the loop, float32[3] after an iteration"),
        "{e}"
    );
    let e = retyped_function().call(&[Tensor::scalar(3i32)]).unwrap_err().to_string();
    assert!(
        e.contains("loop variable `acc` changes dtype across iterations: int32[] before the loop, float32[] after an iteration"),
        "{e}"
    );
    let f = forever_function().session_options(SessionOptions { max_loop_iterations: 10_000, ..Default::default() });
    let e = f.call(&[Tensor::scalar(1i32)]).unwrap_err().to_string();
    assert!(e.contains("the loop ran 10000 iterations, the limit set by max_loop_iterations"), "{e}");

    let e = counts_function().call(&[Tensor::scalar(1.0f32)]).unwrap_err().to_string();
    assert!(e.contains("`hits` (a i32) is assigned under a tensor condition"), "{e}");
    // Eagerly it is just Rust.
    assert_eq!(counts(Value::scalar(1.0f32)).unwrap().tensor().unwrap().scalar_value::<i32>().unwrap(), 1);

    let e = rust_loop_tensor_break_function().call(&[Tensor::scalar(1.0f32)]).unwrap_err().to_string();
    assert!(e.contains("`break` under the tensor condition `if y > 100.0`"), "{e}");
    assert_eq!(
        rust_loop_tensor_break(Value::scalar(1.0f32)).unwrap().tensor().unwrap().scalar_value::<f32>().unwrap(),
        8.0
    );
}
