//! `#[ferroflow::function]`: AutoGraph for Rust.
//!
//! The attribute rewrites a function over `ferroflow::function::Value`s so that it runs as
//! written on concrete values and traces into TensorFlow 2's functional control flow on
//! symbolic ones (see `ferroflow::function::autograph` for the run-time half):
//!
//! - every `if` / `else` becomes a choice made at run time: a `bool` (or concrete value)
//!   condition runs the Rust `if`; a symbolic one calls `if_stmt` (a `StatelessIf` with its
//!   branches as library functions) over the variables the branches assign;
//! - `while` likewise becomes a Rust loop or `while_stmt` (`StatelessWhile`);
//! - `for x in v` over a symbolic value iterates its rows in a `While`; `for i in range(n)`
//!   with a tensor `n` too; over anything else it is Rust's `for`;
//! - `break` and `continue` in a traced loop become flags carried by the loop (statements
//!   after them are guarded by the flags), and an early `return` inside the function's own
//!   loops and ifs becomes return slots and a flag, the rest of the function traced as the
//!   other branch of an `if` on it (as AutoGraph converts `return`);
//! - loop-carried and branch-assigned variables are found by assignment analysis;
//! - operators (`+ - * / %`, comparisons, `!`, unary `-`, `&&`, `||`) work on values and Rust
//!   numbers alike.
//!
//! Constructs it cannot translate are compile errors that say what to write instead.
#![warn(missing_docs)]
use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{format_ident, quote, quote_spanned};
use std::cell::Cell;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{parse_macro_input, parse_quote, FnArg, Ident, ItemFn, ReturnType, Type};

mod assignments;
mod checks;
mod jumps;
mod lower;
mod returns;

use assignments::{pat_idents, Assigned};
use checks::check;
use returns::lower_top;

/// Rewrites a function's `if`/`while`/`for` over tensors into functional control flow and its
/// operators into ops on values (see the crate docs). It also writes `<name>_function()`,
/// the function wrapped as a `ferroflow::function::Function` (traced per input signature),
/// when every argument is a `Value`.
#[proc_macro_attribute]
pub fn function(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = Tokens::from(attr);
    if !attr.is_empty() {
        return syn::Error::new_spanned(attr, "#[ferroflow::function] takes no arguments").to_compile_error().into();
    }
    let item = parse_macro_input!(item as syn::Item);
    let syn::Item::Fn(f) = item else {
        return syn::Error::new(item.span(), "#[ferroflow::function] goes on a `fn` (over `Value`s)")
            .to_compile_error()
            .into();
    };
    match expand(f) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// The run-time half's path.
fn ag() -> Tokens {
    ag_at(Span::call_site())
}

/// The run-time half's path, at `at` (where a type error in a call through it is reported).
fn ag_at(at: Span) -> Tokens {
    quote_spanned!(at=> ::ferroflow::function::autograph)
}

/// The function being rewritten.
struct Ctx {
    func: String,
    /// The declared return type (`Result<T, FunctionError>`).
    ret_ty: Type,
    /// How many values `T` holds, when it is a `Value` or a tuple of them (early returns
    /// under tensor conditions need it).
    ret_count: Option<usize>,
    next: Cell<usize>,
    /// Every local the function binds (arguments, `let`s, patterns).
    locals: Vec<String>,
}

impl Ctx {
    fn id(&self) -> usize {
        let n = self.next.get();
        self.next.set(n + 1);
        n
    }
}

fn expand(mut f: ItemFn) -> syn::Result<Tokens> {
    if let Some(a) = &f.sig.asyncness {
        return Err(syn::Error::new(a.span(), "a #[ferroflow::function] cannot be async: write a plain `fn`"));
    }
    let ReturnType::Type(_, ret_ty) = &f.sig.output else {
        return Err(syn::Error::new_spanned(
            &f.sig,
            "a #[ferroflow::function] returns `Result<_, FunctionError>` (its ops can fail): add `-> Result<Value, FunctionError>`",
        ));
    };
    let inner = result_ok_type(ret_ty).ok_or_else(|| {
        syn::Error::new_spanned(
            ret_ty,
            "a #[ferroflow::function] returns `Result<_, FunctionError>` (its ops can fail): write `Result<Value, FunctionError>`",
        )
    })?;
    let mut locals = Assigned { assigned: Vec::new(), declared: Vec::new() };
    for a in &f.sig.inputs {
        if let FnArg::Typed(t) = a {
            locals.visit_pat(&t.pat);
        }
    }
    locals.visit_block(&f.block);
    let ctx = Ctx {
        func: f.sig.ident.to_string(),
        ret_ty: (**ret_ty).clone(),
        ret_count: value_count(&inner),
        next: Cell::new(0),
        locals: locals.declared,
    };
    check(&f.block)?;
    let body = lower_top(&ctx, &f.block.stmts);
    let ag = ag();
    *f.block = parse_quote!({
        #[allow(unused_imports)]
        use #ag::{
            ForOther as _, ForValue as _, OwnClone as _, OwnRef as _, ViaOut as _, ViaOutOther as _, ViaVar as _,
            ViaVarOther as _,
        };
        #(#body)*
    });
    f.attrs.push(parse_quote!(#[allow(
        unused_mut,
        unused_variables,
        unused_assignments,
        unused_parens,
        unused_braces,
        unreachable_code,
        clippy::all
    )]));
    let adapter = adapter(&f, &inner);
    Ok(quote!(#f #adapter))
}

/// `T` of `Result<T, _>`.
fn result_ok_type(t: &Type) -> Option<Type> {
    let Type::Path(p) = t else { return None };
    let last = p.path.segments.last()?;
    if last.ident != "Result" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else { return None };
    match args.args.first()? {
        syn::GenericArgument::Type(t) => Some(t.clone()),
        _ => None,
    }
}

fn is_value(t: &Type) -> bool {
    match t {
        Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "Value"),
        Type::Paren(p) => is_value(&p.elem),
        _ => false,
    }
}

