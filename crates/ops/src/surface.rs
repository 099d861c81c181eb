//! The one op surface. Graph building ([`crate::Scope`]), eager execution and tracing (in
//! `ferroflow-function`) each implement [`OpTarget`] — apply an op to inputs with attrs — and
//! get every registered op as a typed method of [`RawOps`], which is generated from the
//! registry (`src/generated.rs`, written by `tests/generated_surface.rs`): one method per op,
//! named as TensorFlow's generated Python wrappers name it (`MatMul` → `mat_mul`, `Conv2D` →
//! `conv2d`, `AddV2` → `add_v2`), with TensorFlow's argument names. Type and count attrs come
//! from the inputs; attrs without a default are arguments; attrs with one are set through
//! the op's setter struct in [`attrs`] (`mat_mul_with(a, b, attrs::MatMul::new().transpose_b(true))`).
//! A new op is callable in every mode once it is registered and the file regenerated.
//!
//! ```
//! use ferroflow_ops::{Ops, RawOps, Scope};
//! let s = Scope::new();
//! let x = s.scalar(3.0f32).unwrap();
//! let y = s.floor_mod(x, 2.0f32).unwrap();
//! assert_eq!(s.graph().node(y.node).op, "FloorMod");
//! ```
use ferroflow_proto::{attr, AttrValue};
use ferroflow_tensor::{DType, Element, Tensor};
use smallvec::SmallVec;

pub use crate::generated::{attrs, RawOps};

/// One argument of a call: a tensor, or a list of them (`values: N * T`).
pub enum Arg<T> {
    /// A single tensor.
    One(T),
    /// A list of tensors.
    List(Vec<T>),
}

