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

/// Buffers below this are zeroed by writing (a page or two is not worth a system call).
const MIN_BYTES: usize = 1 << 20;

/// Sets every byte of `t`, a host tensor of this runner's own (not pinned, not a view of another's buffer), to
/// zero, its whole pages by giving them back (so they are not resident until written), the rest by writing.
/// Returns the bytes given back.
pub(super) fn zero_unresident(t: &mut DynTensor) -> usize {
    let len = t.size().unwrap_or(0);
    let ptr = t.data_ptr_mut().cast::<u8>();
    if ptr.is_null() || !t.memory_info().is_cpu_accessible() {
        return 0;
    }
    // SAFETY: a host tensor of `len` bytes owned by `t`, borrowed mutably.
    zero_bytes(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// Zeroes `bytes` (anonymous memory of this process's allocator): its whole pages given back, the partial pages
/// at either end written. Returns the bytes given back.
pub(super) fn zero_bytes(bytes: &mut [u8]) -> usize {
    let (start, end) = whole_pages(bytes);
    if bytes.len() < MIN_BYTES || end <= start {
        bytes.fill(0);
        return 0;
    }
    bytes[..start].fill(0);
    bytes[end..].fill(0);
    let given = release_pages(&mut bytes[start..end]);
    if given == 0 {
        bytes[start..end].fill(0);
    }
    given
}

/// The offsets within `bytes` of its first and past its last whole page (`end <= start`: none).
fn whole_pages(bytes: &[u8]) -> (usize, usize) {
    let (page, at) = (page_size(), bytes.as_ptr() as usize);
    let start = at.next_multiple_of(page) - at;
    let end = ((at + bytes.len()) / page * page).saturating_sub(at);
    (start, end)
}

#[cfg(target_os = "linux")]
fn page_size() -> usize {
    // SAFETY: sysconf takes no pointers.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(1)
}

#[cfg(not(target_os = "linux"))]
fn page_size() -> usize {
    4096
}

/// Gives back `pages` (whole pages of anonymous memory): they read as zeros afterwards. Returns the bytes given
/// back (0: not given back, contents unchanged).
#[cfg(target_os = "linux")]
fn release_pages(pages: &mut [u8]) -> usize {
    // SAFETY: `pages` are whole pages of the caller's buffer, anonymous memory from the process's allocator (a heap
    // chunk's header precedes the buffer, the next chunk's follows it); MADV_DONTNEED drops them and they read as
    // zeros again.
    let rc = unsafe { libc::madvise(pages.as_mut_ptr().cast(), pages.len(), libc::MADV_DONTNEED) };
    if rc == 0 {
        pages.len()
    } else {
        0
    }
}

#[cfg(not(target_os = "linux"))]
fn release_pages(_pages: &mut [u8]) -> usize {
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
    fn a_zeroed_buffer_reads_zeros_and_is_resident_only_where_written() {
        let n = 8 << 20;
        let mut v = vec![1u8; n];
        assert!(resident_pages(&v) >= n / page_size());
        let given = zero_bytes(&mut v);
        assert!(given >= n - 2 * page_size(), "gave back {given} of {n} bytes");
        assert!(resident_pages(&v) <= 2, "{} pages still resident", resident_pages(&v));
        assert!(v.iter().all(|&b| b == 0), "every byte zero, the partial pages at the ends too");
        v[n / 2] = 7;
        assert_eq!((v[n / 2], v.iter().filter(|&&b| b != 0).count()), (7, 1));
        // below the floor, and a slice off page boundaries: zeroed by writing
        let mut small = vec![1u8; MIN_BYTES - 1];
        assert_eq!(zero_bytes(&mut small), 0);
        assert!(small.iter().all(|&b| b == 0));
        let mut odd = vec![1u8; 3 << 20];
        let given = zero_bytes(&mut odd[5..(3 << 20) - 7]);
        assert!(given > 0);
        assert!(odd[5..(3 << 20) - 7].iter().all(|&b| b == 0));
        assert_eq!((odd[4], odd[(3 << 20) - 7]), (1, 1), "nothing outside the slice touched");
    }
}
