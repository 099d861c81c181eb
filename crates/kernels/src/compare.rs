//! Comparisons (`Equal`, `NotEqual`, `Greater`, `GreaterEqual`, `Less`, `LessEqual`) and
//! logical ops (`LogicalAnd`, `LogicalOr`, `LogicalNot`): elementwise with broadcasting,
//! giving bools.
use ferroflow_tensor::{DType, Element, Tensor};

use crate::elementwise::{out_dims, Binary, Broadcast, Unary, NUMERIC};
use crate::{invalid, Factory, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// Dtypes that compare for equality.
const EQUALITY: &[DType] =
    &[DType::Float, DType::Double, DType::Int32, DType::Int64, DType::Bool, DType::UInt8, DType::Int8, DType::Int16];

/// An elementwise comparison with broadcasting, producing bools. `F` is a function item
/// (not a pointer), so the loop inlines and vectorises.
struct Compare<T, F> {
    f: F,
    _t: std::marker::PhantomData<fn(T, T) -> bool>,
}

impl<T: Element, F: Fn(T, T) -> bool + Send + Sync + Copy> OpKernel for Compare<T, F> {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (a, b) = (&inputs[0], &inputs[1]);
        let dims = out_dims(a, b)?;
        // `broadcast_apply` writes every element; through bytes, as the recycled buffer may
        // hold bytes that are not bools until then.
        let mut out = Tensor::for_overwrite(DType::Bool, &dims)?;
        let f = self.f;
        Broadcast::new(&dims, a.dims(), b.dims()).apply(
            ctx,
            a.as_slice::<T>()?,
            b.as_slice::<T>()?,
            out.as_mut_bytes()?,
            move |x, y| f(x, y) as u8,
        );
        outputs.push(out);
        Ok(())
    }
}

fn equal<T: PartialEq>(a: T, b: T) -> bool {
    a == b
}
fn not_equal<T: PartialEq>(a: T, b: T) -> bool {
    a != b
}
fn greater<T: PartialOrd>(a: T, b: T) -> bool {
    a > b
}
fn greater_equal<T: PartialOrd>(a: T, b: T) -> bool {
    a >= b
}
fn less<T: PartialOrd>(a: T, b: T) -> bool {
    a < b
}
fn less_equal<T: PartialOrd>(a: T, b: T) -> bool {
    a <= b
}

/// A comparison kernel for the node's `T`, over the dtypes listed.
macro_rules! compare_kernel {
    ($f:ident, [$($dt:ident => $t:ty),*]) => {
        |d: &NodeDesc| -> KResult<Box<dyn OpKernel>> {
            dispatch!(d.dtype("T")?, d.def.name, [$($dt => $t),*],
                |T| Ok(Box::new(Compare::<T, _> { f: $f::<T>, _t: Default::default() }) as Box<dyn OpKernel>))
        }
    };
}

fn and(a: bool, b: bool) -> bool {
    a && b
}
fn or(a: bool, b: bool) -> bool {
    a || b
}
fn not(a: bool) -> bool {
    !a
}

pub(crate) fn register(r: &mut KernelRegistry) {
    let all: [(&str, &[DType], Factory); 6] = [
        (
            "Equal",
            EQUALITY,
            compare_kernel!(equal, [Float => f32, Double => f64, Int32 => i32, Int64 => i64, Bool => bool, UInt8 => u8, Int8 => i8, Int16 => i16]),
        ),
        (
            "NotEqual",
            EQUALITY,
            compare_kernel!(not_equal, [Float => f32, Double => f64, Int32 => i32, Int64 => i64, Bool => bool, UInt8 => u8, Int8 => i8, Int16 => i16]),
        ),
        ("Greater", NUMERIC, compare_kernel!(greater, [Float => f32, Double => f64, Int32 => i32, Int64 => i64])),
        (
            "GreaterEqual",
            NUMERIC,
            compare_kernel!(greater_equal, [Float => f32, Double => f64, Int32 => i32, Int64 => i64]),
        ),
        ("Less", NUMERIC, compare_kernel!(less, [Float => f32, Double => f64, Int32 => i32, Int64 => i64])),
        ("LessEqual", NUMERIC, compare_kernel!(less_equal, [Float => f32, Double => f64, Int32 => i32, Int64 => i64])),
    ];
    for (op, dtypes, factory) in all {
        r.register(op, "T", dtypes, factory);
    }
    r.register("LogicalAnd", "", &[], |_| Ok(Box::new(Binary::<bool, _>::new(and))));
    r.register("LogicalOr", "", &[], |_| Ok(Box::new(Binary::<bool, _>::new(or))));
    r.register("LogicalNot", "", &[], |_| Ok(Box::new(Unary::<bool, _>::new(not))));
}
