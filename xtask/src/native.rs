//! The native binaries: building the probe, the smoke and the simulated
//! driver; the shipped builds.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths::{repo_root, target_dir};
use crate::process::{output, run};
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

/// The build recipe of the shipped binaries (contract §9.11), read here, by
/// the recipe script below and by the package (`_data/`, staged by `dist`).
pub const RECIPE: &str = "templates/build-recipe.json";

/// The package's recipe module, run as a script (standard library only) to
/// build the shipped binaries exactly as `build-probe` and `reproduce` do.
const RECIPE_SCRIPT: &str = "python/rextio_device_cuda/_build_recipe.py";

/// The probe's generated source tarball in the tree at `root`
/// (`generated/rextio-cuda-probe-<version>.tar.gz`), from which the shipped
/// binaries are built, as `reproduce` rebuilds them from a wheel's copy.
fn probe_source(root: &Path) -> Result<PathBuf> {
    let generated = root.join("generated");
    let mut found = crate::paths::regular_files(&generated, |_| false)?;
    found.retain(|path| {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        name.starts_with(&format!("{PROBE_PACKAGE}-")) && name.ends_with(".tar.gz")
    });
    match found.as_slice() {
        [tarball] => Ok(tarball.clone()),
        _ => Err(format!(
            "{} holds no one {PROBE_PACKAGE} tarball",
            generated.display()
        )),
    }
}

/// The recipe's glibc floor (RHEL 8, Ubuntu 20.04, Jetson), e.g. `2.17`.
fn glibc_floor() -> Result<String> {
    let path = repo_root().join(RECIPE);
    let text = std::fs::read_to_string(&path).map_err(crate::paths::at(&path))?;
    let recipe: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let glibc = recipe["glibc"].as_str();
    glibc
        .map(str::to_owned)
        .ok_or_else(|| format!("{RECIPE} names no glibc"))
}

/// The wheel's platform tag for the architecture `arch` (of a target triple):
/// manylinux of the recipe's glibc floor, e.g. `manylinux_2_17_x86_64`.
pub fn platform_tag(arch: &str) -> String {
    let arch = arch.split('-').next().unwrap_or(arch);
    let glibc = glibc_floor().unwrap_or_else(|error| panic!("{error}"));
    format!("manylinux_{}_{arch}", glibc.replace('.', "_"))
}

/// Where the shipped builds of the tree at `root` live: `<root>/target/ship`
/// (or `$CARGO_TARGET_DIR/ship` for this checkout).
pub fn ship_dir(root: &Path) -> PathBuf {
    match root == repo_root() {
        true => target_dir().join("ship"),
        false => root.join("target").join("ship"),
    }
}

/// The release probe and smoke for `triple` exactly as its wheel ships them:
/// the recipe script builds them from the tree's generated probe tarball in
/// `<ship_dir>/<triple>/`, with zig and cargo-zigbuild fetched by the
/// recipe's hashes into `target/recipe-tools/`. The sources, the cargo home
/// and the toolchain are remapped, so the bytes are those `reproduce` builds
/// from a wheel's copy of the same tarball anywhere.
pub fn build_shipped(root: &Path, triple: &str) -> Result<[PathBuf; 2]> {
    // A fresh machine's toolchain may lack `triple`.
    toolchain::ensure_pinned_targets()?;
    let python = Venv::Build.ensure()?;
    let work = ship_dir(root).join(triple);
    let release = output(
        Command::new(python)
            .current_dir(root)
            .stderr(std::process::Stdio::inherit())
            .arg("-I")
            .arg(root.join(RECIPE_SCRIPT))
            .arg(root.join(RECIPE))
            .arg(probe_source(root)?)
            .arg(triple)
            .arg(&work)
            .arg(target_dir().join("recipe-tools")),
    )?;
    let release = PathBuf::from(release.trim());
    Ok([release.join(PROBE_BINARY), release.join(SMOKE_BINARY)])
}

/// `target/recipe-tools/bin/`, holding `zig` and `cargo-zigbuild` of the
/// build recipe (links to the ones the recipe script fetched, by hash), for
/// the cross builds of the tests (tests/emulated's manual host).
pub fn recipe_tools() -> Result<PathBuf> {
    let folder = target_dir().join("recipe-tools");
    let root = repo_root();
    let found = output(
        Command::new(Venv::Build.ensure()?)
            .current_dir(&root)
            .stderr(std::process::Stdio::inherit())
            .arg("-I")
            .arg(root.join(RECIPE_SCRIPT))
            .arg("tools")
            .arg(root.join(RECIPE))
            .arg(&folder),
    )?;
    let bin = folder.join("bin");
    std::fs::create_dir_all(&bin).map_err(crate::paths::at(&bin))?;
    for (name, program) in ["zig", "cargo-zigbuild"].into_iter().zip(found.lines()) {
        let link = bin.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(program, &link).map_err(crate::paths::at(&link))?;
    }
    Ok(bin)
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
