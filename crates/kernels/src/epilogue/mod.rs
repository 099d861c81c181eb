//! Epilogues: what runs on a block of a contraction's output right after the contraction
//! wrote it, while it is in cache. `+ bias` and an activation (`_FusedMatMul`, `_FusedConv2D`)
//! are [`Activation`] and [`add_bias`]; an elementwise program (`_FusedElementwise`, and the
//! `_FusedConv2DElementwise` / `_FusedDepthwiseConv2dElementwise` epilogues) is [`Program`],
//! run on a convolution's blocks by [`RowEpilogue`].
//!
//! The fused matmul kernels (`fused`) and the convolution kernels (`conv`) both build on this
//! module, which imports neither.
//!
//! Every epilogue computes bit-for-bit what the unfused ops compute: it calls the same scalar
//! functions in the same order (`(x + bias)` then the activation; each elementwise op on the
//! previous op's rounded result).
mod program;

use ferroflow_ops::{Elementwise, OpRegistry, UnaryFn};
use ferroflow_proto::attr_value::Value;
use ferroflow_tensor::Element;

use crate::numeric::Float;
use crate::{invalid, KResult, NodeDesc};

pub(crate) use program::{Program, RowEpilogue};

/// Elements above which fused epilogues and elementwise blocks are split across the pool.
pub(crate) const PARALLEL_MIN: usize = 1 << 15;

/// The activation after `+ bias`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Activation {
    None,
    /// An elementwise op the registry declares a fusible activation.
    Unary(UnaryFn),
    /// `LeakyRelu` with `leakyrelu_alpha`.
    LeakyRelu(f64),
}

fn list_strings(d: &NodeDesc, name: &str) -> Vec<String> {
    match d.def.attr(d.attrs, name).and_then(|v| v.value.as_ref()) {
        Some(Value::List(l)) => l.s.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect(),
        _ => vec![],
    }
}

fn float_attr(d: &NodeDesc, name: &str, default: f64) -> f64 {
    match d.def.attr(d.attrs, name).and_then(|v| v.value.as_ref()) {
        Some(Value::F(f)) => *f as f64,
        _ => default,
    }
}

impl Activation {
    /// Reads `fused_ops`: `[BiasAdd]` or `[BiasAdd, <activation>]`, the activation being an
    /// op the registry declares a fusible activation.
    pub(crate) fn from_fused_ops(d: &NodeDesc) -> KResult<Activation> {
        let ops = list_strings(d, "fused_ops");
        let unsupported = || {
            let activations: Vec<&str> = OpRegistry::global()
                .defs()
                .into_iter()
                .filter(|def| def.facts.activation)
                .map(|def| def.name.as_str())
                .collect();
            invalid(format!(
            "node '{}': {} with fused_ops {ops:?} is not supported (supported: [BiasAdd] optionally followed by one of {})",
            d.name,
            d.def.name,
            activations.join(", ")
        ))
        };
        if ops.first().map(String::as_str) != Some("BiasAdd") || ops.len() > 2 {
            return Err(unsupported());
        }
        if d.int("num_args")? != 1 {
            return Err(invalid(format!("node '{}': {} with BiasAdd needs num_args=1", d.name, d.def.name)));
        }
        let Some(name) = ops.get(1) else { return Ok(Activation::None) };
        let facts = OpRegistry::global().facts(name).filter(|f| f.activation).ok_or_else(unsupported)?;
        Ok(match facts.elementwise {
            Some(Elementwise::Unary(f)) => Activation::Unary(f),
            // The one activation with an attr: `_FusedMatMul` carries it as `leakyrelu_alpha`.
            _ if name == "LeakyRelu" => Activation::LeakyRelu(float_attr(d, "leakyrelu_alpha", 0.2)),
            _ => return Err(unsupported()),
        })
    }
}

/// `v[r, j] = f(v[r, j] + b[j])` over the rows of `v`, on the calling thread.
pub(crate) fn add_bias<T: Float + Element>(v: &mut [T], b: &[T], f: impl Fn(T) -> T) {
    crate::isa::widest(
        #[inline(always)]
        || {
            let c = b.len();
            for row in v.chunks_mut(c) {
                let n = row.len().min(c);
                for j in 0..n {
                    row[j] = f(row[j].add_w(b[j]));
                }
            }
        },
    )
}
