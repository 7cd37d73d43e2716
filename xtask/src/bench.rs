//! `cargo xtask bench`: ratios measured in one run, never asserted in tests.
//!
//! Times the generator in-process (warm, median of several runs), one
//! verify-determinism, and the generator on synthetic symbol lists of 15,
//! 150 and 1,500 entries; then the Python and probe benches of the other parts.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::generate::inputs::{Inputs, DRIVER_SYMBOLS_PATH};
use crate::generate::{render_on, Threads};
use crate::paths::repo_root;
use crate::process::run;
use crate::Result;

const WARM_RUNS: usize = 15;
const SYNTHETIC_SIZES: [usize; 3] = [15, 150, 1_500];
const TARGET_FOR_LARGEST: Duration = Duration::from_millis(100);

/// Set in the optimized child so it does not re-run itself.
const OPTIMIZED_CHILD: &str = "XTASK_BENCH_OPTIMIZED";

pub fn command(args: &[String]) -> Result<()> {
    crate::no_arguments("bench", args);
    // Timing unoptimized syn/prettyplease says nothing about the generator:
    // a debug xtask re-runs the bench from an optimized build of itself.
    if cfg!(debug_assertions) && std::env::var_os(OPTIMIZED_CHILD).is_none() {
        println!("bench: measuring an optimized build of xtask (cargo run --release)");
        return run(
            Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .current_dir(repo_root())
                .env(OPTIMIZED_CHILD, "1")
                .args([
                    "run",
                    "--quiet",
                    "--locked",
                    "--release",
                    "--package",
                    "xtask",
                    "--",
                ])
                .arg("bench"),
        );
    }
    let mut failures = Vec::new();
    let mut part = |name: &str, outcome: Result<()>| {
        if let Err(error) = outcome {
            println!("{name}: not available: {error}");
            failures.push(name.to_string());
        }
    };
    part("generate", bench_generate());
    part("verify-determinism", bench_determinism());
    part("python", crate::python_env::bench());
    part("probe", crate::native::bench());
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("bench parts failed: {}", failures.join(", ")))
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
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
    Ok(median(samples))
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn bench_generate() -> Result<()> {
    let root = repo_root();
    let read_and_render = time_warm(|| render_on(&Inputs::read(&root)?, Threads::Two).map(|_| ()))?;
    println!(
        "generate (read inputs + render every output, in memory): median {:.2} ms of {WARM_RUNS}",
        millis(read_and_render)
    );

    let inputs = Inputs::read(&root)?;
    let mut per_size = Vec::new();
    for size in SYNTHETIC_SIZES {
        let synthetic = with_synthetic_symbols(&inputs, size)?;
        // Interleaved, so load drift hits both alike.
        let (mut one, mut two) = (Vec::new(), Vec::new());
        render_on(&synthetic, Threads::Two)?;
        for _ in 0..WARM_RUNS {
            for (threads, samples) in [(Threads::One, &mut one), (Threads::Two, &mut two)] {
                let start = Instant::now();
                render_on(&synthetic, threads)?;
                samples.push(start.elapsed());
            }
        }
        let (one, elapsed) = (median(one), median(two));
        let per_entry = elapsed.as_secs_f64() * 1e6 / size as f64;
        println!(
            "generate, {size:>5} symbols: median {:>8.2} ms, {per_entry:>7.1} us per symbol \
             (one thread: {:.2} ms, {:.2}x)",
            millis(elapsed),
            millis(one),
            one.as_secs_f64() / elapsed.as_secs_f64()
        );
        per_size.push((size, elapsed));
    }
    for pair in per_size.windows(2) {
        let ((small, small_time), (large, large_time)) = (pair[0], pair[1]);
        println!(
            "generate, {large} vs {small} symbols: {:.1}x the time for {}x the symbols",
            large_time.as_secs_f64() / small_time.as_secs_f64(),
            large / small
        );
    }
    let (largest, largest_time) = per_size[per_size.len() - 1];
    if largest_time > TARGET_FOR_LARGEST {
        return Err(format!(
            "{largest} symbols took {:.1} ms, over the {} ms target",
            millis(largest_time),
            TARGET_FOR_LARGEST.as_millis()
        ));
    }
    Ok(())
}

/// A copy of `inputs` whose symbol list holds `count` entries, made by
/// renaming the real entries (`cuInit` → `cuInit_s16`, ...).
pub fn with_synthetic_symbols(inputs: &Inputs, count: usize) -> Result<Inputs> {
    let mut list: Value = serde_json::from_slice(inputs.get(DRIVER_SYMBOLS_PATH)?)
        .map_err(|error| format!("{DRIVER_SYMBOLS_PATH}: {error}"))?;
    let real = list["symbols"]
        .as_array()
        .cloned()
        .ok_or_else(|| format!("{DRIVER_SYMBOLS_PATH}: no symbols list"))?;
    let synthetic: Vec<Value> = (0..count)
        .map(|index| {
            let mut entry = real[index % real.len()].clone();
            if index >= real.len() {
                // `cuCtxCreate_v2` -> api `cuCtxCreate_s16`, export `cuCtxCreate_s16_v2`.
                let api = entry["api"].as_str().unwrap_or("cu").to_string();
                let export = entry["export"].as_str().unwrap_or("cu").to_string();
                let version = export.strip_prefix(&api).unwrap_or("");
                let renamed = format!("{api}_s{index}");
                entry["export"] = Value::String(format!("{renamed}{version}"));
                entry["api"] = Value::String(renamed);
            }
            entry
        })
        .collect();
    list["symbols"] = Value::Array(synthetic);
    let mut copy = inputs.clone();
    copy.files.insert(
        DRIVER_SYMBOLS_PATH.to_string(),
        serde_json::to_vec_pretty(&list).map_err(|error| error.to_string())?,
    );
    Ok(copy)
}

fn bench_determinism() -> Result<()> {
    let start = Instant::now();
    crate::determinism::verify()?;
    println!(
        "verify-determinism: {:.0} ms (one run)",
        millis(start.elapsed())
    );
    Ok(())
}
