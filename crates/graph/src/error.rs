use ferroflow_tensor::DType;

/// An op a graph uses that ferroflow does not define: the nodes using it, whether TensorFlow
/// defines it, and the closest op name ferroflow has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownOp {
    /// The op type as written.
    pub op: String,
    /// The nodes that use it.
    pub nodes: Vec<String>,
    /// What the op registry knows of the name.
    pub hint: UnknownOpHint,
}

/// What is known of an op name ferroflow does not define ([`crate::OpSignatures::unknown_op_hint`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnknownOpHint {
    /// `Some(true)` when TensorFlow's op registry has the op (ferroflow lacks it), `Some(false)`
    /// when TensorFlow does not have it either (a typo, a custom op), `None` when unknown.
    pub in_tensorflow: Option<bool>,
    /// The registered op whose name is closest, if one is close.
    pub nearest: Option<String>,
}

impl std::fmt::Display for UnknownOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes: Vec<String> = self.nodes.iter().map(|n| format!("'{n}'")).collect();
        write!(f, "'{}' (node{} {}", self.op, if nodes.len() > 1 { "s" } else { "" }, nodes.join(", "))?;
        match self.hint.in_tensorflow {
            Some(true) => write!(f, "; TensorFlow has this op, ferroflow does not yet")?,
            Some(false) => write!(f, "; not a TensorFlow op either (a custom op?)")?,
            None => {}
        }
        if let Some(n) = &self.hint.nearest {
            write!(f, "; nearest ferroflow op: '{n}'")?;
        }
        write!(f, ")")
    }
}

/// An invalid graph, node or tensor name. Every variant names the node or tensor at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// Two nodes share a name.
    #[error("duplicate node name '{0}'")]
    DuplicateNode(String),
    /// Ops with no definition: each op with the nodes that use it and what is known of it.
    #[error("unknown op(s): {}", .0.iter().map(UnknownOp::to_string).collect::<Vec<_>>().join("; "))]
    UnknownOps(Vec<UnknownOp>),
    /// An input names a node that does not exist.
    #[error("node '{node}': input '{input}' names a node that does not exist")]
    MissingInput {
        /// The consuming node.
        node: String,
        /// The input as written.
        input: String,
    },
    /// An input string that is not `name`, `name:N` or `^name`.
    #[error("node '{node}': malformed input '{input}' (expected 'name', 'name:N' or '^name')")]
    MalformedInput {
        /// The consuming node.
        node: String,
        /// The input as written.
        input: String,
    },
    /// An input names an output index the producer does not have.
    #[error("node '{node}': input '{input}' does not exist (the producer has {outputs} output(s))")]
    BadOutputIndex {
        /// The consuming node.
        node: String,
        /// The input as written.
        input: String,
        /// How many outputs the producer has.
        outputs: usize,
    },
    /// Wrong number of data inputs for the op.
    #[error("node '{node}' ({op}): expected {expected} data input(s), got {got}")]
    InputCount {
        /// The node.
        node: String,
        /// Its op.
        op: String,
        /// Inputs the op signature requires.
        expected: usize,
        /// Inputs given.
        got: usize,
    },
    /// An input whose dtype does not match the op signature.
    #[error("node '{node}' ({op}): input {index} ('{input}') is {got}, expected {expected}")]
    InputType {
        /// The node.
        node: String,
        /// Its op.
        op: String,
        /// The input position.
        index: usize,
        /// The input as written.
        input: String,
        /// Required dtype.
        expected: DType,
        /// Actual dtype.
        got: DType,
    },
    /// The op's shape function rejects the node's input shapes or attrs.
    #[error("node '{node}' ({op}): {source}")]
    Shape {
        /// The node.
        node: String,
        /// Its op.
        op: String,
        /// What does not fit.
        source: ShapeError,
    },
    /// Attrs missing or invalid for the op.
    #[error("node '{node}' ({op}): {source}")]
    BadAttrs {
        /// The node.
        node: String,
        /// Its op.
        op: String,
        /// What is wrong.
        source: AttrError,
    },
    /// A cycle not formed by a loop construct.
    #[error("the graph has a cycle through node(s) {}", .0.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", "))]
    Cycle(Vec<String>),
    /// A tensor name that is not `name` or `name:N`.
    #[error("malformed tensor name '{0}' (expected 'name' or 'name:N')")]
    BadTensorName(String),
    /// A node name the graph does not have.
    #[error("the graph has no node named '{0}'")]
    NoSuchNode(String),
    /// An output index past a node's outputs.
    #[error("node '{node}' ({op}) has {outputs} output(s)")]
    NoSuchOutput {
        /// The node.
        node: String,
        /// Its op.
        op: String,
        /// How many outputs it has.
        outputs: usize,
    },
    /// A GraphDef version this build cannot consume.
    #[error("GraphDef versions: {0}")]
    Version(String),
}

/// Why an op's shape function rejects a node: what its input shapes or attrs are and what the
/// op needs (`input 'a' must be a matrix, got shape [2, 3, 4]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ShapeError {
    /// What does not fit.
    pub reason: String,
}

impl ShapeError {
    /// A shape error saying `reason`.
    pub fn new(reason: impl Into<String>) -> ShapeError {
        ShapeError { reason: reason.into() }
    }
}

impl From<String> for ShapeError {
    fn from(reason: String) -> Self {
        ShapeError { reason }
    }
}

impl From<&str> for ShapeError {
    fn from(reason: &str) -> Self {
        ShapeError { reason: reason.to_string() }
    }
}

/// Why a node's attrs do not fit its op's signature: an attr missing, of the wrong kind, or
/// outside what the op allows (`attr 'T' is int32, which is not one of {float, double}`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct AttrError {
    /// What does not fit.
    pub reason: String,
}

impl From<String> for AttrError {
    fn from(reason: String) -> Self {
        AttrError { reason }
    }
}

impl From<&str> for AttrError {
    fn from(reason: &str) -> Self {
        AttrError { reason: reason.to_string() }
    }
}

impl From<AttrError> for ShapeError {
    fn from(e: AttrError) -> Self {
        ShapeError { reason: e.reason }
    }
}
