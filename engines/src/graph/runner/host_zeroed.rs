//! Host I/O buffers that hold zeros without being resident.
//!
//! `ort` writes zeros over every byte of each tensor it allocates (ONNX Runtime's allocator does not clear), so a
//! bound buffer counts in the RSS in full from the moment its graph loads. A graph's KV caches are sized for its
//! rows × the whole window, most of which a call never writes: a server of a 25M-parameter candle model warms a
//! decode graph of every row count (1 … 64 rows, 18 MiB of caches a row), 2.3 GB of zeros held from start-up.
//! Giving the buffer's whole pages back (`madvise(MADV_DONTNEED)` on private anonymous memory, as glibc's own
//! `malloc_trim` does) keeps their contents zeros — the kernel maps a zero page again on the next read or write —
//! while only the pages a graph writes come back into the RSS.

use ort::value::DynTensor;

/// Buffers below this are left as they are (a page or two is not worth a system call).
const MIN_BYTES: usize = 1 << 20;

/// Gives back the whole pages of `t`, a freshly zeroed host tensor of this runner's own (not pinned, not a view of
/// another's buffer): they read as zeros afterwards, as before. Returns the bytes given back.
pub(super) fn forget_zero_pages(t: &mut DynTensor) -> usize {
    let len = t.size().unwrap_or(0);
    let ptr = t.data_ptr_mut().cast::<u8>();
    if ptr.is_null() || !t.memory_info().is_cpu_accessible() {
        return 0;
    }
    // SAFETY: a host tensor of `len` bytes owned by `t`, borrowed mutably.
    release_zeroed(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// Gives back the whole pages within `zeros` (which holds only zeros, in anonymous memory of this process's
/// allocator); they read as zeros afterwards. Returns the bytes given back.
fn release_zeroed(zeros: &mut [u8]) -> usize {
    if zeros.len() < MIN_BYTES {
        return 0;
    }
    release_pages(zeros.as_mut_ptr(), zeros.len())
}

#[cfg(target_os = "linux")]
fn page_size() -> usize {
    // SAFETY: sysconf takes no pointers.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(1)
}

#[cfg(target_os = "linux")]
fn release_pages(ptr: *mut u8, len: usize) -> usize {
    let page = page_size();
    let start = (ptr as usize).next_multiple_of(page);
    let end = (ptr as usize + len) / page * page;
    if end <= start {
        return 0;
    }
    // SAFETY: [start, end) lies within the caller's buffer, whole pages of anonymous memory from the process's
    // allocator (a heap chunk's header precedes the buffer, the next chunk's follows it); MADV_DONTNEED drops
    // them and they read as zeros again, which is what the buffer held.
    let rc = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
    if rc == 0 {
        end - start
    } else {
        0
    }
}

#[cfg(not(target_os = "linux"))]
fn release_pages(_ptr: *mut u8, _len: usize) -> usize {
    0
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Pages of `v` resident in memory (`mincore`).
    fn resident_pages(v: &[u8]) -> usize {
        let page = page_size();
        let start = (v.as_ptr() as usize) / page * page;
        let end = (v.as_ptr() as usize + v.len()).next_multiple_of(page);
        let mut flags = vec![0u8; (end - start) / page];
        // SAFETY: the range covers `v`'s pages, all mapped; `flags` has one byte per page.
        let rc = unsafe { libc::mincore(start as *mut libc::c_void, end - start, flags.as_mut_ptr()) };
        assert_eq!(rc, 0);
        flags.iter().filter(|&&f| f & 1 == 1).count()
    }

    #[test]
    fn released_zeros_leave_the_rss_and_still_read_as_zeros() {
        let n = 8 << 20;
        let mut v = vec![1u8; n];
        v.fill(0);
        assert!(resident_pages(&v) >= n / page_size());
        let given = release_zeroed(&mut v);
        assert!(given >= n - 2 * page_size(), "gave back {given} of {n} bytes");
        assert!(resident_pages(&v) <= 2, "{} pages still resident", resident_pages(&v));
        assert!(v.iter().all(|&b| b == 0));
        v[n / 2] = 7;
        assert_eq!((v[n / 2], v.iter().filter(|&&b| b != 0).count()), (7, 1));
        // below the floor: left alone
        let mut small = vec![0u8; MIN_BYTES - 1];
        assert_eq!(release_zeroed(&mut small), 0);
    }
}
