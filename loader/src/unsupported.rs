//! Every other target: no reviewed driver location, so nothing is loaded.

use core::ffi::{c_void, CStr};
use core::ptr::NonNull;
use std::path::Path;

use crate::error::LoadError;

/// No image can exist on an unsupported target.
pub enum Image {}

pub fn open(_driver_root: Option<&Path>) -> Result<Image, LoadError> {
    Err(LoadError::UnsupportedTarget)
}

pub fn resolve_export(image: &Image, _name: &CStr) -> Option<NonNull<c_void>> {
    match *image {}
}
