//! The op registry: each op is defined once, from a signature written as TensorFlow writes
//! its `REGISTER_OP` (`"a: T"`, `"values: N * T"`, `"transpose_a: bool = false"`,
//! `"T: {float, double}"`), a shape function, its gradient, and its facts ([`OpFacts`]).
//! The definitions live by family in [`crate::defs`].
use std::collections::HashMap;
use std::sync::OnceLock;

use ferroflow_graph::{AttrError, Attrs, NodeTypes, OpSignatures, UnknownOpHint};
use ferroflow_proto::{attr, attr_value, AttrValue, TensorShapeProto};
use ferroflow_tensor::DType;

use crate::facts::{
    CallKind, ControlFlow, Elementwise, Execution, Gradient, Involution, Neutral, OpFacts, RefForm, Side, Transfer,
};
use crate::gradient::GradFn;
use crate::shape_inference::{KnownFn, ShapeFn};

/// Where an argument's dtype(s) come from.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgType {
    /// A fixed dtype (`x: float`).
    Fixed(DType),
    /// The value of a `type` attr (`x: T`).
    TypeAttr(String),
    /// `N` tensors of one type (`values: N * T`); the type is fixed or from an attr.
    Number {
        /// The `int` attr giving the count.
        count_attr: String,
        /// The element type.
        elem: Box<ArgType>,
    },
    /// A list of dtypes from a `list(type)` attr (`input: T` where `T: list(type)`).
    TypeList(String),
}

/// The dtypes of one argument of a call: one tensor's, or a list's.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgDTypes {
    /// A single tensor's dtype.
    One(DType),
    /// A list's dtypes.
    List(Vec<DType>),
}

/// One input or output argument of an op.
#[derive(Clone, Debug, PartialEq)]
pub struct ArgDef {
    /// Argument name (used in FunctionDef references such as `MatMul:product:0`).
    pub name: String,
    /// Its dtype source.
    pub ty: ArgType,
}

/// One attr of an op.
#[derive(Clone, Debug, PartialEq)]
pub struct AttrDef {
    /// Attr name.
    pub name: String,
    /// TensorFlow's attr type string: `type`, `int`, `bool`, `list(type)`, ...
    pub ty: String,
    /// The value used when a node omits the attr.
    pub default: Option<AttrValue>,
    /// For `type` attrs: the allowed dtypes (empty = any).
    pub allowed_types: Vec<DType>,
    /// For `int` and list attrs: the minimum value or length.
    pub minimum: Option<i64>,
    /// For `string` attrs: the allowed values (empty = any).
    pub allowed_strings: Vec<String>,
}

/// An op definition.
#[derive(Clone, Debug)]
pub struct OpDef {
    /// Op type name, e.g. `MatMul`.
    pub name: String,
    /// The family it is defined in (`crate::defs::<family>`; its kernels are in
    /// `ferroflow-kernels`' file of the same name).
    pub family: &'static str,
    /// Inputs in order.
    pub inputs: Vec<ArgDef>,
    /// Outputs in order.
    pub outputs: Vec<ArgDef>,
    /// Attrs.
    pub attrs: Vec<AttrDef>,
    /// Output-shape function.
    pub shape_fn: ShapeFn,
    /// What shape inference learns about the value of output 0 (constants, shapes, handles).
    pub known_fn: Option<KnownFn>,
    /// What the op is: side effects, control flow, fusion, algebra, gradient.
    pub facts: OpFacts,
    /// The name a graph gives its node when the caller gives none, where TensorFlow's Python
    /// API gives another than the op's (`add` for `AddV2`, `truediv` for `RealDiv`).
    pub default_node_name: Option<&'static str>,
}

/// Builds an [`OpDef`] from TensorFlow-style signature strings and declared facts.
pub struct OpBuilder {
    def: OpDef,
}

/// Starts the definition of op `name`.
pub fn op(name: &str) -> OpBuilder {
    OpBuilder {
        def: OpDef {
            name: name.to_string(),
            family: "",
            inputs: vec![],
            outputs: vec![],
            attrs: vec![],
            shape_fn: crate::shape_inference::unknown,
            known_fn: None,
            facts: OpFacts::default(),
            default_node_name: None,
        },
    }
}

