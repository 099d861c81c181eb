//! `Cast` between every numeric dtype and bool, with C++ `static_cast` semantics for
//! in-range values (floats truncate toward zero; non-zero is `true`).
use ferroflow_tensor::{bf16, f16, DType, Element, Tensor};

use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

trait CastElem: Element {
    const FLOAT: bool;
    fn to_f64(self) -> f64;
    fn to_i64(self) -> i64;
    fn from_f64(v: f64) -> Self;
    fn from_i64(v: i64) -> Self;
    /// From 0 or 1 (a bool's value): one narrow conversion that vectorizes.
    fn from_u8(v: u8) -> Self;
    /// Whether the value is non-zero (NaN is), as `static_cast<bool>`.
    fn nonzero(self) -> bool;
}

macro_rules! cast_int {
    ($($t:ty),*) => {$(
        impl CastElem for $t {
            const FLOAT: bool = false;
            fn to_f64(self) -> f64 { self as f64 }
            fn to_i64(self) -> i64 { self as i64 }
            fn from_f64(v: f64) -> Self { v as $t }
            fn from_i64(v: i64) -> Self { v as $t }
            fn from_u8(v: u8) -> Self { v as $t }
            fn nonzero(self) -> bool { self != 0 }
        }
    )*};
}
cast_int!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! cast_float {
    ($($t:ty),*) => {$(
        impl CastElem for $t {
            const FLOAT: bool = true;
            fn to_f64(self) -> f64 { self as f64 }
            fn to_i64(self) -> i64 { self as i64 }
            fn from_f64(v: f64) -> Self { v as $t }
            fn from_i64(v: i64) -> Self { v as $t }
            fn from_u8(v: u8) -> Self { v as $t }
            fn nonzero(self) -> bool { self != 0.0 }
        }
    )*};
}
cast_float!(f32, f64);

impl CastElem for bool {
    const FLOAT: bool = false;
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    fn from_u8(v: u8) -> Self {
        v != 0
    }
    fn nonzero(self) -> bool {
        self
    }
}

macro_rules! cast_half {
    ($($t:ty),*) => {$(
        impl CastElem for $t {
            const FLOAT: bool = true;
            fn to_f64(self) -> f64 { self.to_f64() }
            fn to_i64(self) -> i64 { self.to_f64() as i64 }
            fn from_f64(v: f64) -> Self { <$t>::from_f64(v) }
            fn from_i64(v: i64) -> Self { <$t>::from_f64(v as f64) }
            fn from_u8(v: u8) -> Self { <$t>::from_f64(v as f64) }
            fn nonzero(self) -> bool { self.to_f64() != 0.0 }
        }
    )*};
}
cast_half!(f16, bf16);

fn convert<S: CastElem, D: CastElem>(x: &Tensor) -> KResult<Tensor> {
    let src = x.as_slice::<S>()?;
    // Every element is written below.
    let mut out = Tensor::for_overwrite(D::DTYPE, x.dims())?;
    if D::DTYPE == DType::Bool {
        // Through bytes: the recycled buffer may hold bytes that are not bools until then.
        let o = out.as_mut_bytes()?;
        crate::isa::widest(|| o.iter_mut().zip(src).for_each(|(o, v)| *o = v.nonzero() as u8));
        return Ok(out);
    }
    let o = out.as_mut_slice::<D>()?;
    crate::isa::widest(|| {
        if S::DTYPE == DType::Bool {
            o.iter_mut().zip(src).for_each(|(o, v)| *o = D::from_u8(v.to_i64() as u8));
        } else if S::FLOAT && D::FLOAT {
            o.iter_mut().zip(src).for_each(|(o, v)| *o = D::from_f64(v.to_f64()));
        } else if S::FLOAT {
            // Through f64 keeps float->int truncation exact for every representable value.
            o.iter_mut().zip(src).for_each(|(o, v)| *o = D::from_f64(v.to_f64().trunc()));
        } else {
            o.iter_mut().zip(src).for_each(|(o, v)| *o = D::from_i64(v.to_i64()));
        }
    });
    Ok(out)
}

type CastFn = fn(&Tensor) -> KResult<Tensor>;

fn to_dst<S: CastElem>(dst: DType) -> Option<CastFn> {
    Some(match dst {
        DType::Float => convert::<S, f32>,
        DType::Double => convert::<S, f64>,
        DType::Half => convert::<S, f16>,
        DType::BFloat16 => convert::<S, bf16>,
        DType::Int8 => convert::<S, i8>,
        DType::Int16 => convert::<S, i16>,
        DType::Int32 => convert::<S, i32>,
        DType::Int64 => convert::<S, i64>,
        DType::UInt8 => convert::<S, u8>,
        DType::UInt16 => convert::<S, u16>,
        DType::UInt32 => convert::<S, u32>,
        DType::UInt64 => convert::<S, u64>,
        DType::Bool => convert::<S, bool>,
        _ => return None,
    })
}

fn cast_fn(src: DType, dst: DType) -> Option<CastFn> {
    match src {
        DType::Float => to_dst::<f32>(dst),
        DType::Double => to_dst::<f64>(dst),
        DType::Half => to_dst::<f16>(dst),
        DType::BFloat16 => to_dst::<bf16>(dst),
        DType::Int8 => to_dst::<i8>(dst),
        DType::Int16 => to_dst::<i16>(dst),
        DType::Int32 => to_dst::<i32>(dst),
        DType::Int64 => to_dst::<i64>(dst),
        DType::UInt8 => to_dst::<u8>(dst),
        DType::UInt16 => to_dst::<u16>(dst),
        DType::UInt32 => to_dst::<u32>(dst),
        DType::UInt64 => to_dst::<u64>(dst),
        DType::Bool => to_dst::<bool>(dst),
        _ => None,
    }
}

struct Cast {
    f: Option<CastFn>,
}

impl OpKernel for Cast {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let x = inputs.swap_remove(0);
        outputs.push(match self.f {
            None => x,
            Some(f) => f(&x)?,
        });
        Ok(())
    }
}

fn k_cast(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let (src, dst) = (d.dtype("SrcT")?, d.dtype("DstT")?);
    if src == dst {
        return Ok(Box::new(Cast { f: None }));
    }
    let f = cast_fn(src, dst).ok_or_else(|| invalid(format!("Cast from {src} to {dst} is not supported")))?;
    Ok(Box::new(Cast { f: Some(f) }))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    const CASTABLE: &[DType] = &[
        DType::Float,
        DType::Double,
        DType::Half,
        DType::BFloat16,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Bool,
    ];
    r.register("Cast", "SrcT", CASTABLE, k_cast);
}
