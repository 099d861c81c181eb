//! What `#[ferroflow::function]` (AutoGraph for Rust) expands to: the rewritten function calls
//! these. Not meant to be called by hand; [`crate::cond`] and [`crate::while_loop`] are the
//! functional forms for that.
//!
//! The macro cannot see types, so every `if`, `while` and `for` is expanded twice: as the
//! Rust statement it was, taken when the condition is a `bool` (or a concrete, eager
//! [`Value`]: eager code runs as written), and as [`if_stmt`] / [`while_stmt`] over the
//! variables the statement assigns, taken when the condition is a symbolic value being
//! traced. Which one runs is decided at run time by [`Condition::decide`] (or
//! [`ForIter`] for `for`), as AutoGraph decides by the Python type of the condition. Both
//! expansions must compile for every type, so conversions between a variable and its slots
//! dispatch on the variable's type by autoref: a `Value` (or `Option<Value>`) converts, any
//! other type compiles to a run-time error that names the variable (taken only if a Rust
//! variable is assigned under a tensor condition).
//!
//! Operators on values: the macro rewrites `a + b` into `add(&a, &b)?` and so on. For Rust
//! operands these are Rust's operators; with a [`Value`] on either side they are TensorFlow's
//! ops (`AddV2`, `Sub`, `Mul`, `RealDiv` / `FloorDiv`, `FloorMod`, `Less`, ..., `LogicalAnd`),
//! a Rust number on the other side converted to the value's dtype (as Python numbers convert).
//! `/` and `%` on integer tensors are TensorFlow's `//` and `%` (floor division and floor
//! modulo, which differ from Rust's for negative operands).
use std::cell::Cell;
use std::marker::PhantomData;

use ferroflow_proto::attr;
use ferroflow_tensor::{DType, Tensor};

pub use crate::control::{if_stmt, while_stmt, Slot};
use ferroflow_ops::RawOps;

use crate::eager::Eager;
use crate::error::{FunctionError, OpError};
use crate::value::{apply1, Value};

/// A graph function called with `got` arguments where it takes `takes`.
pub fn argument_count(func: &str, got: usize, takes: usize) -> FunctionError {
    FunctionError::Op {
        op: func.to_string(),
        inputs: format!("{got} arguments"),
        source: OpError::Signature(format!("takes {takes} arguments")),
    }
}

fn error(func: &str, text: &str, reason: impl Into<String>) -> FunctionError {
    FunctionError::statement(func, text, reason)
}

/// The condition of an `if` or `while`: a Rust `bool` or a [`Value`].
#[diagnostic::on_unimplemented(
    message = "the condition of an `if`/`while` in a #[ferroflow::function] must be a `bool` or a `Value`, not `{Self}`"
)]
pub trait Condition {
    /// `Some(truth)` for a Rust or eager condition (the Rust statement runs), `None` for a
    /// symbolic one (the statement is traced).
    fn decide(&self, func: &str, text: &str) -> Result<Option<bool>, FunctionError>;
    /// The condition as a value.
    fn value(&self) -> Value;
}

impl Condition for bool {
    fn decide(&self, _: &str, _: &str) -> Result<Option<bool>, FunctionError> {
        Ok(Some(*self))
    }
    fn value(&self) -> Value {
        Value::scalar(*self)
    }
}

impl Condition for Value {
    fn decide(&self, func: &str, text: &str) -> Result<Option<bool>, FunctionError> {
        let Value::Eager(t) = self else { return Ok(None) };
        if t.len() != 1 {
            return Err(error(
                func,
                text,
                format!("the condition `{text}` must be a scalar, it has shape {:?}", t.dims()),
            ));
        }
        let b = if t.dtype() == DType::Bool { t.clone() } else { Eager.cast(t, DType::Bool)? };
        Ok(Some(b.as_slice::<bool>().map_err(|e| error(func, text, e.to_string()))?[0]))
    }
    fn value(&self) -> Value {
        self.clone()
    }
}

/// The error of a `while` whose condition was a Rust value at first and a symbolic one later.
pub fn became_symbolic(func: &str, text: &str) -> FunctionError {
    error(
        func,
        text,
        format!(
            "the condition `{text}` was concrete when the loop started and symbolic later: make it depend on a \
             function argument from the start (a loop runs as Rust or as a graph `While`, decided by its first test)"
        ),
    )
}