impl OpBuilder {
    /// Adds an input: `"name: T"`, `"name: float"`, `"name: N * T"`.
    pub fn input(mut self, spec: &str) -> Self {
        self.def.inputs.push(parse_arg(spec));
        self
    }
    /// Adds an output, same syntax as inputs.
    pub fn output(mut self, spec: &str) -> Self {
        self.def.outputs.push(parse_arg(spec));
        self
    }
    /// Adds an attr: `"T: type"`, `"T: {float, double} = DT_FLOAT"`, `"N: int >= 1"`, ...
    pub fn attr(mut self, spec: &str) -> Self {
        self.def.attrs.push(parse_attr(spec));
        self
    }
    /// Adds several attrs (specs as for [`OpBuilder::attr`]).
    pub fn attrs(mut self, specs: &[&str]) -> Self {
        for s in specs {
            self = self.attr(s);
        }
        self
    }
    /// Sets the shape function.
    pub fn shape(mut self, f: ShapeFn) -> Self {
        self.def.shape_fn = f;
        self
    }
    /// Sets what shape inference learns about output 0's value.
    pub fn known(mut self, f: KnownFn) -> Self {
        self.def.known_fn = Some(f);
        self
    }
    /// The default node name TensorFlow's Python API gives the op, where it is not the op's
    /// name (see [`OpDef::default_node_name`]).
    pub fn node_name(mut self, name: &'static str) -> Self {
        self.def.default_node_name = Some(name);
        self
    }
    /// Declares the op stateful (see [`OpFacts::stateful`]).
    pub fn stateful(mut self) -> Self {
        self.def.facts.stateful = true;
        self
    }
    /// Declares the op a placeholder (see [`OpFacts::placeholder`]).
    pub fn placeholder(mut self) -> Self {
        self.def.facts.placeholder = true;
        self
    }
    /// Declares a TensorFlow 1 control-flow op, run by the executor itself.
    pub fn control_flow(mut self, role: ControlFlow) -> Self {
        self.def.facts.execution = Execution::ControlFlow(role);
        self
    }
    /// Declares a function-calling op, run by the runtime.
    pub fn call(mut self, kind: CallKind) -> Self {
        self.def.facts.execution = Execution::Call(kind);
        self
    }
    /// Declares an end of a cross-device transfer, run by the rendezvous.
    pub fn transfer(mut self, end: Transfer) -> Self {
        self.def.facts.execution = Execution::Transfer(end);
        self
    }
    /// Declares that output `i` is input `i` (see [`OpFacts::forwards_input`]).
    pub fn forwards_input(mut self) -> Self {
        self.def.facts.forwards_input = true;
        self
    }
    /// Declares that with a single input the output is that input.
    pub fn forwards_single_input(mut self) -> Self {
        self.def.facts.forwards_single_input = true;
        self
    }
    /// Declares that the output depends only on the input's shape (see [`OpFacts::shape_only`]).
    pub fn shape_only(mut self) -> Self {
        self.def.facts.shape_only = true;
        self
    }
    /// Declares that the output can be much larger than the inputs.
    pub fn grows(mut self) -> Self {
        self.def.facts.grows = true;
        self
    }
    /// Declares a matrix product or convolution (see [`OpFacts::contraction`]).
    pub fn contraction(mut self) -> Self {
        self.def.facts.contraction = true;
        self
    }
    /// Declares an elementwise op with its scalar function.
    pub fn elementwise(mut self, e: Elementwise) -> Self {
        self.def.facts.elementwise = Some(e);
        self
    }
    /// Declares the op a fusible activation of `_FusedMatMul` / `_FusedConv2D`.
    pub fn activation(mut self) -> Self {
        self.def.facts.activation = true;
        self
    }
    /// Declares the op commutative.
    pub fn commutative(mut self) -> Self {
        self.def.facts.commutative = true;
        self
    }
    /// Declares an exact identity element.
    pub fn neutral(mut self, value: Neutral, side: Side) -> Self {
        self.def.facts.neutral = Some((value, side));
        self
    }
    /// Declares that applying the op twice gives the input back.
    pub fn involution(mut self, kind: Involution) -> Self {
        self.def.facts.involution = Some(kind);
        self
    }
    /// Sets the gradient function.
    pub fn gradient(mut self, f: GradFn) -> Self {
        self.def.facts.gradient = Some(Gradient::Function(f));
        self
    }
    /// Declares that no gradient flows through the op, and why.
    pub fn not_differentiable(mut self, reason: &'static str) -> Self {
        self.def.facts.gradient = Some(Gradient::NotDifferentiable(reason));
        self
    }
    /// Declares that TensorFlow differentiates the op but ferroflow has no gradient for it
    /// yet, and what is missing.
    pub fn gradient_unavailable(mut self, reason: &'static str) -> Self {
        self.def.facts.gradient = Some(Gradient::Unavailable(reason));
        self
    }
    /// Declares that autodiff differentiates the op through the functions it calls (`While`,
    /// `If`, `PartitionedCall`): each function's gradient becomes a library function.
    pub fn gradient_through_functions(mut self) -> Self {
        self.def.facts.gradient = Some(Gradient::ThroughFunctions);
        self
    }
    /// Declares a TensorFlow 1 ref-variable op that is this op with `refs` leading ref inputs.
    pub fn ref_form(mut self, op: &'static str, refs: usize) -> Self {
        self.def.facts.ref_forms.push(RefForm { op, refs });
        self
    }
    /// Declares that its `shared_name` names session state (see [`OpFacts::owns_shared_state`]).
    pub fn owns_shared_state(mut self) -> Self {
        self.def.facts.owns_shared_state = true;
        self
    }
    /// Declares an optimizer update (see [`OpFacts::optimizer_update`]).
    pub fn optimizer_update(mut self) -> Self {
        self.def.facts.optimizer_update = true;
        self
    }
    /// Finishes the definition; `TypeAttr` args naming a `list(type)` attr become `TypeList`.
    pub fn build(mut self) -> OpDef {
        let lists: Vec<String> =
            self.def.attrs.iter().filter(|a| a.ty == "list(type)").map(|a| a.name.clone()).collect();
        for arg in self.def.inputs.iter_mut().chain(self.def.outputs.iter_mut()) {
            if let ArgType::TypeAttr(a) = &arg.ty {
                if lists.contains(a) {
                    arg.ty = ArgType::TypeList(a.clone());
                }
            }
        }
        self.def
    }
}

