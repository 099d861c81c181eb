//! What an op is, beyond its signature: facts declared once with the op's definition (as
//! TensorFlow's `OpDef` carries `is_stateful` and `is_commutative`, and registers gradients
//! and `NotDifferentiable` beside the op), read through the registry by the optimizer, the
//! runtime, autodiff and the kernels. Nothing outside an op's definition keeps a list of op
//! names to answer these questions.
pub use crate::defs::elementwise::{BinaryFn, UnaryFn};
use crate::gradient::GradFn;

/// Who runs an op's nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Execution {
    /// A CPU kernel from the kernel registry (`ferroflow-kernels`).
    Kernel,
    /// The executor itself: TensorFlow 1 control flow (frames and dead tokens).
    ControlFlow(ControlFlow),
    /// The runtime instantiates and runs functions of the graph's library.
    Call(CallKind),
    /// The runtime's rendezvous between the partitions of a step.
    Transfer(Transfer),
}

/// The role of a TensorFlow 1 control-flow op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlFlow {
    /// Forwards its data to output 0 (predicate false) or 1 (true); the other output is dead.
    Switch,
    /// Forwards the first live input, with its index.
    Merge,
    /// Enters a loop frame.
    Enter,
    /// Leaves a loop frame.
    Exit,
    /// Carries a value to the next iteration (the source of a loop's back edge).
    NextIteration,
    /// The loop's predicate.
    LoopCond,
}

impl ControlFlow {
    /// True for the ops that exist only inside loops (`Enter`, `Exit`, `NextIteration`,
    /// `LoopCond`): plans with them need the frame-aware executor. `Switch` and `Merge` alone
    /// (conditionals) run on the parallel executor.
    pub fn is_loop(self) -> bool {
        !matches!(self, ControlFlow::Switch | ControlFlow::Merge)
    }
}

/// How an op calls functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// Runs the function named by attr `f` (`PartitionedCall`) once. A node whose op is a
    /// library function's name is a call too.
    Call,
    /// Runs `then_branch` or `else_branch` by its predicate (`If`).
    If,
    /// Runs `body` while `cond` holds (`While`).
    While,
}

/// The ends of a transfer: between the partitions of a step, and between a partition and the
/// client (how TensorFlow's partition graphs show feeds and fetches).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// `_Send`: hands a tensor to the rendezvous.
    Send,
    /// `_Recv`: takes it out on the receiving device.
    Recv,
    /// `_Arg`: a feed entering a partition.
    Arg,
    /// `_Retval`: a fetch leaving a partition.
    Retval,
}

/// An elementwise op: one output element from the elements at the same (broadcast) index of
/// each input, through a scalar function, with no attrs besides `T`. Such ops are fused into
/// `_FusedElementwise` programs (float types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elementwise {
    /// `y = f(x)`.
    Unary(UnaryFn),
    /// `z = f(x, y)`.
    Binary(BinaryFn),
}

impl Elementwise {
    /// The number of inputs.
    pub fn arity(self) -> usize {
        match self {
            Elementwise::Unary(_) => 1,
            Elementwise::Binary(_) => 2,
        }
    }
}

/// A constant operand that leaves the other operand unchanged, exactly (in IEEE arithmetic
/// for floats, including ±0, ±inf and NaN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Neutral {
    /// One (`x * 1`, `x / 1`).
    One,
    /// Negative zero for floats, zero for integers (`x + (-0.0)`: `+0 + +0 = +0` but
    /// `-0 + +0 = +0`, so only `-0` is neutral).
    NegZero,
    /// Positive zero for floats, zero for integers (`x - (+0.0)`).
    PosZero,
}

/// Which operand may be a [`Neutral`] constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Either (`1 * x` and `x * 1`).
    Both,
    /// Only the right one (`x - 0`, `x / 1`).
    Right,
}

/// How `f(f(x))` relates to `x`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Involution {
    /// Exactly `x` (`Neg(Neg(x))`).
    Exact,
    /// `x` up to rounding (`Reciprocal(Reciprocal(x))`): only rewritten when inexact float
    /// rewrites are allowed.
    Inexact,
}

