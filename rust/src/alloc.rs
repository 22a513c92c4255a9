//! The engine's allocator: mimalloc, keeping the memory it frees.
//!
//! The engine allocates many small vectors (ISRs, replica lists, request entries) per bulk call;
//! mimalloc's thread-local free lists make that far cheaper than the system allocator. By default
//! mimalloc also hands freed pages back to the OS a second later, so the next bulk call, typically
//! seconds later when the next broker fails, takes page faults to get them back; at a million
//! partitions that was a tenth of a broker failure's time. A controller's working set is what its
//! last operations needed, so the engine keeps it, like a JVM heap. `MIMALLOC_PURGE_DELAY`
//! (milliseconds) in the environment still sets another policy.
//!
//! Nor does the engine's memory take transparent huge pages. mimalloc asks for them on the memory
//! it maps (`madvise`), and where the system grants them on request (the usual `madvise`
//! setting) each first touch of a 2 MB page zeroes it whole, or waits for the kernel to compact
//! memory for one: a rolling restart's bulk calls, which reach fresh parts of the arena at
//! every broker change, spent a tenth of its CPU in those faults. mimalloc's own switch
//! (`MIMALLOC_ALLOW_THP=0`) is read at its start, before this runs; the same process-wide
//! setting is made here unless the environment sets that switch.

use std::os::raw::{c_int, c_long};

#[cfg(target_os = "linux")]
extern "C" {
    fn prctl(option: c_int, ...) -> c_int;
}

/// `PR_SET_THP_DISABLE` and `PR_GET_THP_DISABLE` of `<linux/prctl.h>`.
#[cfg(target_os = "linux")]
const PR_SET_THP_DISABLE: c_int = 41;
#[cfg(target_os = "linux")]
#[cfg(test)]
const PR_GET_THP_DISABLE: c_int = 42;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc's `mi_option_t` (libmimalloc-sys names no constant for it).
const MI_OPTION_PURGE_DELAY: c_int = 15;

/// Never purge and no transparent huge pages, unless the environment asks otherwise. (mimalloc
/// reads its options when it first needs them, usually before this runs, so a default set now
/// would not apply.)
pub fn set_memory_policy() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mi_option_set records an option value; mimalloc reads it on its next purge.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1 as c_long) }
    }
    #[cfg(target_os = "linux")]
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // SAFETY: PR_SET_THP_DISABLE takes one integer and sets a flag of the process; a failure
        // (an old kernel) leaves huge pages allowed, which is only slower.
        unsafe {
            prctl(
                PR_SET_THP_DISABLE,
                1 as std::os::raw::c_ulong,
                0u64,
                0u64,
                0u64,
            )
        };
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
        set_memory_policy();
        assert_eq!(get(), -1);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_takes_no_transparent_huge_pages() {
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
            return;
        }
        set_memory_policy();
        // SAFETY: PR_GET_THP_DISABLE takes no argument and returns the process's flag.
        let disabled = unsafe { prctl(PR_GET_THP_DISABLE, 0u64, 0u64, 0u64, 0u64) };
        assert_eq!(disabled, 1);
    }
}
