//! Seed 000's program: a = 1, b = 2, c = a + b, d = a + b, out = c * d, run in a session.
use ferroflow::prelude::*;

fn main() -> anyhow::Result<()> {
    let s = Scope::new();
    let a = s.scalar(1.0f32)?;
    let b = s.scalar(2.0f32)?;
    let c = s.add(a, b)?;
    let d = s.add(a, b)?;
    let out = s.mul(c, d)?;
    let graph = s.graph();
    let fetch = graph.output_name(out);
    let sess = Session::new(graph, SessionOptions::default())?;
    let result = sess.run(&[], &[&fetch], &[])?;
    println!("{fetch} = {}", result[0].scalar_value::<f32>()?);
    Ok(())
}
