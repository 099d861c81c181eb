//! A shared 64-byte-aligned byte buffer, with a per-thread cache of small blocks and a
//! shared cache of large ones.
//!
//! Aligned allocation is slow in most system allocators (glibc takes its `memalign` path),
//! and graphs of small ops allocate and free small tensors constantly. Blocks of up to
//! [`CACHED_MAX`] bytes are rounded up to a power of two and recycled through a bounded
//! thread-local free list, as TensorFlow's own allocators pool their buffers.
//!
//! Large blocks (images, batches, activations) come from `mmap` in glibc and go back with
//! `munmap`, so every new one is page-faulted in again: an input pipeline that decodes,
//! resizes and batches on several threads spent a fifth of its CPU time in the kernel that
//! way, and ResNet50 at batch 32 (activations of 6–107 MB) a tenth of its time in the
//! kernel's zeroing of fresh pages. Freed large blocks of up to [`LARGE_BLOCK_MAX`] bytes are
//! kept in one cache shared by all threads (a block is often freed on another thread than the
//! one that made it), at most [`LARGE_CACHE_BLOCKS`] blocks and [`LARGE_CACHE_BYTES`] bytes,
//! oldest returned to the system first (DenseNet121 at batch 32 frees more than 64 blocks and
//! 1 GB in a step: with those bounds its largest concat output was evicted before the next
//! step needed it, 24,067 minor page faults a step; with 512 blocks and 4 GB, 77). A request takes the smallest cached block that holds
//! it with at most an eighth to spare (so a step's activations of nearly equal sizes share
//! blocks, as TensorFlow's BFC allocator lets them); as that allocator does, the cache keeps
//! what a step freed for the next step, so a model's steady state makes no system calls.
//!
//! Blocks of [`HUGE_PAGE`] bytes or more are aligned to a huge page and, on Linux, marked
//! `MADV_HUGEPAGE`: where transparent huge pages are enabled in `madvise` mode (the common
//! default), a fresh 19 MB batch is faulted in as 10 huge pages instead of 4,700 small ones,
//! which made a pipeline's first epoch (before the cache holds blocks) 5–8% slower than the
//! later ones.
use std::alloc::{self, Layout};
use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Alignment of every tensor buffer: a cache line, and enough for any SIMD load.
pub const ALIGNMENT: usize = 64;

/// Blocks of this size or more are huge-page aligned and advised as huge-page backed.
pub const HUGE_PAGE: usize = 2 << 20;

/// The layout a block of `block` bytes is allocated (and freed) with.
fn block_layout(block: usize) -> Layout {
    let align = if block >= HUGE_PAGE { HUGE_PAGE } else { ALIGNMENT };
    Layout::from_size_align(block, align).expect("tensor size fits in isize")
}

