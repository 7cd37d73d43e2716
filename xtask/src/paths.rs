//! Where things are, relative to the repository root.

use std::path::{Path, PathBuf};

/// The repository root (the workspace that holds `xtask/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the repository root")
        .to_path_buf()
}

/// Cargo's target directory for this workspace.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// `path: error`, the message of a failed file operation on `path`.
pub fn at(path: &Path) -> impl FnOnce(std::io::Error) -> String + '_ {
    move |error| format!("{}: {error}", path.display())
}

/// Adds `entries` (a JSON object) to `target/test-paths.json`, which the
/// Python tests read (`built_path` in tests/e2e/sim_namespace.py), keeping
/// the keys another step wrote there.
pub fn record_test_paths(entries: serde_json::Value) -> crate::Result<PathBuf> {
    let file = target_dir().join("test-paths.json");
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let mut paths: serde_json::Map<_, _> = serde_json::from_str(&text).unwrap_or_default();
    paths.extend(entries.as_object().cloned().unwrap_or_default());
    let text = serde_json::to_string_pretty(&paths).map_err(|error| error.to_string())?;
    std::fs::write(&file, text + "\n").map_err(at(&file))?;
    Ok(file)
}

/// Copies the file `from` to `to`, creating `to`'s directory.
pub fn copy(from: &Path, to: &Path) -> crate::Result<()> {
    std::fs::create_dir_all(to.parent().unwrap_or(to)).map_err(at(to))?;
    std::fs::copy(from, to).map(drop).map_err(at(from))
}

/// Every regular file below `root` (links not followed), sorted, entering
/// only the directories whose name `enter` accepts.
pub fn regular_files(root: &Path, enter: impl Fn(&str) -> bool) -> crate::Result<Vec<PathBuf>> {
    let walk = walkdir::WalkDir::new(root)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|entry| {
            entry.depth() == 0
                || !entry.file_type().is_dir()
                || enter(&entry.file_name().to_string_lossy())
        });
    let entries = walk.collect::<Result<Vec<_>, _>>();
    let entries = entries.map_err(|error| format!("{}: {error}", root.display()))?;
    let files = entries
        .into_iter()
        .filter(|entry| entry.file_type().is_file());
    Ok(files.map(walkdir::DirEntry::into_path).collect())
}

/// A fresh directory under the system temporary directory, removed on drop.
pub fn scratch(purpose: &str) -> crate::Result<tempfile::TempDir> {
    let prefix = format!("xtask-{purpose}-");
    let scratch = tempfile::Builder::new().prefix(&prefix).tempdir();
    scratch.map_err(|error| error.to_string())
}

/// Every source tarball in `<root>/generated/` (the runtime's, the
/// loader's, the probe's), sorted; at least one.
pub fn crate_tarballs(root: &Path) -> crate::Result<Vec<PathBuf>> {
    let generated = root.join("generated");
    let mut tarballs = regular_files(&generated, |_| false)?;
    tarballs.retain(|path| path.to_string_lossy().ends_with(".tar.gz"));
    tarballs.sort();
    if tarballs.is_empty() {
        return Err(format!("{}: no source tarball", generated.display()));
    }
    Ok(tarballs)
}
