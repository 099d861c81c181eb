//! `break` and `continue` (AutoGraph's `break_statements` and `continue_statements`
//! converters): in a traced loop they set flags the loop carries, and what follows them is
//! guarded by the flags; jumps that would leave a traced body become run-time errors.
use proc_macro2::Ident;
use syn::visit_mut::VisitMut;
use syn::{parse_quote, Block, Expr, Label, Stmt};

use crate::ag;
use crate::assignments::assigns_any;

/// A loop body for its traced form: its own `break` / `continue` set flags, statements after
/// them are guarded by the flags, and unreachable ones are dropped.
pub(crate) fn convert_jumps(body: &Block, label: Option<&Label>, brk: &Ident, cont: &Ident) -> (Block, bool, bool) {
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
pub(crate) fn sanitize(b: &mut Block, func: &str, stmt: &str) {
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
