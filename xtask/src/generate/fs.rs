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

/// Every file below `root/relative_dir` (links not followed), as sorted
/// `/`-separated paths relative to `root`. A missing directory is empty.
pub fn relative_files(root: &Path, relative_dir: &str) -> Result<Vec<String>> {
    let dir = root.join(relative_dir);
    let mut found = Vec::new();
    if !dir.is_dir() {
        return Ok(found);
    }
    for entry in walkdir::WalkDir::new(&dir) {
        let entry = entry.map_err(|error| format!("{relative_dir}: cannot list: {error}"))?;
        let relative = entry.path().strip_prefix(root).unwrap_or(entry.path());
        let text = relative
            .to_str()
            .ok_or_else(|| format!("{}: not UTF-8", relative.display()))?;
        if !entry.file_type().is_dir() {
            found.push(text.to_string());
        }
    }
    found.sort();
    Ok(found)
}

/// Writes `bytes` to `path` through a temporary file in the same directory,
/// renamed into place, so readers never see a partial file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let outcome = fs::create_dir_all(dir).and_then(|()| {
        let mut file = tempfile::NamedTempFile::new_in(dir)?;
        file.write_all(bytes)?;
        file.as_file().sync_all()?;
        file.persist(path).map_err(|error| error.error)?;
        Ok(())
    });
    outcome.map_err(|error| format!("{}: cannot write: {error}", path.display()))
}
