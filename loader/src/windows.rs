//! Windows x86_64: only `nvcuda.dll`, only from System32.

use core::ffi::{c_void, CStr};
use core::mem::ManuallyDrop;
use core::ptr::NonNull;
use std::path::Path;

use libloading::os::windows::{Library, LOAD_LIBRARY_SEARCH_SYSTEM32};

use crate::error::LoadError;

/// The loaded module, pinned: it is never freed while the process lives
/// (unloading the driver after `cuInit` is a known crash source), so its
/// drop never calls `FreeLibrary`.
pub struct Image(ManuallyDrop<Library>);

/// Only this file name, and only from System32.
const NVCUDA_DLL: &str = "nvcuda.dll";

/// System32's image; a driver root is a Linux option, refused here before
/// anything is loaded.
pub fn open(driver_root: Option<&Path>) -> Result<Image, LoadError> {
    if driver_root.is_some() {
        return Err(LoadError::DriverRootOnlyOnLinux);
    }
    // SAFETY: LOAD_LIBRARY_SEARCH_SYSTEM32 restricts the search to System32,
    // so only the installed display driver's nvcuda.dll runs its
    // initializers.
    unsafe { Library::load_with_flags(NVCUDA_DLL, LOAD_LIBRARY_SEARCH_SYSTEM32) }
        .map(|library| Image(ManuallyDrop::new(library)))
        .map_err(|_| LoadError::NvcudaNotFound)
}

pub fn resolve_export(image: &Image, name: &CStr) -> Option<NonNull<c_void>> {
    // SAFETY: reads the export's address as a plain pointer; nothing is
    // called here and the caller casts it to the listed signature.
    let symbol = unsafe { image.0.get::<*mut c_void>(name.to_bytes_with_nul()) }.ok()?;
    NonNull::new(*symbol)
}
