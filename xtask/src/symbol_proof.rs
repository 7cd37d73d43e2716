//! `cargo xtask symbol-proof`: the README's "How to add a driver symbol",
//! done for real on a copy of the repository.
//!
//! 1. Copies every tracked (and not ignored) file to `target/symbol-proof/repo`.
//! 2. Adds `cuMemcpyHtoD_v2`, `cuMemcpyDtoH_v2` and `cuDeviceGetAttribute`
//!    (whose `CUdevice_attribute` parameter is an enum declared in `types`)
//!    to the copy's `templates/driver-symbols.json`: the one edit.
//! 3. Runs `cargo xtask generate` there and checks that the symbol tables, the
//!    runtime tarball, the tarball digest in `_generated.py` and the index changed together.
//! 4. Runs the copy's whole Rust test suite, `generate --check` and the ABI
//!    check against NVIDIA's headers: all must pass.
//! 5. In a fresh copy, adds an optional symbol the simulated driver (built
//!    from this repository) does not export, runs the tables' tests, builds
//!    the copy's probe, and shows it still loads and inventories the
//!    simulated devices.
//!
//! The copy builds in `target/symbol-proof/target`, kept between runs, so
//! dependencies are compiled once.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::generate::inputs::DRIVER_SYMBOLS_PATH;
use crate::paths::{repo_root, target_dir};
use crate::process::run;
use crate::{native, Result};

/// What must change when a symbol is added (beside the list itself).
const CHANGED_TOGETHER: [&str; 5] = [
    "runtime/src/driver_api.rs",
    "probe/src/generated/inventory_api.rs",
    "generated/rextio-cuda-runtime-0.1.0.tar.gz",
    "python/rextio_device_cuda/_generated.py",
    "generated/index.json",
];

