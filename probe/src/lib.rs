//! `rextio-cuda-probe`: the driver inventory probe
//! (`rextio-cuda-driver-probe`) and the runtime lifetime smoke
//! (`rextio-cuda-runtime-smoke`).
//!
//! Nothing here links to `cuda`/`nvcuda`: the reviewed loader
//! (`rextio-cuda-loader`, the crate shipped beside the runtime) opens the
//! driver image at run time from a reviewed location, and its symbols are
//! resolved into the generated tables, which own the image.

/// Written by `cargo xtask generate`; never edited by hand.
pub mod generated {
    pub mod inventory_api;
    pub mod spec;
}

pub mod containment;
pub mod inventory;
pub mod name;
pub mod report;
pub mod report_out;
pub mod smoke;
