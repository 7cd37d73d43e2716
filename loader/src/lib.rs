//! `rextio-cuda-loader`: the reviewed CUDA driver loader of
//! rextio-device-cuda (docs/interfaces.md, The loader seam), shipped beside the
//! runtime crate so a host never writes its own.
//!
//! [`load_reviewed`] opens the one reviewed driver image and resolves it
//! into the runtime's [`DriverApi`], which owns the image: the image then
//! outlives the table and every context, stream and allocation made from it,
//! by construction. The image is never unloaded while the process lives
//! (unloading libcuda after `cuInit` is a known crash source).
//!
//! No PATH, `LD_LIBRARY_PATH`, registry or environment discovery: Linux tries
//! only the reviewed candidates of [`reviewed`] (or only `DIR/libcuda.so.1`
//! for an explicit driver root), Windows only System32's `nvcuda.dll`, and
//! every other target is unsupported. Nothing here links to `cuda`/`nvcuda`.
//!
//! ```no_run
//! use rextio_cuda_runtime::{device_get, initialize, Context};
//!
//! let api = match rextio_cuda_loader::load_reviewed(None) {
//!     Ok(api) => api,
//!     Err(error) => {
//!         // One stable code for a record; the text (with paths) for a person.
//!         eprintln!("{error}");
//!         std::process::exit(1);
//!     }
//! };
//! initialize(&api)?;
//! let context = Context::create(api.clone(), device_get(&api, 0)?)?;
//! context.close()?;
//! # Ok::<(), rextio_cuda_runtime::CudaError>(())
//! ```
//!
//! [`LoadError`] and the runtime's `CudaError` print their `Display` text as
//! `Debug` too, so a host's `fn main() -> Result<(), Box<dyn Error>>` that
//! uses `?` on both reports the reason code (or the operation), the result
//! and where the loader looked.
#![warn(missing_docs)]

mod error;
/// Written by `cargo xtask generate` from the provider spec; never edited by hand.
mod generated;
mod rejection;
#[cfg(target_os = "linux")]
pub mod reviewed;

#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#[path = "linux.rs"]
mod platform;
#[cfg(all(target_os = "windows", target_arch = "x86_64"))]
#[path = "windows.rs"]
mod platform;
#[cfg(not(any(
    all(
        target_os = "linux",
        target_env = "gnu",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ),
    all(target_os = "windows", target_arch = "x86_64")
)))]
#[path = "unsupported.rs"]
mod platform;

use core::ffi::{c_void, CStr};
use core::ptr::NonNull;
use std::path::Path;
use std::rc::Rc;

use rextio_cuda_runtime::DriverApi;

pub use error::{reason_codes, LoadError, Refusal, RefusalCause};
pub use generated::rules;
pub use rejection::Rejection;

/// Whether this build target has a reviewed driver location: Linux x86_64
/// and AArch64 (glibc), and Windows x86_64.
pub const fn target_is_supported() -> bool {
    cfg!(any(
        all(
            target_os = "linux",
            target_env = "gnu",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ),
        // Any Windows toolchain: msvc is what users build; the gnu build is
        // the one Wine runs in `cargo xtask test`, and the loader is the same.
        all(target_os = "windows", target_arch = "x86_64")
    ))
}

/// The reviewed driver image, open and never unloaded. Resolve a symbol
/// table from it with [`DriverImage::resolve_export`] (the table takes the
/// image and so keeps it), or take the runtime's with
/// [`DriverImage::into_driver_api`].
pub struct DriverImage {
    image: platform::Image,
}

impl DriverImage {
    /// The address of the export `name` of this image, or `None`. Reading
    /// an address is safe; calling it is the caller's `unsafe`, with the
    /// export's own signature.
    pub fn resolve_export(&self, name: &CStr) -> Option<NonNull<c_void>> {
        platform::resolve_export(&self.image, name)
    }

