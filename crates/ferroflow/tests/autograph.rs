//! `#[ferroflow::function]` (AutoGraph for Rust): the same Rust function runs eagerly as
//! written and traces into `StatelessWhile` / `StatelessIf` graphs over tensor conditions;
//! `break`, `continue`, early `return` (from loops that carry variables, inner loops, ifs, as
//! tuples), `if` as an expression, `else if`, `range(n)` on a tensor, Rust conditions left as
//! Rust, and the errors for what cannot be traced.
use ferroflow::function::{function, Function, FunctionError, Traced, Value};
use ferroflow::prelude::*;

/// The first element of `x` above `t`, or -1.
#[ferroflow::function]
fn first_above(x: Value, t: Value) -> Result<Value, FunctionError> {
    for v in x {
        if v > t {
            return Ok(v);
        }
    }
    Ok(Value::scalar(-1.0f32))
}

/// The sum of the odd numbers below `n`.
#[ferroflow::function]
fn sum_odd_below(n: Value) -> Result<Value, FunctionError> {
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
fn clipped_abs(x: Value) -> Result<Value, FunctionError> {
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
fn clamp_below(x: Value) -> Result<Value, FunctionError> {
    let y = if x < -10.0 { Value::scalar(-10.0f32) } else { x };
    Ok(y)
}

/// Pairs `(i, j)` with `i < j < n` and `i + j` below `limit`, with a `break` in an inner loop.
#[ferroflow::function]
fn pairs_below(n: Value, limit: Value) -> Result<Value, FunctionError> {
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
fn power(x: Value, k: u32) -> Result<Value, FunctionError> {
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
fn positive_part(x: Value) -> Result<Value, FunctionError> {
    let mut y = x.clone();
    if x > 0.0 {
        y = x * 2.0;
    }
    Ok(y)
}

/// A loop variable whose shape grows.
#[ferroflow::function]
fn grows(x: Value) -> Result<Value, FunctionError> {
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
fn retyped(n: Value) -> Result<Value, FunctionError> {
    let mut acc = Value::scalar(0i32);
    let mut k = Value::scalar(0i32);
    while k < n {
        acc = Traced.cast(acc + k, DType::Float)?;
        k += 1;
    }
    Ok(acc)
}

/// Never ends for positive `n`.
#[ferroflow::function]
fn forever(mut n: Value) -> Result<Value, FunctionError> {
    while n > 0 {
        n += 1;
    }
    Ok(n)
}

/// A Rust counter assigned under a tensor condition.
#[ferroflow::function]
fn counts(x: Value) -> Result<Value, FunctionError> {
    let mut hits = 0i32;
    if x > 0.0 {
        hits += 1;
    }
    Ok(Value::scalar(hits))
}

/// A tensor `break` inside a Rust loop.
#[ferroflow::function]
fn rust_loop_tensor_break(x: Value) -> Result<Value, FunctionError> {
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
    let f = forever_function().session_options(SessionOptions::default().with_max_loop_iterations(10_000));
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

/// The index of the first negative element of `x`, or -1: a `return` in a tensor `for` that
/// carries `i`.
#[ferroflow::function]
fn first_negative(x: Value) -> Result<Value, FunctionError> {
    let mut i = Value::scalar(0i32);
    for v in x {
        if v < 0.0 {
            return Ok(i);
        }
        i += 1;
    }
    Ok(Value::scalar(-1i32))
}

/// The first `i < n` with `i * i > x`, or -1: a `return` in a tensor `while` that carries `i`.
#[ferroflow::function]
fn first_square_above(x: Value, n: Value) -> Result<Value, FunctionError> {
    let mut i = Value::scalar(0i32);
    while i < n {
        if i * i > x {
            return Ok(i);
        }
        i += 1;
    }
    Ok(Value::scalar(-1i32))
}

/// The first odd `i <= n` with `i * i > x`, or -1: `continue` and `return` in one loop.
#[ferroflow::function]
fn first_odd_square_above(x: Value, n: Value) -> Result<Value, FunctionError> {
    let mut i = Value::scalar(0i32);
    while i < n {
        i += 1;
        if i % 2 == 0 {
            continue;
        }
        if i * i > x {
            return Ok(i);
        }
    }
    Ok(Value::scalar(-1i32))
}

/// `10 i + j` for the first row `i` of `x` and `j < m` with `x[i] * j > t`, or -1: a `return`
/// in an inner `while` inside a `for`, each carrying its own counter.
#[ferroflow::function]
fn first_product_above(x: Value, m: Value, t: Value) -> Result<Value, FunctionError> {
    let mut i = Value::scalar(0i32);
    for a in x {
        let mut j = Value::scalar(0i32);
        while j < m {
            if a * j > t {
                return Ok(i * 10 + j);
            }
            j += 1;
        }
        i += 1;
    }
    Ok(Value::scalar(-1i32))
}

/// `10 i + j` for the first pair of elements of `x` whose sum is above `t`, or -1, counting
/// the pairs tried in a variable both loops carry: two tensor `for`s, `return` in the inner.
#[ferroflow::function]
fn first_pair_above(x: Value, t: Value) -> Result<(Value, Value), FunctionError> {
    let mut tried = Value::scalar(0i32);
    let mut i = Value::scalar(0i32);
    for a in x.clone() {
        let mut j = Value::scalar(0i32);
        for b in x.clone() {
            tried += 1;
            if a + b > t {
                return Ok((i * 10 + j, tried));
            }
            j += 1;
        }
        i += 1;
    }
    Ok((Value::scalar(-1i32), tried))
}

/// With `look`, the index of the first negative element of `x` (or its length); else 0: a
/// `return` in an `if` in a loop in a tensor `if`.
#[ferroflow::function]
fn scan_if(x: Value, look: Value) -> Result<Value, FunctionError> {
    let mut i = Value::scalar(0i32);
    if look {
        for v in x {
            if v < 0.0 {
                return Ok(i);
            }
            i += 1;
        }
    }
    Ok(i)
}

/// The index and value of the first negative element of `x`, or (-1, 0): a tuple returned from
/// a loop.
#[ferroflow::function]
fn first_negative_with_value(x: Value) -> Result<(Value, Value), FunctionError> {
    let mut i = Value::scalar(0i32);
    for v in x {
        if v < 0.0 {
            return Ok((i, v));
        }
        i += 1;
    }
    Ok((Value::scalar(-1i32), Value::scalar(0.0f32)))
}

/// The running total of `x`, doubled when it passes 10 and negated when it falls below -10
/// (the scan stops there): returns of expressions of a carried variable, in both branches of
/// an `else if`.
#[ferroflow::function]
fn running_total(x: Value) -> Result<Value, FunctionError> {
    let mut total = Value::scalar(0.0f32);
    for v in x {
        total += v;
        if total > 10.0 {
            return Ok(total * 2.0);
        } else if total < -10.0 {
            return Ok(-total);
        }
    }
    Ok(total)
}

/// How many elements up to the first one with `|v| > 2`, negative when that one is: every
/// branch of the inner `if` returns.
#[ferroflow::function]
fn signed_position(x: Value) -> Result<Value, FunctionError> {
    let mut seen = Value::scalar(0i32);
    for v in x {
        seen += 1;
        if v * v > 4.0 {
            if v > 0.0 {
                return Ok(seen);
            } else {
                return Ok(-seen);
            }
        }
    }
    Ok(Value::scalar(0i32))
}

/// The index of the first negative element before the first `stop`, or 100 + the index of
/// `stop` (or of the end): `break` and `return` in one loop.
#[ferroflow::function]
fn first_negative_before(x: Value, stop: Value) -> Result<Value, FunctionError> {
    let mut i = Value::scalar(0i32);
    for v in x {
        if v == stop {
            break;
        }
        if v < 0.0 {
            return Ok(i);
        }
        i += 1;
    }
    Ok(i + 100)
}

/// `x / 2` above 10, else `x + 1`: a `return` of a variable the tensor `if` assigns.
#[ferroflow::function]
fn halve_large(x: Value) -> Result<Value, FunctionError> {
    let mut y = x.clone();
    if x > 10.0 {
        y = y / 2.0;
        return Ok(y);
    }
    y += 1.0;
    Ok(y)
}

/// How many elements of `x` follow its first negative one: a loop-carried flag as a condition.
#[ferroflow::function]
fn count_after_negative(x: Value) -> Result<Value, FunctionError> {
    let mut seen = Value::scalar(false);
    let mut n = Value::scalar(0i32);
    for v in x {
        if seen {
            n += 1;
        }
        if v < 0.0 {
            seen = Value::scalar(true);
        }
    }
    Ok(n)
}

fn ints(v: &[i32]) -> Tensor {
    Tensor::from_vec(&[v.len()], v.to_vec()).unwrap()
}

/// `f` traced, `f` run eagerly and `direct` (the Rust function called on eager values) all give
/// `want`, and the traced graph loops in a `StatelessWhile`.
fn forms_agree(
    f: &Function,
    direct: impl Fn(&[Value]) -> Result<Vec<Value>, FunctionError>,
    cases: &[(Vec<Tensor>, Vec<Tensor>)],
) {
    for (args, want) in cases {
        assert_eq!(&f.call(args).unwrap(), want, "traced {args:?}");
        assert_eq!(&f.call_eagerly(args).unwrap(), want, "eager {args:?}");
        let values: Vec<Value> = args.iter().cloned().map(Value::Eager).collect();
        let got: Vec<Tensor> = direct(&values).unwrap().iter().map(|v| v.tensor().unwrap().clone()).collect();
        assert_eq!(&got, want, "direct {args:?}");
        let (ops, library_ops) = ops_with_library(f, args);
        assert!(ops.iter().chain(&library_ops).any(|o| o == "StatelessWhile"), "not a While: {ops:?} {library_ops:?}");
    }
}

/// The ops of the traced graph, and those of its library's functions.
fn ops_with_library(f: &Function, args: &[Tensor]) -> (Vec<String>, Vec<String>) {
    let def = f.concrete_function_keyed(&(), args).unwrap().graph_def();
    let library = def.library.iter().flat_map(|l| &l.function).flat_map(|f| &f.node_def);
    (def.node.iter().map(|n| n.op.clone()).collect(), library.map(|n| n.op.clone()).collect())
}

#[test]
fn early_return_from_a_loop_that_carries_a_variable() {
    forms_agree(
        &first_negative_function(),
        |a| Ok(vec![first_negative(a[0].clone())?]),
        &[
            (vec![vector(&[1.0, 2.0, -3.0, 4.0])], vec![Tensor::scalar(2i32)]),
            (vec![vector(&[1.0, 2.0])], vec![Tensor::scalar(-1i32)]),
            (vec![vector(&[-1.0])], vec![Tensor::scalar(0i32)]),
        ],
    );
    let direct = |a: &[Value]| Ok(vec![first_square_above(a[0].clone(), a[1].clone())?]);
    forms_agree(
        &first_square_above_function(),
        direct,
        &[
            (vec![Tensor::scalar(10i32), Tensor::scalar(10i32)], vec![Tensor::scalar(4i32)]),
            (vec![Tensor::scalar(100i32), Tensor::scalar(5i32)], vec![Tensor::scalar(-1i32)]),
            (vec![Tensor::scalar(-1i32), Tensor::scalar(3i32)], vec![Tensor::scalar(0i32)]),
        ],
    );
    let direct = |a: &[Value]| Ok(vec![first_odd_square_above(a[0].clone(), a[1].clone())?]);
    forms_agree(
        &first_odd_square_above_function(),
        direct,
        &[
            (vec![Tensor::scalar(10i32), Tensor::scalar(10i32)], vec![Tensor::scalar(5i32)]),
            (vec![Tensor::scalar(10i32), Tensor::scalar(4i32)], vec![Tensor::scalar(-1i32)]),
        ],
    );
}

#[test]
fn early_return_from_an_inner_loop() {
    let direct = |a: &[Value]| Ok(vec![first_product_above(a[0].clone(), a[1].clone(), a[2].clone())?]);
    forms_agree(
        &first_product_above_function(),
        direct,
        &[
            (vec![ints(&[1, 2, 3]), Tensor::scalar(4i32), Tensor::scalar(5i32)], vec![Tensor::scalar(13i32)]),
            (vec![ints(&[1, 2, 3]), Tensor::scalar(4i32), Tensor::scalar(100i32)], vec![Tensor::scalar(-1i32)]),
        ],
    );
    let f = first_pair_above_function();
    let direct = |a: &[Value]| {
        let (at, tried) = first_pair_above(a[0].clone(), a[1].clone())?;
        Ok(vec![at, tried])
    };
    forms_agree(
        &f,
        direct,
        &[
            (vec![vector(&[1.0, 2.0, 3.0]), Tensor::scalar(4.0f32)], vec![Tensor::scalar(12i32), Tensor::scalar(6i32)]),
            (vec![vector(&[1.0, 2.0]), Tensor::scalar(10.0f32)], vec![Tensor::scalar(-1i32), Tensor::scalar(4i32)]),
        ],
    );
    // The inner loop is a While inside the outer one's body, not unrolled.
    let (_, library_ops) = ops_with_library(&f, &[vector(&[1.0, 2.0]), Tensor::scalar(0.0f32)]);
    assert_eq!(library_ops.iter().filter(|o| *o == "StatelessWhile").count(), 1, "{library_ops:?}");
}

#[test]
fn early_return_in_an_if_in_a_loop_in_an_if() {
    let direct = |a: &[Value]| Ok(vec![scan_if(a[0].clone(), a[1].clone())?]);
    forms_agree(
        &scan_if_function(),
        direct,
        &[
            (vec![vector(&[1.0, -2.0, 3.0]), Tensor::scalar(true)], vec![Tensor::scalar(1i32)]),
            (vec![vector(&[1.0, 2.0]), Tensor::scalar(true)], vec![Tensor::scalar(2i32)]),
            (vec![vector(&[1.0, -2.0]), Tensor::scalar(false)], vec![Tensor::scalar(0i32)]),
        ],
    );
}

#[test]
fn early_return_of_a_tuple_and_of_expressions() {
    let direct = |a: &[Value]| {
        let (i, v) = first_negative_with_value(a[0].clone())?;
        Ok(vec![i, v])
    };
    forms_agree(
        &first_negative_with_value_function(),
        direct,
        &[
            (vec![vector(&[1.0, 2.0, -3.0, 4.0])], vec![Tensor::scalar(2i32), Tensor::scalar(-3.0f32)]),
            (vec![vector(&[1.0, 2.0])], vec![Tensor::scalar(-1i32), Tensor::scalar(0.0f32)]),
        ],
    );
    forms_agree(
        &running_total_function(),
        |a| Ok(vec![running_total(a[0].clone())?]),
        &[
            (vec![vector(&[4.0, 5.0, 6.0, 100.0])], vec![Tensor::scalar(30.0f32)]),
            (vec![vector(&[-4.0, -5.0, -6.0, 100.0])], vec![Tensor::scalar(15.0f32)]),
            (vec![vector(&[1.0, 2.0])], vec![Tensor::scalar(3.0f32)]),
        ],
    );
    forms_agree(
        &signed_position_function(),
        |a| Ok(vec![signed_position(a[0].clone())?]),
        &[
            (vec![vector(&[1.0, 3.0, -5.0])], vec![Tensor::scalar(2i32)]),
            (vec![vector(&[1.0, -3.0, 5.0])], vec![Tensor::scalar(-2i32)]),
            (vec![vector(&[1.0, 2.0])], vec![Tensor::scalar(0i32)]),
        ],
    );
}

#[test]
fn break_and_return_in_one_loop() {
    let direct = |a: &[Value]| Ok(vec![first_negative_before(a[0].clone(), a[1].clone())?]);
    forms_agree(
        &first_negative_before_function(),
        direct,
        &[
            (vec![vector(&[1.0, 2.0, 9.0, -1.0]), Tensor::scalar(9.0f32)], vec![Tensor::scalar(102i32)]),
            (vec![vector(&[1.0, 2.0, 9.0, -1.0]), Tensor::scalar(7.0f32)], vec![Tensor::scalar(3i32)]),
            (vec![vector(&[1.0, 2.0]), Tensor::scalar(7.0f32)], vec![Tensor::scalar(102i32)]),
        ],
    );
}

#[test]
fn early_return_of_a_variable_a_tensor_if_assigns() {
    let f = halve_large_function();
    for (x, want) in [(20.0f32, 10.0f32), (4.0, 5.0)] {
        assert_eq!(f.call(&[Tensor::scalar(x)]).unwrap(), vec![Tensor::scalar(want)], "traced {x}");
        assert_eq!(f.call_eagerly(&[Tensor::scalar(x)]).unwrap(), vec![Tensor::scalar(want)], "eager {x}");
        assert_eq!(halve_large(Value::scalar(x)).unwrap().tensor().unwrap(), &Tensor::scalar(want));
    }
    let (ops, _) = ops_of(&f, &[Tensor::scalar(1.0f32)]);
    assert!(ops.iter().any(|o| o == "StatelessIf"), "{ops:?}");
}

#[test]
fn a_loop_carried_flag_as_a_condition() {
    forms_agree(
        &count_after_negative_function(),
        |a| Ok(vec![count_after_negative(a[0].clone())?]),
        &[
            (vec![vector(&[1.0, -2.0, 3.0, 4.0])], vec![Tensor::scalar(2i32)]),
            (vec![vector(&[1.0, 2.0])], vec![Tensor::scalar(0i32)]),
        ],
    );
}
