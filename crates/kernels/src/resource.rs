//! Session state: the resource manager that holds variables and random-generator states
//! across steps, and the kernels of TensorFlow's resource-variable ops (`VarHandleOp`,
//! `ReadVariableOp`, `AssignVariableOp`, `AssignAddVariableOp`, `AssignSubVariableOp`,
//! `VarIsInitializedOp`).
//!
//! A `resource` tensor is a scalar holding a key (`container/shared_name`); kernels look the
//! key up in the [`ResourceMgr`] of the session that runs them ([`KernelContext::resources`]).
//! Reads hand out the variable's buffer shared (no copy); an update that finds its buffer
//! shared copies it first, so a value read earlier in a step never changes under its reader
//! (TensorFlow's copy-on-write for resource variables).
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use ferroflow_tensor::{DType, Tensor};

use crate::elementwise::NUMERIC;
use crate::{invalid, Inputs, KResult, KernelContext, KernelRegistry, NodeDesc, OpKernel, Outputs};

/// One variable: a dtype fixed by its handle and a value once assigned.
pub struct Variable {
    dtype: DType,
    value: RwLock<Option<Tensor>>,
}

impl Variable {
    /// A variable of `dtype` holding `value` (none: unassigned), for state made outside a
    /// session (an eager variable a function captures).
    pub fn new(dtype: DType, value: Option<Tensor>) -> Variable {
        Variable { dtype, value: RwLock::new(value.map(Tensor::into_owned)) }
    }
    /// The variable's dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// The current value (shared, not copied), or `None` before the first assignment.
    pub fn read(&self) -> Option<Tensor> {
        self.value.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
    /// Replaces the value (copying foreign elements: a variable must not change when a fed
    /// NumPy array does).
    pub fn assign(&self, t: Tensor) {
        *self.value.write().unwrap_or_else(|p| p.into_inner()) = Some(t.into_owned());
    }
    /// The write lock on the value (for updates that hold several variables at once; take
    /// them in a fixed order, e.g. by address, to avoid deadlock).
    pub fn lock(&self) -> std::sync::RwLockWriteGuard<'_, Option<Tensor>> {
        self.value.write().unwrap_or_else(|p| p.into_inner())
    }
    /// Runs `f` on the value under the write lock (for in-place updates).
    pub fn update<R>(&self, f: impl FnOnce(&mut Option<Tensor>) -> R) -> R {
        f(&mut self.value.write().unwrap_or_else(|p| p.into_inner()))
    }
}

/// State of one stateful random op: a Philox key and the next counter.
pub struct RandomState {
    /// Philox key.
    pub key: [u32; 2],
    /// Next 128-bit counter (low 64 bits advance; high 64 bits hold `seed2`).
    pub counter: u64,
    /// High half of the counter.
    pub stream: u64,
}

/// A source of elements an `IteratorGetNext` node pulls from (a ferroflow `Dataset`'s
/// iterator, attached under an `IteratorV2` node's key).
pub trait IteratorSource: Send + Sync {
    /// The next element's components, `None` at the end, or the element's error.
    fn get_next(&self) -> Result<Option<Vec<Tensor>>, String>;
}

/// Variables, random states and attached iterators of one session, by key. Lives as long as
/// the session; every step of every signature sees the same state.
#[derive(Default)]
pub struct ResourceMgr {
    vars: RwLock<HashMap<String, Arc<Variable>>>,
    rngs: Mutex<HashMap<String, Arc<Mutex<RandomState>>>>,
    iterators: RwLock<HashMap<String, Arc<dyn IteratorSource>>>,
}

impl ResourceMgr {
    /// An empty manager.
    pub fn new() -> ResourceMgr {
        ResourceMgr::default()
    }