    /// The runtime's full symbol table, owning this image.
    ///
    /// # Errors
    ///
    /// [`LoadError::SymbolMissing`] for the first required export the image
    /// lacks (the image was loaded; its initializers ran).
    pub fn into_driver_api(self) -> Result<Rc<DriverApi>, LoadError> {
        // SAFETY: `resolve_export` returns the address of the named export of
        // this image or None. The image is the reviewed CUDA driver, whose
        // exports have exactly the signatures the generated table lists, and
        // the table takes ownership of the image so the addresses stay valid.
        let api = unsafe { DriverApi::resolve(self, Self::resolve_export) }?;
        Ok(Rc::new(api))
    }
}

impl core::fmt::Debug for DriverImage {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        formatter.write_str("DriverImage")
    }
}

/// Opens the reviewed driver image and resolves the runtime's symbol table,
/// which owns the image.
///
/// `driver_root`: `None` searches the reviewed candidates of this target
/// (the spec's `loader`); `Some(DIR)` tries only `DIR/libcuda.so.1` (Linux),
/// with every check applied from `/` down. DIR must be absolute; it is
/// canonicalized first (it is often reached through links) and the
/// canonical DIR counts as a reviewed root for this call.
///
/// # Errors
///
/// A [`LoadError`]: its [`reason_code`](LoadError::reason_code) is one of
/// [`reason_codes`], and for a driver image it found and refused, it names
/// the rule that refused it.
pub fn load_reviewed(driver_root: Option<&Path>) -> Result<Rc<DriverApi>, LoadError> {
    open_reviewed(driver_root)?.into_driver_api()
}

/// Opens the reviewed driver image, as [`load_reviewed`] does, without
/// resolving a table: for a host that resolves a table of its own.
///
/// # Errors
///
/// As [`load_reviewed`], except [`LoadError::SymbolMissing`].
pub fn open_reviewed(driver_root: Option<&Path>) -> Result<DriverImage, LoadError> {
    if let Some(root) = driver_root {
        if !root.is_absolute() {
            return Err(LoadError::DriverRootNotAbsolute);
        }
    }
    let image = platform::open(driver_root)?;
    Ok(DriverImage { image })
}

