//! `rextio-cuda-runtime`: the provider-owned CUDA runtime of
//! rextio-device-cuda: one raw context, its dedicated stream and device
//! allocations, with exact lifetimes, and bytes moved in and out of those
//! allocations on the stream.
//!
//! # No link to cuda
//!
//! This crate has no link directive, no build script and no dependencies. It
//! never names `libcuda`/`nvcuda`. Every driver function comes through
//! [`DriverApi::resolve`], which the host calls with the one reviewed driver
//! image it loaded and a resolver for that image's exports. [`DriverApi`]
//! then owns the image.
//!
//! # Lifetime rules
//!
//! - [`DriverApi`] owns the driver image; a [`Context`] holds an
//!   `Rc<DriverApi>`; every [`Stream`] and [`DeviceAllocation`] holds its
//!   context. So the image outlives the symbol table and every resource, by
//!   construction.
//! - [`Context::create`] creates the context and immediately pops it, so the
//!   caller's current-context stack is unchanged. Every later driver call on
//!   a child pushes the context, runs, and pops it, checking the popped handle
//!   is the context; the pop runs even when the call failed.
//! - Each resource is released exactly once: by its `close(self)` (which
//!   returns the error) or on drop (which ignores it). Failed releases are
//!   not retried.
//! - The context is destroyed after every child. [`Context::close`] with a
//!   live child fails with `cuCtxDestroy_v2:children-live` (result -1); the
//!   context is then destroyed when the last child is released.
//! - All three resources are deliberately neither `Send` nor `Sync`.
//!
//! # Errors
//!
//! [`CudaError`] carries a stable operation name (listed in [`operation`])
//! and the numeric `CUresult`, never driver text.
//!
//! ```no_run
//! # use std::rc::Rc;
//! # use rextio_cuda_runtime::{device_get, initialize, Context, CudaError, DriverApi};
//! fn smoke(api: Rc<DriverApi>) -> Result<(), CudaError> {
//!     initialize(&api)?;
//!     let device = device_get(&api, 0)?;
//!     let context = Context::create(api, device)?;
//!     let stream = context.create_stream()?;
//!     let mut allocation = context.allocate(1 << 20)?;
//!     stream.synchronize()?;
//!     stream.fill(&mut allocation, 0)?;
//!     stream.copy_to_device(&mut allocation, 0, b"round trip")?;
//!     let mut back = [0u8; 10];
//!     stream.copy_from_device(&allocation, 0, &mut back)?;
//!     assert_eq!(&back, b"round trip");
//!     allocation.close()?;
//!     stream.close()?;
//!     context.close()
//! }
//! ```
#![warn(missing_docs)]

mod context;
mod cuda_results;
mod current;
mod driver_api;
mod error;
mod memory;
pub mod operation;
mod stream;
mod table;

pub use context::Context;
pub use driver_api::*;
pub use error::CudaError;
pub use memory::DeviceAllocation;
pub use stream::Stream;
pub use table::{MissingSymbol, SymbolUnavailable};

/// Initializes the driver: `cuInit(0)`. Error: `cuInit`.
pub fn initialize(api: &DriverApi) -> Result<(), CudaError> {
    // SAFETY: the symbol has the listed signature and the image lives while
    // `api` does.
    let result = unsafe { (api.cuInit())(0) };
    CudaError::check(operation::INIT, result)
}

/// The device handle for `ordinal`: `cuDeviceGet`. Error: `cuDeviceGet`.
pub fn device_get(api: &DriverApi, ordinal: i32) -> Result<CUdevice, CudaError> {
    let mut device: CUdevice = 0;
    // SAFETY: the symbol has the listed signature and the image lives while
    // `api` does; `device` is a valid place for one handle.
    let result = unsafe { (api.cuDeviceGet())(&mut device, ordinal) };
    CudaError::check(operation::DEVICE_GET, result).map(|()| device)
}

#[cfg(test)]
mod tests;
