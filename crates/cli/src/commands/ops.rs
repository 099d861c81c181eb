//! `ferroflow ops [OP] [--json]`: the op registry as users see it (TensorFlow users read
//! `tf.raw_ops` for this): each op's signature, attrs with defaults, the dtypes with CPU
//! kernels, how gradients pass through it, and its facts.
use anyhow::{bail, Result};
use clap::Args;
use ferroflow::kernels::KernelRegistry;
use ferroflow::ops::{
    ArgDef, ArgType, AttrDef, Elementwise, Execution, Gradient, Involution, Neutral, OpDef, OpRegistry, Side,
};
use ferroflow::proto::attr_value::Value;
use ferroflow::proto::AttrValue;
use serde_json::{json, Value as Json};

/// List the op registry (what tf.raw_ops lists): signatures, attrs, CPU kernels, gradients.
///
/// Every op with its family, CPU kernel dtypes and gradient; with an OP, that op's inputs,
/// outputs, attrs with defaults, kernels, gradient (with the reason where there is none) and
/// facts.
#[derive(Args)]
pub struct OpsArgs {
    /// One op, e.g. `Relu6`.
    op: Option<String>,
    /// Print JSON (one object for an OP, an array for all).
    #[arg(long)]
    json: bool,
}

/// Prints one op (OP) or all of them, as text or JSON.
pub fn run(args: OpsArgs) -> Result<()> {
    let (op, as_json) = (args.op.as_deref(), args.json);
    let reg = OpRegistry::global();
    let defs = match op {
        Some(name) => match reg.get(name) {
            Some(def) => vec![def],
            None => bail!("no op named '{name}'{}", suggestion(name)),
        },
        None => reg.defs(),
    };
    if as_json {
        let items: Vec<Json> = defs.iter().map(|d| op_json(d)).collect();
        let doc = if op.is_some() { items.into_iter().next().unwrap_or(Json::Null) } else { Json::Array(items) };
        out!("{}", serde_json::to_string_pretty(&doc)?);
    } else if op.is_some() {
        out!("{}", describe(defs[0]));
    } else {
        out!("{:<36} {:<13} {:<40} gradient", "op", "family", "CPU kernels");
        for d in &defs {
            out!("{:<36} {:<13} {:<40} {}", d.name, d.family, kernels_text(d), gradient_word(d));
        }
        out!("{} ops; `ferroflow ops OP` for one, `--json` for all of it", defs.len());
    }
    Ok(())
}

/// Close names for a misspelt op: the same name in another case first, then names starting
/// with it, then names containing it.
fn suggestion(name: &str) -> String {
    let lower = name.to_lowercase();
    let names = OpRegistry::global().names();
    let rank = |n: &str| {
        let l = n.to_lowercase();
        if l == lower {
            Some(0)
        } else if lower.len() >= 3 && l.starts_with(&lower) {
            Some(1)
        } else if lower.len() >= 3 && l.contains(&lower) {
            Some(2)
        } else {
            None
        }
    };
    let mut close: Vec<(usize, &str)> = names.iter().filter_map(|n| Some((rank(n)?, *n))).collect();
    close.sort();
    let close: Vec<&str> = close.into_iter().take(8).map(|(_, n)| n).collect();
    if close.is_empty() {
        " (`ferroflow ops` lists them all)".into()
    } else {
        format!("; did you mean {}?", close.join(", "))
    }
}

fn arg_type(t: &ArgType) -> String {
    match t {
        ArgType::Fixed(d) => d.name().to_string(),
        ArgType::TypeAttr(a) | ArgType::TypeList(a) => a.clone(),
        ArgType::Number { count_attr, elem } => format!("{count_attr} * {}", arg_type(elem)),
    }
}

fn arg_text(a: &ArgDef) -> String {
    format!("{}: {}", a.name, arg_type(&a.ty))
}

