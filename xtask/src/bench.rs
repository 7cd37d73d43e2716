//! `cargo xtask bench` (docs/maintainers.md's commands): ratios measured in one run,
//! never asserted in tests. First what a user waits for (one `rextio
//! generate`, ours against the published 0.1.0); then diagnostics (the
//! generator timed in-process, warm; the isolated import plus first
//! preflight, the warm preflight, the probe's run time).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::generate::inputs::Inputs;
use crate::generate::render;
use crate::paths::repo_root;
use crate::process::run;
use crate::python_env::{self, CPython, Venv};
use crate::{native, setup, Result};

const WARM_RUNS: usize = 15;

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

/// Diagnostics: the generator, timed in-process, warm.
fn bench_generate() -> Result<()> {
    let root = repo_root();
    let ms = time_warm(|| render(&Inputs::read(&root)?).map(|_| ()))?.as_secs_f64() * 1e3;
    println!(
        "generate (read inputs + render every output, in memory, one thread): \
         median {ms:.2} ms of {WARM_RUNS}"
    );
    Ok(())
}

fn bench_determinism() -> Result<()> {
    let start = Instant::now();
    crate::determinism::verify()?;
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    println!("verify-determinism: {elapsed:.0} ms (one run)");
    Ok(())
}