/// A call of one op, as the typed methods make it.
pub struct OpCall<'a, T> {
    /// The op (`MatMul`).
    pub op: &'a str,
    /// The node's name in a graph unless the caller names it: TensorFlow's Python name for
    /// the op (`add` for `AddV2`), else the op's name.
    pub name: &'a str,
    /// The inputs in signature order.
    pub inputs: SmallVec<[Arg<T>; 4]>,
    /// The attrs the caller set; type and count attrs are inferred from the inputs, the
    /// others take the op's defaults.
    pub attrs: SmallVec<[(&'static str, AttrValue); 4]>,
}

impl<'a, T> OpCall<'a, T> {
    /// A call of `op` named `name`, without inputs or attrs yet.
    pub fn new(op: &'a str, name: &'a str) -> Self {
        OpCall { op, name, inputs: SmallVec::new(), attrs: SmallVec::new() }
    }
}

/// What applying an op gave: its outputs, and (for graphs) the node that computes them.
pub struct Applied<T, N> {
    /// The op's outputs, flat.
    pub outputs: Vec<T>,
    /// The node (a graph's `NodeId`; `()` where ops run at once).
    pub node: N,
}

/// Somewhere ops can be applied: a graph being built, eager execution, a trace.
pub trait OpTarget {
    /// The tensors its ops take and give.
    type Tensor: Clone;
    /// What an op with no outputs gives (a graph's node, to depend on).
    type Node;
    /// Why a call failed.
    type Error;

    /// Applies one op.
    fn apply(&self, call: OpCall<'_, Self::Tensor>) -> Result<Applied<Self::Tensor, Self::Node>, Self::Error>;

    /// A constant tensor in this target's terms (a `Const` node in a graph).
    fn constant(&self, value: &Tensor) -> Result<Self::Tensor, Self::Error>;

    /// A constant made from a Rust value given as an op's input ([`Input`]).
    fn constant_input(&self, value: &Tensor) -> Result<Self::Tensor, Self::Error> {
        self.constant(value)
    }

    /// The error for an op whose outputs are not what its signature says (`op` gave `got`).
    fn output_count_error(&self, op: &str, got: usize) -> Self::Error;
}

/// A value a typed op method takes as an input: the target's own tensors, or a Rust value
/// (number, slice, [`Tensor`]) that becomes a constant first, as TensorFlow converts Python
/// values to tensors.
pub trait Input<X: OpTarget + ?Sized> {
    /// The input as a tensor of `target`.
    fn into_input(self, target: &X) -> Result<X::Tensor, X::Error>;
}

macro_rules! constant_inputs {
    ($($t:ty),*) => {$(
        impl<X: OpTarget + ?Sized> Input<X> for $t {
            fn into_input(self, target: &X) -> Result<X::Tensor, X::Error> {
                target.constant_input(&Tensor::scalar(self))
            }
        }
        impl<X: OpTarget + ?Sized> Input<X> for &[$t] {
            fn into_input(self, target: &X) -> Result<X::Tensor, X::Error> {
                let t = Tensor::from_vec(&[self.len()], self.to_vec()).expect("a vector's length is its shape");
                target.constant_input(&t)
            }
        }
        impl<X: OpTarget + ?Sized> Input<X> for &Vec<$t> {
            fn into_input(self, target: &X) -> Result<X::Tensor, X::Error> {
                self[..].into_input(target)
            }
        }
        impl<X: OpTarget + ?Sized, const N: usize> Input<X> for &[$t; N] {
            fn into_input(self, target: &X) -> Result<X::Tensor, X::Error> {
                self[..].into_input(target)
            }
        }
    )*};
}
constant_inputs!(f32, f64, i32, i64, bool);

/// The one output of a call whose signature has one.
pub fn single<X: OpTarget + ?Sized>(
    target: &X,
    op: &str,
    a: Applied<X::Tensor, X::Node>,
) -> Result<X::Tensor, X::Error> {
    let n = a.outputs.len();
    let mut outputs = a.outputs;
    match outputs.pop() {
        Some(t) if n == 1 => Ok(t),
        _ => Err(target.output_count_error(op, n)),
    }
}

/// Helpers over [`OpTarget::apply`] that every target shares, as TensorFlow's Python
/// functions sit over its generated wrappers.
pub trait Ops: OpTarget + Sized {
    /// A scalar constant.
    fn scalar<T: Element>(&self, v: T) -> Result<Self::Tensor, Self::Error> {
        self.constant(&Tensor::scalar(v))
    }

    /// A constant of shape `dims` from `values` (as many as the shape holds).
    fn constant_from<T: Element>(&self, dims: &[usize], values: &[T]) -> Result<Self::Tensor, Self::Error>
    where
        Self::Error: From<ferroflow_tensor::TensorError>,
    {
        self.constant(&Tensor::from_slice(dims, values)?)
    }

    /// `tf.matmul(a, b, transpose_a, transpose_b)`: `MatMul` with both transposes set.
    fn matmul(
        &self,
        a: impl Input<Self>,
        b: impl Input<Self>,
        transpose_a: bool,
        transpose_b: bool,
    ) -> Result<Self::Tensor, Self::Error> {
        let mut call = OpCall::new("MatMul", "MatMul");
        call.inputs.push(Arg::One(a.into_input(self)?));
        call.inputs.push(Arg::One(b.into_input(self)?));
        call.attrs.push(("transpose_a", attr::boolean(transpose_a)));
        call.attrs.push(("transpose_b", attr::boolean(transpose_b)));
        let applied = self.apply(call)?;
        single(self, "MatMul", applied)
    }

    /// A reduction (`Sum`, `Mean`, `Max`, ...) of `x` over `axes`.
    fn reduce(
        &self,
        op: &str,
        x: impl Input<Self>,
        axes: &[i32],
        keep_dims: bool,
    ) -> Result<Self::Tensor, Self::Error> {
        let mut call = OpCall::new(op, op);
        call.inputs.push(Arg::One(x.into_input(self)?));
        call.inputs.push(Arg::One(axes.into_input(self)?));
        call.attrs.push(("keep_dims", attr::boolean(keep_dims)));
        call.attrs.push(("Tidx", attr::dtype(DType::Int32)));
        let applied = self.apply(call)?;
        single(self, op, applied)
    }

    /// Any op of one input and one output whose only attr is its type (`Relu`, `Exp`, ...).
    fn unary(&self, op: &str, x: impl Input<Self>) -> Result<Self::Tensor, Self::Error> {
        let mut call = OpCall::new(op, op);
        call.inputs.push(Arg::One(x.into_input(self)?));
        let applied = self.apply(call)?;
        single(self, op, applied)
    }
}

impl<X: OpTarget> Ops for X {}
