//! `Einsum` for one or two operands with explicit output (`ij,jk->ik`, `bij,bjk->bik`,
//! `ii->i`, `ij->ji`, `i,i->`, ...). Each output element sums the product over the labels
//! that appear only on the inputs.
use std::collections::BTreeMap;

use ferroflow_tensor::{DType, Tensor};

use crate::numeric::Num;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

struct Einsum<T> {
    inputs: Vec<Vec<char>>,
    output: Vec<char>,
    _t: std::marker::PhantomData<T>,
}

fn parse(eq: &str) -> Result<(Vec<Vec<char>>, Vec<char>), String> {
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = eq.split_once("->").ok_or_else(|| format!("equation '{eq}' needs an explicit output ('->')"))?;
    if eq.contains("...") {
        return Err(format!("equation '{eq}': ellipsis is not supported"));
    }
    let ins: Vec<Vec<char>> = lhs.split(',').map(|s| s.chars().collect()).collect();
    let out: Vec<char> = rhs.chars().collect();
    for l in ins.iter().flatten().chain(&out) {
        if !l.is_ascii_alphabetic() {
            return Err(format!("equation '{eq}': '{l}' is not a label"));
        }
    }
    for l in &out {
        if !ins.iter().any(|i| i.contains(l)) {
            return Err(format!("equation '{eq}': output label '{l}' appears in no input"));
        }
    }
    Ok((ins, out))
}

impl<T: Num> OpKernel for Einsum<T> {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        if inputs.len() != self.inputs.len() {
            return Err(invalid(format!("equation has {} operands, got {} inputs", self.inputs.len(), inputs.len())));
        }
        let mut size: BTreeMap<char, usize> = BTreeMap::new();
        for (t, labels) in inputs.iter().zip(&self.inputs) {
            if t.rank() != labels.len() {
                return Err(invalid(format!(
                    "operand of shape {:?} does not match labels '{}'",
                    t.dims(),
                    labels.iter().collect::<String>()
                )));
            }
            for (&l, &d) in labels.iter().zip(t.dims()) {
                if *size.entry(l).or_insert(d) != d {
                    return Err(invalid(format!("label '{l}' has sizes {} and {d}", size[&l])));
                }
            }
        }
        let summed: Vec<char> = size.keys().copied().filter(|l| !self.output.contains(l)).collect();
        let all: Vec<char> = self.output.iter().chain(&summed).copied().collect();
        let pos = |l: char| all.iter().position(|&a| a == l).expect("every label is in `all`");
        // For each operand, the stride of each label in `all` order.
        let strides: Vec<Vec<usize>> = inputs
            .iter()
            .zip(&self.inputs)
            .map(|(t, labels)| {
                let mut st = vec![0usize; all.len()];
                let mut s = 1;
                for (k, &l) in labels.iter().enumerate().rev() {
                    st[pos(l)] += s;
                    s *= t.dims()[k];
                }
                st
            })
            .collect();
        let data: Vec<&[T]> = inputs.iter().map(|t| t.as_slice::<T>()).collect::<Result<_, _>>()?;
        let out_dims: Vec<usize> = self.output.iter().map(|l| size[l]).collect();
        let sum_dims: Vec<usize> = summed.iter().map(|l| size[l]).collect();
        crate::check_output(T::DTYPE, &out_dims)?;
        let n_sum = sum_dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let (n_out, n_sum): (usize, usize) =
            (out_dims.iter().product(), n_sum.ok_or_else(|| invalid(format!("summed sizes {sum_dims:?} overflow")))?);
        let mut out = Vec::with_capacity(n_out);
        let dims_all: Vec<usize> = out_dims.iter().chain(&sum_dims).copied().collect();
        let mut idx = vec![0usize; all.len()];
        for o in 0..n_out {
            let mut rem = o;
            for a in (0..out_dims.len()).rev() {
                idx[a] = rem % out_dims[a];
                rem /= out_dims[a];
            }
            let mut acc = T::ZERO;
            for s in 0..n_sum {
                let mut rem = s;
                for a in (out_dims.len()..all.len()).rev() {
                    idx[a] = rem % dims_all[a];
                    rem /= dims_all[a];
                }
                let mut prod = T::ONE;
                for (d, st) in data.iter().zip(&strides) {
                    let off: usize = idx.iter().zip(st).map(|(i, s)| i * s).sum();
                    prod = prod.mul_w(d[off]);
                }
                acc = acc.add_w(prod);
            }
            out.push(acc);
        }
        outputs.push(Tensor::from_vec(&out_dims, out)?);
        Ok(())
    }
}

fn k_einsum(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    let (inputs, output) = parse(&d.string("equation")?).map_err(invalid)?;
    dispatch!(d.dtype("T")?, d.def.name, [Float => f32, Double => f64, Int32 => i32, Int64 => i64],
        |T| Ok(Box::new(Einsum::<T> { inputs, output, _t: Default::default() }) as Box<dyn OpKernel>))
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("Einsum", "T", &[DType::Float, DType::Double, DType::Int32, DType::Int64], k_einsum);
}
