//! `cargo xtask bench` (README's command table): ratios measured in one run,
//! never asserted in tests. First what a user waits for (one `rextio
//! generate`, ours against the published 0.1.0); then the generator, timed
//! in-process, warm; then diagnostics (the isolated import plus first
//! preflight, the warm preflight, the probe's run time).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::generate::inputs::{Inputs, DRIVER_SYMBOLS_PATH};
use crate::generate::render;
use crate::generate::symbols::SymbolList;
use crate::paths::repo_root;
use crate::process::run;
use crate::python_env::{self, CPython, Venv};
use crate::{native, setup, Result};

const WARM_RUNS: usize = 15;
const TARGET_FOR_FULL_API: Duration = Duration::from_millis(100);

pub fn command() -> Result<()> {
    // Timing unoptimized code says nothing about the generator: a debug
    // xtask re-runs the bench from an optimized build of itself.
    if cfg!(debug_assertions) {
        println!("bench: measuring an optimized build of xtask (cargo run --release)");
        let release = ["run", "--quiet", "--locked", "--release", "-p", "xtask"];
        return run(crate::native::cargo().args(release).args(["--", "bench"]));
    }
    let mut failures = Vec::new();
    let mut part = |name: &str, outcome: Result<()>| {
        if let Err(error) = outcome {
            println!("{name}: not available: {error}");
            failures.push(name.to_string());
        }
    };
    // The binaries, the wheel in the Core environments, test-paths.json.
    setup::setup()?;
    part("rextio generate", bench_rextio_generate());
    part("generate", bench_generate());
    part("verify-determinism", bench_determinism());
    part("preflight (diagnostics)", bench_preflight());
    part("probe (diagnostics)", bench_probe());
    if failures.is_empty() {
        return Ok(());
    }
    Err(format!("bench parts failed: {}", failures.join(", ")))
}

/// The published 0.1.0 beside Core `NEWEST_CORE` and the companion plugins
/// (target/venv-reference-0.1.0); returns its python.
fn reference_python() -> Result<std::path::PathBuf> {
    let reference = Venv::Reference.ensure()?;
    python_env::install_pinned(&reference, "downstream-sdists", "downstream", "--no-binary")?;
    python_env::install_pinned(&reference, "bench-reference", "reference", "--only-binary")?;
    Ok(reference)
}

/// One `rextio generate` of the README's rextio-torch project: ours (the
/// newest Core on 3.11, as `setup` installed it) against the published 0.1.0
/// (tests/downstream/generate_bench.py).
fn bench_rextio_generate() -> Result<()> {
    let reference = reference_python()?;
    run(Command::new(Venv::Newest(CPython::V3_11).program("python"))
        .current_dir(repo_root())
        .env_remove("PYTHONPATH")
        .arg("tests/downstream/generate_bench.py")
        .arg(reference))
}

/// Diagnostics: preflight latency versus the probe spawn floor, warm and cold
/// (a fresh interpreter's import plus first preflight, ours and 0.1.0, on
/// the same Core; tests/python/preflight_bench.py).
fn bench_preflight() -> Result<()> {
    let reference = reference_python()?;
    run(Command::new(Venv::Newest(CPython::V3_11).program("python"))
        .current_dir(repo_root())
        .env_remove("PYTHONPATH")
        .arg("tests/python/preflight_bench.py")
        .arg(reference))
}

/// Diagnostics: probe run time (tests/e2e/probe_bench.py) of the release
/// build, with no driver and beside the simulated one, against the spawn floor.
fn bench_probe() -> Result<()> {
    let native = native::build(true)?;
    run(Command::new(Venv::Floor.program("python"))
        .current_dir(repo_root())
        .arg("tests/e2e/probe_bench.py")
        .arg(&native.probe)
        .arg(&native.sim_driver))
}

/// The median of `WARM_RUNS` timed runs of `work`, after one warm-up run.
fn time_warm(mut work: impl FnMut() -> Result<()>) -> Result<Duration> {
    work()?;
    let mut samples = Vec::with_capacity(WARM_RUNS);
    for _ in 0..WARM_RUNS {
        let start = Instant::now();
        work()?;
        samples.push(start.elapsed());
    }
    samples.sort();
    Ok(samples[WARM_RUNS / 2])
}

fn bench_generate() -> Result<()> {
    let root = repo_root();
    let ms = time_warm(|| render(&Inputs::read(&root)?).map(|_| ()))?.as_secs_f64() * 1e3;
    println!(
        "generate (read inputs + render every output, in memory, one thread): \
         median {ms:.2} ms of {WARM_RUNS}"
    );
    let inputs = Inputs::read(&root)?;
    let (full, count) = crate::headers::with_full_api(&inputs, &full_api_header(&inputs)?)?;
    let elapsed = time_warm(|| render(&full).map(|_| ()))?;
    let (ms, target) = (elapsed.as_secs_f64() * 1e3, TARGET_FOR_FULL_API.as_millis());
    let per_export = ms * 1e3 / count as f64;
    println!(
        "generate, the whole CUDA 13 driver API ({count} exports of cuda.h): median {ms:.2} ms \
         of {WARM_RUNS}, one thread ({per_export:.1} us per export; target {target} ms)"
    );
    if elapsed > TARGET_FOR_FULL_API {
        return Err(format!(
            "the full driver API took {ms:.1} ms, over the {target} ms target"
        ));
    }
    Ok(())
}

/// The text of `cuda.h` of the list's 13.x header set, fetched into
/// `target/nvidia-headers/` as the ABI check does.
fn full_api_header(inputs: &Inputs) -> Result<String> {
    let symbols = SymbolList::parse(inputs.get(DRIVER_SYMBOLS_PATH)?)?;
    let set = symbols
        .header_sets
        .values()
        .find(|set| set.version.starts_with("13."))
        .ok_or_else(|| format!("{DRIVER_SYMBOLS_PATH}: no 13.x header set"))?;
    let path = crate::headers::fetch_headers(set)?.join("cuda.h");
    std::fs::read_to_string(&path).map_err(crate::paths::at(&path))
}

fn bench_determinism() -> Result<()> {
    let start = Instant::now();
    crate::determinism::verify()?;
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    println!("verify-determinism: {elapsed:.0} ms (one run)");
    Ok(())
}
