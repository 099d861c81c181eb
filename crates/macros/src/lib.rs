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
use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{format_ident, quote, ToTokens};
use std::cell::Cell;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{
    parse_macro_input, parse_quote, BinOp, Block, Expr, ExprForLoop, ExprIf, ExprWhile, FnArg, Ident, ItemFn, Label,
    Pat, ReturnType, Stmt, Type, UnOp,
};

/// Rewrites a function's `if`/`while`/`for` over tensors into functional control flow and its
/// operators into ops on values (see the crate docs). It also writes `<name>_function()`,
/// the function wrapped as a `ferroflow::function::Function` (traced per input signature),
/// when every argument is a `Value`.
#[proc_macro_attribute]
pub fn function(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = Tokens::from(attr);
    if !attr.is_empty() {
        return syn::Error::new(attr.span(), "#[ferroflow::function] takes no arguments").to_compile_error().into();
    }
    let f = parse_macro_input!(item as ItemFn);
    match expand(f) {
        Ok(t) => {
            if std::env::var_os("FERROFLOW_AG_DEBUG").is_some() {
                eprintln!("{t}");
            }
            t.into()
        }
        Err(e) => e.to_compile_error().into(),
    }
}

fn ag() -> Tokens {
    quote!(::ferroflow::function::autograph)
}

