//! Handing freed heap memory back to the system between runs (issue 15, memory per turn).
//!
//! Each LLM request is built from the whole context (the provider body as JSON, the converted
//! messages), so its transient peak grows with the session; glibc's allocator keeps the freed
//! pages of every arena it used (one per thread that allocated), and RSS then grows with that
//! peak rather than with what the session holds. [`release_free_memory`] runs once a run has
//! settled and returns those pages (`malloc_trim(0)`: the top of every arena and, since glibc
//! 2.8, whole free pages inside them through `madvise(MADV_DONTNEED)`).

/// Returns free heap pages of every malloc arena to the system. A no-op where the allocator is
/// not glibc's. Costs well under a millisecond for a heap of tens of MB; call it when idle
/// (after `agent_settled`), never per event.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas under their locks; it takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How long the RPC reader waits for input before [`release_idle_pages`] runs (once per gap
/// between commands).
pub const IDLE_RELEASE_AFTER: std::time::Duration = std::time::Duration::from_millis(250);

/// Lets an idle process hold only what it uses: [`release_free_memory`], then drops this
/// process's page-table entries for every executable file mapping (`r-xp` lines of
/// `/proc/self/maps` with a path: the `pi` binary, libc, libm, …) with
/// `madvise(MADV_DONTNEED)`. Those pages are clean copies of the files (no text relocations),
/// so a later access maps them again from the page cache (a minor fault); nothing is lost.
/// Start-up touches code all over the 17 MB text, and the kernel maps up to 64 KiB around each
/// fault, so without this an idle `pi` keeps ~8 MB of its binary resident (issue 15: idle RSS).
/// Writable and read-only data mappings are never touched (the RELRO segment holds relocated
/// pointers). Linux only; a no-op elsewhere; errors are ignored (the pages just stay).
pub fn release_idle_pages() {
    release_free_memory();
    #[cfg(target_os = "linux")]
    {
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return;
        };
        for line in maps.lines() {
            let mut fields = line.split_ascii_whitespace();
            let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
                continue;
            };
            // offset, device, inode, then the path.
            let path = fields.nth(3);
            if perms != "r-xp" || !path.is_some_and(|p| p.starts_with('/')) {
                continue;
            }
            let Some((start, end)) = range.split_once('-') else {
                continue;
            };
            let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            ) else {
                continue;
            };
            if end <= start {
                continue;
            }
            // SAFETY: the range is a whole private, read-only, executable file mapping of this
            // process as listed by the kernel; MADV_DONTNEED only drops its page-table entries,
            // and every page is re-read from the unchanged file on the next access (a running
            // executable cannot be written: ETXTBSY).
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
}
