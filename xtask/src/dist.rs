//! `cargo xtask dist`: into `target/dist/` one platform wheel per target of
//! `native::SHIPPED_TARGETS`, whose `rextio_device_cuda/_bin/` holds the
//! release probe and smoke of `native::build_shipped` with their SHA-256
//! (`python/hatch_build.py`), the pure `py3-none-any` wheel and the sdist.
//!
//! hatchling builds all four from a staged copy of `python/` plus the README,
//! the LICENSE and the generated runtime tarball, with SOURCE_DATE_EPOCH
//! fixed: same tree, same bytes (`verify-determinism` builds a second time
//! from a copy at another path; tests/python/test_dist.py checks them).
//!
//! Not maturin: its `bin` bindings put a crate's binaries in the wheel's
//! scripts directory, which pip installs onto PATH; ours belong inside the
//! package (`_bin/`, found by absolute path), and the same project also makes
//! the pure wheel and an sdist that need no Rust.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::native::{self, SHIPPED_TARGETS};
use crate::process::output;
use crate::{generate, paths, python_env, Result};

/// 1980-01-01T00:00:00Z: the earliest time a zip entry can carry.
const SOURCE_DATE_EPOCH: &str = "315532800";

/// What the build hook reads (see python/hatch_build.py).
const PLATFORM_VARIABLE: &str = "REXTIO_WHEEL_PLATFORM";
const BINARIES_VARIABLE: &str = "REXTIO_WHEEL_BINARIES";

/// Calls hatchling's `build_<argv[1]>` into the directory in argv[2]; prints the file name.
const BUILD: &str = "\
import sys
import hatchling.build
print(getattr(hatchling.build, 'build_' + sys.argv[1])(sys.argv[2]))
";

/// Imports the package's code table from `python/` without writing bytecode:
/// its import-time checks (every reason code it names is in the spec) must
/// pass before a wheel exists. The package's `__init__` imports Rextio Core,
/// which the build environment does not hold, so the package is entered
/// without it.
const IMPORT_CHECK: &str = "\
import sys, types
package = types.ModuleType('rextio_device_cuda')
package.__path__ = [sys.argv[1] + '/rextio_device_cuda']
sys.modules['rextio_device_cuda'] = package
import rextio_device_cuda._codes
";

/// What `dist` built: the artifacts, and the shipped binaries inside the platform wheels.
pub struct Dist {
    pub artifacts: Vec<PathBuf>,
    pub binaries: Vec<PathBuf>,
}

pub fn command() -> Result<()> {
    for artifact in build()?.artifacts {
        let bytes = fs::read(&artifact).map_err(paths::at(&artifact))?;
        let digest = generate::sha256_hex(&bytes);
        println!("{} sha256 {digest}", artifact.display());
    }
    Ok(())
}

/// generate --check, then the four artifacts into target/dist/.
pub fn build() -> Result<Dist> {
    println!("dist: checking that every generated file is current");
    generate::check()?;
    build_all(&paths::repo_root(), &paths::target_dir().join("dist"))
}

/// `build()`; returns this host's platform wheel, the one the tests install
/// (the other artifacts stay in target/dist/ for them).
pub fn build_wheel() -> Result<PathBuf> {
    let suffix = format!("-{}.whl", native::platform_tag(std::env::consts::ARCH));
    let mut artifacts = build()?.artifacts.into_iter();
    let wheel = artifacts.find(|path| path.to_string_lossy().ends_with(&suffix));
    wheel.ok_or_else(|| format!("dist built no wheel ending in {suffix}"))
}

/// Builds every artifact from the tree at `root` into `out` (emptied first).
pub fn build_all(root: &Path, out: &Path) -> Result<Dist> {
    let python = python_env::Venv::Build.ensure()?;
    let mut import_check = Command::new(&python);
    import_check.current_dir(root).env_remove("PYTHONPATH");
    output(import_check.args(["-I", "-B", "-c", IMPORT_CHECK, "python"]))?;
    let _ = fs::remove_dir_all(out);
    fs::create_dir_all(out).map_err(paths::at(out))?;
    let out = out.canonicalize().map_err(paths::at(out))?;
    let stage = stage_python(root)?;
    let hatchling =
        |kind, platform: Option<(&str, &Path)>| hatchling(&python, &stage, kind, &out, platform);
    let mut artifacts = vec![hatchling("sdist", None)?, hatchling("wheel", None)?];
    let mut binaries = Vec::new();
    for target in SHIPPED_TARGETS {
        let shipped = native::build_shipped(root, target)?;
        let tag = native::platform_tag(target);
        let wheel_bin = native::ship_dir(root).join("wheel-bin").join(&tag);
        let _ = fs::remove_dir_all(&wheel_bin);
        for binary in &shipped {
            let name = binary.file_name().ok_or("a binary without a name")?;
            copy(binary, &wheel_bin.join(name))?;
        }
        artifacts.push(hatchling("wheel", Some((&tag, &wheel_bin)))?);
        binaries.extend(shipped);
    }
    Ok(Dist {
        artifacts,
        binaries,
    })
}

/// The project files of `python/` (its build files, the package's sources and
/// `py.typed`; no bytecode, caches or leftovers) plus README.md, LICENSE and
/// the generated runtime tarball in the package's `_data/`, fresh each time.
fn stage_python(root: &Path) -> Result<PathBuf> {
    let stage = native::ship_dir(root).join("python");
    let _ = fs::remove_dir_all(&stage);
    for relative in generate::fs::relative_files(&root.join("python"), "")? {
        let relative = relative.trim_start_matches('/');
        let source = relative.starts_with("rextio_device_cuda/")
            && !relative.contains("__pycache__")
            && (relative.ends_with(".py") || relative.ends_with("/py.typed"));
        if source || relative == "pyproject.toml" || relative == "hatch_build.py" {
            copy(&root.join("python").join(relative), &stage.join(relative))?;
        }
    }
    for file in ["README.md", "LICENSE"] {
        copy(&root.join(file), &stage.join(file))?;
    }
    let tarball = paths::runtime_tarball(root)?;
    let name = tarball.file_name().unwrap_or_default();
    copy(&tarball, &stage.join("rextio_device_cuda/_data").join(name))?;
    Ok(stage)
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to.parent().unwrap_or(to)).map_err(paths::at(to))?;
    fs::copy(from, to).map(drop).map_err(paths::at(from))
}

/// One hatchling build (`sdist` or `wheel`) of `stage` into `out`; a platform
/// wheel when `platform` names the target and its binaries. Returns its path.
fn hatchling(
    python: &Path,
    stage: &Path,
    kind: &str,
    out: &Path,
    platform: Option<(&str, &Path)>,
) -> Result<PathBuf> {
    let mut build = Command::new(python);
    build
        .current_dir(stage)
        .env("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH)
        .env_remove("PYTHONPATH")
        .env_remove(PLATFORM_VARIABLE)
        .env_remove(BINARIES_VARIABLE)
        .args(["-B", "-c", BUILD, kind])
        .arg(out);
    if let Some((target, binaries)) = platform {
        build
            .env(PLATFORM_VARIABLE, target)
            .env(BINARIES_VARIABLE, binaries);
    }
    println!(
        "dist: hatchling {kind} {}",
        platform.map_or("", |(tag, _)| tag)
    );
    let name = output(&mut build)?.trim().to_string();
    let artifact = out.join(&name);
    if name.is_empty() || !artifact.is_file() {
        return Err(format!("hatchling reported no {kind} in {}", out.display()));
    }
    Ok(artifact)
}