/// How many values a `Value` / tuple-of-`Value`s type holds.
fn value_count(t: &Type) -> Option<usize> {
    match t {
        t if is_value(t) => Some(1),
        Type::Tuple(tuple) if !tuple.elems.is_empty() && tuple.elems.iter().all(is_value) => Some(tuple.elems.len()),
        _ => None,
    }
}

/// `<name>_function()`: the function as a traced `Function`, when every argument is a `Value`.
fn adapter(f: &ItemFn, inner: &Type) -> Tokens {
    let args: Vec<&FnArg> = f.sig.inputs.iter().collect();
    let all_values = args.iter().all(|a| matches!(a, FnArg::Typed(t) if is_value(&t.ty)));
    if !all_values || !f.sig.generics.params.is_empty() || value_count(inner).is_none() {
        return Tokens::new();
    }
    let (vis, name) = (&f.vis, &f.sig.ident);
    let fname = name.to_string();
    let adapter = format_ident!("{}_function", name);
    let n = args.len();
    let idx = 0..n;
    let arg_names: Vec<String> = args
        .iter()
        .map(|a| match a {
            FnArg::Typed(t) => pat_idents(&t.pat).first().map_or_else(|| "_".to_string(), Ident::to_string),
            FnArg::Receiver(_) => "self".to_string(),
        })
        .collect();
    let doc = format!("`{fname}` as a graph function: traced once per input signature, run as a graph.");
    quote! {
        #[doc = #doc]
        #vis fn #adapter() -> ::ferroflow::function::Function<'static> {
            ::ferroflow::function::function(#fname, |__ag_a: &[::ferroflow::function::Value]| {
                if __ag_a.len() != #n {
                    return ::core::result::Result::Err(::ferroflow::function::autograph::argument_count(
                        #fname,
                        __ag_a.len(),
                        #n,
                    ));
                }
                let __ag_r = #name(#(__ag_a[#idx].clone()),*)?;
                ::ferroflow::function::autograph::outputs(&__ag_r, #fname)
            })
            .arg_names(&[#(#arg_names),*])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(src: &str) -> (String, usize) {
        let f: ItemFn = syn::parse_str(src).unwrap();
        let e = expand(f).expect_err("refused");
        (e.to_string(), e.span().start().line)
    }

    #[test]
    fn refusals_are_compile_errors_that_say_what_to_write() {
        let (e, line) = refusal(
            "fn f(x: Value) -> Result<Value, FunctionError> {\n let y;\n if x > 0.0 { y = x; } else { y = -x; }\n Ok(y)\n}",
        );
        assert!(e.contains("a `let` without a value") && e.contains("Option<Value>"), "{e}");
        assert_eq!(line, 2, "the span points at the `let`");
        let (e, line) = refusal(
            "fn f(x: Value, s: &mut State) -> Result<Value, FunctionError> {\n while x > 0 {\n s.total = x;\n }\n Ok(x)\n}",
        );
        assert!(e.contains("only local variables can be assigned inside `if`, `while` and `for`"), "{e}");
        assert_eq!(line, 3);
        let (e, _) = refusal("fn f(x: Value) -> Value { x }");
        assert!(e.contains("returns `Result<_, FunctionError>`"), "{e}");
        let (e, _) = refusal("async fn f(x: Value) -> Result<Value, FunctionError> { Ok(x) }");
        assert!(e.contains("cannot be async"), "{e}");
    }

    #[test]
    fn the_expansion_has_both_forms_and_an_adapter() {
        let f: ItemFn = syn::parse_str(
            "fn collatz(mut n: Value) -> Result<Value, FunctionError> {
                let mut steps = Value::scalar(0i32);
                while n > 1 { if n % 2 == 0 { n = n / 2; } else { n = 3 * n + 1; } steps += 1; }
                Ok(steps)
            }",
        )
        .unwrap();
        let out = expand(f).unwrap().to_string();
        for want in ["while_stmt", "if_stmt", "Condition :: decide", "fn collatz_function", "\"n\" , \"steps\""] {
            assert!(out.contains(want), "{want} missing from {out}");
        }
        // The expansion is valid Rust.
        syn::parse_file(&out).unwrap();
    }

    /// The lines of the identifier `name` wherever the expansion of `src` holds it.
    fn lines_of(src: &str, name: &str) -> Vec<usize> {
        fn walk(t: Tokens, name: &str, out: &mut Vec<usize>) {
            for t in t {
                match t {
                    proc_macro2::TokenTree::Ident(i) if i == name => out.push(i.span().start().line),
                    proc_macro2::TokenTree::Group(g) => walk(g.stream(), name, out),
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        walk(expand(syn::parse_str(src).unwrap()).unwrap(), name, &mut out);
        out
    }

    #[test]
    fn type_errors_point_at_the_condition_the_operator_and_the_sequence() {
        // What the run-time half requires of a condition, an operand or a sequence is asked
        // at the user's tokens, so that rustc reports a wrong type there, not at the attribute.
        let src = "fn f(x: Value, n: i32) -> Result<Value, FunctionError> {
            let mut y = x.clone();
            if n {
                y = x * 2.0f32;
            }
            while n { y = -y; }
            for v in 5 { y = !v; }
            Ok(y)
        }";
        assert_eq!(lines_of(src, "decide"), [3, 6, 6], "the if's, the while's first test and later ones");
        assert_eq!(lines_of(src, "condition_value")[0], 6, "the while's (the for's own test cannot fail)");
        // Each operator is in both forms of the statement it is in.
        for (name, line) in [("value", 3), ("mul", 4), ("neg", 6), ("not", 7), ("ag_iter", 7)] {
            let lines = lines_of(src, name);
            assert!(!lines.is_empty() && lines.iter().all(|&l| l == line), "{name} at {lines:?}, not {line}");
        }
    }
}
