//! A 64-byte-aligned byte buffer, with a per-thread cache of small blocks.
//!
//! Aligned allocation is slow in most system allocators (glibc takes its `memalign` path),
//! and graphs of small ops allocate and free small tensors constantly. Blocks of up to
//! [`CACHED_MAX`] bytes are rounded up to a power of two and recycled through a bounded
//! thread-local free list, as TensorFlow's own allocators pool their buffers.
use std::alloc::{self, Layout};
use std::cell::RefCell;
use std::ptr::NonNull;

/// Alignment of every tensor buffer: a cache line, and enough for any SIMD load.
pub const ALIGNMENT: usize = 64;

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

/// Allocates a block of `block` bytes (a class size or larger), reusing a cached one.
fn alloc_block(block: usize) -> NonNull<u8> {
    if let Some(c) = class_of(block) {
        let cached = CACHE.try_with(|cache| cache.borrow_mut().free[c].pop()).ok().flatten();
        if let Some(p) = cached {
            return p;
        }
    }
    let layout = Layout::from_size_align(block, ALIGNMENT).expect("tensor size fits in isize");
    // SAFETY: layout has non-zero size (block >= ALIGNMENT or len > 0).
    let raw = unsafe { alloc::alloc(layout) };
    NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout))
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
    }
    let layout = Layout::from_size_align(block, ALIGNMENT).expect("layout was valid at allocation");
    // SAFETY: `p` was allocated by alloc_block with this layout (cached blocks too).
    unsafe { alloc::dealloc(p.as_ptr(), layout) };
}

/// An owned, 64-byte-aligned byte buffer.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like Vec<u8>); shared access only
// hands out `&[u8]`, mutation requires `&mut self`.
unsafe impl Send for AlignedBuf {}
// SAFETY: as above; `&AlignedBuf` only allows reads.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zero-filled buffer of `len` bytes. Panics only if `len` overflows `isize`, which the
    /// callers rule out by checking sizes against their input first.
    pub fn zeroed(len: usize) -> AlignedBuf {
        Self::uninit_for_overwrite(len)
    }

    /// A buffer holding a copy of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> AlignedBuf {
        let mut b = Self::uninit_for_overwrite(bytes.len());
        b.as_mut_slice().copy_from_slice(bytes);
        b
    }

    /// A buffer whose contents the caller overwrites entirely before reading. It is zeroed
    /// anyway (reading it is never undefined); the name marks the intent.
    pub fn uninit_for_overwrite(len: usize) -> AlignedBuf {
        if len == 0 {
            return AlignedBuf { ptr: Self::dangling(), len: 0 };
        }
        let ptr = alloc_block(block_size(len));
        // SAFETY: the block is valid for at least `len` writable bytes; zeroing initialises
        // them before any reference to the memory exists.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, len) };
        AlignedBuf { ptr, len }
    }

    fn dangling() -> NonNull<u8> {
        // SAFETY: ALIGNMENT is non-zero, so this is a non-null, suitably aligned address that
        // is never dereferenced for a non-empty access.
        unsafe { NonNull::new_unchecked(ALIGNMENT as *mut u8) }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised bytes (or dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in as_slice, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Pointer to the first byte (64-byte aligned).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> AlignedBuf {
        AlignedBuf::from_bytes(self.as_slice())
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len != 0 {
            free_block(self.ptr, block_size(self.len));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycled_blocks_come_back_zeroed_and_aligned() {
        for round in 0..3 {
            let bufs: Vec<AlignedBuf> = (1..300).map(|n| AlignedBuf::from_bytes(&vec![round as u8 + 1; n])).collect();
            drop(bufs);
            for n in [1, 63, 64, 65, 4096, 4097] {
                let b = AlignedBuf::zeroed(n);
                assert_eq!(b.as_ptr() as usize % ALIGNMENT, 0);
                assert!(b.as_slice().iter().all(|&x| x == 0));
            }
        }
        // Freed on another thread: its cache takes the block; nothing is lost or doubled.
        let b = AlignedBuf::from_bytes(&[1, 2, 3]);
        std::thread::spawn(move || drop(b)).join().unwrap();
    }

    #[test]
    fn aligned_and_zeroed() {
        for len in [0, 1, 3, 64, 1000] {
            let b = AlignedBuf::zeroed(len);
            assert_eq!(b.as_ptr() as usize % ALIGNMENT, 0);
            assert!(b.as_slice().iter().all(|&x| x == 0));
            let c = AlignedBuf::from_bytes(&vec![7u8; len]);
            assert_eq!(c.clone().as_slice(), vec![7u8; len].as_slice());
        }
    }
}
