//! `AttrValue` constructors, one per kind of attr (TensorFlow's `AttrValue` oneof cases), so
//! code that builds nodes writes `attr::dtype(DType::Float)` instead of the nested message.
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
