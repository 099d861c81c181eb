//! The process group that collective ops (`CollectiveReduceV2`, `CollectiveGatherV2`,
//! `CollectiveBcastSendV2`/`RecvV2`) and data-parallel training work across.
//!
//! A [`Communicator`] is a world of `size` ranks, this process being `rank`. The process
//! has one current world ([`world`]): a 1-rank [`Local`] world unless a backend installed
//! another with [`set_world`] — `ferroflow-mpi` installs MPI's `MPI_COMM_WORLD` when the
//! binary runs under `mpirun` (built with the `mpi` feature). Ops and optimizers are written
//! against this trait only, so everything works unchanged on one process.
//!
//! Buffers are raw element bytes with their [`Kind`]; [`all_reduce`], [`all_gather`] and
//! [`broadcast`] are the typed forms.
#![warn(missing_docs)]
use std::sync::{Arc, RwLock};

/// Element types the collectives reduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// `i32`.
    I32,
    /// `i64`.
    I64,
}

impl Kind {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Kind::F32 | Kind::I32 => 4,
            Kind::F64 | Kind::I64 => 8,
        }
    }
}

/// An element type of a collective buffer.
pub trait Elem: Copy + Send + Sync + 'static {
    /// Its kind.
    const KIND: Kind;
}
impl Elem for f32 {
    const KIND: Kind = Kind::F32;
}
impl Elem for f64 {
    const KIND: Kind = Kind::F64;
}
impl Elem for i32 {
    const KIND: Kind = Kind::I32;
}
impl Elem for i64 {
    const KIND: Kind = Kind::I64;
}

/// How values from the ranks combine (TensorFlow's `merge_op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// Exhaustive on purpose: every backend (MPI's op table) must map each op, so a new one
// must fail their builds rather than reach them at run time.
pub enum ReduceOp {
    /// `Add`.
    Sum,
    /// `Mul`.
    Prod,
    /// `Min`.
    Min,
    /// `Max`.
    Max,
}

impl ReduceOp {
    /// TensorFlow's `merge_op` name.
    pub fn from_tf(name: &str) -> Option<ReduceOp> {
        Some(match name {
            "Add" => ReduceOp::Sum,
            "Mul" => ReduceOp::Prod,
            "Min" => ReduceOp::Min,
            "Max" => ReduceOp::Max,
            _ => return None,
        })
    }
}

/// A collective failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectiveError {
    /// Arguments that cannot work (sizes, roots, kinds).
    #[error("{0}")]
    Invalid(String),
    /// The transport reported an error.
    #[error("{backend} {op} failed on rank {rank} of {size}: {reason}")]
    Transport {
        /// The backend (`mpi`).
        backend: &'static str,
        /// The collective.
        op: &'static str,
        /// This rank.
        rank: usize,
        /// The world size.
        size: usize,
        /// The backend's message.
        reason: String,
    },
}

/// A world of ranks that reduce, gather and broadcast together. Every rank must call the
/// same collectives in the same order with the same sizes (MPI's rule); the callers
/// (collective kernels chained in the graph, the distributed optimizer) guarantee it.
pub trait Communicator: Send + Sync {
    /// The backend's name (`local`, `mpi`).
    fn backend(&self) -> &'static str;
    /// This process's rank, `0..size`.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// Combines `buf` (elements of `kind`) elementwise across ranks, in place. Ranks must
    /// end with the same bits (data-parallel replicas apply the result and must stay
    /// identical): a backend whose library does not promise it says so.
    fn all_reduce(&self, buf: &mut [u8], kind: Kind, op: ReduceOp) -> Result<(), CollectiveError>;
    /// The library's own one-call all-reduce (`MPI_Allreduce`) of `send` into `recv`, for
    /// measuring [`Communicator::all_reduce`] against; no promise that ranks get the same
    /// bits. By default (one rank) a copy.
    fn all_reduce_native(&self, send: &[u8], recv: &mut [u8], kind: Kind, _: ReduceOp) -> Result<(), CollectiveError> {
        check_pair(send.len(), recv.len(), kind)?;
        recv.copy_from_slice(send);
        Ok(())
    }
    /// `recv` = every rank's `send` (all the same length), in rank order.
    fn all_gather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), CollectiveError>;
    /// `buf` = root's `buf` on every rank.
    fn broadcast(&self, buf: &mut [u8], root: usize) -> Result<(), CollectiveError>;
    /// Returns when every rank has called it.
    fn barrier(&self) -> Result<(), CollectiveError>;
    /// Sends `bytes` to rank `to` under `tag` (point-to-point: a `_Send` whose `_Recv` runs
    /// in another process). Messages between two ranks under one tag arrive in order.
    /// `stop` is polled while the send waits for its receiver: `Some(reason)` abandons it.
    fn send(
        &self,
        to: usize,
        tag: u32,
        bytes: &[u8],
        stop: &dyn Fn() -> Option<String>,
    ) -> Result<(), CollectiveError> {
        let _ = (tag, bytes, stop);
        Err(CollectiveError::Invalid(format!("no rank {to} to send to: a world of {} rank(s)", self.size())))
    }
    /// Receives the next message from rank `from` under `tag`; `stop` is polled while
    /// waiting (a cancelled step, a deadline).
    fn recv(&self, from: usize, tag: u32, stop: &dyn Fn() -> Option<String>) -> Result<Vec<u8>, CollectiveError> {
        let _ = (tag, stop);
        Err(CollectiveError::Invalid(format!("no rank {from} to receive from: a world of {} rank(s)", self.size())))
    }
}

