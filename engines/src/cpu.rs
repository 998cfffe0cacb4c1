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

/// The x86 features that decide which u8·s8 GEMM kernel ONNX Runtime's MLAS runs for `MatMulInteger`
/// (`core/mlas/lib/platform.cpp`: AVX2 base, replaced by the AVX-VNNI kernel, by the AVX-512 core kernel where
/// AVX-512 F/BW/DQ/VL are usable, and by the AVX-512 VNNI kernel on top of those).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct X86Int8Features {
    /// AVX-512 F, BW, DQ and VL, enabled by the OS.
    pub avx512_core: bool,
    pub avx512_vnni: bool,
    pub avx_vnni: bool,
}

impl X86Int8Features {
    /// Whether the u8·s8 kernel MLAS picks for these features sums its products exactly. The VNNI kernels
    /// (`vpdpbusd`) add four u8·s8 products straight into int32; the AVX2 and AVX-512 core kernels add pairs of
    /// them in saturating int16 (`vpmaddubsw`), which full-range int8 weights overflow. AMX CPUs (whose u8·s8
    /// tiles are exact too) all have AVX-512 VNNI, so they answer yes here without AMX being asked about.
    pub fn u8s8_gemm_is_exact(&self) -> bool {
        if self.avx512_core {
            self.avx512_vnni
        } else {
            self.avx_vnni
        }
    }

    /// This CPU's features (CPUID and the OS's saved state, as MLAS reads them).
    #[cfg(target_arch = "x86_64")]
    pub fn detect() -> Self {
        let core = std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl");
        X86Int8Features {
            avx512_core: core,
            avx512_vnni: std::arch::is_x86_feature_detected!("avx512vnni"),
            avx_vnni: std::arch::is_x86_feature_detected!("avxvnni"),
        }
    }
}

/// Environment variable that makes every int8 CPU session ask for ONNX Runtime's u8·u8 GEMM
/// (`session.x64quantprecision`) even where the u8·s8 one is exact (`1`); any other value or unset: only where
/// it is needed ([`int8_needs_u8u8_gemm`]).
pub const INT8_U8U8_ENV: &str = "TOTOC_INT8_U8U8";

/// Whether int8 sessions on this CPU must ask ONNX Runtime for its exact u8·u8 GEMM: on x86 CPUs whose u8·s8
/// kernel saturates ([`X86Int8Features::u8s8_gemm_is_exact`]), or when [`INT8_U8U8_ENV`] is `1`. Not on VNNI
/// CPUs: there the u8·u8 path gives the same bits (tested: `engines/tests/int8_gemm.rs`) and gives up the VNNI
/// and AMX kernels (313m Toto 2.0 int8 single pass 44 → 31 ms on an AMD EPYC with AVX-512 VNNI). Never off
/// x86, where ONNX Runtime compiles the setting out.
pub fn int8_needs_u8u8_gemm() -> bool {
    static NEEDS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *NEEDS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::env::var(INT8_U8U8_ENV).is_ok_and(|v| v.trim() == "1")
                || !X86Int8Features::detect().u8s8_gemm_is_exact()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
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

    /// MLAS's u8·s8 kernel choice: VNNI kernels are exact, AVX2 and AVX-512 core kernels saturate; with AVX-512
    /// core usable, only AVX-512 VNNI counts (its core kernel replaces the AVX-VNNI one).
    #[test]
    fn u8s8_gemm_is_exact_only_with_the_vnni_kernel_mlas_picks() {
        let f = |avx512_core, avx512_vnni, avx_vnni| X86Int8Features { avx512_core, avx512_vnni, avx_vnni };
        assert!(!f(false, false, false).u8s8_gemm_is_exact(), "AVX2 only");
        assert!(f(false, false, true).u8s8_gemm_is_exact(), "AVX-VNNI (Alder Lake)");
        assert!(!f(true, false, false).u8s8_gemm_is_exact(), "AVX-512 without VNNI (Skylake-SP)");
        assert!(!f(true, false, true).u8s8_gemm_is_exact(), "AVX-512 core replaces the AVX-VNNI kernel");
        assert!(f(true, true, false).u8s8_gemm_is_exact(), "AVX-512 VNNI (Cascade Lake, Zen 4)");
        assert!(f(true, true, true).u8s8_gemm_is_exact(), "Sapphire Rapids, Zen 5");
    }
}
