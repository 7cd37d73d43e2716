//! `cargo xtask demo`: the whole chain for a newcomer without a GPU.
//!
//! Builds the probe, the smoke, the simulated driver and the wheel, then, in
//! private mount namespaces where the simulated driver sits at a reviewed
//! path: the probe's report, the provider's preflight through Rextio Core,
//! the redacted plan, the lifetime smoke with the driver's call log, and the
//! packaged runtime source built into a sample project. Each step says what
//! it proves and what it does not: no step touches a real GPU.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::native::{self, NativeArtifacts, TWO_DEVICE_CONFIG};
use crate::paths::target_dir;
use crate::{python_env, Result};

const SELECTED_DEVICE: &str = "0";
const SELECTED_SM: &str = "sm_80";
const CALL_LOG: &str = "/usr/local/nvidia/sim/calls.log";

pub fn command(args: &[String]) -> Result<()> {
    crate::no_arguments("demo", args);
    println!("== building the probe, the smoke, the simulated driver and the wheel");
    let native = native::build(false)?;
    let python = python_env::ensure_venv_with_wheel()?;

    probe_on_this_host(&native)?;
    probe_beside_the_simulated_driver(&native)?;
    preflight_through_core(&native, &python)?;
    lifetime_smoke(&native)?;
    runtime_source_in_a_sample_project(&python)?;
    println!("\nDone. Nothing here ran on a GPU: `python -m rextio_device_cuda validate --sm sm_NN` on an");
    println!("NVIDIA host is the step that exercises a real driver (and still certifies nothing).");
    Ok(())
}

fn step(title: &str, proves: &str, does_not_prove: &str) {
    println!("\n== {title}");
    println!("   proves:         {proves}");
    println!("   does not prove: {does_not_prove}");
}

fn probe_on_this_host(native: &NativeArtifacts) -> Result<()> {
    step(
        "1. the probe on this host (no NVIDIA driver here)",
        "with no libcuda.so.1 at any reviewed path the probe still prints one schema-1 report, \
         exits 0 and names the reason",
        "anything about a machine that has a driver",
    );
    let output = Command::new(&native.probe)
        .output()
        .map_err(|error| format!("cannot run the probe: {error}"))?;
    print_json(&output, "probe")
}

fn probe_beside_the_simulated_driver(native: &NativeArtifacts) -> Result<()> {
    step(
        "2. the probe beside the simulated driver (private mount namespace)",
        "the reviewed loader accepts an owner-only image at /usr/local/nvidia/lib64, resolves \
         the inventory symbols and reports every device",
        "that a real NVIDIA driver answers the same way; the devices are simulated",
    );
    let output = native::run_with_simulated_driver(
        &native.sim_driver,
        TWO_DEVICE_CONFIG,
        &[native.probe.as_os_str()],
    )?;
    print_json(&output, "probe")
}

fn preflight_through_core(native: &NativeArtifacts, python: &Path) -> Result<()> {
    step(
        "3. the provider's preflight through Rextio Core, and the redacted plan",
        "the installed wheel's entry point is found by Core, runs the real probe, checks device \
         0 is sm_80 and yields a ready plan whose public form holds no option values or paths",
        "that code built from the plan runs on a GPU (support_claim stays false)",
    );
    let argv: Vec<&OsStr> = vec![
        python.as_os_str(),
        OsStr::new("-m"),
        OsStr::new("rextio_device_cuda"),
        OsStr::new("preflight"),
        OsStr::new("--capability"),
        OsStr::new("cuda-linux-x86_64"),
        OsStr::new("--probe"),
        native.probe.as_os_str(),
        OsStr::new("--device"),
        OsStr::new(SELECTED_DEVICE),
        OsStr::new("--sm"),
        OsStr::new(SELECTED_SM),
        OsStr::new("--json"),
    ];
    let output = native::run_with_simulated_driver(&native.sim_driver, TWO_DEVICE_CONFIG, &argv)?;
    let plan = parse_json(&output, "preflight")?;
    if !output.status.success() {
        return Err(format!("the preflight was not ready: {plan}"));
    }
    let preflight = &plan["preflight"];
    println!(
        "   preflight status: {} (support_claim: {})",
        preflight["status"], preflight["support_claim"]
    );
    for observation in preflight["observations"].as_array().into_iter().flatten() {
        println!(
            "     {} = {}",
            observation["key"].as_str().unwrap_or("?"),
            observation["value"].as_str().unwrap_or("?")
        );
    }
    for section in ["options", "lock", "lowering_authorization"] {
        println!("   plan.{section}: {}", pretty(&plan[section]));
    }
    Ok(())
}

