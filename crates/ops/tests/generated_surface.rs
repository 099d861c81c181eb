//! Writes `src/generated.rs` — the typed op methods of [`ferroflow_ops::RawOps`] and their
//! attr setters — from the op registry, as TensorFlow generates its `gen_*_ops` wrappers
//! from its OpDefs. The file is committed; this test fails when it is out of date (after it
//! has rewritten it: run the tests again).
use std::fmt::Write;

use ferroflow_ops::{ArgType, AttrDef, OpDef, OpRegistry};

/// TensorFlow's Python names for its ops' wrappers (`python_op_gen`): an underscore before a
/// capital that follows a lower-case letter, or that starts a word after capitals
/// (`MatMul` → `mat_mul`, `Conv2D` → `conv2d`, `TopKV2` → `top_kv2`, `IdentityN` → `identity_n`).
fn snake(name: &str) -> String {
    let c: Vec<char> = name.chars().collect();
    let mut s = String::new();
    for (i, &ch) in c.iter().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            let prev = c[i - 1];
            let next_lower = c.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if prev.is_ascii_lowercase() || (prev.is_ascii_uppercase() && next_lower) {
                s.push('_');
            }
        }
        s.push(ch.to_ascii_lowercase());
    }
    s
}

/// A name usable as a Rust identifier (keywords get a trailing underscore).
fn ident(name: &str) -> String {
    const KEYWORDS: &[&str] = &[
        "as", "async", "await", "break", "const", "continue", "crate", "do", "dyn", "else", "enum", "extern", "false",
        "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self",
        "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where", "while", "yield", "box",
        "final", "macro", "override", "priv", "try", "typeof", "unsized", "virtual", "abstract", "become",
        // Names the generated bodies use themselves.
        "call", "applied", "options",
    ];
    let s = snake(name);
    if KEYWORDS.contains(&s.as_str()) {
        format!("{s}_")
    } else {
        s
    }
}

/// How an attr of a given TensorFlow type is passed and turned into an `AttrValue`.
fn attr_kind(ty: &str) -> (&'static str, &'static str) {
    match ty {
        "type" => ("ferroflow_tensor::DType", "attr::dtype(v)"),
        "int" => ("i64", "attr::int(v)"),
        "float" => ("f32", "attr::float(v)"),
        "bool" => ("bool", "attr::boolean(v)"),
        "string" => ("&str", "attr::string(v)"),
        "shape" => ("&ferroflow_tensor::Shape", "attr::shape(v)"),
        "tensor" => ("&ferroflow_tensor::Tensor", "attr::tensor(convert::tensor_to_proto(v))"),
        "func" => ("&str", "attr::func(v)"),
        "list(int)" => ("&[i64]", "attr::ints(v)"),
        "list(type)" => ("&[ferroflow_tensor::DType]", "attr::dtypes(v)"),
        "list(string)" => ("&[&str]", "attr::strings(v)"),
        "list(float)" => ("&[f32]", "attr::floats(v)"),
        "list(shape)" => ("&[ferroflow_tensor::Shape]", "attr::shapes(v)"),
        "list(bool)" => ("&[bool]", "attr::booleans(v)"),
        _ => ("AttrValue", "v"),
    }
}

/// The attrs a call infers from its inputs (type and count attrs of input arguments).
fn inferred(def: &OpDef) -> Vec<String> {
    let mut v = Vec::new();
    fn walk(t: &ArgType, v: &mut Vec<String>) {
        match t {
            ArgType::Fixed(_) => {}
            ArgType::TypeAttr(a) | ArgType::TypeList(a) => v.push(a.clone()),
            ArgType::Number { count_attr, elem } => {
                v.push(count_attr.clone());
                walk(elem, v);
            }
        }
    }
    for a in &def.inputs {
        walk(&a.ty, &mut v);
    }
    v
}

fn is_list(t: &ArgType) -> bool {
    matches!(t, ArgType::Number { .. } | ArgType::TypeList(_))
}

fn arg_type_text(t: &ArgType) -> String {
    match t {
        ArgType::Fixed(d) => d.name().to_string(),
        ArgType::TypeAttr(a) => a.clone(),
        ArgType::Number { count_attr, elem } => format!("{count_attr} * {}", arg_type_text(elem)),
        ArgType::TypeList(a) => a.clone(),
    }
}

fn attr_text(a: &AttrDef) -> String {
    let mut s = format!("{}: {}", a.name, a.ty);
    if !a.allowed_types.is_empty() {
        let t: Vec<&str> = a.allowed_types.iter().map(|d| d.name()).collect();
        s = format!("{}: {{{}}}", a.name, t.join(", "));
    }
    s
}

