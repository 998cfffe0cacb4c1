//! The memory budget of an engine: how many bytes its weights and loaded buckets may hold together.
//!
//! A bucket's buffers (mostly KV caches, see `exporter::bucket::Bucket::memory_bytes`) are allocated when it is
//! first used. The engine keeps the weights plus every loaded bucket within its budget: it evicts idle buckets
//! before loading another, plans larger calls as several passes on buckets that fit, and fails a call that needs
//! more than the whole budget with an error saying so — so a large request is slower or refused, never an OOM
//! kill. `build-engine` drops buckets that could never fit the budget it is given.
//!
//! The default budget is 80% of this process's memory limit: the container's (cgroup v2 `memory.max`, cgroup v1
//! `memory.limit_in_bytes`) when one is set, else the machine's (`MemTotal`). The rest is left for the host side
//! (requests, responses, sample paths) and ONNX Runtime's own allocations.

use std::path::Path;

use crate::error::{Error, Result};

/// Share of the memory limit the default budget takes.
const DEFAULT_SHARE: f64 = 0.8;

/// Gives the heap's free pages back to the system (glibc's `malloc_trim`; nothing elsewhere). A graph run without
/// ONNX Runtime's arena frees its activations after the run, but glibc's heap keeps freed blocks below its mmap
/// threshold (which rises to 32 MB after the first large free) in the process's RSS for reuse: called after each
/// run of the graphs that run without the arena, so their activations do not sit under the next ones' (8 series of
/// 392 + 120 on a 25M-parameter model: peak RSS 450 → 445 MB; after each prefill and recompute run, 388 → 343 MB,
/// and 400 + 120, whose full-window recomputes grew the heap run by run, 267 → 209 MB). Costs the page faults of
/// reusing that memory in the next run. Fixing the mmap threshold instead (`mallopt`) saved as much but maps and
/// faults every large activation afresh inside a run too: 400 + 120 took ~15% longer.
pub fn release_free_heap() {
    RELEASES.with(|n| n.set(n.get() + 1));
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it only returns free heap memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

thread_local! {
    /// Calls of [`release_free_heap`] so far on this thread (tests check where an engine call releases: a call
    /// runs on its caller's thread).
    static RELEASES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many times [`release_free_heap`] has run on this thread.
pub fn heap_releases() -> usize {
    RELEASES.with(std::cell::Cell::get)
}

/// The default budget in bytes (see the module docs).
pub fn default_budget() -> u64 {
    (memory_limit() as f64 * DEFAULT_SHARE) as u64
}

/// This process's memory limit: the cgroup limit if one is set, else the machine's memory (8 GiB if neither can
/// be read).
pub fn memory_limit() -> u64 {
    let machine = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| meminfo_total(&t));
    let cgroup = cgroup_limit(Path::new("/sys/fs/cgroup"));
    match (cgroup, machine) {
        (Some(c), Some(m)) => c.min(m),
        (Some(c), None) => c,
        (None, Some(m)) => m,
        (None, None) => 8 << 30,
    }
}

/// `MemTotal` of `/proc/meminfo`, bytes.
fn meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The memory limit of the cgroup mounted at `root` (v2 `memory.max`, else v1 `memory/memory.limit_in_bytes`);
/// `None` when unlimited or not readable.
fn cgroup_limit(root: &Path) -> Option<u64> {
    let v2 = std::fs::read_to_string(root.join("memory.max")).ok();
    let v1 = || std::fs::read_to_string(root.join("memory/memory.limit_in_bytes")).ok();
    let text = v2.or_else(v1)?;
    let text = text.trim();
    if text == "max" {
        return None;
    }
    let bytes: u64 = text.parse().ok()?;
    // cgroup v1 reports "unlimited" as a huge page-aligned number.
    (bytes < 1 << 60).then_some(bytes)
}

/// Parses a size: bytes (`1073741824`) or a number with a unit (`8G`, `512MiB`, `1.5GB`, `300m`); units are
/// powers of 1024, with or without `i`/`B`.
pub fn parse_size(text: &str) -> Result<u64> {
    let bad = || Error::Config {
        message: format!("memory size {text:?}: give bytes or a number with a unit, e.g. 8G, 512M, 1.5GiB"),
    };
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| bad())?;
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit.trim_end_matches('b').trim_end_matches('i');
    let scale: u64 = match unit {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(bad()),
    };
    if !value.is_finite() || value <= 0.0 {
        return Err(bad());
    }
    Ok((value * scale as f64) as u64)
}

/// `1.2 GB`-style formatting for messages.
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else {
        format!("{:.0} kB", b / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("1024").unwrap(), 1024);
        assert_eq!(parse_size("8G").unwrap(), 8 << 30);
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("1.5GB").unwrap(), 3 << 29);
        assert_eq!(parse_size(" 300m ").unwrap(), 300 << 20);
        for bad in ["", "G", "-1G", "8X", "0"] {
            assert!(parse_size(bad).unwrap_err().to_string().contains("e.g. 8G"), "{bad}");
        }
    }

    #[test]
    fn cgroup_limits_v2_v1_and_unlimited() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(cgroup_limit(d.path()), None);
        std::fs::write(d.path().join("memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_limit(d.path()), None);
        std::fs::write(d.path().join("memory.max"), "2147483648\n").unwrap();
        assert_eq!(cgroup_limit(d.path()), Some(2 << 30));
        let v1 = tempfile::tempdir().unwrap();
        std::fs::create_dir(v1.path().join("memory")).unwrap();
        std::fs::write(v1.path().join("memory/memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(cgroup_limit(v1.path()), None);
        std::fs::write(v1.path().join("memory/memory.limit_in_bytes"), "1073741824\n").unwrap();
        assert_eq!(cgroup_limit(v1.path()), Some(1 << 30));
    }

    #[test]
    fn meminfo_and_default() {
        assert_eq!(meminfo_total("MemTotal:       24000000 kB\nMemFree: 1 kB\n"), Some(24_000_000 * 1024));
        assert!(default_budget() > 0 && default_budget() < memory_limit());
    }
}
