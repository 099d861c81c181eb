// The attribute alone: these programs need only the macro, not the `ferroflow` crate.
use ferroflow_macros as ferroflow;

#[ferroflow::function]
fn f(x: Value, s: &mut State) -> Result<Value, FunctionError> {
    let mut i = Value::scalar(0i32);
    while i < x {
        s.total = i;
        i += 1;
    }
    Ok(i)
}

fn main() {}
