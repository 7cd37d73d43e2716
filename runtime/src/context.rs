//! The owned raw CUDA context.

use core::fmt;
use core::marker::PhantomData;
use core::ptr;
use std::rc::Rc;

use crate::current::{self, ContextShared};
use crate::driver_api::{CUcontext, CUdevice, DriverApi, CU_CTX_SCHED_AUTO};
use crate::error::{CudaError, Refused};
use crate::memory::DeviceAllocation;
use crate::operation;
use crate::stream::Stream;

/// Flags for `cuCtxCreate_v2`: the driver defaults (automatic scheduling).
const CONTEXT_FLAGS: core::ffi::c_uint = CU_CTX_SCHED_AUTO;

/// A CUDA context owned by this runtime.
///
/// Created with `cuCtxCreate_v2(flags 0)` and immediately popped, so the
/// caller's current-context stack is as it was; every later call pushes it
/// around the driver call and pops it again. It is destroyed exactly once:
/// by [`Context::close`] when no child is alive, or otherwise when the last
/// of the context handle, its [`Stream`]s and its [`DeviceAllocation`]s goes.
///
/// Deliberately neither `Send` nor `Sync`:
///
/// ```compile_fail,E0277
/// fn require_send<T: Send>() {}
/// require_send::<rextio_cuda_runtime::Context>();
/// ```
///
/// ```compile_fail,E0277
/// fn require_sync<T: Sync>() {}
/// require_sync::<rextio_cuda_runtime::Context>();
/// ```
pub struct Context {
    shared: Rc<ContextShared>,
    _not_send_or_sync: PhantomData<*const ()>,
}

impl Context {
    /// Creates a context on `device` and restores the caller's
    /// current-context stack.
    ///
    /// Errors: `cuCtxCreate_v2` (nothing to undo); `cuCtxPopCurrent_v2` or
    /// `cuCtxPopCurrent_v2:wrong-context` after a successful create, in which
    /// case the new context is destroyed (result ignored) before returning.
    pub fn create(api: Rc<DriverApi>, device: CUdevice) -> Result<Self, CudaError> {
        let mut handle: CUcontext = ptr::null_mut();
        // SAFETY: the symbol has the listed signature and the image lives
        // while `api` does; `handle` is a valid place for one handle.
        let result = unsafe { (api.cuCtxCreate_v2())(&mut handle, CONTEXT_FLAGS, device) };
        CudaError::check(operation::CTX_CREATE, result)?;
        if let Err(error) = current::pop_expecting(&api, handle) {
            // SAFETY: as above; `handle` was just created and nothing else
            // holds it.
            let _ = unsafe { (api.cuCtxDestroy_v2())(handle) };
            return Err(error);
        }
        Ok(Self {
            shared: Rc::new(ContextShared::new(api, handle, device)),
            _not_send_or_sync: PhantomData,
        })
    }

    /// Creates this context's dedicated stream (`CU_STREAM_NON_BLOCKING`).
    ///
    /// Errors: `cuCtxPushCurrent_v2`, `cuStreamCreate`, `cuCtxPopCurrent_v2`,
    /// `cuCtxPopCurrent_v2:wrong-context` (the new stream is then destroyed
    /// best-effort).
    pub fn create_stream(&self) -> Result<Stream, CudaError> {
        Stream::create(&self.shared)
    }

    /// Allocates `byte_size` bytes of device memory in this context.
    ///
    /// Errors: `cuMemAlloc_v2:zero-bytes` for 0 (no driver call is made),
    /// `cuCtxPushCurrent_v2`, `cuMemAlloc_v2`, `cuCtxPopCurrent_v2`,
    /// `cuCtxPopCurrent_v2:wrong-context` (the new allocation is then freed
    /// best-effort).
    pub fn allocate(&self, byte_size: usize) -> Result<DeviceAllocation, CudaError> {
        DeviceAllocation::allocate(&self.shared, byte_size)
    }

    /// Destroys the context now (`cuCtxDestroy_v2`).
    ///
    /// With a live child this fails with `cuCtxDestroy_v2:children-live`
    /// (result -1) and makes no driver call; the context is then destroyed
    /// when its last child is released. A failed `cuCtxDestroy_v2` is not
    /// retried.
    pub fn close(self) -> Result<(), CudaError> {
        match Rc::try_unwrap(self.shared) {
            Ok(shared) => shared.destroy(),
            Err(shared_with_children) => {
                // This handle is one of the counted references.
                let children = Rc::strong_count(&shared_with_children) - 1;
                let refused = Refused::ChildrenLive { children };
                Err(CudaError::refused(
                    operation::CTX_DESTROY_CHILDREN_LIVE,
                    refused,
                ))
            }
        }
    }

    /// The raw driver handle; valid while this context (or a child) lives.
    pub fn raw_handle(&self) -> CUcontext {
        self.shared.handle()
    }

    /// The device the context was created on.
    pub fn device(&self) -> CUdevice {
        self.shared.device()
    }

    /// How many streams and allocations of this context are alive.
    pub fn live_children(&self) -> usize {
        Rc::strong_count(&self.shared) - 1
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("handle", &self.shared.handle())
            .field("device", &self.shared.device())
            .field("live_children", &self.live_children())
            .finish()
    }
}
