//! The MPI backend (feature `mpi`).
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

use crate::MpiError;
use ferroflow_collective::{check_len, check_pair, check_root, CollectiveError, Communicator, Kind, ReduceOp};
use mpi::ffi;

/// Elements per MPI call: counts are C ints, and whole multiples of the world size.
const MAX_CALL_ELEMENTS: usize = 1 << 28;

/// `MPI_COMM_WORLD`'s duplicate, used from any thread (`MPI_THREAD_MULTIPLE`).
pub struct Mpi {
    comm: ffi::MPI_Comm,
    /// A second duplicate for point-to-point transfers, so they never match a collective's
    /// messages and need not wait for the collectives' lock.
    p2p: ffi::MPI_Comm,
    rank: usize,
    size: usize,
    /// The library's `MPI_IN_PLACE` (an implementation's constant the `mpi` crate does not
    /// export: `(void*)1` in Open MPI, `(void*)-1` in MPICH), from its version string.
    in_place: usize,
    /// One collective at a time from this process: MPI requires a communicator's
    /// collectives in the same order on every rank, which threads racing could break.
    serial: Mutex<()>,
}

// SAFETY: MPI was initialized with MPI_THREAD_MULTIPLE (checked in `init`), so the handle may
// be used from any thread; `serial` orders this process's collectives.
unsafe impl Send for Mpi {}
// SAFETY: as above.
unsafe impl Sync for Mpi {}

/// Keeps MPI initialized; dropping it removes the world and calls `MPI_Finalize`.
pub struct MpiGuard {
    world: Arc<Mpi>,
    _universe: mpi::environment::Universe,
}

impl MpiGuard {
    /// The world [`init`] installed.
    pub fn world(&self) -> &Mpi {
        &self.world
    }
}

impl Drop for MpiGuard {
    fn drop(&mut self) {
        ferroflow_collective::clear_world();
        let (mut comm, mut p2p) = (self.world.comm, self.world.p2p);
        // SAFETY: our duplicates, freed once, before the universe finalizes MPI.
        unsafe {
            ffi::MPI_Comm_free(&mut comm);
            ffi::MPI_Comm_free(&mut p2p);
        }
    }
}

/// Initializes MPI (`MPI_THREAD_MULTIPLE`) and makes `MPI_COMM_WORLD` the process's
/// collective world. Call once, early in `main`, and keep the guard until the end.
pub fn init() -> Result<MpiGuard, MpiError> {
    let (universe, provided) =
        mpi::initialize_with_threading(mpi::Threading::Multiple).ok_or(MpiError::AlreadyInitialized)?;
    if provided != mpi::Threading::Multiple {
        return Err(MpiError::Unsupported(format!(
            "MPI provides thread level {provided:?}, ferroflow needs MPI_THREAD_MULTIPLE (executor threads \
             run collectives): use an MPI built with thread support (Debian's Open MPI has it)"
        )));
    }
    // SAFETY: MPI is initialized; the out-parameters are valid for writes.
    let (comm, p2p, rank, size) = unsafe {
        let mut comm: ffi::MPI_Comm = std::mem::zeroed();
        check("MPI_Comm_dup", ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut comm))?;
        check("MPI_Comm_set_errhandler", ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN))?;
        let mut p2p: ffi::MPI_Comm = std::mem::zeroed();
        check("MPI_Comm_dup", ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut p2p))?;
        check("MPI_Comm_set_errhandler", ffi::MPI_Comm_set_errhandler(p2p, ffi::RSMPI_ERRORS_RETURN))?;
        let (mut rank, mut size) = (0, 0);
        check("MPI_Comm_rank", ffi::MPI_Comm_rank(comm, &mut rank))?;
        check("MPI_Comm_size", ffi::MPI_Comm_size(comm, &mut size))?;
        (comm, p2p, rank as usize, size as usize)
    };
    let in_place = in_place_constant()?;
    let world = Arc::new(Mpi { comm, p2p, rank, size, in_place, serial: Mutex::new(()) });
    ferroflow_collective::set_world(world.clone());
    Ok(MpiGuard { world, _universe: universe })
}

