//! Assignment analysis (AutoGraph's activity analysis): which locals a statement assigns,
//! declares and reads, so that a traced branch or loop carries exactly those it changes.
use proc_macro2::Ident;
use syn::visit::Visit;
use syn::{BinOp, Block, Expr, Pat, Stmt};

pub(crate) fn is_compound(op: &BinOp) -> bool {
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
pub(crate) fn assigned_ident(e: &Expr) -> Option<Ident> {
    match e {
        Expr::Path(p) if p.qself.is_none() && p.path.segments.len() == 1 => Some(p.path.segments[0].ident.clone()),
        Expr::Paren(p) => assigned_ident(&p.expr),
        _ => None,
    }
}

/// The locals `node` assigns that it does not declare, in order of first assignment.
pub(crate) fn assigned_vars(node: &dyn Fn(&mut Assigned), exclude: &[Ident]) -> Vec<Ident> {
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
pub(crate) enum Node<'a> {
    Block(&'a Block),
    Expr(&'a Expr),
}

/// The single-identifier paths an expression reads (outside closures and items).
pub(crate) struct Paths(pub(crate) Vec<Ident>);

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

pub(crate) struct Assigned {
    pub(crate) assigned: Vec<Ident>,
    pub(crate) declared: Vec<String>,
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
pub(crate) fn pat_idents(p: &Pat) -> Vec<Ident> {
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

/// Whether `node` assigns one of `flags`.
pub(crate) fn assigns_any(s: &Stmt, flags: &[Ident]) -> bool {
    let mut a = Assigned { assigned: Vec::new(), declared: Vec::new() };
    a.visit_stmt(s);
    a.assigned.iter().any(|i| flags.contains(i))
}
