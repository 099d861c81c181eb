//! `ferroflow info`: what this build is and what it finds on this machine.
use anyhow::Result;
use clap::Args;
use serde_json::json;

/// Print the version, build features, CPU features, threads and JPEG codec.
///
/// The version, the build's enabled cargo features and profile, the CPU features the kernels can
/// use on this machine (SSE2, AVX2, AVX-512F, FMA), the default thread count (one per core, as
/// `--inter-op-threads 0` and `--intra-op-threads 0` mean) and the JPEG codec's build; with
/// --json, the same as one JSON object (docs/CLI-JSON.md). Include it in bug reports.
#[derive(Args)]
pub struct InfoArgs {
    /// Print JSON (`{"version", "features", "profile", "target", "cpu_features", "threads",
    /// "jpeg"}`; see docs/CLI-JSON.md).
    #[arg(long)]
    json: bool,
}

/// The cargo features this binary was built with (the library's: `jpeg`, `mpi`).
fn features() -> Vec<&'static str> {
    ferroflow::FEATURES.to_vec()
}

/// The CPU features the kernels look for, each with whether this machine has it.
fn cpu_features() -> Vec<(&'static str, bool)> {
    #[cfg(target_arch = "x86_64")]
    {
        vec![
            ("sse2", std::arch::is_x86_feature_detected!("sse2")),
            ("avx2", std::arch::is_x86_feature_detected!("avx2")),
            ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
            ("fma", std::arch::is_x86_feature_detected!("fma")),
        ]
    }
    #[cfg(target_arch = "aarch64")]
    {
        vec![("neon", std::arch::is_aarch64_feature_detected!("neon"))]
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        vec![]
    }
}

/// The JPEG codec's build: libjpeg-turbo's version and which SIMD paths its decoder takes on
/// this machine (the codec's own report, without its `jpeg: ` label).
fn jpeg_report() -> String {
    let report = ferroflow::codec::simd_report();
    report.strip_prefix("jpeg: ").map(str::to_string).unwrap_or(report)
}

pub fn run(args: InfoArgs) -> Result<()> {
    let version = env!("CARGO_PKG_VERSION");
    let features = features();
    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    let target = format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS);
    let cpu = cpu_features();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jpeg = jpeg_report();
    if args.json {
        let cpu: serde_json::Map<String, serde_json::Value> =
            cpu.iter().map(|(name, has)| (name.to_string(), json!(has))).collect();
        return super::print_json(&json!({
            "version": version,
            "features": features,
            "profile": profile,
            "target": target,
            "cpu_features": cpu,
            "threads": threads,
            "jpeg": jpeg,
        }));
    }
    out!("ferroflow {version}");
    out!("features:     {}", if features.is_empty() { "none".to_string() } else { features.join(", ") });
    out!("profile:      {profile} ({target})");
    let detected: Vec<String> = cpu.iter().map(|(n, has)| format!("{n} {}", if *has { "yes" } else { "no" })).collect();
    out!("cpu features: {}", if detected.is_empty() { "none checked".to_string() } else { detected.join(", ") });
    out!("threads:      {threads} (one per core: the default of --inter-op-threads and --intra-op-threads)");
    out!("jpeg:         {jpeg}");
    Ok(())
}
