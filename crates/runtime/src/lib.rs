//! Process-wide settings of Trainyard's binaries (`trainyard`,
//! `trainyard-bench`), made once at the top of `main`, never by a library.
//!
//! One setting today: **the allocator keeps what a cycle frees.** A
//! scheduling cycle builds its working state (node states, victim units,
//! indexes) from the snapshot and drops it at the end; at 10,000 nodes
//! and 50,000 running jobs that is about 100 MB, much of it in blocks of
//! several megabytes. glibc's allocator serves such blocks with `mmap`
//! and gives them back with `munmap`, and trims the heap when its top is
//! free, so every cycle the kernel maps and zeroes the same pages again:
//! measured, 7,300 page faults and 28 ms of system time per reclaim cycle
//! of that size (docs/benchmarks.md). With blocks up to glibc's largest
//! threshold (32 MiB) taken from the heap and the heap trimmed only above
//! 256 MiB of free top, the pages stay with the process between cycles; a
//! long-running scheduler holds its peak working set anyway.
//!
//! On other targets (musl, macOS) nothing is changed.

/// Largest block served from the heap rather than by `mmap` (glibc's
/// maximum for this setting on 64-bit targets).
pub const MMAP_THRESHOLD_BYTES: i32 = 32 << 20;

/// Free memory at the top of the heap kept before it is given back.
pub const TRIM_THRESHOLD_BYTES: i32 = 256 << 20;

/// What [`keep_freed_memory`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocator {
    /// glibc's allocator now keeps freed memory (both settings taken).
    Tuned,
    /// glibc refused a setting; it runs with its defaults.
    Refused,
    /// Not glibc: nothing to do.
    Untouched,
}

/// Makes the process allocator keep memory between cycles (see the crate
/// docs). Call once, first thing in `main`, before other threads start.
pub fn keep_freed_memory() -> Allocator {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` only changes two of glibc's allocator
        // parameters; it is called before the binary starts other threads
        // (documented above), and both values are within glibc's ranges.
        let ok = unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
        };
        if ok {
            Allocator::Tuned
        } else {
            Allocator::Refused
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        Allocator::Untouched
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_takes_both_settings() {
        let got = keep_freed_memory();
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert_eq!(got, Allocator::Tuned);
        } else {
            assert_eq!(got, Allocator::Untouched);
        }
    }

    #[test]
    fn a_large_block_freed_and_taken_again_costs_no_new_pages() {
        // The point of the setting, checked on the process itself: after
        // a 16 MiB block is freed, taking one again touches pages the
        // process already has. Minor page faults are read from getrusage.
        if !cfg!(all(target_os = "linux", target_env = "gnu")) {
            eprintln!("SKIPPED: the setting exists on glibc only");
            return;
        }
        assert_eq!(keep_freed_memory(), Allocator::Tuned);
        let touch = || {
            let mut v = vec![0u8; 16 << 20];
            for i in (0..v.len()).step_by(4096) {
                v[i] = 1;
            }
            std::hint::black_box(&v);
        };
        touch();
        let before = minor_faults();
        touch();
        let after = minor_faults();
        // 16 MiB is 4,096 pages; a few faults from elsewhere are allowed.
        assert!(
            after - before < 256,
            "{} minor faults for a block taken again",
            after - before
        );
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn minor_faults() -> i64 {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage fills the struct it is given.
        let usage = unsafe {
            libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
            usage.assume_init()
        };
        usage.ru_minflt
    }

    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    fn minor_faults() -> i64 {
        0
    }
}
