//! The module's allocator: Redis's own (`RM_Alloc`, through the redis-module crate's
//! `RedisAlloc`), so that `INFO memory` and `maxmemory` count what the module holds, plus a count
//! of the bytes the module holds now (`INFO reclaim` `reclaim_used_memory`): its policy values in
//! the keyspace, the registry and every run-time structure, and what a command or step in progress
//! has allocated; and [`prefetch`], a hint for walks over many policies. A leaf: calls nothing
//! else in the crate.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicI64, Ordering};

use redis_module::alloc::RedisAlloc;

/// Bytes allocated and not yet freed (sizes as requested; the allocator's own rounding is not
/// counted).
static USED: AtomicI64 = AtomicI64::new(0);

/// [`RedisAlloc`] with a count of the bytes in use.
pub struct CountingAlloc;

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { RedisAlloc.alloc(layout) };
        if !p.is_null() {
            USED.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { RedisAlloc.dealloc(ptr, layout) };
        USED.fetch_sub(layout.size() as i64, Ordering::Relaxed);
    }
}

/// Bytes the module holds now through Redis's allocator.
pub fn used_bytes() -> u64 {
    USED.load(Ordering::Relaxed).max(0) as u64
}

/// Bytes the calling thread holds now (unit tests only).
/// How many items ahead a walk over many policies asks for their memory ([`prefetch`]).
pub const PREFETCH_AHEAD: usize = 8;

/// Asks the CPU to bring the memory at `p` into its cache (x86-64 `PREFETCHT0`; nothing on other
/// targets). Never faults, whatever `p` is.
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it reads nothing and never faults.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
pub fn thread_bytes() -> i64 {
    counting_system::BYTES.with(|b| b.get())
}

/// Unit tests run without Redis: the system allocator, with a count of the bytes each thread
/// holds ([`thread_bytes`]), so a test can measure what building a value allocates.
#[cfg(test)]
mod counting_system {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        pub static BYTES: Cell<i64> = const { Cell::new(0) };
    }

    pub struct Counting;

    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() {
                let _ = BYTES.try_with(|b| b.set(b.get() + layout.size() as i64));
            }
            p
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { System.dealloc(ptr, layout) };
            let _ = BYTES.try_with(|b| b.set(b.get() - layout.size() as i64));
        }
    }

    #[global_allocator]
    static ALLOCATOR: Counting = Counting;
}