/// The 1-rank world of a process not started by `mpirun`: every collective is the identity.
#[derive(Debug, Default)]
pub struct Local;

impl Communicator for Local {
    fn backend(&self) -> &'static str {
        "local"
    }
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn all_reduce(&self, buf: &mut [u8], kind: Kind, _: ReduceOp) -> Result<(), CollectiveError> {
        check_len(buf.len(), kind)
    }
    fn all_gather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), CollectiveError> {
        if recv.len() != send.len() {
            return Err(CollectiveError::Invalid(format!(
                "all-gather of {} bytes into {} bytes: expected {} (1 rank)",
                send.len(),
                recv.len(),
                send.len()
            )));
        }
        recv.copy_from_slice(send);
        Ok(())
    }
    fn broadcast(&self, _: &mut [u8], root: usize) -> Result<(), CollectiveError> {
        check_root(root, 1)
    }
    fn barrier(&self) -> Result<(), CollectiveError> {
        Ok(())
    }
}

/// `len` bytes must be whole elements of `kind`.
pub fn check_len(len: usize, kind: Kind) -> Result<(), CollectiveError> {
    if !len.is_multiple_of(kind.size()) {
        return Err(CollectiveError::Invalid(format!("{len} bytes is not a whole number of {kind:?} elements")));
    }
    Ok(())
}

/// An out-of-place all-reduce's buffers: whole elements of `kind`, and the same length.
pub fn check_pair(send: usize, recv: usize, kind: Kind) -> Result<(), CollectiveError> {
    check_len(send, kind)?;
    if send != recv {
        return Err(CollectiveError::Invalid(format!("all-reduce of {send} bytes into {recv}")));
    }
    Ok(())
}

/// `root` must be a rank of a world of `size`.
pub fn check_root(root: usize, size: usize) -> Result<(), CollectiveError> {
    if root >= size {
        return Err(CollectiveError::Invalid(format!("broadcast root {root} is not a rank of a world of {size}")));
    }
    Ok(())
}

static WORLD: RwLock<Option<Arc<dyn Communicator>>> = RwLock::new(None);

/// The process's world: the one [`set_world`] installed, or a 1-rank [`Local`] one.
pub fn world() -> Arc<dyn Communicator> {
    let current = WORLD.read().unwrap_or_else(|p| p.into_inner()).clone();
    current.unwrap_or_else(|| Arc::new(Local))
}

/// Makes `comm` the process's world (a backend calls it once, at start-up); returns the
/// world it replaces, if any.
pub fn set_world(comm: Arc<dyn Communicator>) -> Option<Arc<dyn Communicator>> {
    WORLD.write().unwrap_or_else(|p| p.into_inner()).replace(comm)
}

/// Removes the installed world (a backend does it before shutting down), so later calls
/// see a 1-rank world instead of a finalized one.
pub fn clear_world() -> Option<Arc<dyn Communicator>> {
    WORLD.write().unwrap_or_else(|p| p.into_inner()).take()
}

fn bytes_mut<T: Elem>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: the Elem types are plain numbers with no padding; any bytes are valid for them.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}

