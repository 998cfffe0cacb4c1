//! What CPU this process runs on, read from `/proc/cpuinfo`: its physical cores (the default thread count) and
//! the model and SIMD flags that decide which ONNX Runtime kernels run (benchmarks and test logs print them).
//! The bottom layer: the runtime, the backends and `totoc doctor` read it, it reads nothing of theirs.

/// Physical cores usable by this process: the logical CPUs it may run on (affinity/cgroup aware, via
/// `available_parallelism`) divided by the SMT ratio from `/proc/cpuinfo` (`siblings / cpu cores`).
pub fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    let smt = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| smt_ratio(&t)).unwrap_or(1);
    (logical / smt).max(1)
}

fn smt_ratio(cpuinfo: &str) -> Option<usize> {
    let field = |name: &str| -> Option<usize> { cpuinfo_value(cpuinfo, name)?.parse().ok() };
    let (siblings, cores) = (field("siblings")?, field("cpu cores")?);
    (cores > 0 && siblings >= cores).then(|| siblings / cores)
}

/// This machine's CPU as benchmarks record it: the model name and the SIMD features that decide which MLAS kernels
/// run (fp32 GEMM width, and whether int8 GEMMs have dot-product instructions), e.g.
/// `AMD EPYC (avx2 avx512f avx512_vnni)`. `None` where `/proc/cpuinfo` is unreadable.
pub fn cpu_summary() -> Option<String> {
    std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| cpu_summary_of(&t))
}

/// The kernel-relevant flags, in this order (x86 and Arm names; absent ones are left out).
const CPU_FLAGS: [&str; 8] =
    ["avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8", "asimddp", "i8mm"];

/// The value of the first `key : value` line of `/proc/cpuinfo` text (the first CPU's), trimmed.
fn cpuinfo_value<'a>(cpuinfo: &'a str, key: &str) -> Option<&'a str> {
    cpuinfo.lines().filter_map(|l| l.split_once(':')).find(|(k, _)| k.trim() == key).map(|(_, v)| v.trim())
}

fn cpu_summary_of(cpuinfo: &str) -> Option<String> {
    let value = |key: &str| cpuinfo_value(cpuinfo, key);
    let model = value("model name").or_else(|| value("Model name")).unwrap_or("unknown CPU");
    let flags: Vec<&str> =
        value("flags").or_else(|| value("Features")).unwrap_or("").split_whitespace().collect();
    let have: Vec<&str> = CPU_FLAGS.into_iter().filter(|f| flags.contains(f)).collect();
    (!cpuinfo.trim().is_empty())
        .then(|| format!("{model} ({})", if have.is_empty() { "no AVX2".into() } else { have.join(" ") }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_summary_names_the_model_and_the_kernel_flags() {
        let x86 = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx2 fma avx512f avx512bw avx512_vnni\n";
        assert_eq!(cpu_summary_of(x86).unwrap(), "AMD EPYC (avx2 fma avx512f avx512_vnni)");
        let old = "model name\t: Old Xeon\nflags\t\t: fpu sse sse2\n";
        assert_eq!(cpu_summary_of(old).unwrap(), "Old Xeon (no AVX2)");
        let arm = "processor\t: 0\nFeatures\t: fp asimd asimddp i8mm\n";
        assert_eq!(cpu_summary_of(arm).unwrap(), "unknown CPU (asimddp i8mm)");
        assert_eq!(cpu_summary_of(""), None);
    }

    #[test]
    fn smt_ratio_from_cpuinfo() {
        assert_eq!(smt_ratio("siblings\t: 16\ncpu cores\t: 8\n"), Some(2));
        assert_eq!(smt_ratio("siblings\t: 2\ncpu cores\t: 2\n"), Some(1));
        assert_eq!(smt_ratio("processor: 0\n"), None);
        assert!(physical_cores() >= 1);
    }
}
