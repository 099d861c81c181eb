//! GradientTape gives what graph autodiff gives (the same gradient functions, bit for bit),
//! honours watch / persistent / stop_recording, and nests for second derivatives.
use ferroflow_function::eager::{self, Eager};
use ferroflow_function::GradientTape;
use ferroflow_graph::Output;
use ferroflow_ops::{OpTarget, Ops, RawOps, Scope};
use ferroflow_proto::attr;
use ferroflow_runtime::{Session, SessionOptions};
use ferroflow_tensor::{Shape, Tensor};

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8) % 1000) as f32 / 250.0 - 2.0)
        .collect()
}

/// The graph side: `f` builds the loss from placeholders for `params`; returns d loss / d param.
fn graph_gradients(params: &[&Tensor], f: impl Fn(&Scope, &[Output]) -> Output) -> Vec<Tensor> {
    let s = Scope::new();
    let ps: Vec<Output> = params
        .iter()
        .enumerate()
        .map(|(i, t)| s.with_name(&format!("p{i}")).placeholder(t.dtype(), &Shape::known(t.dims())).unwrap())
        .collect();
    let loss = f(&s, &ps);
    let grads = ferroflow_autodiff::gradients(&s, &[loss], &ps, None).unwrap();
    let mut options = SessionOptions::default();
    options.optimizer.enabled = false;
    let sess = Session::new(s.graph(), options).unwrap();
    let g = sess.graph();
    let names: Vec<String> = grads.iter().map(|o| g.output_name(o.unwrap())).collect();
    let feeds: Vec<(String, Tensor)> = ps.iter().zip(params).map(|(o, t)| (g.output_name(*o), (*t).clone())).collect();
    let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let fetches: Vec<&str> = names.iter().map(String::as_str).collect();
    sess.run(&feeds, &fetches, &[]).unwrap()
}

#[test]
fn mlp_and_cnn_gradients_equal_graph_autodiff() {
    // MLP: sum(relu(x w + b)).
    let x = Tensor::from_vec(&[4, 3], values(12, 1)).unwrap();
    let w = Tensor::from_vec(&[3, 5], values(15, 2)).unwrap();
    let b = Tensor::from_vec(&[5], values(5, 3)).unwrap();
    let tape = GradientTape::new();
    tape.watch(&w);
    tape.watch(&b);
    let h = Eager.relu(Eager.add_v2(Eager.mat_mul(&x, &w).unwrap(), &b).unwrap()).unwrap();
    let loss = Eager.reduce("Sum", h, &[0, 1], false).unwrap();
    let got = tape.gradient(&loss, &[&w, &b]).unwrap();
    let want = graph_gradients(&[&w, &b], |s, p| {
        let xo = s.constant(&x).unwrap();
        let h = s.relu(s.add_v2(s.matmul(xo, p[0], false, false).unwrap(), p[1]).unwrap()).unwrap();
        s.reduce("Sum", h, &[0, 1], false).unwrap()
    });
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.as_ref().unwrap().as_slice::<f32>().unwrap(), w.as_slice::<f32>().unwrap());
    }

    // CNN: mean(relu(conv2d(x, f) + bias)).
    let x = Tensor::from_vec(&[2, 5, 5, 2], values(100, 4)).unwrap();
    let f = Tensor::from_vec(&[3, 3, 2, 4], values(72, 5)).unwrap();
    let bias = Tensor::from_vec(&[4], values(4, 6)).unwrap();
    let tape = GradientTape::new();
    tape.watch(&f);
    tape.watch(&bias);
    let conv = eager::op("Conv2D")
        .input(&x)
        .input(&f)
        .attr("strides", attr::ints(&[1, 1, 1, 1]))
        .attr("padding", attr::string("SAME"))
        .run1()
        .unwrap();
    let h = Eager.relu(eager::op("BiasAdd").input(&conv).input(&bias).run1().unwrap()).unwrap();
    let loss = Eager.reduce("Mean", h, &[0, 1, 2, 3], false).unwrap();
    let got = tape.gradient(&loss, &[&f, &bias]).unwrap();
    let want = graph_gradients(&[&f, &bias], |s, p| {
        let xo = s.constant(&x).unwrap();
        let mut a = ferroflow_graph::Attrs::new();
        a.insert("T".into(), attr::dtype(ferroflow_tensor::DType::Float));
        a.insert("strides".into(), attr::ints(&[1, 1, 1, 1]));
        a.insert("padding".into(), attr::string("SAME"));
        let c = Output { node: s.add_op("Conv2D", "conv", &[xo, p[0]], &[], a).unwrap(), index: 0 };
        let h = s.relu(s.bias_add(c, p[1]).unwrap()).unwrap();
        s.reduce("Mean", h, &[0, 1, 2, 3], false).unwrap()
    });
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.as_ref().unwrap().as_slice::<f32>().unwrap(), w.as_slice::<f32>().unwrap());
    }
}