fn type_from_name(s: &str) -> Option<DType> {
    let s = s.trim();
    let s = s.strip_prefix("DT_").map(str::to_lowercase).unwrap_or_else(|| s.to_string());
    DType::ALL.into_iter().find(|d| d.name() == s)
}

fn parse_arg(spec: &str) -> ArgDef {
    let (name, ty) = spec.split_once(':').unwrap_or_else(|| panic!("bad arg spec '{spec}'"));
    let elem = |t: &str| match type_from_name(t) {
        Some(d) => ArgType::Fixed(d),
        None => ArgType::TypeAttr(t.trim().to_string()),
    };
    let ty = match ty.split_once('*') {
        Some((n, t)) => ArgType::Number { count_attr: n.trim().to_string(), elem: Box::new(elem(t)) },
        None => elem(ty),
    };
    ArgDef { name: name.trim().to_string(), ty }
}

fn parse_attr(spec: &str) -> AttrDef {
    let (name, rest) = spec.split_once(':').unwrap_or_else(|| panic!("bad attr spec '{spec}'"));
    let (ty_part, default) = match rest.split_once(" = ") {
        Some((t, d)) => (t.trim(), Some(d.trim())),
        None => (rest.trim(), None),
    };
    let (ty_part, minimum) = match ty_part.split_once(">=") {
        Some((t, m)) => (t.trim(), Some(m.trim().parse().expect("attr minimum"))),
        None => (ty_part, None),
    };
    let (ty, allowed_types, allowed_strings) = if ty_part.starts_with('{') {
        let items: Vec<&str> = ty_part.trim_matches(|c| c == '{' || c == '}').split(',').map(str::trim).collect();
        if items.iter().all(|i| i.starts_with('\'')) {
            ("string".to_string(), vec![], items.iter().map(|i| i.trim_matches('\'').to_string()).collect())
        } else {
            (
                "type".to_string(),
                items.iter().map(|i| type_from_name(i).unwrap_or_else(|| panic!("bad type '{i}'"))).collect(),
                vec![],
            )
        }
    } else {
        (ty_part.to_string(), vec![], vec![])
    };
    let default = default.map(|d| parse_default(&ty, d));
    AttrDef { name: name.trim().to_string(), ty, default, allowed_types, minimum, allowed_strings }
}

