//! SavedModels written by TensorFlow load and run by their signatures
//! (`scripts/make_saved_model_fixtures.py`): a Keras 3 `model.export()` MLP gives TensorFlow's
//! `serving_default` outputs, from 8 threads at once bit for bit the same; bad input is a
//! one-line error that lists what there is.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ferroflow::prelude::*;
use ferroflow::tensor::npy;
use ferroflow::train::saved_model::SavedModel;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/saved_model")
}

fn expected() -> HashMap<String, Tensor> {
    npz("keras_mlp")
}

fn npz(name: &str) -> HashMap<String, Tensor> {
    npy::read_npz(&fixtures().join(format!("{name}.npz"))).unwrap().into_iter().collect()
}

fn close(a: &Tensor, b: &Tensor) {
    assert_eq!(a.dims(), b.dims());
    if a.dtype() != DType::Float {
        assert_eq!(a, b);
        return;
    }
    for (x, y) in a.as_slice::<f32>().unwrap().iter().zip(b.as_slice::<f32>().unwrap()) {
        assert!((x - y).abs() <= 1e-5 * y.abs().max(1e-3), "{x} vs TensorFlow's {y}");
    }
}

/// Each TensorFlow-written SavedModel: its `serving_default` called with the fixture's inputs
/// gives TensorFlow's outputs.
#[test]
fn every_kind_of_tensorflow_saved_model_gives_tensorflow_s_outputs() {
    let cases: [(&str, &[&str], &[&str]); 4] = [
        ("keras_mlp", &["x:keras_tensor"], &["output_0"]),
        ("keras_cnn", &["x:keras_tensor"], &["output_0"]),
        ("module_loop", &["x:x", "n:n"], &["y", "steps"]),
        ("tf1_builder", &["x:x"], &["scores"]),
    ];
    for (name, inputs, outputs) in cases {
        let want = npz(name);
        let m = SavedModel::load(&fixtures().join(name), &["serve"], SessionOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let feeds: Vec<(&str, Tensor)> = inputs
            .iter()
            .map(|s| {
                let (file_key, sig_key) = s.split_once(':').unwrap();
                (sig_key, want[file_key].clone())
            })
            .collect();
        let out = m.call("serving_default", &feeds, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out.len(), outputs.len(), "{name}");
        for k in outputs {
            close(&out[*k], &want[*k]);
        }
    }
}

#[test]
fn a_keras_export_runs_its_serving_signature_as_tensorflow_does() {
    let want = expected();
    let m = SavedModel::load(&fixtures().join("keras_mlp"), &["serve"], SessionOptions::default()).unwrap();
    let names: Vec<&str> = m.signatures().keys().map(String::as_str).collect();
    assert_eq!(names, ["serve", "serving_default"]);
    let sig = m.signature("serving_default").unwrap();
    assert_eq!(sig.inputs[0].key, "keras_tensor");
    assert_eq!(sig.inputs[0].shape.dims(), Some(&[None, Some(4)][..]), "the batch dimension is unknown");
    let out = m.call("serving_default", &[("keras_tensor", want["x"].clone())], &[]).unwrap();
    close(&out["output_0"], &want["output_0"]);
    // A batch of another size is accepted (the signature's batch dimension is unknown).
    let one = Tensor::from_vec(&[1, 4], want["x"].as_slice::<f32>().unwrap()[..4].to_vec()).unwrap();
    let out1 = m.call("serving_default", &[("keras_tensor", one)], &["output_0"]).unwrap();
    close(
        &out1["output_0"],
        &Tensor::from_vec(&[1, 3], want["output_0"].as_slice::<f32>().unwrap()[..3].to_vec()).unwrap(),
    );

    // Eight threads call the same signature at once: the same bits as one call.
    let alone = out["output_0"].as_slice::<f32>().unwrap().to_vec();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    (0..20)
                        .map(|_| {
                            let o = m.call("serving_default", &[("keras_tensor", want["x"].clone())], &[]).unwrap();
                            o["output_0"].as_slice::<f32>().unwrap().to_vec()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for got in h.join().unwrap() {
                assert_eq!(got, alone);
            }
        }
    });
}