fn value_text(v: &AttrValue) -> String {
    match &v.value {
        Some(Value::B(b)) => b.to_string(),
        Some(Value::I(i)) => i.to_string(),
        Some(Value::F(f)) => f.to_string(),
        Some(Value::S(s)) => format!("'{}'", String::from_utf8_lossy(s)),
        Some(Value::Type(t)) => {
            ferroflow::tensor::DType::from_tf(*t).map_or_else(|_| t.to_string(), |d| d.name().into())
        }
        Some(Value::Shape(s)) if s.unknown_rank => "?".into(),
        Some(Value::Shape(s)) => format!("{:?}", s.dim.iter().map(|d| d.size).collect::<Vec<_>>()),
        Some(Value::List(l)) if !l.i.is_empty() => format!("{:?}", l.i),
        Some(Value::List(_)) => "[]".into(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

/// `name: type` with allowed values, minimum and default, as TensorFlow writes attr specs.
fn attr_text(a: &AttrDef) -> String {
    let mut ty = a.ty.clone();
    if !a.allowed_types.is_empty() {
        ty = format!("{{{}}}", a.allowed_types.iter().map(|d| d.name()).collect::<Vec<_>>().join(", "));
    }
    if !a.allowed_strings.is_empty() {
        ty = format!("{{{}}}", a.allowed_strings.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(", "));
    }
    let min = a.minimum.map(|m| format!(" >= {m}")).unwrap_or_default();
    let default = a.default.as_ref().map(|d| format!(" = {}", value_text(d))).unwrap_or_default();
    format!("{}: {ty}{min}{default}", a.name)
}

/// The CPU kernels: the dtypes per constraining attr, or who runs the op instead.
fn kernels_text(d: &OpDef) -> String {
    match d.facts.execution {
        Execution::Kernel => {
            let regs = KernelRegistry::global().registrations(&d.name);
            if regs.is_empty() {
                return "none".into();
            }
            regs.iter()
                .map(|(attr, dtypes)| {
                    if attr.is_empty() {
                        "any dtype".to_string()
                    } else {
                        format!("{attr} in {{{}}}", dtypes.iter().map(|t| t.name()).collect::<Vec<_>>().join(", "))
                    }
                })
                .collect::<Vec<_>>()
                .join("; ")
        }
        Execution::ControlFlow(_) => "run by the executor".into(),
        Execution::Call(_) => "run by the runtime (functions)".into(),
        Execution::Transfer(_) => "run by the rendezvous".into(),
    }
}

fn gradient_word(d: &OpDef) -> &'static str {
    match d.facts.gradient {
        Some(Gradient::Function(_) | Gradient::ThroughFunctions) => "yes",
        Some(Gradient::NotDifferentiable(_)) => "not differentiable",
        Some(Gradient::Unavailable(_)) => "not implemented",
        None => "undeclared",
    }
}

fn gradient_text(d: &OpDef) -> String {
    match d.facts.gradient {
        Some(Gradient::Function(_)) => "yes".into(),
        Some(Gradient::ThroughFunctions) => "yes, through the functions it calls".into(),
        Some(Gradient::NotDifferentiable(r)) => format!("none flows: not differentiable ({r})"),
        Some(Gradient::Unavailable(r)) => format!("not implemented: {r}"),
        None => "undeclared".into(),
    }
}

/// The op's facts as short phrases.
fn facts(d: &OpDef) -> Vec<String> {
    let f = &d.facts;
    let mut v = Vec::new();
    if f.stateful {
        v.push("stateful".to_string());
    }
    if f.placeholder {
        v.push("placeholder (a fed value: kept by every pass)".into());
    }
    match f.execution {
        Execution::Kernel => {}
        Execution::ControlFlow(c) => v.push(format!("TensorFlow 1 control flow ({c:?})")),
        Execution::Call(c) => v.push(format!("function call ({c:?})")),
        Execution::Transfer(t) => v.push(format!("cross-device transfer ({t:?})")),
    }
    if f.forwards_input {
        v.push("forwards its input".into());
    }
    if f.forwards_single_input {
        v.push("forwards a single input".into());
    }
    if f.shape_only {
        v.push("value depends only on the input's shape".into());
    }
    if f.grows {
        v.push("output may be much larger than its inputs".into());
    }
    if f.contraction {
        v.push("contraction: splits large outputs across the intra-op pool".into());
    }
    match f.elementwise {
        Some(Elementwise::Unary(u)) => v.push(format!("elementwise unary ({u:?}), fusible")),
        Some(Elementwise::Binary(b)) => v.push(format!("elementwise binary ({b:?}), fusible")),
        None => {}
    }
    if f.activation {
        v.push("fusible activation of _FusedMatMul/_FusedConv2D".into());
    }
    if f.commutative {
        v.push("commutative".into());
    }
    if let Some((n, side)) = f.neutral {
        let value = match n {
            Neutral::One => "1",
            Neutral::NegZero => "-0",
            Neutral::PosZero => "+0",
        };
        let side = match side {
            Side::Both => "either side",
            Side::Right => "right side",
        };
        v.push(format!("neutral element {value} ({side})"));
    }
    match f.involution {
        Some(Involution::Exact) => v.push("involution".into()),
        Some(Involution::Inexact) => v.push("involution up to rounding".into()),
        None => {}
    }
    for r in &f.ref_forms {
        v.push(format!("runs TensorFlow 1's {} ({} ref input(s))", r.op, r.refs));
    }
    v
}

fn kernel_file(d: &OpDef) -> String {
    match d.facts.execution {
        Execution::Kernel => format!("crates/kernels/src/{}.rs", d.family),
        Execution::ControlFlow(_) => "crates/runtime/src/executor.rs, dynamic.rs".into(),
        Execution::Call(_) => "crates/runtime/src/functional.rs".into(),
        Execution::Transfer(_) => "crates/runtime/src/rendezvous.rs".into(),
    }
}

fn describe(d: &OpDef) -> String {
    let list = |v: Vec<String>| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    let mut s = format!("{}\n", d.name);
    s += &format!("  defined in   crates/ops/src/defs/{}.rs (family '{}')\n", d.family, d.family);
    s += &format!("  kernels in   {}\n", kernel_file(d));
    s += &format!("  inputs       {}\n", list(d.inputs.iter().map(arg_text).collect()));
    s += &format!("  outputs      {}\n", list(d.outputs.iter().map(arg_text).collect()));
    if d.attrs.is_empty() {
        s += "  attrs        none\n";
    }
    for (i, a) in d.attrs.iter().enumerate() {
        s += &format!("  {}{}\n", if i == 0 { "attrs        " } else { "             " }, attr_text(a));
    }
    s += &format!("  CPU kernels  {}\n", kernels_text(d));
    s += &format!("  gradient     {}\n", gradient_text(d));
    s += &format!("  facts        {}", list(facts(d)));
    s
}

fn op_json(d: &OpDef) -> Json {
    let args =
        |v: &[ArgDef]| -> Vec<Json> { v.iter().map(|a| json!({"name": a.name, "type": arg_type(&a.ty)})).collect() };
    let attrs: Vec<Json> = d
        .attrs
        .iter()
        .map(|a| {
            json!({
                "name": a.name,
                "type": a.ty,
                "default": a.default.as_ref().map(value_text),
                "allowed_types": a.allowed_types.iter().map(|t| t.name()).collect::<Vec<_>>(),
                "allowed_values": a.allowed_strings,
                "minimum": a.minimum,
            })
        })
        .collect();
    let kernels: Vec<Json> = match d.facts.execution {
        Execution::Kernel => KernelRegistry::global()
            .registrations(&d.name)
            .iter()
            .map(|(attr, dtypes)| json!({"attr": attr, "dtypes": dtypes.iter().map(|t| t.name()).collect::<Vec<_>>()}))
            .collect(),
        _ => vec![],
    };
    let (gradient, reason) = match d.facts.gradient {
        Some(Gradient::Function(_) | Gradient::ThroughFunctions) => ("yes", None),
        Some(Gradient::NotDifferentiable(r)) => ("not_differentiable", Some(r)),
        Some(Gradient::Unavailable(r)) => ("not_implemented", Some(r)),
        None => ("undeclared", None),
    };
    let f = &d.facts;
    json!({
        "name": d.name,
        "family": d.family,
        "definition": format!("crates/ops/src/defs/{}.rs", d.family),
        "inputs": args(&d.inputs),
        "outputs": args(&d.outputs),
        "attrs": attrs,
        "cpu_kernels": kernels,
        "run_by": match f.execution {
            Execution::Kernel => "kernel",
            Execution::ControlFlow(_) => "executor",
            Execution::Call(_) => "runtime",
            Execution::Transfer(_) => "rendezvous",
        },
        "gradient": gradient,
        "gradient_reason": reason,
        "flags": {
            "stateful": f.stateful,
            "placeholder": f.placeholder,
            "control_flow": f.control_flow().map(|c| format!("{c:?}")),
            "call": f.call().map(|c| format!("{c:?}")),
            "forwards_input": f.forwards_input,
            "forwards_single_input": f.forwards_single_input,
            "shape_only": f.shape_only,
            "grows": f.grows,
            "contraction": f.contraction,
            "elementwise": f.elementwise.map(|e| format!("{e:?}")),
            "activation": f.activation,
            "commutative": f.commutative,
            "neutral": f.neutral.map(|(n, s)| format!("{n:?} ({s:?})")),
            "involution": f.involution.map(|i| format!("{i:?}")),
            "ref_forms": f.ref_forms.iter().map(|r| json!({"op": r.op, "refs": r.refs})).collect::<Vec<_>>(),
        },
    })
}
