//! The TensorList ops as a Keras recurrent layer's loop uses them, at its sizes (100 steps,
//! batch 32, 256 features): the input split into a list (`TensorListFromTensor`), each step
//! read (`TensorListGetItem`) and written into a reserved list (`TensorListSetItem`, in place
//! as the loop's only reader), and the outputs stacked (`TensorListStack`)
//! (`cargo bench -p ferroflow-kernels --bench list`).
use criterion::{criterion_group, criterion_main, Criterion};
use ferroflow_graph::Attrs;
use ferroflow_kernels::{run_op, KernelContext};
use ferroflow_proto::attr;
use ferroflow_tensor::{DType, Tensor};

const STEPS: usize = 100;
const BATCH: usize = 32;
const FEATURES: usize = 256;

fn attrs(shape_type: bool) -> Attrs {
    let mut a = Attrs::new();
    a.insert("element_dtype".into(), attr::dtype(DType::Float));
    if shape_type {
        a.insert("shape_type".into(), attr::dtype(DType::Int32));
    }
    a
}

fn bench(c: &mut Criterion) {
    let ctx = KernelContext { intra_op: None, resources: None, step: None };
    let x = Tensor::from_vec(&[STEPS, BATCH, FEATURES], vec![0.5f32; STEPS * BATCH * FEATURES]).unwrap();
    let shape = Tensor::from_vec(&[2], vec![-1i32, FEATURES as i32]).unwrap();
    let with_shape = attrs(true);
    let plain = attrs(false);
    let mut stack_attrs = attrs(false);
    stack_attrs.insert("num_elements".into(), attr::int(STEPS as i64));
    c.bench_function("list/from_tensor, get and set each step, stack", |b| {
        b.iter(|| {
            let input = run_op("TensorListFromTensor", &with_shape, vec![x.clone(), shape.clone()], &ctx).unwrap();
            let n = Tensor::scalar(STEPS as i32);
            let mut out = run_op("TensorListReserve", &with_shape, vec![shape.clone(), n], &ctx).unwrap();
            for t in 0..STEPS {
                let i = Tensor::scalar(t as i32);
                let item = run_op("TensorListGetItem", &plain, vec![input[0].clone(), i.clone(), shape.clone()], &ctx)
                    .unwrap();
                let list = out.pop().unwrap();
                out = run_op("TensorListSetItem", &plain, vec![list, i, item[0].clone()], &ctx).unwrap();
            }
            run_op("TensorListStack", &stack_attrs, vec![out.pop().unwrap(), shape.clone()], &ctx).unwrap()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
