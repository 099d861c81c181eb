// The attribute alone: these programs need only the macro, not the `ferroflow` crate.
use ferroflow_macros as ferroflow;

#[ferroflow::function(jit_compile = true)]
fn f(x: Value) -> Result<Value, FunctionError> {
    Ok(x)
}

fn main() {}