/// Asks the kernel to back a fresh block with transparent huge pages (a hint; errors ignored).
fn advise_huge(p: NonNull<u8>, block: usize) {
    #[cfg(target_os = "linux")]
    if block >= HUGE_PAGE {
        // SAFETY: [p, p + block) is one live allocation, huge-page aligned by block_layout;
        // madvise only changes how the kernel backs it, not its contents.
        unsafe { libc::madvise(p.as_ptr().cast(), block & !(HUGE_PAGE - 1), libc::MADV_HUGEPAGE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (p, block);
}

/// Largest block size served from the per-thread cache.
pub const CACHED_MAX: usize = 4096;
const CLASSES: usize = 7; // 64, 128, ..., 4096
/// Bytes of free blocks each thread keeps per size class.
const CACHE_BYTES_PER_CLASS: usize = 1 << 20;

/// The allocation size for a buffer of `len` bytes: small sizes round up to their class.
fn block_size(len: usize) -> usize {
    if len <= CACHED_MAX {
        len.next_power_of_two().max(ALIGNMENT)
    } else {
        len
    }
}

fn class_of(block: usize) -> Option<usize> {
    (block <= CACHED_MAX).then(|| (block.trailing_zeros() - ALIGNMENT.trailing_zeros()) as usize)
}

/// Free blocks of each small size class, owned by one thread.
struct BlockCache {
    free: [Vec<NonNull<u8>>; CLASSES],
}

impl Drop for BlockCache {
    fn drop(&mut self) {
        for (c, list) in self.free.iter_mut().enumerate() {
            let layout = Layout::from_size_align(ALIGNMENT << c, ALIGNMENT).expect("valid class layout");
            for p in list.drain(..) {
                // SAFETY: every cached block was allocated with exactly this class layout.
                unsafe { alloc::dealloc(p.as_ptr(), layout) };
            }
        }
    }
}

thread_local! {
    static CACHE: RefCell<BlockCache> = RefCell::new(BlockCache { free: Default::default() });
}

/// Largest block kept by the shared cache of large blocks.
pub const LARGE_BLOCK_MAX: usize = 1 << 30;
/// Most blocks the large-block cache keeps.
pub const LARGE_CACHE_BLOCKS: usize = 512;
/// Most bytes the large-block cache keeps.
pub const LARGE_CACHE_BYTES: usize = 4 << 30;

/// A freed large block: its address and size.
struct LargeBlock(NonNull<u8>, usize);
// SAFETY: a cached block is owned by the cache alone (no handle points into it).
unsafe impl Send for LargeBlock {}

/// Freed large blocks, oldest first, and their total size.
struct LargeCache {
    blocks: std::collections::VecDeque<LargeBlock>,
    bytes: usize,
}

static LARGE: std::sync::Mutex<LargeCache> =
    std::sync::Mutex::new(LargeCache { blocks: std::collections::VecDeque::new(), bytes: 0 });

fn large_cache() -> std::sync::MutexGuard<'static, LargeCache> {
    LARGE.lock().unwrap_or_else(|p| p.into_inner())
}

fn is_large(block: usize) -> bool {
    block > CACHED_MAX && block <= LARGE_BLOCK_MAX
}

/// Allocates a block of at least `block` bytes (a class size or larger), reusing a cached one;
/// `None` when the system refuses. With it, its size and whether it is a recycled large block
/// (whose header's [`INIT`] then says how many of its data bytes are initialized); false for
/// fresh blocks and small ones (reused across the sizes of their class, always zeroed).
fn alloc_block(block: usize) -> Option<(NonNull<u8>, usize, bool)> {
    if let Some(c) = class_of(block) {
        let cached = CACHE.try_with(|cache| cache.borrow_mut().free[c].pop()).ok().flatten();
        if let Some(p) = cached {
            return Some((p, block, false));
        }
    } else if is_large(block) {
        let mut cache = large_cache();
        // The smallest block that fits with at most an eighth to spare; of equal ones the
        // newest (most likely still in the CPU's caches).
        let best = (cache.blocks.iter().enumerate())
            .filter(|(_, b)| b.1 >= block && b.1 - block <= block / 8)
            .min_by_key(|&(i, b)| (b.1, usize::MAX - i))
            .map(|(i, _)| i);
        if let Some(i) = best {
            let b = cache.blocks.remove(i).expect("index from the search");
            cache.bytes -= b.1;
            return Some((b.0, b.1, true));
        }
    }
    // SAFETY: the layout has non-zero size (block >= ALIGNMENT or len > 0).
    let raw = NonNull::new(unsafe { alloc::alloc(block_layout(block)) })?;
    advise_huge(raw, block);
    Some((raw, block, false))
}

/// Returns a block to the cache, or to the allocator when the cache is full.
fn free_block(p: NonNull<u8>, block: usize) {
    if let Some(c) = class_of(block) {
        let kept = CACHE
            .try_with(|cache| {
                let list = &mut cache.borrow_mut().free[c];
                ((list.len() + 1) * block <= CACHE_BYTES_PER_CLASS).then(|| list.push(p)).is_some()
            })
            .unwrap_or(false);
        if kept {
            return;
        }
    } else if is_large(block) {
        let evicted: Vec<LargeBlock> = {
            let mut cache = large_cache();
            cache.blocks.push_back(LargeBlock(p, block));
            cache.bytes += block;
            let mut out = Vec::new();
            while cache.blocks.len() > LARGE_CACHE_BLOCKS || cache.bytes > LARGE_CACHE_BYTES {
                let Some(old) = cache.blocks.pop_front() else { break };
                cache.bytes -= old.1;
                out.push(old);
            }
            out
        };
        // Returned to the system outside the lock.
        for LargeBlock(q, size) in evicted {
            // SAFETY: `q` was allocated by alloc_block with this layout.
            unsafe { alloc::dealloc(q.as_ptr(), block_layout(size)) };
        }
        return;
    }
    // SAFETY: `p` was allocated by alloc_block with this layout (cached blocks too).
    unsafe { alloc::dealloc(p.as_ptr(), block_layout(block)) };
}

/// The allocator refused a copy of bytes that exist already: as `Vec` does.
fn handle_refusal(len: usize) -> ! {
    alloc::handle_alloc_error(Layout::from_size_align(len.max(1), ALIGNMENT).unwrap_or(Layout::new::<u8>()))
}

/// Bytes before the data in each block: the reference count, the block's size and its
/// [`INIT`] extent, padded to keep the data 64-byte aligned.
const HEADER: usize = ALIGNMENT;
/// Offset in the header of the block's size in bytes (a recycled large block may be larger
/// than its buffer needs).
const SIZE: usize = std::mem::size_of::<AtomicUsize>();
/// Offset in the header of how many leading data bytes of the block are known initialized:
/// those the buffers made in it wrote whole. A buffer from `try_alloc_with` resets it to 0:
/// its filler may leave bytes unwritten (or write uninitialized ones) in a buffer that is only
/// dropped.
const INIT: usize = 2 * std::mem::size_of::<AtomicUsize>();

/// A shared, reference-counted, 64-byte-aligned byte buffer: the storage of dense tensors.
///
/// Like `Arc<[u8]>`, but the count lives in the same (cached, aligned) block as the data, so a
/// tensor costs one allocation, usually served from the thread's free list. Cloning shares
/// the bytes; [`Buffer::get_mut`] gives write access only to the sole owner and
/// [`Buffer::make_mut`] copies first when the bytes are shared.
pub struct Buffer {
    /// Start of the block; the count is at offset 0, the data at `HEADER` (or, for a buffer
    /// over foreign memory, elsewhere: see [`Buffer::from_foreign`]).
    block: NonNull<u8>,
    /// The first data byte.
    data: NonNull<u8>,
    len: usize,
}

/// What keeps foreign memory alive (a NumPy array, a memory map): dropped with the last handle.
pub type ForeignOwner = Box<dyn std::any::Any + Send + Sync>;

/// The header's size field of a foreign buffer (no block of ours is empty).
const FOREIGN: usize = 0;
/// Offset in a foreign buffer's header of its [`ForeignOwner`].
const OWNER: usize = 4 * std::mem::size_of::<AtomicUsize>();
const _: () = assert!(OWNER + std::mem::size_of::<ForeignOwner>() <= HEADER);

// SAFETY: the bytes are only written through `&mut Buffer` when the count proves this handle
// is the only one (get_mut/make_mut); the count itself is atomic. So sharing handles across
// threads is as safe as sharing `Arc<[u8]>`.
unsafe impl Send for Buffer {}
// SAFETY: as above; `&Buffer` only allows reads and count increments.
unsafe impl Sync for Buffer {}

impl Buffer {
    #[inline]
    fn count(&self) -> &AtomicUsize {
        // SAFETY: the block starts with an initialised AtomicUsize (written in `alloc_len`)
        // and is 64-byte aligned, which satisfies AtomicUsize's alignment; it lives as long
        // as any handle.
        unsafe { &*(self.block.as_ptr() as *const AtomicUsize) }
    }

    #[inline]
    fn data(&self) -> *mut u8 {
        self.data.as_ptr()
    }

    /// A buffer over `len` bytes at `data` that someone else allocated, kept alive by `owner`
    /// until the last handle drops (then `owner` is dropped, on whichever thread that is). The
    /// bytes are never written through it: [`Buffer::get_mut`] refuses and
    /// [`Buffer::make_mut`] copies, so kernels that update inputs in place take a copy.
    ///
    /// # Safety
    /// The `len` bytes at `data` must be initialized, stay valid while `owner` lives, and not
    /// be written while any handle exists. `data` need not be 64-byte aligned, but must be
    /// aligned for the element type of any tensor made over it.
    pub unsafe fn from_foreign(data: NonNull<u8>, len: usize, owner: ForeignOwner) -> Buffer {
        let layout = block_layout(HEADER);
        // SAFETY: the layout has a non-zero size.
        let header = unsafe { alloc::alloc(layout) };
        let Some(block) = NonNull::new(header) else { alloc::handle_alloc_error(layout) };
        // SAFETY: the header is HEADER bytes, 64-byte aligned; OWNER + the owner's size fits
        // in it (checked above) and is aligned for a Box (OWNER is a multiple of 8).
        unsafe {
            let h = block.as_ptr() as *mut usize;
            h.write(1);
            h.byte_add(SIZE).write(FOREIGN);
            h.byte_add(INIT).write(0);
            (block.as_ptr().add(OWNER) as *mut ForeignOwner).write(owner);
        }
        Buffer { block, data, len }
    }

    /// True when the bytes live in foreign memory ([`Buffer::from_foreign`]).
    #[inline]
    pub fn is_foreign(&self) -> bool {
        // SAFETY: every header holds its size at SIZE, written before the handle existed.
        unsafe { (self.block.as_ptr() as *const usize).byte_add(SIZE).read() == FOREIGN }
    }

    /// This buffer, or a copy in a block of ours if it is over foreign memory: for values kept
    /// after a step (a variable's), which must not change when the foreign owner writes its
    /// memory later.
    pub fn into_owned(self) -> Buffer {
        if self.is_foreign() {
            Buffer::from_bytes(self.as_slice())
        } else {
            self
        }
    }

    /// A new buffer of `len` zero bytes, with a count of one.
    /// A buffer of `len` bytes whose data bytes are `init`-ialized by `fill` (which must
    /// write all `len` bytes through the pointer before anything reads them).
    ///
    /// # Safety
    /// `fill` must initialize every one of the `len` bytes at the pointer it is given.
    unsafe fn alloc_with(len: usize, fill: impl FnOnce(*mut u8)) -> Option<Buffer> {
        // SAFETY: the caller's `fill` initializes the `len` data bytes before any read.
        unsafe { Self::alloc_filling(len, true, |p, _| fill(p)) }
    }

    /// As [`Buffer::alloc_with`], `fill` also told whether the buffer's bytes are all
    /// initialized already (in a recycled large block, by earlier buffers); `whole` says
    /// whether this buffer's `fill` initializes every byte.
    ///
    /// # Safety
    /// `fill` must initialize every one of the `len` bytes unless told they are initialized,
    /// or, with `whole` false, before any of them is read.
    unsafe fn alloc_filling(len: usize, whole: bool, fill: impl FnOnce(*mut u8, bool)) -> Option<Buffer> {
        let total = HEADER.checked_add(len).filter(|&t| t <= isize::MAX as usize - ALIGNMENT)?;
        let (block, size, recycled) = alloc_block(block_size(total))?;
        // SAFETY: the block is valid for `size >= total` writable bytes and aligned for
        // usize; a recycled block's header was written when it was first used.
        unsafe {
            let header = block.as_ptr() as *mut usize;
            let before = if recycled { header.byte_add(INIT).read() } else { 0 };
            header.write(1); // the count (an AtomicUsize of the same layout)
            header.byte_add(SIZE).write(size);
            header.byte_add(INIT).write(if whole { before.max(len) } else { 0 });
            fill(block.as_ptr().add(HEADER), len <= before);
        }
        // SAFETY: every block is at least HEADER + len bytes long.
        let data = unsafe { NonNull::new_unchecked(block.as_ptr().add(HEADER)) };
        Some(Buffer { block, data, len })
    }

    /// A zero-filled buffer of `len` bytes without the limit check (for callers that made
    /// it with a better description); `None` when the system refuses.
    pub(crate) fn alloc_len(len: usize) -> Option<Buffer> {
        // SAFETY: write_bytes initializes all `len` bytes (zeros, so reading them is defined).
        unsafe { Self::alloc_with(len, |p| std::ptr::write_bytes(p, 0, len)) }
    }

    /// A buffer of `len` bytes whose values are unspecified — zeros, or what freed buffers
    /// left in a recycled block (never uninitialized memory) — without the limit check: for
    /// writers of every byte. A recycled block skips [`Buffer::alloc_len`]'s zero fill where
    /// its bytes are initialized; fresh ones are zeroed as there (the sequential fill takes
    /// the page faults ahead of a GEMM's scattered first writes: on ResNet50 at batch 32 its
    /// convolutions took 15% longer writing into fresh blocks not zeroed first). Zeroing
    /// recycled blocks of 6–154 MB cost MobileNetV2 at batch 32 about 4% of its time.
    pub(crate) fn alloc_for_overwrite(len: usize) -> Option<Buffer> {
        // SAFETY: the bytes are zeroed unless they are all initialized already.
        unsafe {
            Self::alloc_filling(len, true, |p, initialized| {
                if !initialized {
                    std::ptr::write_bytes(p, 0, len)
                }
            })
        }
    }

    /// A buffer of `len` bytes read from `file` at `offset` (positioned reads straight into
    /// the new block: no zero fill, no intermediate copy). Fails if the file ends first.
    pub fn read_at(file: &std::fs::File, offset: u64, len: usize) -> std::io::Result<Buffer> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let mut result = Ok(());
            // SAFETY: `fill` initializes all `len` bytes: the preads' bytes, and on an error
            // zeros for the rest (the error is returned and the buffer dropped unread, but its
            // block goes back to the cache, whose blocks must stay initialized: see
            // `alloc_block`).
            let refused =
                || std::io::Error::new(std::io::ErrorKind::OutOfMemory, format!("cannot allocate {len} bytes"));
            crate::limit::check(len, || "buffer read from a file".into())
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::OutOfMemory, e.to_string()))?;
            let buf = unsafe {
                Self::alloc_with(len, |p| {
                    let mut done = 0usize;
                    while done < len {
                        // SAFETY: `p + done .. p + len` is inside the block just allocated.
                        let n = libc::pread(
                            file.as_raw_fd(),
                            p.add(done) as *mut libc::c_void,
                            len - done,
                            (offset + done as u64) as libc::off_t,
                        );
                        if n < 0 {
                            let e = std::io::Error::last_os_error();
                            if e.kind() == std::io::ErrorKind::Interrupted {
                                continue;
                            }
                            result = Err(e);
                        } else if n == 0 {
                            result = Err(std::io::ErrorKind::UnexpectedEof.into());
                        }
                        if result.is_err() {
                            // SAFETY: as the pread above, inside the block.
                            std::ptr::write_bytes(p.add(done), 0, len - done);
                            return;
                        }
                        done += n as usize;
                    }
                })
            };
            let buf = buf.ok_or_else(refused)?;
            result.map(|_| buf)
        }
        #[cfg(not(target_os = "linux"))]
        {
            use std::io::{Read, Seek, SeekFrom};
            let mut buf = Self::try_zeroed(len)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::OutOfMemory, e.to_string()))?;
            let mut f = file;
            f.seek(SeekFrom::Start(offset))?;
            f.read_exact(buf.make_mut())?;
            Ok(buf)
        }
    }

    /// A zero-filled buffer of `len` bytes, if `len` fits this thread's memory limit
    /// ([`crate::limit`]) and the system grants it.
    pub fn try_zeroed(len: usize) -> Result<Buffer, crate::TensorError> {
        crate::limit::check(len, || "buffer".into())?;
        Self::alloc_len(len).ok_or_else(|| crate::TensorError::SystemRefused { what: "buffer".into(), bytes: len })
    }

    /// A buffer holding a copy of `bytes` (copied once, not zeroed first): the bytes exist
    /// already, so their size is not checked against the limit.
    pub fn from_bytes(bytes: &[u8]) -> Buffer {
        // SAFETY: the copy initializes all `bytes.len()` bytes; the regions do not overlap
        // (the block is freshly allocated).
        let buf =
            unsafe { Self::alloc_with(bytes.len(), |p| std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len())) };
        buf.unwrap_or_else(|| handle_refusal(bytes.len()))
    }

    /// A buffer of `len` bytes that `fill` initializes, if `len` fits this thread's memory
    /// limit and the system grants it.
    ///
    /// # Safety
    /// Every one of the `len` bytes must be initialized (by `fill` or through a pointer it
    /// kept) before any is read; a buffer with bytes never written may only be dropped (its
    /// block is then zeroed before [`Buffer::alloc_for_overwrite`] hands it out again).
    pub(crate) unsafe fn try_alloc_with(len: usize, fill: impl FnOnce(*mut u8)) -> Result<Buffer, crate::TensorError> {
        crate::limit::check(len, || "buffer".into())?;
        // SAFETY: the caller's contract; not `whole`, as its filler may leave bytes unwritten
        // in a buffer that is then only dropped.
        unsafe { Self::alloc_filling(len, false, |p, _| fill(p)) }
            .ok_or_else(|| crate::TensorError::SystemRefused { what: "buffer".into(), bytes: len })
    }

    /// A buffer holding `parts` one after another (each byte written once, no zero fill),
    /// if their total fits this thread's memory limit and the system grants it.
    pub fn try_concat(parts: &[&[u8]]) -> Result<Buffer, crate::TensorError> {
        let len = parts
            .iter()
            .try_fold(0usize, |a, p| a.checked_add(p.len()))
            .ok_or_else(|| crate::TensorError::TooLarge("concatenated buffer overflows".into()))?;
        crate::limit::check(len, || "buffer".into())?;
        // SAFETY: the copies write `len` bytes in total, contiguously from the start, into a
        // block of `len` data bytes; the sources are other allocations.
        let buf = unsafe {
            Self::alloc_with(len, |p| {
                let mut at = 0;
                for part in parts {
                    std::ptr::copy_nonoverlapping(part.as_ptr(), p.add(at), part.len());
                    at += part.len();
                }
            })
        };
        buf.ok_or_else(|| crate::TensorError::SystemRefused { what: "buffer".into(), bytes: len })
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the data region holds `len` initialised bytes for as long as this handle
        // lives, and is not written while shared (see get_mut).
        unsafe { std::slice::from_raw_parts(self.data(), self.len) }
    }

    /// Pointer to the first byte (64-byte aligned, unless the buffer is foreign).
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.data()
    }

    /// True when no other handle shares these bytes (never for foreign bytes, which their
    /// owner shares).
    #[inline]
    pub fn is_unique(&self) -> bool {
        // Acquire pairs with the Release decrement of handles dropped on other threads, so
        // their reads of the bytes happen before any write we make next.
        self.count().load(Ordering::Acquire) == 1 && !self.is_foreign()
    }

    /// The bytes, mutably, if this is the only handle to them.
    #[inline]
    pub fn get_mut(&mut self) -> Option<&mut [u8]> {
        if !self.is_unique() {
            return None;
        }
        // SAFETY: the count is 1 and we hold this (only) handle mutably, so no other handle
        // exists or can be created while the borrow lives.
        Some(unsafe { std::slice::from_raw_parts_mut(self.data(), self.len) })
    }

    /// The bytes, mutably, copying them into a fresh buffer first if they are shared.
    pub fn make_mut(&mut self) -> &mut [u8] {
        if !self.is_unique() {
            *self = Buffer::from_bytes(self.as_slice());
        }
        self.get_mut().expect("unique after copying")
    }
}

