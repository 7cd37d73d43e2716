//! The native binaries: building the probe, the smoke and the simulated
//! driver; running commands beside the simulated driver in a private mount
//! namespace; timing the probe.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::paths::{repo_root, target_dir};
use crate::{nolink, process, Result};

/// Paths of the built native binaries.
pub struct NativeArtifacts {
    pub probe: PathBuf,
    pub smoke: PathBuf,
    pub sim_driver: PathBuf,
}

const PROBE_PACKAGE: &str = "rextio-cuda-probe";
const SIM_DRIVER_PACKAGE: &str = "rextio-sim-driver";
const PROBE_BINARY: &str = "rextio-cuda-driver-probe";
const SMOKE_BINARY: &str = "rextio-cuda-runtime-smoke";
const SIM_DRIVER_LIBRARY: &str = "librextio_sim_driver.so";

/// Builds the probe, the smoke and the simulated driver (`release` for
/// validate-nvidia: `--release --locked`).
pub fn build(release: bool) -> Result<NativeArtifacts> {
    let mut command = cargo();
    command.args([
        "build",
        "--package",
        PROBE_PACKAGE,
        "--package",
        SIM_DRIVER_PACKAGE,
    ]);
    if release {
        command.args(["--release", "--locked"]);
    }
    process::run(&mut command)?;
    let profile_dir = target_dir().join(if release { "release" } else { "debug" });
    let artifacts = NativeArtifacts {
        probe: profile_dir.join(executable(PROBE_BINARY)),
        smoke: profile_dir.join(executable(SMOKE_BINARY)),
        sim_driver: profile_dir.join(SIM_DRIVER_LIBRARY),
    };
    for path in [&artifacts.probe, &artifacts.smoke] {
        if !path.is_file() {
            return Err(format!("cargo build did not produce {}", path.display()));
        }
    }
    Ok(artifacts)
}

/// A target whose platform wheel ships the release probe and smoke.
pub struct ShippedTarget {
    pub triple: &'static str,
    /// The wheel's platform tag: manylinux for the glibc floor below.
    pub platform_tag: &'static str,
}

/// The shipped targets (contract §9.1); Windows stays build-from-source.
pub const SHIPPED_TARGETS: [ShippedTarget; 2] = [
    ShippedTarget {
        triple: "x86_64-unknown-linux-gnu",
        platform_tag: "manylinux_2_17_x86_64",
    },
    ShippedTarget {
        triple: "aarch64-unknown-linux-gnu",
        platform_tag: "manylinux_2_17_aarch64",
    },
];

/// The oldest glibc the shipped binaries link against (RHEL 8, Ubuntu 20.04, Jetson).
const GLIBC_FLOOR: &str = "2.17";

/// The shipped target this host runs.
pub fn host_shipped_target() -> Result<&'static ShippedTarget> {
    let host = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    SHIPPED_TARGETS
        .iter()
        .find(|target| target.triple == host)
        .ok_or_else(|| format!("no platform wheel ships for {host}"))
}

/// Where the shipped builds of the tree at `root` live: `<root>/target/ship`
/// (or `$CARGO_TARGET_DIR/ship` for this checkout).
pub fn ship_dir(root: &Path) -> PathBuf {
    if root == repo_root() {
        target_dir().join("ship")
    } else {
        root.join("target").join("ship")
    }
}

