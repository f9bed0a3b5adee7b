//! The allocator's knobs (glibc only; other libcs are left alone).

/// glibc's defaults suit short programs, not a long-lived server: each thread that allocates
/// gets its own arena (RSS grows with the runtime's worker count), and after a large buffer is
/// freed the mmap threshold rises to its size, so the next large buffers (a 4 MB `tool.list`
/// reply, a long history) come from the heap and their pages are kept. A fixed threshold
/// sends them to mmap and back to the kernel on free; two arenas bound the per-thread spread.
/// Call before any other thread exists.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; it runs before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Hands free heap pages back to the kernel. Called after a large reply went out: building it
/// left thousands of small freed allocations behind (a 10,000-tool `tool.list`), which glibc
/// otherwise keeps.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}
