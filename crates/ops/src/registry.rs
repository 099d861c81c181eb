//! The op registry: each op is defined once, from a signature written as TensorFlow writes
//! its `REGISTER_OP` (`"a: T"`, `"values: N * T"`, `"transpose_a: bool = false"`,
//! `"T: {float, double}"`), plus a shape function.
use std::collections::HashMap;
use std::sync::OnceLock;

use ferroflow_graph::{Attrs, NodeTypes, OpSignatures};
use ferroflow_proto::{attr_value, AttrValue, TensorShapeProto};
use ferroflow_tensor::DType;

use crate::shape_inference::ShapeFn;

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
}

/// An op definition.
#[derive(Clone, Debug)]
pub struct OpDef {
    /// Op type name, e.g. `MatMul`.
    pub name: String,
    /// Inputs in order.
    pub inputs: Vec<ArgDef>,
    /// Outputs in order.
    pub outputs: Vec<ArgDef>,
    /// Attrs.
    pub attrs: Vec<AttrDef>,
    /// Output-shape function.
    pub shape_fn: ShapeFn,
    /// True for ops with side effects (never pruned by CSE or folded).
    pub stateful: bool,
}

/// Builds an [`OpDef`] from TensorFlow-style signature strings.
pub struct OpBuilder {
    def: OpDef,
}

/// Starts the definition of op `name`.
pub fn op(name: &str) -> OpBuilder {
    OpBuilder {
        def: OpDef {
            name: name.to_string(),
            inputs: vec![],
            outputs: vec![],
            attrs: vec![],
            shape_fn: crate::shape_inference::unknown,
            stateful: false,
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
    /// Sets the shape function.
    pub fn shape(mut self, f: ShapeFn) -> Self {
        self.def.shape_fn = f;
        self
    }
    /// Adds several attrs (specs as for [`OpBuilder::attr`]).
    pub fn attrs(mut self, specs: &[&str]) -> Self {
        for s in specs {
            self = self.attr(s);
        }
        self
    }
    /// Marks the op stateful.
    pub fn stateful(mut self) -> Self {
        self.def.stateful = true;
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
    let (ty, allowed_types) = if ty_part.starts_with('{') {
        let items: Vec<&str> = ty_part.trim_matches(|c| c == '{' || c == '}').split(',').map(str::trim).collect();
        if items.iter().all(|i| i.starts_with('\'')) {
            ("string".to_string(), vec![])
        } else {
            (
                "type".to_string(),
                items.iter().map(|i| type_from_name(i).unwrap_or_else(|| panic!("bad type '{i}'"))).collect(),
            )
        }
    } else {
        (ty_part.to_string(), vec![])
    };
    let default = default.map(|d| parse_default(&ty, d));
    AttrDef { name: name.trim().to_string(), ty, default, allowed_types, minimum }
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

    fn type_attr(&self, attrs: &Attrs, name: &str) -> Result<DType, String> {
        let v = self.attr(attrs, name).ok_or_else(|| format!("missing attr '{name}'"))?;
        let Some(attr_value::Value::Type(t)) = v.value else {
            return Err(format!("attr '{name}' must be a type"));
        };
        let d = DType::from_tf(t).map_err(|e| format!("attr '{name}': {e}"))?;
        if let Some(def) = self.attr_def(name) {
            if !def.allowed_types.is_empty() && !def.allowed_types.contains(&d) {
                let allowed: Vec<&str> = def.allowed_types.iter().map(|t| t.name()).collect();
                return Err(format!("attr '{name}' is {d}, which is not one of {{{}}}", allowed.join(", ")));
            }
        }
        Ok(d)
    }

    fn arg_types(&self, attrs: &Attrs, arg: &ArgType, out: &mut Vec<DType>) -> Result<(), String> {
        match arg {
            ArgType::Fixed(d) => out.push(*d),
            ArgType::TypeAttr(a) => out.push(self.type_attr(attrs, a)?),
            ArgType::Number { count_attr, elem } => {
                let v = self.attr(attrs, count_attr).ok_or_else(|| format!("missing attr '{count_attr}'"))?;
                let Some(attr_value::Value::I(n)) = v.value else {
                    return Err(format!("attr '{count_attr}' must be an int"));
                };
                let min = self.attr_def(count_attr).and_then(|a| a.minimum).unwrap_or(0);
                if n < min || n > 1 << 20 {
                    return Err(format!("attr '{count_attr}' is {n}, must be at least {min}"));
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
                    return Err(format!("attr '{a}' must be a list(type)"));
                };
                for &t in &l.r#type {
                    out.push(DType::from_tf(t).map_err(|e| format!("attr '{a}': {e}"))?);
                }
            }
        }
        Ok(())
    }

    /// Each output argument's name and the range of flat output indices it covers.
    pub fn output_ranges(&self, attrs: &Attrs) -> Result<Vec<(String, std::ops::Range<usize>)>, String> {
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

    /// The node's input and output dtypes given its attrs.
    pub fn resolve_types(&self, attrs: &Attrs) -> Result<NodeTypes, String> {
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
}

impl OpRegistry {
    /// The process-wide registry of every op ferroflow defines.
    pub fn global() -> &'static OpRegistry {
        static REG: OnceLock<OpRegistry> = OnceLock::new();
        REG.get_or_init(|| {
            let mut ops = HashMap::new();
            for def in crate::defs::all() {
                ops.insert(def.name.clone(), def);
            }
            OpRegistry { ops }
        })
    }

    /// The definition of `op`.
    pub fn get(&self, op: &str) -> Option<&OpDef> {
        self.ops.get(op)
    }

    /// All op names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.ops.keys().map(String::as_str).collect();
        v.sort();
        v
    }
}

impl OpSignatures for OpRegistry {
    fn resolve(&self, op: &str, attrs: &Attrs) -> Result<Option<NodeTypes>, String> {
        match self.get(op) {
            Some(def) => def.resolve_types(attrs).map(Some),
            None => Ok(None),
        }
    }
}