#[test]
fn bad_input_is_a_one_line_error_listing_what_there_is() {
    let dir = fixtures().join("keras_mlp");
    let m = SavedModel::load(&dir, &["serve"], SessionOptions::default()).unwrap();
    let x = expected()["x"].clone();
    let e = m.call("predict", &[("keras_tensor", x.clone())], &[]).err().unwrap().to_string();
    assert!(e.contains("no signature 'predict'") && e.contains("serve, serving_default"), "{e}");
    let e = m.call("serving_default", &[("inputs", x.clone())], &[]).err().unwrap().to_string();
    assert!(e.contains("no input 'inputs'; its inputs: keras_tensor"), "{e}");
    let wrong = Tensor::from_vec(&[2, 3], vec![0.0f32; 6]).unwrap();
    let e = m.call("serving_default", &[("keras_tensor", wrong)], &[]).err().unwrap().to_string();
    assert!(e.contains("input 'keras_tensor' is float32[2, 3], the signature wants float32[?, 4]"), "{e}");
    let e = m.call("serving_default", &[("keras_tensor", x)], &["logits"]).err().unwrap().to_string();
    assert!(e.contains("no output 'logits'; its outputs: output_0"), "{e}");
    assert!(!e.contains('\n'));

    let e = SavedModel::load(&dir, &["train"], SessionOptions::default()).err().unwrap().to_string();
    assert!(e.contains("no meta graph with the tags [train]; it has [serve]"), "{e}");
    // A copy without variables/.
    let tmp = std::env::temp_dir().join(format!("ff_sm_novars_{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::copy(dir.join("saved_model.pb"), tmp.join("saved_model.pb")).unwrap();
    let e = SavedModel::load(&tmp, &["serve"], SessionOptions::default()).err().unwrap().to_string();
    assert!(e.contains("no variables/variables.index"), "{e}");
    let e = SavedModel::load(&tmp.join("nothing"), &["serve"], SessionOptions::default()).err().unwrap().to_string();
    assert!(e.contains("not a SavedModel directory"), "{e}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn a_saved_model_with_ops_ferroflow_cannot_run_lists_every_one() {
    let e = SavedModel::load(&fixtures().join("unsupported_ops"), &["serve"], SessionOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("uses 2 ops ferroflow cannot run: BesselI0e (function '__inference___call___"), "{e}");
    assert!(e.contains("node 'bessel_i0e/BesselI0e'); MatrixDeterminant (function"), "{e}");
    assert!(!e.contains('\n'), "{e}");
}

/// An estimator-style TF1 export for TensorFlow Serving (version directory `1/`): serialized
/// `tf.train.Example`s parsed by `ParseExampleV2` into a linear model, with `classification`,
/// `regression` and predict `serving_default` signatures, each giving TensorFlow's outputs;
/// an example without the required feature is an error naming it.
#[test]
fn classify_and_regress_signatures_parse_examples_as_tensorflow_does() {
    let want = npz("classify_regress");
    let m = SavedModel::load(&fixtures().join("classify_regress/1"), &["serve"], SessionOptions::default()).unwrap();
    let names: Vec<&str> = m.signatures().keys().map(String::as_str).collect();
    assert_eq!(names, ["classification", "regression", "serving_default"]);
    let examples = want["serialized"].clone();
    assert_eq!(examples.dims(), [3]);
    let out = m.call("classification", &[("inputs", examples.clone())], &[]).unwrap();
    assert_eq!(out["classes"], want["classes"]);
    close(&out["scores"], &want["scores"]);
    let out = m.call("regression", &[("inputs", examples.clone())], &[]).unwrap();
    close(&out["outputs"], &want["outputs"]);
    let out = m.call("serving_default", &[("examples", examples.clone())], &[]).unwrap();
    assert_eq!(out["classes"], want["classes"]);
    close(&out["scores"], &want["scores"]);
    close(&out["outputs"], &want["outputs"]);
    // One example alone, as a batch of one.
    let one = Tensor::from_strings(&[1], vec![examples.as_strings().unwrap()[1].clone()]).unwrap();
    let out = m.call("regression", &[("inputs", one)], &[]).unwrap();
    close(&out["outputs"], &Tensor::from_vec(&[1, 1], vec![want["outputs"].as_slice::<f32>().unwrap()[1]]).unwrap());
    // An empty Example lacks the required feature "x".
    let empty = Tensor::from_strings(&[2], vec![examples.as_strings().unwrap()[0].clone(), Vec::new()]).unwrap();
    let e = m.call("classification", &[("inputs", empty)], &[]).err().unwrap().to_string();
    assert!(e.contains("Feature: x (data type: float) is required but could not be found"), "{e}");
}

/// `ferroflow::train::saved_model_show::show_all` prints what TensorFlow's `saved_model_cli show
/// --all` printed for each fixture (`*.cli.txt`), the op set compared as a set (Python prints
/// it in hash order).
#[test]
fn show_all_prints_what_saved_model_cli_prints() {
    let ops_line = |l: &str| l.starts_with("The MetaGraph with tag set");
    let op_set = |l: &str| -> std::collections::BTreeSet<String> {
        let set = l.split_once(": ").unwrap().1.trim_matches(|c| c == '{' || c == '}');
        set.split(", ").map(|s| s.trim_matches('\'').to_string()).collect()
    };
    for name in ["keras_mlp", "keras_cnn", "module_loop", "tf1_builder", "classify_regress"] {
        let want = std::fs::read_to_string(fixtures().join(format!("{name}.cli.txt"))).unwrap();
        let dir = if name == "classify_regress" { fixtures().join(name).join("1") } else { fixtures().join(name) };
        let got = ferroflow::train::saved_model_show::show_all(&dir).unwrap();
        let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
        assert_eq!(w.len(), g.len(), "{name}: line count\n{got}");
        for (a, b) in w.iter().zip(&g) {
            if ops_line(a) {
                assert_eq!(a.split_once(": ").unwrap().0, b.split_once(": ").unwrap().0, "{name}");
                assert_eq!(op_set(a), op_set(b), "{name}");
            } else {
                assert_eq!(a, b, "{name}");
            }
        }
    }
}

/// A `Sequential` model trained a few steps, exported, loaded back: `serving_default` gives
/// what the model's own session gives (`is_training` false is the written graph's default).
/// Writing into a directory that is not empty is refused, and leaves it as it was.
#[test]
fn a_sequential_model_exports_and_loads_back() {
    use ferroflow::train::layers::Activation;
    use ferroflow::train::model::{Layer, Loss, Sequential};
    use ferroflow::train::optimizers::Optimizer;
    let model = Sequential::new(&[4])
        .seed(3)
        .push(Layer::dense(8, Activation::Relu))
        .push(Layer::dense(3, Activation::Softmax))
        .compile(Loss::SparseCategoricalCrossentropy, &Optimizer::adam(1e-2), SessionOptions::default())
        .unwrap();
    let x = Tensor::from_vec(&[8, 4], (0..32).map(|i| ((i * 7) % 11) as f32 / 11.0).collect()).unwrap();
    let y = Tensor::from_vec(&[8], (0..8).map(|i| i % 3).collect::<Vec<i64>>()).unwrap();
    for step in 0..5 {
        model.train_step(x.clone(), y.clone(), step).unwrap();
    }
    let roles = model.roles();
    let want = model
        .session()
        .run(
            &[(roles.inputs.as_str(), x.clone()), ("is_training:0", Tensor::scalar(false))],
            &[roles.predictions.as_deref().unwrap()],
            &[],
        )
        .unwrap();
    let dir = std::env::temp_dir().join(format!("ff_sm_seq_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    model.export_saved_model(&dir).unwrap();
    let m = SavedModel::load(&dir, &["serve"], SessionOptions::default()).unwrap();
    let got = m.call("serving_default", &[("inputs", x)], &["predictions"]).unwrap();
    assert_eq!(got["predictions"], want[0], "the loaded model's predictions are the trained model's");
    let e = model.export_saved_model(&dir).err().unwrap().to_string();
    assert!(e.contains("already exists and is not empty"), "{e}");
    assert!(dir.join("saved_model.pb").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A traced function with a while loop exports as a SavedModel keyed by its argument names,
/// and loads back to the same results.
#[test]
fn a_traced_function_exports_and_loads_back() {
    let (_, collatz, _) = ferroflow::workflows::traced_functions::functions();
    let f = collatz.concrete_function_keyed(&(), &[Tensor::scalar(27i32)]).unwrap();
    let dir = std::env::temp_dir().join(format!("ff_sm_fn_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    ferroflow::saved_model::save_function(&f, &dir, None).unwrap();
    let m = SavedModel::load(&dir, &["serve"], SessionOptions::default()).unwrap();
    let out = m.call("serving_default", &[("n", Tensor::scalar(97i32))], &[]).unwrap();
    assert_eq!(out["output_0"], Tensor::scalar(118i32));
    std::fs::remove_dir_all(&dir).unwrap();
}