fn parse_default(ty: &str, d: &str) -> AttrValue {
    use attr_value::Value;
    let v = match ty {
        "bool" => Value::B(d == "true"),
        "int" => Value::I(d.parse().expect("int default")),
        "float" => Value::F(d.parse().expect("float default")),
        "type" => Value::Type(type_from_name(d).expect("type default").to_tf()),
        "string" => Value::S(d.trim_matches('\'').as_bytes().to_vec()),
        "shape" => Value::Shape(Box::new(TensorShapeProto { dim: vec![], unknown_rank: d == "?" })),
        "list(int)" => {
            let items = d.trim_matches(|c| c == '[' || c == ']');
            let i = items
                .split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(|x| x.parse().expect("int list default"))
                .collect();
            Value::List(Box::new(attr_value::ListValue { i, ..Default::default() }))
        }
        t if t.starts_with("list(") => {
            assert_eq!(d, "[]", "only empty list defaults are supported");
            Value::List(Box::default())
        }
        t => panic!("no default parser for attr type {t}"),
    };
    AttrValue { value: Some(v) }
}

impl OpDef {
    /// The attr definition named `name`.
    pub fn attr_def(&self, name: &str) -> Option<&AttrDef> {
        self.attrs.iter().find(|a| a.name == name)
    }

    /// The node's value for attr `name`, or the op's default.
    pub fn attr<'a>(&'a self, attrs: &'a Attrs, name: &str) -> Option<&'a AttrValue> {
        attrs.get(name).or_else(|| self.attr_def(name)?.default.as_ref())
    }

    fn type_attr(&self, attrs: &Attrs, name: &str) -> Result<DType, AttrError> {
        let v = self.attr(attrs, name).ok_or_else(|| format!("missing attr '{name}'"))?;
        let Some(attr_value::Value::Type(t)) = v.value else {
            return Err(format!("attr '{name}' must be a type").into());
        };
        let d = DType::from_tf(t).map_err(|e| format!("attr '{name}': {e}"))?;
        if let Some(def) = self.attr_def(name) {
            if !def.allowed_types.is_empty() && !def.allowed_types.contains(&d) {
                let allowed: Vec<&str> = def.allowed_types.iter().map(|t| t.name()).collect();
                return Err(format!("attr '{name}' is {d}, which is not one of {{{}}}", allowed.join(", ")).into());
            }
        }
        Ok(d)
    }

