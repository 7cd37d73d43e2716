//! `cargo xtask dist` (docs/maintainers.md's commands): hatchling builds the four
//! artifacts from a staged copy of `python/` plus the README, the LICENSE and
//! the generated runtime tarball, with SOURCE_DATE_EPOCH fixed: same tree,
//! same bytes. tests/python/test_dist.py checks them.
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

/// Calls hatchling's `build_<argv[1]>` into the directory in argv[2]; prints
/// the file name. argv[3] is the wheel's platform tag (empty: pure) and
/// argv[4] the directory of its binaries, set in the environment under the
/// names the build hook (python/hatch_build.py) itself defines.
const BUILD: &str = "\
import os
import sys
import hatch_build
import hatchling.build
kind, out, platform, binaries = sys.argv[1:]
os.environ[hatch_build.PLATFORM_VARIABLE] = platform
os.environ[hatch_build.BINARIES_VARIABLE] = binaries
print(getattr(hatchling.build, 'build_' + kind)(out))
";

/// Imports `python/`'s `_codes.py`, whose import-time check (every framework
/// lane's codes are in the spec) must pass before any artifact is built,
/// without the package's `__init__` (it imports Core, absent here).
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
    let hatchling = Hatchling::prepare(root, out)?;
    let pure = Path::new("");
    let mut artifacts = vec![
        hatchling.build("sdist", "", pure)?,
        hatchling.build("wheel", "", pure)?,
    ];
    let mut binaries = Vec::new();
    for target in SHIPPED_TARGETS {
        let shipped = native::build_shipped(root, target)?;
        let tag = native::platform_tag(target);
        let wheel_bin = native::ship_dir(root).join("wheel-bin").join(&tag);
        let _ = fs::remove_dir_all(&wheel_bin);
        for binary in &shipped {
            let name = binary.file_name().ok_or("a binary without a name")?;
            paths::copy(binary, &wheel_bin.join(name))?;
        }
        artifacts.push(hatchling.build("wheel", &tag, &wheel_bin)?);
        binaries.extend(shipped);
    }
    Ok(Dist {
        artifacts,
        binaries,
    })
}

/// generate --check, then the pure wheel alone into `out` (emptied first):
/// what `demo` installs, with no zig and no cross build.
pub fn build_pure_wheel(out: &Path) -> Result<PathBuf> {
    generate::check()?;
    let hatchling = Hatchling::prepare(&paths::repo_root(), out)?;
    hatchling.build("wheel", "", Path::new(""))
}

/// hatchling's environment, the import check passed, `python/` staged and
/// the output directory emptied: what every build of an artifact starts from.
struct Hatchling {
    python: PathBuf,
    stage: PathBuf,
    out: PathBuf,
}

impl Hatchling {
    fn prepare(root: &Path, out: &Path) -> Result<Hatchling> {
        let python = python_env::Venv::Build.ensure()?;
        let mut import_check = Command::new(&python);
        import_check.current_dir(root).env_remove("PYTHONPATH");
        output(import_check.args(["-I", "-B", "-c", IMPORT_CHECK, "python"]))?;
        let _ = fs::remove_dir_all(out);
        fs::create_dir_all(out).map_err(paths::at(out))?;
        let out = out.canonicalize().map_err(paths::at(out))?;
        let stage = stage_python(root)?;
        Ok(Hatchling { python, stage, out })
    }

