//! SavedModels of what crosses crates: a traced function (`ferroflow-function`) written
//! through the SavedModel writer of `ferroflow-train`, which cannot see functions.
use std::path::Path;

use ferroflow_function::ConcreteFunction;
use ferroflow_train::saved_model::{SavedModelWriter, SignatureSpec};
use ferroflow_train::{Result, TrainError};

/// Writes concrete function `f` as a SavedModel whose `serving_default` signature takes the
/// function's arguments (keys: `arg_names`, else the function's own argument names, else the
/// placeholders' names) and returns its
/// results as `output_0`, `output_1`, … (TensorFlow's keys for a `tf.function` returning a
/// tuple). TensorFlow runs it with `tf.saved_model.load(dir).signatures["serving_default"]`.
/// A function that captures variables is refused (its variables would need a saver).
pub fn save_function(f: &ConcreteFunction, dir: &Path, arg_names: Option<&[&str]>) -> Result<()> {
    if f.captured_variables() > 0 {
        return Err(TrainError::Invalid(format!(
            "the function captures {} variable(s); exporting a function with variables is not supported yet",
            f.captured_variables()
        )));
    }
    let (inputs, outputs) = f.names();
    if let Some(names) = arg_names {
        if names.len() != inputs.len() {
            return Err(TrainError::Invalid(format!(
                "{} argument names for a function of {} arguments",
                names.len(),
                inputs.len()
            )));
        }
    }
    let keys: Vec<String> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| match arg_names {
            Some(n) => n[i].to_string(),
            None if f.arg_names().len() == inputs.len() => f.arg_names()[i].clone(),
            None => t.split(':').next().unwrap_or(t).to_string(),
        })
        .collect();
    let out_keys: Vec<String> = (0..outputs.len()).map(|i| format!("output_{i}")).collect();
    let pairs =
        |k: &[String], t: &[String]| -> Vec<(String, String)> { k.iter().cloned().zip(t.iter().cloned()).collect() };
    let spec = SignatureSpec {
        name: "serving_default".into(),
        inputs: pairs(&keys, inputs),
        outputs: pairs(&out_keys, outputs),
    };
    SavedModelWriter::new(f.graph_def()).signature(spec).save(dir, None)
}