impl Clone for Buffer {
    #[inline]
    fn clone(&self) -> Buffer {
        // Relaxed, as in Arc: a new handle can only be made from an existing one.
        let old = self.count().fetch_add(1, Ordering::Relaxed);
        if old > isize::MAX as usize {
            std::process::abort();
        }
        Buffer { block: self.block, data: self.data, len: self.len }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.count().fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Synchronise with every other handle's Release decrement before freeing.
        std::sync::atomic::fence(Ordering::Acquire);
        // SAFETY: the header's size was written when the block was handed to this buffer.
        let size = unsafe { (self.block.as_ptr() as *const usize).byte_add(SIZE).read() };
        if size == FOREIGN {
            // SAFETY: from_foreign wrote the owner at OWNER and allocated the header with this
            // layout; this is the last handle, so the owner is read (and dropped) once.
            unsafe {
                drop((self.block.as_ptr().add(OWNER) as *const ForeignOwner).read());
                alloc::dealloc(self.block.as_ptr(), block_layout(HEADER));
            }
            return;
        }
        free_block(self.block, size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        for len in [0, 1, 3, 64, 1000, 5000] {
            let b = Buffer::try_zeroed(len).unwrap();
            assert_eq!(b.as_ptr() as usize % ALIGNMENT, 0);
            assert!(b.as_slice().iter().all(|&x| x == 0));
            let c = Buffer::from_bytes(&vec![7u8; len]);
            assert_eq!(c.clone().as_slice(), vec![7u8; len].as_slice());
        }
    }

    #[test]
    fn sharing_and_copy_on_write() {
        let mut a = Buffer::from_bytes(&[1, 2, 3]);
        let b = a.clone();
        assert!(a.get_mut().is_none());
        a.make_mut()[0] = 9;
        assert_eq!(a.as_slice(), &[9, 2, 3]);
        assert_eq!(b.as_slice(), &[1, 2, 3]);
        assert!(a.get_mut().is_some());
        drop(b);
        let mut c = a.clone();
        drop(a);
        assert!(c.get_mut().is_some(), "unique again once the other handle is gone");
    }

    #[test]
    fn recycled_blocks_come_back_zeroed_and_aligned() {
        for round in 0..3 {
            let bufs: Vec<Buffer> = (1..300).map(|n| Buffer::from_bytes(&vec![round as u8 + 1; n])).collect();
            drop(bufs);
            for n in [1, 63, 64, 65, 4096, 4097] {
                let b = Buffer::try_zeroed(n).unwrap();
                assert_eq!(b.as_ptr() as usize % ALIGNMENT, 0);
                assert!(b.as_slice().iter().all(|&x| x == 0));
            }
        }
    }

    #[test]
    fn buffers_for_overwrite_reuse_blocks_without_filling() {
        // A size no other test uses (the large-block cache is shared by the process).
        let n = 1_234_567;
        let b = Buffer::from_bytes(&vec![7u8; n]);
        let p = b.as_ptr();
        drop(b);
        // The block comes back from the cache, holding its last values.
        let c = Buffer::alloc_for_overwrite(n).unwrap();
        assert_eq!(c.as_ptr(), p);
        assert_eq!(c.len(), n);
        assert!(c.as_slice().iter().all(|&x| x == 7));
        drop(c);
        // Zero-filled buffers from the same block are zero.
        let z = Buffer::try_zeroed(n).unwrap();
        assert_eq!(z.as_ptr(), p);
        assert!(z.as_slice().iter().all(|&x| x == 0));
        drop(z);
        // Small blocks (reused across their class's sizes) and fresh ones are zeroed.
        drop(Buffer::from_bytes(&[9u8; 100]));
        assert!(Buffer::alloc_for_overwrite(90).unwrap().as_slice().iter().all(|&x| x == 0));
        let fresh = Buffer::alloc_for_overwrite(4_567_891).unwrap();
        assert!(fresh.as_slice().iter().all(|&x| x == 0));
    }

    /// A request takes a cached block up to an eighth larger, holding what its last buffer
    /// left; bytes of it that no buffer initialized are zeroed before a buffer for
    /// overwriting covers them.
    #[test]
    fn large_blocks_serve_slightly_smaller_buffers() {
        let n = 3_600_000; // sizes no other test uses
        let b = Buffer::from_bytes(&vec![3u8; n]);
        let p = b.as_ptr();
        drop(b);
        // Too small to take it (more than an eighth to spare): a fresh block.
        let small = Buffer::alloc_for_overwrite(n / 2).unwrap();
        assert_ne!(small.as_ptr(), p);
        drop(small);
        // A little smaller: the same block, its values kept.
        let c = Buffer::alloc_for_overwrite(n - 100_000).unwrap();
        assert_eq!(c.as_ptr(), p);
        assert!(c.as_slice().iter().all(|&x| x == 3));
        drop(c);
        // A little larger: a fresh block, zeroed.
        let d = Buffer::alloc_for_overwrite(n + 1).unwrap();
        assert_ne!(d.as_ptr(), p);
        assert!(d.as_slice().iter().all(|&x| x == 0));

        // A block whose last buffer may have left bytes unwritten holds nothing initialized,
        // so it is zeroed for a smaller request; after a buffer that wrote its first
        // `m - 1000` bytes, a request for all `m` is zeroed again.
        let m = 3_900_000;
        // SAFETY: the buffer is only dropped, never read.
        let e = unsafe { Buffer::try_alloc_with(m, |_| {}) }.unwrap();
        let q = e.as_ptr();
        drop(e);
        let f = Buffer::alloc_for_overwrite(m - 1000).unwrap();
        assert_eq!(f.as_ptr(), q);
        assert!(f.as_slice().iter().all(|&x| x == 0));
        drop(f);
        let g = Buffer::from_bytes(&vec![5u8; m - 1000]);
        assert_eq!(g.as_ptr(), q);
        drop(g);
        let h = Buffer::alloc_for_overwrite(m).unwrap();
        assert_eq!(h.as_ptr(), q);
        assert!(h.as_slice().iter().all(|&x| x == 0));
    }

    /// A read that fails part way still leaves its block initialized (zeros past what was
    /// read) before the block goes back to the cache, where buffers for overwriting reuse it
    /// unfilled.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_failed_read_returns_an_initialized_block() {
        let path = std::env::temp_dir().join(format!("ff-buffer-short-read-{}", std::process::id()));
        let n = 3_000_001; // a size no other test uses
        std::fs::write(&path, vec![5u8; 2_000_000]).unwrap();
        // The read reuses this block: its tail must not keep these 9s.
        drop(Buffer::from_bytes(&vec![9u8; n]));
        let file = std::fs::File::open(&path).unwrap();
        let e = Buffer::read_at(&file, 0, n).err().expect("the file is shorter than the read");
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
        std::fs::remove_file(&path).unwrap();
        let b = Buffer::alloc_for_overwrite(n).unwrap();
        let (read, rest) = b.as_slice().split_at(2_000_000);
        assert!(read.iter().all(|&x| x == 5));
        assert!(rest.iter().all(|&x| x == 0));
    }