    /// One hatchling build (`sdist` or `wheel`) of the stage into `out`; a
    /// platform wheel when `tag` names the platform (its binaries in
    /// `binaries`), else pure. Returns its path.
    fn build(&self, kind: &str, tag: &str, binaries: &Path) -> Result<PathBuf> {
        println!("dist: hatchling {kind} {tag}");
        let mut build = Command::new(&self.python);
        build
            .current_dir(&self.stage)
            .env("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH)
            .env_remove("PYTHONPATH")
            .args(["-B", "-c", BUILD, kind])
            .arg(&self.out)
            .arg(tag)
            .arg(binaries);
        let name = output(&mut build)?.trim().to_string();
        match self.out.join(&name) {
            artifact if !name.is_empty() && artifact.is_file() => Ok(artifact),
            _ => Err(format!(
                "hatchling reported no {kind} in {}",
                self.out.display()
            )),
        }
    }
}

/// The project files of `python/` (its build files, the package's sources and
/// `py.typed`; no bytecode, caches or leftovers) plus README.md, LICENSE,
/// generated/manifest.json as the package's `manifest.json`, every generated
/// tarball and the build recipe in the package's `_data/`, fresh each time.
fn stage_python(root: &Path) -> Result<PathBuf> {
    let (python, stage) = (root.join("python"), native::ship_dir(root).join("python"));
    let _ = fs::remove_dir_all(&stage);
    for file in paths::regular_files(&python, |name| name != "__pycache__")? {
        let relative = file.strip_prefix(&python).unwrap_or(&file);
        let name = relative.to_string_lossy();
        let source = name.starts_with("rextio_device_cuda/")
            && (name.ends_with(".py") || name.ends_with("/py.typed"));
        if source || name == "pyproject.toml" || name == "hatch_build.py" {
            paths::copy(&file, &stage.join(relative))?;
        }
    }
    for file in ["README.md", "LICENSE"] {
        paths::copy(&root.join(file), &stage.join(file))?;
    }
    let package = stage.join("rextio_device_cuda");
    let generated = root.join("generated");
    paths::copy(&generated.join(MANIFEST), &package.join(MANIFEST))?;
    for tarball in generated_tarballs(&generated)? {
        let name = tarball.file_name().unwrap_or_default();
        paths::copy(&tarball, &package.join("_data").join(name))?;
    }
    // Beside the probe's sources: how its shipped binaries were built
    // (`build-probe` and `reproduce` read it).
    let recipe = Path::new(native::RECIPE);
    let name = recipe.file_name().unwrap_or_default();
    paths::copy(&root.join(recipe), &package.join("_data").join(name))?;
    Ok(stage)
}

/// What the generator wrote about its outputs (`generated/manifest.json`),
/// shipped as the package's `manifest.json`.
const MANIFEST: &str = "manifest.json";

/// Every `*.tar.gz` directly in `generated` (the crate tarballs), sorted.
fn generated_tarballs(generated: &Path) -> Result<Vec<PathBuf>> {
    let mut tarballs = paths::regular_files(generated, |_| false)?;
    tarballs.retain(|path| path.to_string_lossy().ends_with(".tar.gz"));
    if tarballs.is_empty() {
        return Err(format!("{} holds no .tar.gz", generated.display()));
    }
    Ok(tarballs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_carries_the_manifest_and_every_generated_tarball() {
        let scratch = paths::scratch("stage").unwrap();
        let root = scratch.path();
        let files = [
            "python/pyproject.toml",
            "python/hatch_build.py",
            "python/rextio_device_cuda/__init__.py",
            "python/rextio_device_cuda/py.typed",
            "python/rextio_device_cuda/__pycache__/x.pyc",
            "python/leftover.txt",
            "README.md",
            "LICENSE",
            "generated/manifest.json",
            "generated/a-0.1.0.tar.gz",
            "generated/b-0.1.0.tar.gz",
            "generated/check.c",
            "templates/build-recipe.json",
        ];
        for file in files {
            fs::create_dir_all(root.join(file).parent().unwrap()).unwrap();
            fs::write(root.join(file), file).unwrap();
        }
        let stage = stage_python(root).unwrap();
        let staged: Vec<String> = paths::regular_files(&stage, |_| true)
            .unwrap()
            .iter()
            .map(|path| {
                path.strip_prefix(&stage)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        let expected = [
            "LICENSE",
            "README.md",
            "hatch_build.py",
            "pyproject.toml",
            "rextio_device_cuda/__init__.py",
            "rextio_device_cuda/_data/a-0.1.0.tar.gz",
            "rextio_device_cuda/_data/b-0.1.0.tar.gz",
            "rextio_device_cuda/_data/build-recipe.json",
            "rextio_device_cuda/manifest.json",
            "rextio_device_cuda/py.typed",
        ];
        assert_eq!(staged, expected);
        let manifest = fs::read_to_string(stage.join("rextio_device_cuda/manifest.json")).unwrap();
        assert_eq!(manifest, "generated/manifest.json");
    }

    #[test]
    fn a_stage_without_the_generated_manifest_fails_naming_it() {
        let scratch = paths::scratch("stage").unwrap();
        let root = scratch.path();
        for file in [
            "python/pyproject.toml",
            "README.md",
            "LICENSE",
            "generated/a.tar.gz",
        ] {
            fs::create_dir_all(root.join(file).parent().unwrap()).unwrap();
            fs::write(root.join(file), file).unwrap();
        }
        let error = stage_python(root).unwrap_err();
        assert!(error.contains("manifest.json"), "{error}");
    }
}