fn bytes<T: Elem>(v: &[T]) -> &[u8] {
    // SAFETY: as `bytes_mut`.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

/// [`Communicator::all_reduce`] of typed elements.
pub fn all_reduce<T: Elem>(comm: &dyn Communicator, v: &mut [T], op: ReduceOp) -> Result<(), CollectiveError> {
    comm.all_reduce(bytes_mut(v), T::KIND, op)
}

/// [`Communicator::all_gather`] of typed elements: `recv.len() == send.len() * size`.
pub fn all_gather<T: Elem>(comm: &dyn Communicator, send: &[T], recv: &mut [T]) -> Result<(), CollectiveError> {
    comm.all_gather(bytes(send), bytes_mut(recv))
}

/// [`Communicator::broadcast`] of typed elements.
pub fn broadcast<T: Elem>(comm: &dyn Communicator, v: &mut [T], root: usize) -> Result<(), CollectiveError> {
    comm.broadcast(bytes_mut(v), root)
}

/// The most bytes one rank may contribute to [`all_gather_varied`].
pub const MAX_GATHERED_BYTES: usize = 1 << 30;

/// Every rank's `mine` (of any length, at most [`MAX_GATHERED_BYTES`]), in rank order, on
/// every rank: the lengths are all-gathered first, then the bytes, padded to the longest.
/// Every rank must call it.
pub fn all_gather_varied(comm: &dyn Communicator, mine: &[u8]) -> Result<Vec<Vec<u8>>, CollectiveError> {
    let size = comm.size();
    // A rank over the limit still joins both gathers (with nothing), so no rank waits.
    let len = if mine.len() > MAX_GATHERED_BYTES { -1 } else { mine.len() as i64 };
    let mut lens = vec![0i64; size];
    all_gather(comm, &[len], &mut lens)?;
    if let Some(rank) = lens.iter().position(|&l| !(0..=MAX_GATHERED_BYTES as i64).contains(&l)) {
        return Err(CollectiveError::Invalid(format!(
            "gathering from {size} rank(s): rank {rank} has more than {MAX_GATHERED_BYTES} bytes to send"
        )));
    }
    let longest = lens.iter().copied().max().unwrap_or(0) as usize;
    if longest == 0 {
        return Ok(vec![Vec::new(); size]);
    }
    let mut padded = vec![0u8; longest];
    padded[..mine.len()].copy_from_slice(mine);
    let mut all = vec![0u8; longest * size];
    comm.all_gather(&padded, &mut all)?;
    Ok(all.chunks(longest).zip(&lens).map(|(c, &l)| c[..l as usize].to_vec()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varied_gathers_in_one_rank_return_what_was_sent() {
        assert_eq!(all_gather_varied(&Local, b"abc").unwrap(), vec![b"abc".to_vec()]);
        assert_eq!(all_gather_varied(&Local, b"").unwrap(), vec![Vec::<u8>::new()]);
        let e = check_pair(8, 4, Kind::F32).unwrap_err().to_string();
        assert!(e.contains("8 bytes into 4"), "{e}");
        assert!(check_pair(6, 6, Kind::F32).is_err());
    }

    #[test]
    fn local_world_is_one_rank_and_collectives_are_identities() {
        let w = world();
        assert_eq!((w.backend(), w.rank(), w.size()), ("local", 0, 1));
        let mut v = [1.5f32, -2.0];
        all_reduce(&*w, &mut v, ReduceOp::Sum).unwrap();
        assert_eq!(v, [1.5, -2.0]);
        let mut g = [0i64; 2];
        all_gather(&*w, &[7i64, 8], &mut g).unwrap();
        assert_eq!(g, [7, 8]);
        let e = all_gather(&*w, &[7i64], &mut g).unwrap_err().to_string();
        assert!(e.contains("expected 8"), "{e}");
        assert!(broadcast(&*w, &mut v, 1).unwrap_err().to_string().contains("root 1"));
        assert!(w.all_reduce(&mut [0u8; 3], Kind::F32, ReduceOp::Sum).is_err());
    }

    #[test]
    fn merge_ops_parse_tensorflow_names() {
        assert_eq!(ReduceOp::from_tf("Add"), Some(ReduceOp::Sum));
        assert_eq!(ReduceOp::from_tf("Max"), Some(ReduceOp::Max));
        assert_eq!(ReduceOp::from_tf("Sum"), None);
    }
}
