//! Keras's sequence layers: recurrent (`SimpleRNN`, `LSTM`, `GRU`, `Bidirectional`, with
//! masks) and attention (`MultiHeadAttention`).
use ferroflow_graph::Output;
use ferroflow_ops::Scope;

use crate::config::{Call, LayerSpec};
use crate::layers::{Mode, Net};
use crate::Result;

/// The layers this module builds; `None` for other classes.
pub fn call(
    _net: &Net,
    _l: &LayerSpec,
    _path: &[String],
    _s: &Scope,
    _inputs: &[Output],
    _call: &Call,
    _mode: Mode,
) -> Option<Result<Vec<Output>>> {
    None
}
