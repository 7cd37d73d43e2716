//! The reviewed driver loader: opens the one reviewed driver image and
//! resolves it into a generated symbol table that owns the image, so the
//! image cannot be closed while the table (or anything made from it) lives.
//!
//! No PATH, `LD_LIBRARY_PATH`, registry or environment discovery: Linux tries
//! only the reviewed candidates of [`reviewed`], Windows only System32's
//! `nvcuda.dll`, and every other target is unsupported.

#[cfg(unix)]
pub mod reviewed;

use rextio_cuda_runtime::DriverApi;

use crate::generated::inventory_api::InventoryApi;
use crate::generated::spec::reason_codes;

/// Why no symbol table could be produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadError {
    /// No `libcuda.so.1` exists at any reviewed candidate path.
    DriverNotFound,
    /// Some candidate existed, but none passed review and opened.
    DriverLoadFailed,
    /// `nvcuda.dll` could not be loaded from System32.
    NvcudaNotFound,
    /// This target has no reviewed driver location.
    UnsupportedTarget,
    /// The image opened but lacks a required export.
    SymbolMissing { export_name: &'static str },
}

impl LoadError {
    /// The stable reason code of this failure.
    pub fn reason_code(self) -> &'static str {
        match self {
            Self::DriverNotFound => reason_codes::LIBCUDA_SO_NOT_FOUND,
            Self::DriverLoadFailed => reason_codes::LIBCUDA_SO_LOAD_FAILED,
            Self::NvcudaNotFound => reason_codes::NVCUDA_DLL_NOT_FOUND,
            Self::UnsupportedTarget => reason_codes::UNSUPPORTED_TARGET,
            Self::SymbolMissing { .. } => reason_codes::REQUIRED_SYMBOL_MISSING,
        }
    }

    /// Whether a driver image was opened before the failure.
    pub fn driver_loaded(self) -> bool {
        matches!(self, Self::SymbolMissing { .. })
    }
}

/// Whether this build target has a reviewed driver location.
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

/// Why each existing driver candidate of this target was or was not usable,
/// one line per candidate, for a person (stderr), never for a record: the
/// lines hold paths.
pub fn candidate_diagnostics() -> Vec<String> {
    platform::candidate_diagnostics()
}

/// Opens the reviewed driver image and resolves the probe's inventory table.
pub fn load_inventory_api() -> Result<InventoryApi, LoadError> {
    inventory_api_from(platform::open_driver_image()?)
}

/// Opens the reviewed driver image and resolves the runtime's full table.
pub fn load_driver_api() -> Result<DriverApi, LoadError> {
    driver_api_from(platform::open_driver_image()?)
}

/// As [`load_driver_api`], searching `search` instead of contract §6's
/// locations (the rules are the same): for tests on a private tree.
#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub fn load_driver_api_from(search: &reviewed::Search) -> Result<DriverApi, LoadError> {
    driver_api_from(platform::open_driver_image_from(search)?)
}

/// As [`load_inventory_api`], searching `search` (see [`load_driver_api_from`]).
#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub fn load_inventory_api_from(search: &reviewed::Search) -> Result<InventoryApi, LoadError> {
    inventory_api_from(platform::open_driver_image_from(search)?)
}

fn inventory_api_from(image: platform::DriverImage) -> Result<InventoryApi, LoadError> {
    // SAFETY: `resolve_export` returns the address of the named export of
    // this image or None. The image is the reviewed CUDA driver, whose
    // exports have exactly the signatures the generated table lists, and the
    // table takes ownership of the image so the addresses stay valid.
    unsafe { InventoryApi::resolve(image, platform::resolve_export) }.map_err(|missing| {
        LoadError::SymbolMissing {
            export_name: missing.export_name,
        }
    })
}

fn driver_api_from(image: platform::DriverImage) -> Result<DriverApi, LoadError> {
    // SAFETY: as in `inventory_api_from`: genuine exports of the reviewed
    // driver image, owned by the table for as long as it lives.
    unsafe { DriverApi::resolve(image, platform::resolve_export) }.map_err(|missing| {
        LoadError::SymbolMissing {
            export_name: missing.export_name,
        }
    })
}

