//! The native binaries: building the probe, the smoke and the simulated
//! driver; the shipped builds.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths::{repo_root, target_dir};
use crate::process::run;
use crate::python_env::Venv;
use crate::{toolchain, Result};

/// Paths of the built native binaries.
pub struct NativeArtifacts {
    pub probe: PathBuf,
    pub smoke: PathBuf,
    pub sim_driver: PathBuf,
}

const PROBE_PACKAGE: &str = "rextio-cuda-probe";
const PROBE_BINARY: &str = "rextio-cuda-driver-probe";
const SMOKE_BINARY: &str = "rextio-cuda-runtime-smoke";

/// Builds the probe, the smoke and the simulated driver (`release` for
/// the bench: `--release --locked`).
pub fn build(release: bool) -> Result<NativeArtifacts> {
    let mut command = cargo();
    command.args(["build", "-p", PROBE_PACKAGE, "-p", "rextio-sim-driver"]);
    if release {
        command.args(["--release", "--locked"]);
    }
    run(&mut command)?;
    let profile = target_dir().join(if release { "release" } else { "debug" });
    Ok(NativeArtifacts {
        probe: profile.join(PROBE_BINARY),
        smoke: profile.join(SMOKE_BINARY),
        sim_driver: profile.join("librextio_sim_driver.so"),
    })
}

/// The targets whose platform wheels ship the release probe and smoke
/// (docs/interfaces.md, xtask seams); Windows stays build-from-source.
pub const SHIPPED_TARGETS: [&str; 2] = ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"];

/// The oldest glibc the shipped binaries link against (RHEL 8, Ubuntu 20.04, Jetson).
const GLIBC_FLOOR: &str = "2.17";

/// The wheel's platform tag for the architecture `arch` (of a target triple):
/// manylinux of the glibc floor, e.g. `manylinux_2_17_x86_64`.
pub fn platform_tag(arch: &str) -> String {
    let arch = arch.split('-').next().unwrap_or(arch);
    format!("manylinux_{}_{arch}", GLIBC_FLOOR.replace('.', "_"))
}

/// Where the shipped builds of the tree at `root` live: `<root>/target/ship`
/// (or `$CARGO_TARGET_DIR/ship` for this checkout).
pub fn ship_dir(root: &Path) -> PathBuf {
    match root == repo_root() {
        true => target_dir().join("ship"),
        false => root.join("target").join("ship"),
    }
}

/// The release probe and smoke for `triple` exactly as its wheel ships them,
/// built from the tree at `root` into `<ship_dir>/<triple>/release/`:
/// cargo-zigbuild against the glibc floor with the toolchain of
/// rust-toolchain.toml, the checkout and cargo-home prefixes remapped so the
/// bytes do not depend on where either lives. One cargo invocation per
/// target: the output is then the same for every order.
pub fn build_shipped(root: &Path, triple: &str) -> Result<[PathBuf; 2]> {
    // A fresh machine's toolchain may lack `triple`.
    toolchain::ensure_pinned_targets()?;
    // `target/venv-dist/bin/`: cargo-zigbuild and zig beside its python.
    let tools = Venv::Dist.ensure()?.with_file_name("");
    let ship = ship_dir(root);
    let home = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo"));
    let cargo_home = std::env::var_os("CARGO_HOME").map(PathBuf::from).or(home);
    let cargo_home = cargo_home.ok_or("neither CARGO_HOME nor HOME is set")?;
    let (root_shown, home_shown) = (root.display(), cargo_home.display());
    // Encoded (0x1f between flags): a checkout path with a space stays one flag.
    let rustflags = format!("--remap-path-prefix={root_shown}=/rextio-device-cuda\x1f")
        + &format!("--remap-path-prefix={home_shown}=/cargo");
    // zig is `python -m ziglang` of the tools environment, found on PATH.
    let mut path = tools.clone().into_os_string();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    run(Command::new(tools.join("cargo-zigbuild"))
        .current_dir(root)
        .env("PATH", path)
        // zig's caches stay in target/.
        .env("XDG_CACHE_HOME", ship.join("cache"))
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .args(["zigbuild", "--release", "--locked", "--bins"])
        .args(["-p", PROBE_PACKAGE])
        .arg(format!("--target={triple}.{GLIBC_FLOOR}"))
        .arg("--target-dir")
        .arg(&ship))?;
    let release = ship.join(triple).join("release");
    Ok([release.join(PROBE_BINARY), release.join(SMOKE_BINARY)])
}

/// `cargo`, as the one running xtask (or from PATH), in the repository root.
pub fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(repo_root());
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_target_is_a_capability_target_of_the_spec() {
        let root = repo_root();
        let inputs = crate::generate::inputs::Inputs::read(&root).unwrap();
        let spec = crate::generate::spec::parse(
            inputs
                .get(crate::generate::inputs::PROVIDER_SPEC_PATH)
                .unwrap(),
        )
        .unwrap();
        for target in SHIPPED_TARGETS {
            assert!(
                spec.capabilities
                    .iter()
                    .any(|capability| capability.target_triple == target),
                "{target}"
            );
        }
        let tags: Vec<String> = SHIPPED_TARGETS.map(platform_tag).into();
        assert_eq!(tags, ["manylinux_2_17_x86_64", "manylinux_2_17_aarch64"]);
    }
}
