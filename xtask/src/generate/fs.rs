//! Filesystem helpers for the generator: input reading, atomic writes and
//! directory listings in a stable order.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::Result;

/// Reads `relative` under `root`; CRLF becomes LF so a Windows checkout
/// with `core.autocrlf` produces the same bytes as any other.
pub fn read_input(root: &Path, relative: &str) -> Result<Vec<u8>> {
    let bytes = fs::read(root.join(relative))
        .map_err(|error| format!("{relative}: cannot read this input: {error}"))?;
    Ok(normalize_line_endings(bytes))
}

fn normalize_line_endings(bytes: Vec<u8>) -> Vec<u8> {
    if !bytes.windows(2).any(|pair| pair == b"\r\n") {
        return bytes;
    }
    let mut normalized = Vec::with_capacity(bytes.len());
    let mut iter = bytes.iter().peekable();
    while let Some(&byte) = iter.next() {
        if byte == b'\r' && iter.peek() == Some(&&b'\n') {
            continue;
        }
        normalized.push(byte);
    }
    normalized
}

/// Every regular file below `root/relative_dir`, as sorted `/`-separated
/// paths relative to `root`. A missing directory is empty.
pub fn relative_files(root: &Path, relative_dir: &str) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let start = root.join(relative_dir);
    if !start.is_dir() {
        return Ok(found);
    }
    let mut pending = vec![(start, relative_dir.to_string())];
    while let Some((dir, relative)) = pending.pop() {
        let entries =
            fs::read_dir(&dir).map_err(|error| format!("{relative}: cannot list: {error}"))?;
        for entry in entries {
            let entry = entry.map_err(|error| format!("{relative}: cannot list: {error}"))?;
            let name = entry.file_name();
            let name = name
                .to_str()
                .ok_or_else(|| format!("{relative}: a file name is not UTF-8: {name:?}"))?;
            let child = format!("{relative}/{name}");
            let kind = entry
                .file_type()
                .map_err(|error| format!("{child}: {error}"))?;
            if kind.is_dir() {
                pending.push((entry.path(), child));
            } else {
                found.push(child);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Writes `bytes` to `path` by writing a temporary file in the same
/// directory and renaming it, so readers never see a partial file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| format!("{}: has no parent directory", path.display()))?;
    fs::create_dir_all(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let file_name = path
        .file_name()
        .and_then(|name| name.to_str())
        .ok_or_else(|| format!("{}: bad file name", path.display()))?;
    let temporary = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
    let outcome = (|| -> std::io::Result<()> {
        let mut file = fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, path)
    })();
    outcome.map_err(|error| {
        let _ = fs::remove_file(&temporary);
        format!("{}: cannot write: {error}", path.display())
    })
}
