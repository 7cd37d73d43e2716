//! Linux (glibc, x86_64 and AArch64): the reviewed candidates (the spec's
//! `loader.linux_candidate_dirs`), each reviewed by [`reviewed`] and loaded
//! through its descriptor.

use core::ffi::{c_void, CStr};
use core::ptr::NonNull;
use std::path::Path;

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

use crate::error::LoadError;
use crate::reviewed::{self, ReviewedImage, Search};

/// The loaded driver library (opened with `RTLD_NODELETE`).
pub type Image = Library;

#[cfg(target_arch = "x86_64")]
const CANDIDATE_DIRS: &[&str] = reviewed::LINUX_X86_64_CANDIDATE_DIRS;
#[cfg(target_arch = "aarch64")]
const CANDIDATE_DIRS: &[&str] = reviewed::LINUX_AARCH64_CANDIDATE_DIRS;

/// The reviewed candidates, or only `DIR/libcuda.so.1` for a driver root (a
/// root that cannot be canonicalized holds no driver).
pub fn open(driver_root: Option<&Path>) -> Result<Image, LoadError> {
    let search = match driver_root {
        None => Search::production(CANDIDATE_DIRS),
        Some(dir) => Search::driver_root(dir).map_err(|_| LoadError::DriverRootNotFound {
            driver_root: dir.to_path_buf(),
        })?,
    };
    open_from(&search)
}

pub fn open_from(search: &Search) -> Result<Image, LoadError> {
    reviewed::open_first_accepted(
        &search.candidates,
        &search.roots,
        &search.floor,
        open_reviewed_image,
    )
}

/// Loads the reviewed file itself through its descriptor, never by a
/// second lookup of its path, and never unloads it (`RTLD_NODELETE`:
/// unloading libcuda after `cuInit` is a known crash source).
fn open_reviewed_image(image: &ReviewedImage) -> Result<Image, String> {
    // SAFETY: the descriptor is the regular file that passed review
    // (root-owned, one link, no group/other write bit, every directory and
    // link on its way root's, below a reviewed root), so its initializers
    // are the installed driver's. `/proc/self/fd/N` is an absolute path, so
    // dlopen performs no search.
    unsafe {
        Library::open(
            Some(image.descriptor_path()),
            RTLD_NOW | RTLD_LOCAL | libc::RTLD_NODELETE,
        )
    }
    // dlerror() names the file (`/proc/self/fd/N: invalid ELF header`); the
    // reason goes on without it.
    .map_err(|error| path_free_reason(&error.to_string(), REASON_CHARS))
}

/// Enough for any reason glibc's dynamic loader gives; the report's own
/// bound (`probe_report.max_loader_reason_chars`) is the probe's to apply.
const REASON_CHARS: usize = 512;

/// The dynamic loader's message without a path: `dlerror()` writes
/// `FILE: REASON` parts joined by `": "` (`/proc/self/fd/3: invalid ELF
/// header`, `libfoo.so.1: cannot open shared object file: No such file or
/// directory`); every part that holds a `/` or `\\` is dropped, control
/// characters go, and at most `limit` characters are kept, so no path can
/// remain whatever the loader wrote.
fn path_free_reason(message: &str, limit: usize) -> String {
    let parts: Vec<&str> = message
        .split(": ")
        .map(str::trim)
        .filter(|part| !part.is_empty() && !part.contains(['/', '\\']))
        .collect();
    let joined = parts.join(": ");
    let kept: String = joined
        .chars()
        .filter(|character| !character.is_control())
        .take(limit)
        .collect();
    kept.trim().to_owned()
}

pub fn resolve_export(image: &Image, name: &CStr) -> Option<NonNull<c_void>> {
    // SAFETY: reads the export's address as a plain pointer; nothing is
    // called here and the caller casts it to the listed signature.
    let symbol = unsafe { image.get::<*mut c_void>(name.to_bytes_with_nul()) }.ok()?;
    NonNull::new(*symbol)
}

#[cfg(test)]
mod tests {
    use super::path_free_reason;

    #[test]
    fn the_loader_s_reason_keeps_no_path() {
        let cases = [
            ("/proc/self/fd/3: invalid ELF header", "invalid ELF header"),
            (
                "/proc/self/fd/3: wrong ELF class: ELFCLASS32",
                "wrong ELF class: ELFCLASS32",
            ),
            (
                "libfoo.so.1: cannot open shared object file: No such file or directory",
                "libfoo.so.1: cannot open shared object file: No such file or directory",
            ),
            (
                "/opt/x/libfoo.so.1: cannot open shared object file: No such file or directory",
                "cannot open shared object file: No such file or directory",
            ),
            (
                "/a/b: c\\d: undefined symbol: cuX\n",
                "undefined symbol: cuX",
            ),
            ("/only/a/path", ""),
        ];
        for (message, reason) in cases {
            assert_eq!(path_free_reason(message, 512), reason, "{message}");
        }
        assert_eq!(path_free_reason("invalid ELF header", 7), "invalid");
    }
}
