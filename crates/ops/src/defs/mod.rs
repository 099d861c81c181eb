//! Every op ferroflow knows, by family. Each family file holds its ops' definitions
//! (TensorFlow's names, argument names and attrs), facts, shape functions and gradient
//! functions; the kernels of family `F` are in `ferroflow-kernels`' `src/F.rs`. The last three
//! families have no kernel file: the runtime runs their ops itself (`control_flow`: the
//! executors; `functional`: function instantiation; `transfer`: the rendezvous).
use crate::registry::OpDef;

pub mod array;
pub mod cast;
pub mod collective;
pub mod compare;
pub mod control_flow;
pub mod conv;
pub mod data;
pub mod einsum;
pub mod elementwise;
pub mod functional;
pub mod fused;
pub mod grad;
pub mod image;
pub mod indexing;
pub mod io;
pub mod list;
pub mod logging;
pub mod loss;
pub mod math;
pub mod matmul;
pub mod optional;
pub mod parsing;
pub mod random;
pub mod reduce;
pub mod resource;
pub mod select;
pub mod training;
pub mod transfer;

/// A family's name and its definitions.
type Family = (&'static str, fn() -> Vec<OpDef>);

/// All op definitions, each tagged with its family.
pub(crate) fn all() -> Vec<OpDef> {
    let families: [Family; 28] = [
        ("array", array::defs),
        ("cast", cast::defs),
        ("collective", collective::defs),
        ("compare", compare::defs),
        ("control_flow", control_flow::defs),
        ("conv", conv::defs),
        ("data", data::defs),
        ("einsum", einsum::defs),
        ("elementwise", elementwise::defs),
        ("functional", functional::defs),
        ("fused", fused::defs),
        ("grad", grad::defs),
        ("image", image::defs),
        ("indexing", indexing::defs),
        ("io", io::defs),
        ("logging", logging::defs),
        ("loss", loss::defs),
        ("math", math::defs),
        ("matmul", matmul::defs),
        ("list", list::defs),
        ("optional", optional::defs),
        ("parsing", parsing::defs),
        ("random", random::defs),
        ("reduce", reduce::defs),
        ("resource", resource::defs),
        ("select", select::defs),
        ("training", training::defs),
        ("transfer", transfer::defs),
    ];
    let mut out = Vec::new();
    for (family, defs) in families {
        out.extend(defs().into_iter().map(|mut d| {
            d.family = family;
            d
        }));
    }
    out
}