fn lifetime_smoke(native: &NativeArtifacts) -> Result<()> {
    step(
        "4. the lifetime smoke (runtime crate through the reviewed loader)",
        "context, dedicated stream and a 4096-byte allocation are created, synchronized and \
         released exactly once, children first, with every push matched by a pop (call log below)",
        "that device memory or a stream works on real hardware; no kernel runs",
    );
    let script =
        format!("\"$1\" --device {SELECTED_DEVICE}; status=$?; cat {CALL_LOG} >&2; exit $status");
    let argv = [
        OsStr::new("sh"),
        OsStr::new("-c"),
        OsStr::new(&script),
        OsStr::new("rextio-demo"),
        native.smoke.as_os_str(),
    ];
    let output = native::run_with_simulated_driver(&native.sim_driver, TWO_DEVICE_CONFIG, &argv)?;
    print_json(&output, "smoke")?;
    println!("   simulated driver call log:");
    for line in String::from_utf8_lossy(&output.stderr).lines() {
        println!("     {line}");
    }
    if output.status.success() {
        Ok(())
    } else {
        Err("the smoke did not complete".into())
    }
}

fn runtime_source_in_a_sample_project(python: &Path) -> Result<()> {
    step(
        "5. the packaged runtime source, materialized into a sample project and built",
        "the wheel carries a verified, self-contained rextio-cuda-runtime that builds offline \
         with no link to cuda",
        "anything at run time: the sample is only compiled",
    );
    let project = target_dir().join("demo").join("sample-project");
    if project.exists() {
        fs::remove_dir_all(&project)
            .map_err(|error| format!("cannot clear {}: {error}", project.display()))?;
    }
    fs::create_dir_all(project.join("src"))
        .map_err(|error| format!("cannot create {}: {error}", project.display()))?;
    crate::process::run(
        Command::new(python)
            .args(["-m", "rextio_device_cuda", "runtime-source", "--into"])
            .arg(&project),
    )?;
    write(&project.join("Cargo.toml"), SAMPLE_MANIFEST)?;
    write(&project.join("src").join("main.rs"), SAMPLE_MAIN)?;
    crate::process::run(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(&project)
            .args(["build", "--offline", "--quiet"]),
    )?;
    let binary = project
        .join("target")
        .join("debug")
        .join("rextio-demo-sample");
    crate::process::run(&mut Command::new(binary))
}

fn write(path: &Path, text: &str) -> Result<()> {
    fs::write(path, text).map_err(|error| format!("cannot write {}: {error}", path.display()))
}

const SAMPLE_MANIFEST: &str = r#"[package]
name = "rextio-demo-sample"
version = "0.1.0"
edition = "2021"
publish = false

# Its own workspace: this sample is not a member of the repository's.
[workspace]

[dependencies]
rextio-cuda-runtime = { path = "generated/device-providers/rextio-device-cuda/rextio-cuda-runtime" }
"#;

const SAMPLE_MAIN: &str = r#"//! Uses the runtime's lifetime API; running it needs a loaded driver table.
use std::rc::Rc;

use rextio_cuda_runtime::{Context, CudaError, DriverApi};

#[allow(dead_code)]
fn smoke(api: Rc<DriverApi>, device: i32) -> Result<(), CudaError> {
    let context = Context::create(api, device)?;
    let stream = context.create_stream()?;
    let allocation = context.allocate(4096)?;
    stream.synchronize()?;
    allocation.close()?;
    stream.close()?;
    context.close()
}

fn main() {
    println!("   sample built against the packaged rextio-cuda-runtime (compiled, not run on a GPU)");
}
"#;

fn parse_json(output: &Output, what: &str) -> Result<Value> {
    serde_json::from_slice(&output.stdout).map_err(|error| {
        format!(
            "the {what} printed no JSON ({error}); stderr: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )
    })
}

/// Prints a binary's one-line record as it was written (keys in contract order).
fn print_json(output: &Output, what: &str) -> Result<()> {
    parse_json(output, what)?;
    println!(
        "   {what} (exit {}):\n   {}",
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).trim()
    );
    Ok(())
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value)
        .unwrap_or_default()
        .replace('\n', "\n   ")
}