pub fn command(args: &[String]) -> Result<()> {
    crate::no_arguments("symbol-proof", args);
    let base = target_dir().join("symbol-proof");
    let copy = base.join("repo");
    let copy_target = base.join("target");
    copy_repository(&repo_root(), &copy)?;

    // The one edit: three symbols and the enum type one of them uses.
    let before = snapshot(&copy)?;
    edit_list(&copy, |list| {
        list["types"]["CUdevice_attribute"] = json!({
            "kind": "enum",
            "bits": 32,
            "doc": "A device attribute queried with cuDeviceGetAttribute."
        });
        push_symbol(
            list,
            json!({
                "export": "cuMemcpyHtoD_v2", "api": "cuMemcpyHtoD", "abi_version": 3020, "since": 3020,
                "returns": "CUresult",
                "params": [
                    { "name": "destination", "c_type": "CUdeviceptr" },
                    { "name": "source", "c_type": "const void *" },
                    { "name": "byte_count", "c_type": "size_t" }
                ],
                "components": { "runtime": "required" }
            }),
        );
        push_symbol(
            list,
            json!({
                "export": "cuMemcpyDtoH_v2", "api": "cuMemcpyDtoH", "abi_version": 3020, "since": 3020,
                "returns": "CUresult",
                "params": [
                    { "name": "destination", "c_type": "void *" },
                    { "name": "source", "c_type": "CUdeviceptr" },
                    { "name": "byte_count", "c_type": "size_t" }
                ],
                "components": { "runtime": "required" }
            }),
        );
        push_symbol(
            list,
            json!({
                "export": "cuDeviceGetAttribute", "api": "cuDeviceGetAttribute", "abi_version": 2000,
                "since": 2000,
                "returns": "CUresult",
                "params": [
                    { "name": "value", "c_type": "int *" },
                    { "name": "attribute", "c_type": "CUdevice_attribute" },
                    { "name": "device", "c_type": "CUdevice" }
                ],
                "components": { "probe-inventory": "required", "runtime": "required" }
            }),
        );
    })?;
    run(&mut xtask(&copy, &copy_target, &["generate"]))?;
    let after = snapshot(&copy)?;
    let changed: Vec<&str> = CHANGED_TOGETHER
        .into_iter()
        .filter(|path| before.get(*path) != after.get(*path))
        .collect();
    if changed.len() != CHANGED_TOGETHER.len() {
        return Err(format!(
            "adding symbols changed only {changed:?} of {CHANGED_TOGETHER:?}"
        ));
    }
    for export in ["cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuDeviceGetAttribute"] {
        let table = after
            .get("runtime/src/driver_api.rs")
            .cloned()
            .unwrap_or_default();
        // Its line in the list `driver_table!` builds `DriverApi` from.
        if !String::from_utf8_lossy(&table).contains(&format!(" {export}(")) {
            return Err(format!("the copy's DriverApi lacks {export}"));
        }
    }
    println!(
        "symbol-proof: {} changed together",
        CHANGED_TOGETHER.join(", ")
    );
    run(cargo(&copy, &copy_target).args(["test", "--workspace", "--locked"]))?;
    run(&mut xtask(&copy, &copy_target, &["generate", "--check"]))?;
    run(xtask(&copy, &copy_target, &["abi-check"]).env(
        "XTASK_NVIDIA_HEADERS_DIR",
        target_dir().join("nvidia-headers"),
    ))?;
    println!("symbol-proof: three symbols added by one edit; the copy's tests, generate --check and ABI check pass");

    // An optional symbol the simulated driver lacks: the probe still loads.
    // A fresh copy, so the list differs from this repository's (whose
    // simulated driver the probe meets) by that one symbol only.
    copy_repository(&repo_root(), &copy)?;
    edit_list(&copy, |list| {
        push_symbol(
            list,
            json!({
                "export": "cuDeviceGetLuid", "api": "cuDeviceGetLuid", "abi_version": 10000,
                "since": 10000,
                "returns": "CUresult",
                "params": [
                    { "name": "luid", "c_type": "char *" },
                    { "name": "device_node_mask", "c_type": "unsigned int *" },
                    { "name": "device", "c_type": "CUdevice" }
                ],
                "components": { "probe-inventory": "optional" }
            }),
        );
    })?;
    run(&mut xtask(&copy, &copy_target, &["generate"]))?;
    // The tables' tests with a real optional symbol: absent, it still loads.
    run(cargo(&copy, &copy_target).args([
        "test",
        "--locked",
        "--package",
        "rextio-cuda-runtime",
        "--package",
        "rextio-cuda-probe",
    ]))?;
    run(cargo(&copy, &copy_target).args(["build", "--locked", "--package", "rextio-cuda-probe"]))?;
    let probe = copy_target.join("debug").join(format!(
        "rextio-cuda-driver-probe{}",
        std::env::consts::EXE_SUFFIX
    ));
    let ours = native::build(false)?;
    let output = native::run_with_simulated_driver(
        &ours.sim_driver,
        native::TWO_DEVICE_CONFIG,
        &[probe.as_os_str()],
    )?;
    let report: Value = serde_json::from_slice(&output.stdout).map_err(|error| {
        format!(
            "the copy's probe printed no report ({error}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    if !report["reason_code"].is_null() || report["device_count"] != 2 {
        return Err(format!(
            "with an optional symbol the simulated driver lacks, the probe did not load: {report}\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    if exports(&ours.sim_driver)?.contains("cuDeviceGetLuid") {
        return Err("the simulated driver unexpectedly exports cuDeviceGetLuid".into());
    }
    println!(
        "symbol-proof: optional cuDeviceGetLuid is absent from the simulated driver; the probe loads: status {}, {} devices",
        report["status"], report["device_count"]
    );
    Ok(())
}

/// Every file git tracks or would track (not ignored), copied afresh.
fn copy_repository(root: &Path, copy: &Path) -> Result<()> {
    if copy.exists() {
        std::fs::remove_dir_all(copy).map_err(|error| format!("{}: {error}", copy.display()))?;
    }
    let listing = Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output()
        .map_err(|error| format!("cannot run git ls-files: {error}"))?;
    if !listing.status.success() {
        return Err("git ls-files failed".into());
    }
    for path in listing
        .stdout
        .split(|byte| *byte == 0)
        .filter(|path| !path.is_empty())
    {
        let relative = PathBuf::from(String::from_utf8_lossy(path).into_owned());
        let source = root.join(&relative);
        if !source.is_file() {
            continue;
        }
        let destination = copy.join(&relative);
        if let Some(parent) = destination.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|error| format!("{}: {error}", parent.display()))?;
        }
        std::fs::copy(&source, &destination)
            .map_err(|error| format!("{}: {error}", source.display()))?;
    }
    Ok(())
}

fn snapshot(copy: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    CHANGED_TOGETHER
        .iter()
        .map(|path| {
            std::fs::read(copy.join(path))
                .map(|bytes| (path.to_string(), bytes))
                .map_err(|error| format!("{path}: {error}"))
        })
        .collect()
}

fn edit_list(copy: &Path, edit: impl FnOnce(&mut Value)) -> Result<()> {
    let path = copy.join(DRIVER_SYMBOLS_PATH);
    let mut list: Value = serde_json::from_slice(
        &std::fs::read(&path).map_err(|error| format!("{}: {error}", path.display()))?,
    )
    .map_err(|error| format!("{DRIVER_SYMBOLS_PATH}: {error}"))?;
    edit(&mut list);
    let mut text = serde_json::to_string_pretty(&list).map_err(|error| error.to_string())?;
    text.push('\n');
    std::fs::write(&path, text).map_err(|error| format!("{}: {error}", path.display()))
}

fn push_symbol(list: &mut Value, symbol: Value) {
    if let Some(symbols) = list["symbols"].as_array_mut() {
        symbols.push(symbol);
    }
}

fn cargo(copy: &Path, copy_target: &Path) -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .current_dir(copy)
        .env("CARGO_TARGET_DIR", copy_target);
    command
}

fn xtask(copy: &Path, copy_target: &Path, args: &[&str]) -> Command {
    let mut command = cargo(copy, copy_target);
    command.args(["run", "--quiet", "--locked", "--package", "xtask", "--"]);
    command.args(args.iter().map(OsStr::new));
    command
}

/// The dynamic symbol names of a shared library (from its `.dynsym`), via `nm -D`.
fn exports(library: &Path) -> Result<String> {
    let output = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(library)
        .output()
        .map_err(|error| format!("cannot run nm: {error}"))?;
    if !output.status.success() {
        return Err(format!("nm -D {} failed", library.display()));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
