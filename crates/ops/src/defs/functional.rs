//! Functions and functional control flow: `PartitionedCall`, `If`, `While` and their
//! stateful/stateless forms. No kernels: the runtime instantiates the library functions they
//! name (`ferroflow-runtime`'s `functional.rs`). `StatefulPartitionedCall` is stateful: its
//! function may have side effects the optimizer cannot see.
use crate::facts::CallKind;
use crate::registry::{op, OpDef};

/// The function-calling ops.
pub fn defs() -> Vec<OpDef> {
    let mut v = Vec::new();
    for name in ["If", "StatelessIf"] {
        v.push(
            op(name)
                .input("cond: Tcond")
                .input("input: Tin")
                .output("output: Tout")
                .attr("Tcond: type")
                .attr("Tin: list(type) >= 0")
                .attr("Tout: list(type) >= 0")
                .attr("then_branch: func")
                .attr("else_branch: func")
                .attr("output_shapes: list(shape) = []")
                .call(CallKind::If)
                .gradient_through_functions()
                .build(),
        );
    }
    for name in ["While", "StatelessWhile"] {
        v.push(
            op(name)
                .input("input: T")
                .output("output: T")
                .attr("T: list(type) >= 0")
                .attr("cond: func")
                .attr("body: func")
                .attr("output_shapes: list(shape) = []")
                .attr("parallel_iterations: int = 10")
                .call(CallKind::While)
                .gradient_through_functions()
                .build(),
        );
    }
    for (name, stateful) in [("PartitionedCall", false), ("StatefulPartitionedCall", true)] {
        let b = op(name)
            .input("args: Tin")
            .output("output: Tout")
            .attr("Tin: list(type) >= 0")
            .attr("Tout: list(type) >= 0")
            .attr("f: func")
            .attr("config: string = ''")
            .attr("config_proto: string = ''")
            .attr("executor_type: string = ''")
            .call(CallKind::Call)
            .gradient_through_functions();
        v.push(if stateful { b.stateful() } else { b }.build());
    }
    v
}
