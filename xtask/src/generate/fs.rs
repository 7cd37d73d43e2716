//! Filesystem helpers for the generator: input reading, atomic writes and
//! directory listings in a stable order.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::Result;

/// Reads the text file `relative` under `root`; CRLF becomes LF so a Windows checkout
/// with `core.autocrlf` produces the same bytes as any other.
pub fn read_input(root: &Path, relative: &str) -> Result<Vec<u8>> {
    let text = fs::read_to_string(root.join(relative));
    let text = text.map_err(|error| format!("{relative}: cannot read this input: {error}"))?;
    Ok(text.replace("\r\n", "\n").into_bytes())
}

/// Every regular file below `root/relative_dir`, as sorted `/`-separated
/// paths relative to `root`. A missing directory is empty.
pub fn relative_files(root: &Path, relative_dir: &str) -> Result<Vec<String>> {
    let (mut found, mut pending) = (Vec::new(), Vec::new());
    if root.join(relative_dir).is_dir() {
        pending.push(relative_dir.to_string());
    }
    while let Some(relative) = pending.pop() {
        let error = |error| format!("{relative}: cannot list: {error}");
        // `relative_dir` "" lists `root` itself: its paths start with `/`.
        let dir = root.join(relative.trim_start_matches('/'));
        for entry in fs::read_dir(dir).map_err(error)? {
            let entry = entry.map_err(error)?;
            let name = entry.file_name().into_string();
            let name = name.map_err(|name| format!("{relative}: {name:?} is not UTF-8"))?;
            let child = format!("{relative}/{name}");
            match entry.file_type().map_err(error)?.is_dir() {
                true => pending.push(child),
                false => found.push(child),
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Writes `bytes` to `path` by writing a temporary file in the same
/// directory and renaming it, so readers never see a partial file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let shown = path.display();
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(format!("{shown}: not a file path"));
    };
    let (name, id) = (name.to_string_lossy(), std::process::id());
    let temporary = dir.join(format!(".{name}.{id}.tmp"));
    let outcome = fs::create_dir_all(dir).and_then(|()| {
        let mut file = fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, path)
    });
    outcome.map_err(|error| {
        let _ = fs::remove_file(&temporary);
        format!("{shown}: cannot write: {error}")
    })
}