    /// A buffer whose filler may have left bytes unwritten (dropped unread, as its contract
    /// allows) marks its block, fresh or recycled, as holding nothing initialized: it is then
    /// zeroed before being handed out for overwriting.
    #[test]
    fn blocks_of_possibly_partial_buffers_are_zeroed_before_reuse() {
        let n = 2_345_679; // a size no other test uses
                           // SAFETY: the buffer is only dropped, never read.
        drop(unsafe { Buffer::try_alloc_with(n, |_| {}) }.unwrap());
        let b = Buffer::alloc_for_overwrite(n).unwrap();
        assert!(b.as_slice().iter().all(|&x| x == 0));
        drop(b);
        drop(Buffer::from_bytes(&vec![9u8; n]));
        // SAFETY: as above.
        drop(unsafe { Buffer::try_alloc_with(n, |_| {}) }.unwrap());
        let c = Buffer::alloc_for_overwrite(n).unwrap();
        assert!(c.as_slice().iter().all(|&x| x == 0));
    }

    #[test]
    fn handles_shared_across_threads() {
        let b = Buffer::from_bytes(&[5; 100]);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || {
                    let copies: Vec<Buffer> = (0..1000).map(|_| b.clone()).collect();
                    copies.iter().map(|c| c.as_slice()[99] as usize).sum::<usize>()
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), 5000);
        }
        let mut b = b;
        assert!(b.get_mut().is_some());
    }

    #[test]
    fn foreign_memory_is_read_in_place_never_written_and_released_with_the_last_handle() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        struct Owner(Vec<u32>, Arc<AtomicBool>);
        impl Drop for Owner {
            fn drop(&mut self) {
                self.1.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let owner = Owner((0..1000).collect(), dropped.clone());
        let ptr = NonNull::new(owner.0.as_ptr() as *mut u8).unwrap();
        // SAFETY: the Vec's 4000 bytes live (unmoved: a Vec's heap block stays put) as long as
        // the owner, and nothing writes them.
        let mut b = unsafe { Buffer::from_foreign(ptr, 4000, Box::new(owner)) };
        assert!(b.is_foreign());
        assert_eq!(b.as_ptr(), ptr.as_ptr() as *const u8);
        assert!(!b.is_unique());
        assert!(b.get_mut().is_none());
        let c = b.clone();
        let owned = c.clone().into_owned();
        assert!(!owned.is_foreign() && owned.as_slice() == b.as_slice());
        b.make_mut()[0] = 9;
        assert!(!b.is_foreign() && b.as_slice()[0] == 9);
        assert_eq!(c.as_slice()[0], 0);
        let t = std::thread::spawn(move || c.as_slice()[4]).join().unwrap();
        assert_eq!(t, 1);
        assert!(dropped.load(Ordering::SeqCst));
    }
}