/// The error of a `break`, `continue` or `return` under a tensor condition that cannot leave
/// the traced branch or body it is in.
pub fn escape(func: &str, text: &str, what: &str) -> FunctionError {
    error(
        func,
        text,
        format!(
            "`{what}` under the tensor condition `{text}` would leave it for Rust control flow around it: \
             {}",
            if what == "return" {
                "early returns under tensor conditions work in the function's own statements and the loops and ifs \
                 in them (with a return type of Value or a tuple of Values); set a variable instead"
            } else {
                "make the enclosing loop a tensor loop (`while` on a tensor, `for x in tensor`, `for i in range(n)` \
                 with a tensor n), or set a variable instead"
            }
        ),
    )
}

/// A typed marker (no value) used to pick a conversion by the marked type.
pub struct Wrap<T>(PhantomData<fn() -> T>);
impl<T> Clone for Wrap<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Wrap<T> {}

/// The marker of `_`'s type.
pub fn wrap<T>(_: &T) -> Wrap<T> {
    Wrap(PhantomData)
}

/// A marker whose type is fixed later, by [`Marker::note`] (the type a traced branch yields).
pub struct Marker<T>(PhantomData<fn() -> T>);
impl<T> Marker<T> {
    /// A marker.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Marker<T> {
        Marker(PhantomData)
    }
    /// Fixes the type.
    pub fn note(&self, _: &T) {}
    /// The typed marker.
    pub fn wrap(&self) -> Wrap<T> {
        Wrap(PhantomData)
    }
}

/// A local that a traced branch or body reads: cloned into the closure when it is `Clone`
/// (values are cheap to clone), else borrowed.
pub struct Own<'a, T>(pub &'a T);

/// Cloning a `Clone` local.
pub trait OwnClone<T> {
    /// A clone.
    fn ag_own(&self) -> T;
}
impl<T: Clone> OwnClone<T> for &Own<'_, T> {
    fn ag_own(&self) -> T {
        self.0.clone()
    }
}

/// Borrowing any other local.
pub trait OwnRef<'a, T> {
    /// The reference.
    fn ag_own(&self) -> &'a T;
}
impl<'a, T> OwnRef<'a, T> for Own<'a, T> {
    fn ag_own(&self) -> &'a T {
        self.0
    }
}

/// A variable a tensor statement may change: one slot.
pub trait StateVar: Sized {
    /// The slot.
    fn to_slot(&self) -> Slot;
    /// Back from the slot (`name` for the error when it is empty).
    fn from_slot(slot: &Slot, func: &str, name: &str) -> Result<Self, FunctionError>;
}

impl StateVar for Value {
    fn to_slot(&self) -> Slot {
        Some(self.clone())
    }
    fn from_slot(slot: &Slot, func: &str, name: &str) -> Result<Self, FunctionError> {
        slot.clone().ok_or_else(|| error(func, name, format!("`{name}` has no value here")))
    }
}

impl StateVar for Option<Value> {
    fn to_slot(&self) -> Slot {
        self.clone()
    }
    fn from_slot(slot: &Slot, _: &str, _: &str) -> Result<Self, FunctionError> {
        Ok(slot.clone())
    }
}

/// Conversions of a state variable whose type is a [`StateVar`].
pub trait ViaVar<T> {
    /// The variable's slot.
    fn var_to(self, v: &T, func: &str, name: &str) -> Result<Slot, FunctionError>;
    /// The variable from its slot.
    fn var_from(self, s: &Slot, func: &str, name: &str) -> Result<T, FunctionError>;
}
impl<T: StateVar> ViaVar<T> for &Wrap<T> {
    fn var_to(self, v: &T, _: &str, _: &str) -> Result<Slot, FunctionError> {
        Ok(v.to_slot())
    }
    fn var_from(self, s: &Slot, func: &str, name: &str) -> Result<T, FunctionError> {
        T::from_slot(s, func, name)
    }
}

