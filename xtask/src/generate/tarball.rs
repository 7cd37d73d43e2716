//! The runtime crate's source tarball, byte-identical on every run: entries
//! sorted by path, ustar headers with uid/gid 0, empty owner names, mode
//! 0644, one fixed mtime; gzip with mtime 0, OS byte 255, no file name,
//! level 1 (fixed; the fastest: the archive is small at any level),
//! flate2's pure-Rust backend (miniz_oxide).

use std::io::Write;

use flate2::{Compression, GzBuilder};

use crate::Result;

/// "Unknown" operating system (RFC 1952).
pub const GZIP_OS: u8 = 255;

/// Builds `<top>/<path>` entries from `(path, bytes)` pairs; no directory entries.
pub fn build(top: &str, files: &[(String, Vec<u8>)]) -> Result<Vec<u8>> {
    let mut sorted: Vec<&(String, Vec<u8>)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut archive = tar::Builder::new(Vec::new());
    for (path, bytes) in sorted {
        let full_path = format!("{top}/{path}");
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_uid(0);
        header.set_gid(0);
        // 1980-01-01T00:00:00Z: the earliest time every archive format can hold.
        header.set_mtime(315_532_800);
        let error = |error| format!("tarball entry `{full_path}`: {error}");
        header.set_path(&full_path).map_err(error)?;
        header.set_cksum();
        archive.append(&header, bytes.as_slice()).map_err(error)?;
    }
    let tar = archive.into_inner();
    gzip(&tar.map_err(|error| format!("tarball: {error}"))?)
}

pub fn gzip(bytes: &[u8]) -> Result<Vec<u8>> {
    let builder = GzBuilder::new().mtime(0).operating_system(GZIP_OS);
    let mut encoder = builder.write(Vec::new(), Compression::new(1));
    let written = encoder.write_all(bytes).and_then(|()| encoder.finish());
    written.map_err(|error| format!("gzip: {error}"))
}
