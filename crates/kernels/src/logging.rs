//! `Assert`: an error holding the first `summarize` values of each data tensor when the
//! condition is false, as TensorFlow's message does.
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, OpKernel, Outputs};

struct Assert(usize);
impl OpKernel for Assert {
    fn compute(&self, _: &KernelContext, inputs: &mut Inputs, _: &mut Outputs) -> KResult<()> {
        let ok = inputs[0]
            .scalar_value::<bool>()
            .map_err(|_| invalid(format!("condition must be a scalar bool, got shape {:?}", inputs[0].dims())))?;
        if ok {
            return Ok(());
        }
        let shown: Vec<String> = inputs[1..].iter().map(|t| t.preview(self.0)).collect();
        Err(invalid(format!("assertion failed: [{}]", shown.join("] ["))))
    }
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("Assert", "", &[], |d| Ok(Box::new(Assert(d.int("summarize")?.clamp(0, 1 << 20) as usize))));
}
