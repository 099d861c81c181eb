// The attribute alone: these programs need only the macro, not the `ferroflow` crate.
use ferroflow_macros as ferroflow;

#[ferroflow::function]
fn f(x: Value) -> Value {
    x
}

fn main() {}