/// The fallback for any other type: the conversion is a run-time error.
pub trait ViaVarOther<T> {
    /// An error naming the variable.
    fn var_to(self, v: &T, func: &str, name: &str) -> Result<Slot, FunctionError>;
    /// An error naming the variable.
    fn var_from(self, s: &Slot, func: &str, name: &str) -> Result<T, FunctionError>;
}
impl<T> ViaVarOther<T> for Wrap<T> {
    fn var_to(self, _: &T, func: &str, name: &str) -> Result<Slot, FunctionError> {
        Err(not_a_value::<T>(func, name))
    }
    fn var_from(self, _: &Slot, func: &str, name: &str) -> Result<T, FunctionError> {
        Err(not_a_value::<T>(func, name))
    }
}

fn not_a_value<T>(func: &str, name: &str) -> FunctionError {
    error(
        func,
        name,
        format!(
            "`{name}` (a {}) is assigned under a tensor condition: only `Value`s (and `Option<Value>`s) can change \
             inside a traced `if` or loop; make it a Value, or compute it outside",
            std::any::type_name::<T>()
        ),
    )
}

/// Values a statement or function yields: none, a [`Value`], or a tuple of them.
#[diagnostic::on_unimplemented(
    message = "a #[ferroflow::function] yields `()`, a `Value` or a tuple of Values, not `{Self}`"
)]
pub trait Slots: Sized {
    /// Appends the slots (an `Err` result gives its error).
    fn to_slots(&self, out: &mut Vec<Slot>) -> Result<(), FunctionError>;
    /// Takes the slots back.
    fn from_slots(it: &mut std::slice::Iter<'_, Slot>, func: &str) -> Result<Self, FunctionError>;
}

impl Slots for () {
    fn to_slots(&self, _: &mut Vec<Slot>) -> Result<(), FunctionError> {
        Ok(())
    }
    fn from_slots(_: &mut std::slice::Iter<'_, Slot>, _: &str) -> Result<Self, FunctionError> {
        Ok(())
    }
}

impl Slots for Value {
    fn to_slots(&self, out: &mut Vec<Slot>) -> Result<(), FunctionError> {
        out.push(Some(self.clone()));
        Ok(())
    }
    fn from_slots(it: &mut std::slice::Iter<'_, Slot>, func: &str) -> Result<Self, FunctionError> {
        it.next().cloned().flatten().ok_or_else(|| error(func, "", "a value is missing"))
    }
}

macro_rules! tuple_slots {
    ($($t:ident $i:tt),+) => {
        impl<$($t: Slots),+> Slots for ($($t,)+) {
            fn to_slots(&self, out: &mut Vec<Slot>) -> Result<(), FunctionError> {
                $(self.$i.to_slots(out)?;)+
                Ok(())
            }
            fn from_slots(it: &mut std::slice::Iter<'_, Slot>, func: &str) -> Result<Self, FunctionError> {
                Ok(($($t::from_slots(it, func)?,)+))
            }
        }
    };
}
/// A branch that yields `Ok(values)` (`if c { Ok(a) } else { Ok(b) }` as a function's tail).
impl<T: Slots> Slots for Result<T, FunctionError> {
    fn to_slots(&self, out: &mut Vec<Slot>) -> Result<(), FunctionError> {
        match self {
            Ok(v) => v.to_slots(out),
            Err(e) => Err(e.clone()),
        }
    }
    fn from_slots(it: &mut std::slice::Iter<'_, Slot>, func: &str) -> Result<Self, FunctionError> {
        T::from_slots(it, func).map(Ok)
    }
}

tuple_slots!(A 0, B 1);
tuple_slots!(A 0, B 1, C 2);
tuple_slots!(A 0, B 1, C 2, D 3);
tuple_slots!(A 0, B 1, C 2, D 3, E 4);

/// Conversions of a yielded value whose type is [`Slots`].
pub trait ViaOut<T> {
    /// The slots.
    fn out_to(self, v: &T, func: &str) -> Result<Vec<Slot>, FunctionError>;
    /// Back from the slots.
    fn out_from(self, s: &[Slot], func: &str) -> Result<T, FunctionError>;
}
impl<T: Slots> ViaOut<T> for &Wrap<T> {
    fn out_to(self, v: &T, _: &str) -> Result<Vec<Slot>, FunctionError> {
        let mut out = Vec::new();
        v.to_slots(&mut out)?;
        Ok(out)
    }
    fn out_from(self, s: &[Slot], func: &str) -> Result<T, FunctionError> {
        T::from_slots(&mut s.iter(), func)
    }
}

/// The fallback: a run-time error.
pub trait ViaOutOther<T> {
    /// An error.
    fn out_to(self, v: &T, func: &str) -> Result<Vec<Slot>, FunctionError>;
    /// An error.
    fn out_from(self, s: &[Slot], func: &str) -> Result<T, FunctionError>;
}
impl<T> ViaOutOther<T> for Wrap<T> {
    fn out_to(self, _: &T, func: &str) -> Result<Vec<Slot>, FunctionError> {
        Err(not_slots::<T>(func))
    }
    fn out_from(self, _: &[Slot], func: &str) -> Result<T, FunctionError> {
        Err(not_slots::<T>(func))
    }
}

fn not_slots<T>(func: &str) -> FunctionError {
    error(
        func,
        "",
        format!(
            "an `if` under a tensor condition yields a {}: a traced `if` yields `()`, a Value or a tuple of Values",
            std::any::type_name::<T>()
        ),
    )
}

/// A function's result as values (the `Function` adapter the macro writes).
pub fn outputs<T: Slots>(v: &T, func: &str) -> Result<Vec<Value>, FunctionError> {
    let mut out = Vec::new();
    v.to_slots(&mut out)?;
    out.into_iter().map(|s| s.ok_or_else(|| error(func, "", "a result has no value"))).collect()
}

/// The slots of a `return`ed value, `k` of them.
pub fn return_slots<T: Slots>(v: &T, k: usize, func: &str) -> Result<Vec<Slot>, FunctionError> {
    let mut out = Vec::new();
    v.to_slots(&mut out)?;
    if out.len() != k {
        return Err(error(func, "return", format!("{} values returned where the function returns {k}", out.len())));
    }
    Ok(out)
}

/// A flag value (AutoGraph's `break` / `continue` / `return` flags).
pub fn flag(b: bool) -> Value {
    Value::scalar(b)
}

/// Whether an early return may have happened (a symbolic flag, or a concrete true one).
pub fn maybe_returned(flag: &Value, func: &str) -> Result<bool, FunctionError> {
    Ok(flag.decide(func, "return")?.unwrap_or(true))
}

/// The function's result when `returned` may be true: the returned slots, else `rest` (the
/// statements after the one that may have returned), as a traced `if` when `returned` is
/// symbolic.
pub fn select_return<T: Slots>(
    func: &str,
    returned: &Value,
    slots: Vec<Slot>,
    rest: impl FnOnce() -> Result<T, FunctionError>,
) -> Result<T, FunctionError> {
    if let Some(b) = returned.decide(func, "return")? {
        return if b { T::from_slots(&mut slots.iter(), func) } else { rest() };
    }
    let names: Vec<String> = (0..slots.len()).map(|k| format!("__ag_ret_{k}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let rest = Cell::new(Some(rest));
    let out = if_stmt(
        func,
        "return",
        returned,
        &names,
        slots.clone(),
        |s| Ok(s.to_vec()),
        |_| {
            let f = rest.take().ok_or_else(|| error(func, "return", "the rest of the function was traced twice"))?;
            let v = f()?;
            let mut out = Vec::new();
            v.to_slots(&mut out)?;
            Ok(out)
        },
    )?;
    T::from_slots(&mut out.iter(), func)
}

/// What a `for` iterates: a Rust iterator, or a symbolic value (rows along dimension 0).
pub enum ForKind<I> {
    /// Iterate in Rust.
    Plain(I),
    /// Trace a `While` over the rows.
    Tensor(Value),
}

/// The iterated expression of a `for`.
pub struct Iter<T>(Cell<Option<T>>);

/// Wraps the iterated expression.
pub fn iter<T>(t: T) -> Iter<T> {
    Iter(Cell::new(Some(t)))
}

/// Iterating a [`Value`]: a concrete one row by row in Rust, a symbolic one traced.
pub trait ForValue {
    /// What to iterate.
    fn ag_iter(&self) -> Result<ForKind<std::vec::IntoIter<Value>>, FunctionError>;
}
impl ForValue for &Iter<Value> {
    fn ag_iter(&self) -> Result<ForKind<std::vec::IntoIter<Value>>, FunctionError> {
        match self.0.take() {
            Some(Value::Eager(t)) => {
                let n = t.dims().first().copied().ok_or_else(|| error("for", "", "cannot iterate over a scalar"))?;
                let rows: Result<Vec<Value>, FunctionError> =
                    (0..n).map(|i| Ok(Value::Eager(gather(&t, i)?))).collect();
                Ok(ForKind::Plain(rows?.into_iter()))
            }
            Some(v) => Ok(ForKind::Tensor(v)),
            None => Err(error("for", "", "iterated twice")),
        }
    }
}

fn gather(t: &Tensor, i: usize) -> Result<Tensor, FunctionError> {
    let i = i32::try_from(i).map_err(|_| error("for", "", "too many rows"))?;
    crate::eager::op("GatherV2").input(t).input(&Tensor::scalar(i)).input(&Tensor::scalar(0i32)).run1()
}

/// Iterating anything else: Rust's `for`.
pub trait ForOther<I> {
    /// What to iterate.
    fn ag_iter(&self) -> Result<ForKind<I>, FunctionError>;
}
impl<T: IntoIterator> ForOther<T::IntoIter> for Iter<T> {
    fn ag_iter(&self) -> Result<ForKind<T::IntoIter>, FunctionError> {
        let t = self.0.take().ok_or_else(|| error("for", "", "iterated twice"))?;
        Ok(ForKind::Plain(t.into_iter()))
    }
}

/// The marker of what a `for` binds.
pub fn item_marker<I: Iterator>(_: &ForKind<I>) -> Wrap<I::Item> {
    Wrap(PhantomData)
}

/// The number of rows of `v` (its dimension 0, int32).
pub fn len(v: &Value) -> Result<Value, FunctionError> {
    let shape = apply1("Shape", &[v], &[])?;
    apply1("GatherV2", &[&shape, &Value::scalar(0i32), &Value::scalar(0i32)], &[])
}

/// Row `i` of `v`.
pub fn element(v: &Value, i: &Value) -> Result<Value, FunctionError> {
    apply1("GatherV2", &[v, i, &Value::scalar(0i32)], &[])
}

/// `range(n)` / `range(start, n)`: a Rust range for Rust integers, TensorFlow's `Range` for a
/// [`Value`] (so `for i in range(n)` over a tensor `n` becomes a `While`).
pub trait RangeArg: Sized {
    /// The range.
    type Out;
    /// `start..limit`.
    fn range(start: Self, limit: Self) -> Result<Self::Out, FunctionError>;
    /// Zero.
    fn zero() -> Self;
}

macro_rules! int_range {
    ($($t:ty),*) => {$(
        impl RangeArg for $t {
            type Out = std::ops::Range<$t>;
            fn range(start: $t, limit: $t) -> Result<Self::Out, FunctionError> {
                Ok(start..limit)
            }
            fn zero() -> $t {
                0
            }
        }
    )*};
}
int_range!(i32, i64, u32, u64, usize);

impl RangeArg for Value {
    type Out = Value;
    fn range(start: Value, limit: Value) -> Result<Value, FunctionError> {
        let start = convert_like(&start, &limit)?;
        apply1("Range", &[&start, &limit, &convert_like(&Value::scalar(1i32), &limit)?], &[])
    }
    fn zero() -> Value {
        Value::scalar(0i32)
    }
}

/// `range(limit)`.
pub fn range<T: RangeArg>(limit: T) -> Result<T::Out, FunctionError> {
    T::range(T::zero(), limit)
}

/// `range(start, limit)`.
pub fn range2<T: RangeArg>(start: T, limit: T) -> Result<T::Out, FunctionError> {
    T::range(start, limit)
}

/// `v` in `like`'s dtype (a Rust number next to a tensor takes the tensor's dtype).
fn convert_like(v: &Value, like: &Value) -> Result<Value, FunctionError> {
    match v {
        Value::Eager(t) if t.dtype() != like.dtype() => Ok(Value::Eager(Eager.cast(t, like.dtype())?)),
        v => Ok(v.clone()),
    }
}

/// A Rust number as a scalar tensor.
pub trait Number: Copy {
    /// The scalar.
    fn scalar(self) -> Tensor;
}
macro_rules! number {
    ($($t:ty),*) => {$(
        impl Number for $t {
            fn scalar(self) -> Tensor {
                Tensor::scalar(self)
            }
        }
    )*};
}
number!(i32, i64, f32, f64, u8, bool);

macro_rules! binary {
    (@numbers $trait:ident, $method:ident, $($n:ty),*) => {$(
        impl<'a, 'b> $trait<&'b $n> for &'a Value {
            type Output = Value;
            fn $method(self, r: &'b $n) -> Result<Value, FunctionError> {
                let r = convert_like(&Value::Eager(r.scalar()), self)?;
                $trait::$method(self, &r)
            }
        }
    )*};
    ($(#[$doc:meta])* $trait:ident, $method:ident, $fn:ident, $std:ident, $stdm:ident, $op:expr) => {
        $(#[$doc])*
        pub trait $trait<R> {
            /// The result type.
            type Output;
            /// Applies the operator.
            fn $method(self, r: R) -> Result<Self::Output, FunctionError>;
        }
        impl<'a, 'b, A: ?Sized, B: ?Sized> $trait<&'b B> for &'a A
        where
            &'a A: std::ops::$std<&'b B>,
        {
            type Output = <&'a A as std::ops::$std<&'b B>>::Output;
            fn $method(self, r: &'b B) -> Result<Self::Output, FunctionError> {
                Ok(std::ops::$std::$stdm(self, r))
            }
        }
        impl<'a, 'b> $trait<&'b Value> for &'a Value {
            type Output = Value;
            fn $method(self, r: &'b Value) -> Result<Value, FunctionError> {
                let op: fn(DType) -> &'static str = $op;
                apply1(op(self.dtype()), &[self, r], &[])
            }
        }
        binary!(@numbers $trait, $method, i32, f64);
        /// The operator on references (see the module docs).
        pub fn $fn<A: $trait<B>, B>(a: A, b: B) -> Result<A::Output, FunctionError> {
            a.$method(b)
        }
    };
}

fn is_int(d: DType) -> bool {
    matches!(d, DType::Int32 | DType::Int64 | DType::Int8 | DType::Int16 | DType::UInt8 | DType::UInt16)
}

binary!(
    /// `+`
    AgAdd, ag_add, add, Add, add, |_| "AddV2"
);
binary!(
    /// `-`
    AgSub, ag_sub, sub, Sub, sub, |_| "Sub"
);
binary!(
    /// `*`
    AgMul, ag_mul, mul, Mul, mul, |_| "Mul"
);
binary!(
    /// `/` (`FloorDiv` on integer tensors, as TensorFlow's `//`)
    AgDiv, ag_div, div, Div, div, |d| if is_int(d) { "FloorDiv" } else { "RealDiv" }
);
binary!(
    /// `%` (`FloorMod`, as TensorFlow's `%`)
    AgRem, ag_rem, rem, Rem, rem, |_| "FloorMod"
);

/// Rust numbers on the left of a tensor (`3 * n`).
macro_rules! number_left {
    ($($t:ty),*) => {$(
        impl<'a, 'b> AgAdd<&'b Value> for &'a $t {
            type Output = Value;
            fn ag_add(self, r: &'b Value) -> Result<Value, FunctionError> {
                add(&convert_like(&Value::Eager(self.scalar()), r)?, r)
            }
        }
        impl<'a, 'b> AgSub<&'b Value> for &'a $t {
            type Output = Value;
            fn ag_sub(self, r: &'b Value) -> Result<Value, FunctionError> {
                sub(&convert_like(&Value::Eager(self.scalar()), r)?, r)
            }
        }
        impl<'a, 'b> AgMul<&'b Value> for &'a $t {
            type Output = Value;
            fn ag_mul(self, r: &'b Value) -> Result<Value, FunctionError> {
                mul(&convert_like(&Value::Eager(self.scalar()), r)?, r)
            }
        }
        impl<'a, 'b> AgDiv<&'b Value> for &'a $t {
            type Output = Value;
            fn ag_div(self, r: &'b Value) -> Result<Value, FunctionError> {
                div(&convert_like(&Value::Eager(self.scalar()), r)?, r)
            }
        }
    )*};
}
number_left!(i32, f64);

/// An ordering operator.
#[derive(Clone, Copy, Debug)]
pub enum Ord {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// `<`, `<=`, `>`, `>=`: `bool` for Rust operands, a bool tensor with a [`Value`].
pub trait AgOrd<R> {
    /// `bool` or `Value`.
    type Output;
    /// Compares.
    fn ag_ord(self, r: R, op: Ord) -> Result<Self::Output, FunctionError>;
}
impl<'b, A: ?Sized + PartialOrd<B>, B: ?Sized> AgOrd<&'b B> for &A {
    type Output = bool;
    fn ag_ord(self, r: &'b B, op: Ord) -> Result<bool, FunctionError> {
        Ok(match op {
            Ord::Lt => self < r,
            Ord::Le => self <= r,
            Ord::Gt => self > r,
            Ord::Ge => self >= r,
        })
    }
}
impl<'b> AgOrd<&'b Value> for &Value {
    type Output = Value;
    fn ag_ord(self, r: &'b Value, op: Ord) -> Result<Value, FunctionError> {
        let name = match op {
            Ord::Lt => "Less",
            Ord::Le => "LessEqual",
            Ord::Gt => "Greater",
            Ord::Ge => "GreaterEqual",
        };
        apply1(name, &[self, r], &[])
    }
}

/// `==`, `!=`: `bool` for Rust operands, a bool tensor with a [`Value`].
pub trait AgEq<R> {
    /// `bool` or `Value`.
    type Output;
    /// Compares (`!=` when `ne`).
    fn ag_eq(self, r: R, ne: bool) -> Result<Self::Output, FunctionError>;
}
impl<'b, A: ?Sized + PartialEq<B>, B: ?Sized> AgEq<&'b B> for &A {
    type Output = bool;
    fn ag_eq(self, r: &'b B, ne: bool) -> Result<bool, FunctionError> {
        Ok((self == r) != ne)
    }
}
impl<'b> AgEq<&'b Value> for &Value {
    type Output = Value;
    fn ag_eq(self, r: &'b Value, ne: bool) -> Result<Value, FunctionError> {
        apply1(if ne { "NotEqual" } else { "Equal" }, &[self, r], &[])
    }
}

macro_rules! cmp_numbers {
    ($($n:ty),*) => {$(
        impl<'a, 'b> AgOrd<&'b $n> for &'a Value {
            type Output = Value;
            fn ag_ord(self, r: &'b $n, op: Ord) -> Result<Value, FunctionError> {
                ord(self, &convert_like(&Value::Eager(r.scalar()), self)?, op)
            }
        }
        impl<'a, 'b> AgOrd<&'b Value> for &'a $n {
            type Output = Value;
            fn ag_ord(self, r: &'b Value, op: Ord) -> Result<Value, FunctionError> {
                ord(&convert_like(&Value::Eager(self.scalar()), r)?, r, op)
            }
        }
        impl<'a, 'b> AgEq<&'b $n> for &'a Value {
            type Output = Value;
            fn ag_eq(self, r: &'b $n, ne: bool) -> Result<Value, FunctionError> {
                eq(self, &convert_like(&Value::Eager(r.scalar()), self)?, ne)
            }
        }
        impl<'a, 'b> AgEq<&'b Value> for &'a $n {
            type Output = Value;
            fn ag_eq(self, r: &'b Value, ne: bool) -> Result<Value, FunctionError> {
                eq(&convert_like(&Value::Eager(self.scalar()), r)?, r, ne)
            }
        }
    )*};
}
cmp_numbers!(i32, f64);

/// Orders `a` and `b`.
pub fn ord<A: AgOrd<B>, B>(a: A, b: B, op: Ord) -> Result<A::Output, FunctionError> {
    a.ag_ord(b, op)
}

/// `a == b` (`a != b` when `ne`).
pub fn eq<A: AgEq<B>, B>(a: A, b: B, ne: bool) -> Result<A::Output, FunctionError> {
    a.ag_eq(b, ne)
}

/// `-x`.
pub trait AgNeg {
    /// The result type.
    type Output;
    /// Negates.
    fn ag_neg(self) -> Result<Self::Output, FunctionError>;
}
impl<'a, A: ?Sized> AgNeg for &'a A
where
    &'a A: std::ops::Neg,
{
    type Output = <&'a A as std::ops::Neg>::Output;
    fn ag_neg(self) -> Result<Self::Output, FunctionError> {
        Ok(-self)
    }
}
impl AgNeg for &Value {
    type Output = Value;
    fn ag_neg(self) -> Result<Value, FunctionError> {
        apply1("Neg", &[self], &[])
    }
}

/// `-x`.
pub fn neg<A: AgNeg>(a: A) -> Result<A::Output, FunctionError> {
    a.ag_neg()
}

/// `!x`: Rust's for Rust values, `LogicalNot` for a bool tensor.
pub trait AgNot {
    /// The result type.
    type Output;
    /// Negates.
    fn ag_not(self) -> Result<Self::Output, FunctionError>;
}
impl<'a, A: ?Sized> AgNot for &'a A
where
    &'a A: std::ops::Not,
{
    type Output = <&'a A as std::ops::Not>::Output;
    fn ag_not(self) -> Result<Self::Output, FunctionError> {
        Ok(!self)
    }
}
impl AgNot for &Value {
    type Output = Value;
    fn ag_not(self) -> Result<Value, FunctionError> {
        let b = if self.dtype() == DType::Bool { self.clone() } else { cast(self, DType::Bool)? };
        apply1("LogicalNot", &[&b], &[])
    }
}

/// `!x`.
pub fn not<A: AgNot>(a: A) -> Result<A::Output, FunctionError> {
    a.ag_not()
}

fn cast(v: &Value, to: DType) -> Result<Value, FunctionError> {
    apply1("Cast", &[v], &[("DstT", attr::dtype(to))])
}

/// `a && b` / `a || b`: short-circuit for Rust bools; `LogicalAnd` / `LogicalOr` when either
/// side is a tensor (AutoGraph's `and` / `or`; a concrete left side still short-circuits).
pub trait AgLogic<R> {
    /// `bool` or `Value`.
    type Output;
    /// `and` (`or` when `or`).
    fn ag_logic(self, or: bool, r: impl FnOnce() -> Result<R, FunctionError>) -> Result<Self::Output, FunctionError>;
}
impl AgLogic<bool> for &bool {
    type Output = bool;
    fn ag_logic(self, or: bool, r: impl FnOnce() -> Result<bool, FunctionError>) -> Result<bool, FunctionError> {
        if *self == or {
            return Ok(or);
        }
        r()
    }
}
impl AgLogic<Value> for &bool {
    type Output = Value;
    fn ag_logic(self, or: bool, r: impl FnOnce() -> Result<Value, FunctionError>) -> Result<Value, FunctionError> {
        if *self == or {
            return Ok(Value::scalar(or));
        }
        r()
    }
}
impl<R: Condition> AgLogic<R> for &Value {
    type Output = Value;
    fn ag_logic(self, or: bool, r: impl FnOnce() -> Result<R, FunctionError>) -> Result<Value, FunctionError> {
        if let Some(b) = self.decide("and/or", "")? {
            if b == or {
                return Ok(Value::scalar(or));
            }
            let r = r()?.value();
            return Ok(if r.dtype() == DType::Bool { r } else { cast(&r, DType::Bool)? });
        }
        let r = r()?.value();
        apply1(if or { "LogicalOr" } else { "LogicalAnd" }, &[self, &r], &[])
    }
}

/// `a && b`.
pub fn and<A: AgLogic<R>, R>(a: A, b: impl FnOnce() -> Result<R, FunctionError>) -> Result<A::Output, FunctionError> {
    a.ag_logic(false, b)
}

/// `a || b`.
pub fn or<A: AgLogic<R>, R>(a: A, b: impl FnOnce() -> Result<R, FunctionError>) -> Result<A::Output, FunctionError> {
    a.ag_logic(true, b)
}

/// A `while` condition as a value (for [`while_stmt`]).
pub fn condition_value<C: Condition>(c: C) -> Value {
    c.value()
}