    /// The variable under `key`, created (unassigned) if absent. A key already holding a
    /// variable of another dtype is an error.
    pub fn variable(&self, key: &str, dtype: DType) -> KResult<Arc<Variable>> {
        if let Some(v) = self.vars.read().unwrap_or_else(|p| p.into_inner()).get(key) {
            if v.dtype != dtype {
                return Err(invalid(format!("variable '{key}' holds {}, but this handle is for {dtype}", v.dtype)));
            }
            return Ok(v.clone());
        }
        let mut w = self.vars.write().unwrap_or_else(|p| p.into_inner());
        let v = w.entry(key.to_string()).or_insert_with(|| Arc::new(Variable { dtype, value: RwLock::new(None) }));
        if v.dtype != dtype {
            return Err(invalid(format!("variable '{key}' holds {}, but this handle is for {dtype}", v.dtype)));
        }
        Ok(v.clone())
    }

    /// Puts `var` under `key` (a variable shared with state outside the session, such as an
    /// eager variable a traced function captures), replacing what was there.
    pub fn insert_variable(&self, key: &str, var: Arc<Variable>) {
        self.vars.write().unwrap_or_else(|p| p.into_inner()).insert(key.to_string(), var);
    }

    /// The variable under `key`, if any.
    pub fn lookup(&self, key: &str) -> Option<Arc<Variable>> {
        self.vars.read().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }

    /// Every assigned variable's key and value, sorted by key.
    pub fn snapshot(&self) -> BTreeMap<String, Tensor> {
        let vars = self.vars.read().unwrap_or_else(|p| p.into_inner());
        vars.iter().filter_map(|(k, v)| Some((k.clone(), v.read()?))).collect()
    }

    /// Attaches `source` as the iterator under `key` (`container/shared_name`, see
    /// [`handle_key`]), replacing any iterator attached there before.
    pub fn attach_iterator(&self, key: &str, source: Arc<dyn IteratorSource>) {
        self.iterators.write().unwrap_or_else(|p| p.into_inner()).insert(key.to_string(), source);
    }

    /// The iterator attached under `key`, if any.
    pub fn iterator(&self, key: &str) -> Option<Arc<dyn IteratorSource>> {
        self.iterators.read().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }

    /// The random state of the op `node`, created from `seeds` on first use.
    pub fn random_state(&self, node: &str, seeds: impl FnOnce() -> RandomState) -> Arc<Mutex<RandomState>> {
        let mut m = self.rngs.lock().unwrap_or_else(|p| p.into_inner());
        m.entry(node.to_string()).or_insert_with(|| Arc::new(Mutex::new(seeds()))).clone()
    }
}

/// The key a `VarHandleOp` node's handle carries: `container/shared_name`, with the node's
/// name when `shared_name` is empty (as TensorFlow 1 graphs do).
pub fn handle_key(container: &str, shared_name: &str, node: &str) -> String {
    let name = if shared_name.is_empty() { node } else { shared_name };
    let container = if container.is_empty() { "localhost" } else { container };
    format!("{container}/{name}")
}

impl KernelContext<'_> {
    /// The session's resource manager, or an error naming `node` when the kernel runs
    /// without one (eager calls and constant folding have none).
    pub fn resources(&self, node: &str) -> KResult<&ResourceMgr> {
        self.resources.ok_or_else(|| invalid(format!("node '{node}' needs session state (variables) to run")))
    }
}

/// Looks up the variable a handle input names, checking its dtype.
pub(crate) fn var_from_handle(
    ctx: &KernelContext,
    node: &str,
    handle: &Tensor,
    dtype: DType,
) -> KResult<Arc<Variable>> {
    let key = handle.resource_key().map_err(|e| invalid(format!("node '{node}': bad resource handle: {e}")))?;
    ctx.resources(node)?.variable(key, dtype).map_err(|e| invalid(format!("node '{node}': {e}")))
}

/// Reads an initialized variable or says it is uninitialized.
pub(crate) fn read_initialized(var: &Variable, node: &str, handle: &Tensor) -> KResult<Tensor> {
    var.read().ok_or_else(|| {
        invalid(format!(
            "node '{node}': variable '{}' is uninitialized (run its initializer first)",
            handle.resource_key().unwrap_or("?")
        ))
    })
}

struct VarHandle {
    key: String,
}
impl OpKernel for VarHandle {
    fn compute(&self, _: &KernelContext, _: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        outputs.push(Tensor::resource_handle(&self.key));
        Ok(())
    }
}