fn render() -> String {
    let mut methods = String::new();
    let mut setters = String::new();
    let mut seen = std::collections::HashMap::new();
    for def in OpRegistry::global().defs() {
        if def.name.starts_with('_') {
            continue; // made by the optimizer or the partitioner, not called by users
        }
        let method = ident(&def.name);
        if let Some(other) = seen.insert(method.clone(), def.name.clone()) {
            panic!("ops '{other}' and '{}' both become method '{method}'", def.name);
        }
        let infer = inferred(def);
        let required: Vec<&AttrDef> =
            def.attrs.iter().filter(|a| a.default.is_none() && !infer.contains(&a.name)).collect();
        let optional: Vec<&AttrDef> =
            def.attrs.iter().filter(|a| a.default.is_some() && !infer.contains(&a.name)).collect();
        let node_name = def.default_node_name.unwrap_or(&def.name);

        // The documentation: the signature as TensorFlow writes it.
        let mut doc = format!("    /// `{}`", def.name);
        let ins: Vec<String> = def.inputs.iter().map(|a| format!("`{}: {}`", a.name, arg_type_text(&a.ty))).collect();
        let outs: Vec<String> = def.outputs.iter().map(|a| format!("`{}: {}`", a.name, arg_type_text(&a.ty))).collect();
        write!(doc, "({}) → ({})", ins.join(", "), outs.join(", ")).unwrap();
        if !def.attrs.is_empty() {
            let attrs: Vec<String> = def.attrs.iter().map(|a| format!("`{}`", attr_text(a))).collect();
            write!(doc, "; attrs {}", attrs.join(", ")).unwrap();
        }
        doc.push_str(".\n");

        let mut params = String::new();
        let mut names = Vec::new();
        for a in &def.inputs {
            let p = ident(&a.name);
            if is_list(&a.ty) {
                write!(params, ", {p}: &[Self::Tensor]").unwrap();
            } else {
                write!(params, ", {p}: impl Input<Self>").unwrap();
            }
            names.push(p);
        }
        for a in &required {
            let p = ident(&a.name);
            write!(params, ", {p}: {}", attr_kind(&a.ty).0).unwrap();
            names.push(p);
        }
        let (ret, finish) = if def.outputs.is_empty() {
            ("Self::Node", "Ok(applied.node)".to_string())
        } else if def.outputs.len() == 1 && !is_list(&def.outputs[0].ty) {
            ("Self::Tensor", format!("single(self, \"{}\", applied)", def.name))
        } else {
            ("Vec<Self::Tensor>", "Ok(applied.outputs)".to_string())
        };
        let with = format!("{}_with", method.trim_end_matches('_'));
        if !optional.is_empty() {
            let args = names.join(", ");
            let sep = if args.is_empty() { "" } else { ", " };
            methods.push_str(&doc);
            writeln!(methods, "    fn {method}(&self{params}) -> Result<{ret}, Self::Error> {{").unwrap();
            writeln!(methods, "        self.{with}({args}{sep}attrs::{}::new())", def.name).unwrap();
            methods.push_str("    }\n\n");
            writeln!(methods, "    /// [`RawOps::{method}`] with attrs set (those not set take the op's defaults).")
                .unwrap();
            writeln!(
                methods,
                "    fn {with}(&self{params}, options: attrs::{}) -> Result<{ret}, Self::Error> {{",
                def.name
            )
            .unwrap();
        } else {
            methods.push_str(&doc);
            writeln!(methods, "    fn {method}(&self{params}) -> Result<{ret}, Self::Error> {{").unwrap();
        }
        let mutable = if def.inputs.is_empty() && required.is_empty() && optional.is_empty() { "" } else { "mut " };
        writeln!(methods, "        let {mutable}call = OpCall::new(\"{}\", \"{node_name}\");", def.name).unwrap();
        for a in &def.inputs {
            let p = ident(&a.name);
            if is_list(&a.ty) {
                writeln!(methods, "        call.inputs.push(Arg::List({p}.to_vec()));").unwrap();
            } else {
                writeln!(methods, "        call.inputs.push(Arg::One({p}.into_input(self)?));").unwrap();
            }
        }
        for a in &required {
            let conv = conv_for(&a.ty, &ident(&a.name));
            writeln!(methods, "        call.attrs.push((\"{}\", {conv}));", a.name).unwrap();
        }
        if !optional.is_empty() {
            methods.push_str("        call.attrs.extend(options.0);\n");
        }
        methods.push_str("        let applied = self.apply(call)?;\n");
        writeln!(methods, "        {finish}").unwrap();
        methods.push_str("    }\n\n");

        if !optional.is_empty() {
            writeln!(setters, "    /// The attrs of `{}` a call may set; the others take their defaults.", def.name)
                .unwrap();
            setters.push_str("    #[derive(Clone, Debug, Default)]\n");
            writeln!(setters, "    pub struct {}(pub(crate) Vec<(&'static str, AttrValue)>);\n", def.name).unwrap();
            writeln!(setters, "    impl {} {{", def.name).unwrap();
            setters.push_str("        /// No attrs set.\n");
            setters.push_str("        pub fn new() -> Self {\n            Self::default()\n        }\n");
            for a in &optional {
                let p = ident(&a.name);
                let (ty, _) = attr_kind(&a.ty);
                let conv = conv_for(&a.ty, "v");
                writeln!(setters, "\n        /// Sets `{}` (default {}).", a.name, default_text(a)).unwrap();
                writeln!(setters, "        pub fn {p}(mut self, v: {ty}) -> Self {{").unwrap();
                writeln!(setters, "            self.0.push((\"{}\", {conv}));", a.name).unwrap();
                setters.push_str("            self\n        }\n");
            }
            setters.push_str("    }\n\n");
        }
    }
    format!(
        "// @generated by crates/ops/tests/generated_surface.rs from the op registry; do not edit.\n\
         //! The registry's ops as typed methods (see [`crate::surface`]).\n\
         #![allow(clippy::too_many_arguments)]\n\
         use ferroflow_proto::{{attr, convert, AttrValue}};\n\
         \n\
         use crate::surface::{{single, Arg, Input, OpCall, OpTarget}};\n\n\
         /// Every registered op as a method of any [`OpTarget`]: a graph being built, eager\n\
         /// execution, a trace.\n\
         pub trait RawOps: OpTarget + Sized {{\n{}}}\n\n\
         impl<X: OpTarget> RawOps for X {{}}\n\n\
         /// The attrs each op's `_with` method may set, one setter each.\n\
         pub mod attrs {{\n    use super::*;\n\n{}}}\n",
        methods.trim_end().to_string() + "\n",
        setters.trim_end().to_string() + "\n"
    )
}

