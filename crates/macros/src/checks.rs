//! What `#[ferroflow::function]` refuses at compile time, each refusal saying what to write
//! instead.
use quote::ToTokens;
use syn::visit::Visit;
use syn::{Block, Expr};

use crate::assignments::{assigned_ident, is_compound};

/// Compile-time refusals: what AutoGraph cannot carry, with what to write instead.
pub(crate) fn check(b: &Block) -> syn::Result<()> {
    struct Checker {
        error: Option<syn::Error>,
        control: usize,
    }
    impl Checker {
        /// Refuses `what`, the message spanning all of it (not only its first token).
        fn fail(&mut self, what: &dyn ToTokens, msg: &str) {
            if self.error.is_none() {
                self.error = Some(syn::Error::new_spanned(what, msg));
            }
        }
    }
    impl<'a> Visit<'a> for Checker {
        fn visit_local(&mut self, l: &'a syn::Local) {
            if l.init.is_none() {
                self.fail(
                    l,
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
                        t,
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
