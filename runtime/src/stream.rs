//! The context's dedicated stream.

use core::fmt;
use core::marker::PhantomData;
use core::ptr;
use std::rc::Rc;

use crate::current::{ContextChild, ContextShared};
use crate::driver_api::{CUstream, DriverApi, CU_STREAM_NON_BLOCKING};
use crate::error::CudaError;
use crate::operation;

/// `CU_STREAM_NON_BLOCKING`: the dedicated stream does not synchronize with
/// the legacy default stream, so other code using the default stream neither
/// waits for nor is waited on by this runtime's work; ordering is explicit
/// through [`Stream::synchronize`].
const STREAM_FLAGS: core::ffi::c_uint = CU_STREAM_NON_BLOCKING;

/// A stream created by [`Context::create_stream`](crate::Context::create_stream).
///
/// Holds its context, so the context is destroyed only after this stream.
/// Released exactly once: by [`Stream::close`] (which reports errors) or on
/// drop (which ignores them).
///
/// Deliberately neither `Send` nor `Sync`:
///
/// ```compile_fail,E0277
/// fn require_send<T: Send>() {}
/// require_send::<rextio_cuda_runtime::Stream>();
/// ```
///
/// ```compile_fail,E0277
/// fn require_sync<T: Sync>() {}
/// require_sync::<rextio_cuda_runtime::Stream>();
/// ```
pub struct Stream {
    child: ContextChild<CUstream>,
    _not_send_or_sync: PhantomData<*const ()>,
}

impl Stream {
    /// `cuStreamCreate` in `context`; see [`Context::create_stream`](crate::Context::create_stream).
    pub(crate) fn create(context: &Rc<ContextShared>) -> Result<Self, CudaError> {
        let create = |api: &DriverApi| {
            let mut stream: CUstream = ptr::null_mut();
            // SAFETY: the symbol has the listed signature and the image lives
            // while `api` does; `stream` is a valid place for one handle; the
            // context is current.
            let result = unsafe { (api.cuStreamCreate())(&mut stream, STREAM_FLAGS) };
            CudaError::check(operation::STREAM_CREATE, result).map(|()| stream)
        };
        Ok(Self {
            child: ContextChild::create(context, create, destroy)?,
            _not_send_or_sync: PhantomData,
        })
    }

    /// Waits for all work on the stream (`cuStreamSynchronize`).
    ///
    /// Errors: `cuCtxPushCurrent_v2`, `cuStreamSynchronize`,
    /// `cuCtxPopCurrent_v2`, `cuCtxPopCurrent_v2:wrong-context`. The stream
    /// stays usable and owned after an error.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.child.run(|api, stream| {
            // SAFETY: the symbol has the listed signature and the image lives
            // while the context does; `stream` is this live stream; the
            // context is current.
            let result = unsafe { (api.cuStreamSynchronize())(stream) };
            CudaError::check(operation::STREAM_SYNCHRONIZE, result)
        })
    }

    /// Destroys the stream now (`cuStreamDestroy_v2`).
    ///
    /// Errors: `cuCtxPushCurrent_v2` (the destroy is then not attempted and
    /// the handle is abandoned), `cuStreamDestroy_v2`, `cuCtxPopCurrent_v2`,
    /// `cuCtxPopCurrent_v2:wrong-context`. Never retried, never by drop.
    pub fn close(mut self) -> Result<(), CudaError> {
        self.child.release()
    }

    /// The raw driver handle; valid while this stream lives.
    pub fn raw_handle(&self) -> CUstream {
        self.child.handle()
    }
}

/// `cuStreamDestroy_v2`, the stream's [`Release`](crate::current::Release).
///
/// # Safety
///
/// As for [`Release`](crate::current::Release).
unsafe fn destroy(api: &DriverApi, stream: CUstream) -> Result<(), CudaError> {
    // SAFETY: the symbol has the listed signature and the image lives while
    // `api` does; the caller guarantees `stream` is live, in the current
    // context, and released nowhere else.
    let result = unsafe { (api.cuStreamDestroy_v2())(stream) };
    CudaError::check(operation::STREAM_DESTROY, result)
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("handle", &self.child.handle())
            .field("context", &self.child.context_handle())
            .finish()
    }
}
