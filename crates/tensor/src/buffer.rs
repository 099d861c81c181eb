//! A 64-byte-aligned, zero-initialised byte buffer.
use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// Alignment of every tensor buffer: a cache line, and enough for any SIMD load.
pub const ALIGNMENT: usize = 64;

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
        if len == 0 {
            return AlignedBuf {
                ptr: Self::dangling(),
                len: 0,
            };
        }
        let layout = Layout::from_size_align(len, ALIGNMENT).expect("tensor size fits in isize");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
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
            return AlignedBuf {
                ptr: Self::dangling(),
                len: 0,
            };
        }
        let layout = Layout::from_size_align(len, ALIGNMENT).expect("tensor size fits in isize");
        // SAFETY: layout has non-zero size. The memory is fully initialised below before any
        // reference to it exists.
        let raw = unsafe { alloc::alloc(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        // SAFETY: `ptr` is valid for `len` writable bytes.
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
            let layout = Layout::from_size_align(self.len, ALIGNMENT)
                .expect("layout was valid at allocation");
            // SAFETY: allocated in zeroed/uninit_for_overwrite with this exact layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