/// The function being rewritten.
struct Ctx {
    func: String,
    /// The declared return type (`Result<T, EagerError>`).
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
        return Err(syn::Error::new(
            f.sig.span(),
            "a #[ferroflow::function] returns `Result<_, EagerError>` (its ops can fail): add `-> Result<Value, EagerError>`",
        ));
    };
    let inner = result_ok_type(ret_ty).ok_or_else(|| {
        syn::Error::new(
            ret_ty.span(),
            "a #[ferroflow::function] returns `Result<_, EagerError>` (its ops can fail): write `Result<Value, EagerError>`",
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

/// Compile-time refusals: what AutoGraph cannot carry, with what to write instead.
fn check(b: &Block) -> syn::Result<()> {
    struct Checker {
        error: Option<syn::Error>,
        control: usize,
    }
    impl Checker {
        fn fail(&mut self, span: Span, msg: &str) {
            if self.error.is_none() {
                self.error = Some(syn::Error::new(span, msg));
            }
        }
    }
    impl<'a> Visit<'a> for Checker {
        fn visit_local(&mut self, l: &'a syn::Local) {
            if l.init.is_none() {
                self.fail(
                    l.span(),
                    "a `let` without a value in a #[ferroflow::function]: a variable that a tensor `if` or loop may \
                     set needs a value (and so a dtype) before it; write `let x = Value::scalar(0.0f32);` \
                     (or `let x: Option<Value> = None;`)",
                );
            }
            syn::visit::visit_local(self, l);
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            let control = matches!(e, Expr::If(_) | Expr::While(_) | Expr::ForLoop(_));
            if control {
                self.control += 1;
            }
            let target = match e {
                Expr::Assign(a) => Some(&*a.left),
                Expr::Binary(b) if is_compound(&b.op) => Some(&*b.left),
                _ => None,
            };
            if let Some(t) = target {
                if self.control > 0 && assigned_ident(t).is_none() {
                    self.fail(
                        t.span(),
                        "only local variables can be assigned inside `if`, `while` and `for` in a \
                         #[ferroflow::function] (a traced branch or loop carries locals): assign a local inside, \
                         and store it here after the statement",
                    );
                }
            }
            syn::visit::visit_expr(self, e);
            if control {
                self.control -= 1;
            }
        }
        fn visit_expr_closure(&mut self, _: &'a syn::ExprClosure) {}
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let mut c = Checker { error: None, control: 0 };
    c.visit_block(b);
    c.error.map_or(Ok(()), Err)
}

fn is_compound(op: &BinOp) -> bool {
    matches!(
        op,
        BinOp::AddAssign(_)
            | BinOp::SubAssign(_)
            | BinOp::MulAssign(_)
            | BinOp::DivAssign(_)
            | BinOp::RemAssign(_)
            | BinOp::BitAndAssign(_)
            | BinOp::BitOrAssign(_)
            | BinOp::BitXorAssign(_)
            | BinOp::ShlAssign(_)
            | BinOp::ShrAssign(_)
    )
}

/// The local an assignment target names (`x`, not `x.f` or `x[i]`).
fn assigned_ident(e: &Expr) -> Option<Ident> {
    match e {
        Expr::Path(p) if p.qself.is_none() && p.path.segments.len() == 1 => Some(p.path.segments[0].ident.clone()),
        Expr::Paren(p) => assigned_ident(&p.expr),
        _ => None,
    }
}

/// The locals `node` assigns that it does not declare, in order of first assignment.
fn assigned_vars(node: &dyn Fn(&mut Assigned), exclude: &[Ident]) -> Vec<Ident> {
    let mut a = Assigned { assigned: Vec::new(), declared: exclude.iter().map(Ident::to_string).collect() };
    node(&mut a);
    let declared = a.declared.clone();
    let mut out: Vec<Ident> = Vec::new();
    for i in a.assigned {
        if !declared.contains(&i.to_string()) && !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// A block or an expression.
#[derive(Clone, Copy)]
enum Node<'a> {
    Block(&'a Block),
    Expr(&'a Expr),
}

/// The single-identifier paths an expression reads (outside closures and items).
struct Paths(Vec<Ident>);

impl<'a> Visit<'a> for Paths {
    fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
        if p.qself.is_none() && p.path.segments.len() == 1 {
            self.0.push(p.path.segments[0].ident.clone());
        }
    }
    fn visit_expr_closure(&mut self, c: &'a syn::ExprClosure) {
        syn::visit::visit_expr(self, &c.body);
    }
    fn visit_item(&mut self, _: &'a syn::Item) {}
    fn visit_macro(&mut self, m: &'a syn::Macro) {
        // Identifiers in macro arguments (`vec![x]`) are read too.
        for t in m.tokens.clone() {
            if let proc_macro2::TokenTree::Ident(i) = t {
                self.0.push(i);
            }
        }
    }
}

struct Assigned {
    assigned: Vec<Ident>,
    declared: Vec<String>,
}

impl<'a> Visit<'a> for Assigned {
    fn visit_expr(&mut self, e: &'a Expr) {
        match e {
            Expr::Assign(a) => self.assigned.extend(assigned_ident(&a.left)),
            Expr::Binary(b) if is_compound(&b.op) => self.assigned.extend(assigned_ident(&b.left)),
            _ => {}
        }
        syn::visit::visit_expr(self, e);
    }
    fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
        self.declared.push(p.ident.to_string());
        syn::visit::visit_pat_ident(self, p);
    }
    fn visit_expr_closure(&mut self, _: &'a syn::ExprClosure) {}
    fn visit_item(&mut self, _: &'a syn::Item) {}
}

/// The idents a pattern binds.
fn pat_idents(p: &Pat) -> Vec<Ident> {
    struct Idents(Vec<Ident>);
    impl<'a> Visit<'a> for Idents {
        fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
            self.0.push(p.ident.clone());
        }
    }
    let mut i = Idents(Vec::new());
    i.visit_pat(p);
    i.0
}

/// Source text of a condition for messages (`n % 2 == 0`, `x.size()`).
fn text(t: &impl ToTokens) -> String {
    let s = t.to_token_stream().to_string();
    s.replace(" . ", ".").replace(" (", "(").replace("( ", "(").replace(" )", ")").replace(" ,", ",").replace("& ", "&")
}

/// Whether `node` contains a `return` (outside closures and items).
fn contains_return(s: &Stmt) -> bool {
    struct Finder(bool);
    impl<'a> Visit<'a> for Finder {
        fn visit_expr_return(&mut self, _: &'a syn::ExprReturn) {
            self.0 = true;
        }
        fn visit_expr_closure(&mut self, _: &'a syn::ExprClosure) {}
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let mut f = Finder(false);
    f.visit_stmt(s);
    f.0
}

/// Whether `node` assigns one of `flags`.
fn assigns_any(s: &Stmt, flags: &[Ident]) -> bool {
    let mut a = Assigned { assigned: Vec::new(), declared: Vec::new() };
    a.visit_stmt(s);
    a.assigned.iter().any(|i| flags.contains(i))
}

fn is_control(s: &Stmt) -> bool {
    let e = match s {
        Stmt::Expr(e, _) => e,
        _ => return false,
    };
    match e {
        Expr::If(i) => !matches!(*i.cond, Expr::Let(_)),
        Expr::While(w) => !matches!(*w.cond, Expr::Let(_)),
        Expr::ForLoop(_) => true,
        _ => false,
    }
}

/// The function's own statements, lowered. A control statement that may `return` splits the
/// function: its traced form sets return slots and a flag, and the statements after it run
/// as the other branch of an `if` on the flag (when the function returns values).
fn lower_top(ctx: &Ctx, stmts: &[Stmt]) -> Vec<Stmt> {
    let mut out = Vec::new();
    for (i, s) in stmts.iter().enumerate() {
        let tail = i + 1 == stmts.len() && matches!(s, Stmt::Expr(_, None));
        let Some(k) = ctx.ret_count.filter(|_| !tail && is_control(s) && contains_return(s)) else {
            let mut s = s.clone();
            Lower { ctx }.visit_stmt_mut(&mut s);
            out.push(s);
            continue;
        };
        let ag = ag();
        let func = &ctx.func;
        let slots: Vec<Ident> = (0..k).map(|j| format_ident!("__ag_ret_{}", j)).collect();
        let converted = convert_returns(s, k, &ctx.func);
        let Stmt::Expr(plain, _) = s else { unreachable!("a control statement") };
        let Stmt::Expr(traced, _) = &converted else { unreachable!("a control statement") };
        let lowered = Lower { ctx }.dual(plain, Some(traced));
        let rest = lower_top(ctx, &stmts[i + 1..]);
        let ret_ty = &ctx.ret_ty;
        out.push(parse_quote!(let mut __ag_do_ret = #ag::flag(false);));
        for s in &slots {
            out.push(parse_quote!(let mut #s: ::core::option::Option<::ferroflow::function::Value> = ::core::option::Option::None;));
        }
        out.push(Stmt::Expr(lowered, Some(Default::default())));
        out.push(parse_quote! {
            if #ag::maybe_returned(&__ag_do_ret, #func)? {
                return #ag::select_return(#func, &__ag_do_ret, ::std::vec![#(#slots.clone()),*], || -> #ret_ty { #(#rest)* });
            }
        });
        out.extend(rest);
        return out;
    }
    out
}

/// `s` with each `return e` replaced by: the slots of `e` into `__ag_ret_*`, `__ag_do_ret`
/// set, and `break` when inside a loop of `s`; statements a return makes unreachable are
/// dropped, and those after a statement that may have returned are guarded.
fn convert_returns(s: &Stmt, k: usize, func: &str) -> Stmt {
    struct Conv {
        k: usize,
        func: String,
        loops: usize,
    }
    impl Conv {
        fn replacement(&self, r: &syn::ExprReturn) -> Expr {
            let ag = ag();
            let (k, func) = (self.k, &self.func);
            let value = match &r.expr {
                Some(e) => quote!((#e)?),
                None => quote!(()),
            };
            let slots = (0..k).map(|j| format_ident!("__ag_ret_{}", j));
            let idx = 0..k;
            let brk = if self.loops > 0 { quote!(break;) } else { quote!() };
            parse_quote!({
                let __ag_v = #value;
                let __ag_s = #ag::return_slots(&__ag_v, #k, #func)?;
                #(#slots = __ag_s[#idx].clone();)*
                __ag_do_ret = #ag::flag(true);
                #brk
            })
        }
    }
    impl VisitMut for Conv {
        fn visit_block_mut(&mut self, b: &mut Block) {
            for s in &mut b.stmts {
                self.visit_stmt_mut(s);
            }
            // Drop what follows a return; guard what follows a statement that may return.
            let flag = [format_ident!("__ag_do_ret")];
            let mut stmts = Vec::new();
            let mut iter = std::mem::take(&mut b.stmts).into_iter();
            while let Some(s) = iter.next() {
                let returned = matches!(&s, Stmt::Expr(Expr::Block(blk), _) if blk.block.stmts.iter().any(|s| assigns_any(s, &flag)));
                let may_return = assigns_any(&s, &flag);
                stmts.push(s);
                if returned && self.loops == 0 {
                    break;
                }
                if may_return {
                    let rest: Vec<Stmt> = iter.by_ref().collect();
                    if rest.is_empty() {
                        break;
                    }
                    if self.loops > 0 {
                        // A loop inside this loop returned: leave this one too.
                        stmts.push(parse_quote!(if __ag_do_ret {
                            break;
                        }));
                        stmts.extend(rest);
                    } else {
                        stmts.push(parse_quote!(if !__ag_do_ret { #(#rest)* }));
                    }
                    break;
                }
            }
            b.stmts = stmts;
        }
        fn visit_expr_mut(&mut self, e: &mut Expr) {
            match e {
                Expr::Return(r) => {
                    *e = self.replacement(r);
                }
                Expr::While(w) => {
                    self.visit_expr_mut(&mut w.cond);
                    self.loops += 1;
                    self.visit_block_mut(&mut w.body);
                    self.loops -= 1;
                }
                Expr::ForLoop(f) => {
                    self.visit_expr_mut(&mut f.expr);
                    self.loops += 1;
                    self.visit_block_mut(&mut f.body);
                    self.loops -= 1;
                }
                Expr::Loop(l) => {
                    self.loops += 1;
                    self.visit_block_mut(&mut l.body);
                    self.loops -= 1;
                }
                _ => syn::visit_mut::visit_expr_mut(self, e),
            }
        }
        fn visit_expr_closure_mut(&mut self, _: &mut syn::ExprClosure) {}
        fn visit_item_mut(&mut self, _: &mut syn::Item) {}
    }
    let mut s = s.clone();
    let mut c = Conv { k, func: func.to_string(), loops: 0 };
    // The statement itself is not inside a loop of its own: visit its parts.
    match &mut s {
        Stmt::Expr(e, _) => c.visit_expr_mut(e),
        other => c.visit_stmt_mut(other),
    }
    s
}

/// A loop body for its traced form: its own `break` / `continue` set flags, statements after
/// them are guarded by the flags, and unreachable ones are dropped.
fn convert_jumps(body: &Block, label: Option<&Label>, brk: &Ident, cont: &Ident) -> (Block, bool, bool) {
    struct Conv<'l> {
        label: Option<&'l Label>,
        depth: usize,
        brk: Ident,
        cont: Ident,
        used_brk: bool,
        used_cont: bool,
    }
    impl Conv<'_> {
        fn ours(&self, l: &Option<syn::Lifetime>) -> bool {
            match l {
                None => self.depth == 0,
                Some(l) => self.label.is_some_and(|ours| ours.name.ident == l.ident),
            }
        }
    }
    impl VisitMut for Conv<'_> {
        fn visit_block_mut(&mut self, b: &mut Block) {
            for s in &mut b.stmts {
                self.visit_stmt_mut(s);
            }
            if self.depth > 0 {
                return;
            }
            let flags = [self.brk.clone(), self.cont.clone()];
            let mut stmts = Vec::new();
            let mut iter = std::mem::take(&mut b.stmts).into_iter();
            while let Some(s) = iter.next() {
                let jumped = matches!(&s, Stmt::Expr(Expr::Block(blk), _) if blk.attrs.iter().any(|a| a.path().is_ident("ag_jump")));
                let may_jump = assigns_any(&s, &flags);
                stmts.push(s);
                if jumped {
                    break;
                }
                if may_jump {
                    let rest: Vec<Stmt> = iter.by_ref().collect();
                    if !rest.is_empty() {
                        let (brk, cont) = (&self.brk, &self.cont);
                        stmts.push(parse_quote!(if !(#brk || #cont) { #(#rest)* }));
                    }
                    break;
                }
            }
            // Strip the marker attribute.
            for s in &mut stmts {
                if let Stmt::Expr(Expr::Block(blk), _) = s {
                    blk.attrs.retain(|a| !a.path().is_ident("ag_jump"));
                }
            }
            b.stmts = stmts;
        }
        fn visit_expr_mut(&mut self, e: &mut Expr) {
            match e {
                Expr::Break(b) if b.expr.is_none() && self.ours(&b.label) => {
                    self.used_brk = true;
                    let f = &self.brk;
                    *e = parse_quote!(#[ag_jump] { #f = ::ferroflow::function::autograph::flag(true); });
                }
                Expr::Continue(c) if self.ours(&c.label) => {
                    self.used_cont = true;
                    let f = &self.cont;
                    *e = parse_quote!(#[ag_jump] { #f = ::ferroflow::function::autograph::flag(true); });
                }
                Expr::While(_) | Expr::ForLoop(_) | Expr::Loop(_) => {
                    self.depth += 1;
                    syn::visit_mut::visit_expr_mut(self, e);
                    self.depth -= 1;
                }
                _ => syn::visit_mut::visit_expr_mut(self, e),
            }
        }
        fn visit_expr_closure_mut(&mut self, _: &mut syn::ExprClosure) {}
        fn visit_item_mut(&mut self, _: &mut syn::Item) {}
    }
    struct Strip;
    impl VisitMut for Strip {
        fn visit_expr_block_mut(&mut self, b: &mut syn::ExprBlock) {
            b.attrs.retain(|a| !a.path().is_ident("ag_jump"));
            syn::visit_mut::visit_expr_block_mut(self, b);
        }
    }
    let mut body = body.clone();
    let mut c = Conv { label, depth: 0, brk: brk.clone(), cont: cont.clone(), used_brk: false, used_cont: false };
    c.visit_block_mut(&mut body);
    Strip.visit_block_mut(&mut body);
    (body, c.used_brk, c.used_cont)
}

/// A traced branch or body: `break` / `continue` / `return` that would leave it (they are not
/// converted here) become run-time errors naming the statement.
fn sanitize(b: &mut Block, func: &str, stmt: &str) {
    struct San<'a> {
        func: &'a str,
        stmt: &'a str,
        depth: usize,
        labels: Vec<String>,
    }
    impl San<'_> {
        fn error(&self, what: &str) -> Expr {
            let (ag, func, stmt) = (ag(), self.func, self.stmt);
            parse_quote!(return ::core::result::Result::Err(#ag::escape(#func, #stmt, #what)))
        }
        fn bound(&self, l: &Option<syn::Lifetime>) -> bool {
            match l {
                None => self.depth > 0,
                Some(l) => self.labels.contains(&l.ident.to_string()),
            }
        }
    }
    impl VisitMut for San<'_> {
        fn visit_expr_mut(&mut self, e: &mut Expr) {
            let label = match e {
                Expr::While(w) => Some(w.label.clone()),
                Expr::ForLoop(f) => Some(f.label.clone()),
                Expr::Loop(l) => Some(l.label.clone()),
                _ => None,
            };
            match e {
                Expr::Break(b) if !self.bound(&b.label) => *e = self.error("break"),
                Expr::Continue(c) if !self.bound(&c.label) => *e = self.error("continue"),
                Expr::Return(_) => *e = self.error("return"),
                _ => {
                    if let Some(label) = label {
                        self.depth += 1;
                        let named = label.map(|l| l.name.ident.to_string());
                        self.labels.extend(named.clone());
                        syn::visit_mut::visit_expr_mut(self, e);
                        if named.is_some() {
                            self.labels.pop();
                        }
                        self.depth -= 1;
                    } else {
                        syn::visit_mut::visit_expr_mut(self, e);
                    }
                }
            }
        }
        fn visit_expr_closure_mut(&mut self, _: &mut syn::ExprClosure) {}
        fn visit_item_mut(&mut self, _: &mut syn::Item) {}
    }
    San { func, stmt, depth: 0, labels: Vec::new() }.visit_block_mut(b);
}

/// The rewrite of expressions: control flow into its two forms, operators into ops.
struct Lower<'c> {
    ctx: &'c Ctx,
}

impl Lower<'_> {
    fn lowered_block(&mut self, b: &Block) -> Block {
        let mut b = b.clone();
        self.visit_block_mut(&mut b);
        b
    }

    fn lowered_expr(&mut self, e: &Expr) -> Expr {
        let mut e = e.clone();
        self.visit_expr_mut(&mut e);
        e
    }

    /// The two forms of a control expression; `traced` (when given) is the source of the
    /// traced form (returns converted), else `plain` is.
    fn dual(&mut self, plain: &Expr, traced: Option<&Expr>) -> Expr {
        let traced = traced.unwrap_or(plain);
        match (plain, traced) {
            (Expr::If(p), Expr::If(t)) => self.dual_if(p, t),
            (Expr::While(p), Expr::While(t)) => self.dual_while(p, t),
            (Expr::ForLoop(p), Expr::ForLoop(t)) => self.dual_for(p, t),
            _ => self.lowered_expr(plain),
        }
    }

    /// Loads and stores of state variables.
    fn state(&self, vars: &[Ident], source: &Ident, offset: usize, mutable: bool) -> Tokens {
        let ag = ag();
        let func = &self.ctx.func;
        let names = vars.iter().map(Ident::to_string);
        let idx = (0..vars.len()).map(|i| i + offset);
        let m = if mutable { quote!(mut) } else { quote!() };
        quote!(#(let #m #vars = (&#ag::wrap(&#vars)).var_from(&#source[#idx], #func, #names)?;)*)
    }

    /// Clones (or borrows) into a traced closure the locals `body` reads that are not its
    /// state, so that the closure can be called again (`Fn`) even where `body` moves them.
    fn own(&self, node: Node, state: &[Ident]) -> Tokens {
        let mut p = Paths(Vec::new());
        let mut inside = Assigned { assigned: Vec::new(), declared: Vec::new() };
        match node {
            Node::Block(b) => {
                p.visit_block(b);
                inside.visit_block(b);
            }
            Node::Expr(e) => {
                p.visit_expr(e);
                inside.visit_expr(e);
            }
        }
        let mut seen: Vec<String> = inside.declared;
        let mut out = Tokens::new();
        let ag = ag();
        for i in p.0 {
            let name = i.to_string();
            if self.ctx.locals.contains(&name) && !state.contains(&i) && !seen.contains(&name) {
                out.extend(quote!(let #i = (&&#ag::Own(&#i)).ag_own();));
                seen.push(name);
            }
        }
        out
    }

    fn slots(&self, vars: &[Ident]) -> Tokens {
        let ag = ag();
        let func = &self.ctx.func;
        let names = vars.iter().map(Ident::to_string);
        quote!(::std::vec![#((&#ag::wrap(&#vars)).var_to(&#vars, #func, #names)?),*])
    }

    fn store(&self, vars: &[Ident], source: &Ident, offset: usize) -> Tokens {
        let ag = ag();
        let func = &self.ctx.func;
        let names = vars.iter().map(Ident::to_string);
        let idx = (0..vars.len()).map(|i| i + offset);
        quote!(#(#vars = (&#ag::wrap(&#vars)).var_from(&#source[#idx], #func, #names)?;)*)
    }

    fn dual_if(&mut self, plain: &ExprIf, traced: &ExprIf) -> Expr {
        let ag = ag();
        let func = self.ctx.func.clone();
        let stmt = format!("if {}", text(&plain.cond));
        let cond = self.lowered_expr(&plain.cond);
        let then_plain = self.lowered_block(&plain.then_branch);
        let else_plain: Expr = match &plain.else_branch {
            Some((_, e)) => self.lowered_expr(e),
            None => parse_quote!({}),
        };
        // The traced form: branches as closures over the assigned variables.
        let mut then_src = traced.then_branch.clone();
        let mut else_src: Block = match &traced.else_branch {
            Some((_, e)) => match &**e {
                Expr::Block(b) => b.block.clone(),
                e => parse_quote!({ #e }),
            },
            None => parse_quote!({}),
        };
        let vars = assigned_vars(
            &|a: &mut Assigned| {
                a.visit_block(&then_src);
                a.visit_block(&else_src);
            },
            &[],
        );
        sanitize(&mut then_src, &func, &stmt);
        sanitize(&mut else_src, &func, &stmt);
        let then_t = self.lowered_block(&then_src);
        let else_t = self.lowered_block(&else_src);
        let s = format_ident!("__ag_s");
        let load = self.state(&vars, &s, 0, true);
        let slots = self.slots(&vars);
        let out = format_ident!("__ag_out");
        let store = self.store(&vars, &out, 0);
        let names = vars.iter().map(Ident::to_string);
        let n = vars.len();
        let own_then = self.own(Node::Block(&then_src), &vars);
        let own_else = self.own(Node::Block(&else_src), &vars);
        let branch = |body: &Block, own: &Tokens| {
            quote!(|__ag_s: &[#ag::Slot]| -> ::core::result::Result<::std::vec::Vec<#ag::Slot>, ::ferroflow::function::EagerError> {
                #own
                #load
                let __ag_v = #body;
                __ag_mk.note(&__ag_v);
                let mut __ag_r = #slots;
                __ag_r.extend((&__ag_mk.wrap()).out_to(&__ag_v, #func)?);
                ::core::result::Result::Ok(__ag_r)
            })
        };
        let (then_c, else_c) = (branch(&then_t, &own_then), branch(&else_t, &own_else));
        parse_quote!({
            let __ag_c = #cond;
            match #ag::Condition::decide(&__ag_c, #func, #stmt)? {
                ::core::option::Option::Some(true) => #then_plain,
                ::core::option::Option::Some(false) => #else_plain,
                ::core::option::Option::None => {
                    let __ag_mk = #ag::Marker::new();
                    let __ag_out = #ag::if_stmt(
                        #func,
                        #stmt,
                        &#ag::Condition::value(&__ag_c),
                        &[#(#names),*],
                        #slots,
                        #then_c,
                        #else_c,
                    )?;
                    #store
                    (&__ag_mk.wrap()).out_from(&__ag_out[#n..], #func)?
                }
            }
        })
    }

    /// The traced loop's parts: flags, converted body, state variables.
    fn traced_loop(&mut self, body: &Block, label: Option<&Label>, extra: &[Ident], stmt: &str) -> TracedLoop {
        let id = self.ctx.id();
        let (brk, cont) = (format_ident!("__ag_brk_{}", id), format_ident!("__ag_cont_{}", id));
        let (mut body, used_brk, used_cont) = convert_jumps(body, label, &brk, &cont);
        sanitize(&mut body, &self.ctx.func, stmt);
        let mut vars = assigned_vars(&|a: &mut Assigned| a.visit_block(&body), extra);
        vars.retain(|v| !extra.contains(v));
        // Both flags exist when either is used (the guards name both).
        let flags = if used_brk || used_cont { vec![brk.clone(), cont.clone()] } else { Vec::new() };
        for (f, used) in flags.iter().zip([used_brk, used_cont]) {
            if used && !vars.contains(f) {
                vars.push(f.clone());
            }
        }
        // `!(brk) && cond`: the traced condition stops at a break.
        let stop: Option<Expr> = used_brk.then(|| parse_quote!(!#brk));
        let mut skip = vars.clone();
        skip.extend(extra.iter().cloned());
        let own = self.own(Node::Block(&body), &skip);
        let body = self.lowered_block(&body);
        TracedLoop { body, vars, flags, stop, cont: used_cont.then_some(cont), own }
    }

    fn dual_while(&mut self, plain: &ExprWhile, traced: &ExprWhile) -> Expr {
        let ag = ag();
        let func = self.ctx.func.clone();
        let stmt = format!("while {}", text(&plain.cond));
        let cond = self.lowered_expr(&plain.cond);
        let body_plain = self.lowered_block(&plain.body);
        let label = &plain.label;
        let t = self.traced_loop(&traced.body, traced.label.as_ref(), &[], &stmt);
        let src_cond = &traced.cond;
        let full: Expr = match &t.stop {
            Some(stop) => parse_quote!((#stop) && (#src_cond)),
            None => parse_quote!(#src_cond),
        };
        let own_cond = self.own(Node::Expr(&full), &t.vars);
        let full = self.lowered_expr(&full);
        let traced_form = self.while_call(&stmt, &t, &own_cond, &full, &Tokens::new());
        parse_quote!({
            let __ag_c = #cond;
            match #ag::Condition::decide(&__ag_c, #func, #stmt)? {
                ::core::option::Option::Some(__ag_b) => {
                    let mut __ag_first = ::core::option::Option::Some(__ag_b);
                    #label loop {
                        let __ag_b = match __ag_first.take() {
                            ::core::option::Option::Some(__ag_b) => __ag_b,
                            ::core::option::Option::None => {
                                let __ag_c = #cond;
                                #ag::Condition::decide(&__ag_c, #func, #stmt)?
                                    .ok_or_else(|| #ag::became_symbolic(#func, #stmt))?
                            }
                        };
                        if !__ag_b {
                            break;
                        }
                        #body_plain
                    }
                }
                ::core::option::Option::None => {
                    #traced_form
                }
            }
        })
    }

    fn dual_for(&mut self, plain: &ExprForLoop, traced: &ExprForLoop) -> Expr {
        let ag = ag();
        let func = self.ctx.func.clone();
        let stmt = format!("for {} in {}", text(&plain.pat), text(&plain.expr));
        let seq = self.lowered_expr(&plain.expr);
        let seq = rewrite_range(seq);
        let pat = &plain.pat;
        let body_plain = self.lowered_block(&plain.body);
        let label = &plain.label;
        let id = self.ctx.id();
        let i = format_ident!("__ag_i_{}", id);
        let mut extra = pat_idents(&traced.pat);
        extra.push(i.clone());
        let mut t = self.traced_loop(&traced.body, traced.label.as_ref(), &extra, &stmt);
        t.vars.insert(0, i.clone());
        let (seqv, n, mk) =
            (format_ident!("__ag_seq_{}", id), format_ident!("__ag_n_{}", id), format_ident!("__ag_mk_{}", id));
        let less: Expr = parse_quote!(#ag::ord(&#i, &#n, #ag::Ord::Lt)?);
        let full: Expr = match &t.stop {
            Some(stop) => {
                let stop = self.lowered_expr(stop);
                parse_quote!(#ag::and(&#stop, || ::core::result::Result::Ok(#less))?)
            }
            None => less,
        };
        let pat_name = text(pat);
        // Each iteration binds the pattern to row `i` and advances `i` first (a `continue`
        // skips only what follows).
        let prologue = quote! {
            let #pat = (&#mk).var_from(
                &::core::option::Option::Some(#ag::element(&#seqv, &#i)?),
                #func,
                #pat_name,
            )?;
            #i = #ag::add(&#i, &1i32)?;
        };
        let traced_form = self.while_call(&stmt, &t, &Tokens::new(), &full, &prologue);
        parse_quote!({
            let __ag_kind = (&&#ag::iter(#seq)).ag_iter()?;
            let #mk = #ag::item_marker(&__ag_kind);
            match __ag_kind {
                #ag::ForKind::Plain(__ag_it) => {
                    #label for #pat in __ag_it #body_plain
                }
                #ag::ForKind::Tensor(#seqv) => {
                    let mut #i = ::ferroflow::function::Value::scalar(0i32);
                    let #n = #ag::len(&#seqv)?;
                    #traced_form
                }
            }
        })
    }

    /// A loop's traced form: its flags, the `while_stmt` call over its state variables (the
    /// condition `full` after `own_cond`; the body after `prologue`), the state stored back.
    fn while_call(&self, stmt: &str, t: &TracedLoop, own_cond: &Tokens, full: &Expr, prologue: &Tokens) -> Tokens {
        let ag = ag();
        let func = &self.ctx.func;
        let s = format_ident!("__ag_s");
        let out = format_ident!("__ag_out");
        let (load, load_mut, slots, store) = (
            self.state(&t.vars, &s, 0, false),
            self.state(&t.vars, &s, 0, true),
            self.slots(&t.vars),
            self.store(&t.vars, &out, 0),
        );
        let names = t.vars.iter().map(Ident::to_string);
        let flags = &t.flags;
        let reset = t.cont.as_ref().map(|c| quote!(#c = #ag::flag(false);));
        let (body_t, own_body) = (&t.body, &t.own);
        quote! {
            #(let mut #flags = #ag::flag(false);)*
            let __ag_out = #ag::while_stmt(
                #func,
                #stmt,
                &[#(#names),*],
                #slots,
                |__ag_s: &[#ag::Slot]| -> ::core::result::Result<::ferroflow::function::Value, ::ferroflow::function::EagerError> {
                    #own_cond
                    #load
                    ::core::result::Result::Ok(#ag::condition_value(#full))
                },
                |__ag_s: &[#ag::Slot]| -> ::core::result::Result<::std::vec::Vec<#ag::Slot>, ::ferroflow::function::EagerError> {
                    #own_body
                    #load_mut
                    #prologue
                    #reset
                    #body_t
                    ::core::result::Result::Ok(#slots)
                },
            )?;
            #store
        }
    }
}

/// The pieces of a loop's traced form.
struct TracedLoop {
    body: Block,
    own: Tokens,
    vars: Vec<Ident>,
    flags: Vec<Ident>,
    stop: Option<Expr>,
    cont: Option<Ident>,
}

/// `range(n)` / `range(a, b)` in a `for` header: AutoGraph's range (a Rust range for Rust
/// integers, TensorFlow's `Range` for a tensor).
fn rewrite_range(e: Expr) -> Expr {
    let ag = ag();
    if let Expr::Call(c) = &e {
        if let Expr::Path(p) = &*c.func {
            if p.path.is_ident("range") {
                let args: Vec<&Expr> = c.args.iter().collect();
                match args.as_slice() {
                    [n] => return parse_quote!(#ag::range(#n)?),
                    [a, b] => return parse_quote!(#ag::range2(#a, #b)?),
                    _ => {}
                }
            }
        }
    }
    e
}

impl VisitMut for Lower<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        let ag = ag();
        match e {
            Expr::If(i) if !matches!(*i.cond, Expr::Let(_)) => {
                let plain = e.clone();
                *e = self.dual(&plain, None);
            }
            Expr::While(w) if !matches!(*w.cond, Expr::Let(_)) => {
                let plain = e.clone();
                *e = self.dual(&plain, None);
            }
            Expr::ForLoop(_) => {
                let plain = e.clone();
                *e = self.dual(&plain, None);
            }
            Expr::Binary(b) => {
                self.visit_expr_mut(&mut b.left);
                self.visit_expr_mut(&mut b.right);
                let (l, r) = (&b.left, &b.right);
                // `a && b` evaluates `b` in a closure: a variable is cloned, not moved into it.
                let lazy: Expr = match &**r {
                    Expr::Path(_) => parse_quote!(::core::clone::Clone::clone(&#r)),
                    r => r.clone(),
                };
                let call: Option<Expr> = match b.op {
                    BinOp::Add(_) => Some(parse_quote!(#ag::add(&(#l), &(#r))?)),
                    BinOp::Sub(_) => Some(parse_quote!(#ag::sub(&(#l), &(#r))?)),
                    BinOp::Mul(_) => Some(parse_quote!(#ag::mul(&(#l), &(#r))?)),
                    BinOp::Div(_) => Some(parse_quote!(#ag::div(&(#l), &(#r))?)),
                    BinOp::Rem(_) => Some(parse_quote!(#ag::rem(&(#l), &(#r))?)),
                    BinOp::Lt(_) => Some(parse_quote!(#ag::ord(&(#l), &(#r), #ag::Ord::Lt)?)),
                    BinOp::Le(_) => Some(parse_quote!(#ag::ord(&(#l), &(#r), #ag::Ord::Le)?)),
                    BinOp::Gt(_) => Some(parse_quote!(#ag::ord(&(#l), &(#r), #ag::Ord::Gt)?)),
                    BinOp::Ge(_) => Some(parse_quote!(#ag::ord(&(#l), &(#r), #ag::Ord::Ge)?)),
                    BinOp::Eq(_) => Some(parse_quote!(#ag::eq(&(#l), &(#r), false)?)),
                    BinOp::Ne(_) => Some(parse_quote!(#ag::eq(&(#l), &(#r), true)?)),
                    BinOp::And(_) => Some(parse_quote!(#ag::and(&(#l), || ::core::result::Result::Ok(#lazy))?)),
                    BinOp::Or(_) => Some(parse_quote!(#ag::or(&(#l), || ::core::result::Result::Ok(#lazy))?)),
                    BinOp::AddAssign(_) => Some(parse_quote!(#l = #ag::add(&(#l), &(#r))?)),
                    BinOp::SubAssign(_) => Some(parse_quote!(#l = #ag::sub(&(#l), &(#r))?)),
                    BinOp::MulAssign(_) => Some(parse_quote!(#l = #ag::mul(&(#l), &(#r))?)),
                    BinOp::DivAssign(_) => Some(parse_quote!(#l = #ag::div(&(#l), &(#r))?)),
                    BinOp::RemAssign(_) => Some(parse_quote!(#l = #ag::rem(&(#l), &(#r))?)),
                    _ => None,
                };
                if let Some(c) = call {
                    *e = c;
                }
            }
            Expr::Unary(u) if matches!(u.op, UnOp::Neg(_) | UnOp::Not(_)) => {
                self.visit_expr_mut(&mut u.expr);
                let x = &u.expr;
                *e = match u.op {
                    UnOp::Neg(_) => parse_quote!(#ag::neg(&(#x))?),
                    _ => parse_quote!(#ag::not(&(#x))?),
                };
            }
            _ => syn::visit_mut::visit_expr_mut(self, e),
        }
    }
    fn visit_expr_closure_mut(&mut self, _: &mut syn::ExprClosure) {}
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
    fn visit_macro_mut(&mut self, _: &mut syn::Macro) {}
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
            "fn f(x: Value) -> Result<Value, EagerError> {\n let y;\n if x > 0.0 { y = x; } else { y = -x; }\n Ok(y)\n}",
        );
        assert!(e.contains("a `let` without a value") && e.contains("Option<Value>"), "{e}");
        assert_eq!(line, 2, "the span points at the `let`");
        let (e, line) = refusal(
            "fn f(x: Value, s: &mut State) -> Result<Value, EagerError> {\n while x > 0 {\n s.total = x;\n }\n Ok(x)\n}",
        );
        assert!(e.contains("only local variables can be assigned inside `if`, `while` and `for`"), "{e}");
        assert_eq!(line, 3);
        let (e, _) = refusal("fn f(x: Value) -> Value { x }");
        assert!(e.contains("returns `Result<_, EagerError>`"), "{e}");
        let (e, _) = refusal("async fn f(x: Value) -> Result<Value, EagerError> { Ok(x) }");
        assert!(e.contains("cannot be async"), "{e}");
    }

    #[test]
    fn the_expansion_has_both_forms_and_an_adapter() {
        let f: ItemFn = syn::parse_str(
            "fn collatz(mut n: Value) -> Result<Value, EagerError> {
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
}