/// The conversion of parameter `p` of attr type `ty` into an `AttrValue`.
fn conv_for(ty: &str, p: &str) -> String {
    let (_, t) = attr_kind(ty);
    match t {
        "v" => p.to_string(),
        t => {
            let open = t.rfind("(v)").expect("template ends with (v)");
            format!("{}({p}){}", &t[..open], &t[open + 3..])
        }
    }
}

fn default_text(a: &AttrDef) -> String {
    use ferroflow_proto::attr_value::Value;
    match a.default.as_ref().and_then(|d| d.value.as_ref()) {
        Some(Value::B(b)) => format!("`{b}`"),
        Some(Value::I(i)) => format!("`{i}`"),
        Some(Value::F(f)) => format!("`{f}`"),
        Some(Value::S(s)) => format!("`\"{}\"`", String::from_utf8_lossy(s)),
        Some(Value::Type(t)) => format!("`{}`", ferroflow_tensor::DType::from_tf(*t).map(|d| d.name()).unwrap_or("?")),
        Some(Value::List(l)) if l.i.is_empty() && l.s.is_empty() && l.r#type.is_empty() => "empty".into(),
        Some(Value::List(l)) => format!("`{:?}`", l.i),
        Some(Value::Shape(_)) => "unknown".into(),
        _ => "the op's".into(),
    }
}

#[test]
fn generated_surface_is_up_to_date() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/generated.rs");
    let want = render();
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        std::fs::write(&path, &want).unwrap();
        panic!("{} was out of date and has been rewritten: run the tests again", path.display());
    }
}

#[test]
fn names_follow_tensorflows_python_wrappers() {
    for (op, name) in [
        ("MatMul", "mat_mul"),
        ("Conv2D", "conv2d"),
        ("AddV2", "add_v2"),
        ("TopKV2", "top_kv2"),
        ("IdentityN", "identity_n"),
        ("Conv2DBackpropInput", "conv2d_backprop_input"),
        ("BatchMatMulV2", "batch_mat_mul_v2"),
        ("FusedBatchNormV3", "fused_batch_norm_v3"),
        ("LRN", "lrn"),
        ("RGBToHSV", "rgb_to_hsv"),
        ("Log1p", "log1p"),
        ("AvgPool3DGrad", "avg_pool3d_grad"),
    ] {
        assert_eq!(snake(op), name, "{op}");
    }
    assert_eq!(ident("Where"), "where_");
    assert_eq!(ident("Const"), "const_");
}
