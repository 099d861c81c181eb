//! `what_runs`' graph: a = 1, b = 2, c = a + b, d = a + b, out = c * d, run in a session,
//! with the node names TensorFlow gives `tf.constant`, `tf.add` and `tf.multiply`.
//! `cargo run --example what_runs -- [GRAPH.pbtxt|GRAPH.pb]` also writes the graph there.
use ferroflow::prelude::*;

fn main() -> anyhow::Result<()> {
    let (graph, fetch) = ferroflow::workflows::what_runs::graph()?;
    if let Some(path) = std::env::args().nth(1) {
        ferroflow::graph::io::write_graph_def(std::path::Path::new(&path), &graph.to_graph_def())?;
        println!("wrote {path}");
    }
    let sess = Session::new(graph, SessionOptions::default())?;
    let result = sess.run(&[], &[&fetch], &[])?;
    println!("{fetch} = {}", result[0].scalar_value::<f32>()?);
    Ok(())
}