    fn arg_types(&self, attrs: &Attrs, arg: &ArgType, out: &mut Vec<DType>) -> Result<(), AttrError> {
        match arg {
            ArgType::Fixed(d) => out.push(*d),
            ArgType::TypeAttr(a) => out.push(self.type_attr(attrs, a)?),
            ArgType::Number { count_attr, elem } => {
                let v = self.attr(attrs, count_attr).ok_or_else(|| format!("missing attr '{count_attr}'"))?;
                let Some(attr_value::Value::I(n)) = v.value else {
                    return Err(format!("attr '{count_attr}' must be an int").into());
                };
                let min = self.attr_def(count_attr).and_then(|a| a.minimum).unwrap_or(0);
                if n < min || n > 1 << 20 {
                    return Err(format!("attr '{count_attr}' is {n}, must be at least {min}").into());
                }
                let mut one = Vec::new();
                self.arg_types(attrs, elem, &mut one)?;
                for _ in 0..n {
                    out.extend_from_slice(&one);
                }
            }
            ArgType::TypeList(a) => {
                let v = self.attr(attrs, a).ok_or_else(|| format!("missing attr '{a}'"))?;
                let Some(attr_value::Value::List(l)) = &v.value else {
                    return Err(format!("attr '{a}' must be a list(type)").into());
                };
                for &t in &l.r#type {
                    out.push(DType::from_tf(t).map_err(|e| format!("attr '{a}': {e}"))?);
                }
            }
        }
        Ok(())
    }

    /// Each output argument's name and the range of flat output indices it covers.
    pub fn output_ranges(&self, attrs: &Attrs) -> Result<Vec<(String, std::ops::Range<usize>)>, AttrError> {
        let mut out = Vec::new();
        let mut start = 0;
        for a in &self.outputs {
            let mut types = Vec::new();
            self.arg_types(attrs, &a.ty, &mut types)?;
            out.push((a.name.clone(), start..start + types.len()));
            start += types.len();
        }
        Ok(out)
    }

    /// Sets the type and count attrs missing from `attrs` from the arguments' dtypes,
    /// argument by argument (as TensorFlow's eager op matching does).
    pub fn infer_type_attrs(&self, args: &[ArgDTypes], attrs: &mut Attrs) -> Result<(), AttrError> {
        if self.inputs.len() != args.len() {
            let names: Vec<&str> = self.inputs.iter().map(|a| a.name.as_str()).collect();
            return Err(
                format!("takes {} arguments ({}), got {}", self.inputs.len(), names.join(", "), args.len()).into()
            );
        }
        let set = |attrs: &mut Attrs, name: &str, v: AttrValue| {
            if !attrs.contains_key(name) {
                attrs.insert(name.to_string(), v);
            }
        };
        for (arg, a) in self.inputs.iter().zip(args) {
            match (&arg.ty, a) {
                (ArgType::TypeAttr(t), ArgDTypes::One(d)) => set(attrs, t, attr::dtype(*d)),
                (ArgType::Number { count_attr, elem }, ArgDTypes::List(ds)) => {
                    set(attrs, count_attr, attr::int(ds.len() as i64));
                    if let (ArgType::TypeAttr(t), Some(first)) = (elem.as_ref(), ds.first()) {
                        set(attrs, t, attr::dtype(*first));
                    }
                }
                (ArgType::TypeList(t), ArgDTypes::List(ds)) => set(attrs, t, attr::dtypes(ds)),
                (ArgType::Fixed(_), ArgDTypes::One(_)) | (ArgType::TypeAttr(_), ArgDTypes::List(_)) => {}
                (ArgType::Number { .. } | ArgType::TypeList(_), ArgDTypes::One(_)) => {
                    return Err(format!("argument '{}' is a list: pass it with .inputs(&[...])", arg.name).into())
                }
                (ArgType::Fixed(_), ArgDTypes::List(_)) => {
                    return Err(format!("argument '{}' is one tensor, not a list", arg.name).into())
                }
            }
        }
        Ok(())
    }

    /// The node's input and output dtypes given its attrs.
    pub fn resolve_types(&self, attrs: &Attrs) -> Result<NodeTypes, AttrError> {
        for a in self.attrs.iter().filter(|a| !a.allowed_strings.is_empty()) {
            if let Some(attr_value::Value::S(v)) = attrs.get(&a.name).and_then(|v| v.value.as_ref()) {
                let v = String::from_utf8_lossy(v);
                if !a.allowed_strings.iter().any(|x| *x == v) {
                    let allowed: Vec<String> = a.allowed_strings.iter().map(|x| format!("'{x}'")).collect();
                    return Err(
                        format!("attr '{}' is '{v}', which is not one of {{{}}}", a.name, allowed.join(", ")).into()
                    );
                }
            }
        }
        let mut t = NodeTypes::default();
        for a in &self.inputs {
            self.arg_types(attrs, &a.ty, &mut t.inputs)?;
        }
        for a in &self.outputs {
            self.arg_types(attrs, &a.ty, &mut t.outputs)?;
        }
        Ok(t)
    }
}

/// The set of known ops.
pub struct OpRegistry {
    ops: HashMap<String, OpDef>,
    /// TF1 ref-variable ops by name: (the op ferroflow runs instead, the ref count).
    ref_forms: HashMap<&'static str, (String, usize)>,
}