#[test]
fn watch_persistent_and_stop_recording() {
    let x = Tensor::scalar(3.0f32);
    let unwatched = Tensor::scalar(5.0f32);
    let tape = GradientTape::new();
    tape.watch(&x);
    let y = Eager.mul(Eager.mul(&x, &x).unwrap(), &unwatched).unwrap(); // 5 x^2
    let g = tape.gradient(&y, &[&x, &unwatched]).unwrap();
    assert_eq!(g[0].as_ref().unwrap().scalar_value::<f32>().unwrap(), 30.0);
    assert!(g[1].is_none(), "not watched");
    let e = tape.gradient(&y, &[&x]).unwrap_err().to_string();
    assert!(e.contains("persistent"), "{e}");

    let tape = GradientTape::persistent();
    tape.watch(&x);
    let y = Eager.mul(&x, &x).unwrap();
    let z = {
        let _paused = tape.stop_recording();
        Eager.mul(&y, 2.0f32).unwrap()
    };
    let w = Eager.add_v2(&y, &x).unwrap();
    assert_eq!(tape.gradient(&w, &[&x]).unwrap()[0].as_ref().unwrap().scalar_value::<f32>().unwrap(), 7.0);
    assert_eq!(tape.gradient(&y, &[&x]).unwrap()[0].as_ref().unwrap().scalar_value::<f32>().unwrap(), 6.0);
    let e = tape.gradient(&z, &[&x]).unwrap_err().to_string();
    assert!(e.contains("not computed on this tape"), "{e}");
    // A reshape shares its input's buffer: the tape still tells the two apart.
    let v = Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let tape = GradientTape::new();
    tape.watch(&v);
    let r = Eager.reshape(&v, &[4i64]).unwrap();
    let squares = Eager.reduce("Sum", Eager.mul(&r, &r).unwrap(), &[0], false).unwrap();
    let loss = Eager.add_v2(squares, Eager.reduce("Sum", &v, &[0, 1], false).unwrap()).unwrap();
    let g = tape.gradient(&loss, &[&v]).unwrap().remove(0).unwrap();
    assert_eq!(g.dims(), &[2, 2]);
    assert_eq!(g.as_slice::<f32>().unwrap(), &[3.0, 5.0, 7.0, 9.0]);
}

#[test]
fn nested_tapes_give_second_derivatives() {
    let x = Tensor::scalar(2.0f32);
    let outer = GradientTape::new();
    outer.watch(&x);
    let dy_dx = {
        let inner = GradientTape::new();
        inner.watch(&x);
        let y = Eager.mul(Eager.mul(&x, &x).unwrap(), &x).unwrap(); // x^3
        inner.gradient(&y, &[&x]).unwrap().remove(0).unwrap()
    };
    assert_eq!(dy_dx.scalar_value::<f32>().unwrap(), 12.0); // 3 x^2
    let d2 = outer.gradient(&dy_dx, &[&x]).unwrap().remove(0).unwrap();
    assert_eq!(d2.scalar_value::<f32>().unwrap(), 12.0); // 6 x
}

#[test]
fn trainable_variables_are_watched_and_an_eager_training_loop_learns() {
    use ferroflow_function::Variable;
    // Fit y = 2x + 1 by gradient descent, written eagerly with a tape.
    let x = Tensor::from_vec(&[8, 1], (0..8).map(|i| i as f32 / 4.0).collect()).unwrap();
    let y = Tensor::from_vec(&[8, 1], (0..8).map(|i| 2.0 * i as f32 / 4.0 + 1.0).collect()).unwrap();
    let w = Variable::new("w", Tensor::from_vec(&[1, 1], vec![0.0f32]).unwrap());
    let b = Variable::new("b", Tensor::from_vec(&[1], vec![0.0f32]).unwrap());
    let frozen = Variable::non_trainable("frozen", Tensor::scalar(1.0f32));
    let lr = Tensor::scalar(0.1f32);
    let mut last = f32::MAX;
    for _ in 0..300 {
        let tape = GradientTape::new();
        let (wv, bv, fv) = (w.read(), b.read(), frozen.read());
        let pred = Eager.mul(Eager.add_v2(Eager.mat_mul(&x, &wv).unwrap(), &bv).unwrap(), &fv).unwrap();
        let err = Eager.sub(pred, &y).unwrap();
        let loss = Eager.reduce("Mean", Eager.mul(&err, &err).unwrap(), &[0, 1], false).unwrap();
        let g = tape.gradient(&loss, &[&wv, &bv, &fv]).unwrap();
        assert!(g[2].is_none(), "a non-trainable variable is not watched");
        w.assign_sub(&Eager.mul(g[0].as_ref().unwrap(), &lr).unwrap()).unwrap();
        b.assign_sub(&Eager.mul(g[1].as_ref().unwrap(), &lr).unwrap()).unwrap();
        last = loss.scalar_value::<f32>().unwrap();
    }
    assert!(last < 1e-4, "loss {last}");
    let (wv, bv) = (w.read(), b.read());
    assert!(
        (wv.as_slice::<f32>().unwrap()[0] - 2.0).abs() < 0.02 && (bv.as_slice::<f32>().unwrap()[0] - 1.0).abs() < 0.02
    );
    let e = w.assign(Tensor::scalar(1.0f32)).unwrap_err().to_string();
    assert!(e.contains("AssignVariableOp") && e.contains('w'), "{e}");
}
