//! Element types, numbered as TensorFlow's `DataType` enum.
use std::fmt;

use crate::TensorError;

/// A tensor element type. Discriminants are TensorFlow's `DataType` values, so a `DType`
/// converts to and from the protobuf enum without a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i32)]
pub enum DType {
    /// 32-bit IEEE float (`DT_FLOAT`).
    Float = 1,
    /// 64-bit IEEE float (`DT_DOUBLE`).
    Double = 2,
    /// Signed 32-bit integer.
    Int32 = 3,
    /// Unsigned 8-bit integer.
    UInt8 = 4,
    /// Signed 16-bit integer.
    Int16 = 5,
    /// Signed 8-bit integer.
    Int8 = 6,
    /// Variable-length byte string.
    String = 7,
    /// Complex number of two f32 (re, im).
    Complex64 = 8,
    /// Signed 64-bit integer.
    Int64 = 9,
    /// Boolean, one byte per element (0 or 1).
    Bool = 10,
    /// bfloat16: the upper 16 bits of an f32.
    BFloat16 = 14,
    /// Unsigned 16-bit integer.
    UInt16 = 17,
    /// Complex number of two f64.
    Complex128 = 18,
    /// IEEE half precision float.
    Half = 19,
    /// Handle to a stateful resource (variables, iterators).
    Resource = 20,
    /// Opaque variant value (tensor lists, datasets).
    Variant = 21,
    /// Unsigned 32-bit integer.
    UInt32 = 22,
    /// Unsigned 64-bit integer.
    UInt64 = 23,
}

impl DType {
    /// Every dtype ferroflow knows.
    pub const ALL: [DType; 18] = [
        DType::Float,
        DType::Double,
        DType::Int32,
        DType::UInt8,
        DType::Int16,
        DType::Int8,
        DType::String,
        DType::Complex64,
        DType::Int64,
        DType::Bool,
        DType::BFloat16,
        DType::UInt16,
        DType::Complex128,
        DType::Half,
        DType::Resource,
        DType::Variant,
        DType::UInt32,
        DType::UInt64,
    ];

    /// Converts TensorFlow's enum value. `_REF` values (base + 100) map to their base type,
    /// as TensorFlow does when it reads a reference-typed tensor.
    pub fn from_tf(value: i32) -> Result<DType, TensorError> {
        let base = if value > 100 { value - 100 } else { value };
        DType::ALL.iter().copied().find(|d| *d as i32 == base).ok_or(TensorError::UnsupportedDType(value))
    }

    /// TensorFlow's enum value.
    pub fn to_tf(self) -> i32 {
        self as i32
    }

    /// Bytes per element, or `None` for variable-size types (string, resource, variant).
    pub fn size(self) -> Option<usize> {
        Some(match self {
            DType::Bool | DType::Int8 | DType::UInt8 => 1,
            DType::Int16 | DType::UInt16 | DType::Half | DType::BFloat16 => 2,
            DType::Float | DType::Int32 | DType::UInt32 => 4,
            DType::Double | DType::Int64 | DType::UInt64 | DType::Complex64 => 8,
            DType::Complex128 => 16,
            DType::String | DType::Resource | DType::Variant => return None,
        })
    }

    /// TensorFlow's short name (`float`, `int32`, `bool`, ...), as in its error messages.
    pub fn name(self) -> &'static str {
        match self {
            DType::Float => "float",
            DType::Double => "double",
            DType::Int32 => "int32",
            DType::UInt8 => "uint8",
            DType::Int16 => "int16",
            DType::Int8 => "int8",
            DType::String => "string",
            DType::Complex64 => "complex64",
            DType::Int64 => "int64",
            DType::Bool => "bool",
            DType::BFloat16 => "bfloat16",
            DType::UInt16 => "uint16",
            DType::Complex128 => "complex128",
            DType::Half => "half",
            DType::Resource => "resource",
            DType::Variant => "variant",
            DType::UInt32 => "uint32",
            DType::UInt64 => "uint64",
        }
    }

    /// The name Python's TensorFlow gives the dtype (`tf.float32`, `tf.int32`): TensorFlow's
    /// short name, except `float32`, `float64` and `float16` for float, double and half.
    pub fn python_name(self) -> &'static str {
        match self {
            DType::Float => "float32",
            DType::Double => "float64",
            DType::Half => "float16",
            d => d.name(),
        }
    }

    /// True for float, double, half and bfloat16.
    pub fn is_float(self) -> bool {
        matches!(self, DType::Float | DType::Double | DType::Half | DType::BFloat16)
    }

    /// True for the signed and unsigned integer types.
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            DType::Int8
                | DType::Int16
                | DType::Int32
                | DType::Int64
                | DType::UInt8
                | DType::UInt16
                | DType::UInt32
                | DType::UInt64
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type stored in tensors of one [`DType`].
///
/// # Safety
/// `DTYPE.size()` must equal `size_of::<Self>()`, and every bit pattern a tensor of `DTYPE`
/// may hold must be a valid `Self` (for `bool`, tensors only ever hold 0 or 1).
pub unsafe trait Element: Copy + Send + Sync + 'static + fmt::Debug + PartialEq + Default {
    /// The dtype whose tensors store this type.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        // SAFETY: sizes match DType::size, and all bit patterns are valid for these types
        // (bool tensors are validated to hold only 0/1 when built from bytes).
        unsafe impl Element for $t { const DTYPE: DType = DType::$d; }
    )*};
}
element!(f32 => Float, f64 => Double, i32 => Int32, u8 => UInt8, i16 => Int16, i8 => Int8,
    i64 => Int64, bool => Bool, u16 => UInt16, u32 => UInt32, u64 => UInt64,
    half::f16 => Half, half::bf16 => BFloat16);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tf_enum_values() {
        assert_eq!(DType::Float.to_tf(), 1);
        assert_eq!(DType::from_tf(101).unwrap(), DType::Float);
        assert_eq!(DType::from_tf(14).unwrap(), DType::BFloat16);
        assert!(DType::from_tf(0).is_err());
        assert!(DType::from_tf(999).is_err());
        for d in DType::ALL {
            assert_eq!(DType::from_tf(d.to_tf()).unwrap(), d);
        }
    }
}
