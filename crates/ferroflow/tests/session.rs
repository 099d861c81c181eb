//! Sessions: plans compiled once per signature and cached, `what_runs` run on one and two
//! threads.
use std::sync::Arc;

use ferroflow::prelude::*;

#[test]
fn plans_are_compiled_once_per_signature() {
    let (g, out) = ferroflow::workflows::what_runs::graph().unwrap();
    let mut opts = SessionOptions::default();
    opts.optimizer.enabled = false;
    let sess = Session::new(g.clone(), opts).unwrap();
    let p1 = sess.plan(&[], &[&out], &[]).unwrap();
    // The same names in other strings find the cached plan.
    let again = out.clone();
    let p2 = sess.plan(&[], &[again.as_str()], &[]).unwrap();
    assert!(Arc::ptr_eq(&p1, &p2));
    let p3 = sess.plan(&["Add:0"], &[&out], &[]).unwrap();
    assert!(!Arc::ptr_eq(&p1, &p3));
    // A fetch and a target are different signatures.
    let p4 = sess.plan(&[], &[], &["Mul"]).unwrap();
    assert!(!Arc::ptr_eq(&p1, &p4));
    // Feeding Add:0 prunes node Add; the constants still feed Add_1. (Constants are plan
    // constants, not nodes that run.)
    assert_eq!(p1.len(), 3);
    assert_eq!(p3.len(), 2);
    let r = sess.run_plan(&p3, &[Tensor::scalar(10.0f32)]).unwrap();
    assert_eq!(r[0].scalar_value::<f32>().unwrap(), 30.0);
    // Optimized (the default): everything folds to one constant; with Add:0 fed, Add_1
    // folds (it is not merged with the fed Add) and Mul reads the feed.
    let sess = Session::new(g, SessionOptions::default()).unwrap();
    assert_eq!(sess.plan(&[], &[&out], &[]).unwrap().len(), 0);
    let p3 = sess.plan(&["Add:0"], &[&out], &[]).unwrap();
    assert_eq!(p3.len(), 1);
    let r = sess.run_plan(&p3, &[Tensor::scalar(10.0f32)]).unwrap();
    assert_eq!(r[0].scalar_value::<f32>().unwrap(), 30.0);
}

#[test]
fn what_runs_is_nine_on_one_and_two_threads() {
    let (g, out) = ferroflow::workflows::what_runs::graph().unwrap();
    for threads in [1, 2] {
        let opts = SessionOptions::default().with_inter_op_threads(threads).with_intra_op_threads(threads);
        let sess = Session::new(g.clone(), opts).unwrap();
        for _ in 0..3 {
            let r = sess.run(&[], &[&out], &[]).unwrap();
            assert_eq!(r[0].scalar_value::<f32>().unwrap(), 9.0);
        }
    }
}
