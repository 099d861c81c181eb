//! Seed 004: TensorFlow 2's functions. `cube` (one concrete function per input dtype),
//! `collatz` and `sum_squares_until` (a `while` with an `if` inside, and a `for` with `break`,
//! written with `cond` / `while_loop`, so their graphs hold `StatelessWhile` / `StatelessIf`
//! and library functions rather than an unrolled loop).
use crate::function::{cond, function, while_loop, EagerError, Function, Value};
use crate::tensor::{DType, Tensor};

/// `x ** 3`, as `x * x * x` (any numeric dtype).
pub fn cube_body(a: &[Value]) -> Result<Vec<Value>, EagerError> {
    Ok(vec![a[0].mul(&a[0])?.mul(&a[0])?])
}

/// The steps of the Collatz sequence from `n` (an int32 scalar) to 1:
/// `while n > 1: n = n // 2 if n % 2 == 0 else 3 * n + 1; steps += 1`.
pub fn collatz_body(a: &[Value]) -> Result<Vec<Value>, EagerError> {
    let (one, two, three) = (Value::scalar(1i32), Value::scalar(2i32), Value::scalar(3i32));
    let out = while_loop(
        |v| v[0].greater(&one),
        |v| {
            let even = v[0].floor_mod(&two)?.equal(&Value::scalar(0i32))?;
            let n =
                cond(&even, &v[..1], |x| Ok(vec![x[0].floor_div(&two)?]), |x| Ok(vec![x[0].mul(&three)?.add(&one)?]))?;
            Ok(vec![n[0].clone(), v[1].add(&one)?])
        },
        &[a[0].clone(), Value::scalar(0i32)],
    )?;
    Ok(vec![out[1].clone()])
}

/// `for v in x: if total > limit: break; total += v * v; i += 1` → `(total, i)`, with `x` a
/// float vector and `limit` a float scalar.
pub fn sum_squares_until_body(a: &[Value]) -> Result<Vec<Value>, EagerError> {
    let out = while_loop(
        |v| v[0].less(&v[2].size()?)?.logical_and(&v[1].greater(&v[3])?.logical_not()?),
        |v| {
            let x = v[2].at(&v[0])?;
            Ok(vec![v[0].add(&Value::scalar(1i32))?, v[1].add(&x.mul(&x)?)?, v[2].clone(), v[3].clone()])
        },
        &[Value::scalar(0i32), Value::scalar(0.0f32), a[0].clone(), a[1].clone()],
    )?;
    Ok(vec![out[1].clone(), out[0].clone()])
}

/// The three graph functions.
pub fn functions() -> (Function<'static>, Function<'static>, Function<'static>) {
    (
        function("cube", cube_body),
        function("collatz", collatz_body),
        function("sum_squares_until", sum_squares_until_body),
    )
}

/// The dtype as Python's TensorFlow prints it (`float32`, `int32`).
fn python_name(d: DType) -> &'static str {
    match d {
        DType::Float => "float32",
        DType::Double => "float64",
        DType::Half => "float16",
        d => d.name(),
    }
}

/// Runs the seed's calls as traced graphs; returns the lines the article prints:
/// `cube(2) = 8 (int32)`, `cube(2.0) = 8.0 (float32)`, `concrete_functions = 2`,
/// `collatz(27) = ...`, `collatz(97) = ...`, `sum_squares_until([...], 6.0) = (total, count)`.
pub fn run(cube: &Function, collatz: &Function, sum_squares_until: &Function) -> Result<Vec<String>, EagerError> {
    let scalar = |t: &Tensor| {
        match t.dtype() {
            DType::Int32 => t.scalar_value::<i32>().map(|v| v.to_string()),
            _ => t.scalar_value::<f32>().map(|v| format!("{v:?}")),
        }
        .unwrap_or_else(|_| t.preview(1))
    };
    let i = cube.call(&[Tensor::scalar(2i32)])?.remove(0);
    let f = cube.call(&[Tensor::scalar(2.0f32)])?.remove(0);
    let mut lines = vec![
        format!("cube(2) = {} ({})", scalar(&i), python_name(i.dtype())),
        format!("cube(2.0) = {:.1} ({})", f.scalar_value::<f32>().unwrap_or(f32::NAN), python_name(f.dtype())),
        format!("concrete_functions = {}", cube.concrete_functions()),
    ];
    for n in [27, 97] {
        lines.push(format!("collatz({n}) = {}", scalar(&collatz.call(&[Tensor::scalar(n)])?[0])));
    }
    let x = Tensor::from_vec(&[5], vec![0.5f32, 1.5, 2.0, 3.0, 4.0]).expect("a vector");
    let out = sum_squares_until.call(&[x, Tensor::scalar(6.0f32)])?;
    lines.push(format!(
        "sum_squares_until([0.5, 1.5, 2.0, 3.0, 4.0], 6.0) = ({}, {})",
        scalar(&out[0]),
        scalar(&out[1])
    ));
    Ok(lines)
}