/// Between polls of a pending transfer: spin briefly (a message from a rank that is running
/// the same step usually comes soon), then yield, then sleep 50 µs (a peer far behind).
fn pause(spins: &mut u32) {
    *spins = spins.saturating_add(1);
    match *spins {
        0..=200 => std::hint::spin_loop(),
        201..=2000 => std::thread::yield_now(),
        _ => std::thread::sleep(std::time::Duration::from_micros(50)),
    }
}

/// `MPI_IN_PLACE` of the MPI library this process runs with.
fn in_place_constant() -> Result<usize, MpiError> {
    let mut buf = vec![0u8; ffi::MPI_MAX_LIBRARY_VERSION_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_LIBRARY_VERSION_STRING characters.
    check("MPI_Get_library_version", unsafe { ffi::MPI_Get_library_version(buf.as_mut_ptr().cast(), &mut len) })?;
    buf.truncate(len.clamp(0, buf.len() as c_int) as usize);
    let version = String::from_utf8_lossy(&buf);
    if version.contains("Open MPI") {
        Ok(1)
    } else if version.contains("MPICH") || version.contains("Intel(R) MPI") {
        Ok(usize::MAX)
    } else {
        Err(MpiError::Unsupported(format!(
            "unknown MPI library ({}): ferroflow knows Open MPI's and MPICH's MPI_IN_PLACE",
            version.lines().next().unwrap_or("").trim_end_matches('\0')
        )))
    }
}

/// MPI's message for error code `code`.
fn message(code: c_int) -> String {
    let mut buf = vec![0u8; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING characters.
    let rc = unsafe { ffi::MPI_Error_string(code, buf.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return format!("MPI error {code}");
    }
    buf.truncate(len.max(0) as usize);
    String::from_utf8_lossy(&buf).into_owned()
}

fn check(call: &'static str, rc: c_int) -> Result<(), MpiError> {
    if rc == ffi::MPI_SUCCESS as c_int {
        Ok(())
    } else {
        Err(MpiError::Call { call, message: message(rc) })
    }
}

fn datatype(kind: Kind) -> ffi::MPI_Datatype {
    // SAFETY: reading MPI's predefined handles (constants after MPI_Init).
    unsafe {
        match kind {
            Kind::F32 => ffi::RSMPI_FLOAT,
            Kind::F64 => ffi::RSMPI_DOUBLE,
            Kind::I32 => ffi::RSMPI_INT32_T,
            Kind::I64 => ffi::RSMPI_INT64_T,
        }
    }
}

fn reduce_op(op: ReduceOp) -> ffi::MPI_Op {
    // SAFETY: as `datatype`.
    unsafe {
        match op {
            ReduceOp::Sum => ffi::RSMPI_SUM,
            ReduceOp::Prod => ffi::RSMPI_PROD,
            ReduceOp::Min => ffi::RSMPI_MIN,
            ReduceOp::Max => ffi::RSMPI_MAX,
        }
    }
}

impl Mpi {
    fn fail(&self, op: &'static str, reason: String) -> CollectiveError {
        CollectiveError::Transport { backend: "mpi", op, rank: self.rank, size: self.size, reason }
    }

    fn call(&self, op: &'static str, rc: c_int) -> Result<(), CollectiveError> {
        check(op, rc).map_err(|e| self.fail(op, e.to_string()))
    }

    fn gather_unlocked(&self, send: &[u8], recv: &mut [u8]) -> Result<(), CollectiveError> {
        if recv.len() != send.len() * self.size {
            return Err(CollectiveError::Invalid(format!(
                "all-gather of {} bytes into {} bytes: expected {} ({} ranks)",
                send.len(),
                recv.len(),
                send.len() * self.size,
                self.size
            )));
        }
        if recv.len() > i32::MAX as usize {
            return Err(CollectiveError::Invalid(format!(
                "all-gather of {} bytes from {} ranks: at most {} bytes in all",
                send.len(),
                self.size,
                i32::MAX
            )));
        }
        // SAFETY: `send` is read, `recv` holds send.len() × size bytes.
        unsafe {
            self.call(
                "MPI_Allgather",
                ffi::MPI_Allgather(
                    send.as_ptr() as *const c_void,
                    send.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    recv.as_mut_ptr() as *mut c_void,
                    send.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    self.comm,
                ),
            )
        }
    }

    fn peer(&self, rank: usize, tag: u32) -> Result<(), CollectiveError> {
        if rank >= self.size || rank == self.rank {
            return Err(CollectiveError::Invalid(format!(
                "point-to-point with rank {rank} from rank {} of a world of {}: expected another rank",
                self.rank, self.size
            )));
        }
        if tag > i16::MAX as u32 {
            return Err(CollectiveError::Invalid(format!("tag {tag} is above {} (MPI guarantees no more)", i16::MAX)));
        }
        Ok(())
    }

    /// Waits for `request`, polling `stop`; cancels it when `stop` says so.
    ///
    /// # Safety
    /// `request` is an active request whose buffer outlives this call.
    unsafe fn wait(
        &self,
        request: &mut ffi::MPI_Request,
        op: &'static str,
        stop: &dyn Fn() -> Option<String>,
        what: impl Fn() -> String,
    ) -> Result<(), CollectiveError> {
        let mut spins = 0u32;
        loop {
            let mut flag: c_int = 0;
            let mut status: ffi::MPI_Status = std::mem::zeroed();
            self.call("MPI_Test", ffi::MPI_Test(request, &mut flag, &mut status))?;
            if flag != 0 {
                return Ok(());
            }
            if let Some(reason) = stop() {
                ffi::MPI_Cancel(request);
                ffi::MPI_Request_free(request);
                return Err(self.fail(op, format!("{}: {reason}", what())));
            }
            pause(&mut spins);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.serial.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Communicator for Mpi {
    fn backend(&self) -> &'static str {
        "mpi"
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }

    fn all_reduce(&self, buf: &mut [u8], kind: Kind, op: ReduceOp) -> Result<(), CollectiveError> {
        check_len(buf.len(), kind)?;
        if self.size == 1 {
            return Ok(());
        }
        let _serial = self.lock();
        for part in buf.chunks_mut(MAX_CALL_ELEMENTS * kind.size()) {
            // SAFETY: `part` holds whole elements, read and written in place (MPI_IN_PLACE).
            unsafe {
                self.call(
                    "MPI_Allreduce",
                    ffi::MPI_Allreduce(
                        self.in_place as *const c_void,
                        part.as_mut_ptr() as *mut c_void,
                        (part.len() / kind.size()) as c_int,
                        datatype(kind),
                        reduce_op(op),
                        self.comm,
                    ),
                )?;
            }
        }
        Ok(())
    }

    fn all_reduce_native(&self, send: &[u8], recv: &mut [u8], kind: Kind, op: ReduceOp) -> Result<(), CollectiveError> {
        check_pair(send.len(), recv.len(), kind)?;
        let _serial = self.lock();
        let piece = MAX_CALL_ELEMENTS * kind.size();
        for (src, dst) in send.chunks(piece).zip(recv.chunks_mut(piece)) {
            // SAFETY: `src` and `dst` hold the same number of elements, distinct buffers.
            unsafe {
                self.call(
                    "MPI_Allreduce",
                    ffi::MPI_Allreduce(
                        src.as_ptr() as *const c_void,
                        dst.as_mut_ptr() as *mut c_void,
                        (src.len() / kind.size()) as c_int,
                        datatype(kind),
                        reduce_op(op),
                        self.comm,
                    ),
                )?;
            }
        }
        Ok(())
    }

    fn all_gather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), CollectiveError> {
        let _serial = self.lock();
        self.gather_unlocked(send, recv)
    }

    fn broadcast(&self, buf: &mut [u8], root: usize) -> Result<(), CollectiveError> {
        check_root(root, self.size)?;
        let _serial = self.lock();
        for part in buf.chunks_mut(i32::MAX as usize) {
            // SAFETY: `part` is valid for reads and writes of its length.
            unsafe {
                self.call(
                    "MPI_Bcast",
                    ffi::MPI_Bcast(
                        part.as_mut_ptr() as *mut c_void,
                        part.len() as c_int,
                        ffi::RSMPI_UINT8_T,
                        root as c_int,
                        self.comm,
                    ),
                )?;
            }
        }
        Ok(())
    }

    fn barrier(&self) -> Result<(), CollectiveError> {
        let _serial = self.lock();
        // SAFETY: a valid communicator.
        unsafe { self.call("MPI_Barrier", ffi::MPI_Barrier(self.comm)) }
    }

    fn send(
        &self,
        to: usize,
        tag: u32,
        bytes: &[u8],
        stop: &dyn Fn() -> Option<String>,
    ) -> Result<(), CollectiveError> {
        self.peer(to, tag)?;
        let count = c_int::try_from(bytes.len()).map_err(|_| {
            self.fail("MPI_Isend", format!("{} bytes: at most {} in one message", bytes.len(), c_int::MAX))
        })?;
        // SAFETY: `bytes` outlives the request: the loop below waits for it to complete (or
        // cancels it) before returning.
        unsafe {
            let mut request: ffi::MPI_Request = std::mem::zeroed();
            self.call(
                "MPI_Isend",
                ffi::MPI_Isend(
                    bytes.as_ptr() as *const c_void,
                    count,
                    ffi::RSMPI_UINT8_T,
                    to as c_int,
                    tag as c_int,
                    self.p2p,
                    &mut request,
                ),
            )?;
            self.wait(&mut request, "MPI_Isend", stop, || format!("sending to rank {to} (tag {tag})"))
        }
    }

    fn recv(&self, from: usize, tag: u32, stop: &dyn Fn() -> Option<String>) -> Result<Vec<u8>, CollectiveError> {
        self.peer(from, tag)?;
        // SAFETY: MPI writes the status and, once a message is probed, exactly its byte count.
        unsafe {
            let mut status: ffi::MPI_Status = std::mem::zeroed();
            let mut spins = 0u32;
            loop {
                let mut flag: c_int = 0;
                self.call(
                    "MPI_Iprobe",
                    ffi::MPI_Iprobe(from as c_int, tag as c_int, self.p2p, &mut flag, &mut status),
                )?;
                if flag != 0 {
                    break;
                }
                if let Some(reason) = stop() {
                    return Err(self.fail("MPI_Iprobe", format!("receiving from rank {from} (tag {tag}): {reason}")));
                }
                pause(&mut spins);
            }
            let mut count: c_int = 0;
            self.call("MPI_Get_count", ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count))?;
            let mut buf = vec![0u8; count.max(0) as usize];
            self.call(
                "MPI_Recv",
                ffi::MPI_Recv(
                    buf.as_mut_ptr() as *mut c_void,
                    count,
                    ffi::RSMPI_UINT8_T,
                    from as c_int,
                    tag as c_int,
                    self.p2p,
                    &mut status,
                ),
            )?;
            Ok(buf)
        }
    }
}

impl MpiGuard {
    /// Ends every rank of the job (`MPI_Abort`): what a rank does on an error, so the
    /// others do not wait forever in a collective it will never join.
    pub fn abort(&self, code: i32) -> ! {
        // SAFETY: MPI is initialized; MPI_Abort does not return.
        unsafe { ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, code) };
        std::process::exit(code)
    }
}
