//! The real `cargo xtask generate` binary on a copy of the repository's
//! generator inputs and outputs: a broken provider spec fails naming the file
//! and the JSON path, and not one file of the tree changes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What `generate --root` reads and writes, relative to the repository root:
/// nothing under `tests/`, so the copy has none of it.
const TREE: &[&str] = &[
    "templates",
    "LICENSE",
    "Cargo.toml",
    "Cargo.lock",
    "rust-toolchain.toml",
    "runtime/Cargo.toml",
    "runtime/README.md",
    "runtime/src",
    "loader/Cargo.toml",
    "loader/README.md",
    "loader/src",
    "loader/tests",
    "probe/Cargo.toml",
    "probe/README.md",
    "probe/src",
    "probe/tests",
    "generated",
    "python/pyproject.toml",
    "python/rextio_device_cuda/_generated.py",
    "python/rextio_device_cuda/_provider_spec.py",
    "python/rextio_device_cuda/_reason_codes.py",
    "python/rextio_device_cuda/_loader_rules.py",
    "python/rextio_device_cuda/_cuda_results.py",
];

const SPEC: &str = "templates/provider-spec.json";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the repository")
        .to_path_buf()
}

fn copy(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            copy(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
    }
}

/// Every file under `root` with its bytes.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, files: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, files);
            } else {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(root, &mut files);
    files
}

fn generate(root: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["generate", "--root"])
        .arg(root)
        .output()
        .unwrap()
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_broken_spec_fails_naming_file_and_path_and_writes_nothing() {
    let scratch =
        Scratch(std::env::temp_dir().join(format!("xtask-broken-spec-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&scratch.0);
    for path in TREE {
        copy(&repo_root().join(path), &scratch.0.join(path));
    }
    // The copy is complete: generating it changes nothing.
    let current = generate(&scratch.0);
    assert!(current.status.success(), "{current:?}");
    assert_eq!(
        String::from_utf8_lossy(&current.stdout),
        "generate: every generated file is current\n"
    );

    let spec = std::fs::read_to_string(scratch.0.join(SPEC)).unwrap();
    let cases = [
        // A typo'd key.
        (
            "\"driver_version_floor\"",
            "\"driver_version_flor\"",
            "policy.driver_version_flor: unknown field",
        ),
        // A missing key.
        (
            ",\n    \"failure_status\": \"unavailable\"",
            "",
            "smoke: missing field `failure_status`",
        ),
        // A mistyped value.
        (
            "\"device_ordinal_max\": 1023",
            "\"device_ordinal_max\": [1023]",
            "policy.device_ordinal_max: invalid type",
        ),
        // A code the probe raises without an explanation.
        (
            "\"NO_CUDA_DEVICES\": [",
            "\"NO_GPU\": [",
            "probe_report.reason_codes[13]: `NO_CUDA_DEVICES` is not a key of `reason_codes`",
        ),
        // A broken cross-reference.
        (
            "\"lane\": \"libtorch\"",
            "\"lane\": \"torch\"",
            "capabilities[3].lane: `torch` is not a key of `lanes`",
        ),
        // Bad JSON.
        (
            "\"schema_version\": 1,",
            "\"schema_version\": 1",
            "expected `,`",
        ),
    ];
    for (from, to, expected) in cases {
        assert_eq!(spec.matches(from).count(), 1, "`{from}` must occur once");
        std::fs::write(scratch.0.join(SPEC), spec.replacen(from, to, 1)).unwrap();
        let before = snapshot(&scratch.0);
        let output = generate(&scratch.0);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{expected}: generate succeeded");
        assert!(
            stderr.starts_with(&format!("error: {SPEC}: ")) && stderr.contains(expected),
            "expected `{expected}`, got: {stderr}"
        );
        assert!(
            output.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&output.stdout)
        );
        assert!(snapshot(&scratch.0) == before, "{expected}: a file changed");
    }
}
