//! TensorBoard event files written by TensorFlow (fixtures/tf/events, from
//! scripts/make_fixtures.py) read back by ferroflow's reader: scalars and graphs.
use std::path::PathBuf;

use ferroflow::prelude::*;
use ferroflow::proto::{event::What, GraphDef};
use ferroflow::summary::{read_events, scalar_value};
use prost::Message;

fn event_file(sub: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf/events").join(sub);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.file_name().unwrap().to_string_lossy().contains("tfevents"));
    assert_eq!(files.len(), 1, "{dir:?}");
    files.pop().unwrap()
}

fn check(sub: &str) {
    let events = read_events(&event_file(sub)).unwrap();
    assert_eq!(events[0].what, Some(What::FileVersion("brain.Event:2".into())), "{sub}");
    let mut losses = vec![];
    let mut graphs = vec![];
    for e in &events {
        match &e.what {
            Some(What::Summary(s)) => {
                for v in s.value.iter().filter(|v| v.tag == "loss") {
                    losses.push((e.step, scalar_value(v).unwrap()));
                }
            }
            Some(What::GraphDef(bytes)) => graphs.push(GraphDef::decode(bytes.as_slice()).unwrap()),
            _ => {}
        }
    }
    assert_eq!(losses, vec![(0, 1.0), (1, 0.5), (2, 0.25)], "{sub}");
    assert_eq!(graphs.len(), 1, "{sub}");
    // The graph TensorFlow logged is `what_runs`': it imports and runs to 9.
    let g = ferroflow::ops::import_graph_def(&graphs[0]).unwrap();
    let sess = Session::new(g, SessionOptions::default()).unwrap();
    assert_eq!(sess.run(&[], &["Mul:0"], &[]).unwrap()[0].scalar_value::<f32>().unwrap(), 9.0, "{sub}");
}

#[test]
fn tensorflow_1_file_writer_events_read_back() {
    check("tf1");
}

#[test]
fn tensorflow_2_summary_writer_events_read_back() {
    check("tf2");
}

#[test]
fn truncated_and_corrupted_tensorflow_event_files_are_errors() {
    let bytes = std::fs::read(event_file("tf1")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (name, bad) in [
        ("truncated", bytes[..bytes.len() - 3].to_vec()),
        ("flipped", {
            let mut b = bytes.clone();
            let at = b.len() / 2;
            b[at] ^= 1;
            b
        }),
    ] {
        let p = dir.path().join(format!("events.out.tfevents.{name}"));
        std::fs::write(&p, bad).unwrap();
        let e = read_events(&p).unwrap_err().to_string();
        assert!(e.contains(name) && (e.contains("truncated") || e.contains("CRC")), "{e}");
    }
}