struct ReadVar {
    node: String,
    dtype: DType,
}
impl OpKernel for ReadVar {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let var = var_from_handle(ctx, &self.node, &inputs[0], self.dtype)?;
        outputs.push(read_initialized(&var, &self.node, &inputs[0])?);
        Ok(())
    }
}

struct IsInitialized {
    node: String,
}
impl OpKernel for IsInitialized {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let key = inputs[0].resource_key().map_err(|e| invalid(format!("node '{}': {e}", self.node)))?;
        let init = ctx.resources(&self.node)?.lookup(key).is_some_and(|v| v.read().is_some());
        outputs.push(Tensor::scalar(init));
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum AssignKind {
    Set,
    Add,
    Sub,
}

struct Assign {
    node: String,
    dtype: DType,
    kind: AssignKind,
}
impl OpKernel for Assign {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, _: &mut Outputs) -> KResult<()> {
        let value = inputs.pop().expect("two inputs");
        let var = var_from_handle(ctx, &self.node, &inputs[0], self.dtype)?;
        if value.dtype() != self.dtype {
            return Err(invalid(format!(
                "node '{}': value is {}, variable is {}",
                self.node,
                value.dtype(),
                self.dtype
            )));
        }
        let kind = self.kind;
        let node = &self.node;
        var.update(|slot| -> KResult<()> {
            match (kind, slot.as_mut()) {
                (AssignKind::Set, _) => {
                    // A fed NumPy array's memory is copied: the variable must not change when
                    // the array does.
                    *slot = Some(value.into_owned());
                    Ok(())
                }
                (_, None) => Err(invalid(format!(
                    "node '{node}': variable '{}' is uninitialized",
                    inputs[0].resource_key().unwrap_or("?")
                ))),
                (_, Some(cur)) => {
                    if cur.dims() != value.dims() {
                        return Err(invalid(format!(
                            "node '{node}': cannot update variable of shape {:?} with a value of shape {:?}",
                            cur.dims(),
                            value.dims()
                        )));
                    }
                    let sub = matches!(kind, AssignKind::Sub);
                    add_in_place(cur, &value, sub, node)
                }
            }
        })
    }
}

fn add_in_place(cur: &mut Tensor, v: &Tensor, sub: bool, node: &str) -> KResult<()> {
    use crate::numeric::Num;
    fn go<T: ferroflow_tensor::Element + Num>(cur: &mut Tensor, v: &Tensor, sub: bool) -> KResult<()> {
        let b = v.as_slice::<T>()?;
        for (x, y) in cur.as_mut_slice::<T>()?.iter_mut().zip(b) {
            *x = if sub { x.sub_w(*y) } else { x.add_w(*y) };
        }
        Ok(())
    }
    dispatch!(cur.dtype(), node, [Float => f32, Double => f64, Int32 => i32, Int64 => i64], |T| go::<T>(cur, v, sub))
}

fn k_handle(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(VarHandle { key: handle_key(&d.string("container")?, &d.string("shared_name")?, d.name) }))
}
fn k_read(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(ReadVar { node: d.name.to_string(), dtype: d.dtype("dtype")? }))
}
fn k_is_init(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    Ok(Box::new(IsInitialized { node: d.name.to_string() }))
}
fn assign_factory(kind: AssignKind) -> impl Fn(&NodeDesc) -> KResult<Box<dyn OpKernel>> {
    move |d| Ok(Box::new(Assign { node: d.name.to_string(), dtype: d.dtype("dtype")?, kind }))
}
fn k_assign(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    assign_factory(AssignKind::Set)(d)
}
fn k_assign_add(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    assign_factory(AssignKind::Add)(d)
}
fn k_assign_sub(d: &NodeDesc) -> KResult<Box<dyn OpKernel>> {
    assign_factory(AssignKind::Sub)(d)
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("VarHandleOp", "", &[], k_handle);
    r.register("ReadVariableOp", "", &[], k_read);
    r.register("VarIsInitializedOp", "", &[], k_is_init);
    r.register("AssignVariableOp", "", &[], k_assign);
    r.register("AssignAddVariableOp", "dtype", NUMERIC, k_assign_add);
    r.register("AssignSubVariableOp", "dtype", NUMERIC, k_assign_sub);
}
