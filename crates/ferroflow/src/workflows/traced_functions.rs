//! TensorFlow 2's functions, written as plain Rust under `#[ferroflow::function]`
//! (AutoGraph): `cube` (one concrete function per input dtype), `collatz` (a `while` on a
//! tensor with an `if` inside) and `sum_squares_until` (a `for` over a tensor with a `break`).
//! Traced, the last two are `StatelessWhile` / `StatelessIf` nodes with library functions,
//! not unrolled loops; called on concrete values, they run as the Rust they are.
use crate::function::{Function, FunctionError, Value};
use crate::tensor::{DType, Tensor};

/// `x ** 3`, as `x * x * x` (any numeric dtype).
#[crate::function]
pub fn cube(x: Value) -> Result<Value, FunctionError> {
    Ok(x * x * x)
}

/// The steps of the Collatz sequence from `n` (an int32 scalar) to 1.
#[crate::function]
pub fn collatz(mut n: Value) -> Result<Value, FunctionError> {
    let mut steps = Value::scalar(0i32);
    while n > 1 {
        if n % 2 == 0 {
            n = n / 2;
        } else {
            n = 3 * n + 1;
        }
        steps += 1;
    }
    Ok(steps)
}

/// The sum of squares of `x`'s elements (a float vector) until the sum passes `limit` (a
/// float scalar), and how many were added.
#[crate::function]
pub fn sum_squares_until(x: Value, limit: Value) -> Result<(Value, Value), FunctionError> {
    let mut total = Value::scalar(0.0f32);
    let mut i = Value::scalar(0i32);
    for v in x {
        if total > limit {
            break;
        }
        total += v * v;
        i += 1;
    }
    Ok((total, i))
}

/// The three graph functions.
pub fn functions() -> (Function<'static>, Function<'static>, Function<'static>) {
    (cube_function(), collatz_function(), sum_squares_until_function())
}

/// Runs the three functions' calls as traced graphs; returns the lines TensorFlow prints:
/// `cube(2) = 8 (int32)`, `cube(2.0) = 8.0 (float32)`, `concrete_functions = 2`,
/// `collatz(27) = ...`, `collatz(97) = ...`, `sum_squares_until([...], 6.0) = (total, count)`.
pub fn run(cube: &Function, collatz: &Function, sum_squares_until: &Function) -> Result<Vec<String>, FunctionError> {
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
        format!("cube(2) = {} ({})", scalar(&i), i.dtype().python_name()),
        format!("cube(2.0) = {:.1} ({})", f.scalar_value::<f32>().unwrap_or(f32::NAN), f.dtype().python_name()),
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