/// The release probe and smoke for `target` exactly as its wheel ships them,
/// built from the tree at `root`: cargo-zigbuild against glibc 2.17 with the
/// toolchain of rust-toolchain.toml, the checkout and cargo-home prefixes
/// remapped so the bytes do not depend on where either lives. They land in
/// `<ship_dir>/<triple>/release/` (for this checkout
/// `target/ship/<triple>/release/rextio-cuda-driver-probe` and
/// `.../rextio-cuda-runtime-smoke`); returns both paths. One cargo
/// invocation per target: the output is then the same for every order.
pub fn build_shipped(root: &Path, target: &ShippedTarget) -> Result<[PathBuf; 2]> {
    let tools = crate::python_env::ensure_dist_tools()?;
    let ship = ship_dir(root);
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let rustflags = format!(
        "--remap-path-prefix={}=/rextio-device-cuda --remap-path-prefix={}=/cargo",
        root.display(),
        cargo_home.display()
    );
    let path = std::env::join_paths(std::iter::once(tools.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .map_err(|error| format!("PATH: {error}"))?;
    let mut command = Command::new(tools.join("cargo-zigbuild"));
    command
        .current_dir(root)
        // zig is `python -m ziglang` of the tools environment; its caches stay in target/.
        .env("PATH", path)
        .env("XDG_CACHE_HOME", ship.join("cache"))
        .env("RUSTFLAGS", rustflags)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .args([
            "zigbuild",
            "--release",
            "--locked",
            "--package",
            PROBE_PACKAGE,
            "--bins",
        ])
        .arg("--target")
        .arg(format!("{}.{GLIBC_FLOOR}", target.triple))
        .arg("--target-dir")
        .arg(&ship);
    process::run(&mut command)?;
    let release = ship.join(target.triple).join("release");
    let binaries = [release.join(PROBE_BINARY), release.join(SMOKE_BINARY)];
    for binary in &binaries {
        if !binary.is_file() {
            return Err(format!(
                "cargo zigbuild did not produce {}",
                binary.display()
            ));
        }
    }
    Ok(binaries)
}

/// The built probe and smoke name no libcuda/nvcuda in their dynamic section.
pub fn check_no_cuda_link(native: &NativeArtifacts) -> Result<()> {
    nolink::check_dynamic_section(&native.probe)?;
    nolink::check_dynamic_section(&native.smoke)
}

fn executable(name: &str) -> String {
    format!("{name}{}", std::env::consts::EXE_SUFFIX)
}

/// `cargo`, as the one running xtask (or from PATH), in the repository root.
pub fn cargo() -> Command {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(program);
    command.current_dir(repo_root());
    command
}

/// The reviewed path where the namespace installs the simulated driver.
pub const SIMULATED_DRIVER_PATH: &str = "/usr/local/nvidia/lib64/libcuda.so.1";
/// Where the simulated driver reads its behaviour (see tests/sim-driver).
const SIMULATED_CONFIG_PATH: &str = "/usr/local/nvidia/sim/config";
/// Exit status the namespace script uses when its own setup fails.
const NAMESPACE_SETUP_FAILED: i32 = 97;

/// The simulated driver's behaviour for a demonstration: two devices.
pub const TWO_DEVICE_CONFIG: &str = "\
driver_version=12040
device=NVIDIA Simulated A100|8|0
device=NVIDIA Simulated L4|8|9
";

/// Runs `argv` in a fresh private mount namespace where a tmpfs covers
/// `/usr/local` and the simulated driver sits at the reviewed path with
/// `config`; nothing on the host changes and nothing started inside outlives
/// the command. Needs root (`unshare -m -p`).
pub fn run_with_simulated_driver(
    sim_driver: &Path,
    config: &str,
    argv: &[&OsStr],
) -> Result<Output> {
    let scratch = target_dir().join(format!("sim-namespace-{}", std::process::id()));
    fs::create_dir_all(&scratch)
        .map_err(|error| format!("cannot create {}: {error}", scratch.display()))?;
    let outcome = run_in_scratch(&scratch, sim_driver, config, argv);
    let _ = fs::remove_dir_all(&scratch);
    outcome
}

fn run_in_scratch(
    scratch: &Path,
    sim_driver: &Path,
    config: &str,
    argv: &[&OsStr],
) -> Result<Output> {
    let config_file = scratch.join("config");
    fs::write(&config_file, config).map_err(|error| format!("cannot write config: {error}"))?;
    let script = scratch.join("namespace.sh");
    fs::write(&script, namespace_script(sim_driver, &config_file))
        .map_err(|error| format!("cannot write namespace script: {error}"))?;
    let output = Command::new("unshare")
        // A private mount namespace, and a PID namespace whose init is the
        // script: whatever the command leaves running dies with it.
        .args(["--mount", "--propagation", "private"])
        .args(["--pid", "--fork", "--kill-child", "sh"])
        .arg(&script)
        .args(argv)
        .output()
        .map_err(|error| format!("cannot start `unshare` (util-linux): {error}"))?;
    if output.status.code() == Some(NAMESPACE_SETUP_FAILED) || unshare_refused(&output) {
        return Err(format!(
            "could not set up the simulated-driver namespace (needs root and `unshare -m`): {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(output)
}

fn unshare_refused(output: &Output) -> bool {
    !output.status.success() && String::from_utf8_lossy(&output.stderr).starts_with("unshare:")
}

fn namespace_script(sim_driver: &Path, config_file: &Path) -> String {
    let steps = [
        "mount --make-rprivate /".to_string(),
        "mount -t tmpfs -o mode=0755,size=64m rextio-sim /usr/local".to_string(),
        "install -d -m 0755 /usr/local/nvidia /usr/local/nvidia/lib64 /usr/local/nvidia/sim"
            .to_string(),
        format!(
            "install -m 0644 {} {SIMULATED_CONFIG_PATH}",
            shell_quote(config_file)
        ),
        format!(
            "install -m 0644 {} {SIMULATED_DRIVER_PATH}",
            shell_quote(sim_driver)
        ),
    ];
    let mut script = String::new();
    for step in steps {
        script.push_str(&format!(
            "{step} || {{ echo 'namespace setup failed: {step}' >&2; exit {NAMESPACE_SETUP_FAILED}; }}\n"
        ));
    }
    script.push_str("exec \"$@\"\n");
    script
}

/// Single-quotes a path for `sh`.
fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.to_string_lossy().replace('\'', r"'\''"))
}

const BENCH_RUNS: usize = 31;

/// A shell loop that prints the wall time in nanoseconds of each of `runs`
/// runs of "$1" (its output discarded), one number a line.
const TIMING_LOOP: &str = r#"
program="$1"; runs="$2"; i=0
while [ "$i" -lt "$runs" ]; do
  start=$(date +%s%N); "$program" >/dev/null 2>&1; end=$(date +%s%N)
  echo $((end - start)); i=$((i + 1))
done
"#;

/// Probe run time, median of several runs: with the simulated driver (in a
/// namespace) and with no driver (on this host), beside the cost of spawning
/// `true` measured the same way.
pub fn bench() -> Result<()> {
    let native = build(true)?;
    let runs = BENCH_RUNS.to_string();
    let true_program = which("true")?;
    let timed = |program: &Path, simulated: bool| -> Result<Duration> {
        let argv: [&OsStr; 6] = [
            OsStr::new("sh"),
            OsStr::new("-c"),
            OsStr::new(TIMING_LOOP),
            OsStr::new("rextio-bench"),
            program.as_os_str(),
            OsStr::new(&runs),
        ];
        let output = if simulated {
            run_with_simulated_driver(&native.sim_driver, TWO_DEVICE_CONFIG, &argv)?
        } else {
            Command::new(argv[0])
                .args(&argv[1..])
                .output()
                .map_err(|error| format!("cannot run sh: {error}"))?
        };
        median_of_lines(&String::from_utf8_lossy(&output.stdout))
    };
    let host_status = probe_status(&native.probe)?;
    let spawn_floor = timed(&true_program, false)?;
    let without_driver = timed(&native.probe, false)?;
    let with_simulated = timed(&native.probe, true)?;
    println!("probe (release, median of {BENCH_RUNS} runs, wall time including process spawn):");
    println!("  spawn floor (`true`):            {}", millis(spawn_floor));
    println!(
        "  no driver on this host ({host_status}): {}",
        millis(without_driver)
    );
    println!(
        "  simulated driver, two devices:   {}",
        millis(with_simulated)
    );
    Ok(())
}

fn probe_status(probe: &Path) -> Result<String> {
    let output = Command::new(probe)
        .output()
        .map_err(|error| format!("cannot run the probe: {error}"))?;
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|error| format!("the probe printed no JSON report: {error}"))?;
    Ok(report["reason_code"]
        .as_str()
        .unwrap_or("probe-complete")
        .to_string())
}

fn median_of_lines(text: &str) -> Result<Duration> {
    let mut samples: Vec<u64> = text
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect();
    if samples.is_empty() {
        return Err(format!("the timing loop printed no samples: {text:?}"));
    }
    samples.sort_unstable();
    Ok(Duration::from_nanos(samples[samples.len() / 2]))
}

fn millis(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

/// An absolute path for `program` from PATH (for tools only, never the driver).
fn which(program: &str) -> Result<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| format!("`{program}` is not on PATH"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_target_is_a_capability_target_of_the_spec() {
        let root = repo_root();
        let inputs = crate::generate::inputs::Inputs::read(&root).unwrap();
        let spec = crate::generate::spec::ProviderSpec::parse(
            inputs
                .get(crate::generate::inputs::PROVIDER_SPEC_PATH)
                .unwrap(),
        )
        .unwrap();
        for target in &SHIPPED_TARGETS {
            assert!(
                spec.capabilities
                    .iter()
                    .any(|capability| capability.target_triple == target.triple),
                "{}",
                target.triple
            );
            let arch = target.triple.split('-').next().unwrap();
            let floor = GLIBC_FLOOR.replace('.', "_");
            assert_eq!(target.platform_tag, format!("manylinux_{floor}_{arch}"));
        }
    }

    #[test]
    fn median_ignores_noise_and_picks_the_middle() {
        assert_eq!(
            median_of_lines("5\n1\nx\n3\n").unwrap(),
            Duration::from_nanos(3)
        );
        assert!(median_of_lines("").is_err());
    }

    #[test]
    fn shell_quote_survives_quotes() {
        assert_eq!(shell_quote(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    }

    #[test]
    fn namespace_script_installs_at_the_reviewed_path_and_execs() {
        let script = namespace_script(Path::new("/t/sim.so"), Path::new("/t/config"));
        assert!(script.starts_with("mount --make-rprivate / ||"));
        assert!(script.contains("install -m 0644 '/t/sim.so' /usr/local/nvidia/lib64/libcuda.so.1"));
        assert!(script.ends_with("exec \"$@\"\n"));
    }
}