#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod platform {
    use core::ffi::{c_void, CStr};
    use core::ptr::NonNull;

    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

    use super::reviewed::{self, ReviewedImage, Search, SearchFailure, Verdict};
    use super::LoadError;

    pub type DriverImage = Library;

    #[cfg(target_arch = "x86_64")]
    const CANDIDATE_DIRS: &[&str] = reviewed::LINUX_X86_64_CANDIDATE_DIRS;
    #[cfg(target_arch = "aarch64")]
    const CANDIDATE_DIRS: &[&str] = reviewed::LINUX_AARCH64_CANDIDATE_DIRS;

    pub fn open_driver_image() -> Result<DriverImage, LoadError> {
        open_driver_image_from(&Search::production(CANDIDATE_DIRS))
    }

    pub fn open_driver_image_from(search: &Search) -> Result<DriverImage, LoadError> {
        reviewed::open_first_accepted(
            &search.candidates,
            &search.roots,
            &search.floor,
            open_reviewed_image,
        )
        .map_err(|failure| match failure {
            SearchFailure::NoneExisted => LoadError::DriverNotFound,
            SearchFailure::NoneAcceptedAndOpened => LoadError::DriverLoadFailed,
        })
    }

    pub fn candidate_diagnostics() -> Vec<String> {
        let search = Search::production(CANDIDATE_DIRS);
        search
            .candidates
            .iter()
            .filter_map(|candidate| {
                let shown = candidate.display();
                match reviewed::review_candidate(candidate, &search.roots, &search.floor) {
                    Verdict::Absent => None,
                    Verdict::Rejected(rejection) => {
                        Some(format!("refused {shown}: {}", rejection.explanation()))
                    }
                    Verdict::Accepted(image) => Some(format!(
                        "{shown} passed review as {}; loading it may still fail",
                        image.path().display()
                    )),
                }
            })
            .collect()
    }

    /// Loads the reviewed file itself through its descriptor, never by a
    /// second lookup of its path, and never unloads it (`RTLD_NODELETE`:
    /// unloading libcuda after `cuInit` is a known crash source).
    fn open_reviewed_image(image: &ReviewedImage) -> Option<DriverImage> {
        // SAFETY: the descriptor is the regular file that passed review
        // (root-owned, one link, no group/other write bit, every directory
        // and link on its way root's, below a reviewed root), so its
        // initializers are the installed driver's. `/proc/self/fd/N` is an
        // absolute path, so dlopen performs no search.
        unsafe {
            Library::open(
                Some(image.descriptor_path()),
                RTLD_NOW | RTLD_LOCAL | libc::RTLD_NODELETE,
            )
        }
        .ok()
    }

    pub fn resolve_export(image: &DriverImage, name: &'static CStr) -> Option<NonNull<c_void>> {
        // SAFETY: reads the export's address as a plain pointer; nothing is
        // called here and the caller casts it to the listed signature.
        let symbol = unsafe { image.get::<*mut c_void>(name.to_bytes_with_nul()) }.ok()?;
        NonNull::new(*symbol)
    }
}

#[cfg(all(target_os = "windows", target_arch = "x86_64"))]
mod platform {
    use core::ffi::{c_void, CStr};
    use core::ptr::NonNull;

    use core::mem::ManuallyDrop;

    use libloading::os::windows::{Library, LOAD_LIBRARY_SEARCH_SYSTEM32};

    use super::LoadError;

    /// The loaded module, pinned: it is never freed while the process lives
    /// (unloading the driver after `cuInit` is a known crash source), so its
    /// drop never calls `FreeLibrary`.
    pub struct DriverImage(ManuallyDrop<Library>);

    /// Only this file name, and only from System32.
    const NVCUDA_DLL: &str = "nvcuda.dll";

    pub fn candidate_diagnostics() -> Vec<String> {
        vec![format!("only {NVCUDA_DLL} from System32 is ever loaded")]
    }

    pub fn open_driver_image() -> Result<DriverImage, LoadError> {
        // SAFETY: LOAD_LIBRARY_SEARCH_SYSTEM32 restricts the search to
        // System32, so only the installed display driver's nvcuda.dll runs
        // its initializers.
        unsafe { Library::load_with_flags(NVCUDA_DLL, LOAD_LIBRARY_SEARCH_SYSTEM32) }
            .map(|library| DriverImage(ManuallyDrop::new(library)))
            .map_err(|_| LoadError::NvcudaNotFound)
    }

    pub fn resolve_export(image: &DriverImage, name: &'static CStr) -> Option<NonNull<c_void>> {
        // SAFETY: reads the export's address as a plain pointer; nothing is
        // called here and the caller casts it to the listed signature.
        let symbol = unsafe { image.0.get::<*mut c_void>(name.to_bytes_with_nul()) }.ok()?;
        NonNull::new(*symbol)
    }
}

#[cfg(not(any(
    all(
        target_os = "linux",
        target_env = "gnu",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ),
    all(target_os = "windows", target_arch = "x86_64")
)))]
mod platform {
    use core::ffi::{c_void, CStr};
    use core::ptr::NonNull;

    use super::LoadError;

    /// No image can exist on an unsupported target.
    pub enum DriverImage {}

    pub fn candidate_diagnostics() -> Vec<String> {
        vec!["this target has no reviewed driver location".to_string()]
    }

    pub fn open_driver_image() -> Result<DriverImage, LoadError> {
        Err(LoadError::UnsupportedTarget)
    }

    pub fn resolve_export(image: &DriverImage, _name: &'static CStr) -> Option<NonNull<c_void>> {
        match *image {}
    }
}
