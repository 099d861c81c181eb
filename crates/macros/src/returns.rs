//! Early `return` (AutoGraph's `return_statements` converter): a `return` under a tensor
//! condition sets return slots and a flag, and the rest of the function runs as the other
//! branch of an `if` on the flag.
use proc_macro2::Ident;
use quote::{format_ident, quote};
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{parse_quote, Block, Expr, Stmt};

use crate::assignments::assigns_any;
use crate::lower::Lower;
use crate::{ag, Ctx};

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
pub(crate) fn lower_top(ctx: &Ctx, stmts: &[Stmt]) -> Vec<Stmt> {
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
        let converted = convert_returns(ctx, s, k);
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
fn convert_returns(ctx: &Ctx, s: &Stmt, k: usize) -> Stmt {
    struct Conv<'c> {
        ctx: &'c Ctx,
        k: usize,
        loops: usize,
    }
    impl Conv<'_> {
        fn replacement(&self, r: &syn::ExprReturn) -> Expr {
            let ag = ag();
            let (k, func) = (self.k, &self.ctx.func);
            let value = match &r.expr {
                Some(e) => {
                    let e = reading_clones(self.ctx, e);
                    quote!((#e)?)
                }
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
    impl VisitMut for Conv<'_> {
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
    let mut c = Conv { ctx, k, loops: 0 };
    // The statement itself is not inside a loop of its own: visit its parts.
    match &mut s {
        Stmt::Expr(e, _) => c.visit_expr_mut(e),
        other => c.visit_stmt_mut(other),
    }
    s
}

/// `e` reading clones of the function's locals (a clonable one is cloned, any other borrowed):
/// unlike a `return`, its replacement is followed by code that reads them again (the state of
/// the loop or branch it is in, the guards after it). Each read is rewritten in place rather
/// than shadowed by a `let`, which assignment analysis would take for a new local.
fn reading_clones(ctx: &Ctx, e: &Expr) -> Expr {
    struct Clones<'c>(&'c [String]);
    impl VisitMut for Clones<'_> {
        fn visit_expr_mut(&mut self, e: &mut Expr) {
            if let Expr::Path(p) = e {
                if p.qself.is_none() && p.path.get_ident().is_some_and(|i| self.0.contains(&i.to_string())) {
                    let ag = ag();
                    *e = parse_quote!((&&#ag::Own(&#p)).ag_own());
                    return;
                }
            }
            syn::visit_mut::visit_expr_mut(self, e);
        }
        fn visit_expr_closure_mut(&mut self, _: &mut syn::ExprClosure) {}
        fn visit_item_mut(&mut self, _: &mut syn::Item) {}
    }
    let mut e = e.clone();
    Clones(&ctx.locals).visit_expr_mut(&mut e);
    e
}
