//! Executor overhead: a chain of 2,000 scalar `Square` ops and a wide graph of 2,000
//! independent ones; the chain with step-stats collection (FULL_TRACE) vs NO_TRACE; and the
//! chain with a deadline (`timeout_in_ms`: the step checks it before every node); and the chain
//! while a profile runs (an op event per node; profiles of 100 steps, their start and stop
//! outside the timing). Throughput
//! is reported per op; `scripts/bench_executor.py` runs the same graphs in TensorFlow side by
//! side.
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferroflow::prelude::*;
use ferroflow::proto::{run_options::TraceLevel, RunOptions};
use ferroflow::testing::graphs;

const N: usize = 2000;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("executor");
    group.throughput(Throughput::Elements(N as u64));
    for (name, (graph, fetch)) in [("chain_2000", graphs::chain(N)), ("wide_2000", graphs::wide(N))] {
        for threads in [1, 2] {
            let sess = Session::new(graph.clone(), {
                // Executor overhead as written: the optimizer would fuse the chain and merge
                // the identical wide ops.
                let mut o = SessionOptions::default().with_inter_op_threads(threads).with_intra_op_threads(1);
                o.optimizer.enabled = false;
                o
            })
            .unwrap();
            let plan = sess.plan(&["x:0"], &[&fetch], &[]).unwrap();
            let feeds = [Tensor::scalar(1.0f32)];
            group.bench_function(format!("{name}/inter_op_{threads}"), |b| {
                b.iter(|| sess.run_plan(&plan, &feeds).unwrap())
            });
        }
    }
    // Step-stats collection (RunOptions FULL_TRACE) on the chain, next to NO_TRACE.
    let (graph, fetch) = graphs::chain(N);
    let mut opts = SessionOptions::default().with_inter_op_threads(1).with_intra_op_threads(1);
    opts.optimizer.enabled = false;
    let sess = Session::new(graph, opts).unwrap();
    let plan = sess.plan(&["x:0"], &[&fetch], &[]).unwrap();
    let feeds = [Tensor::scalar(1.0f32)];
    for (name, level, timeout_in_ms) in [
        ("no_trace", TraceLevel::NoTrace, 0),
        ("full_trace", TraceLevel::FullTrace, 0),
        ("deadline", TraceLevel::NoTrace, 60_000),
    ] {
        let run_options = RunOptions { trace_level: level as i32, timeout_in_ms, ..Default::default() };
        group.bench_function(format!("chain_2000/inter_op_1/{name}"), |b| {
            b.iter(|| sess.run_plan_with_options(&plan, &feeds, &run_options).unwrap())
        });
    }
    group.bench_function("chain_2000/inter_op_1/profiled", |b| {
        use ferroflow::profiler;
        b.iter_custom(|iters| {
            let _only = profiler::exclusive();
            let mut total = std::time::Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(100);
                profiler::start(&profiler::ProfilerOptions::default().with_max_events((n as usize + 1) * (N + 100)))
                    .unwrap();
                let t = std::time::Instant::now();
                for _ in 0..n {
                    sess.run_plan(&plan, &feeds).unwrap();
                }
                total += t.elapsed();
                let p = profiler::stop().unwrap();
                assert_eq!(p.dropped, 0);
                left -= n;
            }
            total
        })
    });
    group.finish();
    // The cost of one op event on its own: one clock read and the record, as the executor does
    // for ops a thread runs back to back (an op's event starts where the previous one ended).
    let mut group = c.benchmark_group("profiler");
    group.throughput(Throughput::Elements(1));
    group.bench_function("clock_read", |b| {
        use ferroflow::profiler::clock;
        b.iter(clock::ticks)
    });
    group.bench_function("op_event", |b| {
        use ferroflow::profiler::{self, clock, Kind};
        let name = profiler::intern("chain/op:Square");
        b.iter_custom(|iters| {
            let _only = profiler::exclusive();
            let mut total = std::time::Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(1 << 20);
                // Room for the events and each buffer's run-id record.
                profiler::start(&profiler::ProfilerOptions::default().with_max_events(n as usize + 64)).unwrap();
                let t = std::time::Instant::now();
                let mut t0 = clock::ticks();
                for _ in 0..n {
                    let t1 = clock::ticks();
                    profiler::record(name, Kind::Op, t0, t1, 1);
                    t0 = t1;
                }
                total += t.elapsed();
                assert_eq!(profiler::stop().unwrap().dropped, 0);
                left -= n;
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