/// As [`open_reviewed`], searching `search` instead of the reviewed
/// locations (every rule is the same): for tests on a private tree.
///
/// # Errors
///
/// As [`open_reviewed`].
#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub fn open_reviewed_in(search: &reviewed::Search) -> Result<DriverImage, LoadError> {
    let image = platform::open_from(search)?;
    Ok(DriverImage { image })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_driver_root_is_refused_before_anything_is_looked_at() {
        for relative in ["usr/local/cuda/compat", "./compat", "", "~/compat"] {
            let error = open_reviewed(Some(Path::new(relative))).unwrap_err();
            assert_eq!(error, LoadError::DriverRootNotAbsolute, "{relative:?}");
            assert_eq!(error.reason_code(), "DRIVER_ROOT_NOT_ABSOLUTE");
            assert!(!error.driver_loaded());
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_driver_root_that_does_not_exist_has_no_driver() {
        let missing = Path::new("/nonexistent/rextio-loader-test/driver-root");
        let error = load_reviewed(Some(missing)).unwrap_err();
        let expected = if target_is_supported() {
            LoadError::DriverRootNotFound {
                driver_root: missing.to_path_buf(),
            }
        } else {
            LoadError::UnsupportedTarget
        };
        assert_eq!(error, expected);
    }

    #[test]
    fn every_error_has_its_contract_code_and_says_so_first() {
        let cases = [
            (LoadError::DriverRootNotAbsolute, "DRIVER_ROOT_NOT_ABSOLUTE"),
            (LoadError::DriverRootOnlyOnLinux, "UNSUPPORTED_TARGET"),
            (
                LoadError::DriverNotFound {
                    searched: vec!["/usr/lib64".into()],
                },
                "LIBCUDA_SO_NOT_FOUND",
            ),
            (
                LoadError::DriverRootNotFound {
                    driver_root: "/opt/driver".into(),
                },
                "LIBCUDA_SO_NOT_FOUND",
            ),
            (
                LoadError::DriverLoadFailed {
                    refusals: Vec::new(),
                },
                "LIBCUDA_SO_LOAD_FAILED",
            ),
            (LoadError::NvcudaNotFound, "NVCUDA_DLL_NOT_FOUND"),
            (LoadError::UnsupportedTarget, "UNSUPPORTED_TARGET"),
            (
                LoadError::SymbolMissing {
                    export_name: "cuInit",
                },
                "REQUIRED_SYMBOL_MISSING",
            ),
        ];
        for (error, code) in cases {
            assert_eq!(error.reason_code(), code);
            assert!(
                error.to_string().starts_with(&format!("{code}: ")),
                "{error}"
            );
            assert_eq!(error.driver_loaded(), code == "REQUIRED_SYMBOL_MISSING");
        }
        let missing = LoadError::SymbolMissing {
            export_name: "cuCtxCreate_v2",
        };
        assert_eq!(
            missing.to_string(),
            "REQUIRED_SYMBOL_MISSING: the CUDA driver image lacks the required export \
             `cuCtxCreate_v2`"
        );
    }

    /// `?` in `fn main() -> Result<(), Box<dyn Error>>` prints `Debug`: the
    /// code, the sentence and where the loader looked, as `Display` does.
    #[test]
    fn debug_under_question_mark_reads_like_display() {
        fn host(error: LoadError) -> Result<(), Box<dyn std::error::Error>> {
            Err(error)?;
            Ok(())
        }
        let not_found = LoadError::DriverNotFound {
            searched: vec![
                "/usr/lib/wsl/lib".into(),
                "/usr/lib64".into(),
                "/usr/lib".into(),
            ],
        };
        assert_eq!(
            format!("{:?}", host(not_found.clone()).unwrap_err()),
            "LIBCUDA_SO_NOT_FOUND: no libcuda.so.1 in /usr/lib/wsl/lib, /usr/lib64, or /usr/lib"
        );
        assert_eq!(format!("{not_found:?}"), not_found.to_string());
        let root = LoadError::DriverRootNotFound {
            driver_root: "/opt/missing".into(),
        };
        assert_eq!(
            format!("{:?}", host(root).unwrap_err()),
            "LIBCUDA_SO_NOT_FOUND: the driver root /opt/missing does not exist or cannot be resolved"
        );
        let missing = LoadError::SymbolMissing {
            export_name: "cuInit",
        };
        assert_eq!(
            format!("{:?}", host(missing).unwrap_err()),
            "REQUIRED_SYMBOL_MISSING: the CUDA driver image lacks the required export `cuInit`"
        );
    }

    #[test]
    fn the_refusing_rule_is_named_for_each_image_found() {
        let error = LoadError::DriverLoadFailed {
            refusals: vec![
                Refusal {
                    candidate: "/usr/lib64/libcuda.so.1".into(),
                    cause: RefusalCause::Rule(Rejection::ImageHasOtherLinks),
                },
                Refusal {
                    candidate: "/usr/lib/libcuda.so.1".into(),
                    cause: RefusalCause::NotLoadable {
                        reason: String::from("wrong ELF class: ELFCLASS32"),
                    },
                },
            ],
        };
        assert_eq!(error.refusing_rules(), ["links"]);
        assert_eq!(error.loader_reason(), Some("wrong ELF class: ELFCLASS32"));
        let lines: Vec<String> = error.to_string().lines().map(str::to_owned).collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[1].starts_with("refused /usr/lib64/libcuda.so.1: rule `links`: "));
        assert_eq!(
            lines[2],
            "/usr/lib/libcuda.so.1 passed review, but the dynamic loader could not load it: \
             wrong ELF class: ELFCLASS32"
        );
    }
}