/// How a gradient passes through an op.
#[derive(Clone, Copy, Debug)]
pub enum Gradient {
    /// The gradient function.
    Function(GradFn),
    /// No gradient flows through the op (TensorFlow's `NotDifferentiable`): its inputs get no
    /// gradient from it. The reason says why.
    NotDifferentiable(&'static str),
    /// Autodiff differentiates the op through the functions it calls (`While`, `If`,
    /// `PartitionedCall`), building their gradients as library functions.
    ThroughFunctions,
    /// TensorFlow differentiates the op but ferroflow has no gradient function for it yet:
    /// `gradients` through it fails, naming the node and this reason.
    Unavailable(&'static str),
}

/// A TensorFlow 1 ref-variable op that ferroflow runs as this op (see [`crate::ref_vars`]):
/// its first `refs` inputs are references to variables, which become resource handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefForm {
    /// The TF1 op (`ApplyAdam`).
    pub op: &'static str,
    /// How many leading inputs are refs.
    pub refs: usize,
}

/// Everything the registry knows about an op besides its signature and shape function.
#[derive(Clone, Debug)]
pub struct OpFacts {
    /// Running it matters beyond its outputs, or its outputs are not a function of its inputs
    /// (TensorFlow's `is_stateful`): never folded, merged or pruned away while needed.
    pub stateful: bool,
    /// Its value comes from the caller (a feed): kept by every pass, so the graph stays
    /// feedable, although it has no side effects (TensorFlow's placeholders).
    pub placeholder: bool,
    /// Who runs it.
    pub execution: Execution,
    /// Output `i` is input `i`, unchanged (`Identity`, `Snapshot`, `StopGradient`,
    /// `IdentityN`): pruning reads through it.
    pub forwards_input: bool,
    /// With one input, the output is that input (`AddN`): pruning reads through it then.
    pub forwards_single_input: bool,
    /// Its output depends only on its input's shape and dtype, not on its values (`Shape`,
    /// `Size`, `Rank`, `ZerosLike`, `OnesLike`): constant folding folds it when that shape is
    /// statically known, even if the input is not constant.
    pub shape_only: bool,
    /// Its output can be much larger than its inputs (`Fill`, `Tile`, `MatMul`, ...):
    /// constant folding folds it only when the output's size is known to fit.
    pub grows: bool,
    /// A matrix product or convolution (and their fused and gradient forms): a kernel that
    /// splits a large output across the intra-op pool, so the executor keeps the pool's
    /// threads awake through steps that have large ones.
    pub contraction: bool,
    /// Its scalar function, for elementwise ops.
    pub elementwise: Option<Elementwise>,
    /// It can be the activation of `_FusedMatMul` / `_FusedConv2D` (`fused_ops` names it).
    pub activation: bool,
    /// `f(x, y) = f(y, x)` (TensorFlow's `is_commutative`).
    pub commutative: bool,
    /// Identity element and the side it may stand on.
    pub neutral: Option<(Neutral, Side)>,
    /// `f(f(x))` is `x`.
    pub involution: Option<Involution>,
    /// How gradients pass through it (`None` only while undeclared: a registry test requires
    /// every op to declare one).
    pub gradient: Option<Gradient>,
    /// TF1 ref-variable ops that are this op with refs.
    pub ref_forms: Vec<RefForm>,
    /// Its `shared_name` attr names session state (a variable): importing a graph under a
    /// scope moves that name under the scope too.
    pub owns_shared_state: bool,
    /// An optimizer's update (`ResourceApplyAdam`): input 0 is the variable being trained,
    /// the other resource inputs are its slots (Keras's trainable weights are input 0s).
    pub optimizer_update: bool,
}

impl Default for OpFacts {
    fn default() -> Self {
        OpFacts {
            stateful: false,
            placeholder: false,
            execution: Execution::Kernel,
            forwards_input: false,
            forwards_single_input: false,
            shape_only: false,
            grows: false,
            contraction: false,
            elementwise: None,
            activation: false,
            commutative: false,
            neutral: None,
            involution: None,
            gradient: None,
            ref_forms: Vec::new(),
            owns_shared_state: false,
            optimizer_update: false,
        }
    }
}

impl OpFacts {
    /// True if no pass may remove, merge or fold its nodes on its own account: stateful ops
    /// and placeholders (TensorFlow's `IsFreeOfSideEffect` negated).
    pub fn has_side_effects(&self) -> bool {
        self.stateful || self.placeholder
    }

    /// Its TensorFlow 1 control-flow role, if any.
    pub fn control_flow(&self) -> Option<ControlFlow> {
        match self.execution {
            Execution::ControlFlow(c) => Some(c),
            _ => None,
        }
    }

    /// Its end of a transfer, if it is one.
    pub fn transfer(&self) -> Option<Transfer> {
        match self.execution {
            Execution::Transfer(t) => Some(t),
            _ => None,
        }
    }

    /// How it calls functions, if it does.
    pub fn call(&self) -> Option<CallKind> {
        match self.execution {
            Execution::Call(c) => Some(c),
            _ => None,
        }
    }
}
