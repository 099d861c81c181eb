//! Lowering (AutoGraph's `control_flow` and `logical_expressions` converters): each `if`,
//! `while` and `for` into its Rust form and its traced form (`if_stmt` / `while_stmt`),
//! chosen at run time by the condition; operators into the run-time's ops on values.
use proc_macro2::{Ident, Span, TokenStream as Tokens};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{parse_quote, parse_quote_spanned, BinOp, Block, Expr, ExprForLoop, ExprIf, ExprWhile, Label, UnOp};

use crate::assignments::{assigned_vars, pat_idents, Assigned, Node, Paths};
use crate::jumps::{convert_jumps, sanitize};
use crate::{ag, ag_at, Ctx};

/// Source text of a condition for messages (`n % 2 == 0`, `x.size()`).
fn text(t: &impl ToTokens) -> String {
    let s = t.to_token_stream().to_string();
    s.replace(" . ", ".").replace(" (", "(").replace("( ", "(").replace(" )", ")").replace(" ,", ",").replace("& ", "&")
}

/// The rewrite of expressions: control flow into its two forms, operators into ops.
pub(crate) struct Lower<'c> {
    pub(crate) ctx: &'c Ctx,
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

    /// The condition of an `if` or `while`, evaluated without moving a variable (`if done`):
    /// a loop tests it again, and a branch or the loop's state may read it after the test.
    fn condition(&mut self, c: &Expr) -> Expr {
        match c {
            Expr::Path(_) => parse_quote!(::core::clone::Clone::clone(&#c)),
            c => self.lowered_expr(c),
        }
    }

    /// The two forms of a control expression; `traced` (when given) is the source of the
    /// traced form (returns converted), else `plain` is.
    pub(crate) fn dual(&mut self, plain: &Expr, traced: Option<&Expr>) -> Expr {
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
        let cond = self.condition(&plain.cond);
        let (decide, value) = decide(&plain.cond, &func, &stmt);
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
            quote!(|__ag_s: &[#ag::Slot]| -> ::core::result::Result<::std::vec::Vec<#ag::Slot>, ::ferroflow::function::FunctionError> {
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
            match #decide {
                ::core::option::Option::Some(true) => #then_plain,
                ::core::option::Option::Some(false) => #else_plain,
                ::core::option::Option::None => {
                    let __ag_mk = #ag::Marker::new();
                    let __ag_out = #ag::if_stmt(
                        #func,
                        #stmt,
                        &#value,
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
        let cond = self.condition(&plain.cond);
        let (decide, _) = decide(&plain.cond, &func, &stmt);
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
        let full = quote_spanned!(at(src_cond)=> #ag::condition_value(#full));
        let traced_form = self.while_call(&stmt, &t, &own_cond, &full, &Tokens::new());
        parse_quote!({
            let __ag_c = #cond;
            match #decide {
                ::core::option::Option::Some(__ag_b) => {
                    let mut __ag_first = ::core::option::Option::Some(__ag_b);
                    #label loop {
                        let __ag_b = match __ag_first.take() {
                            ::core::option::Option::Some(__ag_b) => __ag_b,
                            ::core::option::Option::None => {
                                let __ag_c = #cond;
                                #decide
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
        let full = quote!(#ag::condition_value(#full));
        let traced_form = self.while_call(&stmt, &t, &Tokens::new(), &full, &prologue);
        let iterate = {
            let at = at(&plain.expr);
            let ag = ag_at(at);
            quote_spanned!(at=> (&&#ag::iter(#seq)).ag_iter()?)
        };
        parse_quote!({
            let __ag_kind = #iterate;
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
    /// condition's value `full` after `own_cond`; the body after `prologue`), the state stored
    /// back.
    fn while_call(&self, stmt: &str, t: &TracedLoop, own_cond: &Tokens, full: &Tokens, prologue: &Tokens) -> Tokens {
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
                |__ag_s: &[#ag::Slot]| -> ::core::result::Result<::ferroflow::function::Value, ::ferroflow::function::FunctionError> {
                    #own_cond
                    #load
                    ::core::result::Result::Ok(#full)
                },
                |__ag_s: &[#ag::Slot]| -> ::core::result::Result<::std::vec::Vec<#ag::Slot>, ::ferroflow::function::FunctionError> {
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

/// `Condition::decide` and `Condition::value` of `__ag_c`, the value of `cond`: a condition
/// that is neither a `bool` nor a `Value` is reported at the user's condition, not at the
/// attribute.
fn decide(cond: &Expr, func: &str, stmt: &str) -> (Tokens, Tokens) {
    let at = at(cond);
    let ag = ag_at(at);
    (
        quote_spanned!(at=> #ag::Condition::decide(&__ag_c, #func, #stmt)?),
        quote_spanned!(at=> #ag::Condition::value(&__ag_c)),
    )
}

/// The span for generated code whose type errors belong to `t` (a condition, an operator, a
/// sequence): resolved as the macro's own names are, reported at `t` rather than at the
/// attribute.
fn at(t: &impl Spanned) -> Span {
    Span::call_site().located_at(t.span())
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
                let at = at(&b.op);
                let ag = ag_at(at);
                // `a && b` evaluates `b` in a closure: a variable is cloned, not moved into it.
                let lazy: Expr = match &**r {
                    Expr::Path(_) => parse_quote!(::core::clone::Clone::clone(&#r)),
                    r => r.clone(),
                };
                let call: Option<Expr> = match b.op {
                    BinOp::Add(_) => Some(parse_quote_spanned!(at=> #ag::add(&(#l), &(#r))?)),
                    BinOp::Sub(_) => Some(parse_quote_spanned!(at=> #ag::sub(&(#l), &(#r))?)),
                    BinOp::Mul(_) => Some(parse_quote_spanned!(at=> #ag::mul(&(#l), &(#r))?)),
                    BinOp::Div(_) => Some(parse_quote_spanned!(at=> #ag::div(&(#l), &(#r))?)),
                    BinOp::Rem(_) => Some(parse_quote_spanned!(at=> #ag::rem(&(#l), &(#r))?)),
                    BinOp::Lt(_) => Some(parse_quote_spanned!(at=> #ag::ord(&(#l), &(#r), #ag::Ord::Lt)?)),
                    BinOp::Le(_) => Some(parse_quote_spanned!(at=> #ag::ord(&(#l), &(#r), #ag::Ord::Le)?)),
                    BinOp::Gt(_) => Some(parse_quote_spanned!(at=> #ag::ord(&(#l), &(#r), #ag::Ord::Gt)?)),
                    BinOp::Ge(_) => Some(parse_quote_spanned!(at=> #ag::ord(&(#l), &(#r), #ag::Ord::Ge)?)),
                    BinOp::Eq(_) => Some(parse_quote_spanned!(at=> #ag::eq(&(#l), &(#r), false)?)),
                    BinOp::Ne(_) => Some(parse_quote_spanned!(at=> #ag::eq(&(#l), &(#r), true)?)),
                    BinOp::And(_) => {
                        Some(parse_quote_spanned!(at=> #ag::and(&(#l), || ::core::result::Result::Ok(#lazy))?))
                    }
                    BinOp::Or(_) => {
                        Some(parse_quote_spanned!(at=> #ag::or(&(#l), || ::core::result::Result::Ok(#lazy))?))
                    }
                    BinOp::AddAssign(_) => Some(parse_quote_spanned!(at=> #l = #ag::add(&(#l), &(#r))?)),
                    BinOp::SubAssign(_) => Some(parse_quote_spanned!(at=> #l = #ag::sub(&(#l), &(#r))?)),
                    BinOp::MulAssign(_) => Some(parse_quote_spanned!(at=> #l = #ag::mul(&(#l), &(#r))?)),
                    BinOp::DivAssign(_) => Some(parse_quote_spanned!(at=> #l = #ag::div(&(#l), &(#r))?)),
                    BinOp::RemAssign(_) => Some(parse_quote_spanned!(at=> #l = #ag::rem(&(#l), &(#r))?)),
                    _ => None,
                };
                if let Some(c) = call {
                    *e = c;
                }
            }
            // A negative number (`x < -10.0`) stays a literal: `neg` of an untyped `10.0` leaves
            // its type for inference to guess, and it cannot.
            Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) && matches!(*u.expr, Expr::Lit(_)) => {}
            Expr::Unary(u) if matches!(u.op, UnOp::Neg(_) | UnOp::Not(_)) => {
                self.visit_expr_mut(&mut u.expr);
                let (x, at) = (&u.expr, at(&u.op));
                let ag = ag_at(at);
                *e = match u.op {
                    UnOp::Neg(_) => parse_quote_spanned!(at=> #ag::neg(&(#x))?),
                    _ => parse_quote_spanned!(at=> #ag::not(&(#x))?),
                };
            }
            _ => syn::visit_mut::visit_expr_mut(self, e),
        }
    }
    fn visit_expr_closure_mut(&mut self, _: &mut syn::ExprClosure) {}
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
    fn visit_macro_mut(&mut self, _: &mut syn::Macro) {}
}
