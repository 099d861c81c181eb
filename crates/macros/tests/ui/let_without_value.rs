// The attribute alone: these programs need only the macro, not the `ferroflow` crate.
use ferroflow_macros as ferroflow;

#[ferroflow::function]
fn f(x: Value) -> Result<Value, FunctionError> {
    let y;
    if x > 0.0 {
        y = x;
    } else {
        y = -x;
    }
    Ok(y)
}

fn main() {}
