//! Seed 000's program: a = 1, b = 2, c = a + b, d = a + b, out = c * d, run in a session,
//! with the node names TensorFlow gives `tf.constant`, `tf.add` and `tf.multiply`.
//! `cargo run --example seed_000 -- [GRAPH.pbtxt|GRAPH.pb]` also writes the graph there.
use ferroflow::prelude::*;

fn main() -> anyhow::Result<()> {
    let s = Scope::new();
    let a = s.scalar(1.0f32)?;
    let b = s.scalar(2.0f32)?;
    let c = s.with_name("Add").add(a, b)?;
    let d = s.with_name("Add").add(a, b)?;
    let out = s.with_name("Mul").mul(c, d)?;
    let graph = s.graph();
    let fetch = graph.output_name(out);
    if let Some(path) = std::env::args().nth(1) {
        ferroflow::graph::io::write_graph_def(std::path::Path::new(&path), &graph.to_graph_def())?;
        println!("wrote {path}");
    }
    let sess = Session::new(graph, SessionOptions::default())?;
    let result = sess.run(&[], &[&fetch], &[])?;
    println!("{fetch} = {}", result[0].scalar_value::<f32>()?);
    Ok(())
}
