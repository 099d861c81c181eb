//! `AttrValue`s both ways: constructors, one per kind of attr (TensorFlow's `AttrValue` oneof
//! cases), so code that builds nodes writes `attr::dtype(DType::Float)` instead of the nested
//! message; and typed reads ([`AttrMap`] on a node's attrs, the `*_of` functions on one value),
//! the one way every crate reads an attr.
use std::collections::BTreeMap;

use ferroflow_tensor::{DType, Shape};

use crate::attr_value::{ListValue, Value};
use crate::{AttrValue, NameAttrList, TensorProto};

fn of(v: Value) -> AttrValue {
    AttrValue { value: Some(v) }
}

/// A `type` attr.
pub fn dtype(d: DType) -> AttrValue {
    of(Value::Type(d.to_tf()))
}

/// An `int` attr.
pub fn int(i: i64) -> AttrValue {
    of(Value::I(i))
}

/// A `float` attr.
pub fn float(f: f32) -> AttrValue {
    of(Value::F(f))
}

/// A `bool` attr.
pub fn boolean(b: bool) -> AttrValue {
    of(Value::B(b))
}

/// A `string` attr.
pub fn string(s: &str) -> AttrValue {
    of(Value::S(s.as_bytes().to_vec()))
}

/// A `tensor` attr.
pub fn tensor(t: TensorProto) -> AttrValue {
    of(Value::Tensor(Box::new(t)))
}

/// A `shape` attr.
pub fn shape(s: &Shape) -> AttrValue {
    of(Value::Shape(Box::new(crate::convert::shape_to_proto(s))))
}

/// A `func` attr naming a function (with no attrs of its own).
pub fn func(name: &str) -> AttrValue {
    of(Value::Func(Box::new(NameAttrList { name: name.to_string(), ..Default::default() })))
}

/// A `list(string)` attr.
pub fn strings<S: AsRef<str>>(v: &[S]) -> AttrValue {
    list(ListValue { s: v.iter().map(|s| s.as_ref().as_bytes().to_vec()).collect(), ..Default::default() })
}

/// A `list(int)` attr.
pub fn ints(v: &[i64]) -> AttrValue {
    list(ListValue { i: v.to_vec(), ..Default::default() })
}

/// A `list(type)` attr.
pub fn dtypes(v: &[DType]) -> AttrValue {
    list(ListValue { r#type: v.iter().map(|d| d.to_tf()).collect(), ..Default::default() })
}

/// A `list(float)` attr.
pub fn floats(v: &[f32]) -> AttrValue {
    list(ListValue { f: v.to_vec(), ..Default::default() })
}

/// A `list(bool)` attr.
pub fn booleans(v: &[bool]) -> AttrValue {
    list(ListValue { b: v.to_vec(), ..Default::default() })
}

/// A `list(shape)` attr.
pub fn shapes(v: &[Shape]) -> AttrValue {
    list(ListValue { shape: v.iter().map(crate::convert::shape_to_proto).collect(), ..Default::default() })
}

/// A `list(...)` attr.
pub fn list(l: ListValue) -> AttrValue {
    of(Value::List(Box::new(l)))
}

/// A `bool` attr's value (`None` for another kind).
pub fn bool_of(v: &Value) -> Option<bool> {
    match v {
        Value::B(b) => Some(*b),
        _ => None,
    }
}

/// An `int` attr's value.
pub fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::I(i) => Some(*i),
        _ => None,
    }
}

/// A `float` attr's value.
pub fn float_of(v: &Value) -> Option<f32> {
    match v {
        Value::F(f) => Some(*f),
        _ => None,
    }
}

/// A `string` attr's value (its bytes as UTF-8, invalid sequences replaced).
pub fn string_of(v: &Value) -> Option<String> {
    match v {
        Value::S(s) => Some(String::from_utf8_lossy(s).into_owned()),
        _ => None,
    }
}

/// A `list(int)` attr's values.
pub fn ints_of(v: &Value) -> Option<&[i64]> {
    match v {
        Value::List(l) => Some(&l.i),
        _ => None,
    }
}

/// A `type` attr's dtype as TensorFlow's enum value (convert with `DType::from_tf`).
pub fn dtype_of(v: &Value) -> Option<i32> {
    match v {
        Value::Type(t) => Some(*t),
        _ => None,
    }
}

/// A `func` attr's function.
pub fn func_of(v: &Value) -> Option<&NameAttrList> {
    match v {
        Value::Func(f) => Some(f),
        _ => None,
    }
}

/// Typed reads of a node's attrs by name (a `NodeDef`'s `attr`, a graph node's `attrs`):
/// `None` when the attr is absent or of another kind.
pub trait AttrMap {
    /// The attr's value.
    fn attr_value(&self, name: &str) -> Option<&Value>;
    /// A `bool` attr.
    fn bool_attr(&self, name: &str) -> Option<bool> {
        self.attr_value(name).and_then(bool_of)
    }
    /// An `int` attr.
    fn int_attr(&self, name: &str) -> Option<i64> {
        self.attr_value(name).and_then(int_of)
    }
    /// A `float` attr.
    fn float_attr(&self, name: &str) -> Option<f32> {
        self.attr_value(name).and_then(float_of)
    }
    /// A `string` attr.
    fn string_attr(&self, name: &str) -> Option<String> {
        self.attr_value(name).and_then(string_of)
    }
    /// A `list(int)` attr.
    fn ints_attr(&self, name: &str) -> Option<&[i64]> {
        self.attr_value(name).and_then(ints_of)
    }
    /// A `func` attr.
    fn func_attr(&self, name: &str) -> Option<&NameAttrList> {
        self.attr_value(name).and_then(func_of)
    }
}

impl AttrMap for BTreeMap<String, AttrValue> {
    fn attr_value(&self, name: &str) -> Option<&Value> {
        self.get(name).and_then(|v| v.value.as_ref())
    }
}