impl OpRegistry {
    /// The process-wide registry of every op ferroflow defines.
    pub fn global() -> &'static OpRegistry {
        static REG: OnceLock<OpRegistry> = OnceLock::new();
        REG.get_or_init(|| OpRegistry::new(crate::defs::all()))
    }

    fn new(defs: Vec<OpDef>) -> OpRegistry {
        let mut ops = HashMap::with_capacity(defs.len());
        let mut ref_forms = HashMap::new();
        for def in defs {
            for r in &def.facts.ref_forms {
                ref_forms.insert(r.op, (def.name.clone(), r.refs));
            }
            let name = def.name.clone();
            assert!(ops.insert(name.clone(), def).is_none(), "op '{name}' is defined twice");
        }
        OpRegistry { ops, ref_forms }
    }

    /// The definition of `op`.
    pub fn get(&self, op: &str) -> Option<&OpDef> {
        self.ops.get(op)
    }

    /// The facts of `op` (`None` for ops the registry does not define, such as a library
    /// function's name).
    pub fn facts(&self, op: &str) -> Option<&OpFacts> {
        self.ops.get(op).map(|d| &d.facts)
    }

    /// True for TensorFlow 1 control-flow ops (`Switch`, `Merge`, `Enter`, `Exit`,
    /// `NextIteration`, `LoopCond`): frames and dead tokens, run by the executor itself.
    pub fn is_control_flow(&self, op: &str) -> bool {
        self.facts(op).is_some_and(|f| f.control_flow().is_some())
    }

    /// For a TensorFlow 1 ref-variable op (`ApplyAdam`, `VariableV2`): the op ferroflow runs
    /// instead and how many leading inputs are refs.
    pub fn ref_form(&self, tf1_op: &str) -> Option<(&str, usize)> {
        self.ref_forms.get(tf1_op).map(|(op, refs)| (op.as_str(), *refs))
    }

    /// Every definition, sorted by op name.
    pub fn defs(&self) -> Vec<&OpDef> {
        let mut v: Vec<&OpDef> = self.ops.values().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// All op names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.ops.keys().map(String::as_str).collect();
        v.sort();
        v
    }
}

impl OpSignatures for OpRegistry {
    fn resolve(&self, op: &str, attrs: &Attrs) -> Result<Option<NodeTypes>, AttrError> {
        match self.get(op) {
            Some(def) => def.resolve_types(attrs).map(Some),
            None => Ok(None),
        }
    }

    fn unknown_op_hint(&self, op: &str) -> UnknownOpHint {
        UnknownOpHint { in_tensorflow: Some(tensorflow_has_op(op)), nearest: self.nearest(op).map(str::to_string) }
    }
}

/// TensorFlow's op names, one per line, sorted: those of `fixtures/tf/op_defs.pb` (TensorFlow
/// 2.21's registry; `tests/tf_op_defs.rs` keeps the list in step with it).
const TF_OP_NAMES: &str = include_str!("tf_op_names.txt");

/// Whether TensorFlow's op registry defines `op`.
pub fn tensorflow_has_op(op: &str) -> bool {
    tensorflow_op_names().binary_search(&op).is_ok()
}

/// TensorFlow's op names, sorted.
pub fn tensorflow_op_names() -> &'static [&'static str] {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| TF_OP_NAMES.lines().filter(|l| !l.is_empty()).collect())
}

/// Edit distance between `a` and `b`, ignoring ASCII case.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<u8>, Vec<u8>) =
        (a.bytes().map(|c| c.to_ascii_lowercase()).collect(), b.bytes().map(|c| c.to_ascii_lowercase()).collect());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

impl OpRegistry {
    /// The registered op whose name is closest to `op` (edit distance, ignoring case), when it
    /// is within a third of the name's length (at least 2): `Erfc` → `Erf`.
    pub fn nearest(&self, op: &str) -> Option<&str> {
        let limit = (op.len() / 3).max(2);
        self.ops
            .keys()
            .filter(|k| !k.starts_with('_') || op.starts_with('_'))
            .map(|k| (edit_distance(op, k), k.as_str()))
            .filter(|&(d, _)| d <= limit)
            .min()
            .map(|(_, k)| k)
    }
}
