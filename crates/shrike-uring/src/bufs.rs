//! The worker's receive buffers, shared by its streams: a provided-buffer ring (5.19+) that
//! the kernel picks from as data arrives. Why: with one receive buffer per stream, every
//! response needs its own receive submitted (and its poll armed) after the reader asked; with
//! a shared pool, one multishot receive per stream stays armed across responses, and an idle
//! stream holds no buffer at all.
//!
//! The pool hands buffers to the kernel in ring order and gets each back once its reader has
//! copied it out. Buffers are small (a response's head and a small body fit one); a large body
//! takes several, each a completion of the same armed receive. `unsafe` here: the ring and
//! the buffers are memory the kernel reads and writes, so they are allocated once, never move,
//! and are freed only when nothing can be in flight (else leaked, as `ring.rs` does).
#![allow(unsafe_code)]

use std::alloc::{alloc, alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::IoUring;

/// The buffer group the streams' multishot receives name.
pub(crate) const GROUP: u16 = 0;
/// Buffers per worker (a power of two, as the ring needs) and bytes each: 512 KiB per worker.
/// The kernel takes buffers in ring order, so every buffer of the pool is cycled through
/// however few are in use: a pool larger than the core's L2 cache (4 MiB was tried) made the
/// kernel's copy into it three times as costly (`_copy_to_iter` 3.1 % of the client's CPU
/// against 0.9 %). A turn that needs more buffers than are free ends some receives with
/// ENOBUFS; those streams fall back to a receive into their own buffer.
const COUNT: u16 = 128;
pub(crate) const SIZE: usize = 4096;
/// The page alignment the kernel wants for the ring.
const PAGE: usize = 4096;

pub(crate) struct Pool {
    /// `COUNT` entries; the kernel reads those below the tail we publish (the tail lives in
    /// the first entry's reserved field).
    ring: NonNull<BufRingEntry>,
    ring_layout: Layout,
    /// `COUNT * SIZE` bytes; buffer `bid` is `bid * SIZE..`.
    bufs: NonNull<u8>,
    bufs_layout: Layout,
    tail: u16,
    /// Buffers the kernel may pick from now.
    available: usize,
    /// Operations may still write into the buffers: never free them.
    leaked: bool,
}

impl Pool {
    /// Allocates the pool and registers it with `ring`; `None` when the kernel refuses (older
    /// than 5.19), and the streams then use their own buffers only.
    pub(crate) fn register(ring: &IoUring) -> Option<Pool> {
        let ring_layout =
            Layout::from_size_align(COUNT as usize * size_of::<BufRingEntry>(), PAGE).ok()?;
        let bufs_layout = Layout::from_size_align(COUNT as usize * SIZE, PAGE).ok()?;
        // SAFETY: both layouts have a non-zero size.
        let ring_ptr = NonNull::new(unsafe { alloc_zeroed(ring_layout) }.cast::<BufRingEntry>())?;
        // SAFETY: as above.
        let Some(bufs) = NonNull::new(unsafe { alloc(bufs_layout) }) else {
            // SAFETY: allocated just above with this layout.
            unsafe { dealloc(ring_ptr.as_ptr().cast(), ring_layout) };
            return None;
        };
        let mut pool = Pool {
            ring: ring_ptr,
            ring_layout,
            bufs,
            bufs_layout,
            tail: 0,
            available: 0,
            leaked: false,
        };
        // SAFETY: the ring's memory stays allocated until the pool drops, and the pool is
        // unregistered (or the io_uring closed, or the pool leaked) before that.
        let addr = ring_ptr.as_ptr() as u64;
        unsafe { ring.submitter().register_buf_ring_with_flags(addr, COUNT, GROUP, 0) }.ok()?;
        for bid in 0..COUNT {
            pool.give_back(bid);
        }
        Some(pool)
    }

    pub(crate) fn available(&self) -> usize {
        self.available
    }

    /// A completion carried buffer `bid`: it is ours until given back.
    pub(crate) fn taken(&mut self) {
        self.available = self.available.saturating_sub(1);
    }

    /// Bytes `from..to` of buffer `bid`.
    pub(crate) fn bytes(&self, bid: u16, from: usize, to: usize) -> &[u8] {
        let to = to.min(SIZE);
        let from = from.min(to);
        let start = usize::from(bid % COUNT) * SIZE + from;
        // SAFETY: within the allocation (bid < COUNT, from <= to <= SIZE); a buffer a
        // completion handed us is not written by the kernel until it is given back.
        unsafe { std::slice::from_raw_parts(self.bufs.as_ptr().add(start), to - from) }
    }

    /// Hands buffer `bid` to the kernel again, at the ring's tail.
    pub(crate) fn give_back(&mut self, bid: u16) {
        let bid = bid % COUNT;
        let idx = usize::from(self.tail & (COUNT - 1));
        // SAFETY: idx < COUNT; the kernel reads entries only below the published tail, and
        // this one is at it. The tail itself (the first entry's `resv`) is not touched here.
        let entry = unsafe { &mut *self.ring.as_ptr().add(idx) };
        entry.set_addr(self.bufs.as_ptr() as u64 + u64::from(bid) * SIZE as u64);
        entry.set_len(SIZE as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail field is in the ring's first entry, aligned for a u16, and shared
        // with the kernel only through atomic access (a release store publishes the entry).
        let tail = unsafe { BufRingEntry::tail(self.ring.as_ptr()) }.cast_mut();
        unsafe { AtomicU16::from_ptr(tail) }.store(self.tail, Ordering::Release);
        self.available += 1;
    }

    /// Something may still be in flight: the memory must outlive the process's use of it.
    pub(crate) fn leak(&mut self) {
        self.leaked = true;
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if self.leaked {
            return;
        }
        // SAFETY: allocated in `register` with these layouts, and nothing is in flight.
        unsafe {
            dealloc(self.ring.as_ptr().cast(), self.ring_layout);
            dealloc(self.bufs.as_ptr(), self.bufs_layout);
        }
    }
}
