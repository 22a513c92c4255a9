//! The engine's allocator: mimalloc, keeping the memory it frees.
//!
//! The engine allocates many small vectors (ISRs, replica lists, request entries) per bulk call;
//! mimalloc's thread-local free lists make that far cheaper than the system allocator. By default
//! mimalloc also hands freed pages back to the OS a second later, so the next bulk call, typically
//! seconds later when the next broker fails, takes page faults to get them back; at a million
//! partitions that was a tenth of a broker failure's time. A controller's working set is what its
//! last operations needed, so the engine keeps it, like a JVM heap. `MIMALLOC_PURGE_DELAY`
//! (milliseconds) in the environment still sets another policy.

use std::os::raw::{c_int, c_long};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc's `mi_option_t` (libmimalloc-sys names no constant for it).
const MI_OPTION_PURGE_DELAY: c_int = 15;

/// Never purge, unless the environment asks for a purge delay. (mimalloc reads its options when
/// it first needs them, usually before this runs, so a default set now would not apply.)
pub fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mi_option_set records an option value; mimalloc reads it on its next purge.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1 as c_long) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_is_mimallocs_purge_delay() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reading an option.
        let get = || unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(get(), 1000, "mimalloc 3's default purge delay (options.c)");
        keep_freed_memory();
        assert_eq!(get(), -1);
    }
}
